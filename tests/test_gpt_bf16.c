/* The GPT (models/gpt.h) with compute.precision = bf16.
 *
 * Per layer: the bf16 linear passes (nn/transformer.h matmul_*_bf16, which
 * serve c_attn, attn.c_proj, c_fc, mlp.c_proj and the tied head) at the
 * model's shapes against exact (double) arithmetic on the fp32 operands,
 * within the bound of backend/cpu/gemm_bf16.h: rounding an operand to bf16 costs a
 * relative u = 2^-8, a product of two rounded operands is exact in fp32 and
 * the fp32 sum of K of them adds g_K = K 2^-24 / (1 - K 2^-24), so every
 * output of a product over K terms is off by at most
 *     (2u + u^2 + g_K (1 + 2u + u^2)) S,  S = sum_k |a_k| |b_k|,
 * plus one fp32 rounding where the bias is added (2^-23 (S + |b|)). Per pass:
 *     forward y = x W^T + b   K = in    S = sum_i |x| |W|
 *     dx = dy W               K = out   S = sum_o |dy| |W|
 *     dW = dy^T x             K = N     S = sum_n |dy| |x|
 *     db = column sums of dy  fp32: the fp32 kernel's bits
 * That bf16 really ran is checked as in tests/test_bf16.c: somewhere the
 * error exceeds 2^-10 S / sqrt(K), far above fp32's own ~2^-24 S.
 *
 * The attention (backend/cpu/attention.c's attention_*_bf16) at the GPT's tiled
 * shapes, with and without dropout and kept probabilities, against exact
 * arithmetic within a bound composed from the same per-product bound (see
 * test_attention_bf16); shapes it does not take are the fp32 path's bits.
 *
 * The whole model: compounded over the layers no sharp bound holds, so the
 * bf16 step is held to stated tolerances against the fp32 step (loss within
 * 0.1 % relative; gradient within 2 % in relative 2-norm) and against the
 * fp32 step's own sensitivity to one bf16 rounding of its parameters
 * (r_pert: fp32 on parameters scaled by 1 + 2^-8 N(0, 1)): bf16 within 3
 * r_pert. Two bf16 steps agree bit for bit (resume relies on it), and bf16
 * did run (the gradient is not fp32's).
 *
 * Exits 77 (skip) with the reason where the CPU or the build has no bf16. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/isa.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/gpt.h"
#include "backend/cpu/gemm_bf16.h"
#include "nn/transformer.h"
#include "bf16_bound.h"
#include "tap.h"
#include "testvec.h"

static dt_rng rng;


/* Worst |got - want| / (c S + slack) over n outputs, and the largest
 * |got - want| / S */
typedef struct errs { double ratio, rel; } errs;

static errs compare(size_t n, const float *got, const double *want, const double *S, double c,
                    const double *slack)
{
    errs e = { 0, 0 };
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        const double lim = c * S[i] + (slack ? slack[i] : 0.0) + 1e-30;
        e.ratio = isnan(d) ? INFINITY : fmax(e.ratio, d / lim);
        if (S[i] > 0)
            e.rel = fmax(e.rel, d / S[i]);
    }
    return e;
}

static int ran(errs e, double K) { return e.rel > 0x1p-10 / sqrt(K); }

/* One linear layer of the GPT, (N, in) -> (N, out), forward and backward in
 * bf16 against exact arithmetic; W rounded once as the model does. */
