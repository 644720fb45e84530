/* GPT forward + backward throughput (models/gpt.h) on the CPU, and where the
 * time goes.
 *
 *   make bench/gpt_step
 *   OPENBLAS_NUM_THREADS=1 bench/gpt_step [--threads N] [--steps S] [--rounds R]
 *                                          [--profile] [--precision fp32|bf16] baby|small ...
 *
 * Per configuration: tokens/s of one gpt_forward + gpt_backward (no optimizer),
 * the median and best of R rounds of S steps after 3 warm-up steps, as GFLOP/s
 * (72 n_layer C^2 + 12 n_layer T C per token, the count of bench/RESULTS.md §14) and as a
 * fraction of the one-thread OpenBLAS sgemm peak (2048^3, best of 5) measured
 * in the same run; peak RSS of the process (run one configuration per process
 * for a meaningful figure). --precision bf16: the model's bf16 products
 * (compute.precision = bf16); the per-layer profile stays the fp32 passes'. --profile times each layer pass alone at the
 * configuration's shapes (median of 5) and lists its share of a step.
 * bench/gpt_step.sh runs this beside the same model in PyTorch. */
#include <cblas.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backend/backend.h"
#include "core/isa.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/gpt.h"
#include "nn/transformer.h"

#include "timing.h"

/* GFLOP/s of one-thread-or-more sgemm 2048^3, best of 5. */
static double sgemm_peak(void)
{
    const int n = 2048;
    float *a = dt_falloc((size_t)n * n), *b = dt_falloc((size_t)n * n), *c = dt_falloc((size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        best = fmin(best, now() - t0);
    }
    /* and per CPU-second, for a loaded machine (one thread only: with more,
     * CPU time adds the threads' and is no peak) */
    double cbest = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = cpu_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        cbest = fmin(cbest, cpu_now() - t0);
    }
    printf("sgemm 2048^3 per CPU-second: %.1f GFLOP/s\n", 2.0 * n * n * (double)n / cbest * 1e-9);
    free(a);
    free(b);
    free(c);
    return 2.0 * n * n * (double)n / best * 1e-9;
}

typedef struct bench_cfg {
    const char *name;
    dt_gpt_config c;
    int B;
} bench_cfg;

static const bench_cfg configs[] = {
    { "baby", { 96, 64, 4, 4, 128, 0, DT_PREC_FP32 }, 12 },
    { "small", { 96, 256, 6, 6, 384, 0, DT_PREC_FP32 }, 8 },
};

/* ---- per-layer profile ---------------------------------------------------- */

/* Median CPU seconds of 5 runs of stmt (after one warm-up). */
#define TIME5(out, stmt)                                                                  \
    do {                                                                                  \
        double ts_[5];                                                                    \
        stmt;                                                                             \
        for (int r_ = 0; r_ < 5; r_++) {                                                  \
            double t0_ = cpu_now();                                                       \
            stmt;                                                                         \
            ts_[r_] = cpu_now() - t0_;                                                    \
        }                                                                                 \
        out = median(ts_, 5);                                                             \
    } while (0)

static void profile(const bench_cfg *bc, double step_s)
{
    const int B = bc->B, T = bc->c.block, C = bc->c.n_embd, V = bc->c.vocab, NH = bc->c.n_head,
              L = bc->c.n_layer, N = B * T;
    const size_t NC = (size_t)N * C;
    float *x = dt_falloc(NC * 4), *y = dt_falloc(NC * 4), *dy = dt_falloc(NC * 4),
          *dx = dt_falloc(NC * 4), *W = dt_falloc((size_t)4 * C * C), *dW = dt_falloc((size_t)4 * C * C),
          *b = dt_falloc((size_t)4 * C), *db = dt_falloc((size_t)4 * C), *g = dt_falloc((size_t)C),
          *mean = dt_falloc((size_t)N), *rstd = dt_falloc((size_t)N),
          *lse = dt_falloc((size_t)N * NH), *work = dt_falloc(attention_work(T) * 16),
          *logits = dt_falloc((size_t)N * V), *wte = dt_falloc((size_t)V * C),
          *wpe = dt_falloc((size_t)T * C), *dwe = dt_falloc((size_t)(V + T) * C);
    int32_t *tok = dt_calloc((size_t)N, sizeof *tok);
    /* as the model decides (models/gpt.c): probabilities kept where NH T <= 2 C */
    float *probs = (int64_t)NH * T <= 2 * (int64_t)C ? dt_falloc((size_t)N * NH * T) : NULL;
    dt_rng r = rng_make(1, 2, 3, 4);
    for (size_t i = 0; i < NC * 4; i++) {
        x[i] = (float)rng_normal(&r);
        dy[i] = 0.01f * (float)rng_normal(&r);
    }
    for (size_t i = 0; i < (size_t)4 * C * C; i++)
        W[i] = 0.02f * (float)rng_normal(&r);
    for (int i = 0; i < C; i++)
        g[i] = 1.0f;
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)rng_below(&r, (uint64_t)V);
    for (size_t i = 0; i < (size_t)V * C; i++)
        wte[i] = 0.02f * (float)rng_normal(&r);
    /* the attention's inputs: a layer's qkv at GPT-2's init scale */
    matmul_forward(N, C, 3 * C, x, W, b, y);
    struct { const char *name; double s; int per_step; } rows[32];
    int nr = 0;
