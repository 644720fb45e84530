/* Runtime dispatch on the CPU's instruction set for the engine's own hot loops.
 *
 * DT_CLONES makes GCC compile a function three times (AVX-512, AVX2, baseline
 * x86-64) and pick one at load time by the CPU it runs on (an ifunc), so one
 * binary is right on every node of a mixed cluster. oneDNN and OpenBLAS do
 * their own dispatch. v16f is sixteen floats: one AVX-512 register, two AVX2
 * or four SSE registers, whichever the clone targets. */
#ifndef DT_CORE_SIMD_H
#define DT_CORE_SIMD_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(DT_NO_CLONES)
#define DT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DT_CLONES
#endif

typedef float v16f __attribute__((vector_size(64), aligned(4)));

/* Macros rather than inline functions: a function returning a 64-byte vector
 * has a different ABI with and without AVX-512 (GCC's -Wpsabi). */
#define v16_splat(a) ((v16f){ 0 } + (float)(a))
#define v16_ld(p) (*(const v16f *)(p))
#define v16_st(p, v) (*(v16f *)(p) = (v))

#endif
