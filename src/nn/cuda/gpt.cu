/* The GPT's layer passes on the device; the work in nn/cuda/gpt.h. LayerNorm
 * and the cross-entropy run a thread per row, in the CPU's order of sums (a
 * first step: a warp per row would read coalesced but sum in another
 * order), LayerNorm's parameter gradients and the embeddings' a thread per
 * column (the rows in order, the reads coalesced across the threads); GELU
 * and the branches' dropout a thread per element; the attention in
 * nn/cuda/attention.cu. */
#include "nn/cuda/gpt.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void embedding_k(size_t n, int T, int C, const int32_t *tok, const float *wte,
                                   const float *wpe, float p, const uint64_t *key, float *x)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(i, n) gpt_embedding_at(i, T, C, tok, wte, wpe, p, k, x);
}

__global__ static void layernorm_k(size_t n, int C, const float *x, const float *g,
                                   const float *b, float *y, float *mean, float *rstd)
{
    GRID_STRIDE(r, n)
    gpt_layernorm_row(C, x + r * C, g, b, y + r * C, mean + r, rstd + r);
}

__global__ static void layernorm_residual_k(size_t n, int C, const float *x, const float *r,
                                            float p, const uint64_t *key, const float *g,
                                            const float *b, float *xo, float *y, float *mean,
                                            float *rstd)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(row, n)
    gpt_layernorm_residual_row(row, C, x, r, p, k, g, b, xo, y, mean, rstd);
}

__global__ static void layernorm_backward_rows_k(size_t n, int C, const float *x,
                                                 const float *mean, const float *rstd,
                                                 const float *g, const float *dy, float *dx,
                                                 int accumulate)
{
    GRID_STRIDE(r, n) gpt_layernorm_backward_row(r, C, x, mean, rstd, g, dy, dx, accumulate);
}

__global__ static void layernorm_backward_cols_k(size_t n, int N, const float *x,
                                                 const float *mean, const float *rstd,
                                                 const float *dy, float *dg, float *db)
{
    GRID_STRIDE(k, n) gpt_layernorm_backward_col(k, N, (int)n, x, mean, rstd, dy, dg, db);
}

__global__ static void embedding_backward_k(size_t n, int B, int T, const int32_t *tok,
                                            const float *dx, float p, const uint64_t *key,
                                            float *dwte, float *dwpe)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(i, n) gpt_embedding_backward_col(i, B, T, (int)n, tok, dx, p, k, dwte, dwpe);
}

__global__ static void layernorm_apply_k(size_t n, int C, const float *x, const float *mean,
                                         const float *rstd, const float *g, const float *b,
                                         float *y)
{
    GRID_STRIDE(r, n) gpt_layernorm_apply_row(r, C, x, mean, rstd, g, b, y);
}

__global__ static void dropout_grad_k(size_t n, const float *dres, float p, const uint64_t *key,
                                      float *d)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(i, n) gpt_dropout_grad_at(i, dres, p, k, d);
}

__global__ static void gelu_k(size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n) gpt_gelu_at(i, x, y);
}

__global__ static void gelu_deriv_k(size_t n, const float *x, float *y, float *d)
{
    GRID_STRIDE(i, n) gpt_gelu_deriv_at(i, x, y, d);
}

__global__ static void gelu_backward_deriv_k(size_t n, const float *d, float *dy)
{
    GRID_STRIDE(i, n) gpt_gelu_backward_deriv_at(i, d, dy);
}

__global__ static void xent_forward_k(size_t n, int V, const float *z, const int32_t *t,
                                      float *lse, double *loss, int32_t *hit)
{
    GRID_STRIDE(r, n)
    {
        const float *row = z + r * (size_t)V;
        int arg;
        gpt_xent_row(V, row, lse + r, &arg);
        const int ok = t[r] >= 0 && t[r] < V; /* else NaN, nothing read */
        loss[r] = ok ? (double)lse[r] - (double)row[t[r]] : (double)NAN;
        hit[r] = ok && arg == t[r];
    }
}

__global__ static void xent_backward_k(size_t n, int V, const float *z, const float *lse,
                                       const int32_t *t, float scale, float *d)
{
    GRID_STRIDE(r, n)
    gpt_xent_grad_row(V, z + r * (size_t)V, lse[r], t[r], scale, d + r * (size_t)V);
}

extern "C" int cuda_layernorm_backward(int N, int C, const float *x, const float *mean,
                                       const float *rstd, const float *g, const float *dy,
                                       float *dx, int accumulate, float *dg, float *db,
                                       void *stream)
{
    const size_t rows = (size_t)N, cols = (size_t)C;
    DT_LAUNCH(layernorm_backward_rows_k, rows, stream, C, x, mean, rstd, g, dy, dx, accumulate);
    DT_LAUNCH(layernorm_backward_cols_k, cols, stream, N, x, mean, rstd, dy, dg, db);
    return 0;
}

extern "C" int cuda_embedding_backward(int B, int T, int C, const int32_t *tok,
                                       const float *dx, float p, const uint64_t *key, float *dwte,
                                       float *dwpe, void *stream)
{
    const size_t n = (size_t)C;
    DT_LAUNCH(embedding_backward_k, n, stream, B, T, tok, dx, p, key, dwte, dwpe);
    return 0;
}

extern "C" int cuda_layernorm_apply(int N, int C, const float *x, const float *mean,
                                    const float *rstd, const float *g, const float *b, float *y,
                                    void *stream)
{
    const size_t n = (size_t)N;
    DT_LAUNCH(layernorm_apply_k, n, stream, C, x, mean, rstd, g, b, y);
    return 0;
}

extern "C" int cuda_dropout_grad(size_t n, const float *dres, float p, const uint64_t *key,
                                 float *d, void *stream)
{
    DT_LAUNCH(dropout_grad_k, n, stream, dres, p, key, d);
    return 0;
}

extern "C" int cuda_gelu_forward(size_t n, const float *x, float *y, void *stream)
{
    DT_LAUNCH(gelu_k, n, stream, x, y);
    return 0;
}

extern "C" int cuda_gelu_forward_deriv(size_t n, const float *x, float *y, float *d,
                                       void *stream)
{
    DT_LAUNCH(gelu_deriv_k, n, stream, x, y, d);
    return 0;
}

extern "C" int cuda_gelu_backward_deriv(size_t n, const float *d, float *dy, void *stream)
{
    DT_LAUNCH(gelu_backward_deriv_k, n, stream, d, dy);
    return 0;
}

extern "C" int cuda_xent_seq_rows(int N, int V, const float *logits, const int32_t *targets,
                                  float *lse, double *loss, int32_t *hit, void *stream)
{
    const size_t n = (size_t)N;
    DT_LAUNCH(xent_forward_k, n, stream, V, logits, targets, lse, loss, hit);
    return 0;
}

extern "C" int cuda_xent_seq_backward(int N, int V, const float *logits, const float *lse,
                                      const int32_t *targets, float scale, float *d,
                                      void *stream)
{
    const size_t n = (size_t)N;
    DT_LAUNCH(xent_backward_k, n, stream, V, logits, lse, targets, scale, d);
    return 0;
}

extern "C" int cuda_embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                                      const float *wpe, float p, const uint64_t *key, float *x,
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
                                               float p, const uint64_t *key, const float *g,
                                               const float *b, float *xo, float *y,
                                               float *mean, float *rstd, void *stream)
{
    const size_t n = (size_t)N;
    DT_LAUNCH(layernorm_residual_k, n, stream, C, x, r, p, key, g, b, xo, y, mean, rstd);
    return 0;
}
