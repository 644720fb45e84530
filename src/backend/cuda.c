/* The CUDA backend: every op of backend/backend.h on device memory.
 *
 * GEMMs by cuBLAS, with the column-major argument sets of backend/gemm_args.h;
 * fp32 convolutions by cuDNN where the node has it (backend/cudnn.h), else,
 * and in bf16, lowered onto cuBLAS (nn/lower.h: im2col, batched GEMMs, the
 * weight gradient's images summed by a kernel, col2im as a gather);
 * everything else by the kernels of nn/cuda/. All work is queued on the
 * device's compute stream (backend/cuda_device.c); only the loss reduction
 * and the host <-> device copies wait for it. Plain NCHW layout only (cblock
 * 0). Every CUDA, cuBLAS and kernel call is checked (backend/cuda_check.h). */
#include "config.h"

#include "backend/backend.h"
#include "backend/gemm_args.h"
#include "backend/cuda_check.h"
#include "backend/cuda_device.h"
#include "backend/cudnn.h"
#include "nn/cuda/kernels_cuda.h"
#include "nn/cuda/xent.h" /* softmax_xent_mean */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ST cuda_stream()
#define BLAS ((cublasHandle_t)cuda_cublas())

static const float one = 1.0f, zero = 0.0f;

/* ---- memory ----------------------------------------------------------- */

static void *cu_alloc(size_t bytes)
{
    void *p = cuda_device_malloc(bytes);
    CUDA_OK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, ST));
    return p;
}
static void cu_free(void *p)
{
    cuda_sync(); // a kernel queued on the stream may still read it
    cuda_device_free(p);
}
static size_t cu_mem_peak(void) { return cuda_device_peak(); }

static void cu_zero(void *p, size_t bytes) { CUDA_OK(cudaMemsetAsync(p, 0, bytes, ST)); }
static void cu_copy(void *d, const void *s, size_t bytes)
{
    CUDA_OK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, ST));
}
static void cu_to_device(void *d, const void *h, size_t bytes)
{
    CUDA_OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, ST));
    cuda_sync();
}
static void cu_to_host(void *h, const void *d, size_t bytes)
{
    CUDA_OK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, ST));
    cuda_sync();
}

/* Device scratch that only grows (GroupNorm's double sums, the loss rows). */
static void *scratch(void **p, size_t *have, size_t bytes)
{
    if (bytes > *have) {
        if (*p)
            cu_free(*p);
        *p = cu_alloc(bytes);
        *have = bytes;
        cuda_graph_moved(); /* recorded graphs name the old block */
    }
    return *p;
}

static void *bias_rows;
static size_t bias_rows_have;

/* db (K) of dy (B, K, PQ) */
static void bias_grad(int B, int K, size_t PQ, const float *dy, float *db)
{
    double *rows = scratch(&bias_rows, &bias_rows_have, (size_t)B * K * sizeof(double));
    KERNEL_OK(cuda_bias_grad(B, K, PQ, dy, db, rows, ST));
}

/* ---- GEMMs (backend/gemm_args.h: the argument sets, tested on the host) ---- */

