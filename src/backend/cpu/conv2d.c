/* 2-D convolution on the CPU: im2col lowering + OpenBLAS sgemm.
 *
 * A chunk of nb images is lowered into cols (C*R*S, nb*P*Q), so that
 *   forward   y     (K, nb*PQ)    = W (K, CRS) x cols
 *   backward  dW^T  (CRS, K)     += cols x dy^T (dy as (K, nb*PQ))
 *             dcols (CRS, nb*PQ)  = W^T x dy, then col2im adds dcols into dx.
 *
 * Why chunks and not the whole batch: the lowered matrix is consumed by the
 * GEMM right after im2col wrote it, so it should still be in cache. For the
 * mnist_cnn conv2 (C 32, K 64, 3x3, 24x24 out) one image gives a 663 KB cols
 * that stays in the 1 MB L2, and the 64 x 576 x 288 sgemm runs at ~97 GFLOP/s
 * on one core here; lowering all 32 images (21 MB) drops the whole layer from
 * 88 to 53 GFLOP/s forward (86 to 55 backward) because OpenBLAS then packs
 * from DRAM. Images are grouped only when one gives fewer than 256 columns
 * (4x4 and 2x2 maps: 1.1x and 2x faster grouped; 8x8 is neutral, 16x16 worse);
 * their output then goes through a (K, nb*PQ) staging buffer.
 *
 * A 1x1, stride 1, unpadded conv needs no lowering: x[b] (C, HW) is cols.
 *
 * Plain layout only (the native backend's cblock is 0): this is the reference
 * the oneDNN path (conv2d_dnnl.c) is tested against. */
#include "backend/cpu/kernels.h"

#include <cblas.h>
#include <string.h>

/* GEMMs narrower than this many columns lose efficiency; group images up to it. */
#ifndef CONV_MIN_COLS
#define CONV_MIN_COLS 256
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

/* Outputs q with 0 <= q * stride + off < W, as [*q0, *q1) within [0, Q); the
 * same for rows with H and P. */
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
 * packed SSE; the plain loops stayed scalar and made col2im 10x slower. */
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

static void row_add_const(float *d, float a, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float d0 = d[i], d1 = d[i + 1], d2 = d[i + 2], d3 = d[i + 3];
        d[i] = d0 + a;
        d[i + 1] = d1 + a;
        d[i + 2] = d2 + a;
        d[i + 3] = d3 + a;
    }
    for (; i < n; i++)
        d[i] += a;
}

/* Eight running sums instead of one: a single float accumulator is bound by
 * the add latency (0.93 against 0.14 ms for the db of mnist_cnn's conv2). */
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
    // skip the library call for the usual n == 0
    if (n > 0)
        memset(d, 0, (size_t)n * sizeof(float));
}

/* cols rows of length ld, columns [0, P*Q) filled from one image x (C, H, W).
 * The rows p whose input row lies in the padding, and the columns q whose input
 * column does, are found once per (c, r, t), so the inner loop is a plain copy. */
