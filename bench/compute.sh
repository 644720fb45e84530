#!/bin/bash
# Single-core compute benchmark: dtrain (mode local) against PyTorch on mnist_cnn,
# Fashion-MNIST, one thread each, batch 32 and 128.
#
# For each batch size the two programs run ALTERNATELY, ROUNDS times each, the
# same number of timed steps after the same number of warm-up steps:
#   batch 32:  50 warm-up + 400 timed steps;  batch 128: 25 warm-up + 150 timed.
# dtrain's rate comes from its /train rows (run.log_every = warm-up, so the
# first row ends the warm-up and the last row is the last step); PyTorch's from
# bench/torch_train.py. Peak RSS is that of the whole process.
# Prints a table of medians; the raw runs go to $BENCH_OUT/compute-raw.tsv.
#
#   bench/compute.sh            # or: ROUNDS=5 BATCHES="32" bench/compute.sh
#   WARM_STEPS="5 20" ROUNDS=1 LOAD_MAX=99 bench/compute.sh   # smoke test
set -euo pipefail
. "$(dirname "$0")/common.sh"

BATCHES=${BATCHES:-"32 128"}
TORCH_DATA=${TORCH_DATA:-float}
raw=$BENCH_OUT/compute-raw.tsv
printf 'batch\tround\tprogram\timages_per_s\tpeak_rss_mb\tload1_before\n' >"$raw"

steps_for() { [ -n "${WARM_STEPS:-}" ] && { echo "$WARM_STEPS"; return; }; case $1 in 32) echo "50 400" ;; 128) echo "25 150" ;; *) echo "$((12800 / $1)) $((51200 / $1))" ;; esac; }

wait_for_load
declare -A D_RATE D_RSS T_RATE T_RSS
for B in $BATCHES; do
    read -r WARM STEPS < <(steps_for "$B")
    for round in $(seq 1 "$ROUNDS"); do
        run=$BENCH_OUT/compute-b$B-r$round
        rm -rf "$run"
        l=$(load1)
        with_rss "$run.rss" "$DTRAIN" "$REPO/inputs/local-fmnist.ini" \
            run.output_dir="$run" algorithm.mode=local compute.threads=1 \
            optim.batch_size="$B" run.max_steps=$((WARM + STEPS)) run.log_every="$WARM" \
            data.test_limit=1000 >"$run.log" 2>&1 \
            || { echo "compute.sh: dtrain failed, see $run.log" >&2; exit 1; }
        rate=$(dtrain_rate "$run/run.h5" | cut -d' ' -f1)
        rss=$(awk '{ printf "%.1f", $1 / 1024 }' "$run.rss")
        D_RATE[$B]+=" $rate"; D_RSS[$B]+=" $rss"
        printf '%s\t%s\tdtrain\t%s\t%s\t%s\n' "$B" "$round" "$rate" "$rss" "$l" | tee -a "$raw"

        l=$(load1)
        line=$(with_rss "$run.torch.rss" "$PYTHON" "$BENCH_DIR/torch_train.py" --batch "$B" \
            --steps "$STEPS" --warmup "$WARM" --threads 1 --data "$TORCH_DATA" 2>"$run.torch.err") \
            || { echo "compute.sh: torch_train.py failed, see $run.torch.err" >&2; exit 1; }
        rate=$(echo "$line" | kv images_per_s)
        rss=$(awk '{ printf "%.1f", $1 / 1024 }' "$run.torch.rss")
        T_RATE[$B]+=" $rate"; T_RSS[$B]+=" $rss"
        printf '%s\t%s\ttorch\t%s\t%s\t%s\n' "$B" "$round" "$rate" "$rss" "$l" | tee -a "$raw"
    done
done

echo
echo "Medians of $ROUNDS alternating rounds, 1 thread (targets: ratio >= 1.5 at batch 32, >= 1.2 at 128; RSS ratio <= 0.25)"
printf '| %5s | %14s | %13s | %6s | %14s | %13s | %9s |\n' batch "dtrain img/s" "torch img/s" ratio "dtrain RSS MB" "torch RSS MB" "RSS ratio"
printf '| ----: | -------------: | ------------: | -----: | -------------: | ------------: | --------: |\n'
for B in $BATCHES; do
    dr=$(echo "${D_RATE[$B]}" | median); tr_=$(echo "${T_RATE[$B]}" | median)
    dm=$(echo "${D_RSS[$B]}" | median); tm=$(echo "${T_RSS[$B]}" | median)
    awk -v b="$B" -v dr="$dr" -v tr="$tr_" -v dm="$dm" -v tm="$tm" 'BEGIN {
        printf "| %5d | %14.1f | %13.1f | %6.2f | %14.1f | %13.1f | %9.3f |\n", b, dr, tr, dr / tr, dm, tm, dm / tm }'
done
echo "# load after the series: $(load1)"
