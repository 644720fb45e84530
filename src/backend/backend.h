/* Compute backend: the kernels a network needs, behind one table.
 *
 * The network engine (nn/net.c) and the models never call a kernel directly;
 * they go through a dt_backend, so a CUDA backend (cuBLAS/cuDNN) slots in by
 * filling the same table. All tensors are float, NCHW, contiguous.
 *
 * Conventions shared by every backward kernel:
 *  - input gradients ACCUMULATE (dx += ...), because a tensor may feed several
 *    consumers (the skip path of a residual block); the engine zeroes them;
 *  - parameter gradients are OVERWRITTEN (dW = ...), each parameter having
 *    exactly one consumer;
 *  - a NULL dx means "no input gradient needed" (the first layer) and the
 *    kernel skips that work.
 *
 * Activation layouts. A (B, C, H, W) activation is stored either plain (NCHW)
 * or channel-blocked, "nChw16c": (B, C/16, H, W, 16), the layout oneDNN's
 * AVX-512 convolutions read and write without a reorder. A backend whose
 * cblock is 16 may be handed blocked tensors (C a multiple of 16) wherever a
 * kernel takes a layout flag (`blk`: 0 plain, 16 blocked); element-wise
 * kernels do not care. The engine decides each node's layout (nn/net.c).
 */
#ifndef DT_BACKEND_H
#define DT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "nn/cuda/adamw.h" /* dt_adamw_seg, dt_adamw_k */

typedef struct dt_conv_shape {
    int B;          /* batch */
    int C, H, W;    /* input channels, height, width */
    int K;          /* output channels */
    int R, S;       /* kernel height, width */
    int stride, pad;
    int P, Q;       /* output height, width: (H + 2 pad - R) / stride + 1 */
    int xblk, yblk; /* layout of x (and dx) and of y (and dy): 0 plain, 16 blocked */
} dt_conv_shape;

typedef struct dt_pool_shape {
    int B, C, H, W;
    int k, stride;  /* window k x k, no padding */
    int P, Q;       /* output height, width: (H - k) / stride + 1 */
    int blk;        /* layout of x and dx (0 plain, 16 blocked); y is always plain */
} dt_pool_shape;

/* Precision of a backend's matrix work (compute.precision). */
enum { DT_PREC_FP32 = 0, DT_PREC_BF16 = 1 };

/* The passes of conv2d_pass_workspace. */
enum { DT_CONV_WORK_FORWARD, DT_CONV_WORK_BACKWARD, DT_CONV_WORK_BACKWARD_NO_DX };

/* The bytes of softmax_xent_rows's rows for B samples */
#define DT_XENT_ROWS_BYTES(B) ((size_t)(B) * (sizeof(double) + sizeof(int32_t)))

