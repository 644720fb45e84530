/* The GPT model (models/gpt.h) and its layer passes (nn/transformer.h).
 *
 * - Every layer's backward against central finite differences of the scalar
 *   L = sum(r .* y) for a fixed random r (L summed in double; the denominator
 *   is the step actually taken in float). Agreement is the relative error of
 *   the whole gradient vector, ||g - g_fd|| / ||g_fd||, below TOL_FD.
 * - Forwards against direct double-precision references (LayerNorm,
 *   attention with an explicit causal softmax, GELU, cross-entropy).
 * - The whole model on a tiny configuration against central differences of
 *   its mean loss, every coordinate, with and without dropout.
 * - Causality: changing token t changes no logit before t (bit for bit).
 * - The backend path (models/gpt_backend.h, the device backends' GPT) on the
 *   CPU backend and on the devmem backend (memory the host cannot touch
 *   outside the backend's calls) against models/gpt.c: loss, hits and every
 *   gradient, with and without dropout.
 * - PyTorch: `test_gpt --dump DIR` writes parameters and batches,
 *   tests/torch_gpt_reference.py computes the reference in float64 and the
 *   committed tests/fixtures/gpt_reference.txt is compared here: loss, logits
 *   and every tensor's gradient (norm and first entries). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/isa.h"
#include "core/rng.h"
#include "backend/backend.h"
#include "models/gpt.h"
#include "models/gpt_backend.h"
#include "nn/transformer.h"
#include "reference.h"
#include "tap.h"

/* Relative error of a gradient vector against finite differences. The float
 * forward leaves ~1e-5 of noise in a difference at these steps; a wrong
 * index, sign or missing term gives 1e-2 and above. */
#define TOL_FD 2e-3
/* float32 forward against a float64 reference, relative (max-norm) */
#define TOL_REF 2e-5

static dt_rng rng;

static float *vec_new(size_t n) { return dt_calloc(n ? n : 1, sizeof(float)); }

static void vec_normal(float *v, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(scale * rng_normal(&rng));
}

static double dot_r(const float *y, const float *r, size_t n)
{
    double L = 0.0;
    for (size_t i = 0; i < n; i++)
        L += (double)y[i] * r[i];
    return L;
}

/* ||a - b|| / ||b|| (absolute when b is zero). */
static double rel_err(const float *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* max |a - b| / max |b| */
static double max_rel(const float *a, const double *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return den > 0.0 ? num / den : num;
}

/* A layer under test: fwd(ctx) writes its output (nout floats) to out. */
typedef struct fd_case {
    void (*fwd)(void *ctx);
    void *ctx;
    const float *out;
    size_t nout;
    const float *r;   /* (nout) the weights of L = sum r .* out */
} fd_case;

/* Relative error of g (n) against central differences of L in v (n). */
static double fd_check(const fd_case *fc, float *v, size_t n, const float *g, float eps)
{
    double *fd = dt_calloc(n, sizeof *fd);
    for (size_t i = 0; i < n; i++) {
        const float save = v[i];
        v[i] = save + eps;
        const float hi = v[i];
        fc->fwd(fc->ctx);
        const double Lp = dot_r(fc->out, fc->r, fc->nout);
        v[i] = save - eps;
        const float lo = v[i];
        fc->fwd(fc->ctx);
        const double Lm = dot_r(fc->out, fc->r, fc->nout);
        v[i] = save;
        fd[i] = (Lp - Lm) / ((double)hi - (double)lo);
    }
    fc->fwd(fc->ctx);
    const double e = rel_err(g, fd, n);
    free(fd);
    return e;
}

/* ---- LayerNorm ------------------------------------------------------------ */

typedef struct ln_ctx {
    int N, C;
    float *x, *g, *b, *y, *mean, *rstd;
} ln_ctx;

static void ln_fwd(void *p)
{
    ln_ctx *c = p;
    layernorm_forward(c->N, c->C, c->x, c->g, c->b, c->y, NULL, c->mean, c->rstd);
}

static void test_layernorm(void)
{
    const int N = 5, C = 37; /* two vectors of 16 and a scalar tail */
    const size_t n = (size_t)N * C;
    ln_ctx c = { N, C, vec_new(n), vec_new(C), vec_new(C), vec_new(n), vec_new(N), vec_new(N) };
    vec_normal(c.x, n, 2.0);
    for (size_t i = 0; i < n; i++)
        c.x[i] += 3.0f; /* an offset the mean must remove */
    vec_normal(c.g, C, 1.0);
    vec_normal(c.b, C, 1.0);
    ln_fwd(&c);
    /* forward against a double reference */
    double *ref = dt_calloc(n, sizeof *ref);
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++)
            m += c.x[r * C + i];
        m /= C;
        for (int i = 0; i < C; i++)
            v += (c.x[r * C + i] - m) * (c.x[r * C + i] - m);
        v /= C;
        for (int i = 0; i < C; i++)
            ref[r * C + i] = (c.x[r * C + i] - m) / sqrt(v + 1e-5) * c.g[i] + c.b[i];
    }
    CHECK(max_rel(c.y, ref, n) < TOL_REF, "layernorm forward matches float64 (%.2e)",
          max_rel(c.y, ref, n));
    free(ref);

    float *r = vec_new(n), *dx = vec_new(n), *dg = vec_new(C), *db = vec_new(C);
    vec_normal(r, n, 1.0);
    layernorm_backward(N, C, c.x, c.mean, c.rstd, c.g, r, dx, 0, dg, db);
    fd_case fc = { ln_fwd, &c, c.y, n, r };
    double ex = fd_check(&fc, c.x, n, dx, 1e-2f), eg = fd_check(&fc, c.g, C, dg, 1e-2f),
           eb = fd_check(&fc, c.b, C, db, 1e-2f);
    CHECK(ex < TOL_FD && eg < TOL_FD && eb < TOL_FD,
          "layernorm backward vs finite differences: dx %.1e, dgain %.1e, dbias %.1e", ex, eg, eb);
    /* accumulate = 1 adds to dx */
    float *acc = vec_new(n);
    for (size_t i = 0; i < n; i++)
        acc[i] = 1.5f;
    layernorm_backward(N, C, c.x, c.mean, c.rstd, c.g, r, acc, 1, dg, db);
    int added = 1;
    for (size_t i = 0; i < n; i++)
        added &= fabsf(acc[i] - (1.5f + dx[i])) <= 1e-6f;
    CHECK(added, "layernorm backward with accumulate adds to dx");

    /* layernorm_apply recomputes the output from the kept statistics */
    float *y2 = vec_new(n);
    layernorm_apply(N, C, c.x, c.mean, c.rstd, c.g, c.b, y2, NULL);
    CHECK(memcmp(y2, c.y, n * sizeof *y2) == 0, "layernorm_apply reproduces the forward bit for bit");

    /* the fused residual add: xo = x + dropout(r), y = LayerNorm(xo) */
    float *res = vec_new(n), *xo = vec_new(n), *y3 = vec_new(n), *m3 = vec_new(N), *r3 = vec_new(N);
    vec_normal(res, n, 1.0);
    const float p = 0.3f;
    const uint64_t key = 77;
    layernorm_residual_forward(N, C, c.x, res, p, key, c.g, c.b, xo, y3, NULL, m3, r3);
    int sum_ok = 1, dropped = 0;
    for (size_t i = 0; i < n; i++) {
        const float f = dropout_factor(key, i, p);
        sum_ok &= xo[i] == c.x[i] + res[i] * f;
        dropped += f == 0.0f;
    }
    layernorm_forward(N, C, xo, c.g, c.b, y2, NULL, c.mean, c.rstd);
    CHECK(sum_ok && dropped > 0 && dropped < (int)n,
          "fused residual add: xo = x + dropout(r) (%d of %zu dropped at p %.1f)", dropped, n, p);
    CHECK(memcmp(y2, y3, n * sizeof *y2) == 0 && memcmp(m3, c.mean, N * sizeof *m3) == 0,
          "fused residual add: its LayerNorm equals layernorm_forward of the sum");
    /* in place: xo aliasing r */
    memcpy(y2, res, n * sizeof *y2);
    layernorm_residual_forward(N, C, c.x, y2, p, key, c.g, c.b, y2, y3, NULL, m3, r3);
    CHECK(memcmp(y2, xo, n * sizeof *y2) == 0, "fused residual add in place (xo = r)");

    /* y16: each function's output also rounded to bf16, as bf16_from_f32 rounds it */
    dt_bf16 *want = dt_malloc(n * sizeof *want), *got = dt_malloc(n * sizeof *got);
    int same16[3];
    layernorm_forward(N, C, c.x, c.g, c.b, y2, got, c.mean, c.rstd);
    bf16_from_f32(n, y2, want);
    same16[0] = memcmp(got, want, n * sizeof *got) == 0 && memcmp(y2, c.y, n * sizeof *y2) == 0;
    memset(got, 0, n * sizeof *got);
    layernorm_apply(N, C, c.x, c.mean, c.rstd, c.g, c.b, y2, got);
    same16[1] = memcmp(got, want, n * sizeof *got) == 0;
    layernorm_residual_forward(N, C, c.x, res, p, key, c.g, c.b, xo, y3, got, m3, r3);
    bf16_from_f32(n, y3, want);
    same16[2] = memcmp(got, want, n * sizeof *got) == 0;
    CHECK(same16[0] && same16[1] && same16[2],
          "layernorm forward/apply/residual: y16 is y rounded to bf16 bit for bit (%d %d %d), "
          "y unchanged", same16[0], same16[1], same16[2]);
    free(want); free(got);

    free(res); free(xo); free(y3); free(m3); free(r3); free(y2); free(acc);
    free(r); free(dx); free(dg); free(db);
    free(c.x); free(c.g); free(c.b); free(c.y); free(c.mean); free(c.rstd);
}

