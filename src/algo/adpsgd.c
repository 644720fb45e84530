/* AD-PSGD (Lian et al., ICML 2018; doc/references.md, AD-PSGD): every rank loops
 * without waiting for the others:
 *   1. x^ = x (a snapshot; it may be stale by the time it is used)
 *   2. g = grad F(x^)
 *   3. average atomically with one neighbour: x_i, x_j <- (x_i + x_j) / 2
 *   4. x <- x - lr sgd(g)
 * On the bipartite graph only active (odd) ranks start an exchange, with
 * the out-peer of their own exchange count; passive ranks answer from a
 * communication thread: under the lock that guards x it replies with x_i and
 * replaces x_i by the same average, so each exchange preserves x_i + x_j.
 * A rank is in at most one exchange at a time. The global step count (for
 * the learning-rate schedule, the stop and run.checkpoint_every) is kept by
 * rounds of a non-blocking sum (comm/gcount.h), which also carry the stop
 * requests of signals; no rank holds it. At the end, and before a periodic
 * checkpoint, every active rank tells its passive neighbours it is done; a
 * passive rank's thread ends once all of them have, so no exchange is left
 * half applied (the checkpoint is a consistent cut: the sum of the models
 * is what the exchanges conserved); after the checkpoint the thread starts
 * again. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "comm/gcount.h"
#include "comm/progress.h"
#include "core/error.h"
#include "topology/topology.h"
#include "engine/engine.h"

enum { TAG_REQ = 31, TAG_REP = 32, TAG_DONE = 33 };

typedef struct adpsgd_state {
    dt_topology topo;
    int active;
    MPI_Comm comm;              /* exchanges (a duplicate of the trainer's) */
    dt_gcount count;            /* the group's steps and stop requests */
    pthread_mutex_t lock;       /* guards x on passive ranks */
    dt_progress *server;        /* passive ranks: answers exchanges */
    int nclients;               /* passive: distinct active neighbours */
    float *xhat;                /* (n) snapshot the gradient is computed at */
    float *peer;                /* (n) active: the neighbour's x */
    float *inbox;               /* (n) passive: a request's x */
    int64_t exchanges;          /* active: exchanges started */
    float counter[4];           /* checkpoint: global count and this rank's exchange
                                 * count (its topology position), each as hi, lo with
                                 * value = hi * 2^20 + lo (exact in floats) */
    int finished;               /* the drain has run (and no restart since) */
    _Atomic int64_t served;     /* passive: bytes sent by the thread, not yet counted */
    dt_trainer *t;
} adpsgd_state;

static int adpsgd_check(const dt_config *cfg, int nranks)
{
    if (strcmp(cfg->algorithm.topology, "auto") && strcmp(cfg->algorithm.topology, "bipartite"))
        return dt_err_set("algorithm.mode = adpsgd runs on the bipartite graph (active ranks "
                          "start exchanges, passive ranks answer); algorithm.topology = %s",
                          cfg->algorithm.topology);
    dt_topology topo;
    if (topology_create(&topo, "bipartite", nranks, (int)cfg->algorithm.peers, NULL) != 0)
        return dt_err_prefix("algorithm.mode = adpsgd on %d ranks", nranks);
    topology_free(&topo);
    return 0;
}

static void lock(adpsgd_state *s)
{
    if (pthread_mutex_lock(&s->lock))
        DT_FATAL("adpsgd: pthread_mutex_lock failed");
}

static void unlock(adpsgd_state *s)
{
    if (pthread_mutex_unlock(&s->lock))
        DT_FATAL("adpsgd: pthread_mutex_unlock failed");
}

static void average(float *restrict x, const float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * (x[i] + y[i]);
}

/* Passive ranks' thread: polls (a blocking receive would spin a core inside
 * MPI) for requests from any active neighbour until all are done. */
