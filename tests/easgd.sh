#!/bin/bash
# EASGD end to end: checkpoint then resume reproduces the uninterrupted run
# bit for bit (replicas, momentum and the center), for both center
# placements. LSGD end to end: groups of 2 with local and global leaders
# run to the end and record one row per distributed step. Bad settings of
# both stop every rank at start-up.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"
for center in replicated root; do
    e="algorithm.mode=easgd easgd.tau=3 easgd.beta=0.5 easgd.center=$center"
    run 3 120 "$D" $e run.output_dir="$WORK/full-$center" run.max_steps=24
    rcA=$RC
    run 3 120 "$D" $e run.output_dir="$WORK/part-$center" run.max_steps=10
    run 3 120 "$D" $e run.output_dir="$WORK/part-$center" run.max_steps=24 run.resume=true
    if [ $rcA -eq 0 ] && [ "$RC" -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/full-$center")" "$(last "$WORK/part-$center")" \
           params momentum easgd_center >/dev/null; then
        pass "easgd ($center center, tau 3): 10 steps + resume to 24 == 24 steps bit for bit"
    else
        fail "easgd ($center center) resume (rc $rcA/$RC)"; tail -3 "$WORK/out.txt"
    fi
done
run 4 120 "$D" algorithm.mode=lsgd lsgd.group_size=2 lsgd.tau_local=4 lsgd.tau_global=8 \
    run.output_dir="$WORK/lsgd"
rows=0
if [ "$RC" -eq 0 ] && "$DTRAIN_POST" csv "$WORK/lsgd/run.h5" -o "$WORK/lsgd/csv" >/dev/null; then
    rows=$(($(wc -l <"$WORK/lsgd/csv/lsgd.csv") - 1))
fi
# 2 epochs of 8 steps on 4 ranks = 64 local steps; one distributed step per 16
if [ "$rows" -eq 4 ] && grep -q "2 group(s) of 2 rank(s), local and global leader" "$WORK/out.txt"; then
    pass "lsgd: groups of 2, 64 local steps, 4 distributed steps recorded (leaders, pull distance)"
else
    fail "lsgd end to end (rc $RC, $rows distributed steps recorded)"; tail -3 "$WORK/out.txt"
fi
run 4 30 "$D" algorithm.mode=lsgd lsgd.tau_local=8 lsgd.tau_global=4
expect_fail "lsgd.tau_global < tau_local" "lsgd.tau_global = 4 is shorter than lsgd.tau_local = 8"
run 3 30 "$D" algorithm.mode=lsgd lsgd.group_size=2
expect_fail "lsgd groups that do not divide the ranks" "lsgd.group_size = 2 does not divide the 3 ranks"
run 2 30 "$D" algorithm.mode=easgd easgd.beta=1.5
expect_fail "easgd.beta out of range" "easgd.beta = 1.5: expected a number in \[0, 1\]"
run 2 30 "$D" algorithm.mode=easgd easgd.tau=0
expect_fail "easgd.tau = 0" "easgd.tau = 0: expected an integer"
finish
