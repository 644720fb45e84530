# Shared helpers for bench/*.sh (sourced, not run).
#
# Environment (all optional):
#   DTRAIN, DTRAIN_POST  the binaries            (default: this tree's src/dtrain{,-post})
#   PYTHON               an interpreter with torch (default /usr/bin/python3: Debian's torch 1.13)
#   BENCH_OUT            scratch directory for run records (default /tmp/dtrain-bench)
#   ROUNDS               alternating rounds per configuration (default 3)
#   LOAD_MAX             wait until the 1-minute load average is below this (default 0.5)
#   LOAD_WAIT            give up waiting after this many seconds and go on (default 300)
#   CAP                  ISA cap for both sides: avx2, avx512_core, avx512_core_bf16 (bench/isa_cap.sh)

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
DTRAIN=${DTRAIN:-$REPO/src/dtrain}
DTRAIN_POST=${DTRAIN_POST:-$REPO/src/dtrain-post}
PYTHON=${PYTHON:-/usr/bin/python3}
BENCH_OUT=${BENCH_OUT:-/tmp/dtrain-bench}
ROUNDS=${ROUNDS:-3}
LOAD_MAX=${LOAD_MAX:-0.5}
LOAD_WAIT=${LOAD_WAIT:-300}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# CAP: the same ISA cap for both sides (bench/isa_cap.sh)
. "$BENCH_DIR/isa_cap.sh"

for exe in "$DTRAIN" "$DTRAIN_POST"; do
    [ -x "$exe" ] || { echo "bench: $exe not found or not executable (set DTRAIN/DTRAIN_POST)" >&2; exit 1; }
done
"$PYTHON" -c 'import torch' 2>/dev/null \
    || { echo "bench: $PYTHON cannot import torch (set PYTHON)" >&2; exit 1; }
mkdir -p "$BENCH_OUT"

load1() { cut -d' ' -f1 /proc/loadavg; }

# Wait (30 s at a time, at most LOAD_WAIT s) for the 1-minute load to drop below
# LOAD_MAX, so that other jobs on the machine do not steal the cores we time.
wait_for_load() {
    local waited=0
    while awk -v l="$(load1)" -v m="$LOAD_MAX" 'BEGIN { exit !(l >= m) }'; do
        if [ "$waited" -ge "$LOAD_WAIT" ]; then
            echo "# load $(load1) still >= $LOAD_MAX after ${waited} s; measuring anyway" >&2
            return 0
        fi
        echo "# load $(load1) >= $LOAD_MAX, waiting 30 s" >&2
        sleep 30
        waited=$((waited + 30))
    done
    echo "# load $(load1) (< $LOAD_MAX), starting" >&2
}

# Run a command, writing its peak RSS in KiB to the file $1 (GNU time's %M, or
# getrusage(RUSAGE_CHILDREN) of a python wrapper when GNU time is missing).
with_rss() {
    local out=$1
    shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f %M -o "$out" "$@"
    else
        "$PYTHON" -c '
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
open(sys.argv[1], "w").write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$out" "$@"
    fi
}

# Aggregate training rate of a dtrain run record: for every rank,
# (images_last - images_first) / (wall_last - wall_first) over its /train rows,
# summed over ranks. Start-up, the first log interval (warm-up) and the final
# evaluation and checkpoint lie outside that window. Prints "total r0,r1,...".
dtrain_rate() {
    local h5=$1 dir
    dir=$(dirname "$h5")/csv
    "$DTRAIN_POST" csv "$h5" -o "$dir" >/dev/null || return 1
    "$PYTHON" - "$dir/train.csv" <<'PY'
import csv, sys
rows = {}
for r in csv.DictReader(open(sys.argv[1])):
    rows.setdefault(int(r["rank"]), []).append((int(r["step"]), float(r["wall"]), int(r["images"])))
rates = []
for rank in sorted(rows):
    v = sorted(rows[rank])
    if len(v) < 2:
        sys.exit("dtrain_rate: fewer than two /train rows for rank %d" % rank)
    rates.append((v[-1][2] - v[0][2]) / (v[-1][1] - v[0][1]))
print("%.2f %s" % (sum(rates), ",".join("%.2f" % r for r in rates)))
PY
}

# Value of key=... in a line such as "images_per_s=123.4 peak_rss_mb=456".
kv() { tr ' ' '\n' | sed -n "s/^$1=//p" | head -n1; }

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
