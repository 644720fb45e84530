#!/bin/bash
# Per-rank compute benchmark: dtrain (mode local) against PyTorch, one process
# each, on every model of bench/RESULTS.md §10 at batch 32 and 128:
#   mnist_cnn    Fashion-MNIST (both sides: the uint8 files; PyTorch normalises
#                the whole set to float up front, dtrain each batch)
#   resnet20_gn, resnet32_gn
#                synthetic 3x32x32 data, SYNTH samples held as float32 on both
#                sides (dtrain: data.name = synthetic; PyTorch: --synthetic)
# at one thread, and resnet20_gn at batch 128 also at two threads.
#
# For each configuration the programs run ALTERNATELY, ROUNDS times each, the
# same warm-up and timed steps. dtrain's rate comes from its /train rows
# (run.log_every = warm-up: the first row ends the warm-up, the last is the
# last step; evaluation only after the window); PyTorch's from
# bench/torch_train.py. Peak RSS is the whole process's (GNU time %M).
# With NATIVE=1 each round also runs dtrain with compute.kernels = native (the
# im2col reference path), to show the fast path's own gain. With COMPILE=1
# PyTorch runs torch.compile'd (PyTorch 2.x: PYTHON=/tmp/dtrain-torch-venv/bin/python3,
# bench/venv.sh), the compilation inside its warm-up steps.
#
# Prints, per configuration, dtrain's median and best, PyTorch's best and
# median, the ratio dtrain median / PyTorch BEST (PyTorch varies by up to 40 %
# run to run here, dtrain by ~3 %), and the peak RSS of each side.
# Raw runs: $BENCH_OUT/compute-raw.tsv.
#
#   bench/compute.sh
#   CONFIGS="resnet20_gn:32:1" ROUNDS=1 bench/compute.sh        # one configuration
#   QUICK=1 ROUNDS=1 LOAD_MAX=99 bench/compute.sh                # smoke test
set -euo pipefail
. "$(dirname "$0")/common.sh"

CONFIGS=${CONFIGS:-"mnist_cnn:32:1 mnist_cnn:128:1 resnet20_gn:32:1 resnet20_gn:128:1 resnet32_gn:32:1 resnet32_gn:128:1 resnet20_gn:128:2"}
SYNTH=${SYNTH:-4096}
NATIVE=${NATIVE:-0}
raw=$BENCH_OUT/compute-raw.tsv
printf 'config\tround\tprogram\timages_per_s\tpeak_rss_mb\tload1_before\n' >"$raw"

# warm-up and timed steps per model and batch
steps_for() {
    if [ -n "${QUICK:-}" ]; then echo "3 6"; return; fi
    case $1:$2 in
        mnist_cnn:32) echo "50 400" ;; mnist_cnn:128) echo "25 150" ;;
        resnet20_gn:32) echo "10 80" ;; resnet20_gn:128) echo "5 30" ;;
        resnet32_gn:32) echo "10 50" ;; resnet32_gn:128) echo "4 20" ;;
        *) echo "5 20" ;;
    esac
}

dtrain_args() { # model batch threads warm steps kernels outdir
    local m=$1 b=$2 t=$3 warm=$4 steps=$5 kern=$6 out=$7
    echo "$REPO/inputs/local-fmnist.ini run.output_dir=$out algorithm.mode=local" \
        "model.name=$m compute.threads=$t compute.kernels=$kern optim.batch_size=$b" \
        "run.max_steps=$((warm + steps)) run.log_every=$warm run.epochs=1000" \
        "run.eval_every=$((warm + steps + 1)) data.test_limit=256"
    if [ "$m" != mnist_cnn ]; then
        echo "data.name=synthetic data.synthetic_channels=3 data.synthetic_height=32" \
            "data.synthetic_width=32 data.synthetic_train=$SYNTH data.synthetic_test=256"
    fi
}

