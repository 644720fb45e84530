/* Inverted dropout: kept activations are scaled by 1 / (1 - p) at training
 * time so inference needs no rescaling. The mask comes from the counter-based
 * rng_hash_uniform(key, i), so it depends only on (key, i): the CPU and CUDA
 * backends draw the same mask, and a resumed run redraws it bit for bit. */
#include "backend/cpu/kernels.h"

#include "core/rng.h"
#include "core/simd.h"

#include <stdint.h>
#include <string.h>

typedef uint64_t v8u __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* Eight elements at a time: rng_hash_uniform's integer steps on 64-bit lanes
 * (one vpmullq a product where the CPU has AVX-512DQ, x86-64-v4), the same
 * exact conversion and comparison, so the mask's bits are the scalar loop's.
 * The scalar loop took 2.2 ns an element (4.5 % of a mnist_cnn step). */
DT_KERNEL_BODY void dropout_span_body(size_t i0, size_t len, float p, float scale, uint64_t key,
                         const float *x, float *y, float *mask)
{
    const size_t end = i0 + len;
    size_t i = i0;
    const v8u lane = { 0, 1, 2, 3, 4, 5, 6, 7 };
    const v8f pv = (v8f){ 0 } + p, sv = (v8f){ 0 } + scale;
    for (; i + 8 <= end; i += 8) {
        v8u h = lane + (i + RNG_GOLDEN); // rng_hash_uniform's steps, lane by lane
        RNG_MIX64_STEPS(h);
        h = key ^ h;
        RNG_MIX64_STEPS(h);
        const v8f u = __builtin_convertvector(h >> 40, v8f) * 0x1.0p-24f;
        const v8f m = (v8f)((v8i)(u >= pv) & (v8i)sv);
        v8f xv;
        memcpy(&xv, x + i, sizeof xv);
        const v8f yv = xv * m;
        memcpy(mask + i, &m, sizeof m);
        memcpy(y + i, &yv, sizeof yv);
    }
    for (; i < end; i++) {
        const float m = rng_hash_uniform(key, (uint64_t)i) >= p ? scale : 0.0f;
        mask[i] = m;
        y[i] = x[i] * m;
    }
}
DT_KERNEL_VARIANTS(dropout_span, (size_t i0, size_t len, float p, float scale, uint64_t key, const float *x, float *y, float *mask), (i0, len, p, scale, key, x, y, mask));

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
    // the mask depends on (key, i) alone: chunks on threads change no bit
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(dropout_span)(i0, len, p, scale, key, x, y, mask));
}

void cpu_dropout_forward_keyed(size_t n, float p, const uint64_t *key, const float *x, float *y,
                               float *mask)
{
    cpu_dropout_forward(n, p, *key, x, y, mask);
}

static void dropout_back_span(size_t n, const float *mask, const float *dy, float *dx)
{
    // blocks of four, all loads before the stores, so -O2 emits packed SSE
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float g0 = dy[i], g1 = dy[i + 1], g2 = dy[i + 2], g3 = dy[i + 3];
        const float m0 = mask[i], m1 = mask[i + 1], m2 = mask[i + 2], m3 = mask[i + 3];
        const float d0 = dx[i], d1 = dx[i + 1], d2 = dx[i + 2], d3 = dx[i + 3];
        dx[i] = d0 + g0 * m0;
        dx[i + 1] = d1 + g1 * m1;
        dx[i + 2] = d2 + g2 * m2;
        dx[i + 3] = d3 + g3 * m3;
    }
    for (; i < n; i++)
        dx[i] += dy[i] * mask[i];
}

/* dx = 0 + dy * mask: the bits of adding to a zeroed buffer (-0 becomes +0) */
static void dropout_back_span_write(size_t n, const float *mask, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = 0.0f + dy[i] * mask[i];
}

void cpu_dropout_backward(size_t n, const float *mask, const float *dy, float *dx, int dx_fresh)
{
    if (!dx)
        return;
    if (dx_fresh)
        DT_PARALLEL_CHUNKS(n, i0, len, dropout_back_span_write(len, mask + i0, dy + i0, dx + i0));
    else
        DT_PARALLEL_CHUNKS(n, i0, len, dropout_back_span(len, mask + i0, dy + i0, dx + i0));
}
