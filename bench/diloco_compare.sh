#!/bin/bash
# DiLoCo against allreduce on the emulated 1 Gbit/s cluster (bench/RESULTS.md §13b).
#
# What it runs: every variant below as one mpiexec job, each rank in its own
# network namespace behind its own shaped link (bench/network/netns.sh: veth
# into a bridge, tbf at RATE in both directions), MPI over those links only
# (UCX_TLS=tcp,self, MPIR_CVAR_NOLOCAL=1), with bench/network/yield_poll.c
# preloaded so that waiting ranks give their core away. Equal total tokens or
# images: every variant of a model and rank count runs the same run.max_steps
# with the same batch per rank.
#
#   gpt, 4 ranks (GPT_STEPS steps per rank, evaluated every GPT_EVAL steps):
#     ar            algorithm.mode = allreduce (AdamW on the mean gradient)
#     d10 d50 d200  diloco, H = 10, 50, 200, fp32 pseudo-gradient
#     d50-bf16      H = 50, bf16 on the wire
#     d50-int8      H = 50, int8 (one fp32 scale per 256 values)
#     d50-stream    H = 50, Streaming DiLoCo: 5 fragments (5 divides 50, 4
#                   does not), overlap 2 steps, merge 0.5
#     d50-sgp       H = 50, pseudo-gradients mixed by push-sum (gossip)
#   resnet, 4 ranks (RN_STEPS steps, every RN_EVAL): ar, d10, d50, d10-int8, d50-int8
#   gpt8, 8 ranks: ar, d50
#   baby, 4 ranks: ar d50 d200 d10 with the deck's "baby" GPT (4 4 128 64 12)
#   sgpm0: d50-sgp-m0, the gossip variant with outer lr 1, momentum 0
#   seed2: ar-s2 d10-s2 d50-s2, the GPT grid's runs again with run.seed = 2
#   babyseed2: ar-s2 d10-s2 of the baby GPT
# The GPT is a byte-level model on the fortunes corpus with AdamW (lr 1e-3,
# beta2 0.99, weight decay 0.1, 100 warm-up steps, cosine to 1e-4, clip 1.0;
# inputs/gpt-fortunes.ini) at GPT_SHAPE (default "2 2 64 64 12": n_layer,
# n_head, n_embd, block_size, batch; "4 4 128 64 12" is the deck's "baby").
# The ResNet is resnet20_gn on synthetic data (10 Gaussian classes, noise 1,
# 3x8x8: at CIFAR's 32x32 it stayed at chance for 200 steps) with SGD (lr
# 0.05, momentum 0.9, batch 16). DiLoCo's outer optimizer is the paper's:
# Nesterov SGD, lr 0.7, momentum 0.9, no synchronous warm-up steps.
#
# How long (2-core VM, load 11-25 from other work): 1.5-2 min per GPT variant
# at 4 ranks and 1,000 steps, 2.5-3 min at 8 ranks, about 1 min per ResNet
# variant at 400 steps, 4-8 min per baby GPT variant. The default grids
# (gpt resnet gpt8) take about 25 min, baby 22 min, seed2 4 min.
#
# Outputs (bench/out/diloco/, not committed, except the figure):
#   curves.csv     variant,model,ranks,step,val_loss,val_acc,bytes_sent,wall
#                  (val_* of the ranks' averaged model; bytes_sent: payload
#                  bytes per rank, /train/bytes_sent, mean over ranks; wall:
#                  seconds since the start, rank 0)
#   summary.csv    one row per run: final val loss/acc, bytes, wall, bytes the
#                  ranks' links carried (veth tx, all ranks), load before, and
#                  compute and communication + wait seconds per rank
#   table.md       the same against allreduce of the same model and ranks
#   runs/<model><ranks>-<variant>/  log.txt, run/ (run.h5, train.csv, eval.csv)
#   ../diloco-compare.png  val loss (GPT) and accuracy (ResNet) against steps,
#                  bytes sent and time (FIG; with another OUT: OUT/diloco-compare.png)
#
# Usage (root: network namespaces and tc):
#   bench/diloco_compare.sh                       # the grids gpt, resnet, gpt8
#   GRIDS="resnet sgpm0 baby seed2" bench/diloco_compare.sh
#   GRIDS="gpt" ONLY="ar d50" bench/diloco_compare.sh
#   GRIDS="gpt" GPT_STEPS=20 GPT_EVAL=10 ONLY=ar RANKS_GPT=2 bench/diloco_compare.sh   # smoke test
#   bench/diloco_compare.sh --plot                # only collect and plot
# Environment: DTRAIN, DTRAIN_POST (default: this tree's src/), OUT, RATE
# (1gbit), GRIDS ("gpt resnet gpt8"; also baby, sgpm0, seed2, babyseed2), ONLY (variant
# names), GPT_STEPS (1000), GPT_EVAL (100), GPT_SHAPE, RN_STEPS (400),
# RN_EVAL (50), RANKS_GPT (4),
# RANKS_RN (4), RANKS_GPT8 (8), RUN_LIMIT (s per run, 1500), FORCE=1 (rerun
# variants whose record exists), NETNS_PREFIX (dlc), FIG. Without namespaces the
# ranks share a shaped loopback (bench/network/netns.sh says so): the time
# axis is then not the switched cluster's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
DTRAIN=${DTRAIN:-$src/src/dtrain}
DTRAIN_POST=${DTRAIN_POST:-$src/src/dtrain-post}
OUT=${OUT:-$here/out/diloco}
# the committed figure only from the default output directory
if [ "$OUT" -ef "$here/out/diloco" ]; then FIG=${FIG:-$here/diloco-compare.png}; else FIG=${FIG:-$OUT/diloco-compare.png}; fi
RATE=${RATE:-1gbit}
GRIDS=${GRIDS:-"gpt resnet gpt8"}
ONLY=${ONLY:-}
GPT_STEPS=${GPT_STEPS:-1000}
GPT_EVAL=${GPT_EVAL:-100}
GPT_SHAPE=${GPT_SHAPE:-"2 2 64 64 12"}
RN_STEPS=${RN_STEPS:-400}
RN_EVAL=${RN_EVAL:-50}
RANKS_GPT=${RANKS_GPT:-4}
RANKS_RN=${RANKS_RN:-4}
RANKS_GPT8=${RANKS_GPT8:-8}
RUN_LIMIT=${RUN_LIMIT:-1500}
FINALIZE_GRACE=${FINALIZE_GRACE:-3}
FORCE=${FORCE:-0}
export NETNS_PREFIX=${NETNS_PREFIX:-dlc}
PLOT_ONLY=0
[ "${1:-}" = --plot ] && PLOT_ONLY=1