/* ---- matmul ----------------------------------------------------------------- */

typedef struct mm_ctx {
    int N, in, out;
    float *x, *W, *b, *y;
} mm_ctx;

static void mm_fwd(void *p)
{
    mm_ctx *c = p;
    matmul_forward(c->N, c->in, c->out, c->x, c->W, c->b, c->y);
}

static void test_matmul(void)
{
    const int N = 6, in = 5, out = 7;
    mm_ctx c = { N, in, out, vec_new((size_t)N * in), vec_new((size_t)out * in), vec_new(out),
                 vec_new((size_t)N * out) };
    vec_normal(c.x, (size_t)N * in, 1.0);
    vec_normal(c.W, (size_t)out * in, 1.0);
    vec_normal(c.b, out, 1.0);
    mm_fwd(&c);
    double worst = 0;
    for (int i = 0; i < N; i++)
        for (int o = 0; o < out; o++) {
            double s = c.b[o];
            for (int k = 0; k < in; k++)
                s += (double)c.x[i * in + k] * c.W[o * in + k];
            worst = fmax(worst, fabs(s - c.y[i * out + o]));
        }
    CHECK(worst < 1e-5, "matmul forward: y = x W^T + b (max err %.1e)", worst);
    float *r = vec_new((size_t)N * out), *dx = vec_new((size_t)N * in),
          *dW = vec_new((size_t)out * in), *db = vec_new(out);
    vec_normal(r, (size_t)N * out, 1.0);
    for (int i = 0; i < N * in; i++)
        dx[i] = NAN; /* written, not added */
    for (int i = 0; i < out * in; i++)
        dW[i] = NAN;
    matmul_backward(N, in, out, c.x, c.W, r, dx, dW, db);
    fd_case fc = { mm_fwd, &c, c.y, (size_t)N * out, r };
    double ex = fd_check(&fc, c.x, (size_t)N * in, dx, 1e-2f),
           ew = fd_check(&fc, c.W, (size_t)out * in, dW, 1e-2f), eb = fd_check(&fc, c.b, out, db, 1e-2f);
    CHECK(ex < TOL_FD && ew < TOL_FD && eb < TOL_FD,
          "matmul backward (written over NaN) vs finite differences: dx %.1e, dW %.1e, db %.1e",
          ex, ew, eb);
    free(r); free(dx); free(dW); free(db);
    free(c.x); free(c.W); free(c.b); free(c.y);
}

/* ---- GELU -------------------------------------------------------------------- */

typedef struct gelu_ctx {
    size_t n;
    float *x, *y;
} gelu_ctx;

static void gelu_fwd(void *p)
{
    gelu_ctx *c = p;
    gelu_forward(c->n, c->x, c->y);
}

