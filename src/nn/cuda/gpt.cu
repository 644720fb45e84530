/* The GPT's layer passes on the device; the work in nn/cuda/gpt.h. LayerNorm
 * runs a thread per row, in the CPU's order of sums (a first step: a warp per
 * row would read coalesced but sum in another order). */
#include "nn/cuda/gpt.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void embedding_k(size_t n, int T, int C, const int32_t *tok, const float *wte,
                                   const float *wpe, float p, uint64_t key, float *x)
{
    GRID_STRIDE(i, n) gpt_embedding_at(i, T, C, tok, wte, wpe, p, key, x);
}

__global__ static void layernorm_k(size_t n, int C, const float *x, const float *g,
                                   const float *b, float *y, float *mean, float *rstd)
{
    GRID_STRIDE(r, n)
    gpt_layernorm_row(C, x + r * C, g, b, y + r * C, mean + r, rstd + r);
}

__global__ static void layernorm_residual_k(size_t n, int C, const float *x, const float *r,
                                            float p, uint64_t key, const float *g,
                                            const float *b, float *xo, float *y, float *mean,
                                            float *rstd)
{
    GRID_STRIDE(row, n)
    gpt_layernorm_residual_row(row, C, x, r, p, key, g, b, xo, y, mean, rstd);
}

extern "C" int cuda_embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                                      const float *wpe, float p, uint64_t key, float *x,
                                      void *stream)
{
    const size_t n = (size_t)B * T * C;
    DT_LAUNCH(embedding_k, n, stream, T, C, tok, wte, wpe, p, key, x);
    return 0;
}

extern "C" int cuda_layernorm_forward(int N, int C, const float *x, const float *g,
                                      const float *b, float *y, float *mean, float *rstd,
                                      void *stream)
{
    const size_t n = (size_t)N;
    DT_LAUNCH(layernorm_k, n, stream, C, x, g, b, y, mean, rstd);
    return 0;
}

extern "C" int cuda_layernorm_residual_forward(int N, int C, const float *x, const float *r,
                                               float p, uint64_t key, const float *g,
                                               const float *b, float *xo, float *y,
                                               float *mean, float *rstd, void *stream)
{
    const size_t n = (size_t)N;
    DT_LAUNCH(layernorm_residual_k, n, stream, C, x, r, p, key, g, b, xo, y, mean, rstd);
    return 0;
}
