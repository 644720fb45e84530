#!/bin/bash
# The byte-level GPT end to end (model.name = gpt), on a tiny model (1 layer,
# 2 heads, 32 channels, context 16) and a generated English-like corpus:
#  1. every family trains it (allreduce, sgp, adpsgd, ps-async, lsgd,
#     pdmm-isvr with SGD, diloco, local): each run ends 0 and every rank's
#     final validation loss is below the corpus's byte-unigram entropy - 0.1
#     with AdamW (it learned context), below ln(V) - 0.5 with SGD (V: the
#     corpus's distinct bytes, which the record's vocabulary must list);
#     pdmm-isvr refuses adamw;
#  2. AdamW with warm-up, cosine and clipping stops and resumes bit for bit
#     (params, adam_m, adam_v; push-sum weights for sgp) in local,
#     allreduce and sgp;
#  3. the cosine's default end is the budget of the first start: a run of
#     budget 40 checkpointed at 20 and resumed with budget 60 logs the lr
#     of the uninterrupted 40-step run through step 40, then min_lr; given
#     optim.decay_steps at the resume, the cosine follows it;
#  4. sgp with AdamW keeps the push-sum weights summing to the rank count;
#  5. data.name = tokens (llm.c token files) trains on 2 ranks; a file with
#     a wrong magic stops every rank with exit 1 and the file named;
#  6. dtrain-post sample prints the prompt plus N bytes; a prompt byte not
#     in the vocabulary is an error;
#  and, when Debian's fortunes corpus is installed, a short run on it.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
T0=$(date +%s)
lap() { # the wall time of a case, in the TAP stream
    local now
    now=$(date +%s)
    echo "# $1: $((now - T0)) s"
    T0=$now
}
ok_run() { [ "$RC" -eq 0 ] || { tail -5 "$WORK/out.txt" | sed 's/^/#   /'; return 1; }; }

# ~8 KB of sentences over a 30-word vocabulary: enough structure to learn in
# a few dozen steps
C=$WORK/corpus.txt
awk 'BEGIN { srand(7)
    n = split("the a cat dog sat on mat and ran to house big small red blue quick lazy " \
              "fox jumps over under tree bird sings in morning night was very old", w, " ")
    for (l = 0; l < 240; l++) {
        k = 5 + int(rand() * 6); s = ""
        for (i = 0; i < k; i++) s = s (i ? " " : "") w[1 + int(rand() * n)]
        print toupper(substr(s, 1, 1)) substr(s, 2) "."
    } }' >"$C"
# V: the distinct bytes; H1: the byte-unigram entropy, the loss of a model
# that learned the byte frequencies and no context
od -An -v -tu1 "$C" | tr -s ' ' '\n' | grep . >"$WORK/bytes.txt"
V=$(sort -u "$WORK/bytes.txt" | wc -l)
H1=$(awk '{ n[$1]++; t++ } END { for (b in n) h -= n[b] / t * log(n[b] / t); printf "%.4f", h }' "$WORK/bytes.txt")
LNV=$(awk -v v="$V" 'BEGIN { printf "%.4f", log(v) }')
echo "# corpus $(wc -c <"$C") bytes, $V distinct: ln(V) = $LNV, unigram entropy H1 = $H1"

D=$WORK/deck.ini
cat >"$D" <<DECK
[run]
output_dir = $WORK/unused
seed = 3
epochs = 100
max_steps = 60
log_every = 10
[algorithm]
mode = local
[model]
name = gpt
n_layer = 1
n_head = 2
n_embd = 32
block_size = 16
[data]
name = text
path = $C
[optim]
name = adamw
batch_size = 4
lr = 3e-3
DECK

# max_loss RUN: the largest over the ranks of each rank's last validation
# loss (eval.csv's loss column; rows are in step order)
max_loss() {
    "$DTRAIN_POST" csv "$1/run.h5" -o "$1/csv" >/dev/null 2>&1 || { echo nan; return; }
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { last[$c["rank"]] = $c["loss"] + 0 }
        END { m = "nan"; for (r in last) if (m == "nan" || last[r] > m) m = last[r]; print m }' \
        "$1/csv/eval.csv"
}
below() { awk -v l="$1" -v b="$2" 'BEGIN { exit !(l != "nan" && l + 0 < b + 0) }'; }

