/* Max and global average pooling on the device (plain layout); the work in
 * nn/cuda/pool.h. */
#include "nn/cuda/pool.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void maxpool_forward_k(size_t n, int H, int W, int P, int Q, int k, int st,
                                         const float *x, float *y, int32_t *arg)
{
    GRID_STRIDE(o, n) maxpool_forward_at(o, H, W, P, Q, k, st, x, y, arg);
}
__global__ static void maxpool_backward_k(size_t n, int H, int W, int P, int Q, int k, int st,
                                          const float *dy, const int32_t *arg, float *dx)
{
    GRID_STRIDE(e, n) maxpool_backward_at(e, H, W, P, Q, k, st, dy, arg, dx);
}
__global__ static void avgpool_forward_k(size_t n, int HW, const float *x, float *y)
{
    GRID_STRIDE(pl, n) avgpool_forward_at(pl, HW, x, y);
}
__global__ static void avgpool_backward_k(size_t n, int HW, const float *dy, float *dx)
{
    GRID_STRIDE(e, n) avgpool_backward_at(e, HW, dy, dx);
}

extern "C" int cuda_maxpool_forward(int B, int C, int H, int W, int k, int stride, int P, int Q,
                                    const float *x, float *y, int32_t *arg, void *stream)
{
    const size_t n = (size_t)B * C * P * Q;
    maxpool_forward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, H, W, P, Q, k, stride, x, y, arg);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_maxpool_backward(int B, int C, int H, int W, int k, int stride, int P, int Q,
                                     const float *dy, const int32_t *arg, float *dx, void *stream)
{
    if (!dx)
        return 0;
    const size_t n = (size_t)B * C * H * W;
    maxpool_backward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, H, W, P, Q, k, stride, dy, arg, dx);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_avgpool_forward(int B, int C, int HW, const float *x, float *y, void *stream)
{
    const size_t n = (size_t)B * C;
    avgpool_forward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, HW, x,
                                                                                      y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_avgpool_backward(int B, int C, int HW, const float *dy, float *dx,
                                     void *stream)
{
    if (!dx || HW <= 0)
        return 0;
    const size_t n = (size_t)B * C * HW;
    avgpool_backward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, HW, dy,
                                                                                       dx);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
