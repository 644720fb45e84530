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
