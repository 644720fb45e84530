/* AdamW's step and the global-norm clipping on the device's flat vectors;
 * the work in nn/cuda/adamw.h. */
#include "nn/cuda/adamw.h"

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

__global__ static void adamw_k(size_t n, dt_adamw_k k, const dt_adamw_seg *segs, int nseg, float *x,
                               const float *g, float *m, float *v)
{
    GRID_STRIDE(i, n) adamw_fused_at(i, k, adamw_decay_at(i, segs, nseg), x, g, m, v);
}

__global__ static void clip_lanes_k(size_t lanes_n, size_t n, const float *g, double *lanes)
{
    GRID_STRIDE(t, lanes_n) lanes[t] = clip_lane_at(t, n, g);
}

/* one block of DT_CLIP_GROUPS threads */
__global__ static void clip_factor_k(double max_norm, const double *lanes, float *factor)
{
    __shared__ double groups[DT_CLIP_GROUPS];
    groups[threadIdx.x] = clip_group_at((int)threadIdx.x, lanes);
    __syncthreads();
    if (threadIdx.x == 0)
        factor[0] = clip_factor(groups, max_norm);
}

__global__ static void clip_apply_k(size_t n, const float *factor, float *g)
{
    GRID_STRIDE(i, n) clip_apply_at(i, factor, g);
}

extern "C" int cuda_adamw_step(size_t n, dt_adamw_k k, const dt_adamw_seg *segs, int nseg, float *x,
                               const float *g, float *m, float *v, void *stream)
{
    DT_LAUNCH(adamw_k, n, stream, k, segs, nseg, x, g, m, v);
    return 0;
}

extern "C" int cuda_clip(size_t n, double max_norm, float *g, double *lanes, float *factor,
                         void *stream)
{
    const size_t nl = DT_CLIP_LANES;
    DT_LAUNCH(clip_lanes_k, nl, stream, n, g, lanes);
    clip_factor_k<<<1, DT_CLIP_GROUPS, 0, (cudaStream_t)stream>>>(max_norm, lanes, factor);
    CUDA_CHECK(cudaGetLastError());
    DT_LAUNCH(clip_apply_k, n, stream, factor, g);
    return 0;
}
