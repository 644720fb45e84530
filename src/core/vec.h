/* Element-wise operations on flat vectors (n floats each), the arithmetic of
 * the algorithms' steps: one call per loop over the model, so that the
 * simulator can leave it out.
 *
 * Each function computes exactly the expression in its comment, element by
 * element and in the same order as the loop it replaced, so results are bit
 * for bit those of the open-coded loops. Vectors may not overlap unless the
 * comment says so.
 *
 * In the simulator (DTRAIN_SIM) the flat vectors hold no model (they are
 * SMPI_SHARED_MALLOC'd and shared by every simulated rank) and every
 * function returns without touching them: their cost on a real node is not
 * part of the simulated time (see src/sim/sim.h). */
#ifndef DT_CORE_VEC_H
#define DT_CORE_VEC_H

#include <stddef.h>

/* The first statement of a function whose only work is arithmetic on flat
 * vectors (here, the CPU backend's flat_* ops, the SGD step): returns at
 * once in the simulator, does nothing elsewhere. */
#ifdef DTRAIN_SIM
#define VEC_SKIP_IN_SIM return
#else
#define VEC_SKIP_IN_SIM
#endif

void vec_zero(float *x, size_t n);                                 /* x = 0 */
void vec_copy(float *dst, const float *src, size_t n);             /* dst = src */
void vec_scale(float *x, float a, size_t n);                       /* x *= a */
void vec_scale_copy(float *x, float *y, float a, size_t n);        /* x = y = x * a */
void vec_div(float *z, const float *x, float w, size_t n);         /* z = x / w */
void vec_mul(float *y, const float *x, size_t n);                  /* y *= x */
void vec_add(float *y, const float *x, size_t n);                  /* y += x */
void vec_axpy(float *y, float a, const float *x, size_t n);        /* y += a * x */
void vec_sub_axpy(float *y, float a, const float *x, size_t n);    /* y -= a * x */
void vec_ax_plus(float *y, float a, const float *x, size_t n);     /* y = a * y + x */
void vec_mix(float *y, float a, const float *x, size_t n);         /* y = (1 - a) * x + a * y */

#endif
