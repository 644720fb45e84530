/* D-PSGD (Lian et al., NeurIPS 2017; doc/references.md, D-PSGD):
 *   cta (the paper):  x <- sum_j W_ij x_j - lr sgd(g(x))
 *   atc:              x <- sum_j W_ij (x_j - lr sgd(g(x_j)))
 * with a symmetric doubly-stochastic W over the step's neighbours:
 * Metropolis-Hastings weights W_ij = 1 / (1 + max(d_i, d_j)), which are 1/2
 * for the bipartite pairs (the default graph) and 1/(k+1) on regular graphs.
 * x, the received x_j and the mix live where the trainer's vectors do
 * (trainer_vectors: device memory with compute.device = cuda). */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/gossip.h"
#include "core/error.h"
#include "engine/engine.h"

typedef struct dpsgd_state {
    dt_gossip g;
    float *mix;         /* (n) sum_j W_ij x_j */
    float *wij;         /* (n ranks) W_ij of the step's in-peers, host memory */
    int *tmp;           /* (n ranks) peers of a neighbour */
} dpsgd_state;

/* W must be symmetric: at every step each rank's out-peers are its in-peers. */
static int symmetric(const dt_topology *topo)
{
    int n = topo->n, *out = dt_calloc((size_t)n, sizeof *out),
        *in = dt_calloc((size_t)n, sizeof *in), ok = 1;
    int steps = topo->is_static ? 1 : topo->len[0] * 2;
    for (int s = 0; s < steps && ok; s++)
        for (int r = 0; r < n && ok; r++) {
            int no = topology_out_peers(topo, r, s, out), ni = topology_in_peers(topo, r, s, in);
            if (no != ni)
                ok = 0;
            for (int a = 0; a < no && ok; a++) {
                int found = 0;
                for (int b = 0; b < ni; b++)
                    found |= out[a] == in[b];
                ok = found;
            }
        }
    free(out);
    free(in);
    return ok;
}

static int dpsgd_check(const dt_config *cfg, int nranks)
{
    dt_topology topo;
    if (gossip_topology(&topo, cfg, nranks, "bipartite") != 0)
        return -1;
    int ok = symmetric(&topo);
    topology_free(&topo);
    if (!ok)
        return dt_err_set("algorithm.mode = dpsgd needs a symmetric graph (each rank's "
                          "out-peers are its in-peers): bipartite, ring with peers = 2, "
                          "complete, exponential-both with an even number of peers, or a "
                          "file graph; algorithm.topology = %s is not",
                          cfg->algorithm.topology);
    return 0;
}

static void dpsgd_setup(dt_trainer *t)
{
    const dt_backend *v = trainer_vectors(t);
    dpsgd_state *s = dt_calloc(1, sizeof *s);
    if (gossip_init(&s->g, t->cfg, t->rank, t->nranks, t->n, "bipartite", v) != 0)
        DT_FATAL("%s", dt_err_msg());
    s->mix = v->mem_alloc(t->n * sizeof(float));
    s->wij = dt_calloc((size_t)t->nranks, sizeof *s->wij);
    s->tmp = dt_calloc((size_t)t->nranks, sizeof *s->tmp);
    t->algo_state = s;
}

/* x <- W_ii x + sum_j W_ij x_j over the neighbours of gossip step `step`. */
static void combine(dt_trainer *t, dpsgd_state *s, int64_t step)
{
    double t0 = trainer_clock();
    float *x = t->params;
    gossip_peers(&s->g, t->rank, step);
    gossip_start(&s->g, t->tp, x); /* x itself: it changes only after the finish */
    gossip_finish(&s->g, t->tp);
    const int di = s->g.nout;
    double self = 1.0;
    for (int j = 0; j < s->g.nin; j++) { /* ascending in-peer order */
        int dj = topology_out_peers(&s->g.topo, s->g.in[j], step, s->tmp);
        s->wij[j] = 1.0f / (float)(1 + (di > dj ? di : dj));
        self -= s->wij[j];
    }
    gossip_sum_received(&s->g, s->wij, s->mix);        /* mix = sum_j W_ij x_j */
    s->g.v->flat_ax_plus(t->n, (float)self, s->mix, x); /* x <- W_ii x + mix */
    t->meter.bytes_sent += (int64_t)(s->g.nout * t->n * sizeof(float));
    t->meter.t_comm += trainer_clock() - t0;
}

static void dpsgd_step(dt_trainer *t)
{
    dpsgd_state *s = t->algo_state;
    trainer_gradient(t, t->params);           /* g = grad F(x) */
    if (t->cfg->algorithm.dpsgd_order[0] == 'a') {
        trainer_update(t, t->params);         /* adapt ... */
        combine(t, s, t->step);               /* ... then combine */
    } else {
        combine(t, s, t->step);               /* combine ... */
        trainer_update(t, t->params);         /* ... then adapt with g(x) */
    }
}

static const float *dpsgd_model(dt_trainer *t) { return t->params; }

static void dpsgd_teardown(dt_trainer *t)
{
    dpsgd_state *s = t->algo_state;
    s->g.v->mem_free(s->mix);
    gossip_free(&s->g);
    free(s->wij);
    free(s->tmp);
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_dpsgd = {
    .name = "dpsgd",
    .summary = "decentralized parallel SGD: symmetric doubly-stochastic averaging with the "
               "step's neighbours (default bipartite pairs); preserves the mean of x",
    .decentralized = 1,
    .check = dpsgd_check,
    .elastic = DT_ELASTIC_AVERAGE,
    .nccl = 1,
    .setup = dpsgd_setup,
    .step = dpsgd_step,
    .model = dpsgd_model,
    .teardown = dpsgd_teardown,
    .device_vectors = 1,
};
