/* Softmax cross-entropy, the loss of every classifier here. The log-softmax
 * subtracts the row maximum first, so logits of any size give a finite loss;
 * the per-row arithmetic is the one the CUDA kernel runs (nn/cuda/xent.h). */
#include "backend/cpu/kernels.h"

#include "core/error.h"
#include "nn/cuda/xent.h" // the row's arithmetic, shared with the CUDA kernel

#include <math.h>

double cpu_softmax_xent(int B, int K, const float *logits, const int32_t *labels,
                        float *dlogits, int *correct)
{
    // a bad label would index outside the row; reject before writing anything
    for (int i = 0; i < B; i++) {
        if (labels[i] < 0 || labels[i] >= K) {
            dt_err_set("xent: label %d of sample %d is outside [0, %d)", (int)labels[i], i, K);
            if (correct)
                *correct = 0;
            return NAN;
        }
    }
    double total = 0.0;
    int hits = 0;
    for (int i = 0; i < B; i++) {
        int32_t hit;
        total += softmax_xent_row(B, K, logits + (size_t)i * K, labels[i],
                                  dlogits ? dlogits + (size_t)i * K : NULL, &hit);
        hits += hit;
    }
    if (correct)
        *correct = hits;
    return B > 0 ? total / B : 0.0;
}

void cpu_softmax_xent_rows(int B, int K, const float *logits, const int32_t *labels,
                           float *dlogits, void *rows)
{
    double *loss = rows;
    int32_t *hit = (int32_t *)(loss + B);
    for (int i = 0; i < B; i++) // a bad label: that row's loss NaN, nothing read
        softmax_xent_row_at((size_t)i, B, K, logits, labels, dlogits, loss, hit);
}

double cpu_softmax_xent_sum(int B, int K, const void *rows, int *correct)
{
    const double *loss = rows;
    int64_t hits;
    int bad;
    const double mean = softmax_xent_mean(B, loss, (const int32_t *)(loss + B), &hits, &bad);
    if (bad >= 0)
        dt_err_set("xent: the label of sample %d is outside [0, %d)", bad, K);
    if (correct)
        *correct = (int)hits;
    return mean;
}
