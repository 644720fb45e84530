#!/bin/bash
# Elastic resume: run.resume = true on another rank count than the one that
# wrote the checkpoint (doc/checkpoints.md, "Resuming on another rank count").
# For each mode that resumes so: 4 ranks -> 2 -> 4; the state right after a
# 4 -> 2 resume is checked exactly against the old checkpoint (old rank 0's
# row, or the mean of the old rows, or push-sum's sum x / sum w, or lsgd's
# global leader; edge consensus: zero duals) and the group's samples drawn
# carry over; the evaluation at each resume shows a
# consensus distance of 0 and stays within the stated tolerance of the last
# one before it (accuracy drop < 10 points, loss rise < 20 %, against the
# averaged model). allreduce 4 -> 2 with optim.batch_size doubled continues
# the same steps, epochs and learning rates; two identical elastic resumes
# write bit-identical checkpoints (sgp, the edge-consensus modes with
# ecl.sync = true, lsgd's first step); rank counts a mode cannot take are
# refused before anything is written.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
cat >"$D" <<DECK
[run]
seed = 5
epochs = 50
log_every = 4
eval_every = 8
[algorithm]
mode = allreduce
[model]
name = mlp
hidden = 16
activation = relu
[data]
name = synthetic
synthetic_train = 256
synthetic_test = 64
synthetic_height = 4
synthetic_width = 4
[optim]
lr = 0.05
batch_size = 8
momentum = 0.9
DECK
ck() { "$TEST_BIN/ckcmp" "$@"; }
latest() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }
# the image loader's samples drawn: byte 48 of a rank's resume state
# (step, images, bytes, wall, then the loader's pass, position, drawn)
DRAWN=48

# eval_ok DIR K STEP: in DIR's record, rank 0's collective evaluations (the
# asynchronous modes' per-rank rows, without an averaged model, left out)
# number K and K + 1 are the last of a segment and the one at the resume
# that follows it, at STEP; they keep the model: consensus 0 after, accuracy
# drop < 0.10, loss rise < 20 % against the averaged model before. (In the
# asynchronous modes the last evaluation of a segment may be a step off the
# settled count the checkpoint holds.) Prints the figures.
eval_ok() {
    "$DTRAIN_POST" csv "$1/run.h5" -o "$1/csv" >/dev/null || return 1
    awk -F, -v k="$2" -v s="$3" 'NR > 1 && $3 == 0 && $12 != "nan" { n++; st[n] = $1; l[n] = $7; a[n] = $9; ml[n] = $11; ma[n] = $12; c[n] = $13 }
        END { j = k + 1
              if (n < j || st[j] != s) { print "collective evaluations: " n ", number " j " at step " st[j] ", not " s; exit 1 }
              printf "step %s: averaged model before acc %.4f loss %.4f, after acc %.4f loss %.4f, consensus after %s\n", s, ma[k], ml[k], a[j], l[j], c[j]
              exit !(c[j] == 0 && a[j] >= ma[k] - 0.10 && l[j] <= 1.2 * ml[k]) }' "$1/csv/eval.csv"
}

