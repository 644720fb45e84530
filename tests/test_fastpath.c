/* The fast compute paths against the reference ones.
 *
 *  - oneDNN convolutions (backend "dnnl", every layout pair it is handed:
 *    plain -> blocked as the first layer, blocked -> blocked and the Winograd
 *    shapes, in the block size of the level in force: oneDNN's Winograd at
 *    AVX-512, dtrain's own F(2x2, 3x3) on 8-channel blocks at AVX2, odd
 *    sizes giving partial tiles) against the native
 *    im2col kernel, to 1e-5
 *    relative: forward, input gradient (overwritten and accumulated) and weight
 *    and bias gradients, on odd sizes, padding 0/1, stride 1/2, batch 1, and
 *    channel counts that are not multiples of the vector width;
 *  - the channel-blocked GroupNorm, max- and average-pooling kernels against
 *    the plain ones on the same values, for 16- and 8-channel blocks;
 *  - no convolution primitive is one of oneDNN's reference implementations;
 *  - whole models: a training step of each model with several threads against
 *    one thread (float tolerance), and two one-thread steps bit for bit.
 * Skips the oneDNN cases (saying so) in a build without oneDNN. */
#include "backend/backend.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/rng.h"
#include "models/image_nets.h"
#include "backend/cpu/dnnl_impl.h"
#include "backend/cpu/kernels.h"
#include "nn/layout.h"
#include "nn/net.h"
#include "tap.h"
#include "testvec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static dt_rng rng;
/* the channel block under test: 16 (AVX-512) and 8 (AVX2 and below) */
static int BLK = 16;


