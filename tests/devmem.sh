#!/bin/bash
# The device path's host logic on the CPU (compute.test_device_memory: the CPU
# kernels behind a backend whose memory the host cannot touch outside the
# backend's calls; backend/cpu_devmem.c). A host read or write of a vector in
# backend memory that skipped to_host/to_backend is a SIGSEGV, and a missing
# copy gives other numbers: each run must equal the plain CPU run bit for bit.
#  - allreduce (device_vectors: params, grads, momentum in backend memory, the
#    optimizer and the 1/n scale as backend ops, the MPI transport staged),
#    with a checkpoint, a resume, run.check_replicas and evaluations;
#  - local (device_vectors, one rank, no transport), with a resume;
#  - the device memory a run reports, growing with the batch;
#  - AdamW with clipping, local and allreduce (the moments in backend memory,
#    the step and the clip as backend ops), with a resume;
#  - easgd (device_vectors too: its center, mean and pull, and the elastic
#    terms as backend ops), both center placements, with a resume;
#  - sgp (push-sum: the message buffers, the received slots, the accumulator,
#    the de-biased model and the weight in backend memory, the weight sent as
#    the message's last float) on the exponential graph and on an irregular
#    file graph whose weights leave 1, with a resume;
#  - dpsgd, both orders (cta, atc), on the bipartite pairs and on the same
#    irregular graph (two weighted slots), with a resume;
#  - osgp, a mode with host vectors (the network's copies, staging per step);
#  - the GPT (models/gpt_backend.c: every pass a backend call, every tensor in
#    backend memory), allreduce with AdamW, clipping and dropout: the CPU runs
#    models/gpt.c, other kernels, so the device run is held to itself across
#    a resume bit for bit and to the CPU run's losses within float rounding.
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e
D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
# the device backend runs the native kernels: so does the CPU run
m="model.name=mnist_cnn data.synthetic_height=8 data.synthetic_width=8 data.synthetic_train=256
   compute.kernels=native run.eval_every=6"
# eval.csv without the wall-clock column (4) and the rows of step 10, where
# the interrupted run ended with an evaluation
evals() {
    "$DTRAIN_POST" csv "$1/run.h5" -o "$1/csv" >/dev/null &&
    cut -d, -f1-3,5- "$1/csv/eval.csv" | grep -v '^10,'
}

run 2 300 "$D" $m algorithm.mode=allreduce run.output_dir="$WORK/cpu" run.max_steps=16 run.check_replicas=true
rcA=$RC
run 2 300 "$D" $m algorithm.mode=allreduce run.output_dir="$WORK/dev" run.max_steps=10 \
    compute.test_device_memory=true run.check_replicas=true
rcB=$RC
run 2 300 "$D" $m algorithm.mode=allreduce run.output_dir="$WORK/dev" run.max_steps=16 \
    compute.test_device_memory=true run.check_replicas=true run.resume=true
rcC=$RC
if resumed_same "$WORK/cpu" "$WORK/dev"; then
    pass "allreduce, device vectors: 10 steps + resume to 16 == the CPU's 16 steps bit for bit"
else
    fail "allreduce with device vectors (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
fi
if [ "$(evals "$WORK/cpu")" = "$(evals "$WORK/dev")" ]; then
    pass "allreduce, device vectors: the evaluations (loss, accuracy, averaged model, consensus) equal the CPU's"
else
    fail "allreduce, device vectors: evaluations differ"; diff <(evals "$WORK/cpu") <(evals "$WORK/dev") | head -5
fi

# the run's report of the device memory held at once (backend mem_peak): a
# device run says it, more at four times the batch (the activations'
# arena), and a CPU run, whose tensors are host memory, does not
peak_mib() { sed -n 's/^device memory: at most \([0-9]*\) MiB.*/\1/p' "$WORK/out.txt"; }
mem="model.name=mnist_cnn data.synthetic_height=28 data.synthetic_width=28
     data.synthetic_train=256 compute.kernels=native algorithm.mode=local run.max_steps=2"
run 1 300 "$D" $mem run.output_dir="$WORK/mem1" compute.test_device_memory=true optim.batch_size=16
p1=$(peak_mib)
run 1 300 "$D" $mem run.output_dir="$WORK/mem4" compute.test_device_memory=true optim.batch_size=64
p4=$(peak_mib)
run 1 300 "$D" $mem run.output_dir="$WORK/memc"
if [ -n "$p1" ] && [ -n "$p4" ] && [ "$p4" -gt "$p1" ] && [ -z "$(peak_mib)" ]; then
    pass "device memory reported: at most $p1 MiB at batch 16, $p4 MiB at batch 64; none on the CPU"
else
    fail "device memory report: '$p1' MiB at batch 16, '$p4' at 64, CPU '$(peak_mib)'"
    tail -3 "$WORK/out.txt"
fi

