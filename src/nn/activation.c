/* Element-wise activations. Backward kernels take the forward OUTPUT y, which
 * is all ReLU and sigmoid need, so the engine can drop the input. */
#include "nn/kernels_cpu.h"

#include <math.h>

void cpu_relu_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void cpu_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    if (!dx)
        return;
    for (size_t i = 0; i < n; i++)
        dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}

void cpu_sigmoid_forward(size_t n, const float *x, float *y)
{
    // exp of a non-positive argument only, so large |x| neither overflows nor gives NaN
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        if (v >= 0.0f) {
            y[i] = 1.0f / (1.0f + expf(-v));
        } else {
            const float e = expf(v);
            y[i] = e / (1.0f + e);
        }
    }
}

void cpu_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx)
{
    if (!dx)
        return;
    for (size_t i = 0; i < n; i++)
        dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}
