#!/bin/bash
# Every ISA level below this machine's own, on this machine, through
# DTRAIN_MAX_CPU_ISA (avx2, and avx512_core where the CPU has more): the layer,
# fast-path, model, GPT, AdamW and Muon unit tests pass under the cap (their own
# bounds; test_fastpath also finds no oneDNN reference kernel), and a 2-rank
# allreduce run on mnist_cnn under the cap says what runs and ends at the
# loss of the run at the machine's level (relative 2e-3 after 20 steps: other
# kernels, other roundings). A bad cap (not a level, or above the CPU) stops
# every rank with one line and exit 1. The machine's own level is what every
# other test runs.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
unset DTRAIN_MAX_CPU_ISA ONEDNN_MAX_CPU_ISA

own=$("$DTRAIN" --version 2>/dev/null | sed -n 's/^  CPU ISA: *\([a-z0-9_]*\);.*/\1/p')
case "$own" in
x86_64) below=""; above=avx2 ;;
avx2) below=""; above=avx512_core ;;
avx512_core) below="avx2"; above=avx512_core_bf16 ;;
avx512_core_bf16) below="avx2 avx512_core"; above=avx512_core_amx ;;
avx512_core_amx) below="avx2 avx512_core"; above="" ;;
*) echo "not ok - dtrain --version names no CPU ISA level ('$own')"; exit 1 ;;
esac
echo "# this CPU: $own; levels tested below it: ${below:-none}"

# bad caps: every rank, one line each, exit 1
DTRAIN_MAX_CPU_ISA=avx3 run 2 60 "${srcdir:-.}/inputs/sgp-fmnist.ini"
n=$(grep -c "DTRAIN_MAX_CPU_ISA = 'avx3': not a level" "$WORK/out.txt" || true)
if [ "$RC" -ne 0 ] && [ "$n" -eq 2 ] && grep -q "this CPU offers" "$WORK/out.txt"; then
    pass "DTRAIN_MAX_CPU_ISA=avx3: exit $RC, one line on each of 2 ranks: $(head -n 1 "$WORK/out.txt" | cut -c1-150)"
else
    fail "a cap that is not a level (rc $RC, $n lines)"; sed 's/^/#   /' "$WORK/out.txt" | head -5
fi
if [ -n "$above" ]; then
    DTRAIN_MAX_CPU_ISA=$above run 2 60 "${srcdir:-.}/inputs/sgp-fmnist.ini"
    n=$(grep -c "above what this CPU has" "$WORK/out.txt" || true)
    if [ "$RC" -ne 0 ] && [ "$n" -eq 2 ]; then
        pass "DTRAIN_MAX_CPU_ISA=$above above this CPU: exit $RC, one line on each rank"
    else
        fail "a cap above the CPU (rc $RC, $n lines)"; sed 's/^/#   /' "$WORK/out.txt" | head -5
    fi
else
    pass "# SKIP a cap above the CPU: this CPU has every level"
fi

FM=/usr/share/datasets/fashion-mnist
deck="${srcdir:-.}/inputs/sgp-fmnist.ini"
train="algorithm.mode=allreduce run.max_steps=20 run.log_every=20 run.eval_every=0 data.test_limit=100"
loss_at_20() { sed -n 's/^step 20\/20 .* loss \([0-9.]*\) .*/\1/p' "$1" | head -n 1; }
ref_loss=
if [ -e "$FM/train-images-idx3-ubyte.gz" ]; then
    run 2 300 "$deck" $train run.output_dir="$WORK/own"
    ref_loss=$(loss_at_20 "$WORK/out.txt")
fi

for level in $below; do
    for t in test_layers test_fastpath test_models test_gpt test_adamw test_muon; do
        set +e
        DTRAIN_MAX_CPU_ISA=$level "$TEST_BIN/$t" >"$WORK/$t.txt" 2>&1
        rc=$?
        set -e
        # each case once more, under the level's name
        sed -n "s/^ok [0-9]* - /ok - [$level] $t: /p; s/^not ok [0-9]* - /not ok - [$level] $t: /p" \
            "$WORK/$t.txt"
        if [ "$rc" -ne 0 ]; then
            FAILS=$((FAILS + 1))
            echo "not ok - [$level] $t exited $rc"
            grep -v '^ok ' "$WORK/$t.txt" | tail -n 5 | sed 's/^/#   /'
        fi
    done
    if [ -z "$ref_loss" ]; then
        pass "# SKIP [$level] 2-rank training: $FM missing (apt-get install dataset-fashion-mnist)"
        continue
    fi
    DTRAIN_MAX_CPU_ISA=$level run 2 300 "$deck" $train run.output_dir="$WORK/$level"
    loss=$(loss_at_20 "$WORK/out.txt")
    banner=$(grep -m1 '^compute:' "$WORK/out.txt" || true)
    blocks=16 sgemm="sgemm oneDNN;"
    [ "$level" = avx2 ] && blocks=8 sgemm="sgemm oneDNN, A^T on one thread OpenBLAS;"
    if [ "$RC" -eq 0 ] && [ -n "$loss" ] &&
       awk -v a="$loss" -v b="$ref_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-3 * b) }' &&
       echo "$banner" | grep -q "^compute: $level (cap DTRAIN_MAX_CPU_ISA=$level" &&
       echo "$banner" | grep -q "on $blocks-channel blocks" && echo "$banner" | grep -qF "$sgemm" &&
       ! grep -q "reference convolution" "$WORK/out.txt"; then
        pass "[$level] 2-rank allreduce, mnist_cnn: loss $loss at step 20 (at $own: $ref_loss), no reference kernel; $banner"
    else
        fail "[$level] 2-rank allreduce (rc $RC, loss '$loss' vs '$ref_loss'): $banner"
        tail -n 5 "$WORK/out.txt" | sed 's/^/#   /'
    fi
done
finish