static cublasOperation_t op(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

static void gemm(const dt_gemm *g, const float *A, const float *B, float beta, float *C)
{
    if (g->batch == 1)
        CUBLAS_OK(cublasSgemm(BLAS, op(g->ta), op(g->tb), g->m, g->n, g->k, &one, A, g->lda, B,
                              g->ldb, &beta, C, g->ldc));
    else
        CUBLAS_OK(cublasSgemmStridedBatched(BLAS, op(g->ta), op(g->tb), g->m, g->n, g->k, &one,
                                            A, g->lda, g->sa, B, g->ldb, g->sb, &beta, C,
                                            g->ldc, g->sc, g->batch));
}

/* compute.precision = bf16: A and B rounded to bf16 (the CPU's rounding,
 * core/bf16_round.h) into device scratch, the product accumulated in fp32 by
 * the tensor cores (cublasGemmEx, CUBLAS_COMPUTE_32F): what the CPU's bf16
 * products compute (backend/cpu/gemm_bf16.h), in another order of sums. */
static void *a16, *b16;
static size_t a16_have, b16_have;

static void gemm16(const dt_gemm *g, const float *A, const float *B, float beta, float *C)
{
    const size_t na = (size_t)gemm_a_floats(g), nb = (size_t)gemm_b_floats(g);
    uint16_t *A16 = scratch(&a16, &a16_have, na * sizeof *A16);
    uint16_t *B16 = scratch(&b16, &b16_have, nb * sizeof *B16);
    KERNEL_OK(cuda_round_bf16(na, A, A16, ST));
    KERNEL_OK(cuda_round_bf16(nb, B, B16, ST));
    if (g->batch == 1)
        CUBLAS_OK(cublasGemmEx(BLAS, op(g->ta), op(g->tb), g->m, g->n, g->k, &one, A16,
                               CUDA_R_16BF, g->lda, B16, CUDA_R_16BF, g->ldb, &beta, C,
                               CUDA_R_32F, g->ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_OK(cublasGemmStridedBatchedEx(
            BLAS, op(g->ta), op(g->tb), g->m, g->n, g->k, &one, A16, CUDA_R_16BF, g->lda, g->sa,
            B16, CUDA_R_16BF, g->ldb, g->sb, &beta, C, CUDA_R_32F, g->ldc, g->sc, g->batch,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The products of the layers below, fp32 or bf16: the two tables' difference */
typedef void gemm_fn(const dt_gemm *g, const float *A, const float *B, float beta, float *C);

/* ---- linear ------------------------------------------------------------ */

static void linear_forward(gemm_fn *mm, int B, int in, int out, const float *x, const float *W,
                           const float *b, float *y)
{
    const dt_gemm g = gemm_linear_forward(B, in, out);
    mm(&g, W, x, zero, y);
    if (b)
        KERNEL_OK(cuda_bias_add(B, out, 1, b, y, ST));
}

static void linear_backward(gemm_fn *mm, int B, int in, int out, const float *x, const float *W,
                            const float *dy, float *dx, float *dW, float *db)
{
    if (dx) {
        const dt_gemm g = gemm_linear_dx(B, in, out);
        mm(&g, W, dy, one, dx);
    }
    const dt_gemm g = gemm_linear_dw(B, in, out);
    mm(&g, x, dy, zero, dW);
    if (db)
        bias_grad(B, out, 1, dy, db);
}

/* work: none (linear_workspace is NULL; the bf16 copies are the backend's scratch) */
static void cu_linear_forward(int B, int in, int out, const float *x, const float *W,
                              const float *b, float *y, float *work)
{
    (void)work;
    linear_forward(gemm, B, in, out, x, W, b, y);
}
static void cu_linear_backward(int B, int in, int out, const float *x, const float *W,
                               const float *dy, float *dx, float *dW, float *db, float *work)
{
    (void)work;
    linear_backward(gemm, B, in, out, x, W, dy, dx, dW, db);
}
static void cu16_linear_forward(int B, int in, int out, const float *x, const float *W,
                                const float *b, float *y, float *work)
{
    (void)work;
    linear_forward(gemm16, B, in, out, x, W, b, y);
}
static void cu16_linear_backward(int B, int in, int out, const float *x, const float *W,
                                 const float *dy, float *dx, float *dW, float *db, float *work)
{
    (void)work;
    linear_backward(gemm16, B, in, out, x, W, dy, dx, dW, db);
}

/* ---- convolution, lowered (nn/lower.h) --------------------------------- */

static void *dw_parts; /* the per-image weight gradients (B, K, CRS) */
static size_t dw_parts_have;

static size_t cu_conv2d_workspace(const dt_conv_shape *s)
{
    return (size_t)s->B * s->C * s->R * s->S * s->P * s->Q; /* cols (B, CRS, PQ) */
}
/* with cuDNN: its own workspace (backend/cudnn.c), none of the engine's */
static size_t cu_conv2d_workspace_fp32(const dt_conv_shape *s)
{
    return cudnn_active() ? 0 : cu_conv2d_workspace(s);
}

static int cu_conv2d_dx_accumulates(const dt_conv_shape *s) { return 1; }

/* The forward's columns stay for the backward, instead of a second im2col,
 * where one conv's take at most 1/64 of the device's memory (2.2 GB of an
 * H200, 250 MB of a 16 GB T4; resnet20_gn's convs at batch 128 take 75 MB
 * each, 1.4 GB for the 19). */
static int cu_conv2d_keep_cols(const dt_conv_shape *s)
{
    const size_t mem = cuda_device_memory();
    return mem > 0 && cu_conv2d_workspace(s) * sizeof(float) <= mem / 64;
}
static int cu_conv2d_keep_cols_fp32(const dt_conv_shape *s)
{
    return !cudnn_active() && cu_conv2d_keep_cols(s);
}

static void conv2d_forward(gemm_fn *mm, const dt_conv_shape *s, const float *x, const float *w,
                           const float *b, float *y, float *cols)
{
    KERNEL_OK(cuda_im2col(s, x, cols, ST));
    const dt_gemm g = gemm_conv_forward(s);
    mm(&g, cols, w, zero, y);
    if (b)
        KERNEL_OK(cuda_bias_add(s->B, s->K, (size_t)s->P * s->Q, b, y, ST));
}

/* cols: x lowered (the forward's columns, conv2d_backward_kept) */
static void conv2d_backward_cols(gemm_fn *mm, const dt_conv_shape *s, const float *w,
                                 const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                                 float *cols)
{
    // every image's weight gradient in one batched GEMM, then summed in image
    // order (instead of B GEMMs accumulating one by one: 2,432 launches a step
    // for resnet20_gn at batch 128)
    dt_gemm gw = gemm_conv_dw(s);
    const size_t nw = (size_t)gw.m * gw.n;
    gw.batch = s->B;
    gw.sc = (long long)nw;
    float *parts = scratch(&dw_parts, &dw_parts_have, (size_t)s->B * nw * sizeof(float));
    mm(&gw, cols, dy, zero, parts);
    KERNEL_OK(cuda_sum_images(s->B, nw, parts, dw, ST));
    if (db)
        bias_grad(s->B, s->K, (size_t)s->P * s->Q, dy, db);
    if (!dx)
        return;
    // dcols into the same workspace, then gathered into dx
    const dt_gemm gc = gemm_conv_dcols(s);
    mm(&gc, dy, w, zero, cols);
    KERNEL_OK(cuda_col2im(s, cols, dx, !dx_fresh, ST));
}

static void cu_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                              const float *b, float *y, float *cols)
{
    if (!cudnn_active()) {
        conv2d_forward(gemm, s, x, w, b, y, cols);
        return;
    }
    cudnn_conv_forward(s, x, w, y);
    if (b)
        KERNEL_OK(cuda_bias_add(s->B, s->K, (size_t)s->P * s->Q, b, y, ST));
}
static void cu16_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                                const float *b, float *y, float *cols)
{
    conv2d_forward(gemm16, s, x, w, b, y, cols);
}

static void cu_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                               const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                               float *cols)
{
    if (cudnn_active()) {
        cudnn_conv_backward_filter(s, x, dy, dw);
        if (db)
            bias_grad(s->B, s->K, (size_t)s->P * s->Q, dy, db);
        if (dx)
            cudnn_conv_backward_data(s, w, dy, dx_fresh ? 0.0f : 1.0f, dx);
        return;
    }
    KERNEL_OK(cuda_im2col(s, x, cols, ST)); // the workspace is not the forward's: lower x again
    conv2d_backward_cols(gemm, s, w, dy, dx, dx_fresh, dw, db, cols);
}
static void cu16_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                                 const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                                 float *cols)
{
    KERNEL_OK(cuda_im2col(s, x, cols, ST));
    conv2d_backward_cols(gemm16, s, w, dy, dx, dx_fresh, dw, db, cols);
}

/* x: lowered in cols by the forward */
static void cu_conv2d_backward_kept(const dt_conv_shape *s, const float *x, const float *w,
                                    const float *dy, float *dx, int dx_fresh, float *dw,
                                    float *db, float *cols)
{
    (void)x;
    conv2d_backward_cols(gemm, s, w, dy, dx, dx_fresh, dw, db, cols);
}
static void cu16_conv2d_backward_kept(const dt_conv_shape *s, const float *x, const float *w,
                                      const float *dy, float *dx, int dx_fresh, float *dw,
                                      float *db, float *cols)
{
    (void)x;
    conv2d_backward_cols(gemm16, s, w, dy, dx, dx_fresh, dw, db, cols);
}

/* ---- pooling, activations, dropout, add -------------------------------- */

static void cu_maxpool_forward(const dt_pool_shape *s, const float *x, float *y, int32_t *arg)
{
    KERNEL_OK(cuda_maxpool_forward(s->B, s->C, s->H, s->W, s->k, s->stride, s->P, s->Q, x, y,
                                   arg, ST));
}
/* The CUDA kernels add into their input gradients: a fresh one is zeroed first. */
static void cu_maxpool_backward(const dt_pool_shape *s, const float *dy, const int32_t *arg,
                                float *dx, int dx_fresh)
{
    if (dx && dx_fresh)
        cu_zero(dx, (size_t)s->B * s->C * s->H * s->W * sizeof(float));
    KERNEL_OK(cuda_maxpool_backward(s->B, s->C, s->H, s->W, s->k, s->stride, s->P, s->Q, dy,
                                    arg, dx, ST));
}
static void cu_avgpool_forward(int B, int C, int HW, int blk, const float *x, float *y)
{
    KERNEL_OK(cuda_avgpool_forward(B, C, HW, x, y, ST));
}
static void cu_avgpool_backward(int B, int C, int HW, int blk, const float *dy, float *dx)
{
    KERNEL_OK(cuda_avgpool_backward(B, C, HW, dy, dx, ST));
}
static void cu_relu_forward(size_t n, const float *x, float *y)
{
    KERNEL_OK(cuda_relu_forward(n, x, y, ST));
}
static void cu_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    KERNEL_OK(cuda_relu_backward(n, y, dy, dx, ST));
}
static void cu_relu_backward_inplace(size_t n, const float *y, float *d)
{
    KERNEL_OK(cuda_relu_backward_inplace(n, y, d, ST));
}
static void cu_sigmoid_forward(size_t n, const float *x, float *y)
{
    KERNEL_OK(cuda_sigmoid_forward(n, x, y, ST));
}
static void cu_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx)
{
    KERNEL_OK(cuda_sigmoid_backward(n, y, dy, dx, ST));
}
static void cu_dropout_forward(size_t n, float p, uint64_t key, const float *x, float *y,
                               float *mask)
{
    KERNEL_OK(cuda_dropout_forward(n, p, key, x, y, mask, ST));
}
static void cu_dropout_forward_keyed(size_t n, float p, const uint64_t *key, const float *x,
                                     float *y, float *mask)
{
    KERNEL_OK(cuda_dropout_forward_keyed(n, p, key, x, y, mask, ST));
}
static void cu_dropout_backward(size_t n, const float *mask, const float *dy, float *dx,
                                int dx_fresh)
{
    if (dx && dx_fresh)
        cu_zero(dx, n * sizeof(float));
    KERNEL_OK(cuda_dropout_backward(n, mask, dy, dx, ST));
}
static void cu_add_forward(size_t n, const float *a, const float *b, float *y)
{
    KERNEL_OK(cuda_add_forward(n, a, b, y, ST));
}
static void cu_add_backward(size_t n, const float *dy, float *da, float *db)
{
    KERNEL_OK(cuda_add_backward(n, dy, da, db, ST));
}

