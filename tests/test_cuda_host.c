/* The CUDA kernels' per-element functions (the headers in src/nn/cuda/), compiled here by
 * the C compiler and run over their whole index range on the host, against the
 * CPU backend's kernels on the layer tests' shapes (tests/test_layers.c):
 * forward, input gradient (accumulating into a non-zero dx), the SGD step
 * against optim/sgd.c, and the gossip modes' terms against the host loops
 * they replaced (core/vec.h), bit for bit. Runs in every build, with or without CUDA: the code
 * nvcc puts in the __global__ wrappers is this code. Expectation: equal to
 * 1e-6 relative (the same float expressions in the same order give the same
 * bits on one host). */
#include "backend/backend.h"
#include "core/bf16_round.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/rng.h"
#include "core/vec.h"
#include "nn/cuda/activation.h"
#include "nn/cuda/adamw.h"
#include "nn/cuda/attention.h"
#include "nn/cuda/add.h"
#include "nn/cuda/dropout.h"
#include "nn/cuda/gpt.h"
#include "nn/cuda/groupnorm.h"
#include "nn/cuda/pool.h"
#include "nn/cuda/sgd.h"
#include "nn/cuda/xent.h"
#include "backend/cpu/kernels.h"
#include "nn/lower.h"
#include "nn/transformer.h"
#include "backend/gemm_args.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tap.h"

#include <cblas.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const dt_backend *be;
static dt_rng rng;

static float *vec_new(size_t n) { return dt_calloc(n ? n : 1, sizeof(float)); }

/* n values in [-3, 3), with the edge cases 0, -0, +-100 and a NaN at the front */
static float *vec_rand(size_t n)
{
    float *v = vec_new(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(6.0 * rng_uniform_d(&rng) - 3.0);
    const float edge[] = {0.0f, -0.0f, 100.0f, -100.0f, NAN};
    for (size_t i = 0; i < n && i < sizeof edge / sizeof edge[0]; i++)
        v[i] = edge[i];
    return v;
}

static float *vec_dup(const float *v, size_t n)
{
    float *c = vec_new(n);
    memcpy(c, v, n * sizeof(float));
    return c;
}

/* Elements where a and b differ by more than 1e-6 relative (NaN equals NaN). */
static size_t mismatches(const float *a, const float *b, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (!(fabsf(a[i] - b[i]) <= 1e-6f * fabsf(b[i])))
            bad++;
    }
    return bad;
}

typedef void (*fwd_fn)(size_t, const float *, float *);
typedef void (*bwd_fn)(size_t, const float *, const float *, float *);
typedef void (*fwd_at_fn)(size_t, const float *, float *);
typedef void (*bwd_at_fn)(size_t, const float *, const float *, float *);

static void test_activation(const char *name, fwd_fn fwd, bwd_fn bwd, fwd_at_fn fwd_at,
                            bwd_at_fn bwd_at, size_t n)
{
    float *x = vec_rand(n), *y_cpu = vec_new(n), *y_at = vec_new(n);
    fwd(n, x, y_cpu);
    for (size_t i = 0; i < n; i++)
        fwd_at(i, x, y_at);
    size_t bad = mismatches(y_at, y_cpu, n);
    CHECK(bad == 0, "%s n=%zu: forward per element equals the CPU kernel (%zu differ)", name, n,
          bad);

    // backward accumulates into a non-zero dx, from the forward output
    float *dy = vec_rand(n), *dx0 = vec_rand(n);
    for (size_t i = 0; i < n; i++)
        if (isnan(dx0[i]))
            dx0[i] = 1.0f;
    float *dx_cpu = vec_dup(dx0, n), *dx_at = vec_dup(dx0, n);
    bwd(n, y_cpu, dy, dx_cpu);
    for (size_t i = 0; i < n; i++)
        bwd_at(i, y_cpu, dy, dx_at);
    bad = mismatches(dx_at, dx_cpu, n);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++)
        changed += dx_at[i] != dx0[i];
    CHECK(bad == 0 && (n < 8 || changed > 0),
          "%s n=%zu: input gradient accumulates as the CPU kernel's (%zu differ, %zu changed)",
          name, n, bad, changed);
    free(x), free(y_cpu), free(y_at), free(dy), free(dx0), free(dx_cpu), free(dx_at);
}

/* The in-place ReLU backward (input and output gradient in one buffer). */
static void test_relu_inplace(size_t n)
{
    float *x = vec_rand(n), *y = vec_new(n), *d0 = vec_rand(n);
    be->relu_forward(n, x, y);
    float *d_cpu = vec_dup(d0, n), *d_at = vec_dup(d0, n);
    be->relu_backward_inplace(n, y, d_cpu);
    for (size_t i = 0; i < n; i++)
        relu_backward_inplace_at(i, y, d_at);
    size_t bad = mismatches(d_at, d_cpu, n), zeroed = 0;
    for (size_t i = 0; i < n; i++)
        zeroed += d_at[i] == 0.0f && d0[i] != 0.0f;
    CHECK(bad == 0 && (n < 8 || zeroed > 0),
          "relu in place n=%zu: per element equals the CPU kernel (%zu differ, %zu masked)", n,
          bad, zeroed);
    free(x), free(y), free(d0), free(d_cpu), free(d_at);
}

static void test_add(size_t n)
{
    float *a = vec_rand(n), *b = vec_rand(n), *y_cpu = vec_new(n), *y_at = vec_new(n);
    be->add_forward(n, a, b, y_cpu);
    for (size_t i = 0; i < n; i++)
        add_forward_at(i, a, b, y_at);
    CHECK(mismatches(y_at, y_cpu, n) == 0, "add n=%zu: forward equals the CPU kernel", n);

    float *dy = vec_rand(n), *da = vec_rand(n), *db = vec_rand(n);
    float *da_cpu = vec_dup(da, n), *db_cpu = vec_dup(db, n);
    be->add_backward(n, dy, da_cpu, db_cpu);
    for (size_t i = 0; i < n; i++) {
        add_backward_at(i, dy, da);
        add_backward_at(i, dy, db);
    }
    CHECK(mismatches(da, da_cpu, n) == 0 && mismatches(db, db_cpu, n) == 0,
          "add n=%zu: both input gradients accumulate as the CPU kernel's", n);

    // y aliasing a (the engine's in-place residual add)
    float *a2 = vec_dup(a, n);
    for (size_t i = 0; i < n; i++)
        add_forward_at(i, a2, b, a2);
    CHECK(mismatches(a2, y_cpu, n) == 0, "add n=%zu: in place (y == a) gives the same sum", n);
    free(a), free(b), free(y_cpu), free(y_at), free(dy), free(da), free(db), free(da_cpu),
        free(db_cpu), free(a2);
}

static void test_dropout(size_t n, float p, uint64_t key)
{
    float *x = vec_rand(n), *y_cpu = vec_new(n), *m_cpu = vec_new(n);
    float *y_at = vec_new(n), *m_at = vec_new(n);
    be->dropout_forward(n, p, key, x, y_cpu, m_cpu);
    const float scale = dropout_scale(p);
    // backwards over i: the mask depends on (key, i) only, not on the order
    for (size_t i = n; i-- > 0;)
        dropout_forward_at(i, p, scale, key, x, y_at, m_at);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += m_at[i] != 0.0f;
    CHECK(memcmp(m_at, m_cpu, n * sizeof(float)) == 0 && mismatches(y_at, y_cpu, n) == 0,
          "dropout n=%zu p=%.2f key=%llu: mask bit for bit and output equal the CPU's "
          "(kept %zu)",
          n, (double)p, (unsigned long long)key, kept);
    if (p > 0.0f && p < 1.0f && n >= 10000)
        CHECK(fabs((double)kept / (double)n - (1.0 - p)) < 0.02,
              "dropout n=%zu p=%.2f: kept fraction %.4f ~ 1 - p", n, (double)p,
              (double)kept / (double)n);

    float *dy = vec_rand(n), *dx = vec_rand(n);
    for (size_t i = 0; i < n; i++)
        if (isnan(dx[i]) || isnan(dy[i]))
            dx[i] = dy[i] = 0.5f;
    float *dx_cpu = vec_dup(dx, n);
    be->dropout_backward(n, m_cpu, dy, dx_cpu, 0);
    for (size_t i = 0; i < n; i++)
        dropout_backward_at(i, m_at, dy, dx);
    CHECK(mismatches(dx, dx_cpu, n) == 0,
          "dropout n=%zu p=%.2f: input gradient accumulates as the CPU kernel's", n, (double)p);
    free(x), free(y_cpu), free(m_cpu), free(y_at), free(m_at), free(dy), free(dx), free(dx_cpu);
}

/* Max pool in the plain layout; ties are made likely (values on a coarse grid)
 * so the first-maximum rule is exercised, and one NaN sits in the first plane. */
static void test_maxpool(int B, int C, int H, int W, int k, int st)
{
    const int P = (H - k) / st + 1, Q = (W - k) / st + 1;
    const dt_pool_shape s = {B, C, H, W, k, st, P, Q, 0};
    const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * P * Q;
    float *x = vec_new(nx);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)(int)(4.0 * rng_uniform_d(&rng)) - 1.5f;
    if (nx > 5)
        x[5] = NAN;
    float *y_cpu = vec_new(ny), *y_at = vec_new(ny);
    int32_t *a_cpu = dt_calloc(ny, sizeof(int32_t)), *a_at = dt_calloc(ny, sizeof(int32_t));
    be->maxpool_forward(&s, x, y_cpu, a_cpu);
    for (size_t o = 0; o < ny; o++)
        maxpool_forward_at(o, H, W, P, Q, k, st, x, y_at, a_at);
    size_t nans = 0;
    for (size_t o = 0; o < ny; o++)
        nans += isnan(y_at[o]);
    CHECK(mismatches(y_at, y_cpu, ny) == 0 && memcmp(a_at, a_cpu, ny * sizeof(int32_t)) == 0,
          "maxpool (%d,%d,%d,%d) k%d s%d: output and winners equal the CPU's (%zu NaN windows)",
          B, C, H, W, k, st, nans);

    float *dy = vec_rand(ny), *dx = vec_rand(nx);
    for (size_t i = 0; i < ny; i++)
        if (isnan(dy[i]))
            dy[i] = 0.25f;
    for (size_t i = 0; i < nx; i++)
        if (isnan(dx[i]))
            dx[i] = 0.5f;
    float *dx_cpu = vec_dup(dx, nx);
    be->maxpool_backward(&s, dy, a_cpu, dx_cpu, 0);
    for (size_t e = 0; e < nx; e++)
        maxpool_backward_at(e, H, W, P, Q, k, st, dy, a_at, dx);
    CHECK(mismatches(dx, dx_cpu, nx) == 0,
          "maxpool (%d,%d,%d,%d) k%d s%d: input gradient gathered per element equals the "
          "CPU's scatter",
          B, C, H, W, k, st);
    free(x), free(y_cpu), free(y_at), free(a_cpu), free(a_at), free(dy), free(dx), free(dx_cpu);
}