for exe in "$DTRAIN" "$DTRAIN_POST"; do
    [ -x "$exe" ] || { echo "diloco_compare: $exe not found (set DTRAIN/DTRAIN_POST)" >&2; exit 1; }
done
mkdir -p "$OUT/runs"

# variant name -> the deck overrides that make it
variant_args() {
    case $1 in
        *-s[0-9]*) echo "run.seed=${1##*-s} $(variant_args "${1%-s*}")" ;;
        ar) echo "algorithm.mode=allreduce" ;;
        d10 | d50 | d200) echo "algorithm.mode=diloco diloco.inner_steps=${1#d}" ;;
        d10-int8 | d50-int8) echo "algorithm.mode=diloco diloco.inner_steps=$(h_of "$1") diloco.precision=int8" ;;
        d50-bf16) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.precision=bf16" ;;
        d50-stream) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.fragments=5 diloco.overlap=2 diloco.merge=0.5" ;;
        d50-sgp) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.outer_comm=sgp" ;;
        d50-sgp-m0) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.outer_comm=sgp diloco.outer_momentum=0 diloco.outer_lr=1" ;;
        *) echo "diloco_compare: unknown variant '$1'" >&2; return 1 ;;
    esac
}
h_of() { local h=${1#d}; echo "${h%%-*}"; }

# grid -> "model ranks variants"
grid_def() {
    case $1 in
        gpt) echo "gpt $RANKS_GPT ar d10 d50 d200 d50-bf16 d50-int8 d50-stream d50-sgp" ;;
        resnet) echo "resnet $RANKS_RN ar d10 d50 d10-int8 d50-int8" ;;
        gpt8) echo "gpt $RANKS_GPT8 ar d50" ;;
        baby) echo "gptb $RANKS_GPT ar d50 d200 d10" ;;
        seed2) echo "gpt $RANKS_GPT ar-s2 d10-s2 d50-s2" ;;
        babyseed2) echo "gptb $RANKS_GPT ar-s2 d10-s2" ;;
        sgpm0) echo "gpt $RANKS_GPT d50-sgp-m0" ;;
        *) echo "diloco_compare: unknown grid '$1' (gpt, resnet, gpt8, baby, seed2, babyseed2, sgpm0)" >&2; return 1 ;;
    esac
}

