/* Division by a run-time constant in 32 bits: n / d as a high multiply, an
 * add and a shift (the round-up method of Granlund and Montgomery, as
 * PyTorch's IntDivider and CUTLASS's FastDivmod do it), exact for every
 * n < 2^31 and 1 <= d < 2^31. The magic number is computed once on the host;
 * a kernel then spends ~4 instructions where a 64-bit division costs ~70
 * (a subroutine call on the device). DT_HD: the host test runs the same
 * code. */
#ifndef DT_CORE_DIVMOD_H
#define DT_CORE_DIVMOD_H

#include <stdint.h>

#include "core/hd.h"

typedef struct dt_divmod {
    uint32_t d, magic, shift;
} dt_divmod;

/* d in [1, 2^31) */
static inline dt_divmod divmod_make(uint32_t d)
{
    uint32_t shift = 0;
    while ((1ull << shift) < d)
        shift++;
    const uint64_t magic = ((1ull << 32) * ((1ull << shift) - d)) / d + 1;
    const dt_divmod m = { d, (uint32_t)magic, shift };
    return m;
}

/* n / d for n < 2^31 */
static inline DT_HD uint32_t divmod_div(dt_divmod m, uint32_t n)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, m.magic);
#else
    const uint32_t t = (uint32_t)(((uint64_t)n * m.magic) >> 32);
#endif
    return (t + n) >> m.shift; /* t <= n < 2^31: no overflow */
}

#endif
