/* Input decks: one schema table drives parsing, validation, defaults, the
 * effective deck and the --help reference, so the four cannot drift apart.
 *
 * Lines are fed to libinih by our own reader, which counts them (inih calls
 * it once per line, so the line of the current handler call is the number of
 * lines handed out so far), strips leading whitespace (so an indented line is
 * never taken as an inih continuation of the previous value) and refuses
 * lines longer than inih's buffer instead of letting inih split them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "io/deck.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

/* A deck is a few kilobytes; anything this large is the wrong file. */
#define DECK_BYTES_MAX ((size_t)1 << 20)
/* Room for the messages a value check writes ("item 3 ('x') is ..."). */
#define WHY_MAX 768

typedef enum {
    KT_STRING,
    KT_INT,    /* int64_t field */
    KT_UINT64, /* uint64_t field */
    KT_DOUBLE,
    KT_BOOL,
    KT_ENUM    /* char[] field holding one of the choices */
} key_type;

/* Bounds of KT_INT and KT_DOUBLE values: closed or open at either end. */
enum { B_LO = 1, B_LO_OPEN = 2, B_HI = 4, B_HI_OPEN = 8 };

/* Validates a string value and writes its canonical form to out (cap bytes);
 * on failure writes the reason to why and returns -1. */
typedef int (*norm_fn)(const char *in, char *out, size_t cap, char *why, size_t whycap);

typedef struct deck_key {
    const char *section, *name;
    key_type type;
    const char *def;     /* NULL: required */
    unsigned bounds;     /* B_* */
    double lo, hi;
    const char *choices; /* KT_ENUM: "a|b|c", the first spelling is stored */
    norm_fn norm;        /* KT_STRING: extra validation, canonical form */
    const char *expect;  /* KT_STRING: what a good value looks like */
    const char *hint;    /* appended when a value is rejected */
    bool nonempty;       /* KT_STRING: "" is refused */
    size_t offset, size; /* the field in dt_config */
    const char *doc;
} deck_key;

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

static char *deck_slurp(const char *path, size_t *len);
static int norm_widths(const char *in, char *out, size_t cap, char *why, size_t whycap);
static int norm_epochs(const char *in, char *out, size_t cap, char *why, size_t whycap);

/* Sections appear in the effective deck in this order. Docs are one line;
 * inputs/reference.ini carries the longer explanations. */
static const deck_key keys[] = {
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

    {"algorithm", "mode", KT_ENUM, "local",
     .choices = "local|allreduce|dpsgd|sgp|osgp|adpsgd|ps-async|ps-sync|easgd|lsgd|"
                "pdmm-isvr|admm-isvr|dsgd-ecl",
     AT(algorithm.mode, char *),
     .doc = "local: one rank; allreduce; gossip: dpsgd, sgp, osgp, adpsgd; parameter "
            "server: ps-async, ps-sync; elastic: easgd, lsgd; edge consensus: pdmm-isvr, "
            "admm-isvr, dsgd-ecl (see --help)"},
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
     .choices = "logreg|mlp|mnist_cnn|resnet20_gn|resnet32_gn", AT(model.name, char *),
     .doc = "network to train"},
    {"model", "hidden", KT_STRING, "100", .norm = norm_widths, AT(model.hidden, char *),
     .expect = "comma-separated positive integers, e.g. 256,128",
     .doc = "mlp: widths of the hidden layers, input side first"},
    {"model", "activation", KT_ENUM, "sigmoid", .choices = "sigmoid|relu",
     AT(model.activation, char *), .doc = "mlp: activation of the hidden layers"},
    {"model", "gn_groups", KT_INT, "2", IN_INT(1), AT(model.gn_groups, int64_t),
     .doc = "resnet*_gn: GroupNorm groups per normalisation layer"},

    {"data", "name", KT_ENUM, "fashion-mnist",
     .choices = "fashion-mnist|mnist|cifar10|synthetic", AT(data.name, char *),
     .doc = "data set"},
    {"data", "path", KT_STRING, "/usr/share/datasets/fashion-mnist", AT(data.path, char *),
     .nonempty = true, .expect = "a non-empty path",
     .doc = "directory holding the data set files (unused for synthetic)"},
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

    {"optim", "lr", KT_DOUBLE, NULL, GT(0), AT(optim.lr, double),
     .doc = "learning rate (before optim.lr_scaling, warmup and decay)"},
    {"optim", "batch_size", KT_INT, NULL, IN_INT(1), AT(optim.batch_size, int64_t),
     .doc = "samples per rank per step"},
    {"optim", "momentum", KT_DOUBLE, "0.9", IN_CLOSED_OPEN(0, 1), AT(optim.momentum, double),
     .doc = "momentum coefficient; 0: plain SGD"},
    {"optim", "nesterov", KT_BOOL, "false", AT(optim.nesterov, bool),
     .doc = "use Nesterov momentum"},
    {"optim", "weight_decay", KT_DOUBLE, "0", GE(0), AT(optim.weight_decay, double),
     .doc = "L2 penalty coefficient added to the gradient"},
    {"optim", "lr_scaling", KT_BOOL, "false", AT(optim.lr_scaling, bool),
     .doc = "scale the learning rate by batch_size * ranks / 256"},
    {"optim", "warmup_epochs", KT_DOUBLE, "0", GE(0), AT(optim.warmup_epochs, double),
     .doc = "epochs (fractions allowed) of linear warmup from lr to the scaled lr; 0: none"},
    {"optim", "decay_epochs", KT_STRING, "", .norm = norm_epochs, AT(optim.decay_epochs, char *),
     .expect = "comma-separated epochs (fractions allowed) in increasing order, e.g. 30,60,80 (at most 32), or nothing",
     .doc = "epochs at which the learning rate is multiplied by optim.decay_factor"},
    {"optim", "decay_factor", KT_DOUBLE, "0.1", IN_OPEN_CLOSED(0, 1), AT(optim.decay_factor, double),
     .doc = "learning-rate multiplier applied at each of optim.decay_epochs"},

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
    {"compute", "test_device_memory", KT_BOOL, "false", AT(compute.test_device_memory, bool),
     .doc = "tests only: native CPU kernels behind a backend that acts as a GPU (memory the "
            "host cannot touch outside its calls): the GPU path's host logic on a CPU"},

    {"comm", "transport", KT_ENUM, "mpi", .choices = "mpi|nccl", AT(comm.transport, char *),
     .doc = "how the algorithms' vectors move: mpi (device buffers staged through host "
            "memory), or nccl (needs compute.device = cuda and a build --with-nccl)"},
    {"comm", "nccl_timeout", KT_INT, "600", GE(1), AT(comm.nccl_timeout, int64_t),
     .doc = "seconds a NCCL operation may wait for its peers before the job ends with a "
            "message"},
};

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            DT_FATAL("vsnprintf failed while building the effective deck");
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->s = dt_realloc(b->s, b->cap);
    }
}