/* ---- GroupNorm ---------------------------------------------------------- */

static void *gn_work;
static size_t gn_work_have;

static void cu_groupnorm_forward(int B, int C, int HW, int G, int blk, const float *x,
                                 const float *gamma, const float *beta, const float *skip,
                                 int relu, float *y, float *mean, float *rstd)
{
    float *lanes = scratch(&gn_work, &gn_work_have, 8 * (size_t)B * C * sizeof(float));
    KERNEL_OK(cuda_groupnorm_forward(B, C, HW, G, x, gamma, beta, skip, relu, y, mean, rstd, lanes,
                                     ST));
}
static void cu_groupnorm_backward(int B, int C, int HW, int G, int blk, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *y, const float *dy, float *dx, float *dskip,
                                  int dx_fresh, int dskip_fresh, float *dgamma, float *dbeta)
{
    const size_t n = (size_t)B * C * HW * sizeof(float);
    if (dx && dx_fresh)
        cu_zero(dx, n);
    if (dskip && dskip_fresh)
        cu_zero(dskip, n);
    double *work = scratch(&gn_work, &gn_work_have,
                           (2 * (size_t)B * C + 2 * (size_t)B * G) * sizeof(double) +
                               8 * (size_t)B * C * sizeof(float));
    KERNEL_OK(cuda_groupnorm_backward(B, C, HW, G, x, gamma, mean, rstd, y, dy, dx, dskip, dgamma,
                                      dbeta, work, ST));
}