/* ||a - b|| / ||b|| in double (NaN anywhere gives infinity) */
static double rel(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (isnan(num))
        return INFINITY;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* A (B, C, HW) tensor from plain into layout blk (a new buffer), or back. */
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
#define to_layout(blk, B, C, HW, plain) relayout(1, blk, B, C, HW, plain)
#define from_layout(blk, B, C, HW, v) relayout(0, blk, B, C, HW, v)

static void layout_roundtrip(void)
{
    const int B = 2, C = 32, HW = 5;
    float *x = vec_rand(&rng, (size_t)B * C * HW, 1.0);
    float *b = to_layout(BLK, B, C, HW, x), *p = from_layout(BLK, B, C, HW, b);
    int ok = memcmp(x, p, (size_t)B * C * HW * sizeof(float)) == 0;
    // element (1, 17, 3) sits in block 17 / BLK of sample 1, pixel 3, lane 17 % BLK
    const size_t at = (((size_t)1 * (C / BLK) + 17 / BLK) * HW + 3) * BLK + 17 % BLK;
    ok = ok && b[at] == x[(1 * C + 17) * HW + 3];
    ok = ok && layout_index(BLK, C, HW, 1, 17, 3) == at;
    CHECK(ok, "layout: plain -> nChw%dc -> plain is the identity, element (1, 17, 3) where expected", BLK);
    free(x), free(b), free(p);
}

/* ---- convolutions ------------------------------------------------------------ */

static dt_conv_shape shape(int B, int C, int H, int W, int K, int R, int stride, int pad,
                           int xblk, int yblk)
{
    dt_conv_shape s = { .B = B, .C = C, .H = H, .W = W, .K = K, .R = R, .S = R,
                        .stride = stride, .pad = pad, .xblk = xblk, .yblk = yblk };
    s.P = (H + 2 * pad - R) / stride + 1;
    s.Q = (W + 2 * pad - R) / stride + 1;
    return s;
}

static void test_conv(const dt_backend *fast, dt_conv_shape s, int bias)
{
    const dt_backend *ref = backend_cpu();
    char name[160];
    snprintf(name, sizeof name, "%s conv B=%d C=%d %dx%d K=%d %dx%d st=%d pad=%d %s->%s%s",
             fast->name, s.B, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad,
             s.xblk ? "blk" : "plain", s.yblk ? "blk" : "plain", bias ? " bias" : "");
    dt_conv_shape sp = s; // the reference's plain shape
    sp.xblk = sp.yblk = 0;
    const int HWx = s.H * s.W, HWy = s.P * s.Q;
    const size_t nx = (size_t)s.B * s.C * HWx, ny = (size_t)s.B * s.K * HWy;
    const size_t nw = (size_t)s.K * s.C * s.R * s.S;
    float *x = vec_rand(&rng, nx, 1.0), *w = vec_rand(&rng, nw, 0.3), *b = bias ? vec_rand(&rng, s.K, 1.0) : NULL;
    float *dy = vec_rand(&rng, ny, 1.0);
    float *work_ref = vec_const(ref->conv2d_workspace(&sp), 0.0f);
    float *work = vec_const(fast->conv2d_workspace(&s), 0.0f);

    // reference: plain, dx written fresh
    float *y_ref = vec_const(ny, 0.0f), *dx_ref = vec_const(nx, NAN);
    float *dw_ref = vec_const(nw, 0.0f), *db_ref = vec_const(s.K, 0.0f);
    ref->conv2d_forward(&sp, x, w, b, y_ref, work_ref);
    ref->conv2d_backward(&sp, x, w, dy, dx_ref, 1, dw_ref, bias ? db_ref : NULL, work_ref);

    float *xl = to_layout(s.xblk, s.B, s.C, HWx, x), *dyl = to_layout(s.yblk, s.B, s.K, HWy, dy);
    float *yl = vec_const(ny, NAN); // every output must be written
    fast->conv2d_forward(&s, xl, w, b, yl, work);
    float *y = from_layout(s.yblk, s.B, s.K, HWy, yl);
    CHECK(rel(y, y_ref, ny) < 1e-5, "%s: forward (rel err %.2e)", name, rel(y, y_ref, ny));

    float *dxl = vec_const(nx, NAN), *dw = vec_const(nw, 1e3f), *db = vec_const(s.K, 1e3f);
    fast->conv2d_backward(&s, xl, w, dyl, dxl, 1, dw, bias ? db : NULL, work);
    float *dx = from_layout(s.xblk, s.B, s.C, HWx, dxl);
    CHECK(rel(dx, dx_ref, nx) < 1e-5, "%s: dx written over NaN (rel err %.2e)", name,
          rel(dx, dx_ref, nx));
    CHECK(rel(dw, dw_ref, nw) < 1e-5, "%s: dW over 1e3 (rel err %.2e)", name,
          rel(dw, dw_ref, nw));
    if (bias)
        CHECK(rel(db, db_ref, s.K) < 1e-5, "%s: db over 1e3 (rel err %.2e)", name,
              rel(db, db_ref, s.K));

    // accumulated: dx = 1 + (the gradient), dW the same as without dx; a
    // kernel that cannot add into dx (oneDNN on blocked tensors) says so, and
    // the engine adds its fresh output in (test_models: ResNets on this backend)
    float *ones = vec_const(nx, 1.0f), *dxl1 = to_layout(s.xblk, s.B, s.C, HWx, ones);
    float *dw2 = vec_const(nw, -7.0f), *db2 = vec_const(s.K, -7.0f);
    float *dx1 = NULL;
    if (fast->conv2d_dx_accumulates(&s)) {
        fast->conv2d_backward(&s, xl, w, dyl, dxl1, 0, dw2, bias ? db2 : NULL, work);
        dx1 = from_layout(s.xblk, s.B, s.C, HWx, dxl1);
        for (size_t i = 0; i < nx; i++)
            dx1[i] -= 1.0f;
        CHECK(rel(dx1, dx_ref, nx) < 1e-5 && memcmp(dw, dw2, nw * sizeof(float)) == 0,
              "%s: dx accumulates onto ones (rel err %.2e), same dW", name,
              rel(dx1, dx_ref, nx));
    } else {
        CHECK(s.xblk || s.yblk, "%s: only blocked passes need the engine to add dx", name);
    }
    memset(dw2, 0, nw * sizeof(float));
    fast->conv2d_backward(&s, xl, w, dyl, NULL, 0, dw2, bias ? db2 : NULL, work);
    CHECK(memcmp(dw, dw2, nw * sizeof(float)) == 0, "%s: same dW with dx NULL", name);

    free(x), free(w), free(b), free(dy), free(work_ref), free(work), free(y_ref), free(dx_ref);
    free(dw_ref), free(db_ref), free(xl), free(dyl), free(yl), free(y), free(dxl), free(dw);
    free(db), free(dx), free(ones), free(dxl1), free(dw2), free(db2), free(dx1);
}

static void test_convs(const dt_backend *fast)
{
    const int CB = fast->cblock; // 16 on AVX-512, 8 below
    // first layers: plain input with 1 or 3 channels, blocked output
    test_conv(fast, shape(3, 1, 28, 28, 32, 3, 1, 0, 0, CB), 1);
    test_conv(fast, shape(2, 3, 9, 7, 16, 3, 1, 1, 0, CB), 0);
    test_conv(fast, shape(1, 3, 11, 11, 16, 3, 2, 1, 0, CB), 0);
    // blocked to blocked: direct (odd sizes, stride 2, pad 0, 1x1 shortcuts)
    test_conv(fast, shape(2, 16, 9, 7, 16, 3, 1, 1, CB, CB), 0);
    test_conv(fast, shape(1, 16, 9, 9, 32, 3, 2, 1, CB, CB), 0);
    test_conv(fast, shape(3, 32, 7, 5, 16, 3, 1, 0, CB, CB), 1);
    test_conv(fast, shape(2, 16, 9, 9, 32, 1, 2, 0, CB, CB), 0);
    test_conv(fast, shape(1, 32, 5, 5, 64, 1, 1, 0, CB, CB), 0);
    // the Winograd shapes (3x3, stride 1, pad 1, 32 and more channels)
    test_conv(fast, shape(2, 32, 7, 9, 32, 3, 1, 1, CB, CB), 0);
    test_conv(fast, shape(1, 64, 8, 8, 48, 3, 1, 1, CB, CB), 0);
    test_conv(fast, shape(3, 32, 26, 26, 64, 3, 1, 0, CB, CB), 1); // mnist_cnn conv2, pad 0
    // plain to plain goes to the native kernel (so does a conv whose output
    // channels are not a multiple of the block: the engine plans its input
    // plain too, since oneDNN runs blocked -> plain only as a reference kernel)
    test_conv(fast, shape(2, 5, 6, 7, 3, 3, 2, 1, 0, 0), 1);
}

/* ---- blocked layer kernels against plain ----------------------------------------- */

static void test_groupnorm_blocked(int B, int C, int HW, int G)
{
    const dt_backend *be = backend_cpu();
    char name[96];
    snprintf(name, sizeof name, "groupnorm B=%d C=%d HW=%d G=%d blk %d", B, C, HW, G, BLK);
    const size_t n = (size_t)B * C * HW, ns = (size_t)B * G;
    float *x = vec_rand(&rng, n, 2.0), *gamma = vec_rand(&rng, C, 0.5), *beta = vec_rand(&rng, C, 0.5);
    float *dy = vec_rand(&rng, n, 1.0);
    for (size_t i = 0; i < n; i++)
        x[i] += 3.0f; // off-centre
    float *y = vec_const(n, 0.0f), *m = vec_const(ns, 0), *r = vec_const(ns, 0);
    float *dx = vec_const(n, 0.5f), *dg = vec_const(C, 0), *dbt = vec_const(C, 0);
    be->groupnorm_forward(B, C, HW, G, 0, x, gamma, beta, NULL, 0, y, m, r);
    be->groupnorm_backward(B, C, HW, G, 0, x, gamma, m, r, NULL, dy, dx, NULL, 0, 0, dg, dbt);

    float *xb = to_layout(BLK, B, C, HW, x), *dyb = to_layout(BLK, B, C, HW, dy);
    float *half = vec_const(n, 0.5f), *dxb = to_layout(BLK, B, C, HW, half);
    float *yb = vec_const(n, NAN), *mb = vec_const(ns, 0), *rb = vec_const(ns, 0);
    float *dg2 = vec_const(C, 1e3f), *dbt2 = vec_const(C, 1e3f);
    be->groupnorm_forward(B, C, HW, G, BLK, xb, gamma, beta, NULL, 0, yb, mb, rb);
    be->groupnorm_backward(B, C, HW, G, BLK, xb, gamma, mb, rb, NULL, dyb, dxb, NULL, 0, 0, dg2, dbt2);
    float *y2 = from_layout(BLK, B, C, HW, yb), *dx2 = from_layout(BLK, B, C, HW, dxb);
    CHECK(rel(y2, y, n) < 1e-6 && rel(mb, m, ns) < 1e-6 && rel(rb, r, ns) < 1e-6,
          "%s blocked: forward and saved statistics as plain (rel err %.2e)", name, rel(y2, y, n));
    CHECK(rel(dx2, dx, n) < 1e-5, "%s blocked: dx accumulated as plain (rel err %.2e)", name,
          rel(dx2, dx, n));
    CHECK(rel(dg2, dg, C) < 1e-5 && rel(dbt2, dbt, C) < 1e-5,
          "%s blocked: dgamma, dbeta overwritten as plain (rel err %.2e, %.2e)", name,
          rel(dg2, dg, C), rel(dbt2, dbt, C));
    free(x), free(gamma), free(beta), free(dy), free(y), free(m), free(r), free(dx), free(dg);
    free(dbt), free(xb), free(dyb), free(half), free(dxb), free(yb), free(mb), free(rb);
    free(dg2), free(dbt2), free(y2), free(dx2);
}

/* relu(gn(x) [+ skip]) by the fused kernel, in layout blk, against the separate
 * layers in the plain layout (GroupNorm, add, ReLU and their backwards). */
static void test_groupnorm_fused(int B, int C, int HW, int G, int blk, int with_skip)
{
    const dt_backend *be = backend_cpu();
    char name[128];
    snprintf(name, sizeof name, "groupnorm + %sReLU fused, %s, B=%d C=%d HW=%d G=%d",
             with_skip ? "add + " : "", blk ? "blocked" : "plain", B, C, HW, G);
    const size_t n = (size_t)B * C * HW, ns = (size_t)B * G;
    float *x = vec_rand(&rng, n, 1.0), *gamma = vec_rand(&rng, C, 0.5), *beta = vec_rand(&rng, C, 0.5);
    float *skip = vec_rand(&rng, n, 1.0), *dy = vec_rand(&rng, n, 1.0);
    // separate layers, plain
    float *t = vec_const(n, 0), *y = vec_const(n, 0), *m = vec_const(ns, 0), *r = vec_const(ns, 0);
    be->groupnorm_forward(B, C, HW, G, 0, x, gamma, beta, NULL, 0, t, m, r);
    if (with_skip)
        be->add_forward(n, t, skip, t);
    be->relu_forward(n, t, y);
    float *d_pre = vec_const(n, 0), *dx = vec_const(n, 0.25f), *dskip = vec_const(n, -0.5f);
    float *dg = vec_const(C, 0), *dbt = vec_const(C, 0);
    be->relu_backward(n, y, dy, d_pre);
    if (with_skip)
        be->add_backward(n, d_pre, dskip, NULL);
    be->groupnorm_backward(B, C, HW, G, 0, x, gamma, m, r, NULL, d_pre, dx, NULL, 0, 0, dg, dbt);

    // fused, in layout blk
    float *xl = to_layout(blk, B, C, HW, x), *sl = to_layout(blk, B, C, HW, skip);
    float *dyl = to_layout(blk, B, C, HW, dy), *q = vec_const(n, 0.25f);
    float *dxl = to_layout(blk, B, C, HW, q), *h = vec_const(n, -0.5f);
    float *dsl = to_layout(blk, B, C, HW, h), *yl = vec_const(n, NAN);
    float *m2 = vec_const(ns, 0), *r2 = vec_const(ns, 0), *dg2 = vec_const(C, 7), *dbt2 = vec_const(C, 7);
    be->groupnorm_forward(B, C, HW, G, blk, xl, gamma, beta, with_skip ? sl : NULL, 1, yl, m2, r2);
    be->groupnorm_backward(B, C, HW, G, blk, xl, gamma, m2, r2, yl, dyl, dxl,
                           with_skip ? dsl : NULL, 0, 0, dg2, dbt2);
    float *y2 = from_layout(blk, B, C, HW, yl), *dx2 = from_layout(blk, B, C, HW, dxl);
    float *ds2 = from_layout(blk, B, C, HW, dsl);
    int zeros = 0;
    for (size_t i = 0; i < n; i++)
        zeros += y[i] == 0.0f;
    CHECK(rel(y2, y, n) < 1e-6 && zeros > (int)(n / 5),
          "%s: forward as the separate layers (rel err %.2e; %d of %zu clipped)", name,
          rel(y2, y, n), zeros, n);
    CHECK(rel(dx2, dx, n) < 1e-5, "%s: dx accumulated as the separate layers (rel err %.2e)",
          name, rel(dx2, dx, n));
    if (with_skip)
        CHECK(rel(ds2, dskip, n) < 1e-6, "%s: dskip accumulated as the add's (rel err %.2e)",
              name, rel(ds2, dskip, n));
    CHECK(rel(dg2, dg, C) < 1e-5 && rel(dbt2, dbt, C) < 1e-5,
          "%s: dgamma, dbeta as the separate layers (rel err %.2e, %.2e)", name, rel(dg2, dg, C),
          rel(dbt2, dbt, C));
    // fresh buffers are written whole: the bits of adding to zeros
    float *z1 = vec_const(n, 0), *z2 = vec_const(n, 0), *f1 = vec_const(n, NAN);
    float *f2 = vec_const(n, NAN);
    be->groupnorm_backward(B, C, HW, G, blk, xl, gamma, m2, r2, yl, dyl, z1,
                           with_skip ? z2 : NULL, 0, 0, dg2, dbt2);
    be->groupnorm_backward(B, C, HW, G, blk, xl, gamma, m2, r2, yl, dyl, f1,
                           with_skip ? f2 : NULL, 1, 1, dg2, dbt2);
    CHECK(memcmp(z1, f1, n * sizeof(float)) == 0 &&
              (!with_skip || memcmp(z2, f2, n * sizeof(float)) == 0),
          "%s: dx_fresh%s write what adding to zeros gives", name,
          with_skip ? " and dskip_fresh" : "");
    free(z1), free(z2), free(f1), free(f2);
    free(x), free(gamma), free(beta), free(skip), free(dy), free(t), free(y), free(m), free(r);
    free(d_pre), free(dx), free(dskip), free(dg), free(dbt), free(xl), free(sl), free(dyl);
    free(q), free(dxl), free(h), free(dsl), free(yl), free(m2), free(r2), free(dg2), free(dbt2);
    free(y2), free(dx2), free(ds2);
}

static void test_pools_blocked(void)
{
    const dt_backend *be = backend_cpu();
    const int B = 2, C = 32, H = 7, W = 6, HW = H * W;
    const size_t n = (size_t)B * C * HW;
    float *x = vec_rand(&rng, n, 1.0), *xb = to_layout(BLK, B, C, HW, x);

    // average pooling: the same bits in both layouts
    float *y = vec_const((size_t)B * C, 0), *y2 = vec_const((size_t)B * C, 0);
    be->avgpool_forward(B, C, HW, 0, x, y);
    be->avgpool_forward(B, C, HW, BLK, xb, y2);
    float *g = vec_rand(&rng, (size_t)B * C, 1.0), *dx = vec_const(n, 1.0f), *ones = vec_const(n, 1.0f);
    float *dxb = to_layout(BLK, B, C, HW, ones);
    be->avgpool_backward(B, C, HW, 0, g, dx);
    be->avgpool_backward(B, C, HW, BLK, g, dxb);
    float *dx2 = from_layout(BLK, B, C, HW, dxb);
    CHECK(memcmp(y, y2, (size_t)B * C * sizeof(float)) == 0 &&
              memcmp(dx, dx2, n * sizeof(float)) == 0,
          "avgpool blocked: forward and accumulated dx identical to plain");

    // max pooling (3x3 windows, stride 2: overlapping; plain output either way)
    dt_pool_shape s = { .B = B, .C = C, .H = H, .W = W, .k = 3, .stride = 2 };
    s.P = (H - 3) / 2 + 1;
    s.Q = (W - 3) / 2 + 1;
    const size_t ny = (size_t)B * C * s.P * s.Q;
    float *py = vec_const(ny, 0), *py2 = vec_const(ny, 0), *pg = vec_rand(&rng, ny, 1.0);
    int32_t *arg = dt_calloc(ny, sizeof *arg), *arg2 = dt_calloc(ny, sizeof *arg2);
    be->maxpool_forward(&s, x, py, arg);
    float *pdx = vec_const(n, 1.0f), *pdxb = to_layout(BLK, B, C, HW, ones);
    be->maxpool_backward(&s, pg, arg, pdx, 0);
    dt_pool_shape sb = s;
    sb.blk = BLK;
    be->maxpool_forward(&sb, xb, py2, arg2);
    be->maxpool_backward(&sb, pg, arg2, pdxb, 0);
    float *pdx2 = from_layout(BLK, B, C, HW, pdxb);
    CHECK(memcmp(py, py2, ny * sizeof(float)) == 0 && memcmp(arg, arg2, ny * sizeof *arg) == 0 &&
              memcmp(pdx, pdx2, n * sizeof(float)) == 0,
          "maxpool blocked input: same maxima, winners and accumulated dx as plain");
    float *zb = vec_const(n, 0), *fb = vec_const(n, NAN);
    be->maxpool_backward(&sb, pg, arg2, zb, 0);
    be->maxpool_backward(&sb, pg, arg2, fb, 1);
    CHECK(memcmp(zb, fb, n * sizeof(float)) == 0,
          "maxpool blocked: dx_fresh writes every element, the bits of adding to zeros");
    free(zb), free(fb);
    free(x), free(xb), free(y), free(y2), free(g), free(dx), free(ones), free(dxb), free(dx2);
    free(py), free(py2), free(pg), free(arg), free(arg2), free(pdx), free(pdxb), free(pdx2);

    // 2x2 windows of stride 2 (the CNNs' pools, through maxpool_2x2), odd H and W
    // (an uncovered row and column), ties, a NaN, infinities, and an accumulated
    // dx that holds -0.0 where no winner lands
    const int H2 = 9, W2 = 7, HW2 = H2 * W2;
    const size_t n2 = (size_t)B * C * HW2;
    float *x2 = vec_rand(&rng, n2, 1.0);
    for (size_t i = 0; i < n2 / 2; i++)
        x2[i] = floorf(2.0f * x2[i]); /* the first half: a few values, ties in most windows */
    for (size_t i = (size_t)48 * HW2; i < (size_t)64 * HW2; i++) /* the last block, all finite */
        x2[i] = i % 5 ? floorf(2.0f * x2[i]) : -0.0f;             /* (the 16-lane kernel): ties */
    x2[(size_t)3 * HW2 + 10] = NAN;       /* plane 3: one window NaN */
    x2[(size_t)17 * HW2 + 8] = INFINITY;  /* plane 17: an infinity (no NaN) */
    x2[(size_t)40 * HW2 + 1] = -INFINITY; /* plane 40 */
    x2[(size_t)41 * HW2 + 62] = NAN;      /* plane 41: in the uncovered corner */
    float *x2b = to_layout(BLK, B, C, HW2, x2);
    dt_pool_shape s2 = { .B = B, .C = C, .H = H2, .W = W2, .k = 2, .stride = 2 };
    s2.P = (H2 - 2) / 2 + 1;
    s2.Q = (W2 - 2) / 2 + 1;
    const size_t ny2 = (size_t)B * C * s2.P * s2.Q;
    float *qy = vec_const(ny2, 0), *qy2 = vec_const(ny2, 0), *qg = vec_rand(&rng, ny2, 1.0);
    int32_t *qa = dt_calloc(ny2, sizeof *qa), *qa2 = dt_calloc(ny2, sizeof *qa2);
    float *d0 = vec_rand(&rng, n2, 1.0);
    for (size_t i = 0; i < n2; i += 3)
        d0[i] = -0.0f;
    float *qdx = vec_const(n2, 0), *qdxb = to_layout(BLK, B, C, HW2, d0);
    memcpy(qdx, d0, n2 * sizeof *qdx);
    be->maxpool_forward(&s2, x2, qy, qa);
    be->maxpool_backward(&s2, qg, qa, qdx, 0);
    dt_pool_shape s2b = s2;
    s2b.blk = BLK;
    be->maxpool_forward(&s2b, x2b, qy2, qa2);
    be->maxpool_backward(&s2b, qg, qa2, qdxb, 0);
    float *qdx2 = from_layout(BLK, B, C, HW2, qdxb);
    int nan_out = 0;
    for (size_t i = 0; i < ny2; i++)
        nan_out += isnan(qy2[i]);
    CHECK(memcmp(qy, qy2, ny2 * sizeof(float)) == 0 && memcmp(qa, qa2, ny2 * sizeof *qa) == 0 &&
              memcmp(qdx, qdx2, n2 * sizeof(float)) == 0 && nan_out == 1,
          "maxpool 2x2 stride 2, blocked input: maxima, winners and accumulated "
          "dx (-0.0 kept) bit for bit the plain path's, ties, infinities and one NaN window "
          "(%d NaN outputs)", nan_out);
    free(x2), free(x2b), free(qy), free(qy2), free(qg), free(qa), free(qa2), free(d0);
    free(qdx), free(qdxb), free(qdx2);
}

/* ---- element-wise kernels on threads ------------------------------------------- */

/* Max-pool, dropout and the SGD step share their work out over
 * compute.threads: two threads give one thread's bits, on sizes past the
 * chunk (DT_PAR_CHUNK) that turns threading on. */
static void test_threads_elementwise(void)
{
    const dt_backend *be = backend_cpu();
    const int B = 8, C = 32, H = 24, W = 24, HW = H * W;
    const size_t n = (size_t)B * C * HW;
    float *x = vec_rand(&rng, n, 1.0);
    x[777] = NAN; // a plane with a NaN takes the NaN pass
    for (int blk = 0; blk <= BLK; blk += BLK) {
        for (int k = 2; k <= 3; k++) {
            const int st = 2;
            dt_pool_shape s = { .B = B, .C = C, .H = H, .W = W, .k = k, .stride = st, .blk = blk };
            s.P = (H - k) / st + 1;
            s.Q = (W - k) / st + 1;
            const size_t ny = (size_t)B * C * s.P * s.Q;
            float *xin = blk ? to_layout(BLK, B, C, HW, x) : vec_copy(x, n);
            float *g = vec_rand(&rng, ny, 1.0);
            float *y[2], *dx[2];
            int32_t *arg[2];
            for (int t = 0; t < 2; t++) {
                backend_set_threads(t + 1);
                y[t] = vec_const(ny, 0);
                arg[t] = dt_calloc(ny, sizeof *arg[t]);
                dx[t] = vec_const(n, 0.5f);
                be->maxpool_forward(&s, xin, y[t], arg[t]);
                be->maxpool_backward(&s, g, arg[t], dx[t], 0);
            }
            backend_set_threads(1);
            CHECK(memcmp(y[0], y[1], ny * sizeof(float)) == 0 &&
                      memcmp(arg[0], arg[1], ny * sizeof(int32_t)) == 0 &&
                      memcmp(dx[0], dx[1], n * sizeof(float)) == 0,
                  "maxpool %dx%d stride 2, %s: two threads give one thread's y, argmax and dx", k,
                  k, blk ? "blocked" : "plain");
            for (int t = 0; t < 2; t++)
                free(y[t]), free(arg[t]), free(dx[t]);
            free(xin), free(g);
        }
    }
    {
        float *y[2], *mask[2], *dx[2], *dy = vec_rand(&rng, n, 1.0);
        for (int t = 0; t < 2; t++) {
            backend_set_threads(t + 1);
            y[t] = vec_const(n, 0), mask[t] = vec_const(n, 0), dx[t] = vec_const(n, 0.25f);
            be->dropout_forward(n, 0.3f, 1234, x, y[t], mask[t]);
            be->dropout_backward(n, mask[t], dy, dx[t], 0);
        }
        backend_set_threads(1);
        CHECK(memcmp(y[0], y[1], n * sizeof(float)) == 0 &&
                  memcmp(mask[0], mask[1], n * sizeof(float)) == 0 &&
                  memcmp(dx[0], dx[1], n * sizeof(float)) == 0,
              "dropout: two threads give one thread's mask, y and dx");
        for (int t = 0; t < 2; t++)
            free(y[t]), free(mask[t]), free(dx[t]);
        free(dy);
    }
    for (int nest = 0; nest <= 1; nest++) {
        const size_t np = 100003; // three chunks, the last partial
        float *g = vec_rand(&rng, np, 1.0), *p0 = vec_rand(&rng, np, 1.0);
        float *p[2], *v[2];
        for (int t = 0; t < 2; t++) {
            backend_set_threads(t + 1);
            p[t] = vec_copy(p0, np), v[t] = vec_const(np, 0.1f);
            for (int step = 0; step < 2; step++)
                be->flat_sgd(np, 0.9f, 1e-4f, nest, 0.05f, p[t], g, v[t]);
        }
        backend_set_threads(1);
        CHECK(memcmp(p[0], p[1], np * sizeof(float)) == 0 &&
                  memcmp(v[0], v[1], np * sizeof(float)) == 0,
              "SGD %s: two threads give one thread's parameters and momentum",
              nest ? "Nesterov" : "momentum");
        for (int t = 0; t < 2; t++)
            free(p[t]), free(v[t]);
        free(g), free(p0);
    }
    free(x);
}

/* ---- whole models: layouts, threads, reproducibility ---------------------------- */

/* One training step's loss and gradient of model name on backend be. */
static double model_step(const dt_backend *be, const char *name, int c, int hw, int B,
                         float **grad, size_t *np)
{
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
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)rng_below(&r, 10);
    double loss = net_forward(n, p, x, y, B, 1, 77, NULL);
    net_backward(n, p, *grad);
    free(p), free(x), free(y);
    net_free(n);
    return loss;
}

