/* DiLoCo (algo/diloco.c) and its wire formats (algo/quant.c) on closed-form
 * objectives, run under mpiexec -n 4 (tests/diloco.sh). The algorithm's own
 * step runs on a trainer whose gradient oracle is a formula:
 *  - quant: bf16 within 2^-8 |x| per element, int8 within half its block's
 *    scale, codes of 1/2 and about 1/4 of the fp32 bytes;
 *  - the pseudo-gradient's sign: on f_r(x) = |x - a_r|^2 / 2 one outer step
 *    moves theta towards the local minima, as theta - lr (theta - mean x_r);
 *  - outer SGD with Nesterov momentum against its recursion in double;
 *  - outer (lr 1, momentum 0) is model averaging exactly (dyadic values);
 *  - H = 1 with outer (1, 0) equals mode allreduce to float rounding;
 *  - bf16/int8: bit-identical replicas after outer steps, the averaged
 *    pseudo-gradient within the formats' bounds, bytes per outer step;
 *  - error feedback: the residual is what the codes left out, and it is in
 *    the next pseudo-gradient sent;
 *  - streaming fragments with overlap and merge against a reference of the
 *    schedule in double;
 *  - outer_comm = sgp on the complete graph equals the allreduce variant;
 *  - compress = topk: the outer step is (1/R) sum_r decode(codes of rank r)
 *    bit for bit, the same on every rank; the residual is what the codes
 *    left out; a rank counts its own codes once; error feedback closes (what
 *    was decoded plus the residual is the sum of the pseudo-gradients) and
 *    its decay is in the next vector sent;
 *  - delay = 1 against the delayed schedule in double, fp32 and top-k, and
 *    the end's drain (the finish hook): the last exchange applied, x equal
 *    on every rank when the budget ends at a loop's end, x_local kept;
 *  - inner_time: the outer step is sum_r n_r delta_r / sum_r n_r, n_r the
 *    rank's samples, fp32 against double; fp32, int8 and top-k the same bytes
 *    on every rank. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/quant.h"
#include "algo/topk_codec.h"
#include "core/error.h"
#include "engine/engine.h"
#include "tap.h"

enum { N = 1000 }; /* parameters: not a multiple of the int8 block (256) */
static int rank, nranks;

/* f_r(x) = |x - a_r|^2 / 2 on rank r: gradient x - a_r. */
static double quad_a(int r, size_t i) { return 0.3 * (r + 1) - 0.002 * (double)(i % 97); }

static void quad_gradient(dt_trainer *t, const float *x)
{
    for (size_t i = 0; i < t->n; i++)
        t->grads[i] = x[i] - (float)quad_a(t->rank, i);
}

/* A constant gradient per rank, dyadic so that every step is exact. */
static double const_c(int r, size_t i) { return (double)((r + 1) * 8 + (int)(i % 5)) / 64.0; }

static void const_gradient(dt_trainer *t, const float *x)
{
    (void)x;
    for (size_t i = 0; i < t->n; i++)
        t->grads[i] = (float)const_c(t->rank, i);
}

static double x0(size_t i) { return (double)(int)(i % 13) / 16.0 - 0.25; }

typedef struct opts {
    const char *mode, *precision, *outer_comm, *topology, *compress, *ef, *bits;
    int64_t H, K, P, overlap, chunk, delay;
    double outer_lr, mu, merge, density, ef_decay, inner_time;
    int nesterov;
} opts;

static opts defaults(void)
{
    return (opts){ .mode = "diloco", .precision = "fp32", .outer_comm = "allreduce",
                   .topology = "auto", .compress = "none", .ef = "auto", .bits = "4", .H = 4,
                   .P = 1, .chunk = 64, .outer_lr = 1.0, .density = 0.05, .ef_decay = 1.0,
                   .nesterov = 1 };
}

static void make_trainer(dt_trainer *t, dt_config *cfg, const opts *o,
                         void (*grad)(dt_trainer *, const float *), float lr)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->algorithm.mode, sizeof cfg->algorithm.mode, "%s", o->mode);
    snprintf(cfg->algorithm.topology, sizeof cfg->algorithm.topology, "%s", o->topology);
    cfg->algorithm.peers = 1;
    cfg->diloco.inner_steps = o->H;
    cfg->diloco.sync_steps = o->K;
    cfg->diloco.outer_lr = o->outer_lr;
    cfg->diloco.outer_momentum = o->mu;
    cfg->diloco.nesterov = o->nesterov;
    cfg->diloco.fragments = o->P;
    cfg->diloco.overlap = o->overlap;
    cfg->diloco.merge = o->merge;
    snprintf(cfg->diloco.error_feedback, sizeof cfg->diloco.error_feedback, "%s", o->ef);
    cfg->diloco.ef_decay = o->ef_decay;
    snprintf(cfg->diloco.compress, sizeof cfg->diloco.compress, "%s", o->compress);
    cfg->diloco.density = o->density;
    cfg->diloco.chunk = o->chunk;
    snprintf(cfg->diloco.bits, sizeof cfg->diloco.bits, "%s", o->bits);
    cfg->diloco.delay = o->delay;
    cfg->diloco.inner_time = o->inner_time;
    snprintf(cfg->diloco.precision, sizeof cfg->diloco.precision, "%s", o->precision);
    snprintf(cfg->diloco.outer_comm, sizeof cfg->diloco.outer_comm, "%s", o->outer_comm);
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->comm = MPI_COMM_WORLD;
    t->rank = rank;
    t->nranks = nranks;
    t->n = N;
    t->params = dt_falloc(N);
    t->grads = dt_falloc(N);
    for (size_t i = 0; i < N; i++)
        t->params[i] = (float)x0(i); /* replicas start equal, as the runtime's broadcast gives */
    if (optim_init(&t->opt, &optim_sgd, cfg, N, NULL, 0, NULL) != 0)
        DT_FATAL("%s", dt_err_msg());
    t->opt.momentum = t->opt.weight_decay = 0.0f; /* plain SGD */
    t->opt.nesterov = 0;
    t->lr = lr;
    t->meter.weight = 1.0f;
    t->gradient_fn = grad;
    t->tp = transport_mpi_create(MPI_COMM_WORLD);
    t->algo = algo_find(o->mode);
    if (!t->algo || t->algo->check(cfg, nranks) != 0)
        DT_FATAL("%s", dt_err_msg());
    if (t->algo->variant && t->algo->variant(cfg)) /* inner_time > 0: the timed table */
        t->algo = t->algo->variant(cfg);
    if (t->algo->setup)
        t->algo->setup(t);
}

