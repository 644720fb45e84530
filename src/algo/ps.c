/* Parameter server (doc/references.md, Parameter server): ps-async (Downpour-style ASGD, with
 * optional staleness scaling and top-k or AdaComp compression with error
 * feedback) and ps-sync (TensorFlow's SyncReplicas: R gradients per global
 * step, stale ones dropped, backup workers).
 *
 * Roles (run/roles.c): ranks 0..S-1 are servers, each holding a balanced
 * contiguous range of the flat vector with its momentum; then an optional
 * supervisor; the rest are workers. A worker loops
 *     fetch (w, clock) from every server -> g = grad F(w) -> push (g, clock)
 * and each server applies the optimizer to its range as pushes arrive:
 *     async:  w <- w - lr(clock) * sgd(g / staleness), clock += 1
 *     sync:   when R pushes computed on the current clock have arrived,
 *             w <- w - lr(clock) * sgd(mean of them in worker order), clock += 1;
 *             pushes computed on an older clock are dropped (counted).
 * Servers answer requests as they arrive (MPI_Waitsome over one posted
 * receive per client), so a slow worker never holds the others up in ps-async. Workers stop when a
 * fetch shows the server clock at the step budget, or that a stop (signal)
 * was requested; the stop request rides on pushes, so every server decides
 * it at the same clock. At the end the servers' ranges are gathered on every
 * rank: the evaluated and checkpointed model is the servers' model. A
 * periodic checkpoint (run.checkpoint_every, in worker steps of the clock)
 * pauses every client first (server_run), so no push is in flight when the
 * ranges are gathered and written; then serving goes on.
 *
 * Wire format, one MPI_BYTE message per (worker, server) and direction:
 *   to a server:  ps_msg header (tag REQ); a push's body follows (tag DATA):
 *                 for PUSH_DENSE count floats (the range),
 *                 for PUSH_SPARSE the pairs in algo/compress.h's format,
 *                 for PUSH_QSPARSE its quantized format (indices relative
 *                 to the server's range; the header's count is the pairs');
 *   to a worker:  ps_msg header (kind REPLY, flags), then count floats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "algo/compress.h"
#include "algo/staleness.h"
#include "core/error.h"
#include "core/vec.h"
#include "io/runlog.h"
#include "engine/engine.h"
#include "algo/ps_int.h"

static const char *const curve_names[4] = { "wall", "clock", "loss", "accuracy" };

/* Room for the body of a push of up to m entries, in any of the formats. */
static size_t push_bytes(size_t m)
{
    size_t d = m * sizeof(float), sp = sparse_bytes(m), q = qsparse_bound(m);
    return d > sp ? (d > q ? d : q) : (sp > q ? sp : q);
}

static int ps_check(const dt_config *cfg, int nranks, int sync)
{
    int S = (int)cfg->ps.servers, sup = cfg->ps.supervisor;
    int W = nranks - S - sup;
    if (W < 1)
        return dt_err_set("algorithm.mode = %s needs ps.servers (%d) + %d supervisor + at least "
                          "one worker, but has %d rank(s)", cfg->algorithm.mode, S, sup, nranks);
    if (sync && cfg->ps.replicas > W)
        return dt_err_set("ps.replicas = %lld: more than the %d worker(s)",
                          (long long)cfg->ps.replicas, W);
    if (sync && (cfg->ps.fetch_every != 1 || cfg->ps.push_every != 1))
        return dt_err_set("algorithm.mode = ps-sync fetches and pushes every step: "
                          "ps.fetch_every and ps.push_every must be 1");
    if (sync && strcmp(cfg->ps.staleness, "none") != 0)
        return dt_err_set("ps.staleness = %s: ps-sync drops stale gradients instead",
                          cfg->ps.staleness);
    if (cfg->ps.fetch_every % cfg->ps.push_every != 0 && cfg->ps.push_every % cfg->ps.fetch_every)
        return dt_err_set("ps.fetch_every = %lld and ps.push_every = %lld: one must divide the "
                          "other", (long long)cfg->ps.fetch_every, (long long)cfg->ps.push_every);
    return 0;
}

