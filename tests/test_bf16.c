/* compute.precision = bf16: each bf16 kernel against exact arithmetic, within
 * a bound derived from bf16's rounding and the reduction length.
 *
 * The bound. Rounding a float to bf16 (8 significant bits, round to nearest
 * even) has relative error at most u = 2^-8, so the product of two rounded
 * operands is off the exact one by at most (2u + u^2) |a| |b|; the products
 * of two bf16 numbers are exact in fp32 (8 + 8 bits) and their sum over K
 * terms in fp32, in any order, adds at most g_K = K 2^-24 / (1 - K 2^-24)
 * times the sum of their magnitudes. So every output of a product over K
 * terms satisfies
 *     |got - exact| <= (2u + u^2 + g_K (1 + 2u + u^2)) S,  S = sum_k |a_k| |b_k|
 * (plus one fp32 rounding of alpha and beta C where they apply), with S
 * computed per output element in double. Per layer, K and S are:
 *   gemm                   K = K,                 S = sum_k |A_ik| |B_kj|
 *   linear  y = x W^T + b  K = in,                S = sum_i |x| |W| (+|b|, added in fp32)
 *           dx = dy W      K = out,               S = sum_o |dy| |W|
 *           dW = dy^T x    K = B,                 S = sum_b |dy| |x|
 *           db = sum dy    fp32 on fp32 dy: the reference kernel's bits
 *   conv    y              K = C R S,             S = conv(|x|, |w|)
 *           dx             K = Kout R S,          S = conv_backward_data(|w|, |dy|)
 *           dW             K = B P Q,             S = conv_backward_weights(|x|, |dy|)
 *           db             K = B P Q, from bf16 dy: u + g_K times sum |dy|
 * A bug of any kind (a transposed operand, a lost bias, an operand rounded
 * twice or truncated) exceeds this bound, which is tighter than a statistical
 * one; that bf16 really ran is checked too: somewhere the error must exceed
 * 2^-10 S / sqrt(K), far above what fp32 alone makes (about 2^-24 S).
 *
 * Then the products on operands that are already bf16 against exact
 * arithmetic on those operands (the rounding is the whole difference), whole
 * models (mnist_cnn, resnet20_gn: a bf16 training step near the fp32 one,
 * two bf16 steps bit for bit), and the refusals of backends that cannot run
 * bf16. Exits 77 (skip) with the reason where the CPU or build has no bf16. */
#include "backend/backend.h"
#include "core/isa.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/image_nets.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/dnnl_impl.h"
#include "backend/cpu/kernels.h"
#include "nn/layout.h"
#include "nn/net.h"
#include "bf16_bound.h"
#include "tap.h"
#include "testvec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static dt_rng rng;


static float *vec_abs(const float *x, size_t n)
{
    float *v = dt_calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(x[i]);
    return v;
}

static float rounded(float x)
{
    bf16_round_f32(1, &x);
    return x;
}

/* Worst |got - want| / (c S + slack) over n outputs; also the largest
 * |got - want| / S (how far from fp32 the result is). */
typedef struct errs { double ratio, rel; } errs;

static errs compare(size_t n, const float *got, const double *want, const double *S, double c,
                    const double *slack)
{
    errs e = { 0, 0 };
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        const double lim = c * S[i] + (slack ? slack[i] : 0.0) + 1e-30;
        if (!(d <= lim)) { /* NaN too */
            e.ratio = isnan(d) ? INFINITY : fmax(e.ratio, d / lim);
        } else {
            e.ratio = fmax(e.ratio, d / lim);
        }
        if (S[i] > 0)
            e.rel = fmax(e.rel, d / S[i]);
    }
    return e;
}

/* That bf16 ran, not fp32: rounding errors of random sign add up to about
 * u sqrt(K) rms(a b) against S = K mean|a b|, so the largest err/S over the
 * outputs exceeds 2^-10 / sqrt(K), where fp32 stays near 2^-24. */
static int ran(errs e, double K) { return e.rel > 0x1p-10 / sqrt(K); }

/* ---- conversions ----------------------------------------------------------- */