static void free_trainer(dt_trainer *t)
{
    if (t->algo->teardown)
        t->algo->teardown(t);
    free(t->params);
    free(t->grads);
    optim_free(&t->opt, NULL);
    transport_free(t->tp);
}

static void run_steps(dt_trainer *t, int64_t steps)
{
    for (int64_t s = 0; s < steps; s++) {
        t->algo->step(t);
        t->step++;
    }
}

/* The checkpoint array `name` of the algorithm (NULL: none). */
static float *state_array(dt_trainer *t, const char *name)
{
    dt_ckpt_array a[8];
    int na = t->algo->state(t, a, 8);
    for (int k = 0; k < na; k++)
        if (!strcmp(a[k].name, name))
            return a[k].data;
    return NULL;
}

static double max_all(double v)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return v;
}

/* 1 if x (n) is bit for bit the same on every rank. */
static int identical(const float *x, size_t n)
{
    float *r0 = dt_falloc(n);
    memcpy(r0, x, n * sizeof *x);
    MPI_CHECK(MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD));
    int same = memcmp(r0, x, n * sizeof *x) == 0, all;
    MPI_CHECK(MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    free(r0);
    return all;
}

/* ---- wire formats -------------------------------------------------------- */

static void test_quant(void)
{
    const size_t n = 1000;
    float *x = dt_falloc(n), *y = dt_falloc(n), *wire = dt_falloc(n + 8);
    uint64_t s = 12345;
    for (size_t i = 0; i < n; i++) { /* magnitudes over 12 decades, some zeros */
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        x[i] = i % 37 == 0 ? 0.0f : (float)((u - 0.5) * pow(10.0, (double)(i % 12) - 6));
    }
    quant_encode(QUANT_BF16, x, n, wire);
    quant_decode(QUANT_BF16, wire, n, y);
    double worst = 0;
    int exact_zero = 1;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)x[i] - y[i]) / fmax(fabs((double)x[i]), 1e-300));
        exact_zero &= x[i] != 0.0f || y[i] == 0.0f;
    }
    CHECK(worst <= 1.0 / 256 && exact_zero,
          "bf16: per-element relative error %.3g <= 2^-8 = %.3g, zeros stay zero", worst,
          1.0 / 256);
    CHECK(quant_words(QUANT_BF16, n) * 4 == 2 * n, "bf16: %zu values in %zu bytes (1/2 of fp32)",
          n, quant_words(QUANT_BF16, n) * 4);

    quant_encode(QUANT_INT8, x, n, wire);
    quant_decode(QUANT_INT8, wire, n, y);
    double ratio = 0; /* error / (scale / 2), worst block */
    int scales_ok = 1;
    for (size_t b = 0; b * QUANT_BLOCK < n; b++) {
        size_t lo = b * QUANT_BLOCK, hi = lo + QUANT_BLOCK < n ? lo + QUANT_BLOCK : n;
        double amax = 0;
        for (size_t i = lo; i < hi; i++)
            amax = fmax(amax, fabs((double)x[i]));
        double scale = amax / 127;
        scales_ok &= fabs(wire[b] - scale) <= 1e-6 * scale;
        for (size_t i = lo; i < hi; i++)
            ratio = fmax(ratio, fabs((double)x[i] - y[i]) / (scale / 2));
    }
    CHECK(scales_ok && ratio <= 1.0 + 1e-4,
          "int8: one scale max|x| / 127 per 256 values; per-element error <= scale / 2 (worst "
          "%.4f of the bound)", ratio);
    size_t bytes = quant_words(QUANT_INT8, n) * 4;
    CHECK(bytes == n + 4 * 4, "int8: %zu values in %zu bytes (%zu codes + 4 scales; %.3f of fp32)",
          n, bytes, n, (double)bytes / (4.0 * n));
    /* round to nearest: 0.5 scale steps go to the even neighbour, never 2 steps away */
    float v[3] = { 127.0f, 0.5f, -1.5f };
    quant_encode(QUANT_INT8, v, 3, wire);
    quant_decode(QUANT_INT8, wire, 3, y);
    CHECK(y[0] == 127.0f && y[1] == 0.0f && y[2] == -2.0f,
          "int8: scale 1: 127 -> %g, 0.5 -> %g, -1.5 -> %g (nearest, ties to even)", y[0], y[1],
          y[2]);
    free(x);
    free(y);
    free(wire);
}

/* ---- the outer step ------------------------------------------------------- */

/* One outer step of H inner SGD steps on the quadratics: x_r(H) = a_r +
 * (1 - lr)^H (x0 - a_r), then theta <- x0 - lr_out (x0 - mean_r x_r(H)).
 * With lr_out 0.5 theta lands halfway between x0 and the mean of the local
 * models; the opposite sign (x_r - theta) would send it the other way. */
static void test_sign(void)
{
    opts o = defaults();
    o.H = 6;
    o.outer_lr = 0.5;
    o.mu = 0.0;
    const float lr = 0.1f;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, lr);
    run_steps(&t, o.H);
    double worst = 0, toward = 1;
    const double shrink = pow(1.0 - lr, (double)o.H);
    for (size_t i = 0; i < N; i++) {
        double mean = 0;
        for (int r = 0; r < nranks; r++)
            mean += (quad_a(r, i) + shrink * (x0(i) - quad_a(r, i))) / nranks;
        double want = x0(i) - 0.5 * (x0(i) - mean);
        worst = fmax(worst, fabs(t.params[i] - want));
        if (fabs(mean - x0(i)) > 1e-3) /* moved towards the local models */
            toward = fmin(toward, (t.params[i] - x0(i)) / (mean - x0(i)));
    }
    worst = max_all(worst);
    if (rank == 0)
        CHECK(worst < 1e-5 && fabs(toward - 0.5) < 1e-3,
              "sign: one outer step (H 6, lr_out 0.5) takes theta halfway towards the mean of "
              "the local models, theta - lr (theta - mean x_r) (max err %.2g, fraction %.4f)",
              worst, toward);
    free_trainer(&t);
}

