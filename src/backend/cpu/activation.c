/* Element-wise activations. Backward kernels take the forward OUTPUT y, which
 * is all ReLU and sigmoid need, so the engine can drop the input.
 *
 * The ReLU loops work in blocks of four with every load before any store: at
 * the default -O2 GCC then emits packed compare-and-mask code (SLP), while the
 * plain loop compiled to a data-dependent branch that mispredicts on half the
 * activations (6.1 against 0.35 ms for the 1.2 M values of mnist_cnn's conv2). */
#include "backend/cpu/kernels.h"

#include "core/simd.h"
#include "core/bf16_round.h"
#include "nn/cuda/activation.h"

#include <math.h>
#include <string.h>

/* NaN < 0 is false, so a NaN passes through as in PyTorch instead of being hidden. */
static inline float relu1(float v) { return v < 0.0f ? 0.0f : v; }

DT_KERNEL_BODY void relu_forward_range_body(size_t n, const float *x, float *y)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float a0 = x[i], a1 = x[i + 1], a2 = x[i + 2], a3 = x[i + 3];
        y[i] = relu1(a0);
        y[i + 1] = relu1(a1);
        y[i + 2] = relu1(a2);
        y[i + 3] = relu1(a3);
    }
    for (; i < n; i++)
        y[i] = relu1(x[i]);
}
DT_KERNEL_VARIANTS(relu_forward_range, (size_t n, const float *x, float *y), (n, x, y));

DT_KERNEL_BODY void relu_backward_range_body(size_t n, const float *y, const float *dy, float *dx)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float y0 = y[i], y1 = y[i + 1], y2 = y[i + 2], y3 = y[i + 3];
        const float g0 = dy[i], g1 = dy[i + 1], g2 = dy[i + 2], g3 = dy[i + 3];
        const float d0 = dx[i], d1 = dx[i + 1], d2 = dx[i + 2], d3 = dx[i + 3];
        dx[i] = d0 + (y0 > 0.0f ? g0 : 0.0f);
        dx[i + 1] = d1 + (y1 > 0.0f ? g1 : 0.0f);
        dx[i + 2] = d2 + (y2 > 0.0f ? g2 : 0.0f);
        dx[i + 3] = d3 + (y3 > 0.0f ? g3 : 0.0f);
    }
    for (; i < n; i++)
        dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
}
DT_KERNEL_VARIANTS(relu_backward_range, (size_t n, const float *y, const float *dy, float *dx), (n, y, dy, dx));

DT_KERNEL_BODY void relu_inplace_range_body(size_t n, const float *y, float *d)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float y0 = y[i], y1 = y[i + 1], y2 = y[i + 2], y3 = y[i + 3];
        const float g0 = d[i], g1 = d[i + 1], g2 = d[i + 2], g3 = d[i + 3];
        d[i] = y0 > 0.0f ? g0 : 0.0f;
        d[i + 1] = y1 > 0.0f ? g1 : 0.0f;
        d[i + 2] = y2 > 0.0f ? g2 : 0.0f;
        d[i + 3] = y3 > 0.0f ? g3 : 0.0f;
    }
    for (; i < n; i++)
        relu_backward_inplace_at(i, y, d);
}
DT_KERNEL_VARIANTS(relu_inplace_range, (size_t n, const float *y, float *d), (n, y, d));

void cpu_relu_forward(size_t n, const float *x, float *y)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(relu_forward_range)(len, x + i0, y + i0));
}

void cpu_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    if (dx)
        DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(relu_backward_range)(len, y + i0, dy + i0, dx + i0));
}

void cpu_relu_backward_inplace(size_t n, const float *y, float *d)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(relu_inplace_range)(len, y + i0, d + i0));
}

/* The ReLU backward on the output kept in bf16 (backend.h: relu_backward_bf16):
 * the same comparison on the widened value, NaN included. */
static inline float widen(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* in blocks of four, every load before any store, as the float loops above */
DT_KERNEL_BODY void relu_backward16_range_body(size_t n, const uint16_t *y, const float *dy,
                                            float *dx)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float y0 = widen(y[i]), y1 = widen(y[i + 1]), y2 = widen(y[i + 2]),
                    y3 = widen(y[i + 3]);
        const float g0 = dy[i], g1 = dy[i + 1], g2 = dy[i + 2], g3 = dy[i + 3];
        const float d0 = dx[i], d1 = dx[i + 1], d2 = dx[i + 2], d3 = dx[i + 3];
        dx[i] = d0 + (y0 > 0.0f ? g0 : 0.0f);
        dx[i + 1] = d1 + (y1 > 0.0f ? g1 : 0.0f);
        dx[i + 2] = d2 + (y2 > 0.0f ? g2 : 0.0f);
        dx[i + 3] = d3 + (y3 > 0.0f ? g3 : 0.0f);
    }
    for (; i < n; i++)
        dx[i] += widen(y[i]) > 0.0f ? dy[i] : 0.0f;
}
DT_KERNEL_VARIANTS(relu_backward16_range, (size_t n, const uint16_t *y, const float *dy, float *dx), (n, y, dy, dx));

DT_KERNEL_BODY void relu_inplace16_range_body(size_t n, const uint16_t *y, float *d)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float y0 = widen(y[i]), y1 = widen(y[i + 1]), y2 = widen(y[i + 2]),
                    y3 = widen(y[i + 3]);
        const float g0 = d[i], g1 = d[i + 1], g2 = d[i + 2], g3 = d[i + 3];
        d[i] = y0 > 0.0f ? g0 : 0.0f;
        d[i + 1] = y1 > 0.0f ? g1 : 0.0f;
        d[i + 2] = y2 > 0.0f ? g2 : 0.0f;
        d[i + 3] = y3 > 0.0f ? g3 : 0.0f;
    }
    for (; i < n; i++)
        d[i] = widen(y[i]) > 0.0f ? d[i] : 0.0f;
}
DT_KERNEL_VARIANTS(relu_inplace16_range, (size_t n, const uint16_t *y, float *d), (n, y, d));

/* AVX-512 with its 16-bit lanes (x86-64-v4) where the CPU has it, as
 * backend/cpu/gemm_bf16.c's conversion: the rounding's integer steps vectorize there */
DT_KERNEL_BODY void relu_forward16_range_body(size_t n, const float *x, float *y, uint16_t *y16)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float v = relu1(x[i]);
        y[i] = v;
        y16[i] = bf16_round(v);
    }
}
DT_KERNEL_VARIANTS(relu_forward16_range, (size_t n, const float *x, float *y, uint16_t *y16), (n, x, y, y16));

void cpu_relu_forward_bf16(size_t n, const float *x, float *y, uint16_t *y16)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(relu_forward16_range)(len, x + i0, y + i0, y16 + i0));
}

void cpu_relu_backward_bf16(size_t n, const uint16_t *y, const float *dy, float *dx)
{
    if (dx)
        DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(relu_backward16_range)(len, y + i0, dy + i0, dx + i0));
}

void cpu_relu_backward_inplace_bf16(size_t n, const uint16_t *y, float *d)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(relu_inplace16_range)(len, y + i0, d + i0));
}

/* Sigmoid: the per-element bodies the CUDA kernels run (nn/cuda/activation.h). */
void cpu_sigmoid_forward(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        sigmoid_forward_at(i, x, y);
}

void cpu_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx)
{
    if (!dx)
        return;
    for (size_t i = 0; i < n; i++)
        sigmoid_backward_at(i, y, dy, dx);
}
