#!/bin/bash
# GPU training throughput: dtrain (mode local, compute.device = cuda, fp32)
# against PyTorch eager and torch.compile on the same GPU, mnist_cnn and
# resnet20_gn at batch 128 on synthetic data (1x28x28 and 3x32x32, SYNTH
# samples held on the device by PyTorch, in host memory by dtrain), and the
# GPT: "gpt_small" (6 layers, 6 heads, 384 wide, block 256, vocabulary 96) and
# "gpt2" (GPT-2 small's shape, 124 M parameters: 12/12/768, block 1,024,
# vocabulary 50,257), batch 8, AdamW, dropout 0, on an llm.c token file of
# random ids this script writes (no tokenizer); PyTorch: bench/gpt_step.py
# --device cuda --adamw (the same model, TF32 off, an AdamW step per step).
# PRECISIONS="fp32 bf16" adds the bf16 rows (dtrain compute.precision = bf16,
# PyTorch autocast). The image models run twice, without and with
# compute.cuda_graphs (sides dtrain and dtrain-graphs; GRAPHS="false" for
# one); the GPT rows with graphs too where GPT_GRAPHS="false true" (side
# dtrain-graphs-PREC), and with the attention's row-form kernels where
# GPT_ATTENTION="tiles rows" (DTRAIN_CUDA_ATTENTION=rows; side
# dtrain-rows-PREC). Goal (bench/RESULTS.md §11): dtrain >= 1.5x PyTorch
# eager's rate and >= 1.0x torch.compile's.
#
# Needs only what bench/README.md ("Carrying the GPU path") lists: the built
# dtrain, mpiexec.hydra + hydra_pmi_proxy and the libraries ldd names; no
# HDF5 tools (dtrain's rate is read from its progress lines: the img/s of each
# run.log_every window after the first, median). PyTorch is optional: where
# $PYTHON cannot import torch with CUDA, only dtrain is measured.
#
#   DTRAIN=/path/to/dtrain MPIEXEC=/path/to/mpiexec.hydra bench/gpu.sh
#   CONFIGS="mnist_cnn:128" STEPS=100 TORCH_MODES=eager bench/gpu.sh
#   CONFIGS="gpt_small:8 gpt2:8" GPT_STEPS=50 PRECISIONS="fp32 bf16" bench/gpu.sh
# Output: one line per configuration and side, and $BENCH_OUT/gpu.tsv.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DTRAIN=${DTRAIN:-$HERE/../src/dtrain}
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-python3}
BENCH_OUT=${BENCH_OUT:-/tmp/dtrain-bench}
CONFIGS=${CONFIGS:-"mnist_cnn:128 resnet20_gn:128"}
STEPS=${STEPS:-300}     # timed steps
WARMUP=${WARMUP:-30}    # untimed steps first (dtrain: the first log window)
SYNTH=${SYNTH:-8192}
TORCH_MODES=${TORCH_MODES-"eager compile"}    # PyTorch's rows: eager, torch.compile ("": none)
GPT_STEPS=${GPT_STEPS:-50}   # timed steps of a GPT (after GPT_WARMUP)
GPT_WARMUP=${GPT_WARMUP:-10}
PRECISIONS=${PRECISIONS:-fp32}
GRAPHS=${GRAPHS:-"false true"}   # the image models without and with compute.cuda_graphs
GPT_GRAPHS=${GPT_GRAPHS:-false}  # the GPT rows without and/or with compute.cuda_graphs
GPT_ATTENTION=${GPT_ATTENTION:-tiles}  # and with the attention's tiled and/or row kernels
mkdir -p "$BENCH_OUT"
[ -x "$DTRAIN" ] || { echo "bench/gpu.sh: $DTRAIN not found (set DTRAIN)" >&2; exit 1; }
"$DTRAIN" --version | grep "CUDA:.*toolkit" >/dev/null ||
    { echo "bench/gpu.sh: $DTRAIN was built without CUDA" >&2; exit 1; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu" ] || { echo "bench/gpu.sh: no visible GPU (nvidia-smi)" >&2; exit 1; }
torch_ok=0
"$PYTHON" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null && torch_ok=1
echo "# GPU: $gpu; dtrain: $("$DTRAIN" --version | head -n 1)"
[ $torch_ok -eq 1 ] && echo "# PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__)')" ||
    echo "# PyTorch with CUDA: not available to $PYTHON; dtrain only"
printf "model\tbatch\tside\trate\tgpu\n" >"$BENCH_OUT/gpu.tsv"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
record() { printf "%s\t%s\t%s\t%s\t%s\n" "$1" "$2" "$3" "$4" "$gpu" >>"$BENCH_OUT/gpu.tsv"; printf "%-12s b%-4s %-22s %10s %s\n" "$1" "$2" "$3" "$4" "${5:-img/s}"; }

# an llm.c token file (header: magic 20240520, version 1, count; uint16 ids)
# of N uniform random ids below V
token_file() {
    python3 - "$1" "$2" "$3" <<'PY'
import random, struct, sys
path, V, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(1)
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *(random.randrange(V) for _ in range(n))))
PY
}

