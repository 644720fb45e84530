/* The GPT's causal attention on the device: the bodies of nn/cuda/attention.cu's
 * kernels, also compiled for the host (tests/test_cuda_host.c).
 *
 * qkv (B, T, 3C): q | k | v, head h at columns h hs .. (h + 1) hs - 1 of each
 * (hs = C / NH <= GPT_ATT_HS_MAX); y, dy (B, T, C); lse (B, NH, T); dropout p
 * on the probabilities with backend/cpu/attention.c's mask index. Each query
 * row (bh = b NH + h, i) takes the keys 0 .. i in order with an online
 * softmax: no (T, T) block anywhere. The backward is FlashAttention's: with
 * P = exp(S - lse) recomputed and D_i = sum_j P_ij m_ij (dy_i . v_j) (= dy_i .
 * y_i), dS_ij = P_ij (m_ij (dy_i . v_j) - D_i); the query rows' pass writes
 * dq and D, the key rows' pass then sums dk and dv over the queries i >= j in
 * order (no atomics: the bits do not depend on the launch).
 *
 * Two forms of each pass, one arithmetic: the row form (a query or key row
 * reading the other rows where they lie) and the tiled form the kernels run
 * (a block of GPT_ATT_TILE threads per (bh, tile of rows), the other side's
 * rows staged a tile at a time in shared memory, each thread's own query row
 * in registers; the keys' kernel reads its own k and v rows where they lie).
 * Both call the same per-pair step in the same order, so they give the same
 * bits (every product an add reads rounded on its own, DT_FMUL, so the device
 * contracts none of them differently); the test holds the tiled form to the
 * row form bit for bit and the row form to the CPU's (backend/cpu/attention.c,
 * which sums in blocks and tiles) within a bound. */
#ifndef DT_NN_CUDA_ATTENTION_H
#define DT_NN_CUDA_ATTENTION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"
#include "nn/cuda/gpt.h"

#define GPT_ATT_HS_MAX 64
/* rows per tile, and threads per block of the tiled kernels */
#define GPT_ATT_TILE 64

static inline DT_HD size_t gpt_att_qkv(int b, int t, int h, int T, int C, int NH)
{
    return ((size_t)b * T + (size_t)t) * 3 * (size_t)C + (size_t)h * (C / NH);
}

static inline DT_HD size_t gpt_att_out(int b, int t, int h, int T, int C, int NH)
{
    return ((size_t)b * T + (size_t)t) * (size_t)C + (size_t)h * (C / NH);
}

static inline DT_HD float gpt_att_mask(uint64_t key, int bh, int T, int i, int j, float p)
{
    return p > 0.0f ? gpt_dropout_factor(key, ((uint64_t)bh * T + (uint64_t)i) * T + (uint64_t)j, p)
                    : 1.0f;
}

static inline DT_HD float gpt_dot(int n, const float *a, const float *b)
{
    float s = 0.0f;
    DT_UNROLL
    for (int d = 0; d < n; d++)
        s += DT_FMUL(a[d], b[d]);
    return s;
}

static inline DT_HD void gpt_att_copy(int n, const float *src, float *dst)
{
    DT_UNROLL
    for (int d = 0; d < n; d++)
        dst[d] = src[d];
}

/* ---- the per-pair steps ---------------------------------------------------- */

/* forward: key (k, v, mask m) into query q's running max mx, sum l and acc */
static inline DT_HD void gpt_att_fwd_pair(int hs, float scale, const float *q, const float *k,
                                          const float *v, float m, float *mx, float *l,
                                          float *acc)
{
    const float sc = DT_FMUL(scale, gpt_dot(hs, q, k));
    const float mn = sc > *mx ? sc : *mx;
    const float corr = gpt_expf(*mx - mn), e = gpt_expf(sc - mn);
    const float w = e * m;
    *l = DT_FMUL(*l, corr) + e;
    DT_UNROLL
    for (int d = 0; d < hs; d++)
        acc[d] = DT_FMUL(acc[d], corr) + DT_FMUL(w, v[d]);
    *mx = mn;
}

