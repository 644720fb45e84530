/* The CPU backends: the native one (every kernel ours, plain layout) and, when
 * built with oneDNN, the same table with oneDNN's convolutions and the
 * channel-blocked layout they read and write. */
#include "config.h"

#include "backend/backend.h"
#include "backend/cpu/dispatch.h"
#include "core/error.h"
#include "core/vec.h"
#include "nn/cuda/sgd.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/kernels.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#endif

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Host memory: the backend's tensors are ordinary 64-byte aligned buffers. */
static void *cpu_mem_alloc(size_t bytes) { return dt_falloc((bytes + sizeof(float) - 1) / sizeof(float)); }
static void cpu_mem_free(void *p) { free(p); }
static void cpu_mem_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_mem_copy(void *dst, const void *src, size_t bytes)
{
#ifdef DTRAIN_SIM
    /* a copy this large is of the flat vectors, shared and without meaning
     * in the simulator (core/vec.h): easgd's copy of the model per round */
    if (bytes >= SIM_SHARED_MIN * sizeof(float))
        return;
#endif
    memcpy(dst, src, bytes);
}
static void cpu_flat_scale(size_t n, float a, float *x)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_scale_at(i, a, x);
}
static void cpu_flat_diff_scale(size_t n, float a, const float *x, const float *c, float *out)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_diff_scale_at(i, a, x, c, out);
}
static void cpu_flat_toward(size_t n, float beta, float inv, const float *mean, float *c)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_toward_at(i, beta, inv, mean, c);
}
static void cpu_flat_sub(size_t n, const float *d, float *x)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_sub_at(i, d, x);
}

static void cpu_flat_scale_copy(size_t n, float a, float *x, float *y)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_scale_copy_at(i, a, x, y);
}
static void cpu_flat_add(size_t n, const float *d, float *x)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_add_at(i, d, x);
}
static void cpu_flat_div(size_t n, const float *x, const float *w, float *z)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_div_at(i, x, w, z);
}
/* slot by slot, as the CUDA backend's kernels go: per element the same sum */
static void cpu_flat_sum_slots(size_t n, int k, const float *c, const float *slots, float *out)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    if (k == 0)
        memset(out, 0, n * sizeof *out);
    for (int j = 0; j < k; j++) {
        const float *x = slots + (size_t)j * n;
        if (c)
            for (size_t i = 0; i < n; i++)
                flat_axpy_term_at(i, c[j], x, out, j == 0);
        else
            for (size_t i = 0; i < n; i++)
                flat_sum_term_at(i, x, out, j == 0);
    }
}
static void cpu_flat_ax_plus(size_t n, float a, const float *x, float *y)
{
    VEC_SKIP_IN_SIM; /* the simulator: no model in the vectors (core/vec.h) */
    for (size_t i = 0; i < n; i++)
        flat_ax_plus_at(i, a, x, y);
}

static void cpu_flat_adamw(size_t n, const dt_adamw_k *k, const dt_adamw_seg *segs, int nseg,
                           float *x, const float *g, float *m, float *v)
{
    adamw_step_k(0, n, x, g, m, v, segs, nseg, k);
}
static void cpu_flat_clip(size_t n, double max_norm, float *g)
{
    clip_grad_norm(g, n, max_norm);
}

/* the dropout key the GPT's passes take: read where p > 0 (backend/backend.h) */
static uint64_t key_at(float p, const uint64_t *key) { return p > 0.0f ? *key : 0; }

static void cpu_embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                                  const float *wpe, float p, const uint64_t *key, float *x)
{
    embedding_forward(B, T, C, tok, wte, wpe, p, key_at(p, key), x);
}
static void cpu_embedding_backward(int B, int T, int C, const int32_t *tok, const float *dx,
                                   float p, const uint64_t *key, float *dwte, float *dwpe)
{
    embedding_backward(B, T, C, tok, dx, p, key_at(p, key), dwte, dwpe);
}
static void cpu_layernorm_forward(int N, int C, const float *x, const float *g, const float *b,
                                  float *y, float *mean, float *rstd)
{
    layernorm_forward(N, C, x, g, b, y, NULL, mean, rstd);
}
static void cpu_layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                           const uint64_t *key, const float *g, const float *b,
                                           float *xo, float *y, float *mean, float *rstd)
{
    layernorm_residual_forward(N, C, x, r, p, key_at(p, key), g, b, xo, y, NULL, mean, rstd);
}

static void cpu_layernorm_apply(int N, int C, const float *x, const float *mean,
                                const float *rstd, const float *g, const float *b, float *y)
{
    layernorm_apply(N, C, x, mean, rstd, g, b, y, NULL);
}
static void cpu_branch_dropout_grad(size_t n, const float *dres, float p, const uint64_t *key,
                                    float *d)
{
    const uint64_t k = key_at(p, key);
    for (size_t i = 0; i < n; i++)
        d[i] = dres[i] * dropout_factor(k, i, p);
}

