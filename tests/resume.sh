#!/bin/bash
# Checkpoint then resume reproduces the uninterrupted run bit for bit
# (parameters and momentum of every rank), with dropout in the model.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
m="model.name=mnist_cnn data.synthetic_height=8 data.synthetic_width=8 data.synthetic_train=256"
for np in 1 2; do
    mode=allreduce; [ $np -eq 1 ] && mode=local
    run $np 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/full$np" run.max_steps=24
    rcA=$RC
    run $np 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/part$np" run.max_steps=10
    rcB=$RC
    run $np 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/part$np" run.max_steps=24 run.resume=true
    rcC=$RC
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/full$np")" "$(last "$WORK/part$np")" >/dev/null; then
        pass "$mode on $np rank(s): 10 steps + resume to 24 == 24 steps bit for bit"
    else
        fail "$mode on $np rank(s) resume (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
    fi
done
# the resumed run record continues: its /train step column has no duplicates
if "$DTRAIN_POST" csv "$WORK/part2/run.h5" -o "$WORK/csv" >/dev/null &&
   [ "$(cut -d, -f1,3 "$WORK/csv/train.csv" | sort | uniq -d | wc -l)" -eq 0 ]; then
    pass "resumed run record has each (step, rank) once"
else
    fail "resumed run record"
fi
finish