/* Outer Nesterov SGD against its recursion, in double, over 3 outer steps:
 * b <- mu b + d; theta <- theta - lr (d + mu b); without Nesterov theta - lr b. */
static void test_outer_momentum(int nesterov)
{
    opts o = defaults();
    o.H = 3;
    o.outer_lr = 0.7;
    o.mu = 0.9;
    o.nesterov = nesterov;
    const float lr = 0.05f;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, lr);
    run_steps(&t, 3 * o.H);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < N; i++) {
        double th = x0(i), b = 0;
        for (int k = 0; k < 3; k++) {
            double d = 0, shrink = pow(1.0 - lr, (double)o.H);
            for (int r = 0; r < nranks; r++)
                d += (th - (quad_a(r, i) + shrink * (th - quad_a(r, i)))) / nranks;
            b = 0.9 * b + d;
            th -= 0.7 * (nesterov ? d + 0.9 * b : b);
        }
        worst = fmax(worst, fabs(t.params[i] - th));
        scale = fmax(scale, fabs(th - x0(i)));
    }
    worst = max_all(worst);
    if (rank == 0)
        CHECK(worst < 1e-5 * fmax(1.0, scale) && scale > 0.1,
              "outer SGD (lr 0.7, momentum 0.9, %s) over 3 outer steps of H 3 follows its "
              "recursion in double (max err %.2g, theta moved %.3f)",
              nesterov ? "nesterov" : "heavy ball", worst, scale);
    free_trainer(&t);
}

/* Outer (1, 0): theta = mean_r x_r exactly. Dyadic values make every step,
 * the sum over ranks and the division by 4 exact, so exact averaging shows
 * as equality of the bits. */
static void test_averaging_exact(void)
{
    opts o = defaults();
    o.H = 5;
    const float lr = 0.25f;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, const_gradient, lr);
    run_steps(&t, 2 * o.H + 2);
    int exact = 1;
    for (size_t i = 0; i < N; i++) {
        double mean_c = 0;
        for (int r = 0; r < nranks; r++)
            mean_c += const_c(r, i) / nranks;
        /* two averaging steps, then 2 local steps of this rank's own */
        double want = x0(i) - lr * (2 * o.H * mean_c + 2 * const_c(rank, i));
        exact &= t.params[i] == (float)want;
    }
    int all;
    MPI_CHECK(MPI_Allreduce(&exact, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0 && (nranks & (nranks - 1)) == 0)
        CHECK(all, "outer (lr 1, momentum 0) is model averaging exactly: after 2 outer steps of "
                   "H 5 and 2 local steps every value equals x0 - lr (10 mean c + 2 c_r) bit for "
                   "bit");
    free_trainer(&t);
}

/* H = 1, outer (1, 0), inner SGD without momentum equals allreduce. */
static void test_h1_allreduce(void)
{
    opts o = defaults();
    o.H = 1;
    dt_trainer a, d;
    dt_config ca, cd;
    make_trainer(&d, &cd, &o, quad_gradient, 0.1f);
    opts oa = defaults();
    oa.mode = "allreduce";
    make_trainer(&a, &ca, &oa, quad_gradient, 0.1f);
    run_steps(&d, 20);
    run_steps(&a, 20);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < N; i++) {
        worst = fmax(worst, fabs(d.params[i] - a.params[i]));
        moved = fmax(moved, fabs(a.params[i] - x0(i)));
    }
    worst = max_all(worst);
    if (rank == 0)
        CHECK(worst < 1e-6 && moved > 0.1,
              "H 1, outer (1, 0), inner SGD: 20 steps equal allreduce to float rounding (max "
              "diff %.2g, moved %.3f)", worst, moved);
    free_trainer(&d);
    free_trainer(&a);
}

/* ---- fewer bits ---------------------------------------------------------- */

/* One outer step (lr 1, momentum 0) in `prec`: theta_old - theta_new is the
 * averaged pseudo-gradient as decoded; against the exact mean in double
 * within the two quantisations' bounds (each delta_r, then the mean). */
