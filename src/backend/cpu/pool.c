/* Pooling: k x k max-pool with stride s and no padding (the winner's index in
 * its (H, W) plane is saved for backward), and global average pooling. */
#include "backend/cpu/kernels.h"
#include "nn/layout.h"

#include "core/error.h"
#include "core/simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The max-pool loops use selects and arithmetic instead of branches: on
 * activations a compare-and-branch mispredicts about half the time (the
 * mnist_cnn pool, 2048 planes of 24x24, took 1.4 ms branching against 0.6 ms).
 * The first maximum in row-major window order wins. NaN inputs are caught by a
 * separate vectorisable check per plane, then the affected windows are set to
 * NaN as in PyTorch. */

/* xp (H, W) -> yp, ap (P, Q) */
static void maxpool_2x2(const float *xp, int W, int P, int Q, float *yp, int32_t *ap)
{
    for (int p = 0; p < P; p++) {
        const float *r0 = xp + (size_t)(2 * p) * W, *r1 = r0 + W;
        const int base = 2 * p * W;
        for (int q = 0; q < Q; q++) {
            const float a = r0[2 * q], b = r0[2 * q + 1], c = r1[2 * q], d = r1[2 * q + 1];
            const int t1 = b > a;
            const float m1 = b > a ? b : a;
            const int t2 = c > m1;
            const float m2 = c > m1 ? c : m1;
            const int t3 = d > m2;
            const float m3 = d > m2 ? d : m2;
            int best = t1; // offset of the winner from the window's corner
            best += t2 * (W - best);
            best += t3 * (W + 1 - best);
            yp[p * Q + q] = m3;
            ap[p * Q + q] = base + 2 * q + best;
        }
    }
}

static void maxpool_any(const float *xp, int W, int P, int Q, int k, int st, float *yp,
                        int32_t *ap)
{
    for (int p = 0; p < P; p++) {
        for (int q = 0; q < Q; q++) {
            const int h0 = p * st, w0 = q * st;
            int best = h0 * W + w0;
            float m = xp[best];
            for (int i = 0; i < k; i++) {
                const float *row = xp + (size_t)(h0 + i) * W + w0;
                for (int j = 0; j < k; j++) {
                    const float v = row[j];
                    const int t = v > m;
                    m = v > m ? v : m;
                    best += t * ((h0 + i) * W + w0 + j - best);
                }
            }
            yp[p * Q + q] = m;
            ap[p * Q + q] = best;
        }
    }
}

/* Whether any of n values is NaN or infinite: x - x is exactly 0 otherwise. */
static int plane_nonfinite(const float *v, size_t n)
{
    float a[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] += v[i + j] - v[i + j];
    for (; i < n; i++)
        a[0] += v[i] - v[i];
    const float s = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    return s != 0.0f; // true for NaN
}

/* Rare path: windows holding a NaN output NaN. */
static void maxpool_nan(const float *xp, int W, int P, int Q, int k, int st, float *yp)
{
    for (int p = 0; p < P; p++)
        for (int q = 0; q < Q; q++)
            for (int i = 0; i < k; i++)
                for (int j = 0; j < k; j++)
                    if (isnan(xp[(size_t)(p * st + i) * W + q * st + j]))
                        yp[p * Q + q] = NAN;
}

/* 2x2 windows of stride 2 on a block of L channels (nChw16c or nChw8c: the L
 * values of a pixel side by side), the same selects as maxpool_2x2 lane by
 * lane, so the same winners; the outputs go to the L planes of the plain
 * output. xb (H, W, L) -> yp, ap: plane l at yp + l P Q. Finite input only. */
