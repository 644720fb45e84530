/* bf16 matrix products with fp32 accumulation, through oneDNN.
 *
 * bf16 keeps fp32's 8-bit exponent and 8 bits of significand (7 stored), so
 * rounding a float to it (round to nearest even) has relative error at most
 * u = 2^-8. A product of two rounded operands summed in fp32 over K terms is
 * off the exact sum of products by at most
 *     (2u + u^2 + K 2^-24 (1 + K 2^-24)) sum_k |a_k| |b_k|,
 * the bound tests/test_bf16.c checks per layer.
 *
 * The CPU needs bf16 instructions (AVX512-BF16, or AMX-BF16) within oneDNN's
 * effective ISA; without them oneDNN emulates bf16, slower than fp32, and
 * bf16_check_cpu refuses.
 *
 * Primitives are created on first use of a shape (and thread count) and kept
 * for the life of the process, as in conv2d_dnnl.c. Calls are not reentrant:
 * one thread computes at a time (the engine's thread; oneDNN's OpenMP team
 * works inside each call). */
#ifndef DT_BACKEND_CPU_GEMM_BF16_H
#define DT_BACKEND_CPU_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* A bf16 number: the top 16 bits of the float it rounds. */
typedef uint16_t dt_bf16;

/* y (n) = bf16 rounding of x (n), round to nearest even (NaN stays NaN). */
void bf16_from_f32(size_t n, const float *x, dt_bf16 *y);
/* y (n) = x (n) widened to float (exact). */
void bf16_to_f32(size_t n, const dt_bf16 *x, float *y);
/* x (n) rounded through bf16 in place: what the bf16 kernels compute with. */
void bf16_round_f32(size_t n, float *x);

/* 0 when oneDNN runs bf16 natively on this CPU; else -1 after dt_err_set()
 * with one line naming the missing feature (and the ISA cap where
 * ONEDNN_MAX_CPU_ISA set one). */
int bf16_check_cpu(void);

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, op(A) (M, K), op(B) (K, N):
 *   A is (M, K) with row stride lda, or (K, M) when transA;
 *   B is (K, N) with row stride ldb, or (N, K) when transB;
 * both rounded to bf16, products accumulated in fp32; C fp32 (ldc >= N).
 * beta = 0: C is only written (may hold garbage, NaN included). */
void gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);
/* The same on operands already in bf16 (bf16_from_f32): a weight converted
 * once per step serves the forward and both backward products. */
void gemm_bf16_pre(int transA, int transB, int M, int N, int K, float alpha, const dt_bf16 *A,
                   int lda, const dt_bf16 *B, int ldb, float beta, float *C, int ldc);

#endif
