# Shared helpers for the MPI driver tests (sourced). The automake harness
# exports MPIEXEC, DTRAIN, DTRAIN_POST, TEST_BIN and srcdir.
set -u
: "${MPIEXEC:=mpiexec}"
: "${DTRAIN:=$(pwd)/src/dtrain}"
: "${DTRAIN_POST:=$(pwd)/src/dtrain-post}"
: "${TEST_BIN:=$(pwd)/tests}"
export OPENBLAS_NUM_THREADS=1
# MPICH over UCX on one host: shared memory and loopback TCP only.
export UCX_TLS=${UCX_TLS:-self,sm,tcp}
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export UCX_WARN_UNUSED_ENV_VARS=n

WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILS=0
PASSES=0

pass() { PASSES=$((PASSES + 1)); echo "ok - $*"; }
fail() { FAILS=$((FAILS + 1)); echo "not ok - $*"; }
finish() {
    echo "# $PASSES passed, $FAILS failed"
    [ "$FAILS" -eq 0 ]
}

# run NPROCS TIMEOUT ARGS...: dtrain under mpiexec with a hard time limit;
# output in $WORK/out.txt, exit status in $RC.
# signal_ranks SIG PATTERN: send SIG to this test's dtrain ranks only (those
# whose command line contains PATTERN; other tests may run dtrain meanwhile)
signal_ranks() {
    local p
    for p in $(pgrep -f -- "$2"); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = dtrain ] && kill -"$1" "$p"
    done
    return 0
}
run() {
    local np=$1 limit=$2
    shift 2
    set +e
    timeout -k 5 "$limit" "$MPIEXEC" -n "$np" "$DTRAIN" "$@" >"$WORK/out.txt" 2>&1
    RC=$?
    set -e
}

# A small, fast deck: synthetic 10-class data, given model, output dir $1.
small_deck() {
    cat <<DECK
[run]
output_dir = $1
seed = 5
epochs = 2
log_every = 5
[algorithm]
mode = allreduce
[model]
name = mlp
hidden = 32
activation = relu
[data]
name = synthetic
synthetic_train = 512
synthetic_test = 128
synthetic_height = 6
synthetic_width = 6
[optim]
lr = 0.05
batch_size = 16
momentum = 0.9
weight_decay = 0.0001
DECK
}

# word_corpus SEED LINES: a text corpus on stdout, LINES sentences of six words
# drawn from sixteen (awk's generator seeded with SEED): a GPT learns it in steps
word_corpus() {
    awk -v seed="$1" -v lines="$2" 'BEGIN { srand(seed)
        n = split("the a cat dog sat on mat and ran to house big small red fox tree", w, " ")
        for (l = 0; l < lines; l++) {
            s = ""
            for (i = 0; i < 6; i++) s = s (i ? " " : "") w[1 + int(rand() * n)]
            print s "."
        } }'
}

# last DIR: the latest checkpoint of the run in DIR
last() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }

# resumed_same FULL PART [SETS...]: the last three runs (statuses rcA, rcB, rcC:
# the whole run into FULL, the first part into PART, its resume) ended 0, the
# last one resumed, and the latest checkpoints of FULL and PART hold SETS (all
# arrays if none) bit for bit
resumed_same() {
    local full=$1 part=$2
    shift 2
    [ "$rcA" -eq 0 ] && [ "$rcB" -eq 0 ] && [ "$rcC" -eq 0 ] &&
        grep -q "resumed from" "$WORK/out.txt" &&
        "$TEST_BIN/ckcmp" same "$(last "$full")" "$(last "$part")" "$@" >/dev/null
}

# expect_fail NAME PATTERN: the last run failed (non-zero, not a timeout) and
# its output matches PATTERN (grep -E).
expect_fail() {
    if [ "$RC" -eq 0 ]; then
        fail "$1: exited 0"; sed 's/^/#   /' "$WORK/out.txt" | tail -5
    elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
        fail "$1: hung (killed after the time limit)"
    elif ! grep -Eq -- "$2" "$WORK/out.txt"; then
        fail "$1: message does not match /$2/"; sed 's/^/#   /' "$WORK/out.txt" | tail -5
    else
        pass "$1 (exit $RC: $(grep -E -m1 -- "$2" "$WORK/out.txt" | cut -c1-150))"
    fi
}
