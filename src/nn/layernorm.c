/* LayerNorm over the channels of each position (eps 1e-5, biased variance,
 * as torch.nn.LayerNorm), alone or fused with the residual add before it.
 * The output is not kept for backward: the statistics (2 floats a row) and
 * the input are, and layernorm_apply recomputes the output when a layer's
 * weight gradient needs it. */
#include "nn/transformer.h"

#include <string.h>
#include <math.h>

#define LN_EPS 1e-5f

/* Statistics and output of one row x (C) into y (C). */
static void ln_row(int C, const float *x, const float *g, const float *b, float *y, float *mean,
                   float *rstd)
{
    float s = 0;
    for (int i = 0; i < C; i++)
        s += x[i];
    const float m = s / C;
    float v = 0;
    for (int i = 0; i < C; i++) {
        const float d = x[i] - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(v / C + LN_EPS);
    for (int i = 0; i < C; i++)
        y[i] = (x[i] - m) * r * g[i] + b[i];
    *mean = m;
    *rstd = r;
}

void layernorm_forward(int N, int C, const float *x, const float *g, const float *b, float *y,
                       float *mean, float *rstd)
{
    #pragma omp parallel for schedule(static) if ((size_t)N * C > 65536)
    for (int n = 0; n < N; n++)
        ln_row(C, x + (size_t)n * C, g, b, y + (size_t)n * C, mean + n, rstd + n);
}

void layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                uint64_t key, const float *g, const float *b, float *xo,
                                float *y, float *mean, float *rstd)
{
    #pragma omp parallel for schedule(static) if ((size_t)N * C > 65536)
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * C;
        if (p > 0.0f)
            for (int i = 0; i < C; i++)
                xo[o + i] = x[o + i] + r[o + i] * dropout_factor(key, o + i, p);
        else
            for (int i = 0; i < C; i++)
                xo[o + i] = x[o + i] + r[o + i];
        ln_row(C, xo + o, g, b, y + o, mean + n, rstd + n);
    }
}

void layernorm_apply(int N, int C, const float *x, const float *mean, const float *rstd,
                     const float *g, const float *b, float *y)
{
    #pragma omp parallel for schedule(static) if ((size_t)N * C > 65536)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *yr = y + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        for (int i = 0; i < C; i++)
            yr[i] = (xr[i] - m) * r * g[i] + b[i];
    }
}

/* dx = rstd (g dy - mean(g dy) - xhat mean(g dy xhat)), xhat = (x - mean) rstd */
void layernorm_backward(int N, int C, const float *x, const float *mean, const float *rstd,
                        const float *g, const float *dy, float *dx, int accumulate, float *dg,
                        float *db)
{
    memset(dg, 0, (size_t)C * sizeof *dg);
    memset(db, 0, (size_t)C * sizeof *db);
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *d = dy + (size_t)n * C;
        float *o = dx + (size_t)n * C;
        const float m = mean[n], r = rstd[n];
        float s1 = 0, s2 = 0;
        for (int i = 0; i < C; i++) {
            const float xh = (xr[i] - m) * r, gd = g[i] * d[i];
            s1 += gd;
            s2 += gd * xh;
            dg[i] += d[i] * xh;
            db[i] += d[i];
        }
        s1 /= C;
        s2 /= C;
        for (int i = 0; i < C; i++) {
            const float xh = (xr[i] - m) * r;
            const float v = r * (g[i] * d[i] - s1 - xh * s2);
            o[i] = accumulate ? o[i] + v : v;
        }
    }
}