/* ---- the flat vectors (modes with device_vectors) ------------------------ */

static void cu_flat_sgd(size_t n, float momentum, float weight_decay, int nesterov, float lr,
                        float *x, const float *g, float *v)
{
    KERNEL_OK(cuda_sgd_step(n, momentum, weight_decay, nesterov != 0, lr, x, g, v, ST));
}
static void cu_flat_scale(size_t n, float a, float *x)
{
    KERNEL_OK(cuda_flat_scale(n, a, x, ST));
}
static void cu_flat_diff_scale(size_t n, float a, const float *x, const float *c, float *out)
{
    KERNEL_OK(cuda_flat_diff_scale(n, a, x, c, out, ST));
}
static void cu_flat_toward(size_t n, float beta, float inv, const float *mean, float *c)
{
    KERNEL_OK(cuda_flat_toward(n, beta, inv, mean, c, ST));
}
static void cu_flat_sub(size_t n, const float *d, float *x)
{
    KERNEL_OK(cuda_flat_sub(n, d, x, ST));
}

/* one kernel per slot, in ascending order: per element the CPU's sum */
static void cu_flat_sum_slots(size_t n, int k, const float *c, const float *slots, float *out)
{
    if (k == 0)
        cu_zero(out, n * sizeof *out);
    for (int j = 0; j < k; j++) {
        const float *x = slots + (size_t)j * n;
        if (c)
            KERNEL_OK(cuda_flat_axpy_term(n, c[j], x, out, j == 0, ST));
        else
            KERNEL_OK(cuda_flat_sum_term(n, x, out, j == 0, ST));
    }
}
static void cu_flat_scale_copy(size_t n, float a, float *x, float *y)
{
    KERNEL_OK(cuda_flat_scale_copy(n, a, x, y, ST));
}
static void cu_flat_add(size_t n, const float *d, float *x)
{
    KERNEL_OK(cuda_flat_add(n, d, x, ST));
}
static void cu_flat_div(size_t n, const float *x, const float *w, float *z)
{
    KERNEL_OK(cuda_flat_div(n, x, w, z, ST));
}
static void cu_flat_ax_plus(size_t n, float a, const float *x, float *y)
{
    KERNEL_OK(cuda_flat_ax_plus(n, a, x, y, ST));
}