#define ROW(label, count, stmt)                                                          \
    do {                                                                                  \
        rows[nr].name = label;                                                            \
        rows[nr].per_step = count;                                                        \
        TIME5(rows[nr].s, stmt);                                                          \
        nr++;                                                                             \
    } while (0)
    ROW("embedding fwd", 1, embedding_forward(B, T, C, tok, wte, wpe, 0, 0, x + NC));
    ROW("layernorm(+residual) fwd", 2 * L, layernorm_residual_forward(N, C, x, x + NC, 0, 0, g, b, dx, dy + NC, NULL, mean, rstd));
    ROW("c_attn fwd (C->3C)", L, matmul_forward(N, C, 3 * C, x, W, b, dx));
    ROW("attention fwd", L, attention_forward(B, T, C, NH, y, x + NC, lse, probs, 0, 0, work, omp_get_max_threads() < 16 ? omp_get_max_threads() : 16));
    ROW("attn.c_proj fwd (C->C)", L, matmul_forward(N, C, C, x, W, b, dx));
    ROW("c_fc fwd (C->4C)", L, matmul_forward(N, C, 4 * C, x, W, b, dx));
    ROW("gelu fwd", 2 * L, gelu_forward(NC * 4, x, dx)); /* and once more in backward */
    ROW("mlp.c_proj fwd (4C->C)", L, matmul_forward(N, 4 * C, C, x, W, b, dx));
    ROW("head fwd (C->V)", 1, matmul_forward(N, C, V, x, wte, NULL, logits));
    ROW("cross-entropy fwd", 1, xent_seq_forward(N, V, logits, tok, mean, NULL));
    ROW("cross-entropy bwd", 1, xent_seq_backward(N, V, logits, mean, tok, 1.0f / N, dx));
    ROW("head bwd", 1, matmul_backward(N, C, V, x, wte, logits, dx, dW, NULL));
    ROW("layernorm recompute", 2 * L + 1, layernorm_apply(N, C, x, mean, rstd, g, b, dx, NULL));
    ROW("layernorm bwd", 2 * L + 1, layernorm_backward(N, C, x, mean, rstd, g, dy, dx, 1, db, db + C));
    ROW("mlp.c_proj bwd", L, matmul_backward(N, 4 * C, C, x, W, dy, dx, dW, db));
    ROW("gelu bwd", L, gelu_backward(NC * 4, x, dy, dx));
    ROW("c_fc bwd", L, matmul_backward(N, C, 4 * C, x, W, dy, dx, dW, db));
    ROW("attn.c_proj bwd", L, matmul_backward(N, C, C, x, W, dy, dx, dW, db));
    ROW("attention bwd", L, attention_backward(B, T, C, NH, y, lse, probs, dy, 0, 0, dx, work, omp_get_max_threads() < 16 ? omp_get_max_threads() : 16));
    ROW("c_attn bwd", L, matmul_backward(N, C, 3 * C, x, W, dy, dx, dW, db));
    ROW("embedding bwd", 1, embedding_backward(B, T, C, tok, dy, 0, 0, dwe, dwe + (size_t)V * C));
#undef ROW
    double total = 0;
    printf("  CPU time per layer pass, against a step's CPU time:\n");
    printf("  %-26s %10s %8s %7s\n", "layer pass", "ms/call", "ms/step", "% step");
    for (int i = 0; i < nr; i++) {
        const double per = rows[i].s * rows[i].per_step;
        total += per;
        printf("  %-26s %10.3f %8.2f %6.1f%%\n", rows[i].name, rows[i].s * 1e3, per * 1e3,
               100 * per / step_s);
    }
    printf("  %-26s %10s %8.2f %6.1f%%  (the rest: copies, dropout off, call overhead)\n",
           "sum of the passes", "", total * 1e3, 100 * total / step_s);
    free(x); free(y); free(dy); free(dx); free(W); free(dW); free(b); free(db); free(g);
    free(mean); free(rstd); free(lse); free(work); free(logits); free(wte); free(wpe); free(dwe); free(tok); free(probs);
}

