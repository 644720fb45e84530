/* The CUDA kernels' host entry points, callable from C. Pointers are device
 * memory; stream is a cudaStream_t (NULL: the default stream). Each returns 0,
 * or -1 after dt_err_set() with the CUDA error (file:line). Same arguments and
 * conventions as the CPU kernels in backend/cpu/kernels.h: input gradients
 * accumulate, a NULL input gradient is skipped. Built only --with-cuda; called
 * by the CUDA backend (backend/cuda.c). */
#ifndef DT_NN_CUDA_KERNELS_CUDA_H
#define DT_NN_CUDA_KERNELS_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "nn/cuda/adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* activation.cu; x, y, dy, dx: (n) */
int cuda_relu_forward(size_t n, const float *x, float *y, void *stream);
int cuda_relu_backward(size_t n, const float *y, const float *dy, float *dx, void *stream);
int cuda_relu_backward_inplace(size_t n, const float *y, float *d, void *stream);
int cuda_sigmoid_forward(size_t n, const float *x, float *y, void *stream);
int cuda_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx, void *stream);
/* bf16.cu: y (n) = x rounded to bf16 (core/bf16_round.h) */
int cuda_round_bf16(size_t n, const float *x, uint16_t *y, void *stream);
/* add.cu */
int cuda_add_forward(size_t n, const float *a, const float *b, float *y, void *stream);
int cuda_add_backward(size_t n, const float *dy, float *da, float *db, void *stream);
/* dropout.cu */
int cuda_dropout_forward(size_t n, float p, uint64_t key, const float *x, float *y, float *mask,
                         void *stream);
/* the same with the key read from device memory when the kernel runs */
int cuda_dropout_forward_keyed(size_t n, float p, const uint64_t *key, const float *x, float *y,
                               float *mask, void *stream);
int cuda_dropout_backward(size_t n, const float *mask, const float *dy, float *dx, void *stream);
/* groupnorm.cu, plain layout; x, y, skip, dy, dx, dskip (B, C, HW); gamma,
 * beta, dgamma, dbeta (C), overwritten; mean, rstd (B, G); y in backward: the
 * fused ReLU's output or NULL; device scratch: lanes 8 B C floats (forward),
 * work 2 B C + 2 B G doubles then 8 B C floats (backward) */
int cuda_groupnorm_forward(int B, int C, int HW, int G, const float *x, const float *gamma,
                           const float *beta, const float *skip, int relu, float *y, float *mean,
                           float *rstd, float *lanes, void *stream);
int cuda_groupnorm_backward(int B, int C, int HW, int G, const float *x, const float *gamma,
                            const float *mean, const float *rstd, const float *y, const float *dy,
                            float *dx, float *dskip, float *dgamma, float *dbeta, double *work,
                            void *stream);
/* pool.cu, plain layout; x, dx (B, C, H, W); y, dy, arg (B, C, P, Q) */
int cuda_maxpool_forward(int B, int C, int H, int W, int k, int stride, int P, int Q,
                         const float *x, float *y, int32_t *arg, void *stream);
int cuda_maxpool_backward(int B, int C, int H, int W, int k, int stride, int P, int Q,
                          const float *dy, const int32_t *arg, float *dx, void *stream);
/* x, dx (B, C, HW); y, dy (B, C) */
int cuda_avgpool_forward(int B, int C, int HW, const float *x, float *y, void *stream);
int cuda_avgpool_backward(int B, int C, int HW, const float *dy, float *dx, void *stream);
/* xent.cu: per-row loss and hit (B), dlogits (B, K) or NULL; the caller
 * reduces loss and hit (a NaN loss: a label outside [0, K)) */
int cuda_softmax_xent_rows(int B, int K, const float *logits, const int32_t *labels,
                           float *dlogits, double *loss, int32_t *hit, void *stream);
/* sgd.cu; x, g, v: (n), v unused when momentum is 0 */
int cuda_sgd_step(size_t n, float momentum, float weight_decay, bool nesterov, float lr, float *x,
                  const float *g, float *v, void *stream);
/* sgd.cu; x <- a x, x: (n) */
int cuda_flat_scale(size_t n, float a, float *x, void *stream);
/* sgd.cu, EASGD's terms (nn/cuda/sgd.h); all vectors (n) */
int cuda_flat_diff_scale(size_t n, float a, const float *x, const float *c, float *out,
                         void *stream);
int cuda_flat_toward(size_t n, float beta, float inv, const float *mean, float *c, void *stream);
int cuda_flat_sub(size_t n, const float *d, float *x, void *stream);
/* sgd.cu, the gossip modes' terms (nn/cuda/sgd.h); all vectors (n), w (1) */
int cuda_flat_scale_copy(size_t n, float a, float *x, float *y, void *stream);
int cuda_flat_add(size_t n, const float *d, float *x, void *stream);
int cuda_flat_div(size_t n, const float *x, const float *w, float *z, void *stream);
/* y <- (fresh ? 0 : y) + x, or + a x when scaled (one slot of a sum) */
int cuda_flat_sum_term(size_t n, const float *x, float *y, bool fresh, void *stream);
int cuda_flat_axpy_term(size_t n, float a, const float *x, float *y, bool fresh, void *stream);
int cuda_flat_ax_plus(size_t n, float a, const float *x, float *y, void *stream);

