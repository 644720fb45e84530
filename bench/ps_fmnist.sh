#!/bin/bash
# Parameter server on Fashion-MNIST (bench/RESULTS.md §7). Model: the 784-100-10 sigmoid
# mlp of inputs/ps-tf-mlp.ini; optimizer of inputs/ps-fmnist.ini (batch 32 per
# worker, lr 0.02, x0.1 at epoch 1.5, momentum 0.9), 2 epochs, seed 1. Parts
# (PARTS, default all):
#   curves     8 ranks: ps-async, ps-async + top-k 1%, ps-async + AdaComp
#              (adacomp-chen, bins 500), ps-sync with 1 server +
#              supervisor (ps.eval_seconds = 3) + 6 workers, the accuracy curve
#              being the supervisor's; allreduce on 8 ranks, one run per point
#              stopped at run.max_steps = K (the points of bench/lsgd_fmnist.sh,
#              shared in bench/out/allreduce-mlp/)  -> bench/ps-fmnist.png
#   bytes      8 ranks, 1 server + 7 workers (no supervisor), the same PS
#              variants: final accuracy and bytes per step, dense and compressed
#   check      6 ranks, 2 servers + supervisor + 3 workers (ps-async), against
#              allreduce on 3 and on 6 ranks, 2 epochs: the 2-point check
#   slow       4 ranks, 1 server + 3 workers, 400 steps per worker (ps-async:
#              1200 pushes in all), worker rank 1 sleeping
#              SLOW_MS (100) ms per step or not: ps-async, ps-sync with a backup
#              (R = 2), ps-sync with R = all; the workers' steps per second
#   tf         inputs/ps-tf-mlp.ini (batch 100, SGD lr 0.001, 20 epochs), 1 server
#              + supervisor + W = 1, 2, 3 workers, each worker on its shard
#              ("shard") and each worker taking 60000 samples per epoch, as every
#              worker of TensorFlow's example reads the whole training set
#              ("full")                            -> bench/tf-mlp.png
# Writes bench/out/ps-fmnist/<case>/*.csv (dtrain-post csv, plus final_bytes.csv),
# <case>.log, runs.tsv (case, UTC end, exit status, seconds, "1-min load/CPU
# busy %" before, command), summary.txt, allreduce.csv and tf-final.csv.
# A case whose CSVs are already there is kept unless FORCE=1.
#
# Usage: nice -n 19 bench/ps_fmnist.sh [BUILD_DIR]   (default: the source tree)
# Environment: PARTS, VARIANTS (the parameter-server variants of curves and
# bytes, default ps-async ps-async-topk ps-async-adacomp ps-sync), SLOW_MS,
# POINTS (allreduce curve, steps per rank; default 58 117 234 351 468), RUNS
# (run records, /tmp/dtrain-bench-runs), LIMIT
# (seconds per run before it is killed as hung, 480), IDLE_MAX (start a run once
# the machine is at most this % busy, 50), IDLE_WAIT (but wait at most this many
# seconds, 300), FORCE.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src}
parts=${PARTS:-curves bytes check tf}
points=${POINTS:-58 117 234 351 468}
runs=${RUNS:-/tmp/dtrain-bench-runs}
limit=${LIMIT:-480}
out=$here/out/ps-fmnist
ar_out=$here/out/allreduce-mlp
mkdir -p "$out" "$ar_out" "$runs"
# shellcheck source=bench/runs.sh
. "$here/runs.sh"

mlp=(model.name=mlp model.hidden=100 model.activation=sigmoid)
common=("${mlp[@]}" run.seed=1 run.epochs=2
        optim.lr=0.02 optim.batch_size=32 optim.momentum=0.9 optim.decay_epochs=1.5)

# final_bytes RUN_DIR KEEP: every rank's cumulative bytes_sent at its end, from
# the last /train row of run.h5 (dtrain-post csv drops the rows padded with
# step -1; records written before every role got a row at its last step have
# no other row for a server whose last clock is off a multiple of
# run.log_every)
final_bytes() {
    [ -s "$1/run.h5" ] && command -v h5dump >/dev/null || return 0
    h5dump -d /train/bytes_sent -y -w 0 "$1/run.h5" | /usr/bin/python3 -c '
import re, sys
text = sys.stdin.read()
dims = re.search(r"DATASPACE\s+SIMPLE\s*{\s*\(\s*(\d+),\s*(\d+)\s*\)", text)
ranks = int(dims.group(2))
body = text[text.index("DATA {") + 6:]
vals = re.findall(r"-?\d+", body[:body.index("}")])
print("rank,bytes_sent")
for r, v in enumerate(vals[-ranks:]):
    print("%d,%s" % (r, v))' >"$2/final_bytes.csv"
}

