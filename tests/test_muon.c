/* Muon (optim/muon.h) and its Newton-Schulz orthogonalisation
 * (optim/newton_schulz.h): against PyTorch on a fixed gradient sequence
 * (tests/fixtures/muon_reference.txt, written by tests/muon_reference.py on
 * the problem rebuilt here), and against the iteration's defining
 * properties. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "optim/muon.h"
#include "optim/newton_schulz.h"
#include "optim/optim.h"
#include "tap.h"

/* The problem of tests/muon_reference.py, C = 8: E (12, 8) AdamW decayed,
 * QKV (24, 8) Muon as three (8, 8), QB (24) AdamW, FC (32, 8) Muon, PR
 * (8, 32) Muon, G (8) AdamW. */
enum { C = 8, NT = 6, STEPS = 10, ZERO_STEP = 4 };
static const struct { const char *name; int rows, cols, mats; } ref_tensors[NT] = {
    { "E", 12, C, 0 },  { "QKV", 3 * C, C, 3 }, { "QB", 3 * C, 0, 0 },
    { "FC", 4 * C, C, 1 }, { "PR", C, 4 * C, 1 }, { "G", C, 0, 0 },
};
enum { N = 12 * C + 3 * C * C + 3 * C + 4 * C * C + 4 * C * C + C }; /* 832 */

typedef struct ref_set {
    double lr, momentum;
    int nesterov;
    double wd, adamw_lr, beta1, beta2, eps;
} ref_set;
static const ref_set ref_sets[3] = { { 0 },
                                     { 0.02, 0.95, 1, 0.1, 3e-4, 0.9, 0.95, 1e-8 },
                                     { 0.05, 0.9, 0, 0.0, 1e-3, 0.8, 0.999, 1e-6 } };

static void ref_x0(float *x)
{
    for (int i = 0; i < N; i++)
        x[i] = (float)(((i * 37 + 11) % 201 - 100) / 100.0);
}

static void ref_grad(int k, float *g)
{
    const double s = pow(10.0, (k % 5) - 2);
    for (int64_t i = 0; i < N; i++)
        g[i] = k == ZERO_STEP
                   ? 0.0f
                   : (float)((double)((31 * i * i + 7919 * i + 104729 * (int64_t)k) % 2001 -
                                      1000) / 1000.0 * s);
}

/* The tensor table as the models write it (core/tensor_view.h). */
static int ref_views(dt_tensor_view *tv)
{
    size_t at = 0;
    for (int t = 0; t < NT; t++) {
        const size_t r = (size_t)ref_tensors[t].rows, c = (size_t)ref_tensors[t].cols;
        const int m = ref_tensors[t].mats;
        tv[t] = (dt_tensor_view){ 0 };
        snprintf(tv[t].name, sizeof tv[t].name, "%s", ref_tensors[t].name);
        tv[t].offset = at;
        tv[t].count = r * (c ? c : 1);
        tv[t].ndim = c ? 2 : 1;
        if (m) {
            tv[t].mats = m;
            tv[t].rows = r / (size_t)m;
            tv[t].cols = c;
        }
        at += tv[t].count;
    }
    return NT;
}

/* tests/fixtures/muon_reference.txt: under $top_srcdir (make check), beside
 * the binary's directory, or from the working directory */
static FILE *ref_open(const char *argv0)
{
    const char *rel = "tests/fixtures/muon_reference.txt";
    char path[4096];
    const char *top = getenv("top_srcdir");
    if (top && *top) {
        snprintf(path, sizeof path, "%s/%s", top, rel);
        FILE *f = fopen(path, "r");
        if (f)
            return f;
    }
    const char *slash = strrchr(argv0, '/');
    if (slash) {
        snprintf(path, sizeof path, "%.*s/../%s", (int)(slash - argv0), argv0, rel);
        FILE *f = fopen(path, "r");
        if (f)
            return f;
    }
    return fopen(rel, "r");
}

/* distance in units in the last place between two floats */
static int64_t ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0)
        ia = INT32_MIN - ia;
    if (ib < 0)
        ib = INT32_MIN - ib;
    return llabs((long long)ia - ib);
}

/* The fixture's line starting with `key` ("muon 1 10 x", "ns 32 8"): n floats
 * after it (after the word `after`, when given). 0, or -1 if absent. */
