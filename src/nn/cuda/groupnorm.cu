/* GroupNorm on the device, plain layout, with the fused ReLU and residual add;
 * the work in nn/cuda/groupnorm.h. The statistics and gradient sums take one
 * thread per (sample, group), which keeps the CPU's summation order (and its
 * bits) at the cost of parallelism: a block-wide reduction is the later,
 * faster path. */
#include "nn/cuda/groupnorm.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void gn_lane_k(size_t n, int C, int HW, int G, const float *x,
                                 const float *center, int sq, float *lanes)
{
    GRID_STRIDE(t, n) groupnorm_lane_at(t, C, HW, G, x, center, sq, lanes);
}
__global__ static void gn_mean_k(size_t n, int C, int HW, int G, const float *lanes, float *mean)
{
    GRID_STRIDE(bg, n) groupnorm_mean_at(bg, C, HW, G, lanes, mean);
}
__global__ static void gn_rstd_k(size_t n, int C, int HW, int G, const float *lanes, float *rstd)
{
    GRID_STRIDE(bg, n) groupnorm_rstd_at(bg, C, HW, G, lanes, rstd);
}
__global__ static void gn_affine_k(size_t n, int C, int HW, int G, const float *x,
                                   const float *gamma, const float *beta, const float *mean,
                                   const float *rstd, const float *skip, int relu, float *y)
{
    GRID_STRIDE(e, n) groupnorm_affine_at(e, C, HW, G, x, gamma, beta, mean, rstd, skip, relu, y);
}
__global__ static void gn_grad_lane_k(size_t n, int C, int HW, int G, const float *x,
                                      const float *mean, const float *y, const float *dy,
                                      float *la, float *lb)
{
    GRID_STRIDE(t, n) groupnorm_grad_lane_at(t, C, HW, G, x, mean, y, dy, la, lb);
}
__global__ static void gn_grad_chan_k(size_t n, int C, int G, const float *rstd, const float *la,
                                      const float *lb, double *sdy_c, double *sdyx_c)
{
    GRID_STRIDE(bc, n) groupnorm_grad_chan_at(bc, C, G, rstd, la, lb, sdy_c, sdyx_c);
}
__global__ static void gn_grad_group_k(size_t n, int C, int G, const float *gamma,
                                       const double *sdy_c, const double *sdyx_c, double *sum_gd,
                                       double *sum_gdx)
{
    GRID_STRIDE(bg, n) groupnorm_grad_group_at(bg, C, G, gamma, sdy_c, sdyx_c, sum_gd, sum_gdx);
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
                                      int relu, float *y, float *mean, float *rstd, float *lanes,
                                      void *stream)
{
    const cudaStream_t s = (cudaStream_t)stream;
    const size_t nbg = (size_t)B * G, nl = (size_t)B * C * 8, n = (size_t)B * C * HW;
    DT_LAUNCH(gn_lane_k, nl, s, C, HW, G, x, (const float *)NULL, 0, lanes);
    DT_LAUNCH(gn_mean_k, nbg, s, C, HW, G, lanes, mean);
    DT_LAUNCH(gn_lane_k, nl, s, C, HW, G, x, mean, 1, lanes);
    DT_LAUNCH(gn_rstd_k, nbg, s, C, HW, G, lanes, rstd);
    DT_LAUNCH(gn_affine_k, n, s, C, HW, G, x, gamma, beta, mean, rstd, skip, relu, y);
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
    float *la = (float *)(work + 2 * nbc + 2 * nbg), *lb = la + 4 * nbc;
    DT_LAUNCH(gn_grad_lane_k, 4 * nbc, s, C, HW, G, x, mean, y, dy, la, lb);
    DT_LAUNCH(gn_grad_chan_k, nbc, s, C, G, rstd, la, lb, sdy_c, sdyx_c);
    DT_LAUNCH(gn_grad_group_k, nbg, s, C, G, gamma, sdy_c, sdyx_c, sum_gd, sum_gdx);
    if (dgamma || dbeta)
        DT_LAUNCH(gn_param_grad_k, (size_t)C, s, B, C, sdy_c, sdyx_c, dgamma, dbeta);
    if (dx || dskip)
        DT_LAUNCH(gn_dx_k, n, s, C, HW, G, x, gamma, mean, rstd, y, dy, sum_gd, sum_gdx, dx,
                  dskip);
    return 0;
}
