/* GroupNorm on the device, plain layout, with the fused ReLU and residual add;
 * the work in nn/cuda/groupnorm.h. The statistics and gradient sums take one
 * thread per (sample, group), which keeps the CPU's summation order (and its
 * bits) at the cost of parallelism: a block-wide reduction is the later,
 * faster path. */
#include "nn/cuda/groupnorm.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void gn_stats_k(size_t n, int C, int HW, int G, const float *x, float *mean,
                                  float *rstd)
{
    GRID_STRIDE(bg, n) groupnorm_stats_at(bg, C, HW, G, x, mean, rstd);
}
__global__ static void gn_affine_k(size_t n, int C, int HW, int G, const float *x,
                                   const float *gamma, const float *beta, const float *mean,
                                   const float *rstd, const float *skip, int relu, float *y)
{
    GRID_STRIDE(e, n) groupnorm_affine_at(e, C, HW, G, x, gamma, beta, mean, rstd, skip, relu, y);
}
__global__ static void gn_grad_sums_k(size_t n, int C, int HW, int G, const float *x,
                                      const float *gamma, const float *mean, const float *rstd,
                                      const float *y, const float *dy, double *sdy_c,
                                      double *sdyx_c, double *sum_gd, double *sum_gdx)
{
    GRID_STRIDE(bg, n)
    groupnorm_grad_sums_at(bg, C, HW, G, x, gamma, mean, rstd, y, dy, sdy_c, sdyx_c, sum_gd,
                           sum_gdx);
}
__global__ static void gn_param_grad_k(size_t n, int B, int C, const double *sdy_c,
                                       const double *sdyx_c, float *dgamma, float *dbeta)
{
    GRID_STRIDE(c, n) groupnorm_param_grad_at(c, B, C, sdy_c, sdyx_c, dgamma, dbeta);
}
__global__ static void gn_dx_k(size_t n, int C, int HW, int G, const float *x, const float *gamma,
                               const float *mean, const float *rstd, const float *y,
                               const float *dy, const double *sum_gd, const double *sum_gdx,
                               float *dx, float *dskip)
{
    GRID_STRIDE(e, n)
    groupnorm_dx_at(e, C, HW, G, x, gamma, mean, rstd, y, dy, sum_gd, sum_gdx, dx, dskip);
}

extern "C" int cuda_groupnorm_forward(int B, int C, int HW, int G, const float *x,
                                      const float *gamma, const float *beta, const float *skip,
                                      int relu, float *y, float *mean, float *rstd, void *stream)
{
    const cudaStream_t s = (cudaStream_t)stream;
    const size_t nbg = (size_t)B * G, n = (size_t)B * C * HW;
    gn_stats_k<<<dt_cuda_blocks(nbg), DT_CUDA_THREADS, 0, s>>>(nbg, C, HW, G, x, mean, rstd);
    CUDA_CHECK(cudaGetLastError());
    gn_affine_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, s>>>(n, C, HW, G, x, gamma, beta, mean,
                                                              rstd, skip, relu, y);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int cuda_groupnorm_backward(int B, int C, int HW, int G, const float *x,
                                       const float *gamma, const float *mean, const float *rstd,
                                       const float *y, const float *dy, float *dx, float *dskip,
                                       float *dgamma, float *dbeta, double *work, void *stream)
{
    const cudaStream_t s = (cudaStream_t)stream;
    const size_t nbg = (size_t)B * G, nbc = (size_t)B * C, n = (size_t)B * C * HW;
    double *sdy_c = work, *sdyx_c = work + nbc, *sum_gd = work + 2 * nbc,
           *sum_gdx = work + 2 * nbc + nbg;
    gn_grad_sums_k<<<dt_cuda_blocks(nbg), DT_CUDA_THREADS, 0, s>>>(
        nbg, C, HW, G, x, gamma, mean, rstd, y, dy, sdy_c, sdyx_c, sum_gd, sum_gdx);
    CUDA_CHECK(cudaGetLastError());
    if (dgamma || dbeta) {
        gn_param_grad_k<<<dt_cuda_blocks((size_t)C), DT_CUDA_THREADS, 0, s>>>(
            (size_t)C, B, C, sdy_c, sdyx_c, dgamma, dbeta);
        CUDA_CHECK(cudaGetLastError());
    }
    if (dx || dskip) {
        gn_dx_k<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, s>>>(n, C, HW, G, x, gamma, mean, rstd, y,
                                                              dy, sum_gd, sum_gdx, dx, dskip);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}