static void test_rounding(void)
{
    const float one_half_up = 1.0f + 0x1p-8f;        /* halfway 1 | 1 + 2^-7: to even, 1 */
    const float three_half = 1.0f + 3 * 0x1p-8f;     /* halfway 1 + 2^-7 | 1 + 2^-6: 1 + 2^-6 */
    const float above = 1.0f + 0x1p-8f + 0x1p-20f;   /* above halfway: up */
    CHECK(rounded(one_half_up) == 1.0f && rounded(three_half) == 1.0f + 0x1p-6f &&
          rounded(above) == 1.0f + 0x1p-7f && rounded(-three_half) == -(1.0f + 0x1p-6f),
          "bf16 rounding: to nearest, ties to even, sign kept");
    CHECK(isnan(rounded(NAN)) && isinf(rounded(INFINITY)) && isinf(rounded(3.4e38f)) &&
          rounded(0x1p-130f) == 0x1p-130f,
          "bf16 rounding: NaN stays NaN, FLT_MAX rounds to infinity, subnormals kept");
    float x[1000];
    dt_bf16 h[1000];
    float back[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)rng_normal(&rng) * 100.0f;
    bf16_from_f32(1000, x, h);
    bf16_to_f32(1000, h, back);
    double worst = 0;
    for (int i = 0; i < 1000; i++)
        worst = fmax(worst, fabs((double)back[i] - x[i]) / fabs((double)x[i]));
    CHECK(worst <= U && worst > U / 4, "bf16 round trip: relative error %.3g <= 2^-8", worst);
}

/* ---- gemm ------------------------------------------------------------------ */

static void test_gemm(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad)
{
    const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const int ar = ta ? K : M, br = tb ? N : K;
    float *A = vec_rand(&rng, (size_t)ar * lda, 1.0), *B = vec_rand(&rng, (size_t)br * ldb, 1.0);
    float *C = vec_rand(&rng, (size_t)M * ldc, 1.0), *C0 = dt_malloc((size_t)M * ldc * sizeof(float));
    memcpy(C0, C, (size_t)M * ldc * sizeof(float));
    double *want = dt_calloc((size_t)M * N, sizeof(double));
    double *want16 = dt_calloc((size_t)M * N, sizeof(double));
    double *S = dt_calloc((size_t)M * N, sizeof(double));
    double *slack = dt_calloc((size_t)M * N, sizeof(double));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, s16 = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                const float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += (double)a * b;
                s16 += (double)rounded(a) * rounded(b);
                sa += fabs((double)a * b);
            }
            const double c0 = C0[(size_t)i * ldc + j];
            want[(size_t)i * N + j] = alpha * s + (beta != 0 ? beta * c0 : 0);
            want16[(size_t)i * N + j] = alpha * s16 + (beta != 0 ? beta * c0 : 0);
            S[(size_t)i * N + j] = fabs(alpha) * sa;
            /* the fp32 scaling by alpha and the sum with beta C: two more roundings */
            slack[(size_t)i * N + j] = 0x1p-23 * (fabs(alpha) * sa * 2 + fabs(beta * c0));
        }
    gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    float *got = dt_malloc((size_t)M * N * sizeof(float));
    int pad_kept = 1;
    for (int i = 0; i < M; i++) {
        memcpy(got + (size_t)i * N, C + (size_t)i * ldc, (size_t)N * sizeof(float));
        for (int j = N; j < ldc; j++)
            pad_kept &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    }
    const errs e = compare((size_t)M * N, got, want, S, bound_k(K), slack);
    /* on the rounded operands only fp32's own error remains */
    const errs e16 = compare((size_t)M * N, got, want16, S, gamma_k(K) * (1 + 3 * U), slack);
    CHECK(e.ratio <= 1 && e16.ratio <= 1 && pad_kept && ran(e, K),
          "gemm_bf16 %c%c M %d N %d K %d alpha %g beta %g ld+%d: err/bound %.3f, on bf16 "
          "operands %.3f, max err/S %.2e (bf16 ran), padding untouched",
          ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, beta, pad, e.ratio, e16.ratio, e.rel);
    free(A), free(B), free(C), free(C0), free(want), free(want16), free(S), free(slack), free(got);
}

/* gemm_bf16_pre on operands converted once: the same bits as gemm_bf16 */
static void test_gemm_pre(void)
{
    const int M = 33, N = 70, K = 129;
    float *A = vec_rand(&rng, (size_t)M * K, 1.0), *B = vec_rand(&rng, (size_t)N * K, 1.0);
    dt_bf16 *a = dt_malloc((size_t)M * K * 2), *b = dt_malloc((size_t)N * K * 2);
    bf16_from_f32((size_t)M * K, A, a);
    bf16_from_f32((size_t)N * K, B, b);
    float *C1 = vec_const((size_t)M * N, NAN), *C2 = vec_const((size_t)M * N, 0);
    gemm_bf16(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C1, N);
    gemm_bf16_pre(0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, C2, N);
    CHECK(memcmp(C1, C2, (size_t)M * N * sizeof(float)) == 0,
          "gemm_bf16_pre on converted operands == gemm_bf16 bit for bit (beta 0 over NaN)");
    float *C3 = vec_const((size_t)M * N, 5.0f);
    gemm_bf16(0, 1, M, N, 0, 1.0f, A, K, B, K, 0.5f, C3, N);
    CHECK(C3[0] == 2.5f && C3[(size_t)M * N - 1] == 2.5f, "gemm_bf16 K = 0: C = beta C");
    free(A), free(B), free(a), free(b), free(C1), free(C2), free(C3);
}

