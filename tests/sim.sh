#!/bin/bash
# dtrain-sim (configure --with-smpi): dtrain's own algorithms on a simulated
# 10 Gbit/s cluster (SimGrid SMPI). 4 and 16 ranks of allreduce, sgp and
# ps-async finish and write sim.csv; sgp sends exactly one push of the
# vector (n + 1 floats, the push-sum weight included) per rank and step; on
# this bandwidth-bound setting (a 4 MB vector, 3.2 ms on the wire against
# tens of microseconds of latency) allreduce's communication per step grows
# with the rank count (2 (n-1)/n of the vector crosses each NIC: x1.25 from
# 4 to 16 ranks) while sgp's stays flat within latency terms; a straggler
# 2x slower sets allreduce's pace; sim.compute_from takes a real run's median
# compute time per step; dtrain-post simplot draws one line per mode; a
# threaded mode is refused with its reason.
# diloco (every variant without a thread) on 1 GbE, 0.1 s of compute: with
# H inner steps it communicates once per H steps, so its time per step is
# the compute plus allreduce's (sgp's, for outer_comm = sgp) communication
# over H, within 1 % (communicating every step, or every other one, is 10 %
# or more off); bf16 and int8 send 1/2 and ~1/4 of fp32's bytes in less
# than 0.55 and 0.3 of its time; the streaming variant with its exchange
# overlapping 2 inner steps hides it behind the compute (and, where the
# network is slower than a step, the wait is counted as communication); top-k
# codes (4 bits, 0.02 of each chunk of 4096) send their exact size, 1.03 % of
# fp32's bytes, in under a tenth of its time; the delayed outer step (fp32)
# hides the exchange behind a whole loop (a loop more costs its compute
# alone), all but the last, which the run's end waits for.
# Skipped (77) without the simulator.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
: "${DTRAIN_SIM:=$(pwd)/src/dtrain-sim}"
if [ ! -x "$DTRAIN_SIM" ] || [ ! -f "$(dirname "$DTRAIN_SIM")/dtrain-sim-bin" ]; then
    echo "SKIP: no simulator at $DTRAIN_SIM (configure --with-smpi builds it; SimGrid: apt-get install simgrid libsimgrid-dev)"
    exit 77
fi
N=1000000            # floats in the flat vector: 4 MB
D=$WORK/deck.ini
cat >"$D" <<DECK
[run]
output_dir = $WORK/unused
max_steps = 3
log_every = 1
[algorithm]
mode = allreduce
[model]
name = mlp
hidden = 32
[data]
name = synthetic
synthetic_train = 4096
synthetic_height = 6
synthetic_width = 6
[optim]
batch_size = 16
lr = 0.1
DECK

# sim MODE RANKS [key=value ...]: output dir $WORK/${OUT:-MODE-RANKS}, compute
# time $CT s per step (unset: 0.01; set and empty: none given), platform
# ${PLAT:-eth10g}, status in $RC
sim() {
    local mode=$1 np=$2 out=${OUT:-$1-$2} ct=()
    shift 2
    if [ -z "${CT+set}" ]; then ct=(sim.compute_time=0.01); elif [ -n "$CT" ]; then ct=(sim.compute_time="$CT"); fi
    timeout -k 5 300 "$DTRAIN_SIM" --ranks "$np" --platform "${PLAT:-eth10g}" "$D" algorithm.mode="$mode" \
        run.output_dir="$WORK/$out" sim.params=$N "${ct[@]}" "$@" \
        >"$WORK/out-$out.txt" 2>&1
    RC=$?
}
# col FILE NAME: the column NAME of the last row of a CSV file
col() {
    awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
                          { v = $c } END { print v }' "$1"
}

for np in 4 16; do
    for mode in allreduce sgp ps-async; do
        sim $mode $np
        csv=$WORK/$mode-$np/sim.csv
        if [ "$RC" -eq 0 ] && [ -f "$csv" ] && [ "$(col "$csv" mode)" = "$mode" ] &&
           [ "$(col "$csv" ranks)" = "$np" ] && [ "$(col "$csv" params)" = "$N" ] &&
           [ "$(wc -l <"$WORK/$mode-$np/sim_ranks.csv")" -eq $((np + 1)) ] &&
           awk "BEGIN { exit !($(col "$csv" time_per_iter_s) > 0.01) }"; then
            pass "$mode on $np simulated ranks: sim.csv ($(col "$csv" time_per_iter_s) s per iteration) and sim_ranks.csv"
        else
            fail "$mode on $np ranks (exit status $RC)"; tail -5 "$WORK/out-$mode-$np.txt"
        fi
    done
    # every sgp rank sent (n + 1) floats per step: one push to one peer
    r=$WORK/sgp-$np/sim_ranks.csv
    bad=$(awk -F, -v want=$(( (N + 1) * 4 )) 'NR > 1 && ($3 != 3 || $5 != 3 * want) { print $1 }' "$r" 2>/dev/null)
    if [ -f "$r" ] && [ -z "$bad" ]; then
        pass "sgp on $np ranks: every rank sent one push of the vector per step ($(( (N + 1) * 4 )) bytes)"
    else
        fail "sgp on $np ranks: traffic per step differs from one push on rank(s) ${bad:-?}"
    fi
