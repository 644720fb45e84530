#!/bin/bash
# The GPU path on a GPU (make check-gpu; not part of make check). Skips with
# exit 77 and the reason where dtrain was built without CUDA or no GPU is
# visible. With a GPU:
#  1. every layer and every model, CUDA backend against the CPU backend to
#     1e-4 relative, the resnets' whole-model gradients to 1e-2 (tests/test_gpu);
#  2. 50 training steps of every model on the GPU: the logged loss within
#     1e-3 of the CPU run's at step 10 and within 2e-2 at step 50 (relative
#     where the loss is above 1; same deck, same dropout masks, the CPU on its
#     native kernels). Over 50 steps a
#     loss moves with the summation order through ReLU kinks (test_gpu.c):
#     mnist_cnn's oneDNN CPU run ended at 0.042 or 0.036 where native and the
#     H200 both ended at 0.0282; resnet32_gn's H200 run moved from 2.3191 to
#     2.3243 with the order of its GroupNorm sums (CPU 2.3195);
#  2b. the GPT (models/gpt_backend.c) likewise on a generated corpus, its
#     stop/resume bit for bit, its checkpoint resumed on the CPU, and its
#     steps with compute.cuda_graphs equal the eager ones;
#  2c. compute.precision = bf16 on the GPU: mnist_cnn and the GPT near the
#     GPU's fp32 loss at step 50, and a bf16 stop/resume bit for bit;
#  3. a GPU run stopped at step 20 and resumed to 50 equals the uninterrupted
#     GPU run bit for bit (parameters and momentum, tests/ckcmp), and so do
#     the same runs with compute.cuda_graphs = true;
#  4. the GPU run's checkpoint at step 20 resumed on the CPU: it loads and
#     trains to step 50 (checkpoints hold host copies of the flat vectors);
#  5. device vectors (allreduce, easgd with both center placements, local
#     with AdamW and clipping) on one GPU: stop/resume bit for bit, the loss
#     the CPU's; compute.tf32 = true near the fp32 CPU run; NCCL on one rank
#     equals the staged MPI transport bit for bit;
#  6. NCCL: allreduce (host and device vectors), reduce and broadcast on one
#     rank (tests/test_nccl); with two or more GPUs also on two ranks, with a
#     gossip step equal to MPI's; a training run with comm.transport = nccl.
# Needs only what bench/README.md lists to carry: src/dtrain, tests/test_gpu,
# tests/test_nccl, tests/ckcmp, mpiexec.hydra + hydra_pmi_proxy and the
# libraries ldd names (no HDF5 or MPI installation on the GPU machine).
. "${srcdir:-.}/tests/common.sh" 2>/dev/null || . "$(dirname "$0")/common.sh"
set -e

set +e
"$TEST_BIN/test_gpu" >"$WORK/layers.txt" 2>&1
rc=$?
set -e
if [ $rc -eq 77 ]; then
    sed -n 's/^1\.\.0 # SKIP /gpu.sh: skipped: /p' "$WORK/layers.txt"
    exit 77
fi
grep -E '^(not ok|# device)' "$WORK/layers.txt" || true
if [ $rc -eq 0 ]; then
    pass "every layer and model, CUDA against CPU to 1e-4 ($(grep -c '^ok' "$WORK/layers.txt") checks)"
else
    fail "layers and models against the CPU (rc $rc)"
fi

