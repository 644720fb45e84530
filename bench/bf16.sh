#!/bin/bash
# bf16 compute against fp32 and against PyTorch (bench/RESULTS.md §15, §16, §19), side by side in
# one run, one process each:
#   dtrain fp32   compute.precision = fp32 (compute.kernels = auto)
#   dtrain bf16   compute.precision = bf16
#   torch fp32    bench/torch_train.py
#   torch bf16    bench/torch_train.py --autocast bf16 (torch.autocast('cpu',
#                 bfloat16); GroupNorm patched to run in fp32, since PyTorch
#                 1.13's CPU autocast has no rule for it)
# on mnist_cnn (Fashion-MNIST) and resnet20_gn (synthetic 3x32x32) at batch
# 32 and 128, and the two GPT configurations of bench/gpt.sh on the fortunes
# corpus (gpt_baby: n_layer 4, n_head 4, n_embd 128, block 64, batch 12;
# gpt_small: 6, 6, 384, block 256, batch 8; dtrain as bench/gpt.sh runs it,
# PyTorch: bench/gpt_torch.py, with --autocast bf16 for its bf16), one and
# two threads. A configuration is MODEL:BATCH:THREADS. The four programs run
# alternately, ROUNDS times each (default 3); the table gives dtrain's median
# and PyTorch's best of the rounds (img/s; tokens/s for GPT: dtrain's median
# progress line and gpt_torch.py's median interval, the first left out), the
# speed-ups bf16 / fp32 (dtrain) and dtrain bf16 / PyTorch bf16 best
# (targets: >= 1.1 on mnist_cnn at batch 128 and >= 1.2 on gpt_small on a
# bf16 machine without AMX; >= 1.3 against PyTorch), and the peak RSS of
# dtrain fp32 and bf16 (target: bf16 not above fp32). The CPU model and
# oneDNN's ISA head the output; the table is bench/RESULTS.md's format.
# Raw runs: $BENCH_OUT/bf16-raw.tsv.
#
#   bench/bf16.sh
#   CONFIGS="resnet20_gn:128:1" bench/bf16.sh                 # one configuration
#   CONFIGS="gpt_small:8:1 gpt_small:8:2" bench/bf16.sh       # the GPT "small" only
#   QUICK=1 ROUNDS=1 LOAD_MAX=99 bench/bf16.sh                 # smoke test
set -euo pipefail
. "$(dirname "$0")/common.sh"

CONFIGS=${CONFIGS:-"mnist_cnn:32:1 mnist_cnn:128:1 resnet20_gn:32:1 resnet20_gn:128:1 gpt_baby:12:1 gpt_small:8:1 mnist_cnn:32:2 mnist_cnn:128:2 resnet20_gn:32:2 resnet20_gn:128:2 gpt_baby:12:2 gpt_small:8:2"}
SYNTH=${SYNTH:-4096}
CORPUS=${CORPUS:-/usr/share/games/fortunes}
raw=$BENCH_OUT/bf16-raw.tsv
mkdir -p "$BENCH_OUT"
case " $CONFIGS" in
    *" gpt_"*) [ -d "$CORPUS" ] || { echo "bf16.sh: $CORPUS missing (apt-get install fortunes)" >&2; exit 1; } ;;
esac
printf 'config\tround\tprogram\trate\tpeak_rss_mb\tload1_before\n' >"$raw"

# images: "warm-up steps, timed steps"; GPT: "log_every, steps" (the first
# progress interval is left out of the rate, as in bench/gpt.sh)
steps_for() {
    case $1 in
        gpt_*) if [ -n "${QUICK:-}" ]; then echo "2 6"; return; fi ;;
        *) if [ -n "${QUICK:-}" ]; then echo "3 6"; return; fi ;;
    esac
    case $1:$2 in
        mnist_cnn:32) echo "50 400" ;; mnist_cnn:128) echo "25 150" ;;
        resnet20_gn:32) echo "10 80" ;; resnet20_gn:128) echo "5 30" ;;
        gpt_baby:*) echo "25 200" ;; gpt_small:*) echo "5 40" ;;
        *) echo "5 20" ;;
    esac
}

