#!/bin/bash
# dtrain-post: CSV columns and row counts, a PNG plot, and the summary table.
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
"$DTRAIN_POST" csv "$WORK/nothere.h5" >/dev/null 2>"$WORK/err.txt" && fail "csv of a missing file exits 0" \
    || { grep -q nothere "$WORK/err.txt" && pass "missing record is a clear error" || fail "missing record message"; }
finish
