#!/bin/bash
# Checkpoint then resume reproduces the uninterrupted run bit for bit
# (parameters and momentum of every rank), with dropout in the model; and a
# GPT under optim.name = muon (parameters, Muon's momentum, its AdamW part's
# moments) with warm-up and the cosine, on 2 ranks.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
m="model.name=mnist_cnn data.synthetic_height=8 data.synthetic_width=8 data.synthetic_train=256"
for np in 1 2; do
    mode=allreduce; [ $np -eq 1 ] && mode=local
    run $np 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/full$np" run.max_steps=24
    rcA=$RC
    run $np 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/part$np" run.max_steps=10
    rcB=$RC
    run $np 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/part$np" run.max_steps=24 run.resume=true
    rcC=$RC
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/full$np")" "$(last "$WORK/part$np")" >/dev/null; then
        pass "$mode on $np rank(s): 10 steps + resume to 24 == 24 steps bit for bit"
    else
        fail "$mode on $np rank(s) resume (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
    fi
done
# muon on a tiny GPT: 5 steps + resume to 12 == 12 steps, every state array
word_corpus 11 120 >"$WORK/corpus.txt"
g="model.name=gpt model.n_layer=1 model.n_head=2 model.n_embd=32 model.block_size=16
   model.dropout=0.1 data.name=text data.path=$WORK/corpus.txt optim.name=muon optim.lr=0.02
   optim.batch_size=4 optim.weight_decay=0.01 optim.schedule=cosine optim.warmup_steps=3
   optim.decay_steps=12
   run.epochs=100 run.log_every=4"
run 2 300 "$D" $g run.output_dir="$WORK/gfull" run.max_steps=12
rcA=$RC
run 2 300 "$D" $g run.output_dir="$WORK/gpart" run.max_steps=5
rcB=$RC
run 2 300 "$D" $g run.output_dir="$WORK/gpart" run.max_steps=12 run.resume=true
rcC=$RC
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/gfull")" "$(last "$WORK/gpart")" params muon_momentum \
       adam_m adam_v >/dev/null; then
    pass "muon, GPT, allreduce on 2 ranks: 5 steps + resume to 12 == 12 steps bit for bit (params, muon_momentum, adam_m, adam_v)"
else
    fail "muon GPT resume (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
fi

# the resumed run record continues: its /train step column has no duplicates
if "$DTRAIN_POST" csv "$WORK/part2/run.h5" -o "$WORK/csv" >/dev/null &&
   [ "$(cut -d, -f1,3 "$WORK/csv/train.csv" | sort | uniq -d | wc -l)" -eq 0 ]; then
    pass "resumed run record has each (step, rank) once"
else
    fail "resumed run record"
fi
finish
