/* conv_bench: single-core GFLOP/s of the CPU backend's conv2d kernels on the two
 * mnist_cnn convolutions, against OpenBLAS sgemm.
 *
 * Build and run (see bench/README.md):
 *   mpicc -O2 -std=c11 -D_GNU_SOURCE -I/work/main/src bench/conv_bench.c \
 *         /tmp/build/src/libdtrain.a -lopenblas -lm -o /tmp/conv_bench
 *   OPENBLAS_NUM_THREADS=1 /tmp/conv_bench [min_seconds_per_rep]
 *
 * FLOPs counted: forward 2*K*CRS*B*PQ (the GEMM of the im2col lowering; bias
 * and im2col copies are not counted). Backward: the dW GEMM, plus the dx GEMM
 * when dx is computed, so 2x forward for conv2 and 1x for conv1 (the first
 * layer, dx NULL, exactly as the network calls it). Both GEMMs have the same
 * size as the forward one.
 *
 * References printed beside the kernels:
 *   - a 2048^3 sgemm: the single-core peak the fractions are relative to;
 *   - one sgemm of the layer's whole forward GEMM (K, CRS) x (CRS, B*PQ) on an
 *     already lowered matrix: what the kernel would reach if lowering were free
 *     (conv1's CRS = 9 makes that GEMM memory-bound by construction).
 * Each figure is the median over 7 repetitions of a loop that runs at least
 * min_seconds_per_rep (default 0.25 s). */
#include "backend/backend.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 7

typedef struct bench_case {
    const char *name;
    dt_conv_shape s;
    int need_dx;
} bench_case;

typedef struct conv_bufs {
    float *x, *w, *b, *y, *dy, *dx, *dw, *db, *work, *cols;
} conv_bufs;

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *bench_alloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "conv_bench: out of memory (%zu floats)\n", n);
        exit(1);
    }
    return p;
}

/* Uniform in [-1, 1): values of the size real activations have, no denormals. */
static void bench_fill(float *v, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        v[i] = (float)(*seed >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(const bench_case *c, conv_bufs *m);

/* Median seconds per call over REPS repetitions of >= min_s each; the loop
 * length is calibrated once so that a repetition is not dominated by timer
 * resolution. */
static double bench_time(bench_fn fn, const bench_case *c, conv_bufs *m, double min_s)
{
    fn(c, m); // warm caches and OpenBLAS's buffers
    long iters = 1;
    for (;;) {
        double t0 = bench_now();
        for (long i = 0; i < iters; i++)
            fn(c, m);
        double dt = bench_now() - t0;
        if (dt >= min_s)
            break;
        iters = dt > 0 ? (long)(iters * 1.2 * min_s / dt) + 1 : iters * 10;
    }
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        for (long i = 0; i < iters; i++)
            fn(c, m);
        t[r] = (bench_now() - t0) / (double)iters;
    }
    qsort(t, REPS, sizeof t[0], cmp_double);
    return t[REPS / 2];
}

static void run_forward(const bench_case *c, conv_bufs *m)
{
    backend_cpu()->conv2d_forward(&c->s, m->x, m->w, m->b, m->y, m->work);
}

static void run_backward(const bench_case *c, conv_bufs *m)
{
    backend_cpu()->conv2d_backward(&c->s, m->x, m->w, m->dy, c->need_dx ? m->dx : NULL,
                                   m->dw, m->db, m->work);
}

/* The forward GEMM alone: y (K, B*PQ) = W (K, CRS) x cols (CRS, B*PQ). */
static void run_gemm_only(const bench_case *c, conv_bufs *m)
{
    const dt_conv_shape *s = &c->s;
    int crs = s->C * s->R * s->S, n = s->B * s->P * s->Q;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->K, n, crs, 1.0f, m->w, crs,
                m->cols, n, 0.0f, m->y, n);
}

/* Square sgemm for the single-core peak; the case's shape fields are reused
 * as the matrix size (B = n). */
static void run_square(const bench_case *c, conv_bufs *m)
{
    int n = c->s.B;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, m->x, n, m->w, n,
                0.0f, m->y, n);
}