D=$WORK/deck.ini
small_deck "$WORK/r" >"$D"
# near X Y T: |X - Y| <= T max(1, |Y|) (relative where the loss is above 1)
near() {
    awk -v x="$1" -v y="$2" -v t="$3" \
        'BEGIN { s = y < 0 ? -y : y; s = s < 1 ? 1 : s; d = x - y; exit !(d <= t * s && -d <= t * s) }'
}
# the loss logged at step S of the last run
loss_at() { sed -n "s/^step $1\/[0-9]*  .*loss \([0-9.naif]*\) .*/\1/p" "$WORK/out.txt" | tail -n 1; }
shape() {
    case $1 in
    resnet*) echo "data.synthetic_channels=3 data.synthetic_height=32 data.synthetic_width=32" ;;
    *) echo "data.synthetic_channels=1 data.synthetic_height=28 data.synthetic_width=28" ;;
    esac
}
common="algorithm.mode=local run.log_every=1 optim.batch_size=32 data.synthetic_train=2048"
for m in logreg mlp mnist_cnn resnet20_gn resnet32_gn; do
    run 1 600 "$D" model.name=$m $(shape $m) $common run.max_steps=50 compute.device=cpu \
        compute.kernels=native run.output_dir="$WORK/cpu-$m"
    lc=$(loss_at 50) lc10=$(loss_at 10)
    echo "$lc" >"$WORK/cpu-$m.loss50"
    run 1 600 "$D" model.name=$m $(shape $m) $common run.max_steps=50 compute.device=cuda \
        run.output_dir="$WORK/gpu-$m"
    lg=$(loss_at 50) lg10=$(loss_at 10)
    if [ $RC -eq 0 ] && [ -n "$lc" ] && [ -n "$lg" ] && [ -n "$lc10" ] && [ -n "$lg10" ] &&
       near "$lg10" "$lc10" 1e-3 && near "$lg" "$lc" 2e-2; then
        pass "$m: 50 steps on the GPU, loss $lg10 at step 10 and $lg at 50 (CPU $lc10, $lc)"
    else
        fail "$m: 50 steps on the GPU (rc $RC): loss '$lg10', '$lg' at steps 10, 50; CPU '$lc10', '$lc'"
        tail -3 "$WORK/out.txt"
    fi
done

# the GPT (models/gpt_backend.c on CUDA) on a generated corpus, allreduce on
# one rank with AdamW, clipping and dropout: the loss at steps 10 and 50
# within 1e-3 and 2e-2 of the CPU's (models/gpt.c), and 20 steps + resume to
# 50 equal 50 steps bit for bit
word_corpus 5 400 >"$WORK/corpus.txt"
gp="model.name=gpt model.n_layer=2 model.n_head=2 model.n_embd=32 model.block_size=32
    model.dropout=0.1 data.name=text data.path=$WORK/corpus.txt data.test_limit=32
    optim.name=adamw optim.lr=0.002 optim.weight_decay=0.1 optim.clip_norm=1.0
    optim.batch_size=8 run.epochs=100 run.log_every=1 run.checkpoint_every=20
    algorithm.mode=allreduce"
run 1 600 "$D" $gp run.max_steps=50 compute.device=cpu run.output_dir="$WORK/gpt-cpu"
lc=$(loss_at 50) lc10=$(loss_at 10)
run 1 600 "$D" $gp run.max_steps=50 compute.device=cuda run.output_dir="$WORK/gpt-full"
rcA=$RC lg=$(loss_at 50) lg10=$(loss_at 10)
if [ $RC -eq 0 ] && [ -n "$lc" ] && [ -n "$lg" ] && [ -n "$lc10" ] && [ -n "$lg10" ] &&
   near "$lg10" "$lc10" 1e-3 && near "$lg" "$lc" 2e-2; then
    pass "gpt: 50 steps on the GPU, loss $lg10 at step 10 and $lg at 50 (CPU $lc10, $lc)"
else
    fail "gpt: 50 steps on the GPU (rc $RC): loss '$lg10', '$lg' at steps 10, 50; CPU '$lc10', '$lc'"
    tail -3 "$WORK/out.txt"
fi
run 1 600 "$D" $gp run.max_steps=20 compute.device=cuda run.output_dir="$WORK/gpt-part"
rcB=$RC
cp -r "$WORK/gpt-part" "$WORK/gpt-oncpu"
run 1 600 "$D" $gp run.max_steps=50 compute.device=cuda run.resume=true \
    run.output_dir="$WORK/gpt-part"
rcC=$RC
if resumed_same "$WORK/gpt-full" "$WORK/gpt-part" params adam_m adam_v; then
    pass "gpt on the GPU: 20 steps + resume to 50 == 50 steps bit for bit"
else
    fail "gpt on the GPU, stop/resume (rc $rcA/$rcB/$rcC)"; tail -3 "$WORK/out.txt"
fi
# the GPU's checkpoint at step 20 resumed on the CPU (models/gpt.c) to step 50
run 1 600 "$D" $gp run.max_steps=50 compute.device=cpu run.resume=true \
    run.output_dir="$WORK/gpt-oncpu"
