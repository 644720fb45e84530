/* GFLOP/s of gemm_bf16 (fp32 operands converted on each call), gemm_bf16_pre
 * (operands already bf16) and cblas_sgemm on the GPT's products: the three
 * passes of a linear layer y (M, N) = x (M, K) W^T, M = B T tokens,
 *   fwd  y = x W^T        (N, T)   M x N x K
 *   dx   dx = dy W        (N, N)   M x K x N
 *   dW   dW = dy^T x      (T, N)   N x K x M
 * Best of 5 repetitions, each at least `seconds` (default 0.2) of calls.
 *
 *   mpicc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Isrc -I. bench/gemm_bf16_bench.c \
 *         src/libdtrain.a -lopenblas -ldnnl -lm -o bench/gemm_bf16_bench
 *   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 bench/gemm_bf16_bench [seconds] */
#include "core/error.h"
#include "backend/cpu/gemm_bf16.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timing.h"

typedef struct op { int ta, tb, M, N, K; const float *A, *B; const dt_bf16 *a, *b; float *C; } op;

static void run(int kind, const op *o)
{
    const int lda = o->ta ? o->M : o->K, ldb = o->tb ? o->K : o->N;
    if (kind == 0)
        cblas_sgemm(CblasRowMajor, o->ta ? CblasTrans : CblasNoTrans,
                    o->tb ? CblasTrans : CblasNoTrans, o->M, o->N, o->K, 1.0f, o->A, lda, o->B,
                    ldb, 0.0f, o->C, o->N);
    else if (kind == 1)
        gemm_bf16(o->ta, o->tb, o->M, o->N, o->K, 1.0f, o->A, lda, o->B, ldb, 0.0f, o->C, o->N);
    else
        gemm_bf16_pre(o->ta, o->tb, o->M, o->N, o->K, 1.0f, o->a, lda, o->b, ldb, 0.0f, o->C,
                      o->N);
}

static double gflops(int kind, const op *o, double seconds)
{
    run(kind, o); /* primitive creation, first touch */
    double best = 0;
    for (int r = 0; r < 5; r++) {
        int n = 0;
        const double t0 = now();
        double t;
        do {
            run(kind, o);
            n++;
        } while ((t = now() - t0) < seconds);
        const double g = 2.0 * o->M * o->N * o->K * n / t * 1e-9;
        best = g > best ? g : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const double seconds = argc > 1 ? atof(argv[1]) : 0.2;
    const int Ms[] = { 768, 2048 };
    const int KN[][2] = { { 128, 384 }, { 128, 128 }, { 128, 512 }, { 512, 128 },
                          { 384, 1152 }, { 384, 384 }, { 384, 1536 }, { 1536, 384 } };
    const size_t cap = (size_t)2048 * 1536;
    float *A = malloc(cap * 4), *B = malloc(cap * 4), *C = malloc(cap * 4);
    dt_bf16 *a = malloc(cap * 2), *b = malloc(cap * 2);
    for (size_t i = 0; i < cap; i++) {
        A[i] = (float)rand() / RAND_MAX - 0.5f;
        B[i] = (float)rand() / RAND_MAX - 0.5f;
    }
    bf16_from_f32(cap, A, a);
    bf16_from_f32(cap, B, b);
    if (bf16_check_cpu() != 0)
        printf("# %s\n", dt_err_msg());
    printf("%-5s %-4s %5s %5s %5s  %9s %9s %9s  %s\n", "M", "pass", "m", "n", "k", "sgemm",
           "bf16", "bf16_pre", "GFLOP/s; bf16/sgemm, pre/sgemm");
    for (size_t mi = 0; mi < 2; mi++)
        for (size_t s = 0; s < sizeof KN / sizeof KN[0]; s++) {
            const int M = Ms[mi], K = KN[s][0], N = KN[s][1];
            const op ops[3] = {
                { 0, 1, M, N, K, A, B, a, b, C }, /* fwd: x (M, K), W (N, K) */
                { 0, 0, M, K, N, A, B, a, b, C }, /* dx: dy (M, N), W (N, K) */
                { 1, 0, N, K, M, A, B, a, b, C }, /* dW: dy (M, N)^T, x (M, K) */
            };
            const char *names[3] = { "fwd", "dx", "dW" };
            for (int p = 0; p < 3; p++) {
                const double g0 = gflops(0, &ops[p], seconds), g1 = gflops(1, &ops[p], seconds),
                             g2 = gflops(2, &ops[p], seconds);
                printf("%-5d %-4s %5d %5d %5d  %9.1f %9.1f %9.1f  %.2fx %.2fx\n", M, names[p],
                       ops[p].M, ops[p].N, ops[p].K, g0, g1, g2, g1 / g0, g2 / g0);
                fflush(stdout);
            }
        }
    return 0;
}
