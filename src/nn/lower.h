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
