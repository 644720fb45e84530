/* The GPT's layer passes on the device, per row or element: the bodies of
 * the CUDA kernels (nn/cuda/gpt.cu), also compiled for the host, where
 * tests/test_cuda_host.c holds them to the CPU passes of nn/transformer.h bit
 * for bit: the same float expressions in the same order (LayerNorm's sums
 * over the CPU's sixteen lanes, then the lanes in order), the products an
 * add reads rounded on their own (DT_FMUL). The equations: nn/transformer.h. */
#ifndef DT_NN_CUDA_GPT_H
#define DT_NN_CUDA_GPT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"
#include "core/rng.h"

/* dropout_factor of nn/transformer.h */
static inline DT_HD float gpt_dropout_factor(uint64_t key, uint64_t i, float p)
{
    return rng_hash_uniform(key, i) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

/* x (B, T, C) element i = dropout(wte[tok[b, t]] + wpe[t]): tok (B, T),
 * wte (V, C), wpe (>= T, C) */
static inline DT_HD void gpt_embedding_at(size_t i, int T, int C, const int32_t *tok,
                                          const float *wte, const float *wpe, float p,
                                          uint64_t key, float *x)
{
    const size_t bt = i / (size_t)C, c = i % (size_t)C;
    const float s = wte[(size_t)tok[bt] * C + c] + wpe[(bt % (size_t)T) * C + c];
    x[i] = p > 0.0f ? s * gpt_dropout_factor(key, i, p) : s;
}

#define GPT_LN_EPS 1e-5f
#define GPT_LN_LANES 16

/* Row x (C) of LayerNorm into y (C), mean and rstd: layernorm.c's ln_row
 * (the mean, then the centred variance, each summed over sixteen lanes
 * l, l + 16, ... up to the last whole block of 16, the lanes added in order,
 * then the tail) */
static inline DT_HD void gpt_layernorm_row(int C, const float *x, const float *g,
                                           const float *b, float *y, float *mean, float *rstd)
{
    const int C16 = C / GPT_LN_LANES * GPT_LN_LANES;
    float a[GPT_LN_LANES];
    for (int l = 0; l < GPT_LN_LANES; l++)
        a[l] = 0.0f;
    for (int i = 0; i < C16; i += GPT_LN_LANES)
        for (int l = 0; l < GPT_LN_LANES; l++)
            a[l] += x[i + l];
    float s = a[0];
    for (int l = 1; l < GPT_LN_LANES; l++)
        s += a[l];
    for (int i = C16; i < C; i++)
        s += x[i];
    const float m = s / (float)C;
    for (int l = 0; l < GPT_LN_LANES; l++)
        a[l] = 0.0f;
    for (int i = 0; i < C16; i += GPT_LN_LANES)
        for (int l = 0; l < GPT_LN_LANES; l++) {
            const float d = x[i + l] - m;
            a[l] += DT_FMUL(d, d);
        }
    float v = a[0];
    for (int l = 1; l < GPT_LN_LANES; l++)
        v += a[l];
    for (int i = C16; i < C; i++)
        v += DT_FMUL(x[i] - m, x[i] - m);
    const float r = 1.0f / sqrtf(v / (float)C + GPT_LN_EPS);
    for (int i = 0; i < C; i++)
        y[i] = DT_FMUL((x[i] - m) * r, g[i]) + b[i];
    *mean = m;
    *rstd = r;
}

/* Row n of the residual add fused with the LayerNorm after it: xo = x +
 * dropout(r), y = LayerNorm(xo); x, r, xo, y (N, C), xo may be r */
static inline DT_HD void gpt_layernorm_residual_row(size_t n, int C, const float *x,
                                                    const float *r, float p, uint64_t key,
                                                    const float *g, const float *b, float *xo,
                                                    float *y, float *mean, float *rstd)
{
    const size_t o = n * (size_t)C;
    for (int i = 0; i < C; i++)
        xo[o + i] = p > 0.0f ? x[o + i] + DT_FMUL(r[o + i], gpt_dropout_factor(key, o + i, p))
                             : x[o + i] + r[o + i];
    gpt_layernorm_row(C, xo + o, g, b, y + o, mean + n, rstd + n);
}

#endif
