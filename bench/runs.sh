# Shared by the run-series benchmarks (ps_fmnist.sh, lsgd_fmnist.sh,
# ecl_fmnist.sh); sourced, not run. The sourcing script sets
#   build   the build directory (src/dtrain, src/dtrain-post)
#   src     the source tree (decks in src/inputs)
#   runs    where run records go (removed checkpoints, kept run.h5)
#   limit   seconds a run may take before it is killed as hung
# and may set run_prefix (prepended to a run's record directory) and define
#   case_done DIR KEEP   called after a run's CSVs are in KEEP, and for a kept case
# Environment: IDLE_MAX (start a run once the machine is at most this % busy,
# 50), IDLE_WAIT (but wait at most this many seconds, 300; 0: do not wait, only
# record the load), FORCE (rerun cases whose CSVs are there).

export OPENBLAS_NUM_THREADS=1 UCX_TLS=${UCX_TLS:-self,sm} UCX_WARN_UNUSED_ENV_VARS=n
failed=0
run_prefix=${run_prefix:-}

# CPU busy share (%) of the whole machine over 3 s, from /proc/stat.
busy() {
    local a b
    read -ra a </proc/stat; sleep 3; read -ra b </proc/stat
    local tot=0 i
    for i in 1 2 3 4 5 6 7 8; do tot=$((tot + b[i] - a[i])); done
    echo $((100 - 100 * (b[4] - a[4] + b[5] - a[5]) / (tot > 0 ? tot : 1)))
}

# Wait (at most IDLE_WAIT s) until the other users of the machine leave at
# least 100 - IDLE_MAX % of it idle: the runs are niced and would otherwise
# measure someone else's job. Prints the last busy share.
wait_idle() {
    local waited=0 b
    while b=$(busy) && [ "$b" -gt "${IDLE_MAX:-50}" ] && [ "$waited" -lt "${IDLE_WAIT:-300}" ]; do
        sleep 12
        waited=$((waited + 15))
    done
    echo "$b"
}

# run_case DEST NAME NP DECK KEY=VALUE...: one dtrain run of inputs/DECK on NP
# ranks; its CSVs (dtrain-post csv) go to DEST/NAME, its output to
# DEST/NAME.log, a line (name, UTC end, exit status, seconds, "1-min load/CPU
# busy %" before, command) to DEST/runs.tsv. A failed run is counted in
# $failed and shown; the series goes on.
run_case() {
    local dest=$1 name=$2 n=$3 deck=$4
    shift 4
    local dir=$runs/$run_prefix$name keep=$dest/$name
    if [ -z "${FORCE:-}" ] && [ -s "$keep/eval.csv" ]; then
        echo "$name: kept from an earlier run ($keep)"
        ! declare -F case_done >/dev/null || case_done "$dir" "$keep"
        return 0
    fi
    local cmd=(mpiexec -n "$n" "$build/src/dtrain" "$src/inputs/$deck" run.output_dir="$dir"
               run.overwrite=true "$@")
    local load t0 rc=0 secs
    load="$(cut -d' ' -f1 /proc/loadavg)/$(wait_idle)%"
    t0=$(date +%s.%N)
    timeout -k 30 "$limit" "${cmd[@]}" >"$dest/$name.log" 2>&1 || rc=$?
    secs=$(echo "$(date +%s.%N) - $t0" | bc)
    printf '%s\t%s\t%d\t%.1f\t%s\t%s\n' "$name" "$(date -u +%H:%M:%S)" "$rc" "$secs" "$load" \
        "${cmd[*]}" >>"$dest/runs.tsv"
    if [ "$rc" -ne 0 ]; then
        echo "FAILED (exit $rc after $secs s): ${cmd[*]}"
        tail -n 25 "$dest/$name.log"
        failed=$((failed + 1))
        return 0
    fi
    rm -rf "$keep" && mkdir -p "$keep"
    "$build/src/dtrain-post" csv "$dir/run.h5" -o "$keep" >/dev/null
    ! declare -F case_done >/dev/null || case_done "$dir" "$keep"
    rm -rf "$dir/checkpoints"
    echo "$name ($secs s, load $load): $(grep '^done:' "$dest/$name.log")"
}
