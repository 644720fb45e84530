/* Layer kernels through the backend table.
 *
 * Every backward is checked against central finite differences of the scalar
 * L = sum(r .* y) for a random r: the float forward is evaluated, L is summed
 * in double, and the step actually taken (float(v + eps) - float(v - eps)) is
 * the denominator. Agreement is measured as the relative error of the whole
 * gradient vector, ||g - g_fd|| / ||g_fd||. Forwards are checked against
 * direct double-precision references (a 7-loop convolution, window maxima),
 * plus the conventions of backend.h: input gradients accumulate, parameter
 * gradients are overwritten, a NULL dx skips work without changing the rest. */
#include "backend/backend.h"
#include "core/isa.h"
#include "core/error.h"
#include "core/rng.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const dt_backend *be;
static dt_rng rng;

/* Tolerances on the relative error of a gradient vector. The float forward
 * leaves 1e-6..1e-4 of noise in a finite difference; a wrong index, sign,
 * scale or missing term gave 1e-2 and above when tried. */
#define TOL_FD 1e-3
#define TOL_REF 1e-5

/* ---- helpers -------------------------------------------------------------- */

/* Exact-size (not rounded up like dt_falloc), so a sanitizer build sees overruns. */
static float *vec_new(size_t n) { return dt_calloc(n ? n : 1, sizeof(float)); }

static void vec_normal(float *v, size_t n, double scale, double shift)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(shift + scale * rng_normal(&rng));
}

static void vec_fill(float *v, size_t n, float a)
{
    for (size_t i = 0; i < n; i++)
        v[i] = a;
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

static double dot_r(const float *y, const float *r, size_t n)
{
    double L = 0.0;
    for (size_t i = 0; i < n; i++)
        L += (double)r[i] * (double)y[i];
    return L;
}

/* A forward pass closed over its arguments; returns L in double. */
typedef double (*objective_fn)(void *ctx);

/* Relative error of grad against central differences of f w.r.t. v[0..n). */
static double fd_rel_err(objective_fn f, void *ctx, float *v, size_t n, double eps,
                         const float *grad)
{
    double *g = dt_malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        const float v0 = v[i];
        v[i] = (float)(v0 + eps);
        const double up = v[i], Lp = f(ctx);
        v[i] = (float)(v0 - eps);
        const double dn = v[i], Lm = f(ctx);
        v[i] = v0;
        g[i] = (Lp - Lm) / (up - dn);
    }
    double e = rel_err(grad, g, n);
    free(g);
    return e;
}

/* dx0 was computed into zeros, dx1 into ones: dx1 must be 1 + dx0. */
static int accumulated(const float *dx0, const float *dx1, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabs((double)dx1[i] - 1.0 - dx0[i]) > 1e-5 * (1.0 + fabs(dx0[i])))
            return 0;
    return 1;
}

/* ---- linear --------------------------------------------------------------- */

typedef struct lin_ctx {
    int B, in, out;
    float *x, *W, *b, *y, *r;
} lin_ctx;

static double lin_obj(void *p)
{
    lin_ctx *c = p;
    be->linear_forward(c->B, c->in, c->out, c->x, c->W, c->b, c->y, NULL);
    return dot_r(c->y, c->r, (size_t)c->B * c->out);
}

/* fd: also compare against finite differences (small shapes only). */
static void test_linear(int B, int in, int out, int bias, int fd)
{
    lin_ctx c = { B, in, out, NULL, NULL, NULL, NULL, NULL };
    const size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
    c.x = vec_new(nx);
    c.W = vec_new(nw);
    c.b = bias ? vec_new(out) : NULL;
    c.y = vec_new(ny);
    c.r = vec_new(ny);
    vec_normal(c.x, nx, 1.0, 0.0);
    vec_normal(c.W, nw, 0.5, 0.0);
    if (bias)
        vec_normal(c.b, out, 1.0, 0.0);
    vec_normal(c.r, ny, 1.0, 0.0);

    be->linear_forward(B, in, out, c.x, c.W, c.b, c.y, NULL);
    double *ref = dt_malloc(ny * sizeof(double));
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++) {
            double s = bias ? c.b[o] : 0.0;
            for (int j = 0; j < in; j++)
                s += (double)c.x[(size_t)i * in + j] * c.W[(size_t)o * in + j];
            ref[(size_t)i * out + o] = s;
        }
    CHECK(rel_err(c.y, ref, ny) < TOL_REF, "linear B=%d in=%d out=%d bias=%d: forward vs direct",
          B, in, out, bias);

    float *dx0 = vec_new(nx), *dx1 = vec_new(nx), *dW = vec_new(nw), *db = vec_new(out);
    float *dW2 = vec_new(nw), *db2 = vec_new(out);
    vec_fill(dx1, nx, 1.0f);
    vec_fill(dW, nw, 1e3f); // garbage: a kernel that accumulates into dW fails
    vec_fill(db, out, 1e3f);
    be->linear_backward(B, in, out, c.x, c.W, c.r, dx0, dW, db, NULL);
    be->linear_backward(B, in, out, c.x, c.W, c.r, dx1, dW2, db2, NULL);
    CHECK(accumulated(dx0, dx1, nx), "linear B=%d in=%d out=%d: dx accumulates", B, in, out);
    CHECK(memcmp(dW, dW2, nw * sizeof(float)) == 0, "linear: dW overwritten (same from 1e3 and 0)");
    vec_fill(dW2, nw, -7.0f);
    be->linear_backward(B, in, out, c.x, c.W, c.r, NULL, dW2, db2, NULL);
    CHECK(memcmp(dW, dW2, nw * sizeof(float)) == 0, "linear: dW unchanged with dx NULL");

    if (fd) {
        double e = fd_rel_err(lin_obj, &c, c.x, nx, 1e-2, dx0);
        CHECK(e < TOL_FD, "linear B=%d in=%d out=%d: dx vs finite differences (rel err %.2e)", B,
              in, out, e);
        e = fd_rel_err(lin_obj, &c, c.W, nw, 1e-2, dW);
        CHECK(e < TOL_FD, "linear B=%d in=%d out=%d: dW vs finite differences (rel err %.2e)", B,
              in, out, e);
        if (bias) {
            e = fd_rel_err(lin_obj, &c, c.b, out, 1e-2, db);
            CHECK(e < TOL_FD, "linear B=%d in=%d out=%d: db vs finite differences (rel err %.2e)",
                  B, in, out, e);
        }
    } else {
        // the adjoints in double, for shapes too large for finite differences
        double *dxr = dt_calloc(nx, sizeof(double)), *dWr = dt_calloc(nw, sizeof(double));
        for (int i = 0; i < B; i++)
            for (int o = 0; o < out; o++)
                for (int j = 0; j < in; j++) {
                    const double g = c.r[(size_t)i * out + o];
                    dxr[(size_t)i * in + j] += g * c.W[(size_t)o * in + j];
                    dWr[(size_t)o * in + j] += g * c.x[(size_t)i * in + j];
                }
        CHECK(rel_err(dx0, dxr, nx) < TOL_REF && rel_err(dW, dWr, nw) < TOL_REF,
              "linear B=%d in=%d out=%d: dx, dW vs direct adjoints", B, in, out);
        free(dxr), free(dWr);
    }
    free(ref);
    free(c.x), free(c.W), free(c.b), free(c.y), free(c.r);
    free(dx0), free(dx1), free(dW), free(db), free(dW2), free(db2);
}

