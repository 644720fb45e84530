#!/bin/bash
# Packs what tests/gpu.sh and bench/gpu.sh need on a GPU machine that has the
# CUDA libraries and a Python with PyTorch but no MPI, HDF5, OpenBLAS or
# oneDNN: the binaries of a --with-cuda --with-nccl build, the scripts,
# MPICH's mpiexec.hydra + hydra_pmi_proxy, and every library ldd names except
# glibc's own and CUDA's (cudart, cuBLAS, cuBLASLt, NCCL: 780 MB here, found
# there by env.sh). Writes DIR/ and DIR.tar.xz (its size printed at the end;
# xz, since the GPU machine has no zstd).
#
#   bench/carry.sh BUILD_DIR DIR        e.g. bench/carry.sh ../build-cuda carry
#   OLD=/path/to/old/src/dtrain bench/carry.sh ...   also carries that binary as
#                                        src/dtrain.old (bench/gpu_check.sh's A/B)
# On the GPU machine:
#   tar -xf carry.tar.xz && . carry/env.sh && carry/tests/gpu.sh
#   . carry/env.sh && carry/bench/gpu.sh
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR DIR" >&2; exit 2; }
B=$(cd "$1" && pwd) D=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
"$B/src/dtrain" --version | grep "NCCL:.*[0-9]" >/dev/null ||
    { echo "$0: $B is not a --with-cuda --with-nccl build" >&2; exit 1; }
rm -rf "$D"
mkdir -p "$D/src" "$D/tests" "$D/bench" "$D/lib" "$D/bin"
(cd "$B" && make -s src/dtrain tests/test_gpu tests/test_nccl tests/ckcmp)
cp "$B/src/dtrain" "$D/src/"
if [ -n "${OLD:-}" ]; then
    "$OLD" --version | grep "CUDA:.*toolkit" >/dev/null || { echo "$0: OLD=$OLD is not a CUDA build" >&2; exit 1; }
    cp "$OLD" "$D/src/dtrain.old"
fi
cp "$B/tests/test_gpu" "$B/tests/test_nccl" "$B/tests/ckcmp" "$D/tests/"
cp "$SRC/tests/gpu.sh" "$SRC/tests/common.sh" "$D/tests/"
cp "$SRC/bench/gpu.sh" "$SRC/bench/gpu_check.sh" "$SRC/bench/torch_train.py" \
    "$SRC/bench/gpt_step.py" "$D/bench/"
hydra=$(command -v mpiexec.hydra) proxy=$(command -v hydra_pmi_proxy)
cp "$hydra" "$proxy" "$D/bin/"
for exe in "$D/src/"* "$D/tests/"* "$D/bin/"*; do
    [ -f "$exe" ] && file -L "$exe" | grep -q ELF || continue
    ldd "$exe" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    grep -v -E '/(libcudart|libcublas|libcublasLt|libnccl|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$D/lib/"; done
# UCX loads its transports (shared memory, TCP, verbs) from <libucs's dir>/ucx
ucs=$(ldd "$D/src/dtrain" | awk '/libucs\.so/ { print $3 }')
if [ -n "$ucs" ] && [ -d "$(dirname "$ucs")/ucx" ]; then
    mkdir -p "$D/lib/ucx"
    cp -L "$(dirname "$ucs")"/ucx/*.so.0 "$D/lib/ucx/"
fi
cat >"$D/env.sh" <<'ENV'
# Sourced on the GPU machine: the carried libraries, MPICH's launcher, and
# the CUDA libraries that machine has (the toolkit, or the pip wheels of its
# PyTorch: nvidia-cublas, nvidia-nccl-cu13, nvidia-cuda-runtime).
_c=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_cuda=
for _d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os
for p in nvidia.__path__:
    for s in sorted(os.listdir(p)):
        print(os.path.join(p, s, "lib"))' 2>/dev/null); do
    [ -d "$_d" ] && _cuda=$_cuda:$_d
done
export LD_LIBRARY_PATH=$_c/lib$_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$_c/bin:$PATH
export MPIEXEC=$_c/bin/mpiexec.hydra DTRAIN=$_c/src/dtrain TEST_BIN=$_c/tests
export HYDRA_LAUNCHER=fork
ENV
tar -C "$(dirname "$D")" -cf - "$(basename "$D")" | xz -6 -T2 >"$D.tar.xz"
du -sh "$D" "$D.tar.xz"
ldd "$D/src/dtrain" | grep -E 'cuda|cublas|nccl' | sed 's/^/# needed from the GPU machine: /'
