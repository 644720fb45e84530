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

#endif