static void test_precision(const char *prec, int64_t *bytes_out)
{
    opts o = defaults();
    o.H = 4;
    o.precision = prec;
    const float lr = 0.1f;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, lr);
    run_steps(&t, o.H - 1);
    /* the last inner step, by hand, to see each x_r before the outer step */
    float *theta = dt_falloc(N), *x = dt_falloc(N);
    memcpy(theta, state_array(&t, "diloco_outer_params"), N * sizeof(float));
    for (size_t i = 0; i < N; i++) /* x_r after step H, as SGD without momentum makes it */
        x[i] = t.params[i] - lr * (t.params[i] - (float)quad_a(rank, i));
    double *d = malloc(N * sizeof *d), *mean = malloc(N * sizeof *mean);
    for (size_t i = 0; i < N; i++)
        d[i] = (double)theta[i] - x[i];
    MPI_CHECK(MPI_Allreduce(d, mean, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    double *dmax = malloc(N * sizeof *dmax);
    for (size_t i = 0; i < N; i++)
        dmax[i] = fabs(d[i]);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, dmax, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    int64_t b0 = t.meter.bytes_sent;
    t.algo->step(&t);
    t.step++;
    *bytes_out = t.meter.bytes_sent - b0;
    double ratio = 0; /* error / bound, worst element */
    for (size_t blk = 0; blk * QUANT_BLOCK < N; blk++) {
        size_t lo = blk * QUANT_BLOCK, hi = lo + QUANT_BLOCK < N ? lo + QUANT_BLOCK : N;
        double amax_d = 0, amax_m = 0;
        for (size_t i = lo; i < hi; i++) {
            amax_d = fmax(amax_d, dmax[i]);
            amax_m = fmax(amax_m, fabs(mean[i] / nranks));
        }
        for (size_t i = lo; i < hi; i++) {
            double m = mean[i] / nranks, got = (double)theta[i] - t.params[i];
            double bound = !strcmp(prec, "bf16") ? (dmax[i] + fabs(m)) / 256
                         : !strcmp(prec, "int8") ? amax_d / 254 + amax_m / 254
                                                 : 0;
            /* + the rounding of the fp32 sums and subtractions */
            bound = bound * 1.001 + 4e-7 * (fabs(theta[i]) + dmax[i]) + 1e-9;
            ratio = fmax(ratio, fabs(got - m) / bound);
        }
    }
    ratio = max_all(ratio);
    int same = identical(t.params, N);
    if (rank == 0) {
        CHECK(ratio <= 1.0, "%s: the averaged pseudo-gradient within the bound of its two "
                            "quantisations (worst %.3f of the bound)", prec, ratio);
        CHECK(same, "%s: every rank holds bit-identical parameters after the outer step", prec);
    }
    free(theta);
    free(x);
    free(d);
    free(mean);
    free(dmax);
    free_trainer(&t);
}

static void test_bytes(void)
{
    int64_t b32, b16, b8;
    test_precision("fp32", &b32);
    test_precision("bf16", &b16);
    test_precision("int8", &b8);
    if (rank == 0) {
        CHECK(b32 == N * 4 && b16 * 2 == b32,
              "bytes per outer step: fp32 %lld, bf16 %lld (1/2)", (long long)b32, (long long)b16);
        CHECK(b8 * 4 >= b32 && (double)b8 / b32 < 0.27,
              "bytes per outer step: int8 %lld = %.4f of fp32 (codes + one scale per 256 per "
              "chunk)", (long long)b8, (double)b8 / b32);
    }
}

/* Error feedback (int8, overlap 1 so the sent vector is kept): after the
 * first exchange starts, residual = sent - decode(encode(sent)) bit for bit;
 * the next pseudo-gradient sent is (theta - x) + residual. */
static void test_error_feedback(void)
{
    opts o = defaults();
    o.H = 4;
    o.overlap = 1;
    o.precision = "int8";
    o.ef = "true";
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, 0.1f);
    run_steps(&t, o.H); /* the exchange of the first outer step has started */
    const float *sent = state_array(&t, "diloco_sent"), *err = state_array(&t, "diloco_residual");
    float *wire = dt_falloc(N + 64), *dec = dt_falloc(N), *err1 = dt_falloc(N);
    /* the codes are per chunk of whole blocks; blocks are the same 256-value blocks */
    quant_encode(QUANT_INT8, sent, N, wire);
    quant_decode(QUANT_INT8, wire, N, dec);
    int exact = 1, nonzero = 0;
    for (size_t i = 0; i < N; i++) {
        exact &= err[i] == sent[i] - dec[i];
        nonzero |= err[i] != 0.0f;
    }
    memcpy(err1, err, N * sizeof(float));
    run_steps(&t, o.H); /* completes the first, starts the second */
    sent = state_array(&t, "diloco_sent");
    const float *theta = state_array(&t, "diloco_outer_params");
    int carried = 1;
    for (size_t i = 0; i < N; i++)
        carried &= sent[i] == (theta[i] - t.params[i]) + err1[i];
    int all[2] = { exact && nonzero, carried };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, all, 2, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK(all[0], "error feedback: the residual is what the int8 codes left out, bit for bit");
        CHECK(all[1], "error feedback: the next pseudo-gradient sent is (theta - x) + residual");
    }
    free(wire);
    free(dec);
    free(err1);
    free_trainer(&t);
}

/* ---- top-k ---------------------------------------------------------------- */

static dt_tkc tkc_of(const opts *o) { return (dt_tkc){ (size_t)o->chunk, o->density, atoi(o->bits) }; }

/* Top-k (overlap 1, so the vector sent is kept, its outer step one step
 * later), outer (lr 1, momentum 0): theta moves down by exactly
 * (1/R) sum_r decode(codes of v_r), added in rank order, computed here from
 * every rank's v_r; theta and x bit-identical on every rank; the residual is
 * v - decode(codes of v) bit for bit; the rank counts its own codes once. */
static void test_topk_exchange(const char *bits)
{
    opts o = defaults();
    o.overlap = 1;
    o.compress = "topk";
    o.bits = bits;
    o.mu = 0.0;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, 0.1f);
    run_steps(&t, o.H - 1);
    const int64_t b0 = t.meter.bytes_sent;
    run_steps(&t, 1); /* posts the first exchange */
    const int64_t bytes = t.meter.bytes_sent - b0;
    const dt_tkc f = tkc_of(&o);
    const size_t W = tkc_words(&f, N);
    const float *v = state_array(&t, "diloco_sent"), *err = state_array(&t, "diloco_residual");
    float *all = dt_falloc((size_t)nranks * N), *wire = dt_falloc(W), *mean = dt_falloc(N),
          *dec = dt_falloc(N), *theta = dt_falloc(N);
    memcpy(theta, state_array(&t, "diloco_outer_params"), N * sizeof(float));
    MPI_CHECK(MPI_Allgather(v, N, MPI_FLOAT, all, N, MPI_FLOAT, MPI_COMM_WORLD));
    for (int r = 0; r < nranks; r++) {
        tkc_encode(&f, all + (size_t)r * N, N, wire);
        tkc_decode_add(&f, wire, N, mean);
    }
    for (size_t i = 0; i < N; i++)
        mean[i] *= 1.0f / (float)nranks;
    tkc_encode(&f, v, N, wire);
    tkc_decode(&f, wire, N, dec);
    int resid = 1, sparse = 1;
    for (size_t i = 0; i < N; i++)
        resid &= err[i] == v[i] - dec[i];
    for (size_t lo = 0; lo < N; lo += f.chunk) { /* at most R k values per chunk moved */
        size_t len = N - lo < f.chunk ? N - lo : f.chunk, nz = 0;
        for (size_t i = lo; i < lo + len; i++)
            nz += mean[i] != 0.0f;
        sparse &= nz >= tkc_k(&f, len) && nz <= (size_t)nranks * tkc_k(&f, len);
    }
    run_steps(&t, 1); /* completes it */
    const float *th = state_array(&t, "diloco_outer_params");
    int exact = 1;
    for (size_t i = 0; i < N; i++)
        exact &= th[i] == theta[i] - mean[i];
    int flags[3] = { exact && sparse, resid, bytes == (int64_t)(4 * W) };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, flags, 3, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    int same = identical(th, N) && identical(t.params, N) && !memcmp(th, t.params, N * 4);
    if (rank == 0) {
        CHECK(flags[0] && same,
              "topk %s-bit: the outer step is (1/R) sum_r decode(codes of rank r) in rank order "
              "bit for bit (1 to R k values of each chunk move); theta and x identical on "
              "every rank", bits);
        CHECK(flags[1], "topk %s-bit: the residual is v - decode(codes of v) bit for bit", bits);
        CHECK(flags[2] && 4 * W < N * 4 / 20,
              "topk %s-bit: a rank counts its own codes once: %lld bytes for %d values "
              "(%.2f %% of fp32)", bits, (long long)bytes, (int)N, 100.0 * (double)bytes / (4.0 * N));
    }
    free(all);
    free(wire);
    free(mean);
    free(dec);
    free(theta);
    free_trainer(&t);
}

