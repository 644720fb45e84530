/* Per-group and per-element bodies of GroupNorm in the plain layout, with the
 * fused ReLU and residual add of backend.h (CPU: backend/cpu/groupnorm.c):
 *   y = [relu](x a[c] + sh[c] [+ skip]),  a = rstd gamma,  sh = beta - mean a.
 * The statistics and gradient sums keep the CPU's order (eight float lanes per
 * channel plane for the statistics, four for the gradient sums, gathered in
 * double), so both backends give the same bits, but run a lane per thread:
 * forward, lanes over B*C*8, the mean over B*G, lanes about the mean, rstd
 * over B*G, affine over the elements; backward, lanes over B*C*4, channel
 * sums over B*C, group sums over B*G, parameter gradients over C, dx over the
 * elements: many threads per group rather than one thread per (sample,
 * group), which reads a whole group alone (bench/RESULTS.md §11). */
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

/* The statistics in lanes, so that the device runs them wide and still gets
 * the CPU's bits: t over B*C*8 is lane t%8 of channel plane t/8, summing
 * v - c (sq: its square) over the plane's elements i = lane (mod 8) below the
 * last whole group of eight, lane 0 then the tail in order, exactly as the
 * CPU's lanes (backend/cpu/groupnorm.c); c is center[(b, g)] (NULL: 0) */
static inline DT_HD void groupnorm_lane_at(size_t t, int C, int HW, int G, const float *x,
                                           const float *center, int sq, float *lanes)
{
    const size_t bc = t / 8;
    const int j = (int)(t % 8), n8 = HW / 8 * 8;
    const float c = center ? center[bc / (size_t)C * G + (size_t)((int)(bc % (size_t)C) / (C / G))]
                           : 0.0f;
    const float *v = x + bc * HW;
    float a = 0.0f;
    for (int i = j; i < n8; i += 8) {
        const float d = v[i] - c;
        a += sq ? d * d : d;
    }
    for (int i = n8; j == 0 && i < HW; i++) {
        const float d = v[i] - c;
        a += sq ? d * d : d;
    }
    lanes[t] = a;
}

/* the total of one plane's eight lanes, in the CPU's order */
static inline DT_HD double gn_lanes_total(const float *a)
{
    return (double)((a[0] + a[4]) + (a[1] + a[5])) + (double)((a[2] + a[6]) + (a[3] + a[7]));
}

/* bg over B*G: the group's sum over its planes' lanes (B*C*8), in channel order */
static inline DT_HD double gn_group_sum(size_t bg, int C, int G, const float *lanes)
{
    const int Cg = C / G, g = (int)(bg % (size_t)G);
    const size_t c0 = bg / (size_t)G * C + (size_t)g * Cg;
    double s = 0.0;
    for (int c = 0; c < Cg; c++)
        s += gn_lanes_total(lanes + (c0 + c) * 8);
    return s;
}

/* bg over B*G: x (B, C, HW) -> mean (B, G), from groupnorm_lane_at's sums */
static inline DT_HD void groupnorm_mean_at(size_t bg, int C, int HW, int G, const float *lanes,
                                           float *mean)
{
    const double n = (double)(C / G) * HW;
    mean[bg] = n > 0.0 ? (float)(gn_group_sum(bg, C, G, lanes) / n) : 0.0f;
}

/* bg over B*G: rstd (B, G) from the squared lanes about the mean (about the
 * mean: E[x^2] - E[x]^2 cancels badly) */
static inline DT_HD void groupnorm_rstd_at(size_t bg, int C, int HW, int G, const float *lanes,
                                           float *rstd)
{
    const double n = (double)(C / G) * HW;
    const double ss = gn_group_sum(bg, C, G, lanes);
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

/* The backward's sums in lanes, the CPU's bits as above: t over B*C*4 is lane
 * t%4 of plane t/4, la = sum g, lb = sum g (x - mean) over the elements
 * i = lane (mod 4) below the last whole group of four, lane 0 then the tail;
 * g is gn_grad_in (y: the fused ReLU's output or NULL) */
static inline DT_HD void groupnorm_grad_lane_at(size_t t, int C, int HW, int G, const float *x,
                                                const float *mean, const float *y,
                                                const float *dy, float *la, float *lb)
{
    const size_t bc = t / 4, o = bc * HW;
    const int j = (int)(t % 4), n4 = HW / 4 * 4;
    const float m = mean[bc / (size_t)C * G + (size_t)((int)(bc % (size_t)C) / (C / G))];
    float a = 0.0f, b = 0.0f;
    for (int i = j; i < n4; i += 4) {
        const float gi = gn_grad_in(o + i, y, dy);
        a += gi;
        b += gi * (x[o + i] - m);
    }
    for (int i = n4; j == 0 && i < HW; i++) {
        const float gi = gn_grad_in(o + i, y, dy);
        a += gi;
        b += gi * (x[o + i] - m);
    }
    la[t] = a;
    lb[t] = b;
}

/* bc over B*C: the channel's sdy = sum g and sdyx = rstd sum g (x - mean)
 * from its four lanes */
static inline DT_HD void groupnorm_grad_chan_at(size_t bc, int C, int G, const float *rstd,
                                                const float *la, const float *lb, double *sdy_c,
                                                double *sdyx_c)
{
    const float *a = la + bc * 4, *b = lb + bc * 4;
    const float rs = rstd[bc / (size_t)C * G + (size_t)((int)(bc % (size_t)C) / (C / G))];
    sdy_c[bc] = (double)((a[0] + a[1]) + (a[2] + a[3]));
    sdyx_c[bc] = (double)((b[0] + b[1]) + (b[2] + b[3])) * rs;
}

/* bg over B*G: sum_c gamma sdy and sum_c gamma sdyx over the group's channels,
 * in channel order */
static inline DT_HD void groupnorm_grad_group_at(size_t bg, int C, int G, const float *gamma,
                                                 const double *sdy_c, const double *sdyx_c,
                                                 double *sum_gd, double *sum_gdx)
{
    const int Cg = C / G, g = (int)(bg % (size_t)G);
    const size_t c0 = bg / (size_t)G * C + (size_t)g * Cg;
    double sgd = 0.0, sgdx = 0.0;
    for (int c = 0; c < Cg; c++) {
        sgd += gamma[g * Cg + c] * sdy_c[c0 + c];
        sgdx += gamma[g * Cg + c] * sdyx_c[c0 + c];
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
