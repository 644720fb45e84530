/* 2^t in float, for an argument already in base 2 (GELU folds log2(e) into
 * its own constants, one multiplication fewer than exp): n = round(t) by
 * adding and removing 1.5 * 2^23, f = t - n in [-1/2, 1/2] exactly, 2^f by a
 * degree-5 polynomial fitted for relative error on that interval (at most
 * 1.9e-7 with its float rounding), and 2^n added to the exponent field of the
 * result as an integer: n << 23 is the low bits of t + 1.5 * 2^23 shifted, so
 * neither a conversion nor a multiplication is needed. t is clamped to
 * [-125, 125], where the exponent field stays normal; a NaN goes through as
 * some NaN or number (GELU multiplies by x, which keeps the NaN). Needs the
 * default round-to-nearest mode and no -ffast-math.
 *
 * One definition for the CPU's scalar path (backend/cpu/fast_exp.h, whose
 * vector form uses the same constants) and the CUDA bodies (nn/cuda/gpt.h),
 * so the baseline CPU kernel and the device compute the same bits. */
#ifndef DT_CORE_EXP2F_H
#define DT_CORE_EXP2F_H

#include <stdint.h>
#include <string.h>

#include "core/hd.h"

#define DT_EXP2_LO -125.0f
#define DT_EXP2_HI 125.0f
#define DT_EXP2_ROUND 12582912.0f /* 1.5 * 2^23 */
#define DT_EXP2_Q1 0.693147004f
#define DT_EXP2_Q2 0.240222424f
#define DT_EXP2_Q3 0.0555073358f
#define DT_EXP2_Q4 0.00967151299f
#define DT_EXP2_Q5 0.00132647261f

static inline DT_HD float dt_exp2f(float t)
{
    t = t < DT_EXP2_LO ? DT_EXP2_LO : t;
    t = t > DT_EXP2_HI ? DT_EXP2_HI : t;
    const float tr = t + DT_EXP2_ROUND;
    const float f = t - (tr - DT_EXP2_ROUND);
    float p = DT_EXP2_Q5;
    p = DT_FMUL(p, f) + DT_EXP2_Q4;
    p = DT_FMUL(p, f) + DT_EXP2_Q3;
    p = DT_FMUL(p, f) + DT_EXP2_Q2;
    p = DT_FMUL(p, f) + DT_EXP2_Q1;
    p = DT_FMUL(p, f) + 1.0f;
    uint32_t pb, nb;
    memcpy(&pb, &p, sizeof pb);
    memcpy(&nb, &tr, sizeof nb);
    pb += nb << 23;
    memcpy(&p, &pb, sizeof p);
    return p;
}

#endif