static void test_linear(const char *name, int N, int in, int out, int bias)
{
    const size_t nx = (size_t)N * in, ny = (size_t)N * out, nw = (size_t)out * in;
    float *x = vec_rand(&rng, nx, 1.0), *W = vec_rand(&rng, nw, 0.02), *dy = vec_rand(&rng, ny, 1e-3);
    float *b = bias ? vec_rand(&rng, out, 0.1) : NULL;
    dt_bf16 *W16 = dt_malloc(nw * sizeof *W16), *x16 = dt_malloc(nx * sizeof *x16);
    dt_bf16 *dy16 = dt_malloc(ny * sizeof *dy16);
    bf16_from_f32(nw, W, W16);

    double *want = dt_calloc(ny, sizeof(double)), *S = dt_calloc(ny, sizeof(double));
    double *slack = dt_calloc(ny > nx ? (ny > nw ? ny : nw) : (nx > nw ? nx : nw), sizeof(double));
    for (int i = 0; i < N; i++)
        for (int o = 0; o < out; o++) {
            double s = 0, sa = 0;
            for (int k = 0; k < in; k++) {
                const double p = (double)x[(size_t)i * in + k] * W[(size_t)o * in + k];
                s += p;
                sa += fabs(p);
            }
            want[(size_t)i * out + o] = s + (b ? b[o] : 0);
            S[(size_t)i * out + o] = sa;
            slack[(size_t)i * out + o] = 0x1p-23 * (sa + (b ? fabs(b[o]) : 0));
        }
    float *y = vec_const(ny, NAN);
    matmul_forward_bf16(N, in, out, x, W16, b, y, x16);
    const errs ef = compare(ny, y, want, S, bound_k(in), slack);
    CHECK(ef.ratio <= 1 && ran(ef, in),
          "%s N %d %d->%d forward: err/bound %.3f (K = in = %d, bound %.3g S), max err/S %.2e",
          name, N, in, out, ef.ratio, in, bound_k(in), ef.rel);

    double *wdx = dt_calloc(nx, sizeof(double)), *sdx = dt_calloc(nx, sizeof(double));
    double *wdw = dt_calloc(nw, sizeof(double)), *sdw = dt_calloc(nw, sizeof(double));
    for (int i = 0; i < N; i++)
        for (int k = 0; k < in; k++) {
            double s = 0, sa = 0;
            for (int o = 0; o < out; o++) {
                const double p = (double)dy[(size_t)i * out + o] * W[(size_t)o * in + k];
                s += p;
                sa += fabs(p);
            }
            wdx[(size_t)i * in + k] = s;
            sdx[(size_t)i * in + k] = sa;
        }
    for (int o = 0; o < out; o++)
        for (int k = 0; k < in; k++) {
            double s = 0, sa = 0;
            for (int i = 0; i < N; i++) {
                const double p = (double)dy[(size_t)i * out + o] * x[(size_t)i * in + k];
                s += p;
                sa += fabs(p);
            }
            wdw[(size_t)o * in + k] = s;
            sdw[(size_t)o * in + k] = sa;
        }
    float *dx = vec_const(nx, NAN), *dW = vec_const(nw, NAN), *db = vec_const(out, NAN);
    float *db32 = vec_const(out, 0), *dW32 = vec_const(nw, 0);
    matmul_backward_bf16(N, in, out, x, W16, dy, dx, dW, bias ? db : NULL, x16, dy16);
    matmul_backward(N, in, out, x, W, dy, NULL, dW32, bias ? db32 : NULL);
    const errs ex = compare(nx, dx, wdx, sdx, bound_k(out), NULL);
    const errs ew = compare(nw, dW, wdw, sdw, bound_k(N), NULL);
    CHECK(ex.ratio <= 1 && ran(ex, out),
          "%s backward dx (written over NaN): err/bound %.3f (K = out = %d), max err/S %.2e",
          name, ex.ratio, out, ex.rel);
    CHECK(ew.ratio <= 1 && ran(ew, N),
          "%s backward dW: err/bound %.3f (K = N = %d), max err/S %.2e", name, ew.ratio, N,
          ew.rel);
    if (bias)
        CHECK(memcmp(db, db32, (size_t)out * sizeof(float)) == 0,
              "%s backward db: the fp32 kernel's bits", name);
    // x NULL: x16 still holds x from the pass above; dx NULL skips dx
    float *dW2 = vec_const(nw, NAN);
    matmul_backward_bf16(N, in, out, NULL, W16, dy, NULL, dW2, NULL, x16, dy16);
    CHECK(memcmp(dW, dW2, nw * sizeof(float)) == 0,
          "%s backward on the kept x16 (x NULL, dx NULL): same dW bits", name);
    free(x), free(W), free(dy), free(b), free(W16), free(x16), free(dy16), free(want), free(S);
    free(slack), free(y), free(wdx), free(sdx), free(wdw), free(sdw), free(dx), free(dW), free(db);
    free(db32), free(dW32), free(dW2);
}