typedef struct dt_backend {
    const char *name;
    int cblock;     /* 16: convolutions produce channel-blocked outputs; 0: all plain */
    int device;     /* 0: tensors in host memory; 1: in the device's memory (CUDA) */
    /* DT_PREC_FP32, or DT_PREC_BF16: the linear and conv kernels round their
     * inputs (x, W, dy) to bf16 and accumulate in fp32 (backend/cpu/gemm_bf16.h); every
     * tensor argument stays float, and every other kernel is the fp32 one. */
    int precision;

    /* The memory every tensor argument below lives in: host memory for the CPU
     * backends, device memory for CUDA. mem_alloc returns a zero-filled block
     * (64-byte aligned on the host; one cudaMalloc on the device) and never
     * NULL (a failure is fatal, with the library's message). */
    void *(*mem_alloc)(size_t bytes);
    void (*mem_free)(void *p);
    void (*mem_zero)(void *p, size_t bytes);
    /* Optional (NULL: not counted): the most bytes of the backend's memory
     * this process has held at once (the device backends: every allocation
     * of dtrain's on the device, its libraries' workspaces included) */
    size_t (*mem_peak)(void);
    /* dst <- src, both in the backend's memory */
    void (*mem_copy)(void *dst, const void *src, size_t bytes);
    /* between host memory and the backend's (the CPU: memcpy); synchronous */
    void (*to_backend)(void *dst, const void *host_src, size_t bytes);
    void (*to_host)(void *host_dst, const void *src, size_t bytes);
    /* Host memory for staging the copies above: page-locked on CUDA (copies
     * from it run asynchronously at full speed), ordinary elsewhere;
     * zero-filled, never NULL. */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);

    /* Optional (NULL: none): the floats of scratch the linear kernels need
     * for (B, in, out), which the engine lends them as work (the bf16
     * kernels' copies of x, W and dy); work is NULL where there is none. */
    size_t (*linear_workspace)(int B, int in, int out);
    /* y (B, out) = x (B, in) W^T + b;  W (out, in), b (out) or NULL */
    void (*linear_forward)(int B, int in, int out, const float *x, const float *W,
                           const float *b, float *y, float *work);
    /* dx (B, in) += dy W;  dW (out, in) = dy^T x;  db (out) = sum_B dy */
    void (*linear_backward)(int B, int in, int out, const float *x, const float *W,
                            const float *dy, float *dx, float *dW, float *db, float *work);

    /* Floats of scratch the conv kernels need for shape s (im2col etc.). */
    size_t (*conv2d_workspace)(const dt_conv_shape *s);
    /* Optional (NULL: conv2d_workspace for every pass): the floats one pass
     * needs, at most conv2d_workspace, pass DT_CONV_WORK_FORWARD, or
     * DT_CONV_WORK_BACKWARD when the engine asks for dx, or
     * DT_CONV_WORK_BACKWARD_NO_DX when it passes dx = NULL. */
    size_t (*conv2d_pass_workspace)(const dt_conv_shape *s, int pass);
    /* Optional (NULL: never): 1 when the backend would rather keep the
     * forward's workspace (its lowered columns) for the backward of shape s
     * than recompute it. Where it says so when the net is planned, the
     * engine gives the forward and the backward one workspace, live from the
     * forward to the backward, and calls conv2d_backward_kept instead of
     * conv2d_backward (nn/net_plan.c, nn/net.c). */
    int (*conv2d_keep_cols)(const dt_conv_shape *s);
    /* conv2d_backward with work as the forward of the same batch left it */
    void (*conv2d_backward_kept)(const dt_conv_shape *s, const float *x, const float *w,
                                 const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                                 float *work);
    /* Whether the kernel for shape s can add its input gradient into a dx that
     * already holds values (dx_fresh = 0) by itself. Where it cannot, the
     * engine never asks it to: it lends a free gradient buffer as a fresh dx
     * and adds that in (nn/net_plan.c). */
    int (*conv2d_dx_accumulates)(const dt_conv_shape *s);
    /* y (B, K, P, Q) = conv(x (B, C, H, W), W (K, C, R, S)) + b (K) or NULL;
     * W and b are plain whatever the activations' layout. */
    void (*conv2d_forward)(const dt_conv_shape *s, const float *x, const float *w,
                           const float *b, float *y, float *work);
    /* dx_fresh: dx holds nothing yet (the engine has not zeroed it), so the
     * kernel writes dx = ... instead of dx += ... (always 1 where
     * conv2d_dx_accumulates says 0) */
    void (*conv2d_backward)(const dt_conv_shape *s, const float *x, const float *w,
                            const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                            float *work);

    /* y (B, C, P, Q) = max over windows; arg (B, C, P, Q) = flat index into the
     * (H, W) plane of the winning input, used by backward. */
    void (*maxpool_forward)(const dt_pool_shape *s, const float *x, float *y, int32_t *arg);
    /* dx += the routed dy; with dx_fresh (as the conv's) dx = the routed dy,
     * zero where no window's maximum fell */
    void (*maxpool_backward)(const dt_pool_shape *s, const float *dy, const int32_t *arg,
                             float *dx, int dx_fresh);

    /* y (B, C) = mean over (H, W) of x (B, C, H, W) in layout blk */
    void (*avgpool_forward)(int B, int C, int HW, int blk, const float *x, float *y);
    void (*avgpool_backward)(int B, int C, int HW, int blk, const float *dy, float *dx);

    /* Element-wise on n floats. Backward uses the forward OUTPUT y. relu_forward
     * must allow y == x (the engine runs ReLU in place when it can). */
    void (*relu_forward)(size_t n, const float *x, float *y);
    void (*relu_backward)(size_t n, const float *y, const float *dy, float *dx);
    /* d = d * (y > 0) in place: the ReLU backward when the engine gives the
     * input's gradient the output gradient's buffer (nn/net_plan.c) */
    void (*relu_backward_inplace)(size_t n, const float *y, float *d);
    void (*sigmoid_forward)(size_t n, const float *x, float *y);
    void (*sigmoid_backward)(size_t n, const float *y, const float *dy, float *dx);

    /* Inverted dropout: mask[i] = (u(key, i) >= p) / (1 - p) with the
     * counter-based u = rng_hash_uniform, y = x * mask. */
    void (*dropout_forward)(size_t n, float p, uint64_t key, const float *x, float *y,
                            float *mask);
    /* dx += dy * mask; with dx_fresh dx = 0 + dy * mask */
    void (*dropout_backward)(size_t n, const float *mask, const float *dy, float *dx,
                             int dx_fresh);

    /* GroupNorm over (B, C, HW) in layout blk with G groups, eps 1e-5, affine
     * gamma/beta (C), fused with what follows it in a residual block:
     *   y = [relu](gn(x) [+ skip])      (skip NULL: none; relu 0/1)
     * mean, rstd (B, G) are saved for backward. Backward takes the fused
     * output y when relu was applied (else NULL) and dy of that output:
     *   g = relu ? dy * (y > 0) : dy;  dskip += g (dskip may be NULL);
     *   dx += the GroupNorm adjoint of g;  dgamma, dbeta = its parameter gradients.
     * dx_fresh / dskip_fresh: that buffer holds nothing yet and is written
     * (dx = ..., dskip = g) instead of added to. */
    void (*groupnorm_forward)(int B, int C, int HW, int G, int blk, const float *x,
                              const float *gamma, const float *beta, const float *skip,
                              int relu, float *y, float *mean, float *rstd);
    void (*groupnorm_backward)(int B, int C, int HW, int G, int blk, const float *x,
                               const float *gamma, const float *mean, const float *rstd,
                               const float *y, const float *dy, float *dx, float *dskip,
                               int dx_fresh, int dskip_fresh, float *dgamma, float *dbeta);

    /* Optional (NULL / 0 on the fp32 backends): activations kept for the
     * backward in bf16 (nn/net_plan.c: a span of half the size from the
     * last forward reader to the first backward one). Only where every
     * backward reader takes no more than bf16 of them: a conv whose weight
     * gradient reads x only rounded to bf16 (conv2d_reads_x_bf16), a linear
     * layer whose kernels round x (linear_reads_x_bf16), a ReLU mask.
     * to_bf16 rounds to nearest even (backend/cpu/gemm_bf16.h), from_bf16 widens
     * exactly; the ReLU backward takes the stored output in bf16:
     * dx += dy * (y > 0), d = d * (y > 0) in place; the ReLU that writes an
     * activation kept in bf16 makes the copy in the same pass:
     * y = relu(x) (y == x allowed), y16 = y rounded. */
    int (*conv2d_reads_x_bf16)(const dt_conv_shape *s);
    int (*linear_reads_x_bf16)(int in, int out);
    void (*to_bf16)(size_t n, const float *x, uint16_t *y);
    void (*from_bf16)(size_t n, const uint16_t *y, float *x);
    void (*relu_backward_bf16)(size_t n, const uint16_t *y, const float *dy, float *dx);
    void (*relu_backward_inplace_bf16)(size_t n, const uint16_t *y, float *d);
    void (*relu_forward_bf16)(size_t n, const float *x, float *y, uint16_t *y16);

    /* y = a + b (n floats); backward: da += dy, db += dy (either may be NULL) */
    void (*add_forward)(size_t n, const float *a, const float *b, float *y);
    void (*add_backward)(size_t n, const float *dy, float *da, float *db);

    /* Mean softmax cross-entropy of logits (B, K) against labels (B).
     * Returns the mean loss; writes dlogits (B, K) = (softmax - onehot) / B
     * (overwritten, may be NULL) and *correct = number of argmax hits. */
    double (*softmax_xent)(int B, int K, const float *logits, const int32_t *labels,
                           float *dlogits, int *correct);

    /* Optional (NULL: none; the device backends have them): a training step's
     * kernels with nothing read back between them, so that they can be
     * recorded once and replayed (the graph_* members below).
     * softmax_xent in two halves: softmax_xent_rows queues dlogits and each
     * row's loss and hit into rows (DT_XENT_ROWS_BYTES(B) of backend memory:
     * B doubles, a NaN where the label is outside [0, K), then B int32);
     * softmax_xent_sum reads them back and returns what softmax_xent would
     * have, summed in the same order. dropout_forward_keyed is
     * dropout_forward with the key read from backend memory when the kernel
     * runs, not when it is queued. */
    void (*softmax_xent_rows)(int B, int K, const float *logits, const int32_t *labels,
                              float *dlogits, void *rows);
    double (*softmax_xent_sum)(int B, int K, const void *rows, int *correct);
    void (*dropout_forward_keyed)(size_t n, float p, const uint64_t *key, const float *x,
                                  float *y, float *mask);
    /* Optional (NULL: none): CUDA graphs. Between graph_begin and graph_end
     * the backend records its work instead of running it; graph_end returns
     * the record, ready to run with graph_launch (which queues it and
     * returns), or NULL after dt_err_set() where recording failed. A record
     * names the addresses it was made with: graph_epoch changes whenever
     * the backend's own scratch memory moves, and a record made under an
     * older epoch must not be launched again. */
    void (*graph_begin)(void);
    void *(*graph_end)(void);
    void (*graph_launch)(void *graph);
    void (*graph_free)(void *graph);
    uint64_t (*graph_epoch)(void);

    /* The flat vectors' arithmetic, for the modes whose vectors live in the
     * backend's memory (dt_algo.device_vectors, run/engine.c).
     * The SGD step of optim/sgd.h on x, g, v (n): g is not modified, v is
     * unused when momentum is 0. */
    void (*flat_sgd)(size_t n, float momentum, float weight_decay, int nesterov, float lr,
                     float *x, const float *g, float *v);
    /* x (n) <- a x */
    void (*flat_scale)(size_t n, float a, float *x);
    /* EASGD (algo/easgd.c), all (n): out <- a (x - c); c <- c + beta (mean inv - c);
     * x <- x - d */
    void (*flat_diff_scale)(size_t n, float a, const float *x, const float *c, float *out);
    void (*flat_toward)(size_t n, float beta, float inv, const float *mean, float *c);
    void (*flat_sub)(size_t n, const float *d, float *x);
    /* The gossip modes (algo/gossip.c, algo/dpsgd.c), all (n):
     * push-sum share: x <- a x, y <- x (the message);  x <- x + d;
     * z <- x / w[0], w (1) in the backend's memory (the push-sum weight) */
    void (*flat_scale_copy)(size_t n, float a, float *x, float *y);
    void (*flat_add)(size_t n, const float *d, float *x);
    void (*flat_div)(size_t n, const float *x, const float *w, float *z);
    /* out <- sum over j < k, ascending, of c[j] slots[j] (c NULL: of slots[j]),
     * summed from +0 (k = 0: out = 0); slots (k, n) contiguous, c (k) in
     * host memory */
    void (*flat_sum_slots)(size_t n, int k, const float *c, const float *slots, float *out);
    /* y <- a y + x */
    void (*flat_ax_plus)(size_t n, float a, const float *x, float *y);
    /* One AdamW step (optim/adamw.h) on x, g, m, v (n) with the step's float
     * scalars k (adamw_scalars); segs (nseg, host memory) sorted, contiguous
     * from 0 to n, say which elements decay. */
    void (*flat_adamw)(size_t n, const dt_adamw_k *k, const dt_adamw_seg *segs, int nseg, float *x,
                       const float *g, float *m, float *v);
    /* The GPT's layer passes (nn/transformer.h's equations and shapes; fp32,
     * no bf16 copy), optional while the GPT is not on every backend (NULL:
     * none): the token + position embedding with its dropout, LayerNorm, the
     * residual add fused with the LayerNorm after it, the embeddings'
     * gradients, LayerNorm from kept statistics and its backward, a residual
     * branch's dropout gradient, the causal attention (the probabilities recomputed in the backward,
     * never kept), GELU and the cross-entropy. A dropout key is read from
     * backend memory when the kernel runs (so a recorded step takes the key
     * written before each launch), and only where p > 0 (else key may be
     * NULL). */
    void (*embedding_forward)(int B, int T, int C, const int32_t *tok, const float *wte,
                              const float *wpe, float p, const uint64_t *key, float *x);
    void (*layernorm_forward)(int N, int C, const float *x, const float *g, const float *b,
                              float *y, float *mean, float *rstd);
    void (*layernorm_residual_forward)(int N, int C, const float *x, const float *r, float p,
                                       const uint64_t *key, const float *g, const float *b,
                                       float *xo, float *y, float *mean, float *rstd);
    /* GELU on n values (y may be x; with its derivative d for the backward;
     * dy *= d), and the cross-entropy at every position: xent_seq_rows writes
     * lse (N) and each position's loss and hit into rows as softmax_xent_rows
     * does (DT_XENT_ROWS_BYTES(N); a NaN loss where a target is outside
     * [0, V)), softmax_xent_sum(N, V, rows, ..) reads their mean back;
     * xent_seq_backward writes d = scale (softmax - onehot), d may be logits,
     * targets in [0, V): nn/transformer.h's. */
    void (*embedding_backward)(int B, int T, int C, const int32_t *tok, const float *dx,
                               float p, const uint64_t *key, float *dwte, float *dwpe);
    void (*layernorm_apply)(int N, int C, const float *x, const float *mean, const float *rstd,
                            const float *g, const float *b, float *y);
    /* d (n) = dres times the dropout factor of element i (p > 0) */
    void (*branch_dropout_grad)(size_t n, const float *dres, float p, const uint64_t *key,
                                float *d);
    void (*layernorm_backward)(int N, int C, const float *x, const float *mean,
                               const float *rstd, const float *g, const float *dy, float *dx,
                               int accumulate, float *dg, float *db);
    void (*attention_forward)(int B, int T, int C, int NH, const float *qkv, float *y,
                              float *lse, float p, const uint64_t *key);
    void (*attention_backward)(int B, int T, int C, int NH, const float *qkv, const float *lse,
                               const float *dy, float p, const uint64_t *key, float *dqkv);
    void (*gelu_forward)(size_t n, const float *x, float *y);
    void (*gelu_forward_deriv)(size_t n, const float *x, float *y, float *d);
    void (*gelu_backward_deriv)(size_t n, const float *d, float *dy);
    void (*xent_seq_rows)(int N, int V, const float *logits, const int32_t *targets, float *lse,
                          void *rows);
    void (*xent_seq_backward)(int N, int V, const float *logits, const float *lse,
                              const int32_t *targets, float scale, float *d);
    /* g (n) <- g scaled to the global L2 norm max_norm (> 0) where its norm is
     * above (clip_grad_norm of optim/adamw.h; the CUDA backend sums the
     * squares in another order, nn/cuda/adamw.h) */
    void (*flat_clip)(size_t n, double max_norm, float *g);
} dt_backend;

