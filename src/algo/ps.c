/* Parameter server (REFERENCE.md §8): ps-async (Downpour-style ASGD, with
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
#include "run/roles.h"
#include "run/stop.h"
#include "run/trainer.h"

enum { TAG_REQ = 41, TAG_REP = 42, TAG_FIN = 43, TAG_DATA = 44, TAG_PAUSE = 45 };
enum { K_FETCH = 1, K_PUSH_DENSE, K_PUSH_SPARSE, K_DONE, K_REPLY, K_PUSH_QSPARSE, K_PAUSE };
enum { F_STOP = 1, F_END = 2, F_PAUSE = 4 }; /* flags: stop requested; the run is over;
                                              * a periodic checkpoint is due */
enum { C_NONE, C_TOPK, C_ADACOMP }; /* ps.compress */
enum { HIST_DELAYS = 64 };

typedef struct ps_msg {
    int32_t kind, flags;
    int64_t clock;                 /* FETCH: the clock wanted (sync); PUSH: the model's clock */
    int64_t count;                 /* entries that follow */
} ps_msg;

typedef struct ps_state {
    int sync, S, sup, W, R;        /* sup: the supervisor's rank, -1 none */
    int compress;                  /* C_* */
    size_t *lo;                    /* (S + 1) range bounds: server s holds [lo[s], lo[s+1]) */
    int64_t budget;                /* server clock at which the run ends */
    MPI_Comm comm;
    int role;
    float ckpt[6];                 /* clock, dropped, stop-at as (hi, lo) floats */

    /* server */
    int64_t clock, dropped, stop_at;
    int64_t ckpt_at;               /* clock of the next periodic checkpoint; -1 none */
    int pausing, npaused, told_sup; /* a checkpoint is due: clients paused; supervisor told */
    int nc, open;                  /* clients (supervisor, workers); those not done */
    ps_msg *head;                  /* (nc) one posted header receive per client */
    MPI_Request *hreq;             /* (nc) */
    char *paused;                  /* (nc) */
    size_t m;                      /* range length */
    char *inbox;                   /* one request */
    size_t inbox_bytes;
    float *g;                      /* (m) the update being applied */
    float *slots;                  /* sync: (W, m) this clock's gradients */
    char *have;                    /* sync: (W) */
    int nhave;
    int64_t *want;                 /* sync: (W) clock a waiting fetch wants; -1 none */
    float *scale;                  /* adacomp: (m) */
    uint32_t *touched;             /* a sparse push: its indices (m) */
    float *tval;                   /* and values (m) */
    size_t ntouched;
    dt_staleness *stale;
    double hist_delay[HIST_DELAYS + 1]; /* pushes by delay d (last bin: d >= HIST_DELAYS) */
    double *hist_queue;            /* (clients + 1) requests ready per wait, by count */

    /* worker; pause: a periodic checkpoint is due (supervisor too) */
    int fetched, stop_sent, ended, pause;
    int64_t first_want;            /* sync: the clock the first fetch after a pause wants */
    MPI_Request fin;               /* supervisor: server 0's end message */
    int64_t seen_clock;            /* clock of the model in params */
    float *acc;                    /* (n) gradients summed since the last push */
    float *residual;               /* (n) topk, adacomp-chen: what was not sent yet */
    dt_segment *seg;
    int nseg;
    uint32_t *idx;
    float *val;
    char **out;                    /* (S) push buffers */
    char **rep;                    /* (S) reply buffers */
    MPI_Request *reqs;             /* (2 S) */
    MPI_Status *sts;               /* (2 S) */

    /* supervisor */
    double *curve[4];              /* wall, clock, loss, accuracy */
    int64_t npoints, cap;
} ps_state;

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
static double worker_steps_at(const dt_trainer *t, const ps_state *s, int64_t c)
{
    return s->sync ? (double)c : (double)c * (double)t->cfg->ps.push_every / s->W;
}