lx=$(loss_at 50)
if [ $RC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" && [ -n "$lx" ] && [ -n "$lg" ] &&
   near "$lx" "$lg" 2e-2; then
    pass "gpt: the GPU's checkpoint at step 20 resumed on the CPU to 50, loss $lx (the GPU's $lg)"
else
    fail "gpt: GPU checkpoint resumed on the CPU (rc $RC, loss '$lx', the GPU's '$lg')"
    tail -3 "$WORK/out.txt"
fi
# the GPT's steps recorded as CUDA graphs (with dropout: the kernels read each
# step's keys from device memory): 30 steps equal 30 eager steps bit for bit
run 1 600 "$D" $gp run.max_steps=30 compute.device=cuda run.output_dir="$WORK/gpt-eager"
rcA=$RC
run 1 600 "$D" $gp run.max_steps=30 compute.device=cuda compute.cuda_graphs=true \
    run.output_dir="$WORK/gpt-graphs"
rcB=$RC
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && ! grep -q "without a graph" "$WORK/out.txt" &&
   grep -q "cuda:0 .* graphs" "$WORK/out.txt" &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/gpt-eager")" "$(last "$WORK/gpt-graphs")" >/dev/null; then
    pass "gpt with CUDA graphs: 30 steps equal the eager run bit for bit"
else
    fail "gpt with CUDA graphs against the eager run (rc $rcA/$rcB)"; tail -3 "$WORK/out.txt"
fi
# compute.precision = bf16 on the GPU (backend_cuda_bf16: the linear and
# convolution products with bf16 operands, fp32 accumulation): mnist_cnn and
# the GPT train as in fp32, the loss at step 50 within 5e-2 of the GPU's fp32
# run (relative where above 1), and a bf16 run resumes bit for bit
m=mnist_cnn
for what in "mnist_cnn" "gpt"; do
    if [ $what = gpt ]; then a="$gp"; else a="model.name=$m $(shape $m) $common"; fi
    run 1 600 "$D" $a run.max_steps=50 compute.device=cuda run.output_dir="$WORK/$what-f32"
    l32=$(loss_at 50)
    run 1 600 "$D" $a run.max_steps=50 compute.device=cuda compute.precision=bf16 \
        run.checkpoint_every=20 run.output_dir="$WORK/$what-b16"
    rcA=$RC l16=$(loss_at 50)
    if [ $RC -eq 0 ] && [ -n "$l32" ] && [ -n "$l16" ] &&
       near "$l16" "$l32" 5e-2; then
        pass "$what in bf16 on the GPU: loss $l16 at step 50 (fp32 $l32)"
    else
        fail "$what in bf16 on the GPU (rc $RC): loss '$l16' at step 50, fp32 '$l32'"; tail -3 "$WORK/out.txt"
    fi
    run 1 600 "$D" $a run.max_steps=20 compute.device=cuda compute.precision=bf16 \
        run.checkpoint_every=20 run.output_dir="$WORK/$what-b16p"
    rcB=$RC
    run 1 600 "$D" $a run.max_steps=50 compute.device=cuda compute.precision=bf16 \
        run.checkpoint_every=20 run.resume=true run.output_dir="$WORK/$what-b16p"
    rcC=$RC
    sets="params momentum"; [ $what = gpt ] && sets="params adam_m adam_v"
    if resumed_same "$WORK/$what-b16" "$WORK/$what-b16p" $sets; then
        pass "$what in bf16 on the GPU: 20 steps + resume to 50 == 50 steps bit for bit"
    else
        fail "$what in bf16 on the GPU, stop/resume (rc $rcA/$rcB/$rcC)"; tail -3 "$WORK/out.txt"
    fi
done
# stop / resume on the GPU, then the GPU checkpoint on the CPU (mnist_cnn has dropout)
m=mnist_cnn
args="model.name=$m $(shape $m) $common compute.device=cuda run.checkpoint_every=20"
run 1 600 "$D" $args run.max_steps=50 run.output_dir="$WORK/full"
rcA=$RC
run 1 600 "$D" $args run.max_steps=20 run.output_dir="$WORK/part"
rcB=$RC
cp -r "$WORK/part" "$WORK/oncpu"
run 1 600 "$D" $args run.max_steps=50 run.resume=true run.output_dir="$WORK/part"
rcC=$RC
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $rcC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/full")" "$(last "$WORK/part")" >/dev/null; then
    pass "GPU: 20 steps + resume to 50 == 50 steps bit for bit"
else
    fail "GPU stop/resume (rc $rcA/$rcB/$rcC)"; tail -3 "$WORK/out.txt"
fi
# compute.cuda_graphs: the same 50 steps recorded once and replayed equal
# the eager run bit for bit, and so does a resumed run with graphs
# (a record that failed says "without a graph": looked for after every run)
nographs=0
graphs_run() { # a run with graphs; nographs=1 where a record failed or the table says off
    run 1 600 "$D" $args compute.cuda_graphs=true "$@"
    grep -q "without a graph" "$WORK/out.txt" && nographs=1
    grep -q "cuda:0 .* graphs" "$WORK/out.txt" || nographs=1
}
graphs_run run.max_steps=50 run.output_dir="$WORK/graphs"
rcA=$RC
graphs_run run.max_steps=20 run.output_dir="$WORK/graphs-part"
graphs_run run.max_steps=50 run.resume=true run.output_dir="$WORK/graphs-part"
rcB=$RC
if [ $rcA -eq 0 ] && [ $rcB -eq 0 ] && [ $nographs -eq 0 ] &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/full")" "$(last "$WORK/graphs")" >/dev/null &&
   "$TEST_BIN/ckcmp" same "$(last "$WORK/full")" "$(last "$WORK/graphs-part")" >/dev/null; then
    pass "CUDA graphs: 50 steps, and 20 + resume to 50, equal the eager run bit for bit"
else
    fail "CUDA graphs against the eager run (rc $rcA/$rcB, graphs off or a record failed: $nographs)"
    tail -3 "$WORK/out.txt"
fi
run 1 600 "$D" ${args/compute.device=cuda/compute.device=cpu} run.max_steps=50 \
    run.resume=true run.output_dir="$WORK/oncpu"
if [ $RC -eq 0 ] && grep -q "resumed from" "$WORK/out.txt" && [ -n "$(loss_at 50)" ]; then
    pass "a GPU checkpoint resumes on the CPU (step 50 loss $(loss_at 50))"
else
    fail "GPU checkpoint on the CPU (rc $RC)"; tail -3 "$WORK/out.txt"
fi

# device vectors on one GPU (tests/devmem.sh's cases that one rank can run):
# allreduce and easgd keep params, grads, momentum and their own vectors in
# device memory, the optimizer as CUDA kernels and MPI staged through pinned
# memory. 10 steps + resume to 16 equal 16 steps bit for bit (with
# run.check_replicas and evaluations), and the loss of step 15 is the CPU
# run's within 1e-3. comm.transport = nccl on one rank gives the same bits as
# the staged MPI transport (a one-rank sum is a copy either way).
m=mnist_cnn
dv="model.name=$m $(shape $m) run.log_every=1 optim.batch_size=32
    data.synthetic_train=1024 run.eval_every=6 run.check_replicas=true"
for e in "algorithm.mode=allreduce" "algorithm.mode=easgd easgd.tau=4 easgd.center=replicated" \
         "algorithm.mode=easgd easgd.tau=4 easgd.center=root" \
         "algorithm.mode=local optim.name=adamw optim.lr=0.002 optim.weight_decay=0.1 optim.clip_norm=0.5"; do
    name=$(echo "$e" | tr -c 'a-z0-9\n' _ | tr -s _)
    sets="params momentum"
    case $e in *easgd*) sets="params momentum easgd_center" ;; *adamw*) sets="params adam_m adam_v" ;; esac
    run 1 600 "$D" $dv $e compute.device=cpu compute.kernels=native run.max_steps=16 \
        run.output_dir="$WORK/$name-cpu"
    lc=$(loss_at 15)
    run 1 600 "$D" $dv $e compute.device=cuda run.max_steps=16 run.output_dir="$WORK/$name-full"
    rcA=$RC lg=$(loss_at 15)
    run 1 600 "$D" $dv $e compute.device=cuda run.max_steps=10 run.output_dir="$WORK/$name-part"
    rcB=$RC
    grep -q "flat vectors in device memory" "$WORK/out.txt" || rcB=99
    run 1 600 "$D" $dv $e compute.device=cuda run.max_steps=16 run.resume=true \
        run.output_dir="$WORK/$name-part"
    rcC=$RC
    if resumed_same "$WORK/$name-full" "$WORK/$name-part" $sets; then
        pass "$e, device vectors on the GPU: 10 steps + resume to 16 == 16 steps bit for bit ($sets)"
    else
        fail "$e, device vectors on the GPU: stop/resume (rc $rcA/$rcB/$rcC; 99: host vectors)"
        tail -3 "$WORK/out.txt"
    fi
    if [ -n "$lc" ] && [ -n "$lg" ] &&
       awk -v a="$lc" -v b="$lg" 'BEGIN { d = a - b; exit !(d <= 1e-3 && d >= -1e-3) }'; then
        pass "$e, device vectors: step 15 loss $lg on the GPU (CPU $lc)"
    else
        fail "$e, device vectors: step 15 loss '$lg' on the GPU, CPU '$lc'"
    fi
