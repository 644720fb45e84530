/* DT_HD marks a function that nvcc compiles for both host and device; a C
 * compiler sees a plain function. Per-element kernel bodies are written once
 * as static inline DT_HD functions, so the CUDA kernels and the host test
 * (tests/test_cuda_host.c, in every build) run the same code. */
#ifndef DT_CORE_HD_H
#define DT_CORE_HD_H

#ifdef __CUDACC__
#define DT_HD __host__ __device__
#else
#define DT_HD
#endif

/* A product rounded on its own where the next operation adds it: nvcc fuses
 * a * b + c into one FMA by default (-fmad=true), the host compiler under
 * -std=c11 does not, so a body that must give the host's bits on the device
 * writes the product that feeds an add as DT_FMUL (float) or DT_DMUL (double). */
#ifdef __CUDA_ARCH__
#define DT_FMUL(a, b) __fmul_rn((a), (b))
#define DT_DMUL(a, b) __dmul_rn((a), (b))
#else
#define DT_FMUL(a, b) ((a) * (b))
#define DT_DMUL(a, b) ((a) * (b))
#endif

/* DT_UNROLL before a loop asks nvcc to unroll it whole where its trip count
 * is known after inlining, so a small per-thread array indexed by the loop
 * stays in registers; nothing for a host compiler. */
#ifdef __CUDA_ARCH__
#define DT_UNROLL _Pragma("unroll")
#else
#define DT_UNROLL
#endif

#endif