# local (one rank): the same device vectors with no transport at all
run 1 300 "$D" $m algorithm.mode=local run.output_dir="$WORK/lcpu" run.max_steps=16
rcA=$RC
run 1 300 "$D" $m algorithm.mode=local run.output_dir="$WORK/ldev" run.max_steps=10 \
    compute.test_device_memory=true
rcB=$RC
run 1 300 "$D" $m algorithm.mode=local run.output_dir="$WORK/ldev" run.max_steps=16 \
    compute.test_device_memory=true run.resume=true
rcC=$RC
if resumed_same "$WORK/lcpu" "$WORK/ldev" && [ "$(evals "$WORK/lcpu")" = "$(evals "$WORK/ldev")" ]; then
    pass "local, device vectors: 10 steps + resume to 16 == the CPU's 16 steps bit for bit, evaluations equal"
else
    fail "local with device vectors (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
fi

# AdamW with clipping: the two moments in backend memory, the step and the
# clip as backend ops (flat_adamw, flat_clip), local and allreduce
for mode in local allreduce; do
    np=1; [ $mode = allreduce ] && np=2
    a="algorithm.mode=$mode optim.name=adamw optim.lr=0.002 optim.weight_decay=0.1 optim.clip_norm=0.5"
    run $np 300 "$D" $m $a run.output_dir="$WORK/a$mode-cpu" run.max_steps=16
    rcA=$RC
    run $np 300 "$D" $m $a run.output_dir="$WORK/a$mode-dev" run.max_steps=10 \
        compute.test_device_memory=true
    rcB=$RC
    grep -q "flat vectors in device memory" "$WORK/out.txt" || rcB=99
    run $np 300 "$D" $m $a run.output_dir="$WORK/a$mode-dev" run.max_steps=16 \
        compute.test_device_memory=true run.resume=true
    rcC=$RC
    if resumed_same "$WORK/a$mode-cpu" "$WORK/a$mode-dev" params adam_m adam_v &&
       [ "$(evals "$WORK/a$mode-cpu")" = "$(evals "$WORK/a$mode-dev")" ]; then
        pass "$mode, adamw + clip_norm, device vectors: 10 steps + resume to 16 == the CPU's 16 steps bit for bit"
    else
        fail "$mode, adamw + clip_norm with device vectors (rc $rcA/$rcB/$rcC; 99: host vectors)"
        tail -5 "$WORK/out.txt"
    fi
done

# easgd: the center, the mean and the pull in backend memory too; the center
# is a checkpoint array (resumed through its host mirror)
for center in replicated root; do
    e="algorithm.mode=easgd easgd.tau=4 easgd.center=$center"
    run 2 300 "$D" $m $e run.max_steps=12 run.output_dir="$WORK/e$center-cpu"
    rcA=$RC
    run 2 300 "$D" $m $e run.max_steps=6 run.output_dir="$WORK/e$center-dev" \
        compute.test_device_memory=true
    rcB=$RC
    run 2 300 "$D" $m $e run.max_steps=12 run.output_dir="$WORK/e$center-dev" \
        compute.test_device_memory=true run.resume=true
    rcC=$RC
    if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] &&
       "$TEST_BIN/ckcmp" same "$(last "$WORK/e$center-cpu")" "$(last "$WORK/e$center-dev")" \
           params momentum easgd_center >/dev/null; then
        pass "easgd center=$center, device vectors: 6 steps + resume to 12 == the CPU's 12 steps bit for bit"
    else
        fail "easgd center=$center with device vectors (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
    fi
done
# the gossip modes: NP, NAME, then deck settings; CPU 12 steps against the
# device backend's 6 steps + resume to 12, every checkpoint array compared
printf '0 1\n1 2\n' >"$WORK/path.txt" # a path: rank 1 has two peers, ranks 0 and 2 one
path="algorithm.topology=file algorithm.graph_file=$WORK/path.txt"
gossip_case() {
    local np=$1 name=$2 sets
    shift 2
    run $np 300 "$D" $m "$@" run.max_steps=12 run.output_dir="$WORK/$name-cpu"
    rcA=$RC
    run $np 300 "$D" $m "$@" run.max_steps=6 run.output_dir="$WORK/$name-dev" \
        compute.test_device_memory=true
    rcB=$RC
    run $np 300 "$D" $m "$@" run.max_steps=12 run.output_dir="$WORK/$name-dev" \
        compute.test_device_memory=true run.resume=true
    rcC=$RC
    sets="params momentum"
    case "$*" in *mode=sgp*) sets="params momentum push_sum_weight" ;; esac
    if resumed_same "$WORK/$name-cpu" "$WORK/$name-dev" $sets; then
        pass "$name on $np ranks, device vectors: 6 steps + resume to 12 == the CPU's 12 steps bit for bit ($sets)"
    else
        fail "$name with device vectors (rc $rcA/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
        "$TEST_BIN/ckcmp" same "$(last "$WORK/$name-cpu")" "$(last "$WORK/$name-dev")" $sets 2>&1 |
            sed 's/^/#   /' | tail -3
    fi
    if [ -n "$(evals "$WORK/$name-cpu")" ] &&
       [ "$(evals "$WORK/$name-cpu" | sort -u)" = "$(evals "$WORK/$name-dev" | sort -u)" ]; then
        pass "$name, device vectors: the evaluations (de-biased and averaged models) equal the CPU's"
    else
        fail "$name, device vectors: evaluations differ"
        diff <(evals "$WORK/$name-cpu" | sort -u) <(evals "$WORK/$name-dev" | sort -u) | head -5
    fi
}
gossip_case 2 sgp-exp algorithm.mode=sgp algorithm.topology=exponential
gossip_case 3 sgp-path algorithm.mode=sgp $path
# on the path the push-sum weights leave 1: the weight did travel and sum
w=$("$DTRAIN_POST" csv "$WORK/sgp-path-dev/run.h5" -o "$WORK/wcsv" >/dev/null &&
    awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "weight") c = i}
             NR > 1 && c && $c + 0 != 1 {n++} END {print n + 0}' "$WORK/wcsv/train.csv")
