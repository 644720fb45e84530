/* GELU, tanh approximation (GPT-2's; PyTorch's approximate='tanh'), through
 * the identity (1 + tanh(u)) / 2 = sigmoid(2u):
 *   gelu(x) = x s, s = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 *   gelu'(x) = s + x s (1 - s) 2 u'(x),  u'(x) = sqrt(2/pi) (1 + 3 0.044715 x^2),
 * one vectorised exp per element (backend/cpu/fast_exp.h) instead of a libm tanhf. */
#include "nn/transformer.h"

#include "core/simd.h"
#include "core/bf16_round.h"
#include "backend/cpu/fast_exp.h"

#include <string.h>

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f
#define GELU_M2K (-2.0f * GELU_K)
#define GELU_2K (2.0f * GELU_K)
#define GELU_3A (3.0f * GELU_A)

/* The vector part of each chunk runs sixteen floats at a time, as one v16f
 * (AVX-512) or two vf8 (narrow: AVX2, baseline); the same elements take the
 * vector path either way, and the tail the scalar one. The AVX2 and AVX-512
 * variants contract a * b + c into FMA (a quarter of the operations fewer,
 * a third of the time), so they round alike and the baseline in its own way;
 * within a level the three kernels compute gelu(x) the same way, bit for bit. */
#define GELU_FWD(VF, EXP, LD, ST, i)                                                      \
    do {                                                                                  \
        const VF v = LD(x + (i));                                                         \
        VF e;                                                                             \
        EXP(e, GELU_M2K * (v + GELU_A * v * v * v));                                      \
        ST(y + (i), v * (1.0f / (1.0f + e))); /* as gelu_deriv_chunk's, bit for bit */   \
    } while (0)