static int ps_async_check(const dt_config *cfg, int nranks) { return ps_check(cfg, nranks, 0); }
static int ps_sync_check(const dt_config *cfg, int nranks) { return ps_check(cfg, nranks, 1); }

/* Steps of each worker at server clock c: a clock tick is one global step
 * (sync) or one push of push_every steps by one of the W workers (async). */
double ps_worker_steps_at(const dt_trainer *t, const ps_state *s, int64_t c)
{
    return s->sync ? (double)c : (double)c * (double)t->cfg->ps.push_every / s->W;
}

/* The learning rate at server clock c; an epoch is every worker's shard once. */
float ps_lr_at(dt_trainer *t, const ps_state *s, int64_t c)
{
    return trainer_lr_at(t, ps_worker_steps_at(t, s, c));
}

/* The first server clock after c at which the workers' steps pass a
 * multiple of run.checkpoint_every; -1 without periodic checkpoints, or
 * when that is within W ticks of the end (servers' clocks differ by the
 * pushes in flight, at most one per worker: no worker may see one server's
 * end and another's pause). */
static int64_t next_ckpt(const dt_trainer *t, const ps_state *s, int64_t c)
{
    const int64_t every = t->cfg->run.checkpoint_every;
    if (every <= 0)
        return -1;
    int64_t m = (int64_t)(ps_worker_steps_at(t, s, c) / (double)every) + 1, at;
    if (s->sync) {
        at = m * every;
    } else {
        const int64_t pe = t->cfg->ps.push_every;
        at = (m * every * s->W + pe - 1) / pe;
    }
    return at + s->W + 1 < s->budget ? at : -1;
}