gpt_shape() { # model -> "n_layer n_head n_embd block" (bench/gpt.sh's)
    case $1 in gpt_baby) echo "4 4 128 64" ;; gpt_small) echo "6 6 384 256" ;;
        *) echo "bf16.sh: unknown model $1 (mnist_cnn, resnet20_gn, gpt_baby, gpt_small)" >&2
           exit 1 ;;
    esac
}

is_gpt() { case $1 in gpt_*) return 0 ;; esac; return 1; }

dtrain_args() { # model batch threads warm steps precision outdir
    local m=$1 b=$2 t=$3 warm=$4 steps=$5 prec=$6 out=$7 L H C T
    if is_gpt "$m"; then # warm: log_every
        read -r L H C T <<<"$(gpt_shape "$m")"
        echo "$REPO/inputs/gpt-fortunes.ini run.output_dir=$out algorithm.mode=local" \
            "model.n_layer=$L model.n_head=$H model.n_embd=$C model.block_size=$T" \
            "optim.batch_size=$b compute.threads=$t compute.precision=$prec" \
            "run.max_steps=$steps run.log_every=$warm run.eval_every=0" \
            "run.checkpoint_every=0 data.test_limit=16 data.path=$CORPUS" \
            "optim.warmup_steps=$((steps / 4))"
        return
    fi
    echo "$REPO/inputs/local-fmnist.ini run.output_dir=$out algorithm.mode=local" \
        "model.name=$m compute.threads=$t compute.precision=$prec optim.batch_size=$b" \
        "run.max_steps=$((warm + steps)) run.log_every=$warm run.epochs=1000" \
        "run.eval_every=$((warm + steps + 1)) data.test_limit=256"
    if [ "$m" != mnist_cnn ]; then
        echo "data.name=synthetic data.synthetic_channels=3 data.synthetic_height=32" \
            "data.synthetic_width=32 data.synthetic_train=$SYNTH data.synthetic_test=256"
    fi
}

