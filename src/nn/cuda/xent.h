/* Per-row body of softmax cross-entropy (CPU: nn/xent.c): one sample's loss
 * (log-sum-exp after subtracting the row maximum, in double), whether its
 * argmax (ties to the lowest index) is the label, and its logit gradient
 * (softmax - onehot) / B. The mean over rows is the caller's: the host test
 * sums the rows in order, as the CPU does. A label outside [0, K) gives a NaN
 * loss and leaves dlogits unwritten (the CPU rejects the batch). */
#ifndef DT_NN_CUDA_XENT_H
#define DT_NN_CUDA_XENT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

/* row i of logits, dlogits (B, K); labels (B); loss, hit (B); dlogits may be NULL */
static inline DT_HD void softmax_xent_row_at(size_t i, int B, int K, const float *logits,
                                             const int32_t *labels, float *dlogits,
                                             double *loss, int32_t *hit)
{
    const int32_t lab = labels[i];
    if (lab < 0 || lab >= K) {
        loss[i] = NAN;
        hit[i] = 0;
        return;
    }
    const float *z = logits + i * (size_t)K;
    int arg = 0;
    for (int j = 1; j < K; j++)
        if (z[j] > z[arg])
            arg = j;
    const double zmax = z[arg];
    double se = 0.0;
    for (int j = 0; j < K; j++)
        se += exp((double)z[j] - zmax);
    const double lse = zmax + log(se);
    loss[i] = lse - (double)z[lab];
    hit[i] = arg == lab;
    if (dlogits) {
        float *d = dlogits + i * (size_t)K;
        const double inv = 1.0 / (double)B;
        for (int j = 0; j < K; j++)
            d[j] = (float)((exp((double)z[j] - lse) - (j == lab)) * inv);
    }
}

#endif
