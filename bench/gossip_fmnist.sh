#!/bin/bash
# The gossip family against AllReduce: 4 ranks, Fashion-MNIST, mnist_cnn,
# 2 epochs, the decks inputs/<mode>-fmnist.ini. Prints the summary table and
# writes bench/out/gossip-fmnist.png (test accuracy against time, all modes).
# Usage: bench/gossip_fmnist.sh [BUILD_DIR] (default: the source tree).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src}
np=${NP:-4}
out=$here/out
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1 UCX_TLS=${UCX_TLS:-self,sm,tcp} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
runs=()
for mode in allreduce sgp osgp dpsgd adpsgd; do
    dir=$out/gossip-$mode
    mpiexec -n "$np" "$build/src/dtrain" "$src/inputs/$mode-fmnist.ini" run.epochs=2 \
        run.output_dir="$dir" run.overwrite=true run.eval_every=469 >"$out/gossip-$mode.log" 2>&1
    tail -1 "$out/gossip-$mode.log"
    runs+=("$dir/run.h5")
done
"$build/src/dtrain-post" summary "${runs[@]}"
"$build/src/dtrain-post" plot "${runs[@]}" -o "$out/gossip-fmnist.png"