# model -> deck and the overrides every variant of it shares
model_args() {
    case $1 in
        gpt | gptb)
            if [ "$1" = gptb ]; then read -r L H C T B <<<"4 4 128 64 12"
            else read -r L H C T B <<<"$GPT_SHAPE"; fi
            echo "$src/inputs/gpt-fortunes.ini model.n_layer=$L model.n_head=$H model.n_embd=$C" \
                "model.block_size=$T optim.batch_size=$B run.max_steps=$GPT_STEPS" \
                "run.log_every=$((GPT_EVAL / 2)) run.eval_every=$GPT_EVAL run.checkpoint_every=0" \
                "data.test_limit=250"
            ;;
        resnet)
            echo "$OUT/resnet.ini run.max_steps=$RN_STEPS run.log_every=$((RN_EVAL / 2))" \
                "run.eval_every=$RN_EVAL"
            ;;
    esac
}

write_resnet_deck() {
    cat >"$OUT/resnet.ini" <<'EOF'
; resnet20_gn on synthetic 3x8x8 data, 10 classes (written by bench/diloco_compare.sh).
; 8x8, not CIFAR's 32x32: the class centres are white noise, which the
; convolutions and the global average pool did not pick up at 32x32 within
; 200 steps (chance accuracy); at 8x8 the network learns them.
[run]
seed = 1
epochs = 100
checkpoint_every = 0
[algorithm]
mode = allreduce
[model]
name = resnet20_gn
[data]
name = synthetic
synthetic_train = 8192
synthetic_test = 512
synthetic_classes = 10
synthetic_channels = 3
synthetic_height = 8
synthetic_width = 8
synthetic_noise = 1.0
[optim]
name = sgd
lr = 0.05
batch_size = 16
momentum = 0.9
EOF
}

veth_tx_total() {
    net_stats | awk '{ s += $2 } END { printf "%.0f\n", s }'
}

