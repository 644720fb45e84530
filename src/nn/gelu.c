/* GELU, tanh approximation (GPT-2's; PyTorch's approximate='tanh'). */
#include "nn/transformer.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

void gelu_forward(size_t n, const float *x, float *y)
{
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_A * v * v * v)));
    }
}

void gelu_backward(size_t n, const float *x, const float *dy, float *dx)
{
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        const float v = x[i], u = GELU_K * (v + GELU_A * v * v * v), t = tanhf(u);
        // d/dv [v/2 (1 + t)] = (1 + t)/2 + v/2 (1 - t^2) K (1 + 3 A v^2)
        const float d = 0.5f * (1.0f + t) +
                        0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = dy[i] * d;
    }
}
