/* Winograd F(2x2, 3x3) convolutions on 8-channel blocks, for AVX2 + FMA.
 *
 * oneDNN 2.6 has Winograd kernels only from AVX-512 on; below it a 3x3
 * convolution runs its direct kernel, at 90-96 % of the one-core sgemm peak
 * and still most of a ResNet's step. F(2x2, 3x3) computes each 2x2 block of
 * outputs from a 4x4 block of inputs with 16 products per input and output
 * channel instead of 36 (Lavin and Gray; doc/references.md):
 *
 *     Y = A^T [ (G g G^T) . (B^T d B) ] A,
 *
 * g the 3x3 filter, d the 4x4 input tile, "." the element-wise product over
 * the 16 positions, summed over the input channels: for each position a
 * matrix product (tiles x input channels) x (input x output channels). The
 * three passes of training are the same machinery:
 *
 *  - forward: U = G g G^T per filter, V = B^T d B per tile and channel,
 *    M = V U per position, Y = A^T M A;
 *  - data gradient: the same convolution of dy with the filters turned by
 *    180 degrees and their channels swapped, padding 2 - pad;
 *  - weight gradient: the adjoint of the forward in g, dU = V^T dM per
 *    position with dM = A dY A^T, then dg = G^T dU G (exact: the forward is
 *    linear in U, and U = G g G^T).
 *
 * Tiles go in blocks sized so that one block's V and M stay in the L2 cache,
 * each block transformed, multiplied and transformed back by one thread
 * (no barrier inside a pass); the weight gradient sums the blocks in eight
 * runs fixed by the shape, then the runs in order. So every sum runs in an
 * order fixed by the shape, whatever the thread count: forward, data
 * gradient and weight gradient give the same bits on one thread and on
 * many. The products are micro-kernels of 6 x 16 outputs in twelve ymm
 * accumulators (FMA). Used at the AVX2 level only (conv2d_dnnl.c): at
 * AVX-512 oneDNN's own Winograd runs on 16-channel blocks. In the simulator
 * (no OpenMP; ranks share one thread) the passes run serially. */
#include "config.h"

#include "backend/cpu/kernels.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/isa.h"
#include "core/simd.h"

enum { POS = 16 }; /* positions of a 4x4 tile */

/* A convolution as the Winograd machinery sees it: NI input channels of
 * IH x IW, NO output channels of OH x OW, padding pad (0, 1 or 2), both
 * tensors in 8-channel blocks. */
typedef struct wgeom {
    int B, NI, IH, IW, NO, OH, OW, pad;
    int TH, TW;   /* tiles per image: ceil(OH / 2) x ceil(OW / 2) */
    long tiles;   /* B TH TW */
    int T;        /* tiles per block (a multiple of 6) */
} wgeom;

static int tiles_per_block(int ni, int no)
{
    int t = 8192 / (ni + no); /* V and M of a block: 64 T (ni + no) bytes, 512 KiB */
    t = t < 12 ? 12 : t > 384 ? 384 : t;
    return t / 6 * 6;
}

static wgeom geom(int B, int ni, int ih, int iw, int no, int oh, int ow, int pad)
{
    wgeom g = { .B = B, .NI = ni, .IH = ih, .IW = iw, .NO = no, .OH = oh, .OW = ow, .pad = pad };
    g.TH = (oh + 1) / 2;
    g.TW = (ow + 1) / 2;
    g.tiles = (long)B * g.TH * g.TW;
    g.T = tiles_per_block(ni, no);
    return g;
}

/* floats of a block's V and M, then of U */
static size_t block_floats(const wgeom *g) { return (size_t)POS * g->T * (g->NI + g->NO); }
static size_t u_floats(const wgeom *g) { return (size_t)POS * g->NI * g->NO; }

static wgeom fwd_geom(const dt_conv_shape *s)
{
    return geom(s->B, s->C, s->H, s->W, s->K, s->P, s->Q, s->pad);
}

/* the data gradient: dy (K channels, P x Q) to dx (C channels, H x W) */
static wgeom bwd_geom(const dt_conv_shape *s)
{
    return geom(s->B, s->K, s->P, s->Q, s->C, s->H, s->W, 2 - s->pad);
}