/* ---- linear ---------------------------------------------------------------- */

/* A layer too small for bf16 to pay (bf16_linear_is_bf16) runs the fp32
 * kernels: their bits, forward and backward, with no scratch. */
static void test_linear_small(const dt_backend *be, int B, int in, int out, int bias)
{
    const dt_backend *fp = backend_cpu();
    float *x = vec_rand(&rng, (size_t)B * in, 1.0), *W = vec_rand(&rng, (size_t)out * in, 0.1);
    float *b = bias ? vec_rand(&rng, out, 1.0) : NULL, *dy = vec_rand(&rng, (size_t)B * out, 1.0);
    const size_t ny = (size_t)B * out, nx = (size_t)B * in, nw = (size_t)out * in;
    float *y[2], *dx[2], *dW[2], *db[2];
    for (int k = 0; k < 2; k++) {
        const dt_backend *e = k ? fp : be;
        y[k] = vec_const(ny, NAN), dx[k] = vec_const(nx, 1.0f), dW[k] = vec_const(nw, 1e3f);
        db[k] = vec_const(out, 1e3f);
        e->linear_forward(B, in, out, x, W, b, y[k], NULL);
        e->linear_backward(B, in, out, x, W, dy, dx[k], dW[k], bias ? db[k] : NULL, NULL);
    }
    CHECK(be->linear_workspace(B, in, out) == 0 && !bf16_linear_is_bf16(in, out) &&
              memcmp(y[0], y[1], ny * sizeof(float)) == 0 &&
              memcmp(dx[0], dx[1], nx * sizeof(float)) == 0 &&
              memcmp(dW[0], dW[1], nw * sizeof(float)) == 0 &&
              memcmp(db[0], db[1], (size_t)out * sizeof(float)) == 0,
          "bf16 linear B %d %d->%d%s (weight below the bf16 size): the fp32 kernels' bits", B,
          in, out, bias ? " bias" : "");
    for (int k = 0; k < 2; k++)
        free(y[k]), free(dx[k]), free(dW[k]), free(db[k]);
    free(x), free(W), free(b), free(dy);
}