/* The learning rate at server clock c; an epoch is every worker's shard once. */
static float lr_at(dt_trainer *t, const ps_state *s, int64_t c)
{
    return trainer_lr_at(t, worker_steps_at(t, s, c));
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
    int64_t m = (int64_t)(worker_steps_at(t, s, c) / (double)every) + 1, at;
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

/* ---- server ------------------------------------------------------------------ */

static void server_reply(ps_state *s, dt_trainer *t, int to)
{
    ps_msg *h = (ps_msg *)s->inbox; /* the inbox is free again: the request was read */
    int me = t->rank;
    h->kind = K_REPLY;
    /* a checkpoint first: the end and a stop come after it (every worker
     * must take the same path to the next collective) */
    h->flags = s->pausing ? F_PAUSE
                          : (s->clock >= s->budget ? F_END : 0) |
                                (s->stop_at >= 0 && s->clock >= s->stop_at ? F_STOP : 0);
    h->clock = s->clock;
    h->count = (int64_t)s->m;
    vec_copy((float *)(h + 1), t->params + s->lo[me], s->m);
    MPI_CHECK(MPI_Send(s->inbox, (int)(sizeof *h + s->m * sizeof(float)), MPI_BYTE, to, TAG_REP,
                       s->comm));
    t->meter.bytes_sent += (int64_t)(s->m * sizeof(float));
}

/* The pushed gradient, dense over the range, into g; -1 if malformed. */
static int server_decode(ps_state *s, const ps_msg *h, size_t bytes, float *g)
{
    const char *p = (const char *)(h + 1);
    size_t body = bytes - sizeof *h;
    if (h->kind == K_PUSH_DENSE) {
        if ((size_t)h->count != s->m || body != s->m * sizeof(float))
            return dt_err_set("dense push of %lld values for a range of %zu",
                              (long long)h->count, s->m);
        vec_copy(g, (const float *)p, s->m);
        return 0;
    }
    memset(g, 0, s->m * sizeof(float));
    if ((h->kind == K_PUSH_QSPARSE ? qsparse_decode : sparse_decode)(
            p, body, s->m, s->m, s->touched, s->tval, &s->ntouched) != 0)
        return -1;
    if ((int64_t)s->ntouched != h->count)
        return dt_err_set("sparse push: header says %lld pairs, body %zu", (long long)h->count,
                          s->ntouched);
    for (size_t i = 0; i < s->ntouched; i++)
        g[s->touched[i]] = s->tval[i];
    return 0;
}

static void server_apply(ps_state *s, dt_trainer *t, const float *g)
{
    float lr = lr_at(t, s, s->clock);
    t->lr = lr;
    /* the trainer's optimizer on this server's range: its state vectors
     * hold the range's entries at the same offsets */
    optim_step_range(&t->opt, s->lo[t->rank], s->lo[t->rank + 1], t->params + s->lo[t->rank], g,
                     lr, s->clock + 1);
    s->clock++;
    if (s->ckpt_at >= 0 && s->clock >= s->ckpt_at && s->clock < s->budget &&
        !(s->stop_at >= 0 && s->clock >= s->stop_at))
        s->pausing = 1;
}

/* ps-sync: serve the fetches waiting for the clock just reached. */
static void server_release(ps_state *s, dt_trainer *t)
{
    for (int w = 0; w < s->W; w++)
        if (s->want[w] >= 0 && (s->want[w] <= s->clock || s->clock >= s->budget || s->pausing ||
                                (s->stop_at >= 0 && s->clock >= s->stop_at))) {
            s->want[w] = -1;
            server_reply(s, t, s->S + (s->sup >= 0) + w);
        }
}

static void server_push(ps_state *s, dt_trainer *t, const ps_msg *h, size_t bytes, int w)
{
    if ((h->flags & F_STOP) && s->stop_at < 0)
        s->stop_at = s->sync ? h->clock + 1 : s->clock + 1;
    if (s->sync) {
        if (h->clock != s->clock || s->have[w]) {
            s->dropped++;
            return;
        }
        if (server_decode(s, h, bytes, s->slots + (size_t)w * s->m) != 0)
            DT_FATAL("server %d: malformed push from worker %d: %s", t->rank, w, dt_err_msg());
        s->have[w] = 1;
        s->hist_delay[0]++;
        if (++s->nhave < s->R)
            return;
        /* the mean in worker order: deterministic whichever arrived first */
        vec_zero(s->g, s->m);
        for (int i = 0; i < s->W; i++)
            if (s->have[i]) {
                vec_add(s->g, s->slots + (size_t)i * s->m, s->m);
                s->have[i] = 0;
            }
        vec_scale(s->g, 1.0f / (float)s->R, s->m);
        s->nhave = 0;
        server_apply(s, t, s->g);
        server_release(s, t);
        return;
    }
    if (server_decode(s, h, bytes, s->g) != 0)
        DT_FATAL("server %d: malformed push from worker %d: %s", t->rank, w, dt_err_msg());
    int64_t d = s->clock - h->clock;
    s->hist_delay[d < HIST_DELAYS ? d : HIST_DELAYS]++;
    if (s->stale) {
        if (h->kind == K_PUSH_DENSE) {
            staleness_scales(s->stale, d, NULL, s->m, s->scale);
            vec_mul(s->g, s->scale, s->m);
            staleness_record(s->stale, NULL, 0);
        } else {
            staleness_scales(s->stale, d, s->touched, s->ntouched, s->scale);
            for (size_t j = 0; j < s->ntouched; j++)
                s->g[s->touched[j]] *= s->scale[j];
            staleness_record(s->stale, s->touched, s->ntouched);
        }
    }
    server_apply(s, t, s->g);
}

/* Serve until every worker (and the supervisor) is done, or has paused for
 * a periodic checkpoint. Every client has a header receive posted;
 * MPI_Waitsome hands over all that arrived, so a busy worker cannot starve
 * another (a probe for any source may keep matching the same sender). A
 * push's body follows its header. A pause: once this server's clock passes
 * the checkpoint's (or a worker paused on another server's word) replies
 * carry F_PAUSE; a worker that sees it sends K_PAUSE after its last push,
 * so when every open client has paused no push is in flight; server 0 then
 * tells the supervisor, which pauses too. */
static void server_run(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const int first = s->S, nc = s->nc; /* clients: the supervisor, then workers */
    int first_worker = s->S + (s->sup >= 0);
    ps_msg *head = s->head;
    MPI_Request *req = s->hreq;
    MPI_Status *st = dt_malloc((size_t)nc * sizeof *st);
    int *ready = dt_malloc((size_t)nc * sizeof *ready);
    for (int c = 0; c < nc; c++)
        if (req[c] == MPI_REQUEST_NULL && (s->paused[c] || !s->hist_queue))
            MPI_CHECK(MPI_Irecv(&head[c], sizeof head[c], MPI_BYTE, first + c, TAG_REQ, s->comm,
                                &req[c]));
    memset(s->paused, 0, (size_t)nc);
    s->npaused = 0;
    if (!s->hist_queue)
        s->hist_queue = dt_calloc((size_t)nc + 1, sizeof *s->hist_queue);
    while (s->open > 0 && !(s->npaused > 0 && s->npaused == s->open)) {
        int nready = 0;
        MPI_CHECK(MPI_Waitsome(nc, req, &nready, ready, st));
        s->hist_queue[nready]++;
        for (int r = 0; r < nready; r++) {
            int c = ready[r], src = first + c, w = src - first_worker;
            ps_msg h = head[c];
            if (h.kind == K_FETCH) {
                if (s->sync && w >= 0 && h.clock > s->clock && s->clock < s->budget &&
                    !s->pausing && !(s->stop_at >= 0 && s->clock >= s->stop_at))
                    s->want[w] = h.clock;
                else
                    server_reply(s, t, src);
            } else if (h.kind == K_PUSH_DENSE || h.kind == K_PUSH_SPARSE ||
                       h.kind == K_PUSH_QSPARSE) {
                if (h.count < 0 || (size_t)h.count > s->m)
                    DT_FATAL("server %d: push of %lld entries from rank %d for a range of %zu",
                             t->rank, (long long)h.count, src, s->m);
                /* the body's length is the message's (decoding checks it) */
                MPI_Status bs;
                int body = 0;
                memcpy(s->inbox, &h, sizeof h);
                MPI_CHECK(MPI_Recv(s->inbox + sizeof h, (int)(s->inbox_bytes - sizeof h),
                                   MPI_BYTE, src, TAG_DATA, s->comm, &bs));
                MPI_CHECK(MPI_Get_count(&bs, MPI_BYTE, &body));
                server_push(s, t, (const ps_msg *)s->inbox, sizeof h + (size_t)body, w);
            } else if (h.kind == K_DONE) {
                s->open--;
                if (w >= 0 && s->open == (s->sup >= 0) && s->sup >= 0 && t->rank == 0)
                    MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, s->sup, TAG_FIN, s->comm));
                continue; /* no more requests from this client */
            } else if (h.kind == K_PAUSE) {
                s->pausing = 1; /* a worker saw another server's pause */
                s->paused[c] = 1;
                s->npaused++;
                continue; /* its next request comes after the checkpoint */
            } else {
                DT_FATAL("server %d: unknown request kind %d from rank %d", t->rank, h.kind,
                         src);
            }
            MPI_CHECK(MPI_Irecv(&head[c], sizeof head[c], MPI_BYTE, src, TAG_REQ, s->comm,
                                &req[c]));
        }
        if (stop_poll() && s->stop_at < 0)
            s->stop_at = s->clock; /* a signal reached this server: end at the next reply */
        if (s->sync && (s->stop_at >= 0 || s->pausing))
            server_release(s, t);
        /* every worker has paused: the supervisor (if any) pauses next */
        if (s->pausing && s->sup >= 0 && !s->told_sup && !s->paused[0] &&
            s->npaused == s->open - 1 && t->rank == 0) {
            MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, s->sup, TAG_PAUSE, s->comm));
            s->told_sup = 1;
        }
    }
    free(st);
    free(ready);
    t->step = s->clock - 1; /* the loop adds the last one */
}