static void test_gelu(void)
{
    const size_t n = 200;
    gelu_ctx c = { n, vec_new(n), vec_new(n) };
    for (size_t i = 0; i < n; i++) /* -8 .. 8: both tails and the bend */
        c.x[i] = -8.0f + 16.0f * (float)i / (float)(n - 1) + 0.01f * (float)rng_normal(&rng);
    gelu_fwd(&c);
    double *ref = dt_calloc(n, sizeof *ref);
    for (size_t i = 0; i < n; i++) {
        const double v = c.x[i];
        ref[i] = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    }
    double e = 0;
    for (size_t i = 0; i < n; i++)
        e = fmax(e, fabs(c.y[i] - ref[i]) / fmax(1.0, fabs(ref[i])));
    CHECK(e < 1e-6 * 4, "gelu forward matches the float64 tanh formula (%.1e)", e);
    float *r = vec_new(n), *dx = vec_new(n);
    vec_normal(r, n, 1.0);
    gelu_backward(n, c.x, r, dx);
    fd_case fc = { gelu_fwd, &c, c.y, n, r };
    double eg = fd_check(&fc, c.x, n, dx, 1e-3f);
    CHECK(eg < TOL_FD, "gelu backward vs finite differences: %.1e", eg);
    memcpy(c.y, r, n * sizeof *r);
    gelu_backward(n, c.x, c.y, c.y);
    CHECK(memcmp(c.y, dx, n * sizeof *dx) == 0, "gelu backward in place (dx = dy)");
    /* the backward pass's pair: gelu and its derivative in one pass, then dy *= d */
    float *y2 = vec_new(n), *d = vec_new(n), *g2 = vec_new(n);
    gelu_forward(n, c.x, c.y);
    gelu_forward_deriv(n, c.x, y2, d);
    memcpy(g2, r, n * sizeof *r);
    gelu_backward_deriv(n, d, g2);
    CHECK(memcmp(y2, c.y, n * sizeof *y2) == 0 && memcmp(g2, dx, n * sizeof *dx) == 0,
          "gelu_forward_deriv + gelu_backward_deriv equal gelu_forward and gelu_backward bit for bit");
    free(y2); free(d); free(g2);
    free(ref); free(r); free(dx); free(c.x); free(c.y);
}

/* ---- attention --------------------------------------------------------------- */

typedef struct att_ctx {
    int B, T, C, NH, nwork;
    float p;
    uint64_t key;
    float *qkv, *y, *lse, *work, *probs;
} att_ctx;

static void att_fwd(void *p)
{
    att_ctx *c = p;
    attention_forward(c->B, c->T, c->C, c->NH, c->qkv, c->y, c->lse, c->probs, c->p, c->key, c->work,
                      c->nwork);
}

static void test_attention(int T, float p, int keep)
{
    const int B = 2, C = 12, NH = 3, hs = C / NH;
    const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C;
    att_ctx c = { B, T, C, NH, 2, p, 4242, vec_new(nq), vec_new(ny), vec_new((size_t)B * NH * T),
                  vec_new(2 * attention_work(T)), keep ? vec_new((size_t)B * NH * T * T) : NULL };
    vec_normal(c.qkv, nq, 1.0);
    att_fwd(&c);
    /* float64 reference: explicit causal softmax, dropout with the same masks */
    double *ref = dt_calloc(ny, sizeof *ref), lse_err = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                double s[128], mx = -INFINITY, sum = 0;
                const float *q = c.qkv + ((size_t)b * T + i) * 3 * C + h * hs;
                for (int j = 0; j <= i; j++) {
                    const float *k = c.qkv + ((size_t)b * T + j) * 3 * C + C + h * hs;
                    double d = 0;
                    for (int e = 0; e < hs; e++)
                        d += (double)q[e] * k[e];
                    s[j] = d / sqrt((double)hs);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= i; j++)
                    sum += exp(s[j] - mx);
                lse_err = fmax(lse_err, fabs(mx + log(sum) - c.lse[((size_t)b * NH + h) * T + i]));
                for (int e = 0; e < hs; e++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++) {
                        const float *v = c.qkv + ((size_t)b * T + j) * 3 * C + 2 * C + h * hs;
                        const uint64_t idx = (((uint64_t)b * NH + h) * T + i) * T + j;
                        const double f = p > 0 ? dropout_factor(c.key, idx, p) : 1.0;
                        acc += exp(s[j] - mx) / sum * f * v[e];
                    }
                    ref[((size_t)b * T + i) * C + h * hs + e] = acc;
                }
            }
    CHECK(max_rel(c.y, ref, ny) < TOL_REF && lse_err < 1e-5,
          "attention forward (T %d, dropout %.1f, %s) matches a float64 causal softmax (%.1e, lse %.1e)",
          T, (double)p, keep ? "kept probabilities" : "recomputed", max_rel(c.y, ref, ny), lse_err);
    free(ref);
    float *r = vec_new(ny), *dqkv = vec_new(nq);
    vec_normal(r, ny, 1.0);
    for (size_t i = 0; i < nq; i++)
        dqkv[i] = NAN;
    attention_backward(B, T, C, NH, c.qkv, c.lse, c.probs, r, p, c.key, dqkv, c.work, c.nwork);
    fd_case fc = { att_fwd, &c, c.y, ny, r };
    double e = fd_check(&fc, c.qkv, nq, dqkv, 1e-2f);
    CHECK(e < TOL_FD, "attention backward (T %d, dropout %.1f, %s) vs finite differences of q, k, v: %.1e",
          T, (double)p, keep ? "kept probabilities" : "recomputed", e);
    free(r); free(dqkv);
    free(c.qkv); free(c.y); free(c.lse); free(c.work); free(c.probs);
}

/* max |a - b| / max |b| over floats */
static double max_rel_f(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0.0 ? num / den : num;
}

/* The tiled attention (what attention_forward/backward take at these shapes:
 * T a multiple of 16, head size hs a multiple of 16 up to 64) against the
 * blocked sgemm path (any shape; the finite-difference cases above reach it):
 * y, lse, the kept probabilities (row i's columns 0 .. i) and dqkv agree to
 * rounding. Row blocks, causal tiles and dropout masks are exercised at
 * GPT shapes (T 64 and 256, hs 32 and 64) that the float64 reference would
 * make slow; two threads split the (batch, head) pairs. */
static void test_attention_paths(int T, int hs, float p, int keep)
{
    const int B = 2, NH = 3, C = NH * hs, nwork = 2;
    const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, nl = (size_t)B * NH * T,
                 np = (size_t)B * NH * T * T;
    float *qkv = vec_new(nq), *dy = vec_new(ny), *work = vec_new(nwork * attention_work(T));
    float *y[2], *lse[2], *probs[2], *dqkv[2];
    vec_normal(qkv, nq, 1.0);
    vec_normal(dy, ny, 1.0);
    for (int k = 0; k < 2; k++) {
        y[k] = vec_new(ny);
        lse[k] = vec_new(nl);
        dqkv[k] = vec_new(nq);
        probs[k] = keep ? vec_new(np) : NULL;
        for (size_t i = 0; i < nq; i++)
            dqkv[k][i] = NAN;
    }
    attention_forward(B, T, C, NH, qkv, y[0], lse[0], probs[0], p, 77, work, nwork);
    attention_backward(B, T, C, NH, qkv, lse[0], probs[0], dy, p, 77, dqkv[0], work, nwork);
    attention_forward_blocked(B, T, C, NH, qkv, y[1], lse[1], probs[1], p, 77, work, nwork);
    attention_backward_blocked(B, T, C, NH, qkv, lse[1], probs[1], dy, p, 77, dqkv[1], work,
                               nwork);
    double ep = 0.0;
    if (keep)
        for (size_t r = 0; r < (size_t)B * NH * T; r++) {
            const size_t i = r % (size_t)T;
            ep = fmax(ep, max_rel_f(probs[0] + r * T, probs[1] + r * T, i + 1));
        }
    const double ey = max_rel_f(y[0], y[1], ny), el = max_rel_f(lse[0], lse[1], nl),
                 eg = max_rel_f(dqkv[0], dqkv[1], nq);
    CHECK(ey < 1e-5 && el < 1e-6 && ep < 1e-5 && eg < 1e-5,
          "tiled attention = blocked (T %d, hs %d, dropout %.1f, %s): y %.1e lse %.1e probs %.1e "
          "dqkv %.1e", T, hs, (double)p, keep ? "kept probabilities" : "recomputed", ey, el, ep, eg);
    for (int k = 0; k < 2; k++) {
        free(y[k]); free(lse[k]); free(dqkv[k]); free(probs[k]);
    }
    free(qkv); free(dy); free(work);
}