#define MAXPOOL_2X2_BLOCK(L, VF, VI)                                                     \
    DT_KERNEL_BODY void maxpool_2x2_block##L##_body(const float *xb, int W, int P, int Q,   \
                                                    float *yp, int32_t *ap)               \
    {                                                                                     \
        const size_t pq = (size_t)P * Q;                                                  \
        const VI one = (VI){ 0 } + 1, wv = (VI){ 0 } + W, w1 = wv + 1;                    \
        for (int p = 0; p < P; p++) {                                                     \
            const float *r0 = xb + (size_t)(2 * p) * W * L, *r1 = r0 + (size_t)W * L;     \
            const int base = 2 * p * W;                                                   \
            for (int q = 0; q < Q; q++) {                                                 \
                const size_t o = (size_t)(2 * q) * L;                                     \
                const VF a = *(const VF *)(r0 + o), b = *(const VF *)(r0 + o + L);        \
                const VF c = *(const VF *)(r1 + o), d = *(const VF *)(r1 + o + L);        \
                const VI t1 = b > a;                                                      \
                const VF m1 = (VF)(((VI)b & t1) | ((VI)a & ~t1));                         \
                const VI t2 = c > m1;                                                     \
                const VF m2 = (VF)(((VI)c & t2) | ((VI)m1 & ~t2));                        \
                const VI t3 = d > m2;                                                     \
                const VF m3 = (VF)(((VI)d & t3) | ((VI)m2 & ~t3));                        \
                VI best = one & t1; /* offset of the winner from the window's corner */   \
                best = (wv & t2) | (best & ~t2);                                          \
                best = (w1 & t3) | (best & ~t3);                                          \
                const size_t yo = (size_t)p * Q + q;                                      \
                const int corner = base + 2 * q;                                          \
                for (int l = 0; l < L; l++) {                                             \
                    yp[l * pq + yo] = m3[l];                                              \
                    ap[l * pq + yo] = corner + best[l];                                   \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    DT_KERNEL_VARIANTS(maxpool_2x2_block##L, (const float *xb, int W, int P, int Q,       \
                                              float *yp, int32_t *ap),                    \
                       (xb, W, P, Q, yp, ap))
typedef float v8f_pool __attribute__((vector_size(32), aligned(4)));
typedef int v8i_pool __attribute__((vector_size(32), aligned(4)));
MAXPOOL_2X2_BLOCK(16, v16f, v16i);
MAXPOOL_2X2_BLOCK(8, v8f_pool, v8i_pool);

/* One (sample, channel) plane. A blocked input is pooled through a gathered
 * copy of the plane (plane: an H W scratch), so both layouts share the
 * kernels above and pick the same winners. */
static void maxpool_plane(const dt_pool_shape *s, const float *x, size_t pl, float *plane,
                          float *y, int32_t *arg)
{
    const int W = s->W, P = s->P, Q = s->Q, k = s->k, st = s->stride;
    const size_t hw = (size_t)s->H * W, pq = (size_t)P * Q;
    const float *xp = x + pl * hw;
    if (s->blk) {
        const float *xb = x + layout_index(s->blk, s->C, (int)hw, (int)(pl / s->C),
                                           (int)(pl % s->C), 0);
        for (size_t j = 0; j < hw; j++)
            plane[j] = xb[j * s->blk];
        xp = plane;
    }
    float *yp = y + pl * pq;
    int32_t *ap = arg + pl * pq;
    if (k == 2 && st == 2)
        maxpool_2x2(xp, W, P, Q, yp, ap);
    else
        maxpool_any(xp, W, P, Q, k, st, yp, ap);
    if (plane_nonfinite(xp, hw))
        maxpool_nan(xp, W, P, Q, k, st, yp);
}

/* Planes are independent: compute.threads > 1 shares them out in groups of the
 * planes that share memory (one plane plain, a block of 16 channels blocked). */
void cpu_maxpool_forward(const dt_pool_shape *s, const float *x, float *y, int32_t *arg)
{
    const size_t planes = (size_t)s->B * s->C, hw = (size_t)s->H * s->W;
    const size_t group = s->blk ? (size_t)s->blk : 1, pq = (size_t)s->P * s->Q;
    // a block of 16 channels at once for the CNNs' 2x2 pools; a block holding a
    // NaN or an infinity goes plane by plane
    const int block_2x2 = (s->blk == 16 || s->blk == 8) && s->k == 2 && s->stride == 2;
#pragma omp parallel if (planes * hw >= DT_PAR_CHUNK)
    {
        float *plane = NULL;
#pragma omp for schedule(static)
        for (size_t g = 0; g < planes / group; g++) {
            if (block_2x2 && !plane_nonfinite(x + g * hw * group, hw * group)) {
                (s->blk == 16 ? DT_KERNEL(maxpool_2x2_block16) : DT_KERNEL(maxpool_2x2_block8))(
                    x + g * hw * group, s->W, s->P, s->Q, y + g * group * pq, arg + g * group * pq);
                continue;
            }
            if (s->blk && !plane)
                plane = dt_malloc(hw * sizeof *plane);
            for (size_t pl = g * group; pl < (g + 1) * group; pl++)
                maxpool_plane(s, x, pl, plane, y, arg);
        }
        free(plane);
    }
}

/* A group of planes (as in the forward) on one thread: zeroed whole where
 * dx_fresh (contiguous), then each plane's windows add in order, so
 * overlapping ones (stride < k) route into an input in the same order. */
void cpu_maxpool_backward(const dt_pool_shape *s, const float *dy, const int32_t *arg,
                          float *dx, int dx_fresh)
{
    if (!dx)
        return;
    const size_t planes = (size_t)s->B * s->C;
    const size_t hw = (size_t)s->H * s->W, pq = (size_t)s->P * s->Q;
    const size_t group = s->blk ? (size_t)s->blk : 1; // also the stride between a plane's pixels
#pragma omp parallel for if (planes * hw >= DT_PAR_CHUNK) schedule(static)
    for (size_t g = 0; g < planes / group; g++) {
        float *dxg = dx + g * hw * group;
        if (dx_fresh)
            memset(dxg, 0, hw * group * sizeof *dxg);
        for (size_t l = 0; l < group; l++) {
            const float *dyp = dy + (g * group + l) * pq;
            const int32_t *ap = arg + (g * group + l) * pq;
            for (size_t j = 0; j < pq; j++)
                dxg[(size_t)ap[j] * group + l] += dyp[j];
        }
    }
}

/* Blocked: the sixteen channels of a block are summed side by side, each in
 * the same order as the plain loop, so both layouts give the same bits. */
static void avgpool_forward_blocked(int B, int C, int HW, int blk, const float *x, float *y)
{
    const int CB = C / blk;
    for (int b = 0; b < B; b++)
        for (int cb = 0; cb < CB; cb++) {
            const float *xb = x + ((size_t)b * CB + cb) * (size_t)HW * blk;
            double acc[DT_CBLOCK_MAX] = { 0.0 };
            for (int j = 0; j < HW; j++)
                for (int l = 0; l < blk; l++)
                    acc[l] += xb[(size_t)j * blk + l];
            for (int l = 0; l < blk; l++)
                y[(size_t)b * C + (size_t)cb * blk + l] = HW > 0 ? (float)(acc[l] / HW) : 0.0f;
        }
}

void cpu_avgpool_forward(int B, int C, int HW, int blk, const float *x, float *y)
{
    if (blk) {
        avgpool_forward_blocked(B, C, HW, blk, x, y);
        return;
    }
    const size_t planes = (size_t)B * C;
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * HW;
        double acc = 0.0;
        for (int j = 0; j < HW; j++)
            acc += xp[j];
        y[pl] = HW > 0 ? (float)(acc / HW) : 0.0f;
    }
}

void cpu_avgpool_backward(int B, int C, int HW, int blk, const float *dy, float *dx)
{
    if (!dx || HW <= 0)
        return;
    const size_t planes = (size_t)B * C;
    const float inv = 1.0f / (float)HW;
    if (blk) {
        const int CB = C / blk;
        for (int b = 0; b < B; b++)
            for (int cb = 0; cb < CB; cb++) {
                float *dxb = dx + ((size_t)b * CB + cb) * (size_t)HW * blk;
                float g[DT_CBLOCK_MAX];
                for (int l = 0; l < blk; l++)
                    g[l] = dy[(size_t)b * C + (size_t)cb * blk + l] * inv;
                for (int j = 0; j < HW; j++)
                    for (int l = 0; l < blk; l++)
                        dxb[(size_t)j * blk + l] += g[l];
            }
        return;
    }
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * HW;
        const float g = dy[pl] * inv;
        int j = 0;
        for (; j + 4 <= HW; j += 4) { // all loads before the stores: packed SSE at -O2
            const float d0 = dxp[j], d1 = dxp[j + 1], d2 = dxp[j + 2], d3 = dxp[j + 3];
            dxp[j] = d0 + g;
            dxp[j + 1] = d1 + g;
            dxp[j + 2] = d2 + g;
            dxp[j + 3] = d3 + g;
        }
        for (; j < HW; j++)
            dxp[j] += g;
    }
}
