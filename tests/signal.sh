#!/bin/bash
# SIGUSR1 (as Slurm sends before the time limit) and SIGTERM (preemption)
# mid-run: every rank checkpoints at the next step and exits 75; resuming
# twice completes the run and ends exactly where an uninterrupted run ends.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
a="run.epochs=4000 run.max_steps=20000 run.log_every=20"
# interrupt SIG RESUME AFTER_STEP: start (or resume) the run, send SIG to
# every dtrain process once it has logged AFTER_STEP, expect exit 75.
interrupt() {
    local sig=$1 resume=$2 after=$3
    set +e
    timeout -k 5 300 "$MPIEXEC" -n 2 "$DTRAIN" "$D" $a run.output_dir="$WORK/sig" \
        run.resume=$resume >"$WORK/sig.txt" 2>&1 &
    local pid=$!
    for i in $(seq 1 600); do
        grep -Eq "^step $after/" "$WORK/sig.txt" 2>/dev/null && break
        sleep 0.1
    done
    signal_ranks "$sig" "$WORK/sig"
    wait $pid
    local rc=$?
    set -e
    if [ $rc -eq 75 ] && grep -q "signal received" "$WORK/sig.txt" && [ -s "$WORK/sig/checkpoints/latest" ]; then
        pass "SIG$sig -> $(grep -o 'checkpointing at step [0-9]*' "$WORK/sig.txt") and exit 75"
    else
        fail "SIG$sig handling (rc $rc)"; tail -5 "$WORK/sig.txt"
    fi
}
interrupt USR1 false 100
interrupt TERM true 2000
# (the limits are generous: 20,000 steps take about a minute on an idle
# 2-core machine, several on a loaded one; they guard against a hang only)
run 2 1200 "$D" $a run.output_dir="$WORK/sig" run.resume=true
rcR=$RC
run 2 1200 "$D" $a run.output_dir="$WORK/ref"
if [ $rcR -eq 0 ] && [ "$RC" -eq 0 ] && "$TEST_BIN/ckcmp" same "$(last "$WORK/sig")" "$(last "$WORK/ref")" >/dev/null; then
    pass "resumed after the signal: final model equals the uninterrupted run bit for bit"
else
    fail "resume after signal (rc $rcR/$RC)"
fi
finish
