#!/bin/bash
# Emulated-cluster network benchmark: time per iteration of allreduce, sgp,
# osgp, dpsgd and adpsgd on 2, 4, 8 ranks, each rank in its own network
# namespace behind its own shaped link (netns.sh), and a heterogeneous run
# (one slow rank). Writes OUT/results.csv, OUT/hetero.csv, OUT/tables.md and
# the figure bench/network/scaling.png. Needs root. See README.md.
#
# usage: bench/network/run.sh [options]
#   --modes "allreduce sgp osgp dpsgd adpsgd"   modes of the grid (any dtrain mode:
#                      also ps-async ps-sync easgd lsgd pdmm-isvr admm-isvr dsgd-ecl)
#   --ranks "2 4 8"                             rank counts of the grid
#   --bandwidths "1gbit 10gbit unlimited"       link rates (tc syntax) or unlimited
#   --steps N          optimizer steps per run (default 25)
#   --warmup W         steps before the timed window (default 5; also run.log_every)
#   --retries K        rerun a point up to K times when other programs used the CPU
#                      during it (default 1); the least disturbed try is kept
#   --no-grid          skip the grid
#   --no-hetero        skip the heterogeneous runs
#   --hetero-ranks N   (default 8)  --hetero-bandwidth RATE (default 1gbit)
#   --hetero-delay-ms D (default 1500)  --hetero-rank R (default N-1, an active rank)
#   --hetero-modes "allreduce adpsgd"
#   --no-yield-shim    do not preload yield_poll.so into the ranks (by default
#                      they call sched_yield() after every empty non-blocking
#                      epoll_wait of UCX's TCP progress; it halves the time per
#                      iteration at 8 ranks on 2 cores, see RESULTS.md)
#   --no-calib         keep OUT/calib.csv (the alpha/beta link measurements)
#   --fresh            delete earlier runs in OUT first (default: add to them;
#                      a point run again gets a new try, the least disturbed wins)
#   --no-plot          do not redraw scaling.png
#   --set KEY=VALUE    a dtrain deck override for every run (repeatable), e.g.
#                      --set optim.batch_size=160 (use another --out for such series)
#   --out DIR          output directory (default bench/out/network)
# Environment: DTRAIN, DTRAIN_POST (default: this tree's src/...), NETNS_PREFIX
# (default dtn), LOAD_MAX (cores other programs may use before a run, default
# 0.25), LOAD_WAIT (seconds to wait for that, default 60), FINALIZE_GRACE
# (default 3 s), RUN_LIMIT (default 600 s), NETNS_FALLBACK=1 (force loopback).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
DTRAIN=${DTRAIN:-$here/../../src/dtrain}
DTRAIN_POST=${DTRAIN_POST:-$here/../../src/dtrain-post}
LOAD_MAX=${LOAD_MAX:-0.25}
LOAD_WAIT=${LOAD_WAIT:-60}
FINALIZE_GRACE=${FINALIZE_GRACE:-3}
RUN_LIMIT=${RUN_LIMIT:-600}

MODES="allreduce sgp osgp dpsgd adpsgd"
RANKS="2 4 8"
BWS="1gbit 10gbit unlimited"
STEPS=25
WARMUP=5
RETRIES=1
GRID=1
HETERO=1
HET_RANKS=8
HET_BW=1gbit
HET_DELAY=1500
HET_RANK=
HET_MODES="allreduce adpsgd"
SHIM=1
PRELOAD=
CALIB=1
FRESH=0
PLOT=1
EXTRA=()
OUT=$repo/bench/out/network

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --modes) MODES=$2; shift ;;
        --ranks) RANKS=$2; shift ;;
        --bandwidths) BWS=$2; shift ;;
        --steps) STEPS=$2; shift ;;
        --warmup) WARMUP=$2; shift ;;
        --retries) RETRIES=$2; shift ;;
        --no-grid) GRID=0 ;;
        --no-hetero) HETERO=0 ;;
        --hetero-ranks) HET_RANKS=$2; shift ;;
        --hetero-bandwidth) HET_BW=$2; shift ;;
        --hetero-delay-ms) HET_DELAY=$2; shift ;;
        --hetero-rank) HET_RANK=$2; shift ;;
        --hetero-modes) HET_MODES=$2; shift ;;
        --yield-shim) SHIM=1 ;;
        --no-yield-shim) SHIM=0 ;;
        --no-calib) CALIB=0 ;;
        --fresh) FRESH=1 ;;
        --no-plot) PLOT=0 ;;
        --out) OUT=$2; shift ;;
        --set) EXTRA+=("$2"); shift ;;
        -h|--help) usage ;;
        *) echo "run.sh: unknown option $1" >&2; usage ;;
    esac
    shift
