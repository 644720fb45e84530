# Shared body of the jobs/*.sbatch scripts (sourced, bash): start dtrain on
# every task of the allocation, pass Slurm's warning signal on to the ranks,
# and requeue the job when dtrain has checkpointed because of it.
#
# The sourcing script sets:
#   DTRAIN_MODE     algorithm.mode forced on the run (appended last, so it wins;
#                   empty: the deck's, e.g. a deck with rank groups)
#   DTRAIN_JOB      the script's name before -<net>.sbatch (default DTRAIN_MODE)
#   DTRAIN_DEVICE   deck overrides of the GPU scripts, e.g. "compute.device=cuda
#                   comm.transport=nccl" (appended after the command line's;
#                   empty: the deck's)
#   DTRAIN          the dtrain binary
#   LAUNCHER        srun (default: srun --mpi=pmi2) or mpiexec (MPICH's hydra
#                   inside the allocation)
#   DTRAIN_MODULES  modules to load first (empty: none)
# optional, from the environment of sbatch:
#   SRUN_FLAGS / MPIEXEC_FLAGS  extra launcher options (word-split)
#   DTRAIN_RESUME   value of run.resume on a requeued run (default true:
#                   resume from <output_dir>/checkpoints/latest if there is one,
#                   else start fresh)
# and its positional parameters are the job's: DECK [section.key=value ...].
#
# Exit status: dtrain's, except 75 (checkpointed on a signal) after a
# successful `scontrol requeue`: the job then goes back to the queue and its
# next run starts with run.resume=$DTRAIN_RESUME.

_dt_die() {
    echo "dtrain job: $*" >&2
    exit "${_dt_die_status:-1}"
}

if [ $# -lt 1 ] || [ ! -r "$1" ]; then
    _dt_die_status=2 _dt_die "usage: sbatch jobs/${DTRAIN_JOB:-$DTRAIN_MODE}-${DTRAIN_NET:-<net>}.sbatch DECK [section.key=value ...]" \
        "(${1:-no deck given}${1:+: not readable from $PWD})"
fi

if [ -n "${DTRAIN_MODULES:-}" ]; then
    # batch shells are not login shells: the module command may be missing
    type module >/dev/null 2>&1 || . /etc/profile >/dev/null 2>&1
    # shellcheck disable=SC2086
    module load $DTRAIN_MODULES || _dt_die "module load $DTRAIN_MODULES failed"
fi
[ -x "$DTRAIN" ] || _dt_die "DTRAIN=$DTRAIN is not an executable (edit the site block of the job script)"

# One BLAS thread per rank unless the job asks for more CPUs per task (the
# deck's compute.threads decides how many dtrain uses).
export OPENBLAS_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}

_dt_args=("$@")
# shellcheck disable=SC2206 # a list of section.key=value words
[ -n "${DTRAIN_DEVICE:-}" ] && _dt_args+=($DTRAIN_DEVICE)
[ -n "${DTRAIN_MODE:-}" ] && _dt_args+=("algorithm.mode=$DTRAIN_MODE")
_dt_restarts=${SLURM_RESTART_COUNT:-0}
if [ "$_dt_restarts" -gt 0 ]; then
    _dt_args+=("run.resume=${DTRAIN_RESUME:-true}")
fi

case ${LAUNCHER:-srun} in
    srun)
        # shellcheck disable=SC2206
        _dt_cmd=(srun --mpi=pmi2 ${SRUN_FLAGS:-} "$DTRAIN") ;;
    mpiexec)
        # shellcheck disable=SC2206
        _dt_cmd=(mpiexec -n "${SLURM_NTASKS:?not inside a Slurm allocation}" ${MPIEXEC_FLAGS:-} "$DTRAIN") ;;
    *)
        _dt_die "LAUNCHER=$LAUNCHER: expected srun or mpiexec" ;;
esac

echo "dtrain job ${SLURM_JOB_ID:-?} run $((_dt_restarts + 1)) on ${SLURM_JOB_NODELIST:-?}" \
    "(${SLURM_NTASKS:-?} tasks, $LAUNCHER, UCX_TLS=${UCX_TLS:-} UCX_NET_DEVICES=${UCX_NET_DEVICES:-}):" \
    "${_dt_cmd[*]} ${_dt_args[*]}"

# Slurm signals only this shell (--signal=B:USR1@T, scancel --batch): the
# launcher runs in the background so that the trap runs at once (bash defers
# traps while a foreground command runs) and passes the signal on; srun and
# hydra forward it to every rank, which checkpoint at the next step and exit 75.
_dt_pid=
_dt_forward() {
    echo "dtrain job: SIG$1 received, passing it on to the ranks"
    [ -n "$_dt_pid" ] && kill -"$1" "$_dt_pid" 2>/dev/null
}
trap '_dt_forward USR1' USR1
"${_dt_cmd[@]}" "${_dt_args[@]}" &
_dt_pid=$!
# wait returns early (status > 128) whenever a trapped signal arrives; only a
# return from the launcher itself ends the loop.
while :; do
    wait "$_dt_pid"
    _dt_rc=$?
    kill -0 "$_dt_pid" 2>/dev/null || break
done
# bash may already have reaped the launcher when the signal interrupted wait:
# its remembered status is then what a last wait returns.
if [ "$_dt_rc" -gt 128 ]; then
    wait "$_dt_pid" 2>/dev/null
    _dt_rc2=$?
    [ "$_dt_rc2" -ne 127 ] && _dt_rc=$_dt_rc2
fi
trap - USR1
echo "dtrain job: $LAUNCHER exited with status $_dt_rc"

if [ "$_dt_rc" -eq 75 ]; then
    echo "dtrain job: dtrain checkpointed and exited 75; requeueing job ${SLURM_JOB_ID:-?}"
    if [ -n "${SLURM_JOB_ID:-}" ] && scontrol requeue "$SLURM_JOB_ID"; then
        exit 0
    fi
    echo "dtrain job: scontrol requeue failed; resubmit with run.resume=${DTRAIN_RESUME:-true} to continue" >&2
fi
exit "$_dt_rc"
