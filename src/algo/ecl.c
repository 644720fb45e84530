/* Edge-consensus learning (Niwa et al., ICML 2021; doc/references.md,
 * Edge-consensus learning) over an undirected graph whose edge ends swap on
 * a cycle of K steps:
 *
 *   pdmm-isvr, admm-isvr, per step t:
 *     1. g = grad F_i(w)                         (minibatch; + lambda w below)
 *     2. w <- (w/mu - g - lambda w + sum_j A_ij eta z_ij) / (1/mu + E_i eta)
 *     3. for each end (i, j) due at t: send y_ij = z_ij - 2 A_ij w, receive y_ji;
 *        PDMM z_ij <- y_ji, ADMM z_ij <- (z_ij + y_ji) / 2
 *   dsgd-ecl, per step t:
 *     1. w <- w - mu g                           (the optimizer's SGD step)
 *     2. w <- (w + sum_j w_j) / (E_i + 1)        (last received neighbours)
 *     3. for each end due at t: swap w with the neighbour
 *
 * mu = optim.lr (on its schedule), lambda = optim.weight_decay, K =
 * ecl.round. By default swaps are asynchronous (the starting end blocks, the
 * neighbour's thread answers with what it has); ecl.sync = true swaps both
 * ends at the same step, reproducibly. The ranks still run the same number
 * of steps and agree on a stop step, like every synchronous mode. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/ecl_core.h"
#include "core/error.h"
#include "io/runlog.h"
#include "engine/engine.h"

enum { REC_COLS = 6 };
static const char *const rec_names[REC_COLS] = { "rank", "epoch", "swaps_started",
                                                 "swaps_answered", "stale_sends",
                                                 "dual_residual_rms" };

typedef struct ecl_state {
    dt_egraph g;
    dt_ecl node;
    float *snap;            /* (max_deg, n) the buffers as checkpointed */
    double *rows;           /* (nrows, REC_COLS) this rank's epochs */
    int64_t nrows, cap;
    double t_swaps;
    int64_t bytes_seen;
} ecl_state;

static dt_ecl_kind kind_of(const dt_config *cfg)
{
    if (strcmp(cfg->algorithm.mode, "pdmm-isvr") == 0)
        return ECL_PDMM;
    if (strcmp(cfg->algorithm.mode, "admm-isvr") == 0)
        return ECL_ADMM;
    return ECL_DSGD;
}

/* auto: the reference's double ring where it exists (5 ranks or more) */
static int graph_build(dt_egraph *g, const dt_config *cfg, int nranks)
{
    const char *kind = cfg->algorithm.topology;
    if (strcmp(kind, "auto") == 0)
        kind = nranks >= 5 ? "multiplex-ring" : "ring";
    if (strcmp(kind, "ring") && strcmp(kind, "multiplex-ring") && strcmp(kind, "random") &&
        strcmp(kind, "complete") && strcmp(kind, "file"))
        return dt_err_set("algorithm.mode = %s runs on an undirected edge graph: "
                          "algorithm.topology = auto, ring, multiplex-ring, random, complete "
                          "or file, not %s", cfg->algorithm.mode, kind);
    if (egraph_create(g, kind, nranks, (int)cfg->ecl.round, cfg->ecl.graph_seed,
                      cfg->ecl.mean_degree, cfg->algorithm.graph_file) != 0)
        return dt_err_prefix("algorithm.mode = %s", cfg->algorithm.mode);
    return 0;
}

static int ecl_check(const dt_config *cfg, int nranks)
{
    if (nranks < 2)
        return dt_err_set("algorithm.mode = %s needs at least 2 ranks (a graph), the job has "
                          "%d", cfg->algorithm.mode, nranks);
    if (kind_of(cfg) != ECL_DSGD && (cfg->optim.momentum != 0 || cfg->optim.nesterov))
        return dt_err_set("algorithm.mode = %s takes its own ISVR step, which has no "
                          "momentum: set optim.momentum = 0 (it is %g)%s", cfg->algorithm.mode,
                          cfg->optim.momentum, cfg->optim.nesterov ? " and optim.nesterov = false" : "");
    dt_egraph g;
    if (graph_build(&g, cfg, nranks) != 0)
        return -1;
    egraph_free(&g);
    return 0;
}

static void ecl_setup(dt_trainer *t)
{
    ecl_state *s = dt_calloc(1, sizeof *s);
    if (graph_build(&s->g, t->cfg, t->nranks) != 0)
        DT_FATAL("%s", dt_err_msg());
    ecl_init(&s->node, t->comm, &s->g, t->rank, kind_of(t->cfg), t->params, t->n,
             !t->cfg->ecl.sync);
    s->snap = dt_falloc((size_t)s->g.max_deg * t->n);
    t->algo_state = s;
}

/* One row per rank and epoch: swap counts and the RMS dual residual
 * ||z_ij - y_ji|| per absorbed swap over the epoch (D-SGD: the change of the
 * neighbour's parameters). */
static void epoch_row(dt_trainer *t, ecl_state *s)
{
    dt_swap_stats st = swap_stats(s->node.swap);
    ecl_lock(&s->node);
    double rms = s->node.nabsorbed ? sqrt(s->node.dz2 / (double)s->node.nabsorbed) : 0;
    int64_t stale = s->node.stale;
    s->node.dz2 = 0;
    s->node.nabsorbed = 0;
    ecl_unlock(&s->node);
    if (s->nrows == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->rows = dt_realloc(s->rows, (size_t)s->cap * REC_COLS * sizeof *s->rows);
    }
    double *r = s->rows + s->nrows++ * REC_COLS;
    r[0] = t->rank;
    r[1] = (double)((t->step + 1) / t->steps_per_epoch);
    r[2] = (double)st.started;
    r[3] = (double)st.answered;
    r[4] = (double)stale;
    r[5] = rms;
}