# lsgd: groups of 2 (two groups on 4 ranks, one on 2), a distributed step
# every 2 local steps per rank, the global leader every second one
LSGD="lsgd.group_size=2 lsgd.tau_local=2 lsgd.tau_global=4"
for mode in allreduce easgd diloco dpsgd sgp osgp adpsgd ps-sync ps-async lsgd pdmm-isvr \
    admm-isvr dsgd-ecl; do
    o=$WORK/$mode
    extra=""
    [ $mode = diloco ] && extra="diloco.inner_steps=4"
    [ $mode = lsgd ] && extra=$LSGD
    # the ISVR step has no momentum
    case $mode in pdmm-isvr | admm-isvr) extra="optim.momentum=0" ;; esac
    run 4 300 "$D" algorithm.mode=$mode $extra run.output_dir="$o" run.max_steps=8
    rc4=$RC
    cp "$(latest "$o")" "$WORK/old-$mode.h5"
    # the state right after the resume (not in adpsgd and the parameter
    # server: an asynchronous loop takes a step before it looks at the
    # budget; lsgd's step leaves its leaders as they were): a copy resumed
    # with nothing left to do writes the checkpoint of its step at once
    case $mode in adpsgd | ps-*) async=1 ;; *) async=0 ;; esac
    if [ $async -eq 0 ]; then
    cp -r "$o" "$o.x"
    run 2 300 "$D" algorithm.mode=$mode $extra run.output_dir="$o.x" run.max_steps=8 run.resume=true
    new=$(latest "$o.x")
    exact=1
    case $mode in
    allreduce | easgd)
        ck row0 "$WORK/old-$mode.h5" "$new" params && ck row0 "$WORK/old-$mode.h5" "$new" momentum || exact=0
        [ $mode = easgd ] && { ck row0 "$WORK/old-$mode.h5" "$new" easgd_center || exact=0; } ;;
    diloco)
        ck mean "$WORK/old-$mode.h5" "$new" params && ck mean "$WORK/old-$mode.h5" "$new" momentum &&
            ck row0 "$WORK/old-$mode.h5" "$new" diloco_outer_params &&
            ck row0 "$WORK/old-$mode.h5" "$new" diloco_outer_momentum || exact=0 ;;
    dpsgd)
        ck mean "$WORK/old-$mode.h5" "$new" params && ck mean "$WORK/old-$mode.h5" "$new" momentum || exact=0 ;;
    sgp)
        ck debias "$WORK/old-$mode.h5" "$new" 1e-6 >/dev/null && ck mean "$WORK/old-$mode.h5" "$new" momentum || exact=0 ;;
    osgp) # x, w and the pending messages: checked through the consensus below
        ck mean "$WORK/old-$mode.h5" "$new" momentum || exact=0 ;;
    lsgd) # both leaders are the old global leader (its step pulled params
          # towards them; params themselves: the consensus 0 at the resume below)
        ck row0 "$WORK/old-$mode.h5" "$new" lsgd_global_leader &&
            ck row0 "$WORK/old-$mode.h5" "$new" lsgd_local_leader lsgd_global_leader || exact=0 ;;
    pdmm-isvr | admm-isvr) # the duals restart at zero
        ck mean "$WORK/old-$mode.h5" "$new" params && ck zero "$new" ecl_buffers || exact=0 ;;
    dsgd-ecl) # every neighbour's last parameters: the averaged model
        ck mean "$WORK/old-$mode.h5" "$new" params && ck mean "$WORK/old-$mode.h5" "$new" momentum &&
            ck tiles "$new" ecl_buffers params || exact=0 ;;
    esac
    d_old=$(ck statesum "$WORK/old-$mode.h5" $DRAWN)
    d_new=$(ck statesum "$new" $DRAWN)
    # lsgd took its step: the samples carried over are the ones the resume reports
    [ $mode = lsgd ] && grep -q "(written by 4; 256 samples drawn carried over)" "$WORK/out.txt" &&
        d_new=$d_old
    if [ $rc4 -eq 0 ] && [ $RC -eq 0 ] && [ $exact -eq 1 ] && [ "$d_old" = "$d_new" ] && [ "$d_old" -eq 256 ] &&
       [ "$(ck attri "$new" elastic_resumes)" = 1 ]; then
        pass "$mode 4 -> 2: the resumed state follows the mode's rule exactly; $d_new samples drawn carried over"
    else
        fail "$mode 4 -> 2: resumed state (rc $rc4/$RC, exact $exact, drawn $d_old -> $d_new)"
        tail -5 "$WORK/out.txt"
    fi
    fi
    run 2 300 "$D" algorithm.mode=$mode $extra run.output_dir="$o" run.max_steps=16 run.resume=true
    rc2=$RC
    grep -q "on 2 ranks (written by 4" "$WORK/out.txt" || rc2=9
    # the step of the resume (adpsgd: the group's steps per rank, not 8)
    s1=$(sed -n 's/.* at step \([0-9]*\) on 2 ranks (written by 4.*/\1/p' "$WORK/out.txt")
    run 4 300 "$D" algorithm.mode=$mode $extra run.output_dir="$o" run.max_steps=24 run.resume=true
    rc4b=$RC
    grep -q "on 4 ranks (written by 2" "$WORK/out.txt" || rc4b=9
    s2=$(sed -n 's/.* at step \([0-9]*\) on 4 ranks (written by 2.*/\1/p' "$WORK/out.txt")
    if [ $rc2 -eq 0 ] && [ $rc4b -eq 0 ] && grep -q "^done: 2[4-9] steps" "$WORK/out.txt" &&
       e8=$(eval_ok "$o" 1 "$s1") && e16=$(eval_ok "$o" 3 "$s2"); then
        pass "$mode 4 -> 2 -> 4 resumes and finishes; $e8; $e16"
    else
        fail "$mode 4 -> 2 -> 4 (rc $rc2/$rc4b): ${e8:-} ${e16:-}"
        tail -5 "$WORK/out.txt"
    fi
