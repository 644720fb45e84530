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
#include "nn/kernels_cpu.h"
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

/* ---- channel-blocked layout -------------------------------------------------
 * One sample's (C/16, HW, 16) values: the sixteen channels of a block sit side
 * by side, so every loop below runs over one block's HW pixels with the sixteen
 * lanes as one v16f and per-lane constants (the group of lane l is that of
 * channel 16 cb + l). Per-channel sums are taken in float over GN_CHUNK pixels
 * at a time and gathered in double, as precise as the plain kernel's
 * eight-lane sums. */
#define L DT_CBLOCK
#define GN_CHUNK 64

#define ld v16_ld
#define st v16_st

/* The gradient reaching the GroupNorm: dy, masked by the ReLU's output y (y > 0;
 * NULL: no ReLU). */
#define GN_DY(dy, y, i)                                                                  \
    ((y) ? (v16f)((v16i)ld((dy) + (i)) & (ld((y) + (i)) > v16_splat(0.0f)))              \
         : ld((dy) + (i)))

/* out[l] += a[l] */
#define gather(out, a)                                                                   \
    do {                                                                                 \
        const v16f a_ = (a);                                                             \
        for (int l_ = 0; l_ < L; l_++)                                                   \
            (out)[l_] += a_[l_];                                                         \
    } while (0)

/* out[l] = sum_j (v[j][l] - c[l]) (sq: its square) over the block's HW pixels */
DT_CLONES static void gn_blk_sums(const float *v, int HW, const float *c, int sq, double *out)
{
    const v16f cv = ld(c);
    for (int l = 0; l < L; l++)
        out[l] = 0.0;
    for (int j0 = 0; j0 < HW; j0 += GN_CHUNK) {
        const int j1 = j0 + GN_CHUNK < HW ? j0 + GN_CHUNK : HW;
        v16f a = v16_splat(0.0f), b = v16_splat(0.0f);
        if (sq) {
            int j = j0;
            for (; j + 2 <= j1; j += 2) { // two chains: the add latency, not the loads, bounds one
                const v16f d0 = ld(v + (size_t)j * L) - cv, d1 = ld(v + (size_t)(j + 1) * L) - cv;
                a += d0 * d0;
                b += d1 * d1;
            }
            for (; j < j1; j++) {
                const v16f d = ld(v + (size_t)j * L) - cv;
                a += d * d;
            }
        } else {
            int j = j0;
            for (; j + 2 <= j1; j += 2) {
                a += ld(v + (size_t)j * L) - cv;
                b += ld(v + (size_t)(j + 1) * L) - cv;
            }
            for (; j < j1; j++)
                a += ld(v + (size_t)j * L) - cv;
        }
        gather(out, a + b);
    }
}

/* sdy[l] = sum_j g, sdyx[l] = sum_j g (x - m[l]) over the block's pixels, g the
 * gradient dy masked by the ReLU output y (NULL: no ReLU) */
DT_CLONES static void gn_blk_grad_sums(const float *x, const float *y, const float *dy, int HW,
                                       const float *m, double *sdy, double *sdyx)
{
    const v16f mv = ld(m);
    for (int l = 0; l < L; l++)
        sdy[l] = sdyx[l] = 0.0;
    for (int j0 = 0; j0 < HW; j0 += GN_CHUNK) {
        const int j1 = j0 + GN_CHUNK < HW ? j0 + GN_CHUNK : HW;
        v16f a = v16_splat(0.0f), c = v16_splat(0.0f);
        for (int j = j0; j < j1; j++) {
            const v16f g = GN_DY(dy, y, (size_t)j * L);
            a += g;
            c += g * (ld(x + (size_t)j * L) - mv);
        }
        gather(sdy, a);
        gather(sdyx, c);
    }
}

