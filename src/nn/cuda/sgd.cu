/* The SGD step, the scale and the algorithms' terms (EASGD, the gossip
 * modes) on the device's flat vectors; the work in nn/cuda/sgd.h. */
#include "nn/cuda/sgd.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void sgd_step_k(size_t n, float m, float wd, bool nesterov, float lr, float *x,
                                  const float *g, float *v)
{
    GRID_STRIDE(i, n) sgd_step_at(i, m, wd, nesterov, lr, x, g, v);
}

__global__ static void flat_scale_k(size_t n, float a, float *x)
{
    GRID_STRIDE(i, n) flat_scale_at(i, a, x);
}

__global__ static void flat_diff_scale_k(size_t n, float a, const float *x, const float *c,
                                         float *out)
{
    GRID_STRIDE(i, n) flat_diff_scale_at(i, a, x, c, out);
}

__global__ static void flat_toward_k(size_t n, float beta, float inv, const float *mean, float *c)
{
    GRID_STRIDE(i, n) flat_toward_at(i, beta, inv, mean, c);
}

__global__ static void flat_sub_k(size_t n, const float *d, float *x)
{
    GRID_STRIDE(i, n) flat_sub_at(i, d, x);
}

extern "C" int cuda_flat_diff_scale(size_t n, float a, const float *x, const float *c, float *out,
                                    void *stream)
{
    flat_diff_scale_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, a, x,
                                                                                       c, out);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_flat_toward(size_t n, float beta, float inv, const float *mean, float *c,
                                void *stream)
{
    flat_toward_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, beta, inv,
                                                                                   mean, c);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_flat_sub(size_t n, const float *d, float *x, void *stream)
{
    flat_sub_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, d, x);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_sgd_step(size_t n, float momentum, float weight_decay, bool nesterov,
                             float lr, float *x, const float *g, float *v, void *stream)
{
    sgd_step_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(
        n, momentum, weight_decay, nesterov, lr, x, g, v);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_flat_scale(size_t n, float a, float *x, void *stream)
{
    flat_scale_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)stream>>>(n, a, x);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

__global__ static void flat_scale_copy_k(size_t n, float a, float *x, float *y)
{
    GRID_STRIDE(i, n) flat_scale_copy_at(i, a, x, y);
}

__global__ static void flat_add_k(size_t n, const float *d, float *x)
{
    GRID_STRIDE(i, n) flat_add_at(i, d, x);
}

__global__ static void flat_div_k(size_t n, const float *x, const float *w, float *z)
{
    GRID_STRIDE(i, n) flat_div_at(i, x, w, z);
}

__global__ static void flat_sum_term_k(size_t n, const float *x, float *y, bool fresh)
{
    GRID_STRIDE(i, n) flat_sum_term_at(i, x, y, fresh);
}

__global__ static void flat_axpy_term_k(size_t n, float a, const float *x, float *y, bool fresh)
{
    GRID_STRIDE(i, n) flat_axpy_term_at(i, a, x, y, fresh);
}

__global__ static void flat_ax_plus_k(size_t n, float a, const float *x, float *y)
{
    GRID_STRIDE(i, n) flat_ax_plus_at(i, a, x, y);
}

extern "C" int cuda_flat_scale_copy(size_t n, float a, float *x, float *y, void *stream)
{
    DT_LAUNCH(flat_scale_copy_k, n, stream, a, x, y);
    return 0;
}

extern "C" int cuda_flat_add(size_t n, const float *d, float *x, void *stream)
{
    DT_LAUNCH(flat_add_k, n, stream, d, x);
    return 0;
}

extern "C" int cuda_flat_div(size_t n, const float *x, const float *w, float *z, void *stream)
{
    DT_LAUNCH(flat_div_k, n, stream, x, w, z);
    return 0;
}

extern "C" int cuda_flat_sum_term(size_t n, const float *x, float *y, bool fresh, void *stream)
{
    DT_LAUNCH(flat_sum_term_k, n, stream, x, y, fresh);
    return 0;
}

extern "C" int cuda_flat_axpy_term(size_t n, float a, const float *x, float *y, bool fresh,
                                   void *stream)
{
    DT_LAUNCH(flat_axpy_term_k, n, stream, a, x, y, fresh);
    return 0;
}

extern "C" int cuda_flat_ax_plus(size_t n, float a, const float *x, float *y, void *stream)
{
    DT_LAUNCH(flat_ax_plus_k, n, stream, a, x, y);
    return 0;
}