done

a4=$(col "$WORK/allreduce-4/sim.csv" comm_s); a16=$(col "$WORK/allreduce-16/sim.csv" comm_s)
s4=$(col "$WORK/sgp-4/sim.csv" comm_s); s16=$(col "$WORK/sgp-16/sim.csv" comm_s)
if awk "BEGIN { exit !($a16 > 1.15 * $a4) }"; then
    pass "allreduce's communication per step grows with the ranks: $a4 s (4) -> $a16 s (16)"
else
    fail "allreduce's communication per step does not grow: $a4 s (4) -> $a16 s (16)"
fi
# flat: within 0.2 ms (a few latencies) of the 4-rank figure
if awk "BEGIN { d = $s16 - $s4; exit !(d < 2e-4 && d > -2e-4) }"; then
    pass "sgp's communication per step stays flat: $s4 s (4) -> $s16 s (16)"
else
    fail "sgp's communication per step is not flat: $s4 s (4) -> $s16 s (16)"
fi

# dtrain-post simplot: one series per mode, its points sorted by rank count
"$DTRAIN_POST" simplot "$WORK"/allreduce-16/sim.csv "$WORK"/allreduce-4/sim.csv \
    "$WORK"/sgp-4/sim.csv "$WORK"/sgp-16/sim.csv -o "$WORK/sim.png" --data "$WORK/simplot" \
    >"$WORK/out-simplot.txt" 2>&1 || true
pts=$(cat "$WORK"/simplot/sim[12].dat 2>/dev/null | awk 'NR % 3 != 1 { printf "%s ", $1 }')
if [ -s "$WORK/sim.png" ] && [ "$(ls "$WORK"/simplot/sim*.dat 2>/dev/null | wc -l)" -eq 2 ] &&
   [ "$pts" = "4 16 4 16 " ] && grep -q '"allreduce"' "$WORK/simplot/sim1.dat" &&
   grep -q '"sgp"' "$WORK/simplot/sim2.dat"; then
    pass "dtrain-post simplot: one line per mode (allreduce, sgp), 4 then 16 ranks, $(stat -c %s "$WORK/sim.png")-byte PNG"
else
    fail "dtrain-post simplot (points '$pts')"; tail -3 "$WORK/out-simplot.txt"
fi

# a straggler: rank 2 twice as slow sets the pace of the synchronous allreduce
OUT=slow CT=0.1 sim allreduce 4 sim.slow_ranks=2 sim.slowdown=2
t=$(col "$WORK/slow/sim.csv" time_per_iter_s 2>/dev/null)
if [ "$RC" -eq 0 ] && awk "BEGIN { exit !($t >= 0.2 && $t < 0.25) }"; then
    pass "allreduce with rank 2 at 2x compute: $t s per iteration (0.2 s of compute + communication)"
else
    fail "allreduce straggler (exit status $RC, ${t:-no} s per iteration)"; tail -3 "$WORK/out-slow.txt"
fi

# sim.compute_from: the median compute time per step of a real 2-rank run
small_deck "$WORK/real" >"$WORK/real.ini"
run 2 120 "$WORK/real.ini" run.max_steps=12 run.log_every=4
set +e  # run (tests/common.sh) leaves -e on
OUT=from CT= sim allreduce 2 sim.compute_from="$WORK/real/run.h5"
ct=$(sed -n 's/^dtrain-sim: sim.compute_time = \([^ ]*\) s, the median of .*/\1/p' "$WORK/out-from.txt")
got=$(col "$WORK/from/sim.csv" compute_s 2>/dev/null)
# SimGrid charges smpi/wtime (10 ns by default) for each clock read, and the
# measured compute window holds one: at a 10 us step that is 0.1 %, so allow
# it on top of the relative tolerance (CI's 9.5 us step came out 9.7 ns long).
if [ "$RC" -eq 0 ] && [ -n "$ct" ] && awk "BEGIN { exit !($ct > 0 && $got > 0.999 * $ct && $got < 1.001 * $ct + 2e-8) }"; then
    pass "sim.compute_from: the real run's median compute time per step ($ct s) is the simulated one"