static void conv_im2col(const dt_conv_shape *s, const float *restrict x, float *restrict cols,
                        size_t ld)
{
    const int H = s->H, W = s->W, P = s->P, Q = s->Q, st = s->stride, pad = s->pad;
    for (int c = 0; c < s->C; c++) {
        const float *xc = x + (size_t)c * H * W;
        for (int r = 0; r < s->R; r++) {
            int p0, p1;
            conv_valid_cols(r - pad, st, H, P, &p0, &p1);
            for (int t = 0; t < s->S; t++) {
                float *row = cols + ((size_t)(c * s->R + r) * s->S + t) * ld;
                const int off = t - pad;
                int q0, q1;
                conv_valid_cols(off, st, W, Q, &q0, &q1);
                row_zero(row, p0 * Q);
                row_zero(row + (size_t)p1 * Q, (P - p1) * Q);
                if (st == 1 && q0 == 0 && q1 == Q) {
                    // No horizontal padding (off >= 0): each output row p is one
                    // copy of Q floats. Fixed 8-float blocks that may run past Q
                    // compile to inline moves instead of a memcpy call (0.40
                    // against 0.68 ms for a batch of mnist_cnn conv2). The overrun
                    // lands in row p + 1, copied next; the last row is exact.
                    // Reads stay inside input row ih + 1 when Q >= 8 (so W >= 8).
                    const float *src = xc + (size_t)(p0 + r - pad) * W + off;
                    int p = p0;
                    if (Q >= 8)
                        for (; p + 1 < p1; p++) {
                            float *d = row + (size_t)p * Q;
                            const float *sp = src + (size_t)(p - p0) * W;
                            for (int q = 0; q < Q; q += 8)
                                memcpy(d + q, sp + q, 8 * sizeof(float));
                        }
                    for (; p < p1; p++)
                        memcpy(row + (size_t)p * Q, src + (size_t)(p - p0) * W,
                               (size_t)Q * sizeof(float));
                    continue;
                }
                for (int p = p0; p < p1; p++) {
                    float *dst = row + (size_t)p * Q;
                    const float *xr = xc + (size_t)(p * st + r - pad) * W;
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
            int p0, p1;
            conv_valid_cols(r - pad, st, H, P, &p0, &p1);
            for (int t = 0; t < s->S; t++) {
                const float *row = dcols + ((size_t)(c * s->R + r) * s->S + t) * ld;
                const int off = t - pad;
                int q0, q1;
                conv_valid_cols(off, st, W, Q, &q0, &q1);
                for (int p = p0; p < p1; p++) {
                    const float *src = row + (size_t)p * Q;
                    float *xr = dxc + (size_t)(p * st + r - pad) * W;
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

/* Workspace layout (offsets in floats) for shape s: cols (CRS, nb*PQ) unless no
 * lowering is needed, the (K, nb*PQ) staging buffer when images are grouped,
 * then dW^T (CRS, K). */
typedef struct conv_plan {
    int nb;
    size_t stage, dwt, total;
} conv_plan;

static conv_plan conv_plan_make(const dt_conv_shape *s)
{
    conv_plan pl;
    pl.nb = conv_chunk(s);
    const size_t n = (size_t)pl.nb * (size_t)s->P * (size_t)s->Q;
    const size_t crs = (size_t)s->C * s->R * s->S;
    pl.stage = (pl.nb == 1 && conv_is_pointwise(s)) ? 0 : crs * n;
    pl.dwt = pl.stage + (pl.nb > 1 ? (size_t)s->K * n : 0);
    pl.total = pl.dwt + crs * (size_t)s->K;
    return pl;
}

size_t cpu_conv2d_workspace(const dt_conv_shape *s) { return conv_plan_make(s).total; }

/* col2im adds into dx: accumulation costs nothing extra */
int cpu_conv2d_dx_accumulates(const dt_conv_shape *s)
{
    (void)s;
    return 1;
}

void cpu_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                        const float *b, float *y, float *work)
{
    const conv_plan pl = conv_plan_make(s);
    const int nb = pl.nb, K = s->K;
    const size_t pq = (size_t)s->P * s->Q, crs = (size_t)s->C * s->R * s->S;
    const size_t chw = (size_t)s->C * s->H * s->W, kpq = (size_t)K * pq;
    if (pq == 0 || K == 0)
        return;
    float *cols = work;
    float *stage = nb > 1 ? work + pl.stage : NULL;

    for (int b0 = 0; b0 < s->B; b0 += nb) {
        const int m = s->B - b0 < nb ? s->B - b0 : nb;
        const size_t n = (size_t)m * pq;
        float *yb = y + (size_t)b0 * kpq;
        // out (K, m*PQ); with one image that is exactly y[b0] (K, P, Q)
        float *out = nb == 1 ? yb : stage;
        if (crs > 0) {
            const float *lowered = conv_lower(s, x + (size_t)b0 * chw, m, cols);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, (int)n, (int)crs, 1.0f, w,
                        (int)crs, lowered, (int)n, 0.0f, out, (int)n);
        } else {
            memset(out, 0, (size_t)K * n * sizeof(float));
        }
        // the bias goes in while out is in cache, in packed blocks: as a scalar
        // loop it cost mnist_cnn's conv1 (32 x 676 outputs, CRS 9) as much as
        // its GEMM (0.36 against 0.20 ms a batch)
        if (b)
            for (int k = 0; k < K; k++)
                row_add_const(out + (size_t)k * n, b[k], n);
        if (nb > 1) {
            for (int i = 0; i < m; i++)
                for (int k = 0; k < K; k++)
                    memcpy(yb + (size_t)i * kpq + (size_t)k * pq, stage + (size_t)k * n + i * pq,
                           pq * sizeof(float));
        }
    }
}

/* dW is accumulated transposed, dW^T (CRS, K) += cols (CRS, n) dy^T (n, K): the
 * same product as dy cols^T, but OpenBLAS runs this orientation ~8% faster for
 * the mnist_cnn conv2 (7.0 against 7.6 ms a batch). */
void cpu_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                         float *work)
{
    const conv_plan pl = conv_plan_make(s);
    const int nb = pl.nb, K = s->K;
    const size_t pq = (size_t)s->P * s->Q, crs = (size_t)s->C * s->R * s->S;
    const size_t chw = (size_t)s->C * s->H * s->W, kpq = (size_t)K * pq;
    const int pointwise = conv_is_pointwise(s);
    float *cols = work;
    float *stage = nb > 1 ? work + pl.stage : NULL;
    float *dwt = work + pl.dwt;

    if (dx && dx_fresh)
        memset(dx, 0, (size_t)s->B * chw * sizeof(float));
    // parameter gradients are overwritten, even when there is nothing to sum over
    if (db)
        memset(db, 0, (size_t)K * sizeof(float));
    if (dw && (s->B == 0 || pq == 0))
        memset(dw, 0, (size_t)K * crs * sizeof(float));
    if (pq == 0 || K == 0)
        return;

    for (int b0 = 0; b0 < s->B; b0 += nb) {
        const int m = s->B - b0 < nb ? s->B - b0 : nb;
        const size_t n = (size_t)m * pq;
        const float *dyb = dy + (size_t)b0 * kpq;
        // db while dy[b0] is in cache for the GEMMs
        if (db)
            for (int i = 0; i < m; i++)
                for (int k = 0; k < K; k++)
                    db[k] += row_sum(dyb + (size_t)i * kpq + (size_t)k * pq, pq);
        if (crs == 0 || (!dw && !dx))
            continue;
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)crs, K, (int)n, 1.0f,
                        lowered, (int)n, dym, (int)n, b0 == 0 ? 0.0f : 1.0f, dwt, K);
        }
        if (dx) {
            float *dxb = dx + (size_t)b0 * chw;
            if (m == 1 && pointwise) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)crs, (int)n, K, 1.0f, w,
                            (int)crs, dym, (int)n, 1.0f, dxb, (int)n);
            } else {
                // dcols (CRS, m*PQ) = W^T dy, into the cols buffer dW is done with
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)crs, (int)n, K, 1.0f, w,
                            (int)crs, dym, (int)n, 0.0f, cols, (int)n);
                for (int i = 0; i < m; i++)
                    conv_col2im(s, cols + (size_t)i * pq, n, dxb + (size_t)i * chw);
            }
        }
    }
    if (dw && s->B > 0 && crs > 0)
        for (int k = 0; k < K; k++)
            for (size_t j = 0; j < crs; j++)
                dw[(size_t)k * crs + j] = dwt[j * K + k];
}