/* Error feedback with top-k, beta = 1: over 6 outer steps, the values the
 * codes carried plus the final residual add up to the sum of the
 * pseudo-gradients theta - x (each from the rank's last inner step, done
 * here by hand), to float rounding; the residual itself is large, so a lost
 * residual would show. Then beta = 0.5: the next vector sent is
 * (theta - x) + 0.5 e bit for bit. */
static void test_topk_feedback(void)
{
    opts o = defaults();
    o.overlap = 1;
    o.compress = "topk";
    o.bits = "2";
    o.mu = 0.0;
    const float lr = 0.1f;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, lr);
    const dt_tkc f = tkc_of(&o);
    float *wire = dt_falloc(tkc_words(&f, N)), *dec = dt_falloc(N);
    double *sum_delta = dt_calloc(N, sizeof(double)), *sum_sent = dt_calloc(N, sizeof(double));
    for (int k = 0; k < 6; k++) {
        run_steps(&t, o.H - 1);
        const float *theta = state_array(&t, "diloco_outer_params");
        for (size_t i = 0; i < N; i++) { /* x after the last inner step, as SGD takes it */
            float x = t.params[i] - lr * (t.params[i] - (float)quad_a(rank, i));
            sum_delta[i] += (double)theta[i] - x;
        }
        run_steps(&t, 1); /* posts */
        tkc_encode(&f, state_array(&t, "diloco_sent"), N, wire);
        tkc_decode(&f, wire, N, dec);
        for (size_t i = 0; i < N; i++)
            sum_sent[i] += dec[i];
    }
    const float *err = state_array(&t, "diloco_residual");
    double gap = 0, resid = 0, total = 0;
    for (size_t i = 0; i < N; i++) {
        gap = fmax(gap, fabs(sum_sent[i] + err[i] - sum_delta[i]));
        resid = fmax(resid, fabs(err[i]));
        total = fmax(total, fabs(sum_delta[i]));
    }
    gap = max_all(gap);
    resid = max_all(resid);
    total = max_all(total);
    if (rank == 0)
        CHECK(gap < 1e-5 * total && resid > 1e-2 * total,
              "topk 2-bit, error feedback (beta 1), 6 outer steps: decoded + residual = sum of "
              "the pseudo-gradients (max gap %.2g, residual up to %.3g, sum up to %.3g)", gap,
              resid, total);
    free_trainer(&t);

    o.ef_decay = 0.5;
    make_trainer(&t, &cfg, &o, quad_gradient, lr);
    run_steps(&t, o.H); /* the first exchange is posted */
    float *e1 = dt_falloc(N);
    memcpy(e1, state_array(&t, "diloco_residual"), N * sizeof(float));
    run_steps(&t, o.H); /* completed, the second posted */
    const float *sent = state_array(&t, "diloco_sent"), *theta = state_array(&t, "diloco_outer_params");
    int decayed = 1, nonzero = 0;
    for (size_t i = 0; i < N; i++) {
        float v = theta[i] - t.params[i];
        v += 0.5f * e1[i];
        decayed &= sent[i] == v;
        nonzero |= e1[i] != 0.0f;
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &decayed, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(decayed && nonzero,
              "topk, ef_decay 0.5: the next vector sent is (theta - x) + 0.5 e bit for bit");
    free(e1);
    free(wire);
    free(dec);
    free(sum_delta);
    free(sum_sent);
    free_trainer(&t);
}

/* ---- the delayed outer step ------------------------------------------------ */

/* delay = 1 in double with constant gradients: at every multiple c of H, the
 * exchange posted at c - H completes (theta steps on the mean of what was
 * sent, x <- x - (x_sent - theta)), then theta - x is sent and x_sent <- x.
 * top-k: theta the same bits on every rank and x apart (each keeps its own
 * progress), the schedule's shape without its values. */
