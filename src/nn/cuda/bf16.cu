/* Floats rounded to bf16 on the device with the CPU's rounding
 * (core/bf16_round.h): the operands of the CUDA backend's bf16 GEMMs. */
#include "core/bf16_round.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void round_bf16_k(size_t n, const float *x, uint16_t *y)
{
    GRID_STRIDE(i, n) y[i] = bf16_round(x[i]);
}

extern "C" int cuda_round_bf16(size_t n, const float *x, uint16_t *y, void *stream)
{
    if (n == 0)
        return 0;
    round_bf16_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, x, y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