static void test_avgpool(int B, int C, int HW)
{
    const size_t nx = (size_t)B * C * HW, ny = (size_t)B * C;
    float *x = vec_rand(nx), *y_cpu = vec_new(ny), *y_at = vec_new(ny);
    be->avgpool_forward(B, C, HW, 0, x, y_cpu);
    for (size_t pl = 0; pl < ny; pl++)
        avgpool_forward_at(pl, HW, x, y_at);
    CHECK(mismatches(y_at, y_cpu, ny) == 0, "avgpool (%d,%d,%d): forward equals the CPU's", B, C,
          HW);
    float *dy = vec_rand(ny), *dx = vec_new(nx);
    for (size_t i = 0; i < nx; i++)
        dx[i] = (float)i * 0.01f;
    float *dx_cpu = vec_dup(dx, nx);
    be->avgpool_backward(B, C, HW, 0, dy, dx_cpu);
    for (size_t e = 0; e < nx; e++)
        avgpool_backward_at(e, HW, dy, dx);
    CHECK(mismatches(dx, dx_cpu, nx) == 0,
          "avgpool (%d,%d,%d): input gradient accumulates as the CPU's", B, C, HW);
    free(x), free(y_cpu), free(y_at), free(dy), free(dx), free(dx_cpu);
}

/* GroupNorm in the plain layout, alone and fused (skip: residual add, relu):
 * forward output and statistics, input and skip gradients (accumulating),
 * gamma and beta gradients (overwritten: they start as garbage here). */
static void test_groupnorm(int B, int C, int HW, int G, int skip, int relu)
{
    const size_t n = (size_t)B * C * HW, nbg = (size_t)B * G, nbc = (size_t)B * C;
    float *x = vec_rand(n), *gamma = vec_rand(C), *beta = vec_rand(C), *sk = vec_rand(n);
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]) || fabsf(x[i]) > 10.0f)
            x[i] = 0.75f;
        if (isnan(sk[i]) || fabsf(sk[i]) > 10.0f)
            sk[i] = -0.25f;
    }
    for (int c = 0; c < C; c++)
        if (isnan(gamma[c]) || isnan(beta[c]) || fabsf(gamma[c]) > 10.0f || fabsf(beta[c]) > 10.0f)
            gamma[c] = beta[c] = 0.5f;
    float *y_cpu = vec_new(n), *m_cpu = vec_new(nbg), *r_cpu = vec_new(nbg);
    float *y_at = vec_new(n), *m_at = vec_new(nbg), *r_at = vec_new(nbg);
    be->groupnorm_forward(B, C, HW, G, 0, x, gamma, beta, skip ? sk : NULL, relu, y_cpu, m_cpu,
                          r_cpu);
    float *lanes = vec_new(nbc * 8); // as nn/cuda/groupnorm.cu: lanes, mean, lanes, rstd
    for (size_t t = 0; t < nbc * 8; t++)
        groupnorm_lane_at(t, C, HW, G, x, NULL, 0, lanes);
    for (size_t bg = 0; bg < nbg; bg++)
        groupnorm_mean_at(bg, C, HW, G, lanes, m_at);
    for (size_t t = 0; t < nbc * 8; t++)
        groupnorm_lane_at(t, C, HW, G, x, m_at, 1, lanes);
    for (size_t bg = 0; bg < nbg; bg++)
        groupnorm_rstd_at(bg, C, HW, G, lanes, r_at);
    free(lanes);
    for (size_t e = 0; e < n; e++)
        groupnorm_affine_at(e, C, HW, G, x, gamma, beta, m_at, r_at, skip ? sk : NULL, relu, y_at);
    size_t bad = mismatches(y_at, y_cpu, n), bads = mismatches(m_at, m_cpu, nbg) +
                                                    mismatches(r_at, r_cpu, nbg);
    CHECK(bad == 0 && bads == 0,
          "groupnorm (%d,%d,%d) G=%d%s%s: forward and statistics equal the CPU's (%zu, %zu differ)",
          B, C, HW, G, skip ? " +skip" : "", relu ? " relu" : "", bad, bads);

    float *dy = vec_rand(n), *dx = vec_rand(n), *ds = vec_rand(n);
    for (size_t i = 0; i < n; i++) {
        if (isnan(dy[i]))
            dy[i] = 0.125f;
        if (isnan(dx[i]))
            dx[i] = 0.5f;
        if (isnan(ds[i]))
            ds[i] = 0.5f;
    }
    float *dx_cpu = vec_dup(dx, n), *ds_cpu = vec_dup(ds, n);
    float *dg_cpu = vec_new(C), *db_cpu = vec_new(C), *dg_at = vec_new(C), *db_at = vec_new(C);
    for (int c = 0; c < C; c++)
        dg_at[c] = db_at[c] = 1234.0f; // overwritten, not accumulated
    const float *yr = relu ? y_cpu : NULL;
    be->groupnorm_backward(B, C, HW, G, 0, x, gamma, m_cpu, r_cpu, yr, dy, dx_cpu,
                           skip ? ds_cpu : NULL, 0, 0, dg_cpu, db_cpu);
    double *sdy = dt_malloc(nbc * sizeof(double)), *sdyx = dt_malloc(nbc * sizeof(double));
    double *sgd = dt_malloc(nbg * sizeof(double)), *sgdx = dt_malloc(nbg * sizeof(double));
    float *la = vec_new(nbc * 4), *lb = vec_new(nbc * 4);
    for (size_t t = 0; t < nbc * 4; t++)
        groupnorm_grad_lane_at(t, C, HW, G, x, m_at, yr, dy, la, lb);
    for (size_t bc = 0; bc < nbc; bc++)
        groupnorm_grad_chan_at(bc, C, G, r_at, la, lb, sdy, sdyx);
    for (size_t bg = 0; bg < nbg; bg++)
        groupnorm_grad_group_at(bg, C, G, gamma, sdy, sdyx, sgd, sgdx);
    free(la);
    free(lb);
    for (size_t c = 0; c < (size_t)C; c++)
        groupnorm_param_grad_at(c, B, C, sdy, sdyx, dg_at, db_at);
    for (size_t e = 0; e < n; e++)
        groupnorm_dx_at(e, C, HW, G, x, gamma, m_at, r_at, yr, dy, sgd, sgdx, dx,
                        skip ? ds : NULL);
    bad = mismatches(dx, dx_cpu, n);
    const size_t badp = mismatches(dg_at, dg_cpu, C) + mismatches(db_at, db_cpu, C);
    const size_t badskip = mismatches(ds, ds_cpu, n);
    CHECK(bad == 0 && badp == 0 && badskip == 0,
          "groupnorm (%d,%d,%d) G=%d%s%s: input, skip, gamma and beta gradients equal the CPU's "
          "(%zu, %zu, %zu differ)",
          B, C, HW, G, skip ? " +skip" : "", relu ? " relu" : "", bad, badskip, badp);
    free(x), free(gamma), free(beta), free(sk), free(y_cpu), free(m_cpu), free(r_cpu), free(y_at),
        free(m_at), free(r_at), free(dy), free(dx), free(ds), free(dx_cpu), free(ds_cpu),
        free(dg_cpu), free(db_cpu), free(dg_at), free(db_at), free(sdy), free(sdyx), free(sgd),
        free(sgdx);
}

/* Softmax cross-entropy per row, the mean taken here in row order as the CPU
 * does; big: logits +-1000 (the max subtraction keeps them finite). */
static void test_xent(int B, int K, int big)
{
    const size_t n = (size_t)B * K;
    float *z = vec_new(n), *d_cpu = vec_new(n), *d_at = vec_new(n);
    int32_t *lab = dt_malloc((size_t)B * sizeof(int32_t)), *hit = dt_malloc((size_t)B * sizeof(int32_t));
    double *loss = dt_malloc((size_t)B * sizeof(double));
    for (size_t i = 0; i < n; i++)
        z[i] = big ? (float)(1000 * ((int)(i % 3) - 1)) : (float)(4.0 * rng_uniform_d(&rng) - 2.0);
    for (int i = 0; i < B; i++)
        lab[i] = (int32_t)rng_below(&rng, (uint64_t)K);
    if (B > 1 && K > 1)
        z[1] = z[0]; // a tie in row 0: the lower index wins
    int hits_cpu = -1;
    const double l_cpu = be->softmax_xent(B, K, z, lab, d_cpu, &hits_cpu);
    for (size_t i = 0; i < (size_t)B; i++)
        softmax_xent_row_at(i, B, K, z, lab, d_at, loss, hit);
    double total = 0.0;
    int hits = 0;
    for (int i = 0; i < B; i++) {
        total += loss[i];
        hits += hit[i];
    }
    const double l_at = B > 0 ? total / B : 0.0;
    CHECK(isfinite(l_at) && fabs(l_at - l_cpu) <= 1e-6 * fabs(l_cpu) && hits == hits_cpu &&
              mismatches(d_at, d_cpu, n) == 0,
          "xent B=%d K=%d%s: loss %.9g (CPU %.9g), hits %d (%d), dlogits equal the CPU's", B, K,
          big ? " +-1000" : "", l_at, l_cpu, hits, hits_cpu);

    lab[B - 1] = K; // out of range: NaN loss, that row's gradient untouched
    float *d_bad = vec_dup(d_at, n);
    softmax_xent_row_at((size_t)B - 1, B, K, z, lab, d_bad, loss, hit);
    CHECK(isnan(loss[B - 1]) && hit[B - 1] == 0 && memcmp(d_bad, d_at, n * sizeof(float)) == 0,
          "xent B=%d K=%d: label K gives a NaN loss and writes no gradient", B, K);
    free(z), free(d_cpu), free(d_at), free(lab), free(hit), free(loss), free(d_bad);
}

