#!/bin/bash
# Long test: mnist_cnn on Fashion-MNIST, one rank, one epoch, batch 32,
# lr 0.02 (x0.1 for the last quarter epoch), momentum 0.9 reaches >= 88%
# test accuracy (seeds 1, 2, 3 gave 88.55%, 88.62%, 88.90% here; without the
# decay 86.9-88.5%, and PyTorch 1.13 87.9% for batch 64).
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
FM=/usr/share/datasets/fashion-mnist
if [ ! -e "$FM/train-images-idx3-ubyte.gz" ]; then
    echo "# SKIP: $FM missing (apt-get install dataset-fashion-mnist)"; exit 77
fi
cat >"$WORK/deck.ini" <<DECK
[run]
output_dir = $WORK/fm
seed = 1
epochs = 1
log_every = 200
[algorithm]
mode = local
[model]
name = mnist_cnn
[data]
name = fashion-mnist
path = $FM
[optim]
lr = 0.02
batch_size = 32
momentum = 0.9
decay_epochs = 0.75
DECK
run 1 900 "$WORK/deck.ini"
cat "$WORK/out.txt"
"$DTRAIN_POST" csv "$WORK/fm/run.h5" -o "$WORK/csv" >/dev/null
acc=$(awk -F, 'NR>1 {a=$6} END {print a}' "$WORK/csv/eval.csv")
if [ "$RC" -eq 0 ] && awk -v a="$acc" 'BEGIN {exit !(a >= 0.88)}'; then
    pass "mnist_cnn, 1 epoch of Fashion-MNIST: test accuracy $acc >= 0.88"
else
    fail "mnist_cnn, 1 epoch of Fashion-MNIST: test accuracy $acc (rc $RC)"
fi
finish