/* ---- conv2d --------------------------------------------------------------- */

typedef struct conv_ctx {
    dt_conv_shape s;
    float *x, *w, *b, *y, *r, *work;
} conv_ctx;

static double conv_obj(void *p)
{
    conv_ctx *c = p;
    be->conv2d_forward(&c->s, c->x, c->w, c->b, c->y, c->work);
    return dot_r(c->y, c->r, (size_t)c->s.B * c->s.K * c->s.P * c->s.Q);
}

static dt_conv_shape conv_shape(int B, int C, int H, int W, int K, int R, int S, int stride,
                                int pad)
{
    dt_conv_shape s = { B, C, H, W, K, R, S, stride, pad, 0, 0, 0, 0 };
    s.P = (H + 2 * pad - R) / stride + 1;
    s.Q = (W + 2 * pad - S) / stride + 1;
    return s;
}

/* Direct convolution and its adjoints in double: the reference. */
static void conv_ref(const dt_conv_shape *s, const float *x, const float *w, const float *b,
                     const float *dy, double *y, double *dx, double *dw, double *db)
{
    const int B = s->B, C = s->C, H = s->H, W = s->W, K = s->K, R = s->R, S = s->S;
    const int P = s->P, Q = s->Q;
    memset(dx, 0, sizeof(double) * B * C * H * W);
    memset(dw, 0, sizeof(double) * K * C * R * S);
    memset(db, 0, sizeof(double) * K);
    for (int n = 0; n < B; n++)
        for (int k = 0; k < K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    const size_t yi = (((size_t)n * K + k) * P + p) * Q + q;
                    double acc = b ? b[k] : 0.0;
                    const double g = dy[yi];
                    db[k] += g;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int t = 0; t < S; t++) {
                                const int ih = p * s->stride - s->pad + r;
                                const int iw = q * s->stride - s->pad + t;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                const size_t xi = (((size_t)n * C + c) * H + ih) * W + iw;
                                const size_t wi = (((size_t)k * C + c) * R + r) * S + t;
                                acc += (double)w[wi] * x[xi];
                                dx[xi] += (double)w[wi] * g;
                                dw[wi] += (double)x[xi] * g;
                            }
                    y[yi] = acc;
                }
}