/* ---- the attention (backend/cpu/attention.c) in bf16 ----------------------------------
 *
 * attention_forward_bf16/backward_bf16 against exact (double) arithmetic on
 * the fp32 q, k, v, dy, within a bound composed from the per-product bound
 * above (bound_k: both operands rounded to bf16, an fp32 sum of K terms) and
 * fp32's own rounding in the softmax, one (batch, head) row i at a time
 * (n = i + 1 keys, m the dropout factor):
 *     S = scale q k^T:  eS_ij = bound_k(hs) scale sum_d |q_id| |k_jd|
 *     lse_i:            eL_i = e^(2 max_j eS_ij) sum_j P_ij eS_ij + fp32's
 *                       (the softmax's weights move by at most e^(2 max eS))
 *     P_ij:             eP_ij = P_ij (e^(eS_ij + eL_i + fp32's) - 1)
 *     y = (m P) v:      sum_j m |v_jd| (eP_ij + bound_k(n) (P_ij + eP_ij))
 *     dP = m dy v^T:    e_ij = m (bound_k(hs) sum_d |dy_id| |v_jd| + fp32's)
 *     D_i = sum_j P_ij dP_ij, dS_ij = P_ij (dP_ij - D_i): first order in
 *                       eP, e and eD_i plus their fp32 roundings
 *     dq = scale dS k, dk = scale dS^T q, dv = (m P)^T dy: as y, with
 *                       K = n keys (dq) or T - j rows (dk, dv, any order).
 * Where bf16 ran (the fp32 path differs from it by far more than by fp32's
 * own rounding) and the bound's tightness are checked too: a dropped pair of
 * k or a shifted index moves a result by about one of its terms, which is
 * above the bound wherever a row has few keys. The fp32 tiled path's
 * results are the comparison for "bf16 ran". */

/* the mask index of probability (i, j) of head bh, as backend/cpu/attention.c draws it */
static uint64_t att_mask_index(int bh, int T, int i, int j)
{
    return ((uint64_t)bh * T + (uint64_t)i) * T + (uint64_t)j;
}

/* max over n of |got - want| / bound */
static double worst(size_t n, const float *got, const double *want, const double *bound)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        w = isnan(d) ? INFINITY : fmax(w, d / (bound[i] + 1e-30));
    }
    return w;
}

/* max |a - b| / max |b| */
static double max_rel(size_t n, const float *a, const float *b)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return isnan(num) ? INFINITY : num / den;
}