/* Three steps of the per-element update against sgd_step on the same vectors;
 * the parameters (x) and the momentum buffer (v) must agree after each. */
static void test_sgd(size_t n, double m, double wd, bool nesterov)
{
    dt_sgd o;
    sgd_init(&o, n, m, wd, nesterov);
    float *x_cpu = vec_new(n), *x_at = vec_new(n), *v_at = vec_new(n), *g = vec_new(n);
    for (size_t i = 0; i < n; i++)
        x_cpu[i] = x_at[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    size_t bad = 0, moved = 0;
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; i < n; i++)
            g[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
        const float lr = 0.1f / (float)(step + 1);
        float *x_before = vec_dup(x_at, n);
        sgd_step(&o, x_cpu, g, lr);
        for (size_t i = 0; i < n; i++)
            sgd_step_at(i, (float)m, (float)wd, nesterov, lr, x_at, g, v_at);
        bad += mismatches(x_at, x_cpu, n);
        if (m != 0.0)
            bad += mismatches(v_at, o.v, n);
        for (size_t i = 0; i < n; i++)
            moved += x_at[i] != x_before[i];
        free(x_before);
    }
    CHECK(bad == 0 && moved > 0,
          "sgd n=%zu m=%.1f wd=%g nesterov=%d: 3 steps equal sgd_step in x and v (%zu differ, "
          "%zu moved)",
          n, m, wd, (int)nesterov, bad, moved);
    sgd_free(&o);
    free(x_cpu), free(x_at), free(v_at), free(g);
}

/* Elements whose bits differ (NaN equals NaN; -0 differs from +0). */
static size_t bits_differ(const float *a, const float *b, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof(float)) != 0)
            bad++;
    return bad;
}

/* The sum over k received slots (n) as backend/cuda.c runs it: one pass per
 * slot, the first fresh; weighted by c when c is not NULL. */
static void sum_slots_at(size_t n, int k, const float *c, const float *slots, float *out)
{
    if (k == 0)
        memset(out, 0, n * sizeof *out);
    for (int j = 0; j < k; j++)
        for (size_t i = 0; i < n; i++) {
            if (c)
                flat_axpy_term_at(i, c[j], slots + (size_t)j * n, out, j == 0);
            else
                flat_sum_term_at(i, slots + (size_t)j * n, out, j == 0);
        }
}

/* The gossip modes' terms (algo/gossip.c, algo/dpsgd.c): the per-element
 * functions and the CPU backend's flat ops against the loops of core/vec.h
 * that sgp and dpsgd ran before their vectors moved to the backend, bit for
 * bit: a push-sum share, absorb and de-bias of a message of n + 1 floats
 * (weight last) after k received slots, and D-PSGD's weighted mix. */
static void test_gossip_terms(size_t n, int k)
{
    const size_t len = n + 1;
    float *slots = vec_rand((size_t)k * len + 1), *x0 = vec_rand(len);
    float c[4] = {0.5f, 1.0f / 3.0f, 0.25f, 0.2f};
    const float share = 1.0f / (float)(k + 1);
    x0[n] = 1.0f; // the weight
    // the loops before: vec_* and the weight as a host scalar
    float *x_ref = vec_dup(x0, n), w_ref = x0[n], *msg_ref = vec_new(len), *acc_ref = vec_new(len);
    vec_scale_copy(x_ref, msg_ref, share, n);
    w_ref = msg_ref[n] = w_ref * share;
    vec_zero(acc_ref, len);
    for (int j = 0; j < k; j++)
        vec_add(acc_ref, slots + (size_t)j * len, len);
    vec_add(x_ref, acc_ref, n);
    w_ref += acc_ref[n];
    float *z_ref = vec_new(n);
    vec_div(z_ref, x_ref, w_ref, n);
    // the per-element functions, the weight a 1-float vector beside x
    float *x_at = vec_dup(x0, len), *msg_at = vec_new(len), *acc_at = vec_new(len),
          *z_at = vec_new(n);
    for (size_t i = 0; i < n; i++)
        flat_scale_copy_at(i, share, x_at, msg_at);
    flat_scale_copy_at(0, share, x_at + n, msg_at + n);
    sum_slots_at(len, k, NULL, slots, acc_at);
    for (size_t i = 0; i < n; i++)
        flat_add_at(i, acc_at, x_at);
    flat_add_at(0, acc_at + n, x_at + n);
    for (size_t i = 0; i < n; i++)
        flat_div_at(i, x_at, x_at + n, z_at);
    // the CPU backend's ops, as algo/gossip.c calls them
    float *x_be = vec_dup(x0, len), *msg_be = vec_new(len), *acc_be = vec_new(len),
          *z_be = vec_new(n);
    be->flat_scale_copy(n, share, x_be, msg_be);
    be->flat_scale_copy(1, share, x_be + n, msg_be + n);
    be->flat_sum_slots(len, k, NULL, slots, acc_be);
    be->flat_add(n, acc_be, x_be);
    be->flat_add(1, acc_be + n, x_be + n);
    be->flat_div(n, x_be, x_be + n, z_be);
    size_t bad = bits_differ(msg_at, msg_ref, len) + bits_differ(msg_be, msg_ref, len) +
                 bits_differ(acc_at, acc_ref, len) + bits_differ(acc_be, acc_ref, len) +
                 bits_differ(x_at, x_ref, n) + bits_differ(x_be, x_ref, n) +
                 bits_differ(x_at + n, &w_ref, 1) + bits_differ(x_be + n, &w_ref, 1) +
                 bits_differ(z_at, z_ref, n) + bits_differ(z_be, z_ref, n);
    CHECK(bad == 0, "push-sum n=%zu, %d slots: share, sum, absorb, de-bias equal the host "
          "loops bit for bit, weight included (%zu differ)", n, k, bad);

    // D-PSGD: mix = sum_j W_ij x_j from +0; x <- W_ii x + mix
    float *mix_ref = vec_new(len), *mix_at = vec_new(len), *mix_be = vec_new(len);
    vec_zero(mix_ref, len);
    float self = 1.0f;
    for (int j = 0; j < k; j++) {
        vec_axpy(mix_ref, c[j], slots + (size_t)j * len, len);
        self -= c[j];
    }
    sum_slots_at(len, k, c, slots, mix_at);
    be->flat_sum_slots(len, k, c, slots, mix_be);
    float *y_ref = vec_dup(x0, len), *y_at = vec_dup(x0, len), *y_be = vec_dup(x0, len);
    vec_ax_plus(y_ref, self, mix_ref, len);
    for (size_t i = 0; i < len; i++)
        flat_ax_plus_at(i, self, mix_at, y_at);
    be->flat_ax_plus(len, self, mix_be, y_be);
    bad = bits_differ(mix_at, mix_ref, len) + bits_differ(mix_be, mix_ref, len) +
          bits_differ(y_at, y_ref, len) + bits_differ(y_be, y_ref, len);
    CHECK(bad == 0, "dpsgd n=%zu, %d slots: weighted mix and self term equal the host loops "
          "bit for bit (%zu differ)", len, k, bad);
    free(slots), free(x0), free(x_ref), free(msg_ref), free(acc_ref), free(z_ref);
    free(x_at), free(msg_at), free(acc_at), free(z_at), free(x_be), free(msg_be), free(acc_be);
    free(z_be), free(mix_ref), free(mix_at), free(mix_be), free(y_ref), free(y_at), free(y_be);
}

/* ---- convolution lowered onto GEMMs (nn/lower.h), the device's GEMM
 * argument sets (backend/gemm_args.h) run by OpenBLAS ------------------ */

static float *vec_plain(size_t n) /* [-1, 1), no edge values: a sum of products */
{
    float *v = vec_new(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    return v;
}

/* Largest |a - b| / (1 + |b|): the lowering and the CPU conv run the same
 * GEMM shapes, but the CPU groups images, so sums may round differently. */
static double max_rel(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (!(e <= m))
            m = e;
    }
    return m;
}

/* cublasSgemm(StridedBatched) on the host: the same column-major argument set
 * handed to OpenBLAS (backend/gemm_args.h) */
static void gemm_host(const dt_gemm *g, const float *A, const float *B, float beta, float *C)
{
    for (int i = 0; i < g->batch; i++)
        cblas_sgemm(CblasColMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.0f,
                    A + (size_t)i * g->sa, g->lda, B + (size_t)i * g->sb, g->ldb, beta,
                    C + (size_t)i * g->sc, g->ldc);
}

/* The CUDA backend's linear layer (its GEMM argument sets, bias add and
 * gradient bodies) against the CPU's */
