/* A vectorised exp for the transformer's hot loops (softmax, cross-entropy),
 * and 2^t for GELU (below). libm's expf and tanhf are calls GCC cannot vectorise
 * without -ffast-math, and at -O2 it does not vectorise a branch-free
 * scalar version either; so the polynomial is written once for sixteen
 * floats (core/simd.h's v16f, which the DT_CLONES targets compile to
 * AVX-512, AVX2 or SSE) and once for a scalar, with the same operations, for
 * the tails.
 *
 * exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two
 * for exactness, Cody and Waite), exp(r) by Cephes' degree-6 minimax
 * polynomial on |r| <= ln2 / 2: relative error about 2 ulp over the clamped
 * range [-87.3, 88.3] (below it returns ~1e-38 instead of 0; above, ~2e38
 * instead of inf). Rounding adds and removes 1.5 * 2^23, which needs the
 * default round-to-nearest mode and no -ffast-math. */
#ifndef DT_BACKEND_CPU_FAST_EXP_H
#define DT_BACKEND_CPU_FAST_EXP_H

#include <stdint.h>
#include <string.h>

#include "core/exp2f.h"
#include "core/simd.h"

#define FEXP_LO -87.3f
#define FEXP_HI 88.3f
#define FEXP_LOG2E 1.44269504088896341f
#define FEXP_ROUND 12582912.0f /* 1.5 * 2^23 */
#define FEXP_LN2_HI 0.693359375f
#define FEXP_LN2_LO -2.12194440e-4f
#define FEXP_P0 1.9875691500e-4f
#define FEXP_P1 1.3981999507e-3f
#define FEXP_P2 8.3334519073e-3f
#define FEXP_P3 4.1665795894e-2f
#define FEXP_P4 1.6666665459e-1f
#define FEXP_P5 5.0000001201e-1f