int wino8_applies(const dt_conv_shape *s)
{
    return isa_level() == DT_ISA_AVX2 && s->xblk == 8 && s->yblk == 8 && s->R == 3 &&
           s->S == 3 && s->stride == 1 && (s->pad == 0 || s->pad == 1) && s->C % 8 == 0 &&
           s->K % 8 == 0 && s->B > 0;
}

static int parts(const wgeom *g);

/* U (forward, data gradient) or the weight gradient's partial sums */
size_t wino8_workspace(const dt_conv_shape *s)
{
    const wgeom f = fwd_geom(s);
    return u_floats(&f) * parts(&f);
}

/* ---- transforms (one 8-channel block; every function inlined into its
 *      AVX2 caller) -------------------------------------------------------- */

/* G g G^T of one 3x3 filter (read with strides rs, ss) into u[16] */
static inline void filter_transform(const float *g, int rs, int ss, float u[POS])
{
    float t[4][3];
    for (int s = 0; s < 3; s++) {
        const float g0 = g[0 * rs + s * ss], g1 = g[1 * rs + s * ss], g2 = g[2 * rs + s * ss];
        t[0][s] = g0;
        t[1][s] = 0.5f * (g0 + g1 + g2);
        t[2][s] = 0.5f * (g0 - g1 + g2);
        t[3][s] = g2;
    }
    for (int i = 0; i < 4; i++) {
        u[i * 4 + 0] = t[i][0];
        u[i * 4 + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        u[i * 4 + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        u[i * 4 + 3] = t[i][2];
    }
}

/* G^T du G: the adjoint of filter_transform, into g (strides rs, ss) */
static inline void filter_adjoint(const float du[POS], float *g, int rs, int ss)
{
    float t[3][4];
    for (int j = 0; j < 4; j++) {
        const float u0 = du[0 * 4 + j], u1 = du[1 * 4 + j], u2 = du[2 * 4 + j],
                    u3 = du[3 * 4 + j];
        t[0][j] = u0 + 0.5f * (u1 + u2);
        t[1][j] = 0.5f * (u1 - u2);
        t[2][j] = 0.5f * (u1 + u2) + u3;
    }
    for (int r = 0; r < 3; r++) {
        g[r * rs + 0 * ss] = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
        g[r * rs + 1 * ss] = 0.5f * (t[r][1] - t[r][2]);
        g[r * rs + 2 * ss] = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
    }
}

/* Where a tile's 16 inputs (or 4 outputs) lie in a channel block's plane:
 * offsets in floats, or -1 outside it (padding: a zero). Computed once per
 * tile, used for every channel block. */
static const float zero8[8];

static inline void tile_offsets(int n, int h, int w, int y0, int x0, long *off)
{
#pragma GCC unroll 16
    for (int i = 0; i < n; i++)
#pragma GCC unroll 16
        for (int j = 0; j < n; j++) {
            const int y = y0 + i, x = x0 + j;
            off[i * n + j] = y >= 0 && y < h && x >= 0 && x < w ? ((long)y * w + x) * 8 : -1;
        }
}

/* the vector at plane + off, or zeros (a load through a selected pointer:
 * no branch, and the same code for inner and border tiles) */
#define AT(plane, off) vf8_ld((off) >= 0 ? (plane) + (off) : zero8)

/* B^T d B of one tile of one channel block, the 16 results to v + pos * stride:
 * all 16 inputs loaded before the first store (the stores may alias them for
 * all the compiler knows) */
DT_KERNEL_BODY void input_tile(const float *plane, const long *off, int inner, size_t row,
                               float *v, size_t stride)
{
    vf8 d[16];
    if (inner) { /* all 16 inside: rows of 4 from the first */
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++)
            d[k] = vf8_ld(plane + off[0] + (k / 4) * row + (k % 4) * 8);
    } else {
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++)
            d[k] = AT(plane, off[k]);
    }
    vf8 t[16]; /* B^T d, row by row */
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        t[0 * 4 + j] = d[0 * 4 + j] - d[2 * 4 + j];
        t[1 * 4 + j] = d[1 * 4 + j] + d[2 * 4 + j];
        t[2 * 4 + j] = d[2 * 4 + j] - d[1 * 4 + j];
        t[3 * 4 + j] = d[1 * 4 + j] - d[3 * 4 + j];
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        const vf8 *r = t + i * 4;
        vf8_st(v + (size_t)(i * 4 + 0) * stride, r[0] - r[2]);
        vf8_st(v + (size_t)(i * 4 + 1) * stride, r[1] + r[2]);
        vf8_st(v + (size_t)(i * 4 + 2) * stride, r[2] - r[1]);
        vf8_st(v + (size_t)(i * 4 + 3) * stride, r[1] - r[3]);
    }
}

