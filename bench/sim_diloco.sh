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
# A delayed variant (-dl, diloco.delay = 1) runs twice, 3 and 2 outer loops
# (the second record in its directory's 2loops/): each run ends by waiting
# for the exchange still in flight, so one run's time per step is not the
# steady state, and the difference of the two runs is exactly one loop of it;
# its time per step in all.csv is (simulated 3 loops - simulated 2 loops) / H
# (its other columns are the 3-loop run's).
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
# SET=sparse: DiLoCo with SparseLoCo's top-k 2-bit codes, and delayed, against
# allreduce: PLATFORMS "eth1g eth10g", VARIANTS "allreduce d30 t30 d30-dl
# t30-dl", RANKS "64 128 256 512 1024" (each still settable); besides the
# per-platform figures, sparse.csv (these variants on these platforms),
# sparse.txt (time per step, bytes per step and allreduce's time over the
# variant's, per platform and node count, also printed) and
# sim-diloco-sparse.png (time per step against nodes, both platforms in one
# figure). The exchanges to every peer at once (the top-k MPI_Iallgather;
# diloco's own reduce-scatter and all-gather of codes, the delayed fp32
# exchange) SMPI runs as p (p - 1) concurrent flows, whose cost grows much
# faster than p (top-k: 1.4 s of wall at 64 nodes, 50 s at 128; SMPI 3.32
# has no algorithm choice for its non-blocking collectives). SET=sparse
# therefore passes sim.gather = links (GATHER; doc/simulator.md): one message
# per rank to the next with the same bytes, p flows, the same simulated time
# on these one-switch platforms (0.469529 s against 0.46953 s a step for
# top-k at 128 nodes; tests/sim.sh holds it at 16 ranks). GATHER=peers runs
# the per-peer messages. Cost with links, one run pinned to one core on huge
# pages (user + system CPU; a delayed variant runs twice): 64 and 128 nodes
# 1-3 s a run, 256 nodes 8-12 s, 512 nodes 41-63 s, 1,024 nodes 263-349 s;
# the whole grid, 70 runs, 89 CPU minutes (bench/RESULTS.md §22). Runs go from the smallest node count up; a
# (platform, variant) that reaches TIMEOUT is not tried at larger counts in
# the same invocation. Memory: 512 and 1,024 nodes need the launcher's huge
# pages (a hugetlbfs mount with free 2 MiB pages), and top-k maps every
# rank's gather buffer (the codes of all ranks, 1,024 x 4.5 MB) into each
# rank besides diloco's 8 vectors: at 1,024 nodes t30 ran with
# vm.max_map_count = 4.4 M, t30-dl (two vectors more) aborted there ("Could
# not map folded virtual memory") and mapped 4.69 M blocks: raise it to about
# 5 M (sysctl -w vm.max_map_count=5000000), above the 2 M the launcher checks
# for. About 1.4-1.5 GB of private memory a run at 1,024 nodes.
# What the arithmetic says before any run (1 GbE, 124 M floats, 2-bit codes
# of 4.5 MB a rank): the all-gather brings each rank (p - 1) x 4.5 MB, 0.28 GB
# at 64 nodes and 4.6 GB at 1,024, where allreduce moves about 2 x 496 MB
# whatever p: top-k's exchange outgrows fp32's beyond about 220 nodes. A
# delayed fp32 exchange waits for its reduce-scatter one step after posting
# it (src/algo/diloco.c), so only its all-gather half overlaps the loop.
#
# Environment (all optional):
#   DTRAIN_SIM, DTRAIN_POST  the launcher and dtrain-post (default: this tree's src/)
#   BENCH_OUT   scratch directory (default /tmp/dtrain-bench)
#   SET         sparse: the defaults above for the compressed and delayed variants
#   PLATFORMS   default "eth1g eth10g eth25g ib-hdr"
#   VARIANTS    default "allreduce sgp d10 d50 d200 i50": dH = fp32 diloco with
#               H inner steps, iH = int8, sH = streaming (5 fragments, overlap 5),
#               tH = top-k 2-bit (density 0.02 of chunks of 4096: SparseLoCo's
#               codes); dH-dl, iH-dl, tH-dl: the same with delay = 1
#   RANKS       default "8 32 128 512 1024" (empty: only gather the records and draw)
#   PARAMS      flat vector length (default 124000000: GPT-2 small, 124 M)
#   COMPUTE     seconds of compute per inner step (default 0.3)
#   GATHER      sim.gather: peers (default) or links (default under SET=sparse);
#               links is exact on one non-blocking switch only (doc/simulator.md)
#   JOBS        simulations run at once (default 1; each is one process)
#   TIMEOUT     seconds of wall time a run may take (default 1800)
#   NICE        niceness of the simulations (default 19)
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
DTRAIN_SIM=${DTRAIN_SIM:-$REPO/src/dtrain-sim}
DTRAIN_POST=${DTRAIN_POST:-$REPO/src/dtrain-post}
BENCH_OUT=${BENCH_OUT:-/tmp/dtrain-bench}
SET=${SET:-}
case $SET in
    '')
        PLATFORMS=${PLATFORMS:-eth1g eth10g eth25g ib-hdr}
        VARIANTS=${VARIANTS:-allreduce sgp d10 d50 d200 i50}
        RANKS=${RANKS-8 32 128 512 1024}
        ;;
    sparse)
        PLATFORMS=${PLATFORMS:-eth1g eth10g}
        VARIANTS=${VARIANTS:-allreduce d30 t30 d30-dl t30-dl}
        RANKS=${RANKS-64 128 256 512 1024}
        GATHER=${GATHER:-links}
        ;;
    *) echo "bench/sim_diloco.sh: unknown SET '$SET' (sparse)" >&2; exit 2 ;;