# ---- 1. every family trains gpt ----------------------------------------
# With AdamW the final loss is below H1 - 0.1: the model learned context,
# not only byte frequencies. SGD (pdmm-isvr) is slower: below ln(V) - 0.5.
BAR_ADAMW=$(awk -v h="$H1" 'BEGIN { printf "%.4f", h - 0.1 }')
BAR_SGD=$(awk -v v="$LNV" 'BEGIN { printf "%.4f", v - 0.5 }')
family() { # NAME NP BAR BAR_TEXT ARGS...
    local name=$1 np=$2 bar=$3 what=$4
    shift 4
    local l t=$(date +%s)
    run "$np" 120 "$D" "$@" run.output_dir="$WORK/f-$name"
    t=$(($(date +%s) - t))
    l=$(max_loss "$WORK/f-$name")
    if ok_run && below "$l" "$bar"; then
        pass "gpt under $name on $np rank(s): final validation loss (worst rank) $l < $what = $bar ($t s)"
    else
        fail "gpt under $name on $np rank(s) (rc $RC, final validation loss $l, bar $what = $bar)"
    fi
}
A="$BAR_ADAMW H1-0.1"
family local 1 $A algorithm.mode=local
# the record's vocabulary is the corpus's distinct bytes, sorted
hex=$(od -An -v -tx1 "$C" | tr -s ' ' '\n' | grep . | sort -u | tr -d '\n')
if [ "$("$TEST_BIN/ckcmp" attr "$WORK/f-local/run.h5" vocab_hex 2>/dev/null)" = "$hex" ]; then
    pass "the record's vocab_hex is the corpus's $V distinct bytes, sorted"
else
    fail "vocab_hex: '$("$TEST_BIN/ckcmp" attr "$WORK/f-local/run.h5" vocab_hex 2>&1)', expected '$hex'"
fi
family allreduce 2 $A algorithm.mode=allreduce
# a path 0-1-2-3: the inner ranks have two peers, the ends one, so the
# push-sum weights leave 1 (on a regular graph they would stay 1)
printf '0 1\n1 2\n2 3\n' >"$WORK/path.txt"
P="algorithm.topology=file algorithm.graph_file=$WORK/path.txt"
family sgp 4 $A algorithm.mode=sgp $P run.log_every=5
family adpsgd 4 $A algorithm.mode=adpsgd
family ps-async 3 $A algorithm.mode=ps-async ps.servers=1
family lsgd 4 $A algorithm.mode=lsgd lsgd.group_size=2 lsgd.tau_local=5 lsgd.tau_global=10
family diloco 2 $A algorithm.mode=diloco diloco.inner_steps=5
family pdmm-isvr 4 "$BAR_SGD" "ln(V)-0.5" algorithm.mode=pdmm-isvr \
    optim.name=sgd optim.lr=0.7 optim.batch_size=16 optim.momentum=0 ecl.sync=true run.eval_every=30
run 4 60 "$D" algorithm.mode=pdmm-isvr
expect_fail "pdmm-isvr refuses optim.name = adamw" \
    "optim.name = adamw with algorithm.mode = pdmm-isvr: the edge-consensus modes take their own ISVR step"
lap "case 1 (every family)"

# ---- 4. push-sum weights with AdamW (the sgp run above) -----------------
# at every logged step the four ranks' weights sum to 4, and some weight is
# not 1 (the weights did move: exponential graph, one peer per step)
sums=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { w[$c["step"]] += $c["weight"]; n[$c["step"]]++; if ($c["weight"] != 1) moved++ }
    END { for (s in w) { k++; if (n[s] == 4 && w[s] > 4 - 1e-5 && w[s] < 4 + 1e-5) good++ }
          print k + 0, good + 0, moved + 0 }' "$WORK/f-sgp/csv/train.csv" 2>/dev/null)
