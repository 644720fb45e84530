/* What the attention's fp32 paths (backend/cpu/attention.c, attention_tiled.c) and its bf16 tiled path
 * (backend/cpu/attention_bf16.c) share: the block and head geometry, the scratch
 * layout's sizes, and the per-block softmax and dropout steps, which are
 * fp32 in both precisions. */
#ifndef DT_BACKEND_CPU_ATTENTION_INT_H
#define DT_BACKEND_CPU_ATTENTION_INT_H

#include <stddef.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "nn/transformer.h"

/* Query rows per block. 16 keeps every sgemm of the blocked path at or below
 * OpenBLAS's threading threshold (m n k <= 2^18) for T <= 256 and head size
 * <= 64, so OpenBLAS runs them on the calling thread while OpenMP spreads
 * the heads over the threads; 16, 32 and 64 cost the same within 5 % on one
 * thread. */
#define ATT_TB 16
#define ATT_HS_MAX 64 /* the largest head size of the tiled path: four vectors a row */
#define ATT_R 4        /* rows of a register tile of the tiled paths */

static inline int att_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Mask index of probability (i, j) of head bh: one dropout site per layer. */
static inline uint64_t att_index(int bh, int T, int i, int j)
{
    return ((uint64_t)bh * T + (uint64_t)i) * T + (uint64_t)j;
}

/* Where head h of sequence b starts, bh = b NH + h: in the fused qkv (B, T,
 * 3C) (its q; k and v follow at + C and + 2C) and in a (B, T, C) tensor. */
static inline size_t head_qkv(int bh, int T, int C, int NH)
{
    return (size_t)(bh / NH) * T * 3 * C + (size_t)(bh % NH) * (C / NH);
}

static inline size_t head_out(int bh, int T, int C, int NH)
{
    return (size_t)(bh / NH) * T * C + (size_t)(bh % NH) * (C / NH);
}

/* The shapes of the tiled paths: T a multiple of 16, head size 16 .. 64 */
static inline int tiled_fits(int T, int hs)
{
    return T % 16 == 0 && hs % 16 == 0 && hs <= ATT_HS_MAX;
}

static inline int round16(int n) { return (n + 15) & ~15; }

/* The steps of a tiled block of ATT_TB query rows r0 .. r0+TB-1 of head bh,
 * P (TB, r0 + TB) stride T, fp32 in both precisions: */
/* forward: the scores in P become the causal softmax (lse: the rows'
 * log-sum-exp), copied to the kept probabilities (probs, or NULL), then
 * dropped out with rate p */
void att_block_softmax(int bh, int T, int r0, float *P, float *lse, float *probs, float p,
                       uint64_t key);
/* backward: the probabilities again from the scores in P and the kept lse */
void att_block_softmax_again(int T, int r0, const float *lse, float *P);
/* backward, p > 0: Pd = the dropped probabilities, zero past each row's key,
 * and dP (the gradient of the dropped ones) times the mask */
void att_block_dropout_grad(int bh, int T, int r0, const float *P, float *dP, float *Pd, float p,
                            uint64_t key);
/* backward: dP becomes dS, the gradient of the scores */
void att_block_softmax_backward(int T, int r0, const float *P, float *dP);

/* attention_tiled.c: attention_forward / attention_backward where tiled_fits,
 * and attention_bias_forward / attention_bias_backward (bqkv NULL: no bias) */
void attention_forward_tiled(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                             float *y, float *lse, float *probs, float p, uint64_t key,
                             float *work, int nwork);
void attention_backward_tiled(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                              const float *lse, const float *probs, const float *dy, float p,
                              uint64_t key, float *dqkv, float *work, int nwork);

#endif