/* The passes that add the bias of the product before them on the way in
 * (models/gpt.c runs those products without it): each equals its plain
 * counterpart on the sum formed first, bit for bit. */
static void test_bias_folds(void)
{
    /* GELU over rows of F features: F 64 (vectors only) and 40 (a scalar tail a row) */
    for (int F = 64; F >= 40; F -= 24) {
        const int N = 5;
        const size_t n = (size_t)N * F;
        float *x = vec_new(n), *b = vec_new(F), *xb = vec_new(n), *y = vec_new(n),
              *y2 = vec_new(n), *d = vec_new(n), *y3 = vec_new(n), *dy = vec_new(n),
              *dx = vec_new(n);
        vec_normal(x, n, 2.0);
        vec_normal(b, F, 1.0);
        vec_normal(dy, n, 1.0);
        for (size_t i = 0; i < n; i++)
            xb[i] = x[i] + b[i % F];
        gelu_bias_forward(N, F, x, b, y);
        memcpy(dx, dy, n * sizeof *dx);
        gelu_bias_backward(N, F, x, b, y2, dx);
        gelu_forward_deriv(n, xb, y3, d);
        gelu_backward_deriv(n, d, dy);
        CHECK(memcmp(y, y3, n * sizeof *y) == 0 && memcmp(y2, y3, n * sizeof *y) == 0 &&
                  memcmp(dx, dy, n * sizeof *dx) == 0,
              "gelu with the bias (F %d%s) = gelu of x + b bit for bit: forward, and the one-pass "
              "backward's output and gradient", F, F % 16 ? ", scalar tails" : "");
        free(x); free(b); free(xb); free(y); free(y2); free(d); free(y3); free(dy); free(dx);
    }
    /* the residual add with the branch's bias: xo = x + dropout(r + rb), C 37 (tails) */
    for (int k = 0; k < 2; k++) {
        const int N = 6, C = 37;
        const size_t n = (size_t)N * C;
        const float p = k ? 0.3f : 0.0f;
        float *x = vec_new(n), *r = vec_new(n), *rb = vec_new(C), *g = vec_new(C),
              *bb = vec_new(C), *xo[2], *y[2], *mean[2], *rstd[2];
        vec_normal(x, n, 1.0);
        vec_normal(r, n, 1.0);
        vec_normal(rb, C, 1.0);
        vec_normal(g, C, 1.0);
        vec_normal(bb, C, 1.0);
        for (int j = 0; j < 2; j++) {
            xo[j] = vec_new(n);
            y[j] = vec_new(n);
            mean[j] = vec_new(N);
            rstd[j] = vec_new(N);
        }
        layernorm_bias_residual_forward(N, C, x, r, rb, p, 91, g, bb, xo[0], y[0], NULL, mean[0],
                                        rstd[0]);
        for (size_t i = 0; i < n; i++)
            r[i] += rb[i % C];
        layernorm_residual_forward(N, C, x, r, p, 91, g, bb, xo[1], y[1], NULL, mean[1], rstd[1]);
        CHECK(memcmp(xo[0], xo[1], n * sizeof *x) == 0 && memcmp(y[0], y[1], n * sizeof *x) == 0 &&
                  memcmp(mean[0], mean[1], N * sizeof *x) == 0 &&
                  memcmp(rstd[0], rstd[1], N * sizeof *x) == 0,
              "residual add with the branch's bias (dropout %.1f) = the plain one on r + rb, bit "
              "for bit", (double)p);
        for (int j = 0; j < 2; j++) {
            free(xo[j]); free(y[j]); free(mean[j]); free(rstd[j]);
        }
        free(x); free(r); free(rb); free(g); free(bb);
    }
    /* the attention with c_attn's bias, at tiled shapes, kept and recomputed
     * probabilities, with and without dropout */
    static const int shapes[][2] = { { 64, 32 }, { 48, 48 }, { 32, 16 } };
    for (int c = 0; c < 12; c++) {
        const int T = shapes[c % 3][0], hs = shapes[c % 3][1], keep = (c / 3) % 2;
        const float p = c / 6 ? 0.3f : 0.0f;
        const int B = 2, NH = 3, C = NH * hs, nwork = 2;
        const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, nl = (size_t)B * NH * T,
                     np = (size_t)B * NH * T * T;
        float *qkv = vec_new(nq), *qkvb = vec_new(nq), *b = vec_new(3 * (size_t)C),
              *dy = vec_new(ny), *work = vec_new(nwork * attention_work(T));
        float *y[2], *lse[2], *probs[2], *dqkv[2];
        vec_normal(qkv, nq, 1.0);
        vec_normal(b, 3 * (size_t)C, 1.0);
        vec_normal(dy, ny, 1.0);
        for (size_t i = 0; i < nq; i++)
            qkvb[i] = qkv[i] + b[i % (3 * (size_t)C)];
        for (int k = 0; k < 2; k++) {
            y[k] = vec_new(ny);
            lse[k] = vec_new(nl);
            dqkv[k] = vec_new(nq);
            probs[k] = keep ? vec_new(np) : NULL;
        }
        const int takes = attention_takes_bias(T, C, NH);
        attention_bias_forward(B, T, C, NH, qkv, b, y[0], lse[0], probs[0], p, 77, work, nwork);
        attention_bias_backward(B, T, C, NH, qkv, b, lse[0], probs[0], dy, p, 77, dqkv[0], work,
                                nwork);
        attention_forward(B, T, C, NH, qkvb, y[1], lse[1], probs[1], p, 77, work, nwork);
        attention_backward(B, T, C, NH, qkvb, lse[1], probs[1], dy, p, 77, dqkv[1], work, nwork);
        CHECK(takes && memcmp(y[0], y[1], ny * sizeof *qkv) == 0 &&
                  memcmp(lse[0], lse[1], nl * sizeof *qkv) == 0 &&
                  (!keep || memcmp(probs[0], probs[1], np * sizeof *qkv) == 0) &&
                  memcmp(dqkv[0], dqkv[1], nq * sizeof *qkv) == 0,
              "attention with c_attn's bias (T %d, hs %d, dropout %.1f, %s) = attention of "
              "qkv + b bit for bit: y, lse, probabilities, dqkv", T, hs, (double)p,
              keep ? "kept probabilities" : "recomputed");
        for (int k = 0; k < 2; k++) {
            free(y[k]); free(lse[k]); free(dqkv[k]); free(probs[k]);
        }
        free(qkv); free(qkvb); free(b); free(dy); free(work);
    }
    CHECK(!attention_takes_bias(75, 96, 3) && !attention_takes_bias(64, 120, 3),
          "the attention takes the bias at the tiled shapes only (T 75 or head size 40: no)");
}