static void test_linear_gemm(int B, int in, int out)
{
    const size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = vec_plain(nx), *w = vec_plain(nw), *b = vec_plain((size_t)out), *dy = vec_plain(ny);
    float *y_cpu = vec_new(ny), *y_dev = vec_new(ny);
    cpu_linear_forward(B, in, out, x, w, b, y_cpu, NULL);
    const dt_gemm gf = gemm_linear_forward(B, in, out);
    gemm_host(&gf, w, x, 0.0f, y_dev);
    for (size_t i = 0; i < ny; i++)
        lower_bias_add_at(i, out, 1, b, y_dev);
    // the CPU starts the sum from the bias, the device adds it after the GEMM: over
    // 9216 products the roundings differ by ~1e-5; the 1e-4 relative
    double e = max_rel(y_dev, y_cpu, ny);
    CHECK(e <= 1e-4, "linear B=%d %d->%d: forward by the device GEMM arguments equals the CPU "
          "(max rel %.2e)", B, in, out, e);
    float *dx_cpu = vec_plain(nx), *dx_dev = vec_dup(dx_cpu, nx), *dw_cpu = vec_new(nw),
          *dw_dev = vec_new(nw), *db_cpu = vec_new((size_t)out), *db_dev = vec_new((size_t)out);
    cpu_linear_backward(B, in, out, x, w, dy, dx_cpu, dw_cpu, db_cpu, NULL);
    const dt_gemm gx = gemm_linear_dx(B, in, out), gw = gemm_linear_dw(B, in, out);
    gemm_host(&gx, w, dy, 1.0f, dx_dev);
    gemm_host(&gw, x, dy, 0.0f, dw_dev);
    double *rows = dt_malloc((size_t)B * out * sizeof(double));
    for (size_t t = 0; t < (size_t)B * out; t++)
        lower_bias_rows_at(t, 1, dy, rows);
    for (size_t k = 0; k < (size_t)out; k++)
        lower_bias_grad_at(k, B, out, rows, db_dev);
    free(rows);
    e = max_rel(dx_dev, dx_cpu, nx);
    CHECK(e <= 1e-5, "linear B=%d %d->%d: input gradient (accumulated) (max rel %.2e)", B, in,
          out, e);
    e = max_rel(dw_dev, dw_cpu, nw);
    CHECK(e <= 1e-5, "linear B=%d %d->%d: weight gradient (max rel %.2e)", B, in, out, e);
    e = max_rel(db_dev, db_cpu, (size_t)out);
    CHECK(e <= 1e-5, "linear B=%d %d->%d: bias gradient (max rel %.2e)", B, in, out, e);
    free(x); free(w); free(b); free(dy); free(y_cpu); free(y_dev); free(dx_cpu); free(dx_dev);
    free(dw_cpu); free(dw_dev); free(db_cpu); free(db_dev);
}

static size_t count_diff(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

/* n floats widened from their bf16 rounding (core/bf16_round.h) */
static float *rounded_bf16(const float *x, size_t n)
{
    float *r = vec_new(n);
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)bf16_round(x[i]) << 16;
        memcpy(&r[i], &u, sizeof u);
    }
    return r;
}

/* The CUDA backend's bf16 product (backend/cuda.c gemm16) of one argument set:
 * A and B rounded to bf16 over gemm_a_floats / gemm_b_floats, the product in
 * fp32. The extents must be the operands' sizes exactly (all of each operand
 * rounded, nothing read past it); the product of the rounded operands moves
 * off fp32's by bf16's rounding (2^-9 relative per operand), no more. */
static void check_gemm16(const char *what, const dt_gemm *g, const float *A, size_t na,
                         const float *B, size_t nb, size_t nc)
{
    const long long ea = gemm_a_floats(g), eb = gemm_b_floats(g);
    float *A16 = rounded_bf16(A, na), *B16 = rounded_bf16(B, nb);
    float *c32 = vec_new(nc), *c16 = vec_new(nc);
    gemm_host(g, A, B, 0.0f, c32);
    gemm_host(g, A16, B16, 0.0f, c16);
    double scale = 0.0, err = 0.0;
    for (size_t i = 0; i < nc; i++) {
        scale = fmax(scale, fabs((double)c32[i]));
        err = fmax(err, fabs((double)c16[i] - c32[i]));
    }
    const double rel = scale > 0 ? err / scale : err;
    CHECK(ea == (long long)na && eb == (long long)nb && count_diff(c16, c32, nc) > 0 && rel < 2e-2,
          "bf16 GEMM, %s: rounded extents %lld and %lld floats (the operands: %zu, %zu); the "
          "product moves off fp32's by %.1e of its largest value", what, ea, eb, na, nb, rel);
    free(A16);
    free(B16);
    free(c32);
    free(c16);
}

static void test_gemm16(int B, int in, int out, const dt_conv_shape *cs)
{
    const size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    float *x = vec_plain(nx), *w = vec_plain(nw), *dy = vec_plain(ny);
    char what[96];
    dt_gemm g = gemm_linear_forward(B, in, out);
    snprintf(what, sizeof what, "linear B=%d %d->%d forward", B, in, out);
    check_gemm16(what, &g, w, nw, x, nx, ny);
    g = gemm_linear_dx(B, in, out);
    snprintf(what, sizeof what, "linear B=%d %d->%d input gradient", B, in, out);
    check_gemm16(what, &g, w, nw, dy, ny, nx);
    g = gemm_linear_dw(B, in, out);
    snprintf(what, sizeof what, "linear B=%d %d->%d weight gradient", B, in, out);
    check_gemm16(what, &g, x, nx, dy, ny, nw);
    free(x);
    free(w);
    free(dy);
    // the lowered convolution's three sets, the weight gradient batched over the
    // images as backend/cuda.c runs it
    const int crs = cs->C * cs->R * cs->S, pq = cs->P * cs->Q;
    const size_t nc = (size_t)cs->B * crs * pq, nk = (size_t)cs->K * crs,
                 no = (size_t)cs->B * cs->K * pq;
    float *cols = vec_plain(nc), *wk = vec_plain(nk), *d = vec_plain(no);
    g = gemm_conv_forward(cs);
    snprintf(what, sizeof what, "conv %d->%d %dx%d forward", cs->C, cs->K, cs->H, cs->W);
    check_gemm16(what, &g, cols, nc, wk, nk, no);
    g = gemm_conv_dw(cs);
    g.batch = cs->B;
    g.sc = (long long)g.m * g.n;
    snprintf(what, sizeof what, "conv %d->%d weight gradient, %d images batched", cs->C, cs->K,
             cs->B);
    check_gemm16(what, &g, cols, nc, d, no, (size_t)cs->B * nk);
    g = gemm_conv_dcols(cs);
    snprintf(what, sizeof what, "conv %d->%d columns' gradient", cs->C, cs->K);
    check_gemm16(what, &g, d, no, wk, nk, nc);
    free(cols);
    free(wk);
    free(d);
}

/* divmod_div against the division, for divisors of every size and
 * numerators at the edges (0, d - 1, d, multiples, 2^31 - 1) and random */
static void test_divmod(void)
{
    size_t bad = 0, n_checked = 0;
    uint32_t ds[64];
    int nd = 0;
    for (uint32_t d = 1; d <= 40; d++)
        ds[nd++] = d;
    const uint32_t more[] = { 576, 676, 1024, 1000, 4095, 4096, 4097, 65535, 65536, 1u << 20,
                              3u * 1000 * 1000, (1u << 30) + 1, (1u << 31) - 1, 1u << 30 };
    for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
        ds[nd++] = more[k];
    for (int k = 0; k < nd; k++) {
        const dt_divmod m = divmod_make(ds[k]);
        const uint32_t d = ds[k];
        uint32_t ns[4096];
        int nn = 0;
        const uint32_t edge[] = { 0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, (1u << 31) - 1,
                                  (1u << 31) - 2, ((1u << 31) - 1) / d * d,
                                  ((1u << 31) - 1) / d * d - 1 };
        for (size_t q = 0; q < sizeof edge / sizeof edge[0]; q++)
            if (edge[q] < (1u << 31))
                ns[nn++] = edge[q];
        while (nn < 4096)
            ns[nn++] = (uint32_t)(rng_uniform_d(&rng) * 2147483647.0);
        for (int q = 0; q < nn; q++, n_checked++)
            bad += divmod_div(m, ns[q]) != ns[q] / d;
    }
    CHECK(bad == 0, "divmod_div equals n / d on %zu pairs (%d divisors up to 2^31 - 1), %zu wrong",
          n_checked, nd, bad);
}