static int ref_line(const char *argv0, const char *key, const char *after, float *out, int n)
{
    FILE *f = ref_open(argv0);
    if (!f)
        return -1;
    static char line[1 << 16];
    int found = -1;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) || line[kl] != ' ')
            continue;
        char *p = line + kl, *end;
        if (after) {
            char *w = strstr(p, after);
            if (!w)
                break;
            p = w + strlen(after);
        }
        int i;
        for (i = 0; i < n; i++, p = end) {
            out[i] = strtof(p, &end);
            if (end == p)
                break;
        }
        found = i == n ? 0 : -1;
        break;
    }
    fclose(f);
    return found;
}

/* max |a - b| over n */
static double max_abs_diff(const float *a, const float *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* ---- against PyTorch ---------------------------------------------------- */

/* Tolerances. Muon's momentum and the AdamW part are element-wise, one
 * rounding per operation as PyTorch's fused CPU kernels: the same bits on
 * the fixture's machine (allowed: one ulp, for a kernel that does not fuse).
 * The orthogonalised update differs from PyTorch's by the order of the
 * products' sums (PyTorch's GEMM against the backend's sgemm, whose blocking
 * changes with the ISA level): a few roundings of entries about 0.3 in size
 * per product, which five iterations of a polynomial of slope at most 3.4445
 * carry along. Measured on the fixture's machine: 6e-7 on the ns matrix,
 * 4e-7 on the parameters after 10 steps (each step adds lr <= 0.05 times the
 * update's deviation). Ten times that (5e-6 and 1e-5) still catches every
 * slip of the rule by far: without the Nesterov term the parameters differ
 * by 4e-3 at step 5, without the scale sqrt(rows / cols) by 9e-3 at step 1,
 * with four Newton-Schulz steps instead of five by 7e-3, without the weight
 * decay by 2e-3. */
#define TOL_X 5e-6
#define TOL_NS 1e-5

static void test_against_torch(const char *argv0, int set)
{
    const ref_set *hp = &ref_sets[set];
    dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.optim.lr = hp->lr;
    cfg.optim.momentum = hp->momentum;
    cfg.optim.nesterov = hp->nesterov;
    cfg.optim.weight_decay = hp->wd;
    cfg.optim.adamw_lr = hp->adamw_lr;
    cfg.optim.beta1 = hp->beta1;
    cfg.optim.beta2 = hp->beta2;
    cfg.optim.eps = hp->eps;
    dt_tensor_view tv[NT];
    const dt_optim_ops *ops = optim_find("muon");
    dt_optim o;
    CHECK(ops == &optim_muon && optim_init(&o, ops, &cfg, N, tv, ref_views(tv), NULL) == 0,
          "optim_find(muon), optim_init on the tensor table: %s", dt_err_msg());
    float x[N], g[N], want[N];
    ref_x0(x);
    const float lr = (float)hp->lr;
    for (int k = 1; k <= STEPS; k++) {
        ref_grad(k, g);
        optim_step(&o, backend_cpu(), x, g, lr, k);
        if (k != 1 && k != 5 && k != STEPS)
            continue;
        char key[64];
        snprintf(key, sizeof key, "muon %d %d x", set, k);
        if (ref_line(argv0, key, NULL, want, N) != 0) {
            CHECK(0, "fixture line '%s' (tests/fixtures/muon_reference.txt)", key);
            continue;
        }
        const double d = max_abs_diff(x, want, N);
        CHECK(d <= TOL_X, "set %d step %d: parameters within %g of PyTorch's (max diff %.3g)",
              set, k, TOL_X, d);
    }
    static const char *names[3] = { "mom", "m", "v" };
    for (int s = 0; s < 3; s++) {
        char key[64];
        snprintf(key, sizeof key, "muon %d %d %s", set, STEPS, names[s]);
        if (ref_line(argv0, key, NULL, want, N) != 0) {
            CHECK(0, "fixture line '%s'", key);
            continue;
        }
        int64_t worst = 0;
        for (int i = 0; i < N; i++) {
            const int64_t u = ulps(o.state[s][i], want[i]);
            worst = u > worst ? u : worst;
        }
        CHECK(worst <= 1, "set %d: %s (%s) after %d steps within one ulp of PyTorch's "
              "(worst %lld ulp)", set, ops->state_names[s], names[s], STEPS, (long long)worst);
    }
    dt_ckpt_array a[4];
    CHECK(optim_state_arrays(&o, a, 4) == 3 && !strcmp(a[0].name, "muon_momentum") &&
              !strcmp(a[1].name, "adam_m") && !strcmp(a[2].name, "adam_v") && a[0].n == N &&
              a[2].data == o.state[2],
          "the checkpoint arrays: muon_momentum, adam_m, adam_v (n each)");
    optim_free(&o, NULL);
}

static void test_ns_against_torch(const char *argv0)
{
    float in[256], want[256], got[256];
    if (ref_line(argv0, "ns 32 8", "in", in, 256) != 0 ||
        ref_line(argv0, "ns 32 8", "out", want, 256) != 0) {
        CHECK(0, "fixture line 'ns 32 8'");
        return;
    }
    float *work = malloc(newton_schulz_work(32, 8) * sizeof *work);
    newton_schulz5(32, 8, in, got, work);
    free(work);
    const double d = max_abs_diff(got, want, 256);
    CHECK(d <= TOL_NS, "newton_schulz5 of a (32, 8) matrix within %g of PyTorch's (max diff "
          "%.3g)", TOL_NS, d);
}

/* ---- properties of the iteration ---------------------------------------- */

/* singular values of A (r, c), r >= c: square roots of the eigenvalues of
 * A^T A (c, c) by cyclic Jacobi rotations in double, into s (c) */
static void singular_values(int r, int c, const float *A, double *s)
{
    double *M = calloc((size_t)c * c, sizeof *M);
    for (int i = 0; i < c; i++)
        for (int j = 0; j < c; j++)
            for (int k = 0; k < r; k++)
                M[i * c + j] += (double)A[k * c + i] * A[k * c + j];
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int p = 0; p < c; p++)
            for (int q = p + 1; q < c; q++)
                off += M[p * c + q] * M[p * c + q];
        if (off < 1e-30)
            break;
        for (int p = 0; p < c; p++)
            for (int q = p + 1; q < c; q++) {
                if (fabs(M[p * c + q]) < 1e-300)
                    continue;
                const double th = (M[q * c + q] - M[p * c + p]) / (2 * M[p * c + q]);
                const double t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1));
                const double cs = 1 / sqrt(t * t + 1), sn = t * cs;
                for (int k = 0; k < c; k++) { /* columns p, q */
                    const double a = M[k * c + p], b = M[k * c + q];
                    M[k * c + p] = cs * a - sn * b;
                    M[k * c + q] = sn * a + cs * b;
                }
                for (int k = 0; k < c; k++) { /* rows p, q */
                    const double a = M[p * c + k], b = M[q * c + k];
                    M[p * c + k] = cs * a - sn * b;
                    M[q * c + k] = sn * a + cs * b;
                }
            }
    }
    for (int i = 0; i < c; i++)
        s[i] = sqrt(fmax(M[i * c + i], 0));
    free(M);
}

