/* Softmax cross-entropy on the device, one thread per sample (B is a batch,
 * K at most a few hundred classes); the work in nn/cuda/xent.h. */
#include "nn/cuda/xent.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void softmax_xent_k(int B, int K, const float *logits, const int32_t *labels,
                                      float *dlogits, double *loss, int32_t *hit)
{
    GRID_STRIDE(i, (size_t)B) softmax_xent_row_at(i, B, K, logits, labels, dlogits, loss, hit);
}

extern "C" int cuda_softmax_xent_rows(int B, int K, const float *logits, const int32_t *labels,
                                      float *dlogits, double *loss, int32_t *hit, void *stream)
{
    softmax_xent_k<<<dt_cuda_blocks((size_t)B), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        B, K, logits, labels, dlogits, loss, hit);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
