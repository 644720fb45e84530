#!/bin/bash
# AllReduce SGD: replicas stay identical after every step (hash compared
# across ranks each step), and n ranks x batch b equals local with batch n*b.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
for np in 1 2 4; do
    run $np 300 "$D" run.output_dir="$WORK/ar$np" run.max_steps=20 run.check_replicas=true
    if [ "$RC" -eq 0 ] && "$TEST_BIN/ckcmp" replicas "$WORK/ar$np/checkpoints/$(cat "$WORK/ar$np/checkpoints/latest")" >/dev/null; then
        pass "allreduce on $np rank(s): replicas identical after each of 20 steps"
    else
        fail "allreduce on $np rank(s) (rc $RC)"; tail -5 "$WORK/out.txt"
    fi
done

# Full-batch equivalence: 64 samples; 4 ranks x 16 == 1 rank x 64 (no dropout,
# the gradient of the mean over all samples is the mean of the shard means).
common="data.synthetic_train=64 run.epochs=20 optim.momentum=0.9 model.name=mlp"
run 4 300 "$D" $common run.output_dir="$WORK/ar" optim.batch_size=16
rc1=$RC
run 1 300 "$D" $common run.output_dir="$WORK/loc" optim.batch_size=64 algorithm.mode=local
if [ $rc1 -eq 0 ] && [ "$RC" -eq 0 ] && \
   "$TEST_BIN/ckcmp" close "$WORK/ar/checkpoints/$(cat "$WORK/ar/checkpoints/latest")" \
       "$WORK/loc/checkpoints/$(cat "$WORK/loc/checkpoints/latest")" 1e-4 >"$WORK/cmp.txt"; then
    pass "allreduce 4 x 16 matches local 64 over 20 steps: $(cat "$WORK/cmp.txt")"
else
    fail "allreduce 4 x 16 vs local 64 (rc $rc1/$RC): $(cat "$WORK/cmp.txt" 2>/dev/null)"
fi
finish