/* AdamW's segment table in device memory: uploaded when the host's table
 * differs from the one last uploaded (once per run) */
static dt_adamw_seg *segs_dev, *segs_up;
static int segs_n;

static void cu_flat_adamw(size_t n, const dt_adamw_k *k, const dt_adamw_seg *segs, int nseg,
                          float *x, const float *g, float *m, float *v)
{
    const size_t bytes = (size_t)nseg * sizeof *segs;
    if (nseg != segs_n || memcmp(segs, segs_up, bytes) != 0) {
        if (segs_dev)
            cu_free(segs_dev);
        free(segs_up);
        segs_dev = cu_alloc(bytes);
        segs_up = malloc(bytes ? bytes : 1);
        if (!segs_up)
            DT_FATAL("out of memory for %d AdamW segments", nseg);
        memcpy(segs_up, segs, bytes);
        segs_n = nseg;
        cu_to_device(segs_dev, segs, bytes);
    }
    KERNEL_OK(cuda_adamw_step(n, *k, segs_dev, nseg, x, g, m, v, ST));
}

static void *clip_dev; /* DT_CLIP_LANES doubles, then the factor */
static size_t clip_have;

static void cu_flat_clip(size_t n, double max_norm, float *g)
{
    double *lanes = scratch(&clip_dev, &clip_have, DT_CLIP_LANES * sizeof(double) + sizeof(float));
    KERNEL_OK(cuda_clip(n, max_norm, g, lanes, (float *)(lanes + DT_CLIP_LANES), ST));
}