/* ---- worker -------------------------------------------------------------------- */

/* Fetch every server's range into params; returns the reply flags. */
static int worker_fetch(dt_trainer *t, ps_state *s, int64_t want)
{
    double t0 = trainer_clock();
    for (int i = 0; i < s->S; i++) {
        size_t m = s->lo[i + 1] - s->lo[i];
        MPI_CHECK(MPI_Irecv(s->rep[i], (int)(sizeof(ps_msg) + m * sizeof(float)), MPI_BYTE, i,
                            TAG_REP, s->comm, &s->reqs[i]));
    }
    ps_msg q = { .kind = K_FETCH, .clock = want };
    for (int i = 0; i < s->S; i++)
        MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
    MPI_CHECK(MPI_Waitall(s->S, s->reqs, s->sts));
    int flags = 0;
    for (int i = 0; i < s->S; i++) {
        const ps_msg *h = (const ps_msg *)s->rep[i];
        vec_copy(t->params + s->lo[i], (const float *)(h + 1), s->lo[i + 1] - s->lo[i]);
        flags |= h->flags;
        if (i == 0)
            s->seen_clock = h->clock;
    }
    t->meter.t_wait += trainer_clock() - t0;
    return flags;
}

static void worker_push(dt_trainer *t, ps_state *s)
{
    double t0 = trainer_clock();
    size_t k = 0;
    const int quantized = s->compress == C_ADACOMP;
    if (quantized)
        k = adacomp_compress(s->acc, s->residual, t->n, s->seg, s->nseg, s->idx, s->val);
    else if (s->compress == C_TOPK)
        k = topk_compress(s->acc, s->residual, t->n, s->seg, s->nseg, t->cfg->ps.ratio, s->idx,
                          s->val);
    size_t next = 0; /* the first pair of the next server's range */
    for (int i = 0; i < s->S; i++) {
        ps_msg *h = (ps_msg *)s->out[i];
        size_t m = s->lo[i + 1] - s->lo[i], body;
        h->flags = s->stop_sent ? F_STOP : 0;
        h->clock = s->seen_clock;
        if (s->compress != C_NONE) {
            size_t first = next;
            while (next < k && s->idx[next] < s->lo[i + 1])
                next++;
            h->kind = quantized ? K_PUSH_QSPARSE : K_PUSH_SPARSE;
            h->count = (int64_t)(next - first);
            body = (quantized ? qsparse_encode : sparse_encode)(
                h + 1, s->idx + first, s->val + first, next - first, (uint32_t)s->lo[i]);
        } else {
            h->kind = K_PUSH_DENSE;
            h->count = (int64_t)m;
            vec_copy((float *)(h + 1), s->acc + s->lo[i], m);
            body = m * sizeof(float);
        }
        MPI_CHECK(MPI_Isend(h, sizeof *h, MPI_BYTE, i, TAG_REQ, s->comm, &s->reqs[2 * i]));
        MPI_CHECK(MPI_Isend(h + 1, (int)body, MPI_BYTE, i, TAG_DATA, s->comm,
                            &s->reqs[2 * i + 1]));
        t->meter.bytes_sent += (int64_t)body;
    }
    MPI_CHECK(MPI_Waitall(2 * s->S, s->reqs, s->sts));
    vec_zero(s->acc, t->n);
    t->meter.t_comm += trainer_clock() - t0;
}

