/* Residual add on the device; the work in nn/cuda/add.h. */
#include "nn/cuda/add.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void add_forward_k(size_t n, const float *a, const float *b, float *y)
{
    GRID_STRIDE(i, n) add_forward_at(i, a, b, y);
}
__global__ static void add_backward_k(size_t n, const float *dy, float *d)
{
    GRID_STRIDE(i, n) add_backward_at(i, dy, d);
}

extern "C" int cuda_add_forward(size_t n, const float *a, const float *b, float *y, void *stream)
{
    add_forward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, a, b, y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_add_backward(size_t n, const float *dy, float *da, float *db, void *stream)
{
    float *d[2] = {da, db};
    for (int k = 0; k < 2; k++) {
        if (!d[k])
            continue;
        add_backward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, dy,
                                                                                       d[k]);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
