#!/bin/bash
# run.stall_timeout: one rank of a 4-rank allreduce run and of a 4-rank sgp
# run is stopped with SIGSTOP; the other ranks' watchdogs (10 s) print what
# they wait for and MPI_Abort the job, which must end within 40 s. A run
# whose evaluation lasts longer than the timeout is not stopped.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/x" >"$D"

# descendants of pid $1 (ps: pid ppid)
descendants() {
    local kids
    kids=$(ps -eo pid=,ppid= | awk -v p="$1" '$2 == p { print $1 }')
    for k in $kids; do echo "$k"; descendants "$k"; done
}
# the dtrain process of MPI rank $2 under pid $1 (PMI_RANK in its environment)
rank_pid() {
    for p in $(descendants "$1"); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = dtrain ] || continue
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=$2"; then
            echo "$p"; return
        fi
    done
}

for mode in allreduce sgp; do
    out=$WORK/$mode.txt
    timeout -k 5 90 "$MPIEXEC" -n 4 "$DTRAIN" "$D" algorithm.mode=$mode run.epochs=100000 \
        run.log_every=1000 run.stall_timeout=10 run.output_dir="$WORK/$mode" >"$out" 2>&1 &
    bg=$!
    for i in $(seq 100); do grep -q "dtrain: mode" "$out" && break; sleep 0.2; done
    sleep 2
    victim=$(rank_pid $bg 2)
    if [ -z "$victim" ]; then
        fail "$mode: rank 2's process not found"; kill $bg; wait $bg || true; continue
    fi
    kill -STOP "$victim"
    t0=$(date +%s)
    set +e; wait $bg; rc=$?; set -e
    el=$(($(date +%s) - t0))
    kill -CONT "$victim" 2>/dev/null || true
    kill -KILL "$victim" 2>/dev/null || true
    # every waiting rank prints its line; the first to time out may wait on a
    # rank that itself waits on rank 2 (sgp: rank 1 for rank 0's message,
    # while rank 0 is in the step-boundary agreement), so one of the lines,
    # not necessarily the first, names rank 2 or the collective
    want="rank [013]: no progress for [0-9]+ s .*waiting for (a collective|the step-boundary agreement|a message from rank 2|rank 2)"
    line=$(grep -Em1 "$want" "$out" || true)
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ "$el" -le 40 ] &&
       [ -n "$line" ]; then
        pass "$mode: rank 2 stopped, job ended after $el s (rc $rc): $(echo "$line" | cut -c1-160)"
    else
        fail "$mode: SIGSTOP of rank 2 (rc $rc after $el s): $(grep -m1 "no progress for" "$out")"; grep -v "^ *[0-9]* *vm " "$out" | tail -12 | sed 's/^/#   /'
    fi
done

# a long evaluation (mnist_cnn on 15000 test images: seconds, at a 1 s
# timeout) is progress
run 1 120 "$D" algorithm.mode=local model.name=mnist_cnn data.synthetic_height=28 \
    data.synthetic_width=28 data.synthetic_train=256 data.synthetic_test=15000 \
    run.max_steps=2 run.stall_timeout=1 run.output_dir="$WORK/eval"
el=$(sed -n 's/^done: 2 steps in \([0-9.]*\) s.*/\1/p' "$WORK/out.txt")
if [ "$RC" -eq 0 ] && ! grep -q "no progress" "$WORK/out.txt" && [ -n "$el" ] &&
   awk -v t="$el" 'BEGIN { exit !(t > 2) }'; then
    pass "a run of $el s, nearly all evaluation, at run.stall_timeout = 1 is not stopped"
else
    fail "long evaluation (rc $RC, $el s)"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
fi

# a rank group that has finished waits for the other one: no stall. The
# quick group ends in well under a second; the slow one takes 25 steps of
# 200 ms (its rank 0 sleeps after each step's progress), about 5 s, against
# a 3 s timeout.
G=$WORK/groups.ini
{ printf '[group.quick]\nranks = 2\nalgorithm.mode = allreduce\nrun.max_steps = 5\n'
  printf '[group.slow]\nranks = 2\nalgorithm.mode = allreduce\nrun.max_steps = 25\n'
  printf 'run.test_delay_ms = 200\nrun.test_delay_rank = 0\n'; cat "$D"; } >"$G"
run 4 120 "$G" run.stall_timeout=3 run.output_dir="$WORK/groups"
csv=$WORK/groups/groups.csv
if [ "$RC" -eq 0 ] && ! grep -q "no progress" "$WORK/out.txt" &&
   [ "$(cut -d, -f1,5,6 "$csv" 2>/dev/null | tail -2 | tr '\n' ' ')" = "quick,done,5 slow,done,25 " ] &&
   awk -F, '$1 == "slow" { exit !($9 > 3) }' "$csv"; then
    pass "a finished rank group waits $(awk -F, '$1 == "slow" { print $9 }' "$csv") s for the other at run.stall_timeout = 3 and is not stopped"
else
    fail "finished group waiting (rc $RC)"; tail -4 "$WORK/out.txt" | sed 's/^/#   /'
fi
finish