static void test_lower(int B, int C, int H, int W, int K, int R, int st, int pad)
{
    dt_conv_shape s = {B, C, H, W, K, R, R, st, pad, 0, 0, 0, 0};
    s.P = (H + 2 * pad - R) / st + 1;
    s.Q = (W + 2 * pad - R) / st + 1;
    const int crs = C * R * R, pq = s.P * s.Q;
    const size_t nx = (size_t)B * C * H * W, nw = (size_t)K * crs, ny = (size_t)B * K * pq,
                 nc = (size_t)B * crs * pq;
    float *x = vec_plain(nx), *w = vec_plain(nw), *b = vec_plain((size_t)K), *dy = vec_plain(ny);
    float *work = vec_new(cpu_conv2d_workspace(&s));
    float *y_cpu = vec_new(ny), *y_low = vec_new(ny), *cols = vec_new(nc), *dcols = vec_new(nc);

    cpu_conv2d_forward(&s, x, w, b, y_cpu, work);
    for (size_t i = 0; i < nc; i++)
        lower_im2col_at(i, C, H, W, R, R, st, pad, s.P, s.Q, x, cols);
    const dt_gemm gf = gemm_conv_forward(&s);
    gemm_host(&gf, cols, w, 0.0f, y_low);
    for (size_t i = 0; i < ny; i++)
        lower_bias_add_at(i, K, (size_t)pq, b, y_low);
    char name[96];
    snprintf(name, sizeof name, "lowered conv B=%d C=%d %dx%d K=%d %dx%d st=%d pad=%d", B, C, H,
             W, K, R, R, st, pad);
    double e = max_rel(y_low, y_cpu, ny);
    CHECK(e <= 1e-5, "%s: forward equals the CPU conv (max rel %.2e)", name, e);

    // backward: dx accumulates into a non-zero dx, dW and db overwritten
    float *dx_cpu = vec_plain(nx), *dx_low = vec_dup(dx_cpu, nx);
    float *dw_cpu = vec_new(nw), *dw_low = vec_new(nw), *db_cpu = vec_new((size_t)K),
          *db_low = vec_new((size_t)K);
    cpu_conv2d_backward(&s, x, w, dy, dx_cpu, 0, dw_cpu, db_cpu, work);
    // as backend/cuda.c: every image's weight gradient (one batched GEMM), then
    // the images summed in order
    dt_gemm gw = gemm_conv_dw(&s);
    const dt_gemm gc = gemm_conv_dcols(&s);
    gw.batch = B;
    gw.sc = (long long)nw;
    float *parts = vec_new((size_t)B * nw);
    gemm_host(&gw, cols, dy, 0.0f, parts);
    for (size_t e2 = 0; e2 < nw; e2++)
        lower_sum_images_at(e2, B, nw, parts, dw_low);
    free(parts);
    gemm_host(&gc, dy, w, 0.0f, dcols);
    for (size_t i = 0; i < nx; i++)
        lower_col2im_at(i, C, H, W, R, R, st, pad, s.P, s.Q, dcols, dx_low, 1);
    double *rows = dt_malloc((size_t)B * K * sizeof(double));
    for (size_t t = 0; t < (size_t)B * K; t++)
        lower_bias_rows_at(t, (size_t)pq, dy, rows);
    for (size_t k = 0; k < (size_t)K; k++)
        lower_bias_grad_at(k, B, K, rows, db_low);
    free(rows);
    e = max_rel(dx_low, dx_cpu, nx);
    CHECK(e <= 1e-5, "%s: input gradient (accumulated) equals the CPU conv (max rel %.2e)", name,
          e);
    // dW sums B * P * Q products per entry, image by image here and in chunks of
    // images on the CPU: the 1e-4 relative
    e = max_rel(dw_low, dw_cpu, nw);
    CHECK(e <= 1e-4, "%s: weight gradient equals the CPU conv (max rel %.2e)", name, e);
    // db sums the same B * P * Q values per entry, in double here and in float
    // on the CPU: 2,304 of them at mnist_cnn's conv2 put the CPU's rounding
    // above 1e-5 on some draws, so dW's 1e-4
    e = max_rel(db_low, db_cpu, (size_t)K);
    CHECK(e <= 1e-4, "%s: bias gradient equals the CPU conv (max rel %.2e)", name, e);

    // the 32-bit bodies with precomputed divisors (what the device runs) give the
    // size_t bodies' bits
    if (lower_fits32(&s)) {
        const dt_lower_idx ix = lower_idx_make(&s);
        float *cols32 = vec_new(nc), *y32 = vec_new(ny), *dx32 = vec_plain(nx),
              *dx_ref = vec_dup(dx32, nx);
        for (uint32_t i = 0; i < (uint32_t)nc; i++)
            lower_im2col32_at(i, ix, H, W, st, pad, x, cols32);
        CHECK(memcmp(cols32, cols, nc * sizeof *cols) == 0, "%s: im2col in 32 bits = size_t, "
              "bit for bit", name);
        gemm_host(&gf, cols, w, 0.0f, y32);
        float *y_ref = vec_dup(y32, ny);
        for (size_t i = 0; i < ny; i++)
            lower_bias_add_at(i, K, (size_t)pq, b, y_ref);
        for (uint32_t i = 0; i < (uint32_t)ny; i++)
            lower_bias_add32_at(i, ix, b, y32);
        CHECK(memcmp(y32, y_ref, ny * sizeof *y32) == 0, "%s: bias add in 32 bits = size_t, bit "
              "for bit", name);
        for (int a = 0; a < 2; a++) {
            for (size_t i = 0; i < nx; i++)
                lower_col2im_at(i, C, H, W, R, R, st, pad, s.P, s.Q, dcols, dx_ref, a);
            for (uint32_t i = 0; i < (uint32_t)nx; i++)
                lower_col2im32_at(i, ix, R, R, st, pad, s.P, s.Q, dcols, dx32, a);
            CHECK(memcmp(dx32, dx_ref, nx * sizeof *dx32) == 0, "%s: col2im (accumulate %d) in "
                  "32 bits = size_t, bit for bit", name, a);
        }
        free(cols32); free(y32); free(y_ref); free(dx32); free(dx_ref);
    }
    // the bias gradient a warp per row: the lanes and their shuffle tree
    {
        double *rw = dt_malloc((size_t)B * K * sizeof(double));
        float *db_warp = vec_new((size_t)K);
        for (size_t t = 0; t < (size_t)B * K; t++) {
            double v[DT_LOWER_LANES];
            for (int l = 0; l < DT_LOWER_LANES; l++)
                v[l] = lower_bias_lane_at(t, l, (size_t)pq, dy);
            lower_lanes_tree(v);
            rw[t] = v[0];
        }
        for (size_t k = 0; k < (size_t)K; k++)
            lower_bias_grad_at(k, B, K, rw, db_warp);
        e = max_rel(db_warp, db_low, (size_t)K);
        CHECK(e <= 1e-7, "%s: bias gradient a warp per row = a thread per row (max rel %.2e, "
              "%zu of %d differ in any bit)", name, e, count_diff(db_warp, db_low, (size_t)K), K);
        e = max_rel(db_warp, db_cpu, (size_t)K);
        CHECK(e <= 1e-4, "%s: bias gradient a warp per row equals the CPU conv (max rel %.2e)",
              name, e);
        free(rw); free(db_warp);
    }

    // col2im without accumulation overwrites
    float *dx_fresh = vec_plain(nx), *dx_zero = vec_new(nx);
    for (size_t i = 0; i < nx; i++) {
        lower_col2im_at(i, C, H, W, R, R, st, pad, s.P, s.Q, dcols, dx_fresh, 0);
        lower_col2im_at(i, C, H, W, R, R, st, pad, s.P, s.Q, dcols, dx_zero, 1);
    }
    CHECK(mismatches(dx_fresh, dx_zero, nx) == 0, "%s: col2im with accumulate 0 overwrites dx",
          name);
    free(x); free(w); free(b); free(dy); free(work); free(y_cpu); free(y_low); free(cols);
    free(dcols); free(dx_cpu); free(dx_low); free(dw_cpu); free(dw_low); free(db_cpu);
    free(db_low); free(dx_fresh); free(dx_zero);
}

/* AdamW on the flat vector: the device's body (adamw_fused_at, the decay
 * flag by adamw_decay_at's search of the segment table) over three steps
 * against optim/adamw.c's adamw_step_range: bit for bit where this CPU's
 * kernel fuses the multiply-adds as the device does (avx512f, avx2+fma),
 * else to 1e-6 of each value's scale; and the CPU backend's flat_adamw, bit
 * for bit. The scale, where the two roundings of an unfused kernel can
 * differ: m = b1 m + c1 g cancels where g turns against m, so m's scale is
 * its terms' |b1 m| + |c1 g| carried over the steps, not |m|; v (a sum of
 * squares) is its own scale; x's is |x| plus its update's size at m's scale. */
static size_t beyond_scale(const float *a, const float *b, const float *scale, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-6f * scale[i]))
            bad++;
    return bad;
}

static void test_adamw_flat(size_t n, int nseg, double wd)
{
    dt_segment *segs = dt_calloc((size_t)nseg, sizeof *segs);
    for (int k = 0; k < nseg; k++) { // uneven tensors, decay alternating
        segs[k].offset = n * (size_t)k * k / ((size_t)nseg * nseg);
        segs[k].decay = k % 2 == 0;
    }
    for (int k = 0; k < nseg; k++)
        segs[k].count = (k + 1 < nseg ? segs[k + 1].offset : n) - segs[k].offset;
    float *x = vec_plain(n), *m = vec_new(n), *v = vec_new(n);
    float *xd = vec_dup(x, n), *md = vec_new(n), *vd = vec_new(n);
    float *xb = vec_dup(x, n), *mb = vec_new(n), *vb = vec_new(n);
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8;
    float *sm = vec_new(n), *sx = vec_new(n);
    for (int64_t step = 1; step <= 3; step++) {
        float *g = vec_plain(n);
        adamw_step_range(0, n, x, g, m, v, segs, nseg, lr, b1, b2, eps, wd, step);
        const dt_adamw_k k = adamw_scalars(lr, b1, b2, eps, wd, step);
        for (size_t i = 0; i < n; i++) {
            adamw_fused_at(i, k, adamw_decay_at(i, segs, nseg), xd, g, md, vd);
            sm[i] = k.b1 * sm[i] + k.c1 * fabsf(g[i]);
            sx[i] = fabsf(x[i]) + fabsf(k.nss) * sm[i] / (sqrtf(v[i]) / k.bc2s + k.eps);
        }
        be->flat_adamw(n, &k, segs, nseg, xb, g, mb, vb);
        free(g);
    }
    const int fused = strcmp(adamw_kernel(), "avx512f") == 0 ||
                      strcmp(adamw_kernel(), "avx2+fma") == 0;
    const size_t dx = count_diff(xd, x, n), dm = count_diff(md, m, n), dv = count_diff(vd, v, n);
    if (fused)
        CHECK(dx == 0 && dm == 0 && dv == 0, "adamw n=%zu %d segments wd=%g: the device body "
              "equals the CPU's %s kernel bit for bit over 3 steps (x %zu, m %zu, v %zu differ)",
              n, nseg, wd, adamw_kernel(), dx, dm, dv);
    else
        CHECK(beyond_scale(xd, x, sx, n) == 0 && beyond_scale(md, m, sm, n) == 0 &&
                  mismatches(vd, v, n) == 0,
              "adamw n=%zu %d segments wd=%g: the device body equals the CPU's unfused %s "
              "kernel to 1e-6 of each value's scale over 3 steps", n, nseg, wd, adamw_kernel());
    CHECK(count_diff(xb, x, n) == 0 && count_diff(mb, m, n) == 0 && count_diff(vb, v, n) == 0,
          "adamw n=%zu %d segments: the CPU backend's flat_adamw = adamw_step_range, bit for bit",
          n, nseg);
    free(segs); free(x); free(m); free(v); free(xd); free(md); free(vd); free(xb); free(mb);
    free(vb); free(sm); free(sx);
}

/* Clipping to a global norm: the device's lanes, groups and factor against
 * clip_grad_norm (another order of the double sum of squares: the norms to
 * 1e-12, the clipped gradients to 1e-6, bit for bit where the factor rounds
 * alike) */
