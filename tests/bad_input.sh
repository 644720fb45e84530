#!/bin/bash
# Bad input: every case exits non-zero on every rank within seconds, with a
# message naming the file, key or line and what was expected.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/run" >"$D"

run 2 60 "$WORK/nonexistent.ini"
expect_fail "missing deck" "nonexistent.ini"

sed 's/^lr = 0.05/lrr = 0.05/' "$D" >"$WORK/typo.ini"
run 2 60 "$WORK/typo.ini"
expect_fail "unknown key (typo)" "typo.ini:[0-9]+.*optim.lrr"

run 2 60 "$D" optim.lr=-1
expect_fail "negative lr" "optim.lr"
run 2 60 "$D" optim.batch_size=0
expect_fail "batch 0" "optim.batch_size"
run 2 60 "$D" optim.lr=abc
expect_fail "non-number lr" "optim.lr.*abc|abc.*optim.lr"
sed 's/^lr = 0.05/lr = fast/' "$D" >"$WORK/badval.ini"
run 2 60 "$WORK/badval.ini"
expect_fail "bad value in the file names file and line" "badval.ini:[0-9]+.*optim.lr"
run 2 60 "$D" algorithm.mode=gossipy
expect_fail "unknown mode" "algorithm.mode.*gossipy|gossipy.*algorithm.mode"
run 2 60 "$D" model.name=resnet18
expect_fail "unknown model" "model.name.*resnet18|resnet18.*model.name"
run 2 60 "$D" data.name=fashion-mnist data.path="$WORK/no-such-dir"
expect_fail "data path missing" "no-such-dir"
: >"$WORK/afile"
run 2 60 "$D" run.output_dir="$WORK/afile/sub"
expect_fail "unwritable output dir" "afile/sub"
run 2 60 "$D" algorithm.mode=local
expect_fail "local mode on 2 ranks" "exactly 1 rank"
# the language-model and AdamW keys: each refusal names its keys
run 2 60 "$D" optim.name=adamw algorithm.mode=pdmm-isvr
expect_fail "adamw with an edge-consensus ISVR mode" \
    "optim.name = adamw with algorithm.mode = pdmm-isvr: the edge-consensus modes take their own ISVR step"
# muon: the parameter server steps on shards, the ISVR modes take their own step; a
# model without hidden matrices would make it AdamW
run 2 60 "$D" optim.name=muon algorithm.mode=ps-async
expect_fail "muon with a parameter-server mode" \
    "optim.name = muon with algorithm.mode = ps-async: the parameter servers step on their shards"
run 2 60 "$D" optim.name=muon algorithm.mode=pdmm-isvr
expect_fail "muon with an edge-consensus ISVR mode" \
    "optim.name = muon with algorithm.mode = pdmm-isvr: the mode takes its own step"
run 2 60 "$D" optim.name=muon
expect_fail "muon on a model without hidden matrices" \
    "optim.name = muon: none of the model's 4 tensors is a hidden weight matrix"
run 2 60 "$D" model.name=gpt data.name=text model.n_embd=100 model.n_head=3
expect_fail "n_embd not divisible by n_head" "model.n_embd = 100, model.n_head = 3: expected n_embd divisible"
run 2 60 "$D" optim.beta2=1
expect_fail "beta2 = 1" "optim.beta2 = 1: expected a number in \\[0, 1\\)"
run 2 60 "$D" optim.eps=0
expect_fail "eps = 0" "optim.eps = 0: expected a number > 0"
run 2 60 "$D" model.dropout=1
expect_fail "dropout = 1" "model.dropout = 1: expected a number in \\[0, 1\\)"
# DiLoCo's top-k exchange and delayed outer step: each refusal names key, value and what it takes
DL="algorithm.mode=diloco diloco.inner_steps=4"
run 2 60 "$D" $DL diloco.compress=topk diloco.density=0
expect_fail "topk density 0" "diloco.density = 0: expected a number in \\(0, 1\\]"
run 2 60 "$D" $DL diloco.compress=topk diloco.density=1.5
expect_fail "topk density 1.5" "diloco.density = 1.5: expected a number in \\(0, 1\\]"
run 2 60 "$D" $DL diloco.compress=topk diloco.bits=3
expect_fail "topk bits 3" "diloco.bits = 3: expected one of 2, 4, 8"
run 2 60 "$D" $DL diloco.compress=topk diloco.chunk=32
expect_fail "topk chunk 32" "diloco.chunk = 32: expected an integer in \\[64,"
run 2 60 "$D" $DL diloco.ef_decay=0
expect_fail "ef_decay 0" "diloco.ef_decay = 0: expected a number in \\(0, 1\\]"
run 2 60 "$D" $DL diloco.ef_decay=1.5
expect_fail "ef_decay 1.5" "diloco.ef_decay = 1.5: expected a number in \\(0, 1\\]"
run 2 60 "$D" $DL diloco.compress=topk diloco.outer_comm=sgp
expect_fail "topk with sgp" \
    "diloco.compress = topk with diloco.outer_comm = sgp: expected diloco.outer_comm = allreduce"