done
[ "$STEPS" -gt "$WARMUP" ] 2>/dev/null || { echo "run.sh: --steps must exceed --warmup" >&2; exit 2; }
[ -n "$HET_RANK" ] || HET_RANK=$((HET_RANKS - 1))
for exe in /usr/bin/time gcc python3 "$DTRAIN" "$DTRAIN_POST"; do
    [ "$exe" = gcc ] && [ "$SHIM" = 0 ] && continue
    command -v "$exe" >/dev/null || { echo "run.sh: $exe not found (GNU time: package time)" >&2; exit 1; }
done
for exe in "$DTRAIN" "$DTRAIN_POST"; do
    [ -x "$exe" ] || { echo "run.sh: $exe not found (set DTRAIN/DTRAIN_POST)" >&2; exit 1; }
done

# shellcheck source=netns.sh
. "$here/netns.sh"

JOB_PID=        # /usr/bin/time wrapping the running mpiexec
PROBE_PIDS=

kill_job() {
    [ -n "$JOB_PID" ] || return 0
    local p i r
    # the ranks first (the children of hydra's proxy): mpiexec and the proxy
    # then exit by themselves and /usr/bin/time still collects the ranks' CPU
    for p in $(ps -o pid= --ppid "$JOB_PID" 2>/dev/null); do      # mpiexec
        for i in $(ps -o pid= --ppid "$p" 2>/dev/null); do         # hydra_pmi_proxy
            for r in $(ps -o pid= --ppid "$i" 2>/dev/null); do      # the ranks
                kill -9 "$r" 2>/dev/null
            done
        done
    done
    for ((i = 0; i < 50; i++)); do
        kill -0 "$JOB_PID" 2>/dev/null || break
        sleep 0.1
    done
    # still there: everything below the wrapper, deepest first
    if kill -0 "$JOB_PID" 2>/dev/null; then
        for p in $(descendants "$JOB_PID"); do kill -9 "$p" 2>/dev/null; done
    fi
    wait "$JOB_PID" 2>/dev/null
    JOB_PID=
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    kill_job
    local p
    for p in $PROBE_PIDS; do kill "$p" 2>/dev/null; done
    net_down
    if ! net_leftovers >/dev/null; then
        echo "run.sh: left behind (remove with bench/network/netns.sh down):" >&2
        net_leftovers >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM HUP

# /proc/stat: "user+nice+system all_busy" in clock ticks, summed over the CPUs
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4, $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# ticks the ksoftirqd threads used (network work done on our behalf)
ksoftirqd_ticks() {
    local p t=0
    for p in $(ps -eo pid=,comm= | awk '$2 ~ /^ksoftirqd/ {print $1}'); do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$t"
}
HZ=$(getconf CLK_TCK)
NCPU=$(nproc)

# cores in use by other programs, sampled over 2 s while we run nothing
busy_now() {
    local a b
    a=$(cpu_ticks | cut -d' ' -f2)
    sleep 2
    b=$(cpu_ticks | cut -d' ' -f2)
    awk -v a="$a" -v b="$b" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz / 2 }'
}

# wait (at most LOAD_WAIT s) until other programs use less than LOAD_MAX cores
BUSY=0
wait_quiet() {
    local waited=0
    while :; do
        BUSY=$(busy_now)
        awk -v b="$BUSY" -v m="$LOAD_MAX" 'BEGIN { exit !(b >= m) }' || return 0
        if [ "$waited" -ge "$LOAD_WAIT" ]; then
            echo "#   other programs use $BUSY cores (>= $LOAD_MAX) after ${waited} s; measuring anyway" | tee -a "$OUT/log.txt" >&2
            return 0
        fi
        waited=$((waited + 2))
    done
}