static void test_linear(const dt_backend *be, int B, int in, int out, int bias)
{
    if (!bf16_linear_is_bf16(in, out)) {
        test_linear_small(be, B, in, out, bias);
        return;
    }
    float *x = vec_rand(&rng, (size_t)B * in, 1.0), *W = vec_rand(&rng, (size_t)out * in, 0.1);
    float *b = bias ? vec_rand(&rng, out, 1.0) : NULL, *dy = vec_rand(&rng, (size_t)B * out, 1.0);
    const size_t ny = (size_t)B * out, nx = (size_t)B * in, nw = (size_t)out * in;
    double *want = dt_calloc(nx + ny + nw, sizeof(double)), *S = dt_calloc(nx + ny + nw, sizeof(double));
    double *slack = dt_calloc(nx + ny + nw, sizeof(double));
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++) {
            double s = 0, sa = 0;
            for (int k = 0; k < in; k++) {
                s += (double)x[(size_t)i * in + k] * W[(size_t)o * in + k];
                sa += fabs((double)x[(size_t)i * in + k] * W[(size_t)o * in + k]);
            }
            want[(size_t)i * out + o] = s + (b ? b[o] : 0);
            S[(size_t)i * out + o] = sa;
            slack[(size_t)i * out + o] = 0x1p-23 * (sa + (b ? fabs(b[o]) : 0)); /* + b in fp32 */
        }
    float *y = vec_const(ny, NAN);
    // the kernels' scratch, NaN-filled: nothing may be read before it is written
    float *work = vec_const(be->linear_workspace(B, in, out), NAN);
    be->linear_forward(B, in, out, x, W, b, y, work);
    errs e = compare(ny, y, want, S, bound_k(in), slack);
    CHECK(e.ratio <= 1 && ran(e, in), "bf16 linear B %d %d->%d%s forward: err/bound %.3f "
          "(K = in), max err/S %.2e", B, in, out, bias ? " bias" : "", e.ratio, e.rel);

    // dx (B, in) = 1 + dy W (accumulated onto ones); dW (out, in) = dy^T x
    double *wdx = want, *wdw = want + nx, *sdx = S, *sdw = S + nx;
    memset(slack, 0, (nx + nw) * sizeof(double));
    for (int i = 0; i < B; i++)
        for (int k = 0; k < in; k++) {
            double s = 0, sa = 0;
            for (int o = 0; o < out; o++) {
                s += (double)dy[(size_t)i * out + o] * W[(size_t)o * in + k];
                sa += fabs((double)dy[(size_t)i * out + o] * W[(size_t)o * in + k]);
            }
            wdx[(size_t)i * in + k] = 1.0 + s;
            sdx[(size_t)i * in + k] = sa;
            slack[(size_t)i * in + k] = 0x1p-23 * (1 + sa); /* the sum with the old dx */
        }
    for (int o = 0; o < out; o++)
        for (int k = 0; k < in; k++) {
            double s = 0, sa = 0;
            for (int i = 0; i < B; i++) {
                s += (double)dy[(size_t)i * out + o] * x[(size_t)i * in + k];
                sa += fabs((double)dy[(size_t)i * out + o] * x[(size_t)i * in + k]);
            }
            wdw[(size_t)o * in + k] = s;
            sdw[(size_t)o * in + k] = sa;
        }
    float *dx = vec_const(nx, 1.0f), *dW = vec_const(nw, 1e3f), *db = vec_const(out, 1e3f);
    float *db_ref = vec_const(out, 0);
    be->linear_backward(B, in, out, x, W, dy, dx, dW, bias ? db : NULL, work);
    backend_cpu()->linear_backward(B, in, out, x, W, dy, NULL, NULL, bias ? db_ref : NULL, NULL);
    errs ex = compare(nx, dx, wdx, sdx, bound_k(out), slack);
    errs ew = compare(nw, dW, wdw, sdw, bound_k(B), NULL);
    CHECK(ex.ratio <= 1 && ew.ratio <= 1 && ran(ex, out) && ran(ew, B) &&
          (!bias || memcmp(db, db_ref, (size_t)out * sizeof(float)) == 0),
          "bf16 linear B %d %d->%d backward: dx accumulated err/bound %.3f (K = out), dW "
          "err/bound %.3f (K = B)%s", B, in, out, ex.ratio, ew.ratio,
          bias ? ", db the fp32 kernel's bits" : "");
    free(x), free(W), free(b), free(dy), free(want), free(S), free(slack), free(y), free(dx);
    free(dW), free(db), free(db_ref), free(work);
}

/* ---- conv ------------------------------------------------------------------ */

static dt_conv_shape shape(int B, int C, int H, int W, int K, int R, int stride, int pad,
                           int xblk, int yblk)
{
    dt_conv_shape s = { .B = B, .C = C, .H = H, .W = W, .K = K, .R = R, .S = R,
                        .stride = stride, .pad = pad, .xblk = xblk, .yblk = yblk };
    s.P = (H + 2 * pad - R) / stride + 1;
    s.Q = (W + 2 * pad - R) / stride + 1;
    return s;
}

static float *relayout(int to_blk, int blk, int B, int C, int HW, const float *src)
{
    const size_t n = (size_t)B * C * HW;
    float *v = dt_calloc(n ? n : 1, sizeof(float));
    if (!blk)
        memcpy(v, src, n * sizeof(float));
    else if (to_blk)
        layout_to_blocked(blk, B, C, HW, src, v);
    else
        layout_to_plain(blk, B, C, HW, src, v);
    return v;
}

static double *to_double(const float *v, size_t n)
{
    double *d = dt_calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    return d;
}

/* The reference is the native fp32 kernel, not exact arithmetic: its own
 * error, at most g_K S, is added to the bound (the g_K term doubles). */
