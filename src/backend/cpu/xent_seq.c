/* Softmax cross-entropy at every position of a sequence batch. The forward
 * keeps only each row's log-sum-exp; the backward turns the logits into their
 * gradient in place, so no second (N, V) buffer exists. exp is backend/cpu/fast_exp.h's,
 * sixteen lanes at a time (two halves of eight in the narrow variants); each
 * row's sum and the loss add up in double. */
#include "nn/transformer.h"

#include <math.h>

#include "core/simd.h"
#include "backend/cpu/fast_exp.h"

/* Row n: its log-sum-exp and argmax. */
DT_KERNEL_BODY void xent_row_body(int narrow, int V, const float *z, float *lse, int *arg)
{
    float mx = z[0];
    int a = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > mx) {
            mx = z[v];
            a = v;
        }
    const int V16 = V & ~15;
    double s = 0;
    if (narrow) {
        vf8 lo = (vf8){ 0 }, hi = (vf8){ 0 };
        for (int v = 0; v < V16; v += 16) {
            vf8 e0, e1;
            VF8_EXP(e0, vf8_ld(z + v) - mx);
            VF8_EXP(e1, vf8_ld(z + v + 8) - mx);
            lo += e0;
            hi += e1;
        }
        for (int k = 0; k < 8; k++)
            s += lo[k];
        for (int k = 0; k < 8; k++)
            s += hi[k];
    } else {
        v16f acc = v16_splat(0);
        for (int v = 0; v < V16; v += 16) {
            v16f e;
            V16_EXP(e, v16_ld(z + v) - mx);
            acc += e;
        }
        for (int k = 0; k < 16; k++)
            s += acc[k];
    }
    for (int v = V16; v < V; v++)
        s += fast_expf(z[v] - mx);
    *lse = (float)((double)mx + log(s));
    *arg = a;
}
DT_KERNEL_VARIANTS_NARROW(xent_row, (int V, const float *z, float *lse, int *arg), (V, z, lse, arg));

double xent_seq_forward(int N, int V, const float *logits, const int32_t *targets, float *lse,
                        int64_t *correct)
{
    double loss = 0;
    int64_t hits = 0;
    #pragma omp parallel for schedule(static) reduction(+ : loss, hits) if ((size_t)N * V > 65536)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        int arg;
        DT_KERNEL(xent_row)(V, z, lse + n, &arg);
        loss += (double)lse[n] - (double)z[targets[n]];
        hits += arg == targets[n];
    }
    if (correct)
        *correct = hits;
    return loss;
}

void xent_seq_rows(int N, int V, const float *logits, const int32_t *targets, float *lse,
                   void *rows)
{
    double *loss = rows;
    int32_t *hit = (int32_t *)(loss + N);
    #pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        const int32_t t = targets[n];
        int arg;
        DT_KERNEL(xent_row)(V, z, lse + n, &arg);
        loss[n] = t >= 0 && t < V ? (double)lse[n] - (double)z[t] : NAN;
        hit[n] = t >= 0 && t < V && arg == t;
    }
}

DT_KERNEL_BODY void xent_grad_row_body(int narrow, int V, const float *z, float m, float scale,
                                       float *g)
{
    int v = 0;
    for (; narrow && v + 8 <= V; v += 8) {
        vf8 e;
        VF8_EXP(e, vf8_ld(z + v) - m);
        vf8_st(g + v, scale * e);
    }
    for (; !narrow && v + 16 <= V; v += 16) {
        v16f e;
        V16_EXP(e, v16_ld(z + v) - m);
        v16_st(g + v, scale * e);
    }
    for (; v < V; v++)
        g[v] = scale * fast_expf(z[v] - m);
}
DT_KERNEL_VARIANTS_NARROW(xent_grad_row, (int V, const float *z, float m, float scale, float *g), (V, z, m, scale, g));

void xent_seq_backward(int N, int V, const float *logits, const float *lse,
                       const int32_t *targets, float scale, float *d)
{
    #pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
    for (int n = 0; n < N; n++) {
        float *g = d + (size_t)n * V;
        DT_KERNEL(xent_grad_row)(V, logits + (size_t)n * V, lse[n], scale, g);
        if (targets[n] >= 0 && targets[n] < V) /* else the loss row is NaN */
            g[targets[n]] -= scale;
    }
}
