/* Element-wise sum, the join of a residual block's two paths. */
#include "nn/kernels_cpu.h"

void cpu_add_forward(size_t n, const float *a, const float *b, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void cpu_add_backward(size_t n, const float *dy, float *da, float *db)
{
    if (da)
        for (size_t i = 0; i < n; i++)
            da[i] += dy[i];
    if (db)
        for (size_t i = 0; i < n; i++)
            db[i] += dy[i];
}
