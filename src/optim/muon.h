/* Muon (MomentUm Orthogonalized by Newton-Schulz), after KellerJordan/Muon's
 * muon.py (SingleDeviceMuonWithAuxAdam; doc/references.md), on the flat
 * vector: the hidden weight matrices take Muon's step, every other tensor
 * AdamW's.
 *
 * Which tensors: the model marks its hidden matrices in its tensor table
 * (core/tensor_view.h: mats, rows, cols): the GPT's attention qkv as three
 * (C, C), the attention output (C, C), the MLP's fc (4C, C) and proj (C, 4C);
 * an image network's convolutions as (K, C R S) and linear layers as
 * (out, in), except its first layer and its classifier head. The rest (the
 * GPT's embeddings with the tied head, biases, LayerNorm and GroupNorm
 * gains, the first layer, the head) take AdamW, as the reference advises.
 *
 * Step k (1-based) with rate lr, for each hidden matrix G (rows, cols) of
 * the gradient, with its momentum M (zero at the start), mu =
 * optim.momentum, wd = optim.weight_decay:
 *   M <- lerp(M, G, 1 - mu)                       (M + (1 - mu) (G - M))
 *   U <- nesterov ? lerp(G, M, mu) : M
 *   O <- newton_schulz5(U) sqrt(max(1, rows / cols))   (optim/newton_schulz.h)
 *   W <- W (1 - lr wd)
 *   W <- W - lr O
 * lerp as PyTorch's: a + w (b - a) for |w| < 0.5, else b - (b - a) (1 - w),
 * one rounding (fused), as PyTorch 1.13's CPU kernel computes it, and the
 * last line fused as its add_(alpha = -lr). The AdamW tensors take
 * adamw_step_range (optim/adamw.h: PyTorch's torch.optim.AdamW, decay on
 * ndim >= 2 only) at rate optim.adamw_lr lr / optim.lr: the schedule and
 * scaling of optim.lr apply to both rates alike.
 *
 * State (checkpointed, per rank): "muon_momentum" (n; the hidden matrices'
 * entries used), "adam_m" and "adam_v" (n; the AdamW tensors' entries used);
 * AdamW's step count is the trainer's. The step spans whole matrices: it
 * takes the whole vector [0, n), never a shard (a parameter server's). */
#ifndef DT_OPTIM_MUON_H
#define DT_OPTIM_MUON_H

#include <stddef.h>

/* PyTorch's lerp of one float: a + w (b - a) (|w| < 0.5) or b - (b - a) (1 - w),
 * fused, w and 1 - w in float. */
float muon_lerp(float a, float b, float w);

#endif