/* A^T m A (+ bias) of one tile of one channel block: m at m + pos * stride,
 * the 2x2 outputs to plane + off (those inside it: off >= 0). */
DT_KERNEL_BODY void output_tile(const float *m, size_t stride, const float *bias, float *plane,
                                const long *off)
{
    vf8 s0[4], s1[4];
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        const vf8 m0 = vf8_ld(m + (size_t)(0 * 4 + j) * stride),
                  m1 = vf8_ld(m + (size_t)(1 * 4 + j) * stride),
                  m2 = vf8_ld(m + (size_t)(2 * 4 + j) * stride),
                  m3 = vf8_ld(m + (size_t)(3 * 4 + j) * stride);
        s0[j] = m0 + m1 + m2;
        s1[j] = m1 - m2 - m3;
    }
    const vf8 b = bias ? vf8_ld(bias) : (vf8){ 0 };
    const vf8 y00 = s0[0] + s0[1] + s0[2] + b, y01 = s0[1] - s0[2] - s0[3] + b;
    const vf8 y10 = s1[0] + s1[1] + s1[2] + b, y11 = s1[1] - s1[2] - s1[3] + b;
    if (off[3] >= 0) { /* the whole tile inside */
        vf8_st(plane + off[0], y00), vf8_st(plane + off[1], y01);
        vf8_st(plane + off[2], y10), vf8_st(plane + off[3], y11);
        return;
    }
    vf8_st(plane + off[0], y00);
    if (off[1] >= 0)
        vf8_st(plane + off[1], y01);
    if (off[2] >= 0)
        vf8_st(plane + off[2], y10);
}

/* A dY A^T of one tile's 2x2 outputs (zeros outside), to m + pos * stride:
 * the adjoint of output_tile. */
DT_KERNEL_BODY void output_tile_adjoint(const float *plane, const long *off, float *m,
                                        size_t stride)
{
    const vf8 y00 = AT(plane, off[0]), y01 = AT(plane, off[1]), y10 = AT(plane, off[2]),
              y11 = AT(plane, off[3]);
    /* rows: A dY (4 x 2) */
    const vf8 s[4][2] = { { y00, y01 },
                          { y00 + y10, y01 + y11 },
                          { y00 - y10, y01 - y11 },
                          { -y10, -y11 } };
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        vf8_st(m + (size_t)(i * 4 + 0) * stride, s[i][0]);
        vf8_st(m + (size_t)(i * 4 + 1) * stride, s[i][0] + s[i][1]);
        vf8_st(m + (size_t)(i * 4 + 2) * stride, s[i][0] - s[i][1]);
        vf8_st(m + (size_t)(i * 4 + 3) * stride, -s[i][1]);
    }
}

/* ---- the products ------------------------------------------------------- */

/* c[i][0 .. 8 NV) (+)= sum_k a[i sai + k sak] b[k ldb + 0 .. 8 NV), i < R:
 * R x 8 NV outputs in registers, the k loop innermost. */
