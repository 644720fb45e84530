#!/bin/bash
# DiLoCo against allreduce on an emulated cluster (bench/RESULTS.md §13b):
# every rank behind its own link shaped to RATE (default 1 Gbit/s).
#
# What it runs: every variant below as one mpiexec job, each rank in its own
# network namespace behind its own shaped link (bench/network/netns.sh: veth
# into a bridge, tbf at RATE in both directions), MPI over those links only
# (UCX_TLS=tcp,self, MPIR_CVAR_NOLOCAL=1), with bench/network/yield_poll.c
# preloaded so that waiting ranks give their core away. Equal total tokens or
# images: every variant of a model and rank count runs the same run.max_steps
# with the same batch per rank. One run at a time.
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
#
#   sparse (RANKS_SPARSE, 4) and sparse8 (RANKS_SPARSE8, 8): compressed and
#   delayed DiLoCo on the baby GPT (4 4 128 64 12), SPARSE_STEPS (990) steps
#   per rank, evaluated every SPARSE_EVAL (90) steps (multiples of H = 10 and
#   30: every evaluation falls on an outer step, and no loop is cut short),
#   each variant once per seed in SEEDS ("1 2"; suffix -sN, run.seed = N),
#   seed by seed:
#     ar            allreduce
#     dH            H in SPARSE_H ("10 30"), fp32, outer Nesterov (0.7, 0.9)
#     dH-int8       int8 on the wire (no error feedback, as in §13b)
#     dH-tk4 dH-tk2 top-k codes: density TOPK_DENSITY (0.02) of chunks of
#                   4096, 4 or 2 bits, error feedback (ef_decay 1), outer
#                   Nesterov (0.7, 0.9)
#     dH-sl2        SparseLoCo's recipe: top-k 2-bit, error feedback with
#                   ef_decay SL_BETA (0.95), outer lr 1, momentum 0
#     dH-dl         fp32, delay = 1 (the exchange overlaps the next loop)
#     dH-tk2-dl     top-k 2-bit as dH-tk2, delay = 1
#     d30-tk2-muon  top-k 2-bit at H = MUON_H (30), Muon inside
#   The grid runs the same at any RATE (RATE=100mbit for 100 Mbit/s links);
#   each RATE has its own output directory.
# Muon (optim.name = muon): lr MUON_LR (0.02, KellerJordan/Muon's), its AdamW
# part (embeddings, head, gains, biases) at MUON_ADAMW_LR (1e-3: the rate the
# AdamW runs give those same tensors, as the reference's AdamW part keeps its
# AdamW baseline's 3e-4), cosine to MUON_MIN_LR (0.002: lr / 10, the deck's
# 1e-3 -> 1e-4 shape), weight decay MUON_WD (0.01, the Muon README's: Muon's
# decoupled decay is lr * wd, so the deck's 0.1 would shrink the hidden
# matrices by 0.002 per step, 20 times the AdamW runs' 1e-4). Its
# Newton-Schulz iterations add about 2.4 GFLOP per step to the baby's 3.8 of
# forward and backward at batch 12 x 64 tokens: about 1.6 times the compute
# (an estimate from the shapes, not a measurement).
# SL_BETA: 0.95 is an assumption, not SparseLoCo's published value, which
# neither its paper nor its code could be checked for here. The decaying
# error-feedback buffer stands in for the outer momentum (0.9 in the other
# variants); 0.95 keeps its memory at 1 / (1 - 0.95) = 20 outer steps, within
# the run's 33 (H = 30) to 99 (H = 10) outer steps.
#
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
# The sparse grids: 16 variants x 2 seeds = 32 runs, one at a time.
#   sparse, 1 Gbit/s: 32 x 4-8 min (the Muon runs, by the estimate above,
#     about 1.6 times that):
#     about 2.2-4.5 h.
#   sparse, 100 Mbit/s: the same plus allreduce's wire time (4.9 MB per rank
#     and step at 12.5 MB/s: 0.39 s x 990 steps, about 6.5 min per run) and
#     fp32 H = 10's (99 exchanges, under 1 min per run): about 2.5-4.8 h.
#   sparse8, 1 Gbit/s: 8 ranks share the 2 cores, so each run's compute takes
#     about twice as long (§13b's small GPT: 1.6 times for H = 50, 2.7 for
#     allreduce): 7-16 min per DiLoCo run, 15-25 min per allreduce run,
#     about 4-8.5 h.
#   sparse8, 100 Mbit/s: plus 0.46 s x 990 steps per allreduce run (about
#     7.5 min each): about 4.3-8.8 h.
# SEEDS=1 halves each; ONLY trims variants (below).
#
# Outputs (bench/out/diloco/ for the grids above sparse, and
# bench/out/diloco-sparse/RATE/ for sparse and sparse8; not committed, except
# the figures):
#   curves.csv     variant,model,ranks,step,val_loss,val_acc,bytes_sent,wall
#                  (val_* of the ranks' averaged model; bytes_sent: payload
#                  bytes per rank, /train/bytes_sent, mean over ranks; wall:
#                  seconds since the start, rank 0's /eval clock)
#   summary.csv    one row per run: final val loss/acc, bytes, wall, bytes the
#                  ranks' links carried (veth tx, all ranks), load before,
#                  compute, communication + wait, communication and wait
#                  seconds per rank (/train/compute_time, comm_time,
#                  wait_time: summed over the rows, mean over ranks)
#   table.md       the same against allreduce of the same model and ranks
#   sparse.md, sparse.csv  (sparse grids) per rank count and variant, means
#                  over the seeds: final validation loss and its ratio to
#                  allreduce's (%), MB sent per rank and allreduce's MB over
#                  them ("x fewer bytes"), wall time, the wall time at which
#                  the variant's evaluation first reached allreduce's final
#                  loss (mean of allreduce's seeds; the first evaluation at or
#                  below it, so within SPARSE_EVAL steps) and allreduce's wall
#                  time over it (speed-up), compute, communication and wait
#                  seconds per rank
#   runs/<model><ranks>-<variant>/  log.txt, meta.txt (the overrides), run/
#                  (run.h5, train.csv, eval.csv)
#   rate           the RATE the runs used
#   bench/diloco-compare.png  val loss (GPT) and accuracy (ResNet) against steps,
#                  bytes sent and time (FIG; with another OUT: OUT/diloco-compare.png)
#   bench/diloco-sparse-RATE.png  (sparse grids) validation loss against wall
#                  time and against MB sent per rank (log scale), one row per
#                  rank count, seed means, allreduce's final loss as a line
#                  (FIG; with another OUT: OUT/diloco-sparse.png)
#
# Usage (root: network namespaces and tc):
#   bench/diloco_compare.sh                       # the grids gpt, resnet, gpt8
#   GRIDS="resnet sgpm0 baby seed2" bench/diloco_compare.sh
#   GRIDS="gpt" ONLY="ar d50" bench/diloco_compare.sh
#   GRIDS="gpt" GPT_STEPS=20 GPT_EVAL=10 ONLY=ar RANKS_GPT=2 bench/diloco_compare.sh   # smoke test
#   bench/diloco_compare.sh --plot                # only collect and plot
#   GRIDS=sparse bench/diloco_compare.sh                      # 4 ranks, 1 Gbit/s
#   GRIDS=sparse RATE=100mbit bench/diloco_compare.sh         # 4 ranks, 100 Mbit/s
#   GRIDS=sparse8 bench/diloco_compare.sh                     # 8 ranks, 1 Gbit/s
#   GRIDS=sparse8 RATE=100mbit bench/diloco_compare.sh        # 8 ranks, 100 Mbit/s
#   GRIDS=sparse RATE=100mbit bench/diloco_compare.sh --plot  # sparse.md and the figure again
#   GRIDS=sparse SEEDS=1 ONLY="ar d30 d30-tk2" SPARSE_STEPS=60 SPARSE_EVAL=30 RANKS_SPARSE=2 \
#       OUT=bench/out/diloco-smoke bench/diloco_compare.sh    # smoke test
# Environment: DTRAIN, DTRAIN_POST (default: this tree's src/), OUT, RATE
# (1gbit; any tc rate: 100mbit, 10gbit), GRIDS ("gpt resnet gpt8"; also baby,
# sgpm0, seed2, babyseed2, sparse, sparse8; sparse grids run apart from the
# others), ONLY (variant names; a name without its -sN suffix selects every
# seed of it), GPT_STEPS (1000), GPT_EVAL (100), GPT_SHAPE, RN_STEPS (400),
# RN_EVAL (50), RANKS_GPT (4), RANKS_RN (4), RANKS_GPT8 (8), SEEDS ("1 2"),
# SPARSE_STEPS (990), SPARSE_EVAL (90), SPARSE_H ("10 30"), MUON_H (30),
# RANKS_SPARSE (4), RANKS_SPARSE8 (8), TOPK_DENSITY (0.02), SL_BETA (0.95),
# MUON_LR (0.02), MUON_ADAMW_LR (1e-3), MUON_MIN_LR (0.002), MUON_WD (0.01),
# RUN_LIMIT (s per run: 1500, 3600 for the sparse grids), FORCE=1 (rerun
# variants whose record exists), NETNS_PREFIX (dlc), FIG. Without namespaces
# the ranks share a shaped loopback (bench/network/netns.sh says so): the time
# axis is then not the switched cluster's.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
DTRAIN=${DTRAIN:-$src/src/dtrain}
DTRAIN_POST=${DTRAIN_POST:-$src/src/dtrain-post}
RATE=${RATE:-1gbit}
GRIDS=${GRIDS:-"gpt resnet gpt8"}
# the sparse grids write to a directory of their own, one per RATE
SPARSE=0
OTHER=0
for g in $GRIDS; do
    case $g in sparse | sparse8) SPARSE=1 ;; *) OTHER=1 ;; esac