# run one variant: KEY RANKS ARGS...
run_one() {
    local key=$1 n=$2 dir log pid start done_at status tx0 tx1 load
    shift 2
    dir=$OUT/runs/$key
    log=$dir/log.txt
    if [ "$FORCE" != 1 ] && [ -f "$dir/run/eval.csv" ] && grep -q '^done:' "$log" 2>/dev/null; then
        echo "# $key: kept (FORCE=1 reruns it)"
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    load=$(cut -d' ' -f1 /proc/loadavg)
    tx0=$(veth_tx_total)
    echo "# $(date -u +%T) $key: $n ranks, load $load: $*" | tee "$dir/meta.txt"
    start=$(date +%s.%N)
    env LD_PRELOAD="$OUT/yield_poll.so" \
        mpiexec -n "$n" "$here/network/netns-exec.sh" "$DTRAIN" "$@" \
        run.output_dir="$dir/run" run.overwrite=true >"$log" 2>&1 &
    pid=$!
    done_at=
    status=ok
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.5
        if [ -z "$done_at" ] && grep -q '^done:' "$log"; then done_at=$SECONDS; fi
        # MPI_Finalize over UCX's TCP transport can hang (bench/network/README.md):
        # the record is complete once rank 0 printed "done:"
        if [ -n "$done_at" ] && [ $((SECONDS - done_at)) -ge "$FINALIZE_GRACE" ]; then
            for p in $(descendants "$pid"); do kill -9 "$p" 2>/dev/null; done
            break
        fi
        if awk -v s="$start" -v now="$(date +%s.%N)" -v l="$RUN_LIMIT" 'BEGIN { exit !(now - s > l) }'; then
            echo "# $key: no end after $RUN_LIMIT s; ending its ranks" >&2
            status=timeout
            for p in $(descendants "$pid"); do kill -9 "$p" 2>/dev/null; done
            break
        fi
    done
    wait "$pid" 2>/dev/null
    tx1=$(veth_tx_total)
    grep -q '^done:' "$log" || status=${status/ok/failed}
    echo "status $status wall $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')" \
        "veth_tx $((tx1 - tx0)) load_before $load" >>"$dir/meta.txt"
    if [ "$status" != ok ]; then
        echo "# $key: $status" >&2
        tail -5 "$log" >&2
        return 1
    fi
    "$DTRAIN_POST" csv "$dir/run" >/dev/null || return 1
    tail -1 "$dir/meta.txt"
}