else
    fail "sim.compute_from (exit status $RC, ${ct:-no} s from the record, ${got:-no} s simulated)"
    tail -3 "$WORK/out-from.txt"
fi

# ---- diloco ----
# near A B TOL: |A - B| <= TOL * B
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= t * b) }'; }
# dsim NAME [key=value ...]: diloco on 4 ranks of eth1g, 0.1 s of compute
dsim() { local name=$1; shift; PLAT=eth1g CT=0.1 OUT=$name sim diloco 4 "$@"; }
PLAT=eth1g CT=0.1 OUT=d-allreduce sim allreduce 4 run.max_steps=4
PLAT=eth1g CT=0.1 OUT=d-sgp sim sgp 4 run.max_steps=4
dsim d-fp32 diloco.inner_steps=4 run.max_steps=8
dsim d-bf16 diloco.inner_steps=4 run.max_steps=8 diloco.precision=bf16
dsim d-int8 diloco.inner_steps=4 run.max_steps=8 diloco.precision=int8 diloco.error_feedback=true
dsim d-gossip diloco.inner_steps=4 run.max_steps=8 diloco.outer_comm=sgp
dsim d-h8 diloco.inner_steps=8 run.max_steps=16
dsim d-stream diloco.inner_steps=8 run.max_steps=16 diloco.fragments=2 diloco.overlap=2
dsim d-topk diloco.inner_steps=4 run.max_steps=8 diloco.compress=topk
dsim d-delay diloco.inner_steps=4 run.max_steps=12 diloco.delay=1
dsim d-delay16 diloco.inner_steps=4 run.max_steps=16 diloco.delay=1
# each run: its record, 0.1 s of compute per step, and a step = compute + communication
for v in fp32:8 bf16:8 int8:8 gossip:8 h8:16 stream:16 topk:8 delay:12; do
    c=$WORK/d-${v%:*}/sim.csv
    if [ -f "$c" ] && [ "$(col "$c" mode)" = diloco ] && [ "$(col "$c" steps)" = "${v#*:}" ] &&
       near "$(col "$c" compute_s)" 0.1 0.001 &&
       near "$(col "$c" time_per_iter_s)" "$(awk "BEGIN { print $(col "$c" compute_s) + $(col "$c" comm_s) }")" 0.005; then
        pass "diloco ${v%:*}: ${v#*:} steps, $(col "$c" time_per_iter_s) s per step = 0.1 s of compute + $(col "$c" comm_s) s of communication"
    else
        fail "diloco ${v%:*}: no record or time per step != compute + communication"; tail -3 "$WORK/out-d-${v%:*}.txt"
    fi
done
ta=$(col "$WORK/d-allreduce/sim.csv" time_per_iter_s); ts=$(col "$WORK/d-sgp/sim.csv" time_per_iter_s)
t1=$(col "$WORK/d-fp32/sim.csv" time_per_iter_s); t8=$(col "$WORK/d-h8/sim.csv" time_per_iter_s)
want1=$(awk "BEGIN { print 0.1 + ($ta - 0.1) / 4 }"); want8=$(awk "BEGIN { print 0.1 + ($ta - 0.1) / 8 }")
if near "$t1" "$want1" 0.01 && near "$t8" "$want8" 0.01 &&
   [ "$(col "$WORK/d-fp32/sim.csv" bytes_per_step)" = "$N" ]; then
    pass "diloco H 4 / 8: $t1 / $t8 s per step = 0.1 + allreduce's communication ($ta - 0.1 s) / H within 1 % ($want1 / $want8), $N bytes per step (the vector once per 4 steps)"
else
    fail "diloco H 4 / 8: $t1 / $t8 s per step, expected $want1 / $want8 (allreduce $ta s)"
fi
wantg=$(awk "BEGIN { print 0.1 + ($ts - 0.1) / 4 }")
if near "$(col "$WORK/d-gossip/sim.csv" time_per_iter_s)" "$wantg" 0.01 &&
   [ "$(col "$WORK/d-gossip/sim.csv" bytes_per_step)" = "$(( (N + 1) ))" ]; then
    pass "diloco outer_comm sgp: $(col "$WORK/d-gossip/sim.csv" time_per_iter_s) s per step = 0.1 + sgp's communication / 4 within 1 % ($wantg), one push of n + 1 floats per 4 steps"
else
    fail "diloco outer_comm sgp: $(col "$WORK/d-gossip/sim.csv" time_per_iter_s) s per step, expected $wantg (sgp $ts s), $(col "$WORK/d-gossip/sim.csv" bytes_per_step) bytes per step"
