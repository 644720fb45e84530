#!/bin/bash
# Checkpoints of one short run per algorithm.mode, for showing that a change
# to the runtime leaves training bit for bit as it was.
#
#   bench/ckpt_compare.sh run OUT [DTRAIN]   one run per mode into OUT/<mode>
#                                            (checkpoints every 4 steps, 12 steps),
#                                            and OUT/<mode>-resumed: 6 steps, then
#                                            resumed to 12
#   bench/ckpt_compare.sh compare A B        every checkpoint file of A/<mode> equal
#                                            to B/<mode>'s (ckcmp all: every dataset,
#                                            the state blob without its wall clock),
#                                            and B/<mode>-resumed's last one equal to
#                                            A/<mode>'s last
#
# Run it from a built tree (tests/ckcmp is built by `make check` or
# `make tests/ckcmp`). MODES (environment) narrows the list.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
CKCMP=${CKCMP:-$here/tests/ckcmp}
: "${MPIEXEC:=mpiexec}"
export OPENBLAS_NUM_THREADS=1
export UCX_TLS=${UCX_TLS:-self,sm,tcp} UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
export UCX_WARN_UNUSED_ENV_VARS=n
# mode:ranks:extra keys. Deterministic settings: ps-async with one worker
# (its server applies the pushes in the one order there is), the
# edge-consensus modes with lockstep swaps (ecl.sync); the threaded swaps
# and the asynchronous modes below differ from run to run of one binary.
ALL="local:1: allreduce:2: dpsgd:4: sgp:4: osgp:4: adpsgd:4: ps-sync:4:ps.servers=2
ps-async:2:ps.servers=1 easgd:3: lsgd:4:lsgd.group_size=2
pdmm-isvr:4:optim.momentum=0,ecl.sync=true admm-isvr:4:optim.momentum=0,ecl.sync=true
dsgd-ecl:4:ecl.sync=true"
# run but not compared: their steps interleave with the exchanges as the
# threads and the scheduler have it (two runs of one binary differ)
NONDETERMINISTIC="adpsgd lsgd"
# the resume blob: step, images, bytes_sent, wall (bytes 24..31, the clock), loader state
IGNORE="state:24:8"

deck() {
    cat <<DECK
[run]
output_dir = $1
seed = 7
epochs = 4
log_every = 2
checkpoint_every = 4
checkpoint_keep = 100
max_steps = 12
[model]
name = mnist_cnn
[data]
name = synthetic
synthetic_train = 256
synthetic_test = 64
synthetic_height = 8
synthetic_width = 8
[optim]
lr = 0.05
batch_size = 16
momentum = 0.9
weight_decay = 0.0001
decay_epochs = 2
decay_factor = 0.5
DECK
}

entries() {
    for e in $ALL; do
        m=${e%%:*}
        [ -z "${MODES:-}" ] || [[ " $MODES " == *" $m "* ]] && echo "$e"
    done
}

cmd_run() {
    local out=$1 dtrain=${2:-$here/src/dtrain}
    mkdir -p "$out"
    deck "$out/unused" >"$out/deck.ini"
    for e in $(entries); do
        IFS=: read -r m np extra <<<"$e"
        extra=${extra//,/ }
        for leg in full part resume; do
            local dir=$out/$m steps=12 more=""
            [ $leg != full ] && dir=$out/$m-resumed
            [ $leg = part ] && steps=6
            [ $leg = resume ] && more=run.resume=true
            timeout -k 5 300 "$MPIEXEC" -n "$np" "$dtrain" "$out/deck.ini" algorithm.mode="$m" \
                run.output_dir="$dir" run.max_steps=$steps $extra $more >"$dir.$leg.log" 2>&1
            rc=$?
            echo "$m $leg: exit $rc"
        done
    done
}

# the checkpoint files of a run directory, oldest first
files() { ls "$1"/checkpoints/ 2>/dev/null | grep '\.h5$' | sort; }

cmd_compare() {
    local a=$1 b=$2 bad=0 n=0
    for e in $(entries); do
        m=${e%%:*}
        if [[ " $NONDETERMINISTIC " == *" $m "* ]]; then
            echo "skip $m: not deterministic from run to run"; continue
        fi
        fa=$(files "$a/$m") fb=$(files "$b/$m")
        if [ -z "$fa" ] || [ "$fa" != "$fb" ]; then
            echo "DIFF $m: checkpoint files differ: [$(echo $fa)] vs [$(echo $fb)]"; bad=$((bad + 1)); continue
        fi
        for f in $fa; do
            n=$((n + 1))
            if "$CKCMP" all "$a/$m/checkpoints/$f" "$b/$m/checkpoints/$f" $IGNORE >/dev/null 2>"$b/ckcmp.err"; then
                echo "same $m/$f"
            else
                echo "DIFF $m/$f: $(cat "$b/ckcmp.err")"; bad=$((bad + 1))
            fi
        done
        last=$(echo "$fa" | tail -1) lr=$(files "$b/$m-resumed" | tail -1)
        if [ -n "$lr" ] && "$CKCMP" all "$a/$m/checkpoints/$last" "$b/$m-resumed/checkpoints/$lr" \
               $IGNORE >/dev/null 2>"$b/ckcmp.err"; then
            echo "same $m-resumed/$lr == $m/$last"; n=$((n + 1))
        else
            echo "DIFF $m-resumed/$lr vs $m/$last: $(cat "$b/ckcmp.err")"; bad=$((bad + 1))
        fi
    done
    echo "# $n checkpoint files equal, $bad differences"
    [ $bad -eq 0 ]
}

case "${1:-}" in
run) shift; cmd_run "$@" ;;
compare) shift; cmd_compare "$@" ;;
*) sed -n '2,17p' "$0"; exit 2 ;;
esac
