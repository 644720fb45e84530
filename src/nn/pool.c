/* Pooling: k x k max-pool with stride s and no padding (the winner's index in
 * its (H, W) plane is saved for backward), and global average pooling. */
#include "nn/kernels_cpu.h"

#include <math.h>

void cpu_maxpool_forward(const dt_pool_shape *s, const float *x, float *y, int32_t *arg)
{
    const int H = s->H, W = s->W, P = s->P, Q = s->Q, k = s->k, st = s->stride;
    const size_t planes = (size_t)s->B * s->C;
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * H * W;
        float *yp = y + pl * P * Q;
        int32_t *ap = arg + pl * P * Q;
        for (int p = 0; p < P; p++) {
            for (int q = 0; q < Q; q++) {
                const int h0 = p * st, w0 = q * st;
                int best = h0 * W + w0, nan = 0;
                float m = xp[best];
                // the first maximum in row-major window order wins; written as
                // selects (maxss, cmov) since branches mispredict on activations
                for (int i = 0; i < k; i++) {
                    const float *row = xp + (size_t)(h0 + i) * W + w0;
                    for (int j = 0; j < k; j++) {
                        const float v = row[j];
                        const int take = v > m;
                        best = take ? (h0 + i) * W + w0 + j : best;
                        m = take ? v : m;
                        nan |= v != v;
                    }
                }
                // a NaN propagates as in PyTorch
                if (nan)
                    m = NAN;
                yp[p * Q + q] = m;
                ap[p * Q + q] = best;
            }
        }
    }
}

void cpu_maxpool_backward(const dt_pool_shape *s, const float *dy, const int32_t *arg,
                          float *dx)
{
    if (!dx)
        return;
    const size_t planes = (size_t)s->B * s->C;
    const size_t hw = (size_t)s->H * s->W, pq = (size_t)s->P * s->Q;
    // overlapping windows (stride < k) can route several outputs to one input
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * hw;
        const float *dyp = dy + pl * pq;
        const int32_t *ap = arg + pl * pq;
        for (size_t j = 0; j < pq; j++)
            dxp[ap[j]] += dyp[j];
    }
}

void cpu_avgpool_forward(int B, int C, int HW, const float *x, float *y)
{
    const size_t planes = (size_t)B * C;
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * HW;
        double acc = 0.0;
        for (int j = 0; j < HW; j++)
            acc += xp[j];
        y[pl] = HW > 0 ? (float)(acc / HW) : 0.0f;
    }
}

void cpu_avgpool_backward(int B, int C, int HW, const float *dy, float *dx)
{
    if (!dx || HW <= 0)
        return;
    const size_t planes = (size_t)B * C;
    const float inv = 1.0f / (float)HW;
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * HW;
        const float g = dy[pl] * inv;
        for (int j = 0; j < HW; j++)
            dxp[j] += g;
    }
}