/* backward, query side, first sweep: D_i += P_ij m_ij (dy_i . v_j) */
static inline DT_HD void gpt_att_d_pair(int hs, float scale, const float *q, const float *dy,
                                        float lse, const float *k, const float *v, float m,
                                        float *di)
{
    const float pij = gpt_expf(DT_FMUL(scale, gpt_dot(hs, q, k)) - lse);
    *di += DT_FMUL(pij * m, gpt_dot(hs, dy, v));
}

/* backward, query side, second sweep: acc += dS_ij k_j */
static inline DT_HD void gpt_att_dq_pair(int hs, float scale, const float *q, const float *dy,
                                         float lse, float di, const float *k, const float *v,
                                         float m, float *acc)
{
    const float pij = gpt_expf(DT_FMUL(scale, gpt_dot(hs, q, k)) - lse);
    const float ds = pij * (DT_FMUL(m, gpt_dot(hs, dy, v)) - di);
    DT_UNROLL
    for (int d = 0; d < hs; d++)
        acc[d] += DT_FMUL(ds, k[d]);
}

/* backward, key side: query (q, dy, lse, D) into key (k, v)'s ak and av */
static inline DT_HD void gpt_att_dkv_pair(int hs, float scale, const float *k, const float *v,
                                          const float *q, const float *dy, float lse, float di,
                                          float m, float *ak, float *av)
{
    const float pij = gpt_expf(DT_FMUL(scale, gpt_dot(hs, q, k)) - lse);
    const float pm = pij * m;
    const float ds = pij * (DT_FMUL(m, gpt_dot(hs, dy, v)) - di);
    DT_UNROLL
    for (int d = 0; d < hs; d++) {
        ak[d] += DT_FMUL(ds, q[d]);
        av[d] += DT_FMUL(pm, dy[d]);
    }
}

static inline DT_HD void gpt_att_zero(int n, float *a)
{
    DT_UNROLL
    for (int d = 0; d < n; d++)
        a[d] = 0.0f;
}

/* ---- the row form ----------------------------------------------------------- */

/* Query row r = (bh, i), r in [0, B NH T): y's row of head h and lse */
static inline DT_HD void gpt_attention_row(size_t r, int T, int C, int NH, const float *qkv,
                                           float *y, float *lse, float p, uint64_t key)
{
    const int i = (int)(r % (size_t)T), bh = (int)(r / (size_t)T), b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv + gpt_att_qkv(b, i, h, T, C, NH);
    float acc[GPT_ATT_HS_MAX], mx = -INFINITY, l = 0.0f;
    gpt_att_zero(hs, acc);
    for (int j = 0; j <= i; j++) {
        const float *kj = qkv + gpt_att_qkv(b, j, h, T, C, NH) + C;
        gpt_att_fwd_pair(hs, scale, q, kj, kj + C, gpt_att_mask(key, bh, T, i, j, p), &mx, &l,
                         acc);
    }
    float *yr = y + gpt_att_out(b, i, h, T, C, NH);
    for (int d = 0; d < hs; d++)
        yr[d] = acc[d] / l;
    lse[r] = mx + logf(l);
}

