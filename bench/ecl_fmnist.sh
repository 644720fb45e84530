#!/bin/bash
# The ECL-ISVR experiment (doc/references.md: Edge-consensus learning) in
# miniature on Fashion-MNIST:
# PDMM-ISVR, ADMM-ISVR and D-SGD on 8 ranks (multiplex ring, swap cycle K = 8,
# asynchronous swaps, 8 of 10 classes per rank, batch 100), against the
# single-node reference (algorithm.mode = local, 1 rank, the whole training set
# iid), for two models:
#   logreg:  the decks inputs/{pdmm-isvr,admm-isvr,dsgd-ecl}-fmnist.ini as they
#            are (10 epochs of 10,000 samples per rank, mu 0.002, lambda 0.01;
#            D-SGD: weight decay 0), evaluated on the whole test set.
#   resnet:  resnet20_gn (GroupNorm), the same decks with RS_SAMPLES samples per
#            rank per epoch (1000), RS_EPOCHS epochs (5), lr RS_LR (0.02) for all
#            four modes, evaluated on the first RS_TEST test images (1000).
# The reference is the pdmm-isvr deck with algorithm.mode=local
# data.partition=iid: the same batch, lr and L2 term (optim.weight_decay =
# lambda, momentum 0); one of its epochs is samples_per_epoch samples, the
# number one ECL rank sees per epoch. Every run evaluates at each epoch end
# (run.eval_every = 0).
#
# Writes bench/out/ecl-fmnist/<model>-<mode>/{train,eval,ecl}.csv, <name>.log,
# runs.tsv (name, UTC end, exit status, seconds, "1-min load/CPU busy %" before,
# command), curves.dat, a summary on stdout, bench/ecl-fmnist.csv (one row per
# model, mode and epoch: test accuracy of the ranks' models (mean, std) and of
# their average, test losses, consensus distance, the /ecl counters summed over
# the ranks (cumulative), the mean over ranks of the epoch's dual RMS, run wall
# time) and bench/ecl-fmnist.png.
# A case whose CSVs are already there is kept unless FORCE=1.
#
# Usage: nice -n 19 bench/ecl_fmnist.sh [BUILD_DIR]   (default: the source tree)
# Environment: MODELS ("logreg resnet"), RS_SAMPLES (1000), RS_EPOCHS (5),
# RS_LR (0.02), RS_TEST (1000), RUNS (run records, default
# /tmp/dtrain-bench-runs), LIMIT (seconds per run before it is killed as hung,
# 900), FORCE.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src}
models=${MODELS:-logreg resnet}
rs_samples=${RS_SAMPLES:-1000}
rs_epochs=${RS_EPOCHS:-5}
rs_lr=${RS_LR:-0.02}
rs_test=${RS_TEST:-1000}
runs=${RUNS:-/tmp/dtrain-bench-runs}
limit=${LIMIT:-900}
out=$here/out/ecl-fmnist
mkdir -p "$out" "$runs"
# Accuracy against epochs is what is measured, so runs do not wait for an idle
# machine (IDLE_WAIT 0); the load before each run is recorded.
IDLE_WAIT=${IDLE_WAIT:-0}
run_prefix=ecl-
# shellcheck source=bench/runs.sh
. "$here/runs.sh"

# the reference: the pdmm-isvr deck on one rank with all the data, iid
local_keys=(algorithm.mode=local data.partition=iid)

for model in $models; do
    case $model in
    logreg) extra=() ;;
    resnet) extra=(model.name=resnet20_gn data.samples_per_epoch="$rs_samples"
                   run.epochs="$rs_epochs" optim.lr="$rs_lr" data.test_limit="$rs_test"
                   run.log_every=5) ;;
    *) echo "unknown model $model (logreg, resnet)"; exit 2 ;;
    esac
    run_case "$out" "$model-local" 1 pdmm-isvr-fmnist.ini "${local_keys[@]}" "${extra[@]}"
    for mode in pdmm-isvr admm-isvr dsgd-ecl; do
        run_case "$out" "$model-$mode" 8 "$mode-fmnist.ini" "${extra[@]}"
    done
