/* A rank's GPU: selection, streams, cuBLAS handle, pinned staging memory. */
#include "config.h"

#include "backend/cuda_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_check.h"
#include "backend/cudnn.h"
#include "core/alloc.h"
#include "nn/cuda/kernels_cuda.h"

/* cuBLAS's workspace: 32 MiB, what its documentation recommends for Hopper
 * (4 MiB before it) */
#define CUDA_BLAS_WORKSPACE ((size_t)32 << 20)

static struct {
    int open;
    cudaStream_t compute, copy;
    cudaEvent_t copied;
    cudaEvent_t computed; /* the compute stream's point another stream waits for */
    cublasHandle_t blas;
    void *blas_ws; /* cuBLAS's workspace, fixed, so a recorded GEMM never allocates */
    uint64_t epoch; /* cuda_graph_epoch */
    size_t memory; /* bytes of device memory */
    char cudnn[160]; /* "cuDNN 9.x.y", or why it is not loaded */
} dev;

int cuda_device_count(const char **why)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        // no driver or no device: the runtime's reason for the error message
        if (why)
            *why = cudaGetErrorString(e);
        (void)cudaGetLastError();
        return 0;
    }
    if (why)
        *why = n ? "" : "the CUDA runtime reports 0 devices";
    return n;
}

int cuda_device_open(int d, char *name, size_t len)
{
    // the GPT attention's kernels: tiles (the default) or the row form, to measure them against
    const char *att = getenv("DTRAIN_CUDA_ATTENTION");
    if (att && strcmp(att, "tiles") != 0 && strcmp(att, "rows") != 0)
        return dt_err_set("DTRAIN_CUDA_ATTENTION = '%s': expected tiles or rows", att);
    const int rows = att && strcmp(att, "rows") == 0;
    cuda_attention_rows(rows);
    struct cudaDeviceProp p;
    cudaError_t e = cudaSetDevice(d);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&p, d);
    if (e != cudaSuccess)
        return dt_err_set("compute.device = cuda: cannot use GPU %d: %s", d, cudaGetErrorString(e));
    snprintf(name, len, "cuda:%d %s", d, p.name);
    dev.memory = p.totalGlobalMem;
    CUDA_OK(cudaStreamCreateWithFlags(&dev.compute, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&dev.copy, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&dev.copied, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&dev.computed, cudaEventDisableTiming));
    CUBLAS_OK(cublasCreate(&dev.blas));
    CUBLAS_OK(cublasSetStream(dev.blas, dev.compute));
    // after cublasSetStream, which puts back the default workspace
    dev.blas_ws = cuda_device_malloc(CUDA_BLAS_WORKSPACE);
    CUBLAS_OK(cublasSetWorkspace(dev.blas, dev.blas_ws, CUDA_BLAS_WORKSPACE));
    // fp32 GEMMs in full precision unless compute.tf32 (cuda_device_tf32)
    CUBLAS_OK(cublasSetMathMode(dev.blas, CUBLAS_PEDANTIC_MATH));
    // the convolutions by cuDNN where the node has it
    const int have = cudnn_open(dev.compute, dev.cudnn, sizeof dev.cudnn);
    size_t l = strlen(name);
    snprintf(name + l, len - l, have ? " %s" : " no cuDNN", dev.cudnn);
    l = strlen(name);
    if (rows)
        snprintf(name + l, len - l, " attention-rows");
    dev.open = 1;
    return 0;
}

void cuda_device_close(void)
{
    if (!dev.open)
        return;
    CUDA_OK(cudaStreamSynchronize(dev.compute));
    cudnn_close();
    CUBLAS_OK(cublasDestroy(dev.blas));
    cuda_device_free(dev.blas_ws);
    CUDA_OK(cudaEventDestroy(dev.copied));
    CUDA_OK(cudaEventDestroy(dev.computed));
    CUDA_OK(cudaStreamDestroy(dev.copy));
    CUDA_OK(cudaStreamDestroy(dev.compute));
    dev.open = 0;
}

void cuda_device_tf32(int on)
{
    CUBLAS_OK(cublasSetMathMode(dev.blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    cudnn_tf32(on);
}

const char *cuda_device_cudnn(void) { return cudnn_active() ? NULL : dev.cudnn; }

void *cuda_stream(void) { return dev.compute; }
size_t cuda_device_memory(void) { return dev.memory; }
void *cuda_cublas(void) { return dev.blas; }
void cuda_sync(void) { CUDA_OK(cudaStreamSynchronize(dev.compute)); }

/* Every cudaMalloc of dtrain's and its size, so that the run can report the
 * most it held at once (cuda_device_peak); a few hundred blocks at most */
static struct {
    void **p;
    size_t *bytes;
    size_t n, cap, now, peak;
} mem;

void *cuda_device_malloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
    if (mem.n == mem.cap) {
        mem.cap = mem.cap ? 2 * mem.cap : 256;
        mem.p = dt_realloc(mem.p, mem.cap * sizeof *mem.p);
        mem.bytes = dt_realloc(mem.bytes, mem.cap * sizeof *mem.bytes);
    }
    mem.p[mem.n] = p;
    mem.bytes[mem.n++] = bytes;
    mem.now += bytes;
    mem.peak = mem.now > mem.peak ? mem.now : mem.peak;
    return p;
}

void cuda_device_free(void *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < mem.n; i++)
        if (mem.p[i] == p) {
            mem.now -= mem.bytes[i];
            mem.p[i] = mem.p[mem.n - 1];
            mem.bytes[i] = mem.bytes[mem.n - 1];
            mem.n--;
            break;
        }
    CUDA_OK(cudaFree(p));
}

size_t cuda_device_peak(void) { return mem.peak; }

void cuda_graph_begin(void)
{
    /* thread-local: a call of this thread that may not be recorded (an
     * allocation, a synchronous copy) fails at once, naming the call, rather
     * than in a replay */
    CUDA_OK(cudaStreamBeginCapture(dev.compute, cudaStreamCaptureModeThreadLocal));
}

void *cuda_graph_end(void)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(dev.compute, &g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        dt_err_set("CUDA graph: recording the step failed: %s", cudaGetErrorString(e));
        return NULL;
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    CUDA_OK(cudaGraphDestroy(g));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        dt_err_set("CUDA graph: instantiating the recorded step failed: %s",
                   cudaGetErrorString(e));
        return NULL;
    }
    return x;
}

void cuda_graph_launch(void *graph)
{
    CUDA_OK(cudaGraphLaunch((cudaGraphExec_t)graph, dev.compute));
}

void cuda_graph_free(void *graph)
{
    if (graph)
        CUDA_OK(cudaGraphExecDestroy((cudaGraphExec_t)graph));
}

uint64_t cuda_graph_epoch(void) { return dev.epoch; }
void cuda_graph_moved(void) { dev.epoch++; }

void *cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault));
    memset(p, 0, bytes);
    return p;
}

void cuda_host_free(void *p)
{
    if (p)
        CUDA_OK(cudaFreeHost(p));
}

void cuda_upload_async(void *dst, const void *src, size_t bytes)
{
    CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, dev.copy));
    CUDA_OK(cudaEventRecord(dev.copied, dev.copy));
    CUDA_OK(cudaStreamWaitEvent(dev.compute, dev.copied, 0));
}

void cuda_stream_after_compute(void *stream)
{
    CUDA_OK(cudaEventRecord(dev.computed, dev.compute));
    CUDA_OK(cudaStreamWaitEvent((cudaStream_t)stream, dev.computed, 0));
}
