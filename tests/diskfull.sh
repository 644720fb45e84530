#!/bin/bash
# A checkpoint write on a full filesystem (a small tmpfs): every rank prints
# one line with the file, the operating system's reason and the intact
# checkpoint; exit 1; no .tmp left; `latest` unchanged; no HDF5 error stack;
# the resume works once there is space again.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
M=$WORK/mnt
mkdir -p "$M"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=8m dtrain-test "$M" 2>/dev/null; then
    echo "# SKIP: cannot mount a tmpfs here (needs root and mount rights)"; exit 77
fi
trap 'umount "$M" 2>/dev/null; rm -rf "$WORK"' EXIT
D=$WORK/deck.ini
small_deck "$M/r" >"$D"
# about 1.2 MB per checkpoint: 2 ranks x (params + momentum) x 75k floats
o="model.hidden=2000 run.log_every=1000 run.checkpoint_keep=1"
run 2 120 "$D" $o run.max_steps=5 run.output_dir="$M/r"
[ "$RC" -eq 0 ] || { fail "first run (rc $RC)"; tail -3 "$WORK/out.txt"; finish; }
good=$(cat "$M/r/checkpoints/latest")
# leave 100 KiB free
free=$(df -B1 --output=avail "$M" | tail -1)
fallocate -l $((free - 102400)) "$M/filler" 2>/dev/null ||
    dd if=/dev/zero of="$M/filler" bs=4096 count=$(((free - 102400) / 4096)) status=none 2>/dev/null || true
for debug in 0; do
    DTRAIN_DEBUG=$debug run 2 120 "$D" $o run.max_steps=10 run.resume=true run.output_dir="$M/r"
    nline=$(grep -c "cannot write checkpoint .*ckpt-0000000010.h5.tmp: .*No space left on device.*intact: .*$good" "$WORK/out.txt" || true)
    stack=$(grep -c "HDF5-DIAG" "$WORK/out.txt" || true)
    tmps=$(ls "$M/r/checkpoints" | grep -c '\.tmp$' || true)
    if [ "$RC" -eq 1 ] && [ "$nline" -eq 2 ] && [ "$tmps" -eq 0 ] &&
       [ "$(cat "$M/r/checkpoints/latest")" = "$good" ] &&
       [ "$stack" -eq 0 ]; then
        pass "full disk, DTRAIN_DEBUG=$debug: exit 1, one line per rank ($(grep -m1 "cannot write" "$WORK/out.txt" | sed "s#$M/##g" | cut -c1-170)), no .tmp, latest still $good, HDF5 stack lines: $stack"
    else
        fail "full disk DTRAIN_DEBUG=$debug (rc $RC, lines $nline, stack $stack, tmp $tmps)"
        grep -v "^ *#\|^ *[0-9]* *vm" "$WORK/out.txt" | tail -6 | cut -c1-200 | sed 's/^/#   /'
    fi
done
rm -f "$M/filler"
run 2 120 "$D" $o run.max_steps=10 run.resume=true run.output_dir="$M/r"
if [ "$RC" -eq 0 ] && grep -q "resumed from .*$good" "$WORK/out.txt" &&
   [ "$(cat "$M/r/checkpoints/latest")" = ckpt-0000000010.h5 ]; then
    pass "with space again the resume from $good finishes and writes step 10"
else
    fail "resume after freeing space (rc $RC)"; tail -3 "$WORK/out.txt" | sed 's/^/#   /'
fi
# a killed job's partial checkpoint is removed at start-up
touch "$M/r/checkpoints/ckpt-0000000012.h5.tmp"
run 2 120 "$D" $o run.max_steps=10 run.resume=true run.output_dir="$M/r"
if [ "$RC" -eq 0 ] && [ ! -e "$M/r/checkpoints/ckpt-0000000012.h5.tmp" ] &&
   grep -q "removed .*ckpt-0000000012.h5.tmp" "$WORK/out.txt"; then
    pass "start-up removes a stale ckpt-*.h5.tmp and says so"
else
    fail "stale .tmp at start-up (rc $RC)"
fi
finish
