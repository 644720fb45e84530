/* Checking macros for CUDA runtime and cuBLAS calls from C (the .cu files use
 * nn/cuda/check.h). A failure is a library failure: DT_FATAL prints the rank,
 * file:line, the call, the library's error string and a hint, and aborts the
 * job so no rank is left waiting. */
#ifndef DT_BACKEND_CUDA_CHECK_H
#define DT_BACKEND_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

#define CUDA_OK(call)                                                                    \
    do {                                                                                 \
        const cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess)                                                           \
            DT_FATAL("%s: %s (%s); hint: CUDA_VISIBLE_DEVICES and nvidia-smi show the "  \
                     "rank's GPU", #call, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
    } while (0)

#define CUBLAS_OK(call)                                                                  \
    do {                                                                                 \
        const cublasStatus_t s_ = (call);                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                 \
            DT_FATAL("%s: %s (%s)", #call, cublasGetStatusString(s_),                    \
                     cublasGetStatusName(s_));                                           \
    } while (0)

/* A kernel launcher of nn/cuda/kernels_cuda.h returned -1 with the CUDA error
 * (its own file:line) recorded by dt_err_set(). */
#define KERNEL_OK(call)                                                                  \
    do {                                                                                 \
        if ((call) != 0)                                                                 \
            DT_FATAL("%s: %s", #call, dt_err_msg());                                     \
    } while (0)

#endif