static void test_clip_flat(size_t n, double max_norm)
{
    float *g = vec_plain(n), *gd = vec_dup(g, n);
    const double norm_cpu = sqrt(clip_sumsq(g, n));
    clip_grad_norm(g, n, max_norm);
    double *lanes = dt_malloc(DT_CLIP_LANES * sizeof *lanes);
    double groups[DT_CLIP_GROUPS], s = 0.0;
    for (size_t t = 0; t < DT_CLIP_LANES; t++)
        lanes[t] = clip_lane_at(t, n, gd);
    for (int u = 0; u < DT_CLIP_GROUPS; u++)
        s += groups[u] = clip_group_at(u, lanes);
    const float factor = clip_factor(groups, max_norm);
    for (size_t i = 0; i < n; i++)
        clip_apply_at(i, &factor, gd);
    const double e = fabs(sqrt(s) - norm_cpu) / norm_cpu;
    CHECK(e <= 1e-12, "clip n=%zu: the device's sum of squares = the CPU's (norm %.6g, rel %.1e)",
          n, norm_cpu, e);
    CHECK(mismatches(gd, g, n) == 0, "clip n=%zu to %g (norm %.4g, %s): the device's clipped "
          "gradient = clip_grad_norm's (%zu differ in any bit)", n, max_norm, norm_cpu,
          norm_cpu > max_norm ? "clipped" : "unchanged", count_diff(gd, g, n));
    free(lanes); free(g); free(gd);
}

/* The GPT's passes (nn/cuda/gpt.h) against nn/transformer.h's CPU passes, bit
 * for bit: the embedding with and without dropout, LayerNorm, the residual
 * add fused with it (also updating r in place, as the GPT does), and
 * LayerNorm's backward */
static void test_gpt_layers(int B, int T, int C, int V, float p)
{
    const int N = B * T;
    const size_t n = (size_t)N * C;
    int32_t *tok = dt_malloc((size_t)N * sizeof *tok);
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)(rng_uniform_d(&rng) * V) % V;
    float *wte = vec_plain((size_t)V * C), *wpe = vec_plain((size_t)T * C);
    float *x_cpu = vec_new(n), *x_dev = vec_new(n);
    const uint64_t key = 0x5eed + (uint64_t)C;
    embedding_forward(B, T, C, tok, wte, wpe, p, key, x_cpu);
    for (size_t i = 0; i < n; i++)
        gpt_embedding_at(i, T, C, tok, wte, wpe, p, key, x_dev);
    CHECK(count_diff(x_dev, x_cpu, n) == 0, "gpt B=%d T=%d C=%d p=%g: embedding = the CPU's, bit "
          "for bit", B, T, C, p);
    // LayerNorm on rows with a large mean (the two-pass variance matters)
    float *g = vec_plain((size_t)C), *b = vec_plain((size_t)C), *r = vec_plain(n);
    for (size_t i = 0; i < n; i++)
        x_cpu[i] = 30.0f + 4.0f * x_cpu[i];
    float *y_cpu = vec_new(n), *y_dev = vec_new(n), *m_cpu = vec_new((size_t)N),
          *m_dev = vec_new((size_t)N), *s_cpu = vec_new((size_t)N), *s_dev = vec_new((size_t)N);
    layernorm_forward(N, C, x_cpu, g, b, y_cpu, NULL, m_cpu, s_cpu);
    for (int row = 0; row < N; row++)
        gpt_layernorm_row(C, x_cpu + (size_t)row * C, g, b, y_dev + (size_t)row * C, m_dev + row,
                          s_dev + row);
    CHECK(count_diff(y_dev, y_cpu, n) == 0 && count_diff(m_dev, m_cpu, (size_t)N) == 0 &&
              count_diff(s_dev, s_cpu, (size_t)N) == 0,
          "gpt N=%d C=%d: LayerNorm (y, mean, rstd) = the CPU's, bit for bit", N, C);
    // residual + LayerNorm, xo written over r (in place), as models/gpt.c calls it
    float *r_cpu = vec_dup(r, n), *r_dev = vec_dup(r, n);
    layernorm_residual_forward(N, C, x_cpu, r_cpu, p, key, g, b, r_cpu, y_cpu, NULL, m_cpu, s_cpu);
    for (size_t row = 0; row < (size_t)N; row++)
        gpt_layernorm_residual_row(row, C, x_cpu, r_dev, p, key, g, b, r_dev, y_dev, m_dev,
                                   s_dev);
    CHECK(count_diff(r_dev, r_cpu, n) == 0 && count_diff(y_dev, y_cpu, n) == 0 &&
              count_diff(m_dev, m_cpu, (size_t)N) == 0 && count_diff(s_dev, s_cpu, (size_t)N) == 0,
          "gpt N=%d C=%d p=%g: residual + LayerNorm (xo in place, y, mean, rstd) = the CPU's, "
          "bit for bit", N, C, p);
    // LayerNorm's backward from the forward's statistics: dx written and added
    // to, dg and db
    float *dyl = vec_plain(n), *dx_cpu = vec_plain(n), *dx_dev = vec_dup(dx_cpu, n);
    float *dg_cpu = vec_new((size_t)C), *db_cpu = vec_new((size_t)C), *dg_dev = vec_new((size_t)C),
          *db_dev = vec_new((size_t)C);
    for (int acc = 0; acc <= 1; acc++) {
        layernorm_backward(N, C, r_cpu, m_cpu, s_cpu, g, dyl, dx_cpu, acc, dg_cpu, db_cpu);
        for (size_t row = 0; row < (size_t)N; row++)
            gpt_layernorm_backward_row(row, C, r_cpu, m_cpu, s_cpu, g, dyl, dx_dev, acc);
        for (size_t k = 0; k < (size_t)C; k++)
            gpt_layernorm_backward_col(k, N, C, r_cpu, m_cpu, s_cpu, dyl, dg_dev, db_dev);
        CHECK(count_diff(dx_dev, dx_cpu, n) == 0 && count_diff(dg_dev, dg_cpu, (size_t)C) == 0 &&
                  count_diff(db_dev, db_cpu, (size_t)C) == 0,
              "gpt N=%d C=%d: LayerNorm backward (dx %s, dg, db) = the CPU's, bit for bit", N, C,
              acc ? "added" : "written");
    }
    // the backward's recomputed LayerNorm output, the embeddings' gradients
    // (dwte added to, dwpe written) and a residual branch's dropout
    layernorm_apply(N, C, r_cpu, m_cpu, s_cpu, g, b, y_cpu, NULL);
    for (size_t row = 0; row < (size_t)N; row++)
        gpt_layernorm_apply_row(row, C, r_cpu, m_cpu, s_cpu, g, b, y_dev);
    CHECK(count_diff(y_dev, y_cpu, n) == 0,
          "gpt N=%d C=%d: LayerNorm from kept statistics = the CPU's, bit for bit", N, C);
    float *dwte_cpu = vec_plain((size_t)V * C), *dwte_dev = vec_dup(dwte_cpu, (size_t)V * C);
    float *dwpe_cpu = vec_plain((size_t)T * C), *dwpe_dev = vec_plain((size_t)T * C);
    embedding_backward(B, T, C, tok, dyl, p, key, dwte_cpu, dwpe_cpu);
    for (size_t i = 0; i < (size_t)C; i++)
        gpt_embedding_backward_col(i, B, T, C, tok, dyl, p, key, dwte_dev, dwpe_dev);
    float *dr_dev = vec_new(n);
    for (size_t i = 0; i < n; i++)
        gpt_dropout_grad_at(i, dyl, p, key, dr_dev);
    int same_dr = 1;
    for (size_t i = 0; i < n; i++)
        same_dr &= dr_dev[i] == dyl[i] * dropout_factor(key, i, p);
    CHECK(count_diff(dwte_dev, dwte_cpu, (size_t)V * C) == 0 &&
              count_diff(dwpe_dev, dwpe_cpu, (size_t)T * C) == 0 && same_dr,
          "gpt B=%d T=%d C=%d p=%g: embedding backward (dwte added to, dwpe written) and a "
          "branch's dropout gradient = the CPU's, bit for bit", B, T, C, p);
    free(dwte_cpu); free(dwte_dev); free(dwpe_cpu); free(dwpe_dev); free(dr_dev);
    free(dyl); free(dx_cpu); free(dx_dev); free(dg_cpu); free(db_cpu); free(dg_dev); free(db_dev);
    free(tok); free(wte); free(wpe); free(x_cpu); free(x_dev); free(g); free(b); free(r);
    free(y_cpu); free(y_dev); free(m_cpu); free(m_dev); free(s_cpu); free(s_dev); free(r_cpu);
    free(r_dev);
}

