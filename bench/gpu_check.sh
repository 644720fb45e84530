#!/bin/bash
# Everything a session with a GPU checks, in one device call: each step under
# its own time limit (shrunk to what is left of BUDGET seconds), its output in
# $OUT/<step>.txt (at most 8 files: a device call brings back no more), a
# one-line verdict per step in $OUT/summary.txt. Made here
# (bench/carry.sh from a --with-cuda --with-nccl build), run there:
#
#   OLD=/tmp/old/src/dtrain bench/carry.sh /tmp/cusrc gpucarry/carry   # here; gpucarry/ is git-ignored
#   BUDGET=330 bash gpucarry/gpu_check.sh gpucarry/carry.tar.xz         # there, $OUT set
#
# Steps, in order (a failing step does not stop the next; the measurements
# first, so that a slow test cannot crowd them out):
#   env      nvidia-smi, the driver and CUDA versions, dtrain --version, any
#            library the carried binaries cannot find
#   test_gpu every layer and model, CUDA against CPU (tests/test_gpu)
#   bench    bench/gpu.sh: dtrain without and with compute.cuda_graphs against
#            PyTorch eager, batch 128
#   bench_old  dtrain only, src/dtrain.old where the carry has one (the build
#            before the change, on the same warm GPU); summary.txt gets the
#            ratios new/old and new/PyTorch per model
#   gpu_sh   tests/gpu.sh: 50 steps of every model, stop/resume, GPU -> CPU
#            resume, device vectors on one GPU (AdamW + clipping among them),
#            TF32, NCCL
#   bench_gpt  bench/gpu.sh's GPT rows (gpt_small and gpt2 at batch 8, 20 timed
#            steps, PyTorch eager; the GPT has not run on a GPU before)
#   ncu      if time is left: the GPU time of each kernel over NCU_STEPS (2)
#            mnist_cnn and resnet20_gn steps (Nsight Compute, one metric; it
#            adds tens of milliseconds a kernel, so a few steps only)
#   compile  with COMPILE=1: bench/gpu.sh's torch.compile rows, if time is left
# Where no GPU is visible every step says so and the script exits 77.
set -u
OUT=${OUT:-/tmp/gpu-check}
BUDGET=${BUDGET:-330}
TAR=${1:-gpucarry/carry.tar.xz}
mkdir -p "$OUT"
S="$OUT/summary.txt"
: >"$S"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((BUDGET - SECONDS)); }
# step NAME LIMIT CMD...: CMD under min(LIMIT, time left - 10) seconds
step() {
    local name=$1 lim=$2 rc t0=$SECONDS
    shift 2
    local l=$(($(left) - 10))
    [ "$l" -lt "$lim" ] && lim=$l
    if [ "$lim" -lt 20 ]; then say "$name: not run (${lim}s left)"; return; fi
    echo "== $name (limit ${lim}s, at ${SECONDS}s)"
    if [ "$(type -t "$1")" = function ]; then # a function of this script, in a child bash
        timeout -k 5 "$lim" bash -c "$1" >"$OUT/$name.txt" 2>&1
    else
        timeout -k 5 "$lim" "$@" >"$OUT/$name.txt" 2>&1
    fi
    rc=$?
    say "$name: rc $rc in $((SECONDS - t0))s"
    tail -n 25 "$OUT/$name.txt"
}