done
if [ "$SPARSE" = 1 ] && [ "$OTHER" = 1 ]; then
    echo "diloco_compare: run the sparse grids (sparse, sparse8) apart from the others ('$GRIDS'): they have their own OUT" >&2
    exit 2
fi
if [ "$SPARSE" = 1 ]; then
    out_default=$here/out/diloco-sparse/$RATE
    fig_default=$here/diloco-sparse-$RATE.png
    fig_name=diloco-sparse.png
else
    out_default=$here/out/diloco
    fig_default=$here/diloco-compare.png
    fig_name=diloco-compare.png
fi
OUT=${OUT:-$out_default}
ONLY=${ONLY:-}
GPT_STEPS=${GPT_STEPS:-1000}
GPT_EVAL=${GPT_EVAL:-100}
GPT_SHAPE=${GPT_SHAPE:-"2 2 64 64 12"}
RN_STEPS=${RN_STEPS:-400}
RN_EVAL=${RN_EVAL:-50}
RANKS_GPT=${RANKS_GPT:-4}
RANKS_RN=${RANKS_RN:-4}
RANKS_GPT8=${RANKS_GPT8:-8}
SEEDS=${SEEDS:-"1 2"}
SPARSE_STEPS=${SPARSE_STEPS:-990}
SPARSE_EVAL=${SPARSE_EVAL:-90}
SPARSE_H=${SPARSE_H:-"10 30"}
MUON_H=${MUON_H:-30}
RANKS_SPARSE=${RANKS_SPARSE:-4}
RANKS_SPARSE8=${RANKS_SPARSE8:-8}
TOPK_DENSITY=${TOPK_DENSITY:-0.02}
SL_BETA=${SL_BETA:-0.95}
MUON_LR=${MUON_LR:-0.02}
MUON_ADAMW_LR=${MUON_ADAMW_LR:-1e-3}
MUON_MIN_LR=${MUON_MIN_LR:-0.002}
MUON_WD=${MUON_WD:-0.01}
if [ "$SPARSE" = 1 ]; then RUN_LIMIT=${RUN_LIMIT:-3600}; else RUN_LIMIT=${RUN_LIMIT:-1500}; fi
FINALIZE_GRACE=${FINALIZE_GRACE:-3}
FORCE=${FORCE:-0}
export NETNS_PREFIX=${NETNS_PREFIX:-dlc}
PLOT_ONLY=0
[ "${1:-}" = --plot ] && PLOT_ONLY=1