fi
c32=$(col "$WORK/d-fp32/sim.csv" comm_s); b32=$(col "$WORK/d-fp32/sim.csv" bytes_per_step)
c16=$(col "$WORK/d-bf16/sim.csv" comm_s); b16=$(col "$WORK/d-bf16/sim.csv" bytes_per_step)
c8=$(col "$WORK/d-int8/sim.csv" comm_s); b8=$(col "$WORK/d-int8/sim.csv" bytes_per_step)
if [ "$b16" = "$(( N / 2 ))" ] && awk "BEGIN { r = $b8 / $b32; exit !(r > 0.25 && r < 0.26 && $c16 < 0.55 * $c32 && $c8 < 0.3 * $c32) }"; then
    pass "diloco bf16 / int8: $b16 / $b8 bytes per step against fp32's $b32, communication $c16 / $c8 s against $c32 s"
else
    fail "diloco bf16 / int8: $b16 / $b8 bytes per step against fp32's $b32, communication $c16 / $c8 s against $c32 s"
fi
# 244 chunks of 4096 (82 12-bit offsets and 4-bit codes: 42 words) and one of 576
# (12 10-bit offsets and codes: 7 words) = 10255 words once per 4 steps
ck=$(col "$WORK/d-topk/sim.csv" comm_s); bk=$(col "$WORK/d-topk/sim.csv" bytes_per_step)
if [ "$bk" = 10255 ] && awk "BEGIN { exit !($ck < 0.1 * $c32) }"; then
    pass "diloco topk 4-bit, 0.02 of chunks of 4096: $bk bytes per step (the codes' exact size, $(awk "BEGIN { printf \"%.2f\", 100 * $bk / $b32 }") % of fp32), communication $ck s against $c32 s"
else
    fail "diloco topk: $bk bytes per step (expected 10255), communication $ck s against fp32's $c32 s"
fi
# delay 1: a loop more costs its compute alone (its exchange overlaps the next
# loop); the run's one exchange not overlapped is the last, completed at the end
t12=$(col "$WORK/d-delay/sim.csv" time_per_iter_s); t16=$(col "$WORK/d-delay16/sim.csv" time_per_iter_s)
tdl=$(awk "BEGIN { print (16 * $t16 - 12 * $t12) / 4 }")
tend=$(awk "BEGIN { print 12 * $t12 - 1.2 }"); tx=$(awk "BEGIN { print 4 * ($t1 - 0.1) }")
if near "$tdl" 0.1 0.005 && awk "BEGIN { exit !($tend > 0 && $tend < 1.05 * $tx) }" &&
   [ "$(col "$WORK/d-delay/sim.csv" bytes_per_step)" = "$N" ]; then
    pass "diloco delay 1: a loop more costs $tdl s a step, the compute alone (plain diloco at H 4: $t1 s); the last exchange, waited for at the end, $tend s (plain's $tx s); the same bytes"
else
    fail "diloco delay 1: a loop more costs $tdl s a step, expected 0.1 within 0.5 %; the end's wait $tend s, expected (0, 1.05 x $tx] (plain H 4: $t1 s)"
fi
tst=$(col "$WORK/d-stream/sim.csv" time_per_iter_s)
# within 0.5 %: the log's reduction every step (run.log_every = 1) costs a few latencies
if near "$tst" 0.1 0.005 && awk "BEGIN { exit !($t8 > 1.05 * 0.1) }" &&
   [ "$(col "$WORK/d-stream/sim.csv" bytes_per_step)" = "$(( N / 2 ))" ]; then
    pass "diloco fragments 2, overlap 2: $tst s per step, the compute alone (plain diloco at H 8: $t8 s), the same bytes"
else
    fail "diloco streaming: $tst s per step, expected 0.1 within 0.5 % (plain H 8: $t8 s)"
fi
# a step (5 ms) shorter than the reduce-scatter of a fragment (2 MB, ~12 ms on 1 GbE):
# the wait for it before the all-gather starts is communication too, so a step is still
# compute + communication (within 2 %: the run's closing collectives, ~1 ms in 16 short steps)
PLAT=eth1g CT=0.005 OUT=d-stream-wait sim diloco 4 diloco.inner_steps=8 run.max_steps=16 \
    diloco.fragments=2 diloco.overlap=2 run.log_every=16
c=$WORK/d-stream-wait/sim.csv
tw=$(col "$c" time_per_iter_s 2>/dev/null); cw=$(col "$c" comm_s 2>/dev/null)
if [ "$RC" -eq 0 ] && near "$tw" "$(awk "BEGIN { print 0.005 + $cw }")" 0.02 &&
   awk "BEGIN { exit !($cw > 0.001) }"; then
    pass "diloco streaming on a network slower than the step: $tw s per step = 0.005 s of compute + $cw s of communication"
