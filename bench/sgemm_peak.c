/* The one-core fp32 GEMM peak that the GPT "small" target of
 * bench/RESULTS.md §14 is measured
 * against: OpenBLAS sgemm C = A B on 2048 x 2048 matrices, one thread, the
 * best of 5 timed calls after one untimed warm-up call, 2 n^3 FLOPs each.
 *
 * Build and run (from a configured build directory):
 *     make bench/sgemm_peak && bench/sgemm_peak [N [REPS]]
 * Last line, for scripts:
 *     RESULT sgemm n=2048 threads=1 best_s=... gflops=...
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timing.h"

/* values in [-1, 1) from a 64-bit LCG: a fixed, denormal-free input */
static void fill(float *a, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)((double)(*s >> 40) / 8388608.0 - 1.0);
    }
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2048;
    const long reps = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
    if (n < 1 || n > 32768 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: %s [N (1..32768, default 2048)] [REPS (1..1000, default 5)]\n",
                argv[0]);
        return 2;
    }
    openblas_set_num_threads(1);
    const size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "sgemm_peak: cannot allocate 3 x %zu floats\n", nn);
        return 1;
    }
    uint64_t seed = 7;
    fill(a, nn, &seed);
    fill(b, nn, &seed);
    const int ni = (int)n;
    double best = 1e300;
    for (long r = 0; r <= reps; r++) { /* r = 0: warm-up (page faults, OpenBLAS's buffers) */
        const double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni,
                    0.0f, c, ni);
        const double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    const double gflops = 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
    /* c[0] printed so the product is used and a wrong BLAS shows */
    printf("sgemm %ldx%ldx%ld, 1 thread, best of %ld: %.4f s, %.1f GFLOP/s (c[0] = %.6g)\n", n, n,
           n, reps, best, gflops, c[0]);
    printf("RESULT sgemm n=%ld threads=1 best_s=%.6f gflops=%.2f\n", n, best, gflops);
    free(a);
    free(b);
    free(c);
    return 0;
}
