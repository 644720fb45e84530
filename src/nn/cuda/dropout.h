/* Per-element body of inverted dropout (CPU: backend/cpu/dropout.c). The mask is
 * rng_hash_uniform(key, i) >= p, a pure function of (key, i): the CPU and CUDA
 * kernels draw the same mask for the same key. */
#ifndef DT_NN_CUDA_DROPOUT_H
#define DT_NN_CUDA_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"
#include "core/rng.h"

/* Scale of a kept activation: 1 for p <= 0 (everything kept), 0 for p >= 1
 * (nothing kept, so the infinite 1 / (1 - p) is never used). */
static inline DT_HD float dropout_scale(float p)
{
    return p <= 0.0f ? 1.0f : p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* x, y, mask: (n); scale = dropout_scale(p) */
static inline DT_HD void dropout_forward_at(size_t i, float p, float scale, uint64_t key,
                                            const float *x, float *y, float *mask)
{
    const float m = (p <= 0.0f || rng_hash_uniform(key, (uint64_t)i) >= p) ? scale : 0.0f;
    mask[i] = m;
    y[i] = p <= 0.0f ? x[i] : x[i] * m;
}

static inline DT_HD void dropout_backward_at(size_t i, const float *mask, const float *dy,
                                             float *dx)
{
    dx[i] += dy[i] * mask[i];
}

#endif