static void test_delay(const char *compress, int64_t extra)
{
    opts o = defaults();
    o.delay = 1;
    o.mu = 0.5;
    o.outer_lr = 0.8;
    o.compress = compress;
    const float lr = 0.25f;
    const int64_t steps = 4 * o.H + extra;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, const_gradient, lr);
    run_steps(&t, steps);
    double worst = 0, moved = 0;
    double *x = malloc((size_t)nranks * sizeof *x), *sent = malloc((size_t)nranks * sizeof *sent),
           *xs = malloc((size_t)nranks * sizeof *xs), *final = malloc(N * sizeof *final);
    float *before = dt_falloc(N);
    for (size_t i = 0; i < N; i++) {
        double th = x0(i), b = 0;
        int pending = 0;
        for (int r = 0; r < nranks; r++)
            x[r] = x0(i);
        for (int64_t c = 1; c <= steps; c++) {
            for (int r = 0; r < nranks; r++)
                x[r] -= lr * const_c(r, i);
            if (c % o.H != 0)
                continue;
            if (pending) {
                double d = 0;
                for (int r = 0; r < nranks; r++)
                    d += sent[r] / nranks;
                b = o.mu * b + d;
                th -= o.outer_lr * (d + o.mu * b);
                for (int r = 0; r < nranks; r++)
                    x[r] = x[r] - xs[r] + th;
            }
            for (int r = 0; r < nranks; r++) {
                sent[r] = th - x[r];
                xs[r] = x[r];
            }
            pending = 1;
        }
        worst = fmax(worst, fabs(t.params[i] - x[rank]));
        moved = fmax(moved, fabs(x[rank] - x0(i)));
        /* the end's drain: the exchange in flight completes and applies */
        double d = 0;
        for (int r = 0; r < nranks; r++)
            d += sent[r] / nranks;
        b = o.mu * b + d;
        th -= o.outer_lr * (d + o.mu * b);
        final[i] = x[rank] - xs[rank] + th;
        before[i] = t.params[i];
    }
    worst = max_all(worst);
    const float *theta = state_array(&t, "diloco_outer_params");
    int same_theta = identical(theta, N), same_x = identical(t.params, N);
    int in_flight = state_array(&t, "diloco_x_sent") != NULL && state_array(&t, "diloco_sent");
    if (rank == 0 && extra > 0) {
        if (!strcmp(compress, "none"))
            CHECK(worst < 1e-5 * fmax(1.0, moved) && same_theta && !same_x && in_flight,
                  "delay 1, fp32: %lld steps of H 4 follow the delayed schedule in double (max "
                  "err %.2g, moved %.2f); theta identical, x apart", (long long)steps, worst,
                  moved);
        else
            CHECK(same_theta && !same_x && in_flight && moved > 0.1,
                  "delay 1, topk: theta identical on every rank after 3 delayed outer steps, x "
                  "apart (moved %.2f)", moved);
    }
    /* the budget spent: finish applies the last exchange */
    float *theta_before = dt_falloc(N);
    memcpy(theta_before, theta, N * sizeof(float));
    t.algo->finish(&t);
    double fin = 0;
    for (size_t i = 0; i < N; i++)
        fin = fmax(fin, fabs(t.params[i] - final[i]));
    fin = max_all(fin);
    const float *local = state_array(&t, "diloco_x_local"); /* after the drain: x before it */
    int kept = !memcmp(local, before, N * sizeof(float)) &&
               !memcmp(state_array(&t, "diloco_outer_params"), theta_before, N * sizeof(float));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &kept, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    int equal_x = identical(t.params, N);
    if (rank == 0) {
        if (!strcmp(compress, "none"))
            CHECK(fin < 1e-5 * fmax(1.0, moved) && kept && equal_x == (extra == 0),
                  "delay 1, fp32, budget %lld (%lld steps after the last post): the end applies "
                  "the exchange in flight as the schedule in double does (max err %.2g); x %s "
                  "on every rank; theta and x_local kept for the checkpoint", (long long)steps,
                  (long long)extra, fin, extra == 0 ? "identical" : "apart");
        else
            CHECK(kept && equal_x == (extra == 0),
                  "delay 1, topk, budget %lld: the end applies the exchange in flight; x %s on "
                  "every rank", (long long)steps, extra == 0 ? "identical" : "apart");
    }
    free(theta_before);
    free(final);
    free(before);
    free(x);
    free(sent);
    free(xs);
    free_trainer(&t);
}

/* ---- time-bounded loops ------------------------------------------------------ */

/* Constant gradients; rank r counts 16 (r + 1) samples per step. */
static void const_gradient_counted(dt_trainer *t, const float *x)
{
    const_gradient(t, x);
    t->meter.images += 16 * (t->rank + 1);
}

/* inner_time 1 ns: every loop is one step, and rank r weighs n_r = 16 (r + 1).
 * With outer (1, 0) each outer step is theta <- theta - sum_r n_r delta_r /
 * sum_r n_r, delta_r = lr c_r (fp32 against double); every precision and
 * top-k leave the same bytes on every rank. */
static void test_timed(const char *prec, const char *compress)
{
    opts o = defaults();
    o.inner_time = 1e-9;
    o.mu = 0.0;
    o.precision = prec;
    o.compress = compress;
    if (!strcmp(prec, "int8"))
        o.ef = "true";
    const float lr = 0.25f;
    const int loops = 3;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, const_gradient_counted, lr);
    int timed = t.algo->async && t.algo->progress;
    run_steps(&t, loops);
    double worst = 0, moved = 0, total = 0;
    for (int r = 0; r < nranks; r++)
        total += 16.0 * (r + 1);
    for (size_t i = 0; i < N; i++) {
        double th = x0(i);
        for (int k = 0; k < loops; k++) {
            double d = 0;
            for (int r = 0; r < nranks; r++)
                d += 16.0 * (r + 1) * (lr * const_c(r, i)) / total;
            th -= d;
        }
        worst = fmax(worst, fabs(t.params[i] - th));
        moved = fmax(moved, fabs(th - x0(i)));
    }
    worst = max_all(worst);
    int same = identical(t.params, N) && identical(state_array(&t, "diloco_outer_params"), N);
    if (rank == 0) {
        if (!strcmp(prec, "fp32") && !strcmp(compress, "none"))
            CHECK(timed && same && worst < 1e-6 * fmax(1.0, moved) && moved > 0.1,
                  "inner_time, fp32: %d outer steps are sum n_r delta_r / sum n_r (n_r = 16 (r "
                  "+ 1)) to %.2g (moved %.2f); the same bytes on every rank", loops, worst,
                  moved);
        else
            CHECK(timed && same && moved > 0.1,
                  "inner_time, %s%s: weighted outer steps leave the same bytes on every rank "
                  "(off the fp32 mean by %.2g)", prec, strcmp(compress, "topk") ? "" : " topk",
                  worst);
    }
    free_trainer(&t);
}

/* ---- streaming and gossip ------------------------------------------------- */

