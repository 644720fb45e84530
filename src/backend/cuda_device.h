/* The GPU a rank drives, its streams, pinned host memory and the flat
 * vectors' device copies: what the trainer needs around the CUDA backend
 * (backend/cuda.c). Built only --with-cuda (HAVE_CUDA). */
#ifndef DT_BACKEND_CUDA_DEVICE_H
#define DT_BACKEND_CUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Number of GPUs the CUDA runtime sees (0 when none is visible or there is no
 * driver; the reason then in *why, e.g. "no CUDA-capable device is detected"). */
int cuda_device_count(const char **why);
/* Selects device dev for this process and creates its compute stream, copy
 * stream and cuBLAS handle, and loads cuDNN where the node has it
 * (backend/cudnn.h); name gets the GPU's name and "cuDNN 9.x.y" or "no
 * cuDNN". DTRAIN_CUDA_ATTENTION = tiles (unset: the same) or rows picks the
 * GPT attention's kernels (nn/cuda/attention.cu; rows: name ends in
 * "attention-rows"), for measuring one against the other. Returns 0, or -1
 * after dt_err_set(). */
int cuda_device_open(int dev, char *name, size_t len);
void cuda_device_close(void);
/* compute.tf32: the cuBLAS handle's fp32 GEMMs on TF32 tensor cores (1) or
 * in full fp32 (0, the default after cuda_device_open) */
void cuda_device_tf32(int on);
/* NULL when cuDNN runs the convolutions; else why not (the library not found,
 * DTRAIN_CUDNN=0, ...): they are lowered onto cuBLAS */
const char *cuda_device_cudnn(void);
/* The compute stream (a cudaStream_t) every kernel and GEMM runs on, and the
 * cuBLAS handle bound to it (a cublasHandle_t). */
void *cuda_stream(void);
/* Bytes of memory the open device has (0 before cuda_device_open). */
size_t cuda_device_memory(void);
void *cuda_cublas(void);
/* Waits for everything queued on the compute stream. */
void cuda_sync(void);

/* Device memory: cudaMalloc and cudaFree, counted (every allocation of
 * dtrain's goes through them: the backend's tensors and scratch, cuBLAS's
 * and cuDNN's workspaces, NCCL's staging); cuda_device_peak is the most
 * bytes held at once so far. Failures are fatal with the runtime's reason. */
void *cuda_device_malloc(size_t bytes);
void cuda_device_free(void *p);
size_t cuda_device_peak(void);

/* CUDA graphs of the compute stream (dt_backend's graph_* members):
 * cuda_graph_begin starts recording the stream's work (a call that may not
 * be recorded then fails, fatally, where it is made), cuda_graph_end stops
 * and returns it instantiated (a cudaGraphExec_t), or NULL after
 * dt_err_set() with the runtime's reason; cuda_graph_launch queues it on the
 * compute stream. cuda_graph_moved marks that scratch memory a record may
 * name was freed or moved (a new cuda_graph_epoch). */
void cuda_graph_begin(void);
void *cuda_graph_end(void);
void cuda_graph_launch(void *graph);
void cuda_graph_free(void *graph);
uint64_t cuda_graph_epoch(void);
void cuda_graph_moved(void);

/* Page-locked host memory (zero-filled): host <-> device copies from it run
 * asynchronously at full bus speed. */
void *cuda_host_alloc(size_t bytes);
void cuda_host_free(void *p);

/* Batch upload: copies bytes from pinned host memory to the device on the
 * copy stream, then makes the compute stream wait for it, so the copy
 * overlaps whatever the compute stream is doing before that point (the
 * parameters' upload) and the host returns at once. */
void cuda_upload_async(void *dev_dst, const void *pinned_src, size_t bytes);

/* Makes stream (a cudaStream_t, e.g. the NCCL transport's) wait for the
 * work queued so far on the compute stream, without blocking the host: a
 * collective on a device vector starts after the kernels that wrote it. */
void cuda_stream_after_compute(void *stream);

#endif