/* fd: also compare against finite differences (small shapes only). */
static void test_conv(dt_conv_shape s, int bias, int fd)
{
    char name[160];
    snprintf(name, sizeof name, "conv B=%d C=%d %dx%d K=%d %dx%d st=%d pad=%d bias=%d", s.B, s.C,
             s.H, s.W, s.K, s.R, s.S, s.stride, s.pad, bias);
    conv_ctx c = { s, NULL, NULL, NULL, NULL, NULL, NULL };
    const size_t nx = (size_t)s.B * s.C * s.H * s.W, nw = (size_t)s.K * s.C * s.R * s.S;
    const size_t ny = (size_t)s.B * s.K * s.P * s.Q;
    c.x = vec_new(nx);
    c.w = vec_new(nw);
    c.b = bias ? vec_new(s.K) : NULL;
    c.y = vec_new(ny);
    c.r = vec_new(ny);
    c.work = vec_new(be->conv2d_workspace(&s));
    vec_normal(c.x, nx, 1.0, 0.0);
    vec_normal(c.w, nw, 0.3, 0.0);
    if (bias)
        vec_normal(c.b, s.K, 1.0, 0.0);
    vec_normal(c.r, ny, 1.0, 0.0);

    double *yr = dt_malloc(ny * sizeof(double)), *dxr = dt_malloc(nx * sizeof(double));
    double *dwr = dt_malloc(nw * sizeof(double)), *dbr = dt_malloc(s.K * sizeof(double));
    conv_ref(&s, c.x, c.w, c.b, c.r, yr, dxr, dwr, dbr);
    vec_fill(c.y, ny, NAN); // every output must be written
    be->conv2d_forward(&s, c.x, c.w, c.b, c.y, c.work);
    CHECK(rel_err(c.y, yr, ny) < TOL_REF, "%s: forward vs direct (rel err %.2e)", name,
          rel_err(c.y, yr, ny));

    float *dx0 = vec_new(nx), *dx1 = vec_new(nx), *dw = vec_new(nw), *db = vec_new(s.K);
    float *dw2 = vec_new(nw), *db2 = vec_new(s.K);
    vec_fill(dx1, nx, 1.0f);
    vec_fill(dw, nw, 1e3f);
    vec_fill(db, s.K, 1e3f);
    be->conv2d_backward(&s, c.x, c.w, c.r, dx0, 0, dw, bias ? db : NULL, c.work);
    be->conv2d_backward(&s, c.x, c.w, c.r, dx1, 0, dw2, bias ? db2 : NULL, c.work);
    CHECK(accumulated(dx0, dx1, nx), "%s: dx accumulates", name);
    CHECK(rel_err(dx0, dxr, nx) < TOL_REF, "%s: dx vs direct adjoint (rel err %.2e)", name,
          rel_err(dx0, dxr, nx));
    CHECK(rel_err(dw, dwr, nw) < TOL_REF, "%s: dW (from 1e3) vs direct (rel err %.2e)", name,
          rel_err(dw, dwr, nw));
    if (bias)
        CHECK(rel_err(db, dbr, s.K) < TOL_REF, "%s: db (from 1e3) vs direct", name);
    else
        CHECK(db[0] == 1e3f, "%s: db NULL leaves the caller's buffer alone", name);
    vec_fill(dw2, nw, -7.0f);
    be->conv2d_backward(&s, c.x, c.w, c.r, NULL, 0, dw2, bias ? db2 : NULL, c.work);
    CHECK(memcmp(dw, dw2, nw * sizeof(float)) == 0, "%s: same dW with dx NULL", name);

    if (fd) {
        double e = fd_rel_err(conv_obj, &c, c.x, nx, 1e-2, dx0);
        CHECK(e < TOL_FD, "%s: dx vs finite differences (rel err %.2e)", name, e);
        e = fd_rel_err(conv_obj, &c, c.w, nw, 1e-2, dw);
        CHECK(e < TOL_FD, "%s: dW vs finite differences (rel err %.2e)", name, e);
        if (bias) {
            e = fd_rel_err(conv_obj, &c, c.b, s.K, 1e-2, db);
            CHECK(e < TOL_FD, "%s: db vs finite differences (rel err %.2e)", name, e);
        }
    }
    free(yr), free(dxr), free(dwr), free(dbr);
    free(c.x), free(c.w), free(c.b), free(c.y), free(c.r), free(c.work);
    free(dx0), free(dx1), free(dw), free(db), free(dw2), free(db2);
}

/* ---- pooling -------------------------------------------------------------- */

typedef struct pool_ctx {
    dt_pool_shape s;
    float *x, *y, *r;
    int32_t *arg;
} pool_ctx;

static double maxpool_obj(void *p)
{
    pool_ctx *c = p;
    be->maxpool_forward(&c->s, c->x, c->y, c->arg);
    return dot_r(c->y, c->r, (size_t)c->s.B * c->s.C * c->s.P * c->s.Q);
}

/* Distinct values 0.05 apart in random order, so no window has a near-tie that
 * a finite-difference step could flip. */
