# dtrain figure template: test accuracy and training loss against wall time
# and epoch, one curve per run (mean over ranks) with the min..max band over
# ranks shaded.
#
# `dtrain-post plot RUN.h5 [RUN2.h5 ...] -o FIG.png` draws this figure with a
# built-in copy of the commands below; it does not read this file. To restyle
# the figure, edit a copy and either
#   - point dtrain-post at it:  DTRAIN_PLOT_GP=my.gp dtrain-post plot ... -o FIG.png
#     (dtrain-post prepends the definitions of dir, nruns and out), or
#   - keep the data and run gnuplot yourself:
#       dtrain-post plot a/run.h5 b/run.h5 -o fig.png --data plotdata
#       gnuplot -e "dir='plotdata'; nruns=2; out='fig.png'" my.gp
#
# Data files, written by dtrain-post into `dir`, one pair per run i = 1..nruns
# in command-line order; whitespace-separated, first line a header whose first
# word (double-quoted) is the curve title "<run directory> (<mode>)":
#   run<i>.train.dat  one line per logged training step:
#       1 wall time (s, mean over ranks)  2 epoch (fractional: interpolated
#       between the first logged steps of consecutive epochs)
#       3 training loss, mean over ranks  4 minimum  5 maximum
#   run<i>.eval.dat   one line per evaluation:
#       1 wall time (s, mean over ranks)  2 epoch
#       3 test accuracy, mean over ranks  4 minimum  5 maximum
#   A language model's record (run.h5 attribute sample_unit = tokens) has
#   its eval.dat go on with the validation loss (nats):
#       6 mean over ranks (header word: "<run directory> (<mode>) validation")
#       7 minimum  8 maximum
# Missing values are written as nan.
#
# When every run is a language model's, dtrain-post's built-in commands are
# those below with other words: 'next-token accuracy' for 'test accuracy',
# the y label 'next-token accuracy (validation)', 'training and validation
# loss' for 'training loss' with the y label 'training and validation loss
# (nats)', and the loss panels also draw the validation loss, e.g.
#     ..., for [i=1:nruns] evalf(i) using 1:6:7:8 with yerrorbars lc i pt 6 ps 0.9 \
#              title columnheader(6)

if (!exists("dir")) dir = '.'
if (!exists("nruns")) nruns = 1
if (!exists("out")) out = 'dtrain.png'

if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 1400,1000 noenhanced font ',10'
} else {
    set terminal png size 1400,1000 noenhanced truecolor
}
set output out
set datafile separator whitespace
set key autotitle columnheader bottom right
set grid
set style fill transparent solid 0.2 noborder
trainf(i) = sprintf('%s/run%d.train.dat', dir, i)
evalf(i) = sprintf('%s/run%d.eval.dat', dir, i)
set multiplot layout 2,2
set title 'test accuracy vs wall time'
set xlabel 'wall time (s)'
set ylabel 'test accuracy'
plot for [i=1:nruns] evalf(i) using 1:4:5 with filledcurves lc i notitle, \
     for [i=1:nruns] evalf(i) using 1:3 with linespoints lc i pt 7 ps 0.6 title columnheader(1)
set title 'test accuracy vs epoch'
set xlabel 'epoch'
plot for [i=1:nruns] evalf(i) using 2:4:5 with filledcurves lc i notitle, \
     for [i=1:nruns] evalf(i) using 2:3 with linespoints lc i pt 7 ps 0.6 title columnheader(1)
set key top right
set title 'training loss vs wall time'
set xlabel 'wall time (s)'
set ylabel 'training loss'
plot for [i=1:nruns] trainf(i) using 1:4:5 with filledcurves lc i notitle, \
     for [i=1:nruns] trainf(i) using 1:3 with lines lc i lw 1.5 title columnheader(1)
set title 'training loss vs epoch'
set xlabel 'epoch'
plot for [i=1:nruns] trainf(i) using 2:4:5 with filledcurves lc i notitle, \
     for [i=1:nruns] trainf(i) using 2:3 with lines lc i lw 1.5 title columnheader(1)
unset multiplot
set output
