/* cuDNN for the CUDA backend's fp32 convolutions: backend/cudnn.h.
 *
 * The library is opened with dlopen at device open and only the functions
 * below are taken from it; the types and constants are the toolkit's cudnn.h
 * at build time (cuDNN 9's legacy convolution API: cudnnConvolutionForward,
 * ...BackwardData, ...BackwardFilter). Per shape, descriptors and algorithms
 * are made once and kept. Algorithms: cuDNN's heuristic order
 * (cudnnGet*Algorithm_v7), the first that reports success, is deterministic
 * and needs at most 1/16 of the device's memory as workspace. Math: FMA only
 * (full fp32, as the cuBLAS handle's pedantic mode), TF32 tensor cores with
 * compute.tf32. Every cuDNN call is checked (DT_FATAL with cudnnGetErrorString). */
#include "config.h"

#include "backend/cudnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_check.h"
#include "backend/cuda_device.h"

#ifdef HAVE_CUDNN_H
#include <cudnn.h>
#include <dlfcn.h>

/* the functions taken from the library, typed as cudnn.h declares them */
#define CUDNN_FUNCS(X)                                                                         \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) \
    X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor)                               \
    X(cudnnDestroyTensorDescriptor) X(cudnnCreateFilterDescriptor)                             \
    X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor)                              \
    X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                     \
    X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)                        \
    X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionForwardWorkspaceSize)       \
    X(cudnnConvolutionForward) X(cudnnGetConvolutionBackwardDataAlgorithm_v7)                  \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnConvolutionBackwardData)            \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                           \
    X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)

#define DECLARE(f) static __typeof__(&f) p_##f;
CUDNN_FUNCS(DECLARE)
#undef DECLARE

