#!/bin/bash
# The simulator against the emulated cluster (validation, bench/RESULTS.md §12b): every
# point of a bench/network/run.sh grid whose mode dtrain-sim simulates
# (allreduce, sgp, dpsgd, ...) is simulated on a platform that describes the
# same links, and the simulated time per iteration is set beside the measured
# one.
#
#   bench/network/simval.sh [NET_OUT]     (default bench/out/network)
#
# Reads NET_OUT/results.csv (time per iteration and compute per step of each
# point, means over the ranks) and NET_OUT/calib.csv (alpha: TCP half round
# trip, B: stream throughput of one link with all n links busy, linkprobe.py).
# For each point it writes a SimGrid platform of n nodes, each behind its own
# full-duplex link of bandwidth B and latency alpha/2 into a non-blocking
# switch (a path crosses two links: alpha end to end), with SMPI's bandwidth
# and latency factors set to 1 (B and alpha are measured TCP figures, not line
# rates), and runs dtrain-sim on the benchmark's own deck (mlp10m.ini, the
# 10.5 M-parameter mlp) with sim.compute_time = the point's measured compute
# per step. As the measurement skips its warm-up steps, the simulated time
# per iteration is taken between two runs: (T(steps) - T(warmup)) /
# (steps - warmup). Writes NET_OUT/simval.csv and NET_OUT/simval.md.
#
# Environment: DTRAIN_SIM (default: this tree's src/dtrain-sim), MODES (default
# "allreduce sgp dpsgd": the grid's modes that are simulated; osgp and
# adpsgd have a communication thread, which SMPI cannot run).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
NET_OUT=${1:-$REPO/bench/out/network}
DTRAIN_SIM=${DTRAIN_SIM:-$HERE/../../src/dtrain-sim}
MODES=${MODES:-allreduce sgp dpsgd}
[ -x "$DTRAIN_SIM" ] || { echo "simval.sh: $DTRAIN_SIM not found (set DTRAIN_SIM)" >&2; exit 1; }
for f in results.csv calib.csv; do
    [ -f "$NET_OUT/$f" ] || { echo "simval.sh: $NET_OUT/$f not found (run bench/network/run.sh first)" >&2; exit 1; }
done
work=$NET_OUT/simval
mkdir -p "$work"

# the points: mode ranks bandwidth steps warmup compute measured alpha beta
python3 - "$NET_OUT" "$MODES" >"$work/points.txt" <<'PY' || exit 1
import csv, sys
out, modes = sys.argv[1], sys.argv[2].split()
for r in csv.DictReader(open(out + "/results.csv")):
    if r["mode"] not in modes or r["alpha_s"] in ("", "nan"):
        continue
    print(r["mode"], r["ranks"], r["bandwidth"], r["steps"], r["warmup"], r["compute_s"],
          r["time_per_iter_s"], r["alpha_s"], r["beta_Bps"])
PY
[ -s "$work/points.txt" ] || { echo "simval.sh: no simulated mode in $NET_OUT/results.csv" >&2; exit 1; }

platform() { # n alpha beta file
    python3 - "$@" <<'PY'
import sys
n, alpha, beta, path = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    f.write(f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- bench/network's emulated cluster as measured (calib.csv, {n} links busy):
     each node behind its own veth (full duplex, tbf-shaped) into a bridge.
     bw: B = {beta:.6g} B/s, the stream throughput of one link with all {n} busy;
     lat: alpha / 2 = {alpha / 2:.6g} s per link, two links per path (alpha =
     TCP half round trip {alpha:.6g} s). Run with smpi/bw-factor:0:1 and
     smpi/lat-factor:0:1 (1 at every size): these are measured TCP figures, not line rates. -->
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="veth" prefix="node-" suffix="" radical="0-{n - 1}" speed="1Gf"
             bw="{beta:.6g}Bps" lat="{alpha / 2:.6g}s" sharing_policy="SPLITDUPLEX"
             bb_bw="1TBps" bb_lat="0s" bb_sharing_policy="FATPIPE"/>
  </zone>
</platform>
""")
PY
}

simulated() { # mode n steps compute platform dir -> simulated seconds of the run
    rm -rf "$6"
    DTRAIN_SIM_CFG="--cfg=smpi/bw-factor:0:1 --cfg=smpi/lat-factor:0:1" \
        "$DTRAIN_SIM" --ranks "$2" --platform "$5" "$HERE/mlp10m.ini" algorithm.mode="$1" \
        run.output_dir="$6" run.max_steps="$3" run.log_every="$3" sim.compute_time="$4" \
        >"$6.log" 2>&1 || { echo "simval.sh: dtrain-sim failed, see $6.log" >&2; return 1; }
    python3 -c 'import csv,sys; print(list(csv.DictReader(open(sys.argv[1])))[-1]["simulated_s"])' \
        "$6/sim.csv"
}

rows=$work/rows.csv
echo "mode,ranks,bandwidth,alpha_s,beta_Bps,compute_s,measured_s,simulated_s,sim_over_measured,sim_comm_wait_s,measured_comm_wait_s" >"$rows"
while read -r mode n bw steps warmup compute measured alpha beta; do
    pf=$work/veth-$bw-$n.xml
    platform "$n" "$alpha" "$beta" "$pf"
    d=$work/$mode-$n-$bw
    t_all=$(simulated "$mode" "$n" "$steps" "$compute" "$pf" "$d-all") || continue
    t_warm=$(simulated "$mode" "$n" "$warmup" "$compute" "$pf" "$d-warm") || continue
    python3 - "$mode" "$n" "$bw" "$alpha" "$beta" "$compute" "$measured" "$t_all" "$t_warm" \
        "$steps" "$warmup" "$NET_OUT/results.csv" >>"$rows" <<'PY'
import csv, sys
mode, n, bw = sys.argv[1:4]
alpha, beta, compute, measured, t_all, t_warm = map(float, sys.argv[4:10])
steps, warmup = int(sys.argv[10]), int(sys.argv[11])
sim = (t_all - t_warm) / (steps - warmup)
for r in csv.DictReader(open(sys.argv[12])):
    if (r["mode"], r["ranks"], r["bandwidth"]) == (mode, n, bw):
        mcw = float(r["comm_s"]) + float(r["wait_s"])
print(f"{mode},{n},{bw},{alpha:.4g},{beta:.4g},{compute:.5f},{measured:.5f},{sim:.5f},"
      f"{sim / measured:.3f},{sim - compute:.5f},{mcw:.5f}")
PY
    tail -n 1 "$rows"
done <"$work/points.txt"
cp "$rows" "$NET_OUT/simval.csv"
python3 - "$NET_OUT/simval.csv" >"$NET_OUT/simval.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| mode | ranks | link | compute (s) | measured s/iter | simulated s/iter | simulated / measured |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
for r in rows:
    print(f"| {r['mode']} | {r['ranks']} | {r['bandwidth']} | {float(r['compute_s']):.3f} | "
          f"{float(r['measured_s']):.3f} | {float(r['simulated_s']):.3f} | {r['sim_over_measured']} |")
PY
cat "$NET_OUT/simval.md"
