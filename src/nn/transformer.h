/* The layer passes of a GPT-2 transformer on the CPU (models/gpt.c strings
 * them together), one forward/backward pair per layer, over plain float
 * arrays with their shapes at the signature, as in llm.c's train_gpt2.c.
 *
 * N is the number of token positions (B * T). Matrices are row-major; a
 * linear layer's weight is (out, in) as in PyTorch. Backward passes WRITE
 * their parameter gradients (dW, db, dg) unless the comment says "added", and
 * write or add their input gradient as stated. Dropout masks are never
 * stored: element i of a site keyed `key` is kept when
 * rng_hash_uniform(key, i) >= p (and scaled by 1 / (1 - p)), so the backward
 * pass redraws the forward's mask from (key, i). p = 0 turns a site off. */
#ifndef DT_NN_TRANSFORMER_H
#define DT_NN_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "backend/cpu/gemm_bf16.h"

/* The factor dropout with probability p applies to element i of the site
 * keyed `key`: 0 or 1 / (1 - p). Inline: called once per element. */
static inline float dropout_factor(uint64_t key, uint64_t i, float p)
{
    return rng_hash_uniform(key, i) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

/* ---- embedding.c ---- */
/* x[b, t] = dropout(wte[tok[b, t]] + wpe[t]).
 * tok (B, T) in [0, V); wte (V, C); wpe (>= T, C); x (B, T, C) */
void embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                       const float *wpe, float p, uint64_t key, float *x);
/* dx (B, T, C); dwte (V, C) ADDED (the tied head wrote it first); dwpe (>= T, C):
 * rows 0..T-1 written */
void embedding_backward(int B, int T, int C, const int32_t *tok, const float *dx, float p,
                        uint64_t key, float *dwte, float *dwpe);

/* ---- layernorm.c (eps 1e-5, biased variance as PyTorch) ---- */
/* Each takes y16 (N, C) or NULL: where given, y rounded to bf16 as
 * bf16_from_f32 would (compute.precision = bf16: the next product's operand). */
/* y = (x - mean) * rstd * g + b, per row. x, y (N, C); g, b (C); mean, rstd (N) */
void layernorm_forward(int N, int C, const float *x, const float *g, const float *b, float *y,
                       dt_bf16 *y16, float *mean, float *rstd);
/* The residual add fused with the LayerNorm that follows it:
 * xo = x + dropout(r); y = LayerNorm(xo). x, r, xo, y (N, C); xo may be r
 * (updated in place); mean, rstd (N) */
void layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                uint64_t key, const float *g, const float *b, float *xo,
                                float *y, dt_bf16 *y16, float *mean, float *rstd);
/* The same with the bias rb (C) of the product that wrote r added on the way
 * in, xo = x + dropout(r + rb): that product runs without it (no pass of bias
 * rows before it); rb NULL: layernorm_residual_forward. */
void layernorm_bias_residual_forward(int N, int C, const float *x, const float *r,
                                     const float *rb, float p, uint64_t key, const float *g,
                                     const float *b, float *xo, float *y, dt_bf16 *y16,
                                     float *mean, float *rstd);
/* y from the statistics a forward kept (backward recomputes instead of
 * storing the output). x, y (N, C); mean, rstd (N) */
void layernorm_apply(int N, int C, const float *x, const float *mean, const float *rstd,
                     const float *g, const float *b, float *y, dt_bf16 *y16);
/* dx (N, C): written (accumulate 0) or added (1); dg, db (C) written.
 * x the forward's input, dy (N, C) */
void layernorm_backward(int N, int C, const float *x, const float *mean, const float *rstd,
                        const float *g, const float *dy, float *dx, int accumulate, float *dg,
                        float *db);

/* ---- matmul.c (OpenBLAS sgemm) ---- */
/* y (N, out) = x (N, in) W^T + b; W (out, in), b (out) or NULL */
void matmul_forward(int N, int in, int out, const float *x, const float *W, const float *b,
                    float *y);
/* From dy (N, out): dx (N, in) = dy W (written), dW (out, in) = dy^T x (written;
 * x is read only for it), db (out) = column sums of dy; each NULL: skipped */