/* The streaming schedule in double with constant gradients: after local step
 * c, fragment p (start s_p = (p + 1) H / P mod H) sends theta - x_r when
 * c = s_p mod H and takes its outer step and merge overlap steps later. */
static void test_streaming(int64_t P, int64_t ov, double alpha, const char *prec)
{
    opts o = defaults();
    o.H = 8;
    o.P = P;
    o.overlap = ov;
    o.merge = alpha;
    o.mu = 0.5;
    o.outer_lr = 0.8;
    o.precision = prec;
    const float lr = 0.25f;
    const int64_t steps = 3 * o.H + 3;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, const_gradient, lr);
    run_steps(&t, steps);
    double worst = 0, spread = 0;
    double *x = malloc((size_t)nranks * sizeof *x), *sent = malloc((size_t)nranks * sizeof *sent);
    for (int64_t p = 0; p < P; p++)
    for (size_t i = (size_t)p * N / (size_t)P; i < (size_t)(p + 1) * N / (size_t)P; i++) {
        const int64_t start = ((p + 1) * o.H / P) % o.H;
        double th = x0(i), b = 0;
        for (int r = 0; r < nranks; r++)
            x[r] = x0(i);
        for (int64_t c = 1; c <= steps; c++) {
            for (int r = 0; r < nranks; r++)
                x[r] -= lr * const_c(r, i);
            if (c % o.H == start)
                for (int r = 0; r < nranks; r++)
                    sent[r] = th - x[r];
            if (c - ov >= 1 && (c - ov) % o.H == start) {
                double d = 0;
                for (int r = 0; r < nranks; r++)
                    d += sent[r] / nranks;
                b = o.mu * b + d;
                th -= o.outer_lr * (d + o.mu * b);
                for (int r = 0; r < nranks; r++)
                    x[r] = (1 - alpha) * th + alpha * x[r];
            }
        }
        worst = fmax(worst, fabs(t.params[i] - x[rank]));
        spread = fmax(spread, fabs(x[rank] - x0(i)));
    }
    worst = max_all(worst);
    double tol = !strcmp(prec, "fp32") ? 1e-5 : 2e-2;
    if (rank == 0)
        CHECK(worst < tol * fmax(1.0, spread),
              "streaming: %lld fragment(s), overlap %lld, merge %.2f, %s: %lld steps of H 8 follow "
              "the schedule in double (max err %.2g, moved %.2f)", (long long)P, (long long)ov,
              alpha, prec, (long long)steps, worst, spread);
    free(x);
    free(sent);
    free_trainer(&t);
}

/* outer_comm = sgp on the complete graph: every rank keeps and sends 1/n of
 * (w delta, w), so the mixed pseudo-gradient is the mean, as the allreduce. */
static void test_gossip_complete(void)
{
    opts o = defaults();
    o.H = 3;
    o.mu = 0.9;
    o.outer_lr = 0.7;
    dt_trainer a, g;
    dt_config ca, cg;
    make_trainer(&a, &ca, &o, quad_gradient, 0.1f);
    o.outer_comm = "sgp";
    o.topology = "complete";
    make_trainer(&g, &cg, &o, quad_gradient, 0.1f);
    run_steps(&a, 4 * o.H);
    run_steps(&g, 4 * o.H);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < N; i++) {
        worst = fmax(worst, fabs(a.params[i] - g.params[i]));
        moved = fmax(moved, fabs(a.params[i] - x0(i)));
    }
    worst = max_all(worst);
    if (rank == 0)
        CHECK(worst < 1e-5 && moved > 0.1,
              "outer_comm sgp on the complete graph equals the allreduce variant over 4 outer "
              "steps (max diff %.2g, moved %.3f; weight %g)", worst, moved, (double)g.meter.weight);
    /* on the exponential graph (1 peer) the ranks' models differ but the
     * push-sum weights still sum to the ranks */
    free_trainer(&a);
    free_trainer(&g);
    o.topology = "exponential";
    make_trainer(&g, &cg, &o, quad_gradient, 0.1f);
    run_steps(&g, 4 * o.H);
    double w = g.meter.weight, sw;
    MPI_CHECK(MPI_Allreduce(&w, &sw, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    int same = identical(g.params, N);
    if (rank == 0)
        CHECK(fabs(sw - nranks) < 1e-5 && !same,
              "outer_comm sgp, exponential graph: push-sum weights sum to %d (%.6f), replicas "
              "differ", nranks, sw);
    free_trainer(&g);
}

static void zero_gradient(dt_trainer *t, const float *x)
{
    (void)x;
    memset(t->grads, 0, t->n * sizeof *t->grads);
}

/* The largest distance of a rank's x (N) from the ranks' mean, over ranks. */
static double spread(const float *x)
{
    double *m = dt_calloc(N, sizeof *m), worst = 0;
    for (size_t i = 0; i < N; i++)
        m[i] = x[i];
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, m, (int)N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (size_t i = 0; i < N; i++)
        worst = fmax(worst, fabs(x[i] - m[i] / nranks));
    free(m);
    return max_all(worst);
}

/* outer_comm = sgp pulls the ranks together: with zero gradients (the local
 * phase moves nothing) and outer parameters that start apart, the gossip
 * outer steps shrink their distance geometrically and keep their mean; a
 * scheme that mixed only the pseudo-gradients (all zero here) would leave
 * them apart for good. */
static void test_gossip_consensus(void)
{
    for (int nesterov = 0; nesterov <= 1; nesterov++) {
        opts o = defaults();
        o.H = 2;
        o.outer_comm = "sgp";
        o.topology = "exponential";
        o.outer_lr = nesterov ? 0.7 : 1.0;
        o.mu = nesterov ? 0.9 : 0.0;
        o.nesterov = nesterov;
        dt_trainer g;
        dt_config cg;
        make_trainer(&g, &cg, &o, zero_gradient, 0.1f);
        for (size_t i = 0; i < N; i++) /* apart: theta is taken from x at step 0 */
            g.params[i] += (float)(rank - 0.5 * (nranks - 1)) / 4.0f;
        double mean0 = 0, mean1 = 0;
        for (size_t i = 0; i < N; i++)
            mean0 += g.params[i];
        const double before = spread(g.params);
        run_steps(&g, 40 * o.H);
        const double after = spread(g.params);
        for (size_t i = 0; i < N; i++)
            mean1 += g.params[i];
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mean0, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mean1, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        if (rank == 0)
            CHECK(before > 0.3 && after < 1e-3 * before &&
                      fabs(mean1 - mean0) < 1e-3 * fabs(mean0) + 1e-3,
                  "outer_comm sgp, exponential graph, zero gradients, outer lr %g momentum %g: "
                  "40 outer steps pull ranks that start apart together (distance from the "
                  "mean %.3f -> %.2g) and keep the mean (sum %.5f -> %.5f)",
                  o.outer_lr, o.mu, before, after, mean0, mean1);
        free_trainer(&g);
    }
}

/* Replicas after outer steps with the warm-up, bf16, streaming P = 1. */
static void test_replicas(void)
{
    opts o = defaults();
    o.H = 5;
    o.K = 3;
    o.precision = "bf16";
    o.mu = 0.9;
    o.outer_lr = 0.7;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, &o, quad_gradient, 0.1f);
    int ok = 1, claimed = 0, differ_mid = 0;
    for (int s = 0; s < 3 + 3 * 5; s++) {
        t.algo->step(&t);
        t.step++;
        int eq = identical(t.params, N);
        if (t.algo->replicas_equal(&t)) {
            ok &= eq;
            claimed++;
        } else {
            differ_mid |= !eq;
        }
    }
    if (rank == 0)
        CHECK(ok && claimed == 3 + 3 && differ_mid,
              "replicas bit-identical at each of the %d steps replicas_equal names (3 warm-up, 3 "
              "outer), different in between", claimed);
    free_trainer(&t);
}