# after each run (and for a kept one without them): the final bytes
case_done() { [ -s "$2/final_bytes.csv" ] || final_bytes "$1" "$2"; }

ps_modes() { # ps_modes PREFIX NP KEY=VALUE...: the parameter-server variants (VARIANTS)
    local pre=$1 n=$2 v
    shift 2
    for v in ${VARIANTS:-ps-async ps-async-topk ps-async-adacomp ps-sync}; do
        local extra
        case $v in
        ps-async) extra=(algorithm.mode=ps-async) ;;
        ps-async-topk) extra=(algorithm.mode=ps-async ps.compress=topk ps.ratio=0.01) ;;
        ps-async-adacomp) extra=(algorithm.mode=ps-async ps.compress=adacomp-chen) ;;
        ps-sync) extra=(algorithm.mode=ps-sync) ;;
        ps-sync-backup) extra=(algorithm.mode=ps-sync ps.replicas=2) ;; # of 3 workers
        *) echo "unknown variant $v" >&2; exit 2 ;;
        esac
        run_case "$out" "$pre-$v" "$n" ps-fmnist.ini "${common[@]}" "${extra[@]}" "$@"
    done
}

for part in $parts; do
    case $part in
    curves)
        ps_modes curve 8 ps.servers=1 ps.supervisor=true ps.eval_seconds=3 run.log_every=50
        for k in $points; do # the same runs as bench/lsgd_fmnist.sh
            run_case "$ar_out" "allreduce-s$k" 8 allreduce-fmnist.ini "${common[@]}" \
                run.max_steps="$k" run.log_every="$k" run.eval_every="$k"
        done ;;
    bytes)
        ps_modes bytes 8 ps.servers=1 ps.supervisor=false run.log_every=50 ;;
    check)
        run_case "$out" check-ps 6 ps-fmnist.ini "${common[@]}" ps.servers=2 ps.supervisor=true \
            ps.eval_seconds=3
        run_case "$out" check-ar3 3 allreduce-fmnist.ini "${common[@]}" run.log_every=50
        run_case "$out" check-ar6 6 allreduce-fmnist.ini "${common[@]}" run.log_every=50 ;;
    slow)
        # 1 server + 3 workers, 400 steps; worker rank 1 sleeping SLOW_MS per step or not
        for d in 0 "${SLOW_MS:-100}"; do
            VARIANTS="ps-async ps-sync-backup ps-sync" ps_modes "slow-d$d" 4 ps.servers=1 \
                ps.supervisor=false run.max_steps=400 run.log_every=25 run.test_delay_rank=1 \
                run.test_delay_ms="$d"
        done ;;
    tf)
        for w in 1 2 3; do
            run_case "$out" "tf-shard-w$w" $((w + 2)) ps-tf-mlp.ini ps.supervisor=true \
                ps.eval_seconds=5
            run_case "$out" "tf-full-w$w" $((w + 2)) ps-tf-mlp.ini ps.supervisor=true \
                ps.eval_seconds=5 data.samples_per_epoch=60000
        done ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
    esac
done

# Per case: test accuracy of the final model (the servers' model for PS,
# evaluated by every rank at the end), the supervisor's last point, training
# time (latest wall of the workers' last /train rows), bytes per worker step
# sent by a worker (its pushes; allreduce does not count its bytes) and by the
# servers (fetch replies, all servers' bytes over all worker steps), worker
# steps min..max.
/usr/bin/python3 - "$out" "$ar_out" "$points" <<'PY' | tee "$out/summary.txt"
import csv, glob, os, sys
out, ar_out, points = sys.argv[1], sys.argv[2], sys.argv[3].split()
def rows(path):
    try:
        return list(csv.DictReader(open(path)))
    except OSError:
        return []
print("%-20s %8s %8s %8s %11s %11s %s" % ("case", "final %", "sup. %", "train s",
      "push B/st", "fetch B/st", "worker steps"))
