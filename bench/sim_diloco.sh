#!/bin/bash
# DiLoCo in the simulator (bench/RESULTS.md §13): time per inner step of a
# GPT-2-small-sized vector (124 M floats) against the node count on the
# simulated platforms, for allreduce, sgp and diloco with H inner steps per
# outer step, with dtrain-sim (configure --with-smpi). One sim.csv per
# (platform, variant, ranks) under $BENCH_OUT/simdiloco, gathered into
# all.csv with the variant as the mode (dtrain-sim records every diloco run
# as "diloco"), and one figure per platform (dtrain-post simplot).
#
# A diloco run takes exactly one outer loop (run.max_steps = H): its time
# per step is (H compute + one exchange) / H, the steady state, since the
# ranks are in step at every outer step. allreduce and sgp take one step.
# The deck's epochs are many so that run.max_steps ends every run: one epoch
# of the synthetic set is 1,000,000 / (32 ranks) steps, 30 at 1,024 ranks,
# fewer than H = 50 (such a run would take no outer step).
#
# 512 and 1,024 nodes need the launcher's huge pages (a hugetlbfs mount with
# 2 MiB pages and vm.max_map_count of about 2 M: doc/simulator.md); on 4 KiB
# pages the shared vectors' page tables make a 512-node run take more than
# 30 minutes here. Each run's CPU time (/usr/bin/time, where installed)
# ends its log.
#
# Environment (all optional):
#   DTRAIN_SIM, DTRAIN_POST  the launcher and dtrain-post (default: this tree's src/)
#   BENCH_OUT   scratch directory (default /tmp/dtrain-bench)
#   PLATFORMS   default "eth1g eth10g eth25g ib-hdr"
#   VARIANTS    default "allreduce sgp d10 d50 d200 i50": dH = fp32 diloco with
#               H inner steps, iH = int8, sH = streaming (5 fragments, overlap 5)
#   RANKS       default "8 32 128 512 1024" (empty: only gather the records and draw)
#   PARAMS      flat vector length (default 124000000: GPT-2 small, 124 M)
#   COMPUTE     seconds of compute per inner step (default 0.3)
#   JOBS        simulations run at once (default 1; each is one process)
#   TIMEOUT     seconds of wall time a run may take (default 1800)
#   NICE        niceness of the simulations (default 19)
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
DTRAIN_SIM=${DTRAIN_SIM:-$REPO/src/dtrain-sim}
DTRAIN_POST=${DTRAIN_POST:-$REPO/src/dtrain-post}
BENCH_OUT=${BENCH_OUT:-/tmp/dtrain-bench}
PLATFORMS=${PLATFORMS:-eth1g eth10g eth25g ib-hdr}
VARIANTS=${VARIANTS:-allreduce sgp d10 d50 d200 i50}
RANKS=${RANKS-8 32 128 512 1024}
PARAMS=${PARAMS:-124000000}
COMPUTE=${COMPUTE:-0.3}
JOBS=${JOBS:-1}
TIMEOUT=${TIMEOUT:-1800}
NICE=${NICE:-19}
for exe in "$DTRAIN_SIM" "$DTRAIN_POST"; do
    [ -x "$exe" ] || { echo "bench/sim_diloco.sh: $exe not found (set DTRAIN_SIM/DTRAIN_POST)" >&2; exit 1; }
done
out=$BENCH_OUT/simdiloco
mkdir -p "$out"
deck=$out/deck.ini
cat >"$deck" <<DECK
[run]
output_dir = $out/unused
max_steps = 1
epochs = 1000
log_every = 1000
[algorithm]
mode = diloco
[model]
name = mlp
[data]
name = synthetic
synthetic_channels = 3
synthetic_height = 32
synthetic_width = 32
synthetic_train = 1000000
[optim]
batch_size = 32
lr = 0.1
DECK

# args VARIANT: the deck overrides of one variant
args() {
    case $1 in
        allreduce|sgp) echo "algorithm.mode=$1 run.max_steps=1" ;;
        d[0-9]*) echo "diloco.inner_steps=${1#d} run.max_steps=${1#d}" ;;
        i[0-9]*) echo "diloco.inner_steps=${1#i} run.max_steps=${1#i} diloco.precision=int8" ;;
        s[0-9]*) echo "diloco.inner_steps=${1#s} run.max_steps=$((2 * ${1#s})) diloco.fragments=5 diloco.overlap=5" ;;
        *) echo "bench/sim_diloco.sh: unknown variant '$1' (allreduce, sgp, dH, iH, sH)" >&2; return 1 ;;
    esac
}
# one PLATFORM VARIANT RANKS: one simulation, its record under $out/PLATFORM/VARIANT-RANKS
one() {
    local p=$1 v=$2 n=$3 a
    a=$(args "$v") || return 1
    local d=$out/$p/$v-$n
    rm -rf "$d"
    mkdir -p "$d"
    local tm=()
    [ -x /usr/bin/time ] && tm=(/usr/bin/time -f "cpu: %U s user, %S s system, %e s wall, %M KB peak RSS")
    # shellcheck disable=SC2086
    timeout --kill-after=10 "$TIMEOUT" nice -n "$NICE" "${tm[@]}" "$DTRAIN_SIM" --ranks "$n" --platform "$p" \
        "$deck" run.output_dir="$d" sim.params="$PARAMS" sim.compute_time="$COMPUTE" $a \
        >"$d.log" 2>&1
    local rc=$?
    echo "== $p $v $n ranks: exit $rc, $(date -u +%H:%M:%S), $(grep -h 'per iteration' "$d.log" | cut -c 13-) $(grep -h '^cpu: ' "$d.log")"
}
export -f one args
export out deck DTRAIN_SIM PARAMS COMPUTE TIMEOUT NICE
for n in $RANKS; do
    for p in $PLATFORMS; do
        for v in $VARIANTS; do
            echo "$p $v $n"
        done
    done
done | xargs -r -P "$JOBS" -L 1 bash -c 'one "$0" "$1" "$2"'

# all.csv: every record, the variant as its mode; one figure per platform
head -n 1 "$(ls "$out"/*/*/sim.csv | head -n 1)" >"$out/all.csv"
for p in $PLATFORMS; do
    for f in "$out/$p"/*/sim.csv; do
        [ -f "$f" ] || continue
        v=$(basename "$(dirname "$f")"); v=${v%-*}
        case $v in
            d[0-9]*) label="diloco H=${v#d}" ;;
            i[0-9]*) label="diloco H=${v#i} int8" ;;
            s[0-9]*) label="diloco H=${v#s} 5 fragments" ;;
            *) label=$v ;;
        esac
        tail -n +2 "$f" | awk -F, -v OFS=, -v l="$label" '{ $1 = l; print }' >>"$out/all.csv"
    done
    awk -F, -v p="$p" 'NR == 1 || $3 == p' "$out/all.csv" >"$out/$p.csv"
    "$DTRAIN_POST" simplot "$out/$p.csv" -o "$out/sim-diloco-$p.png"
done
echo "all rows: $out/all.csv"