C=/tmp/gpu-carry
rm -rf "$C" && mkdir -p "$C"
tar -xf "$TAR" -C "$C" || { say "cannot unpack $TAR"; exit 1; }
C=$C/$(ls "$C")
. "$C/env.sh"
# the driver's libcuda: where the loader does not already see it
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    d=$(dirname "$(find / -xdev -name 'libcuda.so.1' 2>/dev/null | head -n 1)")
    [ -n "$d" ] && [ "$d" != . ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
fi
export PYTHON=${PYTHON:-python3} BENCH_OUT=/tmp/gpu-bench

envinfo() {
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    uname -r
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    "$DTRAIN" --version
    for b in "$DTRAIN" "$TEST_BIN"/*; do ldd "$b" | grep 'not found' | sed "s|^|$b: |"; done
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null
}
export -f envinfo
step env 30 envinfo
nvidia-smi -L >/dev/null 2>&1 || { say "no visible GPU"; exit 77; }
step test_gpu 90 "$TEST_BIN/test_gpu"
step bench 110 env TORCH_MODES=eager STEPS=${STEPS:-300} "$C/bench/gpu.sh"
# a second dtrain carried as src/dtrain.old (the build before a change): its
# rates on the same warm machine, for the before/after ratio
[ -x "$C/src/dtrain.old" ] &&
    step bench_old 50 env TORCH_MODES= GRAPHS=false DTRAIN="$C/src/dtrain.old" BENCH_OUT=/tmp/gpu-bench-o \
        STEPS=${STEPS:-300} "$C/bench/gpu.sh"
# img/s per model and side from the tables (model, batch, side, images_per_s)
awk -F'\t' 'FNR == 1 { next }
     FILENAME ~ /gpu-bench-o/ { old[$1] = $4; next }
     $3 == "dtrain" { new[$1] = $4 } $3 == "dtrain-graphs" { gr[$1] = $4 }
     $3 == "pytorch-eager" { pt[$1] = $4 }
     function ratio(a, b) { return a + 0 > 0 && b + 0 > 0 ? sprintf("x%.2f", a / b) : "x-" }
     END { for (m in new) printf "%s b128: dtrain %s img/s, old %s (%s), with CUDA graphs %s (%s), PyTorch eager %s (%s, graphs %s)\n",
           m, new[m], old[m] ? old[m] : "-", ratio(new[m], old[m]), gr[m] ? gr[m] : "-",
           ratio(gr[m], new[m]), pt[m] ? pt[m] : "-", ratio(new[m], pt[m]), ratio(gr[m], pt[m]) }' \
    /tmp/gpu-bench/gpu.tsv /tmp/gpu-bench-o/gpu.tsv 2>/dev/null | sort | tee -a "$S"
step gpu_sh 200 "$C/tests/gpu.sh"
step bench_gpt 120 env CONFIGS="gpt_small:8 gpt2:8" TORCH_MODES=eager GPT_STEPS=20 \
    BENCH_OUT=/tmp/gpu-bench-g "$C/bench/gpu.sh"

# GPU time per kernel over a few steps (Nsight Compute replays each kernel once
# for one metric): what the step's wall time is made of. The deck is the one
# bench/gpu.sh wrote (mode local, synthetic data, compute.device = cuda).
export NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
profile() {
    local model=$1 shape=$2 B=128 n=${NCU_STEPS:-2}
    echo "### $model b$B: $n steps under ncu (kernels of every step summed)"
    "$NCU" --clock-control none --target-processes all --metrics gpu__time_duration.sum \
        --print-summary per-kernel --csv \
        "$MPIEXEC" -n 1 "$DTRAIN" /tmp/gpu-bench/gpu.ini $shape model.name=$model \
        optim.batch_size=$B run.max_steps=$n run.log_every=1 run.output_dir=/tmp/ncu-$model \
        >/tmp/ncu-$model.csv 2>/tmp/ncu-$model.err
    echo "rc $? ; $(grep -c . /tmp/ncu-$model.csv) lines"
    # name, invocations, total ns (the metric's sum column)
    "$PYTHON" - /tmp/ncu-$model.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
# the header: the first row naming a kernel column (dtrain's own lines hold commas too)
first = [i for i, r in enumerate(rows) if any(x.strip('"').lower() == "kernel name" for x in r)]
if not first:
    print("no ncu rows"); sys.exit(0)
rows = rows[first[0]:]
h = rows[0]
print("header:", h)
tot = collections.defaultdict(float); cnt = collections.Counter()
def col(name):
    for i, x in enumerate(h):
        if x.strip('"').lower() == name: return i
    return None
ik, iv, ims, iu = col("kernel name"), col("invocations"), col("metric name"), col("metric unit")
isum, iavg = col("sum"), col("average")  # the summary gives min/max/average per kernel
if None in (ik, ims) or (isum is None and (iavg is None or iv is None)):
    print("\n".join(",".join(r) for r in rows[:40])); sys.exit(0)
for r in rows[1:]:
    if r[ims] != "gpu__time_duration.sum": continue
    n = int(float(r[iv].replace(",", ""))) if iv is not None else 1
    v = float(r[isum].replace(",", "")) if isum is not None else n * float(r[iavg].replace(",", ""))
    u = r[iu] if iu is not None else "ns"
    v *= {"ns": 1e-9, "nsecond": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3}.get(u, 1e-9)
    k = r[ik][:90]; tot[k] += v; cnt[k] += n
T = sum(tot.values())
print(f"GPU kernel time, all steps: {T*1e3:.2f} ms in {sum(cnt.values())} launches")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:25]:
    print(f"{v*1e3:9.3f} ms {100*v/T:5.1f}% {cnt[k]:6d}x  {k}")
PY
    tail -n 3 /tmp/ncu-$model.err
}
ncu_all() {
    [ -n "$NCU" ] || { echo "no ncu"; return 1; }
    profile mnist_cnn "data.synthetic_channels=1 data.synthetic_height=28 data.synthetic_width=28"
    NCU_STEPS=1 profile resnet20_gn \
        "data.synthetic_channels=3 data.synthetic_height=32 data.synthetic_width=32"
}
export -f profile ncu_all
step ncu 90 ncu_all
[ -n "${COMPILE:-}" ] &&
    step compile 200 env TORCH_MODES=compile STEPS=${STEPS:-300} BENCH_OUT=/tmp/gpu-bench-c \
        "$C/bench/gpu.sh"
say "total ${SECONDS}s"
