#!/bin/bash
# Start-up errors of the GPU path that a machine without a GPU can provoke:
# each is one line on every rank (2 ranks: two lines), a non-zero exit, no
# hang.
#  - compute.device = cuda in a CPU-only build;
#  - comm.transport = nccl with compute.device = cpu (any build);
#  - compute.device = cuda in a CUDA build where no GPU is visible (here by
#    CUDA_VISIBLE_DEVICES= even where the machine has GPUs);
#  - with exactly one visible GPU: two ranks on one node ask for two GPUs.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/run" >"$D"

# on_every_rank NAME PATTERN NP: the last run printed PATTERN once per rank
on_every_rank() {
    local n
    n=$(grep -Ec -- "error on rank [0-9]+: .*$2" "$WORK/out.txt" || true)
    if [ "$n" -eq "$3" ]; then
        pass "$1: one line on each of the $3 ranks"
    else
        fail "$1: $n error lines for $3 ranks"; sed 's/^/#   /' "$WORK/out.txt" | tail -5
    fi
}

cuda_built=0
"$DTRAIN" --version 2>/dev/null | grep -q "CUDA:.*toolkit" && cuda_built=1

run 2 60 "$D" comm.transport=nccl compute.device=cpu
expect_fail "nccl with device = cpu" "comm.transport = nccl needs compute.device = cuda"
on_every_rank "nccl with device = cpu" "comm.transport = nccl needs" 2

if [ $cuda_built -eq 0 ]; then
    run 2 60 "$D" compute.device=cuda
    expect_fail "device = cuda in a CPU-only build" "built without CUDA"
    on_every_rank "device = cuda in a CPU-only build" "built without CUDA" 2
else
    echo "# CUDA build: the CPU-only build's error is checked in the CPU configuration"
    export CUDA_VISIBLE_DEVICES=
    run 2 60 "$D" compute.device=cuda
    expect_fail "device = cuda, no visible GPU" "no GPU is visible"
    on_every_rank "device = cuda, no visible GPU" "no GPU is visible" 2
    unset CUDA_VISIBLE_DEVICES
    ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    if [ "$ngpus" -eq 1 ]; then
        run 2 60 "$D" compute.device=cuda
        expect_fail "two ranks on one GPU" "2 ranks on this node but 1 visible GPU"
        on_every_rank "two ranks on one GPU" "2 ranks on this node but 1 visible GPU" 2
    else
        echo "# more ranks than GPUs: needs exactly one visible GPU ($ngpus here); the rule itself is tested in tests/test_gpu_plan"
    fi
fi
finish
