/* Elastic averaging SGD, synchronous (Zhang, Choromanska and LeCun 2015;
 * doc/references.md, EASGD). Every rank runs local SGD on its replica x_i; every tau
 * steps, with alpha = beta / n and both updates from the pre-update values,
 *   center <- center + beta * (mean_i x_i - center)
 *   x_i    <- x_i - lr * sgd(g_i) - alpha * (x_i - center)
 * The center is replicated (one allreduce; every rank updates its copy the
 * same way, so the copies stay identical) or kept on rank 0 (reduce, update,
 * broadcast: the other ranks hold the last broadcast center, which is the
 * pre-update value the next elastic step needs). The model is the center. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "comm/transport.h"
#include "core/error.h"
#include "engine/engine.h"

typedef struct easgd_state {
    float *center;  /* (n) */
    float *mean;    /* (n) sum, then mean, of x_i */
    float *pull;    /* (n) alpha * (x_i - center), from pre-update values */
    int root;       /* center kept on rank 0 */
} easgd_state;

static int easgd_check(const dt_config *cfg, int nranks)
{
    (void)cfg;
    (void)nranks;
    return 0;
}

static void easgd_setup(dt_trainer *t)
{
    const dt_backend *v = trainer_vectors(t); /* where params live: the vectors go there too */
    easgd_state *s = dt_calloc(1, sizeof *s);
    s->center = v->mem_alloc(t->n * sizeof(float));
    s->mean = v->mem_alloc(t->n * sizeof(float));
    s->pull = v->mem_alloc(t->n * sizeof(float));
    s->root = strcmp(t->cfg->easgd.center, "root") == 0;
    v->mem_copy(s->center, t->params, t->n * sizeof(float)); /* every replica starts equal */
    t->algo_state = s;
}

static void easgd_step(dt_trainer *t)
{
    easgd_state *s = t->algo_state;
    trainer_gradient(t, t->params);
    if ((t->step + 1) % t->cfg->easgd.tau != 0) {
        trainer_update(t, t->params);
        return;
    }
    const float beta = (float)t->cfg->easgd.beta, alpha = beta / (float)t->nranks;
    const float inv = 1.0f / (float)t->nranks;
    const dt_backend *v = trainer_vectors(t);
    double t0 = trainer_clock();
    v->mem_copy(s->mean, t->params, t->n * sizeof(float));
    if (s->root)
        t->tp->reduce_sum(t->tp, s->mean, t->n, 0);
    else
        t->tp->allreduce_sum(t->tp, s->mean, t->n);
    t->meter.bytes_sent += (int64_t)(t->n * sizeof(float));
    t->meter.t_comm += trainer_clock() - t0;
    v->flat_diff_scale(t->n, alpha, t->params, s->center, s->pull);
    if (!s->root || t->rank == 0)
        v->flat_toward(t->n, beta, inv, s->mean, s->center);
    if (s->root) {
        t0 = trainer_clock();
        t->tp->bcast(t->tp, s->center, t->n, 0);
        t->meter.t_comm += trainer_clock() - t0;
    }
    trainer_update(t, t->params);
    v->flat_sub(t->n, s->pull, t->params);
}

static const float *easgd_model(dt_trainer *t)
{
    return ((easgd_state *)t->algo_state)->center;
}

static int easgd_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    if (max < 1)
        DT_FATAL("easgd: no room for its checkpoint array");
    out[0] = (dt_ckpt_array){ "easgd_center", ((easgd_state *)t->algo_state)->center, t->n,
                               DT_CKPT_ROW0 };
    return 1;
}

static void easgd_teardown(dt_trainer *t)
{
    easgd_state *s = t->algo_state;
    const dt_backend *v = trainer_vectors(t);
    v->mem_free(s->center);
    v->mem_free(s->mean);
    v->mem_free(s->pull);
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_easgd = {
    .name = "easgd",
    .summary = "elastic averaging: local SGD, every easgd.tau steps replicas and center pull "
               "towards each other from pre-update values; beta 0 gives independent replicas",
    .check = easgd_check,
    .elastic = DT_ELASTIC_REPLICATED,
    .elastic_note = "the centre variable: old rank 0's (replicated)",
    .nccl = 1,
    .setup = easgd_setup,
    .step = easgd_step,
    .model = easgd_model,
    .state = easgd_state_arrays,
    .teardown = easgd_teardown,
    .device_vectors = 1,
};