static void run(const bench_cfg *bc, int precision, int steps, int rounds, int prof, double peak)
{
    dt_gpt_config c = bc->c;
    c.precision = precision;
    dt_gpt *m = gpt_create(&c);
    if (!m) {
        fprintf(stderr, "gpt_step: %s\n", dt_err_msg());
        exit(1);
    }
    const size_t np = gpt_nparams(m);
    const int B = bc->B, T = bc->c.block, N = B * T;
    float *p = dt_falloc(np), *g = dt_falloc(np);
    gpt_init_params(m, p, 1);
    int32_t *tok = dt_calloc((size_t)N + 1, sizeof *tok);
    dt_rng r = rng_make(5, 0, 0, 0);
    for (int i = 0; i <= N; i++)
        tok[i] = (int32_t)rng_below(&r, (uint64_t)bc->c.vocab);
    gpt_reserve(m, B);
    double loss = 0;
    for (int s = 0; s < 3; s++) {
        loss = gpt_forward(m, p, tok, tok + 1, B, 1, (uint64_t)s, NULL);
        gpt_backward(m, p, g);
    }
    double *rate = dt_calloc((size_t)rounds, sizeof *rate), *crate = dt_calloc((size_t)rounds, sizeof *crate);
    for (int k = 0; k < rounds; k++) {
        double t0 = now(), c0 = cpu_now();
        for (int s = 0; s < steps; s++) {
            gpt_forward(m, p, tok, tok + 1, B, 1, (uint64_t)s, NULL);
            gpt_backward(m, p, g);
        }
        rate[k] = (double)N * steps / (now() - t0);
        crate[k] = (double)N * steps / (cpu_now() - c0);
    }
    const double med = median(rate, rounds), best = rate[rounds - 1], cmed = median(crate, rounds);
    const double L = bc->c.n_layer, C = bc->c.n_embd;
    const double flop_tok = 72 * L * C * C + 12 * L * T * C;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%s (%s): n_layer %d n_head %d n_embd %d block %d batch %d vocab %d, %zu parameters\n",
           bc->name, precision == DT_PREC_BF16 ? "bf16" : "fp32", bc->c.n_layer, bc->c.n_head,
           bc->c.n_embd, T, B, bc->c.vocab, np);
    printf("  initial loss %.4f (ln V = %.4f)\n", loss, log((double)bc->c.vocab));
    printf("  tokens/s median %.0f best %.0f (%d rounds of %d steps); %.2f ms/step; "
           "%.1f GFLOP/s = %.0f %% of sgemm peak %.1f GFLOP/s; peak RSS %.1f MiB\n",
           med, best, rounds, steps, 1e3 * N / med, med * flop_tok * 1e-9,
           100 * med * flop_tok * 1e-9 / peak, peak, ru.ru_maxrss / 1024.0);
    printf("  tokens per CPU-second (all threads) median %.0f\n", cmed);
    printf("RESULT dtrain%s %s tok_s_median %.1f tok_s_best %.1f peak_gflops %.2f rss_kib %ld "
           "tok_cpu_s_median %.1f\n", precision == DT_PREC_BF16 ? "-bf16" : "", bc->name, med, best, peak, ru.ru_maxrss, cmed);
    if (prof)
        profile(bc, N / cmed);
    free(rate);
    free(crate);
    free(tok);
    free(p);
    free(g);
    gpt_free(m);
}

int main(int argc, char **argv)
{
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    int threads = 1, steps = 0, rounds = 3, prof = 0, any = 0, precision = DT_PREC_FP32;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--profile") == 0)
            prof = 1;
        else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
            precision = backend_precision_of(argv[++i]);
            if (precision < 0) {
                fprintf(stderr, "gpt_step: --precision %s: expected fp32 or bf16\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--threads N] [--steps S] [--rounds R] [--profile] [--precision P] "
                            "baby|small ...\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || rounds < 1 || steps < 0) {
        fprintf(stderr, "gpt_step: --threads and --rounds must be >= 1, --steps >= 0\n");
        return 2;
    }
    backend_set_threads(threads);
    const double peak = sgemm_peak();
    printf("sgemm 2048^3 at %d thread(s): %.1f GFLOP/s\n", threads, peak);
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (strcmp(argv[i], "--profile") != 0)
                i++;
            continue;
        }
        const bench_cfg *bc = NULL;
        for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++)
            if (strcmp(argv[i], configs[k].name) == 0)
                bc = &configs[k];
        if (!bc) {
            fprintf(stderr, "gpt_step: unknown configuration '%s' (expected baby or small)\n", argv[i]);
            return 2;
        }
        run(bc, precision, steps ? steps : (strcmp(bc->name, "baby") == 0 ? 50 : 5), rounds, prof, peak);
        any = 1;
    }
    if (!any)
        fprintf(stderr, "gpt_step: no configuration given (baby, small)\n");
    return any ? 0 : 2;
}