static void test_conv(const dt_backend *be, const dt_backend *fp, dt_conv_shape s, int bias)
{
    const dt_backend *ref = backend_cpu();
    char name[160];
    snprintf(name, sizeof name, "bf16 conv B=%d C=%d %dx%d K=%d %dx%d st=%d pad=%d %s->%s%s",
             s.B, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad, s.xblk ? "blk" : "plain",
             s.yblk ? "blk" : "plain", bias ? " bias" : "");
    dt_conv_shape sp = s;
    sp.xblk = sp.yblk = 0;
    const int HWx = s.H * s.W, HWy = s.P * s.Q;
    const size_t nx = (size_t)s.B * s.C * HWx, ny = (size_t)s.B * s.K * HWy;
    const size_t nw = (size_t)s.K * s.C * s.R * s.S;
    float *x = vec_rand(&rng, nx, 1.0), *w = vec_rand(&rng, nw, 0.3), *b = bias ? vec_rand(&rng, s.K, 1.0) : NULL;
    float *dy = vec_rand(&rng, ny, 1.0);
    float *ax = vec_abs(x, nx), *aw = vec_abs(w, nw), *ady = vec_abs(dy, ny);
    float *work_ref = vec_const(ref->conv2d_workspace(&sp), 0.0f);
    float *work = vec_const(be->conv2d_workspace(&s), 0.0f);

    // reference values and magnitudes S, fp32 (plain)
    float *y_ref = vec_const(ny, 0), *dx_ref = vec_const(nx, 0), *dw_ref = vec_const(nw, 0);
    float *db_ref = vec_const(s.K, 0);
    float *y_abs = vec_const(ny, 0), *dx_abs = vec_const(nx, 0), *dw_abs = vec_const(nw, 0);
    float *db_abs = vec_const(s.K, 0);
    ref->conv2d_forward(&sp, x, w, NULL, y_ref, work_ref);
    ref->conv2d_backward(&sp, x, w, dy, dx_ref, 1, dw_ref, db_ref, work_ref);
    ref->conv2d_forward(&sp, ax, aw, NULL, y_abs, work_ref);
    ref->conv2d_backward(&sp, ax, aw, ady, dx_abs, 1, dw_abs, db_abs, work_ref);

    float *xl = relayout(1, s.xblk, s.B, s.C, HWx, x), *dyl = relayout(1, s.yblk, s.B, s.K, HWy, dy);
    float *yl = vec_const(ny, NAN);
    be->conv2d_forward(&s, xl, w, b, yl, work);
    float *y = relayout(0, s.yblk, s.B, s.K, HWy, yl);
    double *want = to_double(y_ref, ny), *S = to_double(y_abs, ny);
    double *slack = dt_calloc(ny, sizeof(double));
    for (size_t i = 0; i < ny; i++) {
        if (b) {
            const int k = (int)(i / HWy % s.K);
            want[i] += b[k];
            slack[i] = 0x1p-23 * fabs(b[k]);
        }
    }
    const double Kf = (double)s.C * s.R * s.S;
    /* the reference's own fp32 error, g_K S, is added to the bound */
    errs e = compare(ny, y, want, S, bound_k(Kf) + gamma_k(Kf), slack);
    /* a pass that stays fp32 (Winograd without AMX) gives the fp32 backend's bits */
    const int p16[3] = { bf16_conv2d_pass_bf16(&s, 0), bf16_conv2d_pass_bf16(&s, 1),
                         bf16_conv2d_pass_bf16(&s, 2) };
    float *work_fp = vec_const(fp->conv2d_workspace(&s), 0.0f);
    float *y_fp = vec_const(ny, NAN), *dx_fp = vec_const(nx, NAN), *dw_fp = vec_const(nw, 0);
    float *db_fp = vec_const(s.K, 0);
    fp->conv2d_forward(&s, xl, w, b, y_fp, work_fp);
    fp->conv2d_backward(&s, xl, w, dyl, dx_fp, 1, dw_fp, bias ? db_fp : NULL, work_fp);
    if (p16[0])
        CHECK(e.ratio <= 1 && ran(e, Kf), "%s: forward err/bound %.3f (K = C R S = %.0f), "
              "max err/S %.2e", name, e.ratio, Kf, e.rel);
    else
        CHECK(memcmp(yl, y_fp, ny * sizeof(float)) == 0 && e.ratio <= 1,
              "%s: forward stays fp32 (Winograd, no AMX): the fp32 backend's bits", name);

    float *dxl = vec_const(nx, NAN), *dw = vec_const(nw, 1e3f), *db = vec_const(s.K, 1e3f);
    be->conv2d_backward(&s, xl, w, dyl, dxl, 1, dw, bias ? db : NULL, work);
    float *dx = relayout(0, s.xblk, s.B, s.C, HWx, dxl);
    const double Kx = (double)s.K * s.R * s.S, Kw = (double)s.B * HWy;
    double *wx = to_double(dx_ref, nx), *Sx = to_double(dx_abs, nx);
    double *ww = to_double(dw_ref, nw), *Sw = to_double(dw_abs, nw);
    errs ex = compare(nx, dx, wx, Sx, bound_k(Kx) + gamma_k(Kx), NULL);
    errs ew = compare(nw, dw, ww, Sw, bound_k(Kw) + gamma_k(Kw), NULL);
    CHECK(ex.ratio <= 1 && (p16[1] ? ran(ex, Kx) : memcmp(dxl, dx_fp, nx * sizeof(float)) == 0),
          "%s: dx over NaN err/bound %.3f (K = Kout R S = %.0f)%s", name, ex.ratio, Kx,
          p16[1] ? "" : ", fp32 (Winograd, no AMX): the fp32 backend's bits");
    CHECK(ew.ratio <= 1 && (p16[2] ? ran(ew, Kw) : memcmp(dw, dw_fp, nw * sizeof(float)) == 0),
          "%s: dW err/bound %.3f (K = B P Q = %.0f)%s", name, ew.ratio, Kw,
          p16[2] ? "" : ", fp32 (Winograd, no AMX): the fp32 backend's bits");
    if (bias && !p16[2]) {
        CHECK(memcmp(db, db_fp, (size_t)s.K * sizeof(float)) == 0, "%s: db fp32 as dW", name);
    } else if (bias) {
        double *wb = to_double(db_ref, s.K), *Sb = to_double(db_abs, s.K);
        errs eb = compare(s.K, db, wb, Sb, U + 2 * gamma_k(Kw), NULL);
        CHECK(eb.ratio <= 1, "%s: db (sum of bf16 dy) err/bound %.3f", name, eb.ratio);
        free(wb), free(Sb);
    }
    float *dw2 = vec_const(nw, -7.0f);
    be->conv2d_backward(&s, xl, w, dyl, NULL, 0, dw2, NULL, work);
    CHECK(memcmp(dw, dw2, nw * sizeof(float)) == 0 || bias, "%s: same dW with dx NULL", name);
    free(x), free(w), free(b), free(dy), free(ax), free(aw), free(ady), free(work_ref);
    free(work), free(y_ref), free(dx_ref), free(dw_ref), free(db_ref), free(y_abs), free(dx_abs);
    free(dw_abs), free(db_abs), free(xl), free(dyl), free(yl), free(y), free(want), free(S);
    free(slack), free(dxl), free(dw), free(db), free(dx), free(wx), free(Sx), free(ww), free(Sw);
    free(dw2), free(work_fp), free(y_fp), free(dx_fp), free(dw_fp), free(db_fp);
}