/* The attention's scratch (attention_work per thread), grown to the largest
 * T asked for; the backend's calls come from the engine's thread. */
static float *att_work;
static size_t att_work_len;

static float *attention_scratch(int T, int *nwork)
{
#ifdef _OPENMP
    *nwork = omp_get_max_threads();
#else
    *nwork = 1;
#endif
    const size_t n = attention_work(T) * (size_t)*nwork;
    if (n > att_work_len) {
        free(att_work);
        att_work = dt_falloc(n);
        att_work_len = n;
    }
    return att_work;
}
static void cpu_attention_forward(int B, int T, int C, int NH, const float *qkv, float *y,
                                  float *lse, float p, const uint64_t *key)
{
    int nwork;
    float *work = attention_scratch(T, &nwork);
    attention_forward(B, T, C, NH, qkv, y, lse, NULL, p, key_at(p, key), work, nwork);
}
static void cpu_attention_backward(int B, int T, int C, int NH, const float *qkv,
                                   const float *lse, const float *dy, float p,
                                   const uint64_t *key, float *dqkv)
{
    int nwork;
    float *work = attention_scratch(T, &nwork);
    attention_backward(B, T, C, NH, qkv, lse, NULL, dy, p, key_at(p, key), dqkv, work, nwork);
}

#define CPU_KERNELS                                                                      \
    .device = 0, .mem_alloc = cpu_mem_alloc, .mem_free = cpu_mem_free,                   \
    .mem_zero = cpu_mem_zero, .mem_copy = cpu_mem_copy, .to_backend = cpu_mem_copy,      \
    .to_host = cpu_mem_copy, .host_alloc = cpu_mem_alloc, .host_free = cpu_mem_free,     \
    .flat_sgd = sgd_step_flat, .flat_scale = cpu_flat_scale,                             \
    .flat_diff_scale = cpu_flat_diff_scale, .flat_toward = cpu_flat_toward,              \
    .flat_sub = cpu_flat_sub, .flat_scale_copy = cpu_flat_scale_copy,                    \
    .flat_add = cpu_flat_add, .flat_div = cpu_flat_div,                                  \
    .flat_sum_slots = cpu_flat_sum_slots, .flat_ax_plus = cpu_flat_ax_plus,              \
    .flat_adamw = cpu_flat_adamw, .flat_clip = cpu_flat_clip,                            \
    .embedding_forward = cpu_embedding_forward,                                         \
    .layernorm_forward = cpu_layernorm_forward,                                          \
    .layernorm_residual_forward = cpu_layernorm_residual_forward,                        \
    .embedding_backward = cpu_embedding_backward, .layernorm_apply = cpu_layernorm_apply, \
    .branch_dropout_grad = cpu_branch_dropout_grad,                                      \
    .layernorm_backward = layernorm_backward, .attention_forward = cpu_attention_forward, \
    .attention_backward = cpu_attention_backward,                                        \
    .gelu_forward = gelu_forward, .gelu_forward_deriv = gelu_forward_deriv,              \
    .gelu_backward_deriv = gelu_backward_deriv, .xent_seq_rows = xent_seq_rows,          \
    .xent_seq_backward = xent_seq_backward,                                              \
    .maxpool_forward = cpu_maxpool_forward, .maxpool_backward = cpu_maxpool_backward,    \
    .avgpool_forward = cpu_avgpool_forward, .avgpool_backward = cpu_avgpool_backward,    \
    .relu_forward = cpu_relu_forward, .relu_backward = cpu_relu_backward,                \
    .relu_backward_inplace = cpu_relu_backward_inplace,                                  \
    .sigmoid_forward = cpu_sigmoid_forward, .sigmoid_backward = cpu_sigmoid_backward,    \
    .dropout_forward = cpu_dropout_forward, .dropout_backward = cpu_dropout_backward,    \
    .groupnorm_forward = cpu_groupnorm_forward,                                          \
    .groupnorm_backward = cpu_groupnorm_backward, .add_forward = cpu_add_forward,        \
    .add_backward = cpu_add_backward, .softmax_xent = cpu_softmax_xent,                  \
    .softmax_xent_rows = cpu_softmax_xent_rows, .softmax_xent_sum = cpu_softmax_xent_sum, \
    .dropout_forward_keyed = cpu_dropout_forward_keyed

static const dt_backend cpu = {
    .name = "native",
    .cblock = 0,
    .conv2d_workspace = cpu_conv2d_workspace,
    .conv2d_dx_accumulates = cpu_conv2d_dx_accumulates,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward = cpu_conv2d_backward,
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    CPU_KERNELS,
};