for exe in "$DTRAIN" "$DTRAIN_POST"; do
    [ -x "$exe" ] || { echo "diloco_compare: $exe not found (set DTRAIN/DTRAIN_POST)" >&2; exit 1; }
done
mkdir -p "$OUT/runs"
# the committed figure only from the default output directory
if [ "$OUT" -ef "$out_default" ]; then FIG=${FIG:-$fig_default}; else FIG=${FIG:-$OUT/$fig_name}; fi

# variant name -> the deck overrides that make it
variant_args() {
    case $1 in
        *-s[0-9]*)
            local inner
            inner=$(variant_args "${1%-s*}") || return 1
            echo "run.seed=${1##*-s} $inner"
            ;;
        ar) echo "algorithm.mode=allreduce" ;;
        d10 | d50 | d200) echo "algorithm.mode=diloco diloco.inner_steps=${1#d}" ;;
        d10-int8 | d50-int8) echo "algorithm.mode=diloco diloco.inner_steps=$(h_of "$1") diloco.precision=int8" ;;
        d50-bf16) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.precision=bf16" ;;
        d50-stream) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.fragments=5 diloco.overlap=2 diloco.merge=0.5" ;;
        d50-sgp) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.outer_comm=sgp" ;;
        d50-sgp-m0) echo "algorithm.mode=diloco diloco.inner_steps=50 diloco.outer_comm=sgp diloco.outer_momentum=0 diloco.outer_lr=1" ;;
        d[0-9]*) diloco_args "$1" ;;
        *) echo "diloco_compare: unknown variant '$1'" >&2; return 1 ;;
    esac
}
h_of() { local h=${1#d}; echo "${h%%-*}"; }

# dH[-token...]: diloco with H inner steps, the paper's outer step, and per token
#   int8, bf16   that precision on the wire
#   tkB          top-k codes of B (2, 4, 8) bits, density TOPK_DENSITY of chunks
#                of 4096, error feedback (ef_decay 1)
#   slB          the same codes with SparseLoCo's recipe: outer lr 1, momentum 0,
#                ef_decay SL_BETA
#   dl           delay = 1
#   muon         the Muon inner optimizer (MUON_*)
diloco_args() {
    local h a tok toks=()
    h=$(h_of "$1")
    case $h in '' | *[!0-9]*) echo "diloco_compare: unknown variant '$1'" >&2; return 1 ;; esac
    a="algorithm.mode=diloco diloco.inner_steps=$h"
    IFS=- read -ra toks <<<"${1#d"$h"}"
    for tok in "${toks[@]}"; do
        case $tok in
            '') ;;
            int8 | bf16) a+=" diloco.precision=$tok" ;;
            tk2 | tk4 | tk8)
                a+=" diloco.compress=topk diloco.bits=${tok#tk} diloco.density=$TOPK_DENSITY"
                a+=" diloco.chunk=4096 diloco.error_feedback=true diloco.ef_decay=1" ;;
            sl2 | sl4 | sl8)
                a+=" diloco.compress=topk diloco.bits=${tok#sl} diloco.density=$TOPK_DENSITY"
                a+=" diloco.chunk=4096 diloco.error_feedback=true diloco.ef_decay=$SL_BETA"
                a+=" diloco.outer_lr=1 diloco.outer_momentum=0" ;;
            dl) a+=" diloco.delay=1" ;;
            muon)
                a+=" optim.name=muon optim.lr=$MUON_LR optim.adamw_lr=$MUON_ADAMW_LR"
                a+=" optim.min_lr=$MUON_MIN_LR optim.weight_decay=$MUON_WD" ;;
            *) echo "diloco_compare: unknown variant '$1' (token '$tok')" >&2; return 1 ;;
        esac
    done
    echo "$a"
}