set -- $sums
if [ $# -eq 3 ] && [ "$1" -ge 10 ] && [ "$1" -eq "$2" ] && [ "$3" -gt 0 ]; then
    pass "sgp with AdamW: push-sum weights sum to 4 at all $1 logged steps ($3 rows with a weight other than 1)"
else
    fail "sgp push-sum weights (logged steps, steps summing to 4, rows not 1): $sums"
fi
lap "case 4 (push-sum weights)"

# ---- 2. stop and resume bit for bit with AdamW --------------------------
# decay_steps is given: the 12-step first start must not end the cosine at 12
S="optim.warmup_steps=4 optim.schedule=cosine optim.min_lr=3e-4 optim.decay_steps=24 optim.clip_norm=0.5 optim.weight_decay=0.1"
printf '0 1\n1 2\n' >"$WORK/path3.txt" # 0-1-2: the weights move
for c in "local 1" "allreduce 2" "sgp 3"; do
    set -- $c
    mode=$1 np=$2 sets="params adam_m adam_v"
    extra=
    [ "$mode" = sgp ] && sets="$sets push_sum_weight" \
        extra="algorithm.topology=file algorithm.graph_file=$WORK/path3.txt"
    run "$np" 120 "$D" $S $extra algorithm.mode=$mode run.output_dir="$WORK/full-$mode" run.max_steps=24
    rcA=$RC
    run "$np" 120 "$D" $S $extra algorithm.mode=$mode run.output_dir="$WORK/part-$mode" run.max_steps=12
    rcB=$RC
    run "$np" 120 "$D" $S $extra algorithm.mode=$mode run.output_dir="$WORK/part-$mode" run.max_steps=24 run.resume=true
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ "$RC" -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/full-$mode")" "$(last "$WORK/part-$mode")" $sets \
           >"$WORK/cmp.txt" 2>&1; then
        pass "$mode on $np rank(s), AdamW + warm-up + cosine + clip: 12 steps + resume to 24 == 24 steps bit for bit ($sets)"
    else
        fail "$mode AdamW resume (rc $rcA/$rcB/$RC): $(cat "$WORK/cmp.txt" 2>/dev/null)"
    fi
done
# the check has teeth: a run with another clip bound differs
run 1 120 "$D" ${S/clip_norm=0.5/clip_norm=0.05} algorithm.mode=local run.output_dir="$WORK/clip" run.max_steps=24
if ok_run && ! "$TEST_BIN/ckcmp" same "$(last "$WORK/clip")" "$(last "$WORK/full-local")" params >/dev/null 2>&1; then
    pass "optim.clip_norm 0.05 instead of 0.5 changes the parameters (the clip acts)"
else
    fail "optim.clip_norm 0.05 left the parameters unchanged"
fi
lap "case 2 (resume bit for bit)"

# ---- 3. the cosine's default end is fixed at the first start ------------
L="optim.warmup_steps=5 optim.schedule=cosine optim.min_lr=3e-4 run.log_every=1"
lrs() { # RUN: "step lr" lines of rank 0 from its train.csv
    "$DTRAIN_POST" csv "$1/run.h5" -o "$1/csv" >/dev/null 2>&1
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["rank"] == 0 { print $c["step"], $c["lr"] }' "$1/csv/train.csv" 2>/dev/null
}
# stop_at_20 FROM TO: TO is FROM as it stood at its step-20 checkpoint
stop_at_20() {
    cp -r "$1" "$2"
    rm -f "$2"/checkpoints/ckpt-0000000040.h5
    echo ckpt-0000000020.h5 >"$2/checkpoints/latest"
}
run 1 120 "$D" $L run.output_dir="$WORK/c40" run.max_steps=40 run.checkpoint_every=20
rcA=$RC
lrs "$WORK/c40" >"$WORK/c40.lr"
stop_at_20 "$WORK/c40" "$WORK/c60"
run 1 120 "$D" $L run.output_dir="$WORK/c60" run.max_steps=60 run.resume=true
rcB=$RC
lrs "$WORK/c60" >"$WORK/c60.lr"
# 40 rows equal to the uninterrupted run's, then 20 at min_lr; and the
# uninterrupted run follows the formula (step s uses t = s - 1; warm-up
# lr (t + 1) / (w + 1), then the cosine from lr to min_lr over t = w..40)
formula() { # DECAY < "step lr" lines: the count of rows off the formula by > 1e-6 relative
    awk -v d="$1" 'BEGIN { pi = atan2(0, -1) }
        { t = $1 - 1; w = 5; lr = 3e-3; m = 3e-4
          if (t < w) e = lr * (t + 1) / (w + 1)
          else if (t <= d) e = m + (lr - m) * (1 + cos(pi * (t - w) / (d - w))) / 2
          else e = m
          if (($2 - e) > 1e-6 * e || (e - $2) > 1e-6 * e) bad++ }
        END { print bad + 0 }'
}
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ "$(wc -l <"$WORK/c40.lr")" -eq 40 ] &&
   [ "$(formula 40 <"$WORK/c40.lr")" -eq 0 ] &&
   [ "$(head -40 "$WORK/c60.lr")" = "$(cat "$WORK/c40.lr")" ] &&
   [ "$(tail -n +41 "$WORK/c60.lr" | wc -l)" -eq 20 ] &&
   [ "$(tail -n +41 "$WORK/c60.lr" | formula 40)" -eq 0 ]; then
    pass "cosine end fixed at the first start: budget 40 stopped at 20, resumed with budget 60, logs the 40-step run's lr through step 40, then min_lr"
