/* Convolution lowered onto GEMMs, one element at a time: the per-element
 * bodies of the CUDA im2col / col2im / bias kernels (nn/cuda/lower.cu), also
 * compiled for the host by tests/test_cuda_host.c and checked there against
 * the CPU backend's convolution (backend/cpu/conv2d.c) through the same GEMMs.
 *
 * Layouts (plain NCHW only; the CUDA backend's cblock is 0):
 *   x, dx     (B, C, H, W)
 *   cols      (B, C*R*S, P*Q)   one lowered matrix per image, rows (c, r, s)
 *   y, dy     (B, K, P*Q)
 * so, per image b (row-major):
 *   y_b    (K, PQ)    = W (K, CRS) cols_b (CRS, PQ)
 *   dW     (K, CRS)  += dy_b (K, PQ) cols_b^T
 *   dcols_b (CRS, PQ) = W^T dy_b, and dx gathers dcols (col2im).
 * col2im is a gather: each dx element sums the (r, s) taps that read it, in
 * ascending (r, s) order, so no two threads write one element. */
#ifndef DT_NN_LOWER_H
#define DT_NN_LOWER_H

#include <stddef.h>

#include "backend/backend.h"
#include "core/divmod.h"
#include "core/hd.h"

/* cols element i of the whole batch, i in [0, B*C*R*S*P*Q): the input pixel
 * that tap (c, r, s) of output (p, q) reads, 0 in the padding */
static inline DT_HD void lower_im2col_at(size_t i, int C, int H, int W, int R, int S,
                                         int stride, int pad, int P, int Q, const float *x,
                                         float *cols)
{
    const size_t pq = (size_t)P * Q, crs = (size_t)C * R * S;
    const size_t col = i % pq, row = (i / pq) % crs, b = i / (pq * crs);
    const int p = (int)(col / (size_t)Q), q = (int)(col % (size_t)Q);
    const int s = (int)(row % (size_t)S), r = (int)((row / (size_t)S) % (size_t)R);
    const int c = (int)(row / ((size_t)R * S));
    const int h = p * stride + r - pad, w = q * stride + s - pad;
    cols[i] = (h >= 0 && h < H && w >= 0 && w < W)
                  ? x[((b * (size_t)C + (size_t)c) * H + (size_t)h) * W + (size_t)w]
                  : 0.0f;
}

/* dx element i of the whole batch, i in [0, B*C*H*W): dx[i] (+)= the sum of
 * the dcols entries of the taps that read pixel i (accumulate 0: dx = sum) */
static inline DT_HD void lower_col2im_at(size_t i, int C, int H, int W, int R, int S,
                                         int stride, int pad, int P, int Q, const float *dcols,
                                         float *dx, int accumulate)
{
    const int w = (int)(i % (size_t)W), h = (int)((i / (size_t)W) % (size_t)H);
    const size_t c = (i / ((size_t)W * H)) % (size_t)C, b = i / ((size_t)W * H * C);
    const size_t pq = (size_t)P * Q, crs = (size_t)C * R * S;
    const float *db = dcols + b * crs * pq;
    float acc = 0.0f;
    for (int r = 0; r < R; r++) {
        const int hp = h + pad - r; /* p * stride */
        if (hp < 0 || hp % stride || hp / stride >= P)
            continue;
        const int p = hp / stride;
        for (int s = 0; s < S; s++) {
            const int wq = w + pad - s;
            if (wq < 0 || wq % stride || wq / stride >= Q)
                continue;
            const int q = wq / stride;
            acc += db[((c * R + (size_t)r) * S + (size_t)s) * pq + (size_t)p * Q + (size_t)q];
        }
    }
    dx[i] = accumulate ? dx[i] + acc : acc;
}

/* The same three bodies in 32-bit index arithmetic with precomputed divisors,
 * for a convolution whose every index is below 2^31 (lower_fits32: all of
 * dtrain's models at any batch a GPU holds). Same expressions in the same
 * order as the bodies above, so the same bits; the CUDA backend uses these and
 * keeps the size_t bodies for larger shapes. */
typedef struct dt_lower_idx {
    dt_divmod pq, q, rs, s; /* im2col: a cols index into (b c, r s, p, q) */
    dt_divmod hw, w;        /* col2im: an x index into (b c, h, w) */
    dt_divmod k;            /* bias add: (b k) into (b, k) */
} dt_lower_idx;

static inline int lower_fits32(const dt_conv_shape *s)
{
    const uint64_t lim = 1ull << 31;
    return (uint64_t)s->B * s->C * s->R * s->S * s->P * s->Q < lim &&
           (uint64_t)s->B * s->C * s->H * s->W < lim && (uint64_t)s->B * s->K * s->P * s->Q < lim;
}

static inline dt_lower_idx lower_idx_make(const dt_conv_shape *s)
{
    const dt_lower_idx ix = {
        divmod_make((uint32_t)(s->P * s->Q)), divmod_make((uint32_t)s->Q),
        divmod_make((uint32_t)(s->R * s->S)), divmod_make((uint32_t)s->S),
        divmod_make((uint32_t)(s->H * s->W)), divmod_make((uint32_t)s->W),
        divmod_make((uint32_t)s->K),
    };
    return ix;
}