esac
GATHER=${GATHER:-peers}
case $GATHER in peers | links) ;; *) echo "bench/sim_diloco.sh: GATHER '$GATHER' (peers, links)" >&2; exit 2 ;; esac
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

# args VARIANT [LOOPS]: the deck overrides of one variant (a diloco variant
# runs LOOPS outer loops: by default 1, a delayed one 3)
args() {
    local v=$1 loops h a=
    loops=${2:-$([[ $v == *-dl ]] && echo 3 || echo 1)}
    case $v in
        allreduce|sgp) echo "algorithm.mode=$v run.max_steps=1"; return ;;
    esac
    h=${v%-dl}
    h=${h#[dist]}
    case $h in '' | *[!0-9]*) echo "bench/sim_diloco.sh: unknown variant '$v' (allreduce, sgp, dH, iH, sH, tH, dH-dl, iH-dl, tH-dl)" >&2; return 1 ;; esac
    case $v in
        d*) ;;
        i*) a="diloco.precision=int8" ;;
        t*) a="diloco.compress=topk diloco.bits=2 diloco.density=0.02 diloco.chunk=4096" ;;
        s*-dl) echo "bench/sim_diloco.sh: $v: fragments take no delay" >&2; return 1 ;;
        s*) echo "diloco.inner_steps=$h run.max_steps=$((2 * h)) diloco.fragments=5 diloco.overlap=5"; return ;;
    esac
    case $v in *-dl) a="$a diloco.delay=1" ;; esac
    echo "diloco.inner_steps=$h run.max_steps=$((loops * h)) $a"
}
# sim DIR PLATFORM RANKS ARGS...: one simulation, its record in DIR, its log DIR.log
sim() {
    local d=$1 p=$2 n=$3 tm=()
    shift 3
    mkdir -p "$d"
    [ -x /usr/bin/time ] && tm=(/usr/bin/time -f "cpu: %U s user, %S s system, %e s wall, %M KB peak RSS")
    timeout --kill-after=10 "$TIMEOUT" nice -n "$NICE" "${tm[@]}" "$DTRAIN_SIM" --ranks "$n" --platform "$p" \
        "$deck" run.output_dir="$d" sim.params="$PARAMS" sim.compute_time="$COMPUTE" sim.gather="$GATHER" "$@" \
        >"$d.log" 2>&1
}
# one PLATFORM VARIANT RANKS: one simulation, its record under $out/PLATFORM/VARIANT-RANKS
# (a delayed variant: two, the 2-loop one in VARIANT-RANKS/2loops)
one() {
    local p=$1 v=$2 n=$3 a rc stop
    stop=$out/$p/$v.timedout
    if [ -f "$stop" ] && [ "$(cat "$stop")" -lt "$n" ]; then
        echo "== $p $v $n ranks: skipped ($v reached TIMEOUT at $(cat "$stop") ranks)"
        return 0
    fi
    a=$(args "$v") || return 1
    local d=$out/$p/$v-$n
    rm -rf "$d" "$d.log"
    # shellcheck disable=SC2086
    sim "$d" "$p" "$n" $a
    rc=$?
    if [ "$rc" = 0 ] && [[ $v == *-dl ]]; then
        # shellcheck disable=SC2046
        sim "$d/2loops" "$p" "$n" $(args "$v" 2)
        rc=$?
    fi
    case $rc in 124 | 137) echo "$n" >"$stop" ;; esac
    echo "== $p $v $n ranks: exit $rc, $(date -u +%H:%M:%S), $(grep -h 'per iteration' "$d.log" | cut -c 13-) $(grep -h '^cpu: ' "$d.log" "$d/2loops.log" 2>/dev/null | tr '\n' ' ')"
}
# label VARIANT: the mode column of all.csv
label() {
    local v=$1 b l
    b=${v%-dl}
    case $b in
        d[0-9]*) l="diloco H=${b#d}" ;;
        i[0-9]*) l="diloco H=${b#i} int8" ;;
        s[0-9]*) l="diloco H=${b#s} 5 fragments" ;;
        t[0-9]*) l="diloco H=${b#t} top-k 2-bit" ;;
        *) l=$b ;;
    esac
    [ "$b" = "$v" ] || l="$l delayed"
    echo "$l"
}
export -f one args sim
export out deck DTRAIN_SIM PARAMS COMPUTE GATHER TIMEOUT NICE
for p in $PLATFORMS; do
    for v in $VARIANTS; do
        args "$v" >/dev/null || exit 2
        rm -f "$out/$p/$v.timedout"
    done
