#!/bin/bash
# Transformer benchmark (bench/RESULTS.md §14): dtrain's GPT (mode local, AdamW, warm-up +
# cosine, clip 1.0, byte-level fortunes corpus) against the same model in
# PyTorch eager (bench/gpt_torch.py: same layout, init rule, data rule,
# optimizer and schedule), side by side in one run, with the one-core sgemm
# peak (bench/sgemm_peak: OpenBLAS 2048^3, best of 5) measured in the same run.
#
#   baby:  n_layer 4, n_head 4, n_embd 128, block 64, batch 12
#   small: n_layer 6, n_head 6, n_embd 384, block 256, batch 8
#
# For each configuration and thread count the programs run ALTERNATELY, ROUNDS
# times. dtrain's rate: the median of its progress lines' tok/s, the first line
# left out, median over rounds; PyTorch's: the best of its runs' rates (each
# run's median interval, the first left out). Peak RSS: GNU time's %M of the
# whole process. FLOPs per token for the sgemm-peak fraction: 72 L C^2 +
# 12 L T C (forward and backward of the blocks' matrix work).
#
#   bench/gpt.sh
#   CONFIGS="small:1" ROUNDS=1 bench/gpt.sh
#   QUICK=1 ROUNDS=1 LOAD_MAX=99 bench/gpt.sh      # smoke test
set -euo pipefail
. "$(dirname "$0")/common.sh"

CONFIGS=${CONFIGS:-"baby:1 baby:2 small:1 small:2"}
CORPUS=${CORPUS:-/usr/share/games/fortunes}
SGEMM=${SGEMM:-$(dirname "$DTRAIN")/../bench/sgemm_peak}
[ -d "$CORPUS" ] || { echo "bench: $CORPUS missing (apt-get install fortunes)" >&2; exit 1; }
raw=$BENCH_OUT/gpt-raw.tsv
printf 'config\tthreads\tround\tprogram\ttok_s\tpeak_rss_mb\n' >"$raw"

shape() { # config -> "L H C T B"
    case $1 in baby) echo "4 4 128 64 12" ;; small) echo "6 6 384 256 8" ;; esac
}
steps_for() { # config -> "log_every steps"
    if [ -n "${QUICK:-}" ]; then echo "2 6"; return; fi
    case $1 in baby) echo "25 200" ;; small) echo "5 40" ;; esac
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

run_dtrain() { # config threads round
    local c=$1 t=$2 r=$3 out=$BENCH_OUT/gpt-$1-$2-$3
    read -r L H C T B <<<"$(shape "$c")"
    read -r every steps <<<"$(steps_for "$c")"
    rm -rf "$out"
    /usr/bin/time -f '%M' -o "$out.rss" "$DTRAIN" "$REPO/inputs/gpt-fortunes.ini" \
        run.output_dir="$out" algorithm.mode=local model.n_layer="$L" model.n_head="$H" \
        model.n_embd="$C" model.block_size="$T" optim.batch_size="$B" compute.threads="$t" \
        run.max_steps="$steps" run.log_every="$every" run.eval_every=0 \
        run.checkpoint_every=0 data.test_limit=16 data.path="$CORPUS" \
        optim.warmup_steps=$((steps / 4)) >"$out.log" 2>&1
    local rate
    rate=$(grep -o '[0-9]* tok/s' "$out.log" | awk 'NR > 1 { print $1 }' | median)
    printf '%s\t%s\t%s\tdtrain\t%s\t%s\n' "$c" "$t" "$r" "$rate" \
        "$(awk '{ printf "%.0f", $1 / 1024 }' "$out.rss")" >>"$raw"
}

run_torch() { # config threads round
    local c=$1 t=$2 r=$3 out=$BENCH_OUT/gpt-torch-$1-$2-$3
    read -r every steps <<<"$(steps_for "$c")"
    OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t /usr/bin/time -f '%M' -o "$out.rss" \
        "$PYTHON" "$BENCH_DIR/gpt_torch.py" --config "$c" --threads "$t" --steps "$steps" \
        --log-every "$every" --data "$CORPUS" --warmup $((steps / 4)) >"$out.log" 2>&1
    local rate
    rate=$(sed -n 's/.*tok_s_median=\([0-9.]*\).*/\1/p' "$out.log" | tail -n 1)
    printf '%s\t%s\t%s\ttorch\t%s\t%s\n' "$c" "$t" "$r" "$rate" \
        "$(awk '{ printf "%.0f", $1 / 1024 }' "$out.rss")" >>"$raw"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores"
wait_for_load
peak=nan
if [ -x "$SGEMM" ]; then
    peak=$("$SGEMM" | sed -n 's/.*gflops=\([0-9.]*\).*/\1/p')
fi
echo "# sgemm 2048^3, one thread, best of 5: $peak GFLOP/s"
for cfg in $CONFIGS; do
    c=${cfg%%:*} t=${cfg##*:}
    for r in $(seq 1 "$ROUNDS"); do
        wait_for_load
        run_torch "$c" "$t" "$r"
        wait_for_load
        run_dtrain "$c" "$t" "$r"
    done
done

printf '%-8s %3s %12s %12s %12s %7s %9s %9s %8s %9s\n' config thr dtrain_med torch_best torch_med ratio \
    rss_dtrain rss_torch rss_ratio gflop_s
for cfg in $CONFIGS; do
    c=${cfg%%:*} t=${cfg##*:}
    read -r L H C T B <<<"$(shape "$c")"
    d=$(awk -F'\t' -v c="$c" -v t="$t" '$1 == c && $2 == t && $4 == "dtrain" { print $5 }' "$raw" | median)
    pb=$(awk -F'\t' -v c="$c" -v t="$t" '$1 == c && $2 == t && $4 == "torch" { print $5 }' "$raw" | sort -g | tail -n 1)
    pm=$(awk -F'\t' -v c="$c" -v t="$t" '$1 == c && $2 == t && $4 == "torch" { print $5 }' "$raw" | median)
    rd=$(awk -F'\t' -v c="$c" -v t="$t" '$1 == c && $2 == t && $4 == "dtrain" { print $6 }' "$raw" | sort -g | tail -n 1)
    rp=$(awk -F'\t' -v c="$c" -v t="$t" '$1 == c && $2 == t && $4 == "torch" { print $6 }' "$raw" | sort -g | tail -n 1)
    awk -v c="$c" -v t="$t" -v d="$d" -v pb="$pb" -v pm="$pm" -v rd="$rd" -v rp="$rp" \
        -v L="$L" -v C="$C" -v T="$T" 'BEGIN {
        f = 72 * L * C * C + 12 * L * T * C
        printf "%-8s %3s %12.0f %12.0f %12.0f %7.2f %9s %9s %8.2f %9.1f\n", c, t, d, pb, pm,
            (pb > 0 ? d / pb : 0), rd, rp, (rp > 0 ? rd / rp : 0), d * f / 1e9 }'
done
echo "# ratio = dtrain median / PyTorch best; gflop_s = dtrain's rate x (72 L C^2 + 12 L T C)"
echo "# raw runs: $raw"