/* ---- embedding ---------------------------------------------------------------- */

typedef struct emb_ctx {
    int B, T, C;
    int32_t *tok;
    float p;
    uint64_t key;
    float *wte, *wpe, *x;
} emb_ctx;

static void emb_fwd(void *p)
{
    emb_ctx *c = p;
    embedding_forward(c->B, c->T, c->C, c->tok, c->wte, c->wpe, c->p, c->key, c->x);
}

static void test_embedding(void)
{
    const int B = 3, T = 4, C = 5, V = 6;
    int32_t tok[12];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)rng_below(&rng, V);
    tok[1] = tok[6] = 2; /* a repeated token: its gradient rows add */
    emb_ctx c = { B, T, C, tok, 0.25f, 5, vec_new((size_t)V * C), vec_new((size_t)T * C),
                  vec_new((size_t)B * T * C) };
    vec_normal(c.wte, (size_t)V * C, 1.0);
    vec_normal(c.wpe, (size_t)T * C, 1.0);
    emb_fwd(&c);
    const size_t n = (size_t)B * T * C;
    float *r = vec_new(n), *dwte = vec_new((size_t)V * C), *dwpe = vec_new((size_t)T * C);
    vec_normal(r, n, 1.0);
    embedding_backward(B, T, C, tok, r, c.p, c.key, dwte, dwpe);
    fd_case fc = { emb_fwd, &c, c.x, n, r };
    double ee = fd_check(&fc, c.wte, (size_t)V * C, dwte, 1e-2f),
           ep = fd_check(&fc, c.wpe, (size_t)T * C, dwpe, 1e-2f);
    CHECK(ee < TOL_FD && ep < TOL_FD,
          "embedding backward (dropout 0.25) vs finite differences: dwte %.1e, dwpe %.1e", ee, ep);
    free(r); free(dwte); free(dwpe); free(c.wte); free(c.wpe); free(c.x);
}

/* ---- cross-entropy ------------------------------------------------------------- */

typedef struct xe_ctx {
    int N, V;
    float *z, *lse;
    const int32_t *t;
    float loss; /* out: the sum, as a 1-element output */
} xe_ctx;

static void xe_fwd(void *p)
{
    xe_ctx *c = p;
    c->loss = (float)xent_seq_forward(c->N, c->V, c->z, c->t, c->lse, NULL);
}

static void test_xent(void)
{
    const int N = 6, V = 37; /* two vectors of 16 and a tail */
    int32_t t[6];
    for (int i = 0; i < N; i++)
        t[i] = (int32_t)rng_below(&rng, V);
    xe_ctx c = { N, V, vec_new((size_t)N * V), vec_new(N), t, 0 };
    vec_normal(c.z, (size_t)N * V, 3.0);
    for (int n = 0; n < 3; n++) { /* half the targets are the argmax: hits to count */
        int arg = 0;
        for (int v = 1; v < V; v++)
            arg = c.z[n * V + v] > c.z[n * V + arg] ? v : arg;
        t[n] = arg;
    }
    int64_t hits = -1;
    const double loss = xent_seq_forward(N, V, c.z, t, c.lse, &hits);
    double ref = 0;
    int64_t ref_hits = 0;
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, s = 0;
        int arg = 0;
        for (int v = 0; v < V; v++)
            if (c.z[n * V + v] > mx) {
                mx = c.z[n * V + v];
                arg = v;
            }
        for (int v = 0; v < V; v++)
            s += exp(c.z[n * V + v] - mx);
        ref += mx + log(s) - c.z[n * V + t[n]];
        ref_hits += arg == t[n];
    }
    CHECK(fabs(loss - ref) < 1e-5 * fabs(ref) && hits == ref_hits,
          "cross-entropy: sum %.6f (float64 %.6f), %lld argmax hits (%lld)", loss, ref,
          (long long)hits, (long long)ref_hits);
    float *d = vec_new((size_t)N * V), one = 1.0f;
    xent_seq_backward(N, V, c.z, c.lse, t, 1.0f, d);
    fd_case fc = { xe_fwd, &c, &c.loss, 1, &one };
    double e = fd_check(&fc, c.z, (size_t)N * V, d, 1e-2f);
    CHECK(e < TOL_FD, "cross-entropy backward vs finite differences: %.1e", e);
    /* in place: the logits become their gradient */
    float *z2 = vec_new((size_t)N * V);
    memcpy(z2, c.z, (size_t)N * V * sizeof *z2);
    xent_seq_backward(N, V, z2, c.lse, t, 1.0f, z2);
    CHECK(memcmp(z2, d, (size_t)N * V * sizeof *d) == 0, "cross-entropy backward in place");
    free(z2); free(d); free(c.z); free(c.lse);
}

/* ---- the whole model ---------------------------------------------------------------- */

static void make_batch(int B, int T, int V, int32_t *tok, int32_t *tgt)
{
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)rng_below(&rng, V);
        tgt[i] = (int32_t)rng_below(&rng, V);
    }
}

