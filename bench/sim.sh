#!/bin/bash
# Simulated scaling (bench/RESULTS.md §12): time per iteration of each mode against the
# rank count on the simulated platforms, with dtrain-sim (configure
# --with-smpi). One sim.csv per (platform, mode, ranks) under $BENCH_OUT/sim,
# gathered into $BENCH_OUT/sim/all.csv, and one figure per platform
# (dtrain-post simplot). Sequential: SimGrid is one process on one core.
#
# Environment (all optional; the defaults are the issue's prediction):
#   DTRAIN_SIM, DTRAIN_POST  the launcher and dtrain-post (default: this tree's src/...)
#   BENCH_OUT   scratch directory (default /tmp/dtrain-bench)
#   PLATFORMS   default "eth1g eth10g eth25g ib-hdr"
#   MODES       default "allreduce sgp dpsgd easgd ps-async"
#   RANKS       default "8 16 32 64 128 256 512 1024"
#   PARAMS      flat vector length (default 25600000, ResNet-50; "model": the
#               length of MODEL's own vector)
#   MODEL       the deck's model (default mlp; with PARAMS=model, e.g. resnet20_gn)
#   COMPUTE     seconds of compute per step (default 0.3), or
#   COMPUTE_FROM  a real run's record: its median compute time per step
#   STEPS       steps per run (default 5)
#   TIMEOUT     seconds of wall time a run may take before it is stopped (default: none)
#   EXTRA       more key=value arguments (e.g. sim.slow_ranks=0 sim.slowdown=10)
set -uo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
DTRAIN_SIM=${DTRAIN_SIM:-$BENCH_DIR/../src/dtrain-sim}
DTRAIN_POST=${DTRAIN_POST:-$BENCH_DIR/../src/dtrain-post}
BENCH_OUT=${BENCH_OUT:-/tmp/dtrain-bench}
PLATFORMS=${PLATFORMS:-eth1g eth10g eth25g ib-hdr}
MODES=${MODES:-allreduce sgp dpsgd easgd ps-async}
RANKS=${RANKS:-8 16 32 64 128 256 512 1024}
PARAMS=${PARAMS:-25600000}
COMPUTE=${COMPUTE:-0.3}
COMPUTE_FROM=${COMPUTE_FROM:-}
MODEL=${MODEL:-mlp}
STEPS=${STEPS:-5}
EXTRA=${EXTRA:-}
TIMEOUT=${TIMEOUT:-0}
for exe in "$DTRAIN_SIM" "$DTRAIN_POST"; do
    [ -x "$exe" ] || { echo "bench/sim.sh: $exe not found (set DTRAIN_SIM/DTRAIN_POST)" >&2; exit 1; }
done
out=$BENCH_OUT/sim
mkdir -p "$out"
deck=$out/deck.ini
cat >"$deck" <<DECK
[run]
output_dir = $out/unused
max_steps = $STEPS
log_every = $STEPS
[model]
name = $MODEL
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
rm -f "$out/all.csv"
sizes=()
[ "$PARAMS" = model ] || sizes+=(sim.params="$PARAMS")
if [ -n "$COMPUTE_FROM" ]; then sizes+=(sim.compute_from="$COMPUTE_FROM")
else sizes+=(sim.compute_time="$COMPUTE"); fi
for p in $PLATFORMS; do
    for m in $MODES; do
        for n in $RANKS; do
            d=$out/$p/$m-$n
            rm -rf "$d"
            mkdir -p "$out/$p"
            echo "== $p $m $n ranks ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
            # shellcheck disable=SC2086
            timeout --kill-after=10 "$TIMEOUT" "$DTRAIN_SIM" --ranks "$n" --platform "$p" "$deck" algorithm.mode="$m" \
                run.output_dir="$d" "${sizes[@]}" $EXTRA \
                >"$d.log" 2>&1 || { echo "   failed: $(grep -v '^\[' "$d.log" | tail -n 2)"; continue; }
            grep "per iteration" "$d.log" | sed 's/^/   /'
            [ -f "$out/all.csv" ] || head -n 1 "$d/sim.csv" >"$out/all.csv"
            tail -n +2 "$d/sim.csv" >>"$out/all.csv"
        done
    done
    ls "$out/$p"/*/sim.csv >/dev/null 2>&1 &&
        "$DTRAIN_POST" simplot "$out/$p"/*/sim.csv -o "$out/sim-$p.png"
done
echo "all rows: $out/all.csv"