/* The CPU backend (OpenBLAS sgemm + plain C loops, all tensors plain): the
 * reference every faster path is tested against. */
const dt_backend *backend_cpu(void);
/* The CPU backend with oneDNN's convolutions on channel-blocked activations
 * (direct AVX-512/AVX2 kernels, Winograd where it wins); NULL when dtrain was
 * built without oneDNN. */
const dt_backend *backend_cpu_dnnl(void);
/* By name ("native", "dnnl", or "auto": dnnl when built in); NULL if unknown
 * or not built. */
const dt_backend *backend_cpu_by_name(const char *name);
/* The CUDA backend (backend/cuda.c: cuBLAS GEMMs, the kernels of
 * nn/cuda/, convolutions lowered onto cuBLAS by nn/lower.h) on the device
 * cuda_device_open() selected; NULL when dtrain was built without CUDA. */
const dt_backend *backend_cuda(void);
/* Its twin for compute.precision = bf16 (backend_with_precision): the linear
 * and convolution products with bf16 operands and fp32 accumulation on the
 * tensor cores, the rest as backend_cuda's. NULL without CUDA. */
const dt_backend *backend_cuda_bf16(void);
/* Tests only (compute.test_device_memory): the native CPU kernels behind a
 * backend that says device = 1 and keeps every tensor in its own pages,
 * unreadable (PROT_NONE) except inside its own calls, so host code that
 * touches backend memory without to_host/to_backend crashes
 * (backend/cpu_devmem.c). */
const dt_backend *backend_cpu_devmem(void);
/* "fp32" -> DT_PREC_FP32, "bf16" -> DT_PREC_BF16; -1 for anything else. */
int backend_precision_of(const char *name);
/* The twin of `be` whose matrix work runs at `precision` (be itself when it
 * already does): for bf16, the oneDNN CPU backend's bf16 table. NULL after
 * dt_err_set() with one line saying why not: the CPU has no bf16 instructions
 * (backend/cpu/gemm_bf16.h: bf16_check_cpu), the native kernels (bf16 runs on oneDNN),
 * a device backend (not implemented there). */
const dt_backend *backend_with_precision(const dt_backend *be, int precision);
/* The precision backend_cpu_by_name applies from now on in this process
 * (default fp32): dtrain sets it from compute.precision at start-up, having
 * checked with backend_with_precision that it can run. */
void backend_set_precision(int precision);
/* Threads of the compute kernels (OpenBLAS, oneDNN, the engine's own loops). */
void backend_set_threads(int threads);

#endif