void matmul_backward(int N, int in, int out, const float *x, const float *W, const float *dy,
                     float *dx, float *dW, float *db);

/* The same layer with bf16 products and fp32 accumulation (compute.precision =
 * bf16, backend/cpu/gemm_bf16.h): the weight comes already rounded (W16 (out, in);
 * the backward reads it only for dx, and takes NULL without dx), the
 * activation x and the gradient dy are rounded into the caller's scratch x16
 * (N, in) and dy16 (N, out); y, dx, dW stay fp32, the bias is added and db
 * summed in fp32 (db: the fp32 kernel's bits). x NULL (both passes): x16
 * already holds x rounded (an activation kept in bf16); likewise dy NULL
 * (then db NULL: matmul_bias_backward takes the fp32 dy): dy16 holds dy
 * rounded by the pass that computed it. */
void matmul_forward_bf16(int N, int in, int out, const float *x, const dt_bf16 *W16,
                         const float *b, float *y, dt_bf16 *x16);
void matmul_backward_bf16(int N, int in, int out, const float *x, const dt_bf16 *W16,
                          const float *dy, float *dx, float *dW, float *db, dt_bf16 *x16,
                          dt_bf16 *dy16);
/* db (out) = column sums of dy (N, out), as the backward passes sum them */
void matmul_bias_backward(int N, int out, const float *dy, float *db);

/* ---- gelu.c: GELU with the tanh approximation (PyTorch approximate='tanh') ---- */
/* y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); x, y (n) */
void gelu_forward(size_t n, const float *x, float *y); /* y may be x */
/* dx = dy * gelu'(x); dx may be dy (in place). x, dy, dx (n) */
void gelu_backward(size_t n, const float *x, const float *dy, float *dx);
/* The backward pass's pair, one exp per element for both: y = gelu(x) (the
 * next layer's weight gradient needs it) and d = gelu'(x); then, once the
 * output's gradient dy is known, dy *= d in place. x, y, d, dy (n) */
void gelu_forward_deriv(size_t n, const float *x, float *y, float *d); /* y may be x */
void gelu_backward_deriv(size_t n, const float *d, float *dy);
/* With the bias of the product before it added on the way in, x (N, F) that
 * product's output without its bias b (F): y = gelu(x + b); and the backward
 * in one pass once dy is known, y = gelu(x + b) again (the next product's
 * weight gradient reads it) and dy *= gelu'(x + b) in place. Bit for bit
 * gelu_forward, and gelu_forward_deriv then gelu_backward_deriv, on x + b
 * rounded to float. */
void gelu_bias_forward(int N, int F, const float *x, const float *b, float *y);
void gelu_bias_backward(int N, int F, const float *x, const float *b, float *y, float *dy);
/* The same on a pre-activation kept in bf16 (compute.precision = bf16), the
 * results bit for bit those of rounding, widening and the float functions:
 * forward, x16 (n) = x rounded (x NULL: x16 already holds it) and y16 (n) =
 * gelu(x16) rounded, the next product's operand; backward, dx = dy *
 * gelu'(x16) (dx may be dy). */
void gelu_forward_bf16(size_t n, const float *x, dt_bf16 *x16, dt_bf16 *y16);
void gelu_backward_bf16(size_t n, const dt_bf16 *x16, const float *dy, float *dx,
                        dt_bf16 *dx16);

/* ---- attention.c: causal multi-head self-attention ---- */
/* Scratch floats attention_forward/backward need in `work` per thread. */
size_t attention_work(int T);
/* qkv (B, T, 3C): q | k | v, head h at columns h*hs .. (h+1)*hs - 1 of each
 * (hs = C / NH). y (B, T, C) = softmax(q k^T / sqrt(hs), causal) v with
 * dropout p on the probabilities; lse (B, NH, T): each row's log-sum-exp,
 * all backward keeps (it recomputes the probabilities, one (T, T) block
 * per head at a time, instead of storing B*NH of them). */
/* probs (B, NH, T, T) or NULL: if given, the probabilities (before
 * dropout; row i's columns 0 .. i rounded up to the block of 16 rows, the
 * rest untouched) are kept there and the backward reads them instead of
 * recomputing. The (batch, head) pairs are spread over up to nwork OpenMP
 * threads; work holds nwork * attention_work(T) floats. */
