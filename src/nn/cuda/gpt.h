/* The GPT's layer passes on the device, per row or element: the bodies of
 * the CUDA kernels (nn/cuda/gpt.cu), also compiled for the host, where
 * tests/test_cuda_host.c holds them to the CPU passes of nn/transformer.h bit
 * for bit: the same float expressions in the same order (LayerNorm's and the
 * cross-entropy's sums over the CPU's sixteen lanes, then the lanes in
 * order), the products an add reads rounded on their own (DT_FMUL). GELU
 * equals the CPU's baseline kernel so; the CPU's AVX2 and AVX-512 kernels
 * fuse its multiply-adds (a stated bound). The equations: nn/transformer.h. */
#ifndef DT_NN_CUDA_GPT_H
#define DT_NN_CUDA_GPT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/exp2f.h"
#include "core/gelu_consts.h"
#include "core/hd.h"
#include "core/rng.h"

/* a dropout key the kernels read from device memory when they run (so a
 * recorded step takes the key written before each launch); only where p > 0 */
static inline DT_HD uint64_t gpt_key_at(float p, const uint64_t *key)
{
    return p > 0.0f ? *key : 0;
}

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

/* Column i of the embeddings' gradients, as embedding.c's embedding_backward:
 * the positions in order, each adding its (dropped-out) gradient into its
 * token's row of dwte (added to: the tied head's gradient is there) and its
 * position's row of dwpe (written: zeroed first) */
static inline DT_HD void gpt_embedding_backward_col(size_t i, int B, int T, int C,
                                                    const int32_t *tok, const float *dx,
                                                    float p, uint64_t key, float *dwte,
                                                    float *dwpe)
{
    for (int t = 0; t < T; t++)
        dwpe[(size_t)t * C + i] = 0.0f;
    for (int bt = 0; bt < B * T; bt++) {
        const size_t at = (size_t)bt * C + i;
        const float d = p > 0.0f ? dx[at] * gpt_dropout_factor(key, at, p) : dx[at];
        dwte[(size_t)tok[bt] * C + i] += d;
        dwpe[(size_t)(bt % T) * C + i] += d;
    }
}

/* Row n of LayerNorm from the forward's statistics (the backward's
 * recomputation of its output), as layernorm.c's layernorm_apply */
static inline DT_HD void gpt_layernorm_apply_row(size_t n, int C, const float *x,
                                                 const float *mean, const float *rstd,
                                                 const float *g, const float *b, float *y)
{
    const size_t o = n * (size_t)C;
    const float m = mean[n], r = rstd[n];
    for (int i = 0; i < C; i++)
        y[o + i] = DT_FMUL((x[o + i] - m) * r, g[i]) + b[i];
}

/* d[i] = the gradient of a residual branch's output through its dropout */
static inline DT_HD void gpt_dropout_grad_at(size_t i, const float *dres, float p, uint64_t key,
                                             float *d)
{
    d[i] = dres[i] * gpt_dropout_factor(key, i, p);
}

/* Row n of LayerNorm's input gradient, as layernorm.c's layernorm_backward:
 * dx = rstd (g dy - s1 - xhat s2), s1 = mean(g dy), s2 = mean(g dy xhat),
 * xhat = (x - mean) rstd, the two sums over sixteen lanes then the lanes in
 * order, then the tail; dx written (accumulate 0) or added to (1). */
static inline DT_HD void gpt_layernorm_backward_row(size_t n, int C, const float *x,
                                                    const float *mean, const float *rstd,
                                                    const float *g, const float *dy, float *dx,
                                                    int accumulate)
{
    const float *xr = x + n * (size_t)C, *d = dy + n * (size_t)C;
    float *o = dx + n * (size_t)C;
    const float m = mean[n], r = rstd[n];
    const int C16 = C / GPT_LN_LANES * GPT_LN_LANES;
    float a1[GPT_LN_LANES], a2[GPT_LN_LANES];
    for (int l = 0; l < GPT_LN_LANES; l++)
        a1[l] = a2[l] = 0.0f;
    for (int i = 0; i < C16; i += GPT_LN_LANES)
        for (int l = 0; l < GPT_LN_LANES; l++) {
            const float xh = (xr[i + l] - m) * r, gd = DT_FMUL(g[i + l], d[i + l]);
            a1[l] += gd;
            a2[l] += DT_FMUL(gd, xh);
        }
    float s1 = a1[0], s2 = a2[0];
    for (int l = 1; l < GPT_LN_LANES; l++) {
        s1 += a1[l];
        s2 += a2[l];
    }
    for (int k = C16; k < C; k++) {
        const float xh = (xr[k] - m) * r, gd = DT_FMUL(g[k], d[k]);
        s1 += gd;
        s2 += DT_FMUL(gd, xh);
    }
    s1 /= (float)C;
    s2 /= (float)C;
    for (int i = 0; i < C; i++) {
        const float xh = (xr[i] - m) * r;
        const float v = r * (DT_FMUL(g[i], d[i]) - s1 - DT_FMUL(xh, s2));
        o[i] = accumulate ? o[i] + v : v;
    }
}

/* Column k of LayerNorm's parameter gradients: dg = sum over the rows of dy
 * xhat, db = sum of dy, the rows in order (the CPU's order) */
static inline DT_HD void gpt_layernorm_backward_col(size_t k, int N, int C, const float *x,
                                                    const float *mean, const float *rstd,
                                                    const float *dy, float *dg, float *db)
{
    float sg = 0.0f, sb = 0.0f;
    for (int n = 0; n < N; n++) {
        const size_t at = (size_t)n * C + k;
        const float xh = (x[at] - mean[n]) * rstd[n];
        sg += DT_FMUL(dy[at], xh);
        sb += dy[at];
    }
    dg[k] = sg;
    db[k] = sb;
}