#define CUDNN_OK(call)                                                                   \
    do {                                                                                 \
        const cudnnStatus_t s_ = (call);                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                  \
            DT_FATAL("%s: %s", #call, p_cudnnGetErrorString(s_));                        \
    } while (0)

/* One shape's descriptors and algorithms. */
typedef struct conv_plan {
    dt_conv_shape s;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_data, ws_filter; /* workspace bytes of each */
} conv_plan;

static struct {
    void *lib;
    cudnnHandle_t h;
    int tf32;
    conv_plan *plans;
    int nplans, cap;
    void *ws;      /* device workspace, grown to the largest asked */
    size_t ws_have;
} g;

int cudnn_active(void) { return g.h != NULL; }

int cudnn_open(void *stream, char *why, size_t len)
{
    const char *env = getenv("DTRAIN_CUDNN");
    if (env && strcmp(env, "0") == 0) {
        snprintf(why, len, "DTRAIN_CUDNN=0");
        return 0;
    }
    static const char *names[] = { "libcudnn.so.9", "libcudnn.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !g.lib; i++)
        g.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g.lib) {
        const char *e = dlerror();
        snprintf(why, len, "%s", e ? e : "libcudnn.so.9 not found");
        return 0;
    }
#define BIND(f)                                                                          \
    if (!(p_##f = (__typeof__(&f))dlsym(g.lib, #f))) {                                   \
        snprintf(why, len, "libcudnn has no %s", #f);                                    \
        dlclose(g.lib);                                                                  \
        g.lib = NULL;                                                                    \
        return 0;                                                                        \
    }
    CUDNN_FUNCS(BIND)
#undef BIND
    const size_t v = p_cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) {
        snprintf(why, len, "libcudnn %zu.%zu, built for %d", v / 10000, v / 100 % 100,
                 CUDNN_MAJOR);
        dlclose(g.lib);
        g.lib = NULL;
        return 0;
    }
    CUDNN_OK(p_cudnnCreate(&g.h));
    CUDNN_OK(p_cudnnSetStream(g.h, (cudaStream_t)stream));
    snprintf(why, len, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    return 1;
}

void cudnn_close(void)
{
    if (!g.h)
        return;
    for (int i = 0; i < g.nplans; i++) {
        conv_plan *p = &g.plans[i];
        CUDNN_OK(p_cudnnDestroyTensorDescriptor(p->x));
        CUDNN_OK(p_cudnnDestroyTensorDescriptor(p->y));
        CUDNN_OK(p_cudnnDestroyFilterDescriptor(p->w));
        CUDNN_OK(p_cudnnDestroyConvolutionDescriptor(p->conv));
    }
    free(g.plans);
    if (g.ws) {
        cuda_sync();
        cuda_device_free(g.ws);
    }
    CUDNN_OK(p_cudnnDestroy(g.h));
    memset(&g, 0, sizeof g); /* the library stays loaded: unloading it buys nothing */
}

void cudnn_tf32(int on)
{
    g.tf32 = on;
    for (int i = 0; i < g.nplans; i++)
        CUDNN_OK(p_cudnnSetConvolutionMathType(g.plans[i].conv,
                                               on ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
}

static int same_shape(const dt_conv_shape *a, const dt_conv_shape *b)
{
    return a->B == b->B && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
           a->R == b->R && a->S == b->S && a->stride == b->stride && a->pad == b->pad;
}

/* the first of n results (cuDNN's order) that succeeded, is deterministic and
 * fits in limit bytes of workspace */
#define PICK(res, n, limit, out, ws, what)                                               \
    do {                                                                                 \
        int k_ = 0;                                                                      \
        while (k_ < (n) && ((res)[k_].status != CUDNN_STATUS_SUCCESS ||                  \
                            (res)[k_].determinism != CUDNN_DETERMINISTIC ||              \
                            (res)[k_].memory > (limit)))                                 \
            k_++;                                                                        \
        if (k_ == (n))                                                                   \
            DT_FATAL("cuDNN offers no deterministic %s algorithm for a convolution "     \
                     "%dx%dx%d -> %d (%dx%d, stride %d, pad %d); DTRAIN_CUDNN=0 runs "    \
                     "dtrain's own", what, s->C, s->H, s->W, s->K, s->R, s->S,           \
                     s->stride, s->pad);                                                 \
        (out) = (res)[k_].algo;                                                          \
        (ws) = (res)[k_].memory;                                                         \
    } while (0)

static conv_plan *plan_of(const dt_conv_shape *s)
{
    for (int i = 0; i < g.nplans; i++)
        if (same_shape(&g.plans[i].s, s))
            return &g.plans[i];
    if (g.nplans == g.cap) {
        g.cap = g.cap ? 2 * g.cap : 16;
        g.plans = dt_realloc(g.plans, (size_t)g.cap * sizeof *g.plans);
    }
    conv_plan *p = &g.plans[g.nplans++];
    memset(p, 0, sizeof *p);
    p->s = *s;
    CUDNN_OK(p_cudnnCreateTensorDescriptor(&p->x));
    CUDNN_OK(p_cudnnCreateTensorDescriptor(&p->y));
    CUDNN_OK(p_cudnnCreateFilterDescriptor(&p->w));
    CUDNN_OK(p_cudnnCreateConvolutionDescriptor(&p->conv));
    CUDNN_OK(p_cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->C,
                                          s->H, s->W));
    CUDNN_OK(p_cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->B, s->K,
                                          s->P, s->Q));
    CUDNN_OK(p_cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->K, s->C,
                                          s->R, s->S));
    CUDNN_OK(p_cudnnSetConvolution2dDescriptor(p->conv, s->pad, s->pad, s->stride, s->stride, 1,
                                               1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_OK(p_cudnnSetConvolutionMathType(p->conv, g.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    const size_t limit = cuda_device_memory() / 16;
    int n = 0;
    cudnnConvolutionFwdAlgoPerf_t f[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CUDNN_OK(p_cudnnGetConvolutionForwardAlgorithm_v7(g.h, p->x, p->w, p->conv, p->y,
                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, f));
    PICK(f, n, limit, p->fwd, p->ws_fwd, "forward");
    cudnnConvolutionBwdDataAlgoPerf_t d[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_OK(p_cudnnGetConvolutionBackwardDataAlgorithm_v7(
        g.h, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, d));
    PICK(d, n, limit, p->bwd_data, p->ws_data, "backward data");
    cudnnConvolutionBwdFilterAlgoPerf_t w[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_OK(p_cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        g.h, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, w));
    PICK(w, n, limit, p->bwd_filter, p->ws_filter, "backward filter");
    return p;
}

static void *workspace(size_t bytes)
{
    if (bytes > g.ws_have) {
        if (g.ws) {
            cuda_sync(); /* a queued convolution may still use it */
            cuda_device_free(g.ws);
        }
        g.ws = cuda_device_malloc(bytes);
        g.ws_have = bytes;
        cuda_graph_moved(); /* recorded graphs name the old workspace */
    }
    return g.ws;
}

static const float one = 1.0f, zero = 0.0f;

void cudnn_conv_forward(const dt_conv_shape *s, const float *x, const float *w, float *y)
{
    conv_plan *p = plan_of(s);
    void *ws = workspace(p->ws_fwd);
    CUDNN_OK(p_cudnnConvolutionForward(g.h, &one, p->x, x, p->w, w, p->conv, p->fwd, ws,
                                       p->ws_fwd, &zero, p->y, y));
}

void cudnn_conv_backward_data(const dt_conv_shape *s, const float *w, const float *dy,
                              float beta, float *dx)
{
    conv_plan *p = plan_of(s);
    void *ws = workspace(p->ws_data);
    CUDNN_OK(p_cudnnConvolutionBackwardData(g.h, &one, p->w, w, p->y, dy, p->conv, p->bwd_data,
                                            ws, p->ws_data, &beta, p->x, dx));
}

void cudnn_conv_backward_filter(const dt_conv_shape *s, const float *x, const float *dy,
                                float *dw)
{
    conv_plan *p = plan_of(s);
    void *ws = workspace(p->ws_filter);
    CUDNN_OK(p_cudnnConvolutionBackwardFilter(g.h, &one, p->x, x, p->y, dy, p->conv,
                                              p->bwd_filter, ws, p->ws_filter, &zero, p->w, dw));
}
#else
/* configure found no cudnn.h: the convolutions are always lowered */
int cudnn_open(void *stream, char *why, size_t len)
{
    (void)stream;
    snprintf(why, len, "built without cudnn.h");
    return 0;
}
void cudnn_close(void) {}
int cudnn_active(void) { return 0; }
void cudnn_tf32(int on) { (void)on; }
void cudnn_conv_forward(const dt_conv_shape *s, const float *x, const float *w, float *y)
{
    (void)s, (void)x, (void)w, (void)y;
    DT_FATAL("cudnn_conv_forward: built without cudnn.h");
}
void cudnn_conv_backward_data(const dt_conv_shape *s, const float *w, const float *dy,
                              float beta, float *dx)
{
    (void)s, (void)w, (void)dy, (void)beta, (void)dx;
    DT_FATAL("cudnn_conv_backward_data: built without cudnn.h");
}
void cudnn_conv_backward_filter(const dt_conv_shape *s, const float *x, const float *dy,
                                float *dw)
{
    (void)s, (void)x, (void)dy, (void)dw;
    DT_FATAL("cudnn_conv_backward_filter: built without cudnn.h");
}
#endif