# the sparse grids' variant names without seeds, in the order of the table
sparse_bases() {
    local h v out="ar"
    for h in $SPARSE_H; do
        for v in "" -int8 -tk4 -tk2 -sl2 -dl -tk2-dl; do out+=" d$h$v"; done
    done
    echo "$out d$MUON_H-tk2-muon"
}

# ... and with seeds, seed by seed (a partial grid has whole seeds first)
sparse_variants() {
    local s v out=
    for s in $SEEDS; do
        for v in $(sparse_bases); do out+=" $v-s$s"; done
    done
    echo "$out"
}

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
        sparse) echo "baby $RANKS_SPARSE $(sparse_variants)" ;;
        sparse8) echo "baby $RANKS_SPARSE8 $(sparse_variants)" ;;
        *) echo "diloco_compare: unknown grid '$1' (gpt, resnet, gpt8, baby, seed2, babyseed2, sgpm0, sparse, sparse8)" >&2; return 1 ;;
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
        baby)
            # the sparse grids: the baby GPT, SPARSE_STEPS steps
            echo "$src/inputs/gpt-fortunes.ini model.n_layer=4 model.n_head=4 model.n_embd=128" \
                "model.block_size=64 optim.batch_size=12 run.max_steps=$SPARSE_STEPS" \
                "run.log_every=$((SPARSE_EVAL / 2)) run.eval_every=$SPARSE_EVAL" \
                "run.checkpoint_every=0 data.test_limit=250"
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
    echo "variant,model,ranks,steps,val_loss,val_acc,bytes_sent,wall,veth_tx,load_before,compute_s,comm_s,comm_time_s,wait_s" >"$OUT/summary.csv"
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
        # compute, communication + wait, communication and wait seconds, summed
        # over the rows, mean over ranks
        awk -F, 'NR > 1 { c += $8; m += $9; w += $10; r[$3] = 1 }
            END { n = length(r); printf ",%.1f,%.1f,%.1f,%.1f\n", c / n, (m + w) / n, m / n, w / n }' \
            "$d/run/train.csv" >>"$OUT/summary.csv"
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

