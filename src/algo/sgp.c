/* Stochastic Gradient Push (Assran et al., ICML 2019; doc/references.md, SGP).
 *
 * State: numerator x (t->params), push-sum weight w (starts at 1),
 * de-biased model z = x / w. Per step t:
 *   1. g = grad F(z)                       on the next minibatch
 *   2. x <- x - lr * sgd(g)                the step acts on the numerator
 *   3. push (x, w) / (k+1) to each out-peer of step t, keep (x, w) / (k+1)
 *   4. x <- kept + sum received x;  w <- kept + sum received w
 *   5. z = x / w
 * The weight always travels with the message (the last float), so any
 * graph, regular or not, keeps sum_i w_i = n and the de-biasing exact.
 * x, w, z and the messages live where the trainer's vectors do
 * (trainer_vectors: device memory with compute.device = cuda). */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/gossip.h"
#include "core/error.h"
#include "engine/engine.h"

typedef struct sgp_state {
    dt_gossip g;
    float *z;       /* (n) de-biased model */
    float *acc;     /* (n + 1) sum of the received messages */
    float *w;       /* (1) push-sum weight (checkpointed) */
} sgp_state;

static int sgp_check(const dt_config *cfg, int nranks)
{
    dt_topology topo;
    if (gossip_topology(&topo, cfg, nranks, "exponential") != 0)
        return -1;
    topology_free(&topo);
    return 0;
}

static void sgp_setup(dt_trainer *t)
{
    const dt_backend *v = trainer_vectors(t);
    sgp_state *s = dt_calloc(1, sizeof *s);
    if (gossip_init(&s->g, t->cfg, t->rank, t->nranks, t->n + 1, "exponential", v) != 0)
        DT_FATAL("%s", dt_err_msg()); /* sgp_check accepted this configuration */
    s->z = v->mem_alloc(t->n * sizeof(float));
    s->acc = v->mem_alloc((t->n + 1) * sizeof(float));
    s->w = v->mem_alloc(sizeof(float));
    const float one = 1.0f;
    v->to_backend(s->w, &one, sizeof one);
    t->algo_state = s;
}

/* Steps 3 and 4: one push-sum exchange at gossip step `step`. */
static void push_sum(dt_trainer *t, sgp_state *s, int64_t step)
{
    double t0 = trainer_clock();
    t->meter.bytes_sent += pushsum_share(&s->g, t->rank, step, t->params, t->n, s->w);
    gossip_start(&s->g, t->tp, s->g.send);
    gossip_finish(&s->g, t->tp);
    gossip_sum_received(&s->g, NULL, s->acc);
    pushsum_absorb(&s->g, s->acc, t->params, t->n, s->w);
    t->meter.t_comm += trainer_clock() - t0;
}

static void sgp_step(dt_trainer *t)
{
    sgp_state *s = t->algo_state;
    pushsum_debias(&s->g, t->params, t->n, s->w, s->z); /* z = x / w */
    trainer_gradient(t, s->z);      /* g = grad F(z) */
    trainer_update(t, t->params);   /* x <- x - lr sgd(g) */
    push_sum(t, s, t->step);        /* (x, w) mixed with the step's peers */
    s->g.v->to_host(&t->meter.weight, s->w, sizeof t->meter.weight); /* for the record */
}

static const float *sgp_model(dt_trainer *t)
{
    sgp_state *s = t->algo_state;
    pushsum_debias(&s->g, t->params, t->n, s->w, s->z); /* also right after a restore */
    return s->z;
}

static int sgp_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    sgp_state *s = t->algo_state;
    if (max < 1)
        DT_FATAL("sgp: no room for its checkpoint arrays");
    out[0] = (dt_ckpt_array){ "push_sum_weight", s->w, 1, DT_CKPT_MEAN };
    return 1;
}

/* A resume on another rank count: x and w hold the means of the old ranks'
 * numerators and weights (run/checkpointing.c), so x / w = sum x / sum w,
 * the network's de-biased average; every rank starts from it with weight 1
 * (the weights again sum to the rank count). */
static void sgp_resumed(dt_trainer *t)
{
    if (!t->elastic_from)
        return;
    sgp_state *s = t->algo_state;
    float w;
    s->g.v->to_host(&w, s->w, sizeof w);
    if (!(w > 0.0f))
        DT_FATAL("sgp: the old ranks' mean push-sum weight is %g, not positive", (double)w);
    trainer_scale(t, t->params, 1.0f / w);
    const float one = 1.0f;
    s->g.v->to_backend(s->w, &one, sizeof one);
}

static void sgp_teardown(dt_trainer *t)
{
    sgp_state *s = t->algo_state;
    const dt_backend *v = s->g.v;
    v->mem_free(s->z);
    v->mem_free(s->acc);
    v->mem_free(s->w);
    gossip_free(&s->g);
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_sgp = {
    .name = "sgp",
    .summary = "stochastic gradient push: push-sum gossip, weight sent with every message; "
               "sum of weights = ranks, averages converge to the exact mean",
    .decentralized = 1,
    .check = sgp_check,
    .elastic = DT_ELASTIC_AVERAGE,
    .elastic_note = "push-sum: the model is sum x / sum w over the old ranks, weights reset to 1",
    .nccl = 1,
    .setup = sgp_setup,
    .step = sgp_step,
    .model = sgp_model,
    .state = sgp_state_arrays,
    .resumed = sgp_resumed,
    .teardown = sgp_teardown,
    .device_vectors = 1,
};
