#!/bin/bash
# Periodic checkpoints of an asynchronous mode (adpsgd, 4 ranks): with
# run.checkpoint_every the checkpoints appear while the run goes on; after
# SIGKILL (no drain, no final checkpoint) the run resumes from the newest and
# finishes. Then, resumed once more with run.test_zero_gradients (only the
# pairwise averages move the models, and the ranks' models differ after the
# training), the sum of the ranks' models in every checkpoint equals the sum
# at the start: each checkpoint is a consistent cut, no exchange half applied.
# ps-async (server, supervisor, 2 workers) takes periodic checkpoints too and
# resumes from one of them.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
O=$WORK/ck
a="algorithm.mode=adpsgd run.epochs=1000 run.checkpoint_keep=100 run.eval_every=10
   run.output_dir=$O"
p1="run.max_steps=120 run.checkpoint_every=40"
ckpts() { ls "$O/checkpoints" 2>/dev/null | grep -c '^ckpt-[0-9]*\.h5$' || true; }

set +e
timeout -k 5 300 "$MPIEXEC" -n 4 "$DTRAIN" "$D" $a $p1 >"$WORK/kill.txt" 2>&1 &
pid=$!
for i in $(seq 1 1500); do
    [ "$(ckpts)" -ge 2 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
done
seen=$(ckpts)
signal_ranks KILL "$O"
wait $pid
rcK=$?
set -e
if [ "$seen" -ge 2 ] && [ $rcK -ne 0 ] && ! grep -q "^done:" "$WORK/kill.txt"; then
    pass "adpsgd, run.checkpoint_every=40: $seen checkpoints written during the run, then SIGKILL (exit $rcK)"
else
    fail "periodic checkpoints during the run ($seen seen, exit $rcK)"; tail -5 "$WORK/kill.txt"
fi

run 4 300 "$D" $a $p1 run.resume=true
cp "$WORK/out.txt" "$WORK/resume.txt"
from=$(grep -o 'resumed from [^ ]*' "$WORK/resume.txt" | head -1)
if [ "$RC" -eq 0 ] && [ -n "$from" ] && grep -q "^done: 12[0-9] steps per rank" "$WORK/resume.txt" &&
   "$DTRAIN_POST" csv "$O/run.h5" -o "$WORK/csv" >/dev/null 2>&1; then
    pass "resumed after SIGKILL ($from) and finished: $(grep '^done:' "$WORK/resume.txt" | cut -c1-60)"
else
    fail "resume after SIGKILL (rc $RC, '$from')"; tail -5 "$WORK/resume.txt"
fi

start=$O/checkpoints/$(cat "$O/checkpoints/latest")
before=$(ls "$O/checkpoints" | grep '^ckpt-[0-9]*\.h5$')
run 4 300 "$D" $a run.resume=true run.max_steps=150 run.checkpoint_every=10 \
    run.test_zero_gradients=true
rcZ=$RC
new=0
bad=""
for f in $(ls "$O/checkpoints" | grep '^ckpt-[0-9]*\.h5$'); do
    echo "$before" | grep -qx "$f" && continue
    new=$((new + 1))
    if ! "$TEST_BIN/ckcmp" sum "$O/checkpoints/$f" "$start" 1e-6 >"$WORK/sum.txt" 2>&1; then
        bad="$bad $f: $(tr '\n' ' ' <"$WORK/sum.txt")"
    fi
done
if [ $rcZ -eq 0 ] && [ $new -ge 3 ] && [ -z "$bad" ]; then
    pass "run.test_zero_gradients: the sum of the 4 models in each of $new checkpoints equals the sum at the start ($(cat "$WORK/sum.txt"))"
else
    fail "mass conservation across periodic checkpoints (rc $rcZ, $new new checkpoints;$bad)"
    tail -3 "$WORK/out.txt"
fi

P=$WORK/ps
b="algorithm.mode=ps-async ps.supervisor=true run.epochs=1000 run.max_steps=60
   run.checkpoint_every=15 run.checkpoint_keep=100 run.output_dir=$P"
run 4 300 "$D" $b
rcP=$RC
n=$(ls "$P/checkpoints" 2>/dev/null | grep -c '^ckpt-[0-9]*\.h5$' || true)
periodic=$(grep -c "^checkpoint at the group's step" "$WORK/out.txt" || true)
first=$(ls "$P/checkpoints" 2>/dev/null | grep '^ckpt-[0-9]*\.h5$' | head -1)
[ -n "$first" ] && echo "$first" >"$P/checkpoints/latest"
run 4 300 "$D" $b run.resume=true
if [ $rcP -eq 0 ] && [ "$n" -ge 3 ] && [ "$periodic" -ge 3 ] && [ "$RC" -eq 0 ] &&
   grep -q "resumed from .*$first" "$WORK/out.txt" && grep -q "^done: 6[0-9] steps per rank" "$WORK/out.txt"; then
    pass "ps-async, run.checkpoint_every=15: $n checkpoints ($((periodic - 1)) during the run); resumed from $first and finished"
else
    fail "ps-async periodic checkpoints (rc $rcP, $n files, $periodic written, resume rc $RC from '$first')"
    tail -3 "$WORK/out.txt"
fi
finish
