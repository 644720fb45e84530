/* 2-D convolution on the CPU: im2col lowering + OpenBLAS sgemm.
 *
 * A chunk of nb images is lowered into cols (C*R*S, nb*P*Q), so that
 *   forward   y     (K, nb*PQ)  = W (K, CRS) x cols
 *   backward  dW    (K, CRS)   += dy (K, nb*PQ) x cols^T
 *             dcols (CRS, nb*PQ) = W^T x dy, then col2im adds dcols into dx.
 *
 * Why chunks and not the whole batch: the lowered matrix is consumed by the
 * GEMM right after im2col wrote it, so it should still be in cache. For the
 * mnist_cnn conv2 (C 32, K 64, 3x3, 24x24 out) one image gives a 663 KB cols
 * that stays in the 1 MB L2, and the 64 x 576 x 288 sgemm runs at ~97 GFLOP/s
 * on one core here; lowering all 32 images (21 MB) drops it to ~65 GFLOP/s
 * because OpenBLAS then packs from DRAM. Several images are grouped only when
 * one image gives too few columns for an efficient GEMM (small late feature
 * maps); their output then goes through a (K, nb*PQ) staging buffer.
 *
 * A 1x1, stride 1, unpadded conv needs no lowering: x[b] (C, HW) is cols. */
#include "nn/kernels_cpu.h"

#include <cblas.h>
#include <string.h>

/* GEMMs narrower than this many columns lose efficiency; group images up to it. */
#ifndef CONV_MIN_COLS
#define CONV_MIN_COLS 512
#endif
/* Cap on a multi-image cols block (floats): 2 MiB, about L2 plus a share of L3. */
#ifndef CONV_MAX_GROUP_FLOATS
#define CONV_MAX_GROUP_FLOATS (512u * 1024u)
#endif

static int conv_is_pointwise(const dt_conv_shape *s)
{
    return s->R == 1 && s->S == 1 && s->stride == 1 && s->pad == 0;
}

/* Images per chunk; a pure function of the shape so workspace and kernels agree. */
static int conv_chunk(const dt_conv_shape *s)
{
    size_t pq = (size_t)s->P * (size_t)s->Q;
    size_t crs = (size_t)s->C * (size_t)s->R * (size_t)s->S;
    if (pq == 0 || crs == 0)
        return 1;
    size_t nb = (CONV_MIN_COLS + pq - 1) / pq;
    size_t cap = CONV_MAX_GROUP_FLOATS / (crs * pq);
    if (nb > cap)
        nb = cap;
    if (nb > (size_t)s->B)
        nb = (size_t)s->B;
    return nb < 1 ? 1 : (int)nb;
}

/* Columns q with 0 <= q * stride + off < W, as [*q0, *q1) within [0, Q). */
static void conv_valid_cols(int off, int stride, int W, int Q, int *q0, int *q1)
{
    int lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int hi = W - 1 - off >= 0 ? (W - 1 - off) / stride + 1 : 0;
    if (hi > Q)
        hi = Q;
    if (lo > hi)
        lo = hi;
    *q0 = lo;
    *q1 = hi;
}

/* Row helpers: restrict plus a 4-wide body lets GCC's -O2 (SLP) vectorizer emit
 * packed SSE; the plain loops stayed scalar and made col2im 5x slower than its
 * GEMM, and memcpy calls cost more than the 24-float rows of a typical map. */
static inline void row_copy(float *restrict d, const float *restrict s, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        d[i] = s[i];
        d[i + 1] = s[i + 1];
        d[i + 2] = s[i + 2];
        d[i + 3] = s[i + 3];
    }
    for (; i < n; i++)
        d[i] = s[i];
}

static inline void row_add(float *restrict d, const float *restrict s, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        d[i] += s[i];
        d[i + 1] += s[i + 1];
        d[i + 2] += s[i + 2];
        d[i + 3] += s[i + 3];
    }
    for (; i < n; i++)
        d[i] += s[i];
}

/* Eight running sums instead of one: a single float accumulator is bound by
 * the 4-cycle add latency (1.8 ms for the db of mnist_cnn's conv2). */