/* ---- exp, GELU, cross-entropy ------------------------------------------ */

/* backend/cpu/fast_exp.h's fast_expf, operation for operation (its constants
 * written out: that header is the CPU backend's): 2^n times Cephes' degree-6
 * polynomial on r = x - n ln 2, about 2 ulp over [-87.3, 88.3]. The products
 * that feed an add are rounded on their own, as the host's are. */
static inline DT_HD float gpt_expf(float x)
{
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    const float n = (DT_FMUL(x, 1.44269504088896341f) + 12582912.0f) - 12582912.0f;
    const float r = (x - DT_FMUL(n, 0.693359375f)) - DT_FMUL(n, -2.12194440e-4f);
    float q = 1.9875691500e-4f;
    q = DT_FMUL(q, r) + 1.3981999507e-3f;
    q = DT_FMUL(q, r) + 8.3334519073e-3f;
    q = DT_FMUL(q, r) + 4.1665795894e-2f;
    q = DT_FMUL(q, r) + 1.6666665459e-1f;
    q = DT_FMUL(q, r) + 5.0000001201e-1f;
    q = DT_FMUL(DT_FMUL(q, r), r) + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return q * scale;
}

/* GELU, tanh form, as backend/cpu/gelu.c writes it: gelu(x) = x s with
 * s = 1 / (1 + exp(-2u)) = 1 / (1 + 2^t) (2^t: core/exp2f.h),
 * u = sqrt(2/pi) (x + 0.044715 x^3), t = x (T1 + T3 x^2); its derivative
 * s + x s (1 - s) (D1 + D3 x^2) (core/gelu_consts.h). The CPU's baseline
 * (x86-64) variant computes these same operations; its AVX2 and AVX-512
 * variants fuse multiply-adds (another rounding: tests/test_cuda_host.c
 * states the bound). */
static inline DT_HD float gpt_gelu_s(float v)
{
    return 1.0f / (1.0f + dt_exp2f(v * (DT_FMUL(DT_GELU_T3, v * v) + DT_GELU_T1)));
}

static inline DT_HD float gpt_gelu_du(float v)
{
    return DT_FMUL(DT_GELU_D3, v * v) + DT_GELU_D1;
}

/* y[i] = gelu(x[i]) (y may be x) */
static inline DT_HD void gpt_gelu_at(size_t i, const float *x, float *y)
{
    const float v = x[i];
    y[i] = v * gpt_gelu_s(v);
}

/* y[i] = gelu(x[i]), d[i] = gelu'(x[i]): the backward's recomputation */
static inline DT_HD void gpt_gelu_deriv_at(size_t i, const float *x, float *y, float *d)
{
    const float v = x[i], s = gpt_gelu_s(v);
    y[i] = v * s;
    d[i] = s + DT_FMUL(v * s * (1.0f - s), gpt_gelu_du(v));
}

/* dy[i] *= d[i]: the backward through GELU from the kept derivative */
static inline DT_HD void gpt_gelu_backward_deriv_at(size_t i, const float *d, float *dy)
{
    dy[i] *= d[i];
}

/* dx[i] = dy[i] gelu'(x[i]) in one pass (the CPU's gelu_backward) */
static inline DT_HD void gpt_gelu_backward_at(size_t i, const float *x, const float *dy,
                                              float *dx)
{
    const float v = x[i], s = gpt_gelu_s(v);
    dx[i] = dy[i] * (s + DT_FMUL(v * s * (1.0f - s), gpt_gelu_du(v)));
}

#define GPT_XENT_LANES 16

/* Row z (V) of the cross-entropy's forward, as backend/cpu/xent_seq.c's
 * xent_row: the maximum and its first index, then exp(z - max) summed over
 * sixteen lanes (v, v + 16, ... up to the last whole block of 16), the lanes
 * added in order in double, then the tail; lse = max + log(sum). */
static inline DT_HD void gpt_xent_row(int V, const float *z, float *lse, int *arg)
{
    float mx = z[0];
    int a = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > mx) {
            mx = z[v];
            a = v;
        }
    const int V16 = V / GPT_XENT_LANES * GPT_XENT_LANES;
    float acc[GPT_XENT_LANES];
    for (int l = 0; l < GPT_XENT_LANES; l++)
        acc[l] = 0.0f;
    for (int v = 0; v < V16; v += GPT_XENT_LANES)
        for (int l = 0; l < GPT_XENT_LANES; l++)
            acc[l] += gpt_expf(z[v + l] - mx);
    double s = 0;
    for (int l = 0; l < GPT_XENT_LANES; l++)
        s += acc[l];
    for (int v = V16; v < V; v++)
        s += gpt_expf(z[v] - mx);
    *lse = (float)((double)mx + log(s));
    *arg = a;
}

/* Row n of the cross-entropy's gradient: g (V) = scale (softmax(z) - onehot(t))
 * from the forward's lse, as xent_seq_backward (g may be z; a target outside
 * [0, V), whose loss row is NaN, writes nothing outside the row) */
static inline DT_HD void gpt_xent_grad_row(int V, const float *z, float lse, int32_t t,
                                           float scale, float *g)
{
    for (int v = 0; v < V; v++)
        g[v] = scale * gpt_expf(z[v] - lse);
    if (t >= 0 && t < V)
        g[t] -= scale;
}

#endif
