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
typedef int v16i __attribute__((vector_size(64), aligned(4))); /* comparison masks: -1 or 0 */

/* Macros rather than inline functions: a function returning a 64-byte vector
 * has a different ABI with and without AVX-512 (GCC's -Wpsabi). */
#define v16_splat(a) ((v16f){ 0 } + (float)(a))
#define v16_ld(p) (*(const v16f *)(p))
#define v16_st(p, v) (*(v16f *)(p) = (v))

/* Element-wise loops run over chunks of this many floats, in parallel (the
 * compute.threads of OpenMP) when there is more than one: small enough to
 * share a stage-1 activation of a ResNet between two cores, large enough that
 * a chunk outweighs the cost of handing it out. The chunking does not change
 * any result: each element is computed the same way whatever thread runs it. */
#define DT_PAR_CHUNK ((size_t)32768)

/* stmt runs with i0 (first element) and len (count) bound, for each chunk of
 * [0, n). */
#define DT_PARALLEL_CHUNKS(n, i0, len, stmt)                                           \
    do {                                                                               \
        const size_t n_ = (n), c_ = (n_ + DT_PAR_CHUNK - 1) / DT_PAR_CHUNK;            \
        _Pragma("omp parallel for if (c_ > 1) schedule(static)")                       \
        for (size_t k_ = 0; k_ < c_; k_++) {                                           \
            const size_t i0 = k_ * DT_PAR_CHUNK;                                       \
            const size_t len = n_ - i0 < DT_PAR_CHUNK ? n_ - i0 : DT_PAR_CHUNK;        \
            stmt;                                                                      \
        }                                                                              \
    } while (0)

#endif
