#!/bin/bash
# Rank groups: two groups in one job train exactly as each mode alone; bad
# group decks fail on every rank within seconds, naming file, line and key;
# a signal mid-run stops both groups, and resuming ends where an
# uninterrupted run ends; groups.csv and the group plot.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/unused" >"$D"
a="run.epochs=400 run.max_steps=300 run.log_every=20"
G=$WORK/groups.ini
{ cat "$D"; printf '[group.ar]\nranks = 2\nalgorithm.mode = allreduce\n'
  printf '[group.sgp]\nranks = 2\nalgorithm.mode = sgp\n'; } >"$G"

# 1. each group equals its mode run alone on 2 ranks, bit for bit
run 4 300 "$G" $a run.output_dir="$WORK/g"
rcG=$RC
for m in ar:allreduce sgp:sgp; do
    name=${m%%:*} mode=${m#*:}
    run 2 300 "$D" $a algorithm.mode=$mode run.output_dir="$WORK/alone-$name"
    if [ $rcG -eq 0 ] && [ "$RC" -eq 0 ] &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/g/$name")" "$(last "$WORK/alone-$name")" >/dev/null; then
        pass "group $name ($mode, 2 of 4 ranks) == $mode alone on 2 ranks, bit for bit"
    else
        fail "group $name vs alone (rc $rcG/$RC)"; tail -3 "$WORK/out.txt"
    fi
done

# 2. groups.csv: one row per group, documented columns; plot of the job dir
cols="group,mode,first_rank,ranks,status,steps,avg_model_accuracy,mean_accuracy,wall_s,images_per_s,comm_share"
csv=$WORK/g/groups.csv
if [ -f "$csv" ] && [ "$(head -1 "$csv")" = "$cols" ] && [ "$(wc -l <"$csv")" -eq 3 ] &&
   [ "$(cut -d, -f1-6 "$csv" | tail -2 | tr '\n' ' ')" = "ar,allreduce,0,2,done,300 sgp,sgp,2,2,done,300 " ]; then
    pass "groups.csv: header and one row per group ($(tail -1 "$csv"))"
else
    fail "groups.csv"; cat "$csv" 2>/dev/null | sed 's/^/#   /'
fi
if "$DTRAIN_POST" plot "$WORK/g" -o "$WORK/g.png" >/dev/null 2>&1 && [ -s "$WORK/g.png" ] &&
   [ "$("$DTRAIN_POST" summary "$WORK/g" | wc -l)" -eq 3 ]; then
    pass "dtrain-post plot and summary take the job directory (both groups)"
else
    fail "dtrain-post on the job directory"
fi
# the job's effective deck reproduces the job
if run 4 300 "$WORK/g/deck.ini" run.output_dir="$WORK/g2" run.max_steps=40 && [ "$RC" -eq 0 ] &&
   [ -f "$WORK/g2/ar/run.h5" ] && [ -f "$WORK/g2/sgp/run.h5" ]; then
    pass "the job's effective deck (deck.ini) runs the same groups"
else
    fail "effective job deck (rc $RC)"; tail -3 "$WORK/out.txt"
fi

# 3. bad group decks: every rank exits non-zero within seconds
bad() { # NAME PATTERN EXTRA-DECK-TEXT [ARGS...]
    local name=$1 pat=$2 text=$3
    shift 3
    { printf "$text"; cat "$D"; } >"$WORK/bad.ini" # groups first: small line numbers
    run 4 60 "$WORK/bad.ini" "$@"
    expect_fail "$name" "$pat"
}
bad "ranks do not add up" "bad.ini: the groups take 5 rank.*bad.ini:4: group.b.ranks\) but the job has 4" \
    '[group.a]\nranks = 2\n[group.b]\nranks = 3\n'
bad "group too small for its mode" "bad.ini:4: group.b.ranks = 3 \(algorithm.mode = adpsgd\).*even" \
    '[group.a]\nranks = 1\n[group.b]\nranks = 3\nalgorithm.mode = adpsgd\n'
bad "output_dir differs between groups" "bad.ini:4: group.b.run.output_dir: cannot differ between groups" \
    '[group.a]\nranks = 2\n[group.b]\nrun.output_dir = /tmp/x\nranks = 2\n'
bad "unknown key in a group" "bad.ini:5: group.b.optim.lrr: unknown key 'lrr' in \[optim\]; did you mean 'optim.lr'" \
    '[group.a]\nranks = 2\n[group.b]\nranks = 2\noptim.lrr = 1\n'
bad "bad value in a group" "bad.ini:2: group.a.optim.lr = -1: expected a number > 0" \
    '[group.a]\noptim.lr = -1\nranks = 4\n'
bad "group without ranks" "bad.ini:1: \[group.a\]: missing 'ranks = N'" '[group.a]\n[group.b]\nranks = 4\n'
bad "bad group name" "bad.ini:1: \[group.a/b\]: a group name is" '[group.a/b]\nranks = 4\n'
bad "override of an unknown group" "command-line argument 1 .*its groups are a" \
    '[group.a]\nranks = 4\n' group.x.optim.lr=1
bad "bad group override" "command-line argument 1 .*group.a.ranks = 0: expected an integer >= 1" \
    '[group.a]\nranks = 4\n' group.a.ranks=0

# 4. SIGTERM mid-run stops both groups (exit 75 once), resume finishes both
#    where the uninterrupted run (1.) ended
set +e
timeout -k 5 300 "$MPIEXEC" -n 4 "$DTRAIN" "$G" $a run.output_dir="$WORK/sig" \
    run.test_delay_rank=0 run.test_delay_ms=5 >"$WORK/sig.txt" 2>&1 &
pid=$!
for i in $(seq 1 600); do
    grep -Eq "^\[sgp\] step 60/" "$WORK/sig.txt" 2>/dev/null && break
    sleep 0.1
done
signal_ranks TERM "$WORK/sig"
wait $pid
rc=$?
set -e
n75=$(grep -c "signal received" "$WORK/sig.txt" || true)
if [ $rc -eq 75 ] && [ "$n75" -eq 2 ] && [ -s "$WORK/sig/ar/checkpoints/latest" ] &&
   [ -s "$WORK/sig/sgp/checkpoints/latest" ] && grep -q "stopped" "$WORK/sig.txt"; then
    pass "SIGTERM: both groups checkpoint ($(grep -o '\[[a-z]*\] signal received: checkpointing at step [0-9]*' "$WORK/sig.txt" | tr '\n' ' ')) and the job exits 75"
else
    fail "SIGTERM with groups (rc $rc, $n75 groups reported the signal)"; tail -5 "$WORK/sig.txt"
fi
run 4 300 "$G" $a run.output_dir="$WORK/sig" run.resume=true
ok=$([ "$RC" -eq 0 ] && [ "$(grep -c 'resumed from' "$WORK/out.txt")" -eq 2 ] && echo 1 || echo 0)
for name in ar sgp; do
    if [ "$ok" = 1 ] && "$TEST_BIN/ckcmp" same "$(last "$WORK/sig/$name")" "$(last "$WORK/g/$name")" >/dev/null; then
        pass "group $name after signal and resume == uninterrupted, bit for bit"
    else
        fail "group $name resume (rc $RC)"; tail -3 "$WORK/out.txt"
    fi
done
finish
