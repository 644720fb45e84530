/* Inverted dropout: kept activations are scaled by 1 / (1 - p) at training
 * time so inference needs no rescaling. The mask comes from the counter-based
 * rng_hash_uniform(key, i), so it depends only on (key, i): the CPU and CUDA
 * backends draw the same mask, and a resumed run redraws it bit for bit. */
#include "nn/kernels_cpu.h"

#include "core/rng.h"

#include <string.h>

void cpu_dropout_forward(size_t n, float p, uint64_t key, const float *x, float *y,
                         float *mask)
{
    if (p <= 0.0f) {
        if (y != x)
            memcpy(y, x, n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            mask[i] = 1.0f;
        return;
    }
    // p >= 1 keeps nothing (u < 1 always), so the infinite scale is never used
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float m = rng_hash_uniform(key, (uint64_t)i) >= p ? scale : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}

void cpu_dropout_backward(size_t n, const float *mask, const float *dy, float *dx)
{
    if (!dx)
        return;
    for (size_t i = 0; i < n; i++)
        dx[i] += dy[i] * mask[i];
}
