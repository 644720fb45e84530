/* CUDA_CHECK: every CUDA runtime call goes through it. A failure records
 * "file:line: call: cudaGetErrorString" with dt_err_set() and returns -1 from
 * the calling function, so the caller (the CUDA backend, backend/cuda.c) ends
 * the run with the message on every rank. Only for .cu files. */
#ifndef DT_NN_CUDA_CHECK_H
#define DT_NN_CUDA_CHECK_H

#include <cuda_runtime_api.h>

extern "C" int dt_err_set(const char *fmt, ...);

#define CUDA_CHECK(call)                                                                 \
    do {                                                                                 \
        const cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess)                                                           \
            return dt_err_set("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call,           \
                              cudaGetErrorString(e_), cudaGetErrorName(e_));             \
    } while (0)

/* Threads per block and the grid that covers n elements (grid-stride loops
 * cover the rest when n exceeds the grid's limit). */
#define DT_CUDA_THREADS 256
static inline unsigned dt_cuda_blocks(size_t n)
{
    const size_t b = (n + DT_CUDA_THREADS - 1) / DT_CUDA_THREADS;
    return (unsigned)(b == 0 ? 1 : b > 65535u * 16u ? 65535u * 16u : b);
}

/* The index loop of every __global__ wrapper: thread t takes t, t + grid, ... */
#define GRID_STRIDE(i, n)                                                                \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (size_t)gridDim.x * blockDim.x)

/* kernel over n elements (its first argument) on stream, with the launch checked */
#define DT_LAUNCH(kernel, n, stream, ...)                                                \
    do {                                                                                 \
        kernel<<<dt_cuda_blocks(n), DT_CUDA_THREADS, 0, (cudaStream_t)(stream)>>>(n,     \
                                                                       __VA_ARGS__);     \
        CUDA_CHECK(cudaGetLastError());                                                  \
    } while (0)

#endif