static void test_create(void)
{
    dt_gpt_config bad[] = {
        { 0, 8, 1, 1, 8, 0, DT_PREC_FP32 },    { 10, 8, 1, 3, 8, 0, DT_PREC_FP32 },
        { 10, 8, 0, 1, 8, 0, DT_PREC_FP32 },   { 10, 8, 1, 1, 8, 1.0f, DT_PREC_FP32 },
        { 10, -1, 1, 1, 8, 0, DT_PREC_FP32 },
    };
    const char *want[] = { "positive", "multiple", "positive", "dropout", "positive" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_gpt *m = gpt_create(&bad[i]);
        CHECK(m == NULL && strstr(dt_err_msg(), want[i]) != NULL, "bad config %zu refused: %s", i,
              dt_err_msg());
        gpt_free(m);
    }
    /* the "small" configuration: GPT-2's parameter count formula */
    dt_gpt_config c = { 96, 256, 6, 6, 384, 0, DT_PREC_FP32 };
    dt_gpt *m = gpt_create(&c);
    const size_t C = 384, want_n = 96 * C + 256 * C + 6 * (12 * C * C + 13 * C) + 2 * C;
    CHECK(m && gpt_nparams(m) == want_n, "small GPT has %zu parameters (expected %zu)",
          m ? gpt_nparams(m) : 0, want_n);
    if (!m)
        return;
    const dt_tensor_view *tv = gpt_tensors(m);
    size_t sum = 0;
    int contiguous = 1;
    for (int t = 0; t < gpt_ntensors(m); t++) {
        contiguous &= tv[t].offset == sum;
        sum += tv[t].count;
    }
    CHECK(gpt_ntensors(m) == 2 + 12 * 6 + 2 && contiguous && sum == want_n,
          "%d tensors, contiguous, covering the flat vector", gpt_ntensors(m));
    CHECK(strcmp(tv[0].name, "wte.weight") == 0 && strcmp(tv[4].name, "h.0.attn.c_attn.weight") == 0 &&
              strcmp(tv[4].shape, "(1152, 384)") == 0 && strcmp(tv[13].name, "h.0.mlp.c_proj.bias") == 0 &&
              strcmp(tv[gpt_ntensors(m) - 1].name, "ln_f.bias") == 0,
          "tensor names and shapes in nanoGPT's order (%s %s, %s)", tv[4].name, tv[4].shape,
          tv[13].name);
    /* initialisation: deterministic, GPT-2's scales */
    float *a = dt_falloc(want_n), *b = dt_falloc(want_n);
    gpt_init_params(m, a, 42);
    gpt_init_params(m, b, 42);
    CHECK(memcmp(a, b, want_n * sizeof *a) == 0, "same seed, same parameters");
    gpt_init_params(m, b, 43);
    CHECK(memcmp(a, b, want_n * sizeof *a) != 0, "another seed, other parameters");
    double s2 = 0, p2 = 0;
    for (size_t i = 0; i < tv[4].count; i++)
        s2 += (double)a[tv[4].offset + i] * a[tv[4].offset + i];
    for (size_t i = 0; i < tv[6].count; i++)
        p2 += (double)a[tv[6].offset + i] * a[tv[6].offset + i];
    const double sd = sqrt(s2 / tv[4].count), sp = sqrt(p2 / tv[6].count);
    CHECK(fabs(sd - 0.02) < 0.0005 && fabs(sp - 0.02 / sqrt(12.0)) < 0.0002,
          "c_attn std %.5f (0.02), attn.c_proj std %.5f (0.02/sqrt(2 n_layer) = %.5f)", sd, sp,
          0.02 / sqrt(12.0));
    int ln_ok = 1;
    for (size_t i = 0; i < tv[2].count; i++)
        ln_ok &= a[tv[2].offset + i] == 1.0f && a[tv[3].offset + i] == 0.0f &&
                 a[tv[5].offset + i] == 0.0f;
    CHECK(ln_ok, "LayerNorm gains 1, biases 0");
    free(a);
    free(b);
    gpt_free(m);
}

/* Every coordinate of the tiny model's gradient against central differences
 * of the mean loss, with dropout off and on (same key in every evaluation).
 * Block 6 keeps the attention probabilities (n_head T <= 2 n_embd), block 12
 * recomputes them. */
static void test_model_fd(int block, float dropout)
{
    dt_gpt_config cfg = { 7, block, 2, 2, 8, dropout, DT_PREC_FP32 };
    const int B = 2, T = cfg.block;
    dt_gpt *m = gpt_create(&cfg);
    const size_t np = gpt_nparams(m);
    float *p = dt_falloc(np), *g = dt_falloc(np);
    gpt_init_params(m, p, 3);
    /* larger than GPT-2's scales so every path carries a visible gradient */
    for (size_t i = 0; i < np; i++)
        p[i] += 0.3f * (float)rng_normal(&rng);
    int32_t tok[24], tgt[24];
    make_batch(B, T, cfg.vocab, tok, tgt);
    const uint64_t key = 1001;
    gpt_reserve(m, B);
    gpt_forward(m, p, tok, tgt, B, 1, key, NULL);
    gpt_backward(m, p, g);
    double *fd = dt_calloc(np, sizeof *fd);
    for (size_t i = 0; i < np; i++) {
        const float save = p[i];
        const float eps = 1e-2f;
        p[i] = save + eps;
        const float hi = p[i];
        const double lp = gpt_forward(m, p, tok, tgt, B, 1, key, NULL);
        p[i] = save - eps;
        const float lo = p[i];
        const double lm = gpt_forward(m, p, tok, tgt, B, 1, key, NULL);
        p[i] = save;
        fd[i] = (lp - lm) / ((double)hi - (double)lo);
    }
    const double e = rel_err(g, fd, np);
    /* per tensor, so a failure names the tensor */
    const dt_tensor_view *tv = gpt_tensors(m);
    double worst = 0;
    int wt = 0;
    for (int t = 0; t < gpt_ntensors(m); t++) {
        double et = rel_err(g + tv[t].offset, fd + tv[t].offset, tv[t].count);
        if (et > worst) {
            worst = et;
            wt = t;
        }
    }
    CHECK(e < TOL_FD && worst < 5 * TOL_FD,
          "tiny GPT (block %d, dropout %.1f): all %zu gradient coordinates vs central differences: "
          "%.1e (worst tensor %s %.1e)", block, (double)dropout, np, e, tv[wt].name, worst);
    /* written, not added */
    float *g2 = dt_falloc(np);
    for (size_t i = 0; i < np; i++)
        g2[i] = NAN;
    gpt_forward(m, p, tok, tgt, B, 1, key, NULL);
    gpt_backward(m, p, g2);
    CHECK(memcmp(g, g2, np * sizeof *g) == 0, "gpt_backward writes every gradient (over NaN)");
    if (dropout > 0) {
        const double l1 = gpt_forward(m, p, tok, tgt, B, 1, key, NULL),
                     l2 = gpt_forward(m, p, tok, tgt, B, 1, key, NULL),
                     l3 = gpt_forward(m, p, tok, tgt, B, 1, key + 1, NULL),
                     le = gpt_forward(m, p, tok, tgt, B, 0, key, NULL);
        cfg.dropout = 0;
        dt_gpt *m0 = gpt_create(&cfg);
        const double l0 = gpt_forward(m0, p, tok, tgt, B, 1, key, NULL);
        gpt_free(m0);
        CHECK(l1 == l2 && l1 != l3 && le == l0,
              "dropout: same key same loss (%.6f), another key another (%.6f), evaluation "
              "(train 0) equals dropout 0 (%.6f)", l1, l3, le);
    }
    free(g2);
    free(fd);
    free(p);
    free(g);
    gpt_free(m);
}

