#!/bin/bash
# run.resume = true over damaged checkpoints: with the latest checkpoint
# truncated, with one byte flipped, replaced by a foreign one (1 rank instead
# of 2), or with `latest` naming a missing file, the run skips it, says why
# (stderr and run.h5's resume_skipped) and finishes bit for bit equal to a
# run resumed from the older intact checkpoint. With none intact it stops.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/x" >"$D"
o="run.checkpoint_every=5 run.checkpoint_keep=3"
C10=ckpt-0000000010.h5 C15=ckpt-0000000015.h5

# the source run: checkpoints at steps 5, 10 and 15 (final)
run 2 120 "$D" $o run.max_steps=15 run.output_dir="$WORK/src"
[ "$RC" -eq 0 ] || { fail "source run (rc $RC)"; tail -3 "$WORK/out.txt"; finish; }
# the reference: resumed from step 10 to step 20
cp -a "$WORK/src" "$WORK/ref"
rm "$WORK/ref/checkpoints/$C15"
echo "$C10" >"$WORK/ref/checkpoints/latest"
run 2 120 "$D" $o run.max_steps=20 run.resume=true run.output_dir="$WORK/ref"
if [ "$RC" -ne 0 ] || ! grep -q "resumed from .*$C10" "$WORK/out.txt"; then
    fail "reference resume from step 10 (rc $RC)"; finish
fi
# a foreign checkpoint: the same deck on 1 rank (local), its step-15 file
run 1 120 "$D" $o run.max_steps=15 algorithm.mode=local run.output_dir="$WORK/one"

damage() { # NAME: prepare $WORK/NAME from the source run
    cp -a "$WORK/src" "$WORK/$1"
    local f="$WORK/$1/checkpoints/$C15"
    case $1 in
    truncated) truncate -s $(($(stat -c %s "$f") / 2)) "$f" ;;
    flipped) # one byte in the middle of the params data (Fletcher32 catches it)
        local off=$(($(stat -c %s "$f") / 2))
        local b=$(od -An -tu1 -j $off -N1 "$f" | tr -d ' ')
        printf "$(printf '\\%03o' $(((b + 1) % 256)))" |
            dd of="$f" bs=1 seek=$off conv=notrunc status=none ;;
    missing) rm "$f" ;;
    foreign) cp "$WORK/one/checkpoints/$C15" "$f" ;;
    esac
}
for kind in truncated flipped missing foreign; do
    damage $kind
    run 2 120 "$D" $o run.max_steps=20 run.resume=true run.output_dir="$WORK/$kind"
    note=$("$TEST_BIN/ckcmp" attr "$WORK/$kind/run.h5" resume_skipped 2>/dev/null | grep -c "$C15" || true)
    if [ "$RC" -eq 0 ] && grep -q "resumed from .*$C10" "$WORK/out.txt" &&
       grep -q "resume: .*$C15" "$WORK/out.txt" && [ "$note" -ge 1 ] &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/$kind")" "$(last "$WORK/ref")" >/dev/null; then
        pass "$kind latest checkpoint: skipped ($(grep -m1 "resume: " "$WORK/out.txt" | sed 's/.*: //' | cut -c1-90)), recorded in run.h5, step 20 equals the resume from step 10 bit for bit"
    else
        fail "$kind latest checkpoint (rc $RC, note $note)"; tail -4 "$WORK/out.txt" | sed 's/^/#   /'
    fi
done

# nothing intact: every checkpoint truncated
cp -a "$WORK/src" "$WORK/none"
for f in "$WORK"/none/checkpoints/ckpt-*.h5; do truncate -s 1000 "$f"; done
run 2 120 "$D" $o run.max_steps=20 run.resume=true run.output_dir="$WORK/none"
expect_fail "no intact checkpoint" "no intact checkpoint of this run in .*checkpoints"
finish