static float row_sum(const float *v, size_t n)
{
    float a[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] += v[i + j];
    for (; i < n; i++)
        a[0] += v[i];
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

static inline void row_zero(float *d, int n)
{
    for (int i = 0; i < n; i++)
        d[i] = 0.0f;
}

/* cols rows of length ld, columns [0, P*Q) filled from one image x (C, H, W). */
static void conv_im2col(const dt_conv_shape *s, const float *restrict x, float *restrict cols,
                        size_t ld)
{
    const int H = s->H, W = s->W, P = s->P, Q = s->Q, st = s->stride, pad = s->pad;
    for (int c = 0; c < s->C; c++) {
        const float *xc = x + (size_t)c * H * W;
        for (int r = 0; r < s->R; r++) {
            for (int t = 0; t < s->S; t++) {
                float *row = cols + ((size_t)(c * s->R + r) * s->S + t) * ld;
                const int off = t - pad;
                int q0, q1;
                conv_valid_cols(off, st, W, Q, &q0, &q1);
                for (int p = 0; p < P; p++) {
                    float *dst = row + (size_t)p * Q;
                    const int ih = p * st + r - pad;
                    if (ih < 0 || ih >= H) {
                        row_zero(dst, Q);
                        continue;
                    }
                    const float *xr = xc + (size_t)ih * W;
                    row_zero(dst, q0);
                    if (st == 1) {
                        row_copy(dst + q0, xr + q0 + off, q1 - q0);
                    } else {
                        for (int q = q0; q < q1; q++)
                            dst[q] = xr[q * st + off];
                    }
                    row_zero(dst + q1, Q - q1);
                }
            }
        }
    }
}

/* dx (C, H, W) += the scatter of dcols columns [0, P*Q) (rows of length ld). */
static void conv_col2im(const dt_conv_shape *s, const float *restrict dcols, size_t ld,
                        float *restrict dx)
{
    const int H = s->H, W = s->W, P = s->P, Q = s->Q, st = s->stride, pad = s->pad;
    for (int c = 0; c < s->C; c++) {
        float *dxc = dx + (size_t)c * H * W;
        for (int r = 0; r < s->R; r++) {
            for (int t = 0; t < s->S; t++) {
                const float *row = dcols + ((size_t)(c * s->R + r) * s->S + t) * ld;
                const int off = t - pad;
                int q0, q1;
                conv_valid_cols(off, st, W, Q, &q0, &q1);
                for (int p = 0; p < P; p++) {
                    const int ih = p * st + r - pad;
                    if (ih < 0 || ih >= H)
                        continue;
                    const float *src = row + (size_t)p * Q;
                    float *xr = dxc + (size_t)ih * W;
                    if (st == 1) {
                        row_add(xr + q0 + off, src + q0, q1 - q0);
                    } else {
                        for (int q = q0; q < q1; q++)
                            xr[q * st + off] += src[q];
                    }
                }
            }
        }
    }
}

/* The cols matrix (CRS, m*PQ) of images x[0..m): x itself when no lowering is needed. */
static const float *conv_lower(const dt_conv_shape *s, const float *x, int m, float *cols)
{
    if (m == 1 && conv_is_pointwise(s))
        return x;
    const size_t pq = (size_t)s->P * s->Q, chw = (size_t)s->C * s->H * s->W;
    const size_t ld = (size_t)m * pq;
    for (int i = 0; i < m; i++)
        conv_im2col(s, x + (size_t)i * chw, cols + (size_t)i * pq, ld);
    return cols;
}

size_t cpu_conv2d_workspace(const dt_conv_shape *s)
{
    const size_t nb = (size_t)conv_chunk(s);
    const size_t n = nb * (size_t)s->P * (size_t)s->Q;
    const size_t crs = (size_t)s->C * s->R * s->S;
    size_t cols = (nb == 1 && conv_is_pointwise(s)) ? 0 : crs * n;
    size_t stage = nb > 1 ? (size_t)s->K * n : 0;
    return cols + stage;
}

void cpu_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                        const float *b, float *y, float *work)
{
    const int nb = conv_chunk(s), K = s->K;
    const size_t pq = (size_t)s->P * s->Q, crs = (size_t)s->C * s->R * s->S;
    const size_t chw = (size_t)s->C * s->H * s->W, kpq = (size_t)K * pq;
    if (pq == 0 || K == 0)
        return;
    float *cols = work;
    float *stage = nb > 1 ? work + crs * (size_t)nb * pq : NULL;

    for (int b0 = 0; b0 < s->B; b0 += nb) {
        const int m = s->B - b0 < nb ? s->B - b0 : nb;
        const size_t n = (size_t)m * pq;
        float *yb = y + (size_t)b0 * kpq;
        if (crs == 0) {
            memset(yb, 0, (size_t)m * kpq * sizeof(float));
        } else {
            const float *lowered = conv_lower(s, x + (size_t)b0 * chw, m, cols);
            // out (K, m*PQ); with one image that is exactly y[b0] (K, P, Q)
            float *out = nb == 1 ? yb : stage;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, (int)n, (int)crs, 1.0f, w,
                        (int)crs, lowered, (int)n, 0.0f, out, (int)n);
            if (nb > 1) {
                for (int i = 0; i < m; i++)
                    for (int k = 0; k < K; k++)
                        memcpy(yb + (size_t)i * kpq + (size_t)k * pq, stage + (size_t)k * n + i * pq,
                               pq * sizeof(float));
            }
        }
        if (b) {
            for (int i = 0; i < m; i++)
                for (int k = 0; k < K; k++) {
                    float *row = yb + (size_t)i * kpq + (size_t)k * pq;
                    const float bk = b[k];
                    for (size_t j = 0; j < pq; j++)
                        row[j] += bk;
                }
        }
    }
}