static void ps_setup(dt_trainer *t)
{
    ps_state *s = dt_calloc(1, sizeof *s);
    t->algo_state = s;
    const dt_config *c = t->cfg;
    s->sync = strcmp(c->algorithm.mode, "ps-sync") == 0;
    s->S = (int)c->ps.servers;
    s->sup = c->ps.supervisor ? s->S : -1;
    s->W = t->nworkers;
    s->R = s->sync && c->ps.replicas > 0 ? (int)c->ps.replicas : s->W;
    s->role = t->roles->mine;
    s->fin = MPI_REQUEST_NULL;
    s->budget = s->sync ? t->total_steps
                        : (t->total_steps * s->W + c->ps.push_every - 1) / c->ps.push_every;
    s->lo = dt_calloc((size_t)s->S + 1, sizeof *s->lo);
    for (int i = 0; i <= s->S; i++)
        s->lo[i] = t->n * (size_t)i / (size_t)s->S;
    MPI_CHECK(MPI_Comm_dup(t->comm, &s->comm));
    s->compress = strcmp(c->ps.compress, "topk") == 0           ? C_TOPK
                  : strcmp(c->ps.compress, "adacomp-chen") == 0 ? C_ADACOMP
                                                                : C_NONE;
    size_t maxm = 0;
    for (int i = 0; i < s->S; i++)
        maxm = s->lo[i + 1] - s->lo[i] > maxm ? s->lo[i + 1] - s->lo[i] : maxm;

    if (s->role == ROLE_SERVER) {
        int me = t->rank;
        s->m = s->lo[me + 1] - s->lo[me];
        s->inbox_bytes = sizeof(ps_msg) + push_bytes(s->m);
        s->inbox = dt_msg_alloc(s->inbox_bytes);
        s->g = dt_falloc(s->m ? s->m : 1);
        s->stop_at = -1;
        s->ckpt_at = next_ckpt(t, s, 0);
        s->nc = t->nranks - s->S;
        s->open = s->nc;
        s->head = dt_calloc((size_t)s->nc, sizeof *s->head);
        s->hreq = dt_malloc((size_t)s->nc * sizeof *s->hreq);
        s->paused = dt_calloc((size_t)s->nc, 1);
        for (int c = 0; c < s->nc; c++)
            s->hreq[c] = MPI_REQUEST_NULL;
        s->touched = dt_malloc((s->m ? s->m : 1) * sizeof *s->touched);
        s->tval = dt_falloc(s->m ? s->m : 1);
        if (s->sync) {
            s->slots = dt_falloc((size_t)s->W * (s->m ? s->m : 1));
            s->have = dt_calloc((size_t)s->W, 1);
            s->want = dt_malloc((size_t)s->W * sizeof *s->want);
            for (int w = 0; w < s->W; w++)
                s->want[w] = -1;
        }
        if (strcmp(c->ps.staleness, "adacomp") == 0) {
            s->stale = staleness_create(s->m, 64);
            s->scale = dt_falloc(s->m ? s->m : 1);
        }
    } else { /* workers and the supervisor fetch */
        s->rep = dt_calloc((size_t)s->S, sizeof *s->rep);
        s->reqs = dt_malloc(2 * (size_t)s->S * sizeof *s->reqs);
        s->sts = dt_malloc(2 * (size_t)s->S * sizeof *s->sts);
        for (int i = 0; i < s->S; i++)
            s->rep[i] = dt_msg_alloc(sizeof(ps_msg) + maxm * sizeof(float));
    }
    if (s->role == ROLE_WORKER) {
        s->acc = dt_falloc(t->n);
        s->out = dt_calloc((size_t)s->S, sizeof *s->out);
        for (int i = 0; i < s->S; i++)
            s->out[i] = dt_msg_alloc(sizeof(ps_msg) + push_bytes(maxm));
        if (s->compress != C_NONE) { /* per tensor: weights and biases separately */
            s->residual = dt_falloc(t->n);
            s->nseg = t->model->ntensors;
            s->seg = dt_calloc((size_t)s->nseg, sizeof *s->seg);
            for (int i = 0; i < s->nseg; i++) {
                const dt_tensor_view *v = &t->model->tensors[i];
                size_t bin = (size_t)(v->conv ? c->ps.bin_conv : c->ps.bin_fc);
                s->seg[i] = (dt_segment){ v->offset, v->count, bin < v->count ? bin : v->count };
            }
            size_t cap = s->compress == C_TOPK ? topk_capacity(s->seg, s->nseg, c->ps.ratio)
                                               : t->n;
            s->idx = dt_malloc(cap * sizeof *s->idx);
            s->val = dt_falloc(cap);
        }
    }
}

/* ---- the ops ------------------------------------------------------------------------ */

static void ps_step(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    if (s->role == ROLE_SERVER)
        ps_server_run(t);
    else if (s->role == ROLE_SUPERVISOR)
        ps_supervisor_run(t);
    else
        ps_worker_step(t);
}

static int ps_progress(dt_trainer *t, int stop_local, double *global_steps)
{
    ps_state *s = t->algo_state;
    *global_steps = ps_worker_steps_at(t, s, s->role == ROLE_SERVER ? s->clock : s->seen_clock);
    if (s->role == ROLE_SERVER)
        return s->pausing ? ALGO_CHECKPOINT : ALGO_END;
    if (s->pause)
        return ALGO_CHECKPOINT;
    if (s->role != ROLE_WORKER)
        return ALGO_END;
    if (stop_local)
        s->stop_sent = 1;
    return s->ended;
}