static void test_attention_bf16(int T, int hs, float p, int keep)
{
    const int B = 2, NH = 3, C = NH * hs, C3 = 3 * C, nwork = 2;
    const size_t nq = (size_t)B * T * C3, ny = (size_t)B * T * C, nl = (size_t)B * NH * T,
                 np = (size_t)B * NH * T * T, tt = (size_t)T * T;
    const uint64_t key = 77;
    if (!attention_bf16_native(T, hs)) {
        printf("# SKIP bf16 attention (T %d, hs %d): not a bf16 shape on this CPU or build\n", T,
               hs);
        return;
    }
    float *qkv = vec_rand(&rng, nq, 1.0), *dy = vec_rand(&rng, ny, 1.0);
    float *work = vec_const((size_t)nwork * attention_work(T), NAN);
    float *y[2], *lse[2], *probs[2], *dqkv[2]; // [0] bf16, [1] fp32
    for (int k = 0; k < 2; k++) {
        y[k] = vec_const(ny, NAN), lse[k] = vec_const(nl, NAN), dqkv[k] = vec_const(nq, NAN);
        probs[k] = keep ? vec_const(np, NAN) : NULL;
    }
    attention_forward_bf16(B, T, C, NH, qkv, y[0], lse[0], probs[0], p, key, work, nwork);
    attention_backward_bf16(B, T, C, NH, qkv, lse[0], probs[0], dy, p, key, dqkv[0], work, nwork);
    attention_forward(B, T, C, NH, qkv, y[1], lse[1], probs[1], p, key, work, nwork);
    attention_backward(B, T, C, NH, qkv, lse[1], probs[1], dy, p, key, dqkv[1], work, nwork);

    const double scale = 1.0 / sqrt((double)hs), f32 = 0x1p-24;
    double *wy = dt_calloc(ny, sizeof(double)), *by = dt_calloc(ny, sizeof(double));
    double *wl = dt_calloc(nl, sizeof(double)), *bl = dt_calloc(nl, sizeof(double));
    double *wg = dt_calloc(nq, sizeof(double)), *bg = dt_calloc(nq, sizeof(double));
    double *P = dt_calloc(tt, sizeof(double)), *eP = dt_calloc(tt, sizeof(double));
    double *M = dt_calloc(tt, sizeof(double)), *dS = dt_calloc(tt, sizeof(double));
    double *edS = dt_calloc(tt, sizeof(double)), *eS = dt_calloc((size_t)T, sizeof(double));
    double pe = 0; // worst kept probability's error / bound
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
        const float *dyh = dy + (size_t)b * T * C + (size_t)h * hs;
        const size_t yo = (size_t)b * T * C + (size_t)h * hs, go = (size_t)b * T * C3 + (size_t)h * hs;
        for (int i = 0; i < T; i++) {
            const int n = i + 1;
            const double gn = gamma_k(n);
            double mx = -INFINITY, emax = 0;
            for (int j = 0; j < n; j++) {
                double s = 0, sa = 0;
                for (int d = 0; d < hs; d++) {
                    s += (double)q[(size_t)i * C3 + d] * k[(size_t)j * C3 + d];
                    sa += fabs((double)q[(size_t)i * C3 + d] * k[(size_t)j * C3 + d]);
                }
                P[(size_t)i * T + j] = scale * s;
                eS[j] = bound_k(hs) * scale * sa + 2 * f32 * fabs(scale * s);
                mx = fmax(mx, scale * s), emax = fmax(emax, eS[j]);
            }
            double sum = 0;
            for (int j = 0; j < n; j++)
                sum += exp(P[(size_t)i * T + j] - mx);
            const double l = mx + log(sum);
            double eL = 0;
            for (int j = 0; j < n; j++) {
                const double s = P[(size_t)i * T + j];
                P[(size_t)i * T + j] = exp(s - l);
                eL += P[(size_t)i * T + j] * eS[j];
                M[(size_t)i * T + j] = p > 0 ? dropout_factor(key, att_mask_index(bh, T, i, j), p) : 1;
            }
            // fp32's log-sum-exp: the sum (gamma_n), the exp (2 ulp), log and one add
            eL = exp(2 * emax) * eL + gn + 8 * f32 * (1 + fabs(l));
            wl[(size_t)bh * T + i] = l, bl[(size_t)bh * T + i] = eL;
            for (int j = 0; j < n; j++) {
                const double s = log(P[(size_t)i * T + j]) + l; // the score
                // fp32's probability: s - lse (or s - max) rounded, exp, the sum, a divide, m
                const double sp = gn + 8 * f32 * (1 + fabs(s - l) + fabs(s - mx));
                eP[(size_t)i * T + j] = P[(size_t)i * T + j] * (exp(eS[j] + eL + sp) - 1);
            }
            for (int j = n; j < T; j++)
                P[(size_t)i * T + j] = eP[(size_t)i * T + j] = M[(size_t)i * T + j] = 0;
            // y, and the backward's dP, D, dS
            for (int d = 0; d < hs; d++) {
                double s = 0, e = 0;
                for (int j = 0; j < n; j++) {
                    const double pm = M[(size_t)i * T + j] * P[(size_t)i * T + j],
                                 epm = M[(size_t)i * T + j] * eP[(size_t)i * T + j] * (1 + 2 * f32);
                    const double av = fabs((double)v[(size_t)j * C3 + d]);
                    s += pm * v[(size_t)j * C3 + d];
                    e += av * (epm + bound_k(n) * (pm + epm));
                }
                wy[yo + (size_t)i * C + d] = s, by[yo + (size_t)i * C + d] = e;
            }
            double D = 0, eD = 0, aD = 0;
            for (int j = 0; j < n; j++) {
                double s = 0, sa = 0;
                for (int d = 0; d < hs; d++) {
                    const double t = (double)dyh[(size_t)i * C + d] * v[(size_t)j * C3 + d];
                    s += t, sa += fabs(t);
                }
                const double m = M[(size_t)i * T + j];
                const double e = m * (bound_k(hs) * sa + 4 * f32 * fabs(s)), pj = P[(size_t)i * T + j],
                             epj = eP[(size_t)i * T + j];
                dS[(size_t)i * T + j] = m * s; // dP for now
                edS[(size_t)i * T + j] = e;
                D += pj * m * s;
                eD += epj * (fabs(m * s) + e) + pj * e;
                aD += (pj + epj) * (fabs(m * s) + e);
            }
            eD += gn * aD;
            for (int j = 0; j < n; j++) {
                const double dp = dS[(size_t)i * T + j], e = edS[(size_t)i * T + j],
                             pj = P[(size_t)i * T + j], epj = eP[(size_t)i * T + j];
                dS[(size_t)i * T + j] = pj * (dp - D);
                edS[(size_t)i * T + j] = epj * (fabs(dp - D) + e + eD) + pj * (e + eD) +
                                         4 * f32 * (pj + epj) * (fabs(dp) + e + fabs(D) + eD);
            }
            for (int j = n; j < T; j++)
                dS[(size_t)i * T + j] = edS[(size_t)i * T + j] = 0;
        }
        // dq = scale dS k over n keys; dk = scale dS^T q, dv = (m P)^T dy over rows j .. T-1
        for (int i = 0; i < T; i++)
            for (int d = 0; d < hs; d++) {
                double s = 0, e = 0;
                for (int j = 0; j <= i; j++) {
                    const double kd = k[(size_t)j * C3 + d], a = fabs(dS[(size_t)i * T + j]),
                                 ea = edS[(size_t)i * T + j];
                    s += dS[(size_t)i * T + j] * kd;
                    e += fabs(kd) * (ea + (bound_k(i + 1) + 2 * f32) * (a + ea));
                }
                wg[go + (size_t)i * C3 + d] = scale * s, bg[go + (size_t)i * C3 + d] = scale * e;
            }
        for (int j = 0; j < T; j++)
            for (int d = 0; d < hs; d++) {
                double sk = 0, ek = 0, sv = 0, ev = 0;
                const double K = T - j;
                for (int i = j; i < T; i++) {
                    const double qd = q[(size_t)i * C3 + d], a = fabs(dS[(size_t)i * T + j]),
                                 ea = edS[(size_t)i * T + j];
                    sk += dS[(size_t)i * T + j] * qd;
                    ek += fabs(qd) * (ea + (bound_k(K) + 2 * f32) * (a + ea));
                    const double pm = M[(size_t)i * T + j] * P[(size_t)i * T + j],
                                 epm = M[(size_t)i * T + j] * eP[(size_t)i * T + j] * (1 + 2 * f32),
                                 g = dyh[(size_t)i * C + d];
                    sv += pm * g;
                    ev += fabs(g) * (epm + bound_k(K) * (pm + epm));
                }
                wg[go + C + (size_t)j * C3 + d] = scale * sk;
                bg[go + C + (size_t)j * C3 + d] = scale * ek;
                wg[go + 2 * C + (size_t)j * C3 + d] = sv, bg[go + 2 * C + (size_t)j * C3 + d] = ev;
            }
        if (keep)
            for (int i = 0; i < T; i++) {
                const float *pr = probs[0] + ((size_t)bh * T + i) * T;
                for (int j = 0; j <= i; j++) {
                    const double d = fabs(pr[j] - P[(size_t)i * T + j]);
                    pe = isnan(d) ? INFINITY : fmax(pe, d / (eP[(size_t)i * T + j] + 1e-30));
                }
            }
    }
    const double ry = worst(ny, y[0], wy, by), rl = worst(nl, lse[0], wl, bl),
                 rg = worst(nq, dqkv[0], wg, bg);
    const double dyf = max_rel(ny, y[0], y[1]), dgf = max_rel(nq, dqkv[0], dqkv[1]);
    CHECK(ry <= 1 && rl <= 1 && pe <= 1 && rg <= 1 && dyf > 0x1p-14 && dgf > 0x1p-14,
          "bf16 attention (T %d, hs %d, dropout %.1f, %s) vs exact: err/bound y %.3f lse %.3f "
          "probs %.3f dqkv %.3f; vs the fp32 path (max rel) y %.1e dqkv %.1e > 2^-14 (bf16 ran)",
          T, hs, (double)p, keep ? "kept probabilities" : "recomputed", ry, rl, pe, rg, dyf, dgf);
    for (int k = 0; k < 2; k++)
        free(y[k]), free(lse[k]), free(dqkv[k]), free(probs[k]);
    free(qkv), free(dy), free(work), free(wy), free(by), free(wl), free(bl), free(wg), free(bg);
    free(P), free(eP), free(M), free(dS), free(edS), free(eS);
}