void cpu_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *dy, float *dx, float *dw, float *db, float *work)
{
    const int nb = conv_chunk(s), K = s->K;
    const size_t pq = (size_t)s->P * s->Q, crs = (size_t)s->C * s->R * s->S;
    const size_t chw = (size_t)s->C * s->H * s->W, kpq = (size_t)K * pq;
    const int pointwise = conv_is_pointwise(s);
    float *cols = work;
    float *stage = nb > 1 ? work + crs * (size_t)nb * pq : NULL;

    if (db) {
        for (int k = 0; k < K; k++) {
            double acc = 0.0;
            for (int i = 0; i < s->B; i++) {
                acc += row_sum(dy + (size_t)i * kpq + (size_t)k * pq, pq);
            }
            db[k] = (float)acc;
        }
    }
    // dW is overwritten even when there is nothing to sum over
    if (dw && (s->B == 0 || pq == 0))
        memset(dw, 0, (size_t)K * crs * sizeof(float));
    if (pq == 0 || K == 0 || crs == 0 || (!dw && !dx))
        return;

    for (int b0 = 0; b0 < s->B; b0 += nb) {
        const int m = s->B - b0 < nb ? s->B - b0 : nb;
        const size_t n = (size_t)m * pq;
        const float *dyb = dy + (size_t)b0 * kpq;
        // dym (K, m*PQ): with one image dy[b0] already has that layout
        const float *dym = dyb;
        if (nb > 1) {
            for (int i = 0; i < m; i++)
                for (int k = 0; k < K; k++)
                    memcpy(stage + (size_t)k * n + i * pq, dyb + (size_t)i * kpq + (size_t)k * pq,
                           pq * sizeof(float));
            dym = stage;
        }
        if (dw) {
            const float *lowered = conv_lower(s, x + (size_t)b0 * chw, m, cols);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, (int)crs, (int)n, 1.0f, dym,
                        (int)n, lowered, (int)n, b0 == 0 ? 0.0f : 1.0f, dw, (int)crs);
        }
        if (dx) {
            float *dxb = dx + (size_t)b0 * chw;
            if (m == 1 && pointwise) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)crs, (int)n, K, 1.0f, w,
                            (int)crs, dym, (int)n, 1.0f, dxb, (int)n);
            } else {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)crs, (int)n, K, 1.0f, w,
                            (int)crs, dym, (int)n, 0.0f, cols, (int)n);
                for (int i = 0; i < m; i++)
                    conv_col2im(s, cols + (size_t)i * pq, n, dxb + (size_t)i * chw);
            }
        }
    }
}
