#!/bin/bash
# dtrain-post: CSV columns and row counts, a PNG plot, and the summary table;
# the plot's words for an image record and for a language model's.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/run" >"$D"
# 512 samples / 2 ranks / batch 16 = 16 steps per epoch, 2 epochs = 32 steps;
# log every 5 -> rows at 5,10,...,30 and the last step 32: 7 rows x 2 ranks
run 2 120 "$D"
[ "$RC" -eq 0 ] || { fail "training run (rc $RC)"; cat "$WORK/out.txt"; finish; exit 1; }
"$DTRAIN_POST" csv "$WORK/run/run.h5" -o "$WORK/csv" >"$WORK/post.txt" 2>&1 || fail "csv exit status"
hdr=$(head -1 "$WORK/csv/train.csv")
[ "$hdr" = "step,epoch,rank,wall,loss,accuracy,lr,compute_time,comm_time,wait_time,images,weight,bytes_sent" ] \
    && pass "train.csv columns" || fail "train.csv header: $hdr"
rows=$(($(wc -l <"$WORK/csv/train.csv") - 1))
[ "$rows" -eq 14 ] && pass "train.csv has 7 logged steps x 2 ranks" || fail "train.csv rows: $rows"
hdr=$(head -1 "$WORK/csv/eval.csv")
[ "$hdr" = "step,epoch,rank,wall,loss,accuracy,loss_mean,loss_std,accuracy_mean,accuracy_std,avg_model_loss,avg_model_accuracy,consensus_distance" ] \
    && pass "eval.csv columns" || fail "eval.csv header: $hdr"
rows=$(($(wc -l <"$WORK/csv/eval.csv") - 1))
[ "$rows" -eq 4 ] && pass "eval.csv has 2 evaluations x 2 ranks" || fail "eval.csv rows: $rows"
# every train row's images column grows by batch*5 between rows of one rank
awk -F, 'NR>1 && $3==0 {print $11}' "$WORK/csv/train.csv" | head -2 | tr '\n' ' ' | grep -q "^80 160 " \
    && pass "images column counts 16 per step" || fail "images column"
"$DTRAIN_POST" plot "$WORK/run/run.h5" -o "$WORK/fig.png" >/dev/null 2>&1 || true
if [ -s "$WORK/fig.png" ] && [ "$(head -c 4 "$WORK/fig.png" | tail -c 3)" = "PNG" ]; then
    pass "plot writes a PNG"
else
    fail "plot"
fi
"$DTRAIN_POST" summary "$WORK/run/run.h5" >"$WORK/sum.txt" 2>&1 && grep -q allreduce "$WORK/sum.txt" \
    && pass "summary table" || fail "summary: $(cat "$WORK/sum.txt")"
# the figure's words: an image record keeps the image classifier's, a
# language model's record (sample_unit = tokens) speaks of next-token
# accuracy and of training and validation loss in nats, and its eval.dat
# carries the validation loss the loss panels draw
"$DTRAIN_POST" plot "$WORK/run/run.h5" -o "$WORK/fig2.png" --data "$WORK/pimg" >/dev/null 2>&1 || true
g=$WORK/pimg/plot.gp
if [ -s "$g" ] && grep -q "^set title 'test accuracy vs wall time'$" "$g" &&
   grep -q "^set ylabel 'test accuracy'$" "$g" && grep -q "^set ylabel 'training loss'$" "$g" &&
   ! grep -qE "next-token|nats|validation|using [12]:6" "$g"; then
    pass "plot of an image record: test accuracy and training loss"
else
    fail "plot script of an image record: $(grep -E '^set (title|ylabel)' "$g" 2>/dev/null | tr '\n' '|')"
fi
awk 'BEGIN { srand(3); n = split("the a cat dog sat on mat and ran to house big red fox", w, " ")
    for (l = 0; l < 200; l++) { s = ""; for (i = 0; i < 6; i++) s = s " " w[1 + int(rand() * n)]
        print s "." } }' >"$WORK/corpus.txt"
cat >"$WORK/lm.ini" <<DECK
[run]
output_dir = $WORK/lm
seed = 3
max_steps = 12
log_every = 4
eval_every = 6
[algorithm]
mode = allreduce
[model]
name = gpt
n_layer = 1
n_head = 2
n_embd = 16
block_size = 16
[data]
name = text
path = $WORK/corpus.txt
test_limit = 8
[optim]
name = adamw
batch_size = 4
lr = 3e-3
DECK
run 2 120 "$WORK/lm.ini"
[ "$RC" -eq 0 ] || { fail "language-model run (rc $RC)"; tail -5 "$WORK/out.txt"; }
"$DTRAIN_POST" plot "$WORK/lm/run.h5" -o "$WORK/lm.png" --data "$WORK/plm" >/dev/null 2>&1 || true
g=$WORK/plm/plot.gp
if [ -s "$WORK/lm.png" ] && grep -q "^set title 'next-token accuracy vs wall time'$" "$g" &&
   grep -q "^set ylabel 'next-token accuracy (validation)'$" "$g" &&
   grep -q "^set ylabel 'training and validation loss (nats)'$" "$g" &&
   grep -q "evalf(i) using 1:6:7:8 with yerrorbars.*columnheader(6)" "$g" &&
   ! grep -qE "test accuracy|'training loss'" "$g" &&
   head -1 "$WORK/plm/run1.eval.dat" | grep -q '^".*" epoch mean min max ".* validation" min max$' &&
   [ "$(awk 'NR > 1 { print NF }' "$WORK/plm/run1.eval.dat" | sort -u)" = 8 ]; then
    pass "plot of a language-model record: next-token accuracy, training and validation loss (nats)"
else
    fail "plot script of a language-model record: $(grep -E '^set (title|ylabel)' "$g" 2>/dev/null | tr '\n' '|')"
fi
"$DTRAIN_POST" summary "$WORK/lm/run.h5" 2>&1 | head -1 | grep -q tokens_per_s &&
    "$DTRAIN_POST" csv "$WORK/lm/run.h5" -o "$WORK/lmcsv" >/dev/null 2>&1 &&
    head -1 "$WORK/lmcsv/train.csv" | grep -q ",tokens,weight," \
    && pass "summary and csv of a language-model record count tokens" || fail "tokens in summary/csv"
"$DTRAIN_POST" csv "$WORK/nothere.h5" >/dev/null 2>"$WORK/err.txt" && fail "csv of a missing file exits 0" \
    || { grep -q nothere "$WORK/err.txt" && pass "missing record is a clear error" || fail "missing record message"; }
finish