static inline float fast_expf(float x)
{
    x = x < FEXP_LO ? FEXP_LO : x;
    x = x > FEXP_HI ? FEXP_HI : x;
    const float n = (x * FEXP_LOG2E + FEXP_ROUND) - FEXP_ROUND;
    const float r = (x - n * FEXP_LN2_HI) - n * FEXP_LN2_LO;
    float p = FEXP_P0;
    p = p * r + FEXP_P1;
    p = p * r + FEXP_P2;
    p = p * r + FEXP_P3;
    p = p * r + FEXP_P4;
    p = p * r + FEXP_P5;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 127] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* y = exp(x) for a vector of floats (VF, its int twin VI; y an lvalue, x an
 * expression); a statement macro, not a function: see core/simd.h on the
 * vector ABI. V16_EXP: sixteen floats; VF8_EXP: eight. CLAMP(VF, VI, x_)
 * clamps x_ to [FEXP_LO, FEXP_HI] in place: in generic vector code as two
 * compares and two selects (FEXP_CLAMP_SEL), or in a kernel compiled for AVX2
 * or AVX-512 as one max and one min (VF8_EXP_AVX2, V16_EXP_AVX512: two
 * operations where the selects take six to ten on Intel's cores). Both keep
 * a NaN and give the same bits otherwise. */
#define FEXP_CLAMP_SEL_(VF, VI, x_, LO, HI)                                               \
    do {                                                                                  \
        const VF lo_v_ = (VF){ 0 } + (LO), hi_v_ = (VF){ 0 } + (HI);                      \
        const VI lo_ = (x_) < lo_v_, hi_ = (x_) > hi_v_;                                  \
        (x_) = (VF)(((VI)(x_) & ~lo_) | ((VI)lo_v_ & lo_));                               \
        (x_) = (VF)(((VI)(x_) & ~hi_) | ((VI)hi_v_ & hi_));                               \
    } while (0)
#define FEXP_CLAMP_SEL(VF, VI, x_) FEXP_CLAMP_SEL_(VF, VI, x_, FEXP_LO, FEXP_HI)
#define VEC_EXP_(VF, VI, y, x, CLAMP)                                                     \
    do {                                                                                  \
        VF x_ = (x);                                                                      \
        CLAMP(VF, VI, x_);                                                                \
        const VF n_ = (x_ * FEXP_LOG2E + FEXP_ROUND) - FEXP_ROUND;                        \
        const VF r_ = (x_ - n_ * FEXP_LN2_HI) - n_ * FEXP_LN2_LO;                         \
        VF p_ = (VF){ 0 } + FEXP_P0;                                                      \
        p_ = p_ * r_ + FEXP_P1;                                                           \
        p_ = p_ * r_ + FEXP_P2;                                                           \
        p_ = p_ * r_ + FEXP_P3;                                                           \
        p_ = p_ * r_ + FEXP_P4;                                                           \
        p_ = p_ * r_ + FEXP_P5;                                                           \
        p_ = p_ * r_ * r_ + r_ + 1.0f;                                                    \
        const VI e_ = (__builtin_convertvector(n_, VI) + 127) << 23;                      \
        (y) = p_ * (VF)e_;                                                                \
    } while (0)
#define VEC_EXP(VF, VI, y, x) VEC_EXP_(VF, VI, y, x, FEXP_CLAMP_SEL)
#define V16_EXP(y, x) VEC_EXP(v16f, v16i, y, x)
#define VF8_EXP(y, x) VEC_EXP(vf8, vi8, y, x)

/* y = 2^t for a vector (VF, its int and unsigned int twins VI and VU), as
 * core/exp2f.h's dt_exp2f computes it for one float (an argument already in
 * base 2). On Intel's and AMD's cores its three additions run beside the
 * multiplications, which leaves 8 of exp's 15 multiply-port operations. */
typedef unsigned vu8_fexp __attribute__((vector_size(32), aligned(4)));
typedef unsigned v16u_fexp __attribute__((vector_size(64), aligned(4)));
#define VEC_EXP2_(VF, VI, VU, y, t, CLAMP)                                                \
    do {                                                                                  \
        VF t_ = (t);                                                                      \
        CLAMP(VF, VI, t_);                                                                \
        const VF tr_ = t_ + DT_EXP2_ROUND;                                                \
        const VF f_ = t_ - (tr_ - DT_EXP2_ROUND);                                         \
        VF p_ = (VF){ 0 } + DT_EXP2_Q5;                                                   \
        p_ = p_ * f_ + DT_EXP2_Q4;                                                        \
        p_ = p_ * f_ + DT_EXP2_Q3;                                                        \
        p_ = p_ * f_ + DT_EXP2_Q2;                                                        \
        p_ = p_ * f_ + DT_EXP2_Q1;                                                        \
        p_ = p_ * f_ + 1.0f;                                                              \
        (y) = (VF)((VU)p_ + ((VU)tr_ << 23));                                             \
    } while (0)
#define FEXP2_CLAMP_SEL(VF, VI, x_) FEXP_CLAMP_SEL_(VF, VI, x_, DT_EXP2_LO, DT_EXP2_HI)
#define V16_EXP2(y, t) VEC_EXP2_(v16f, v16i, v16u_fexp, y, t, FEXP2_CLAMP_SEL)
#define VF8_EXP2(y, t) VEC_EXP2_(vf8, vi8, vu8_fexp, y, t, FEXP2_CLAMP_SEL)

/* For the AVX2 (DT_TARGET_V3) and AVX-512 (DT_TARGET_V4) variants only: the
 * intrinsics need that target, so a body shared with the baseline variant
 * cannot use them. max(lo, x) keeps x where it is NaN, as the selects do. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(DT_NO_CLONES)
#include <immintrin.h>
#define FEXP_CLAMP_AVX2_(VF, VI, x_, LO, HI)                                              \
    ((x_) = (VF)_mm256_min_ps(_mm256_set1_ps(HI), _mm256_max_ps(_mm256_set1_ps(LO), (__m256)(x_))))
#define FEXP_CLAMP_AVX512_(VF, VI, x_, LO, HI)                                            \
    ((x_) = (VF)_mm512_min_ps(_mm512_set1_ps(HI), _mm512_max_ps(_mm512_set1_ps(LO), (__m512)(x_))))
#define FEXP_CLAMP_AVX2(VF, VI, x_) FEXP_CLAMP_AVX2_(VF, VI, x_, FEXP_LO, FEXP_HI)
#define FEXP_CLAMP_AVX512(VF, VI, x_) FEXP_CLAMP_AVX512_(VF, VI, x_, FEXP_LO, FEXP_HI)
#define FEXP2_CLAMP_AVX2(VF, VI, x_) FEXP_CLAMP_AVX2_(VF, VI, x_, DT_EXP2_LO, DT_EXP2_HI)
#define FEXP2_CLAMP_AVX512(VF, VI, x_) FEXP_CLAMP_AVX512_(VF, VI, x_, DT_EXP2_LO, DT_EXP2_HI)
#define VF8_EXP_AVX2(y, x) VEC_EXP_(vf8, vi8, y, x, FEXP_CLAMP_AVX2)
#define V16_EXP_AVX512(y, x) VEC_EXP_(v16f, v16i, y, x, FEXP_CLAMP_AVX512)
#define VF8_EXP2_AVX2(y, t) VEC_EXP2_(vf8, vi8, vu8_fexp, y, t, FEXP2_CLAMP_AVX2)
#define V16_EXP2_AVX512(y, t) VEC_EXP2_(v16f, v16i, v16u_fexp, y, t, FEXP2_CLAMP_AVX512)
#else
#define VF8_EXP_AVX2 VF8_EXP
#define V16_EXP_AVX512 V16_EXP
#define VF8_EXP2_AVX2 VF8_EXP2
#define V16_EXP2_AVX512 V16_EXP2
#endif

#endif