/* A reply said a periodic checkpoint is due: no more requests until it is
 * written; the fetch that was interrupted is the first after it. */
static void worker_pause(ps_state *s, int64_t want)
{
    s->pause = 1;
    s->fetched = 0;
    s->first_want = want;
    ps_msg q = { .kind = K_PAUSE };
    for (int i = 0; i < s->S; i++)
        MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
}

static void worker_step(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const dt_config *c = t->cfg;
    if (!s->fetched) {
        s->fetched = 1;
        int64_t want = s->sync ? s->first_want : 0;
        int f = worker_fetch(t, s, want);
        if (f & F_PAUSE) {
            worker_pause(s, want);
            return;
        }
        if (f & (F_END | F_STOP)) {
            s->ended = f & F_STOP ? 2 : 1;
            return;
        }
    }
    trainer_gradient(t, t->params);
    vec_add(s->acc, t->grads, t->n);
    int64_t k = t->step + 1;
    if (c->ps.fetch_every > 1) { /* between fetches the worker steps its own copy */
        float lr = lr_at(t, s, s->seen_clock);
        vec_sub_axpy(t->params, lr, t->grads, t->n);
    }
    if (k % c->ps.push_every == 0)
        worker_push(t, s);
    if (k % c->ps.fetch_every == 0) {
        int64_t want = s->sync ? s->seen_clock + 1 : 0;
        int f = worker_fetch(t, s, want);
        if (f & F_PAUSE)
            worker_pause(s, want);
        else if (f & (F_END | F_STOP))
            s->ended = f & F_STOP ? 2 : 1;
    }
}

