/* Flat-vector operations (src/core/vec.h). */
#include "core/vec.h"

#include <string.h>

/* The simulator: the vectors' contents are meaningless, so none of this
 * arithmetic is done (VEC_SKIP_IN_SIM). Without it a rank-step of a 25.6
 * M-parameter vector costs the host several passes over 100 MB per
 * simulated rank, which is what kept 64 simulated ranks from finishing in
 * minutes. */
#define SKIP_IN_SIM VEC_SKIP_IN_SIM

void vec_zero(float *x, size_t n)
{
    SKIP_IN_SIM;
    memset(x, 0, n * sizeof *x);
}

void vec_copy(float *restrict dst, const float *restrict src, size_t n)
{
    SKIP_IN_SIM;
    memcpy(dst, src, n * sizeof *dst);
}

void vec_scale(float *restrict x, float a, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

void vec_scale_copy(float *restrict x, float *restrict y, float a, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        x[i] = y[i] = x[i] * a;
}

void vec_div(float *restrict z, const float *restrict x, float w, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        z[i] = x[i] / w;
}

void vec_mul(float *restrict y, const float *restrict x, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        y[i] *= x[i];
}

void vec_add(float *restrict y, const float *restrict x, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

void vec_axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

void vec_sub_axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        y[i] -= a * x[i];
}

void vec_ax_plus(float *restrict y, float a, const float *restrict x, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        y[i] = a * y[i] + x[i];
}

void vec_mix(float *restrict y, float a, const float *restrict x, size_t n)
{
    SKIP_IN_SIM;
    for (size_t i = 0; i < n; i++)
        y[i] = (1.0f - a) * x[i] + a * y[i];
}
