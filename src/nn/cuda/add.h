/* Per-element bodies of the residual add (CPU: backend/cpu/add.c); y may alias a. */
#ifndef DT_NN_CUDA_ADD_H
#define DT_NN_CUDA_ADD_H

#include <stddef.h>

#include "core/hd.h"

/* a, b, y: (n) */
static inline DT_HD void add_forward_at(size_t i, const float *a, const float *b, float *y)
{
    y[i] = a[i] + b[i];
}

/* d += dy at i; called for da and for db, each when it is not NULL */
static inline DT_HD void add_backward_at(size_t i, const float *dy, float *d)
{
    d[i] += dy[i];
}

#endif