static void serve(void *arg)
{
    adpsgd_state *s = arg;
    dt_trainer *t = s->t;
    int done = 0;
    while (done < s->nclients) {
        MPI_Request r;
        MPI_Status st;
        int flag = 0;
        MPI_CHECK(MPI_Irecv(s->inbox, (int)t->n, MPI_FLOAT, MPI_ANY_SOURCE, MPI_ANY_TAG, s->comm, &r));
        for (long spins = 0; !flag; spins++) {
            MPI_CHECK(MPI_Test(&r, &flag, &st));
            if (!flag && spins > 64)
                nanosleep((&(struct timespec){ 0, 50000 }), NULL);
        }
        if (st.MPI_TAG == TAG_DONE) {
            done++;
            continue;
        }
        lock(s);
        MPI_CHECK(MPI_Send(t->params, (int)t->n, MPI_FLOAT, st.MPI_SOURCE, TAG_REP, s->comm));
        average(t->params, s->inbox, t->n);
        unlock(s);
        atomic_fetch_add(&s->served, (int64_t)(t->n * sizeof(float)));
    }
}

static void adpsgd_setup(dt_trainer *t)
{
    adpsgd_state *s = dt_calloc(1, sizeof *s);
    s->t = t;
    if (topology_create(&s->topo, "bipartite", t->nranks, (int)t->cfg->algorithm.peers, NULL))
        DT_FATAL("%s", dt_err_msg());
    s->active = topology_is_active(&s->topo, t->rank);
    MPI_CHECK(MPI_Comm_dup(t->comm, &s->comm));
    gcount_init(&s->count, t->comm, 0);
    if (pthread_mutex_init(&s->lock, NULL))
        DT_FATAL("adpsgd: pthread_mutex_init failed");
    s->xhat = dt_falloc(t->n);
    s->peer = dt_falloc(t->n);
    s->inbox = dt_falloc(t->n);
    /* the ranks of a passive book are the active ranks that may call */
    s->nclients = s->active ? 0 : s->topo.len[t->rank];
    for (int a = 0; a < s->nclients; a++)
        for (int b = 0; b < a; b++)
            if (s->topo.book[t->rank][a] == s->topo.book[t->rank][b]) {
                s->nclients--; /* books hold distinct ranks; kept for safety */
                break;
            }
    t->algo_state = s;
    if (!s->active) {
        s->server = progress_start();
        progress_post(s->server, serve, s);
    }
}

static void adpsgd_step(dt_trainer *t)
{
    adpsgd_state *s = t->algo_state;
    lock(s);
    memcpy(s->xhat, t->params, t->n * sizeof *s->xhat);          /* 1. snapshot */
    unlock(s);
    trainer_gradient(t, s->xhat);                                /* 2. g = grad F(x^) */
    if (s->active) {                                             /* 3. pairwise average */
        double t0 = trainer_clock();
        int peer;
        topology_out_peers(&s->topo, t->rank, s->exchanges++, &peer);
        MPI_Request r;
        MPI_CHECK(MPI_Irecv(s->peer, (int)t->n, MPI_FLOAT, peer, TAG_REP, s->comm, &r));
        MPI_CHECK(MPI_Send(t->params, (int)t->n, MPI_FLOAT, peer, TAG_REQ, s->comm));
        double t1 = trainer_clock();
        MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        double t2 = trainer_clock();
        average(t->params, s->peer, t->n);
        t->meter.bytes_sent += (int64_t)(t->n * sizeof(float));
        t->meter.t_wait += t2 - t1;
        t->meter.t_comm += (t1 - t0) + (trainer_clock() - t2);
    }
    lock(s);
    trainer_update(t, t->params);                                /* 4. x <- x - lr sgd(g) */
    unlock(s);
    t->meter.bytes_sent += atomic_exchange(&s->served, 0);
}

static int adpsgd_progress(dt_trainer *t, int stop_local, double *global_steps)
{
    adpsgd_state *s = t->algo_state;
    const int64_t budget = t->total_steps * t->nranks;
    double t0 = trainer_clock();
    int round = gcount_poll(&s->count, 1, stop_local);
    t->meter.t_comm += trainer_clock() - t0;
    for (;;) {
        const int64_t ckpt = gcount_next_multiple(&s->count, t->cfg->run.checkpoint_every);
        if (!round) {
            double t1 = trainer_clock();
            round = gcount_hold(&s->count, ckpt < budget ? ckpt : budget);
            t->meter.t_wait += trainer_clock() - t1;
        }
        *global_steps = (double)s->count.total / t->nranks;
        if (!round)
            return ALGO_GO;
        if (s->count.stop)
            return ALGO_STOP;
        if (s->count.total >= budget)
            return ALGO_END;
        if (gcount_crossed(&s->count, t->cfg->run.checkpoint_every))
            return ALGO_CHECKPOINT;
        round = 0; /* no event: hold again while this rank's steps are uncounted */
    }
}

