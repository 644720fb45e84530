/* LayerNorm over the channels of each position (eps 1e-5, biased variance,
 * as torch.nn.LayerNorm), alone or fused with the residual add before it.
 * The output is not kept for backward: the statistics (2 floats a row) and
 * the input are, and layernorm_apply recomputes the output when a layer's
 * weight gradient needs it. Rows are vectorised by sixteen channels
 * (core/simd.h; eight at a time in the narrow variants), with a scalar tail
 * when C is not a multiple of 16. In bf16
 * (compute.precision) each output row is also rounded into y16 while it is
 * in L1, for the product that reads it, instead of in a pass of its own. */
#include "nn/transformer.h"

#include <math.h>
#include <string.h>

#include "core/simd.h"
#include "core/bf16_round.h"

#define LN_EPS 1e-5f

/* y16 (C) = y rounded to bf16, where y16 is wanted */
static inline void ln_round_row(int C, const float *y, dt_bf16 *y16)
{
    if (!y16)
        return;
#pragma omp simd
    for (int i = 0; i < C; i++)
        y16[i] = bf16_round(y[i]);
}

/* Sum of the sixteen lanes, in lane order; VF8_SUM2 the same of a 16-float
 * sum kept as two eight-float halves (lo: lanes 0-7). */
#define V16_SUM(v) ((v)[0] + (v)[1] + (v)[2] + (v)[3] + (v)[4] + (v)[5] + (v)[6] + (v)[7] + \
                    (v)[8] + (v)[9] + (v)[10] + (v)[11] + (v)[12] + (v)[13] + (v)[14] + (v)[15])
#define VF8_SUM2(lo, hi) ((lo)[0] + (lo)[1] + (lo)[2] + (lo)[3] + (lo)[4] + (lo)[5] + (lo)[6] + \
                          (lo)[7] + (hi)[0] + (hi)[1] + (hi)[2] + (hi)[3] + (hi)[4] + (hi)[5] + \
                          (hi)[6] + (hi)[7])

/* y (C) = (x - m) r g + b over the first C16 = C rounded down to 16, in
 * vectors as wide as the level has registers for (narrow: eight floats). */
static inline __attribute__((always_inline)) void ln_affine(int narrow, int C16, const float *x,
                                                           float m, float r, const float *g,
                                                           const float *b, float *y)
{
    if (narrow)
        for (int i = 0; i < C16; i += 8)
            vf8_st(y + i, (vf8_ld(x + i) - m) * r * vf8_ld(g + i) + vf8_ld(b + i));
    else
        for (int i = 0; i < C16; i += 16)
            v16_st(y + i, (v16_ld(x + i) - m) * r * v16_ld(g + i) + v16_ld(b + i));
}

/* Statistics and output of one row x (C) into y (C); two passes over x (the
 * mean, then the centred variance) for accuracy when |mean| >> std. The
 * sums run in sixteen lanes at every level (narrow: two halves), so every
 * level computes the same bits. Always inlined: called from two clones, GCC
 * kept one out-of-line copy built for the baseline ISA (SSE2) that both
 * called. */
static inline __attribute__((always_inline)) void ln_row(int narrow, int C, const float *x,
                                                        const float *g, const float *b, float *y,
                                                        float *mean, float *rstd)
{
    const int C16 = C & ~15;
    float s, v;
    if (narrow) {
        vf8 lo = (vf8){ 0 }, hi = (vf8){ 0 };
        for (int i = 0; i < C16; i += 16) {
            lo += vf8_ld(x + i);
            hi += vf8_ld(x + i + 8);
        }
        s = VF8_SUM2(lo, hi);
    } else {
        v16f a = v16_splat(0);
        for (int i = 0; i < C16; i += 16)
            a += v16_ld(x + i);
        s = V16_SUM(a);
    }
    for (int i = C16; i < C; i++)
        s += x[i];
    const float m = s / (float)C;
    if (narrow) {
        vf8 lo = (vf8){ 0 }, hi = (vf8){ 0 };
        for (int i = 0; i < C16; i += 16) {
            const vf8 d0 = vf8_ld(x + i) - m, d1 = vf8_ld(x + i + 8) - m;
            lo += d0 * d0;
            hi += d1 * d1;
        }
        v = VF8_SUM2(lo, hi);
    } else {
        v16f a = v16_splat(0);
        for (int i = 0; i < C16; i += 16) {
            const v16f d = v16_ld(x + i) - m;
            a += d * d;
        }
        v = V16_SUM(a);
    }
    for (int i = C16; i < C; i++)
        v += (x[i] - m) * (x[i] - m);
    const float r = 1.0f / sqrtf(v / (float)C + LN_EPS);
    ln_affine(narrow, C16, x, m, r, g, b, y);
    for (int i = C16; i < C; i++)
        y[i] = (x[i] - m) * r * g[i] + b[i];
    *mean = m;
    *rstd = r;
}

