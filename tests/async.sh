#!/bin/bash
# Asynchronous modes over time: run.eval_every gives each rank of adpsgd and
# lsgd, and each worker of ps-async, a curve of its own model (several /eval
# rows per rank, the group's progress increasing along each), and
# dtrain-post csv and plot read them. LSGD's step count favours no rank: on
# 4 ranks with equal compute each rank's share of the local steps is within
# 25 % of the mean. adpsgd and lsgd take the step budget and pass it by
# less than two steps per rank (the group's count is a non-blocking sum: a
# rank holds at most its share of the steps left, by the last round it saw).
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
m="model.name=mnist_cnn data.synthetic_height=12 data.synthetic_width=12 data.synthetic_test=64"

# eval_every = 1: a rank that the scheduler starves on oversubscribed cores
# still logs a row per step of its own (at 3 it had 2 rows once, under ASan)
for mode in adpsgd lsgd ps-async; do
    first=0 # the ranks that train: ps-async's rank 0 is its server
    [ $mode = ps-async ] && first=1
    run 4 300 "$D" $m algorithm.mode=$mode run.output_dir="$WORK/$mode" run.max_steps=32 \
        run.eval_every=1 run.log_every=1
    rc=$RC
    set +e
    "$DTRAIN_POST" csv "$WORK/$mode/run.h5" -o "$WORK/$mode/csv" >"$WORK/post.txt" 2>&1
    rcc=$?
    "$DTRAIN_POST" plot "$WORK/$mode/run.h5" -o "$WORK/$mode/fig.png" --data "$WORK/$mode/plot" >>"$WORK/post.txt" 2>&1
    rcp=$?
    set -e
    # per rank: rows, and whether step and epoch never decrease along them
    # (the last row is the collective final evaluation)
    rows=$(awk -F, 'NR > 1 { n[$3]++; if ($1 < s[$3] || $2 < e[$3]) bad[$3] = 1; s[$3] = $1; e[$3] = $2 }
        END { for (k = first; k < 4; k++) printf "%d%s ", n[k], bad[k] ? "!" : "" }' first=$first \
        "$WORK/$mode/csv/eval.csv" 2>/dev/null)
    few=$(echo "$rows" | tr ' ' '\n' | awk 'NF && ($0 ~ /!/ || $0 + 0 < 3)' | wc -l)
    padded=$(awk -F, 'NR > 1 && $1 < 0' "$WORK/$mode/csv/eval.csv" 2>/dev/null | wc -l)
    if [ $rc -eq 0 ] && [ $rcc -eq 0 ] && [ $rcp -eq 0 ] && [ -n "$rows" ] && [ "$few" -eq 0 ] &&
       [ "$padded" -eq 0 ] && [ -s "$WORK/$mode/plot/run1.eval.dat" ] &&
       [ "$(grep -vc '^"' "$WORK/$mode/plot/run1.eval.dat")" -ge 3 ]; then
        pass "$mode on 4 ranks, run.eval_every=1: /eval rows per training rank $rows(progress increasing), csv and plot read them"
    else
        fail "$mode curves (rc $rc, csv $rcc, plot $rcp, rows per rank '$rows', padding rows in csv $padded)"
        tail -3 "$WORK/out.txt"; cat "$WORK/post.txt"
    fi
    [ $mode = ps-async ] && continue
    steps=$(awk -F, 'NR > 1 && $1 >= 0' "$WORK/$mode/csv/train.csv" 2>/dev/null | wc -l)
    # the deck's 2 epochs of 512 samples at batch 16 on 4 ranks: 16 steps per rank
    if [ $rc -eq 0 ] && [ "$steps" -ge 64 ] && [ "$steps" -lt 72 ]; then
        pass "$mode on 4 ranks, 2 epochs: $steps steps in all (budget 64, less than 8 over)"
    else
        fail "$mode step budget: $steps steps in all for a budget of 64 (rc $rc)"
    fi
done

# LSGD's shares of the local steps: each rank's last /train step over the mean
run 4 300 "$D" algorithm.mode=lsgd run.output_dir="$WORK/share" run.max_steps=300 \
    run.epochs=100 run.log_every=1 lsgd.tau_local=8 lsgd.tau_global=8
rc=$RC
set +e
"$DTRAIN_POST" csv "$WORK/share/run.h5" -o "$WORK/share/csv" >"$WORK/post.txt" 2>&1
set -e
shares=$(awk -F, 'NR > 1 && $1 >= 0 { if ($1 > m[$3]) m[$3] = $1 }
    END { for (k = 0; k < 4; k++) s += m[k]; for (k = 0; k < 4; k++) printf "%.2f ", 4 * m[k] / s }' \
    "$WORK/share/csv/train.csv" 2>/dev/null)
off=$(echo "$shares" | tr ' ' '\n' | awk 'NF && ($1 < 0.75 || $1 > 1.25)' | wc -l)
if [ $rc -eq 0 ] && [ -n "$shares" ] && [ "$off" -eq 0 ]; then
    pass "lsgd on 4 ranks: local-step shares over the mean $shares(within 25 %)"
else
    fail "lsgd step shares '$shares' (rc $rc)"; tail -3 "$WORK/out.txt"
fi
finish