# "1 Gbit/s" for the RATE the runs of OUT used
rate_label() {
    local r
    r=$(cat "$OUT/rate" 2>/dev/null || echo "$RATE")
    r=${r,,}
    case $r in
        *gbit) echo "${r%gbit} Gbit/s" ;;
        *mbit) echo "${r%mbit} Mbit/s" ;;
        *) echo "$r" ;;
    esac
}

plot() {
    local gp=$OUT/plot.gp rows=0 g rl
    rl=$(rate_label)
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
                    5) xlab="wall time (s), emulated $rl cluster"; echo "unset logscale x" ;;
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

# sparse grids: per rank count and variant, the means over its seeds against
# allreduce's (sparse.md, sparse.csv)
sparse_table() {
    awk -F, -v order="$(sparse_bases)" -v out="$OUT/sparse.csv" -v rate="$(rate_label)" \
        -v every="$SPARSE_EVAL" '
        function base(v) { sub(/-s[0-9]+$/, "", v); return v }
        FNR == 1 { next }
        FILENAME ~ /curves\.csv$/ {
            if ($2 != "baby") next
            k = $3 SUBSEP $1
            i = ++nr[k]; st[k, i] = $4 + 0; lo[k, i] = $5 + 0; wa[k, i] = $8 + 0
            # the final evaluation: the last row of the largest step
            if (!(k in ls) || $4 + 0 >= ls[k]) { ls[k] = $4 + 0; fl[k] = $5 + 0; fb[k] = $7 + 0; fw[k] = $8 + 0 }
            next
        }
        FILENAME ~ /summary\.csv$/ {
            if ($2 != "baby") next
            k = $3 SUBSEP $1; comp[k] = $11 + 0; cm[k] = $13 + 0; wt[k] = $14 + 0
            next
        }
        END {
            nv = split(order, o, " ")
            for (i = 1; i <= nv; i++) listed[o[i]] = 1
            nrk = 0
            for (k in nr) {
                split(k, a, SUBSEP); g = a[1] SUBSEP base(a[2])
                if (!(a[1] in seenr)) { seenr[a[1]] = 1; rk[++nrk] = a[1] + 0 }
                ns[g]++; ml[g] += fl[k]; mb[g] += fb[k]; mw[g] += fw[k]
                if (k in comp) { nc[g]++; mcomp[g] += comp[k]; mcm[g] += cm[k]; mwt[g] += wt[k] }
                if (!(base(a[2]) in listed) && !((a[1], base(a[2])) in extra_seen)) {
                    extra_seen[a[1], base(a[2])] = 1; extra[a[1]] = extra[a[1]] " " base(a[2])
                }
            }
            for (i = 2; i <= nrk; i++) {
                x = rk[i]; for (j = i - 1; j >= 1 && rk[j] > x; j--) rk[j + 1] = rk[j]; rk[j + 1] = x
            }
            for (g in ns) {
                ml[g] /= ns[g]; mb[g] /= ns[g]; mw[g] /= ns[g]
                if (nc[g]) { mcomp[g] /= nc[g]; mcm[g] /= nc[g]; mwt[g] /= nc[g] }
            }
            # per run: the first evaluation at or below the allreduce final loss
            for (k in nr) {
                split(k, a, SUBSEP); g = a[1] SUBSEP base(a[2]); t = a[1] SUBSEP "ar"
                if (!(t in ns)) continue
                best = 0
                for (i = 1; i <= nr[k]; i++)
                    if (lo[k, i] <= ml[t] && (best == 0 || st[k, i] < st[k, best])) best = i
                if (best) { nh[g]++; hw[g] += wa[k, best]; hs[g] += st[k, best] }
            }
            print "ranks,variant,seeds,val_loss,of_allreduce,mb_sent,fewer_bytes,wall_s,target_loss,seeds_reached,t_target_s,step_target,speedup,compute_s,comm_s,wait_s" > out
            printf "GPT baby (4 4 128 64 12), %s links; means over seeds; the target is allreduce'"'"'s final validation loss (mean of its seeds)\n\n", rate
            print "| ranks | variant | seeds | val loss | of allreduce | MB sent per rank | x fewer bytes | wall s | s to allreduce'"'"'s final loss | speed-up | compute s | comm s | wait s |"
            print "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
            for (ri = 1; ri <= nrk; ri++) {
                r = rk[ri] ""; t = r SUBSEP "ar"
                nlist = split(order extra[r], vl, " ")
                for (vi = 1; vi <= nlist; vi++) {
                    g = r SUBSEP vl[vi]
                    if (!(g in ns)) continue
                    of = (t in ns) ? sprintf("%.1f %%", 100 * ml[g] / ml[t]) : "-"
                    fr = "-"
                    if ((t in ns) && mb[g] > 0) { x = mb[t] / mb[g]; fr = sprintf(x >= 100 ? "%.0fx" : "%.1fx", x) }
                    if (!(t in ns)) { tt = "-"; su = "-" }
                    else if (nh[g] == 0) { tt = "not reached"; su = "-" }
                    else {
                        tt = sprintf("%.0f (step %.0f%s)", hw[g] / nh[g], hs[g] / nh[g],
                                     nh[g] < ns[g] ? sprintf("; %d of %d seeds", nh[g], ns[g]) : "")
                        su = sprintf("%.2fx", mw[t] / (hw[g] / nh[g]))
                    }
                    cs = nc[g] ? sprintf("%.1f | %.1f | %.1f", mcomp[g], mcm[g], mwt[g]) : "- | - | -"
                    printf "| %s | %s | %d | %.4f | %s | %.3f | %s | %.0f | %s | %s | %s |\n",
                        r, vl[vi], ns[g], ml[g], of, mb[g] / 1e6, fr, mw[g], tt, su, cs
                    c5 = (t in ns) ? sprintf("%.6g", ml[g] / ml[t]) : ""
                    c7 = ((t in ns) && mb[g] > 0) ? sprintf("%.6g", mb[t] / mb[g]) : ""
                    c9 = (t in ns) ? sprintf("%.6g", ml[t]) : ""
                    c11 = nh[g] ? sprintf("%.1f", hw[g] / nh[g]) : ""
                    c12 = nh[g] ? sprintf("%.0f", hs[g] / nh[g]) : ""
                    c13 = nh[g] ? sprintf("%.4g", mw[t] / (hw[g] / nh[g])) : ""
                    c14 = nc[g] ? sprintf("%.1f,%.1f,%.1f", mcomp[g], mcm[g], mwt[g]) : ",,"
                    printf "%s,%s,%d,%.6g,%s,%.6g,%s,%.1f,%s,%d,%s,%s,%s,%s\n", r, vl[vi], ns[g], ml[g], c5,
                        mb[g] / 1e6, c7, mw[g], c9, nh[g], c11, c12, c13, c14 > out
                }
            }
            printf "\nval loss: the ranks'"'"' averaged model at the last step; MB sent: /train/bytes_sent, the payload a rank\n"
            printf "contributes (its own codes for top-k), mean over ranks; x fewer bytes: allreduce'"'"'s MB over the variant'"'"'s;\n"
            printf "wall: rank 0'"'"'s /eval clock at the final evaluation; s to allreduce'"'"'s final loss: the same clock at the\n"
            printf "first evaluation (every %s steps) at or below it; speed-up: allreduce'"'"'s wall over that; compute, comm,\n", every
            printf "wait: /train/compute_time, comm_time, wait_time summed over the run, mean over ranks (per rank).\n"
            printf "dH: DiLoCo, H inner steps, fp32; -int8; -tk4/-tk2: top-k 4/2-bit codes with error feedback; -sl2: SparseLoCo'"'"'s\n"
            printf "recipe (top-k 2-bit, outer lr 1, momentum 0, ef_decay < 1); -dl: delay = 1; -muon: Muon inside (meta.txt of each\n"
            printf "run lists its overrides).\n"
        }' "$OUT/curves.csv" "$OUT/summary.csv" | tee "$OUT/sparse.md"
}