/* The band: five steps of f(s) = a s + b s^3 + c s^5 take every s in
 * [0.003, 1] (a singular value over the Frobenius norm, which bounds them
 * all) into [0.6818, 1.2024] (evaluated densely on that interval), the
 * reference's "about [0.7, 1.2]". A rectangular Gaussian matrix's smallest
 * singular value is far above 0.003 of its norm (a square one's may come
 * near zero, which five steps cannot lift), so its image lies in the band,
 * give or take fp32 rounding (1e-3). */
#define BAND_LO 0.68
#define BAND_HI 1.21

static void test_ns_properties(int rows, int cols, uint64_t seed) /* rows != cols */
{
    const int m = rows < cols ? rows : cols, k = rows < cols ? cols : rows;
    const size_t n = (size_t)rows * cols;
    float *G = malloc(n * sizeof *G), *O = malloc(n * sizeof *O), *Gt = malloc(n * sizeof *Gt),
          *Ot = malloc(n * sizeof *Ot), *tall = malloc(n * sizeof *tall);
    float *work = malloc(newton_schulz_work(rows, cols) * sizeof *work);
    dt_rng r = rng_make(seed, (uint64_t)rows, (uint64_t)cols, 0);
    for (size_t i = 0; i < n; i++)
        G[i] = (float)(3.0 * rng_normal(&r));
    newton_schulz5(rows, cols, G, O, work);

    /* the singular values, on the tall orientation (k, m) */
    double *sg = malloc((size_t)m * sizeof *sg), *so = malloc((size_t)m * sizeof *so);
    const float *srcs[2] = { G, O };
    double *dsts[2] = { sg, so };
    for (int w = 0; w < 2; w++) {
        if (rows >= cols)
            memcpy(tall, srcs[w], n * sizeof *tall);
        else
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++)
                    tall[(size_t)j * rows + i] = srcs[w][(size_t)i * cols + j];
        singular_values(k, m, tall, dsts[w]);
    }
    double fro = 0, gmin = INFINITY, lo = INFINITY, hi = 0;
    for (int i = 0; i < m; i++) {
        fro += sg[i] * sg[i];
        gmin = fmin(gmin, sg[i]);
        lo = fmin(lo, so[i]);
        hi = fmax(hi, so[i]);
    }
    fro = sqrt(fro);
    CHECK(gmin / fro >= 0.003, "(%d, %d) Gaussian: smallest singular value %.3g of the norm, "
          "inside the band's domain", rows, cols, gmin / fro);
    CHECK(lo >= BAND_LO && hi <= BAND_HI, "(%d, %d): the output's singular values in [%.3g, "
          "%.3g] lie in [%g, %g]", rows, cols, lo, hi, BAND_LO, BAND_HI);

    /* the transposed input gives the transposed output, bit for bit: the
     * tall case is the wide one on G^T */
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            Gt[(size_t)j * rows + i] = G[(size_t)i * cols + j];
    float *work2 = malloc(newton_schulz_work(cols, rows) * sizeof *work2);
    newton_schulz5(cols, rows, Gt, Ot, work2);
    int same = 1;
    for (int i = 0; i < rows && same; i++)
        for (int j = 0; j < cols; j++)
            if (memcmp(&Ot[(size_t)j * rows + i], &O[(size_t)i * cols + j], sizeof(float))) {
                same = 0;
                break;
            }
    CHECK(same, "(%d, %d): newton_schulz5(G^T) == newton_schulz5(G)^T bit for bit", rows, cols);
    /* in place (out = G) as the optimizer calls it */
    memcpy(Gt, G, n * sizeof *Gt);
    newton_schulz5(rows, cols, Gt, Gt, work);
    CHECK(!memcmp(Gt, O, n * sizeof *O), "(%d, %d): in place == out of place", rows, cols);
    free(G), free(O), free(Gt), free(Ot), free(tall), free(work), free(work2), free(sg), free(so);
}