static void test_check(void)
{
    dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.diloco.precision, sizeof cfg.diloco.precision, "fp32");
    snprintf(cfg.diloco.outer_comm, sizeof cfg.diloco.outer_comm, "allreduce");
    snprintf(cfg.diloco.compress, sizeof cfg.diloco.compress, "none");
    snprintf(cfg.diloco.error_feedback, sizeof cfg.diloco.error_feedback, "auto");
    cfg.diloco.inner_steps = 10;
    cfg.diloco.fragments = 3;
    const dt_algo *a = algo_find("diloco");
    int rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.fragments = 3 does not divide"),
          "check: fragments that do not divide inner_steps: %s", dt_err_msg());
    cfg.diloco.fragments = 2;
    cfg.diloco.overlap = 5;
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.overlap = 5"),
          "check: overlap >= H / P: %s", dt_err_msg());
    cfg.diloco.overlap = 0;
    snprintf(cfg.diloco.error_feedback, sizeof cfg.diloco.error_feedback, "true");
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "error_feedback"), "check: error feedback with fp32: %s",
          dt_err_msg());
    snprintf(cfg.diloco.compress, sizeof cfg.diloco.compress, "topk");
    CHECK(a->check(&cfg, 4) == 0, "check: error feedback with topk over fp32 accepted");
    snprintf(cfg.diloco.precision, sizeof cfg.diloco.precision, "int8");
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.precision = int8 with diloco.compress = topk"),
          "check: topk with int8: %s", dt_err_msg());
    snprintf(cfg.diloco.precision, sizeof cfg.diloco.precision, "fp32");
    cfg.diloco.delay = 1;
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.delay = 1 takes diloco.fragments = 1"),
          "check: delay with 2 fragments: %s", dt_err_msg());
    cfg.diloco.delay = 0;
    cfg.diloco.fragments = 1;
    snprintf(cfg.diloco.outer_comm, sizeof cfg.diloco.outer_comm, "sgp");
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.compress = topk with diloco.outer_comm = sgp"),
          "check: topk with sgp: %s", dt_err_msg());
    snprintf(cfg.diloco.compress, sizeof cfg.diloco.compress, "none");
    snprintf(cfg.diloco.error_feedback, sizeof cfg.diloco.error_feedback, "auto");
    cfg.diloco.fragments = 2;
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "outer_comm = sgp takes"),
          "check: sgp with fragments: %s", dt_err_msg());
    cfg.diloco.inner_time = 2.5;
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.inner_time = 2.5 takes diloco.fragments = 1"),
          "check: inner_time with fragments and sgp: %s", dt_err_msg());
    cfg.diloco.fragments = 1;
    snprintf(cfg.diloco.outer_comm, sizeof cfg.diloco.outer_comm, "allreduce");
    CHECK(a->check(&cfg, 4) == 0, "check: inner_time with one fragment over allreduce accepted");
    cfg.diloco.delay = 1;
    rc = a->check(&cfg, 4);
    CHECK(rc != 0 && strstr(dt_err_msg(), "diloco.inner_time = 2.5 takes") &&
              strstr(dt_err_msg(), "diloco.delay = 0"),
          "check: inner_time with delay: %s", dt_err_msg());
}

int main(int argc, char **argv)
{
    int provided;
    MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    if (rank == 0) {
        test_quant();
        test_check();
    }
    test_sign();
    test_outer_momentum(1);
    test_outer_momentum(0);
    test_averaging_exact();
    test_h1_allreduce();
    test_bytes();
    test_error_feedback();
    test_replicas();
    test_streaming(1, 0, 0.0, "fp32");
    test_streaming(2, 0, 0.0, "fp32");
    test_streaming(2, 1, 0.0, "fp32");
    test_streaming(4, 1, 0.5, "fp32");
    test_streaming(2, 3, 0.25, "bf16");
    test_gossip_complete();
    test_gossip_consensus();
    test_topk_exchange("2");
    test_topk_exchange("4");
    test_topk_exchange("8");
    test_topk_feedback();
    test_delay("none", 2);
    test_delay("none", 0);
    test_delay("topk", 2);
    test_delay("topk", 0);
    test_timed("fp32", "none");
    test_timed("int8", "none");
    test_timed("fp32", "topk");
    int rc = rank == 0 ? tap_done() : 0;
    MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    return rc;
}