collect() {
    local d key variant model n
    echo "variant,model,ranks,step,val_loss,val_acc,bytes_sent,wall" >"$OUT/curves.csv"
    echo "variant,model,ranks,steps,val_loss,val_acc,bytes_sent,wall,veth_tx,load_before,compute_s,comm_s" >"$OUT/summary.csv"
    for d in "$OUT"/runs/*/; do
        key=$(basename "$d")
        [ -f "$d/run/eval.csv" ] && [ -f "$d/run/train.csv" ] || continue
        model=${key%%[0-9]*}
        n=${key#"$model"}
        n=${n%%-*}
        variant=${key#"$model$n-"}
        # eval rows of rank 0 (the averaged model); bytes: mean over ranks of
        # the /train row at the same step
        awk -F, -v v="$variant" -v m="$model" -v n="$n" '
            FNR == 1 { next }
            FILENAME ~ /train.csv$/ { b[$1] += $13; c[$1]++; next }
            $3 == 0 { printf "%s,%s,%s,%d,%.6g,%.6g,%.0f,%.3f\n", v, m, n, $1, $11, $12,
                      ($1 in c) ? b[$1] / c[$1] : 0, $4 }' \
            "$d/run/train.csv" "$d/run/eval.csv" >>"$OUT/curves.csv"
        awk -F, -v v="$variant" -v m="$model" -v n="$n" '$1 == v && $2 == m && $3 == n { last = $0 }
            END { if (last != "") { split(last, f, ","); printf "%s,%s,%s,%s,%s,%s,%s,%s", f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8] } }' \
            "$OUT/curves.csv" >>"$OUT/summary.csv"
        awk '/^status/ { printf ",%s,%s", $6, $8 }' "$d/meta.txt" >>"$OUT/summary.csv"
        # compute and communication (+ wait) seconds, summed over the rows, mean over ranks
        awk -F, 'NR > 1 { c += $8; m += $9 + $10; r[$3] = 1 }
            END { n = length(r); printf ",%.1f,%.1f\n", c / n, m / n }' "$d/run/train.csv" >>"$OUT/summary.csv"
    done
}

variant_colour() {
    case $1 in
        ar) echo "rgb 'black'" ;; d10) echo "rgb '#1f77b4'" ;; d50) echo "rgb '#d62728'" ;;
        d200) echo "rgb '#2ca02c'" ;; d50-bf16) echo "rgb '#ff7f0e'" ;; d50-int8) echo "rgb '#9467bd'" ;;
        d10-int8) echo "rgb '#17becf'" ;; d50-stream) echo "rgb '#8c564b'" ;; d50-sgp) echo "rgb '#e377c2'" ;;
        d50-sgp-m0) echo "rgb '#bcbd22'" ;;
        *) echo "rgb 'gray'" ;;
    esac
}

plot() {
    local gp=$OUT/plot.gp rows=0 g
    for g in gpt gptb resnet; do grep -q ",$g," "$OUT/curves.csv" && rows=$((rows + 1)); done
    [ "$rows" -gt 0 ] || { echo "diloco_compare: nothing to plot" >&2; return 1; }
    # one data file per (model, ranks, variant), in the order of the grids
    rm -f "$OUT"/curve-*.dat
    awk -F, -v out="$OUT" 'NR > 1 { f = out "/curve-" $2 $3 "-" $1 ".dat"; print $4, $5, $6, $7, $8 > f }' \
        "$OUT/curves.csv"
    {
        echo "set terminal pngcairo size 1500,$((430 * rows)) font ',10'"
        echo "set output '$FIG'"
        echo "set multiplot layout $rows,3"
        echo "set termoption noenhanced; set grid; set key top right font ',8'"
        echo "set style data linespoints; set pointsize 0.6"
        local m ylab col title files f first xcol xlab
        for m in gpt gptb resnet; do
            # the second-seed repeats are in the table, not the figure
            files=$(ls "$OUT"/curve-"$m"[0-9]*-*.dat 2>/dev/null | grep -v -- '-s[0-9]*\.dat$' | sort -t- -k2,2 -V)
            [ -n "$files" ] || continue
            if [ "$m" = gpt ]; then ylab="validation loss"; col=2; title="GPT $GPT_SHAPE (fortunes)"
            elif [ "$m" = gptb ]; then ylab="validation loss"; col=2; title="GPT baby 4 4 128 64 12 (fortunes)"
            else ylab="validation accuracy"; col=3; title="resnet20_gn (synthetic 3x8x8, 10 classes)"; fi
            [ "$m" = resnet ] && echo "set key bottom right" || echo "set key top right"
            for xcol in 1 4 5; do
                case $xcol in
                    1) xlab="step (per rank)"; echo "unset logscale x" ;;
                    4) xlab="MB sent per rank (/train/bytes_sent)"; echo "set logscale x" ;;
                    5) xlab="wall time (s), emulated 1 Gbit/s cluster"; echo "unset logscale x" ;;
                esac
                echo "set title '$title'; set xlabel '$xlab'; set ylabel '$ylab'"
                first=1
                printf 'plot '
                for f in $files; do
                    [ $first = 1 ] || printf ', '
                    first=0
                    local name style
                    name=$(basename "$f" .dat)
                    name=${name#curve-"$m"}
                    # one colour per variant, dashed at 8 ranks
                    style="lc $(variant_colour "${name#*-}") dt $([ "${name%%-*}" = 8 ] && echo 2 || echo 1)"
                    if [ "$xcol" = 4 ]; then
                        printf "'%s' using (\$4/1e6):%d %s title '%s'" "$f" "$col" "$style" "${name/-/ r, }"
                    else
                        printf "'%s' using %d:%d %s title '%s'" "$f" "$xcol" "$col" "$style" "${name/-/ r, }"
                    fi
                done
                echo
            done
        done
        echo "unset multiplot"
    } >"$gp"
    gnuplot "$gp" && echo "# figure: $FIG"
}

# summary.csv -> markdown, each run against allreduce of its model and ranks
table() {
    local order="ar d10 d50 d200 d50-bf16 d50-int8 d10-int8 d50-stream d50-sgp d50-sgp-m0"
    # rows in the order model, ranks, seed, variant (as listed in $order)
    awk -F, -v order="$order" '
        BEGIN { nv = split(order, o, " "); for (i = 1; i <= nv; i++) rank_of[o[i]] = i }
        NR > 1 { v = $1; s = 0; if (v ~ /-s[0-9]+$/) { s = v; sub(/.*-s/, "", s); sub(/-s[0-9]+$/, "", v) }
                 printf "%s %03d %02d %03d,%s\n", $2, $3, s, (v in rank_of) ? rank_of[v] : 99, $0 }' \
        "$OUT/summary.csv" | sort | cut -d, -f2- >"$OUT/summary.sorted"
    awk -F, '
        FNR == NR { if ($1 == "ar") { k = $2 "," $3; arl[k] = $5; ara[k] = $6; arb[k] = $7; arw[k] = $8 }; next }
        FNR == 1 {
            print "| model | ranks | variant | steps | val loss | vs allreduce | val acc | MB sent per rank | of allreduce | MB on the links (all ranks) | wall s | of allreduce | compute s | comm+wait s | load before |"
            print "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        }
        {
            split($0, f, ","); k = f[2] "," f[3]
            # the language models by loss, the classifier by accuracy (points)
            if (!(k in arl)) vs = "-"
            else if (f[2] == "resnet") vs = sprintf("%+.1f pt acc", 100 * (f[6] - ara[k]))
            else vs = sprintf("%+.1f %%", 100 * (f[5] / arl[k] - 1))
            printf "| %s | %s | %s | %s | %.4f | %s | %.2f %% | %.2f | %s | %.1f | %.0f | %s | %s | %s | %s |\n",
                f[2], f[3], f[1], f[4], f[5], vs, 100 * f[6], f[7] / 1e6,
                (k in arb && arb[k] > 0) ? sprintf("%.4f", f[7] / arb[k]) : "-",
                f[9] / 1e6, f[8],
                (k in arw && arw[k] > 0) ? sprintf("%.2f", f[8] / arw[k]) : "-", f[11], f[12], f[10]
        }' "$OUT/summary.csv" "$OUT/summary.sorted" >"$OUT/table.md"
    rm -f "$OUT/summary.sorted"
    cat "$OUT/table.md"
}

if [ "$PLOT_ONLY" = 1 ]; then
    collect && table && plot
    exit
fi

[ "$(id -u)" = 0 ] || echo "# not root: netns.sh will fall back to a shaped loopback" >&2
# shellcheck source=network/netns.sh
. "$here/network/netns.sh"
maxn=0
for g in $GRIDS; do
    def=$(grid_def "$g") || exit 2
    read -r _ n _ <<<"$def"
    [ "$n" -gt "$maxn" ] && maxn=$n
done
trap 'net_down' EXIT
trap 'exit 130' INT TERM
net_up "$maxn" || exit 1
net_shape "$RATE" || exit 1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n MPIR_CVAR_NOLOCAL=1
if [ "$NETNS_FALLBACK" = 1 ]; then
    export UCX_NET_DEVICES=lo
    echo "# FALLBACK: loopback shared by all ranks; the time axis is not the switched cluster's" | tee -a "$OUT/log.txt"
else
    export UCX_NET_DEVICES=eth0
fi
gcc -std=c11 -O2 -shared -fPIC -o "$OUT/yield_poll.so" "$here/network/yield_poll.c" -ldl || exit 1
write_resnet_deck
echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cores; grids '$GRIDS'," \
    "rate $RATE, gpt shape '$GPT_SHAPE' $GPT_STEPS steps, resnet $RN_STEPS steps, fallback $NETNS_FALLBACK" | tee -a "$OUT/log.txt"

fails=0
for g in $GRIDS; do
    read -r model n variants <<<"$(grid_def "$g")"
    for v in $variants; do
        if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $v "* ]]; then continue; fi
        # shellcheck disable=SC2046
        run_one "$model$n-$v" "$n" $(model_args "$model") $(variant_args "$v") 2>&1 | tee -a "$OUT/log.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
    done
done
collect && table && plot
[ "$fails" = 0 ] || { echo "# $fails run(s) failed" >&2; exit 1; }