if [ "${w:-0}" -gt 0 ]; then
    pass "sgp on the path graph, device vectors: $w train rows log a push-sum weight other than 1"
else
    fail "sgp on the path graph: no logged push-sum weight other than 1 (the test lost its teeth)"
fi
for order in cta atc; do
    gossip_case 2 dpsgd-$order algorithm.mode=dpsgd algorithm.dpsgd_order=$order
done
gossip_case 3 dpsgd-path algorithm.mode=dpsgd $path
# osgp keeps host vectors (its exchanges run on a communication thread): the
# network's device copies, staged per step
run 2 300 "$D" $m algorithm.mode=osgp run.max_steps=8 run.output_dir="$WORK/ocpu"
rcA=$RC
run 2 300 "$D" $m algorithm.mode=osgp run.max_steps=8 run.output_dir="$WORK/odev" \
    compute.test_device_memory=true
rcB=$RC
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/ocpu")" "$(last "$WORK/odev")" \
       params momentum push_sum_weight osgp_pending >/dev/null; then
    pass "osgp, host vectors with a device backend: 8 steps == the CPU's bit for bit"
else
    fail "osgp with a device backend (rc $rcA/$rcB)"; tail -5 "$WORK/out.txt"
fi
if [ -r /usr/share/games/fortunes ]; then
    G="${srcdir:-.}/inputs/gpt-fortunes.ini"
    g="model.n_layer=2 model.n_head=2 model.n_embd=16 model.block_size=16 model.dropout=0.1
       data.test_limit=32 optim.batch_size=4 run.eval_every=8 run.log_every=1
       run.checkpoint_every=0 optim.warmup_steps=2 optim.decay_steps=16"
    run 2 300 $G $g run.output_dir="$WORK/gcpu" run.max_steps=16
    rcA=$RC
    run 2 300 $G $g run.output_dir="$WORK/gfull" run.max_steps=16 compute.test_device_memory=true
    rcD=$RC
    run 2 300 $G $g run.output_dir="$WORK/gdev" run.max_steps=10 compute.test_device_memory=true
    rcB=$RC
    run 2 300 $G $g run.output_dir="$WORK/gdev" run.max_steps=16 compute.test_device_memory=true \
        run.resume=true
    rcC=$RC
    if [ $rcD -eq 0 ] && resumed_same "$WORK/gfull" "$WORK/gdev" params adam_m adam_v; then
        pass "gpt, allreduce + adamw on the device path: 10 steps + resume to 16 == 16 steps bit for bit"
    else
        fail "gpt on the device path, resume (rc $rcA/$rcD/$rcB/$rcC)"; tail -5 "$WORK/out.txt"
    fi
    # the training losses of the 16 steps, CPU (models/gpt.c) against the device path
    losses() {
        "$DTRAIN_POST" csv "$1/run.h5" -o "$1/csv" >/dev/null &&
        awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) {if ($i == "loss") c = i; if ($i == "rank") r = i}}
                 NR > 1 && c && r && $r == 0 {print $1, $c}' "$1/csv/train.csv"
    }
    d=$(join <(losses "$WORK/gcpu") <(losses "$WORK/gfull") |
        awk '{e = ($2 - $3) / $2; e = e < 0 ? -e : e; if (e > w) w = e; n++}
             END {if (n == 16 && w < 1e-4) printf "%d steps, largest relative difference %.1e", n, w
                  else printf "FAIL %d steps, %.1e", n, w}')
    case $d in
        FAIL*|'') fail "gpt on the device path: training losses against the CPU's: ${d:-none read}" ;;
        *) pass "gpt on the device path: training losses equal the CPU's within 1e-4 ($d)" ;;
    esac
fi
finish