done
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
        if [[ $v == *-dl ]]; then
            # the steady state: one loop, the 3-loop run less the 2-loop one
            s2=$(awk -F, 'NR == 2 { print $9 }' "$(dirname "$f")/2loops/sim.csv" 2>/dev/null)
            [ -n "$s2" ] || { echo "$f: no 2-loop record beside it; left out" >&2; continue; }
            h=${v%-dl}
            tail -n +2 "$f" | awk -F, -v OFS=, -v l="$(label "$v")" -v s2="$s2" -v h="${h#?}" \
                '{ $1 = l; $6 = sprintf("%.9g", ($9 - s2) / h); print }' >>"$out/all.csv"
        else
            tail -n +2 "$f" | awk -F, -v OFS=, -v l="$(label "$v")" '{ $1 = l; print }' >>"$out/all.csv"
        fi
    done
    awk -F, -v p="$p" 'NR == 1 || $3 == p' "$out/all.csv" >"$out/$p.csv"
    "$DTRAIN_POST" simplot "$out/$p.csv" -o "$out/sim-diloco-$p.png"
done
echo "all rows: $out/all.csv"

# SET: its variants on its platforms in one file, one table and one figure
if [ -n "$SET" ]; then
    labels=
    for v in $VARIANTS; do labels+="$(label "$v")|"; done
    awk -F, -v labels="|$labels" -v plats=" $PLATFORMS " \
        'NR == 1 || (index(labels, "|" $1 "|") && index(plats, " " $3 " "))' \
        "$out/all.csv" >"$out/$SET.csv"
    awk -F, -v labels="|$labels" '
        NR == 1 { next }
        { k = $3 SUBSEP $2; t[k, $1] = $6; b[k, $1] = $12; keys[k] = 1 }
        END {
            nl = split(substr(labels, 2), L, "|")
            printf "%-8s %6s  %-34s %14s %16s %14s\n", "network", "nodes", "variant", "s per step", "bytes per step", "allreduce / it"
            # platforms and node counts in a stable order: by platform name, then nodes
            n = 0
            for (k in keys) { split(k, a, SUBSEP); K[++n] = sprintf("%s %08d", a[1], a[2]); P[K[n]] = a[1]; R[K[n]] = a[2] }
            for (i = 2; i <= n; i++) { x = K[i]; for (j = i - 1; j >= 1 && K[j] > x; j--) K[j + 1] = K[j]; K[j + 1] = x }
            for (i = 1; i <= n; i++) {
                k = P[K[i]] SUBSEP R[K[i]]
                for (j = 1; j <= nl; j++) {
                    if (L[j] == "" || !((k, L[j]) in t)) continue
                    printf "%-8s %6d  %-34s %14.6g %16.6g %14s\n", P[K[i]], R[K[i]], L[j], t[k, L[j]], b[k, L[j]],
                        ((k, "allreduce") in t && t[k, L[j]] > 0) ? sprintf("%.3g", t[k, "allreduce"] / t[k, L[j]]) : "-"
                }
            }
        }' "$out/$SET.csv" | tee "$out/$SET.txt"
    "$DTRAIN_POST" simplot "$out/$SET.csv" -o "$out/sim-diloco-$SET.png" &&
        echo "figure: $out/sim-diloco-$SET.png"
fi
