/* GELU, tanh approximation (GPT-2's; PyTorch's approximate='tanh'), through
 * the identity (1 + tanh(u)) / 2 = sigmoid(2u):
 *   gelu(x) = x s, s = 1 / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 *   gelu'(x) = s + x s (1 - s) 2 u'(x),  u'(x) = sqrt(2/pi) (1 + 3 0.044715 x^2),
 * one vectorised 2^t per element (backend/cpu/fast_exp.h, core/exp2f.h)
 * instead of a libm tanhf: exp(-2u) = 2^t, t = x (T1 + T3 x^2) with log2(e)
 * folded into the constants (core/gelu_consts.h), and 2u' = D1 + D3 x^2
 * from the same x^2. Against exp with the constants outside, 2^t leaves a
 * third fewer operations on the multiply ports (GPT baby, one thread, Xeon
 * SPR under avx2: GELU 30 % faster, the step 2 to 3 % faster), and it is as
 * accurate: within 8.1e-7 of the float64 tanh formula relative to
 * max(|gelu(x)|, 1e-3) over [-12, 12], where exp gave 1.1e-6. */
#include "nn/transformer.h"

#include "core/simd.h"
#include "core/bf16_round.h"
#include "core/gelu_consts.h"
#include "backend/cpu/fast_exp.h"

#include <string.h>

/* Each kernel is one element step (an OP below, a statement macro over a
 * vector type VF with its exp, load and store) run along a span by the
 * level's runner: sixteen floats at a time, as one v16f (AVX-512) or two vf8
 * (AVX2, baseline), then the tail one float at a time through the same OP on
 * float, so every kernel computes s = sigmoid(2u) and gelu(x) = x s with the
 * same operations. GELU_VARIANTS compiles a kernel once per level with its
 * runner: the AVX2 and AVX-512 ones clamp 2^t's argument by max and min
 * (backend/cpu/fast_exp.h; the same bits as the selects) and contract a * b + c
 * into FMA (a quarter of the operations fewer, a third of the time), so they
 * round alike and the baseline in its own way; within a level every kernel
 * computes gelu(x) the same way, bit for bit. */
#define GELU_S_EXP(y, x) ((y) = dt_exp2f(x))
#define GELU_S_LD(p) (*(p))
#define GELU_S_ST(p, v) (*(p) = (v))
#define GELU_RUN_(n, OP, STEP16)                                                          \
    do {                                                                                  \
        size_t i = 0;                                                                     \
        for (; i + 16 <= (n); i += 16) {                                                  \
            STEP16;                                                                       \
        }                                                                                 \
        for (; i < (n); i++)                                                              \
            OP(float, GELU_S_EXP, GELU_S_LD, GELU_S_ST, i);                               \
    } while (0)
#define GELU_RUN_V4(n, OP) GELU_RUN_(n, OP, OP(v16f, V16_EXP2_AVX512, v16_ld, v16_st, i))
#define GELU_RUN_V3(n, OP)                                                                \
    GELU_RUN_(n, OP, OP(vf8, VF8_EXP2_AVX2, vf8_ld, vf8_st, i);                           \
              OP(vf8, VF8_EXP2_AVX2, vf8_ld, vf8_st, i + 8))
#define GELU_RUN_V1(n, OP)                                                                \
    GELU_RUN_(n, OP, OP(vf8, VF8_EXP2, vf8_ld, vf8_st, i); OP(vf8, VF8_EXP2, vf8_ld, vf8_st, i + 8))

/* NAME_v4, _v3, _v1 and the table NAME_isa (core/simd.h) from BODY(RUN), the
 * function body written against a runner */