done
# compute.tf32: the GEMMs on tensor cores; 50 mnist_cnn steps near the fp32 CPU run
# (TF32 rounds the products' inputs to 10-bit mantissas: a looser 5e-2)
m=mnist_cnn
run 1 600 "$D" model.name=$m $(shape $m) $common run.max_steps=50 compute.device=cuda \
    compute.tf32=true run.output_dir="$WORK/tf32"
lt=$(loss_at 50) lc=$(cat "$WORK/cpu-$m.loss50" 2>/dev/null)
if [ $RC -eq 0 ] && grep -q "tf32" "$WORK/out.txt" && [ -n "$lt" ] && [ -n "$lc" ] &&
   near "$lt" "$lc" 5e-2; then
    pass "compute.tf32 = true: mnist_cnn step 50 loss $lt on TF32 (fp32 CPU $lc)"
else
    fail "compute.tf32 = true (rc $RC): step 50 loss '$lt', fp32 CPU '$lc'"; tail -3 "$WORK/out.txt"
fi
run 1 600 "$D" $dv algorithm.mode=allreduce compute.device=cuda comm.transport=nccl \
    run.max_steps=16 run.output_dir="$WORK/nccl1"
if [ $RC -eq 0 ] && "$TEST_BIN/ckcmp" same "$(last "$WORK/nccl1")" \
       "$(last "$WORK/algorithm_mode_allreduce-full")" >/dev/null; then
    pass "allreduce over NCCL on one GPU == over the staged MPI transport, bit for bit"