run_dtrain() { # config round label kernels model batch threads warm steps
    local cfg=$1 round=$2 label=$3 kern=$4 m=$5 b=$6 t=$7 warm=$8 steps=$9
    local run=$BENCH_OUT/compute-${cfg//:/-}-$label-r$round l rate rss  # no ":" (ROMIO reads it as a file-system prefix)
    rm -rf "$run"
    l=$(load1)
    # shellcheck disable=SC2046
    with_rss "$run.rss" "$DTRAIN" $(dtrain_args "$m" "$b" "$t" "$warm" "$steps" "$kern" "$run") \
        >"$run.log" 2>&1 || { echo "compute.sh: dtrain failed, see $run.log" >&2; exit 1; }
    rate=$(dtrain_rate "$run/run.h5" | cut -d' ' -f1)
    rss=$(awk '{ printf "%.1f", $1 / 1024 }' "$run.rss")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$round" "$label" "$rate" "$rss" "$l" | tee -a "$raw" >&2
    echo "$rate $rss"
}

wait_for_load
echo "# $(date -u "+%F %T") UTC; $(lscpu | sed -n "s/^Model name: *//p"), $(nproc --all) CPUs"
isa_cap_report "$DTRAIN" "$PYTHON"
declare -A RATE RSS
for cfg in $CONFIGS; do
    IFS=: read -r m b t <<<"$cfg"
    read -r warm steps < <(steps_for "$m" "$b")
    for round in $(seq 1 "$ROUNDS"); do
        read -r r s < <(run_dtrain "$cfg" "$round" dtrain auto "$m" "$b" "$t" "$warm" "$steps")
        RATE[$cfg,dtrain]+=" $r"; RSS[$cfg,dtrain]+=" $s"
        if [ "$NATIVE" = 1 ]; then
            read -r r s < <(run_dtrain "$cfg" "$round" native native "$m" "$b" "$t" "$warm" "$steps")
            RATE[$cfg,native]+=" $r"; RSS[$cfg,native]+=" $s"
        fi
        l=$(load1)
        targs=(--model "$m" --batch "$b" --steps "$steps" --warmup "$warm" --threads "$t"
               --synthetic "$SYNTH")
        [ "${COMPILE:-0}" = 1 ] && targs+=(--compile)
        tout=$BENCH_OUT/compute-${cfg//:/-}-torch-r$round
        line=$(with_rss "$tout.rss" "$PYTHON" "$BENCH_DIR/torch_train.py" "${targs[@]}" 2>"$tout.err") \
            || { echo "compute.sh: torch_train.py failed, see $tout.err" >&2; exit 1; }
        r=$(echo "$line" | kv images_per_s)
        s=$(awk '{ printf "%.1f", $1 / 1024 }' "$tout.rss")
        RATE[$cfg,torch]+=" $r"; RSS[$cfg,torch]+=" $s"
        printf '%s\t%s\ttorch\t%s\t%s\t%s\n' "$cfg" "$round" "$r" "$s" "$l" | tee -a "$raw" >&2
    done
done

best() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -n1; }

echo
echo "$ROUNDS alternating rounds; ratio = dtrain median / PyTorch best (the targets of bench/RESULTS.md §10: >= 1.5 at one thread; RSS ratio <= 0.35 at batch 128)"
printf '| model | batch | threads | dtrain img/s median (best) | PyTorch img/s best (median) | ratio |%s dtrain RSS MB | PyTorch RSS MB | RSS ratio |\n' \
    "$([ "$NATIVE" = 1 ] && echo ' native img/s | fast/native |')"
printf '| --- | ---: | ---: | ---: | ---: | ---: |%s ---: | ---: | ---: |\n' "$([ "$NATIVE" = 1 ] && echo ' ---: | ---: |')"
for cfg in $CONFIGS; do
    IFS=: read -r m b t <<<"$cfg"
    dm=$(echo "${RATE[$cfg,dtrain]}" | median); db=$(echo "${RATE[$cfg,dtrain]}" | best)
    tb=$(echo "${RATE[$cfg,torch]}" | best); tm=$(echo "${RATE[$cfg,torch]}" | median)
    ds=$(echo "${RSS[$cfg,dtrain]}" | median); ts=$(echo "${RSS[$cfg,torch]}" | median)
    nat=
    if [ "$NATIVE" = 1 ]; then
        nm=$(echo "${RATE[$cfg,native]}" | median)
        nat=$(awk -v n="$nm" -v d="$dm" 'BEGIN { printf " %.1f | %.2f |", n, d / n }')
    fi
    awk -v m="$m" -v b="$b" -v t="$t" -v dm="$dm" -v db="$db" -v tb="$tb" -v tm="$tm" \
        -v ds="$ds" -v ts="$ts" -v nat="$nat" 'BEGIN {
        printf "| %s | %d | %d | %.1f (%.1f) | %.1f (%.1f) | %.2f |%s %.1f | %.1f | %.3f |\n",
               m, b, t, dm, db, tb, tm, dm / tb, nat, ds, ts, ds / ts }'
done
echo "# load after the series: $(load1)"
