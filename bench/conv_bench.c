/* conv_bench: single-core GFLOP/s of the CPU backends' conv2d kernels on every
 * convolution of mnist_cnn and resnet20_gn, against OpenBLAS sgemm: the native
 * im2col path (plain layout) and oneDNN's (the layouts the engine gives those
 * layers: blocked wherever the channel count allows), when built in.
 *
 * Build and run (see bench/README.md):
 *   mpicc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Isrc -I. bench/conv_bench.c \
 *         src/libdtrain.a -lopenblas -ldnnl -lm -o bench/conv_bench
 *   OPENBLAS_NUM_THREADS=1 bench/conv_bench [min_seconds_per_rep]
 *
 * FLOPs counted: forward 2*K*CRS*B*PQ (the direct convolution's multiply-adds,
 * whatever the algorithm: Winograd does fewer, so its "GFLOP/s" can pass the
 * sgemm peak). Backward: dW, plus dx when computed, so 2x forward, 1x for a
 * first layer (dx NULL, exactly as the network calls it).
 *
 * References printed beside the kernels:
 *   - a 2048^3 sgemm: the single-core peak the fractions are relative to;
 *   - one sgemm of the layer's whole forward GEMM (K, CRS) x (CRS, B*PQ) on an
 *     already lowered matrix: what the kernel would reach if lowering were free
 *     (conv1's CRS = 9 makes that GEMM memory-bound by construction).
 * Each figure is the median over 7 repetitions of a loop that runs at least
 * min_seconds_per_rep (default 0.25 s). */
#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "core/isa.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

#define REPS 7

typedef struct bench_case {
    const char *name;
    dt_conv_shape s;
    int need_dx;
} bench_case;

static const dt_backend *be; /* the backend being timed */

typedef struct conv_bufs {
    float *x, *w, *b, *y, *dy, *dx, *dw, *db, *work, *cols;
} conv_bufs;

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

typedef void (*bench_fn)(const bench_case *c, conv_bufs *m);

/* Median seconds per call over REPS repetitions of >= min_s each; the loop
 * length is calibrated once so that a repetition is not dominated by timer
 * resolution. */
static double bench_time(bench_fn fn, const bench_case *c, conv_bufs *m, double min_s)
{
    fn(c, m); // warm caches and OpenBLAS's buffers
    long iters = 1;
    for (;;) {
        double t0 = now();
        for (long i = 0; i < iters; i++)
            fn(c, m);
        double dt = now() - t0;
        if (dt >= min_s)
            break;
        iters = dt > 0 ? (long)(iters * 1.2 * min_s / dt) + 1 : iters * 10;
    }
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++)
            fn(c, m);
        t[r] = (now() - t0) / (double)iters;
    }
    return median(t, REPS);
}

static void run_forward(const bench_case *c, conv_bufs *m)
{
    be->conv2d_forward(&c->s, m->x, m->w, m->b, m->y, m->work);
}

static void run_backward(const bench_case *c, conv_bufs *m)
{
    be->conv2d_backward(&c->s, m->x, m->w, m->dy, c->need_dx ? m->dx : NULL, 1, m->dw, m->db,
                        m->work);
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

static void bench_conv(const bench_case *c, double peak, double min_s, const char *label)
{
    const dt_conv_shape *s = &c->s;
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
    double fb = gemm_flop * (c->need_dx ? 2.0 : 1.0);
    double gff = gemm_flop / tf * 1e-9, gfb = fb / tb * 1e-9;
    printf("| %s | %s | %d | %s | %.3f | %.1f | %.2f | %.3f | %.1f | %.2f |\n", c->name, label,
           s->B, s->xblk || s->yblk ? (s->xblk ? (s->yblk ? "blk->blk" : "blk->plain") : "plain->blk")
                                    : "plain",
           tf * 1e3, gff, gff / peak, tb * 1e3, gfb, gfb / peak);

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
    if (isa_setup_test(argv) != 0) // DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS
        return 2;
    double min_s = argc > 1 ? atof(argv[1]) : 0.25;
    const char *only = argc > 2 ? argv[2] : NULL;
    if (!(min_s > 0)) {
        fprintf(stderr, "usage: conv_bench [min_seconds_per_rep > 0 [layer name part]]\n");
        return 2;
    }
    backend_set_threads(1);
    printf("conv_bench: level %s\n", isa_name(isa_level()));
    printf("conv_bench: %s, 1 thread\n", openblas_get_config());
    double peak = peak_gflops(min_s);

    /* name, C, H, K, kernel, stride, pad, dx needed: every distinct layer */
    static const struct { const char *name; int C, H, K, k, st, pad, dx; } L[] = {
        { "mnist conv1 1->32 28x28", 1, 28, 32, 3, 1, 0, 0 },
        { "mnist conv2 32->64 26x26", 32, 26, 64, 3, 1, 0, 1 },
        { "resnet stem 3->16 32x32", 3, 32, 16, 3, 1, 1, 0 },
        { "resnet 16->16 32x32", 16, 32, 16, 3, 1, 1, 1 },
        { "resnet 16->32 s2 32x32", 16, 32, 32, 3, 2, 1, 1 },
        { "resnet 1x1 16->32 s2", 16, 32, 32, 1, 2, 0, 1 },
        { "resnet 32->32 16x16", 32, 16, 32, 3, 1, 1, 1 },
        { "resnet 32->64 s2 16x16", 32, 16, 64, 3, 2, 1, 1 },
        { "resnet 1x1 32->64 s2", 32, 16, 64, 1, 2, 0, 1 },
        { "resnet 64->64 8x8", 64, 8, 64, 3, 1, 1, 1 },
    };
    static const int batches[] = { 32, 128 };
    const dt_backend *backends[2] = { backend_cpu(), backend_cpu_dnnl() };
    /* at the AVX2 level the oneDNN backend runs dtrain's Winograd F(2x2, 3x3)
     * on the 3x3 stride-1 layers: those rows are timed with oneDNN's direct
     * kernel too ("dnnl direct"), side by side */
    printf("| layer | backend | B | layout | fwd ms | fwd GFLOP/s | of peak | bwd ms | bwd "
           "GFLOP/s | of peak |\n| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: "
           "| ---: |\n");
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        for (size_t i = 0; i < sizeof L / sizeof L[0]; i++)
            for (int k = 0; k < 3; k++) {
                be = backends[k < 2 ? k : 1];
                if (!be || (only && !strstr(L[i].name, only)))
                    continue;
                const int P = (L[i].H + 2 * L[i].pad - L[i].k) / L[i].st + 1;
                bench_case c = { L[i].name,
                                 { batches[b], L[i].C, L[i].H, L[i].H, L[i].K, L[i].k, L[i].k,
                                   L[i].st, L[i].pad, P, P, 0, 0 },
                                 L[i].dx };
                // the engine's layouts: blocked where the channels allow
                c.s.xblk = be->cblock && L[i].C % be->cblock == 0 ? be->cblock : 0;
                c.s.yblk = be->cblock && L[i].K % be->cblock == 0 ? be->cblock : 0;
                if (k == 2 && !wino8_applies(&c.s))
                    continue;
                dnnl_conv2d_wino8(k != 2);
                bench_conv(&c, peak, min_s, k == 2 ? "dnnl direct" : be->name);
                dnnl_conv2d_wino8(1);
            }
    return 0;
}