/* cols element i of the whole batch: lower_im2col_at's value. A cols row is
 * (b c, r s), so b C + c = row / RS indexes x's planes directly. */
static inline DT_HD void lower_im2col32_at(uint32_t i, dt_lower_idx ix, int H, int W, int stride,
                                           int pad, const float *x, float *cols)
{
    const uint32_t row = divmod_div(ix.pq, i), col = i - row * ix.pq.d;
    const uint32_t p = divmod_div(ix.q, col), q = col - p * ix.q.d;
    const uint32_t bc = divmod_div(ix.rs, row), rs = row - bc * ix.rs.d;
    const uint32_t r = divmod_div(ix.s, rs), s = rs - r * ix.s.d;
    const int h = (int)(p * (uint32_t)stride + r) - pad, w = (int)(q * (uint32_t)stride + s) - pad;
    cols[i] = (h >= 0 && h < H && w >= 0 && w < W)
                  ? x[bc * ix.hw.d + (uint32_t)h * (uint32_t)W + (uint32_t)w]
                  : 0.0f;
}

/* dx element i of the whole batch: lower_col2im_at's value, the taps in
 * ascending (r, s) order */
static inline DT_HD void lower_col2im32_at(uint32_t i, dt_lower_idx ix, int R, int S, int stride,
                                           int pad, int P, int Q, const float *dcols, float *dx,
                                           int accumulate)
{
    const uint32_t bc = divmod_div(ix.hw, i), hw = i - bc * ix.hw.d;
    const uint32_t h = divmod_div(ix.w, hw), w = hw - h * ix.w.d;
    const float *d = dcols + bc * ix.rs.d * ix.pq.d; /* rows (r, s) of plane (b, c) */
    float acc = 0.0f;
    for (int r = 0; r < R; r++) {
        const int hp = (int)h + pad - r; /* p * stride */
        if (hp < 0 || hp % stride || hp / stride >= P)
            continue;
        const int p = hp / stride;
        for (int s = 0; s < S; s++) {
            const int wq = (int)w + pad - s;
            if (wq < 0 || wq % stride || wq / stride >= Q)
                continue;
            const int q = wq / stride;
            acc += d[(uint32_t)(r * S + s) * ix.pq.d + (uint32_t)(p * Q + q)];
        }
    }
    dx[i] = accumulate ? dx[i] + acc : acc;
}

/* y (B, K, PQ) element i += bias[k] */
static inline DT_HD void lower_bias_add32_at(uint32_t i, dt_lower_idx ix, const float *bias,
                                             float *y)
{
    const uint32_t bk = divmod_div(ix.pq, i);
    y[i] += bias[bk - divmod_div(ix.k, bk) * ix.k.d];
}

/* y[b, k, j] += bias[k] for element i of (B, K, PQ) */
static inline DT_HD void lower_bias_add_at(size_t i, int K, size_t PQ, const float *bias,
                                           float *y)
{
    y[i] += bias[(i / PQ) % (size_t)K];
}

/* The bias gradient db[k] = sum over b and j of dy (B, K, PQ) in two passes,
 * so the device runs B*K rows at once: rows[b K + k] = the row's sum in
 * double (t over B*K), then db[k] = the rows summed in sample order (k over
 * K), instead of one thread per k summing B*PQ values. */
static inline DT_HD void lower_bias_rows_at(size_t t, size_t PQ, const float *dy, double *rows)
{
    const float *row = dy + t * PQ;
    double acc = 0.0;
    for (size_t j = 0; j < PQ; j++)
        acc += row[j];
    rows[t] = acc;
}
/* The row sums a warp per row (coalesced reads; the CUDA kernel): lane l of
 * 32 sums the row's elements l, l + 32, ... in double, then the lanes are
 * added as the warp's shuffle tree adds them (lower_lanes_tree, the host's
 * model of it). Double sums of at most a few thousand floats: the float db
 * equals the sequential sum's except in a rare tie. */
#define DT_LOWER_LANES 32
static inline DT_HD double lower_bias_lane_at(size_t t, int lane, size_t PQ, const float *dy)
{
    const float *row = dy + t * PQ;
    double acc = 0.0;
    for (size_t j = (size_t)lane; j < PQ; j += DT_LOWER_LANES)
        acc += row[j];
    return acc;
}
/* v (32): v[0] <- the tree sum __shfl_down_sync gives lane 0 (offsets 16, 8,
 * 4, 2, 1) */
static inline DT_HD void lower_lanes_tree(double *v)
{
    for (int off = DT_LOWER_LANES / 2; off > 0; off /= 2)
        for (int l = 0; l < off; l++)
            v[l] += v[l + off];
}
static inline DT_HD void lower_bias_grad_at(size_t k, int B, int K, const double *rows,
                                            float *db)
{
    double acc = 0.0;
    for (int b = 0; b < B; b++)
        acc += rows[(size_t)b * K + k];
    db[k] = (float)acc;
}

/* dw[e] = the B per-image weight gradients parts (B, n) summed in image order
 * (e over n): one batched GEMM and this sum stand for B GEMMs accumulating */
static inline DT_HD void lower_sum_images_at(size_t e, int B, size_t n, const float *parts,
                                             float *dw)
{
    float acc = parts[e];
    for (int b = 1; b < B; b++)
        acc += parts[(size_t)b * n + e];
    dw[e] = acc;
}

#endif
