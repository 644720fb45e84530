/* The deck's schema: one table of keys drives parsing, validation, defaults,
 * the effective deck and the --help reference, so the four cannot drift
 * apart. Adding a key: a row here, its field in io/settings.h, DECK_NKEYS in
 * deck_internal.h, and its documentation in inputs/reference.ini. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "io/deck_internal.h"

/* The field's offset and size; the _Generic makes a schema row whose type
 * does not match its dt_config field a compile error. */
#define AT(member, T)                                                          \
    .offset = offsetof(dt_config, member) +                                    \
              0 * sizeof(_Generic(((dt_config *)0)->member, T: 1)),           \
    .size = sizeof(((dt_config *)0)->member)
#define GE(x) .bounds = B_LO, .lo = (x)
#define GT(x) .bounds = B_LO_OPEN, .lo = (x)
#define IN_CLOSED_OPEN(a, b) .bounds = B_LO | B_HI_OPEN, .lo = (a), .hi = (b)
#define IN_OPEN_CLOSED(a, b) .bounds = B_LO_OPEN | B_HI, .lo = (a), .hi = (b)
#define IN_CLOSED_CLOSED(a, b) .bounds = B_LO | B_HI, .lo = (a), .hi = (b)
/* for counts the rest of dtrain keeps in an int */
#define IN_INT(a) .bounds = B_LO | B_HI, .lo = (a), .hi = INT_MAX

/* algorithm.mode: the algorithms' table (algo/registry.c) gives its
 * spellings, and the rule only the chosen mode knows, before the first parse */
static const char *mode_choices;
static int (*mode_rule)(const dt_config *cfg, const char *where);

void deck_use_modes(const char *choices, int (*rule)(const dt_config *cfg, const char *where))
{
    mode_choices = choices;
    mode_rule = rule;
}

int deck_mode_rule(const dt_config *cfg, const char *where)
{
    return mode_rule ? mode_rule(cfg, where) : 0;
}

const char *deck_key_choices(const deck_key *k)
{
    if (k->choices)
        return k->choices;
    return k->choices_from && *k->choices_from ? *k->choices_from : "";
}

/* Sections appear in the effective deck in this order. Docs are one line;
 * inputs/reference.ini carries the longer explanations. */
