/* Vectors for the layer tests: normal(0, scale) from a test's stream, or a
 * constant, or a copy; dt_calloc'd with at least one element (n may be 0). */
#ifndef DT_TESTVEC_H
#define DT_TESTVEC_H

#include <stddef.h>

#include "core/error.h"
#include "core/rng.h"

static inline float *vec_rand(dt_rng *rng, size_t n, double scale)
{
    float *v = dt_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(scale * rng_normal(rng));
    return v;
}

static inline float *vec_const(size_t n, float a)
{
    float *v = dt_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = a;
    return v;
}

static inline float *vec_copy(const float *a, size_t n)
{
    float *v = dt_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = a[i];
    return v;
}

#endif
