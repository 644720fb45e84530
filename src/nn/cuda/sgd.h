/* Per-element bodies of the optimizer's step and of the algorithms'
 * arithmetic on the flat vectors, shared by the CPU (optim/sgd.c,
 * backend/cpu/cpu.c) and the device (nn/cuda/sgd.cu). SGD step (equations in
 * optim/sgd.h): g <- g + wd x; v <- m v + g; d <- nesterov ? g + m v : v;
 * x <- x - lr d. With m = 0 the momentum buffer is neither read nor written. */
#ifndef DT_NN_CUDA_SGD_H
#define DT_NN_CUDA_SGD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/hd.h"

/* x, g, v: (n); g is not modified */
static inline DT_HD void sgd_plain_at(size_t i, float wd, float lr, float *x, const float *g)
{
    x[i] -= lr * (g[i] + wd * x[i]);
}

static inline DT_HD void sgd_nesterov_at(size_t i, float m, float wd, float lr, float *x,
                                         const float *g, float *v)
{
    const float gi = g[i] + wd * x[i];
    v[i] = m * v[i] + gi;
    x[i] -= lr * (gi + m * v[i]);
}

static inline DT_HD void sgd_momentum_at(size_t i, float m, float wd, float lr, float *x,
                                         const float *g, float *v)
{
    v[i] = m * v[i] + g[i] + wd * x[i];
    x[i] -= lr * v[i];
}

static inline DT_HD void sgd_step_at(size_t i, float m, float wd, bool nesterov, float lr,
                                     float *x, const float *g, float *v)
{
    if (m == 0.0f)
        sgd_plain_at(i, wd, lr, x, g);
    else if (nesterov)
        sgd_nesterov_at(i, m, wd, lr, x, g, v);
    else
        sgd_momentum_at(i, m, wd, lr, x, g, v);
}

/* x <- a x (allreduce's 1/n after the sum); x: (n) */
static inline DT_HD void flat_scale_at(size_t i, float a, float *x)
{
    x[i] *= a;
}

/* EASGD's elastic terms (algo/easgd.c); x, c, mean, d, out: (n).
 * out <- a (x - c): the pull on a replica, from pre-update values */
static inline DT_HD void flat_diff_scale_at(size_t i, float a, const float *x, const float *c,
                                            float *out)
{
    out[i] = a * (x[i] - c[i]);
}

/* c <- c + beta (mean inv - c): the center moves towards the replicas' mean */
static inline DT_HD void flat_toward_at(size_t i, float beta, float inv, const float *mean,
                                        float *c)
{
    c[i] += beta * (mean[i] * inv - c[i]);
}

/* x <- x - d */
static inline DT_HD void flat_sub_at(size_t i, const float *d, float *x)
{
    x[i] -= d[i];
}

/* The gossip modes' terms (algo/gossip.c, algo/dpsgd.c), each the exact
 * float expression of the host loop it replaced (core/vec.h), so the CPU
 * backend's results are bit for bit those of the loops.
 * Push-sum share (doc/references.md, SGP): x <- x a; keep it and put it in the
 * message y. x, y: (n) */
static inline DT_HD void flat_scale_copy_at(size_t i, float a, float *x, float *y)
{
    x[i] = y[i] = x[i] * a;
}

/* x <- x + d (absorb the received sum); x, d: (n) */
static inline DT_HD void flat_add_at(size_t i, const float *d, float *x)
{
    x[i] += d[i];
}

/* z <- x / w[0] (de-bias by the push-sum weight, which lives beside the
 * vectors in the same memory); x, z: (n), w: (1) */
static inline DT_HD void flat_div_at(size_t i, const float *x, const float *w, float *z)
{
    z[i] = x[i] / w[0];
}

/* One term of a sum of received slots, in ascending slot order:
 * y <- (fresh ? +0 : y) + x, or + a x when scaled. A fresh term adds to +0
 * as the zero-filled accumulator did (so a -0 term still gives +0). x, y: (n) */
static inline DT_HD void flat_sum_term_at(size_t i, const float *x, float *y, bool fresh)
{
    y[i] = (fresh ? 0.0f : y[i]) + x[i];
}

static inline DT_HD void flat_axpy_term_at(size_t i, float a, const float *x, float *y,
                                           bool fresh)
{
    y[i] = (fresh ? 0.0f : y[i]) + a * x[i];
}

/* y <- a y + x (D-PSGD: the self weight times x plus the neighbours' mix);
 * x, y: (n) */
static inline DT_HD void flat_ax_plus_at(size_t i, float a, const float *x, float *y)
{
    y[i] = a * y[i] + x[i];
}

#endif