/* y = [relu](x a + sh [+ skip]) over the block's pixels */
DT_CLONES static void gn_blk_affine(const float *x, int HW, const float *a, const float *sh,
                                    const float *skip, int relu, float *y)
{
    const v16f av = ld(a), sv = ld(sh), zero = v16_splat(0.0f);
    for (int j = 0; j < HW; j++) {
        v16f v = ld(x + (size_t)j * L) * av + sv;
        if (skip)
            v += ld(skip + (size_t)j * L);
        if (relu) // v < 0 ? 0 : v, so a NaN passes through as in the plain ReLU
            v = (v16f)((v16i)v & ~(v < zero));
        st(y + (size_t)j * L, v);
    }
}

/* With g the masked gradient (GN_DY): dskip += g, and
 * dx += k1 g - k2 (x - m) + k0 over the block's pixels; a fresh buffer is
 * written instead (GN_FRESH_DX, GN_FRESH_SKIP), not read. */
enum { GN_FRESH_DX = 1, GN_FRESH_SKIP = 2 };
DT_CLONES static void gn_blk_dx(const float *x, const float *y, const float *dy, int HW,
                                const float *k0, const float *k1, const float *k2,
                                const float *m, float *dx, float *dskip, int fresh)
{
    const v16f v0 = ld(k0), v1 = ld(k1), v2 = ld(k2), vm = ld(m), zero = v16_splat(0.0f);
    const int dx_fresh = fresh & GN_FRESH_DX, skip_fresh = fresh & GN_FRESH_SKIP;
    for (int j = 0; j < HW; j++) {
        const size_t i = (size_t)j * L;
        const v16f g = GN_DY(dy, y, i);
        if (dskip)
            st(dskip + i, (skip_fresh ? zero : ld(dskip + i)) + g);
        if (dx)
            st(dx + i, (dx_fresh ? zero : ld(dx + i)) + (v1 * g - v2 * (ld(x + i) - vm) + v0));
    }
}

/* Samples are independent: with compute.threads > 1 they are shared out. */
static void groupnorm_forward_blocked(int B, int C, int HW, int G, const float *x,
                                      const float *gamma, const float *beta, const float *skip,
                                      int relu, float *y, float *mean, float *rstd)
{
    const int Cg = C / G, CB = C / L;
    const double n = (double)Cg * HW;
#pragma omp parallel for if (B > 1 && (size_t)C * HW >= DT_PAR_CHUNK / 4) schedule(static)
    for (int b = 0; b < B; b++) {
        double cs[C];
        float m[G], rs[G];
        float lane[L] __attribute__((aligned(64)));
        const size_t off = (size_t)b * C * HW;
        const float *xs = x + off;
        // two passes, the second about the group mean (see the plain kernel)
        for (int l = 0; l < L; l++)
            lane[l] = 0.0f;
        for (int cb = 0; cb < CB; cb++)
            gn_blk_sums(xs + (size_t)cb * HW * L, HW, lane, 0, cs + cb * L);
        for (int g = 0; g < G; g++) {
            double s = 0.0;
            for (int c = 0; c < Cg; c++)
                s += cs[g * Cg + c];
            m[g] = n > 0.0 ? (float)(s / n) : 0.0f;
        }
        for (int cb = 0; cb < CB; cb++) {
            for (int l = 0; l < L; l++)
                lane[l] = m[(cb * L + l) / Cg];
            gn_blk_sums(xs + (size_t)cb * HW * L, HW, lane, 1, cs + cb * L);
        }
        for (int g = 0; g < G; g++) {
            double ss = 0.0;
            for (int c = 0; c < Cg; c++)
                ss += cs[g * Cg + c];
            rs[g] = (float)(1.0 / sqrt((n > 0.0 ? ss / n : 0.0) + GN_EPS));
            mean[(size_t)b * G + g] = m[g];
            rstd[(size_t)b * G + g] = rs[g];
        }
        for (int cb = 0; cb < CB; cb++) {
            float a[L] __attribute__((aligned(64))), sh[L] __attribute__((aligned(64)));
            for (int l = 0; l < L; l++) {
                const int c = cb * L + l, g = c / Cg;
                a[l] = rs[g] * gamma[c];
                sh[l] = beta[c] - m[g] * a[l];
            }
            const size_t o = off + (size_t)cb * HW * L;
            gn_blk_affine(x + o, HW, a, sh, skip ? skip + o : NULL, relu, y + o);
        }
    }
}