/* ---- whole models ---------------------------------------------------------- */

static double rel(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return isnan(num) ? INFINITY : den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* One training step's loss and gradient; eps > 0: parameters and inputs
 * scaled by 1 + eps N(0, 1) first (an fp32 step on perturbed data). */
static double model_step(const dt_backend *be, const char *name, int c, int hw, int B,
                         double eps, float **grad, size_t *np)
{
    dt_rng q = rng_make(9, 0, 0, 0);
    dt_net *n = model_build(be, name, "100", "relu", 2, c, hw, hw, 10);
    if (!n)
        DT_FATAL("model_build(%s): %s", name, dt_err_msg());
    float *p = dt_falloc(n->nparams);
    *grad = dt_falloc(n->nparams);
    *np = n->nparams;
    net_init_params(n, p, 3);
    dt_rng r = rng_make(5, 0, 0, 0);
    float *x = dt_falloc((size_t)B * c * hw * hw);
    int32_t *y = dt_calloc((size_t)B, sizeof *y);
    for (size_t i = 0; i < (size_t)B * c * hw * hw; i++)
        x[i] = (float)rng_normal(&r);
    if (eps > 0) {
        for (size_t i = 0; i < n->nparams; i++)
            p[i] *= (float)(1 + eps * rng_normal(&q));
        for (size_t i = 0; i < (size_t)B * c * hw * hw; i++)
            x[i] *= (float)(1 + eps * rng_normal(&q));
    }
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)rng_below(&r, 10);
    double loss = net_forward(n, p, x, y, B, 1, 77, NULL);
    net_backward(n, p, *grad);
    free(p), free(x), free(y);
    net_free(n);
    return loss;
}

/* A whole step compounds many layers' roundings, and a ReLU or max-pool
 * whose input sits near a tie routes the gradient elsewhere on a change in
 * the last bit, so no sharp bound holds. The yardstick is instead the fp32
 * step's own sensitivity: fp32 on parameters and inputs perturbed by one
 * bf16 rounding's worth (relative 2^-8 N(0, 1)) moves the gradient by r_pert
 * (mnist_cnn 7 %, resnet20_gn 2-3 %, 2-norm); bf16 must stay within 2 r_pert
 * of fp32, and the loss within 1 %. Two bf16 steps agree bit for bit (resume
 * depends on it). */