static void vec_spread(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = 0.05f * (float)i - 0.025f * (float)n;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(&rng, i);
        float t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static void test_maxpool(int B, int C, int H, int W, int k, int stride)
{
    dt_pool_shape s = { B, C, H, W, k, stride, (H - k) / stride + 1, (W - k) / stride + 1, 0 };
    char name[96];
    snprintf(name, sizeof name, "maxpool B=%d C=%d %dx%d k=%d st=%d", B, C, H, W, k, stride);
    pool_ctx c = { s, NULL, NULL, NULL, NULL };
    const size_t nx = (size_t)B * C * H * W, ny = (size_t)B * C * s.P * s.Q;
    c.x = vec_new(nx);
    c.y = vec_new(ny);
    c.r = vec_new(ny);
    c.arg = dt_malloc(ny * sizeof(int32_t));
    vec_spread(c.x, nx);
    vec_normal(c.r, ny, 1.0, 0.0);
    be->maxpool_forward(&s, c.x, c.y, c.arg);

    int fwd_ok = 1, arg_ok = 1;
    for (int pl = 0; pl < B * C; pl++)
        for (int p = 0; p < s.P; p++)
            for (int q = 0; q < s.Q; q++) {
                const float *xp = c.x + (size_t)pl * H * W;
                float m = -INFINITY;
                for (int i = 0; i < k; i++)
                    for (int j = 0; j < k; j++)
                        m = fmaxf(m, xp[(p * stride + i) * W + q * stride + j]);
                const size_t yi = ((size_t)pl * s.P + p) * s.Q + q;
                const int a = c.arg[yi], ah = a / W, aw = a % W;
                fwd_ok &= c.y[yi] == m;
                arg_ok &= a >= 0 && a < H * W && xp[a] == m && ah >= p * stride &&
                          ah < p * stride + k && aw >= q * stride && aw < q * stride + k;
            }
    CHECK(fwd_ok, "%s: forward equals the window maxima", name);
    CHECK(arg_ok, "%s: arg points at the winner inside its window", name);

    float *dx0 = vec_new(nx), *dx1 = vec_new(nx);
    vec_fill(dx1, nx, 1.0f);
    be->maxpool_backward(&s, c.r, c.arg, dx0, 0);
    be->maxpool_backward(&s, c.r, c.arg, dx1, 0);
    CHECK(accumulated(dx0, dx1, nx), "%s: dx accumulates", name);
    vec_fill(dx1, nx, NAN); // fresh: written whole, whatever it held
    be->maxpool_backward(&s, c.r, c.arg, dx1, 1);
    CHECK(memcmp(dx0, dx1, nx * sizeof(float)) == 0, "%s: dx_fresh writes what adding to zero gives",
          name);
    double e = fd_rel_err(maxpool_obj, &c, c.x, nx, 1e-2, dx0);
    CHECK(e < TOL_FD, "%s: dx vs finite differences (rel err %.2e)", name, e);
    free(c.x), free(c.y), free(c.r), free(c.arg), free(dx0), free(dx1);
}

/* Ties go to the first element in row-major window order (ReLU outputs are
 * full of zeros), NaN propagates and +inf is kept as a value, as in PyTorch. */
static void test_maxpool_special(void)
{
    for (int kk = 0; kk < 2; kk++) { // the 2x2 fast path and the generic loop
        const int k = kk ? 3 : 2, st = kk ? 1 : 2, H = 6, W = 6;
        dt_pool_shape s = { 1, 1, H, W, k, st, (H - k) / st + 1, (W - k) / st + 1, 0 };
        float x[36], y[36];
        int32_t arg[36];
        for (int i = 0; i < 36; i++)
            x[i] = 0.0f;
        be->maxpool_forward(&s, x, y, arg);
        int ok = 1;
        for (int p = 0; p < s.P; p++)
            for (int q = 0; q < s.Q; q++)
                ok &= y[p * s.Q + q] == 0.0f && arg[p * s.Q + q] == p * st * W + q * st;
        CHECK(ok, "maxpool k=%d: an all-zero window picks its first element", k);

        for (int i = 0; i < 36; i++)
            x[i] = (float)(i % 5) - 2.0f;
        x[7] = NAN;      // window (0, 0) for both k
        x[4 * W + 4] = INFINITY;
        be->maxpool_forward(&s, x, y, arg);
        CHECK(isnan(y[0]), "maxpool k=%d: a NaN in the window gives NaN", k);
        int far = 1, inf = 0;
        for (int p = 0; p < s.P; p++)
            for (int q = 0; q < s.Q; q++) {
                const int has_nan = p * st <= 1 && 1 < p * st + k && q * st <= 1 && 1 < q * st + k;
                const int has_inf = p * st <= 4 && 4 < p * st + k && q * st <= 4 && 4 < q * st + k;
                if (!has_nan)
                    far &= !isnan(y[p * s.Q + q]);
                if (has_inf && !has_nan)
                    inf += y[p * s.Q + q] == INFINITY && arg[p * s.Q + q] == 4 * W + 4;
            }
        CHECK(far, "maxpool k=%d: windows without the NaN stay finite", k);
        CHECK(inf > 0, "maxpool k=%d: +inf wins its windows (not NaN)", k);
    }
}

typedef struct avg_ctx {
    int B, C, HW;
    float *x, *y, *r;
} avg_ctx;

static double avgpool_obj(void *p)
{
    avg_ctx *c = p;
    be->avgpool_forward(c->B, c->C, c->HW, 0, c->x, c->y);
    return dot_r(c->y, c->r, (size_t)c->B * c->C);
}

static void test_avgpool(int B, int C, int HW)
{
    avg_ctx c = { B, C, HW, NULL, NULL, NULL };
    const size_t nx = (size_t)B * C * HW, ny = (size_t)B * C;
    c.x = vec_new(nx);
    c.y = vec_new(ny);
    c.r = vec_new(ny);
    vec_normal(c.x, nx, 1.0, 0.5);
    vec_normal(c.r, ny, 1.0, 0.0);
    be->avgpool_forward(B, C, HW, 0, c.x, c.y);
    double *ref = dt_malloc(ny * sizeof(double));
    for (size_t pl = 0; pl < ny; pl++) {
        double s = 0.0;
        for (int j = 0; j < HW; j++)
            s += c.x[pl * HW + j];
        ref[pl] = s / HW;
    }
    CHECK(rel_err(c.y, ref, ny) < TOL_REF, "avgpool B=%d C=%d HW=%d: forward is the mean", B, C,
          HW);
    float *dx0 = vec_new(nx), *dx1 = vec_new(nx);
    vec_fill(dx1, nx, 1.0f);
    be->avgpool_backward(B, C, HW, 0, c.r, dx0);
    be->avgpool_backward(B, C, HW, 0, c.r, dx1);
    CHECK(accumulated(dx0, dx1, nx), "avgpool B=%d C=%d HW=%d: dx accumulates", B, C, HW);
    double e = fd_rel_err(avgpool_obj, &c, c.x, nx, 1e-2, dx0);
    CHECK(e < TOL_FD, "avgpool B=%d C=%d HW=%d: dx vs finite differences (rel err %.2e)", B, C,
          HW, e);
    free(ref), free(c.x), free(c.y), free(c.r), free(dx0), free(dx1);
}

/* ---- activations, add ----------------------------------------------------- */

typedef struct ew_ctx {
    size_t n;
    void (*fwd)(size_t, const float *, float *);
    float *x, *y, *r;
} ew_ctx;

static double ew_obj(void *p)
{
    ew_ctx *c = p;
    c->fwd(c->n, c->x, c->y);
    return dot_r(c->y, c->r, c->n);
}

static void test_activation(const char *name, void (*fwd)(size_t, const float *, float *),
                            void (*bwd)(size_t, const float *, const float *, float *), size_t n,
                            double eps)
{
    ew_ctx c = { n, fwd, vec_new(n), vec_new(n), vec_new(n) };
    vec_normal(c.x, n, 2.0, 0.0);
    for (size_t i = 0; i < n; i++) // keep ReLU's kink out of reach of the step
        if (fabsf(c.x[i]) < 0.05f)
            c.x[i] = c.x[i] < 0.0f ? -0.05f : 0.05f;
    vec_normal(c.r, n, 1.0, 0.0);
    fwd(n, c.x, c.y);
    float *dx0 = vec_new(n), *dx1 = vec_new(n);
    vec_fill(dx1, n, 1.0f);
    bwd(n, c.y, c.r, dx0);
    bwd(n, c.y, c.r, dx1);
    CHECK(accumulated(dx0, dx1, n), "%s n=%zu: dx accumulates", name, n);
    double e = fd_rel_err(ew_obj, &c, c.x, n, eps, dx0);
    CHECK(e < TOL_FD, "%s n=%zu: dx vs finite differences (rel err %.2e)", name, n, e);
    free(c.x), free(c.y), free(c.r), free(dx0), free(dx1);
}

/* ReLU backward in place (the engine gives a ReLU's input gradient its output
 * gradient's buffer): the same bits as accumulating into zeros. */
static void test_relu_inplace(size_t n)
{
    float *x = vec_new(n), *y = vec_new(n), *dy = vec_new(n), *dx = vec_new(n);
    vec_normal(x, n, 1.0, 0.0);
    vec_normal(dy, n, 1.0, 0.0);
    x[0] = NAN; // passes through forward; its gradient is masked
    be->relu_forward(n, x, y);
    vec_fill(dx, n, 0.0f);
    be->relu_backward(n, y, dy, dx);
    be->relu_backward_inplace(n, y, dy);
    size_t masked = 0;
    for (size_t i = 0; i < n; i++)
        masked += dx[i] == 0.0f;
    CHECK(memcmp(dx, dy, n * sizeof(float)) == 0 && masked > n / 4 && masked < 3 * n / 4,
          "relu n=%zu: backward in place equals backward into zeros (%zu masked)", n, masked);
    free(x), free(y), free(dy), free(dx);
}

static void test_activation_values(void)
{
    const float x[6] = { -100.0f, -1.0f, 0.0f, 0.5f, 2.0f, 100.0f };
    float y[6];
    be->relu_forward(6, x, y);
    CHECK(y[0] == 0.0f && y[1] == 0.0f && y[2] == 0.0f && y[3] == 0.5f && y[5] == 100.0f,
          "relu forward clamps negatives, passes positives");
    be->sigmoid_forward(6, x, y);
    int ok = 1;
    for (int i = 0; i < 6; i++)
        ok &= fabs(y[i] - 1.0 / (1.0 + exp(-(double)x[i]))) < 1e-7;
    CHECK(ok, "sigmoid forward equals 1/(1+exp(-x)) incl. x = +-100 (no NaN)");
}

typedef struct add_ctx {
    size_t n;
    float *a, *b, *y, *r;
} add_ctx;

static double add_obj(void *p)
{
    add_ctx *c = p;
    be->add_forward(c->n, c->a, c->b, c->y);
    return dot_r(c->y, c->r, c->n);
}

static void test_add(size_t n)
{
    add_ctx c = { n, vec_new(n), vec_new(n), vec_new(n), vec_new(n) };
    vec_normal(c.a, n, 1.0, 0.0);
    vec_normal(c.b, n, 1.0, 0.0);
    vec_normal(c.r, n, 1.0, 0.0);
    be->add_forward(n, c.a, c.b, c.y);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= c.y[i] == c.a[i] + c.b[i];
    CHECK(ok, "add n=%zu: forward is a + b", n);
    float *da0 = vec_new(n), *db0 = vec_new(n), *da1 = vec_new(n), *db1 = vec_new(n);
    vec_fill(da1, n, 1.0f);
    vec_fill(db1, n, 1.0f);
    be->add_backward(n, c.r, da0, db0);
    be->add_backward(n, c.r, da1, db1);
    CHECK(accumulated(da0, da1, n) && accumulated(db0, db1, n), "add n=%zu: both accumulate", n);
    double ea = fd_rel_err(add_obj, &c, c.a, n, 1e-2, da0);
    double eb = fd_rel_err(add_obj, &c, c.b, n, 1e-2, db0);
    CHECK(ea < TOL_FD && eb < TOL_FD, "add n=%zu: da, db vs finite differences (%.2e, %.2e)", n,
          ea, eb);
    vec_fill(db1, n, 0.0f);
    be->add_backward(n, c.r, NULL, db1);
    CHECK(memcmp(db0, db1, n * sizeof(float)) == 0, "add: da NULL still gives db");
    free(c.a), free(c.b), free(c.y), free(c.r), free(da0), free(db0), free(da1), free(db1);
}

/* ---- dropout -------------------------------------------------------------- */

typedef struct drop_ctx {
    size_t n;
    float p;
    uint64_t key;
    float *x, *y, *mask, *r;
} drop_ctx;

static double drop_obj(void *p)
{
    drop_ctx *c = p;
    be->dropout_forward(c->n, c->p, c->key, c->x, c->y, c->mask);
    return dot_r(c->y, c->r, c->n);
}

static void test_dropout(void)
{
    const size_t n = 100000;
    const float p = 0.3f;
    float *x = vec_new(n), *y = vec_new(n), *m1 = vec_new(n), *m2 = vec_new(n), *m3 = vec_new(n);
    vec_normal(x, n, 1.0, 1.0);
    be->dropout_forward(n, p, 42, x, y, m1);
    size_t kept = 0, bad = 0;
    double sx = 0.0, sy = 0.0;
    for (size_t i = 0; i < n; i++) {
        kept += m1[i] != 0.0f;
        bad += m1[i] != 0.0f && m1[i] != 1.0f / (1.0f - p);
        bad += y[i] != x[i] * m1[i];
        sx += x[i];
        sy += y[i];
    }
    // binomial sd of the kept fraction is sqrt(p (1 - p) / n) = 0.00145
    CHECK(fabs((double)kept / n - (1.0 - p)) < 0.008, "dropout p=0.3: kept fraction %.4f ~ 0.7",
          (double)kept / n);
    CHECK(bad == 0, "dropout: mask is 0 or 1/(1-p), y = x * mask");
    CHECK(fabs(sy / sx - 1.0) < 0.02, "dropout: inverted scaling keeps the mean (ratio %.4f)",
          sy / sx);
    be->dropout_forward(n, p, 42, x, y, m2);
    CHECK(memcmp(m1, m2, n * sizeof(float)) == 0, "dropout: same key, same mask");
    be->dropout_forward(n, p, 43, x, y, m3);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff += (m1[i] != 0.0f) != (m3[i] != 0.0f);
    // independent masks disagree on 2 p (1 - p) = 42% of the elements
    CHECK(fabs((double)diff / n - 0.42) < 0.01, "dropout: another key, another mask (%.3f differ)",
          (double)diff / n);
    int okmask = 1;
    for (size_t i = 0; i < n; i++) // every element: the vector loop's lanes and its tail
        okmask &= (m1[i] != 0.0f) == (rng_hash_uniform(42, i) >= p);
    CHECK(okmask, "dropout: mask[i] follows rng_hash_uniform(key, i) >= p");

    be->dropout_forward(n, 0.0f, 42, x, y, m1);
    int same = memcmp(x, y, n * sizeof(float)) == 0;
    for (size_t i = 0; i < n; i++)
        same &= m1[i] == 1.0f;
    CHECK(same, "dropout p=0 copies x and sets a mask of ones");

    // gradient on a small case: with the key fixed, y is linear in x
    drop_ctx c = { 37, 0.5f, 7, vec_new(37), vec_new(37), vec_new(37), vec_new(37) };
    vec_normal(c.x, c.n, 1.0, 0.0);
    vec_normal(c.r, c.n, 1.0, 0.0);
    be->dropout_forward(c.n, c.p, c.key, c.x, c.y, c.mask);
    float *dx0 = vec_new(c.n), *dx1 = vec_new(c.n);
    vec_fill(dx1, c.n, 1.0f);
    be->dropout_backward(c.n, c.mask, c.r, dx0, 0);
    be->dropout_backward(c.n, c.mask, c.r, dx1, 0);
    CHECK(accumulated(dx0, dx1, c.n), "dropout: dx accumulates");
    vec_fill(dx1, c.n, NAN);
    be->dropout_backward(c.n, c.mask, c.r, dx1, 1);
    CHECK(memcmp(dx0, dx1, c.n * sizeof(float)) == 0,
          "dropout: dx_fresh writes what adding to zero gives");
    double e = fd_rel_err(drop_obj, &c, c.x, c.n, 1e-2, dx0);
    CHECK(e < TOL_FD, "dropout n=37 p=0.5: dx vs finite differences (rel err %.2e)", e);
    free(x), free(y), free(m1), free(m2), free(m3);
    free(c.x), free(c.y), free(c.mask), free(c.r), free(dx0), free(dx1);
}

/* ---- groupnorm ------------------------------------------------------------ */

typedef struct gn_ctx {
    int B, C, HW, G;
    float *x, *gamma, *beta, *y, *mean, *rstd, *r;
} gn_ctx;

static double gn_obj(void *p)
{
    gn_ctx *c = p;
    be->groupnorm_forward(c->B, c->C, c->HW, c->G, 0, c->x, c->gamma, c->beta, NULL, 0, c->y, c->mean,
                          c->rstd);
    return dot_r(c->y, c->r, (size_t)c->B * c->C * c->HW);
}

static void test_groupnorm(int B, int C, int HW, int G)
{
    char name[96];
    snprintf(name, sizeof name, "groupnorm B=%d C=%d HW=%d G=%d", B, C, HW, G);
    const size_t nx = (size_t)B * C * HW, ns = (size_t)B * G;
    gn_ctx c = { B, C, HW, G, vec_new(nx), vec_new(C), vec_new(C), vec_new(nx), vec_new(ns),
                 vec_new(ns), vec_new(nx) };
    vec_normal(c.x, nx, 2.0, 3.0); // off-centre and not unit scale
    vec_normal(c.gamma, C, 0.5, 1.0);
    vec_normal(c.beta, C, 0.5, 0.0);
    vec_normal(c.r, nx, 1.0, 0.0);
    be->groupnorm_forward(B, C, HW, G, 0, c.x, c.gamma, c.beta, NULL, 0, c.y, c.mean, c.rstd);

    // reference with the biased variance, as torch.nn.GroupNorm
    const int Cg = C / G, n = Cg * HW;
    double *ref = dt_malloc(nx * sizeof(double)), *mref = dt_malloc(ns * sizeof(double));
    double *rref = dt_malloc(ns * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int g = 0; g < G; g++) {
            const float *xg = c.x + ((size_t)b * C + (size_t)g * Cg) * HW;
            double mu = 0.0, var = 0.0;
            for (int j = 0; j < n; j++)
                mu += xg[j];
            mu /= n;
            for (int j = 0; j < n; j++)
                var += (xg[j] - mu) * (xg[j] - mu);
            var /= n;
            mref[b * G + g] = mu;
            rref[b * G + g] = 1.0 / sqrt(var + 1e-5);
            for (int j = 0; j < n; j++) {
                const int ch = g * Cg + j / HW;
                ref[((size_t)b * C + (size_t)g * Cg) * HW + j] =
                    (xg[j] - mu) * rref[b * G + g] * c.gamma[ch] + c.beta[ch];
            }
        }
    CHECK(rel_err(c.y, ref, nx) < TOL_REF, "%s: forward vs reference (rel err %.2e)", name,
          rel_err(c.y, ref, nx));
    CHECK(rel_err(c.mean, mref, ns) < 1e-6 && rel_err(c.rstd, rref, ns) < 1e-6,
          "%s: saved mean and rstd", name);

    float *dx0 = vec_new(nx), *dx1 = vec_new(nx), *dg = vec_new(C), *dbt = vec_new(C);
    float *dg2 = vec_new(C), *dbt2 = vec_new(C);
    vec_fill(dx1, nx, 1.0f);
    vec_fill(dg, C, 1e3f);
    vec_fill(dbt, C, 1e3f);
    be->groupnorm_backward(B, C, HW, G, 0, c.x, c.gamma, c.mean, c.rstd, NULL, c.r, dx0, NULL, 0,
                           0, dg, dbt);
    be->groupnorm_backward(B, C, HW, G, 0, c.x, c.gamma, c.mean, c.rstd, NULL, c.r, dx1, NULL, 0,
                           0, dg2, dbt2);
    CHECK(accumulated(dx0, dx1, nx), "%s: dx accumulates", name);
    vec_fill(dx1, nx, NAN);
    be->groupnorm_backward(B, C, HW, G, 0, c.x, c.gamma, c.mean, c.rstd, NULL, c.r, dx1, NULL, 1,
                           0, dg2, dbt2);
    CHECK(memcmp(dx0, dx1, nx * sizeof(float)) == 0,
          "%s: dx_fresh writes what adding to zero gives", name);
    CHECK(memcmp(dg, dg2, C * sizeof(float)) == 0 && memcmp(dbt, dbt2, C * sizeof(float)) == 0,
          "%s: dgamma, dbeta overwritten", name);
    be->groupnorm_backward(B, C, HW, G, 0, c.x, c.gamma, c.mean, c.rstd, NULL, c.r, NULL, NULL, 0,
                           0, dg2, dbt2);
    CHECK(memcmp(dg, dg2, C * sizeof(float)) == 0 && memcmp(dbt, dbt2, C * sizeof(float)) == 0,
          "%s: same dgamma, dbeta with dx NULL", name);
    double e;
    e = fd_rel_err(gn_obj, &c, c.x, nx, 1e-2, dx0);
    CHECK(e < TOL_FD, "%s: dx vs finite differences (rel err %.2e)", name, e);
    e = fd_rel_err(gn_obj, &c, c.gamma, C, 1e-2, dg);
    CHECK(e < TOL_FD, "%s: dgamma vs finite differences (rel err %.2e)", name, e);
    e = fd_rel_err(gn_obj, &c, c.beta, C, 1e-2, dbt);
    CHECK(e < TOL_FD, "%s: dbeta vs finite differences (rel err %.2e)", name, e);
    free(ref), free(mref), free(rref);
    free(c.x), free(c.gamma), free(c.beta), free(c.y), free(c.mean), free(c.rstd), free(c.r);
    free(dx0), free(dx1), free(dg), free(dbt), free(dg2), free(dbt2);
}

/* ---- softmax cross-entropy ------------------------------------------------ */

typedef struct xent_ctx {
    int B, K;
    float *z;
    int32_t *lab;
} xent_ctx;

static double xent_obj(void *p)
{
    xent_ctx *c = p;
    int hits;
    return be->softmax_xent(c->B, c->K, c->z, c->lab, NULL, &hits);
}

static void test_xent(void)
{
    // hand example: row 0 = (1, 2, 3), label 2; row 1 = (1, 1, 1), label 0 (a tie)
    float z[6] = { 1, 2, 3, 1, 1, 1 }, d[6];
    int32_t lab[2] = { 2, 0 };
    int hits = -1;
    double loss = be->softmax_xent(2, 3, z, lab, d, &hits);
    // row 0: log(e + e^2 + e^3) - 3 = log(1 + e^-1 + e^-2) = 0.40760596; row 1: log 3
    const double l0 = log(1.0 + exp(-1.0) + exp(-2.0)), l1 = log(3.0);
    CHECK_CLOSE(loss, 0.5 * (l0 + l1), 1e-7, 0.0, "xent 2x3: mean loss (0.40761 + 1.09861) / 2");
    CHECK_CLOSE(loss, 0.753109126, 1e-8, 0.0, "xent 2x3: loss 0.753109126 by hand");
    CHECK(hits == 2, "xent 2x3: 2 hits (row 1's tie goes to index 0)");
    const double s0[3] = { exp(-2.0), exp(-1.0), 1.0 }, s0n = s0[0] + s0[1] + s0[2];
    double dref[6];
    for (int j = 0; j < 3; j++) {
        dref[j] = (s0[j] / s0n - (j == 2)) / 2.0;
        dref[3 + j] = (1.0 / 3.0 - (j == 0)) / 2.0;
    }
    CHECK(rel_err(d, dref, 6) < 1e-6, "xent 2x3: dlogits = (softmax - onehot) / B");
    lab[1] = 1;
    be->softmax_xent(2, 3, z, lab, NULL, &hits);
    CHECK(hits == 1, "xent: a tie is not a hit for the higher index");

    float big[4] = { 1000.0f, 0.0f, -1000.0f, 0.0f };
    int32_t lb[2] = { 1, 0 };
    loss = be->softmax_xent(2, 2, big, lb, d, &hits);
    CHECK(isfinite(loss) && fabs(loss - 1000.0) < 1e-3, "xent: logits +-1000 give loss %.6g (1000)",
          loss);
    CHECK(isfinite(d[0]) && fabs(d[0] - 0.5) < 1e-6, "xent: finite dlogits at +-1000");

    int32_t badlab[2] = { 0, 3 };
    dt_err_clear();
    loss = be->softmax_xent(2, 3, z, badlab, NULL, &hits);
    CHECK(isnan(loss) && strstr(dt_err_msg(), "label 3") != NULL,
          "xent: out-of-range label is reported (%s)", dt_err_msg());

    for (int trial = 0; trial < 2; trial++) {
        xent_ctx c = { trial ? 3 : 1, trial ? 7 : 4, NULL, NULL };
        const size_t n = (size_t)c.B * c.K;
        c.z = vec_new(n);
        c.lab = dt_malloc(c.B * sizeof(int32_t));
        vec_normal(c.z, n, 2.0, 0.0);
        for (int i = 0; i < c.B; i++)
            c.lab[i] = (int32_t)rng_below(&rng, c.K);
        float *g = vec_new(n);
        be->softmax_xent(c.B, c.K, c.z, c.lab, g, &hits);
        double e = fd_rel_err(xent_obj, &c, c.z, n, 1e-3, g);
        CHECK(e < TOL_FD, "xent B=%d K=%d: dlogits vs finite differences (rel err %.2e)", c.B, c.K,
              e);
        free(c.z), free(c.lab), free(g);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    be = backend_cpu();
    rng = rng_make(20240607, 1, 2, 3);

    test_linear(1, 1, 1, 1, 1);
    test_linear(3, 5, 4, 1, 1);
    test_linear(2, 7, 3, 0, 1);
    test_linear(5, 16, 9, 1, 1);
    test_linear(3, 40, 3001, 1, 0); // B * out over the transposed-product buffer
    test_linear(32, 300, 128, 1, 0); // mnist_cnn dense1's batch and width

    // small shapes, also against finite differences
    test_conv(conv_shape(1, 1, 5, 5, 1, 3, 3, 1, 0), 1, 1);
    test_conv(conv_shape(3, 2, 7, 6, 3, 3, 2, 2, 1), 1, 1);  // non-square kernel, stride 2, pad 1
    test_conv(conv_shape(2, 3, 6, 9, 4, 3, 3, 1, 1), 0, 1);  // no bias, non-square image
    test_conv(conv_shape(2, 2, 4, 3, 2, 3, 3, 1, 2), 1, 1);  // pad 2: whole rows of padding
    test_conv(conv_shape(3, 2, 8, 8, 3, 4, 4, 2, 1), 1, 1);  // even kernel, stride 2
    test_conv(conv_shape(1, 4, 5, 5, 5, 1, 1, 1, 0), 1, 1);  // 1x1 without lowering
    test_conv(conv_shape(3, 4, 5, 3, 5, 1, 1, 1, 0), 0, 1);  // 1x1, images grouped
    // bigger shapes against the direct reference: small maps grouped several
    // images per GEMM, with a last group of one (5 = 2 + 2 + 1 at 13x13) and of
    // several (11 = 8 + 3 at 6x6); stride 2 on a large image; the mnist_cnn layers
    test_conv(conv_shape(5, 2, 15, 15, 3, 3, 3, 1, 0), 1, 0);
    test_conv(conv_shape(11, 3, 6, 6, 4, 3, 3, 1, 1), 1, 0);
    test_conv(conv_shape(3, 16, 2, 2, 8, 3, 3, 1, 1), 1, 0); // 2x2 map: most taps in the padding
    test_conv(conv_shape(2, 3, 32, 31, 8, 3, 3, 2, 1), 1, 0);
    test_conv(conv_shape(3, 1, 28, 28, 32, 3, 3, 1, 0), 1, 0);
    test_conv(conv_shape(2, 32, 26, 26, 64, 3, 3, 1, 0), 1, 0);

    test_maxpool(1, 1, 4, 4, 2, 2);
    test_maxpool(3, 2, 7, 5, 3, 2); // overlapping windows, odd sizes
    test_maxpool(2, 3, 6, 9, 2, 1); // stride 1: each input in up to 4 windows
    test_maxpool(1, 2, 5, 7, 2, 2); // last row/column not covered
    test_maxpool_special();
    test_avgpool(1, 1, 1);
    test_avgpool(3, 5, 7);
    test_avgpool(2, 3, 64);

    test_activation_values();
    test_activation("relu", be->relu_forward, be->relu_backward, 101, 1e-2);
    test_relu_inplace(101);
    test_relu_inplace(10007);
    test_activation("sigmoid", be->sigmoid_forward, be->sigmoid_backward, 101, 1e-2);
    test_add(1);
    test_add(99);
    test_dropout();

    test_groupnorm(1, 4, 5, 1);  // G = 1 (LayerNorm-like)
    test_groupnorm(3, 6, 7, 3);  // in between
    test_groupnorm(2, 4, 9, 4);  // G = C (InstanceNorm-like)
    test_groupnorm(3, 8, 1, 2);  // 1x1 spatial
    test_groupnorm(2, 8, 67, 4); // planes longer than the kernel's 8-wide blocks

    test_xent();
    return tap_done();
}
