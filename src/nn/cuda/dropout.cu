/* Inverted dropout on the device; the work (and the counter-based mask shared
 * with the CPU) in nn/cuda/dropout.h. */
#include "nn/cuda/dropout.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void dropout_forward_k(size_t n, float p, float scale, uint64_t key,
                                         const float *x, float *y, float *mask)
{
    GRID_STRIDE(i, n) dropout_forward_at(i, p, scale, key, x, y, mask);
}
__global__ static void dropout_forward_keyed_k(size_t n, float p, float scale,
                                               const uint64_t *key, const float *x, float *y,
                                               float *mask)
{
    const uint64_t k = *key;
    GRID_STRIDE(i, n) dropout_forward_at(i, p, scale, k, x, y, mask);
}
__global__ static void dropout_backward_k(size_t n, const float *mask, const float *dy, float *dx)
{
    GRID_STRIDE(i, n) dropout_backward_at(i, mask, dy, dx);
}

extern "C" int cuda_dropout_forward(size_t n, float p, uint64_t key, const float *x, float *y,
                                    float *mask, void *stream)
{
    dropout_forward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, p, dropout_scale(p), key, x, y, mask);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_dropout_forward_keyed(size_t n, float p, const uint64_t *key, const float *x,
                                          float *y, float *mask, void *stream)
{
    dropout_forward_keyed_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, p, dropout_scale(p), key, x, y, mask);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_dropout_backward(size_t n, const float *mask, const float *dy, float *dx,
                                     void *stream)
{
    if (!dx)
        return 0;
    dropout_backward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, mask,
                                                                                       dy, dx);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