/* Workers say they are done; then every rank gets the servers' model. */
static void ps_finish(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const int pause = s->pause || s->pausing; /* a periodic checkpoint, not the end */
    if (s->role == ROLE_WORKER && !pause) {
        ps_msg q = { .kind = K_DONE };
        for (int i = 0; i < s->S; i++)
            MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
    }
    int *counts = dt_calloc((size_t)t->nranks, sizeof *counts);
    int *displs = dt_calloc((size_t)t->nranks, sizeof *displs);
    for (int i = 0; i < s->S; i++) {
        counts[i] = (int)(s->lo[i + 1] - s->lo[i]);
        displs[i] = (int)s->lo[i];
    }
    float *model = dt_falloc(t->n);
    const float *mine = s->role == ROLE_SERVER ? t->params + s->lo[t->rank] : t->params;
    MPI_CHECK(MPI_Allgatherv(mine, s->role == ROLE_SERVER ? counts[t->rank] : 0, MPI_FLOAT,
                             model, counts, displs, MPI_FLOAT, s->comm));
    memcpy(t->params, model, t->n * sizeof(float));
    free(model);
    free(counts);
    free(displs);
    ckpt_count_put(s->clock, s->ckpt);
    ckpt_count_put(s->dropped, s->ckpt + 2);
    /* workers: the clock of their model; servers: the workers' steps at their
     * clock (a resume on another rank count scales the clock by it) */
    ckpt_count_put(s->role == ROLE_WORKER   ? s->seen_clock
                   : s->role == ROLE_SERVER ? llround(ps_worker_steps_at(t, s, s->clock))
                                            : 0,
                   s->ckpt + 4);
    if (pause)
        return;
    int64_t dropped = s->dropped;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &dropped, 1, MPI_INT64_T, MPI_SUM, s->comm));
    if (t->rank == 0 && s->sync)
        printf("ps-sync: %lld stale gradient(s) dropped\n", (long long)dropped);
}

/* After a periodic checkpoint: servers serve again (their next pause at
 * the next multiple); workers fetch again before their next gradient. */
static void ps_restart(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    s->pause = 0;
    if (s->role == ROLE_SERVER) {
        s->pausing = 0;
        s->told_sup = 0;
        s->ckpt_at = next_ckpt(t, s, s->clock);
    }
}

static const float *ps_model(dt_trainer *t) { return t->params; }

static int ps_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    ps_state *s = t->algo_state;
    int k = 0;
    if (max < 2)
        DT_FATAL("ps: no room for its checkpoint arrays");
    /* on another rank count: server 0's (rank 0 is a server) */
    out[k++] = (dt_ckpt_array){ "ps_counters", s->ckpt, 6, DT_CKPT_ROW0 };
    if (s->compress != C_NONE) {
        if (!s->residual) /* servers and the supervisor: rectangular datasets */
            s->residual = dt_falloc(t->n);
        /* a worker's error feedback: zero on another rank count */
        out[k++] = (dt_ckpt_array){ "ps_residual", s->residual, t->n, DT_CKPT_FRESH };
    }
    return k;
}

/* On another rank count the counters are server 0's: the workers' steps
 * carry over, and the clock follows them (ps-async ticks once per push of
 * any worker: it scales with the worker count); every server starts at it,
 * no push dropped yet, and every worker's first fetch wants it. */
static void ps_resumed_elastic(dt_trainer *t, ps_state *s)
{
    const int64_t wsteps = ckpt_count_get(s->ckpt + 4);
    const int64_t pe = t->cfg->ps.push_every;
    const int64_t clock = s->sync ? ckpt_count_get(s->ckpt) : (wsteps * s->W + pe - 1) / pe;
    if (s->role == ROLE_SERVER) {
        s->clock = clock;
        s->dropped = 0;
        s->ckpt_at = next_ckpt(t, s, s->clock);
    } else if (s->role == ROLE_WORKER) {
        s->seen_clock = s->first_want = clock;
    }
    t->step = s->role == ROLE_WORKER ? wsteps : clock;
    t->global_step = (double)wsteps;
}