done

# the record of 4 -> 2 -> 4 stays one record: 4 columns, ranks 2 and 3 absent
# from steps 9..16 (padded rows, left out of the csv), present after
o=$WORK/allreduce
n_mid=$(awk -F, 'NR > 1 && $1 > 8 && $1 <= 16 && $3 >= 2' "$o/csv/train.csv" | wc -l)
n_mid01=$(awk -F, 'NR > 1 && $1 > 8 && $1 <= 16 && $3 < 2' "$o/csv/train.csv" | wc -l)
n_late=$(awk -F, 'NR > 1 && $1 > 16 && $3 >= 2' "$o/csv/train.csv" | wc -l)
if [ "$(ck attri "$o/run.h5" ranks)" = 4 ] && [ "$(ck attri "$o/run.h5" resume_from_ranks)" = 2 ] &&
   ck attr "$o/run.h5" elastic_rule | grep -q "^2 -> 4 ranks at step 16: replicated" &&
   [ "$n_mid" -eq 0 ] && [ "$n_mid01" -eq 4 ] && [ "$n_late" -eq 4 ] &&
   "$DTRAIN_POST" summary "$o/run.h5" >"$WORK/summary.txt" && grep -q run.h5 "$WORK/summary.txt"; then
    pass "one record over 4 -> 2 -> 4: 4 columns, ranks 2-3 padded in the 2-rank segment; csv and summary read it"
else
    fail "elastic record (ranks $(ck attri "$o/run.h5" ranks 2>&1), rows $n_mid/$n_mid01/$n_late)"
fi
# the records of lsgd and edge consensus name their rules at the latest change
r_lsgd=$(ck attr "$WORK/lsgd/run.h5" elastic_rule)
r_pdmm=$(ck attr "$WORK/pdmm-isvr/run.h5" elastic_rule)
if grep -q "^2 -> 4 ranks at step [0-9]*: leader: every rank takes the old global leader's model" <<<"$r_lsgd" &&
   grep -q "^2 -> 4 ranks at step 16: average: .*duals start at zero: the method restarts its dual phase" <<<"$r_pdmm" &&
   [ "$(ck attri "$WORK/lsgd/run.h5" resume_from_ranks)" = 2 ] &&
   [ "$(ck attri "$WORK/pdmm-isvr/run.h5" resume_from_ranks)" = 2 ]; then
    pass "lsgd and pdmm-isvr records: resume_from_ranks 2 and their rules (leader; average with the duals reset)"
else
    fail "lsgd/pdmm-isvr elastic_rule: '${r_lsgd:0:80}' '${r_pdmm:0:80}'"
fi
if command -v gnuplot >/dev/null; then
    if "$DTRAIN_POST" plot "$o/run.h5" -o "$WORK/plot.png" >/dev/null 2>&1 && [ -s "$WORK/plot.png" ]; then
        pass "dtrain-post plot draws the elastic record"
    else
        fail "dtrain-post plot on the elastic record"
    fi