DT_KERNEL_BODY void micro(int R, int NV, int n, const float *a, size_t sai, size_t sak,
                          const float *b, size_t ldb, float *c, size_t ldc, int acc)
{
    vf8 s[6][2];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        s[i][0] = acc ? vf8_ld(c + i * ldc) : (vf8){ 0 };
        s[i][1] = NV > 1 ? (acc ? vf8_ld(c + i * ldc + 8) : (vf8){ 0 }) : (vf8){ 0 };
    }
    for (int k = 0; k < n; k++) {
        const vf8 b0 = vf8_ld(b + k * ldb), b1 = NV > 1 ? vf8_ld(b + k * ldb + 8) : (vf8){ 0 };
#pragma GCC unroll 6
        for (int i = 0; i < R; i++) {
            const float e = a[i * sai + k * sak];
            const vf8 x = { e, e, e, e, e, e, e, e }; /* a broadcast, no add */
            s[i][0] += x * b0;
            if (NV > 1)
                s[i][1] += x * b1;
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        vf8_st(c + i * ldc, s[i][0]);
        if (NV > 1)
            vf8_st(c + i * ldc + 8, s[i][1]);
    }
}

/* The forward's product of one position for output channels [k0, k0 + 8 nv):
 * M[t][k] = sum_c V[t][c] U[c][k], t < nt (rounded up to 6: the block's
 * rows past nt are scratch). */
DT_TARGET_V3 DT_FP_CONTRACT static void product_fwd(int nt, int ni, int no, const float *V,
                                                    const float *U, float *M, int k0, int nv)
{
    for (int t = 0; t < nt; t += 6) {
        const float *a = V + (size_t)t * ni;
        float *c = M + (size_t)t * no + k0;
        if (nv == 2)
            micro(6, 2, ni, a, ni, 1, U + k0, no, c, no, 0);
        else
            micro(6, 1, ni, a, ni, 1, U + k0, no, c, no, 0);
    }
}

/* The weight gradient's product of one position for input channels
 * [c0, c0 + r) and output channels [k0, k0 + 16): dU[c][k] (+)= sum_t
 * V[t][c] dM[t][k] over the block's nt tiles. */
DT_TARGET_V3 DT_FP_CONTRACT static void product_dw(int nt, int ni, int no, const float *V,
                                                   const float *dM, float *dU, int c0, int r,
                                                   int k0, int nv, int acc)
{
    const float *a = V + c0;
    const float *b = dM + k0;
    float *c = dU + (size_t)c0 * no + k0;
#define DW_CASE(R_)                                                                       \
    case R_:                                                                              \
        if (nv == 2)                                                                      \
            micro(R_, 2, nt, a, 1, ni, b, no, c, no, acc);                                \
        else                                                                              \
            micro(R_, 1, nt, a, 1, ni, b, no, c, no, acc);                                \
        break;
    switch (r) {
        DW_CASE(6)
        DW_CASE(4)
        DW_CASE(2)
    }
#undef DW_CASE
}

/* ---- the passes --------------------------------------------------------- */

static void tile_origin(const wgeom *g, long t, int *n, int *ty, int *tx)
{
    const long per = (long)g->TH * g->TW;
    *n = (int)(t / per);
    const int rem = (int)(t % per);
    *ty = rem / g->TW;
    *tx = rem % g->TW;
}

DT_TARGET_V3 static void transform_inputs(const wgeom *g, const float *x, long t0, int nt,
                                          float *V)
{
    const int cb_n = g->NI / 8;
    const size_t plane = (size_t)g->IH * g->IW * 8, stride = (size_t)g->T * g->NI;
    const size_t row = (size_t)g->IW * 8;
    for (int tl = 0; tl < nt; tl++) {
        int n, ty, tx;
        long off[16];
        tile_origin(g, t0 + tl, &n, &ty, &tx);
        tile_offsets(4, g->IH, g->IW, 2 * ty - g->pad, 2 * tx - g->pad, off);
        const float *xn = x + (size_t)n * cb_n * plane;
        float *v = V + (size_t)tl * g->NI;
        if (off[0] >= 0 && off[15] >= 0) /* the corners inside: the whole tile */
            for (int cb = 0; cb < cb_n; cb++)
                input_tile(xn + cb * plane, off, 1, row, v + cb * 8, stride);
        else
            for (int cb = 0; cb < cb_n; cb++)
                input_tile(xn + cb * plane, off, 0, row, v + cb * 8, stride);
    }
}

