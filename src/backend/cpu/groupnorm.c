/* Group normalisation (Wu & He 2018): for each sample, the C channels are split
 * into G groups of C/G, and each group's (C/G)*HW values are normalised by
 * their own mean and biased variance (as PyTorch), then scaled per channel:
 *   y = (x - mean) * rstd * gamma[c] + beta[c],   rstd = 1 / sqrt(var + eps).
 * Unlike BatchNorm nothing depends on the batch, so replicas need no sync.
 *
 * The sums over one channel plane run in eight float lanes (a single running
 * sum is bound by the add latency, ~4 cycles a value) and are gathered in
 * double per group; the element-wise loops load a block of four before storing
 * it, which the -O2 vectorizer turns into packed SSE. */
#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "core/simd.h"
#include "nn/layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GN_EPS 1e-5

/* sum_j (v[j] - c) over n values */
static double gn_sum_dev(const float *v, int n, float c)
{
    float a[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] += v[i + j] - c;
    for (; i < n; i++)
        a[0] += v[i] - c;
    return (double)((a[0] + a[4]) + (a[1] + a[5])) + (double)((a[2] + a[6]) + (a[3] + a[7]));
}

/* sum_j (v[j] - c)^2 over n values */
static double gn_sum_sq_dev(const float *v, int n, float c)
{
    float a[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            const float d = v[i + j] - c;
            a[j] += d * d;
        }
    for (; i < n; i++) {
        const float d = v[i] - c;
        a[0] += d * d;
    }
    return (double)((a[0] + a[4]) + (a[1] + a[5])) + (double)((a[2] + a[6]) + (a[3] + a[7]));
}

/* *sdy = sum dy, *sdyx = sum dy (x - m) over n values */
static void gn_sum_grad(const float *x, const float *dy, int n, float m, double *sdy,
                        double *sdyx)
{
    float a[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, b[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) {
            a[j] += dy[i + j];
            b[j] += dy[i + j] * (x[i + j] - m);
        }
    for (; i < n; i++) {
        a[0] += dy[i];
        b[0] += dy[i] * (x[i] - m);
    }
    *sdy = (double)((a[0] + a[1]) + (a[2] + a[3]));
    *sdyx = (double)((b[0] + b[1]) + (b[2] + b[3]));
}

static void groupnorm_forward_plain(int B, int C, int HW, int G, const float *x,
                                    const float *gamma, const float *beta, float *y,
                                    float *mean, float *rstd)
{
    const int Cg = C / G;
    const double n = (double)Cg * HW;
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < G; g++) {
            const size_t c0 = (size_t)b * C + (size_t)g * Cg;
            // two passes, the second about the mean: E[x^2] - E[x]^2 cancels badly
            double s = 0.0;
            for (int c = 0; c < Cg; c++)
                s += gn_sum_dev(x + (c0 + c) * HW, HW, 0.0f);
            const float m = n > 0.0 ? (float)(s / n) : 0.0f;
            double ss = 0.0;
            for (int c = 0; c < Cg; c++)
                ss += gn_sum_sq_dev(x + (c0 + c) * HW, HW, m);
            // y comes from the saved float statistics so backward sees the same ones
            const float rs = (float)(1.0 / sqrt((n > 0.0 ? ss / n : 0.0) + GN_EPS));
            mean[(size_t)b * G + g] = m;
            rstd[(size_t)b * G + g] = rs;
            for (int c = 0; c < Cg; c++) {
                const float a = rs * gamma[g * Cg + c], sh = beta[g * Cg + c] - m * a;
                const float *xc = x + (c0 + c) * HW;
                float *yc = y + (c0 + c) * HW;
                int j = 0;
                for (; j + 4 <= HW; j += 4) {
                    const float x0 = xc[j], x1 = xc[j + 1], x2 = xc[j + 2], x3 = xc[j + 3];
                    yc[j] = x0 * a + sh;
                    yc[j + 1] = x1 * a + sh;
                    yc[j + 2] = x2 * a + sh;
                    yc[j + 3] = x3 * a + sh;
                }
                for (; j < HW; j++)
                    yc[j] = xc[j] * a + sh;
            }
        }
    }
}

/* With xhat = (x - mean) rstd and gd = dy * gamma, over the N = (C/G) HW values
 * of a group:  dx = rstd (gd - mean(gd) - xhat mean(gd xhat)),
 *              dgamma[c] = sum_{b,hw} dy xhat,  dbeta[c] = sum_{b,hw} dy. */
