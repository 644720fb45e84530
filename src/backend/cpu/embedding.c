/* Token + position embedding of a GPT, with the dropout nanoGPT applies to
 * their sum. */
#include "nn/transformer.h"

#include <string.h>

void embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                       const float *wpe, float p, uint64_t key, float *x)
{
    #pragma omp parallel for schedule(static) if ((size_t)B * T * C > 65536)
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)tok[bt] * C, *q = wpe + (size_t)(bt % T) * C;
        float *o = x + (size_t)bt * C;
        if (p > 0.0f)
            for (int i = 0; i < C; i++)
                o[i] = (e[i] + q[i]) * dropout_factor(key, (uint64_t)bt * C + i, p);
        else
            for (int i = 0; i < C; i++)
                o[i] = e[i] + q[i];
    }
}

void embedding_backward(int B, int T, int C, const int32_t *tok, const float *dx, float p,
                        uint64_t key, float *dwte, float *dwpe)
{
    memset(dwpe, 0, (size_t)T * C * sizeof *dwpe);
    /* serial: two positions may hold the same token, so rows of dwte collide */
    for (int bt = 0; bt < B * T; bt++) {
        const float *g = dx + (size_t)bt * C;
        float *e = dwte + (size_t)tok[bt] * C, *q = dwpe + (size_t)(bt % T) * C;
        if (p > 0.0f)
            for (int i = 0; i < C; i++) {
                const float d = g[i] * dropout_factor(key, (uint64_t)bt * C + i, p);
                e[i] += d;
                q[i] += d;
            }
        else
            for (int i = 0; i < C; i++) {
                e[i] += g[i];
                q[i] += g[i];
            }
    }
}