const dt_backend *backend_cpu(void) { return &cpu; }

#ifdef HAVE_DNNL
/* cblock: the channel block oneDNN's direct convolutions read at the level in
 * force (backend/cpu/dispatch.h), set on first use */
static dt_backend cpu_dnnl = {
    .name = "dnnl",
    .conv2d_workspace = dnnl_conv2d_workspace,
    .conv2d_pass_workspace = dnnl_conv2d_pass_workspace,
    .conv2d_dx_accumulates = dnnl_conv2d_dx_accumulates,
    .conv2d_forward = dnnl_conv2d_forward,
    .conv2d_backward = dnnl_conv2d_backward,
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    CPU_KERNELS,
};

const dt_backend *backend_cpu_dnnl(void)
{
    cpu_dnnl.cblock = cpu_dispatch()->cblock;
    return &cpu_dnnl;
}

/* compute.precision = bf16: the oneDNN table with bf16 products in the
 * linear and conv kernels, the same layouts; the rest is fp32. */
static const dt_backend cpu_dnnl_bf16 = {
    .name = "dnnl-bf16",
    .cblock = 16,
    .precision = DT_PREC_BF16,
    .conv2d_workspace = bf16_conv2d_workspace,
    .conv2d_pass_workspace = bf16_conv2d_pass_workspace,
    .conv2d_dx_accumulates = bf16_conv2d_dx_accumulates,
    .conv2d_forward = bf16_conv2d_forward,
    .conv2d_backward = bf16_conv2d_backward,
    .linear_workspace = bf16_linear_workspace,
    .linear_forward = bf16_linear_forward,
    .linear_backward = bf16_linear_backward,
    .conv2d_reads_x_bf16 = bf16_conv2d_reads_x_bf16,
    .linear_reads_x_bf16 = bf16_linear_is_bf16,
    .to_bf16 = bf16_from_f32,
    .from_bf16 = bf16_to_f32,
    .relu_backward_bf16 = cpu_relu_backward_bf16,
    .relu_backward_inplace_bf16 = cpu_relu_backward_inplace_bf16,
    .relu_forward_bf16 = cpu_relu_forward_bf16,
    CPU_KERNELS,
};
#else
const dt_backend *backend_cpu_dnnl(void) { return NULL; }
#endif

#ifndef HAVE_CUDA
const dt_backend *backend_cuda(void) { return NULL; }
const dt_backend *backend_cuda_bf16(void) { return NULL; }
#endif

int backend_precision_of(const char *name)
{
    if (strcmp(name, "fp32") == 0)
        return DT_PREC_FP32;
    if (strcmp(name, "bf16") == 0)
        return DT_PREC_BF16;
    return -1;
}

const dt_backend *backend_with_precision(const dt_backend *be, int precision)
{
    if (precision == be->precision)
        return be;
    if (precision != DT_PREC_BF16) /* the bf16 twins have no way back: nothing asks */
        return dt_err_set("compute.precision = fp32 asked of the %s backend", be->name), NULL;
    if (be->device && be == backend_cuda())
        return backend_cuda_bf16();
    if (be->device)
        return dt_err_set("compute.precision = bf16 is not implemented on the %s backend "
                          "(compute.device = cpu with compute.test_device_memory); use "
                          "compute.precision = fp32", be->name), NULL;
    if (be != backend_cpu_dnnl())
        return dt_err_set("compute.precision = bf16 runs on oneDNN: it needs compute.kernels = "
                          "dnnl or auto, not %s", be->name), NULL;
    if (bf16_check_cpu() != 0)
        return NULL;
#ifdef HAVE_DNNL
    return &cpu_dnnl_bf16;
#else
    return NULL; /* not reached: bf16_check_cpu refuses without oneDNN */
#endif
}

static int process_precision = DT_PREC_FP32;

void backend_set_precision(int precision) { process_precision = precision; }

static const dt_backend *by_name_fp32(const char *name)
{
    if (strcmp(name, "native") == 0)
        return backend_cpu();
    if (strcmp(name, "dnnl") == 0)
        return backend_cpu_dnnl();
    if (strcmp(name, "auto") == 0)
        return backend_cpu_dnnl() ? backend_cpu_dnnl() : backend_cpu();
    return NULL;
}

const dt_backend *backend_cpu_by_name(const char *name)
{
    const dt_backend *be = by_name_fp32(name);
    if (be && process_precision != DT_PREC_FP32)
        be = backend_with_precision(be, process_precision);
    return be;
}

void backend_set_threads(int threads)
{
    openblas_set_num_threads(threads);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
}