static const deck_key keys_table[] = {
    {"run", "output_dir", KT_STRING, NULL, AT(run.output_dir, char *),
     .nonempty = true, .expect = "a non-empty path",
     .doc = "directory for the run log, checkpoints and the effective deck"},
    {"run", "seed", KT_UINT64, "1", AT(run.seed, uint64_t),
     .doc = "seed of every random stream (initialisation, shuffling, synthetic data)"},
    {"run", "epochs", KT_INT, "1", GE(1), AT(run.epochs, int64_t),
     .doc = "passes over the training data"},
    {"run", "max_steps", KT_INT, "0", GE(0), AT(run.max_steps, int64_t),
     .doc = "stop after this many optimizer steps; 0: no limit beyond run.epochs"},
    {"run", "eval_every", KT_INT, "0", GE(0), AT(run.eval_every, int64_t),
     .doc = "steps between test-set evaluations; 0: at the end of every epoch"},
    {"run", "log_every", KT_INT, "50", GE(1), AT(run.log_every, int64_t),
     .doc = "steps between training-log rows and progress lines"},
    {"run", "checkpoint_every", KT_INT, "0", GE(0), AT(run.checkpoint_every, int64_t),
     .doc = "steps between checkpoints; 0: only at the end and on a signal"},
    {"run", "checkpoint_keep", KT_INT, "2", IN_INT(1), AT(run.checkpoint_keep, int64_t),
     .doc = "number of most recent checkpoints kept on disk"},
    {"run", "resume", KT_BOOL, "false", AT(run.resume, bool),
     .doc = "continue from the newest complete checkpoint in run.output_dir"},
    {"run", "overwrite", KT_BOOL, "false", AT(run.overwrite, bool),
     .doc = "allow replacing the outputs of an earlier run in run.output_dir"},
    {"run", "check_replicas", KT_BOOL, "false", AT(run.check_replicas, bool),
     .doc = "after every step, verify (one hash allreduce) that replicas are bit-identical; "
            "for modes that keep replicas equal (allreduce)"},
    {"run", "check_finite", KT_BOOL, "true", AT(run.check_finite, bool),
     .doc = "stop every rank (exit status 3) when the loss or the parameters hold NaN or "
            "Inf; no checkpoint with such values is written"},
    {"run", "stall_timeout", KT_INT, "600", GE(0), AT(run.stall_timeout, int64_t),
     .doc = "seconds a rank may go without progress (a step, an evaluated batch, a written "
            "checkpoint dataset) before it prints what it waits for and aborts the job; 0: off"},
    {"run", "test_delay_rank", KT_INT, "-1", GE(-1), AT(run.test_delay_rank, int64_t),
     .doc = "tests: this rank sleeps run.test_delay_ms after every step (a slow worker); -1: none"},
    {"run", "test_delay_ms", KT_INT, "0", GE(0), AT(run.test_delay_ms, int64_t),
     .doc = "tests: milliseconds the rank run.test_delay_rank sleeps per step"},
    {"run", "test_zero_gradients", KT_BOOL, "false", AT(run.test_zero_gradients, bool),
     .doc = "tests only: every gradient is zero and the optimizer leaves the model as it is "
            "(no momentum, no weight decay), so only the algorithm's exchanges move the models"},

    {"algorithm", "mode", KT_ENUM, "local", .choices_from = &mode_choices,
     AT(algorithm.mode, char *),
     .doc = "local: one rank; allreduce; gossip: dpsgd, sgp, osgp, adpsgd; parameter "
            "server: ps-async, ps-sync; elastic: easgd, lsgd; edge consensus: pdmm-isvr, "
            "admm-isvr, dsgd-ecl; diloco (see --help)"},
    {"algorithm", "topology", KT_ENUM, "auto",
     .choices = "auto|exponential|exponential-both|bipartite|ring|complete|file|"
                "multiplex-ring|random",
     AT(algorithm.topology, char *),
     .doc = "communication graph; auto: exponential for sgp/osgp, bipartite for "
            "dpsgd/adpsgd, multiplex-ring (ring below 5 ranks) for edge consensus, which "
            "alone takes multiplex-ring and random"},
    {"algorithm", "peers", KT_INT, "1", IN_INT(1), AT(algorithm.peers, int64_t),
     .doc = "gossip peers per step (exponential base peers+1; ring 1 or 2)"},
    {"algorithm", "graph_file", KT_STRING, "", AT(algorithm.graph_file, char *),
     .doc = "topology = file: edge list, one 'I J' pair of ranks per line (edge-consensus "
            "modes: also 'I J PI PJ' with the swap phases of the two ends, and 'round K')"},
    {"algorithm", "overlap_tau", KT_INT, "0", GE(0), AT(algorithm.overlap_tau, int64_t),
     .doc = "osgp: steps a rank may run ahead of its in-flight message; 0: absorb every step"},
    {"algorithm", "dpsgd_order", KT_ENUM, "cta", .choices = "cta|atc",
     AT(algorithm.dpsgd_order, char *),
     .doc = "dpsgd: cta = combine then adapt (x <- W x - lr g(x), the paper); "
            "atc = adapt then combine (x <- W (x - lr g(x)))"},

    {"model", "name", KT_ENUM, NULL,
     .choices = "logreg|mlp|mnist_cnn|resnet20_gn|resnet32_gn|gpt", AT(model.name, char *),
     .doc = "network to train; gpt: a GPT-2-style language model (model.n_layer ... "
            "model.dropout), trained on data.name = text or tokens"},
    {"model", "hidden", KT_STRING, "100", .norm = deck_norm_widths, AT(model.hidden, char *),
     .expect = "comma-separated positive integers, e.g. 256,128",
     .doc = "mlp: widths of the hidden layers, input side first"},
    {"model", "activation", KT_ENUM, "sigmoid", .choices = "sigmoid|relu",
     AT(model.activation, char *), .doc = "mlp: activation of the hidden layers"},
    {"model", "gn_groups", KT_INT, "2", IN_INT(1), AT(model.gn_groups, int64_t),
     .doc = "resnet*_gn: GroupNorm groups per normalisation layer"},
    {"model", "n_layer", KT_INT, "4", IN_INT(1), AT(model.n_layer, int64_t),
     .doc = "gpt: transformer blocks"},
    {"model", "n_head", KT_INT, "4", IN_INT(1), AT(model.n_head, int64_t),
     .doc = "gpt: attention heads per block; must divide model.n_embd"},
    {"model", "n_embd", KT_INT, "128", IN_INT(1), AT(model.n_embd, int64_t),
     .doc = "gpt: embedding width (channels per position)"},
    {"model", "block_size", KT_INT, "64", IN_INT(1), AT(model.block_size, int64_t),
     .doc = "gpt: context length T in tokens"},
    {"model", "vocab_size", KT_INT, "0", IN_INT(0), AT(model.vocab_size, int64_t),
     .doc = "gpt: vocabulary size; 0: from the data (text: its distinct bytes; tokens: "
            "50257, GPT-2's)"},
    {"model", "dropout", KT_DOUBLE, "0", IN_CLOSED_OPEN(0, 1), AT(model.dropout, double),
     .doc = "gpt: dropout probability; 0: none"},

    {"data", "name", KT_ENUM, "fashion-mnist",
     .choices = "fashion-mnist|mnist|cifar10|synthetic|text|tokens", AT(data.name, char *),
     .doc = "data set; text: a byte-level corpus (data.path a file, or a directory of "
            "them); tokens: llm.c token files (data.path training, data.val_path validation)"},
    {"data", "path", KT_STRING, "/usr/share/datasets/fashion-mnist", AT(data.path, char *),
     .nonempty = true, .expect = "a non-empty path",
     .doc = "directory holding the data set files (unused for synthetic)"},
    {"data", "val_path", KT_STRING, "", AT(data.val_path, char *),
     .doc = "tokens: the validation token file (llm.c format); required with data.name = tokens"},
    {"data", "partition", KT_ENUM, "iid", .choices = "iid|class-skew|blocks",
     AT(data.partition, char *), .doc = "how the training set is split across ranks"},
    {"data", "samples_per_epoch", KT_INT, "0", GE(0), AT(data.samples_per_epoch, int64_t),
     .doc = "training samples per rank per epoch; 0: the rank's whole shard"},
    {"data", "test_limit", KT_INT, "0", GE(0), AT(data.test_limit, int64_t),
     .doc = "test samples used per evaluation; 0: the whole test set"},
    {"data", "skew_classes", KT_INT, "8", IN_INT(1), AT(data.skew_classes, int64_t),
     .doc = "class-skew: classes in each rank's shard"},
    {"data", "skew_shift", KT_INT, "4", IN_INT(0), AT(data.skew_shift, int64_t),
     .doc = "class-skew: shift of the first class from one rank to the next"},
    {"data", "block_count", KT_INT, "1200", GE(1), AT(data.block_count, int64_t),
     .doc = "blocks: number of contiguous blocks the training set is cut into"},
    {"data", "block_size", KT_INT, "50", GE(1), AT(data.block_size, int64_t),
     .doc = "blocks: samples per block"},
    {"data", "synthetic_train", KT_INT, "4096", GE(1), AT(data.synthetic_train, int64_t),
     .doc = "synthetic: training samples"},
    {"data", "synthetic_test", KT_INT, "1024", GE(1), AT(data.synthetic_test, int64_t),
     .doc = "synthetic: test samples"},
    {"data", "synthetic_classes", KT_INT, "10", IN_INT(2), AT(data.synthetic_classes, int64_t),
     .doc = "synthetic: number of classes"},
    {"data", "synthetic_channels", KT_INT, "1", IN_INT(1), AT(data.synthetic_channels, int64_t),
     .doc = "synthetic: image channels"},
    {"data", "synthetic_height", KT_INT, "8", IN_INT(1), AT(data.synthetic_height, int64_t),
     .doc = "synthetic: image height in pixels"},
    {"data", "synthetic_width", KT_INT, "8", IN_INT(1), AT(data.synthetic_width, int64_t),
     .doc = "synthetic: image width in pixels"},
    {"data", "synthetic_noise", KT_DOUBLE, "1.0", GE(0), AT(data.synthetic_noise, double),
     .doc = "synthetic: standard deviation of the noise around each class's mean image"},

    {"optim", "name", KT_ENUM, "sgd", .choices = "sgd|adamw|muon", AT(optim.name, char *),
     .doc = "optimizer: sgd (momentum, Nesterov, L2 weight decay), adamw (PyTorch's AdamW: "
            "decoupled decay on matrices and embeddings only) or muon (Muon on hidden matrices, "
            "AdamW on the rest)"},
    {"optim", "lr", KT_DOUBLE, NULL, GT(0), AT(optim.lr, double),
     .doc = "learning rate (before optim.lr_scaling, warmup and decay)"},
    {"optim", "batch_size", KT_INT, NULL, IN_INT(1), AT(optim.batch_size, int64_t),
     .doc = "samples per rank per step"},
    {"optim", "momentum", KT_DOUBLE, "0.9", IN_CLOSED_OPEN(0, 1), AT(optim.momentum, double),
     .doc = "momentum coefficient; 0: plain SGD (muon: 0.95 when not given)"},
    {"optim", "nesterov", KT_BOOL, "false", AT(optim.nesterov, bool),
     .doc = "use Nesterov momentum (muon: true when not given)"},
    {"optim", "weight_decay", KT_DOUBLE, "0", GE(0), AT(optim.weight_decay, double),
     .doc = "sgd: L2 penalty coefficient added to the gradient; adamw, muon: decoupled decay "
            "w <- w (1 - lr weight_decay)"},
    {"optim", "lr_scaling", KT_BOOL, "false", AT(optim.lr_scaling, bool),
     .doc = "scale the learning rate by batch_size * ranks / 256"},
    {"optim", "warmup_epochs", KT_DOUBLE, "0", GE(0), AT(optim.warmup_epochs, double),
     .doc = "epochs (fractions allowed) of linear warmup from lr to the scaled lr; 0: none"},
    {"optim", "decay_epochs", KT_STRING, "", .norm = deck_norm_epochs, AT(optim.decay_epochs, char *),
     .expect = "comma-separated epochs (fractions allowed) in increasing order, e.g. 30,60,80 (at most 32), or nothing",
     .doc = "epochs at which the learning rate is multiplied by optim.decay_factor"},
    {"optim", "decay_factor", KT_DOUBLE, "0.1", IN_OPEN_CLOSED(0, 1), AT(optim.decay_factor, double),
     .doc = "learning-rate multiplier applied at each of optim.decay_epochs"},
    {"optim", "beta1", KT_DOUBLE, "0.9", IN_CLOSED_OPEN(0, 1), AT(optim.beta1, double),
     .doc = "adamw, muon's AdamW part: decay rate of the first moment (the gradient's "
            "running mean)"},
    {"optim", "beta2", KT_DOUBLE, "0.999", IN_CLOSED_OPEN(0, 1), AT(optim.beta2, double),
     .doc = "adamw, muon's AdamW part: decay rate of the second moment (the squared "
            "gradient's running mean)"},
    {"optim", "eps", KT_DOUBLE, "1e-8", GT(0), AT(optim.eps, double),
     .doc = "adamw, muon's AdamW part: added to the square root of the second moment"},
    {"optim", "adamw_lr", KT_DOUBLE, "3e-4", GT(0), AT(optim.adamw_lr, double),
     .doc = "muon: AdamW's rate for the tensors Muon leaves (embeddings, first layer, head, "
            "biases, gains); it follows optim.lr's schedule (adamw_lr lr_t / lr)"},
    {"optim", "clip_norm", KT_DOUBLE, "0", GE(0), AT(optim.clip_norm, double),
     .doc = "scale the gradient down to this global L2 norm before each step; 0: off"},
    {"optim", "warmup_steps", KT_INT, "0", GE(0), AT(optim.warmup_steps, int64_t),
     .doc = "steps of linear warmup: step t < warmup_steps uses lr (t + 1) / (warmup_steps + 1); "
            "0: none"},
    {"optim", "schedule", KT_ENUM, "step", .choices = "step|cosine", AT(optim.schedule, char *),
     .doc = "step: the epoch-based schedule (optim.warmup_epochs, optim.decay_epochs); cosine: "
            "from lr after optim.warmup_steps down to optim.min_lr at optim.decay_steps"},
    {"optim", "min_lr", KT_DOUBLE, "0", GE(0), AT(optim.min_lr, double),
     .doc = "cosine: the learning rate at optim.decay_steps and after it"},
    {"optim", "decay_steps", KT_INT, "0", GE(0), AT(optim.decay_steps, int64_t),
     .doc = "cosine: the step at which the rate reaches optim.min_lr; 0: the run's total steps "
            "as fixed when it first starts"},

    {"ps", "servers", KT_INT, "1", IN_INT(1), AT(ps.servers, int64_t),
     .doc = "ps-*: server ranks (0 .. servers-1), each holding a contiguous range of the model"},
    {"ps", "supervisor", KT_BOOL, "false", AT(ps.supervisor, bool),
     .doc = "ps-*: the rank after the servers evaluates the model every ps.eval_seconds (or run.eval_every)"},
    {"ps", "fetch_every", KT_INT, "1", IN_INT(1), AT(ps.fetch_every, int64_t),
     .doc = "ps-async: steps between a worker's fetches of the model (Downpour n_fetch)"},
    {"ps", "push_every", KT_INT, "1", IN_INT(1), AT(ps.push_every, int64_t),
     .doc = "ps-async: steps whose gradients a worker sums into one push (Downpour n_push)"},
    {"ps", "staleness", KT_ENUM, "none", .choices = "none|adacomp", AT(ps.staleness, char *),
     .doc = "ps-async: none, or adacomp: each coordinate's step divided by the number of the "
            "last d updates that touched it (d: the push's delay)"},
    {"ps", "compress", KT_ENUM, "none", .choices = "none|topk|adacomp-chen",
     AT(ps.compress, char *),
     .doc = "pushes: none (dense); topk: per tensor its ps.ratio largest entries; adacomp-chen: "
            "per bin the residues pushed past the bin's max, as +-scale; the rest stays as residual"},
    {"ps", "ratio", KT_DOUBLE, "0.01", IN_OPEN_CLOSED(0, 1), AT(ps.ratio, double),
     .doc = "topk: fraction of each tensor's entries sent per push (at least one)"},
    {"ps", "bin_conv", KT_INT, "50", IN_INT(1), AT(ps.bin_conv, int64_t),
     .doc = "adacomp-chen: bin length for convolution weights and biases (L_T; 50 in the paper)"},
    {"ps", "bin_fc", KT_INT, "500", IN_INT(1), AT(ps.bin_fc, int64_t),
     .doc = "adacomp-chen: bin length for the other tensors (fully connected; 500 in the paper)"},
    {"ps", "replicas", KT_INT, "0", IN_INT(0), AT(ps.replicas, int64_t),
     .doc = "ps-sync: gradients aggregated per global step; 0: all workers; fewer than the "
            "workers leaves backup workers"},
    {"ps", "eval_seconds", KT_DOUBLE, "0", GE(0), AT(ps.eval_seconds, double),
     .doc = "supervisor: seconds between evaluations of the whole test set; 0: every "
            "run.eval_every of the servers' clock in worker steps, or every 60 s without "
            "run.eval_every"},

    {"lsgd", "group_size", KT_INT, "0", IN_INT(0), AT(lsgd.group_size, int64_t),
     .doc = "lsgd: ranks per group (consecutive ranks); 0: the ranks of one node"},
    {"lsgd", "c_local", KT_DOUBLE, "0.1", IN_CLOSED_CLOSED(0, 1), AT(lsgd.c_local, double),
     .doc = "lsgd: x <- (1 - c_local) x + c_local * local leader at a distributed step"},
    {"lsgd", "c_global", KT_DOUBLE, "0.1", IN_CLOSED_CLOSED(0, 1), AT(lsgd.c_global, double),
     .doc = "lsgd: x <- (1 - c_global) x + c_global * global leader when it is broadcast"},
    {"lsgd", "p_local", KT_DOUBLE, "0.1", IN_CLOSED_CLOSED(0, 1), AT(lsgd.p_local, double),
     .doc = "lsgd: every local step x <- x - (p_local / tau_local) (x - local leader)"},
    {"lsgd", "p_global", KT_DOUBLE, "0.1", IN_CLOSED_CLOSED(0, 1), AT(lsgd.p_global, double),
     .doc = "lsgd: every local step x <- x - (p_global / tau_global) (x - global leader)"},
    {"lsgd", "tau_local", KT_INT, "256", IN_INT(1), AT(lsgd.tau_local, int64_t),
     .doc = "lsgd: local steps per rank (on average) between distributed steps"},
    {"lsgd", "tau_global", KT_INT, "256", IN_INT(1), AT(lsgd.tau_global, int64_t),
     .doc = "lsgd: local steps per rank between global-leader broadcasts (>= tau_local)"},
    {"lsgd", "loss_window", KT_INT, "10", IN_INT(1), AT(lsgd.loss_window, int64_t),
     .doc = "lsgd: minibatch losses in the running mean that elects leaders"},

    {"easgd", "beta", KT_DOUBLE, "0.9", IN_CLOSED_CLOSED(0, 1), AT(easgd.beta, double),
     .doc = "easgd: moving rate of the center; each replica moves by alpha = beta / ranks"},
    {"easgd", "tau", KT_INT, "1", IN_INT(1), AT(easgd.tau, int64_t),
     .doc = "easgd: steps between elastic updates (the communication period)"},
    {"easgd", "center", KT_ENUM, "replicated", .choices = "replicated|root",
     AT(easgd.center, char *),
     .doc = "easgd: replicated (one allreduce of x_i per update, every rank keeps the center) "
            "or root (reduce to rank 0, which updates the center and broadcasts it)"},

    {"ecl", "round", KT_INT, "8", IN_INT(1), AT(ecl.round, int64_t),
     .doc = "edge consensus: K, the steps of a swap cycle; each edge end swaps once per cycle, "
            "at its phase (a graph file's 'round K' line overrides it)"},
    {"ecl", "sync", KT_BOOL, "false", AT(ecl.sync, bool),
     .doc = "edge consensus: both ends of a due edge swap at the same step (reproducible, "
            "resumes bit for bit); false: the starting end blocks, the neighbour's thread "
            "answers with what it has"},
    {"ecl", "graph_seed", KT_UINT64, "1", AT(ecl.graph_seed, uint64_t),
     .doc = "edge consensus, topology = random: seed of the random connected graph"},
    {"ecl", "mean_degree", KT_DOUBLE, "4", GE(2), AT(ecl.mean_degree, double),
     .doc = "edge consensus, topology = random: edges are added to a random spanning tree "
            "until the mean degree reaches this (capped by the complete graph)"},

    {"compute", "device", KT_ENUM, "cpu", .choices = "cpu|cuda", AT(compute.device, char *),
     .doc = "where the model runs: cpu, or cuda (one GPU per rank, chosen by the rank's "
            "index on its node; needs a build --with-cuda)"},
    {"compute", "threads", KT_INT, "1", IN_INT(1), AT(compute.threads, int64_t),
     .doc = "compute threads per rank (OpenBLAS, oneDNN and the engine's own loops)"},
    {"compute", "kernels", KT_ENUM, "auto", .choices = "auto|dnnl|native",
     AT(compute.kernels, char *),
     .doc = "CPU convolutions: dnnl (oneDNN on channel-blocked activations), native "
            "(dtrain's im2col + OpenBLAS, the reference), auto (dnnl when built with it)"},
    {"compute", "precision", KT_ENUM, "fp32", .choices = "fp32|bf16",
     AT(compute.precision, char *),
     .doc = "linear and conv products: fp32, or bf16 (oneDNN, fp32 accumulation; needs "
            "AVX512-BF16 or AMX); parameters, optimizer, communication stay fp32"},
    {"compute", "tf32", KT_BOOL, "false", AT(compute.tf32, bool),
     .doc = "cuda: fp32 GEMMs on TF32 tensor cores (10-bit mantissas in the products, "
            "fp32 sums); false: full fp32"},
    {"compute", "cuda_graphs", KT_BOOL, "false", AT(compute.cuda_graphs, bool),
     .doc = "cuda: each training step's forward and backward recorded once as a CUDA graph "
            "and replayed (one launch a step instead of one a kernel); off until measured on a "
            "GPU"},
    {"compute", "test_device_memory", KT_BOOL, "false", AT(compute.test_device_memory, bool),
     .doc = "tests only: native CPU kernels behind a backend that acts as a GPU (memory the "
            "host cannot touch outside its calls): the GPU path's host logic on a CPU"},

    {"comm", "transport", KT_ENUM, "mpi", .choices = "mpi|nccl", AT(comm.transport, char *),
     .doc = "how the algorithms' vectors move: mpi (device buffers staged through host "
            "memory), or nccl (needs compute.device = cuda and a build --with-nccl)"},
    {"comm", "nccl_timeout", KT_INT, "600", GE(1), AT(comm.nccl_timeout, int64_t),
     .doc = "seconds a NCCL operation may wait for its peers before the job ends with a "
            "message"},

    {"diloco", "inner_steps", KT_INT, "500", IN_INT(1), AT(diloco.inner_steps, int64_t),
     .doc = "diloco: H, local steps of the inner optimizer (optim.*) per outer step"},
    {"diloco", "inner_time", KT_DOUBLE, "0", GE(0), AT(diloco.inner_time, double),
     .doc = "diloco: > 0: each rank's inner loop lasts this many seconds (at least one step) "
            "instead of inner_steps; pseudo-gradients weighted by samples; 0: off"},
    {"diloco", "outer_lr", KT_DOUBLE, "0.7", GT(0), AT(diloco.outer_lr, double),
     .doc = "diloco: learning rate of the outer SGD on the averaged pseudo-gradient"},
    {"diloco", "outer_momentum", KT_DOUBLE, "0.9", IN_CLOSED_OPEN(0, 1),
     AT(diloco.outer_momentum, double),
     .doc = "diloco: momentum of the outer SGD (b <- mu b + delta)"},
    {"diloco", "nesterov", KT_BOOL, "true", AT(diloco.nesterov, bool),
     .doc = "diloco: outer step theta -= lr (delta + mu b); false: theta -= lr b"},
    {"diloco", "sync_steps", KT_INT, "0", GE(0), AT(diloco.sync_steps, int64_t),
     .doc = "diloco: K, first steps whose gradients are averaged every step (as allreduce) "
            "before the local phase starts"},
    {"diloco", "precision", KT_ENUM, "fp32", .choices = "fp32|bf16|int8",
     AT(diloco.precision, char *),
     .doc = "diloco: pseudo-gradient on the wire: fp32, bf16, or int8 with one fp32 scale "
            "per 256 values; sums in fp32, every rank ends with the same bytes"},
    {"diloco", "error_feedback", KT_ENUM, "auto", .choices = "auto|true|false",
     AT(diloco.error_feedback, char *),
     .doc = "diloco: keep each rank's residual (what its codes left out) and add it to the "
            "next pseudo-gradient; auto: with compress = topk only; true needs bf16, int8 or "
            "topk"},
    {"diloco", "ef_decay", KT_DOUBLE, "1", IN_OPEN_CLOSED(0, 1), AT(diloco.ef_decay, double),
     .doc = "diloco, error feedback: beta; the vector coded is beta e + delta, e the residual"},
    {"diloco", "compress", KT_ENUM, "none", .choices = "none|topk", AT(diloco.compress, char *),
     .doc = "diloco: none (the dense exchange of diloco.precision), or topk: per chunk the "
            "largest values by magnitude, low-bit, gathered by every rank (needs fp32 "
            "precision, allreduce outer_comm)"},
    {"diloco", "density", KT_DOUBLE, "0.02", IN_OPEN_CLOSED(0, 1), AT(diloco.density, double),
     .doc = "diloco, topk: share of each chunk sent, k = max(1, round(density chunk))"},
    {"diloco", "chunk", KT_INT, "4096", IN_INT(64), AT(diloco.chunk, int64_t),
     .doc = "diloco, topk: values per chunk, each with its own k, scale and offsets (the "
            "last chunk may be shorter)"},
    {"diloco", "bits", KT_ENUM, "4", .choices = "2|4|8", AT(diloco.bits, char *),
     .doc = "diloco, topk: bits per value sent, 2, 4 or 8 (codes evenly spaced over "
            "[-scale, scale], scale = the chunk's largest magnitude sent)"},
    {"diloco", "fragments", KT_INT, "1", IN_INT(1), AT(diloco.fragments, int64_t),
     .doc = "diloco: P, contiguous fragments of the flat vector synchronised in turn, "
            "fragment p at local step (p + 1) H / P of each outer loop (streaming DiLoCo)"},
    {"diloco", "overlap", KT_INT, "0", GE(0), AT(diloco.overlap, int64_t),
     .doc = "diloco: inner steps a fragment's exchange stays in flight before it is merged "
            "(< inner_steps / fragments)"},
    {"diloco", "merge", KT_DOUBLE, "0", IN_CLOSED_CLOSED(0, 1), AT(diloco.merge, double),
     .doc = "diloco: alpha; a merged fragment becomes (1 - alpha) new global + alpha local "
            "(0: the local progress made during the overlap is dropped)"},
    {"diloco", "delay", KT_INT, "0", IN_CLOSED_CLOSED(0, 1), AT(diloco.delay, int64_t),
     .doc = "diloco: 1: each outer loop's exchange stays in flight during the next loop and "
            "its outer step is applied on top of that loop's local progress (fragments 1)"},
    {"diloco", "outer_comm", KT_ENUM, "allreduce", .choices = "allreduce|sgp",
     AT(diloco.outer_comm, char *),
     .doc = "diloco: average the pseudo-gradients by an allreduce, or mix them by push-sum "
            "over algorithm.topology (auto: exponential); replicas then differ"},
};