static void test_models(const dt_backend *bf, const dt_backend *fp)
{
    struct { const char *name; int c, hw, B; } m[] = {
        { "mnist_cnn", 1, 28, 8 }, { "resnet20_gn", 3, 32, 8 },
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        float *g32, *gp, *g1, *g1b, *g2;
        size_t np;
        backend_set_threads(1);
        const double l32 = model_step(fp, m[i].name, m[i].c, m[i].hw, m[i].B, 0, &g32, &np);
        model_step(fp, m[i].name, m[i].c, m[i].hw, m[i].B, U, &gp, &np);
        const double l1 = model_step(bf, m[i].name, m[i].c, m[i].hw, m[i].B, 0, &g1, &np);
        const double l1b = model_step(bf, m[i].name, m[i].c, m[i].hw, m[i].B, 0, &g1b, &np);
        backend_set_threads(2);
        const double l2 = model_step(bf, m[i].name, m[i].c, m[i].hw, m[i].B, 0, &g2, &np);
        backend_set_threads(1);
        const double r = rel(g1, g32, np), r_pert = rel(gp, g32, np);
        CHECK(fabs(l1 - l32) <= 0.01 * fabs(l32) && r <= 2 * r_pert && r > 1e-5,
              "%s: bf16 step near fp32 (loss %.6f vs %.6f, grad rel err %.2e; fp32 perturbed "
              "by 2^-8: %.2e)", m[i].name, l1, l32, r, r_pert);
        CHECK(l1 == l1b && memcmp(g1, g1b, np * sizeof(float)) == 0,
              "%s: two bf16 steps bit for bit", m[i].name);
        CHECK(fabs(l2 - l1) <= 1e-3 * fabs(l1) && rel(g2, g1, np) < 0.02,
              "%s: bf16 on two threads near one (grad rel err %.2e)", m[i].name,
              rel(g2, g1, np));
        free(g32), free(gp), free(g1), free(g1b), free(g2);
    }
}

/* Activations kept in bf16 for the backward (nn/net_plan.c): on mnist_cnn
 * the conv2 ReLU output, read back as the ReLU's mask; on resnet20_gn the
 * stage outputs the stride-2 convs read, widened back to floats before
 * their backward. The step must give the bits of the plan without them
 * (the kernels read the same bf16 values, the masks the same signs), in a
 * smaller arena, and again on a second step (the forward buffers are back). */
static void test_keep_bf16(const dt_backend *bf)
{
    struct { const char *name; int c, hw, B; } m[] = {
        { "mnist_cnn", 1, 28, 8 }, { "resnet20_gn", 3, 32, 8 },
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const size_t nx = (size_t)m[i].B * m[i].c * m[i].hw * m[i].hw;
        float *g[3] = { NULL, NULL, NULL }, *x = dt_falloc(nx), *p = NULL;
        int32_t *y = dt_calloc((size_t)m[i].B, sizeof *y);
        dt_rng r = rng_make(6, 0, 0, 0);
        for (size_t k = 0; k < nx; k++)
            x[k] = (float)rng_normal(&r);
        for (int k = 0; k < m[i].B; k++)
            y[k] = (int32_t)rng_below(&r, 10);
        double loss[3];
        size_t arena[2], np = 0;
        int kept = 0, widened = 0, masks = 0;
        for (int run = 0; run < 2; run++) {
            dt_net *n = model_build(bf, m[i].name, "100", "relu", 2, m[i].c, m[i].hw, m[i].hw, 10);
            if (!n)
                DT_FATAL("model_build(%s): %s", m[i].name, dt_err_msg());
            np = n->nparams;
            n->no_keep_bf16 = run;
            if (!p) {
                p = dt_falloc(np);
                net_init_params(n, p, 3);
            }
            for (int step = 0; step < (run ? 1 : 2); step++) {
                float *gs = dt_falloc(np);
                loss[run ? 2 : step] = net_forward(n, p, x, y, m[i].B, 1, 77, NULL);
                net_backward(n, p, gs);
                g[run ? 2 : step] = gs;
            }
            arena[run] = n->arena_n;
            for (int j = 1; j < n->nnodes && !run; j++) {
                kept += n->stash[j] != NULL;
                widened += n->stash[j] && n->widen_at[j];
                masks += n->mask16[j] != NULL;
            }
            net_free(n);
        }
        CHECK(kept > 0 && arena[0] < arena[1],
              "%s: %d activations kept in bf16 (%d widened back, %d ReLU masks read in bf16); "
              "arena %.2f MB against %.2f", m[i].name, kept, widened, masks, arena[0] * 4e-6,
              arena[1] * 4e-6);
        CHECK(loss[0] == loss[2] && memcmp(g[0], g[2], np * sizeof(float)) == 0 &&
                  loss[1] == loss[2] && memcmp(g[1], g[2], np * sizeof(float)) == 0,
              "%s: the step with activations kept in bf16 gives the bits of the step without, "
              "twice", m[i].name);
        free(g[0]), free(g[1]), free(g[2]), free(x), free(y), free(p);
    }
}

