#!/bin/bash
# Preemption under Slurm, on a private one-node cluster, with
# jobs/allreduce-eth.sbatch on 2 tasks:
#  1. USR1 to the batch shell mid-run (what --signal=B:USR1@T sends before the
#     time limit): the script passes it on, dtrain checkpoints and exits 75,
#     the script requeues the job, the second run resumes and completes;
#  2. `scontrol requeue` mid-run (what preemption does: SIGTERM to every
#     process of the job, SIGKILL after KillWait): the job runs again, resumes
#     and completes.
# Either way the final checkpoint equals that of an uninterrupted job of the
# same deck bit for bit, and the run record holds each (step, rank) once.
#  3. onto a smaller allocation: a job on 4 tasks checkpoints on USR1 and
#     exits 75; resubmitted on 2 tasks with run.resume=true it resumes on 2
#     ranks from the 4 ranks' checkpoint (doc/checkpoints.md, "Resuming on
#     another rank count"), the record saying so, and completes the budget.
# Rank 0 sleeps a little after every step (run.test_delay_*) so that the
# signal lands mid-run; the sleep does not change the numbers.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/../common.sh"
. "${srcdir:-.}/tests/slurm/cluster.sh" 2>/dev/null || . "$(dirname "$0")/cluster.sh"
cluster_require
DTRAIN_HOME=$(cd "${srcdir:-.}" && pwd)
[ -f "$DTRAIN_HOME/jobs/lib/launch.sh" ] || DTRAIN_HOME=$(cd "$(dirname "$0")/../.." && pwd)
export DTRAIN_HOME DTRAIN
export DTRAIN_ETH_IFACE=lo LAUNCHER=${LAUNCHER:-srun}

D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"
STEPS=240
ARGS="run.epochs=100 run.max_steps=$STEPS run.log_every=20 run.test_delay_rank=0 run.test_delay_ms=25"
# the scripts pass run.resume=true on a requeued run: resume if there is a
# checkpoint, else start fresh

cluster_start 6  # the three jobs at once
cd "$WORK" || exit 1
last() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest" 2>/dev/null)"; }
# submit NAME: the job's id; output in $WORK/NAME.out, run in $WORK/NAME
submit() {
    # shellcheck disable=SC2086
    sbatch --parsable -N 1 -n 2 --ntasks-per-node=2 --time=00:05:00 -o "$WORK/$1.out" \
        "$DTRAIN_HOME/jobs/allreduce-eth.sbatch" "$D" $ARGS run.output_dir="$WORK/$1"
}
# wait_step NAME STEP [SECONDS]: until the job's output shows STEP (at most
# SECONDS, default 60)
wait_step() {
    local i
    for i in $(seq 1 $((${3:-60} * 10))); do
        grep -q "^step $2/" "$WORK/$1.out" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# check_record NAME: train rows unique per (step, rank) and as many as the
# uninterrupted run's
check_record() {
    "$DTRAIN_POST" csv "$WORK/$1/run.h5" -o "$WORK/$1/csv" >/dev/null 2>&1 &&
        [ "$(cut -d, -f1,3 "$WORK/$1/csv/train.csv" | sort | uniq -d | wc -l)" -eq 0 ] &&
        [ "$(wc -l <"$WORK/$1/csv/train.csv")" -eq "$(wc -l <"$WORK/ref/csv/train.csv")" ]
}

ref=$(submit ref)
usr1=$(submit usr1)
preempt=$(submit preempt)

# 1. USR1 to the batch shell
if wait_step usr1 60; then
    scancel --signal=USR1 --batch "$usr1"
else
    fail "usr1: job $usr1 did not reach step 60 within 60 s"
fi
# 2. requeue from outside
if wait_step preempt 60; then
    scontrol requeue "$preempt"
else
    fail "preempt: job $preempt did not reach step 60 within 60 s"
fi

cluster_wait "$ref" 120 || true
if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ "$JOB_RESTARTS" = 0 ] &&
    "$DTRAIN_POST" csv "$WORK/ref/run.h5" -o "$WORK/ref/csv" >/dev/null 2>&1; then
    pass "uninterrupted job $ref: COMPLETED in $JOB_RUNTIME, $STEPS steps"
else
    fail "uninterrupted job $ref: $JOB_STATE, exit $JOB_EXIT, restarts $JOB_RESTARTS"
    tail -n 5 "$WORK/ref.out" | sed 's/^/#   /'
fi

o=$WORK/usr1.out
cluster_wait "$usr1" 120 || true
ck=$(grep -o 'checkpointing at step [0-9]*' "$o" | head -n 1 | grep -o '[0-9]*$')
if [ -n "$ck" ] && [ "$ck" -lt $STEPS ] && grep -q 'srun exited with status 75\|mpiexec exited with status 75' "$o" &&
    grep -q "requeueing job $usr1" "$o"; then
    pass "USR1: passed on to the ranks, checkpoint at step $ck, exit 75, job requeued by the script"
else
    fail "USR1: no checkpoint + exit 75 + requeue in the output"; grep -v '^\(step\|eval\)' "$o" | sed 's/^/#   /'
fi
if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ "$JOB_RESTARTS" = 1 ] &&
    grep -q "run 2 on .* run.resume=${DTRAIN_RESUME:-true}\$" "$o" &&
    grep -q "resumed from $WORK/usr1/checkpoints/.* at step $ck" "$o"; then
    pass "USR1: second run got run.resume=${DTRAIN_RESUME:-true}, resumed at step $ck and completed ($JOB_STATE, exit $JOB_EXIT, 1 restart)"
