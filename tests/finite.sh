#!/bin/bash
# run.check_finite: optim.lr = 50 on mnist_cnn (Fashion-MNIST, allreduce on 2
# ranks) diverges within a few steps. Every rank stops within one step of
# the first NaN with exit status 3 and one line naming the step and rank,
# the checkpoints left are finite, and a resume from the latest works.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
FM=/usr/share/datasets/fashion-mnist
if [ ! -e "$FM/train-images-idx3-ubyte.gz" ]; then
    echo "# SKIP: $FM missing (apt-get install dataset-fashion-mnist)"; exit 77
fi
D=${srcdir:-.}/inputs/local-fmnist.ini
base="algorithm.mode=allreduce data.test_limit=200"

# 1. the loss check (log rows far apart): stops at most one step after the NaN
run 2 120 "$D" $base optim.lr=50 run.max_steps=60 run.checkpoint_every=2 run.log_every=1000 \
    run.output_dir="$WORK/nf"
line=$(grep -m1 "non-finite value at step" "$WORK/out.txt" || true)
nan=$(echo "$line" | sed -n 's/.*non-finite value at step \([0-9]*\) on rank \([0-9]*\).*/\1/p')
stop=$(echo "$line" | sed -n 's/.*every rank stops at step \([0-9]*\).*/\1/p')
if [ "$RC" -eq 3 ] && [ -n "$nan" ] && [ -n "$stop" ] && [ "$stop" -le $((nan + 1)) ] &&
   [ "$nan" -lt 60 ] && [ "$(grep -c "non-finite value" "$WORK/out.txt")" -eq 1 ]; then
    pass "lr=50: exit 3 at step $stop, one step at most after the NaN of step $nan, one line: $(echo "$line" | cut -c1-160)"
else
    fail "lr=50 loss check (rc $RC, nan '$nan', stop '$stop')"; tail -5 "$WORK/out.txt" | sed 's/^/#   /'
fi
bad=0 n=0
for f in "$WORK"/nf/checkpoints/ckpt-*.h5; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    step=$(basename "$f" .h5 | sed 's/ckpt-0*//')
    [ "$step" -lt "$nan" ] || bad=1
    "$TEST_BIN/ckcmp" finite "$f" >/dev/null 2>&1 || bad=1
done
if [ "$n" -gt 0 ] && [ "$bad" -eq 0 ] && grep -q "last good checkpoint: $(last "$WORK/nf")" "$WORK/out.txt"; then
    pass "the $n checkpoint(s) left are from before step $nan and finite; the line names the latest"
else
    fail "checkpoints after divergence ($n files, bad=$bad)"; ls "$WORK/nf/checkpoints" | sed 's/^/#   /'
fi

# 2. the parameter check at a log interval: stops at the step itself
run 2 120 "$D" $base optim.lr=50 run.max_steps=60 run.log_every=1 run.output_dir="$WORK/nf1"
line=$(grep -m1 "non-finite value at step" "$WORK/out.txt" || true)
if [ "$RC" -eq 3 ] && echo "$line" | grep -Eq "step ([0-9]+) on rank [0-9]+: .*stops at step \1 "; then
    pass "log_every=1: exit 3 at the step of the first non-finite value"
else
    fail "log_every=1 (rc $RC): $line"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
fi

# 3. control: without the check the same run trains on to the end and exits 0
run 2 120 "$D" $base optim.lr=50 run.log_every=1000 run.max_steps=12 run.check_finite=false \
    run.output_dir="$WORK/off"
if [ "$RC" -eq 0 ] && ! "$TEST_BIN/ckcmp" finite "$(last "$WORK/off")" >/dev/null 2>&1; then
    pass "run.check_finite=false: the run ends with status 0 and a NaN checkpoint (what the check prevents)"
else
    fail "check_finite=false control (rc $RC)"
fi

# 4. resume from the latest (finite) checkpoint: the resumed run is the same
#    run, so it meets the same NaN at the same step and stops the same way
#    (the checkpoint's parameters are finite but already overflow the loss)
from=$(cat "$WORK/nf/checkpoints/latest")
run 2 120 "$D" $base optim.lr=50 run.max_steps=60 run.checkpoint_every=2 run.log_every=1000 \
    run.resume=true run.output_dir="$WORK/nf"
if [ "$RC" -eq 3 ] && grep -q "resumed from .*$from" "$WORK/out.txt" &&
   grep -q "non-finite value at step $nan on rank .*stops at step $stop " "$WORK/out.txt" &&
   [ "$(cat "$WORK/nf/checkpoints/latest")" = "$from" ]; then
    pass "resume from $from: the same NaN at step $nan, exit 3, latest still $from"
else
    fail "resume after divergence (rc $RC)"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
fi
# 5. the asynchronous modes: a NaN on one rank stops the group through the
#    mode's own stop flag within a few local steps (without the check they
#    would run the whole budget of 200 steps per rank and fail at the end)
for m in adpsgd lsgd ps-async; do
    run 4 180 "$D" data.test_limit=200 algorithm.mode=$m optim.lr=50 run.max_steps=200 run.log_every=1000 \
        run.output_dir="$WORK/nf-$m"
    most=$(sed -n 's/.*local steps per rank from [0-9]* to \([0-9]*\).*/\1/p' "$WORK/out.txt")
    if [ "$RC" -eq 3 ] && [ "$(grep -c "non-finite value at step" "$WORK/out.txt")" -eq 1 ] &&
       [ -n "$most" ] && [ "$most" -lt 40 ]; then
        pass "$m: exit 3, one line, the busiest rank stopped after $most of 200 steps: $(grep -m1 "non-finite" "$WORK/out.txt" | cut -c1-110)"
    else
        fail "$m with lr=50 (rc $RC, busiest rank's steps '$most')"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
    fi
done
finish