veth_tx() { net_stats | awk '{ s += $2 } END { printf "%.0f", s }'; }

# run_point KEY MODE N BW VARIANT [dtrain overrides...]
# What a mode needs beyond the common deck: the ISVR step has no momentum;
# the parameter server runs 1 server and n-1 workers; LSGD distributes every
# 4 local steps so the short run has distributed steps.
mode_settings() {
    case $1 in
        pdmm-isvr | admm-isvr) echo optim.momentum=0 ;;
        ps-async | ps-sync) echo ps.servers=1 ;;
        lsgd) echo lsgd.tau_local=4 lsgd.tau_global=4 ;;
    esac
}

run_point() {
    local key=$1 mode=$2 n=$3 bw=$4 variant=$5
    shift 5
    local t k dir log status killed start done_at elapsed tx0 tx1 c0 c1 s0 s1 wall user sys
    for ((t = 0; t <= RETRIES; t++)); do
        k=1
        while [ -e "$OUT/runs/$key/try$k" ]; do k=$((k + 1)); done
        dir=$OUT/runs/$key/try$k
        mkdir -p "$dir"
        log=$dir/log.txt
        wait_quiet
        tx0=$(veth_tx)
        c0=$(cpu_ticks | cut -d' ' -f1)
        s0=$(ksoftirqd_ticks)
        /usr/bin/time -f "%e %U %S" -o "$dir/time.txt" env ${PRELOAD:+LD_PRELOAD=$PRELOAD} \
            mpiexec -n "$n" "$here/netns-exec.sh" "$DTRAIN" "$here/mlp10m.ini" \
            algorithm.mode="$mode" run.max_steps="$STEPS" run.log_every="$WARMUP" \
            run.output_dir="$dir/run" $(mode_settings "$mode") ${EXTRA[@]+"${EXTRA[@]}"} "$@" >"$log" 2>&1 &
        JOB_PID=$!
        start=$SECONDS
        done_at=
        killed=0
        status=ok
        while kill -0 "$JOB_PID" 2>/dev/null; do
            sleep 0.5
            elapsed=$((SECONDS - start))
            if [ -z "$done_at" ] && grep -q '^done:' "$log" 2>/dev/null; then
                done_at=$SECONDS
            fi
            # With UCX_TLS=tcp,self MPI_Finalize often hangs: UCX 1.13 flushes
            # each endpoint that sent anything with a PUT that the peer must
            # acknowledge, and a peer already in MPICH's PMI barrier no longer
            # progresses UCX (openucx/ucx#8738). The record is complete once
            # rank 0 printed "done:", so end the ranks.
            if [ -n "$done_at" ] && [ $((SECONDS - done_at)) -ge "$FINALIZE_GRACE" ]; then
                echo "#   still in MPI_Finalize ${FINALIZE_GRACE} s after 'done:' (UCX TCP flush hang); killing the ranks" | tee -a "$OUT/log.txt" >&2
                killed=1
                kill_job
                break
            fi
            if [ "$elapsed" -ge "$RUN_LIMIT" ]; then
                echo "#   no end after $RUN_LIMIT s; killing the ranks" >&2
                status=timeout
                kill_job
                break
            fi
        done
        [ -n "$JOB_PID" ] && { wait "$JOB_PID" 2>/dev/null || true; }
        JOB_PID=
        c1=$(cpu_ticks | cut -d' ' -f1)
        s1=$(ksoftirqd_ticks)
        tx1=$(veth_tx)
        grep -q '^done:' "$log" || status=failed
        [ "$status" = ok ] && [ -f "$dir/run/run.h5" ] || { [ "$status" = ok ] && status=failed; }
        read -r wall user sys < <(tail -n1 "$dir/time.txt" 2>/dev/null | grep -E '^[0-9.]+ [0-9.]+ [0-9.]+$' || echo "$((SECONDS - start)) 0 0")
        local outside
        # CPU that neither our processes nor the kernel's network threads
        # used during the run, in cores: other programs on the machine
        outside=$(awk -v c="$((c1 - c0))" -v s="$((s1 - s0))" -v hz="$HZ" -v u="$user" -v y="$sys" -v w="$wall" \
            'BEGIN { o = ((c - s) / hz - u - y) / w; if (o < 0) o = 0; printf "%.2f", o }')
        if [ "$status" = ok ]; then
            "$DTRAIN_POST" csv "$dir/run/run.h5" -o "$dir" >/dev/null 2>&1 || status=failed
        fi
        rm -rf "$dir/run/checkpoints"
        local nparams
        nparams=$(sed -n 's/.*model mlp (\([0-9]*\) parameters).*/\1/p' "$log" | head -n1)
        cat >"$dir/meta.txt" <<META
mode=$mode
ranks=$n
bandwidth=$bw
variant=$variant
slow_rank=$(printf '%s\n' "$@" | sed -n 's/^run.test_delay_rank=//p' | tail -n1)
delay_ms=$(printf '%s\n' "$@" | sed -n 's/^run.test_delay_ms=//p' | tail -n1)
steps=$STEPS
warmup=$WARMUP
nparams=${nparams:-0}
status=$status
finalize_killed=$killed
wall_s=$wall
cpu_user_s=$user
cpu_sys_s=$sys
busy_before=$BUSY
outside_cpu=$outside
veth_tx_bytes=$((tx1 - tx0))
yield_shim=$SHIM
overrides=${EXTRA[*]:-}
fallback=$NETNS_FALLBACK
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
META
        sed -i 's/^slow_rank=$/slow_rank=-1/; s/^delay_ms=$/delay_ms=0/' "$dir/meta.txt"
        printf '%-10s n=%d %-9s %-8s try %d: %s, %5.1f s, other programs %s cores before / %s during%s\n' \
            "$mode" "$n" "$bw" "$variant" "$k" "$status" "$wall" "$BUSY" "$outside" \
            "$([ "$killed" = 1 ] && echo ', finalize killed')" | tee -a "$OUT/log.txt"
        if [ "$status" = ok ] && awk -v b="$BUSY" -v o="$outside" -v m="$LOAD_MAX" 'BEGIN { exit !(b < m && o < m) }'; then
            break
        fi
        [ "$t" -lt "$RETRIES" ] && echo "#   disturbed or failed: running $key again" >&2
    done
}

