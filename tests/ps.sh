#!/bin/bash
# Parameter-server modes: ps-async with one worker is `local` bit for bit
# (the server applies the optimizer, momentum, weight decay and the
# learning-rate decay on its clock), also with the model sharded over two
# servers; ps-sync with every worker is `allreduce` to float tolerance and
# resumes bit for bit; top-k pushes with error feedback send about ps.ratio
# of the bytes and still learn; the supervisor's curve is in the record;
# AdaComp pushes learn in far fewer bytes and resume bit for bit; a slow
# worker does not hold the others back in ps-async, nor, as a backup worker,
# in ps-sync; bad settings fail.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"
a="optim.decay_epochs=1 optim.decay_factor=0.5"
# the last step of ranks 1, 2, 3 in a run's train.csv
worker_steps() {
    awk -F, 'NR > 1 { if ($1 > s[$3]) s[$3] = $1 } END { print s[1], s[2], s[3] }' \
        "$1/csv/train.csv" 2>/dev/null
}
ok_run() { [ "$RC" -eq 0 ] || { tail -5 "$WORK/out.txt" | sed 's/^/#   /'; return 1; }; }

run 1 120 "$D" $a algorithm.mode=local run.output_dir="$WORK/local"
ok_run
for servers in 1 2; do
    np=$((servers + 1))
    run $np 120 "$D" $a algorithm.mode=ps-async ps.servers=$servers run.output_dir="$WORK/pa$servers"
    if ok_run && "$TEST_BIN/ckcmp" close "$(last "$WORK/pa$servers")" "$(last "$WORK/local")" 0 >/dev/null; then
        pass "ps-async, $servers server(s) + 1 worker == local, bit for bit (momentum, weight decay, lr decay)"
    else
        fail "ps-async with $servers server(s) vs local"
    fi
done

run 2 120 "$D" $a algorithm.mode=allreduce run.output_dir="$WORK/ar"
ok_run
run 4 120 "$D" $a algorithm.mode=ps-sync ps.servers=2 run.output_dir="$WORK/ps"
if ok_run && "$TEST_BIN/ckcmp" close "$(last "$WORK/ps")" "$(last "$WORK/ar")" 1e-5 >/dev/null; then
    pass "ps-sync, 2 servers + 2 workers (R = all) == allreduce on 2 ranks within 1e-5"
else
    fail "ps-sync vs allreduce"
fi

# resume: 10 steps, then on to the end, equals the uninterrupted run
run 4 120 "$D" $a algorithm.mode=ps-sync ps.servers=2 run.output_dir="$WORK/psr" run.max_steps=10
run 4 120 "$D" $a algorithm.mode=ps-sync ps.servers=2 run.output_dir="$WORK/psr" run.resume=true
if ok_run && grep -q "resumed from" "$WORK/out.txt" &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/psr")" "$(last "$WORK/ps")" params momentum >/dev/null; then
    pass "ps-sync: 10 steps + resume == uninterrupted, bit for bit"
else
    fail "ps-sync resume"
fi

# top-k with error feedback and the staleness rule, and the supervisor
run 5 120 "$D" algorithm.mode=ps-async ps.servers=2 ps.supervisor=true ps.eval_seconds=0.2 \
    ps.compress=topk ps.ratio=0.05 ps.staleness=adacomp run.output_dir="$WORK/topk" \
    run.test_delay_rank=3 run.test_delay_ms=10
acc=$(grep -o 'final test accuracy [0-9.]*' "$WORK/out.txt" | grep -o '[0-9.]*$' || echo 0)
if ok_run && awk -v a="$acc" 'BEGIN { exit !(a >= 80) }'; then
    pass "ps-async with top-k 5%, error feedback and adacomp staleness learns (final accuracy $acc%)"
else
    fail "ps-async top-k (accuracy $acc%)"
fi
# the supervisor's curve: clocks never go back, the last evaluation saw the final model
"$DTRAIN_POST" csv "$WORK/topk/run.h5" -o "$WORK/topk/csv" >/dev/null || true
clock=$(awk -F, 'NR > 1 && $3 == 0 && $1 > c { c = $1 } END { print c + 0 }' "$WORK/topk/csv/train.csv")
curve=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { c = $col["clock"]; if (c < last) bad = 1; last = c; n++ }
    END { print n + 0, last + 0, bad + 0 }' "$WORK/topk/csv/supervisor.csv" 2>/dev/null)
if [ "$(echo $curve | cut -d' ' -f1)" -ge 1 ] && [ "$(echo $curve | cut -d' ' -f2)" = "$clock" ] &&
   [ "$(echo $curve | cut -d' ' -f3)" = 0 ]; then
    pass "supervisor curve in the record: $(echo $curve | cut -d' ' -f1) evaluation(s), clocks non-decreasing, the last at the final clock $clock"
