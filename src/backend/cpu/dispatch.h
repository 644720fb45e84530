/* The CPU backend's kernel table: what runs at the ISA level in force.
 *
 * Chosen once per process from core/isa.h's level (the CPU's, or below it
 * under DTRAIN_MAX_CPU_ISA): the activation layout oneDNN's convolutions run
 * fast on (16-channel blocks on AVX-512, 8-channel blocks on AVX2 and below),
 * the variant of dtrain's own vector kernels (core/simd.h: every kernel family
 * - GroupNorm, pooling, element-wise, GELU, LayerNorm, softmax and
 * cross-entropy, attention, the optimizer steps - indexes its variants by it),
 * the attention path, the library of each fp32 matrix product, and the caps
 * handed to oneDNN and OpenBLAS. The run's banner and its record say what was
 * chosen. */
#ifndef DT_BACKEND_CPU_DISPATCH_H
#define DT_BACKEND_CPU_DISPATCH_H

#include <stddef.h>

#include "core/isa.h"

typedef struct dt_cpu_dispatch {
    dt_isa cpu;            /* what the CPU has */
    dt_isa level;          /* in force */
    int cblock;            /* oneDNN's activation block: 16 or 8 channels */
    int vec;               /* own kernels' variant: 0 baseline, 1 AVX2+FMA, 2 AVX-512 */
    const char *vec_name;  /* "avx512", "avx2+fma", "sse2" */
    const char *attention; /* the fp32 attention's products */
    int sgemm_ta_blas;     /* backend/cpu/sgemm.c: OpenBLAS for op(A) = A^T on one thread */
} dt_cpu_dispatch;

const dt_cpu_dispatch *cpu_dispatch(void);

/* One line: the level (and cap), oneDNN's ISA and layout, the attention, the
 * OpenBLAS kernel set, e.g. "avx2 (cap DTRAIN_MAX_CPU_ISA=avx2 on an
 * avx512_core_amx CPU); own kernels avx2+fma; conv oneDNN avx2 on 8-channel
 * blocks; attention avx2+fma tiles; sgemm oneDNN, A^T on one thread OpenBLAS;
 * OpenBLAS Haswell". */
void cpu_dispatch_describe(char *out, size_t len);

#endif