# The most device memory the run held (dtrain's last lines: every cudaMalloc
# of its own, the CUDA context not counted, as PyTorch's max_memory_allocated)
dev_mib() { sed -n 's/^device memory: at most \([0-9]*\) MiB.*/\1/p' "$1"; }

# "; MFU x % of P TFLOP/s" (nothing without a peak P): the model FLOPs
# utilisation of RATE tok/s of a GPT (L layers, width C, block T, vocabulary
# V): 6 N + 12 L C T FLOPs a token (N the parameters but the position
# embedding; the attention's two products over every position, the causal
# half not subtracted), as nanoGPT and PaLM count
mfu() { # rate V T L C peak
    awk -v r="$1" -v V="$2" -v T="$3" -v L="$4" -v C="$5" -v P="$6" 'BEGIN {
        if (r == "" || P == "") exit
        N = V * C + L * (12 * C * C + 13 * C) + 2 * C
        printf "; MFU %.1f %% of %s TFLOP/s", 100 * r * (6 * N + 12 * L * C * T) / (P * 1e12), P }'
}
# dense peaks (TFLOP/s, SXM parts) of the GPUs named here, for mfu;
# PEAK_BF16 / PEAK_FP32 for any other
case $gpu in
*H100*SXM* | *H200*) peak_bf16=989.4 peak_fp32=66.9 ;;
*A100*) peak_bf16=312 peak_fp32=19.5 ;;
*) peak_bf16= peak_fp32= ;;
esac
PEAK_BF16=${PEAK_BF16:-$peak_bf16}
PEAK_FP32=${PEAK_FP32:-$peak_fp32}

gpt_row() { # model batch precision graphs attention
    local model=$1 B=$2 prec=$3 graphs=$4 att=$5 V T L NH C out rate ac line peak=$PEAK_FP32
    local side=dtrain
    [ "$prec" = bf16 ] && peak=$PEAK_BF16
    case $model in
    gpt_small) V=96 T=256 L=6 NH=6 C=384 ;;
    gpt2) V=50257 T=1024 L=12 NH=12 C=768 ;;
    esac
    [ "$graphs" = true ] && side=$side-graphs
    [ "$att" = rows ] && side=$side-rows
    out="$BENCH_OUT/gpu-$model-$B-$side-$prec"
    rm -rf "$out"
    [ -s "$BENCH_OUT/tokens-$V.bin" ] || token_file "$BENCH_OUT/tokens-$V.bin" "$V" 4000000
    cat >"$BENCH_OUT/gpu.ini" <<DECK