static void ps_resumed(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    if (t->elastic_from) {
        ps_resumed_elastic(t, s);
        return;
    }
    if (s->role == ROLE_SERVER) {
        s->clock = ckpt_count_get(s->ckpt);
        s->dropped = ckpt_count_get(s->ckpt + 2);
        s->ckpt_at = next_ckpt(t, s, s->clock);
    } else if (s->role == ROLE_WORKER) {
        s->seen_clock = s->first_want = ckpt_count_get(s->ckpt + 4);
    }
}

/* The supervisor's curve, and each server's histograms: pushes by
 * staleness (delay in clock ticks; sync: pushes taken, all on the current
 * clock) and requests ready per wait (the queue a server found). */
static void ps_record(dt_trainer *t, dt_runlog *log)
{
    ps_state *s = t->algo_state;
    const double *cols[4] = { s->curve[0], s->curve[1], s->curve[2], s->curve[3] };
    if (s->sup >= 0)
        runlog_write_series(log, "supervisor", s->sup, s->npoints, 4, curve_names, cols);
    int nc = t->nranks - s->S;
    double *x = dt_malloc((size_t)(nc > HIST_DELAYS ? nc : HIST_DELAYS) * sizeof *x + sizeof *x);
    for (int i = 0; i <= (nc > HIST_DELAYS ? nc : HIST_DELAYS); i++)
        x[i] = i;
    for (int i = 0; i < s->S; i++) {
        char name[64];
        snprintf(name, sizeof name, "server%d_staleness", i);
        const double *h1[2] = { x, s->hist_delay };
        runlog_write_series(log, name, i, HIST_DELAYS + 1, 2,
                            (const char *const[]){ "delay", "pushes" }, h1);
        snprintf(name, sizeof name, "server%d_queue", i);
        const double *h2[2] = { x, s->hist_queue };
        runlog_write_series(log, name, i, nc + 1, 2,
                            (const char *const[]){ "ready", "waits" }, h2);
    }
    free(x);
}

static void ps_teardown(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    MPI_CHECK(MPI_Comm_free(&s->comm));
    for (int i = 0; i < s->S; i++) {
        if (s->out)
            free(s->out[i]);
        if (s->rep)
            free(s->rep[i]);
    }
    free(s->out);
    free(s->rep);
    free(s->reqs);
    free(s->sts);
    free(s->acc);
    free(s->residual);
    free(s->seg);
    free(s->idx);
    free(s->val);
    free(s->inbox);
    free(s->g);
    free(s->slots);
    free(s->have);
    free(s->want);
    free(s->scale);
    free(s->touched);
    free(s->tval);
    free(s->hist_queue);
    free(s->head);
    free(s->hreq);
    free(s->paused);
    if (s->stale)
        staleness_free(s->stale);
    for (int c = 0; c < 4; c++)
        free(s->curve[c]);
    free(s->lo);
    free(s);
    t->algo_state = NULL;
}

/* The two modes share every op but the check. */
#define PS_OPS(NAME, SUMMARY, CHECK)                                                      \
    {                                                                                      \
        .name = NAME, .summary = SUMMARY, .async = 1, .check = CHECK, .setup = ps_setup,  \
        .step = ps_step, .model = ps_model, .state = ps_state_arrays,                      \
        .progress = ps_progress, .finish = ps_finish, .restart = ps_restart,               \
        .resumed = ps_resumed, .elastic = DT_ELASTIC_SHARDED, .servers = 1,                 \
        .elastic_note = "the clock follows the workers' steps; error-feedback residuals zero", \
        .record = ps_record, .teardown = ps_teardown,                                      \
    }

const dt_algo algo_ps_async =
    PS_OPS("ps-async", "parameter server, asynchronous: workers fetch, compute and push; "
                       "servers apply pushes as they come; 1 worker equals local",
           ps_async_check);

const dt_algo algo_ps_sync =
    PS_OPS("ps-sync", "parameter server, synchronous: the mean of R gradients per global "
                      "step, stale ones dropped; R = all workers equals allreduce",
           ps_sync_check);