static double peak_gflops(double min_s)
{
    const int n = 2048;
    unsigned seed = 7;
    conv_bufs m = { 0 };
    size_t nn = (size_t)n * n;
    m.x = bench_alloc(nn);
    m.w = bench_alloc(nn);
    m.y = bench_alloc(nn);
    bench_fill(m.x, nn, &seed);
    bench_fill(m.w, nn, &seed);
    bench_case c = { .name = "sgemm", .s = { .B = n } };
    double t = bench_time(run_square, &c, &m, min_s);
    free(m.x);
    free(m.w);
    free(m.y);
    double gf = 2.0 * n * (double)n * n / t * 1e-9;
    printf("sgemm %dx%dx%d (single-core peak): %.3f ms, %.1f GFLOP/s\n\n", n, n, n, t * 1e3,
           gf);
    return gf;
}

static void bench_conv(const bench_case *c, double peak, double min_s)
{
    const dt_conv_shape *s = &c->s;
    const dt_backend *be = backend_cpu();
    size_t nx = (size_t)s->B * s->C * s->H * s->W;
    size_t nw = (size_t)s->K * s->C * s->R * s->S;
    size_t ny = (size_t)s->B * s->K * s->P * s->Q;
    size_t crs = (size_t)s->C * s->R * s->S, npq = (size_t)s->B * s->P * s->Q;
    unsigned seed = 12345;
    conv_bufs m;
    m.x = bench_alloc(nx);
    m.w = bench_alloc(nw);
    m.b = bench_alloc((size_t)s->K);
    m.y = bench_alloc(ny);
    m.dy = bench_alloc(ny);
    m.dx = bench_alloc(nx);
    m.dw = bench_alloc(nw);
    m.db = bench_alloc((size_t)s->K);
    m.work = bench_alloc(be->conv2d_workspace(s));
    m.cols = bench_alloc(crs * npq);
    bench_fill(m.x, nx, &seed);
    bench_fill(m.w, nw, &seed);
    bench_fill(m.b, (size_t)s->K, &seed);
    bench_fill(m.dy, ny, &seed);
    bench_fill(m.cols, crs * npq, &seed);
    memset(m.dx, 0, nx * sizeof(float));

    double gemm_flop = 2.0 * (double)s->K * (double)crs * (double)npq;
    double tf = bench_time(run_forward, c, &m, min_s);
    double tb = bench_time(run_backward, c, &m, min_s);
    double tg = bench_time(run_gemm_only, c, &m, min_s);
    double fb = gemm_flop * (c->need_dx ? 2.0 : 1.0);
    double gff = gemm_flop / tf * 1e-9, gfb = fb / tb * 1e-9, gfg = gemm_flop / tg * 1e-9;
    printf("%-6s B=%-4d %9.3f %9.1f %7.2f | %9.3f %9.1f %7.2f | %9.3f %9.1f %7.2f\n", c->name,
           s->B, tf * 1e3, gff, gff / peak, tb * 1e3, gfb, gfb / peak, tg * 1e3, gfg,
           gfg / peak);

    free(m.x);
    free(m.w);
    free(m.b);
    free(m.y);
    free(m.dy);
    free(m.dx);
    free(m.dw);
    free(m.db);
    free(m.work);
    free(m.cols);
}

int main(int argc, char **argv)
{
    double min_s = argc > 1 ? atof(argv[1]) : 0.25;
    if (!(min_s > 0)) {
        fprintf(stderr, "usage: conv_bench [min_seconds_per_rep > 0]\n");
        return 2;
    }
    printf("conv_bench: backend %s, %s, %d thread(s)\n", backend_cpu()->name,
           openblas_get_config(), openblas_get_num_threads());
    double peak = peak_gflops(min_s);

    static const int batches[] = { 32, 128 };
    printf("%-13s %29s | %29s | %29s\n", "", "forward", "backward (dW [+ dx])",
           "sgemm of the fwd GEMM only");
    printf("%-13s %9s %9s %7s | %9s %9s %7s | %9s %9s %7s\n", "layer", "ms", "GFLOP/s", "peak",
           "ms", "GFLOP/s", "peak", "ms", "GFLOP/s", "peak");
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        int B = batches[i];
        // mnist_cnn: conv1 1->32 on 28x28, conv2 32->64 on 26x26, 3x3 valid
        bench_case conv1 = { "conv1", { B, 1, 28, 28, 32, 3, 3, 1, 0, 26, 26 }, 0 };
        bench_case conv2 = { "conv2", { B, 32, 26, 26, 64, 3, 3, 1, 0, 24, 24 }, 1 };
        bench_conv(&conv1, peak, min_s);
        bench_conv(&conv2, peak, min_s);
    }
    return 0;
}