DT_TARGET_V3 static void transform_outputs(const wgeom *g, const float *M, const float *bias,
                                           long t0, int nt, float *y)
{
    const int kb_n = g->NO / 8;
    const size_t plane = (size_t)g->OH * g->OW * 8, stride = (size_t)g->T * g->NO;
    for (int tl = 0; tl < nt; tl++) {
        int n, ty, tx;
        long off[4];
        tile_origin(g, t0 + tl, &n, &ty, &tx);
        tile_offsets(2, g->OH, g->OW, 2 * ty, 2 * tx, off);
        for (int kb = 0; kb < kb_n; kb++)
            output_tile(M + (size_t)tl * g->NO + kb * 8, stride, bias ? bias + kb * 8 : NULL,
                        y + ((size_t)n * kb_n + kb) * plane, off);
    }
}

/* The adjoint of transform_outputs, its own loop: one function with a flag
 * for both made the weight gradient 8-15 % slower (conv_bench, avx2) */
DT_TARGET_V3 static void transform_output_grads(const wgeom *g, const float *dy, long t0,
                                                int nt, float *dM)
{
    const int kb_n = g->NO / 8;
    const size_t plane = (size_t)g->OH * g->OW * 8, stride = (size_t)g->T * g->NO;
    for (int tl = 0; tl < nt; tl++) {
        int n, ty, tx;
        long off[4];
        tile_origin(g, t0 + tl, &n, &ty, &tx);
        tile_offsets(2, g->OH, g->OW, 2 * ty, 2 * tx, off);
        for (int kb = 0; kb < kb_n; kb++)
            output_tile_adjoint(dy + ((size_t)n * kb_n + kb) * plane, off,
                                dM + (size_t)tl * g->NO + kb * 8, stride);
    }
}

/* A thread's V and M (or dM) for one block, kept for the thread's life and
 * grown as larger shapes come: the OpenMP threads persist, so a step
 * allocates nothing. */
static _Thread_local float *block_buf;
static _Thread_local size_t block_len;

static float *thread_block(const wgeom *g)
{
    const size_t n = block_floats(g);
    if (n > block_len) {
        free(block_buf);
        block_buf = dt_falloc(n);
        block_len = n;
    }
    return block_buf;
}

static long blocks(const wgeom *g) { return (g->tiles + g->T - 1) / g->T; }

/* y = the convolution of x with the transformed filters U (+ bias): each
 * thread transforms, multiplies and transforms back whole blocks of tiles */
static void wino_conv(const wgeom *g, const float *x, const float *U, const float *bias,
                      float *y)
{
    const long nb = blocks(g);
#pragma omp parallel
    {
        float *V = thread_block(g), *M = V + (size_t)POS * g->T * g->NI;
#pragma omp for schedule(static)
        for (long blk = 0; blk < nb; blk++) {
            const long t0 = blk * g->T;
            const int nt = (int)(g->tiles - t0 < g->T ? g->tiles - t0 : g->T);
            transform_inputs(g, x, t0, nt, V);
            for (int pos = 0; pos < POS; pos++)
                for (int k0 = 0; k0 < g->NO; k0 += 16)
                    product_fwd(nt, g->NI, g->NO, V + (size_t)pos * g->T * g->NI,
                                U + (size_t)pos * g->NI * g->NO, M + (size_t)pos * g->T * g->NO,
                                k0, g->NO - k0 >= 16 ? 2 : 1);
            transform_outputs(g, M, bias, t0, nt, y);
        }
    }
}

/* U[pos][c][k] of w[k][c][3][3] (flip: the data gradient's, U[pos][k][c]
 * of w turned by 180 degrees) */
static void filters(const dt_conv_shape *s, const float *w, int flip, float *U)
{
    const int C = s->C, K = s->K;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++) {
            const float *g = w + ((size_t)k * C + c) * 9;
            float u[POS];
            if (flip)
                filter_transform(g + 8, -3, -1, u);
            else
                filter_transform(g, 3, 1, u);
            const size_t at = flip ? (size_t)k * C + c : (size_t)c * K + k;
            for (int p = 0; p < POS; p++)
                U[(size_t)p * C * K + at] = u[p];
        }
}