# the line style of a sparse variant: colour by the codes, dashed beyond the
# first H, open points and thick for the delayed ones
sparse_style() {
    local v=$1 lc dt=1 pt=7 lw=1.2 first
    [ "$v" = ar ] && { echo "lc rgb 'black' lw 2.5 pt 7"; return; }
    case $v in
        *-muon*) lc="'#8c564b'" ;;
        *-sl*) lc="'#2ca02c'" ;;
        *-tk2*) lc="'#d62728'" ;;
        *-tk4*) lc="'#ff7f0e'" ;;
        *-int8*) lc="'#9467bd'" ;;
        *) lc="'#1f77b4'" ;;
    esac
    first=${SPARSE_H%% *}
    [ "$(h_of "$v")" = "$first" ] || dt=2
    case $v in *-dl*) pt=6; lw=2.2 ;; esac
    echo "lc rgb $lc dt $dt pt $pt lw $lw"
}

# sparse grids: validation loss against wall time and against MB sent per
# rank, seed means, one row per rank count
sparse_plot() {
    local gp=$OUT/sparse-plot.gp rl r rks nrk f v vars t first xcol steps
    rl=$(rate_label)
    rm -f "$OUT"/sparse-*.dat
    # per (ranks, variant, step): mean over seeds of loss, MB sent, wall
    awk -F, -v out="$OUT" 'NR > 1 && $2 == "baby" {
            v = $1; sub(/-s[0-9]+$/, "", v); k = $3 "-" v SUBSEP $4
            n[k]++; l[k] += $5; b[k] += $7; w[k] += $8
        }
        END { for (k in n) { split(k, a, SUBSEP)
                  printf "%d %.6g %.6g %.3f\n", a[2], l[k] / n[k], b[k] / n[k] / 1e6, w[k] / n[k] > (out "/sparse-" a[1] ".dat") } }' \
        "$OUT/curves.csv"
    for f in "$OUT"/sparse-*.dat; do [ -f "$f" ] && sort -n -o "$f" "$f"; done
    rks=$(awk -F, 'NR > 1 && $2 == "baby" { print $3 }' "$OUT/curves.csv" | sort -nu)
    [ -n "$rks" ] || { echo "diloco_compare: no sparse-grid runs to plot" >&2; return 1; }
    nrk=$(echo "$rks" | wc -l)
    steps=$(awk -F, 'NR > 1 && $2 == "baby" && $4 + 0 > s { s = $4 + 0 } END { print s }' "$OUT/curves.csv")
    {
        echo "set terminal pngcairo size 1700,$((480 * nrk)) font ',10'"
        echo "set output '$FIG'"
        echo "set multiplot layout $nrk,2"
        echo "set termoption noenhanced; set grid; set key outside right top font ',7'"
        echo "set style data linespoints; set pointsize 0.5"
        for r in $rks; do
            # the grid's variants in table order, then any other found
            vars=$(sparse_bases)
            for f in "$OUT"/sparse-"$r"-*.dat; do
                [ -f "$f" ] || continue
                v=${f##*/sparse-"$r"-}
                v=${v%.dat}
                [[ " $vars " == *" $v "* ]] || vars+=" $v"
            done
            t=$(awk -F, -v r="$r" 'NR > 1 && $1 == r && $2 == "ar" { print $9 }' "$OUT/sparse.csv")
            for xcol in 4 3; do
                if [ "$xcol" = 4 ]; then
                    echo "unset logscale x; set xlabel 'wall time (s), emulated $rl links'"
                else
                    echo "set logscale x; set xlabel 'MB sent per rank (/train/bytes_sent), log scale'"
                fi
                echo "set title 'GPT baby 4 4 128 64 12, $r ranks, $steps steps per rank (mean of seeds)'"
                echo "set ylabel 'validation loss'"
                printf 'plot '
                first=1
                for v in $vars; do
                    f=$OUT/sparse-$r-$v.dat
                    [ -f "$f" ] || continue
                    [ "$first" = 1 ] || printf ', '
                    first=0
                    printf "'%s' using %d:2 %s title '%s'" "$f" "$xcol" "$(sparse_style "$v")" "$v"
                done
                [ -n "$t" ] && printf ", %s with lines lc rgb 'gray40' dt 3 lw 1.5 title 'allreduce final %.4f'" "$t" "$t"
                echo
            done
        done
        echo "unset multiplot"
    } >"$gp"
    gnuplot "$gp" && echo "# figure: $FIG"
}

