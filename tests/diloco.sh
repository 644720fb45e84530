#!/bin/bash
# DiLoCo (algorithm.mode = diloco) end to end, plus test_diloco's
# closed-form checks under mpiexec -n 4:
#  - replicas bit-identical after every outer step (run.check_replicas), for
#    fp32, bf16, int8 with error feedback and top-k codes;
#  - H = 1, outer (lr 1, momentum 0), inner SGD without momentum equals mode
#    allreduce to float rounding on the network;
#  - a budget ending inside an outer loop, resumed to a longer one, equals
#    the uninterrupted run bit for bit (plain; int8 + error feedback +
#    streaming fragments with the reduce-scatter or the all-gather of an
#    exchange in flight at the stop; top-k streaming; the delayed outer step,
#    fp32 and top-k, with its exchange in flight; push-sum);
#  - streaming with 1 fragment and overlap 0 equals plain diloco bit for bit;
#  - delay = 1: the end applies the last exchange, replicas identical when
#    the budget ends at a loop's end;
#  - inner_time: 4 ranks, one slowed by run.test_delay_*: the fast ranks do
#    more steps and the job's throughput is >= 90 % of the sum of the ranks'
#    own rates; a resume continues;
#  - bad settings stop every rank at start-up with the key named.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
timeout -k 5 300 "$MPIEXEC" -n 4 "$TEST_BIN/test_diloco" >"$WORK/unit.txt" 2>&1
rc=$?
grep -E '^(ok|not ok)' "$WORK/unit.txt" | sed 's/^/# test_diloco: /'
grep -Eq '^not ok' "$WORK/unit.txt" && fail "test_diloco has failing checks" || true
[ $rc -eq 0 ] && pass "test_diloco on 4 ranks ($(grep -c '^ok' "$WORK/unit.txt") checks)" \
    || { fail "test_diloco exit $rc"; tail -5 "$WORK/unit.txt"; }

D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"
M="algorithm.mode=diloco"
H4="diloco.inner_steps=4"

for prec in "fp32" "bf16" "int8 diloco.error_feedback=true"; do
    name=${prec%% *}
    run 3 120 "$D" $M $H4 diloco.precision=$prec diloco.sync_steps=2 run.check_replicas=true \
        run.output_dir="$WORK/rep-$name" run.max_steps=18
    if [ "$RC" -eq 0 ] && grep -q "averaged model" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" replicas "$(last "$WORK/rep-$name")" >/dev/null; then
        pass "diloco $name on 3 ranks, 2 warm-up steps + 4 outer steps of H 4: replicas identical after each (run.check_replicas)"
    else
        fail "diloco $name replicas (rc $RC)"; tail -3 "$WORK/out.txt"
    fi
done
run 3 120 "$D" $M $H4 diloco.compress=topk diloco.chunk=256 diloco.bits=2 diloco.sync_steps=2 \
    run.check_replicas=true run.output_dir="$WORK/rep-topk" run.max_steps=18
if [ "$RC" -eq 0 ] && grep -q "top-k 2-bit" "$WORK/out.txt" &&
   "$TEST_BIN/ckcmp" replicas "$(last "$WORK/rep-topk")" >/dev/null; then
    pass "diloco topk 2-bit on 3 ranks, 2 warm-up steps + 4 outer steps of H 4: replicas identical after each (run.check_replicas)"
else
    fail "diloco topk replicas (rc $RC)"; tail -3 "$WORK/out.txt"
fi
# the last run ended 0 steps after its outer step: its checkpoint's replicas are
# identical; stopped mid-loop (17 steps) they are not, and check_replicas is quiet
run 3 120 "$D" $M $H4 run.check_replicas=true run.output_dir="$WORK/mid" run.max_steps=17
if [ "$RC" -eq 0 ] && ! "$TEST_BIN/ckcmp" replicas "$(last "$WORK/mid")" >/dev/null 2>&1; then
    pass "diloco stopped inside an outer loop: local replicas differ, run.check_replicas checks outer steps only"
else
    fail "diloco mid-loop replicas (rc $RC)"; tail -3 "$WORK/out.txt"
fi

common="optim.momentum=0 run.max_steps=20"
run 4 120 "$D" $common run.output_dir="$WORK/ar"
rcA=$RC
run 4 120 "$D" $common $M diloco.inner_steps=1 diloco.outer_lr=1 diloco.outer_momentum=0 \
    run.output_dir="$WORK/h1"
