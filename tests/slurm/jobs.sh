#!/bin/bash
# The job scripts under Slurm, on a private one-node cluster:
#  - each jobs/<mode>-eth.sbatch trains the small synthetic deck on 2 tasks
#    (the parameter-server modes: 1 server and 1 worker)
#    (UCX_TLS=self,sm,tcp, lo as the TCP device) with its mode forced over the
#    deck's; the job completes and leaves a full run record;
#  - a stand-in for dtrain shows what the eth and ib scripts hand each rank
#    (network variables, arguments);
#  - a run that fails fails its job and is not requeued;
#  - every script called without a deck stops with exit 2 and its usage text.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/../common.sh"
. "${srcdir:-.}/tests/slurm/cluster.sh" 2>/dev/null || . "$(dirname "$0")/cluster.sh"
cluster_require
DTRAIN_HOME=$(cd "${srcdir:-.}" && pwd)
[ -f "$DTRAIN_HOME/jobs/lib/launch.sh" ] || DTRAIN_HOME=$(cd "$(dirname "$0")/../.." && pwd)
export DTRAIN_HOME DTRAIN
export DTRAIN_ETH_IFACE=lo LAUNCHER=${LAUNCHER:-srun}

# usage: every script, called without a deck, stops with exit 2 and its own
# name in the usage text (so each one finds and sources its jobs/lib files)
bad=
n=0
for f in "$DTRAIN_HOME"/jobs/*.sbatch; do
    n=$((n + 1))
    name=jobs/$(basename "$f")
    (unset SLURM_JOB_ID; bash "$f") >"$WORK/usage.txt" 2>&1
    rc=$?
    if [ $rc -ne 2 ] || ! grep -q "usage: sbatch $name DECK" "$WORK/usage.txt"; then
        bad="$bad $name(rc $rc)"
        sed 's/^/#   /' "$WORK/usage.txt"
    fi
done
if [ -z "$bad" ]; then
    pass "all $n job scripts without a deck: exit 2 and their usage text"
else
    fail "job scripts without a deck:$bad"
fi

# 4 CPUs: two 2-rank jobs at a time; more would only make busy-polling ranks
# fight over a small machine's cores
cluster_start 4
cd "$WORK" || exit 1
D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"  # says mode = allreduce: the scripts override it
STEPS=32                          # 2 epochs x 512 images / (2 ranks x batch 16)
NP=2
MODES="allreduce sgp osgp dpsgd adpsgd ps-async ps-sync easgd lsgd pdmm-isvr admm-isvr dsgd-ecl diloco"
declare -A JOB=()
# All jobs at once; the node runs two at a time.
for m in $MODES; do
    extra=
    # lsgd's default periods (256 steps) would leave this short run without
    # a distributed step
    [ $m = lsgd ] && extra="lsgd.tau_local=4 lsgd.tau_global=8"
    # diloco's default H (500) would leave it without an outer step
    [ $m = diloco ] && extra="diloco.inner_steps=4"
    # the ISVR step has no momentum; it takes a larger step instead
    case $m in pdmm-isvr | admm-isvr) extra="optim.momentum=0 optim.lr=0.2" ;; esac
    # shellcheck disable=SC2086
    JOB[$m]=$(sbatch --parsable -N 1 -n $NP --ntasks-per-node=$NP --time=00:05:00 -o "$WORK/$m.out" \
        "$DTRAIN_HOME/jobs/$m-eth.sbatch" "$D" run.output_dir="$WORK/$m" run.log_every=1 $extra) ||
        fail "$m: sbatch refused the job"
done
JOB[bad]=$(sbatch --parsable -N 1 -n $NP --ntasks-per-node=$NP --time=00:05:00 -o "$WORK/bad.out" \
    "$DTRAIN_HOME/jobs/sgp-eth.sbatch" "$D" run.output_dir="$WORK/bad" optim.lr=-1)
# What each fabric hands to the ranks, seen by a stand-in for dtrain: the
# network settings and the arguments (deck, overrides, forced mode).
cat >"$WORK/show-env" <<'SH'
#!/bin/sh
echo "rank $SLURM_PROCID: UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES NCCL_IB_HCA=${NCCL_IB_HCA-unset} NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME NCCL_IB_DISABLE=${NCCL_IB_DISABLE-unset} args: $*"
SH
chmod +x "$WORK/show-env"
for net in eth ib; do
    JOB[env-$net]=$(DTRAIN=$WORK/show-env sbatch --parsable -N 1 -n $NP --ntasks-per-node=$NP --time=00:01:00 -o "$WORK/env-$net.out" \
        "$DTRAIN_HOME/jobs/dpsgd-$net.sbatch" "$D" optim.lr=0.1)
done

for m in $MODES; do
    [ -n "${JOB[$m]:-}" ] || continue
    # generous: a rank stuck in MPI_Finalize (UCX over TCP) ends only after
    # dtrain's 60 s watchdog, and jobs queue two at a time
    cluster_wait "${JOB[$m]}" 240 || true
    out=$WORK/$m.out
    if [ "$JOB_STATE" != COMPLETED ] || [ "$JOB_EXIT" != 0:0 ]; then
        fail "$m-eth job ${JOB[$m]}: $JOB_STATE, exit $JOB_EXIT"
        cluster_diag "${JOB[$m]}" "$out"
        continue
    fi
    rec=$WORK/$m/run.h5
    if ! [ -f "$rec" ] || ! "$DTRAIN_POST" csv "$rec" -o "$WORK/$m/csv" >/dev/null 2>&1; then
        fail "$m-eth: no readable run record $rec"
        cluster_diag "${JOB[$m]}" "$out"
        continue
    fi
    mode=$("$DTRAIN_POST" summary "$rec" | awk 'NR == 2 { print $2 }')
    rows=$(($(wc -l <"$WORK/$m/csv/train.csv") - 1))
    ranks=$(awk -F, 'NR > 1 { r[$3] = 1 } END { print length(r) }' "$WORK/$m/csv/train.csv")
    evals=$(($(wc -l <"$WORK/$m/csv/eval.csv") - 1))
    acc=$(awk -F, 'NR > 1 { a = $9 } END { print a + 0 }' "$WORK/$m/csv/eval.csv")
    if [ $m = adpsgd ] || [ $m = lsgd ]; then
        # the group's step count is a non-blocking sum: a rank may hold up
        # to its share of the steps left uncounted (by the last round it has
        # seen) when the round that reaches the budget completes, so the
        # total may pass the budget by less than two steps per rank; one
        # evaluation at the end
        ok_rows=$((rows >= STEPS * NP && rows < STEPS * NP + 2 * NP))
        want_evals=$NP
        # Without a barrier, a rank the node's other job starves at the start
        # may take only a step or two before the group's count is reached, so
        # the group's mean says little; the rank that trained must have learnt.
        acc=$(awk -F, 'NR > 1 && $6 > a { a = $6 } END { print a + 0 }' "$WORK/$m/csv/eval.csv")
    elif [ $m = ps-async ] || [ $m = ps-sync ]; then
        # rank 0 serves and logs one row; the NP - 1 workers share the data,
        # so together they take the 2 epochs' STEPS * NP steps
        ok_rows=$((rows == STEPS * NP + 1))
        want_evals=$NP
    else
        ok_rows=$((rows == STEPS * NP))
        want_evals=$((2 * NP))  # end of epoch 1 and end of the run
    fi
    if [ "$mode" = $m ] && [ $ok_rows -eq 1 ] && [ "$ranks" -eq $NP ] && [ $evals -eq $want_evals ] &&
        awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }'; then
        pass "$m-eth job ${JOB[$m]}: COMPLETED 0:0 in $JOB_RUNTIME, mode $mode, $rows train rows ($STEPS steps x $NP ranks), $evals eval rows, accuracy $acc"
    else
        fail "$m-eth: mode '$mode', $rows train rows over $ranks ranks (want $((STEPS * NP)) over $NP), $evals eval rows (want $want_evals), accuracy $acc"
        cluster_diag "${JOB[$m]}" "$out"
    fi
done

want_eth="UCX_TLS=self,sm,tcp UCX_NET_DEVICES=lo NCCL_IB_HCA=unset NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 args: $D optim.lr=0.1 algorithm.mode=dpsgd"
want_ib="UCX_TLS=self,sm,rc UCX_NET_DEVICES=mlx5_0:1 NCCL_IB_HCA=mlx5_0:1 NCCL_SOCKET_IFNAME=ib0 NCCL_IB_DISABLE=unset args: $D optim.lr=0.1 algorithm.mode=dpsgd"
for net in eth ib; do
    cluster_wait "${JOB[env-$net]:-none}" 180 || true
    want=want_$net
    if [ "$JOB_STATE" = COMPLETED ] && [ "$(grep -c "^rank [01]: ${!want}\$" "$WORK/env-$net.out")" -eq $NP ]; then
        pass "dpsgd-$net.sbatch hands every rank: ${!want#* args: $D }, ${!want% NCCL_IB_HCA*}"
    else
        fail "dpsgd-$net.sbatch environment and arguments ($JOB_STATE)"
        cluster_diag "${JOB[env-$net]:-none}" "$WORK/env-$net.out"
    fi
done

cluster_wait "${JOB[bad]:-none}" 180 || true
if [ "$JOB_STATE" = FAILED ] && [ "$JOB_EXIT" = 1:0 ] && [ "$JOB_RESTARTS" = 0 ] &&
    grep -q 'optim.lr' "$WORK/bad.out"; then
    pass "a run that fails (optim.lr=-1) fails its job: FAILED, exit 1, not requeued"
else
    fail "failing run: $JOB_STATE, exit $JOB_EXIT, restarts $JOB_RESTARTS"
    cluster_diag "${JOB[bad]:-none}" "$WORK/bad.out"
fi
finish