static void *field_at(dt_config *cfg, const deck_key *k)
{
    return (char *)cfg + k->offset;
}

static const void *field_at_const(const dt_config *cfg, const deck_key *k)
{
    return (const char *)cfg + k->offset;
}

/* Longest value of key k that still fits on one "name = value" line of the
 * effective deck inside inih's line buffer (value, newline and NUL). */
static size_t value_len_max(const deck_key *k)
{
    size_t line = (size_t)INI_MAX_LINE - 2 - strlen(k->name) - 3;
    return line < k->size - 1 ? line : k->size - 1;
}

/* Optimal-string-alignment distance (adjacent swaps cost 1), ignoring case;
 * strings longer than 63 characters are never close to a key. */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return INT_MAX;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

/* A value or argument as messages show it: control characters as '?', cut
 * after max characters, '' when empty. */
static void text_echo(char *out, size_t cap, const char *s, size_t max)
{
    size_t i = 0, o = 0;
    if (!*s) {
        snprintf(out, cap, "''");
        return;
    }
    for (; s[i] && i < max && o + 4 < cap; i++)
        out[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i] && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static int key_find(const char *section, const char *name)
{
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
            return i;
    return -1;
}

static bool section_known(const char *section)
{
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].section, section) == 0)
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
    for (int i = 0; i < NKEYS; i++) {
        snprintf(have, sizeof have, "%s.%s", keys[i].section, keys[i].name);
        int d = edit_distance(want, have);
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    if (best >= 0)
        return best;
    for (int i = 0; i < NKEYS; i++)
        if (strcasecmp(keys[i].name, name) == 0)
            return i;
    return -1;
}

/* "unknown key 'lrr' in [optim]; did you mean 'optim.lr'?" (no prefix). */
static void unknown_describe(const char *section, const char *name, char *out, size_t cap)
{
    strbuf b = {0};
    int s = key_suggest(section, name);
    if (!*section)
        sb_printf(&b, "'%.60s' appears before any [section] header", name);
    else if (!section_known(section))
        sb_printf(&b, "%.60s.%.60s: unknown section [%.60s]", section, name, section);
    else
        sb_printf(&b, "%.60s.%.60s: unknown key '%.60s' in [%s]", section, name, name, section);
    if (s >= 0) {
        sb_printf(&b, "; did you mean '%s.%s'?", keys[s].section, keys[s].name);
    } else if (*section && section_known(section)) {
        sb_printf(&b, "; the keys of [%s] are", section);
        const char *sep = " ";
        for (int i = 0; i < NKEYS; i++)
            if (strcmp(keys[i].section, section) == 0) {
                sb_printf(&b, "%s%s", sep, keys[i].name);
                sep = ", ";
            }
    } else {
        sb_printf(&b, "; the sections are");
        for (int i = 0; i < NKEYS; i++)
            if (i == 0 || strcmp(keys[i].section, keys[i - 1].section) != 0)
                sb_printf(&b, "%s[%s]", i ? ", " : " ", keys[i].section);
    }
    snprintf(out, cap, "%s", b.s);
    free(b.s);
}

/* ------------------------------------------------------------------------ */
/* Values                                                                   */

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

/* What a good value of k looks like: "a number in [0, 1)". */
static void expect_describe(const deck_key *k, char *out, size_t cap)
{
    const char *what = k->type == KT_INT ? "an integer" : "a number";
    switch (k->type) {
    case KT_STRING:
        snprintf(out, cap, "%s", k->expect ? k->expect : "text");
        return;
    case KT_UINT64:
        snprintf(out, cap, "an integer in [0, %" PRIu64 "]", UINT64_MAX);
        return;
    case KT_BOOL:
        snprintf(out, cap, "true or false (also yes/no, on/off, 1/0)");
        return;
    case KT_ENUM: {
        strbuf b = {0};
        sb_printf(&b, "one of ");
        for (const char *c = k->choices; *c;) {
            size_t n = strcspn(c, "|");
            sb_printf(&b, "%s%.*s", c == k->choices ? "" : ", ", (int)n, c);
            c += n + (c[n] == '|');
        }
        snprintf(out, cap, "%s", b.s);
        free(b.s);
        return;
    }
    case KT_INT:
    case KT_DOUBLE:
        break;
    }
    unsigned bd = k->bounds;
    char lo[32], hi[32];
    /* %.17g would print 0.1 as 0.10000000000000001 */
    snprintf(lo, sizeof lo, k->type == KT_INT ? "%.0f" : "%g", k->lo);
    snprintf(hi, sizeof hi, k->type == KT_INT ? "%.0f" : "%g", k->hi);
    if ((bd & (B_LO | B_LO_OPEN)) && (bd & (B_HI | B_HI_OPEN)))
        snprintf(out, cap, "%s in %c%s, %s%c", what, (bd & B_LO) ? '[' : '(', lo, hi,
                 (bd & B_HI) ? ']' : ')');
    else if (bd & (B_LO | B_LO_OPEN))
        snprintf(out, cap, "%s %s %s", what, (bd & B_LO) ? ">=" : ">", lo);
    else if (bd & (B_HI | B_HI_OPEN))
        snprintf(out, cap, "%s %s %s", what, (bd & B_HI) ? "<=" : "<", hi);
    else
        snprintf(out, cap, "%s", what);
}

/* Full-string strtoll: "" , " 1", "1.5", "1x" are refused. */
static bool int_parse(const char *s, int64_t *out, bool *overflow)
{
    char *end;
    *overflow = false;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return false;
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    *out = (int64_t)v;
    return true;
}

static bool uint_parse(const char *s, uint64_t *out, bool *overflow)
{
    char *end;
    *overflow = false;
    /* strtoull would wrap "-1" to 2^64 - 1 */
    if (!*s || isspace((unsigned char)*s) || *s == '-')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end)
        return false;
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

/* Full-string strtod, finite only; underflow to a denormal or zero counts as
 * out of range too, since it silently changes the number. */
static bool double_parse(const char *s, double *out, bool *overflow)
{
    char *end;
    *overflow = false;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end)
        return false;
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    if (!isfinite(v))
        return false;
    *out = v;
    return true;
}

