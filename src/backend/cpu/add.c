/* Element-wise sum, the join of a residual block's two paths. The loops take
 * blocks of four with all loads before the stores, so that -O2 emits packed
 * SSE even though the arrays may alias (y == a is a valid call). */
#include "backend/cpu/kernels.h"

#include "core/simd.h"

DT_KERNEL_BODY void add_range_body(size_t n, const float *a, const float *b, float *y)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float a0 = a[i], a1 = a[i + 1], a2 = a[i + 2], a3 = a[i + 3];
        const float b0 = b[i], b1 = b[i + 1], b2 = b[i + 2], b3 = b[i + 3];
        y[i] = a0 + b0;
        y[i + 1] = a1 + b1;
        y[i + 2] = a2 + b2;
        y[i + 3] = a3 + b3;
    }
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}
DT_KERNEL_VARIANTS(add_range, (size_t n, const float *a, const float *b, float *y), (n, a, b, y));

/* d += dy over n floats */
DT_KERNEL_BODY void add_into_body(size_t n, const float *dy, float *d)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float g0 = dy[i], g1 = dy[i + 1], g2 = dy[i + 2], g3 = dy[i + 3];
        const float d0 = d[i], d1 = d[i + 1], d2 = d[i + 2], d3 = d[i + 3];
        d[i] = d0 + g0;
        d[i + 1] = d1 + g1;
        d[i + 2] = d2 + g2;
        d[i + 3] = d3 + g3;
    }
    for (; i < n; i++)
        d[i] += dy[i];
}
DT_KERNEL_VARIANTS(add_into, (size_t n, const float *dy, float *d), (n, dy, d));

void cpu_add_forward(size_t n, const float *a, const float *b, float *y)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(add_range)(len, a + i0, b + i0, y + i0));
}

void cpu_add_backward(size_t n, const float *dy, float *da, float *db)
{
    if (da)
        DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(add_into)(len, dy + i0, da + i0));
    if (db)
        DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(add_into)(len, dy + i0, db + i0));
}
