/* The fp32 matrix product of the CPU backend: oneDNN's sgemm where dtrain is
 * built with oneDNN, else OpenBLAS's (the transformer's linear layers,
 * backend/cpu/matmul.c, and Muon's Newton-Schulz iteration, optim/newton_schulz.c). */
#ifndef DT_BACKEND_CPU_SGEMM_H
#define DT_BACKEND_CPU_SGEMM_H

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, op(A) (M, K), op(B) (K, N):
 * A is (M, K) with row stride lda, or (K, M) when tA; B is (K, N) with row
 * stride ldb, or (N, K) when tB; C has row stride ldc. Threads with the
 * engine's OpenMP team (oneDNN) or OpenBLAS's pool. */
void cpu_sgemm(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);

#endif