run_dtrain() { # config round precision model batch threads warm steps
    local cfg=$1 round=$2 prec=$3 m=$4 b=$5 t=$6 warm=$7 steps=$8
    local run=$BENCH_OUT/bf16-${cfg//:/-}-dtrain-$prec-r$round l rate rss
    rm -rf "$run"
    l=$(load1)
    # shellcheck disable=SC2046
    with_rss "$run.rss" "$DTRAIN" $(dtrain_args "$m" "$b" "$t" "$warm" "$steps" "$prec" "$run") \
        >"$run.log" 2>&1 || { echo "bf16.sh: dtrain failed, see $run.log" >&2; exit 1; }
    if is_gpt "$m"; then # tokens/s: the median progress line, the first left out
        rate=$(grep -o '[0-9]* tok/s' "$run.log" | awk 'NR > 1 { print $1 }' | median)
    else
        rate=$(dtrain_rate "$run/run.h5" | cut -d' ' -f1)
    fi
    rss=$(awk '{ printf "%.1f", $1 / 1024 }' "$run.rss")
    printf '%s\t%s\tdtrain-%s\t%s\t%s\t%s\n' "$cfg" "$round" "$prec" "$rate" "$rss" "$l" \
        | tee -a "$raw" >&2
    echo "$rate $rss"
}

run_torch() { # config round autocast model batch threads warm steps
    local cfg=$1 round=$2 ac=$3 m=$4 b=$5 t=$6 warm=$7 steps=$8 l line r s
    local tout=$BENCH_OUT/bf16-${cfg//:/-}-torch-$ac-r$round
    l=$(load1)
    if is_gpt "$m"; then # warm: log_every
        line=$(OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t with_rss "$tout.rss" "$PYTHON" \
            "$BENCH_DIR/gpt_torch.py" --config "${m#gpt_}" --batch "$b" --threads "$t" \
            --steps "$steps" --log-every "$warm" --data "$CORPUS" --warmup $((steps / 4)) \
            --autocast "$ac" 2>"$tout.err" | grep '^RESULT') \
            || { echo "bf16.sh: gpt_torch.py failed, see $tout.err" >&2; exit 1; }
        r=$(echo "$line" | kv tok_s_median)
    else
        line=$(with_rss "$tout.rss" "$PYTHON" "$BENCH_DIR/torch_train.py" --model "$m" \
            --batch "$b" --steps "$steps" --warmup "$warm" --threads "$t" --synthetic "$SYNTH" \
            --autocast "$ac" 2>"$tout.err") \
            || { echo "bf16.sh: torch_train.py failed, see $tout.err" >&2; exit 1; }
        r=$(echo "$line" | kv images_per_s)
    fi
    s=$(awk '{ printf "%.1f", $1 / 1024 }' "$tout.rss")
    printf '%s\t%s\ttorch-%s\t%s\t%s\t%s\n' "$cfg" "$round" "$ac" "$r" "$s" "$l" | tee -a "$raw" >&2
    echo "$r $s"
}

isa=$(cc -x c - -o "$BENCH_OUT/isa" -ldnnl 2>/dev/null <<'C' && "$BENCH_OUT/isa" || echo unknown
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
int main(void) { printf("0x%x\n", (unsigned)dnnl_get_effective_cpu_isa()); return 0; }
C
)
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "# bf16 flags: $(grep -m1 -o -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')" \
     "oneDNN effective ISA $isa (0xe7 avx512_core_bf16, 0x3e7 avx512_core_amx)"

wait_for_load
declare -A RATE RSS
for cfg in $CONFIGS; do
    IFS=: read -r m b t <<<"$cfg"
    read -r warm steps < <(steps_for "$m" "$b")
    for round in $(seq 1 "$ROUNDS"); do
        for prec in fp32 bf16; do
            read -r r s < <(run_dtrain "$cfg" "$round" "$prec" "$m" "$b" "$t" "$warm" "$steps")
            RATE[$cfg,d$prec]+=" $r"; RSS[$cfg,d$prec]+=" $s"
        done
        for ac in none bf16; do
            read -r r s < <(run_torch "$cfg" "$round" "$ac" "$m" "$b" "$t" "$warm" "$steps")
            RATE[$cfg,t$ac]+=" $r"; RSS[$cfg,t$ac]+=" $s"
        done
    done
done

best() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -n1; }

echo
echo "$ROUNDS alternating rounds; rates: dtrain median, PyTorch best of the rounds" \
     "(img/s; tokens/s for gpt_*); peak RSS: median of the rounds"
echo "| model | batch | threads | unit | dtrain fp32 | dtrain bf16 | bf16/fp32 | PyTorch fp32 | PyTorch bf16 autocast | dtrain bf16 / PyTorch bf16 | peak RSS MB dtrain fp32 / bf16 | PyTorch fp32 / bf16 |"
echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for cfg in $CONFIGS; do
    IFS=: read -r m b t <<<"$cfg"
    unit=img/s
    is_gpt "$m" && unit=tok/s
    d32=$(echo "${RATE[$cfg,dfp32]}" | median); d16=$(echo "${RATE[$cfg,dbf16]}" | median)
    t32=$(echo "${RATE[$cfg,tnone]}" | best); t16=$(echo "${RATE[$cfg,tbf16]}" | best)
    s32=$(echo "${RSS[$cfg,dfp32]}" | median); s16=$(echo "${RSS[$cfg,dbf16]}" | median)
    p32=$(echo "${RSS[$cfg,tnone]}" | median); p16=$(echo "${RSS[$cfg,tbf16]}" | median)
    awk -v m="$m" -v b="$b" -v t="$t" -v u="$unit" -v d32="$d32" -v d16="$d16" -v t32="$t32" \
        -v t16="$t16" -v s32="$s32" -v s16="$s16" -v p32="$p32" -v p16="$p16" 'BEGIN {
        printf "| %s | %d | %d | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %.0f / %.0f | %.0f / %.0f |\n",
               m, b, t, u, d32, d16, (d32 > 0 ? d16 / d32 : 0), t32, t16,
               (t16 > 0 ? d16 / t16 : 0), s32, s16, p32, p16 }'
done
echo "# load after the series: $(load1)"
