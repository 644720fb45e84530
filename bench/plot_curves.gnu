# Figures of bench/ps_fmnist.sh and bench/lsgd_fmnist.sh (gnuplot 5).
#   gnuplot -e "fig='lsgd'; data='.../curves.dat'; png='...'; tau='16'; np='8'" bench/plot_curves.gnu
#   gnuplot -e "fig='ps'; dir='bench/out/ps-fmnist'; ar='.../allreduce.dat'; png='...'" bench/plot_curves.gnu
#   gnuplot -e "fig='tf'; dir='bench/out/ps-fmnist'; png='...'" bench/plot_curves.gnu
# lsgd: curves.dat of lsgd_fmnist.sh, one block per mode (allreduce, easgd,
#   lsgd), columns mode K train_s eval_wall err_mean err_avgmodel ...
# ps: DIR/curve-<case>/supervisor.csv (accuracy,clock,loss,wall) of the
#   parameter-server runs and AR, a CSV "K,train_s,accuracy" of the allreduce runs.
# tf: DIR/tf-<variant>-w<W>/supervisor.csv for W = 1, 2, 3 and DIR/tf-final.csv.
set terminal pngcairo size 1200,480 font ",10"
set output png
set grid
set key box opaque
set datafile separator whitespace

if (fig eq 'lsgd') {
    set multiplot layout 1,2 title sprintf("Fashion-MNIST, mlp 784-100-10, %s ranks (2 cores, oversubscribed), tau = %s; each point a run of its own", np, tau)
    set xlabel "training time (s, to the end of the last step)"
    set ylabel "test error (%)"
    set key top right
    plot data index 0 using 3:(100*$5) with linespoints pt 7 lw 2 title "allreduce", \
         data index 1 using 3:(100*$5) with linespoints pt 5 lw 2 title sprintf("easgd (tau %s, beta 0.9)", tau), \
         data index 2 using 3:(100*$5) with linespoints pt 9 lw 2 title "lsgd (mean over ranks)", \
         data index 2 using 3:(100*$6) with linespoints pt 8 dt 2 lw 1 title "lsgd (averaged model)"
    set xlabel "epochs (steps per rank x ranks x 32 / 60000)"
    e(k) = k * np * 32 / 60000.0
    plot data index 0 using (e($2)):(100*$5) with linespoints pt 7 lw 2 title "allreduce", \
         data index 1 using (e($2)):(100*$5) with linespoints pt 5 lw 2 title "easgd", \
         data index 2 using (e($2)):(100*$5) with linespoints pt 9 lw 2 title "lsgd (mean over ranks)", \
         data index 2 using (e($2)):(100*$6) with linespoints pt 8 dt 2 lw 1 title "lsgd (averaged model)"
    unset multiplot
}

if (fig eq 'ps') {
    set multiplot layout 1,2 title "Fashion-MNIST, mlp 784-100-10, 8 ranks (2 cores, oversubscribed): parameter server (1 server + supervisor + 6 workers) and allreduce (8 ranks)"
    sup(c) = dir . '/curve-' . c . '/supervisor.csv'
    set xlabel "wall time (s)"
    set ylabel "test accuracy (%)"
    set key bottom right
    set yrange [60:*]
    set datafile separator ','
    plot sup('ps-async') using 4:(100*$1) every ::1 with linespoints pt 7 lw 2 title "ps-async", \
         sup('ps-async-topk') using 4:(100*$1) every ::1 with linespoints pt 5 lw 2 title "ps-async + top-k 1%", \
         sup('ps-async-adacomp') using 4:(100*$1) every ::1 with linespoints pt 13 lw 2 title "ps-async + AdaComp", \
         sup('ps-sync') using 4:(100*$1) every ::1 with linespoints pt 9 lw 2 title "ps-sync", \
         ar using 2:(100*$3) every ::1 with linespoints pt 11 lw 2 title "allreduce (8 ranks, a run per point, training time)"
    # samples consumed: a push is one batch of 32; a ps-sync clock is 6 worker
    # batches; an allreduce step 8 rank batches
    set xlabel "epochs (samples consumed / 60000)"
    plot sup('ps-async') using ($2*32/60000.0):(100*$1) every ::1 with linespoints pt 7 lw 2 title "ps-async", \
         sup('ps-async-topk') using ($2*32/60000.0):(100*$1) every ::1 with linespoints pt 5 lw 2 title "ps-async + top-k 1%", \
         sup('ps-async-adacomp') using ($2*32/60000.0):(100*$1) every ::1 with linespoints pt 13 lw 2 title "ps-async + AdaComp", \
         sup('ps-sync') using ($2*6*32/60000.0):(100*$1) every ::1 with linespoints pt 9 lw 2 title "ps-sync", \
         ar using ($1*8*32/60000.0):(100*$3) every ::1 with linespoints pt 11 lw 2 title "allreduce"
    unset multiplot
}

if (fig eq 'tf') {
    set multiplot layout 1,2 title "TensorFlow's example in dtrain: mlp 784-100-10 sigmoid, batch 100, SGD lr 0.001, 20 epochs, Fashion-MNIST, 1 server + 1..3 workers (ps-async)"
    sup(v, w) = sprintf('%s/tf-%s-w%d/supervisor.csv', dir, v, w)
    set datafile separator ','
    set ylabel "test accuracy (%)"
    set key bottom right
    set xlabel "server updates (pushes applied); supervisor every 5 s"
    plot for [w=1:3] sup('shard', w) using 2:(100*$1) every ::1 with lines lw 2 lc w title sprintf("%d worker(s), each on its shard", w), \
         for [w=1:3] sup('full', w) using 2:(100*$1) every ::1 with lines lw 2 dt 2 lc w title sprintf("%d worker(s), 60000 samples per worker-epoch", w)
    # DIR/tf-final.csv: W,shard,full,tf_blog (final accuracy, 0..1)
    set xlabel "workers"
    set xrange [0.5:3.5]
    set xtics 1
    set yrange [30:90]
    set key bottom right
    plot dir . '/tf-final.csv' using 1:(100*$2) every ::1 with linespoints pt 7 lw 2 lc 1 title "dtrain, each worker on its shard (12000 updates in all)", \
         '' using 1:(100*$3) every ::1 with linespoints pt 5 lw 2 dt 2 lc 2 title "dtrain, 60000 samples per worker-epoch (12000 x W updates)", \
         '' using 1:(100*$4) every ::1 with linespoints pt 4 lw 1 lc rgb "gray40" title "TensorFlow example, MNIST (blog: 0.42, 0.58, 0.65)"
    unset multiplot
}
