/* AdamW's step and the global-norm clipping on the flat vector, per
 * element: the bodies of the CUDA kernels (nn/cuda/adamw.cu), also compiled
 * for the host, where optim/adamw.c's scalar tail and tests/test_cuda_host.c
 * run them. The equations and PyTorch's rounding of the scalars: optim/adamw.h. */
#ifndef DT_NN_CUDA_ADAMW_H
#define DT_NN_CUDA_ADAMW_H

#include <math.h>
#include <stddef.h>

#include "core/hd.h"

/* One parameter tensor of the flat vector: elements [offset, offset + count),
 * weight-decayed when decay is non-zero (GPT-2's rule: tensors of two or more
 * dimensions, not biases or LayerNorm gains). */
typedef struct dt_adamw_seg {
    size_t offset, count;
    int decay;
} dt_adamw_seg;

/* The float scalars of one step, rounded from double as PyTorch rounds its
 * Python-float scalars when they meet a float32 tensor (adamw_scalars). */
typedef struct dt_adamw_k {
    float b1, c1;  /* beta1, 1 - beta1 */
    float b2, c2;  /* beta2, 1 - beta2 */
    float bc2s;    /* sqrt(1 - beta2^step) */
    float eps;
    float nss;     /* -lr / (1 - beta1^step) */
    float shrink;  /* 1 - lr wd */
} dt_adamw_k;

/* Element i, PyTorch's order with the two multiply-adds fused (its AVX2 and
 * AVX-512 kernels; the device's fmaf). The other operations are a multiply,
 * a division and a square root each, correctly rounded on the device too
 * (nvcc's defaults: no fast math; the decay's product, which an add reads,
 * kept from FMA contraction by DT_FMUL), so the bits are the CPU's fused
 * kernels'. x, g, m, v: (n). */
static inline DT_HD void adamw_fused_at(size_t i, dt_adamw_k k, int decay, float *x,
                                        const float *g, float *m, float *v)
{
    const float gi = g[i];
    float xi = x[i];
    if (decay)
        xi = DT_FMUL(xi, k.shrink); /* rounded before the add below, as on the CPU */
    const float mi = fmaf(k.c1, gi, m[i] * k.b1);
    const float vi = fmaf(k.c2 * gi, gi, v[i] * k.b2);
    m[i] = mi;
    v[i] = vi;
    x[i] = xi + k.nss * mi / (sqrtf(vi) / k.bc2s + k.eps);
}

/* Whether element i decays: segs (nseg >= 1) sorted and contiguous from 0 */
static inline DT_HD int adamw_decay_at(size_t i, const dt_adamw_seg *segs, int nseg)
{
    int lo = 0, hi = nseg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (segs[mid].offset <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return segs[lo].decay != 0;
}

/* The sum of squares of g (n) in a fixed order that does not depend on the
 * device: lane t of DT_CLIP_LANES sums g[j]^2 for j = t mod LANES ascending,
 * in double; group u of DT_CLIP_GROUPS sums lanes u, u + GROUPS, ...; the
 * groups are summed in order (clip_factor). Not the CPU's order
 * (clip_sumsq's four partial sums): the norms differ by a few ulps of a
 * double, the float factor that scales g almost never. */
#define DT_CLIP_LANES 65536
#define DT_CLIP_GROUPS 256
static inline DT_HD double clip_lane_at(size_t t, size_t n, const float *g)
{
    double acc = 0.0;
    for (size_t j = t; j < n; j += DT_CLIP_LANES)
        acc += DT_DMUL((double)g[j], (double)g[j]);
    return acc;
}
static inline DT_HD double clip_group_at(int u, const double *lanes)
{
    double acc = 0.0;
    for (int t = u; t < DT_CLIP_LANES; t += DT_CLIP_GROUPS)
        acc += lanes[t];
    return acc;
}
/* The factor g is multiplied by, from the groups (GROUPS): clip_scale's
 * max_norm / (norm + 1e-6) rounded to float where it is below 1, else 1
 * (g * 1 is g: clip_scale's skip); max_norm > 0 */
static inline DT_HD float clip_factor(const double *groups, double max_norm)
{
    double s = 0.0;
    for (int u = 0; u < DT_CLIP_GROUPS; u++)
        s += groups[u];
    const double coef = max_norm / (sqrt(s) + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}
static inline DT_HD void clip_apply_at(size_t i, const float *factor, float *g)
{
    g[i] *= factor[0];
}

#endif