DT_KERNEL_BODY void ln_rows_body(int narrow, int n0, int n1, int C, const float *x, const float *g,
                              const float *b, float *y, dt_bf16 *y16, float *mean, float *rstd)
{
    for (int n = n0; n < n1; n++) {
        ln_row(narrow, C, x + (size_t)n * C, g, b, y + (size_t)n * C, mean + n, rstd + n);
        ln_round_row(C, y + (size_t)n * C, y16 ? y16 + (size_t)n * C : NULL);
    }
}
DT_KERNEL_VARIANTS_NARROW(ln_rows, (int n0, int n1, int C, const float *x, const float *g, const float *b, float *y, dt_bf16 *y16, float *mean, float *rstd), (n0, n1, C, x, g, b, y, y16, mean, rstd));

/* Rows per OpenMP chunk: about DT_PAR_CHUNK floats. */
static int ln_chunk(int C) { return C >= (int)DT_PAR_CHUNK ? 1 : (int)(DT_PAR_CHUNK / (size_t)C); }

void layernorm_forward(int N, int C, const float *x, const float *g, const float *b, float *y,
                       dt_bf16 *y16, float *mean, float *rstd)
{
    const int R = ln_chunk(C);
    #pragma omp parallel for schedule(static) if (N > R)
    for (int n0 = 0; n0 < N; n0 += R)
        DT_KERNEL(ln_rows)(n0, n0 + R < N ? n0 + R : N, C, x, g, b, y, y16, mean, rstd);
}

DT_KERNEL_BODY void ln_res_rows_body(int narrow, int n0, int n1, int C, const float *x, const float *r,
                                  const float *rb, float p, uint64_t key, const float *g,
                                  const float *b, float *xo, float *y, dt_bf16 *y16, float *mean,
                                  float *rstd)
{
    for (int n = n0; n < n1; n++) {
        const size_t o = (size_t)n * C;
        if (p > 0.0f)
            for (int i = 0; i < C; i++)
                xo[o + i] = x[o + i] + (rb ? r[o + i] + rb[i] : r[o + i]) *
                                           dropout_factor(key, o + i, p);
        else {
            int i = 0;
            for (; narrow && i + 8 <= C; i += 8) {
                const vf8 br = rb ? vf8_ld(r + o + i) + vf8_ld(rb + i) : vf8_ld(r + o + i);
                vf8_st(xo + o + i, vf8_ld(x + o + i) + br);
            }
            for (; !narrow && i + 16 <= C; i += 16) {
                const v16f br = rb ? v16_ld(r + o + i) + v16_ld(rb + i) : v16_ld(r + o + i);
                v16_st(xo + o + i, v16_ld(x + o + i) + br);
            }
            for (; i < C; i++)
                xo[o + i] = x[o + i] + (rb ? r[o + i] + rb[i] : r[o + i]);
        }
        ln_row(narrow, C, xo + o, g, b, y + o, mean + n, rstd + n);
        ln_round_row(C, y + o, y16 ? y16 + o : NULL);
    }
}
DT_KERNEL_VARIANTS_NARROW(ln_res_rows, (int n0, int n1, int C, const float *x, const float *r, const float *rb, float p, uint64_t key, const float *g, const float *b, float *xo, float *y, dt_bf16 *y16, float *mean, float *rstd), (n0, n1, C, x, r, rb, p, key, g, b, xo, y, y16, mean, rstd));

void layernorm_bias_residual_forward(int N, int C, const float *x, const float *r,
                                     const float *rb, float p, uint64_t key, const float *g,
                                     const float *b, float *xo, float *y, dt_bf16 *y16,
                                     float *mean, float *rstd)
{
    const int R = ln_chunk(C);
    #pragma omp parallel for schedule(static) if (N > R)
    for (int n0 = 0; n0 < N; n0 += R)
        DT_KERNEL(ln_res_rows)(n0, n0 + R < N ? n0 + R : N, C, x, r, rb, p, key, g, b, xo, y, y16,
                               mean, rstd);
}

void layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                uint64_t key, const float *g, const float *b, float *xo,
                                float *y, dt_bf16 *y16, float *mean, float *rstd)
{
    layernorm_bias_residual_forward(N, C, x, r, NULL, p, key, g, b, xo, y, y16, mean, rstd);
}

DT_KERNEL_BODY void ln_apply_rows_body(int narrow, int n0, int n1, int C, const float *x, const float *mean,
                                    const float *rstd, const float *g, const float *b, float *y,
                                    dt_bf16 *y16)
{
    for (int n = n0; n < n1; n++) {
        const float *xr = x + (size_t)n * C;
        float *yr = y + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        ln_affine(narrow, C & ~15, xr, m, r, g, b, yr);
        for (int i = C & ~15; i < C; i++)
            yr[i] = (xr[i] - m) * r * g[i] + b[i];
        ln_round_row(C, yr, y16 ? y16 + (size_t)n * C : NULL);
    }
}
DT_KERNEL_VARIANTS_NARROW(ln_apply_rows, (int n0, int n1, int C, const float *x, const float *mean, const float *rstd, const float *g, const float *b, float *y, dt_bf16 *y16), (n0, n1, C, x, mean, rstd, g, b, y, y16));

