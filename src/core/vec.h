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

void vec_zero(float *x, size_t n);                                 /* x = 0 */
void vec_copy(float *dst, const float *src, size_t n);             /* dst = src */
void vec_scale(float *x, float a, size_t n);                       /* x *= a */
void vec_scale_copy(float *x, float *y, float a, size_t n);        /* x = y = x * a */
void vec_div(float *z, const float *x, float w, size_t n);         /* z = x / w */
void vec_mul(float *y, const float *x, size_t n);                  /* y *= x */
void vec_add(float *y, const float *x, size_t n);                  /* y += x */
void vec_sub(float *y, const float *x, size_t n);                  /* y -= x */
void vec_axpy(float *y, float a, const float *x, size_t n);        /* y += a * x */
void vec_sub_axpy(float *y, float a, const float *x, size_t n);    /* y -= a * x */
void vec_axpby(float *y, float a, float b, const float *x, size_t n); /* y = a * y + b * x */
void vec_ax_plus(float *y, float a, const float *x, size_t n);     /* y = a * y + x */
/* y = a * (x - z), the elastic pull of EASGD */
void vec_scaled_diff(float *y, float a, const float *x, const float *z, size_t n);
/* y += b * (x * a - y), the centre's move toward the mean of EASGD */
void vec_relax(float *y, float b, const float *x, float a, size_t n);

#endif
