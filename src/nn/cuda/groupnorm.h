/* Per-group and per-element bodies of GroupNorm in the plain layout, with the
 * fused ReLU and residual add of backend.h (CPU: nn/groupnorm.c):
 *   y = [relu](x a[c] + sh[c] [+ skip]),  a = rstd gamma,  sh = beta - mean a.
 * The statistics and gradient sums of one (sample, group) run in one call, in
 * the CPU's order (eight float lanes per channel plane, gathered in double), so
 * both backends give the same bits. Kernels: stats over B*G, affine over the
 * elements; backward: sums over B*G, parameter gradients over C, dx over the
 * elements. */
#ifndef DT_NN_CUDA_GROUPNORM_H
#define DT_NN_CUDA_GROUPNORM_H

#include <math.h>
#include <stddef.h>

#include "core/hd.h"

#define DT_GN_EPS 1e-5

/* The gradient reaching the GroupNorm at e: dy masked by the ReLU output y
 * (NULL: no ReLU), as the separate ReLU's backward into a zeroed buffer */
static inline DT_HD float gn_grad_in(size_t e, const float *y, const float *dy)
{
    return y ? 0.0f + (y[e] > 0.0f ? dy[e] : 0.0f) : dy[e];
}

/* sum_j (v[j] - c), sq: sum_j (v[j] - c)^2, over n values in eight float lanes */
static inline DT_HD double gn_lane_sum(const float *v, int n, float c, int sq)
{
    float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            const float d = v[i + j] - c;
            a[j] += sq ? d * d : d;
        }
    for (; i < n; i++) {
        const float d = v[i] - c;
        a[0] += sq ? d * d : d;
    }
    return (double)((a[0] + a[4]) + (a[1] + a[5])) + (double)((a[2] + a[6]) + (a[3] + a[7]));
}

/* bg over B*G; x (B, C, HW) -> mean, rstd (B, G) */
static inline DT_HD void groupnorm_stats_at(size_t bg, int C, int HW, int G, const float *x,
                                            float *mean, float *rstd)
{
    const int Cg = C / G, g = (int)(bg % (size_t)G);
    const size_t c0 = bg / (size_t)G * C + (size_t)g * Cg;
    const double n = (double)Cg * HW;
    double s = 0.0;
    for (int c = 0; c < Cg; c++)
        s += gn_lane_sum(x + (c0 + c) * HW, HW, 0.0f, 0);
    const float m = n > 0.0 ? (float)(s / n) : 0.0f;
    double ss = 0.0; // about the mean: E[x^2] - E[x]^2 cancels badly
    for (int c = 0; c < Cg; c++)
        ss += gn_lane_sum(x + (c0 + c) * HW, HW, m, 1);
    mean[bg] = m;
    rstd[bg] = (float)(1.0 / sqrt((n > 0.0 ? ss / n : 0.0) + DT_GN_EPS));
}

/* e over B*C*HW; y (B, C, HW); skip (B, C, HW) or NULL */
static inline DT_HD void groupnorm_affine_at(size_t e, int C, int HW, int G, const float *x,
                                             const float *gamma, const float *beta,
                                             const float *mean, const float *rstd,
                                             const float *skip, int relu, float *y)
{
    const size_t bc = e / (size_t)HW;
    const int c = (int)(bc % (size_t)C), Cg = C / G;
    const size_t bg = bc / (size_t)C * G + (size_t)(c / Cg);
    const float a = rstd[bg] * gamma[c], sh = beta[c] - mean[bg] * a;
    float v = x[e] * a + sh;
    if (skip)
        v = v + skip[e];
    if (relu)
        v = v < 0.0f ? 0.0f : v;
    y[e] = v;
}

/* bg over B*G: per channel sdy = sum g, sdyx = rstd sum g (x - mean) into
 * (B, C), and per group sum_c gamma sdy, sum_c gamma sdyx into (B, G); g is
 * gn_grad_in (y: the fused ReLU's output or NULL) */
static inline DT_HD void groupnorm_grad_sums_at(size_t bg, int C, int HW, int G, const float *x,
                                                const float *gamma, const float *mean,
                                                const float *rstd, const float *y,
                                                const float *dy, double *sdy_c, double *sdyx_c,
                                                double *sum_gd, double *sum_gdx)
{
    const int Cg = C / G, g = (int)(bg % (size_t)G);
    const size_t c0 = bg / (size_t)G * C + (size_t)g * Cg;
    const float m = mean[bg], rs = rstd[bg];
    double sgd = 0.0, sgdx = 0.0;
    for (int c = 0; c < Cg; c++) {
        const size_t o = (c0 + c) * HW;
        float a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int i = 0;
        for (; i + 4 <= HW; i += 4)
            for (int j = 0; j < 4; j++) {
                const float gi = gn_grad_in(o + i + j, y, dy);
                a[j] += gi;
                b[j] += gi * (x[o + i + j] - m);
            }
        for (; i < HW; i++) {
            const float gi = gn_grad_in(o + i, y, dy);
            a[0] += gi;
            b[0] += gi * (x[o + i] - m);
        }
        const double sdy = (double)((a[0] + a[1]) + (a[2] + a[3]));
        const double sdyx = (double)((b[0] + b[1]) + (b[2] + b[3])) * rs;
        sdy_c[c0 + c] = sdy;
        sdyx_c[c0 + c] = sdyx;
        sgd += gamma[g * Cg + c] * sdy;
        sgdx += gamma[g * Cg + c] * sdyx;
    }
    sum_gd[bg] = sgd;
    sum_gdx[bg] = sgdx;
}

/* c over C: dgamma[c] = sum_b sdyx, dbeta[c] = sum_b sdy (overwritten, in
 * sample order); either may be NULL */
static inline DT_HD void groupnorm_param_grad_at(size_t c, int B, int C, const double *sdy_c,
                                                 const double *sdyx_c, float *dgamma,
                                                 float *dbeta)
{
    float dg = 0.0f, db = 0.0f;
    for (int b = 0; b < B; b++) {
        dg += (float)sdyx_c[(size_t)b * C + c];
        db += (float)sdy_c[(size_t)b * C + c];
    }
    if (dgamma)
        dgamma[c] = dg;
    if (dbeta)
        dbeta[c] = db;
}

/* e over B*C*HW: dskip += g; dx += k1 g - k2 (x - m) + k0 with
 * k1 = rstd gamma, k2 = rstd^2 mean(gamma g xhat), k0 = -rstd mean(gamma g);
 * dx, dskip may be NULL */
static inline DT_HD void groupnorm_dx_at(size_t e, int C, int HW, int G, const float *x,
                                         const float *gamma, const float *mean,
                                         const float *rstd, const float *y, const float *dy,
                                         const double *sum_gd, const double *sum_gdx, float *dx,
                                         float *dskip)
{
    const size_t bc = e / (size_t)HW;
    const int c = (int)(bc % (size_t)C), Cg = C / G;
    const size_t bg = bc / (size_t)C * G + (size_t)(c / Cg);
    const float gi = gn_grad_in(e, y, dy);
    if (dskip)
        dskip[e] += gi;
    const double n = (double)Cg * HW;
    if (!dx || n == 0.0)
        return;
    const float m = mean[bg], rs = rstd[bg];
    const float mgd = (float)(sum_gd[bg] / n), mgdx = (float)(sum_gdx[bg] / n);
    const float k2 = rs * rs * mgdx, k0 = -rs * mgd, k1 = rs * gamma[c];
    dx[e] += k1 * gi - k2 * (x[e] - m) + k0;
}

#endif
