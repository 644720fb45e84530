/* Convolution lowering on the device (im2col, col2im, bias add and gradient);
 * the work in nn/lower.h, the GEMMs in backend/cuda.c (cuBLAS). */
#include "nn/lower.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void im2col_k(size_t n, int C, int H, int W, int R, int S, int st, int pad,
                                int P, int Q, const float *x, float *cols)
{
    GRID_STRIDE(i, n) lower_im2col_at(i, C, H, W, R, S, st, pad, P, Q, x, cols);
}
__global__ static void col2im_k(size_t n, int C, int H, int W, int R, int S, int st, int pad,
                                int P, int Q, const float *dcols, float *dx, int acc)
{
    GRID_STRIDE(i, n) lower_col2im_at(i, C, H, W, R, S, st, pad, P, Q, dcols, dx, acc);
}
__global__ static void bias_add_k(size_t n, int K, size_t PQ, const float *bias, float *y)
{
    GRID_STRIDE(i, n) lower_bias_add_at(i, K, PQ, bias, y);
}
/* 32-bit indices, precomputed divisors (nn/lower.h) */
__global__ static void im2col32_k(uint32_t n, dt_lower_idx ix, int H, int W, int st, int pad,
                                  const float *x, float *cols)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        lower_im2col32_at(i, ix, H, W, st, pad, x, cols);
}
__global__ static void col2im32_k(uint32_t n, dt_lower_idx ix, int R, int S, int st, int pad,
                                  int P, int Q, const float *dcols, float *dx, int acc)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        lower_col2im32_at(i, ix, R, S, st, pad, P, Q, dcols, dx, acc);
}
__global__ static void bias_add32_k(uint32_t n, dt_lower_idx ix, const float *bias, float *y)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        lower_bias_add32_at(i, ix, bias, y);
}
/* a warp per row of PQ values (lower_bias_lane_at, then the shuffle tree
 * that lower_lanes_tree models) */
__global__ static void bias_rows_k(size_t n, size_t PQ, const float *dy, double *rows)
{
    const int lane = threadIdx.x % DT_LOWER_LANES;
    const size_t warps = (size_t)gridDim.x * (blockDim.x / DT_LOWER_LANES);
    for (size_t t = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / DT_LOWER_LANES; t < n;
         t += warps) {
        double v = lower_bias_lane_at(t, lane, PQ, dy);
        for (int off = DT_LOWER_LANES / 2; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0)
            rows[t] = v;
    }
}
__global__ static void bias_grad_k(int B, int K, const double *rows, float *db)
{
    GRID_STRIDE(k, (size_t)K) lower_bias_grad_at(k, B, K, rows, db);
}
__global__ static void sum_images_k(size_t n, int B, const float *parts, float *dw)
{
    GRID_STRIDE(e, n) lower_sum_images_at(e, B, n, parts, dw);
}

extern "C" int cuda_im2col(const dt_conv_shape *s, const float *x, float *cols, void *stream)
{
    const size_t n = (size_t)s->B * s->C * s->R * s->S * s->P * s->Q;
    if (lower_fits32(s)) {
        im2col32_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
            (uint32_t)n, lower_idx_make(s), s->H, s->W, s->stride, s->pad, x, cols);
        CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    im2col_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, s->C, s->H, s->W, s->R, s->S, s->stride, s->pad, s->P, s->Q, x, cols);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_col2im(const dt_conv_shape *s, const float *dcols, float *dx, int accumulate,
                           void *stream)
{
    const size_t n = (size_t)s->B * s->C * s->H * s->W;
    if (lower_fits32(s)) {
        col2im32_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
            (uint32_t)n, lower_idx_make(s), s->R, s->S, s->stride, s->pad, s->P, s->Q, dcols, dx,
            accumulate);
        CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    col2im_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, s->C, s->H, s->W, s->R, s->S, s->stride, s->pad, s->P, s->Q, dcols, dx, accumulate);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_bias_add(int B, int K, size_t PQ, const float *bias, float *y, void *stream)
{
    const size_t n = (size_t)B * K * PQ;
    if (n < (1ull << 31)) {
        dt_lower_idx ix = {};
        ix.pq = divmod_make((uint32_t)PQ);
        ix.k = divmod_make((uint32_t)K);
        bias_add32_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
            (uint32_t)n, ix, bias, y);
        CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    bias_add_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, K, PQ, bias,
                                                                                 y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_bias_grad(int B, int K, size_t PQ, const float *dy, float *db, double *rows,
                              void *stream)
{
    const size_t n = (size_t)B * K;
    bias_rows_k<<<dt_cuda_blocks(n * DT_LOWER_LANES), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, PQ, dy, rows);
    CUDA_CHECK(cudaGetLastError());
    bias_grad_k<<<dt_cuda_blocks((size_t)K), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        B, K, rows, db);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_sum_images(int B, size_t n, const float *parts, float *dw, void *stream)
{
    sum_images_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, B, parts,
                                                                                  dw);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