/* Per sample in parallel: the channel sums and dx; then dgamma and dbeta are
 * summed over the samples in order, so the result does not depend on how
 * many threads ran. */
static void groupnorm_backward_blocked(int B, int C, int HW, int G, const float *x,
                                       const float *gamma, const float *mean,
                                       const float *rstd, const float *y, const float *dy,
                                       float *dx, float *dskip, int fresh, float *dgamma,
                                       float *dbeta)
{
    const int Cg = C / G, CB = C / L;
    const double n = (double)Cg * HW;
    double *part = dt_malloc(2 * (size_t)B * C * sizeof *part); // (B, 2, C): sdy, sdyx
#pragma omp parallel for if (B > 1 && (size_t)C * HW >= DT_PAR_CHUNK / 4) schedule(static)
    for (int b = 0; b < B; b++) {
        double *sdy = part + 2 * (size_t)b * C, *sdyx = sdy + C;
        double sum_gd[G], sum_gdx[G];
        float lane[L] __attribute__((aligned(64)));
        const size_t off = (size_t)b * C * HW;
        const float *m = mean + (size_t)b * G, *rs = rstd + (size_t)b * G;
        for (int cb = 0; cb < CB; cb++) {
            for (int l = 0; l < L; l++)
                lane[l] = m[(cb * L + l) / Cg];
            const size_t o = off + (size_t)cb * HW * L;
            gn_blk_grad_sums(x + o, y ? y + o : NULL, dy + o, HW, lane, sdy + cb * L,
                             sdyx + cb * L);
        }
        for (int g = 0; g < G; g++)
            sum_gd[g] = sum_gdx[g] = 0.0;
        for (int c = 0; c < C; c++) {
            const int g = c / Cg;
            sdyx[c] *= rs[g]; // sum dy xhat
            sum_gd[g] += gamma[c] * sdy[c];
            sum_gdx[g] += gamma[c] * sdyx[c];
        }
        if ((!dx && !dskip) || n == 0.0)
            continue;
        for (int cb = 0; cb < CB; cb++) {
            float k0[L] __attribute__((aligned(64))), k1[L] __attribute__((aligned(64)));
            float k2[L] __attribute__((aligned(64))), ml[L] __attribute__((aligned(64)));
            for (int l = 0; l < L; l++) {
                const int c = cb * L + l, g = c / Cg;
                const float mgd = (float)(sum_gd[g] / n), mgdx = (float)(sum_gdx[g] / n);
                k1[l] = rs[g] * gamma[c];
                k2[l] = rs[g] * rs[g] * mgdx;
                k0[l] = -rs[g] * mgd;
                ml[l] = m[g];
            }
            const size_t o = off + (size_t)cb * HW * L;
            gn_blk_dx(x + o, y ? y + o : NULL, dy + o, HW, k0, k1, k2, ml, dx ? dx + o : NULL,
                      dskip ? dskip + o : NULL, fresh);
        }
    }
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            if (dgamma)
                dgamma[c] += (float)part[(2 * (size_t)b + 1) * C + c];
            if (dbeta)
                dbeta[c] += (float)part[2 * (size_t)b * C + c];
        }
    free(part);
}

/* The plain layout is the reference: the fused parts run as the separate
 * layers would, one pass each (the same arithmetic, hence the same bits). */
void cpu_groupnorm_forward(int B, int C, int HW, int G, int blk, const float *x,
                           const float *gamma, const float *beta, const float *skip, int relu,
                           float *y, float *mean, float *rstd)
{
    if (blk) {
        groupnorm_forward_blocked(B, C, HW, G, x, gamma, beta, skip, relu, y, mean, rstd);
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
        groupnorm_backward_blocked(B, C, HW, G, x, gamma, mean, rstd, y, dy, dx, dskip, fresh,
                                   dgamma, dbeta);
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
