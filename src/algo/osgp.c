/* Overlap SGP (doc/references.md, OSGP): SGP whose gossip of step t travels while
 * step t+1 computes. At the start of a step:
 *   1. absorb the message in flight, if it has arrived (with overlap_tau = 0
 *      always: wait for it; with tau > 0 wait only once it is tau steps old);
 *   2. if none is in flight: keep (x, w)/(k+1), send a copy of it to the
 *      step's out-peers from the communication thread;
 *   3. z = x / w, g = grad F(z), x <- x - lr sgd(g) on the kept share.
 * The sent share is scaled before it leaves and the step acts on the kept
 * share, so every gradient reaches the network sum in full: OSGP is SGP with
 * stale messages, not SGP at 1/(k+1) of the learning rate (the bug of the
 * original overlap code). */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/gossip.h"
#include "comm/progress.h"
#include "core/error.h"
#include "engine/engine.h"

typedef struct osgp_state {
    dt_gossip g;
    dt_progress *thread;
    dt_transport *tp;
    float *z;           /* (n) de-biased model */
    float *pending;     /* (n + 2): received sum (x, w) and, last, 1 if not yet absorbed */
    float w[1];         /* push-sum weight */
    int in_flight;      /* an exchange is running on the thread */
    int64_t sent_step;
} osgp_state;

static int osgp_check(const dt_config *cfg, int nranks)
{
    dt_topology topo;
    if (gossip_topology(&topo, cfg, nranks, "exponential") != 0)
        return -1;
    topology_free(&topo);
    return 0;
}

static void exchange_job(void *arg)
{
    osgp_state *s = arg;
    gossip_start(&s->g, s->tp, s->g.send);
    gossip_finish(&s->g, s->tp);
}

static void osgp_setup(dt_trainer *t)
{
    osgp_state *s = dt_calloc(1, sizeof *s);
    /* host vectors (no device_vectors: the thread's transfers stay on the host) */
    if (gossip_init(&s->g, t->cfg, t->rank, t->nranks, t->n + 1, "exponential",
                    trainer_vectors(t)) != 0)
        DT_FATAL("%s", dt_err_msg());
    s->tp = t->tp;
    s->z = dt_falloc(t->n);
    s->pending = dt_falloc(t->n + 2);
    s->w[0] = 1.0f;
    s->thread = progress_start();
    t->algo_state = s;
}

/* The exchange has finished: sum what arrived, mark it to be absorbed. */
static void collect(dt_trainer *t, osgp_state *s)
{
    gossip_sum_received(&s->g, NULL, s->pending);
    s->pending[t->n + 1] = 1.0f;
    s->in_flight = 0;
}

static void drain(dt_trainer *t, osgp_state *s)
{
    if (!s->in_flight)
        return;
    double t0 = trainer_clock();
    progress_wait(s->thread);
    t->meter.t_wait += trainer_clock() - t0;
    collect(t, s);
}

static void osgp_step(dt_trainer *t)
{
    osgp_state *s = t->algo_state;
    float *x = t->params;
    const int64_t tau = t->cfg->algorithm.overlap_tau;
    if (s->in_flight) {
        if (tau == 0 || t->step - s->sent_step >= tau)
            drain(t, s);
        else if (progress_test(s->thread))
            collect(t, s);
    }
    double t0 = trainer_clock();
    if (s->pending[t->n + 1] != 0.0f) { /* absorb */
        pushsum_absorb(&s->g, s->pending, x, t->n, s->w);
        s->pending[t->n + 1] = 0.0f;
    }
    if (!s->in_flight) { /* keep a share, send a share */
        t->meter.bytes_sent += pushsum_share(&s->g, t->rank, t->step, x, t->n, s->w);
        progress_post(s->thread, exchange_job, s);
        s->in_flight = 1;
        s->sent_step = t->step;
    }
    t->meter.t_comm += trainer_clock() - t0;

    pushsum_debias(&s->g, x, t->n, s->w, s->z);
    trainer_gradient(t, s->z);
    trainer_update(t, x);
    t->meter.weight = s->w[0];
}

static const float *osgp_model(dt_trainer *t)
{
    osgp_state *s = t->algo_state;
    pushsum_debias(&s->g, t->params, t->n, s->w, s->z);
    return s->z;
}

/* Checkpoint: the message in flight is drained (not absorbed) into
 * `pending`, which is saved; the next step absorbs it exactly as it would
 * have absorbed the message, so tau = 0 resumes bit for bit. */
static int osgp_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    osgp_state *s = t->algo_state;
    if (max < 2)
        DT_FATAL("osgp: no room for its checkpoint arrays");
    drain(t, s);
    out[0] = (dt_ckpt_array){ "push_sum_weight", s->w, 1, DT_CKPT_MEAN };
    out[1] = (dt_ckpt_array){ "osgp_pending", s->pending, t->n + 2, DT_CKPT_MEAN_FLAGGED };
    return 2;
}

/* A resume on another rank count: x, w and pending hold the old ranks'
 * means, pending over the ranks whose message was not yet absorbed
 * (DT_CKPT_MEAN_FLAGGED), so (x + pending x) / (w + pending w) is sum x /
 * sum w over every old rank and message: the network's de-biased average.
 * Every rank starts from it with weight 1 and no message pending. */
static void osgp_resumed(dt_trainer *t)
{
    if (!t->elastic_from)
        return;
    osgp_state *s = t->algo_state;
    const size_t n = t->n;
    const int pend = s->pending[n + 1] != 0.0f;
    const double w = (double)s->w[0] + (pend ? (double)s->pending[n] : 0.0);
    if (!(w > 0.0))
        DT_FATAL("osgp: the old ranks' mean push-sum weight is %g, not positive", w);
    for (size_t i = 0; i < n; i++)
        t->params[i] = (float)(((double)t->params[i] + (pend ? (double)s->pending[i] : 0.0)) / w);
    s->w[0] = 1.0f;
    memset(s->pending, 0, (n + 2) * sizeof *s->pending);
}

static void osgp_teardown(dt_trainer *t)
{
    osgp_state *s = t->algo_state;
    progress_stop(s->thread); /* completes the last exchange: its peers wait for it too */
    gossip_free(&s->g);
    free(s->z);
    free(s->pending);
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_osgp = {
    .name = "osgp",
    .summary = "overlap SGP: gossip of step t overlaps step t+1 (communication thread); "
               "overlap_tau steps ahead at most; equals SGP with stale messages",
    .decentralized = 1,
    .check = osgp_check,
    .elastic = DT_ELASTIC_AVERAGE,
    .elastic_note = "push-sum: the model is sum x / sum w over the old ranks and their "
                    "messages not yet absorbed, weights reset to 1, nothing pending",
    .thread = "its exchange of step k overlaps step k+1 on a communication thread",
    .setup = osgp_setup,
    .step = osgp_step,
    .model = osgp_model,
    .state = osgp_state_arrays,
    .resumed = osgp_resumed,
    .teardown = osgp_teardown,
};