else
    fail "supervisor curve (evaluations, last clock, went back: $curve; final clock $clock)"
fi
# the final evaluation is at the run's epoch on every rank (2 epochs, plus
# the pushes in flight when the budget was reached), not at a server's clock
# over a worker's steps per epoch (4 here)
ep=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { n++; e = $col["epoch"] + 0; if (e >= 2 && e < 2.1) ok++ } END { print n + 0, ok + 0, e }' \
    "$WORK/topk/csv/eval.csv" 2>/dev/null)
if [ "$(echo $ep | cut -d' ' -f1-2)" = "5 5" ]; then
    pass "ps-async: the final evaluation of all 5 ranks is at epoch $(echo $ep | cut -d' ' -f3) of 2"
else
    fail "ps-async eval epochs: rows, rows at epoch [2, 2.1), last epoch: $ep (want 5 5)"
fi
# every push a server applied is in its staleness histogram
for srv in 0 1; do
    n=$(awk -F, 'NR > 1 { s += $2 } END { print s + 0 }' "$WORK/topk/csv/server${srv}_staleness.csv" 2>/dev/null)
    if [ -n "$n" ] && [ "$n" -eq "$clock" ] && [ "$n" -gt 0 ]; then
        pass "server $srv staleness histogram counts its $n pushes"
    else
        fail "server $srv staleness histogram: $n pushes counted, clock $clock"
    fi
done
"$DTRAIN_POST" csv "$WORK/pa1/run.h5" -o "$WORK/pa1/csv" >/dev/null
# bytes a worker pushed per step: top-k sends (index, value) pairs for 5%
dense=$(awk -F, 'NR > 1 && $3 == 1 && $13 > b { b = $13; s = $1 } END { print b / s }' "$WORK/pa1/csv/train.csv")
sparse=$(awk -F, 'NR > 1 && $3 == 3 && $13 > b { b = $13; s = $1 } END { print b / s }' "$WORK/topk/csv/train.csv")
if awk -v d="$dense" -v s="$sparse" 'BEGIN { r = s / d; exit !(r > 0.09 && r < 0.11) }'; then
    pass "top-k 5% pushes $(awk -v d="$dense" -v s="$sparse" 'BEGIN { printf "%.3f", s / d }') of the dense bytes per step (pairs: 2 x 5%)"
else
    fail "top-k bytes per step: $sparse vs dense $dense"
fi

# AdaComp (Chen et al.): per bin the residues the gradient pushes past the
# bin's largest, ternary values; learns, and pushes far fewer bytes than dense
run 4 120 "$D" algorithm.mode=ps-async ps.servers=2 ps.compress=adacomp-chen \
    run.output_dir="$WORK/ada"
acc=$(grep -o 'final test accuracy [0-9.]*' "$WORK/out.txt" | grep -o '[0-9.]*$' || echo 0)
"$DTRAIN_POST" csv "$WORK/ada/run.h5" -o "$WORK/ada/csv" >/dev/null || true
ada=$(awk -F, 'NR > 1 && $3 == 2 && $13 > b { b = $13; s = $1 } END { print (s ? b / s : 0) }' "$WORK/ada/csv/train.csv" 2>/dev/null)
if ok_run && awk -v a="$acc" -v s="$ada" -v d="$dense" 'BEGIN { exit !(a >= 80 && s > 0 && s / d < 0.1) }'; then
    pass "ps-async with adacomp-chen learns (final accuracy $acc%) pushing $(awk -v d="$dense" -v s="$ada" 'BEGIN { printf "%.3f", s / d }') of the dense bytes per step"
else
    fail "ps-async adacomp-chen (accuracy $acc%, bytes per step $ada vs dense $dense)"
fi
# its residuals are in the checkpoint: 10 steps + resume == uninterrupted
run 4 120 "$D" $a algorithm.mode=ps-sync ps.servers=2 ps.compress=adacomp-chen ps.bin_fc=100 \
    run.output_dir="$WORK/adas"
run 4 120 "$D" $a algorithm.mode=ps-sync ps.servers=2 ps.compress=adacomp-chen ps.bin_fc=100 \
    run.output_dir="$WORK/adar" run.max_steps=10
run 4 120 "$D" $a algorithm.mode=ps-sync ps.servers=2 ps.compress=adacomp-chen ps.bin_fc=100 \
    run.output_dir="$WORK/adar" run.resume=true