if [ $rcA -eq 0 ] && [ "$RC" -eq 0 ] &&
   "$TEST_BIN/ckcmp" close "$(last "$WORK/h1")" "$(last "$WORK/ar")" 1e-5 >"$WORK/cmp.txt"; then
    pass "diloco H 1, outer (1, 0), inner SGD without momentum == allreduce over 20 steps: $(cat "$WORK/cmp.txt")"
else
    fail "diloco H 1 vs allreduce (rc $rcA/$RC): $(cat "$WORK/cmp.txt" 2>/dev/null)"
fi

resume_case() { # NAME FULL STOP ARGS...
    local name=$1 full=$2 stop=$3
    shift 3
    run 2 120 "$D" "$@" run.output_dir="$WORK/full-$name" run.max_steps=$full
    local rcF=$RC
    run 2 120 "$D" "$@" run.output_dir="$WORK/part-$name" run.max_steps=$stop
    run 2 120 "$D" "$@" run.output_dir="$WORK/part-$name" run.max_steps=$full run.resume=true
    if [ $rcF -eq 0 ] && [ "$RC" -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/full-$name")" "$(last "$WORK/part-$name")" \
           params momentum diloco_outer_params diloco_outer_momentum $EXTRA >/dev/null; then
        pass "diloco $name: $stop steps (inside an outer loop) + resume to $full == $full steps bit for bit"
    else
        fail "diloco $name resume (rc $rcF/$RC)"; tail -3 "$WORK/out.txt"
    fi
}
EXTRA="" resume_case plain 22 10 $M diloco.inner_steps=8 diloco.sync_steps=3
# stopped at 13, the all-gather of the fragment started at 12 is in flight
EXTRA="diloco_sent diloco_residual" resume_case "int8-streaming" 26 13 $M diloco.inner_steps=8 \
    diloco.fragments=2 diloco.overlap=2 diloco.merge=0.5 diloco.precision=int8 \
    diloco.error_feedback=true
# stopped at 12, the reduce-scatter of the fragment started at 12 is in flight
EXTRA="diloco_sent" resume_case "bf16-streaming" 24 12 $M diloco.inner_steps=8 \
    diloco.fragments=2 diloco.overlap=3 diloco.precision=bf16
# stopped at 13, the top-k codes of the fragment started at 12 are in flight
EXTRA="diloco_sent diloco_residual" resume_case "topk-streaming" 26 13 $M diloco.inner_steps=8 \
    diloco.fragments=2 diloco.overlap=2 diloco.compress=topk diloco.chunk=256
# delayed: stopped at 10, the all-gather of the exchange posted at 8 in flight
EXTRA="diloco_sent diloco_x_sent diloco_x_local" resume_case "delay" 22 10 $M $H4 diloco.delay=1
# delayed top-k: stopped at 12, the codes posted at 12 in flight
EXTRA="diloco_sent diloco_x_sent diloco_x_local diloco_residual" resume_case "delay-topk" 22 12 $M $H4 \
    diloco.delay=1 diloco.compress=topk diloco.chunk=256 diloco.ef_decay=0.9
EXTRA="push_sum_weight" resume_case "sgp" 22 10 $M $H4 algorithm.topology=exponential \
    diloco.outer_comm=sgp

# streaming's P = 1, overlap 0 path is plain diloco's: the same bits
run 2 120 "$D" $M $H4 diloco.fragments=1 diloco.overlap=0 diloco.merge=0 run.output_dir="$WORK/s1" run.max_steps=14
rcA=$RC
run 2 120 "$D" $M $H4 run.output_dir="$WORK/p1" run.max_steps=14
if [ $rcA -eq 0 ] && [ "$RC" -eq 0 ] &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/s1")" "$(last "$WORK/p1")" params diloco_outer_params >/dev/null; then
    pass "diloco.fragments 1, overlap 0 == plain diloco bit for bit"
else
    fail "diloco fragments 1 vs plain (rc $rcA/$RC)"
fi

# delayed, a budget at a loop's end: the end applies the exchange in flight,
# so every rank ends with theta_new (checked after the last step)
run 3 120 "$D" $M $H4 diloco.delay=1 run.check_replicas=true run.output_dir="$WORK/dend" \
    run.max_steps=16
if [ "$RC" -eq 0 ] && "$TEST_BIN/ckcmp" replicas "$(last "$WORK/dend")" >/dev/null; then
    pass "diloco delay 1, budget 16 of H 4: the last exchange applied at the end, final replicas identical"
else
    fail "diloco delay end (rc $RC)"; tail -3 "$WORK/out.txt"
fi

# time-bounded loops: rank 3 sleeps after every step; the others must not
# wait for it but once per loop. Per rank from /train: T_r its training wall
# time, W_r its wait at the exchanges, n_r its samples; own rate
# n_r / (T_r - W_r); the job's throughput sum n_r / max T_r.
TD="diloco.inner_time=0.4 run.epochs=100000 model.hidden=256 data.synthetic_height=28 data.synthetic_width=28 run.log_every=1"
run 4 240 "$D" $M $TD run.max_steps=1200 run.test_delay_rank=3 run.test_delay_ms=2 \
    run.output_dir="$WORK/timed"
"$DTRAIN_POST" csv "$WORK/timed/run.h5" -o "$WORK/timed/csv" >/dev/null 2>&1 || true
got=$(awk -F, 'NR > 1 { r = $3; if ($1 > s[r]) s[r] = $1; if (!(r in f)) f[r] = $4
                        if ($4 > e[r]) e[r] = $4; w[r] += $10; n[r] = $11 }
     END { T = 0; for (r = 0; r < 4; r++) if (e[r] - f[r] > T) T = e[r] - f[r]
           own = 0; all = 0
           for (r = 0; r < 4; r++) { own += n[r] / (e[r] - f[r] - w[r]); all += n[r] }
           fast = s[0] < s[1] ? s[0] : s[1]; fast = fast < s[2] ? fast : s[2]
           ok = (fast >= 1.5 * s[3] && all / T >= 0.9 * own)
           printf "%d %d %d %d %.3f %d", s[0], s[1], s[2], s[3], all / T / own, ok }' "$WORK/timed/csv/train.csv" 2>/dev/null)
if [ "$RC" -eq 0 ] && [ "${got##* }" = 1 ] && grep -q "loops bounded by time" "$WORK/out.txt" &&
   "$TEST_BIN/ckcmp" replicas "$(last "$WORK/timed")" >/dev/null; then
    pass "diloco inner_time 0.4 s, rank 3 slowed: steps per rank ${got% * *}, job throughput $(echo "$got" | cut -d' ' -f5) of the ranks' own rates (>= 0.9); final replicas identical"
else
    fail "diloco inner_time slow rank (rc $RC): steps, throughput ratio, verdict: $got"; tail -3 "$WORK/out.txt"
fi
# a resume continues the group's clock (not bit for bit: loops end by time)
TM="model.hidden=256 data.synthetic_height=28 data.synthetic_width=28 run.epochs=100000"
run 2 120 "$D" $M $TM diloco.inner_time=0.05 run.max_steps=400 run.output_dir="$WORK/tres"
rcA=$RC
run 2 120 "$D" $M $TM diloco.inner_time=0.05 run.max_steps=800 run.resume=true run.output_dir="$WORK/tres"
steps=$(grep -o 'done: [0-9]* steps per rank' "$WORK/out.txt" | grep -o '[0-9]*')
if [ $rcA -eq 0 ] && [ "$RC" -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
   [ "${steps:-0}" -ge 800 ] && "$TEST_BIN/ckcmp" replicas "$(last "$WORK/tres")" >/dev/null; then
    pass "diloco inner_time: 400 steps per rank, resumed to 800: ended at $steps, replicas identical"
else
    fail "diloco inner_time resume (rc $rcA/$RC, steps ${steps:-none})"; tail -3 "$WORK/out.txt"
fi

run 2 30 "$D" $M $H4 diloco.fragments=3
expect_fail "fragments not dividing inner_steps" "diloco.fragments = 3 does not divide diloco.inner_steps = 4"
run 2 30 "$D" $M $H4 diloco.fragments=2 diloco.overlap=2
expect_fail "overlap too long" "diloco.overlap = 2: expected fewer than"
run 2 30 "$D" $M $H4 diloco.precision=fp16
expect_fail "unknown precision" "diloco.precision"
run 2 30 "$D" $M $H4 diloco.outer_comm=sgp diloco.precision=int8
expect_fail "sgp with int8" "diloco.outer_comm = sgp takes"
run 2 30 "$D" $M diloco.inner_time=1 diloco.delay=1
expect_fail "inner_time with delay" "diloco.inner_time = 1 takes diloco.fragments = 1, diloco.overlap = 0, diloco.delay = 0 and diloco.outer_comm = allreduce"
finish