void attention_forward(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                       float *probs, float p, uint64_t key, float *work, int nwork);
/* dy (B, T, C) -> dqkv (B, T, 3C) written; probs as the forward's (or NULL) */
void attention_backward(int B, int T, int C, int NH, const float *qkv, const float *lse,
                        const float *probs, const float *dy, float p, uint64_t key, float *dqkv,
                        float *work, int nwork);
/* The same with the bias bqkv (3C) of the product that wrote qkv added on
 * the way in: q, k and v are copied per head with their bias into the
 * scratch the products read, so that product runs without it (no pass of
 * bias rows before it). Bit for bit the functions above on qkv + bqkv
 * rounded to float. Only where attention_takes_bias (the tiled path's
 * shapes); the bias gradient is the column sums of dqkv, as without. */
int attention_takes_bias(int T, int C, int NH);
void attention_bias_forward(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                            float *y, float *lse, float *probs, float p, uint64_t key,
                            float *work, int nwork);
void attention_bias_backward(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                             const float *lse, const float *probs, const float *dy, float p,
                             uint64_t key, float *dqkv, float *work, int nwork);
/* The same with the products in bf16 and fp32 sums (compute.precision =
 * bf16): q, k, v, dy, the probabilities after dropout and the softmax's
 * gradient dS are rounded to bf16 where they enter q k^T, P v, dy v^T,
 * P^T dy, dS k and dS^T q; the softmax, its backward, lse and the kept
 * probabilities stay fp32, as do y and dqkv. Taken where the tiled path fits
 * (T a multiple of 16, head size 16, 32, 48 or 64) and the CPU has
 * AVX512-BF16 (attention_bf16_native says whether); elsewhere these are
 * attention_forward/backward, in fp32. Same arguments. */
void attention_forward_bf16(int B, int T, int C, int NH, const float *qkv, float *y,
                            float *lse, float *probs, float p, uint64_t key, float *work,
                            int nwork);
void attention_backward_bf16(int B, int T, int C, int NH, const float *qkv, const float *lse,
                             const float *probs, const float *dy, float p, uint64_t key,
                             float *dqkv, float *work, int nwork);
/* 1 when attention_*_bf16 run in bf16 at sequence length T and head size hs */
int attention_bf16_native(int T, int hs);
/* The two paths attention_forward/backward choose between by shape, for the
 * tests that compare them: the tiled one (hand-vectorized register tiles,
 * taken when T is a multiple of 16 and the head size is 16, 32, 48 or 64)
 * and the blocked one (OpenBLAS sgemms per block of 16 query rows, any
 * shape). Same arguments and results, to rounding. */
void attention_forward_blocked(int B, int T, int C, int NH, const float *qkv, float *y,
                               float *lse, float *probs, float p, uint64_t key, float *work,
                               int nwork);
void attention_backward_blocked(int B, int T, int C, int NH, const float *qkv, const float *lse,
                                const float *probs, const float *dy, float p, uint64_t key,
                                float *dqkv, float *work, int nwork);

/* ---- xent_seq.c: softmax cross-entropy over every position ---- */
/* logits (N, V), targets (N) in [0, V). Returns the SUM of -log p(target);
 * lse (N) each row's log-sum-exp; *correct (may be NULL) the argmax hits. */
double xent_seq_forward(int N, int V, const float *logits, const int32_t *targets, float *lse,
                        int64_t *correct);
/* d (N, V) = scale * (softmax(logits) - onehot(target)); d may be logits
 * (the gradient then overwrites them in place) */
void xent_seq_backward(int N, int V, const float *logits, const float *lse,
                       const int32_t *targets, float scale, float *d);
/* The forward by rows: lse (N), and into rows (DT_XENT_ROWS_BYTES(N) of
 * backend/backend.h: N doubles, then N int32) each position's -log
 * p(target) and hit; a target outside [0, V) gives NaN and no hit, nothing
 * read. Summed in order by cpu_softmax_xent_sum. */
void xent_seq_rows(int N, int V, const float *logits, const int32_t *targets, float *lse,
                   void *rows);

#endif
