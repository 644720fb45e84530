#!/bin/bash
# The layers of src/: every #include "..." line of a source or header may
# name its own layer or one below it, never one above:
#
#   dtrain.c, post/                                        5  the programs
#   run/       the loop, checkpoints, run record, roles    4
#   algo/      one file per algorithm                      3
#   engine/    the rank's network, vectors, optimizer      2
#   models/ nn/ optim/ data/ backend/ comm/ topology/ io/ sim/  1
#   core/      errors, RNG, parsing, provenance            0
#
# The folders of layer 1 include one another (a layer's kernels and its
# backends). Fails naming each include that goes up.
set -u
src=${srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/src
layer() {
    case $1 in
    dtrain.c | post) echo 5 ;;
    run) echo 4 ;;
    algo) echo 3 ;;
    engine) echo 2 ;;
    models | nn | optim | data | backend | comm | topology | io | sim) echo 1 ;;
    core) echo 0 ;;
    *) echo "" ;;
    esac
}
bad=0 n=0
while IFS=: read -r file line text; do
    rel=${file#"$src"/}
    from=${rel%%/*}
    target=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$text")
    case $target in
    config.h) continue ;;            # autoconf's, built at the top
    */*) to=${target%%/*} ;;
    *) to=$from ;;                   # beside the file
    esac
    lf=$(layer "$from") lt=$(layer "$to")
    n=$((n + 1))
    if [ -z "$lf" ] || [ -z "$lt" ]; then
        echo "not ok - src/$rel:$line: #include \"$target\": folder not in a layer (tests/layers.sh)"
        bad=$((bad + 1))
    elif [ "$lt" -gt "$lf" ]; then
        echo "not ok - src/$rel:$line: #include \"$target\" goes up from $from (layer $lf) to $to (layer $lt)"
        bad=$((bad + 1))
    fi
done < <(grep -rn --include='*.c' --include='*.h' --include='*.cu' --include='*.in' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$src")
if [ $bad -eq 0 ]; then
    echo "ok - $n #include lines of src/ point to their own layer or below"
    exit 0
fi
echo "# $bad of $n #include lines go up a layer"
exit 1