static void ecl_step(dt_trainer *t)
{
    ecl_state *s = t->algo_state;
    trainer_gradient(t, t->params);                           /* 1. g */
    ecl_lock(&s->node);
    if (s->node.kind == ECL_DSGD) {
        trainer_update(t, t->params);                         /* 1. SGD step */
        ecl_update(&s->node, NULL, 0, 0);                     /* 2. neighbour average */
    } else {
        ecl_update(&s->node, t->grads, t->lr, t->cfg->optim.weight_decay); /* 2. primal */
    }
    ecl_unlock(&s->node);
    double t0 = trainer_clock();
    ecl_swaps(&s->node, t->step);                             /* 3. due swaps */
    t->meter.t_comm += trainer_clock() - t0;
    dt_swap_stats st = swap_stats(s->node.swap);
    t->meter.bytes_sent += st.bytes_sent - s->bytes_seen;
    s->bytes_seen = st.bytes_sent;
    if ((t->step + 1) % t->steps_per_epoch == 0)
        epoch_row(t, s);
}

static const float *ecl_model(dt_trainer *t) { return t->params; }

static int ecl_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    ecl_state *s = t->algo_state;
    if (max < 1)
        DT_FATAL("ecl: no room for its checkpoint arrays");
    ecl_snapshot(&s->node, s->snap);
    /* the duals belong to the old graph's edges: on another rank count
     * they are not read (ecl_resumed) */
    out[0] = (dt_ckpt_array){ "ecl_buffers", s->snap, (size_t)s->g.max_deg * t->n,
                                DT_CKPT_FRESH };
    return 1;
}

/* On another rank count (t->elastic_from) the graph setup built is the new
 * count's, and its edges start as at a fresh start from the averaged model:
 * zero duals (PDMM/ADMM restart their dual phase), or that model as every
 * neighbour's last parameters (D-SGD). */
static void ecl_resumed(dt_trainer *t)
{
    ecl_state *s = t->algo_state;
    if (t->elastic_from)
        ecl_restart(&s->node);
    else
        ecl_restore(&s->node, s->snap);
}

/* Collective: every rank's epoch rows, gathered on rank 0 as /ecl. */
static void ecl_record(dt_trainer *t, dt_runlog *log)
{
    ecl_state *s = t->algo_state;
    int64_t rows = s->nrows, all = rows * t->nranks;
    double *got = t->rank == 0 ? dt_malloc((size_t)(all ? all : 1) * REC_COLS * sizeof *got) : NULL;
    MPI_CHECK(MPI_Gather(s->rows, (int)(rows * REC_COLS), MPI_DOUBLE, got,
                         (int)(rows * REC_COLS), MPI_DOUBLE, 0, t->comm));
    double *cols[REC_COLS] = { 0 };
    if (t->rank == 0)
        for (int c = 0; c < REC_COLS; c++) {
            cols[c] = dt_malloc((size_t)(all ? all : 1) * sizeof **cols);
            for (int64_t r = 0; r < all; r++)
                cols[c][r] = got[r * REC_COLS + c];
        }
    runlog_write_series(log, "ecl", 0, all, REC_COLS, rec_names, (const double *const *)cols);
    for (int c = 0; c < REC_COLS; c++)
        free(cols[c]);
    free(got);
}

static void ecl_teardown(dt_trainer *t)
{
    ecl_state *s = t->algo_state;
    ecl_free(&s->node); /* threaded: answers until every neighbour is done */
    egraph_free(&s->g);
    free(s->snap);
    free(s->rows);
    free(s);
    t->algo_state = NULL;
}

#define ECL_ALGO(var, mode, text, note, own)                                       \
    const dt_algo var = {                                                          \
        .name = mode,                                                              \
        .summary = text,                                                           \
        .decentralized = 1,                                                        \
        .check = ecl_check,                                                        \
        .elastic = DT_ELASTIC_AVERAGE,                                             \
        .elastic_note = note,                                                      \
        .thread = "the edge swaps are answered by a communication thread",         \
        .own_step = own,                                                           \
        .setup = ecl_setup,                                                        \
        .step = ecl_step,                                                          \
        .model = ecl_model,                                                        \
        .state = ecl_state_arrays,                                                 \
        .resumed = ecl_resumed,                                                    \
        .record = ecl_record,                                                      \
        .teardown = ecl_teardown,                                                  \
    }

ECL_ALGO(algo_pdmm_isvr, "pdmm-isvr",
         "edge-consensus PDMM-ISVR: primal ISVR step with one dual per edge, duals "
         "overwritten by the neighbour's on swaps (cycle of ecl.round steps); on a convex "
         "problem all ranks reach the centralized minimizer",
         "the edge graph is built for the new rank count, its duals start at zero: "
         "the method restarts its dual phase",
         "the edge-consensus modes take their own ISVR step (the dual update is part "
         "of the step), which has no AdamW form");
ECL_ALGO(algo_admm_isvr, "admm-isvr",
         "edge-consensus ADMM-ISVR (Douglas-Rachford): as pdmm-isvr with eta from "
         "theta_inv = 2 and each swap averaging the dual with the neighbour's",
         "the edge graph is built for the new rank count, its duals start at zero: "
         "the method restarts its dual phase",
         "the edge-consensus modes take their own ISVR step (the dual update is part "
         "of the step), which has no AdamW form");
ECL_ALGO(algo_dsgd_ecl, "dsgd-ecl",
         "decentralized SGD baseline of ECL: SGD step, then the mean of w and the last "
         "parameters received from each neighbour, swapped on the same edge schedule",
         "the edge graph is built for the new rank count, each neighbour's last "
         "parameters start as the averaged model",
         NULL);
