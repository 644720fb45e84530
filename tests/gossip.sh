#!/bin/bash
# Gossip modes: closed-form properties (test_gossip under mpiexec), SGP on the
# complete graph equals AllReduce, checkpoint/resume bit for bit for sgp,
# osgp (tau 0) and dpsgd, and clear errors for invalid graphs.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
set +e
timeout -k 5 300 "$MPIEXEC" -n 4 "$TEST_BIN/test_gossip" >"$WORK/unit.txt" 2>&1
rc=$?
set -e
grep -E '^(ok|not ok)' "$WORK/unit.txt" | sed 's/^/# test_gossip: /'
grep -Eq '^not ok' "$WORK/unit.txt" && fail "test_gossip has failing checks" || true
[ $rc -eq 0 ] && pass "test_gossip on 4 ranks ($(grep -c '^ok' "$WORK/unit.txt") checks)" \
    || { fail "test_gossip exit $rc"; tail -5 "$WORK/unit.txt"; }

D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"

# SGP with uniform weights on the complete graph averages exactly like AllReduce
common="run.max_steps=24 optim.momentum=0.9"
run 4 300 "$D" $common run.output_dir="$WORK/sgpc" algorithm.mode=sgp algorithm.topology=complete
rc1=$RC
run 4 300 "$D" $common run.output_dir="$WORK/arc" algorithm.mode=allreduce
if [ $rc1 -eq 0 ] && [ "$RC" -eq 0 ] &&
   "$TEST_BIN/ckcmp" close "$(last "$WORK/sgpc")" "$(last "$WORK/arc")" 1e-5 >"$WORK/cmp.txt"; then
    pass "sgp on the complete graph equals allreduce over 24 steps: $(cat "$WORK/cmp.txt")"
else
    fail "sgp complete vs allreduce (rc $rc1/$RC): $(cat "$WORK/cmp.txt" 2>/dev/null)"
fi

# checkpoint + resume == uninterrupted, bit for bit (parameters, momentum, mode state)
m="model.name=mnist_cnn data.synthetic_height=8 data.synthetic_width=8 data.synthetic_train=256"
for mode in sgp osgp dpsgd; do
    extra=
    [ $mode = sgp ] && extra="algorithm.topology=exponential"
    run 2 300 "$D" $m $extra algorithm.mode=$mode run.output_dir="$WORK/f$mode" run.max_steps=20
    rcA=$RC
    run 2 300 "$D" $m $extra algorithm.mode=$mode run.output_dir="$WORK/p$mode" run.max_steps=9
    rcB=$RC
    run 2 300 "$D" $m $extra algorithm.mode=$mode run.output_dir="$WORK/p$mode" run.max_steps=20 run.resume=true
    rcC=$RC
    sets="params momentum"
    [ $mode = sgp ] && sets="params momentum push_sum_weight"
    [ $mode = osgp ] && sets="params momentum push_sum_weight osgp_pending"
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/f$mode")" "$(last "$WORK/p$mode")" $sets >/dev/null; then
        pass "$mode on 2 ranks: 9 steps + resume to 20 == 20 steps bit for bit ($sets)"
    else
        fail "$mode resume (rc $rcA/$rcB/$rcC)"; tail -3 "$WORK/out.txt"
    fi
done

# AD-PSGD: 2, 4 and 8 ranks finish (no deadlock, exchanges drained)
for np in 2 4 8; do
    run $np 300 "$D" algorithm.mode=adpsgd run.output_dir="$WORK/ad$np" run.max_steps=24
    if [ "$RC" -eq 0 ] && grep -q "asynchronous run ended" "$WORK/out.txt"; then
        pass "adpsgd on $np ranks ends cleanly: $(grep -o 'local steps per rank.*' "$WORK/out.txt")"
    else
        fail "adpsgd on $np ranks (rc $RC)"; tail -3 "$WORK/out.txt"
    fi
done
# a slow rank (100 ms sleep per step on rank 1) does not hold the others back
run 4 300 "$D" algorithm.mode=adpsgd run.output_dir="$WORK/slow" run.max_steps=40 \
    model.name=mnist_cnn data.synthetic_height=12 data.synthetic_width=12 \
    run.test_delay_rank=1 run.test_delay_ms=100 run.log_every=1
"$DTRAIN_POST" csv "$WORK/slow/run.h5" -o "$WORK/slowcsv" >/dev/null 2>&1 || true
steps=$(awk -F, 'NR>1 {if ($1 > m[$3]) m[$3] = $1} END {print m[0], m[1], m[2], m[3]}' "$WORK/slowcsv/train.csv" 2>/dev/null)
set -- $steps
if [ "$RC" -eq 0 ] && [ $# -eq 4 ] && [ "$2" -lt "$1" ] && [ "$2" -lt "$3" ] && [ "$2" -lt "$4" ]; then
    pass "adpsgd with rank 1 slowed: local steps per rank $steps (the slow rank did fewest)"
else
    fail "adpsgd slow rank (rc $RC, steps '$steps')"; tail -3 "$WORK/out.txt"
fi
# AD-PSGD resumes from its checkpoint and completes
run 2 300 "$D" algorithm.mode=adpsgd run.output_dir="$WORK/adr" run.max_steps=20
rcA=$RC
run 2 300 "$D" algorithm.mode=adpsgd run.output_dir="$WORK/adr" run.max_steps=40 run.resume=true
if [ $rcA -eq 0 ] && [ "$RC" -eq 0 ] && grep -q "resumed from" "$WORK/out.txt"; then
    pass "adpsgd resumes from its checkpoint and completes"
else
    fail "adpsgd resume (rc $rcA/$RC)"; tail -3 "$WORK/out.txt"
fi

# invalid graphs are start-up errors on every rank
run 3 60 "$D" algorithm.mode=dpsgd
expect_fail "bipartite graph with an odd rank count" "even|odd"
run 2 60 "$D" algorithm.mode=sgp algorithm.peers=2
expect_fail "peers >= ranks" "peers"
printf '0 1\n2 3\n' >"$WORK/split.txt"
run 4 60 "$D" algorithm.mode=sgp algorithm.topology=file algorithm.graph_file="$WORK/split.txt"
expect_fail "disconnected file graph" "not connected"
run 4 60 "$D" algorithm.mode=dpsgd algorithm.topology=exponential
expect_fail "dpsgd on a directed graph" "symmetric"
run 3 60 "$D" algorithm.mode=adpsgd
expect_fail "adpsgd with an odd rank count" "even|odd"
finish