else
    fail "diloco streaming, slow network: $tw s per step, communication ${cw:-?} s (exit status $RC)"
fi
# 16 ranks, 10 GbE, 0.01 s of compute: once per H steps against the allreduce run above
OUT=d-16 sim diloco 16 diloco.inner_steps=4 run.max_steps=8
a16t=$(col "$WORK/allreduce-16/sim.csv" time_per_iter_s); d16=$(col "$WORK/d-16/sim.csv" time_per_iter_s)
want=$(awk "BEGIN { print 0.01 + ($a16t - 0.01) / 4 }")
if [ "$RC" -eq 0 ] && near "$d16" "$want" 0.01; then
    pass "diloco H 4 on 16 ranks (10 GbE): $d16 s per step = 0.01 + allreduce's communication / 4 within 1 % ($want)"
else
    fail "diloco H 4 on 16 ranks: $d16 s per step, expected $want (allreduce $a16t s)"
fi

# sim.gather = links: an exchange to every peer (the top-k all-gather, the
# delayed exchange's reduce-scatter and all-gather, int8's) as one message per
# rank to the next with the same bytes. On one non-blocking switch (16 ranks of
# eth1g, 0.1 s of compute), a 4 M-float vector (every per-peer message 64 KB or
# more): the same simulated time as the messages the code posts (within 0.1 %)
# and the same bytes per step; top-k codes of the 1 M-float vector (9 KB per
# peer, where SMPI's factors depend on the size) keep their messages: the same
# time exactly
for v in "topk:4000000:diloco.compress=topk diloco.bits=2 run.max_steps=8" \
         "delay:4000000:diloco.delay=1 run.max_steps=12" \
         "topk-delay:4000000:diloco.compress=topk diloco.bits=2 diloco.delay=1 run.max_steps=12" \
         "int8:4000000:diloco.precision=int8 run.max_steps=8" \
         "topk-small:1000000:diloco.compress=topk diloco.bits=2 run.max_steps=8"; do
    n=${v%%:*}; a=${v#*:}; len=${a%%:*}; a=${a#*:}
    for g in peers links; do
        # shellcheck disable=SC2086
        N=$len PLAT=eth1g CT=0.1 OUT=g-$n-$g sim diloco 16 diloco.inner_steps=4 sim.gather=$g $a
        eval "rc_$g=$RC"
    done
    sp=$(col "$WORK/g-$n-peers/sim.csv" simulated_s 2>/dev/null); sl=$(col "$WORK/g-$n-links/sim.csv" simulated_s 2>/dev/null)
    bp=$(col "$WORK/g-$n-peers/sim.csv" bytes_per_step 2>/dev/null); bl=$(col "$WORK/g-$n-links/sim.csv" bytes_per_step 2>/dev/null)
    tol=0.001; [ "$n" = topk-small ] && tol=0
    # shellcheck disable=SC2154
    if [ "$rc_peers" -eq 0 ] && [ "$rc_links" -eq 0 ] && near "$sl" "$sp" $tol && [ -n "$bp" ] && [ "$bp" = "$bl" ] &&
       awk "BEGIN { exit !($sp > 0.1 * ${a##*run.max_steps=} * 1.01) }" &&
       grep -q "sim.gather = links" "$WORK/out-g-$n-links.txt"; then
        pass "sim.gather = links, diloco $n on 16 ranks ($len floats): $sl simulated s against $sp with a message per peer, $bl bytes per step both"
    else
        fail "sim.gather = links, diloco $n ($len floats): $sl simulated s against $sp, $bl / $bp bytes per step (exit status $rc_links / $rc_peers)"
        tail -3 "$WORK/out-g-$n-links.txt"
    fi
done
OUT=g-bad sim diloco 4 sim.gather=ring
if [ "$RC" -ne 0 ] && grep -q "sim.gather = 'ring': expected peers" "$WORK/out-g-bad.txt"; then
    pass "sim.gather = ring is refused"
else
    fail "sim.gather = ring: not refused (exit status $RC)"
fi

sim osgp 4
if [ "$RC" -ne 0 ] && grep -q "algorithm.mode = osgp is not simulated: .*communication thread" "$WORK/out-osgp-4.txt" &&
   [ ! -f "$WORK/osgp-4/sim.csv" ]; then
    pass "osgp is refused with its reason (a communication thread)"
else
    fail "osgp: not refused (exit status $RC)"; tail -3 "$WORK/out-osgp-4.txt"
fi
finish