/* The passive ranks' thread answers exchanges again (after a checkpoint). */
static void adpsgd_restart(dt_trainer *t)
{
    adpsgd_state *s = t->algo_state;
    s->finished = 0;
    if (!s->active) {
        s->server = progress_start();
        progress_post(s->server, serve, s);
    }
}

/* Drain: actives tell their passive neighbours they are done; passive ranks
 * wait for their thread, which ends once every active neighbour is. Then
 * the steps not yet counted join the count (collective), so a checkpoint
 * holds every step taken. */
static void adpsgd_finish(dt_trainer *t)
{
    adpsgd_state *s = t->algo_state;
    if (s->finished)
        return;
    s->finished = 1;
    if (s->active) {
        for (int a = 0; a < s->topo.len[t->rank]; a++)
            MPI_CHECK(MPI_Send(NULL, 0, MPI_FLOAT, s->topo.book[t->rank][a], TAG_DONE, s->comm));
    } else if (s->server) {
        progress_stop(s->server);
        s->server = NULL;
        t->meter.bytes_sent += atomic_exchange(&s->served, 0);
    }
    gcount_settle(&s->count);
    ckpt_count_put(s->count.total, s->counter);
    ckpt_count_put(s->exchanges, s->counter + 2);
}

/* On another rank count (t->elastic_from ranks wrote the checkpoint; the
 * counters are old rank 0's, the settled count the same on every old rank):
 * the group's steps per rank carry over, so the count of all ranks' steps
 * is scaled to the new count, every rank's own step is that per-rank
 * figure, and the exchanges start at the new graph's beginning. */
static void adpsgd_resumed(dt_trainer *t)
{
    adpsgd_state *s = t->algo_state;
    int64_t count = ckpt_count_get(s->counter), max;
    s->exchanges = ckpt_count_get(s->counter + 2);
    MPI_CHECK(MPI_Allreduce(&count, &max, 1, MPI_INT64_T, MPI_MAX, t->comm));
    if (t->elastic_from) {
        const double per_rank = (double)max / t->elastic_from;
        max = llround(per_rank * t->nranks);
        t->step = llround(per_rank);
        t->global_step = per_rank;
        s->exchanges = 0;
    }
    s->count.total = s->count.before = max;
}

static int adpsgd_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    adpsgd_state *s = t->algo_state;
    if (max < 1)
        DT_FATAL("adpsgd: no room for its checkpoint arrays");
    /* the group's count is the same on every rank; the exchange count is
     * reset on another rank count (adpsgd_resumed) */
    out[0] = (dt_ckpt_array){ "adpsgd_counters", s->counter, 4, DT_CKPT_ROW0 };
    return 1;
}

static const float *adpsgd_model(dt_trainer *t) { return t->params; }

static void adpsgd_teardown(dt_trainer *t)
{
    adpsgd_state *s = t->algo_state;
    adpsgd_finish(t); /* no-op when the trainer already drained */
    gcount_free(&s->count);
    MPI_CHECK(MPI_Comm_free(&s->comm));
    pthread_mutex_destroy(&s->lock);
    topology_free(&s->topo);
    free(s->xhat);
    free(s->peer);
    free(s->inbox);
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_adpsgd = {
    .name = "adpsgd",
    .summary = "asynchronous decentralized SGD: active ranks average with one passive "
               "neighbour per step (answered by its thread), no global barrier; each "
               "exchange preserves x_i + x_j; steps counted by rounds of a non-blocking sum",
    .decentralized = 1,
    .async = 1,
    .check = adpsgd_check,
    .elastic = DT_ELASTIC_AVERAGE,
    .elastic_note = "the group's steps per rank carry over, the exchanges start on the new "
                    "bipartite graph",
    .thread = "a thread answers the peers' averaging requests while the rank computes",
    .setup = adpsgd_setup,
    .step = adpsgd_step,
    .progress = adpsgd_progress,
    .finish = adpsgd_finish,
    .restart = adpsgd_restart,
    .resumed = adpsgd_resumed,
    .model = adpsgd_model,
    .state = adpsgd_state_arrays,
    .teardown = adpsgd_teardown,
};
