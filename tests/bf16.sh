#!/bin/bash
# compute.precision = bf16 end to end: refused at start-up, in one line naming
# what is missing, where oneDNN may not use bf16 (ONEDNN_MAX_CPU_ISA caps it
# below avx512_core_bf16: the refusal every CPU can show) or the kernels are
# the native ones; then, on a CPU with bf16, a bf16 training run that differs
# from fp32's (bf16 is in effect) and resumes bit for bit from its checkpoint.
# The same resume for the GPT language model (inputs/gpt-fortunes.ini, tiny).
# Skips the runs (exit 77 when nothing else ran) on a CPU without bf16, or
# under a DTRAIN_MAX_CPU_ISA below avx512_core_bf16.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
m="model.name=mnist_cnn data.synthetic_height=12 data.synthetic_width=12 data.synthetic_train=256"

ONEDNN_MAX_CPU_ISA=AVX512_CORE run 1 120 "$D" $m compute.precision=bf16 run.max_steps=2 \
    run.output_dir="$WORK/capped"
expect_fail "bf16 with oneDNN capped at AVX512_CORE refused" \
    "compute.precision = bf16: .*(capped at avx512_core|no bf16 instructions|DTRAIN_MAX_CPU_ISA = [a-z0-9_]* caps)"
if [ "$(grep -c 'compute.precision' "$WORK/out.txt")" -ne 1 ]; then
    fail "the refusal is one line"; sed 's/^/#   /' "$WORK/out.txt" | tail -5
fi
run 2 120 "$D" $m compute.precision=bf16 compute.kernels=native run.max_steps=2 \
    run.output_dir="$WORK/native"
expect_fail "bf16 on the native kernels refused" "compute.precision = bf16 runs on oneDNN"

run 1 120 "$D" $m compute.precision=bf16 run.max_steps=1 run.output_dir="$WORK/probe"
if [ $RC -ne 0 ] && grep -Eq 'no bf16 instructions|without oneDNN|DTRAIN_MAX_CPU_ISA = [a-z0-9_]* caps' "$WORK/out.txt"; then
    echo "# SKIP bf16 training: $(grep -m1 -o 'compute.precision = bf16.*' "$WORK/out.txt")"
    finish
    exit $?
fi
for np in 1 2; do
    mode=allreduce; [ $np -eq 1 ] && mode=local
    run $np 300 "$D" $m algorithm.mode=$mode compute.precision=bf16 \
        run.output_dir="$WORK/full$np" run.max_steps=24
    rcA=$RC
    cp "$WORK/out.txt" "$WORK/full$np.txt"
    run $np 300 "$D" $m algorithm.mode=$mode compute.precision=bf16 \
        run.output_dir="$WORK/part$np" run.max_steps=10
    rcB=$RC
    run $np 300 "$D" $m algorithm.mode=$mode compute.precision=bf16 \
        run.output_dir="$WORK/part$np" run.max_steps=24 run.resume=true
    rcC=$RC
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/full$np")" "$(last "$WORK/part$np")" >/dev/null; then
        pass "bf16 $mode on $np rank(s): 10 steps + resume to 24 == 24 steps bit for bit"
    else
        fail "bf16 $mode on $np rank(s) resume (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
    fi
done
# bf16 is in effect (other parameters than fp32's after 24 steps; trajectories
# of SGD part within a few steps, so no closeness is asked of them) and it
# learns: the synthetic classes are separable, fp32 reaches 98 % here
acc() { grep -o 'final test accuracy [0-9.]*' "$1" | grep -o '[0-9.]*$'; }
acc16=$(acc "$WORK/full1.txt")
run 1 300 "$D" $m algorithm.mode=local run.output_dir="$WORK/fp32" run.max_steps=24
if [ $RC -eq 0 ] && ! "$TEST_BIN/ckcmp" same "$(last "$WORK/fp32")" "$(last "$WORK/full1")" \
       >/dev/null 2>&1 && awk -v a="$acc16" 'BEGIN { exit !(a >= 80) }'; then
    pass "bf16 parameters after 24 steps differ from fp32's; bf16 test accuracy $acc16 % >= 80 %"
else
    fail "bf16 against fp32 (rc $RC, bf16 accuracy '$acc16')"; tail -5 "$WORK/out.txt"
fi

# The GPT (inputs/gpt-fortunes.ini with a tiny model, 10 steps of one rank):
# bf16 resumes bit for bit from a checkpoint at step 4, and its parameters
# are not fp32's (the model's bf16 products are in effect)
FORT=/usr/share/games/fortunes
GD="${srcdir:-.}/inputs/gpt-fortunes.ini"
g="algorithm.mode=local model.n_layer=1 model.n_head=2 model.n_embd=32 model.block_size=16
   optim.batch_size=8 data.test_limit=64 run.log_every=2 run.eval_every=0"
if [ ! -d "$FORT" ]; then
    echo "# SKIP bf16 GPT: no corpus at $FORT (apt-get install fortunes)"
else
    run 1 300 "$GD" $g compute.precision=bf16 run.output_dir="$WORK/gfull" run.max_steps=10
    rcA=$RC
    run 1 300 "$GD" $g compute.precision=bf16 run.output_dir="$WORK/gpart" run.max_steps=4
    rcB=$RC
    run 1 300 "$GD" $g compute.precision=bf16 run.output_dir="$WORK/gpart" run.max_steps=10 \
        run.resume=true
    rcC=$RC
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/gfull")" "$(last "$WORK/gpart")" params adam_m \
           adam_v >/dev/null &&
       "$TEST_BIN/ckcmp" all "$(last "$WORK/gfull")" "$(last "$WORK/gpart")" state:24:8 \
           >/dev/null; then
        pass "bf16 GPT (AdamW): 4 steps + resume to 10 == 10 steps bit for bit (parameters, "\
"both moments, the resume state but its wall clock)"
    else
        fail "bf16 GPT resume (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
    fi
    run 1 300 "$GD" $g run.output_dir="$WORK/gfp32" run.max_steps=10
    if [ $RC -eq 0 ] && ! "$TEST_BIN/ckcmp" same "$(last "$WORK/gfp32")" "$(last "$WORK/gfull")" \
           params >/dev/null 2>&1; then
        pass "bf16 GPT parameters after 10 steps differ from fp32's"
    else
        fail "bf16 GPT against fp32 (rc $RC)"; tail -5 "$WORK/out.txt"
    fi
fi
finish