/* A shape the bf16 kernels do not take (T 75): attention_*_bf16 are the fp32
 * path's, bit for bit. */
static void test_attention_bf16_fallback(void)
{
    const int B = 1, T = 75, NH = 2, hs = 16, C = NH * hs;
    const size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = vec_rand(&rng, nq, 1.0), *dy = vec_rand(&rng, ny, 1.0);
    float *work = vec_const(attention_work(T), 0);
    float *y[2], *lse[2], *dqkv[2];
    for (int k = 0; k < 2; k++)
        y[k] = vec_const(ny, 0), lse[k] = vec_const(nl, 0), dqkv[k] = vec_const(nq, 0);
    attention_forward_bf16(B, T, C, NH, qkv, y[0], lse[0], NULL, 0.1f, 5, work, 1);
    attention_backward_bf16(B, T, C, NH, qkv, lse[0], NULL, dy, 0.1f, 5, dqkv[0], work, 1);
    attention_forward(B, T, C, NH, qkv, y[1], lse[1], NULL, 0.1f, 5, work, 1);
    attention_backward(B, T, C, NH, qkv, lse[1], NULL, dy, 0.1f, 5, dqkv[1], work, 1);
    CHECK(!attention_bf16_native(T, hs) && memcmp(y[0], y[1], ny * sizeof(float)) == 0 &&
              memcmp(lse[0], lse[1], nl * sizeof(float)) == 0 &&
              memcmp(dqkv[0], dqkv[1], nq * sizeof(float)) == 0,
          "bf16 attention at T %d (not a multiple of 16): the fp32 path's bits", T);
    for (int k = 0; k < 2; k++)
        free(y[k]), free(lse[k]), free(dqkv[k]);
    free(qkv), free(dy), free(work);
}

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