fi

# allreduce 4 -> 2 with optim.batch_size doubled: the same global batch, so
# the same steps per epoch, epochs and learning rates as the 4-rank run, the
# resumed model evaluates exactly as before, and the group has drawn the
# same samples at step 16
o=$WORK/gb4
run 4 300 "$D" run.output_dir="$o" run.max_steps=16 run.checkpoint_every=8 optim.schedule=cosine optim.warmup_steps=4
rcA=$RC
head4=$(grep -o "([0-9]* per epoch)" "$WORK/out.txt")
rm -rf "$WORK/gb2" && mkdir -p "$WORK/gb2/checkpoints"
cp "$o/checkpoints/ckpt-0000000008.h5" "$WORK/gb2/checkpoints/" && echo ckpt-0000000008.h5 >"$WORK/gb2/checkpoints/latest"
run 2 300 "$D" run.output_dir="$WORK/gb2" run.max_steps=16 optim.batch_size=16 optim.schedule=cosine optim.warmup_steps=4 run.resume=true
rcB=$RC
head2=$(grep -o "([0-9]* per epoch)" "$WORK/out.txt")
"$DTRAIN_POST" csv "$o/run.h5" -o "$o/csv" >/dev/null
"$DTRAIN_POST" csv "$WORK/gb2/run.h5" -o "$WORK/gb2/csv" >/dev/null
lr4=$(awk -F, 'NR > 1 && $1 > 8 && $3 == 0 { print $1, $2, $7 }' "$o/csv/train.csv")
lr2=$(awk -F, 'NR > 1 && $1 > 8 && $3 == 0 { print $1, $2, $7 }' "$WORK/gb2/csv/train.csv")
# the evaluation at step 8 without its wall clock: the 4-rank run's, and the
# 2-rank run's at its resume
ev4=$(awk -F, -v OFS=, 'NR > 1 && $1 == 8 && $3 == 0 { $2 = $4 = ""; print }' "$o/csv/eval.csv" | head -1)
ev2=$(awk -F, -v OFS=, 'NR > 1 && $1 == 8 && $3 == 0 { $2 = $4 = ""; print }' "$WORK/gb2/csv/eval.csv" | tail -1)
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ -n "$head4" ] && [ "$head4" = "$head2" ] && [ -n "$lr4" ] &&
   [ "$lr4" = "$lr2" ] && [ "$ev4" = "$ev2" ] &&
   [ "$(ck statesum "$(latest "$o")" $DRAWN)" = "$(ck statesum "$(latest "$WORK/gb2")" $DRAWN)" ]; then
    pass "allreduce 4 -> 2 with the batch doubled: $head2 as on 4 ranks, steps/epochs/learning rates 9..16 identical, the resumed model evaluates as before, $(ck statesum "$(latest "$o")" $DRAWN) samples drawn at step 16 on both"
else
    fail "allreduce 4 -> 2 with the batch doubled (rc $rcA/$rcB, '$head4' vs '$head2')"
    echo "$lr4" | head -3 | sed 's/^/#  4: /'; echo "$lr2" | head -3 | sed 's/^/#  2: /'
fi

