/* Softmax cross-entropy, the loss of every classifier here. The log-softmax
 * subtracts the row maximum first, so logits of any size give a finite loss. */
#include "nn/kernels_cpu.h"

#include "core/error.h"

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
        const float *z = logits + (size_t)i * K;
        int arg = 0;
        for (int j = 1; j < K; j++)
            if (z[j] > z[arg]) // strict: ties go to the lowest index
                arg = j;
        const double zmax = z[arg];
        double se = 0.0;
        for (int j = 0; j < K; j++)
            se += exp((double)z[j] - zmax);
        const double lse = zmax + log(se);
        total += lse - (double)z[labels[i]];
        hits += arg == labels[i];
        if (dlogits) {
            float *d = dlogits + (size_t)i * K;
            const double inv = 1.0 / (double)B;
            for (int j = 0; j < K; j++)
                d[j] = (float)((exp((double)z[j] - lse) - (j == labels[i])) * inv);
        }
    }
    if (correct)
        *correct = hits;
    return B > 0 ? total / B : 0.0;
}
