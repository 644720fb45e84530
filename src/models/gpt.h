/* A GPT-2 language model (the layout of karpathy/llm.c and nanoGPT) over one
 * flat parameter buffer, on the CPU (models/gpt_backend.h: the same model
 * through a backend's kernel table, for the device backends).
 *
 * Token embedding wte (V, C) + position embedding wpe (T, C); n_layer blocks
 * x += attn(ln_1(x)); x += mlp(ln_2(x)) (pre-LayerNorm, eps 1e-5; causal
 * multi-head attention with one fused qkv projection C -> 3C and an output
 * projection C -> C; MLP C -> 4C -> C with tanh-GELU; every linear layer
 * with a bias); final LayerNorm; logits = h wte^T (tied); mean cross-entropy
 * over every position. Dropout (nanoGPT's places: after the embeddings, on
 * the attention probabilities, after each residual branch's projection) uses
 * counter-based masks, so a step is a pure function of (params, batch, key).
 *
 * Parameter tensors, in this order in the flat vector (nanoGPT's names and
 * order, linear weights (out, in) as in PyTorch):
 *   wte.weight (V, C), wpe.weight (T, C),
 *   per block l: h.l.ln_1.weight (C), h.l.ln_1.bias (C),
 *     h.l.attn.c_attn.weight (3C, C), h.l.attn.c_attn.bias (3C),
 *     h.l.attn.c_proj.weight (C, C), h.l.attn.c_proj.bias (C),
 *     h.l.ln_2.weight (C), h.l.ln_2.bias (C),
 *     h.l.mlp.c_fc.weight (4C, C), h.l.mlp.c_fc.bias (4C),
 *     h.l.mlp.c_proj.weight (C, 4C), h.l.mlp.c_proj.bias (C),
 *   ln_f.weight (C), ln_f.bias (C).
 * The qkv rows are q (C rows) | k | v, head h at rows h*hs .. (h+1)*hs - 1
 * of each (hs = C / n_head), as nanoGPT's c_attn. */
#ifndef DT_MODELS_GPT_H
#define DT_MODELS_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "nn/net.h"

typedef struct dt_gpt_config {
    int vocab, block, n_layer, n_head, n_embd;
    float dropout;
    /* DT_PREC_FP32 (0, the default) or DT_PREC_BF16 (backend/backend.h): the
     * linear layers' and the tied head's products in bf16 with fp32
     * accumulation (backend/cpu/gemm_bf16.h); parameters, gradients, LayerNorm,
     * softmax, attention, the loss and every reduction stay fp32 */
    int precision;
} dt_gpt_config;

typedef struct dt_gpt dt_gpt;

/* A block's tensors in the flat vector's order: block l's tensor k is the
 * table's entry 2 + T_PER_BLOCK l + k. */
enum {
    T_LN1W, T_LN1B, T_QKVW, T_QKVB, T_APW, T_APB, T_LN2W, T_LN2B, T_FCW, T_FCB, T_FPW, T_FPB,
    T_PER_BLOCK
};
/* The dropout sites: block l's masks are keyed rng_key(key, l, site, 0), the
 * embeddings' rng_key(key, n_layer, SITE_EMB, 0); every path (models/gpt.c,
 * models/gpt_backend.c) draws the same masks for one key. */
enum { SITE_EMB, SITE_ATT, SITE_ATT_RES, SITE_MLP_RES };

/* NULL after dt_err_set() when a size is not positive, n_embd is not a
 * multiple of n_head, dropout is outside [0, 1), or precision is neither
 * fp32 nor bf16, or bf16 where this CPU cannot run it (bf16_check_cpu). */
dt_gpt *gpt_create(const dt_gpt_config *c);
size_t gpt_nparams(const dt_gpt *m);
const dt_gpt_config *gpt_config(const dt_gpt *m);
int gpt_ntensors(const dt_gpt *m);
/* The tensor table above: name, shape text "(a, b)", offset, count; fan_in is
 * the input width of a linear weight (C for the embeddings, 0 for vectors);
 * init: 1 LayerNorm gains, 2 biases, 0 weights (normal, see gpt_init_params). */
const dt_tensor_view *gpt_tensors(const dt_gpt *m);
/* GPT-2's initialisation: weights and embeddings normal(0, 0.02), the two
 * residual output projections (attn.c_proj, mlp.c_proj) normal(0,
 * 0.02/sqrt(2 n_layer)), biases 0, LayerNorm gains 1. Tensor k is drawn from
 * rng_make(seed, k, 0, 0): the same on every rank for one seed. */
void gpt_init_params(const dt_gpt *m, float *params, uint64_t seed);
/* Allocate every activation buffer for batches of up to B sequences (one
 * arena); a forward with a larger B reserves again first. */
void gpt_reserve(dt_gpt *m, int B);
/* tokens, targets (B, T) int32 in [0, vocab), T = block. Returns the mean
 * cross-entropy over the B*T positions; *correct (may be NULL) the positions
 * whose argmax logit is the target. train: dropout (if any) with masks keyed
 * by key. Keeps what backward needs (a copy of the batch included). */
double gpt_forward(dt_gpt *m, const float *params, const int32_t *tokens, const int32_t *targets,
                   int B, int train, uint64_t key, int64_t *correct);
/* Gradient of the last forward's mean loss, written (not added) into grads
 * (nparams). The parameters must be those of that forward. */
void gpt_backward(dt_gpt *m, const float *params, float *grads);
/* The logits (B, T, V) of the last forward. gpt_backward turns them into
 * their gradient in place: valid from gpt_forward until gpt_backward. */
const float *gpt_logits(const dt_gpt *m);
void gpt_free(dt_gpt *m);

#endif
