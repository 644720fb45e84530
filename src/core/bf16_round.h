/* One float rounded to bf16, the bit pattern's top half: the rounding every
 * bf16 copy is made with (backend/cpu/gemm_bf16.c's conversions, the ReLU that
 * writes its output's bf16 copy in backend/cpu/activation.c, the CUDA backend's
 * bf16 GEMM operands in nn/cuda/bf16.cu), so that they agree bit for bit.
 *
 * Round to nearest even on the bit pattern: adding 0x7fff plus the lowest
 * kept bit carries into the kept half exactly when the dropped half is above
 * one half ulp, or equal to it with an odd kept half. NaNs keep a quiet bit
 * so that rounding cannot turn one into infinity. Branch-free, so that the
 * loops that call it vectorize: a conversion costs a pass over memory, no
 * more. */
#ifndef DT_CORE_BF16_ROUND_H
#define DT_CORE_BF16_ROUND_H

#include <stdint.h>
#include <string.h>

#include "core/hd.h"

static inline DT_HD uint16_t bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

#endif