for d in sorted(glob.glob(os.path.join(out, "*", "eval.csv"))):
    d = os.path.dirname(d)
    ev, tr, sup = rows(d + "/eval.csv"), rows(d + "/train.csv"), rows(d + "/supervisor.csv")
    fb = {r["rank"]: int(r["bytes_sent"]) for r in rows(d + "/final_bytes.csv")}
    r0 = [r for r in ev if r["rank"] == "0"][-1]
    last = {}
    for r in tr:
        last[r["rank"]] = r
    if not fb:  # every role's last row is in train.csv (h5dump absent: hdf5-tools)
        fb = {k: int(r["bytes_sent"]) for k, r in last.items()}
    wk = {k: r for k, r in last.items() if int(r["images"]) > 0}
    steps = {r["rank"]: int(r["step"]) for r in ev if r["rank"] in wk}
    push = sum(fb.get(k, int(r["bytes_sent"])) / steps[k] for k, r in wk.items()) / len(wk)
    fetch = sum(v for k, v in fb.items() if k not in wk) / sum(steps.values())
    train = max(float(r["wall"]) for r in wk.values())
    is_ps = len(wk) < len(fb)
    print("%-20s %8.2f %8s %8.1f %11s %11s %d..%d" % (os.path.basename(d),
          100 * float(r0["accuracy_mean"]),
          "%.2f" % (100 * float(sup[-1]["accuracy"])) if sup else "-", train,
          "%.0f" % push if is_ps else "-", "%.0f" % fetch if is_ps else "-",
          min(steps.values()), max(steps.values())))
# the slow-worker series: steps per second of the fast workers (ranks 2, 3)
# and of the slow one (rank 1), from their last /train rows
for v in ("ps-async", "ps-sync-backup", "ps-sync"):
    cases = [p for p in glob.glob(os.path.join(out, "slow-d*-" + v)) if os.path.isdir(p)]
    for d in sorted(cases, key=lambda p: int(os.path.basename(p).split("-")[1][1:])):
        last = {}
        for r in rows(d + "/train.csv"):
            last[r["rank"]] = r
        if not last:
            continue
        rate = {k: int(r["step"]) / float(r["wall"]) for k, r in last.items() if k in ("1", "2", "3")}
        print("%-24s fast workers %6.1f %6.1f steps/s, slow worker %6.1f steps/s" % (
            os.path.basename(d), rate["2"], rate["3"], rate["1"]))
# the TensorFlow example's final accuracies against the worker count, with the
# blog's MNIST numbers (1/2/3 workers: 0.42, 0.58, 0.65) for the trend
blog = {1: 0.42, 2: 0.58, 3: 0.65}
with open(os.path.join(out, "tf-final.csv"), "w") as f:
    f.write("W,shard,full,tf_blog\n")
    for w in (1, 2, 3):
        acc = []
        for v in ("shard", "full"):
            ev = rows(os.path.join(out, "tf-%s-w%d" % (v, w), "eval.csv"))
            acc.append(ev[-1]["accuracy_mean"] if ev else "NaN")
        f.write("%d,%s,%s,%s\n" % (w, acc[0], acc[1], blog[w]))
# the allreduce points for the figure: training time (the latest wall of the
# ranks' last /train rows, before the record is written and the model evaluated)
with open(os.path.join(out, "allreduce.csv"), "w") as f:
    f.write("K,train_s,accuracy\n")
    for k in points:
        d = os.path.join(ar_out, "allreduce-s%s" % k)
        ev, tr = rows(d + "/eval.csv"), rows(d + "/train.csv")
        if ev and tr:
            r0 = [r for r in ev if r["rank"] == "0"][-1]
            f.write("%s,%.2f,%s\n" % (k, max(float(r["wall"]) for r in tr), r0["accuracy_mean"]))
PY
case " $parts " in *" curves "*)
    gnuplot -e "fig='ps'; dir='$out'; ar='$out/allreduce.csv'; png='$here/ps-fmnist.png'" \
        "$here/plot_curves.gnu" ;;
esac
case " $parts " in *" tf "*)
    gnuplot -e "fig='tf'; dir='$out'; png='$here/tf-mlp.png'" "$here/plot_curves.gnu" ;;
esac
echo "failed runs: $failed"
exit $((failed > 0))