if ok_run && "$TEST_BIN/ckcmp" same "$(last "$WORK/adar")" "$(last "$WORK/adas")" params momentum >/dev/null &&
   ! "$TEST_BIN/ckcmp" close "$(last "$WORK/adas")" "$(last "$WORK/ps")" 1e-3 >/dev/null; then
    pass "ps-sync with adacomp-chen: 10 steps + resume == uninterrupted, bit for bit (and differs from dense pushes)"
else
    fail "ps-sync adacomp-chen resume"
fi

# the bin lengths reach their tensors: on a CNN, ps.bin_conv changes the
# result and so does ps.bin_fc (each would be inert if the tensors were
# classified wrongly)
cnn="model.name=mnist_cnn data.synthetic_height=12 data.synthetic_width=12 run.max_steps=6"
for b in base conv fc; do
    case $b in base) kv= ;; conv) kv=ps.bin_conv=7 ;; fc) kv=ps.bin_fc=7 ;; esac
    run 4 120 "$D" algorithm.mode=ps-sync ps.servers=2 ps.compress=adacomp-chen $cnn $kv \
        run.output_dir="$WORK/bin-$b"
    ok_run || break
done
if ok_run && ! "$TEST_BIN/ckcmp" same "$(last "$WORK/bin-conv")" "$(last "$WORK/bin-base")" params >/dev/null 2>&1 &&
   ! "$TEST_BIN/ckcmp" same "$(last "$WORK/bin-fc")" "$(last "$WORK/bin-base")" params >/dev/null 2>&1; then
    pass "adacomp-chen on mnist_cnn: ps.bin_conv and ps.bin_fc each change the pushes"
else
    fail "adacomp-chen bin lengths on mnist_cnn"
fi

# a slow worker (300 ms per step) does not hold the two others back
run 4 120 "$D" algorithm.mode=ps-async run.output_dir="$WORK/slow" run.test_delay_rank=1 \
    run.test_delay_ms=300 model.name=mnist_cnn data.synthetic_height=12 data.synthetic_width=12 \
    run.max_steps=40 run.log_every=1
"$DTRAIN_POST" csv "$WORK/slow/run.h5" -o "$WORK/slow/csv" >/dev/null
steps=$(worker_steps "$WORK/slow")
if ok_run && echo "$steps" | awk '{ exit !($1 * 3 < $2 && $1 * 3 < $3) }'; then
    pass "ps-async: slow worker $(echo $steps | cut -d' ' -f1) steps, the others $(echo $steps | cut -d' ' -f2-) (not held back)"
else
    fail "ps-async slow worker: steps per worker $steps"
fi

# ps-sync with a backup worker (R = 2 of 3): a slow worker (200 ms per step)
# is not waited for; its gradients, computed on old steps, are dropped
run 4 120 "$D" algorithm.mode=ps-sync ps.replicas=2 run.output_dir="$WORK/backup" \
    run.test_delay_rank=1 run.test_delay_ms=200 model.name=mnist_cnn data.synthetic_height=12 \
    data.synthetic_width=12 run.log_every=1
"$DTRAIN_POST" csv "$WORK/backup/run.h5" -o "$WORK/backup/csv" >/dev/null || true
steps=$(worker_steps "$WORK/backup")
dropped=$(grep -o '[0-9]* stale gradient(s) dropped' "$WORK/out.txt" | grep -o '^[0-9]*' || echo 0)
# (of the 20 global steps a fast worker may miss the last: the run ended
# while its gradient was on the way)
if ok_run && echo "$steps" | awk '{ exit !($2 >= 19 && $3 >= 19 && $1 * 3 < $2 && $1 * 3 < $3) }' &&
   [ "$dropped" -ge 1 ]; then
    pass "ps-sync with a backup worker: the slow worker made $(echo $steps | cut -d' ' -f1) steps, the others $(echo $steps | cut -d' ' -f2-) of the 20 global steps; $dropped stale gradient(s) dropped"
else
    fail "ps-sync backup worker: steps per worker $steps (want slow, >= 19, >= 19), dropped $dropped"
fi

# bad settings
run 2 30 "$D" algorithm.mode=ps-async ps.servers=2
expect_fail "no worker left" "ps.servers \(2\) \+ 0 supervisor \+ at least one worker, but has 2"
run 3 30 "$D" algorithm.mode=ps-sync ps.replicas=3
expect_fail "more replicas than workers" "ps.replicas = 3: more than the 2 worker"
run 1 30 "$D" algorithm.mode=ps-async ps.ratio=0
expect_fail "compression ratio 0" "ps.ratio = 0: expected a number in \(0, 1\]"
run 3 30 "$D" algorithm.mode=ps-sync ps.fetch_every=2
expect_fail "ps-sync with fetch_every" "ps-sync fetches and pushes every step"
finish