/* adamw.cu (nn/cuda/adamw.h): one AdamW step on x, g, m, v (n) with the
 * scalars k; segs (nseg) in device memory, sorted and contiguous from 0 */
int cuda_adamw_step(size_t n, dt_adamw_k k, const dt_adamw_seg *segs, int nseg, float *x,
                    const float *g, float *m, float *v, void *stream);
/* g (n) scaled to the global L2 norm max_norm where it is above (> 0);
 * device scratch: lanes DT_CLIP_LANES doubles, factor 1 float */
int cuda_clip(size_t n, double max_norm, float *g, double *lanes, float *factor, void *stream);

/* gpt.cu (nn/cuda/gpt.h), a thread per element or row, in the CPU's order of
 * sums: tok (B, T), wte (V, C), wpe (>= T, C), x (B, T, C); LayerNorm: x, r,
 * xo, y (N, C), g, b (C), mean, rstd (N) */
int cuda_embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                           const float *wpe, float p, const uint64_t *key, float *x, void *stream);
int cuda_layernorm_forward(int N, int C, const float *x, const float *g, const float *b,
                           float *y, float *mean, float *rstd, void *stream);
int cuda_layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                    const uint64_t *key, const float *g, const float *b, float *xo,
                                    float *y, float *mean, float *rstd, void *stream);
/* the embeddings' gradients: dwte (V, C) added to, dwpe (T, C) written, from
 * dx (B, T, C) through the embedding's dropout */
int cuda_embedding_backward(int B, int T, int C, const int32_t *tok, const float *dx, float p,
                            const uint64_t *key, float *dwte, float *dwpe, void *stream);
/* y (N, C) = LayerNorm of x from the forward's mean and rstd */
int cuda_layernorm_apply(int N, int C, const float *x, const float *mean, const float *rstd,
                         const float *g, const float *b, float *y, void *stream);
/* d (n) = dres through a residual branch's dropout p (mask index i) */
int cuda_dropout_grad(size_t n, const float *dres, float p, const uint64_t *key, float *d,
                      void *stream);
/* LayerNorm's backward: dx (N, C) written or added to (accumulate), dg, db (C) */
int cuda_layernorm_backward(int N, int C, const float *x, const float *mean, const float *rstd,
                            const float *g, const float *dy, float *dx, int accumulate,
                            float *dg, float *db, void *stream);
/* causal attention over qkv (B, T, 3C), NH heads of C / NH <= 64: y (B, T,
 * C), lse (B, NH, T); the backward writes dqkv (B, T, 3C) and takes D (B NH
 * T floats) of device scratch */
/* the row form's kernels (a thread per row) instead of the tiles from now on
 * (on), for measuring one against the other: the same bits */
void cuda_attention_rows(int on);
int cuda_attention_forward(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                           float p, const uint64_t *key, void *stream);
int cuda_attention_backward(int B, int T, int C, int NH, const float *qkv, const float *lse,
                            const float *dy, float p, const uint64_t *key, float *dqkv, float *D,
                            void *stream);
/* GELU (tanh form) on n values: y = gelu(x) (y may be x); with its
 * derivative d; dy *= d */
int cuda_gelu_forward(size_t n, const float *x, float *y, void *stream);
int cuda_gelu_forward_deriv(size_t n, const float *x, float *y, float *d, void *stream);
int cuda_gelu_backward_deriv(size_t n, const float *d, float *dy, void *stream);
/* cross-entropy at every position: logits (N, V), targets (N); forward:
 * lse (N), each row's -log p(target) in loss (N doubles; NaN for a target
 * outside [0, V)) and its argmax hit (hit, N ints), summed by the caller;
 * backward: d (N, V) = scale (softmax - onehot), d may be logits */
int cuda_xent_seq_rows(int N, int V, const float *logits, const int32_t *targets, float *lse,
                       double *loss, int32_t *hit, void *stream);
int cuda_xent_seq_backward(int N, int V, const float *logits, const float *lse,
                           const int32_t *targets, float scale, float *d, void *stream);

/* lower.cu, convolution lowering (nn/lower.h): x, dx (B, C, H, W); cols,
 * dcols (B, C*R*S, P*Q); y, dy (B, K, PQ); bias, db (K) */
int cuda_im2col(const dt_conv_shape *s, const float *x, float *cols, void *stream);
int cuda_col2im(const dt_conv_shape *s, const float *dcols, float *dx, int accumulate,
                void *stream);
int cuda_bias_add(int B, int K, size_t PQ, const float *bias, float *y, void *stream);
/* rows: B K doubles of device scratch */
int cuda_bias_grad(int B, int K, size_t PQ, const float *dy, float *db, double *rows,
                   void *stream);
/* dw (n) = the sum of parts (B, n) in image order */
int cuda_sum_images(int B, size_t n, const float *parts, float *dw, void *stream);

#ifdef __cplusplus
}
#endif

#endif
