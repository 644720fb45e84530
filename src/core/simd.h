/* Vector types and the per-ISA variants of the engine's own hot loops.
 *
 * A kernel's body is written once, as NAME_body (DT_KERNEL_BODY: always
 * inlined); DT_KERNEL_VARIANTS compiles it three times, for AVX-512
 * (x86-64-v4), AVX2 + FMA (x86-64-v3) and baseline x86-64, into a table
 * NAME_isa that DT_KERNEL(NAME) indexes by the level in force (core/isa.h:
 * the CPU's, or below it under DTRAIN_MAX_CPU_ISA). So one binary is right
 * on every node of a mixed cluster, and every variant runs on any machine
 * that has it. The variants compute the same bits: ISO C mode (-std=c11)
 * contracts no a * b + c into an FMA unless a kernel asks
 * (DT_KERNEL_VARIANTS_FMA). v16f is sixteen floats, one AVX-512 register;
 * without AVX-512 a 64-byte vector has no register and GCC keeps it in
 * memory, every operation through the stack, so a kernel that matters there
 * runs vf8 (eight floats, one AVX2 register) in its narrow variants
 * (DT_KERNEL_VARIANTS_NARROW). */
#ifndef DT_CORE_SIMD_H
#define DT_CORE_SIMD_H

#include "core/isa.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DT_NO_CLONES)
#define DT_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#define DT_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#define DT_FP_CONTRACT __attribute__((optimize("fp-contract=fast")))
#else
#define DT_TARGET_V4
#define DT_TARGET_V3
#define DT_FP_CONTRACT
#endif

#define DT_KERNEL_BODY static inline __attribute__((always_inline))

/* ret (*NAME_isa[3]) params: baseline, AVX2 + FMA, AVX-512; params and args
 * are parenthesised lists. */
#define DT_KERNEL_VARIANTS_(ret, name, params, args, ret_kw, attr)                      \
    DT_TARGET_V4 attr static ret name##_v4 params { ret_kw name##_body args; }          \
    DT_TARGET_V3 attr static ret name##_v3 params { ret_kw name##_body args; }          \
    static ret name##_v1 params { ret_kw name##_body args; }                            \
    static ret(*const name##_isa[3]) params = { name##_v1, name##_v3, name##_v4 }
#define DT_KERNEL_VARIANTS(name, params, args)                                          \
    DT_KERNEL_VARIANTS_(void, name, params, args, , )
#define DT_KERNEL_VARIANTS_RET(ret, name, params, args)                                 \
    DT_KERNEL_VARIANTS_(ret, name, params, args, return, )
/* the same with a * b + c contracted into FMA on the AVX2 and AVX-512
 * variants (another rounding than the baseline's) */
#define DT_KERNEL_VARIANTS_FMA(name, params, args)                                      \
    DT_KERNEL_VARIANTS_(void, name, params, args, , DT_FP_CONTRACT)
#define DT_KERNEL_VARIANTS_FMA_RET(ret, name, params, args)                             \
    DT_KERNEL_VARIANTS_(ret, name, params, args, return, DT_FP_CONTRACT)

/* The same, for a body whose first parameter says how wide its vectors may be:
 * 0 on AVX-512 (v16f), 1 on AVX2 and baseline (vf8: see above). */
#define DT_KERNEL_VARIANTS_NARROW_(name, params, args, attr)                            \
    DT_TARGET_V4 attr static void name##_v4 params { name##_body(0, DT_UNPAREN args); } \
    DT_TARGET_V3 attr static void name##_v3 params { name##_body(1, DT_UNPAREN args); } \
    static void name##_v1 params { name##_body(1, DT_UNPAREN args); }                   \
    static void(*const name##_isa[3]) params = { name##_v1, name##_v3, name##_v4 }
#define DT_KERNEL_VARIANTS_NARROW_FMA_RET(ret, name, params, args)                      \
    DT_TARGET_V4 DT_FP_CONTRACT static ret name##_v4 params                             \
    { return name##_body(0, DT_UNPAREN args); }                                         \
    DT_TARGET_V3 DT_FP_CONTRACT static ret name##_v3 params                             \
    { return name##_body(1, DT_UNPAREN args); }                                         \
    static ret name##_v1 params { return name##_body(1, DT_UNPAREN args); }             \
    static ret(*const name##_isa[3]) params = { name##_v1, name##_v3, name##_v4 }
#define DT_KERNEL_VARIANTS_NARROW(name, params, args)                                   \
    DT_KERNEL_VARIANTS_NARROW_(name, params, args, )
#define DT_KERNEL_VARIANTS_NARROW_FMA(name, params, args)                               \
    DT_KERNEL_VARIANTS_NARROW_(name, params, args, DT_FP_CONTRACT)
#define DT_UNPAREN(...) __VA_ARGS__

/* the variant of NAME for the level in force */
#define DT_KERNEL(name) DT_KERNEL_(name)
#define DT_KERNEL_(name) (name##_isa[isa_vec()])

typedef float v16f __attribute__((vector_size(64), aligned(4)));
typedef int v16i __attribute__((vector_size(64), aligned(4))); /* comparison masks: -1 or 0 */
typedef float vf8 __attribute__((vector_size(32), aligned(4)));
typedef int vi8 __attribute__((vector_size(32), aligned(4)));

/* Macros rather than inline functions: a function returning a 64-byte vector
 * has a different ABI with and without AVX-512 (GCC's -Wpsabi). */
#define v16_splat(a) ((v16f){ 0 } + (float)(a))
#define v16_ld(p) (*(const v16f *)(p))
#define v16_st(p, v) (*(v16f *)(p) = (v))
#define vf8_ld(p) (*(const vf8 *)(p))
#define vf8_st(p, v) (*(vf8 *)(p) = (v))

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
