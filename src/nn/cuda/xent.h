/* Per-row body of softmax cross-entropy (CPU: backend/cpu/xent.c): one sample's loss
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

/* One row z (K) with label lab in [0, K): returns its loss, sets *hit, and
 * writes d (K) = (softmax - onehot) / B unless d is NULL. */
static inline DT_HD double softmax_xent_row(int B, int K, const float *z, int32_t lab, float *d,
                                            int32_t *hit)
{
    int arg = 0;
    for (int j = 1; j < K; j++)
        if (z[j] > z[arg]) // strict: ties go to the lowest index
            arg = j;
    const double zmax = z[arg];
    double se = 0.0;
    for (int j = 0; j < K; j++)
        se += exp((double)z[j] - zmax);
    const double lse = zmax + log(se);
    *hit = arg == lab;
    if (d) {
        const double inv = 1.0 / (double)B;
        for (int j = 0; j < K; j++)
            d[j] = (float)((exp((double)z[j] - lse) - (j == lab)) * inv);
    }
    return lse - (double)z[lab];
}

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
    loss[i] = softmax_xent_row(B, K, logits + i * (size_t)K, lab,
                               dlogits ? dlogits + i * (size_t)K : NULL, &hit[i]);
}

/* Host side: the sum of n rows' losses (loss, hit as softmax_xent_row_at wrote
 * them, in host memory) in row order, their hits in *hits; in *bad the first
 * row whose label was outside [0, K) (its loss NaN: the sum is NaN, no hits),
 * else -1 */
static inline double softmax_xent_total(int n, const double *loss, const int32_t *hit,
                                        int64_t *hits, int *bad)
{
    double total = 0.0;
    *hits = 0;
    *bad = -1;
    for (int i = 0; i < n; i++) {
        if (isnan(loss[i])) {
            *bad = i;
            *hits = 0;
            return NAN;
        }
        total += loss[i];
        *hits += hit[i];
    }
    return total;
}

/* the mean of B rows: softmax_xent's loss */
static inline double softmax_xent_mean(int B, const double *loss, const int32_t *hit,
                                       int64_t *hits, int *bad)
{
    const double total = softmax_xent_total(B, loss, hit, hits, bad);
    return *bad >= 0 ? NAN : B > 0 ? total / B : 0.0;
}

#endif
