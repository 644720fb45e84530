/* The constants of GELU's tanh form as dtrain computes it, through
 * (1 + tanh(u)) / 2 = 1 / (1 + 2^t): with k = sqrt(2 / pi), a = 0.044715,
 *   t = x (T1 + T3 x^2),  T1 = -2 k log2(e), T3 = a T1,
 *   2 u'(x) = D1 + D3 x^2, D1 = 2 k,          D3 = 6 a k,
 * each the float nearest the exact product. One definition for the CPU's
 * kernels (backend/cpu/gelu.c) and the CUDA bodies (nn/cuda/gpt.h), whose
 * bits must agree. */
#ifndef DT_CORE_GELU_CONSTS_H
#define DT_CORE_GELU_CONSTS_H

#define DT_GELU_T1 (-2.30220819f)
#define DT_GELU_T3 (-0.102943242f)
#define DT_GELU_D1 1.59576917f
#define DT_GELU_D3 0.214064449f

#endif