static void test_refusals(void)
{
    dt_err_clear();
    CHECK(backend_with_precision(backend_cpu(), DT_PREC_BF16) == NULL &&
              strstr(dt_err_msg(), "compute.kernels") != NULL,
          "bf16 on the native kernels refused: %s", dt_err_msg());
    dt_err_clear();
    CHECK(backend_with_precision(backend_cpu_devmem(), DT_PREC_BF16) == NULL &&
              strstr(dt_err_msg(), "not implemented") != NULL,
          "bf16 on a device backend refused: %s", dt_err_msg());
    CHECK(backend_with_precision(backend_cpu(), DT_PREC_FP32) == backend_cpu() &&
              backend_precision_of("bf16") == DT_PREC_BF16 &&
              backend_precision_of("fp16") == -1,
          "fp32 leaves a backend as it is; precision names");
}

int main(int argc, char **argv)
{
    (void)argc;
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    rng = rng_make(20261126, 2, 9, 16);
    test_rounding();
    const dt_backend *fp = backend_cpu_dnnl();
    const dt_backend *bf = fp ? backend_with_precision(fp, DT_PREC_BF16) : NULL;
    if (!bf) {
        printf("# SKIP bf16 kernels: %s\n", fp ? dt_err_msg() : "built without oneDNN");
        test_refusals();
        tap_done();
        return tap_failed_ ? 1 : 77;
    }
    CHECK(bf->precision == DT_PREC_BF16 && bf->cblock == fp->cblock &&
              backend_with_precision(bf, DT_PREC_BF16) == bf,
          "the bf16 twin of %s: %s, same layouts", fp->name, bf->name);
    test_refusals();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_gemm(ta, tb, 17, 33, 65, 1.0f, 0.0f, 0);
            test_gemm(ta, tb, 64, 48, 300, 0.5f, 1.0f, 3);
        }
    test_gemm(0, 0, 5, 7, 3, 2.0f, -1.0f, 1);
    test_gemm(0, 1, 128, 384, 128, 1.0f, 0.0f, 0); /* a GPT shape, scaled down */
    test_gemm_pre();
    test_linear(bf, 8, 9216 / 16, 128, 1); /* mnist_cnn dense1, narrower */
    test_linear(bf, 32, 128, 64, 1);
    test_linear(bf, 3, 37, 111, 0);
    test_linear(bf, 32, 128, 10, 1); /* the image models' heads: fp32 */
    test_linear(bf, 3, 37, 5, 0);
    // first layers: plain input with 1 or 3 channels, blocked output
    test_conv(bf, fp, shape(3, 1, 28, 28, 32, 3, 1, 0, 0, 16), 1);
    test_conv(bf, fp, shape(2, 3, 9, 7, 16, 3, 1, 1, 0, 16), 0);
    test_conv(bf, fp, shape(1, 3, 11, 11, 16, 3, 2, 1, 0, 16), 0);
    // blocked to blocked: 3x3 (the Winograd shapes in fp32), stride 2, 1x1 shortcuts
    test_conv(bf, fp, shape(2, 16, 9, 7, 16, 3, 1, 1, 16, 16), 0);
    test_conv(bf, fp, shape(1, 16, 9, 9, 32, 3, 2, 1, 16, 16), 0);
    test_conv(bf, fp, shape(2, 32, 7, 9, 32, 3, 1, 1, 16, 16), 0);
    test_conv(bf, fp, shape(3, 32, 26, 26, 64, 3, 1, 0, 16, 16), 1); // mnist_cnn conv2
    // unpadded at batch 64: without AMX its data gradient is the one bf16 pass
    // among Winograd ones (bf16_conv2d_pass_bf16), with only dy's copy as scratch
    test_conv(bf, fp, shape(64, 32, 6, 6, 32, 3, 1, 0, 16, 16), 1);
    test_conv(bf, fp, shape(2, 16, 9, 9, 32, 1, 2, 0, 16, 16), 0);
    // plain to plain (the engine plans a conv with plain output plain -> plain)
    test_conv(bf, fp, shape(2, 5, 6, 7, 3, 3, 2, 1, 0, 0), 1);
    /* (the first-layer cases above ask for a data gradient no network needs:
     * oneDNN computes it only with a reference kernel) */
    const long refs = dnnl_reference_count();
    test_models(bf, fp);
    CHECK(dnnl_reference_count() == refs,
          "no oneDNN primitive of a bf16 model step took one of oneDNN's reference implementations "
          "at %s (%ld did)", isa_name(isa_level()), dnnl_reference_count() - refs);
    test_keep_bf16(bf);
    return tap_done();
}
