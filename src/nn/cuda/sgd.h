/* Per-element body of the SGD step (CPU: optim/sgd.c, equations in
 * optim/sgd.h): g <- g + wd x; v <- m v + g; d <- nesterov ? g + m v : v;
 * x <- x - lr d. With m = 0 the momentum buffer is neither read nor written. */
#ifndef DT_NN_CUDA_SGD_H
#define DT_NN_CUDA_SGD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/hd.h"

/* x, g, v: (n); g is not modified */
static inline DT_HD void sgd_step_at(size_t i, float m, float wd, bool nesterov, float lr,
                                     float *x, const float *g, float *v)
{
    if (m == 0.0f) {
        x[i] -= lr * (g[i] + wd * x[i]);
    } else if (nesterov) {
        const float gi = g[i] + wd * x[i];
        v[i] = m * v[i] + gi;
        x[i] -= lr * (gi + m * v[i]);
    } else {
        v[i] = m * v[i] + g[i] + wd * x[i];
        x[i] -= lr * v[i];
    }
}

#endif