static void test_models(const dt_backend *fast)
{
    struct { const char *name; int c, hw, B; } m[] = {
        { "mnist_cnn", 1, 28, 8 }, { "resnet20_gn", 3, 32, 8 }, { "resnet32_gn", 3, 16, 4 },
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        float *g_ref, *g1, *g1b, *g2;
        size_t np;
        backend_set_threads(1);
        const double l_ref = model_step(backend_cpu(), m[i].name, m[i].c, m[i].hw, m[i].B, &g_ref, &np);
        const double l1 = model_step(fast, m[i].name, m[i].c, m[i].hw, m[i].B, &g1, &np);
        const double l1b = model_step(fast, m[i].name, m[i].c, m[i].hw, m[i].B, &g1b, &np);
        backend_set_threads(2);
        const double l2 = model_step(fast, m[i].name, m[i].c, m[i].hw, m[i].B, &g2, &np);
        backend_set_threads(1);
        if (fast != backend_cpu())
            CHECK(fabs(l1 - l_ref) <= 1e-5 * fabs(l_ref) && rel(g1, g_ref, np) < 1e-4,
                  "%s %s: loss and gradient as the native backend's (loss %.9g vs %.9g, grad "
                  "rel err %.2e)", fast->name, m[i].name, l1, l_ref, rel(g1, g_ref, np));
        CHECK(l1 == l1b && memcmp(g1, g1b, np * sizeof(float)) == 0,
              "%s %s: one thread, two steps bit for bit", fast->name, m[i].name);
        CHECK(fabs(l2 - l1) <= 1e-5 * fabs(l1) && rel(g2, g1, np) < 1e-4,
              "%s %s: two threads agree with one (grad rel err %.2e)", fast->name, m[i].name,
              rel(g2, g1, np));
        free(g_ref), free(g1), free(g1b), free(g2);
    }
}

