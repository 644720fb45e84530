/* Per-element bodies of ReLU and sigmoid (CPU: backend/cpu/activation.c). Backward
 * takes the forward output y and accumulates into dx, as every backend's
 * input gradient does (backend/backend.h). Plain C99 that nvcc also compiles:
 * activation.cu maps one thread to one i, tests/test_cuda_host.c runs every i
 * on the host. */
#ifndef DT_NN_CUDA_ACTIVATION_H
#define DT_NN_CUDA_ACTIVATION_H

#include <math.h>
#include <stddef.h>

#include "core/hd.h"

/* x, y: (n) */
static inline DT_HD void relu_forward_at(size_t i, const float *x, float *y)
{
    // NaN < 0 is false: a NaN passes through, as on the CPU
    y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

/* y, dy, dx: (n) */
static inline DT_HD void relu_backward_at(size_t i, const float *y, const float *dy, float *dx)
{
    dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}

/* y, d: (n); the gradient masked in place (input and output gradient share d) */
static inline DT_HD void relu_backward_inplace_at(size_t i, const float *y, float *d)
{
    d[i] = y[i] > 0.0f ? d[i] : 0.0f;
}

static inline DT_HD void sigmoid_forward_at(size_t i, const float *x, float *y)
{
    // exp of a non-positive argument only: no overflow, no NaN for large |x|
    const float v = x[i];
    if (v >= 0.0f) {
        y[i] = 1.0f / (1.0f + expf(-v));
    } else {
        const float e = expf(v);
        y[i] = e / (1.0f + e);
    }
}

static inline DT_HD void sigmoid_backward_at(size_t i, const float *y, const float *dy, float *dx)
{
    dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

#endif
