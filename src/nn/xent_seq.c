/* Softmax cross-entropy at every position of a sequence batch. The forward
 * keeps only each row's log-sum-exp; the backward turns the logits into their
 * gradient in place, so no second (N, V) buffer exists. */
#include "nn/transformer.h"

#include <math.h>

double xent_seq_forward(int N, int V, const float *logits, const int32_t *targets, float *lse,
                        int64_t *correct)
{
    double loss = 0;
    int64_t hits = 0;
    #pragma omp parallel for schedule(static) reduction(+ : loss, hits) if ((size_t)N * V > 65536)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float mx = z[0];
        int arg = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > mx) {
                mx = z[v];
                arg = v;
            }
        double s = 0;
        for (int v = 0; v < V; v++)
            s += exp((double)(z[v] - mx));
        const double l = (double)mx + log(s);
        lse[n] = (float)l;
        loss += l - (double)z[targets[n]];
        hits += arg == targets[n];
    }
    if (correct)
        *correct = hits;
    return loss;
}

void xent_seq_backward(int N, int V, const float *logits, const float *lse,
                       const int32_t *targets, float scale, float *d)
{
    #pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *g = d + (size_t)n * V;
        const float m = lse[n];
        for (int v = 0; v < V; v++)
            g[v] = scale * expf(z[v] - m);
        g[targets[n]] -= scale;
    }
}