static void groupnorm_backward_plain(int B, int C, int HW, int G, const float *x,
                                     const float *gamma, const float *mean, const float *rstd,
                                     const float *dy, float *dx, float *dgamma, float *dbeta)
{
    const int Cg = C / G;
    const double n = (double)Cg * HW;
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < G; g++) {
            const size_t c0 = (size_t)b * C + (size_t)g * Cg;
            const float m = mean[(size_t)b * G + g], rs = rstd[(size_t)b * G + g];
            double sum_gd = 0.0, sum_gdx = 0.0;
            for (int c = 0; c < Cg; c++) {
                double sdy, sdyx;
                gn_sum_grad(x + (c0 + c) * HW, dy + (c0 + c) * HW, HW, m, &sdy, &sdyx);
                sdyx *= rs; // sum dy xhat
                if (dgamma)
                    dgamma[g * Cg + c] += (float)sdyx;
                if (dbeta)
                    dbeta[g * Cg + c] += (float)sdy;
                sum_gd += gamma[g * Cg + c] * sdy;
                sum_gdx += gamma[g * Cg + c] * sdyx;
            }
            if (!dx || n == 0.0)
                continue;
            // dx = rs gc dy - rs^2 mgdx (x - m) - rs mgd
            const float mgd = (float)(sum_gd / n), mgdx = (float)(sum_gdx / n);
            const float k2 = rs * rs * mgdx, k0 = -rs * mgd;
            for (int c = 0; c < Cg; c++) {
                const float *xc = x + (c0 + c) * HW;
                const float *dyc = dy + (c0 + c) * HW;
                float *dxc = dx + (c0 + c) * HW;
                const float k1 = rs * gamma[g * Cg + c];
                int j = 0;
                for (; j + 4 <= HW; j += 4) {
                    const float x0 = xc[j], x1 = xc[j + 1], x2 = xc[j + 2], x3 = xc[j + 3];
                    const float g0 = dyc[j], g1 = dyc[j + 1], g2 = dyc[j + 2], g3 = dyc[j + 3];
                    const float d0 = dxc[j], d1 = dxc[j + 1], d2 = dxc[j + 2], d3 = dxc[j + 3];
                    dxc[j] = d0 + (k1 * g0 - k2 * (x0 - m) + k0);
                    dxc[j + 1] = d1 + (k1 * g1 - k2 * (x1 - m) + k0);
                    dxc[j + 2] = d2 + (k1 * g2 - k2 * (x2 - m) + k0);
                    dxc[j + 3] = d3 + (k1 * g3 - k2 * (x3 - m) + k0);
                }
                for (; j < HW; j++)
                    dxc[j] += k1 * dyc[j] - k2 * (xc[j] - m) + k0;
            }
        }
    }
}

/* The blocked kernels, for 16-channel blocks (AVX-512) and 8-channel ones
 * (AVX2 and below): backend/cpu/groupnorm_blocked.h once per size. */
#define GN_CHUNK 64
enum { GN_FRESH_DX = 1, GN_FRESH_SKIP = 2 };
#define GN_CAT_(a, b) a##b
#define GN_CAT(a, b) GN_CAT_(a, b)
#define L 16
#define GN_VF v16f_gn
#define GN_VI v16i_gn
#define GN_FN(f) GN_CAT(f, 16)
#define GN_BODY(f) GN_CAT(f, 16_body)
#include "backend/cpu/groupnorm_blocked.h"
#undef L
#undef GN_VF
#undef GN_VI
#undef GN_FN
#undef GN_BODY
#define L 8
#define GN_VF v8f_gn
#define GN_VI v8i_gn
#define GN_FN(f) GN_CAT(f, 8)
#define GN_BODY(f) GN_CAT(f, 8_body)
#include "backend/cpu/groupnorm_blocked.h"
#undef L
#undef GN_VF
#undef GN_VI
#undef GN_FN
#undef GN_BODY

/* The plain layout is the reference: the fused parts run as the separate
 * layers would, one pass each (the same arithmetic, hence the same bits). */
void cpu_groupnorm_forward(int B, int C, int HW, int G, int blk, const float *x,
                           const float *gamma, const float *beta, const float *skip, int relu,
                           float *y, float *mean, float *rstd)
{
    if (blk) {
        (blk == 16 ? groupnorm_forward_blocked16 : groupnorm_forward_blocked8)(
            B, C, HW, G, x, gamma, beta, skip, relu, y, mean, rstd);
        return;
    }
    const size_t n = (size_t)B * C * HW;
    groupnorm_forward_plain(B, C, HW, G, x, gamma, beta, y, mean, rstd);
    if (skip)
        cpu_add_forward(n, y, skip, y);
    if (relu)
        cpu_relu_forward(n, y, y);
}

void cpu_groupnorm_backward(int B, int C, int HW, int G, int blk, const float *x,
                            const float *gamma, const float *mean, const float *rstd,
                            const float *y, const float *dy, float *dx, float *dskip,
                            int dx_fresh, int dskip_fresh, float *dgamma, float *dbeta)
{
    if (dgamma)
        memset(dgamma, 0, (size_t)C * sizeof(float));
    if (dbeta)
        memset(dbeta, 0, (size_t)C * sizeof(float));
    if (blk) {
        const int fresh = (dx_fresh ? GN_FRESH_DX : 0) | (dskip_fresh ? GN_FRESH_SKIP : 0);
        (blk == 16 ? groupnorm_backward_blocked16 : groupnorm_backward_blocked8)(
            B, C, HW, G, x, gamma, mean, rstd, y, dy, dx, dskip, fresh, dgamma, dbeta);
        return;
    }
    const size_t n = (size_t)B * C * HW;
    // the reference: fresh buffers zeroed, then added to as always
    if (dx && dx_fresh)
        memset(dx, 0, n * sizeof(float));
    if (dskip && dskip_fresh)
        memset(dskip, 0, n * sizeof(float));
    float *g = NULL;
    if (y) { // the ReLU's backward into a buffer of its own, as the separate layer
        g = dt_falloc(n);
        cpu_relu_backward(n, y, dy, g);
        dy = g;
    }
    if (dskip)
        cpu_add_backward(n, dy, dskip, NULL);
    groupnorm_backward_plain(B, C, HW, G, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
    free(g);
}