DT_KERNEL_BODY void gelu_fwd_chunk_body(int narrow, size_t n, const float *x, float *y)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (narrow) {
            GELU_FWD(vf8, VF8_EXP, vf8_ld, vf8_st, i);
            GELU_FWD(vf8, VF8_EXP, vf8_ld, vf8_st, i + 8);
        } else {
            GELU_FWD(v16f, V16_EXP, v16_ld, v16_st, i);
        }
    }
    for (; i < n; i++) {
        const float v = x[i];
        y[i] = v * (1.0f / (1.0f + fast_expf(GELU_M2K * (v + GELU_A * v * v * v))));
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(gelu_fwd_chunk, (size_t n, const float *x, float *y), (n, x, y));

#define GELU_BWD(VF, EXP, LD, ST, i)                                                      \
    do {                                                                                  \
        const VF v = LD(x + (i));                                                         \
        VF e;                                                                             \
        EXP(e, GELU_M2K * (v + GELU_A * v * v * v));                                      \
        const VF s = 1.0f / (1.0f + e), du = GELU_2K * (1.0f + GELU_3A * v * v);          \
        ST(dx + (i), LD(dy + (i)) * (s + v * s * (1.0f - s) * du));                       \
    } while (0)
DT_KERNEL_BODY void gelu_bwd_chunk_body(int narrow, size_t n, const float *x, const float *dy,
                                        float *dx)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (narrow) {
            GELU_BWD(vf8, VF8_EXP, vf8_ld, vf8_st, i);
            GELU_BWD(vf8, VF8_EXP, vf8_ld, vf8_st, i + 8);
        } else {
            GELU_BWD(v16f, V16_EXP, v16_ld, v16_st, i);
        }
    }
    for (; i < n; i++) {
        const float v = x[i];
        const float s = 1.0f / (1.0f + fast_expf(GELU_M2K * (v + GELU_A * v * v * v)));
        const float du = GELU_2K * (1.0f + GELU_3A * v * v);
        dx[i] = dy[i] * (s + v * s * (1.0f - s) * du);
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(gelu_bwd_chunk, (size_t n, const float *x, const float *dy, float *dx), (n, x, dy, dx));

#define GELU_DERIV(VF, EXP, LD, ST, i)                                                    \
    do {                                                                                  \
        const VF v = LD(x + (i));                                                         \
        VF e;                                                                             \
        EXP(e, GELU_M2K * (v + GELU_A * v * v * v));                                      \
        const VF s = 1.0f / (1.0f + e), du = GELU_2K * (1.0f + GELU_3A * v * v);          \
        ST(y + (i), v * s);                                                               \
        ST(d + (i), s + v * s * (1.0f - s) * du);                                         \
    } while (0)
DT_KERNEL_BODY void gelu_deriv_chunk_body(int narrow, size_t n, const float *x, float *y,
                                          float *d)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (narrow) {
            GELU_DERIV(vf8, VF8_EXP, vf8_ld, vf8_st, i);
            GELU_DERIV(vf8, VF8_EXP, vf8_ld, vf8_st, i + 8);
        } else {
            GELU_DERIV(v16f, V16_EXP, v16_ld, v16_st, i);
        }
    }
    for (; i < n; i++) {
        const float v = x[i];
        const float s = 1.0f / (1.0f + fast_expf(GELU_M2K * (v + GELU_A * v * v * v)));
        const float du = GELU_2K * (1.0f + GELU_3A * v * v);
        y[i] = v * s;
        d[i] = s + v * s * (1.0f - s) * du;
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(gelu_deriv_chunk, (size_t n, const float *x, float *y, float *d), (n, x, y, d));

/* ---- the bias of the product before it added on the way in ----------------
 * y = gelu(x + b) over rows of F features, and the backward's one pass, y
 * again and dy *= gelu'(x + b): the product writes x with no bias (no pass of
 * bias rows before it, no reading them back as its C operand), and the
 * pre-activation x + b is formed again where it is needed. Each row runs as
 * the chunks above do: sixteen floats at a time in one or two vectors, the
 * row's tail scalar. */
#define GELU_FWD_B(VF, EXP, LD, ST, c)                                                    \
    do {                                                                                  \
        const VF v = LD(xr + (c)) + LD(b + (c));                                          \
        VF e;                                                                             \
        EXP(e, GELU_M2K * (v + GELU_A * v * v * v));                                      \
        ST(yr + (c), v * (1.0f / (1.0f + e)));                                            \
    } while (0)
DT_KERNEL_BODY void gelu_bias_fwd_rows_body(int narrow, size_t rows, int F, const float *x,
                                            const float *b, float *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)F;
        float *yr = y + r * (size_t)F;
        int c = 0;
        for (; c + 16 <= F; c += 16) {
            if (narrow) {
                GELU_FWD_B(vf8, VF8_EXP, vf8_ld, vf8_st, c);
                GELU_FWD_B(vf8, VF8_EXP, vf8_ld, vf8_st, c + 8);
            } else {
                GELU_FWD_B(v16f, V16_EXP, v16_ld, v16_st, c);
            }
        }
        for (; c < F; c++) {
            const float v = xr[c] + b[c];
            yr[c] = v * (1.0f / (1.0f + fast_expf(GELU_M2K * (v + GELU_A * v * v * v))));
        }
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(gelu_bias_fwd_rows,
                              (size_t rows, int F, const float *x, const float *b, float *y),
                              (rows, F, x, b, y));

#define GELU_BWD_B(VF, EXP, LD, ST, c)                                                    \
    do {                                                                                  \
        const VF v = LD(xr + (c)) + LD(b + (c));                                          \
        VF e;                                                                             \
        EXP(e, GELU_M2K * (v + GELU_A * v * v * v));                                      \
        const VF s = 1.0f / (1.0f + e), du = GELU_2K * (1.0f + GELU_3A * v * v);          \
        ST(yr + (c), v * s);                                                              \
        ST(dr + (c), LD(dr + (c)) * (s + v * s * (1.0f - s) * du));                       \
    } while (0)
DT_KERNEL_BODY void gelu_bias_bwd_rows_body(int narrow, size_t rows, int F, const float *x,
                                            const float *b, float *y, float *dy)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * (size_t)F;
        float *yr = y + r * (size_t)F, *dr = dy + r * (size_t)F;
        int c = 0;
        for (; c + 16 <= F; c += 16) {
            if (narrow) {
                GELU_BWD_B(vf8, VF8_EXP, vf8_ld, vf8_st, c);
                GELU_BWD_B(vf8, VF8_EXP, vf8_ld, vf8_st, c + 8);
            } else {
                GELU_BWD_B(v16f, V16_EXP, v16_ld, v16_st, c);
            }
        }
        for (; c < F; c++) {
            const float v = xr[c] + b[c];
            const float s = 1.0f / (1.0f + fast_expf(GELU_M2K * (v + GELU_A * v * v * v)));
            const float du = GELU_2K * (1.0f + GELU_3A * v * v);
            yr[c] = v * s;
            dr[c] = dr[c] * (s + v * s * (1.0f - s) * du);
        }
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(gelu_bias_bwd_rows,
                              (size_t rows, int F, const float *x, const float *b, float *y,
                               float *dy),
                              (rows, F, x, b, y, dy));

/* Rows in blocks of about DT_PAR_CHUNK floats, one block a task. */
#define GELU_ROW_BLOCKS(N, F, r0, nr, stmt)                                               \
    do {                                                                                  \
        const size_t rb_ = DT_PAR_CHUNK / (size_t)(F) ? DT_PAR_CHUNK / (size_t)(F) : 1;   \
        const size_t c_ = ((size_t)(N) + rb_ - 1) / rb_;                                  \
        _Pragma("omp parallel for if (c_ > 1) schedule(static)")                          \
        for (size_t k_ = 0; k_ < c_; k_++) {                                              \
            const size_t r0 = k_ * rb_;                                                   \
            const size_t nr = (size_t)(N) - r0 < rb_ ? (size_t)(N) - r0 : rb_;            \
            stmt;                                                                         \
        }                                                                                 \
    } while (0)

void gelu_bias_forward(int N, int F, const float *x, const float *b, float *y)
{
    GELU_ROW_BLOCKS(N, F, r0, nr,
                    DT_KERNEL(gelu_bias_fwd_rows)(nr, F, x + r0 * F, b, y + r0 * F));
}

void gelu_bias_backward(int N, int F, const float *x, const float *b, float *y, float *dy)
{
    GELU_ROW_BLOCKS(N, F, r0, nr,
                    DT_KERNEL(gelu_bias_bwd_rows)(nr, F, x + r0 * F, b, y + r0 * F,
                                                  dy + r0 * F));
}

DT_KERNEL_BODY void mul_chunk_body(size_t n, const float *a, float *b)
{
    size_t i = 0;
#pragma omp simd
    for (i = 0; i < (n & ~(size_t)15); i++)
        b[i] *= a[i];
    i = n & ~(size_t)15;
    for (; i < n; i++)
        b[i] *= a[i];
}
DT_KERNEL_VARIANTS(mul_chunk, (size_t n, const float *a, float *b), (n, a, b));

void gelu_forward_deriv(size_t n, const float *x, float *y, float *d)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(gelu_deriv_chunk)(len, x + i0, y + i0, d + i0));
}