#define GELU_VARIANTS(name, params, BODY)                                                 \
    DT_TARGET_V4 DT_FP_CONTRACT static void name##_v4 params BODY(GELU_RUN_V4)            \
    DT_TARGET_V3 DT_FP_CONTRACT static void name##_v3 params BODY(GELU_RUN_V3)            \
    static void name##_v1 params BODY(GELU_RUN_V1)                                        \
    static void (*const name##_isa[3]) params = { name##_v1, name##_v3, name##_v4 }

/* v = the pre-activation at i: x, or x + b (the product's bias added on the
 * way in); then s and, where the backward needs it, gelu'(v) = s + v s (1 - s) du */
#define GELU_V_X(LD, i) LD(x + (i))
#define GELU_V_XB(LD, i) (LD(x + (i)) + LD(b + (i)))
#define GELU_SIG(VF, EXP, V, LD, i)                                                       \
    const VF v = V(LD, i), v2 = v * v;                                                    \
    VF e;                                                                                 \
    EXP(e, v * (DT_GELU_T3 * v2 + DT_GELU_T1));                                           \
    const VF s = 1.0f / (1.0f + e)
#define GELU_DU(v2) (DT_GELU_D3 * (v2) + DT_GELU_D1)

/* y = gelu(v) */
#define GELU_FWD_(VF, EXP, LD, ST, i, V)                                                  \
    do {                                                                                  \
        GELU_SIG(VF, EXP, V, LD, i);                                                      \
        ST(y + (i), v * s);                                                               \
    } while (0)
#define GELU_FWD(VF, EXP, LD, ST, i) GELU_FWD_(VF, EXP, LD, ST, i, GELU_V_X)
#define GELU_FWD_B(VF, EXP, LD, ST, i) GELU_FWD_(VF, EXP, LD, ST, i, GELU_V_XB)
/* dx = dy gelu'(x) */
#define GELU_BWD(VF, EXP, LD, ST, i)                                                      \
    do {                                                                                  \
        GELU_SIG(VF, EXP, GELU_V_X, LD, i);                                               \
        ST(dx + (i), LD(dy + (i)) * (v * s * (1.0f - s) * GELU_DU(v2) + s));              \
    } while (0)
/* y = gelu(x), d = gelu'(x) */
#define GELU_DERIV(VF, EXP, LD, ST, i)                                                    \
    do {                                                                                  \
        GELU_SIG(VF, EXP, GELU_V_X, LD, i);                                               \
        ST(y + (i), v * s);                                                               \
        ST(d + (i), v * s * (1.0f - s) * GELU_DU(v2) + s);                                \
    } while (0)
/* y = gelu(x + b), dy *= gelu'(x + b) */
#define GELU_BWD_B(VF, EXP, LD, ST, i)                                                    \
    do {                                                                                  \
        GELU_SIG(VF, EXP, GELU_V_XB, LD, i);                                              \
        ST(y + (i), v * s);                                                               \
        ST(dy + (i), LD(dy + (i)) * (v * s * (1.0f - s) * GELU_DU(v2) + s));              \
    } while (0)

#define GELU_FWD_CHUNK(RUN) { RUN(n, GELU_FWD); }
GELU_VARIANTS(gelu_fwd_chunk, (size_t n, const float *x, float *y), GELU_FWD_CHUNK);
#define GELU_BWD_CHUNK(RUN) { RUN(n, GELU_BWD); }
GELU_VARIANTS(gelu_bwd_chunk, (size_t n, const float *x, const float *dy, float *dx),
              GELU_BWD_CHUNK);
#define GELU_DERIV_CHUNK(RUN) { RUN(n, GELU_DERIV); }
GELU_VARIANTS(gelu_deriv_chunk, (size_t n, const float *x, float *y, float *d), GELU_DERIV_CHUNK);

/* ---- the bias of the product before it added on the way in ----------------
 * y = gelu(x + b) over rows of F features, and the backward's one pass, y
 * again and dy *= gelu'(x + b): the product writes x with no bias (no pass of
 * bias rows before it, no reading them back as its C operand), and the
 * pre-activation x + b is formed again where it is needed. Each row is a span
 * as above. */
#define GELU_BIAS_FWD_ROWS(RUN)                                                           \
    {                                                                                     \
        for (size_t r = 0; r < rows; r++) {                                               \
            const float *x = xs + r * (size_t)F;                                          \
            float *y = ys + r * (size_t)F;                                                \
            RUN((size_t)F, GELU_FWD_B);                                                   \
        }                                                                                 \
    }
GELU_VARIANTS(gelu_bias_fwd_rows,
              (size_t rows, int F, const float *xs, const float *b, float *ys),
              GELU_BIAS_FWD_ROWS);
#define GELU_BIAS_BWD_ROWS(RUN)                                                           \
    {                                                                                     \
        for (size_t r = 0; r < rows; r++) {                                               \
            const float *x = xs + r * (size_t)F;                                          \
            float *y = ys + r * (size_t)F, *dy = dys + r * (size_t)F;                     \
            RUN((size_t)F, GELU_BWD_B);                                                   \
        }                                                                                 \
    }
GELU_VARIANTS(gelu_bias_bwd_rows,
              (size_t rows, int F, const float *xs, const float *b, float *ys, float *dys),
              GELU_BIAS_BWD_ROWS);

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