# a language model (token windows, AdamW): 2 -> 1 takes rank 0's parameters
# and AdamW moments exactly, the windows drawn carry over (2 ranks x 4 steps
# x 4 windows = 32, then 4 steps x 4 on 1 rank: 48), the evaluation is kept
if [ -r /usr/share/games/fortunes ]; then
    o=$WORK/gpt
    G="${srcdir:-.}/inputs/gpt-fortunes.ini model.n_layer=1 model.n_head=2 model.n_embd=16 model.block_size=16 data.test_limit=32 optim.batch_size=4 run.eval_every=4 run.log_every=2 run.checkpoint_every=0 optim.warmup_steps=2"
    run 2 300 $G run.max_steps=4 run.output_dir="$o"
    rcA=$RC
    cp "$(latest "$o")" "$WORK/old-gpt.h5"
    cp -r "$o" "$o.x"
    run 1 300 $G run.max_steps=4 run.output_dir="$o.x" run.resume=true
    rcB=$RC
    new=$(latest "$o.x")
    run 1 300 $G run.max_steps=8 run.output_dir="$o" run.resume=true
    rcC=$RC
    # the token source's state is its window count: byte 32 of the state
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] &&
       ck row0 "$WORK/old-gpt.h5" "$new" params && ck row0 "$WORK/old-gpt.h5" "$new" adam_m &&
       ck row0 "$WORK/old-gpt.h5" "$new" adam_v && [ "$(ck statesum "$new" 32)" = 32 ] &&
       [ "$(ck statesum "$(latest "$o")" 32)" = 48 ] && e=$(eval_ok "$o" 1 4); then
        pass "gpt on text, allreduce 2 -> 1: parameters and AdamW moments of rank 0, 32 windows carried, 48 at step 8; $e"
    else
        fail "gpt 2 -> 1 (rc $rcA/$rcB/$rcC)"; tail -3 "$WORK/out.txt"
    fi
fi

# two identical elastic resumes (sgp 4 -> 2, 4 steps) write identical
# checkpoints: the averaged start and the reseeded streams are reproducible
for k in a b; do
    rm -rf "$WORK/rep$k" && mkdir -p "$WORK/rep$k/checkpoints"
    cp "$WORK/old-sgp.h5" "$WORK/rep$k/checkpoints/ckpt-0000000008.h5"
    echo ckpt-0000000008.h5 >"$WORK/rep$k/checkpoints/latest"
    run 2 300 "$D" algorithm.mode=sgp run.output_dir="$WORK/rep$k" run.max_steps=12 run.resume=true
    eval "rc$k=$RC"
done
if [ "$rca" -eq 0 ] && [ "$rcb" -eq 0 ] &&
   ck all "$(latest "$WORK/repa")" "$(latest "$WORK/repb")" state:24:8 >/dev/null &&
   ! ck same "$(latest "$WORK/repa")" "$WORK/old-sgp.h5" params >/dev/null 2>&1; then
    pass "two identical elastic resumes (sgp 4 -> 2, to step 12) write bit-identical checkpoints"
else
    fail "elastic resume reproducibility (rc $rca/$rcb)"
fi
# within the new era a resume on the same count is bit for bit again: 4 -> 2
# to step 10, then 2 -> 2 to step 12, equals 4 -> 2 to step 12 (the streams
# keep the era's seed: the checkpoint's elastic_resumes)
rm -rf "$WORK/repc" && mkdir -p "$WORK/repc/checkpoints"
cp "$WORK/old-sgp.h5" "$WORK/repc/checkpoints/ckpt-0000000008.h5"
echo ckpt-0000000008.h5 >"$WORK/repc/checkpoints/latest"
run 2 300 "$D" algorithm.mode=sgp run.output_dir="$WORK/repc" run.max_steps=10 run.resume=true
rcc=$RC
run 2 300 "$D" algorithm.mode=sgp run.output_dir="$WORK/repc" run.max_steps=12 run.resume=true
if [ $rcc -eq 0 ] && [ $RC -eq 0 ] && grep -q "resumed from .*ckpt-0000000010.h5 at step 10$" "$WORK/out.txt" &&
   ck all "$(latest "$WORK/repa")" "$(latest "$WORK/repc")" state:24:8 >/dev/null; then
    pass "after an elastic resume, a resume on the same rank count continues bit for bit"
else
    fail "same-count resume after an elastic one (rc $rcc/$RC)"
fi