static bool bounds_ok(const deck_key *k, double v)
{
    if ((k->bounds & B_LO) && !(v >= k->lo))
        return false;
    if ((k->bounds & B_LO_OPEN) && !(v > k->lo))
        return false;
    if ((k->bounds & B_HI) && !(v <= k->hi))
        return false;
    if ((k->bounds & B_HI_OPEN) && !(v < k->hi))
        return false;
    return true;
}

static bool bool_parse(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* One item of a comma-separated list: check the trimmed token `tok` (item
 * number `item`, from 1) against `state` (bounds, the previous item) and write
 * its canonical spelling into buf. 0, or -1 with `why` filled. */
typedef int (*item_norm)(const char *tok, int item, void *state, char *buf, size_t len,
                         char *why, size_t whycap);

/* Comma-separated lists, written back as "a,b,c" without spaces. */
static int list_norm(const char *in, bool allow_empty, int max_items, item_norm norm,
                     void *state, char *out, size_t cap, char *why, size_t whycap)
{
    size_t used = 0;
    int item = 0;
    const char *p = in;
    out[0] = '\0';
    while (isspace((unsigned char)*p))
        p++;
    if (!*p) {
        if (allow_empty)
            return 0;
        snprintf(why, whycap, "the list is empty");
        return -1;
    }
    for (;;) {
        if (++item > max_items) {
            snprintf(why, whycap, "more than %d items", max_items);
            return -1;
        }
        size_t n = strcspn(p, ",");
        char tok[64], buf[64];
        const char *a = p, *z = p + n;
        while (a < z && isspace((unsigned char)*a))
            a++;
        while (z > a && isspace((unsigned char)z[-1]))
            z--;
        if (z == a) {
            snprintf(why, whycap, "item %d is empty", item);
            return -1;
        }
        if ((size_t)(z - a) >= sizeof tok) {
            snprintf(why, whycap, "item %d is too long", item);
            return -1;
        }
        memcpy(tok, a, (size_t)(z - a));
        tok[z - a] = '\0';
        if (norm(tok, item, state, buf, sizeof buf, why, whycap) != 0)
            return -1;
        int w = snprintf(out + used, cap - used, "%s%s", item > 1 ? "," : "", buf);
        if (w < 0 || (size_t)w >= cap - used) {
            snprintf(why, whycap, "the list is longer than %zu characters", cap - 1);
            out[0] = '\0';
            return -1;
        }
        used += (size_t)w;
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

/* Positive layer widths (model.hidden): integers in [1, INT_MAX]. */
static int width_norm(const char *tok, int item, void *state, char *buf, size_t len, char *why,
                      size_t whycap)
{
    (void)state;
    int64_t v = 0;
    bool overflow = false;
    if (!int_parse(tok, &v, &overflow)) {
        snprintf(why, whycap, "item %d ('%s') is not an integer", item, tok);
        return -1;
    }
    if (v < 1 || v > INT_MAX) {
        snprintf(why, whycap, "item %d (%s) is not in [1, %d]", item, tok, INT_MAX);
        return -1;
    }
    snprintf(buf, len, "%" PRId64, v);
    return 0;
}

static int norm_widths(const char *in, char *out, size_t cap, char *why, size_t whycap)
{
    return list_norm(in, false, INT_MAX, width_norm, NULL, out, cap, why, whycap);
}

/* Decay epochs: non-negative numbers (fractions allowed: the schedule runs on
 * the fractional epoch of every step), strictly increasing. */
static int epoch_norm(const char *tok, int item, void *state, char *buf, size_t len, char *why,
                      size_t whycap)
{
    double *prev = state, v;
    char *end;
    errno = 0;
    v = strtod(tok, &end);
    if (*end || errno || !isfinite(v) || v < 0) {
        snprintf(why, whycap, "item %d ('%s') is not a number >= 0", item, tok);
        return -1;
    }
    if (item > 1 && v <= *prev) {
        snprintf(why, whycap, "item %d (%s) is not larger than the one before (%.17g)", item, tok,
                 *prev);
        return -1;
    }
    *prev = v;
    snprintf(buf, len, "%.17g", v);
    return 0;
}

static int norm_epochs(const char *in, char *out, size_t cap, char *why, size_t whycap)
{
    /* the schedule (optim/sgd.h) holds at most 32 decay epochs */
    double prev = 0;
    return list_norm(in, true, 32, epoch_norm, &prev, out, cap, why, whycap);
}

/* Parse and check value for key k and store it in cfg. On failure why says
 * what was expected (and what is wrong, where that is more than the type). */
static int value_set(const deck_key *k, const char *value, dt_config *cfg, char *why,
                     size_t whycap)
{
    char expect[256];
    bool overflow = false;
    void *f = field_at(cfg, k);
    expect_describe(k, expect, sizeof expect);

    switch (k->type) {
    case KT_INT: {
        int64_t v;
        if (!int_parse(value, &v, &overflow) || !bounds_ok(k, (double)v)) {
            snprintf(why, whycap, "%sexpected %s", overflow ? "out of range; " : "", expect);
            return -1;
        }
        *(int64_t *)f = v;
        return 0;
    }
    case KT_UINT64: {
        uint64_t v;
        if (!uint_parse(value, &v, &overflow)) {
            snprintf(why, whycap, "%sexpected %s", overflow ? "out of range; " : "", expect);
            return -1;
        }
        *(uint64_t *)f = v;
        return 0;
    }
    case KT_DOUBLE: {
        double v;
        if (!double_parse(value, &v, &overflow) || !bounds_ok(k, v)) {
            snprintf(why, whycap, "%sexpected %s", overflow ? "out of range; " : "", expect);
            return -1;
        }
        *(double *)f = v;
        return 0;
    }
    case KT_BOOL: {
        bool v;
        if (!bool_parse(value, &v)) {
            snprintf(why, whycap, "expected %s", expect);
            return -1;
        }
        *(bool *)f = v;
        return 0;
    }
    case KT_ENUM: {
        size_t vlen = strlen(value);
        int best_d = 3;
        const char *best = NULL;
        size_t best_n = 0;
        for (const char *c = k->choices; *c;) {
            size_t n = strcspn(c, "|");
            if (n == vlen && strncasecmp(c, value, n) == 0) {
                memset(f, 0, k->size);
                memcpy(f, c, n);
                return 0;
            }
            char choice[64];
            snprintf(choice, sizeof choice, "%.*s", (int)n, c);
            int d = edit_distance(value, choice);
            if (d < best_d) {
                best_d = d;
                best = c;
                best_n = n;
            }
            c += n + (c[n] == '|');
        }
        int w = snprintf(why, whycap, "expected %s", expect);
        if (k->hint && w >= 0 && (size_t)w < whycap)
            w += snprintf(why + w, whycap - (size_t)w, " (%s)", k->hint);
        if (best && w >= 0 && (size_t)w < whycap)
            snprintf(why + w, whycap - (size_t)w, "; did you mean '%.*s'?", (int)best_n, best);
        return -1;
    }
    case KT_STRING:
        break;
    }

    size_t len = strlen(value), max = value_len_max(k);
    for (const char *p = value; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            snprintf(why, whycap, "control character 0x%02x at position %zu; expected %s",
                     (unsigned char)*p, (size_t)(p - value) + 1, expect);
            return -1;
        }
        /* inih would cut the value there when the effective deck is re-read */
        if (*p == ';' && p > value && isspace((unsigned char)p[-1])) {
            snprintf(why, whycap, "' ;' would start a comment in the deck; expected %s", expect);
            return -1;
        }
    }
    if (len > max) {
        snprintf(why, whycap, "too long (%zu characters; at most %zu fit on one deck line)", len,
                 max);
        return -1;
    }
    if (k->nonempty && len == 0) {
        snprintf(why, whycap, "expected %s", expect);
        return -1;
    }
    char canon[DT_PATH_MAX];
    if (k->norm) {
        char reason[WHY_MAX / 2];
        if (k->norm(value, canon, k->size < sizeof canon ? k->size : sizeof canon, reason,
                    sizeof reason) < 0) {
            snprintf(why, whycap, "expected %s; %s", expect, reason);
            return -1;
        }
    } else {
        snprintf(canon, sizeof canon, "%s", value);
    }
    /* zero the tail so two parses of one deck compare equal byte for byte */
    memset(f, 0, k->size);
    memcpy(f, canon, strlen(canon));
    return 0;
}

/* The value as the effective deck writes it; doubles in the shortest form
 * that reads back to the same bits. */
static void value_format(const deck_key *k, const dt_config *cfg, char *out, size_t cap)
{
    const void *f = field_at_const(cfg, k);
    switch (k->type) {
    case KT_STRING:
    case KT_ENUM:
        snprintf(out, cap, "%.*s", (int)k->size, (const char *)f);
        return;
    case KT_INT:
        snprintf(out, cap, "%" PRId64, *(const int64_t *)f);
        return;
    case KT_UINT64:
        snprintf(out, cap, "%" PRIu64, *(const uint64_t *)f);
        return;
    case KT_BOOL:
        snprintf(out, cap, "%s", *(const bool *)f ? "true" : "false");
        return;
    case KT_DOUBLE: {
        double v = *(const double *)f;
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(out, cap, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                return;
        }
        return;
    }
    }
}

/* Defaults must satisfy their own checks and enum spellings must fit their
 * fields; a schema that breaks this is a programming error. */
static void schema_defaults_fill(dt_config *cfg)
{
    char why[WHY_MAX];
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < NKEYS; i++) {
        const deck_key *k = &keys[i];
        if (k->type == KT_ENUM)
            for (const char *c = k->choices; *c;) {
                size_t n = strcspn(c, "|");
                if (n >= k->size)
                    DT_FATAL("deck schema: choice '%.*s' of %s.%s does not fit its %zu-byte field",
                             (int)n, c, k->section, k->name, k->size);
                c += n + (c[n] == '|');
            }
        if (k->def && value_set(k, k->def, cfg, why, sizeof why) < 0)
            DT_FATAL("deck schema: default '%s' of %s.%s is invalid: %s", k->def, k->section,
                     k->name, why);
    }
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */

/* A [group.NAME] section as written: its ranks and the keys it overrides,
 * from the deck and from group.NAME.section.key=value arguments. */
typedef struct group_src {
    char name[DT_GROUP_NAME_MAX];
    int line;                 /* of its [group.NAME] header */
    int64_t ranks;
    int ranks_line, ranks_arg;
    int set_line[sizeof keys / sizeof keys[0]];
    int set_arg[sizeof keys / sizeof keys[0]];
    char *deck_value[sizeof keys / sizeof keys[0]];
    char *arg_value[sizeof keys / sizeof keys[0]];
} group_src;

typedef struct parse_ctx {
    const char *name; /* deck name for messages */
    const char *text; /* whole deck */
    size_t len, pos;
    int line;         /* lines handed to inih so far */
    int err_line;     /* line of the first error we recorded; 0: none */
    char section[64]; /* the reader's view of the current section */
    char err[2048];
    int set_line[sizeof keys / sizeof keys[0]]; /* 0: not set by the deck */
    int set_arg[sizeof keys / sizeof keys[0]];  /* 0: not set by an override */
    dt_config cfg;
    int ngroups;
    group_src *groups[DT_GROUPS_MAX];
} parse_ctx;

static void ctx_fail(parse_ctx *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ctx_fail(parse_ctx *c, int line, const char *fmt, ...)
{
    if (c->err_line)
        return;
    c->err_line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

/* ---- rank groups ---------------------------------------------------------- */

/* Keys every group shares: where the job writes and whether it continues. */
static bool key_shared(int k)
{
    return strcmp(keys[k].section, "run") == 0 &&
           (strcmp(keys[k].name, "output_dir") == 0 || strcmp(keys[k].name, "resume") == 0 ||
            strcmp(keys[k].name, "overwrite") == 0);
}

static group_src *group_find(const parse_ctx *c, const char *name, size_t len)
{
    for (int i = 0; i < c->ngroups; i++)
        if (strlen(c->groups[i]->name) == len && strncmp(c->groups[i]->name, name, len) == 0)
            return c->groups[i];
    return NULL;
}

/* A [group.NAME] header: names are directory names, so a safe alphabet. */
static void group_begin(parse_ctx *c, const char *name, int line)
{
    size_t len = strlen(name);
    bool ok = len > 0 && len < DT_GROUP_NAME_MAX && name[0] != '-';
    for (size_t i = 0; i < len && ok; i++)
        ok = isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '_';
    if (!ok) {
        ctx_fail(c, line, "%s:%d: [group.%.60s]: a group name is 1 to %d letters, digits, '-' "
                 "or '_' (not starting with '-'); it names the group's output directory",
                 c->name, line, name, DT_GROUP_NAME_MAX - 1);
        return;
    }
    group_src *g = group_find(c, name, len);
    if (g) {
        ctx_fail(c, line, "%s:%d: [group.%s]: the group already begins on line %d; give each "
                 "group one section", c->name, line, name, g->line);
        return;
    }
    if (c->ngroups == DT_GROUPS_MAX) {
        ctx_fail(c, line, "%s:%d: [group.%s]: more than %d groups", c->name, line, name,
                 DT_GROUPS_MAX);
        return;
    }
    g = dt_calloc(1, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->line = line;
    c->groups[c->ngroups++] = g;
}

/* One key of group g, from deck line `line` or command-line argument `arg`
 * (the other is 0): validated now, applied when the group is built. On error
 * writes "group.NAME.key = value: reason" to why and returns -1. */
static int group_key_record(group_src *g, const char *key, const char *value, int line, int arg,
                            char *why, size_t cap)
{
    char shown[256];
    text_echo(shown, sizeof shown, value, 120);
    if (strcmp(key, "ranks") == 0) {
        int64_t v;
        bool overflow = false;
        int *seen = line ? &g->ranks_line : &g->ranks_arg;
        if (*seen) {
            snprintf(why, cap, "group.%s.ranks: duplicate key (already given by %s %d)", g->name,
                     line ? "line" : "command-line argument", *seen);
            return -1;
        }
        if (!int_parse(value, &v, &overflow) || v < 1 || v > INT_MAX) {
            snprintf(why, cap, "group.%s.ranks = %s: expected an integer >= 1 (the number of "
                     "ranks of the group)", g->name, shown);
            return -1;
        }
        *seen = line ? line : arg;
        g->ranks = v;
        return 0;
    }
    char sec[64], what[1024];
    const char *dot = strchr(key, '.');
    if (!dot || dot == key || (size_t)(dot - key) >= sizeof sec || !dot[1]) {
        snprintf(why, cap, "group.%s: '%.60s' is not a key; a group section holds 'ranks = N' "
                 "and overrides written 'section.key = value' (e.g. optim.lr = 0.05)", g->name,
                 key);
        return -1;
    }
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - key), key);
    int k = key_find(sec, dot + 1);
    if (k < 0) {
        unknown_describe(sec, dot + 1, what, sizeof what);
        snprintf(why, cap, "group.%s.%s", g->name, what);
        return -1;
    }
    if (key_shared(k)) {
        snprintf(why, cap, "group.%s.%s: cannot differ between groups (every group writes to "
                 "run.output_dir/<group> and they stop and resume together); set it outside "
                 "the [group.*] sections", g->name, key);
        return -1;
    }
    int *seen = line ? &g->set_line[k] : &g->set_arg[k];
    if (*seen) {
        snprintf(why, cap, "group.%s.%s: duplicate key (already given by %s %d)", g->name, key,
                 line ? "line" : "command-line argument", *seen);
        return -1;
    }
    dt_config *scratch = dt_calloc(1, sizeof *scratch);
    char reason[WHY_MAX];
    int rc = value_set(&keys[k], value, scratch, reason, sizeof reason);
    free(scratch);
    if (rc < 0) {
        snprintf(why, cap, "group.%s.%s = %s: %s", g->name, key, shown, reason);
        return -1;
    }
    *seen = line ? line : arg;
    char **slot = line ? &g->deck_value[k] : &g->arg_value[k];
    *slot = dt_malloc(strlen(value) + 1);
    strcpy(*slot, value);
    return 0;
}

static void groups_free(parse_ctx *c)
{
    for (int i = 0; i < c->ngroups; i++) {
        for (int k = 0; k < NKEYS; k++) {
            free(c->groups[i]->deck_value[k]);
            free(c->groups[i]->arg_value[k]);
        }
        free(c->groups[i]);
    }
    c->ngroups = 0;
}

/* inih's fgets-like reader: exactly one deck line per call. */
static char *deck_reader(char *buf, int num, void *stream)
{
    parse_ctx *c = stream;
    if (c->pos >= c->len || num < 3)
        return NULL;
    const char *start = c->text + c->pos;
    const char *eol = memchr(start, '\n', c->len - c->pos);
    size_t n = eol ? (size_t)(eol - start) : c->len - c->pos;
    c->pos += n + (eol != NULL);
    c->line++;

    // inih skips the same leading white space (isspace: \r, \v and \f too), so
    // a header is seen here exactly when inih reports its section
    while (n > 0 && isspace((unsigned char)*start)) {
        start++;
        n--;
    }
    if (memchr(start, '\0', n)) {
        ctx_fail(c, c->line, "%s:%d: NUL byte in the line; a deck is a text file", c->name,
                 c->line);
        strcpy(buf, "\n");
        return buf;
    }
    if (*start == '[') {
        size_t e = strcspn(start + 1, "]\n");
        snprintf(c->section, sizeof c->section, "%.*s", (int)(e < n ? e : n - 1), start + 1);
        if (strncmp(c->section, "group.", 6) == 0)
            group_begin(c, c->section + 6, c->line);
    }
    if (n + 2 > (size_t)num) {
        /* name the key, as every other message does */
        size_t kn = strcspn(start, "=:");
        while (kn > 0 && kn < n && isspace((unsigned char)start[kn - 1]))
            kn--;
        if (*start != ';' && *start != '#' && *start != '[' && kn < n)
            ctx_fail(c, c->line, "%s:%d: %s.%.*s: line is %zu characters long; at most %d fit",
                     c->name, c->line, c->section, (int)(kn > 60 ? 60 : kn), start, n, num - 2);
        else if (*start != ';' && *start != '#')
            ctx_fail(c, c->line, "%s:%d: line is %zu characters long; at most %d fit", c->name,
                     c->line, n, num - 2);
        strcpy(buf, ";\n");
        return buf;
    }
    memcpy(buf, start, n);
    buf[n] = '\n';
    buf[n + 1] = '\0';
    return buf;
}

static int deck_handler(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    int line = c->line;
    if (c->err_line)
        return 1; /* only the first error is reported */
    if (strncmp(section, "group.", 6) == 0) {
        group_src *g = group_find(c, section + 6, strlen(section + 6));
        char why[WHY_MAX + 1024];
        if (!g) /* the reader registered every valid header */
            DT_FATAL("%s:%d: [%s] was not registered", c->name, line, section);
        if (group_key_record(g, name, value, line, 0, why, sizeof why) < 0) {
            ctx_fail(c, line, "%s:%d: %s", c->name, line, why);
            return 0;
        }
        return 1;
    }
    int k = key_find(section, name);
    if (k < 0) {
        char what[1024];
        unknown_describe(section, name, what, sizeof what);
        ctx_fail(c, line, "%s:%d: %s", c->name, line, what);
        return 0;
    }
    if (c->set_line[k]) {
        ctx_fail(c, line, "%s:%d: %s.%s: duplicate key (already set on line %d)", c->name, line,
                 section, name, c->set_line[k]);
        return 0;
    }
    c->set_line[k] = line;
    char why[WHY_MAX], shown[256];
    if (value_set(&keys[k], value, &c->cfg, why, sizeof why) < 0) {
        text_echo(shown, sizeof shown, value, 200);
        ctx_fail(c, line, "%s:%d: %s.%s = %s: %s", c->name, line, section, name, shown, why);
        return 0;
    }
    return 1;
}

/* Line `line` of the deck (1-based), for syntax-error messages. */
static void line_text(const char *text, size_t len, int line, char *out, size_t cap)
{
    const char *p = text, *end = text + len;
    for (int i = 1; i < line && p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    size_t n = strcspn(p, "\r\n");
    if (n > (size_t)(end - p))
        n = (size_t)(end - p);
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    snprintf(out, cap, "%.*s%s", (int)(n > 60 ? 60 : n), p, n > 60 ? "..." : "");
}

static void str_trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (isspace((unsigned char)s[a]))
        a++;
    memmove(s, s + a, n - a + 1);
}

/* "section.key=value" arguments, applied after the deck. */
static int overrides_apply(parse_ctx *c, int noverrides, char *const *overrides)
{
    for (int i = 0; i < noverrides; i++) {
        const char *arg = overrides[i] ? overrides[i] : "";
        char where[320], shown[256];
        text_echo(shown, sizeof shown, arg, 200);
        snprintf(where, sizeof where, "command-line argument %d ('%s')", i + 1,
                 *arg ? shown : "");
        const char *eq = strchr(arg, '=');
        size_t klen = eq ? (size_t)(eq - arg) : 0;
        char key[128];
        if (!eq || klen >= sizeof key) {
            return dt_err_set("%s: expected section.key=value, e.g. optim.lr=0.05", where);
        }
        memcpy(key, arg, klen);
        key[klen] = '\0';
        str_trim(key);
        char *dot = strchr(key, '.');
        if (!dot || dot == key || !dot[1])
            return dt_err_set("%s: expected section.key=value, e.g. optim.lr=0.05", where);
        if (strncmp(key, "group.", 6) == 0) {
            const char *gname = key + 6, *gdot = strchr(gname, '.');
            group_src *g = gdot ? group_find(c, gname, (size_t)(gdot - gname)) : NULL;
            if (!g) {
                strbuf b = {0};
                sb_printf(&b, "%s: expected group.NAME.section.key=value or group.NAME.ranks=N "
                          "with NAME a [group.NAME] of the deck", where);
                for (int i = 0; i < c->ngroups; i++)
                    sb_printf(&b, "%s%s", i ? ", " : "; its groups are ", c->groups[i]->name);
                if (!c->ngroups)
                    sb_printf(&b, "; the deck has no group sections");
                dt_err_set("%s", b.s);
                free(b.s);
                return -1;
            }
            char *value = dt_malloc(strlen(eq + 1) + 1), why[WHY_MAX + 1024];
            strcpy(value, eq + 1);
            str_trim(value);
            int rc = group_key_record(g, gdot + 1, value, 0, i + 1, why, sizeof why);
            free(value);
            if (rc < 0)
                return dt_err_set("%s: %s", where, why);
            continue;
        }
        *dot = '\0';
        const char *section = key, *name = dot + 1;
        int k = key_find(section, name);
        if (k < 0) {
            char what[1024];
            unknown_describe(section, name, what, sizeof what);
            return dt_err_set("%s: %s", where, what);
        }
        if (c->set_arg[k])
            return dt_err_set("%s: %s.%s was already given by command-line argument %d", where,
                              section, name, c->set_arg[k]);
        c->set_arg[k] = i + 1;
        char *value = dt_malloc(strlen(eq + 1) + 1);
        strcpy(value, eq + 1);
        str_trim(value);
        char why[WHY_MAX];
        int rc = value_set(&keys[k], value, &c->cfg, why, sizeof why);
        if (rc < 0) {
            text_echo(shown, sizeof shown, value, 200);
            dt_err_set("%s: %s.%s = %s: %s", where, section, name, shown, why);
        }
        free(value);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The effective deck of cfg. With `set` (per key: given by the deck or an
 * argument), required keys that were not given are left out, so the text
 * still reads back when a group supplies them. */
static void effective_append(strbuf *b, const dt_config *cfg, const int *set)
{
    char v[DT_PATH_MAX + 32];
    for (int i = 0; i < NKEYS; i++) {
        const deck_key *k = &keys[i];
        if (i == 0 || strcmp(k->section, keys[i - 1].section) != 0)
            sb_printf(b, "\n[%s]\n", k->section);
        if (set && !k->def && !set[i])
            continue;
        value_format(k, cfg, v, sizeof v);
        sb_printf(b, "; %s\n%s =%s%s\n", k->doc, k->name, *v ? " " : "", v);
    }
}

static char *effective_build(const dt_config *cfg)
{
    strbuf b = {0};
    sb_printf(&b, "; dtrain effective deck: every key with the value this run used.\n"
                  "; Reading it back gives the same configuration.\n");
    effective_append(&b, cfg, NULL);
    return b.s;
}

/* Parse the deck text and apply the overrides: c->cfg is the configuration
 * outside any group, c->groups what the group sections say. NULL on error. */
static parse_ctx *ctx_parse(const char *name, const char *text, size_t len, int noverrides,
                            char *const *overrides)
{
    parse_ctx *c = dt_calloc(1, sizeof *c);
    c->name = name ? name : "(deck)";
    c->text = text;
    c->len = len;
    schema_defaults_fill(&c->cfg);

    int rc = ini_parse_stream(deck_reader, c, deck_handler, c);
    if (rc == -2)
        DT_FATAL("%s: libinih ran out of memory", c->name);
    if (rc > 0 && (!c->err_line || rc < c->err_line)) {
        char what[96];
        line_text(text, len, rc, what, sizeof what);
        dt_err_set("%s:%d: syntax error in '%s': expected '[section]', 'key = value' or a "
                   "comment (';' or '#')", c->name, rc, what);
        goto fail;
    }
    if (c->err_line || rc != 0) {
        if (c->err_line)
            dt_err_set("%s", c->err);
        else
            dt_err_set("%s: the INI parser failed (code %d)", c->name, rc);
        goto fail;
    }
    if (overrides_apply(c, noverrides > 0 ? noverrides : 0, overrides) < 0)
        goto fail;
    return c;
fail:
    groups_free(c);
    free(c);
    return NULL;
}

/* -1 with the message if a required key is given neither outside the groups
 * nor by group g (NULL: no group). */
static int required_check(const parse_ctx *c, const group_src *g)
{
    int missing = -1, nmissing = 0;
    for (int i = 0; i < NKEYS; i++)
        if (!keys[i].def && !c->set_line[i] && !c->set_arg[i] &&
            !(g && (g->set_line[i] || g->set_arg[i]))) {
            if (missing < 0)
                missing = i;
            nmissing++;
        }
    if (missing < 0)
        return 0;
    const deck_key *k = &keys[missing];
    char in[DT_GROUP_NAME_MAX + 64] = "";
    if (g)
        snprintf(in, sizeof in, " for [group.%s] (line %d)", g->name, g->line);
    return dt_err_set("%s: missing required key '%s.%s'%s (%s); add '%s = ...' under [%s] or "
                      "pass %s.%s=...%s", c->name, k->section, k->name, in, k->doc, k->name,
                      k->section, k->section, k->name,
                      nmissing > 1 ? " (and other required keys are missing too)" : "");
}

static int deck_parse_text(const char *name, const char *text, size_t len, int noverrides,
                           char *const *overrides, dt_config *cfg, char **effective)
{
    if (effective)
        *effective = NULL;
    parse_ctx *c = ctx_parse(name, text, len, noverrides, overrides);
    if (!c)
        return -1;
    int rc = required_check(c, NULL);
    if (rc == 0) {
        if (effective)
            *effective = effective_build(&c->cfg);
        *cfg = c->cfg;
    }
    groups_free(c);
    free(c);
    return rc;
}

/* Group g's configuration: the base, its section, its arguments, and its
 * own output directory. */
static int group_build(const parse_ctx *c, const group_src *g, dt_group *out)
{
    char why[WHY_MAX];
    if (!g->ranks_line && !g->ranks_arg)
        return dt_err_set("%s:%d: [group.%s]: missing 'ranks = N' (how many ranks the group "
                          "takes)", c->name, g->line, g->name);
    if (required_check(c, g) < 0)
        return -1;
    out->cfg = c->cfg;
    for (int k = 0; k < NKEYS; k++) {
        const char *v = g->arg_value[k] ? g->arg_value[k] : g->deck_value[k];
        if (v && value_set(&keys[k], v, &out->cfg, why, sizeof why) < 0)
            DT_FATAL("group.%s.%s.%s = %s was validated but no longer applies: %s", g->name,
                     keys[k].section, keys[k].name, v, why);
    }
    char dir[DT_PATH_MAX + DT_GROUP_NAME_MAX + 2];
    snprintf(dir, sizeof dir, "%s/%s", c->cfg.run.output_dir, g->name);
    int od = key_find("run", "output_dir");
    if (value_set(&keys[od], dir, &out->cfg, why, sizeof why) < 0)
        return dt_err_set("%s: run.output_dir = '%s' with the group directory '/%s' appended: "
                          "%s", c->name, c->cfg.run.output_dir, g->name, why);
    snprintf(out->name, sizeof out->name, "%s", g->name);
    out->ranks = (int)g->ranks;
    if (g->ranks_arg)
        snprintf(out->where, sizeof out->where, "command-line argument %d (group.%s.ranks)",
                 g->ranks_arg, g->name);
    else
        snprintf(out->where, sizeof out->where, "%s:%d: group.%s.ranks", c->name,
                 g->ranks_line, g->name);
    return 0;
}

/* The job's effective deck: the base, then each group section with the
 * keys it sets, in canonical form. Reads back to the same job. */
static char *job_effective(const parse_ctx *c, const dt_job *job)
{
    strbuf b = {0};
    int set[sizeof keys / sizeof keys[0]];
    for (int i = 0; i < NKEYS; i++)
        set[i] = c->set_line[i] || c->set_arg[i];
    sb_printf(&b, "; dtrain effective deck: every key with the value this run used.\n"
                  "; Reading it back gives the same configuration.\n");
    effective_append(&b, &c->cfg, c->ngroups ? set : NULL);
    char v[DT_PATH_MAX + 32];
    for (int gi = 0; gi < c->ngroups; gi++) {
        const group_src *g = c->groups[gi];
        const dt_group *out = &job->groups[gi];
        sb_printf(&b, "\n; world ranks %d..%d\n[group.%s]\nranks = %d\n", out->first,
                  out->first + out->ranks - 1, g->name, out->ranks);
        for (int k = 0; k < NKEYS; k++)
            if (g->deck_value[k] || g->arg_value[k]) {
                value_format(&keys[k], &out->cfg, v, sizeof v);
                sb_printf(&b, "%s.%s =%s%s\n", keys[k].section, keys[k].name, *v ? " " : "",
                          v);
            }
    }
    return b.s;
}

static int job_parse_text(const char *name, const char *text, size_t len, int noverrides,
                          char *const *overrides, int world_size, dt_job *job)
{
    memset(job, 0, sizeof *job);
    parse_ctx *c = ctx_parse(name, text, len, noverrides, overrides);
    if (!c)
        return -1;
    int rc = 0;
    if (c->ngroups == 0) {
        rc = required_check(c, NULL);
        if (rc == 0) {
            job->ngroups = 1;
            job->groups = dt_calloc(1, sizeof *job->groups);
            job->groups[0].cfg = c->cfg;
            job->groups[0].ranks = world_size;
            job->groups[0].effective = effective_build(&c->cfg);
            snprintf(job->groups[0].where, sizeof job->groups[0].where, "the job");
            job->effective = effective_build(&c->cfg);
        }
        goto out;
    }
    job->ngroups = c->ngroups;
    job->groups = dt_calloc((size_t)c->ngroups, sizeof *job->groups);
    int64_t total = 0;
    for (int gi = 0; gi < c->ngroups && rc == 0; gi++) {
        dt_group *g = &job->groups[gi];
        rc = group_build(c, c->groups[gi], g);
        if (rc == 0) {
            g->first = (int)total;
            total += g->ranks;
        }
    }
    if (rc == 0 && world_size > 0 && total != world_size) {
        strbuf b = {0};
        sb_printf(&b, "%s: the groups take %lld rank(s) (", c->name, (long long)total);
        for (int gi = 0; gi < c->ngroups; gi++)
            sb_printf(&b, "%s%s: %d from %s", gi ? "; " : "", job->groups[gi].name,
                      job->groups[gi].ranks, job->groups[gi].where);
        sb_printf(&b, ") but the job has %d; group.*.ranks must add up to the number of ranks",
                  world_size);
        dt_err_set("%s", b.s);
        free(b.s);
        rc = -1;
    }
    if (rc == 0) {
        for (int gi = 0; gi < c->ngroups; gi++) {
            dt_group *g = &job->groups[gi];
            strbuf b = {0};
            sb_printf(&b, "; group %s of the job deck %s: world ranks %d..%d\n", g->name,
                      c->name, g->first, g->first + g->ranks - 1);
            char *eff = effective_build(&g->cfg);
            sb_printf(&b, "%s", eff);
            free(eff);
            g->effective = b.s;
        }
        job->effective = job_effective(c, job);
    }
out:
    groups_free(c);
    free(c);
    if (rc != 0)
        deck_job_free(job);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */

int deck_parse_string(const char *name, const char *text, int noverrides,
                      char *const *overrides, dt_config *cfg, char **effective)
{
    if (!text) {
        if (effective)
            *effective = NULL;
        return dt_err_set("%s: no deck text", name ? name : "(deck)");
    }
    return deck_parse_text(name, text, strlen(text), noverrides, overrides, cfg, effective);
}

int deck_parse(const char *path, int noverrides, char *const *overrides, dt_config *cfg,
               char **effective)
{
    if (effective)
        *effective = NULL;
    size_t len = 0;
    char *text = deck_slurp(path, &len);
    if (!text)
        return -1;
    int rc = deck_parse_text(path, text, len, noverrides, overrides, cfg, effective);
    free(text);
    return rc;
}

/* The deck file's bytes, NUL-terminated; NULL with dt_err_set() on error. */
static char *deck_slurp(const char *path, size_t *len)
{
    if (!path || !*path) {
        dt_err_set("deck: no deck file given");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        dt_err_set("%s: cannot open the deck: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = dt_malloc(cap);
    while (!feof(f) && !ferror(f)) {
        if (n + 1 >= cap) {
            if (cap >= DECK_BYTES_MAX) {
                fclose(f);
                free(buf);
                dt_err_set("%s: larger than %zu bytes; is this really a deck?", path,
                           DECK_BYTES_MAX);
                return NULL;
            }
            cap *= 2;
            buf = dt_realloc(buf, cap);
        }
        n += fread(buf + n, 1, cap - 1 - n, f);
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(buf);
        dt_err_set("%s: cannot read the deck: %s", path, strerror(e));
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

int deck_parse_job(const char *path, int noverrides, char *const *overrides, int world_size,
                   dt_job *job)
{
    memset(job, 0, sizeof *job);
    size_t len = 0;
    char *text = deck_slurp(path, &len);
    if (!text)
        return -1;
    int rc = job_parse_text(path, text, len, noverrides, overrides, world_size, job);
    free(text);
    return rc;
}

int deck_load_job(MPI_Comm world, const char *path, int noverrides, char *const *overrides,
                  dt_job *job)
{
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &size));
    memset(job, 0, sizeof *job);
    /* head[0]: 0, or -1 when rank 0 could not read the file; head[1]: bytes */
    long long head[2] = {0, 0};
    size_t len = 0;
    char *text = NULL;
    if (rank == 0) {
        text = deck_slurp(path, &len);
        if (!text) {
            const char *msg = dt_err_msg();
            len = strlen(msg);
            text = dt_malloc(len + 1);
            strcpy(text, msg);
            head[0] = -1;
        }
        head[1] = (long long)len;
    }
    MPI_CHECK(MPI_Bcast(head, 2, MPI_LONG_LONG, 0, world));
    len = (size_t)head[1];
    if (rank != 0)
        text = dt_malloc(len + 1);
    MPI_CHECK(MPI_Bcast(text, (int)len + 1, MPI_CHAR, 0, world));
    int rc;
    if (head[0] != 0) {
        dt_err_set("%s", text);
        rc = -1;
    } else {
        rc = job_parse_text(path, text, len, noverrides, overrides, size, job);
    }
    free(text);
    return rc;
}

const dt_group *deck_job_group(const dt_job *job, int rank)
{
    for (int i = 0; i < job->ngroups; i++)
        if (rank >= job->groups[i].first && rank < job->groups[i].first + job->groups[i].ranks)
            return &job->groups[i];
    return NULL;
}

void deck_job_free(dt_job *job)
{
    for (int i = 0; i < job->ngroups && job->groups; i++)
        free(job->groups[i].effective);
    free(job->groups);
    free(job->effective);
    memset(job, 0, sizeof *job);
}

int deck_load(MPI_Comm comm, int root, const char *path, int noverrides,
              char *const *overrides, dt_config *cfg, char **effective)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (effective)
        *effective = NULL;

    /* head[0]: 0 or -1; head[1]: bytes of the message or effective deck */
    int head[2] = {0, 0};
    char *payload = NULL;
    if (rank == root) {
        dt_config mine;
        char *eff = NULL;
        head[0] = deck_parse(path, noverrides, overrides, &mine, &eff);
        if (head[0] == 0) {
            payload = eff;
            *cfg = mine;
        } else {
            const char *msg = dt_err_msg();
            payload = dt_malloc(strlen(msg) + 1);
            strcpy(payload, msg);
        }
        size_t len = strlen(payload);
        if (len >= INT_MAX)
            DT_FATAL("%s: effective deck of %zu bytes is too large to broadcast", path, len);
        head[1] = (int)len;
    }
    MPI_CHECK(MPI_Bcast(head, 2, MPI_INT, root, comm));
    if (rank != root)
        payload = dt_malloc((size_t)head[1] + 1);
    MPI_CHECK(MPI_Bcast(payload, head[1] + 1, MPI_CHAR, root, comm));

    if (head[0] != 0) {
        if (rank != root)
            dt_err_set("%s", payload);
        free(payload);
        return -1;
    }
    if (rank == root) {
        if (effective)
            *effective = payload;
        else
            free(payload);
        return 0;
    }
    /* the effective deck already holds the overrides */
    if (deck_parse_string(path, payload, 0, NULL, cfg, effective) < 0)
        DT_FATAL("rank %d cannot re-read the effective deck broadcast by rank %d: %s", rank,
                 root, dt_err_msg());
    free(payload);
    return 0;
}

void deck_print_keys(FILE *f)
{
    int kw = 0, dw = 0;
    char full[160], expect[256];
    for (int i = 0; i < NKEYS; i++) {
        int n = snprintf(full, sizeof full, "%s.%s", keys[i].section, keys[i].name);
        int d = keys[i].def ? (int)strlen(keys[i].def) : (int)strlen("(required)");
        kw = n > kw ? n : kw;
        dw = d > dw ? d : dw;
    }
    for (int i = 0; i < NKEYS; i++) {
        const deck_key *k = &keys[i];
        snprintf(full, sizeof full, "%s.%s", k->section, k->name);
        expect_describe(k, expect, sizeof expect);
        const char *def = k->def ? (*k->def ? k->def : "\"\"") : "(required)";
        fprintf(f, "%-*s  %-6s  %-*s  %s [%s]\n", kw, full, type_name(k->type), dw, def, k->doc,
                expect);
    }
}