/* ---- the GPT's layers (nn/cuda/gpt.h) ------------------------------------- */

static void cu_embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                                 const float *wpe, float p, const uint64_t *key, float *x)
{
    KERNEL_OK(cuda_embedding_forward(B, T, C, tok, wte, wpe, p, key, x, ST));
}
static void cu_layernorm_forward(int N, int C, const float *x, const float *g, const float *b,
                                 float *y, float *mean, float *rstd)
{
    KERNEL_OK(cuda_layernorm_forward(N, C, x, g, b, y, mean, rstd, ST));
}
static void cu_layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                          const uint64_t *key, const float *g, const float *b,
                                          float *xo, float *y, float *mean, float *rstd)
{
    KERNEL_OK(cuda_layernorm_residual_forward(N, C, x, r, p, key, g, b, xo, y, mean, rstd, ST));
}

static void cu_embedding_backward(int B, int T, int C, const int32_t *tok, const float *dx,
                                  float p, const uint64_t *key, float *dwte, float *dwpe)
{
    KERNEL_OK(cuda_embedding_backward(B, T, C, tok, dx, p, key, dwte, dwpe, ST));
}
static void cu_layernorm_apply(int N, int C, const float *x, const float *mean,
                               const float *rstd, const float *g, const float *b, float *y)
{
    KERNEL_OK(cuda_layernorm_apply(N, C, x, mean, rstd, g, b, y, ST));
}
static void cu_branch_dropout_grad(size_t n, const float *dres, float p, const uint64_t *key,
                                   float *d)
{
    KERNEL_OK(cuda_dropout_grad(n, dres, p, key, d, ST));
}
static void cu_layernorm_backward(int N, int C, const float *x, const float *mean,
                                  const float *rstd, const float *g, const float *dy, float *dx,
                                  int accumulate, float *dg, float *db)
{
    KERNEL_OK(cuda_layernorm_backward(N, C, x, mean, rstd, g, dy, dx, accumulate, dg, db, ST));
}
static void *att_D;
static size_t att_D_have;