/* One training step (forward with dropout, backward) of a small GPT; eps > 0:
 * parameters scaled by 1 + eps N(0, 1) first. Returns the loss. */
static double gpt_step(int precision, double eps, float **grad, size_t *np)
{
    const dt_gpt_config c = { .vocab = 40, .block = 32, .n_layer = 2, .n_head = 4, .n_embd = 64,
                              .dropout = 0.1f, .precision = precision };
    dt_gpt *m = gpt_create(&c);
    if (!m)
        DT_FATAL("gpt_create: %s", dt_err_msg());
    const int B = 4, N = B * c.block;
    *np = gpt_nparams(m);
    float *p = dt_falloc(*np);
    *grad = dt_falloc(*np);
    gpt_init_params(m, p, 11);
    // a trained model's parameters are not at their initial values: LayerNorm
    // gains and biases away from 1 and 0 so that every path carries gradient
    dt_rng q = rng_make(12, 0, 0, 0);
    for (size_t i = 0; i < *np; i++)
        p[i] += (float)(0.02 * rng_normal(&q));
    if (eps > 0)
        for (size_t i = 0; i < *np; i++)
            p[i] *= (float)(1 + eps * rng_normal(&q));
    int32_t *tok = dt_calloc((size_t)N + 1, sizeof *tok);
    dt_rng r = rng_make(13, 0, 0, 0);
    for (int i = 0; i <= N; i++)
        tok[i] = (int32_t)rng_below(&r, (uint64_t)c.vocab);
    const double loss = gpt_forward(m, p, tok, tok + 1, B, 1, 99, NULL);
    gpt_backward(m, p, *grad);
    free(p), free(tok);
    gpt_free(m);
    return loss;
}