# alpha and B of every link with all N links busy at once (rank r sends to
# r+1); appends "bw,n,alpha_s,beta_Bps" (medians over the links) to FILE
calibrate() {
    local bw=$1 n=$2 file=$3 r port=5301 pids
    PROBE_PIDS=
    for ((r = 0; r < n; r++)); do
        ip netns exec "${NETNS_PREFIX}$r" python3 "$here/linkprobe.py" server "$port" &
        PROBE_PIDS="$PROBE_PIDS $!"
    done
    sleep 0.3
    pids=
    for ((r = 0; r < n; r++)); do
        ip netns exec "${NETNS_PREFIX}$r" python3 "$here/linkprobe.py" client \
            "$NETNS_SUBNET.$(((r + 1) % n + 1))" "$port" 2 >"$OUT/probe.$r" &
        pids="$pids $!"
    done
    for r in $pids; do wait "$r"; done
    for r in $PROBE_PIDS; do wait "$r" 2>/dev/null; done
    PROBE_PIDS=
    cat "$OUT"/probe.* | tr ' ' '\n' | awk -F= -v bw="$bw" -v n="$n" '
        $1 == "alpha_s" { a[na++] = $2 } $1 == "bytes_per_s" { b[nb++] = $2 }
        function med(v, k,   i, j, t) { for (i = 0; i < k; i++) for (j = i + 1; j < k; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                                     return k % 2 ? v[(k - 1) / 2] : (v[k / 2 - 1] + v[k / 2]) / 2 }
        END { if (na && nb) printf "%s,%d,%.6g,%.6g\n", bw, n, med(a, na), med(b, nb) }' >>"$file"
    rm -f "$OUT"/probe.*
}

mkdir -p "$OUT"
[ "$FRESH" = 1 ] && rm -rf "$OUT/runs" "$OUT/calib.csv"
mkdir -p "$OUT/runs"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n
# one rank per "node": no MPICH shared-memory path, no node-aware collectives
export MPIR_CVAR_NOLOCAL=1
if [ "$SHIM" = 1 ]; then
    gcc -std=c11 -O2 -shared -fPIC -o "$OUT/yield_poll.so" "$here/yield_poll.c" -ldl \
        || { echo "run.sh: cannot build yield_poll.so" >&2; exit 1; }
    PRELOAD=$OUT/yield_poll.so
fi

maxn=0
if [ "$GRID" = 1 ]; then
    for n in $RANKS; do [ "$n" -gt "$maxn" ] && maxn=$n; done
fi
[ "$HETERO" = 1 ] && [ "$HET_RANKS" -gt "$maxn" ] && maxn=$HET_RANKS
[ "$maxn" -gt 0 ] || { echo "run.sh: nothing to run" >&2; exit 2; }
net_up "$maxn" || exit 1
if [ "$NETNS_FALLBACK" = 1 ]; then
    export UCX_NET_DEVICES=lo
    echo "# FALLBACK: loopback shared by all ranks; the figures describe a bus, not a cluster" >&2
else
    export UCX_NET_DEVICES=eth0
fi

{
    echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p'), $NCPU cores; dtrain: $("$DTRAIN" --version 2>/dev/null | head -n1)"
    echo "# steps $STEPS, warm-up $WARMUP, overrides '${EXTRA[*]:-}', modes '$MODES', ranks '$RANKS', bandwidths '$BWS', yield shim $SHIM, fallback $NETNS_FALLBACK"
} | tee -a "$OUT/log.txt"

all_bws=
[ "$GRID" = 1 ] && all_bws=$BWS
[ "$HETERO" = 1 ] && case " $all_bws " in *" $HET_BW "*) ;; *) all_bws="$all_bws $HET_BW" ;; esac