void gelu_backward_deriv(size_t n, const float *d, float *dy)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(mul_chunk)(len, d + i0, dy + i0));
}

void gelu_forward(size_t n, const float *x, float *y)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(gelu_fwd_chunk)(len, x + i0, y + i0));
}

void gelu_backward(size_t n, const float *x, const float *dy, float *dx)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(gelu_bwd_chunk)(len, x + i0, dy + i0, dx + i0));
}

/* ---- bf16 (compute.precision = bf16) ----------------------------------------
 * The pre-activation is kept as its bf16 rounding and the GELU output feeds
 * a bf16 product, so each pass below reads and writes bf16 directly instead
 * of widening into a float buffer, computing, and rounding again in three
 * passes over (N, 4C). Each runs its chunk through gelu_fwd_chunk /
 * gelu_bwd_chunk in spans of GELU_SPAN floats on the stack: the same
 * elements take the vector or the scalar path as in the float functions, so
 * the results are theirs bit for bit. */
#define GELU_SPAN 256 /* a multiple of 16 */

DT_KERNEL_BODY void widen_span_body(size_t n, const dt_bf16 *x, float *y)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)x[i] << 16;
        memcpy(&y[i], &u, sizeof u);
    }
}
DT_KERNEL_VARIANTS(widen_span, (size_t n, const dt_bf16 *x, float *y), (n, x, y));

DT_KERNEL_BODY void round_span_body(size_t n, const float *x, dt_bf16 *y)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = bf16_round(x[i]);
}
DT_KERNEL_VARIANTS(round_span, (size_t n, const float *x, dt_bf16 *y), (n, x, y));

static void gelu_fwd16_chunk(size_t n, const float *x, dt_bf16 *x16, dt_bf16 *y16)
{
    float t[GELU_SPAN];
    for (size_t j = 0; j < n; j += GELU_SPAN) {
        const size_t m = n - j < GELU_SPAN ? n - j : GELU_SPAN;
        if (x)
            DT_KERNEL(round_span)(m, x + j, x16 + j);
        DT_KERNEL(widen_span)(m, x16 + j, t);
        DT_KERNEL(gelu_fwd_chunk)(m, t, t);
        DT_KERNEL(round_span)(m, t, y16 + j);
    }
}

static void gelu_bwd16_chunk(size_t n, const dt_bf16 *x16, const float *dy, float *dx,
                             dt_bf16 *dx16)
{
    float t[GELU_SPAN];
    for (size_t j = 0; j < n; j += GELU_SPAN) {
        const size_t m = n - j < GELU_SPAN ? n - j : GELU_SPAN;
        DT_KERNEL(widen_span)(m, x16 + j, t);
        DT_KERNEL(gelu_bwd_chunk)(m, t, dy + j, dx + j);
        if (dx16)
            DT_KERNEL(round_span)(m, dx + j, dx16 + j);
    }
}

void gelu_forward_bf16(size_t n, const float *x, dt_bf16 *x16, dt_bf16 *y16)
{
    DT_PARALLEL_CHUNKS(n, i0, len,
                       gelu_fwd16_chunk(len, x ? x + i0 : NULL, x16 + i0, y16 + i0));
}

void gelu_backward_bf16(size_t n, const dt_bf16 *x16, const float *dy, float *dx,
                        dt_bf16 *dx16)
{
    DT_PARALLEL_CHUNKS(n, i0, len,
                       gelu_bwd16_chunk(len, x16 + i0, dy + i0, dx + i0, dx16 ? dx16 + i0 : NULL));
}