/* Query row r = (bh, i) of the backward: dq (into dqkv's q columns) and D_i */
static inline DT_HD void gpt_attention_backward_q(size_t r, int T, int C, int NH,
                                                  const float *qkv, const float *lse,
                                                  const float *dy, float p, uint64_t key,
                                                  float *dqkv, float *D)
{
    const int i = (int)(r % (size_t)T), bh = (int)(r / (size_t)T), b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t oq = gpt_att_qkv(b, i, h, T, C, NH);
    const float *q = qkv + oq, *dyr = dy + gpt_att_out(b, i, h, T, C, NH), li = lse[r];
    float di = 0.0f, acc[GPT_ATT_HS_MAX];
    for (int j = 0; j <= i; j++) {
        const float *kj = qkv + gpt_att_qkv(b, j, h, T, C, NH) + C;
        gpt_att_d_pair(hs, scale, q, dyr, li, kj, kj + C, gpt_att_mask(key, bh, T, i, j, p), &di);
    }
    gpt_att_zero(hs, acc);
    for (int j = 0; j <= i; j++) {
        const float *kj = qkv + gpt_att_qkv(b, j, h, T, C, NH) + C;
        gpt_att_dq_pair(hs, scale, q, dyr, li, di, kj, kj + C, gpt_att_mask(key, bh, T, i, j, p),
                        acc);
    }
    float *dq = dqkv + oq;
    for (int d = 0; d < hs; d++)
        dq[d] = scale * acc[d];
    D[r] = di;
}

/* Key row r = (bh, j) of the backward: dk and dv (into dqkv's k and v
 * columns), summed over the queries i = j .. T - 1 in order; D from the
 * query rows' pass */
static inline DT_HD void gpt_attention_backward_kv(size_t r, int T, int C, int NH,
                                                   const float *qkv, const float *lse,
                                                   const float *dy, const float *D, float p,
                                                   uint64_t key, float *dqkv)
{
    const int j = (int)(r % (size_t)T), bh = (int)(r / (size_t)T), b = bh / NH, h = bh % NH;
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t ok = gpt_att_qkv(b, j, h, T, C, NH) + C;
    const float *kj = qkv + ok;
    float ak[GPT_ATT_HS_MAX], av[GPT_ATT_HS_MAX];
    gpt_att_zero(hs, ak);
    gpt_att_zero(hs, av);
    for (int i = j; i < T; i++) {
        const size_t ri = (size_t)bh * T + (size_t)i;
        gpt_att_dkv_pair(hs, scale, kj, kj + C, qkv + gpt_att_qkv(b, i, h, T, C, NH),
                         dy + gpt_att_out(b, i, h, T, C, NH), lse[ri], D[ri],
                         gpt_att_mask(key, bh, T, i, j, p), ak, av);
    }
    float *dk = dqkv + ok, *dv = dk + C;
    for (int d = 0; d < hs; d++) {
        dk[d] = scale * ak[d];
        dv[d] = av[d];
    }
}

/* ---- the tiled form ----------------------------------------------------------
 * Block g of the B NH ceil(T / GPT_ATT_TILE) blocks owns GPT_ATT_TILE rows of
 * one head, thread t of it one row (gpt_att_thread_at; a thread past T - 1
 * still stages and waits with the others). A kernel runs, for
 * each tile of the other side's rows the block's rows need: stage (every
 * thread), wait, then each thread's pairs in the tile, then wait again before
 * the next stage. */

/* What thread t of block g takes: head bh = b NH + h, the block's rows r0
 * .. end - 1 (GPT_ATT_TILE of them, or fewer at T), its own row r (own:
 * r < T) */
typedef struct {
    int bh, b, h, r0, end, r, own;
} gpt_att_thread;

static inline DT_HD gpt_att_thread gpt_att_thread_at(size_t g, int t, int T, int NH)
{
    const int nt = (T + GPT_ATT_TILE - 1) / GPT_ATT_TILE;
    gpt_att_thread a;
    a.bh = (int)(g / (size_t)nt);
    a.b = a.bh / NH;
    a.h = a.bh % NH;
    a.r0 = (int)(g % (size_t)nt) * GPT_ATT_TILE;
    a.end = a.r0 + GPT_ATT_TILE < T ? a.r0 + GPT_ATT_TILE : T;
    a.r = a.r0 + t;
    a.own = a.r < T;
    return a;
}

