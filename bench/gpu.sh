#!/bin/bash
# GPU training throughput: dtrain (mode local, compute.device = cuda, fp32)
# against PyTorch eager and torch.compile on the same GPU, mnist_cnn and
# resnet20_gn at batch 128 on synthetic data (1x28x28 and 3x32x32, SYNTH
# samples held on the device by PyTorch, in host memory by dtrain).
# Goal (bench/RESULTS.md §11): dtrain >= 1.5x PyTorch eager's img/s.
#
# Needs only what bench/README.md ("Carrying the GPU path") lists: the built
# dtrain, mpiexec.hydra + hydra_pmi_proxy and the libraries ldd names; no
# HDF5 tools (dtrain's rate is read from its progress lines: the img/s of each
# run.log_every window after the first, median). PyTorch is optional: where
# $PYTHON cannot import torch with CUDA, only dtrain is measured.
#
#   DTRAIN=/path/to/dtrain MPIEXEC=/path/to/mpiexec.hydra bench/gpu.sh
#   CONFIGS="mnist_cnn:128" STEPS=100 TORCH_MODES=eager bench/gpu.sh
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
printf "model\tbatch\tside\timages_per_s\tgpu\n" >"$BENCH_OUT/gpu.tsv"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
record() { printf "%s\t%s\t%s\t%s\t%s\n" "$1" "$2" "$3" "$4" "$gpu" >>"$BENCH_OUT/gpu.tsv"; printf "%-12s b%-4s %-16s %10s img/s\n" "$1" "$2" "$3" "$4"; }

for cfg in $CONFIGS; do
    model=${cfg%%:*} B=${cfg##*:}
    case $model in
    mnist_cnn) shape="data.synthetic_channels=1 data.synthetic_height=28 data.synthetic_width=28" ;;
    *) shape="data.synthetic_channels=3 data.synthetic_height=32 data.synthetic_width=32" ;;
    esac
    out="$BENCH_OUT/gpu-$model-$B"
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
    "$MPIEXEC" -n 1 "$DTRAIN" "$BENCH_OUT/gpu.ini" $shape >"$out.txt" 2>&1 ||
        { echo "bench/gpu.sh: dtrain failed, see $out.txt" >&2; tail -n 5 "$out.txt" >&2; exit 1; }
    # the img/s of every window after the first (the warm-up)
    rate=$(sed -n 's/^step [0-9]*\/.*  \([0-9.]*\) img\/s.*/\1/p' "$out.txt" | tail -n +2 | median)
    record "$model" "$B" dtrain "$rate"
    if [ $torch_ok -eq 1 ]; then
        for mode in $TORCH_MODES; do
            flag=; [ $mode = compile ] && flag=--compile
            line=$("$PYTHON" "$HERE/torch_train.py" --device cuda $flag --model "$model" \
                   --path synthetic --synthetic "$SYNTH" --batch "$B" --steps "$STEPS" \
                   --warmup "$WARMUP" 2>"$out-torch-$mode.err" | tail -n 1)
            record "$model" "$B" "pytorch-$mode" "$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"$line")"
        done
    fi
done
echo "# raw: $BENCH_OUT/gpu.tsv; record the lines in bench/RESULTS.md with the GPU's name"