/* PyTorch's lerp: exact at both ends, one rounding between */
static void test_lerp(void)
{
    CHECK(muon_lerp(1.0f, 3.0f, 0.0f) == 1.0f && muon_lerp(1.0f, 3.0f, 1.0f) == 3.0f &&
              muon_lerp(-2.0f, 6.0f, 0.25f) == 0.0f && muon_lerp(-2.0f, 6.0f, 0.75f) == 4.0f,
          "lerp: the ends exactly, both branches");
    const float a = 0.1f, b = 0.7f, w = 0.05f;
    CHECK(muon_lerp(a, b, w) == fmaf(w, b - a, a), "lerp with w < 0.5: a + w (b - a), fused");
    CHECK(muon_lerp(a, b, 0.95f) == fmaf(-(b - a), 1.0f - 0.95f, b),
          "lerp with w >= 0.5: b - (b - a) (1 - w), fused");
}

/* every hidden matrix needs its shape; a table without one is refused */
static void test_refusals(void)
{
    dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.optim.lr = 0.02;
    cfg.optim.adamw_lr = 3e-4;
    dt_optim o;
    CHECK(optim_init(&o, &optim_muon, &cfg, 10, NULL, 0, NULL) == -1 &&
              strstr(dt_err_msg(), "no tensor table"),
          "muon without a tensor table: refused (%s)", dt_err_msg());
    optim_free(&o, NULL);
    dt_tensor_view tv[2] = { { .offset = 0, .count = 6, .ndim = 1 },
                             { .offset = 6, .count = 4, .ndim = 2 } };
    CHECK(optim_init(&o, &optim_muon, &cfg, 10, tv, 2, NULL) == -1 &&
              strstr(dt_err_msg(), "none of the model's 2 tensors"),
          "muon without a hidden matrix: refused (%s)", dt_err_msg());
    optim_free(&o, NULL);
    CHECK(optim_muon.whole != NULL && optim_sgd.whole == NULL && optim_adamw.whole == NULL,
          "muon alone says its step takes the whole vector");
}

int main(int argc, char **argv)
{
    (void)argc;
    test_lerp();
    test_ns_against_torch(argv[0]);
    test_ns_properties(48, 20, 1);
    test_ns_properties(20, 48, 2);
    test_ns_properties(96, 64, 3);
    test_against_torch(argv[0], 1);
    test_against_torch(argv[0], 2);
    test_refusals();
    return tap_done();
}