else
    fail "cosine default end across a resume (rc $rcA/$rcB; rows $(wc -l <"$WORK/c40.lr")/$(wc -l <"$WORK/c60.lr"), off the formula: $(formula 40 <"$WORK/c40.lr")/$(formula 40 <"$WORK/c60.lr"))"
fi
# the key given at the resume moves the end: steps 21..60 follow a cosine to 60
stop_at_20 "$WORK/c40" "$WORK/k60"
run 1 120 "$D" $L run.output_dir="$WORK/k60" run.max_steps=60 run.resume=true optim.decay_steps=60
rcB=$RC
lrs "$WORK/k60" >"$WORK/k60.lr"
if [ $rcB -eq 0 ] && [ "$(wc -l <"$WORK/k60.lr")" -eq 60 ] &&
   [ "$(head -20 "$WORK/k60.lr")" = "$(head -20 "$WORK/c40.lr")" ] &&
   [ "$(tail -n +21 "$WORK/k60.lr" | formula 60)" -eq 0 ] &&
   [ "$(tail -n +21 "$WORK/k60.lr" | formula 40)" -gt 30 ]; then
    pass "optim.decay_steps = 60 given at the resume: steps 21..60 follow the cosine to 60"
else
    fail "optim.decay_steps at the resume (rc $rcB, rows $(wc -l <"$WORK/k60.lr"), off the 60 formula: $(tail -n +21 "$WORK/k60.lr" | formula 60))"
fi
lap "case 3 (cosine end)"