/* ---- supervisor ------------------------------------------------------------------ */

/* fetch: get the servers' model first (else it was just fetched) */
static void supervisor_eval(dt_trainer *t, ps_state *s, int fetch)
{
    if (fetch)
        worker_fetch(t, s, -1);
    double loss, acc;
    trainer_evaluate(t, t->params, &loss, &acc);
    if (s->npoints == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        for (int c = 0; c < 4; c++)
            s->curve[c] = dt_realloc(s->curve[c], (size_t)s->cap * sizeof(double));
    }
    double wall = trainer_clock() - t->wall_start;
    double v[4] = { wall, (double)s->seen_clock, loss, acc };
    for (int c = 0; c < 4; c++)
        s->curve[c][s->npoints] = v[c];
    s->npoints++;
    printf("supervisor  wall %.1f s  server clock %lld  test accuracy %.2f%%  loss %.4f\n", wall,
           (long long)s->seen_clock, 100 * acc, loss);
    fflush(stdout);
}

/* Evaluate every ps.eval_seconds, or (without it) every run.eval_every of
 * the servers' clock in worker steps, until server 0 says the workers are
 * done, then once more; sleeps between checks. By steps, the supervisor
 * fetches the model every check (20 ms) and evaluates it when the clock has
 * passed the next multiple. */
static void supervisor_run(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const dt_config *c = t->cfg;
    const double seconds = c->ps.eval_seconds > 0 ? c->ps.eval_seconds
                           : c->run.eval_every > 0 ? 0 : 60;
    if (s->fin == MPI_REQUEST_NULL) /* posted once: a pause leaves it waiting */
        MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, 0, TAG_FIN, s->comm, &s->fin));
    MPI_Request pause;
    MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, 0, TAG_PAUSE, s->comm, &pause));
    double next = trainer_clock() + seconds;
    int64_t mark = seconds == 0 ? (int64_t)(worker_steps_at(t, s, s->seen_clock) /
                                            (double)c->run.eval_every) : 0;
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Test(&s->fin, &done, MPI_STATUS_IGNORE));
        if (done)
            break;
        MPI_CHECK(MPI_Test(&pause, &done, MPI_STATUS_IGNORE));
        if (done) { /* every worker has paused for a checkpoint */
            ps_msg q = { .kind = K_PAUSE };
            for (int i = 0; i < s->S; i++)
                MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
            s->pause = 1;
            return;
        }
        stop_poll(); /* take part in the job-wide stop rounds */
        if (seconds > 0 && trainer_clock() >= next) {
            supervisor_eval(t, s, 1);
            next = trainer_clock() + seconds;
        } else if (seconds == 0) {
            worker_fetch(t, s, -1);
            int64_t m = (int64_t)(worker_steps_at(t, s, s->seen_clock) /
                                  (double)c->run.eval_every);
            if (m > mark) {
                mark = m;
                supervisor_eval(t, s, 0);
            }
        }
        nanosleep((&(struct timespec){ 0, 20000000L }), NULL);
    }
    MPI_CHECK(MPI_Cancel(&pause));
    MPI_CHECK(MPI_Wait(&pause, MPI_STATUS_IGNORE));
    supervisor_eval(t, s, 1);
    ps_msg q = { .kind = K_DONE };
    for (int i = 0; i < s->S; i++)
        MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
}

/* ---- the ops ------------------------------------------------------------------------ */

static void ps_step(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    if (s->role == ROLE_SERVER)
        server_run(t);
    else if (s->role == ROLE_SUPERVISOR)
        supervisor_run(t);
    else
        worker_step(t);
}

static int ps_progress(dt_trainer *t, int stop_local, double *global_steps)
{
    ps_state *s = t->algo_state;
    *global_steps = worker_steps_at(t, s, s->role == ROLE_SERVER ? s->clock : s->seen_clock);
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
                   : s->role == ROLE_SERVER ? llround(worker_steps_at(t, s, s->clock))
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
        .resumed = ps_resumed, .elastic = DT_ELASTIC_SHARDED,                               \
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