/* Thread t of nt stages rows j0 .. j0 + n - 1 (hs floats from row0 + j
 * stride each) into s (n, hs): consecutive threads read consecutive floats. */
static inline DT_HD void gpt_att_stage(const float *row0, size_t stride, int j0, int n, int hs,
                                       float *s, int t, int nt)
{
    for (int e = t; e < n * hs; e += nt)
        s[e] = row0[(size_t)(j0 + e / hs) * stride + (size_t)(e % hs)];
}

/* the same for n floats of a vector (lse, D) */
static inline DT_HD void gpt_att_stage_vec(const float *v, int j0, int n, float *s, int t, int nt)
{
    for (int e = t; e < n; e += nt)
        s[e] = v[j0 + e];
}

/* Thread t of nt stages the keys and values of head (b, h) from row j0 on,
 * a tile's worth or up to end, into ks and vs (n, hs); returns n */
static inline DT_HD int gpt_att_stage_kv(const float *qkv, int b, int h, int T, int C, int NH,
                                         int j0, int end, int hs, float *ks, float *vs, int t,
                                         int nt)
{
    const int n = end - j0 < GPT_ATT_TILE ? end - j0 : GPT_ATT_TILE;
    const float *k0 = qkv + gpt_att_qkv(b, 0, h, T, C, NH) + C;
    gpt_att_stage(k0, 3 * (size_t)C, j0, n, hs, ks, t, nt);
    gpt_att_stage(k0 + C, 3 * (size_t)C, j0, n, hs, vs, t, nt);
    return n;
}

/* forward: query row i (q in registers) over staged keys j0 .. j0 + n - 1,
 * those <= i */
static inline DT_HD void gpt_att_fwd_tile(int hs, float scale, int bh, int T, int i, int j0,
                                          int n, const float *q, const float *ks,
                                          const float *vs, float p, uint64_t key, float *mx,
                                          float *l, float *acc)
{
    const int e = i - j0 + 1 < n ? i - j0 + 1 : n;
    for (int jj = 0; jj < e; jj++)
        gpt_att_fwd_pair(hs, scale, q, ks + jj * hs, vs + jj * hs,
                         gpt_att_mask(key, bh, T, i, j0 + jj, p), mx, l, acc);
}

/* backward, query side: sweep 0 sums D_i, sweep 1 dq's acc */
static inline DT_HD void gpt_att_dq_tile(int sweep, int hs, float scale, int bh, int T, int i,
                                         int j0, int n, const float *q, const float *dy,
                                         float lse, const float *ks, const float *vs, float p,
                                         uint64_t key, float *di, float *acc)
{
    const int e = i - j0 + 1 < n ? i - j0 + 1 : n;
    for (int jj = 0; jj < e; jj++) {
        const float m = gpt_att_mask(key, bh, T, i, j0 + jj, p);
        if (sweep == 0)
            gpt_att_d_pair(hs, scale, q, dy, lse, ks + jj * hs, vs + jj * hs, m, di);
        else
            gpt_att_dq_pair(hs, scale, q, dy, lse, *di, ks + jj * hs, vs + jj * hs, m, acc);
    }
}

/* backward, key side: key row j (k, v in registers) over staged queries
 * i0 .. i0 + n - 1 (qs, dys (n, hs); ls, Ds (n)), those >= j and < T */
static inline DT_HD void gpt_att_dkv_tile(int hs, float scale, int bh, int T, int j, int i0,
                                          int n, const float *k, const float *v,
                                          const float *qs, const float *dys, const float *ls,
                                          const float *Ds, float p, uint64_t key, float *ak,
                                          float *av)
{
    for (int ii = j > i0 ? j - i0 : 0; ii < n; ii++)
        gpt_att_dkv_pair(hs, scale, k, v, qs + ii * hs, dys + ii * hs, ls[ii], Ds[ii],
                         gpt_att_mask(key, bh, T, i0 + ii, j, p), ak, av);
}

#endif
