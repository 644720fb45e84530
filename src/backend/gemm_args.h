/* The GEMMs of the CUDA backend's linear and lowered-convolution layers, as
 * column-major argument sets: the meaning of cublasSgemm(StridedBatched) and
 * of cblas_sgemm(CblasColMajor, ...) alike. backend/cuda.c hands them to
 * cuBLAS; tests/test_cuda_host.c hands the same sets to OpenBLAS and checks
 * the results against the CPU backend's layers, so the orientation of every
 * device GEMM is tested without a device.
 *
 * A row-major (M, N) matrix is a column-major (N, M) one, so each product is
 * written for the transposes:
 *   linear   y (B, out) = x (B, in) W^T     ->  y^T = W'^T x^T  (W' = W as (in, out))
 *            dx (B, in) += dy (B, out) W    ->  dx^T += W' dy^T
 *            dW (out, in) = dy^T x          ->  dW^T = x^T dy
 *   conv, per image b (nn/lower.h):
 *            y_b (K, PQ) = W (K, CRS) cols_b (CRS, PQ)
 *            dW (K, CRS) += dy_b (K, PQ) cols_b^T
 *            dcols_b (CRS, PQ) = W^T dy_b */
#ifndef DT_BACKEND_GEMM_ARGS_H
#define DT_BACKEND_GEMM_ARGS_H

#include "backend/backend.h"

/* C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, column-major, batch
 * times with A, B, C advanced by sa, sb, sc floats (0: the same matrix). */
typedef struct dt_gemm {
    int ta, tb;             /* 1: op(X) = X^T */
    int m, n, k;
    int lda, ldb, ldc;
    long long sa, sb, sc;
    int batch;
} dt_gemm;

/* The floats a set reads of A and of B (all batch matrices): the extents the
 * CUDA backend's bf16 GEMMs round to bf16 before the product. */
static inline long long gemm_a_floats(const dt_gemm *g)
{
    return (long long)g->lda * (g->ta ? g->m : g->k) + (long long)(g->batch - 1) * g->sa;
}
static inline long long gemm_b_floats(const dt_gemm *g)
{
    return (long long)g->ldb * (g->tb ? g->k : g->n) + (long long)(g->batch - 1) * g->sb;
}

/* A = W, B = x, C = y */
static inline dt_gemm gemm_linear_forward(int B, int in, int out)
{
    return (dt_gemm){ 1, 0, out, B, in, in, in, out, 0, 0, 0, 1 };
}
/* A = W, B = dy, C = dx (beta 1) */
static inline dt_gemm gemm_linear_dx(int B, int in, int out)
{
    return (dt_gemm){ 0, 0, in, B, out, in, out, in, 0, 0, 0, 1 };
}
/* A = x, B = dy, C = dW (beta 0) */
static inline dt_gemm gemm_linear_dw(int B, int in, int out)
{
    return (dt_gemm){ 0, 1, in, out, B, in, out, in, 0, 0, 0, 1 };
}
/* A = cols, B = W, C = y: one product per image */
static inline dt_gemm gemm_conv_forward(const dt_conv_shape *s)
{
    const int crs = s->C * s->R * s->S, pq = s->P * s->Q;
    return (dt_gemm){ 0, 0, pq, s->K, crs, pq, crs, pq, (long long)crs * pq, 0,
                      (long long)s->K * pq, s->B };
}
/* A = cols_b, B = dy_b, C = dW: image b alone (batch 1), beta 0 for the
 * first image and 1 after, so the images are summed in order */
static inline dt_gemm gemm_conv_dw(const dt_conv_shape *s)
{
    const int crs = s->C * s->R * s->S, pq = s->P * s->Q;
    return (dt_gemm){ 1, 0, crs, s->K, pq, pq, pq, crs, (long long)crs * pq,
                      (long long)s->K * pq, 0, 1 };
}
/* A = dy, B = W, C = dcols: one product per image */
static inline dt_gemm gemm_conv_dcols(const dt_conv_shape *s)
{
    const int crs = s->C * s->R * s->S, pq = s->P * s->Q;
    return (dt_gemm){ 0, 1, pq, crs, s->K, pq, crs, pq, (long long)s->K * pq, 0,
                      (long long)crs * pq, s->B };
}

#endif