if [ "$CALIB" = 1 ] && [ "$NETNS_FALLBACK" != 1 ]; then
    [ -f "$OUT/calib.csv" ] || echo "bandwidth,ranks,alpha_s,beta_Bps" >"$OUT/calib.csv"
    for bw in $all_bws; do
        net_shape "$bw" || exit 1
        for n in $( { [ "$GRID" = 1 ] && echo $RANKS; [ "$HETERO" = 1 ] && [ "$bw" = "$HET_BW" ] && echo "$HET_RANKS"; } | tr ' ' '\n' | sort -nu); do
            grep -v "^$bw,$n," "$OUT/calib.csv" >"$OUT/calib.tmp"
            calibrate "$bw" "$n" "$OUT/calib.tmp"
            mv "$OUT/calib.tmp" "$OUT/calib.csv"
            echo "# link $bw, $n links busy: $(grep "^$bw,$n," "$OUT/calib.csv")" | tee -a "$OUT/log.txt"
        done
    done
fi

if [ "$GRID" = 1 ]; then
    for bw in $BWS; do
        net_shape "$bw" || exit 1
        for n in $RANKS; do
            for mode in $MODES; do
                run_point "$mode-n$n-$bw" "$mode" "$n" "$bw" grid
            done
        done
    done
fi

if [ "$HETERO" = 1 ]; then
    net_shape "$HET_BW" || exit 1
    for mode in $HET_MODES; do
        run_point "het-$mode-n$HET_RANKS-$HET_BW-base" "$mode" "$HET_RANKS" "$HET_BW" het-base \
            run.test_delay_rank="$HET_RANK" run.test_delay_ms=0
        run_point "het-$mode-n$HET_RANKS-$HET_BW-slow" "$mode" "$HET_RANKS" "$HET_BW" het-slow \
            run.test_delay_rank="$HET_RANK" run.test_delay_ms="$HET_DELAY"
    done
fi

net_shape unlimited
python3 "$here/analyze.py" collect "$OUT" || exit 1
echo "# $OUT/results.csv, $OUT/hetero.csv, $OUT/tables.md"
if [ "$PLOT" = 1 ] && command -v gnuplot >/dev/null; then
    gnuplot -e "dir='$OUT'; out='$here/scaling.png'" "$here/scaling.gp" && echo "# $here/scaling.png"
fi