void wino8_forward(const dt_conv_shape *s, const float *x, const float *w, const float *b,
                   float *y, float *work)
{
    const wgeom g = fwd_geom(s);
    filters(s, w, 0, work);
    wino_conv(&g, x, work, b, y);
}

/* The weight gradient sums over every tile of the batch: in PARTS runs of
 * consecutive blocks, each summed into its own dU by one thread, then the
 * runs in order. The split is fixed by the shape, so the bits do not depend
 * on the thread count. */
enum { PARTS = 8 };

static int parts(const wgeom *g) { return blocks(g) < PARTS ? (int)blocks(g) : PARTS; }

/* dU = sum over tiles of V^T dM per position, then dw = G^T dU G */
static void weight_grad(const dt_conv_shape *s, const float *x, const float *dy, float *dw,
                        float *work)
{
    const wgeom g = fwd_geom(s);
    const int C = s->C, K = s->K, np = parts(&g);
    const long nb = blocks(&g);
    const size_t nu = u_floats(&g);
#pragma omp parallel
    {
        float *V = thread_block(&g), *dM = V + (size_t)POS * g.T * C;
#pragma omp for schedule(static)
        for (int p = 0; p < np; p++) {
            float *dU = work + (size_t)p * nu;
            for (long blk = nb * p / np; blk < nb * (p + 1) / np; blk++) {
                const long t0 = blk * g.T;
                const int nt = (int)(g.tiles - t0 < g.T ? g.tiles - t0 : g.T);
                transform_inputs(&g, x, t0, nt, V);
                transform_output_grads(&g, dy, t0, nt, dM);
                for (int pos = 0; pos < POS; pos++)
                    for (int c0 = 0; c0 < C; c0 += 6)
                        for (int k0 = 0; k0 < K; k0 += 16)
                            product_dw(nt, C, K, V + (size_t)pos * g.T * C,
                                       dM + (size_t)pos * g.T * K, dU + (size_t)pos * C * K, c0,
                                       C - c0 < 6 ? C - c0 : 6, k0, K - k0 >= 16 ? 2 : 1,
                                       blk > nb * p / np);
            }
        }
#pragma omp for schedule(static)
        for (size_t i = 0; i < nu; i++) /* the runs in order, into the first */
            for (int p = 1; p < np; p++)
                work[i] += work[(size_t)p * nu + i];
#pragma omp for schedule(static)
        for (int k = 0; k < K; k++)
            for (int c = 0; c < C; c++) {
                float du[POS];
                for (int q = 0; q < POS; q++)
                    du[q] = work[(size_t)q * C * K + (size_t)c * K + k];
                filter_adjoint(du, dw + ((size_t)k * C + c) * 9, 3, 1);
            }
    }
}

/* db[k] = sum of dy over images and pixels, per 8-channel block in image order */
DT_TARGET_V3 static void bias_grad(const dt_conv_shape *s, const float *dy, float *db)
{
    const int kb_n = s->K / 8;
    const size_t plane = (size_t)s->P * s->Q;
#pragma omp parallel for schedule(static)
    for (int kb = 0; kb < kb_n; kb++) {
        vf8 sum = { 0 };
        for (int n = 0; n < s->B; n++) {
            const float *p = dy + ((size_t)n * kb_n + kb) * plane * 8;
            vf8 part = { 0 };
            for (size_t i = 0; i < plane; i++)
                part += vf8_ld(p + i * 8);
            sum += part;
        }
        vf8_st(db + kb * 8, sum);
    }
}

void wino8_backward(const dt_conv_shape *s, const float *x, const float *w, const float *dy,
                    float *dx, float *dw, float *db, float *work)
{
    if (dw)
        weight_grad(s, x, dy, dw, work);
    if (db)
        bias_grad(s, dy, db);
    if (dx) {
        const wgeom g = bwd_geom(s);
        filters(s, w, 1, work);
        wino_conv(&g, dy, work, NULL, dx);
    }
}