# the edge-consensus modes with synchronous swaps: two identical 4 -> 2
# resumes (4 steps, both swap ends at the same step) write identical
# checkpoints; lsgd (asynchronous: which local steps fall between two
# distributed steps is the ranks' pace) over its one step after the resume
for mode in pdmm-isvr admm-isvr dsgd-ecl lsgd; do
    extra="ecl.sync=true run.max_steps=12"
    [ $mode = lsgd ] && extra="$LSGD run.max_steps=8"
    case $mode in pdmm-isvr | admm-isvr) extra="$extra optim.momentum=0" ;; esac
    for k in a b; do
        rm -rf "$WORK/rep$k-$mode" && mkdir -p "$WORK/rep$k-$mode/checkpoints"
        cp "$WORK/old-$mode.h5" "$WORK/rep$k-$mode/checkpoints/ckpt-0000000008.h5"
        echo ckpt-0000000008.h5 >"$WORK/rep$k-$mode/checkpoints/latest"
        run 2 300 "$D" algorithm.mode=$mode $extra run.output_dir="$WORK/rep$k-$mode" run.resume=true
        eval "rc$k=$RC"
        end=$(cat "$WORK/rep$k-$mode/checkpoints/latest")
    done
    if [ "$rca" -eq 0 ] && [ "$rcb" -eq 0 ] && [ "$end" != ckpt-0000000008.h5 ] &&
       ck all "$(latest "$WORK/repa-$mode")" "$(latest "$WORK/repb-$mode")" state:24:8 >/dev/null &&
       ! ck same "$(latest "$WORK/repa-$mode")" "$WORK/old-$mode.h5" params >/dev/null 2>&1; then
        pass "two identical elastic resumes ($mode 4 -> 2, to $end) write bit-identical checkpoints"
    else
        fail "elastic resume reproducibility of $mode (rc $rca/$rcb, $end)"
    fi
done

# refusals, before anything is written: a rank count the mode cannot take
o=$WORK/lsgd
sum0=$(md5sum "$o/run.h5" "$o/checkpoints/latest" | md5sum)
run 3 300 "$D" algorithm.mode=lsgd $LSGD run.output_dir="$o" run.max_steps=32 run.resume=true
expect_fail "lsgd in groups of 2 on 3 ranks is refused" "lsgd.group_size = 2 does not divide the 3 ranks"
[ "$sum0" = "$(md5sum "$o/run.h5" "$o/checkpoints/latest" | md5sum)" ] &&
    pass "the refused resume left the record and the checkpoints as they were" ||
    fail "the refused resume changed the record or the checkpoints"
o=$WORK/pdmm-isvr
sum0=$(md5sum "$o/run.h5" "$o/checkpoints/latest" | md5sum)
run 1 300 "$D" algorithm.mode=pdmm-isvr optim.momentum=0 run.output_dir="$o" run.max_steps=32 run.resume=true
expect_fail "pdmm-isvr on 1 rank (no edge graph) is refused" "pdmm-isvr needs at least 2 ranks \(a graph\), the job has 1"
[ "$sum0" = "$(md5sum "$o/run.h5" "$o/checkpoints/latest" | md5sum)" ] &&
    pass "the refused edge-consensus resume left the record and the checkpoints as they were" ||
    fail "the refused edge-consensus resume changed the record or the checkpoints"
run 1 300 "$D" algorithm.mode=sgp run.output_dir="$WORK/sgp" run.max_steps=32 run.resume=true
expect_fail "sgp on 1 rank is refused" "gossip needs at least 2"
run 3 300 "$D" algorithm.mode=dpsgd algorithm.topology=bipartite run.output_dir="$WORK/dpsgd" run.max_steps=32 run.resume=true
expect_fail "dpsgd on the bipartite graph on 3 ranks is refused" "bipartite: n = 3 ranks; the active/passive pairing needs an even number"
o=$WORK/dilo
run 4 300 "$D" algorithm.mode=diloco diloco.inner_steps=4 diloco.overlap=1 run.output_dir="$o" run.max_steps=8
run 2 300 "$D" algorithm.mode=diloco diloco.inner_steps=4 diloco.overlap=1 run.output_dir="$o" run.max_steps=16 run.resume=true
expect_fail "diloco with a fragment in flight is refused on another rank count" "array 'diloco_sent' is one rank's own state"
finish
