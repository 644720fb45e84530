/* Per-element bodies of max and global average pooling in the plain (NCHW)
 * layout (CPU: backend/cpu/pool.c). Max pool: the first maximum in row-major window
 * order wins (strict >), a window holding a NaN outputs NaN; backward gathers
 * per input element over the windows that contain it, in the outputs' raster
 * order, so overlapping windows (stride < k) need no atomics and sum in the
 * CPU's order. */
#ifndef DT_NN_CUDA_POOL_H
#define DT_NN_CUDA_POOL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

/* o over B*C*P*Q; x (B, C, H, W) -> y, arg (B, C, P, Q); arg is the winner's
 * index h * W + w in its plane */
static inline DT_HD void maxpool_forward_at(size_t o, int H, int W, int P, int Q, int k, int st,
                                            const float *x, float *y, int32_t *arg)
{
    const size_t pq = (size_t)P * Q, pl = o / pq;
    const int p = (int)(o % pq) / Q, q = (int)(o % pq) % Q;
    const float *xp = x + pl * (size_t)H * W;
    const int h0 = p * st, w0 = q * st;
    int best = h0 * W + w0;
    float m = xp[best];
    int nan = 0;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
            const int at = (h0 + i) * W + w0 + j;
            const float v = xp[at];
            nan |= isnan(v);
            if (v > m) {
                m = v;
                best = at;
            }
        }
    y[o] = nan ? NAN : m;
    arg[o] = best;
}

/* e over B*C*H*W; dx (B, C, H, W) += dy (B, C, P, Q) routed by arg */
static inline DT_HD void maxpool_backward_at(size_t e, int H, int W, int P, int Q, int k, int st,
                                             const float *dy, const int32_t *arg, float *dx)
{
    const size_t hw = (size_t)H * W, pl = e / hw;
    const int at = (int)(e % hw), h = at / W, w = at % W;
    // windows p with p * st <= h < p * st + k
    const int p0 = h >= k ? (h - k) / st + 1 : 0, p1 = h / st < P - 1 ? h / st : P - 1;
    const int q0 = w >= k ? (w - k) / st + 1 : 0, q1 = w / st < Q - 1 ? w / st : Q - 1;
    const float *dyp = dy + pl * (size_t)P * Q;
    const int32_t *ap = arg + pl * (size_t)P * Q;
    float d = dx[e];
    for (int p = p0; p <= p1; p++)
        for (int q = q0; q <= q1; q++)
            if (ap[p * Q + q] == at)
                d += dyp[p * Q + q];
    dx[e] = d;
}

/* pl over B*C; x (B, C, HW) -> y (B, C) */
static inline DT_HD void avgpool_forward_at(size_t pl, int HW, const float *x, float *y)
{
    const float *xp = x + pl * (size_t)HW;
    double acc = 0.0;
    for (int j = 0; j < HW; j++)
        acc += xp[j];
    y[pl] = HW > 0 ? (float)(acc / HW) : 0.0f;
}

/* e over B*C*HW; dx (B, C, HW) += dy (B, C) / HW */
static inline DT_HD void avgpool_backward_at(size_t e, int HW, const float *dy, float *dx)
{
    dx[e] += dy[e / (size_t)HW] * (1.0f / (float)HW);
}

#endif