static const char *impls_text(void)
{
    static char text[256];
    dnnl_impls(text, sizeof text);
    return text;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (isa_setup_test(argv) != 0) // DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS
        return 1;
    rng = rng_make(20261124, 4, 5, 6);
    for (BLK = 16; BLK >= 8; BLK /= 2) { // every block size, whatever the level in force
        layout_roundtrip();
        test_groupnorm_blocked(2, 16, 25, 2);
        test_groupnorm_blocked(3, 32, 64, 4);  // groups of 8 channels
        test_groupnorm_blocked(1, 64, 130, 2); // groups across blocks, a partial chunk
        test_groupnorm_blocked(2, 48, 9, 3);   // 16-channel groups
        for (int blk = 0; blk <= BLK; blk += BLK) {
            test_groupnorm_fused(2, 32, 49, 2, blk, 0);
            test_groupnorm_fused(3, 16, 70, 4, blk, 1);
        }
        test_pools_blocked();
        test_threads_elementwise();
    }
    const dt_backend *fast = backend_cpu_dnnl();
    if (!fast) {
        printf("ok %d - # SKIP oneDNN convolutions: dtrain was built without oneDNN\n", ++tap_count_);
        test_models(backend_cpu());
        return tap_done();
    }
    test_convs(fast);
    test_models(fast);
    test_models(backend_cpu());
    CHECK(dnnl_reference_count() == 0,
          "no oneDNN primitive took one of oneDNN's reference implementations at %s (%ld did; ran: %s)",
          isa_name(isa_level()), dnnl_reference_count(), impls_text());
    return tap_done();
}