[run]
output_dir = $out
max_steps = $((GPT_WARMUP + GPT_STEPS))
log_every = $GPT_WARMUP
eval_every = 0
epochs = 1000
[algorithm]
mode = local
[model]
name = gpt
n_layer = $L
n_head = $NH
n_embd = $C
block_size = $T
vocab_size = $V
[data]
name = tokens
path = $BENCH_OUT/tokens-$V.bin
val_path = $BENCH_OUT/tokens-$V.bin
test_limit = 64
[optim]
name = adamw
lr = 1e-3
weight_decay = 0.1
batch_size = $B
warmup_steps = 0
[compute]
device = cuda
precision = $prec
DECK
    [ "$graphs" = true ] && echo "cuda_graphs = true" >>"$BENCH_OUT/gpu.ini"
    if DTRAIN_CUDA_ATTENTION=$att "$MPIEXEC" -n 1 "$DTRAIN" "$BENCH_OUT/gpu.ini" >"$out.txt" 2>&1; then
        rate=$(sed -n 's/^step [0-9]*\/.*  \([0-9.]*\) tok\/s.*/\1/p' "$out.txt" | tail -n +2 | median)
        record "$model" "$B" "$side-$prec" "$rate" \
            "tok/s (peak device MiB $(dev_mib "$out.txt")$(mfu "$rate" $V $T $L $C "$peak"))"
    else
        record "$model" "$B" "$side-$prec" "failed" "($out.txt: $(tail -n 1 "$out.txt" | cut -c1-100))"
    fi
    # PyTorch once a model and precision
    [ $torch_ok -eq 1 ] && [ "$graphs" = "${GPT_GRAPHS%% *}" ] &&
        [ "$att" = "${GPT_ATTENTION%% *}" ] || return 0
    ac=none; [ "$prec" = bf16 ] && ac=bf16
    for mode in $TORCH_MODES; do
        flag=; [ $mode = compile ] && flag=--compile
        line=$("$PYTHON" "$HERE/gpt_step.py" --device cuda --adamw --autocast $ac $flag \
               --steps "$GPT_STEPS" --rounds 3 "${model#gpt_}" 2>"$out-torch-$mode.err" |
               grep '^RESULT') || line=
        rate=$(sed -n 's/.*tok_s_best \([0-9.]*\).*/\1/p' <<<"$line")
        record "$model" "$B" "pytorch-$mode-$prec" "$rate" \
            "tok/s (best of 3; peak device MiB $(sed -n 's/.*device_mib \([0-9]*\).*/\1/p' <<<"$line")$(mfu "$rate" $V $T $L $C "$peak"))"
    done
}

image_row() { # model batch graphs shape
    local model=$1 B=$2 graphs=$3 shape=$4 side=dtrain out rate
    [ "$graphs" = true ] && side=dtrain-graphs
    out="$BENCH_OUT/gpu-$model-$B-$side"
    rm -rf "$out"
    cat >"$BENCH_OUT/gpu.ini" <<DECK
[run]
output_dir = $out
max_steps = $((WARMUP + STEPS))
log_every = $WARMUP
eval_every = 1000000
[algorithm]
mode = local
[model]
name = $model
[data]
name = synthetic
synthetic_train = $SYNTH
synthetic_test = 256
[optim]
lr = 0.02
momentum = 0.9
batch_size = $B
[compute]
device = cuda
DECK
    # only where asked: a build before the key would refuse it
    [ "$graphs" = true ] && echo "cuda_graphs = true" >>"$BENCH_OUT/gpu.ini"
    # shape: the synthetic images' keys, one word each
    # shellcheck disable=SC2086
    if "$MPIEXEC" -n 1 "$DTRAIN" "$BENCH_OUT/gpu.ini" $shape >"$out.txt" 2>&1; then
        # the img/s of every window after the first (the warm-up)
        rate=$(sed -n 's/^step [0-9]*\/.*  \([0-9.]*\) img\/s.*/\1/p' "$out.txt" | tail -n +2 | median)
        record "$model" "$B" "$side" "$rate" "img/s (peak device MiB $(dev_mib "$out.txt"))"
    else
        record "$model" "$B" "$side" "failed" "($out.txt: $(tail -n 1 "$out.txt" | cut -c1-100))"
    fi
}

for cfg in $CONFIGS; do
    model=${cfg%%:*} B=${cfg##*:}
    case $model in
    gpt_small|gpt2)
        for prec in $PRECISIONS; do
            for graphs in $GPT_GRAPHS; do
                for att in $GPT_ATTENTION; do gpt_row "$model" "$B" "$prec" "$graphs" "$att"; done
            done
        done
        continue ;;
    esac
    case $model in
    mnist_cnn) shape="data.synthetic_channels=1 data.synthetic_height=28 data.synthetic_width=28" ;;
    *) shape="data.synthetic_channels=3 data.synthetic_height=32 data.synthetic_width=32" ;;
    esac
    for graphs in $GRAPHS; do image_row "$model" "$B" "$graphs" "$shape"; done
    if [ $torch_ok -eq 1 ]; then
        for mode in $TORCH_MODES; do
            flag=; [ $mode = compile ] && flag=--compile
            line=$("$PYTHON" "$HERE/torch_train.py" --device cuda $flag --model "$model" \
                   --path synthetic --synthetic "$SYNTH" --batch "$B" --steps "$STEPS" \
                   --warmup "$WARMUP" 2>"$BENCH_OUT/gpu-$model-$B-torch-$mode.err" | tail -n 1)
            record "$model" "$B" "pytorch-$mode" "$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"$line")"
        done
    fi
done
echo "# raw: $BENCH_OUT/gpu.tsv; record the lines in bench/RESULTS.md with the GPU's name"