void layernorm_apply(int N, int C, const float *x, const float *mean, const float *rstd,
                     const float *g, const float *b, float *y, dt_bf16 *y16)
{
    const int R = ln_chunk(C);
    #pragma omp parallel for schedule(static) if (N > R)
    for (int n0 = 0; n0 < N; n0 += R)
        DT_KERNEL(ln_apply_rows)(n0, n0 + R < N ? n0 + R : N, C, x, mean, rstd, g, b, y, y16);
}

/* dx = rstd (g dy - mean(g dy) - xhat mean(g dy xhat)), xhat = (x - mean) rstd;
 * dg = sum over rows of dy xhat, db = sum of dy. One pass, serial over rows
 * (dg and db are sums over all of them). */
DT_KERNEL_BODY void layernorm_backward_body(int narrow, int N, int C, const float *x, const float *mean,
                                  const float *rstd, const float *g, const float *dy, float *dx,
                                  int accumulate, float *dg, float *db)
{
    memset(dg, 0, (size_t)C * sizeof *dg);
    memset(db, 0, (size_t)C * sizeof *db);
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *d = dy + (size_t)n * C;
        float *o = dx + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        const int C16 = C & ~15;
        float s1, s2;
        if (narrow) {
            vf8 a1[2] = { { 0 }, { 0 } }, a2[2] = { { 0 }, { 0 } };
            for (int i = 0; i < C16; i += 16)
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const int k = i + 8 * h;
                    const vf8 xh = (vf8_ld(xr + k) - m) * r, dd = vf8_ld(d + k);
                    const vf8 gd = vf8_ld(g + k) * dd;
                    a1[h] += gd;
                    a2[h] += gd * xh;
                    vf8_st(dg + k, vf8_ld(dg + k) + dd * xh);
                    vf8_st(db + k, vf8_ld(db + k) + dd);
                }
            s1 = VF8_SUM2(a1[0], a1[1]);
            s2 = VF8_SUM2(a2[0], a2[1]);
        } else {
            v16f a1 = v16_splat(0), a2 = v16_splat(0);
            for (int i = 0; i < C16; i += 16) {
                const v16f xh = (v16_ld(xr + i) - m) * r, dd = v16_ld(d + i);
                const v16f gd = v16_ld(g + i) * dd;
                a1 += gd;
                a2 += gd * xh;
                v16_st(dg + i, v16_ld(dg + i) + dd * xh);
                v16_st(db + i, v16_ld(db + i) + dd);
            }
            s1 = V16_SUM(a1);
            s2 = V16_SUM(a2);
        }
        for (int k = C16; k < C; k++) {
            const float xh = (xr[k] - m) * r, gd = g[k] * d[k];
            s1 += gd;
            s2 += gd * xh;
            dg[k] += d[k] * xh;
            db[k] += d[k];
        }
        s1 /= (float)C;
        s2 /= (float)C;
        for (int i = 0; narrow && i < C16; i += 8) {
            const vf8 xh = (vf8_ld(xr + i) - m) * r;
            const vf8 v = r * (vf8_ld(g + i) * vf8_ld(d + i) - s1 - xh * s2);
            vf8_st(o + i, accumulate ? vf8_ld(o + i) + v : v);
        }
        for (int i = 0; !narrow && i < C16; i += 16) {
            const v16f xh = (v16_ld(xr + i) - m) * r;
            const v16f v = r * (v16_ld(g + i) * v16_ld(d + i) - s1 - xh * s2);
            v16_st(o + i, accumulate ? v16_ld(o + i) + v : v);
        }
        for (int i = C16; i < C; i++) {
            const float xh = (xr[i] - m) * r;
            const float v = r * (g[i] * d[i] - s1 - xh * s2);
            o[i] = accumulate ? o[i] + v : v;
        }
    }
}
DT_KERNEL_VARIANTS_NARROW(layernorm_backward, (int N, int C, const float *x, const float *mean, const float *rstd, const float *g, const float *dy, float *dx, int accumulate, float *dg, float *db), (N, C, x, mean, rstd, g, dy, dx, accumulate, dg, db));
void layernorm_backward(int N, int C, const float *x, const float *mean,
                                  const float *rstd, const float *g, const float *dy, float *dx,
                                  int accumulate, float *dg, float *db)
{
    DT_KERNEL(layernorm_backward)(N, C, x, mean, rstd, g, dy, dx, accumulate, dg, db);
}
