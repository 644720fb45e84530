# Time per iteration against ranks, one colour per mode; 1 Gbit/s links solid,
# unlimited links dashed (and 10 Gbit/s dotted, thin). Called by run.sh:
#   gnuplot -e "dir='bench/out/network'; out='bench/network/scaling.png'" bench/network/scaling.gp
# Data: dir/scaling-<bandwidth>.dat from analyze.py (one index block per mode).
if (!exists("dir")) dir = 'bench/out/network'
if (!exists("out")) out = 'bench/network/scaling.png'
set terminal pngcairo size 1000,620 font ",11"
set output out
modes = "allreduce sgp osgp dpsgd adpsgd"
have(bw) = system(sprintf("test -s '%s/scaling-%s.dat' && echo 1 || echo 0", dir, bw)) + 0
f(bw) = sprintf("%s/scaling-%s.dat", dir, bw)
set logscale x 2
set xtics ("2" 2, "4" 4, "8" 8)
set xrange [1.8:8.8]
set logscale y
set yrange [0.05:3]
set format y "%g"
set grid ytics mytics xtics lc rgb "#dddddd"
set xlabel "ranks (one emulated node each, 2 physical cores in all)"
set ylabel "time per iteration (s)"
set title "dtrain, mlp 10.5 M parameters (42 MB), batch 16 per rank, emulated switched cluster\n1 Gbit/s links solid, 10 Gbit/s dotted, unlimited dashed"
set key outside right top
set style line 1 lc rgb "#1f77b4" pt 7
set style line 2 lc rgb "#d62728" pt 5
set style line 3 lc rgb "#ff7f0e" pt 9
set style line 4 lc rgb "#2ca02c" pt 11
set style line 5 lc rgb "#9467bd" pt 13
# one plot clause per bandwidth that has data (a subset run may lack some)
cmd = ""
if (have("1gbit")) cmd = cmd . sprintf("for [i=1:5] '%s' index (i-1) using 1:2 with linespoints ls i dt 1 lw 2.5 ps 1.2 title word(modes,i).' 1 Gbit/s', ", f("1gbit"))
if (have("10gbit")) cmd = cmd . sprintf("for [i=1:5] '%s' index (i-1) using 1:2 with linespoints ls i dt 3 lw 1 ps 0.6 title word(modes,i).' 10 Gbit/s', ", f("10gbit"))
if (have("unlimited")) cmd = cmd . sprintf("for [i=1:5] '%s' index (i-1) using 1:2 with linespoints ls i dt 2 lw 2.5 ps 1.2 title word(modes,i).' unlimited', ", f("unlimited"))
if (strlen(cmd) == 0) print "scaling.gp: no data in ".dir; exit
eval("plot " . cmd[1:strlen(cmd) - 2])