run 2 60 "$D" $DL diloco.compress=topk diloco.precision=bf16
expect_fail "topk with bf16" "diloco.precision = bf16 with diloco.compress = topk: expected fp32"
run 2 60 "$D" $DL diloco.delay=1 diloco.fragments=2
expect_fail "delay with 2 fragments" \
    "diloco.delay = 1 takes diloco.fragments = 1, diloco.overlap = 0 and diloco.merge = 0 \\(got 2"
run 2 60 "$D" $DL diloco.inner_time=-1
expect_fail "negative inner_time" "diloco.inner_time = -1: expected a number >= 0"
run 2 60 "$D" $DL diloco.inner_time=2 diloco.fragments=2
expect_fail "inner_time with 2 fragments" \
    "diloco.inner_time = 2 takes diloco.fragments = 1, diloco.overlap = 0, diloco.delay = 0 and diloco.outer_comm = allreduce \\(got 2"
run 2 60 "$D" $DL diloco.inner_time=2 diloco.delay=1
expect_fail "inner_time with delay" "diloco.inner_time = 2 takes .* \\(got 1, 0, 1, allreduce\\)"
run 2 60 "$D" $DL diloco.inner_time=2 diloco.outer_comm=sgp
expect_fail "inner_time with sgp" "diloco.inner_time = 2 takes .* \\(got 1, 0, 0, sgp\\)"
# momentum given with adamw: the run goes on, rank 0 says once that it is ignored
run 2 60 --print-deck "$D" optim.name=adamw
if [ "$RC" -eq 0 ] && [ "$(grep -c 'note: optim.momentum does not apply to optim.name = adamw' \
        "$WORK/out.txt")" -eq 1 ]; then
    pass "adamw + momentum: accepted with one note"
else
    fail "adamw + momentum (rc $RC)"; grep -i note "$WORK/out.txt" | sed 's/^/#   /'
fi

# a finished run, then the same output dir again without resume/overwrite
run 2 120 "$D" run.max_steps=6
if [ "$RC" -ne 0 ]; then fail "reference run for the resume cases"; cat "$WORK/out.txt"; fi
run 2 60 "$D" run.max_steps=6
expect_fail "existing run without resume" "already holds a run"
run 2 120 "$D" run.max_steps=6 run.overwrite=true
[ "$RC" -eq 0 ] && pass "run.overwrite = true replaces the run" || fail "overwrite (rc $RC)"

# a rank-count change is an elastic resume (doc/checkpoints.md), not an error
run 1 60 "$D" run.resume=true run.max_steps=12
if [ "$RC" -eq 0 ] && grep -q "resumed from" "$WORK/out.txt"; then
    pass "resume on another rank count (2 -> 1) resumes"
else
    fail "elastic resume 2 -> 1 (rc $RC)"; sed 's/^/#   /' "$WORK/out.txt" | tail -5
fi
run 2 60 "$D" run.resume=true run.max_steps=12 model.hidden=40
expect_fail "resume with another model size" "param"

# corrupt the latest checkpoint: the resume skips it, naming it, resumes from
# the previous one, which stays intact (tests/ckpt_damage.sh: bit for bit)
run 2 120 "$D" run.overwrite=true run.max_steps=12 run.checkpoint_every=6 run.checkpoint_keep=3
ck=$WORK/run/checkpoints
latest=$(cat "$ck/latest")
prev=$(ls "$ck" | grep -E '^ckpt-[0-9]+\.h5$' | sort | tail -2 | head -1)
cp "$ck/$prev" "$WORK/prev.copy"
size=$(stat -c %s "$ck/$latest")
truncate -s $((size / 2)) "$ck/$latest"
run 2 60 "$D" run.resume=true run.max_steps=18 run.checkpoint_keep=3
if [ "$RC" -eq 0 ] && grep -q "resume: skipped .*$latest" "$WORK/out.txt" &&
   grep -q "resumed from .*$prev" "$WORK/out.txt"; then
    pass "truncated checkpoint $latest skipped, resumed from $prev"
else
    fail "truncated checkpoint (rc $RC)"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
fi
cmp -s "$ck/$prev" "$WORK/prev.copy" && pass "previous checkpoint untouched" \
    || fail "previous checkpoint changed"
finish