# collect, then the table and figure of each kind of grid found in OUT
report() {
    local rc=0 found=0
    collect || return 1
    if awk -F, 'NR > 1 && $2 != "baby" { f = 1 } END { exit !f }' "$OUT/curves.csv"; then
        found=1
        { table && plot; } || rc=1
    fi
    if awk -F, 'NR > 1 && $2 == "baby" { f = 1 } END { exit !f }' "$OUT/curves.csv"; then
        found=1
        { sparse_table && sparse_plot; } || rc=1
    fi
    [ "$found" = 1 ] || { echo "diloco_compare: no finished runs in $OUT/runs" >&2; return 1; }
    return "$rc"
}

if [ "$PLOT_ONLY" = 1 ]; then
    report
    exit
fi

[ "$(id -u)" = 0 ] || echo "# not root: netns.sh will fall back to a shaped loopback" >&2
# shellcheck source=network/netns.sh
. "$here/network/netns.sh"
maxn=0
for g in $GRIDS; do
    def=$(grid_def "$g") || exit 2
    read -r _ n vs <<<"$def"
    [ "$n" -gt "$maxn" ] && maxn=$n
    for v in $vs; do variant_args "$v" >/dev/null || exit 2; done
done
if [ "$SPARSE" = 1 ]; then
    for h in $SPARSE_H $MUON_H; do
        if [ $((SPARSE_STEPS % h)) != 0 ] || [ $((SPARSE_EVAL % h)) != 0 ]; then
            echo "# note: SPARSE_STEPS ($SPARSE_STEPS) or SPARSE_EVAL ($SPARSE_EVAL) is not a multiple of H = $h:" \
                "evaluations inside an outer loop score the ranks' average, and a last loop cut short takes no outer step" >&2
        fi
    done
