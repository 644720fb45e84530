/* GPT forward + backward, two variants of the code in one process: rounds of
 * steps alternate between dt_bench_variant = 0 and 1, and the program prints
 * each variant's median tokens/s and the median of the per-pair ratios.
 *
 *   bench/gpt_ab [baby|small] [PAIRS (30)] [STEPS per round (10)]
 *
 * A change is measured by keeping the old code beside the new one for the
 * experiment, in the library file it touches:
 *
 *     int dt_bench_variant;  // defined there: it overrides the weak one below
 *     ... if (dt_bench_variant) new_way(); else old_way();
 *
 * and relinking this program (make bench/gpt_ab). Between processes a shared
 * machine's speed drifts by several per cent from minute to minute (the VMs
 * of bench/RESULTS.md: up to 5 %), which hides changes of 1 %; alternating
 * within one process, both variants see the same minutes. With nothing
 * reading the variable, A and B run the same code: the ratio then shows the
 * method's own noise (0.1-0.4 % on the Xeon of bench/RESULTS.md §27). Run
 * pinned, one thread: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 0;
 * DTRAIN_MAX_CPU_ISA caps the level as for dtrain. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/isa.h"
#include "core/rng.h"
#include "models/gpt.h"

#include "timing.h"

__attribute__((weak)) int dt_bench_variant;

static void steps(dt_gpt *m, const float *p, float *g, const int32_t *tok, int B, int n)
{
    for (int s = 0; s < n; s++) {
        gpt_forward(m, p, tok, tok + 1, B, 1, (uint64_t)s, NULL);
        gpt_backward(m, p, g);
    }
}

int main(int argc, char **argv)
{
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    const char *name = argc > 1 ? argv[1] : "baby";
    const int pairs = argc > 2 ? atoi(argv[2]) : 30, nsteps = argc > 3 ? atoi(argv[3]) : 10;
    dt_gpt_config c;
    int B;
    if (strcmp(name, "baby") == 0) {
        c = (dt_gpt_config){ 96, 64, 4, 4, 128, 0, DT_PREC_FP32 };
        B = 12;
    } else if (strcmp(name, "small") == 0) {
        c = (dt_gpt_config){ 96, 256, 6, 6, 384, 0, DT_PREC_FP32 };
        B = 8;
    } else {
        fprintf(stderr, "gpt_ab: unknown configuration '%s' (expected baby or small)\n", name);
        return 1;
    }
    if (pairs < 1 || nsteps < 1) {
        fprintf(stderr, "gpt_ab: PAIRS and STEPS must be positive integers\n");
        return 1;
    }
    dt_gpt *m = gpt_create(&c);
    if (!m) {
        fprintf(stderr, "gpt_ab: %s\n", dt_err_msg());
        return 1;
    }
    const int N = B * c.block;
    float *p = dt_falloc(gpt_nparams(m)), *g = dt_falloc(gpt_nparams(m));
    gpt_init_params(m, p, 1);
    int32_t *tok = dt_calloc((size_t)N + 1, sizeof *tok);
    dt_rng r = rng_make(5, 0, 0, 0);
    for (int i = 0; i <= N; i++)
        tok[i] = (int32_t)rng_below(&r, (uint64_t)c.vocab);
    gpt_reserve(m, B);
    for (int v = 0; v < 2; v++) { /* warm both */
        dt_bench_variant = v;
        steps(m, p, g, tok, B, 3);
    }
    double *rate[2] = { dt_calloc((size_t)pairs, sizeof(double)),
                        dt_calloc((size_t)pairs, sizeof(double)) };
    double *ratio = dt_calloc((size_t)pairs, sizeof(double));
    for (int k = 0; k < pairs; k++) {
        for (int j = 0; j < 2; j++) {
            const int v = k % 2 ? 1 - j : j; /* A B, then B A */
            dt_bench_variant = v;
            const double t0 = now();
            steps(m, p, g, tok, B, nsteps);
            rate[v][k] = (double)N * nsteps / (now() - t0);
        }
        ratio[k] = rate[1][k] / rate[0][k];
    }
    const double a = median(rate[0], pairs), b = median(rate[1], pairs);
    printf("%s: A %.0f B %.0f tokens/s (medians of %d rounds of %d steps); B/A %.4f, median "
           "of the pairs' ratios %.4f\n", name, a, b, pairs, nsteps, b / a, median(ratio, pairs));
    free(rate[0]);
    free(rate[1]);
    free(ratio);
    free(tok);
    free(p);
    free(g);
    gpt_free(m);
    return 0;
}