done

# bench/ecl-fmnist.csv and curves.dat (one block per model and mode, in the
# order local, pdmm-isvr, admm-isvr, dsgd-ecl; an empty block for a missing run
# keeps gnuplot's indices): epoch acc_avg_model acc_mean consensus.
/usr/bin/python3 - "$out" "$here/ecl-fmnist.csv" <<'PY'
import csv, os, sys
out, dest = sys.argv[1], sys.argv[2]
modes = ("local", "pdmm-isvr", "admm-isvr", "dsgd-ecl")
wall = {}
if os.path.exists(os.path.join(out, "runs.tsv")):
    for line in open(os.path.join(out, "runs.tsv")):
        f = line.rstrip("\n").split("\t")
        if f[2] == "0":
            wall[f[0]] = f[3]           # the latest successful run of a case
cols = ["model", "mode", "epoch", "step", "test_acc_mean", "test_acc_std", "test_acc_avg_model",
        "test_loss_mean", "test_loss_avg_model", "consensus_distance", "swaps_started",
        "swaps_answered", "stale_sends", "dual_rms", "run_wall_s"]
rows = []
dat = open(os.path.join(out, "curves.dat"), "w")
dat.write("# epoch acc_avg_model acc_mean consensus_distance\n")
summary = []
ranges = open(os.path.join(out, "ranges"), "w")   # per model: xmax ymin ymax (%) of the figure
for model in ("logreg", "resnet"):
    pts = []
    for mode in modes:
        name = "%s-%s" % (model, mode)
        d = os.path.join(out, name)
        dat.write("# %s\n" % name)
        try:
            ev = [r for r in csv.DictReader(open(os.path.join(d, "eval.csv"))) if r["rank"] == "0"]
        except OSError:
            ev = []
        if not ev:
            dat.write("nan nan nan nan\n\n\n")
            continue
        # /ecl: counts cumulative per rank; the dual column is dual_change_rms
        # in the first release of the modes, dual_residual_rms later
        ecl = {}
        p = os.path.join(d, "ecl.csv")
        if os.path.exists(p):
            for r in csv.DictReader(open(p)):
                e = ecl.setdefault(int(float(r["epoch"])), [0, 0, 0, 0.0, 0])
                e[0] += int(r["swaps_started"]); e[1] += int(r["swaps_answered"])
                e[2] += int(r["stale_sends"])
                e[3] += float(r.get("dual_residual_rms") or r.get("dual_change_rms"))
                e[4] += 1
        for r in ev:
            ep = int(round(float(r["epoch"])))
            e = ecl.get(ep)
            rows.append([model, mode, ep, r["step"], r["accuracy_mean"], r["accuracy_std"],
                         r["avg_model_accuracy"], r["loss_mean"], r["avg_model_loss"],
                         r["consensus_distance"]] +
                        ([e[0], e[1], e[2], "%.6g" % (e[3] / e[4])] if e else ["", "", "", ""]) +
                        [wall.get(name, "")])
            dat.write("%d %s %s %s\n" % (ep, r["avg_model_accuracy"], r["accuracy_mean"],
                                         r["consensus_distance"]))
            pts.append((ep, 100 * float(r["avg_model_accuracy"]), 100 * float(r["accuracy_mean"])))
        dat.write("\n\n")
        last = rows[-1]
        summary.append("%-7s %-10s %5d %8.2f %8.2f %10.4g %8s %s" % (
            model, mode, last[2], 100 * float(last[6]), 100 * float(last[4]), float(last[9]),
            last[14] or "-", "%s/%s/%s %s" % tuple(last[10:14]) if last[10] != "" else "-"))
    if pts:
        lo = min(min(p[1], p[2]) for p in pts)
        hi = max(max(p[1], p[2]) for p in pts)
        ranges.write("%s %g %d %d\n" % (model, max(p[0] for p in pts) + 0.5, 5 * int(lo // 5),
                                         min(100, 5 * int(hi // 5) + 5)))
    else:
        ranges.write("%s 2 0 100\n" % model)
ranges.close()
with open(dest, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(cols)
    w.writerows(rows)
print("model   mode       epoch  avg_model  mean_ranks  consensus  wall_s  "
      "swaps started/answered/stale dual_rms (last epoch, all ranks)")
print("\n".join(summary))
PY

# fixed ranges: a panel whose runs are all missing stays a valid (empty) plot
read -r _ lx ly0 ly1 < <(grep '^logreg ' "$out/ranges")
read -r _ rx ry0 ry1 < <(grep '^resnet ' "$out/ranges")
rs_title="resnet20_gn (GroupNorm), $rs_samples samples per rank-epoch, lr $rs_lr, first $rs_test test images"
gnuplot <<EOF
set terminal pngcairo size 1300,520 font ",10"
set output "$here/ecl-fmnist.png"
set grid
set key bottom right box opaque
set termoption noenhanced
set datafile missing "nan"
set xtics 1
set multiplot layout 1,2 title "Fashion-MNIST, 8 ranks (2 cores, oversubscribed), multiplex ring, K = 8, asynchronous swaps, 8 of 10 classes per rank, batch 100\nlocal: 1 rank, all data (iid), same batch, lr and L2 term. Solid: the averaged model; dashed: mean over the ranks' models"
set xlabel "epoch (samples per rank / samples_per_epoch)"
set ylabel "test accuracy (%)"
set title "logreg, 10,000 samples per rank-epoch, mu = lr 0.002, lambda 0.01 (D-SGD: 0)"
set xrange [0.5:$lx]
set yrange [$ly0:$ly1]
plot "$out/curves.dat" index 0 using 1:(100*\$2) with linespoints lc 1 pt 7 lw 2 title "local (1 rank)", \
     "" index 1 using 1:(100*\$2) with linespoints lc 2 pt 5 lw 2 title "pdmm-isvr", \
     "" index 1 using 1:(100*\$3) with lines lc 2 dt 2 lw 1 notitle, \
     "" index 2 using 1:(100*\$2) with linespoints lc 3 pt 9 lw 2 title "admm-isvr", \
     "" index 2 using 1:(100*\$3) with lines lc 3 dt 2 lw 1 notitle, \
     "" index 3 using 1:(100*\$2) with linespoints lc 4 pt 11 lw 2 title "dsgd-ecl", \
     "" index 3 using 1:(100*\$3) with lines lc 4 dt 2 lw 1 notitle, \
     NaN with lines lc black dt 2 lw 1 title "mean over ranks"
set title "$rs_title"
set xrange [0.5:$rx]
set yrange [$ry0:$ry1]
plot "$out/curves.dat" index 4 using 1:(100*\$2) with linespoints lc 1 pt 7 lw 2 title "local (1 rank)", \
     "" index 5 using 1:(100*\$2) with linespoints lc 2 pt 5 lw 2 title "pdmm-isvr", \
     "" index 5 using 1:(100*\$3) with lines lc 2 dt 2 lw 1 notitle, \
     "" index 6 using 1:(100*\$2) with linespoints lc 3 pt 9 lw 2 title "admm-isvr", \
     "" index 6 using 1:(100*\$3) with lines lc 3 dt 2 lw 1 notitle, \
     "" index 7 using 1:(100*\$2) with linespoints lc 4 pt 11 lw 2 title "dsgd-ecl", \
     "" index 7 using 1:(100*\$3) with lines lc 4 dt 2 lw 1 notitle, \
     NaN with lines lc black dt 2 lw 1 title "mean over ranks"
unset multiplot
EOF
echo "csv: $here/ecl-fmnist.csv; figure: $here/ecl-fmnist.png; failed runs: $failed"
exit $((failed > 0))