_Static_assert(sizeof keys_table / sizeof keys_table[0] == DECK_NKEYS,
               "DECK_NKEYS (io/deck_internal.h) must be the number of rows of the key table");

const deck_key *const deck_keys = keys_table;

int deck_key_find(const char *section, const char *name)
{
    for (int i = 0; i < DECK_NKEYS; i++)
        if (strcmp(keys_table[i].section, section) == 0 && strcmp(keys_table[i].name, name) == 0)
            return i;
    return -1;
}

static bool section_known(const char *section)
{
    for (int i = 0; i < DECK_NKEYS; i++)
        if (strcmp(keys_table[i].section, section) == 0)
            return true;
    return false;
}

/* The key a misspelt section.name most likely meant, or -1: the closest full
 * name within edit distance 2, else the same key name under another section
 * ("[run] lr = ..." means optim.lr). */
static int key_suggest(const char *section, const char *name)
{
    char want[160], have[160];
    snprintf(want, sizeof want, "%s.%s", section, name);
    int best = -1, best_d = 3;
    for (int i = 0; i < DECK_NKEYS; i++) {
        snprintf(have, sizeof have, "%s.%s", keys_table[i].section, keys_table[i].name);
        int d = deck_edit_distance(want, have);
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    if (best >= 0)
        return best;
    for (int i = 0; i < DECK_NKEYS; i++)
        if (strcasecmp(keys_table[i].name, name) == 0)
            return i;
    return -1;
}

/* "unknown key 'lrr' in [optim]; did you mean 'optim.lr'?" (no prefix). */
void deck_key_unknown_describe(const char *section, const char *name, char *out, size_t cap)
{
    strbuf b = {0};
    int s = key_suggest(section, name);
    if (!*section)
        deck_sb_printf(&b, "'%.60s' appears before any [section] header", name);
    else if (!section_known(section))
        deck_sb_printf(&b, "%.60s.%.60s: unknown section [%.60s]", section, name, section);
    else
        deck_sb_printf(&b, "%.60s.%.60s: unknown key '%.60s' in [%s]", section, name, name, section);
    if (s >= 0) {
        deck_sb_printf(&b, "; did you mean '%s.%s'?", keys_table[s].section, keys_table[s].name);
    } else if (*section && section_known(section)) {
        deck_sb_printf(&b, "; the keys of [%s] are", section);
        const char *sep = " ";
        for (int i = 0; i < DECK_NKEYS; i++)
            if (strcmp(keys_table[i].section, section) == 0) {
                deck_sb_printf(&b, "%s%s", sep, keys_table[i].name);
                sep = ", ";
            }
    } else {
        deck_sb_printf(&b, "; the sections are");
        for (int i = 0; i < DECK_NKEYS; i++)
            if (i == 0 || strcmp(keys_table[i].section, keys_table[i - 1].section) != 0)
                deck_sb_printf(&b, "%s[%s]", i ? ", " : " ", keys_table[i].section);
    }
    snprintf(out, cap, "%s", b.s);
    free(b.s);
}

static const char *type_name(key_type t)
{
    switch (t) {
    case KT_STRING: return "string";
    case KT_INT: return "int";
    case KT_UINT64: return "uint64";
    case KT_DOUBLE: return "double";
    case KT_BOOL: return "bool";
    case KT_ENUM: return "enum";
    }
    return "?";
}

const char *deck_choices(const char *section, const char *name)
{
    int k = deck_key_find(section, name);
    return k >= 0 && keys_table[k].type == KT_ENUM ? deck_key_choices(&keys_table[k]) : "";
}

/* Defaults must satisfy their own checks and enum spellings must fit their
 * fields; a schema that breaks this is a programming error. */
void deck_schema_defaults_fill(dt_config *cfg)
{
    char why[WHY_MAX];
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < DECK_NKEYS; i++) {
        const deck_key *k = &keys_table[i];
        if (k->type == KT_ENUM)
            for (const char *c = deck_key_choices(k); *c;) {
                size_t n = strcspn(c, "|");
                if (n >= k->size)
                    DT_FATAL("deck schema: choice '%.*s' of %s.%s does not fit its %zu-byte field",
                             (int)n, c, k->section, k->name, k->size);
                c += n + (c[n] == '|');
            }
        if (k->def && deck_value_set(k, k->def, cfg, why, sizeof why) < 0)
            DT_FATAL("deck schema: default '%s' of %s.%s is invalid: %s", k->def, k->section,
                     k->name, why);
    }
}

void deck_print_keys(FILE *f)
{
    int kw = 0, dw = 0;
    char full[160], expect[256];
    for (int i = 0; i < DECK_NKEYS; i++) {
        int n = snprintf(full, sizeof full, "%s.%s", keys_table[i].section, keys_table[i].name);
        int d = keys_table[i].def ? (int)strlen(keys_table[i].def) : (int)strlen("(required)");
        kw = n > kw ? n : kw;
        dw = d > dw ? d : dw;
    }
    for (int i = 0; i < DECK_NKEYS; i++) {
        const deck_key *k = &keys_table[i];
        snprintf(full, sizeof full, "%s.%s", k->section, k->name);
        deck_expect_describe(k, expect, sizeof expect);
        const char *def = k->def ? (*k->def ? k->def : "\"\"") : "(required)";
        fprintf(f, "%-*s  %-6s  %-*s  %s [%s]\n", kw, full, type_name(k->type), dw, def, k->doc,
                expect);
    }
}
