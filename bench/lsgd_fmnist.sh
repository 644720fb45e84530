#!/bin/bash
# LSGD against EASGD and AllReduce at equal communication (bench/RESULTS.md §8): NP ranks
# (8), Fashion-MNIST, the 784-100-10 sigmoid mlp, 2 epochs, batch 32 per rank,
# lr 0.02 (x0.1 at epoch 1.5), momentum 0.9, seed 1. lsgd runs one group with
# tau_local = tau_global = TAU (only the global leader: one model broadcast per
# TAU local steps per rank), easgd one allreduce of the model every TAU steps
# (easgd.tau = TAU), allreduce one gradient allreduce per step.
#
# Every point of a curve is a run of its own stopped at run.max_steps = K,
# logged and evaluated once at K (written when lsgd ignored run.eval_every;
# now one lsgd run with run.eval_every gives the curve too, as in
# RESULTS §8b). The three modes are
# measured the same way, so no curve carries the cost of intermediate
# evaluations; a synchronous run stopped at K is the prefix of the full run
# (the learning-rate schedule depends on the epoch, not on max_steps).
#
# Writes bench/out/lsgd-fmnist/<mode>-s<K>/{train,eval,...}.csv, <name>.log,
# runs.tsv (name, UTC end, exit status, seconds, "1-min load/CPU busy %" before, command),
# curves.dat, a summary on stdout and bench/lsgd-fmnist.png. The allreduce
# points go to bench/out/allreduce-mlp/ (shared with bench/ps_fmnist.sh).
# A case whose CSVs are already there is kept unless FORCE=1.
#
# Usage: nice -n 19 bench/lsgd_fmnist.sh [BUILD_DIR]   (default: the source tree)
# Environment: NP (8), TAU (16), POINTS (steps per rank at which the curves are
# sampled; default 58 117 234 351 468, i.e. epochs 0.25 ... 2 at 8 ranks),
# RUNS (run records, default /tmp/dtrain-bench-runs), LIMIT (seconds per run
# before it is killed as hung, 480), IDLE_MAX (start a run once the machine is at
# most this % busy, 50), IDLE_WAIT (but wait at most this many seconds, 300), FORCE.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src}
np=${NP:-8}
tau=${TAU:-16}
points=${POINTS:-58 117 234 351 468}
runs=${RUNS:-/tmp/dtrain-bench-runs}
limit=${LIMIT:-480}
out=$here/out/lsgd-fmnist
ar_out=$here/out/allreduce-mlp
mkdir -p "$out" "$ar_out" "$runs"
# shellcheck source=bench/runs.sh
. "$here/runs.sh"

common=(model.name=mlp model.hidden=100 model.activation=sigmoid run.seed=1 run.epochs=2
        optim.lr=0.02 optim.batch_size=32 optim.momentum=0.9 optim.decay_epochs=1.5)

for k in $points; do
    one=(run.max_steps="$k" run.log_every="$k" run.eval_every="$k")
    run_case "$ar_out" "allreduce-s$k" "$np" allreduce-fmnist.ini "${common[@]}" "${one[@]}"
    run_case "$out" "easgd-s$k" "$np" easgd-fmnist.ini "${common[@]}" "${one[@]}" \
        easgd.tau="$tau" easgd.beta=0.9 easgd.center=replicated
    run_case "$out" "lsgd-s$k" "$np" lsgd-fmnist.ini "${common[@]}" "${one[@]}" \
        lsgd.group_size="$np" lsgd.tau_local="$tau" lsgd.tau_global="$tau"
done

# One line per point: mode, K, training time (s: the latest wall of the ranks'
# last /train rows, taken before the record is written; start-up, the final
# write of the record and the evaluation excluded), wall of the evaluation (rank
# 0), test error of the ranks' models (mean) and of their average, local steps
# per rank (min, max), bytes sent per rank per local step as the record counts
# them (mean over ranks).
/usr/bin/python3 - "$out" "$ar_out" "$points" >"$out/curves.dat" <<'PY'
import csv, os, sys
out, ar_out, points = sys.argv[1], sys.argv[2], sys.argv[3].split()
print("# mode K train_s eval_wall err_mean err_avgmodel steps_min steps_max bytes_per_rank_step")
for mode in ("allreduce", "easgd", "lsgd"):
    for k in points:
        d = os.path.join(ar_out if mode == "allreduce" else out, "%s-s%s" % (mode, k))
        try:
            ev = list(csv.DictReader(open(os.path.join(d, "eval.csv"))))
            tr = list(csv.DictReader(open(os.path.join(d, "train.csv"))))
        except OSError:
            continue
        r0 = [r for r in ev if r["rank"] == "0"][-1]
        steps = [int(r["step"]) for r in ev]
        last = {}
        for r in tr:
            last[r["rank"]] = r
        bps = sum(int(r["bytes_sent"]) / max(1, int(r["step"])) for r in last.values()) / len(last)
        train = max(float(r["wall"]) for r in last.values())
        print("%s %s %.2f %.2f %.4f %.4f %d %d %.0f" % (mode, k, train, float(r0["wall"]),
              1 - float(r0["accuracy_mean"]), 1 - float(r0["avg_model_accuracy"]),
              min(steps), max(steps), bps))
    print("\n")
PY
column -t "$out/curves.dat" | grep -v '^$'
gnuplot -e "fig='lsgd'; data='$out/curves.dat'; png='$here/lsgd-fmnist.png'; tau='$tau'; np='$np'" \
    "$here/plot_curves.gnu"
echo "figure: $here/lsgd-fmnist.png; failed runs: $failed"
exit $((failed > 0))
