#include "optim/sgd.h"

#include <stdlib.h>

#include "core/error.h"
#include "core/simd.h"
#include "core/vec.h"
#include "nn/cuda/sgd.h"

void sgd_config(dt_sgd *o, size_t n, double momentum, double weight_decay, bool nesterov)
{
    o->n = n;
    o->momentum = (float)momentum;
    o->weight_decay = (float)weight_decay;
    o->nesterov = nesterov;
    o->v = NULL;
}

void sgd_init(dt_sgd *o, size_t n, double momentum, double weight_decay, bool nesterov)
{
    sgd_config(o, n, momentum, weight_decay, nesterov);
    o->v = dt_falloc(n);
}

/* The per-element bodies are nn/cuda/sgd.h's, the device's own; one loop per
 * case keeps the branches out of the loops. Compiled per ISA level
 * (core/simd.h): the same bits at every level. */
DT_KERNEL_BODY void sgd_span_body(size_t i0, size_t len, float m, float wd, int nesterov,
                                  float lr, float *restrict x, const float *restrict g,
                                  float *restrict v)
{
    const size_t e = i0 + len;
    /* omp simd: -O2's cost model leaves a loop with a remainder scalar */
    if (m == 0.0f) {
#pragma omp simd
        for (size_t i = i0; i < e; i++)
            sgd_plain_at(i, wd, lr, x, g);
    } else if (nesterov) {
#pragma omp simd
        for (size_t i = i0; i < e; i++)
            sgd_nesterov_at(i, m, wd, lr, x, g, v);
    } else {
#pragma omp simd
        for (size_t i = i0; i < e; i++)
            sgd_momentum_at(i, m, wd, lr, x, g, v);
    }
}

DT_KERNEL_VARIANTS(sgd_span, (size_t i0, size_t len, float m, float wd, int nesterov, float lr,
                              float *restrict x, const float *restrict g, float *restrict v),
                   (i0, len, m, wd, nesterov, lr, x, g, v));

/* Elements are independent: compute.threads > 1 shares the chunks out and
 * changes no bit. */
void sgd_step_flat(size_t n, float m, float wd, int nesterov, float lr, float *restrict x,
                   const float *restrict g, float *restrict v)
{
    /* the simulator: x, g and v hold no model; a worker's update is part of
     * sim.compute_time, a parameter server's is not modelled */
    VEC_SKIP_IN_SIM;
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(sgd_span)(i0, len, m, wd, nesterov, lr, x, g, v));
}

void sgd_step(dt_sgd *o, float *restrict x, const float *restrict g, float lr)
{
    sgd_step_flat(o->n, o->momentum, o->weight_decay, o->nesterov, lr, x, g, o->v);
}

void sgd_free(dt_sgd *o)
{
    free(o->v);
    o->v = NULL;
}
