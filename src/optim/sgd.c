#include "optim/sgd.h"

#include <stdlib.h>

#include "core/error.h"

void sgd_init(dt_sgd *o, size_t n, double momentum, double weight_decay, bool nesterov)
{
    o->n = n;
    o->momentum = (float)momentum;
    o->weight_decay = (float)weight_decay;
    o->nesterov = nesterov;
    o->v = dt_falloc(n);
}

void sgd_step(dt_sgd *o, float *restrict x, const float *restrict g, float lr)
{
    const float m = o->momentum, wd = o->weight_decay;
    float *restrict v = o->v;
    const size_t n = o->n;
#ifdef DTRAIN_SIM
    /* the simulator: x, g and v hold no model; a worker's update is part of
     * sim.compute_time, a parameter server's is not modelled */
    (void)m, (void)wd, (void)v, (void)n, (void)x, (void)g, (void)lr;
    return;
#endif
    if (m == 0.0f) {
        for (size_t i = 0; i < n; i++)
            x[i] -= lr * (g[i] + wd * x[i]);
        return;
    }
    if (o->nesterov) {
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] + wd * x[i];
            v[i] = m * v[i] + gi;
            x[i] -= lr * (gi + m * v[i]);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            v[i] = m * v[i] + g[i] + wd * x[i];
            x[i] -= lr * v[i];
        }
    }
}

void sgd_free(dt_sgd *o)
{
    free(o->v);
    o->v = NULL;
}
