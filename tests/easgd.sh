#!/bin/bash
# EASGD end to end: checkpoint then resume reproduces the uninterrupted run
# bit for bit (replicas, momentum and the center), for both center
# placements; bad settings stop every rank at start-up.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"
last() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }
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
run 2 30 "$D" algorithm.mode=easgd easgd.beta=1.5
expect_fail "easgd.beta out of range" "easgd.beta = 1.5: expected a number in \[0, 1\]"
run 2 30 "$D" algorithm.mode=easgd easgd.tau=0
expect_fail "easgd.tau = 0" "easgd.tau = 0: expected an integer"
finish