else
    fail "allreduce over NCCL on one GPU (rc $RC)"; tail -3 "$WORK/out.txt"
fi

# NCCL
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
for np in 1 2; do
    [ $np -gt 1 ] && [ "$ngpus" -lt $np ] && { echo "# NCCL on $np ranks: $ngpus GPU(s) here"; continue; }
    set +e
    timeout -k 5 300 "$MPIEXEC" -n $np "$TEST_BIN/test_nccl" >"$WORK/nccl.txt" 2>&1
    rc=$?
    set -e
    if [ $rc -eq 0 ]; then
        pass "NCCL transport on $np rank(s) ($(grep -c '^ok' "$WORK/nccl.txt") checks)"
    elif [ $rc -eq 77 ]; then
        echo "# NCCL on $np rank(s): $(grep SKIP "$WORK/nccl.txt")"
    else
        fail "NCCL transport on $np rank(s) (rc $rc)"; grep -E '^not ok' "$WORK/nccl.txt" | head -5
    fi
    if [ $np -gt 1 ]; then
        run $np 600 "$D" model.name=mlp algorithm.mode=allreduce compute.device=cuda \
            comm.transport=nccl run.max_steps=30 run.output_dir="$WORK/nccl$np"
        [ $RC -eq 0 ] && pass "allreduce training over NCCL on $np GPUs" ||
            { fail "allreduce training over NCCL (rc $RC)"; tail -3 "$WORK/out.txt"; }
    fi
done
finish
