/* The error bound the bf16 layer tests hold a product to: with operands
 * rounded to bf16 (unit roundoff u = 2^-8) and an fp32 sum of K terms,
 * |computed - exact| <= (2u + u^2 + gamma_K (1 + 2u + u^2)) sum |a||b|,
 * gamma_K = K 2^-24 / (1 - K 2^-24). */
#ifndef DT_BF16_BOUND_H
#define DT_BF16_BOUND_H

#define U (1.0 / 256.0) /* bf16's unit roundoff, 2^-8 */

static inline double gamma_k(double K) { return K * 0x1p-24 / (1.0 - K * 0x1p-24); }
static inline double bound_k(double K)
{
    return 2 * U + U * U + gamma_k(K) * (1 + 2 * U + U * U);
}

#endif