# ---- 5. llm.c token files ------------------------------------------------
# tokens_file PATH MAGIC COUNT: an llm.c header (256 int32: magic, version 1,
# count) then COUNT uint16 tokens (a repeating pattern over 64 ids: learnable)
tokens_file() {
    "$(command -v /usr/bin/python3 || command -v python3)" - "$@" <<'PY'
import struct, sys
path, magic, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hdr = [0] * 256
hdr[0], hdr[1], hdr[2] = magic, 1, count
toks = [(7 * i + (i // 13)) % 64 for i in range(count)]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *hdr))
    f.write(struct.pack("<%dH" % count, *toks))
PY
}
tokens_file "$WORK/train.bin" 20240520 6000
tokens_file "$WORK/val.bin" 20240520 800
TK="data.name=tokens data.val_path=$WORK/val.bin model.vocab_size=64"
run 2 120 "$D" $TK data.path="$WORK/train.bin" algorithm.mode=allreduce run.max_steps=20 run.output_dir="$WORK/tok"
l=$(max_loss "$WORK/tok")
if ok_run && grep -q "tok/s" "$WORK/out.txt" &&
   awk -v l="$l" 'BEGIN { exit !(l != "nan" && l < log(64) - 0.3) }'; then
    pass "data.name = tokens on 2 ranks, 20 steps: final validation loss $l < ln(64) - 0.3"
else
    fail "data.name = tokens (rc $RC, final validation loss $l)"
fi
# bad token files: every rank stops with exit 1 (no hang); the lowest
# failing rank says why, once, naming the file
bad_tokens() { # NAME FILE PATTERN
    run 2 60 "$D" $TK data.path="$2" algorithm.mode=allreduce run.output_dir="$WORK/tokbad"
    if [ "$RC" -eq 1 ] && grep -q "error on rank 0: .*$2" "$WORK/out.txt" &&
       grep -Eq -- "$3" "$WORK/out.txt"; then
        pass "$1: exit 1 on every rank ($(grep -m1 "$2" "$WORK/out.txt" | sed 's/.*error on/error on/' | cut -c1-170))"
    else
        fail "$1 (rc $RC)"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
    fi
}
tokens_file "$WORK/bad.bin" 20240521 6000
bad_tokens "a token file with a wrong magic" "$WORK/bad.bin" "bad magic 20240521.*expected 20240520"
head -c 6000 "$WORK/train.bin" >"$WORK/short.bin"
bad_tokens "a token file shorter than its header's count" "$WORK/short.bin" "2488 tokens, but the header .word 2. says 6000.*truncated"
lap "case 5 (token files)"

# ---- 6. dtrain-post sample ----------------------------------------------
set +e
"$DTRAIN_POST" sample "$WORK/f-allreduce" --prompt "The dog" --tokens 50 --seed 2 >"$WORK/sample.txt" 2>"$WORK/sample.err"
rc=$?
set -e
# the prompt, 50 generated bytes and a newline
if [ $rc -eq 0 ] && [ "$(wc -c <"$WORK/sample.txt")" -eq $((7 + 50 + 1)) ] &&
   [ "$(head -c 7 "$WORK/sample.txt")" = "The dog" ]; then
    pass "dtrain-post sample: the prompt plus 50 bytes ($(head -c 57 "$WORK/sample.txt" | tr '\n' '|'))"
else
    fail "dtrain-post sample (rc $rc, $(wc -c <"$WORK/sample.txt") bytes): $(cat "$WORK/sample.err")"
fi
set +e
"$DTRAIN_POST" sample "$WORK/f-allreduce" --prompt "The Zebra" --tokens 5 >"$WORK/sample.txt" 2>&1
rc=$?
set -e
if [ $rc -ne 0 ] && grep -q "0x5a.*not in the model's vocabulary" "$WORK/sample.txt"; then
    pass "dtrain-post sample: a prompt byte outside the vocabulary is refused (exit $rc: $(head -1 "$WORK/sample.txt" | cut -c1-120))"
else
    fail "dtrain-post sample with 'Z' in the prompt (rc $rc): $(head -2 "$WORK/sample.txt")"
fi
lap "case 6 (sample)"

# ---- Debian's fortunes corpus, when installed ----------------------------
F=/usr/share/games/fortunes
if [ -d "$F" ] && [ -n "$(ls -A "$F" 2>/dev/null)" ]; then
    run 2 120 "$D" algorithm.mode=allreduce data.path="$F" data.test_limit=64 run.max_steps=40 \
        run.output_dir="$WORK/fortunes"
    l=$(max_loss "$WORK/fortunes")
    fv=$(( $("$TEST_BIN/ckcmp" attr "$WORK/fortunes/run.h5" vocab_hex 2>/dev/null | wc -c) / 2 ))
    if ok_run && [ "$fv" -gt 60 ] && awk -v l="$l" -v v="$fv" 'BEGIN { exit !(l != "nan" && l < log(v) - 0.8) }'; then
        pass "fortunes corpus on 2 ranks, 40 steps: vocabulary $fv bytes, validation loss $l < ln($fv) - 0.8"
    else
        fail "fortunes corpus (rc $RC, vocabulary $fv, validation loss $l)"
    fi
    lap "fortunes"
else
    echo "# $F not installed (apt-get install fortunes): the fortunes case is skipped"
fi
finish