else
    fail "USR1: $JOB_STATE, exit $JOB_EXIT, restarts $JOB_RESTARTS, no resume from step ${ck:-?}"
    grep -v '^\(step\|eval\)' "$o" | sed 's/^/#   /'
fi
if "$TEST_BIN/ckcmp" same "$(last "$WORK/usr1")" "$(last "$WORK/ref")" >/dev/null && check_record usr1; then
    pass "USR1: final checkpoint equals the uninterrupted job's bit for bit; run record has each (step, rank) once"
else
    fail "USR1: final checkpoint or run record differs from the uninterrupted job's"
fi

o=$WORK/preempt.out
cluster_wait "$preempt" 120 || true
ck=$(grep -o 'checkpointing at step [0-9]*' "$o" | head -n 1 | grep -o '[0-9]*$')
if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ "$JOB_RESTARTS" = 1 ] && [ -n "$ck" ] &&
    grep -q "resumed from $WORK/preempt/checkpoints/.* at step $ck" "$o"; then
    pass "scontrol requeue: SIGTERM checkpoint at step $ck, requeued, resumed there and completed"
else
    fail "scontrol requeue: $JOB_STATE, exit $JOB_EXIT, restarts $JOB_RESTARTS, checkpoint step '${ck:-}'"
    grep -v '^\(step\|eval\)' "$o" | sed 's/^/#   /'
fi
if "$TEST_BIN/ckcmp" same "$(last "$WORK/preempt")" "$(last "$WORK/ref")" >/dev/null && check_record preempt; then
    pass "scontrol requeue: final checkpoint equals the uninterrupted job's bit for bit; run record has each (step, rank) once"
else
    fail "scontrol requeue: final checkpoint or run record differs from the uninterrupted job's"
fi

# 3. onto a smaller allocation, once the node is free of the jobs above. A
# pending job cannot be shrunk (Slurm 22.05 keeps the first SLURM_NTASKS in
# the batch environment of a job given fewer CPUs): the job that may not be
# requeued (--no-requeue) gets USR1, dtrain checkpoints and exits 75, the
# script's requeue is refused and it says to resubmit; the job resubmitted on
# 2 tasks with run.resume=true resumes there. 4 busy-polling ranks on a
# small machine are slow: a short run without the delay, USR1 after step 8.
SMALL_STEPS=32
SMALL="run.epochs=100 run.max_steps=$SMALL_STEPS run.log_every=4 run.output_dir=$WORK/small"
# shellcheck disable=SC2086
big=$(sbatch --parsable --no-requeue -N 1 -n 4 --ntasks-per-node=4 --time=00:10:00 \
    -o "$WORK/small4.out" "$DTRAIN_HOME/jobs/allreduce-eth.sbatch" "$D" $SMALL)
if wait_step small4 8 300; then
    scancel --signal=USR1 --batch "$big"
else
    fail "smaller allocation: job $big on 4 tasks did not reach step 8 within 300 s"
fi
cluster_wait "$big" 300 || true
ck=$(grep -o 'checkpointing at step [0-9]*' "$WORK/small4.out" | head -n 1 | grep -o '[0-9]*$')
if [ "$JOB_STATE" = FAILED ] && [ "$JOB_EXIT" = 75:0 ] && [ "$JOB_RESTARTS" = 0 ] && [ -n "$ck" ] &&
    [ "$ck" -lt $SMALL_STEPS ] && grep -q "resubmit with run.resume=" "$WORK/small4.out"; then
    pass "smaller allocation: job $big on 4 tasks checkpointed at step $ck on USR1 and exited 75, not requeued"
else
    fail "smaller allocation, first job: $JOB_STATE, exit $JOB_EXIT, restarts $JOB_RESTARTS, checkpoint step '${ck:-}'"
    cluster_diag "$big" "$WORK/small4.out"
fi
# shellcheck disable=SC2086
small=$(sbatch --parsable -N 1 -n 2 --ntasks-per-node=2 --time=00:10:00 -o "$WORK/small2.out" \
    "$DTRAIN_HOME/jobs/allreduce-eth.sbatch" "$D" $SMALL run.resume=true)
cluster_wait "$small" 300 || true
o=$WORK/small2.out
rule=$("$TEST_BIN/ckcmp" attr "$WORK/small/run.h5" elastic_rule 2>/dev/null)
if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ -n "$ck" ] &&
    grep -q "run 1 on .* (2 tasks, " "$o" &&
    grep -q "resumed from $WORK/small/checkpoints/.* at step $ck on 2 ranks (written by 4;" "$o" &&
    grep -q "^done: $SMALL_STEPS steps" "$o" &&
    [ "$("$TEST_BIN/ckcmp" attri "$WORK/small/run.h5" resume_from_ranks)" = 4 ] &&
    grep -q "^4 -> 2 ranks at step $ck: replicated" <<<"$rule" &&
    [ "$("$TEST_BIN/ckcmp" attri "$(last "$WORK/small")" nranks)" = 2 ] &&
    [ "$("$TEST_BIN/ckcmp" attri "$(last "$WORK/small")" step)" = $SMALL_STEPS ]; then
    pass "smaller allocation: resubmitted on 2 tasks, resumed at step $ck from the 4 ranks' checkpoint (record: resume_from_ranks 4, '${rule%%;*}') and completed $SMALL_STEPS steps"
else
    fail "smaller allocation, 2 tasks: $JOB_STATE, exit $JOB_EXIT, checkpoint step '${ck:-}', rule '${rule:-}'"
    grep -v '^\(step\|eval\)' "$o" | sed 's/^/#   /'
fi
finish
