/* ReLU and sigmoid on the device: one thread per element (grid-stride), the
 * work in nn/cuda/activation.h. */
#include "nn/cuda/activation.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void relu_forward_k(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) relu_forward_at(i, x, y);
}
__global__ static void relu_backward_k(size_t n, const float *y, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) relu_backward_at(i, y, dy, dx);
}
__global__ static void relu_backward_inplace_k(size_t n, const float *y, float *d)
{
    GRID_STRIDE(i, n) relu_backward_inplace_at(i, y, d);
}
__global__ static void sigmoid_forward_k(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) sigmoid_forward_at(i, x, y);
}
__global__ static void sigmoid_backward_k(size_t n, const float *y, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) sigmoid_backward_at(i, y, dy, dx);
}

extern "C" int cuda_relu_forward(size_t n, const float *x, float *y, void *stream)
{
    relu_forward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, x, y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_relu_backward(size_t n, const float *y, const float *dy, float *dx,
                                  void *stream)
{
    if (!dx)
        return 0;
    relu_backward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, y, dy,
                                                                                    dx);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_relu_backward_inplace(size_t n, const float *y, float *d, void *stream)
{
    relu_backward_inplace_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, y,
                                                                                           d);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_sigmoid_forward(size_t n, const float *x, float *y, void *stream)
{
    sigmoid_forward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, x, y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx,
                                     void *stream)
{
    if (!dx)
        return 0;
    sigmoid_backward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, y, dy,
                                                                                       dx);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