fi
trap 'net_down' EXIT
trap 'exit 130' INT TERM
net_up "$maxn" || exit 1
net_shape "$RATE" || exit 1
echo "$RATE" >"$OUT/rate"
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
if [ "$SPARSE" = 1 ]; then
    what="baby GPT $SPARSE_STEPS steps, eval every $SPARSE_EVAL, seeds '$SEEDS'"
else
    what="gpt shape '$GPT_SHAPE' $GPT_STEPS steps, resnet $RN_STEPS steps"
fi
echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cores; grids '$GRIDS'," \
    "rate $RATE, $what, fallback $NETNS_FALLBACK" | tee -a "$OUT/log.txt"

fails=0
for g in $GRIDS; do
    read -r model n variants <<<"$(grid_def "$g")"
    for v in $variants; do
        # ONLY names a variant, or every seed of it without its -sN
        if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $v "* || " $ONLY " == *" ${v%-s[0-9]*} "* ]]; then continue; fi
        # shellcheck disable=SC2046
        run_one "$model$n-$v" "$n" $(model_args "$model") $(variant_args "$v") 2>&1 | tee -a "$OUT/log.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || fails=$((fails + 1))
    done
done
report
[ "$fails" = 0 ] || { echo "# $fails run(s) failed" >&2; exit 1; }