static void test_model(void)
{
    float *g32, *gp, *g1, *g1b;
    size_t np;
    const double l32 = gpt_step(DT_PREC_FP32, 0, &g32, &np);
    gpt_step(DT_PREC_FP32, U, &gp, &np);
    const double l1 = gpt_step(DT_PREC_BF16, 0, &g1, &np);
    const double l1b = gpt_step(DT_PREC_BF16, 0, &g1b, &np);
    const double r = rel(g1, g32, np), r_pert = rel(gp, g32, np);
    const double dl = fabs(l1 - l32) / fabs(l32);
    CHECK(dl <= 1e-3, "gpt step: bf16 loss %.6f vs fp32 %.6f, relative %.2e <= 1e-3", l1, l32, dl);
    CHECK(r <= 0.02 && r <= 3 * r_pert && r > 1e-5,
          "gpt step: bf16 gradient vs fp32 relative 2-norm %.2e <= 0.02 and <= 3 r_pert "
          "(fp32 on parameters perturbed by 2^-8: %.2e); > 1e-5 (bf16 ran)", r, r_pert);
    CHECK(l1 == l1b && memcmp(g1, g1b, np * sizeof(float)) == 0,
          "gpt step: two bf16 steps bit for bit");
    free(g32), free(gp), free(g1), free(g1b);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    rng = rng_make(20261126, 29, 0, 0);
    dt_gpt_config bad = { 8, 4, 1, 1, 4, 0.0f, 7 };
    dt_err_clear();
    CHECK(gpt_create(&bad) == NULL && strstr(dt_err_msg(), "precision 7") != NULL,
          "gpt_create refuses precision 7: %s", dt_err_msg());
    if (bf16_check_cpu() != 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", dt_err_msg());
        dt_gpt_config c = { 8, 4, 1, 1, 4, 0.0f, DT_PREC_BF16 };
        dt_err_clear();
        CHECK(gpt_create(&c) == NULL && strstr(dt_err_msg(), "compute.precision = bf16") != NULL,
              "gpt_create refuses bf16 where the CPU cannot run it: %s", dt_err_msg());
        printf("# SKIP the bf16 GPT: %s\n", why);
        tap_done();
        return tap_failed_ ? 1 : 77;
    }
    backend_set_threads(1);
    // the model's linear layers at C = 64, N = B T = 128, and the tied head (V = 96)
    test_linear("c_attn", 128, 64, 192, 1);
    test_linear("attn.c_proj", 128, 64, 64, 1);
    test_linear("c_fc", 128, 64, 256, 1);
    test_linear("mlp.c_proj", 128, 256, 64, 1);
    test_linear("tied head (h wte^T)", 128, 64, 96, 0);
    test_linear("odd sizes", 37, 19, 23, 1);
    // the attention at GPT shapes: T 64 hs 32 (baby), 256 64 (small), and the other head sizes
    for (int keep = 0; keep < 2; keep++)
        for (int d = 0; d < 2; d++) {
            const float p = d ? 0.3f : 0.0f;
            test_attention_bf16(64, 32, p, keep);
            test_attention_bf16(256, 64, p, keep);
            test_attention_bf16(32, 16, p, keep);
            test_attention_bf16(48, 48, p, keep);
        }
    test_attention_bf16_fallback();
    test_model();
    return tap_done();
}