static void cu_attention_forward(int B, int T, int C, int NH, const float *qkv, float *y,
                                 float *lse, float p, const uint64_t *key)
{
    KERNEL_OK(cuda_attention_forward(B, T, C, NH, qkv, y, lse, p, key, ST));
}
static void cu_attention_backward(int B, int T, int C, int NH, const float *qkv,
                                  const float *lse, const float *dy, float p, const uint64_t *key,
                                  float *dqkv)
{
    float *D = scratch(&att_D, &att_D_have, (size_t)B * NH * T * sizeof(float));
    KERNEL_OK(cuda_attention_backward(B, T, C, NH, qkv, lse, dy, p, key, dqkv, D, ST));
}
static void cu_gelu_forward(size_t n, const float *x, float *y)
{
    KERNEL_OK(cuda_gelu_forward(n, x, y, ST));
}
static void cu_gelu_forward_deriv(size_t n, const float *x, float *y, float *d)
{
    KERNEL_OK(cuda_gelu_forward_deriv(n, x, y, d, ST));
}
static void cu_gelu_backward_deriv(size_t n, const float *d, float *dy)
{
    KERNEL_OK(cuda_gelu_backward_deriv(n, d, dy, ST));
}

/* The loss rows d (n doubles, then n int32: DT_XENT_ROWS_BYTES(n)) in host
 * memory, for the host to sum them in the CPU's order (nn/cuda/xent.h);
 * the caller frees */
static double *rows_to_host(const void *d, int n)
{
    const size_t bytes = DT_XENT_ROWS_BYTES(n);
    double *h = malloc(bytes > 0 ? bytes : 1);
    if (!h)
        DT_FATAL("out of memory for %d loss rows", n);
    cu_to_host(h, d, bytes);
    return h;
}

static void cu_xent_seq_rows(int N, int V, const float *logits, const int32_t *targets,
                             float *lse, void *rows)
{
    KERNEL_OK(cuda_xent_seq_rows(N, V, logits, targets, lse, (double *)rows,
                                 (int32_t *)((char *)rows + (size_t)N * sizeof(double)), ST));
}
static void cu_xent_seq_backward(int N, int V, const float *logits, const float *lse,
                                 const int32_t *targets, float scale, float *d)
{
    KERNEL_OK(cuda_xent_seq_backward(N, V, logits, lse, targets, scale, d, ST));
}

/* ---- loss ----------------------------------------------------------------- */

static void *xent_dev;
static size_t xent_have;

static void cu_softmax_xent_rows(int B, int K, const float *logits, const int32_t *labels,
                                 float *dlogits, void *rows)
{
    KERNEL_OK(cuda_softmax_xent_rows(B, K, logits, labels, dlogits, (double *)rows,
                                     (int32_t *)((char *)rows + (size_t)B * sizeof(double)), ST));
}

/* The rows' losses and hits summed on the host in sample order, as the CPU
 * backend sums them (nn/cuda/xent.h: softmax_xent_mean). */
static double cu_softmax_xent_sum(int B, int K, const void *rows, int *correct)
{
    double *h = rows_to_host(rows, B);
    int64_t hits;
    int bad;
    const double mean = softmax_xent_mean(B, h, (const int32_t *)(h + B), &hits, &bad);
    free(h);
    if (bad >= 0)
        dt_err_set("xent: the label of sample %d is outside [0, %d)", bad, K);
    if (correct)
        *correct = (int)hits;
    return mean;
}

static double cu_softmax_xent(int B, int K, const float *logits, const int32_t *labels,
                              float *dlogits, int *correct)
{
    void *rows = scratch(&xent_dev, &xent_have, DT_XENT_ROWS_BYTES(B));
    cu_softmax_xent_rows(B, K, logits, labels, dlogits, rows);
    return cu_softmax_xent_sum(B, K, rows, correct);
}