/* models/gpt_backend.c through backend be (its memory: params, tokens and
 * gradients copied in and out) against models/gpt.c on the same batch and key:
 * the loss and hits, and the gradient (another GEMM library and the
 * attention probabilities recomputed: a float's rounding apart). Returns the
 * gradient (host, np floats) for the caller to compare across backends. */
static float *backend_path(const dt_backend *be, int block, float dropout, double *loss,
                           int64_t *hits, size_t *n)
{
    dt_gpt_config cfg = { 11, block, 2, 2, 16, dropout, DT_PREC_FP32 };
    const int B = 3, T = cfg.block, N = B * T;
    dt_gpt *ref = gpt_create(&cfg);
    dt_gpt_be *m = gpt_be_create(&cfg, be);
    const size_t np = *n = gpt_nparams(ref);
    float *p = dt_falloc(np), *g = dt_falloc(np), *gb = dt_falloc(np);
    gpt_init_params(ref, p, 21);
    for (size_t i = 0; i < np; i++)
        p[i] += 0.3f * (float)rng_normal(&rng);
    int32_t *tok = dt_calloc((size_t)N, sizeof *tok), *tgt = dt_calloc((size_t)N, sizeof *tgt);
    make_batch(B, T, cfg.vocab, tok, tgt);
    const uint64_t key = 77;
    int64_t hr = 0;
    const double lr = gpt_forward(ref, p, tok, tgt, B, 1, key, &hr);
    gpt_backward(ref, p, g);

    float *dp = be->mem_alloc(np * sizeof *dp), *dg = be->mem_alloc(np * sizeof *dg);
    int32_t *dtok = be->mem_alloc((size_t)N * sizeof *dtok),
            *dtgt = be->mem_alloc((size_t)N * sizeof *dtgt);
    be->to_backend(dp, p, np * sizeof *p);
    be->to_backend(dtok, tok, (size_t)N * sizeof *tok);
    be->to_backend(dtgt, tgt, (size_t)N * sizeof *tgt);
    for (size_t i = 0; i < np; i++)
        gb[i] = NAN;
    be->to_backend(dg, gb, np * sizeof *gb); /* every gradient written over NaN */
    *loss = gpt_be_forward(m, dp, dtok, dtgt, B, 1, key, hits);
    gpt_be_backward(m, dp, dg);
    be->to_host(gb, dg, np * sizeof *gb);

    double *gd = dt_calloc(np, sizeof *gd);
    for (size_t i = 0; i < np; i++)
        gd[i] = g[i];
    const double eg = max_rel(gb, gd, np);
    CHECK(fabs(*loss - lr) <= 1e-5 * fabs(lr) && *hits == hr && eg < 1e-4,
          "GPT through the %s backend (block %d, dropout %.1f) against models/gpt.c: loss "
          "%.7f vs %.7f, hits %lld vs %lld, gradient max error %.1e of its largest entry",
          be->name, block, (double)dropout, *loss, lr, (long long)*hits, (long long)hr, eg);
    be->mem_free(dp);
    be->mem_free(dg);
    be->mem_free(dtok);
    be->mem_free(dtgt);
    gpt_be_free(m);
    gpt_free(ref);
    free(gd);
    free(tok);
    free(tgt);
    free(p);
    free(g);
    return gb;
}

static void test_backend_path(int block, float dropout)
{
    const dt_rng save = rng;
    double l1, l2;
    int64_t h1, h2;
    size_t np;
    float *g1 = backend_path(backend_cpu(), block, dropout, &l1, &h1, &np);
    rng = save; /* the same parameters and batch */
    float *g2 = backend_path(backend_cpu_devmem(), block, dropout, &l2, &h2, &np);
    CHECK(l1 == l2 && h1 == h2 && memcmp(g1, g2, np * sizeof *g1) == 0,
          "GPT (block %d, dropout %.1f): the devmem backend (the CPU kernels, memory the host "
          "cannot touch) equals the CPU backend bit for bit: loss, hits, %zu gradients", block,
          (double)dropout, np);
    free(g1);
    free(g2);
}

/* Changing token t changes no logit of positions before t, and changes t's. */
static void test_causality(void)
{
    dt_gpt_config cfg = { 13, 16, 2, 4, 16, 0, DT_PREC_FP32 };
    const int B = 2, T = cfg.block, V = cfg.vocab;
    dt_gpt *m = gpt_create(&cfg);
    const size_t np = gpt_nparams(m), nl = (size_t)B * T * V;
    float *p = dt_falloc(np), *before = dt_falloc(nl);
    gpt_init_params(m, p, 9);
    for (size_t i = 0; i < np; i++)
        p[i] += 0.1f * (float)rng_normal(&rng);
    int32_t tok[32], tgt[32];
    make_batch(B, T, V, tok, tgt);
    gpt_forward(m, p, tok, tgt, B, 0, 0, NULL);
    memcpy(before, gpt_logits(m), nl * sizeof *before);
    int ok = 1;
    const int ts[] = { 0, 1, 7, 15 };
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        const int t = ts[k];
        int32_t tok2[32];
        memcpy(tok2, tok, sizeof tok);
        tok2[t] = (tok[t] + 1) % V; /* sequence 0 */
        gpt_forward(m, p, tok2, tgt, B, 0, 0, NULL);
        const float *after = gpt_logits(m);
        const int same_before = memcmp(after, before, (size_t)t * V * sizeof *after) == 0;
        const int changed_at = memcmp(after + (size_t)t * V, before + (size_t)t * V,
                                      (size_t)V * sizeof *after) != 0;
        const int other_seq = memcmp(after + (size_t)T * V, before + (size_t)T * V,
                                     (size_t)T * V * sizeof *after) == 0;
        CHECK(same_before && changed_at && other_seq,
              "causality: changing token %d leaves logits 0..%d bit for bit (%s), changes %d's "
              "(%s), leaves the other sequence (%s)", t, t - 1, same_before ? "yes" : "no", t,
              changed_at ? "yes" : "no", other_seq ? "yes" : "no");
        ok &= same_before;
    }
    (void)ok;
    free(p);
    free(before);
    gpt_free(m);
}

/* ---- agreement with PyTorch ---------------------------------------------------------- */

#define REF_PARAM_SEED 2024
#define REF_DATA_SEED 4202

static const struct ref_case {
    const char *name;
    dt_gpt_config cfg;
    int B;
} ref_cases[] = {
    { "tiny", { 11, 8, 2, 2, 16, 0, DT_PREC_FP32 }, 3 },
    { "wide", { 96, 32, 2, 4, 64, 0, DT_PREC_FP32 }, 2 },
};
#define REF_NCASES (sizeof ref_cases / sizeof ref_cases[0])

