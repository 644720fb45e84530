#!/bin/bash
# Two-rank scaling benchmark: dtrain allreduce (mpiexec -n 2, 1 thread per rank)
# against 2 x dtrain's single-rank rate and against PyTorch DDP (gloo, 2
# processes, 1 thread each), mnist_cnn on Fashion-MNIST, batch 32 per rank.
#
# Per round, in this order: dtrain local (1 rank), dtrain allreduce (2 ranks),
# bench/ddp_train.py; ROUNDS rounds; 50 warm-up + 400 timed steps each.
# dtrain's aggregate rate is the sum of the per-rank rates from the /train rows
# (see dtrain_rate in common.sh); DDP's is the sum of its per-rank rates.
# Targets: allreduce >= 0.9 x (2 x local); allreduce >= 1.3 x DDP.
# The raw runs go to $BENCH_OUT/allreduce-raw.tsv.
#
#   bench/allreduce.sh      # smoke test: WARM_STEPS="5 20" ROUNDS=1 LOAD_MAX=99 bench/allreduce.sh
set -euo pipefail
. "$(dirname "$0")/common.sh"

export UCX_TLS=${UCX_TLS:-self,sm,tcp} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
MPIEXEC=${MPIEXEC:-mpiexec}
B=32
read -r WARM STEPS <<<"${WARM_STEPS:-50 400}"
raw=$BENCH_OUT/allreduce-raw.tsv
printf 'round\tprogram\timages_per_s\tper_rank\tload1_before\n' >"$raw"

dtrain_run() { # name ranks mode
    local run=$BENCH_OUT/allreduce-$1
    rm -rf "$run"
    local cmd=("$DTRAIN")
    [ "$2" -gt 1 ] && cmd=("$MPIEXEC" -n "$2" "$DTRAIN")
    "${cmd[@]}" "$REPO/inputs/local-fmnist.ini" run.output_dir="$run" algorithm.mode="$3" \
        compute.threads=1 optim.batch_size=$B run.max_steps=$((WARM + STEPS)) \
        run.log_every="$WARM" data.test_limit=1000 >"$run.log" 2>&1 \
        || { echo "allreduce.sh: dtrain $3 failed, see $run.log" >&2; exit 1; }
    dtrain_rate "$run/run.h5"
}

wait_for_load
LOCAL="" AR="" DDPR=""
for round in $(seq 1 "$ROUNDS"); do
    l=$(load1)
    read -r rate per < <(dtrain_run "local-r$round" 1 local)
    LOCAL+=" $rate"
    printf '%s\tdtrain-local\t%s\t%s\t%s\n' "$round" "$rate" "$per" "$l" | tee -a "$raw"

    l=$(load1)
    read -r rate per < <(dtrain_run "allreduce-r$round" 2 allreduce)
    AR+=" $rate"
    printf '%s\tdtrain-allreduce\t%s\t%s\t%s\n' "$round" "$rate" "$per" "$l" | tee -a "$raw"

    l=$(load1)
    line=$("$PYTHON" "$BENCH_DIR/ddp_train.py" --batch $B --steps "$STEPS" --warmup "$WARM" \
        --threads 1 2>"$BENCH_OUT/allreduce-ddp-r$round.err") \
        || { echo "allreduce.sh: ddp_train.py failed, see $BENCH_OUT/allreduce-ddp-r$round.err" >&2; exit 1; }
    rate=$(echo "$line" | kv images_per_s)
    DDPR+=" $rate"
    printf '%s\ttorch-ddp\t%s\t%s\t%s\n' "$round" "$rate" "$(echo "$line" | kv per_rank)" "$l" | tee -a "$raw"
done

lm=$(echo "$LOCAL" | median); am=$(echo "$AR" | median); dm=$(echo "$DDPR" | median)
echo
echo "Medians of $ROUNDS alternating rounds, batch $B per rank, 1 thread per rank"
printf '| %19s | %20s | %17s | %20s | %15s |\n' "dtrain 1 rank img/s" "dtrain 2 ranks img/s" "DDP 2 ranks img/s" "2-rank efficiency" "vs DDP"
printf '| ------------------: | -------------------: | ----------------: | -------------------: | --------------: |\n'
awk -v l="$lm" -v a="$am" -v d="$dm" 'BEGIN {
    printf "| %19.1f | %20.1f | %17.1f | %13.3f (>= 0.9) | %7.2f (>= 1.3) |\n", l, a, d, a / (2 * l), a / d }'
echo "# load after the series: $(load1)"