/* max |a - b| over max |b|: a whole tensor's error against its scale */
static double rel_max(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

/* The tiled kernels of nn/cuda/attention.cu, block by block: every thread of
 * a block stages its share of a tile, then each thread takes its pairs, as
 * the kernels do between their two waits. */
enum { TILE = GPT_ATT_TILE, HSM = GPT_ATT_HS_MAX };

static void tiled_forward(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                          float p, uint64_t key)
{
    const int hs = C / NH, nt = (T + TILE - 1) / TILE;
    const float scale = 1.0f / sqrtf((float)hs);
    static float ks[TILE * HSM], vs[TILE * HSM], q[TILE][HSM], acc[TILE][HSM];
    float mx[TILE], l[TILE];
    gpt_att_thread a[TILE];
    for (size_t g = 0; g < (size_t)B * NH * nt; g++) {
        for (int t = 0; t < TILE; t++) {
            a[t] = gpt_att_thread_at(g, t, T, NH);
            if (a[t].own)
                gpt_att_copy(hs, qkv + gpt_att_qkv(a[t].b, a[t].r, a[t].h, T, C, NH), q[t]);
            gpt_att_zero(hs, acc[t]);
            mx[t] = -INFINITY;
            l[t] = 0.0f;
        }
        for (int j0 = 0; j0 < a[0].end; j0 += TILE) {
            int n = 0;
            for (int t = 0; t < TILE; t++)
                n = gpt_att_stage_kv(qkv, a[0].b, a[0].h, T, C, NH, j0, a[0].end, hs, ks, vs, t,
                                     TILE);
            for (int t = 0; t < TILE; t++)
                if (a[t].own)
                    gpt_att_fwd_tile(hs, scale, a[t].bh, T, a[t].r, j0, n, q[t], ks, vs, p, key,
                                     &mx[t], &l[t], acc[t]);
        }
        for (int t = 0; t < TILE && a[t].own; t++) {
            float *yr = y + gpt_att_out(a[t].b, a[t].r, a[t].h, T, C, NH);
            for (int d = 0; d < hs; d++)
                yr[d] = acc[t][d] / l[t];
            lse[(size_t)a[t].bh * T + (size_t)a[t].r] = mx[t] + logf(l[t]);
        }
    }
}

static void tiled_backward(int B, int T, int C, int NH, const float *qkv, const float *lse,
                           const float *dy, float p, uint64_t key, float *dqkv, float *D)
{
    const int hs = C / NH, nt = (T + TILE - 1) / TILE;
    const float scale = 1.0f / sqrtf((float)hs);
    static float s1[TILE * HSM], s2[TILE * HSM], q[TILE][HSM], dyr[TILE][HSM], a1[TILE][HSM],
        a2[TILE][HSM];
    float di[TILE], ls[TILE], Ds[TILE];
    gpt_att_thread a[TILE];
    /* the queries' kernel */
    for (size_t g = 0; g < (size_t)B * NH * nt; g++) {
        for (int t = 0; t < TILE; t++) {
            a[t] = gpt_att_thread_at(g, t, T, NH);
            if (a[t].own) {
                gpt_att_copy(hs, qkv + gpt_att_qkv(a[t].b, a[t].r, a[t].h, T, C, NH), q[t]);
                gpt_att_copy(hs, dy + gpt_att_out(a[t].b, a[t].r, a[t].h, T, C, NH), dyr[t]);
            }
            gpt_att_zero(hs, a1[t]);
            di[t] = 0.0f;
        }
        for (int sweep = 0; sweep < 2; sweep++)
            for (int j0 = 0; j0 < a[0].end; j0 += TILE) {
                int n = 0;
                for (int t = 0; t < TILE; t++)
                    n = gpt_att_stage_kv(qkv, a[0].b, a[0].h, T, C, NH, j0, a[0].end, hs, s1, s2,
                                         t, TILE);
                for (int t = 0; t < TILE; t++)
                    if (a[t].own)
                        gpt_att_dq_tile(sweep, hs, scale, a[t].bh, T, a[t].r, j0, n, q[t],
                                        dyr[t], lse[(size_t)a[t].bh * T + (size_t)a[t].r], s1,
                                        s2, p, key, &di[t], a1[t]);
            }
        for (int t = 0; t < TILE && a[t].own; t++) {
            float *dq = dqkv + gpt_att_qkv(a[t].b, a[t].r, a[t].h, T, C, NH);
            for (int d = 0; d < hs; d++)
                dq[d] = scale * a1[t][d];
            D[(size_t)a[t].bh * T + (size_t)a[t].r] = di[t];
        }
    }
    /* the keys' kernel */
    for (size_t g = 0; g < (size_t)B * NH * nt; g++) {
        for (int t = 0; t < TILE; t++) {
            a[t] = gpt_att_thread_at(g, t, T, NH);
            gpt_att_zero(hs, a1[t]);
            gpt_att_zero(hs, a2[t]);
        }
        const float *q0 = qkv + gpt_att_qkv(a[0].b, 0, a[0].h, T, C, NH);
        const float *dy0 = dy + gpt_att_out(a[0].b, 0, a[0].h, T, C, NH);
        const size_t o = (size_t)a[0].bh * T;
        for (int i0 = a[0].r0; i0 < T; i0 += TILE) {
            const int n = T - i0 < TILE ? T - i0 : TILE;
            for (int t = 0; t < TILE; t++) {
                gpt_att_stage(q0, 3 * (size_t)C, i0, n, hs, s1, t, TILE);
                gpt_att_stage(dy0, (size_t)C, i0, n, hs, s2, t, TILE);
                gpt_att_stage_vec(lse + o, i0, n, ls, t, TILE);
                gpt_att_stage_vec(D + o, i0, n, Ds, t, TILE);
            }
            for (int t = 0; t < TILE; t++) {
                if (!a[t].own)
                    continue;
                const float *k = qkv + gpt_att_qkv(a[t].b, a[t].r, a[t].h, T, C, NH) + C;
                gpt_att_dkv_tile(hs, scale, a[t].bh, T, a[t].r, i0, n, k, k + C, s1, s2, ls, Ds,
                                 p, key, a1[t], a2[t]);
            }
        }
        for (int t = 0; t < TILE && a[t].own; t++) {
            float *dk = dqkv + gpt_att_qkv(a[t].b, a[t].r, a[t].h, T, C, NH) + C, *dv = dk + C;
            for (int d = 0; d < hs; d++) {
                dk[d] = scale * a1[t][d];
                dv[d] = a2[t][d];
            }
        }
    }
}

/* The causal attention of nn/cuda/attention.h, with and without dropout on
 * the probabilities: its row form (a query row at a time with an online
 * softmax; the backward's query and key passes) against the CPU's
 * (backend/cpu/attention.c: blocks of query rows, tiled or through sgemm),
 * which sums the same terms in other orders (and fuses multiply-adds in its
 * tiles), so the bound is 2e-6 of the largest |y|, |lse| and |dqkv|
 * (measured below 5e-7); and the kernels' tiled form against the row form:
 * the same pairs in the same order, so the same bits (y, lse, dqkv, D), over
 * sequences shorter than a tile, several tiles and a part tile, head sizes
 * of every instance (16, 32, 64) and of the generic one. */
static void test_gpt_attention(int B, int T, int C, int NH, float p)
{
    const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = vec_new(nq), *dy = vec_new(ny);
    for (size_t i = 0; i < nq; i++)
        qkv[i] = 1.5f * (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    for (size_t i = 0; i < ny; i++)
        dy[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    const uint64_t key = 0xa77e + (uint64_t)T;
    float *work = vec_new(attention_work(T));
    float *y_cpu = vec_new(ny), *y_row = vec_new(ny), *y_tile = vec_new(ny);
    float *l_cpu = vec_new(nl), *l_row = vec_new(nl), *l_tile = vec_new(nl);
    float *dq_cpu = vec_new(nq), *dq_row = vec_new(nq), *dq_tile = vec_new(nq);
    float *D_row = vec_new(nl), *D_tile = vec_new(nl);
    attention_forward(B, T, C, NH, qkv, y_cpu, l_cpu, NULL, p, key, work, 1);
    attention_backward(B, T, C, NH, qkv, l_cpu, NULL, dy, p, key, dq_cpu, work, 1);
    for (size_t r = 0; r < nl; r++)
        gpt_attention_row(r, T, C, NH, qkv, y_row, l_row, p, key);
    for (size_t r = 0; r < nl; r++)
        gpt_attention_backward_q(r, T, C, NH, qkv, l_row, dy, p, key, dq_row, D_row);
    for (size_t r = 0; r < nl; r++)
        gpt_attention_backward_kv(r, T, C, NH, qkv, l_row, dy, D_row, p, key, dq_row);
    const double ey = rel_max(y_row, y_cpu, ny), el = rel_max(l_row, l_cpu, nl),
                 eg = rel_max(dq_row, dq_cpu, nq);
    CHECK(ey <= 2e-6 && el <= 2e-6 && eg <= 2e-6,
          "gpt attention B=%d T=%d C=%d NH=%d p=%g: y, lse and dqkv within 2e-6 of the CPU's "
          "(%.1e, %.1e, %.1e)", B, T, C, NH, p, ey, el, eg);
    tiled_forward(B, T, C, NH, qkv, y_tile, l_tile, p, key);
    tiled_backward(B, T, C, NH, qkv, l_tile, dy, p, key, dq_tile, D_tile);
    const int same = !memcmp(y_row, y_tile, ny * sizeof(float)) &&
                     !memcmp(l_row, l_tile, nl * sizeof(float)) &&
                     !memcmp(dq_row, dq_tile, nq * sizeof(float)) &&
                     !memcmp(D_row, D_tile, nl * sizeof(float));
    CHECK(same,
          "gpt attention B=%d T=%d C=%d NH=%d p=%g: the tiled kernels' y, lse, dqkv and D equal "
          "the row form's bit for bit", B, T, C, NH, p);
    free(qkv); free(dy); free(work);
    free(y_cpu); free(y_row); free(y_tile); free(l_cpu); free(l_row); free(l_tile);
    free(dq_cpu); free(dq_row); free(dq_tile); free(D_row); free(D_tile);
}

/* GELU and the sequence cross-entropy (nn/cuda/gpt.h) against the CPU's
 * (backend/cpu/gelu.c, xent_seq.c). GELU: the CPU's baseline (x86-64)
 * variant computes the device body's operations, so there the bits are
 * equal; its AVX2 and AVX-512 variants contract multiply-adds into FMA, so
 * there the bound is 4e-6 of max(|y|, 1) (measured: 2.3e-7 on y, 1.2e-6 on
 * dx). The derivative pass gives the forward's bits, and dy d its
 * backward's. Cross-entropy: the CPU's rows sum over sixteen lanes
 * without FMA at every level, so the log-sum-exp, the hits, the loss and the
 * gradient are the CPU's bit for bit. */
static void test_gpt_gelu_xent(size_t n, int N, int V)
{
    float *x = vec_new(n), *dy = vec_new(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = 6.0f * (float)(2.0 * rng_uniform_d(&rng) - 1.0);
        dy[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    }
    if (n > 2)
        x[0] = 95.0f, x[1] = -95.0f; /* past the exp's clamp both ways */
    float *y_cpu = vec_new(n), *y_dev = vec_new(n), *d_cpu = vec_new(n), *d_dev = vec_new(n),
          *y2 = vec_new(n), *dx_cpu = vec_new(n), *dx_dev = vec_new(n);
    gelu_forward(n, x, y_cpu);
    gelu_backward(n, x, dy, dx_cpu);
    for (size_t i = 0; i < n; i++) {
        gpt_gelu_at(i, x, y_dev);
        gpt_gelu_deriv_at(i, x, y2, d_dev);
        gpt_gelu_backward_at(i, x, dy, dx_dev);
    }
    double ey = 0, ed = 0;
    for (size_t i = 0; i < n; i++) {
        ey = fmax(ey, fabs((double)y_dev[i] - y_cpu[i]) / fmax(fabs(y_cpu[i]), 1.0));
        ed = fmax(ed, fabs((double)dx_dev[i] - dx_cpu[i]) / fmax(fabs(dx_cpu[i]), 1.0));
    }
    if (isa_vec() == 0)
        CHECK(count_diff(y_dev, y_cpu, n) == 0 && count_diff(dx_dev, dx_cpu, n) == 0,
              "gpt GELU n=%zu: forward and backward = the CPU's baseline kernels, bit for bit", n);
    else
        CHECK(ey <= 4e-6 && ed <= 4e-6,
              "gpt GELU n=%zu: forward and backward within 4e-6 of the CPU's FMA kernels (%.1e, "
              "%.1e)", n, ey, ed);
    int same_dx = 1;
    for (size_t i = 0; i < n; i++)
        same_dx &= dy[i] * d_dev[i] == dx_dev[i];
    CHECK(count_diff(y2, y_dev, n) == 0 && same_dx,
          "gpt GELU n=%zu: the derivative pass gives the forward's y, and dy d the backward's", n);

    const size_t nl = (size_t)N * V;
    float *z = vec_new(nl), *lse_cpu = vec_new((size_t)N), *lse_dev = vec_new((size_t)N);
    int32_t *t = dt_malloc((size_t)N * sizeof *t);
    for (size_t i = 0; i < nl; i++)
        z[i] = 4.0f * (float)(2.0 * rng_uniform_d(&rng) - 1.0);
    for (int r = 0; r < N; r++)
        t[r] = (int32_t)(rng_uniform_d(&rng) * V) % V;
    int64_t hits_cpu = 0, hits_dev = 0;
    const double loss_cpu = xent_seq_forward(N, V, z, t, lse_cpu, &hits_cpu);
    double loss_dev = 0;
    for (int r = 0; r < N; r++) {
        int arg;
        gpt_xent_row(V, z + (size_t)r * V, lse_dev + r, &arg);
        loss_dev += (double)lse_dev[r] - (double)z[(size_t)r * V + t[r]];
        hits_dev += arg == t[r];
    }
    const float scale = 1.0f / (float)N;
    float *g_cpu = vec_new(nl), *g_dev = vec_dup(z, nl);
    xent_seq_backward(N, V, z, lse_cpu, t, scale, g_cpu);
    for (int r = 0; r < N; r++) /* in place, as the GPT calls it */
        gpt_xent_grad_row(V, g_dev + (size_t)r * V, lse_dev[r], t[r], scale,
                          g_dev + (size_t)r * V);
    CHECK(count_diff(lse_dev, lse_cpu, (size_t)N) == 0 && hits_dev == hits_cpu &&
              fabs(loss_dev - loss_cpu) <= 1e-9 * fabs(loss_cpu) && count_diff(g_dev, g_cpu, nl) == 0,
          "gpt cross-entropy N=%d V=%d: log-sum-exp, hits and gradient (in place) = the CPU's, "
          "bit for bit; loss %.9g against %.9g", N, V, loss_dev, loss_cpu);
    free(x); free(dy); free(y_cpu); free(y_dev); free(d_cpu); free(d_dev); free(y2);
    free(dx_cpu); free(dx_dev); free(z); free(lse_cpu); free(lse_dev); free(t); free(g_cpu);
    free(g_dev);
}

int main(void)
{
    be = backend_cpu();
    rng = rng_make(20240607, 17, 2, 3);

    // test_layers.c's activation and add sizes, a conv map (B, C, H, W) = (2, 3, 8, 8),
    // mnist_cnn's conv2 output (32, 64, 12, 12) and an odd size past the blocks of four
    const size_t sizes[] = {1, 99, 101, 2 * 3 * 8 * 8, 32 * 64 * 12 * 12, 12345};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        test_activation("relu", be->relu_forward, be->relu_backward, relu_forward_at,
                        relu_backward_at, n);
        test_relu_inplace(n);
        test_activation("sigmoid", be->sigmoid_forward, be->sigmoid_backward, sigmoid_forward_at,
                        sigmoid_backward_at, n);
        test_add(n);
    }

    // dropout: test_layers.c's n = 100000 and p = 0.3, the edges p = 0 and p = 1
    const float ps[] = {0.0f, 0.3f, 0.5f, 1.0f};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        test_dropout(100000, ps[k], 42);
        test_dropout(101, ps[k], 43);
    }

    // pooling: test_layers.c's shapes, and mnist_cnn's pool (32, 64, 24, 24) k2 s2
    test_maxpool(1, 1, 4, 4, 2, 2);
    test_maxpool(3, 2, 7, 5, 3, 2);
    test_maxpool(2, 3, 6, 9, 2, 1);
    test_maxpool(1, 2, 5, 7, 2, 2);
    test_maxpool(32, 64, 24, 24, 2, 2);
    test_avgpool(1, 1, 1);
    test_avgpool(3, 5, 7);
    test_avgpool(2, 3, 64);

    // GroupNorm: test_layers.c's shapes, plain and fused (add + ReLU, ReLU alone),
    // and a resnet20_gn first-stage map (16 channels of 32x32, 8 samples)
    const int gn[][4] = {{1, 4, 5, 1}, {3, 6, 7, 3}, {2, 4, 9, 4}, {3, 8, 1, 2}, {2, 8, 67, 4},
                         {8, 16, 1024, 8}};
    for (size_t k = 0; k < sizeof gn / sizeof gn[0]; k++)
        for (int f = 0; f < 3; f++)
            test_groupnorm(gn[k][0], gn[k][1], gn[k][2], gn[k][3], f == 2, f >= 1);

    // softmax cross-entropy: test_layers.c's shapes, a batch of 128 over 10 classes
    test_xent(2, 3, 0);
    test_xent(1, 4, 0);
    test_xent(3, 7, 0);
    test_xent(2, 2, 1);
    test_xent(128, 10, 0);
    test_xent(128, 10, 1);

    // SGD: plain, momentum, Nesterov, each with and without weight decay
    for (int wdk = 0; wdk < 2; wdk++) {
        const double wd = wdk ? 5e-4 : 0.0;
        test_sgd(1000, 0.0, wd, false);
        test_sgd(1000, 0.9, wd, false);
        test_sgd(1000, 0.9, wd, true);
    }

    // the gossip modes' terms: one slot (exponential graph), two (bipartite pairs
    // and a ring), four, none (one rank); a single weight, odd sizes, a large model
    const size_t gsz[] = {1, 99, 12345};
    for (size_t q = 0; q < sizeof gsz / sizeof gsz[0]; q++)
        for (int k = 0; k <= 4; k++)
            test_gossip_terms(gsz[q], k);

    // AdamW and clipping on the flat vector: one tensor, GPT-like tables, a
    // vector past the clip's lanes
    test_adamw_flat(1, 1, 0.1);
    test_adamw_flat(1000, 1, 0.0);
    test_adamw_flat(12345, 7, 0.1);
    test_adamw_flat(200003, 76, 0.1);
    test_clip_flat(1, 0.5);
    test_clip_flat(1000, 1.0);
    test_clip_flat(1000, 1e6);
    test_clip_flat(200003, 1.0);
    test_divmod();
    // the GPT's passes: "baby" (C 128), "small" (C 384), a width with a tail
    // past the sixteen lanes and one below them; dropout off and on
    test_gpt_layers(2, 64, 128, 96, 0.0f);
    test_gpt_layers(2, 32, 384, 300, 0.1f);
    test_gpt_layers(3, 5, 100, 7, 0.2f);
    test_gpt_layers(1, 3, 7, 5, 0.0f);
    // attention: baby's heads (T 64, hs 32) and small's width per head (hs 64),
    // hs 48, a shape off the CPU's tiles (T 7, hs 4: its sgemm blocks), and
    // sequences over several of the kernels' tiles (T 100, 130, 200; hs 16)
    test_gpt_attention(2, 64, 128, 4, 0.0f);
    test_gpt_attention(2, 64, 128, 4, 0.1f);
    test_gpt_attention(1, 32, 384, 6, 0.0f);
    test_gpt_attention(2, 48, 96, 2, 0.2f);
    test_gpt_attention(2, 7, 12, 3, 0.1f);
    test_gpt_attention(1, 130, 128, 2, 0.1f);
    test_gpt_attention(2, 200, 128, 8, 0.2f);
    test_gpt_attention(1, 100, 96, 2, 0.0f);
    // GELU over baby's MLP (768 x 512), a size with a tail and one of the tail
    // alone; cross-entropy at baby's and GPT-2's vocabulary widths and a tail
    test_gpt_gelu_xent(768 * 512, 768, 96);
    test_gpt_gelu_xent(12345, 5, 50257);
    test_gpt_gelu_xent(15, 3, 7);
    // lowered convolution: test_layers.c's conv shapes (square kernels), mnist_cnn's
    // conv2 (C 32, K 64, 3x3 on 26x26), resnet20_gn's stride-2 3x3 and 1x1 shortcuts
    test_lower(1, 1, 5, 5, 1, 3, 1, 0);
    test_lower(2, 3, 6, 9, 4, 3, 1, 1);
    test_lower(2, 2, 4, 3, 2, 3, 1, 2);
    test_lower(3, 2, 8, 8, 3, 4, 2, 1);
    test_lower(4, 32, 26, 26, 64, 3, 1, 0);
    test_lower(4, 16, 32, 32, 32, 3, 2, 1);
    test_lower(4, 16, 32, 32, 32, 1, 2, 0);
    test_lower(4, 3, 32, 32, 16, 3, 1, 1);
    // linear: test_layers.c's shapes, mnist_cnn's dense layers
    {
        dt_conv_shape cs = { 3, 5, 9, 7, 6, 3, 3, 1, 1, 9, 7, 0, 0 };
        test_gemm16(7, 33, 20, &cs);
        dt_conv_shape cs2 = { 2, 16, 8, 8, 32, 3, 3, 2, 1, 4, 4, 0, 0 };
        test_gemm16(32, 128, 384, &cs2);
    }
    test_linear_gemm(1, 1, 1);
    test_linear_gemm(3, 5, 4);
    test_linear_gemm(7, 13, 2);
    test_linear_gemm(32, 9216, 128);
    test_linear_gemm(32, 128, 10);
    return tap_done();
}