typedef struct ref_batch {
    dt_gpt *m;
    float *params;
    int32_t *tok, *tgt;
} ref_batch;

/* The parameters are GPT-2's init plus noise (so the LayerNorm and bias
 * gradients are not those of a symmetric start). */
static ref_batch ref_batch_make(size_t k)
{
    const struct ref_case *rc = &ref_cases[k];
    ref_batch rb = { gpt_create(&rc->cfg), NULL, NULL, NULL };
    const size_t np = gpt_nparams(rb.m), n = (size_t)rc->B * rc->cfg.block;
    rb.params = dt_falloc(np);
    gpt_init_params(rb.m, rb.params, REF_PARAM_SEED);
    dt_rng r = rng_make(REF_DATA_SEED, k, 0, 0);
    for (size_t i = 0; i < np; i++)
        rb.params[i] += 0.05f * (float)rng_normal(&r);
    rb.tok = dt_calloc(n, sizeof *rb.tok);
    rb.tgt = dt_calloc(n, sizeof *rb.tgt);
    for (size_t i = 0; i < n; i++) {
        rb.tok[i] = (int32_t)rng_below(&r, (uint64_t)rc->cfg.vocab);
        rb.tgt[i] = (int32_t)rng_below(&r, (uint64_t)rc->cfg.vocab);
    }
    return rb;
}

static void ref_batch_free(ref_batch *rb)
{
    free(rb->params);
    free(rb->tok);
    free(rb->tgt);
    gpt_free(rb->m);
}

static int ref_dump(const char *dir)
{
    for (size_t k = 0; k < REF_NCASES; k++) {
        const struct ref_case *rc = &ref_cases[k];
        ref_batch rb = ref_batch_make(k);
        const size_t n = (size_t)rc->B * rc->cfg.block;
        int err = ref_write_le32("test_gpt", dir, rc->name, "params.f32", rb.params,
                                 gpt_nparams(rb.m));
        err |= ref_write_le32("test_gpt", dir, rc->name, "tokens.i32", rb.tok, n);
        err |= ref_write_le32("test_gpt", dir, rc->name, "targets.i32", rb.tgt, n);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.tensors.txt", dir, rc->name);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "test_gpt --dump: cannot create %s\n", path);
            err = -1;
        } else {
            fprintf(f, "config vocab %d block %d n_layer %d n_head %d n_embd %d batch %d\n",
                    rc->cfg.vocab, rc->cfg.block, rc->cfg.n_layer, rc->cfg.n_head, rc->cfg.n_embd,
                    rc->B);
            const dt_tensor_view *tv = gpt_tensors(rb.m);
            for (int t = 0; t < gpt_ntensors(rb.m); t++)
                fprintf(f, "%s %zu %zu %s\n", tv[t].name, tv[t].offset, tv[t].count, tv[t].shape);
            if (fclose(f) != 0) {
                fprintf(stderr, "test_gpt --dump: write to %s failed\n", path);
                err = -1;
            }
        }
        if (!err)
            printf("%s: %zu parameters in %d tensors, batch (%d, %d)\n", rc->name,
                   gpt_nparams(rb.m), gpt_ntensors(rb.m), rc->B, rc->cfg.block);
        ref_batch_free(&rb);
        if (err)
            return 1;
    }
    return 0;
}

/* Norm relative error and the worst leading entry in units of the allowed
 * 1e-6 + 1e-4 |want| (float32 against float64 gave 1e-7 relative). */
static void ref_compare(size_t k, const ref_model *want)
{
    const struct ref_case *rc = &ref_cases[k];
    ref_batch rb = ref_batch_make(k);
    dt_gpt *m = rb.m;
    const size_t np = gpt_nparams(m), nl = (size_t)rc->B * rc->cfg.block * rc->cfg.vocab;
    float *g = dt_falloc(np), *logits = dt_falloc(nl);
    const double loss = gpt_forward(m, rb.params, rb.tok, rb.tgt, rc->B, 1, 0, NULL);
    memcpy(logits, gpt_logits(m), nl * sizeof *logits);
    gpt_backward(m, rb.params, g);
    CHECK_CLOSE(loss, want->loss, 0.0, 1e-5, "%s: loss %.9g matches PyTorch's %.9g (rel 1e-5)",
                rc->name, loss, want->loss);
    double ne, fe;
    ref_diff(logits, nl, &want->logits, 1e-6, 1e-4, &ne, &fe);
    CHECK(ne <= 1e-5 && fe <= 1.0,
          "%s: logits match PyTorch (norm rel err %.1e, limit 1e-5; first %d: %.2g of the allowed)",
          rc->name, ne, REF_FIRST, fe);
    ref_check_grads(rc->name, g, gpt_tensors(m), gpt_ntensors(m), want, 1e-4, 1e-6, 1e-4);
    free(g);
    free(logits);
    ref_batch_free(&rb);
}

static const char *ref_case_name(size_t k) { return ref_cases[k].name; }

static void test_torch_reference(const char *argv0)
{
    ref_check_fixture(argv0, "tests/fixtures/gpt_reference.txt", REF_NCASES, ref_case_name,
                      ref_compare);
}

int main(int argc, char **argv)
{
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    if (argc == 3 && strcmp(argv[1], "--dump") == 0)
        return ref_dump(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--dump DIR]\n", argv[0]);
        return 2;
    }
    rng = rng_make(12345, 0, 0, 0);
    test_layernorm();
    test_matmul();
    test_gelu();
    /* T 7: one block of query rows; 75: three (32, 32, 11), rows of 16-float
     * vectors and tails */
    for (int keep = 0; keep < 2; keep++) {
        test_attention(7, 0.0f, keep);
        test_attention(7, 0.3f, keep);
        test_attention(75, 0.0f, keep);
        test_attention(75, 0.3f, keep);
    }
    test_embedding();
    test_xent();
    test_create();
    test_model_fd(6, 0.0f);
    test_model_fd(6, 0.2f);
    test_model_fd(12, 0.0f);
    test_model_fd(12, 0.2f);
    test_causality();
    test_torch_reference(argv[0]);
    /* last: its random draws would change the models' above */
    for (int keep = 0; keep < 2; keep++)
        for (int d = 0; d < 2; d++) {
            const float p = d ? 0.3f : 0.0f;
            test_attention_paths(64, 32, p, keep);
            test_attention_paths(256, 64, p, keep);
            test_attention_paths(32, 16, p, keep);
            test_attention_paths(48, 48, p, keep);
        }
    test_backend_path(6, 0.0f);
    test_backend_path(20, 0.2f);
    test_bias_folds();
    return tap_done();
}