/* The entries both tables share: everything but the products' precision */
#define CUDA_SHARED \
    .cblock = 0, .device = 1, \
    .mem_alloc = cu_alloc, .mem_free = cu_free, .mem_zero = cu_zero, .mem_copy = cu_copy, \
    .mem_peak = cu_mem_peak, \
    .to_backend = cu_to_device, .to_host = cu_to_host, \
    .host_alloc = cuda_host_alloc, .host_free = cuda_host_free, \
    .flat_sgd = cu_flat_sgd, .flat_scale = cu_flat_scale, \
    .flat_diff_scale = cu_flat_diff_scale, .flat_toward = cu_flat_toward, .flat_sub = cu_flat_sub, \
    .flat_scale_copy = cu_flat_scale_copy, .flat_add = cu_flat_add, .flat_div = cu_flat_div, \
    .flat_sum_slots = cu_flat_sum_slots, .flat_ax_plus = cu_flat_ax_plus, \
    .flat_adamw = cu_flat_adamw, .flat_clip = cu_flat_clip, \
    .embedding_forward = cu_embedding_forward, .layernorm_forward = cu_layernorm_forward, \
    .embedding_backward = cu_embedding_backward, .layernorm_apply = cu_layernorm_apply, \
    .branch_dropout_grad = cu_branch_dropout_grad, \
    .layernorm_backward = cu_layernorm_backward, .attention_forward = cu_attention_forward, \
    .attention_backward = cu_attention_backward, \
    .gelu_forward = cu_gelu_forward, .gelu_forward_deriv = cu_gelu_forward_deriv, \
    .gelu_backward_deriv = cu_gelu_backward_deriv, .xent_seq_rows = cu_xent_seq_rows, \
    .xent_seq_backward = cu_xent_seq_backward, \
    .layernorm_residual_forward = cu_layernorm_residual_forward, \
    .conv2d_dx_accumulates = cu_conv2d_dx_accumulates, \
    .maxpool_forward = cu_maxpool_forward, .maxpool_backward = cu_maxpool_backward, \
    .avgpool_forward = cu_avgpool_forward, .avgpool_backward = cu_avgpool_backward, \
    .relu_forward = cu_relu_forward, .relu_backward = cu_relu_backward, \
    .relu_backward_inplace = cu_relu_backward_inplace, \
    .sigmoid_forward = cu_sigmoid_forward, .sigmoid_backward = cu_sigmoid_backward, \
    .dropout_forward = cu_dropout_forward, .dropout_backward = cu_dropout_backward, \
    .dropout_forward_keyed = cu_dropout_forward_keyed, \
    .softmax_xent_rows = cu_softmax_xent_rows, .softmax_xent_sum = cu_softmax_xent_sum, \
    .graph_begin = cuda_graph_begin, .graph_end = cuda_graph_end, \
    .graph_launch = cuda_graph_launch, .graph_free = cuda_graph_free, \
    .graph_epoch = cuda_graph_epoch, \
    .groupnorm_forward = cu_groupnorm_forward, .groupnorm_backward = cu_groupnorm_backward, \
    .add_forward = cu_add_forward, .add_backward = cu_add_backward, \
    .softmax_xent = cu_softmax_xent

static const dt_backend cuda = {
    .name = "cuda", .precision = DT_PREC_FP32, CUDA_SHARED,
    .conv2d_workspace = cu_conv2d_workspace_fp32, .conv2d_keep_cols = cu_conv2d_keep_cols_fp32,
    .linear_forward = cu_linear_forward, .linear_backward = cu_linear_backward,
    .conv2d_forward = cu_conv2d_forward, .conv2d_backward = cu_conv2d_backward,
    .conv2d_backward_kept = cu_conv2d_backward_kept,
};

/* compute.precision = bf16: the linear and convolution products in bf16 (gemm16) */
static const dt_backend cuda_bf16 = {
    .name = "cuda", .precision = DT_PREC_BF16, CUDA_SHARED,
    .conv2d_workspace = cu_conv2d_workspace, .conv2d_keep_cols = cu_conv2d_keep_cols,
    .linear_forward = cu16_linear_forward, .linear_backward = cu16_linear_backward,
    .conv2d_forward = cu16_conv2d_forward, .conv2d_backward = cu16_conv2d_backward,
    .conv2d_backward_kept = cu16_conv2d_backward_kept,
};

const dt_backend *backend_cuda(void) { return &cuda; }
const dt_backend *backend_cuda_bf16(void) { return &cuda_bf16; }
