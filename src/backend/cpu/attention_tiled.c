/* The fp32 attention's tiled path (backend/cpu/attention.c chooses it by
 * shape: T a multiple of 16, head size 16, 32, 48 or 64): the products of
 * each block of ATT_TB query rows as hand-vectorized register tiles, no
 * library call; the softmax and dropout steps of a block are attention.c's
 * (backend/cpu/attention_int.h). Contraction of a * b + c into FMA on the
 * AVX2 and AVX-512 variants (core/simd.h): on one Zen 4 thread the tiled
 * forward and backward take 25 % and 15 % less time with it. A register
 * tile is ATT_R rows by up to 4 vectors of 16 floats on AVX-512, whose 32
 * registers hold the 4 x 4 accumulators with the loaded row; the narrow
 * variants walk the columns sixteen at a time in eight-float vectors
 * (tile_mm8): 4 x 2 accumulators in AVX2's 16 registers. */
#include <math.h>

#include "core/simd.h"
#include "backend/cpu/attention_int.h"

/* ---- the tiled path: hand-vectorized products, head size 16, 32, 48 or 64 ----
 *
 * The same blocks of ATT_TB query rows as above, but each product is a loop
 * nest over register tiles of ATT_R rows by up to four 16-float vectors,
 * with no library call: at baby's shapes (T 64, hs 32) an sgemm's fixed cost
 * was as large as its arithmetic. The tiles also follow the causal edge four
 * rows at a time (rows i0 .. i0+3 compute keys 0 .. i0+3 rounded up to 16)
 * where the sgemms computed whole 16-row blocks. The q k^T and dy v^T
 * products read k and v transposed, (hs, T), packed once per (batch, head).
 * Given c_attn's bias (attention_bias_forward/backward), each head's q, k and
 * v are copied with it into (T, hs) scratch, which the products read instead. */



/* One register tile of a product: out[r][16 v + c] = alpha sum_k a[r lda + k]
 * b[k ldb + 16 v + c] for r < ATT_R rows and nv < 5 vectors of 16 columns.
 * Serves every product here: ATT_R rows of q k^T (a = q, b = k^T, K = hs,
 * the columns keys), of P v or dS k (a = P or dS, K = the keys a row sees,
 * the columns the head's). */
static inline __attribute__((always_inline)) void tile_mm(int nv, int K, float alpha,
                                                          const float *a, int lda,
                                                          const float *b, int ldb, float *out,
                                                          int ldo)
{
    v16f acc[ATT_R][4];
    #pragma GCC unroll 4
    for (int r = 0; r < ATT_R; r++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[r][v] = v16_splat(0);
    for (int k = 0; k < K; k++) {
        v16f bk[4];
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            bk[v] = v16_ld(b + (size_t)k * ldb + 16 * v);
        #pragma GCC unroll 4
        for (int r = 0; r < ATT_R; r++) {
            const float s = a[(size_t)r * lda + k];
            #pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[r][v] += s * bk[v];
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < ATT_R; r++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            v16_st(out + (size_t)r * ldo + 16 * v, alpha * acc[r][v]);
}

/* The same tile in eight-float vectors, 16 columns as two of them: what the
 * AVX2 and baseline variants run. Without AVX-512 a 64-byte v16f has no
 * register of its size, so GCC keeps it in memory and every operation goes
 * through the stack; eight floats fit one AVX2 register. The same sums in the
 * same order per element as tile_mm. */
typedef float att_v8f __attribute__((vector_size(32), aligned(4)));
#define V8_LD(p) (*(const att_v8f *)(p))
#define V8_ST(p, v) (*(att_v8f *)(p) = (v))
static inline __attribute__((always_inline)) void tile_mm8(int K, float alpha, const float *a,
                                                           int lda, const float *b, int ldb,
                                                           float *out, int ldo)
{
    att_v8f acc[ATT_R][2];
    #pragma GCC unroll 4
    for (int r = 0; r < ATT_R; r++)
        acc[r][0] = acc[r][1] = (att_v8f){ 0 };
    for (int k = 0; k < K; k++) {
        const att_v8f b0 = V8_LD(b + (size_t)k * ldb), b1 = V8_LD(b + (size_t)k * ldb + 8);
        #pragma GCC unroll 4
        for (int r = 0; r < ATT_R; r++) {
            const float s = a[(size_t)r * lda + k];
            acc[r][0] += s * b0;
            acc[r][1] += s * b1;
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < ATT_R; r++) {
        V8_ST(out + (size_t)r * ldo, alpha * acc[r][0]);
        V8_ST(out + (size_t)r * ldo + 8, alpha * acc[r][1]);
    }
}

/* S (TB, ·) stride ldo = alpha a[r0 ..] (TB, hs) bt (hs, ·): each tile of
 * rows i0 .. i0+3 (absolute) gets keys 0 .. round16(i0 + 4) - 1. */
DT_KERNEL_BODY void block_dot_body(int narrow, int r0, int hs, float alpha, const float *a,
                                   int lda, const float *bt, int ldb, float *out, int ldo)
{
    for (int i = 0; i < ATT_TB; i += ATT_R) {
        const float *ar = a + (size_t)(r0 + i) * lda;
        float *o = out + (size_t)i * ldo;
        const int cols = round16(r0 + i + ATT_R);
        int j = 0;
        if (narrow) { // cols is a multiple of 16
            for (; j < cols; j += 16)
                tile_mm8(hs, alpha, ar, lda, bt + j, ldb, o + j, ldo);
            continue;
        }
        for (; j + 64 <= cols; j += 64)
            tile_mm(4, hs, alpha, ar, lda, bt + j, ldb, o + j, ldo);
        switch ((cols - j) / 16) {
        case 3: tile_mm(3, hs, alpha, ar, lda, bt + j, ldb, o + j, ldo); break;
        case 2: tile_mm(2, hs, alpha, ar, lda, bt + j, ldb, o + j, ldo); break;
        case 1: tile_mm(1, hs, alpha, ar, lda, bt + j, ldb, o + j, ldo); break;
        default: break;
        }
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(block_dot, (int r0, int hs, float alpha, const float *a, int lda, const float *bt, int ldb, float *out, int ldo), (r0, hs, alpha, a, lda, bt, ldb, out, ldo));

/* out[r0 ..] (TB, hs) stride ldo = alpha P (TB, ·) v (·, hs): the tile of
 * rows i0 .. i0+3 sums keys 0 .. i0+3 (P is zero past each row's own). */
DT_KERNEL_BODY void block_pv_body(int narrow, int r0, int hs, float alpha, const float *p,
                                  int ldp, const float *v, int ldv, float *out, int ldo)
{
    for (int i = 0; i < ATT_TB; i += ATT_R) {
        const float *pr = p + (size_t)i * ldp;
        float *o = out + (size_t)(r0 + i) * ldo;
        const int n = r0 + i + ATT_R;
        if (narrow) {
            for (int e = 0; e < hs / 16; e++)
                tile_mm8(n, alpha, pr, ldp, v + 16 * e, ldv, o + 16 * e, ldo);
            continue;
        }
        switch (hs / 16) {
        case 4: tile_mm(4, n, alpha, pr, ldp, v, ldv, o, ldo); break;
        case 3: tile_mm(3, n, alpha, pr, ldp, v, ldv, o, ldo); break;
        case 2: tile_mm(2, n, alpha, pr, ldp, v, ldv, o, ldo); break;
        default: tile_mm(1, n, alpha, pr, ldp, v, ldv, o, ldo); break;
        }
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(block_pv, (int r0, int hs, float alpha, const float *p, int ldp, const float *v, int ldv, float *out, int ldo), (r0, hs, alpha, p, ldp, v, ldv, out, ldo));

/* out[j0 + c][:] += alpha sum_{i = i0 .. i1-1} p[(i - r0) ldp + j0 + c] a[i lda + :],
 * c < ATT_R, over nv vectors: ATT_R rows of P^T dy (or dS^T q), p the
 * block's rows from r0 on. */
static inline __attribute__((always_inline)) void tile_ptd(int nv, int r0, int i0, int i1,
                                                           int j0, float alpha, const float *p,
                                                           int ldp, const float *a, int lda,
                                                           float *out, int ldo)
{
    v16f acc[ATT_R][4];
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_R; c++)
        #pragma GCC unroll 4
        for (int e = 0; e < nv; e++)
            acc[c][e] = v16_splat(0);
    for (int i = i0; i < i1; i++) {
        v16f b[4];
        #pragma GCC unroll 4
        for (int e = 0; e < nv; e++)
            b[e] = v16_ld(a + (size_t)i * lda + 16 * e);
        const float *pr = p + (size_t)(i - r0) * ldp + j0;
        #pragma GCC unroll 4
        for (int c = 0; c < ATT_R; c++)
            #pragma GCC unroll 4
            for (int e = 0; e < nv; e++)
                acc[c][e] += pr[c] * b[e];
    }
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_R; c++)
        #pragma GCC unroll 4
        for (int e = 0; e < nv; e++) {
            float *o = out + (size_t)(j0 + c) * ldo + 16 * e;
            v16_st(o, v16_ld(o) + alpha * acc[c][e]);
        }
}

/* tile_ptd in eight-float vectors, 16 columns (see tile_mm8) */
static inline __attribute__((always_inline)) void tile_ptd8(int r0, int i0, int i1, int j0,
                                                            float alpha, const float *p, int ldp,
                                                            const float *a, int lda, float *out,
                                                            int ldo)
{
    att_v8f acc[ATT_R][2];
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_R; c++)
        acc[c][0] = acc[c][1] = (att_v8f){ 0 };
    for (int i = i0; i < i1; i++) {
        const att_v8f b0 = V8_LD(a + (size_t)i * lda), b1 = V8_LD(a + (size_t)i * lda + 8);
        const float *pr = p + (size_t)(i - r0) * ldp + j0;
        #pragma GCC unroll 4
        for (int c = 0; c < ATT_R; c++) {
            acc[c][0] += pr[c] * b0;
            acc[c][1] += pr[c] * b1;
        }
    }
    #pragma GCC unroll 4
    for (int c = 0; c < ATT_R; c++) {
        float *o = out + (size_t)(j0 + c) * ldo;
        V8_ST(o, V8_LD(o) + alpha * acc[c][0]);
        V8_ST(o + 8, V8_LD(o + 8) + alpha * acc[c][1]);
    }
}

/* out[0 .. r0+TB) (·, hs) stride ldo += alpha P^T a[r0 ..]: P (TB, ·) the
 * block's rows (stride ldp, zero past each row's key), a (TB, hs) stride
 * lda; key j gathers rows max(j, r0) .. r0+TB-1 only. */
DT_KERNEL_BODY void block_ptd_body(int narrow, int r0, int hs, float alpha, const float *p,
                                   int ldp, const float *a, int lda, float *out, int ldo)
{
    for (int j = 0; j < r0 + ATT_TB; j += ATT_R) {
        const int i0 = j > r0 ? j : r0, i1 = r0 + ATT_TB;
        if (narrow) {
            for (int e = 0; e < hs / 16; e++)
                tile_ptd8(r0, i0, i1, j, alpha, p, ldp, a + 16 * e, lda, out + 16 * e, ldo);
            continue;
        }
        switch (hs / 16) {
        case 4: tile_ptd(4, r0, i0, i1, j, alpha, p, ldp, a, lda, out, ldo); break;
        case 3: tile_ptd(3, r0, i0, i1, j, alpha, p, ldp, a, lda, out, ldo); break;
        case 2: tile_ptd(2, r0, i0, i1, j, alpha, p, ldp, a, lda, out, ldo); break;
        default: tile_ptd(1, r0, i0, i1, j, alpha, p, ldp, a, lda, out, ldo); break;
        }
    }
}
DT_KERNEL_VARIANTS_NARROW_FMA(block_ptd, (int r0, int hs, float alpha, const float *p, int ldp, const float *a, int lda, float *out, int ldo), (r0, hs, alpha, p, ldp, a, lda, out, ldo));

/* A head's q, k or v (T, hs) stride ld, plus its bias b (hs) where b is not
 * NULL, into xh (T, hs) contiguous and, transposed, into xt (hs, T); either
 * may be NULL. Eight rows by eight columns at a time (T and hs multiples of
 * 8), the transpose in registers: unpack pairs of rows, then pairs of pairs,
 * then the two 128-bit halves. */
#define ATT_SHUF(a, b, ...) __builtin_shuffle(a, b, (vi8){ __VA_ARGS__ })
DT_KERNEL_BODY void att_pack_body(int T, int hs, const float *x, int ld, const float *b,
                                  float *xh, float *xt)
{
    for (int t0 = 0; t0 < T; t0 += 8)
        for (int d0 = 0; d0 < hs; d0 += 8) {
            vf8 r[8];
            const vf8 bb = b ? vf8_ld(b + d0) : (vf8){ 0 };
            #pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                r[t] = vf8_ld(x + (size_t)(t0 + t) * ld + d0);
                if (b)
                    r[t] = r[t] + bb;
                if (xh)
                    vf8_st(xh + (size_t)(t0 + t) * hs + d0, r[t]);
            }
            if (!xt)
                continue;
            vf8 u[8], w[8];
            #pragma GCC unroll 4
            for (int t = 0; t < 8; t += 2) {
                u[t] = ATT_SHUF(r[t], r[t + 1], 0, 8, 1, 9, 4, 12, 5, 13);
                u[t + 1] = ATT_SHUF(r[t], r[t + 1], 2, 10, 3, 11, 6, 14, 7, 15);
            }
            #pragma GCC unroll 2
            for (int t = 0; t < 8; t += 4)
                #pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    w[t + 2 * h] = ATT_SHUF(u[t + h], u[t + 2 + h], 0, 1, 8, 9, 4, 5, 12, 13);
                    w[t + 2 * h + 1] = ATT_SHUF(u[t + h], u[t + 2 + h], 2, 3, 10, 11, 6, 7, 14, 15);
                }
            /* w[0..3]: columns (0, 4), (1, 5), (2, 6), (3, 7) of rows 0-3; w[4..7] of rows 4-7 */
            #pragma GCC unroll 4
            for (int d = 0; d < 4; d++) {
                vf8_st(xt + (size_t)(d0 + d) * T + t0,
                       ATT_SHUF(w[d], w[d + 4], 0, 1, 2, 3, 8, 9, 10, 11));
                vf8_st(xt + (size_t)(d0 + d + 4) * T + t0,
                       ATT_SHUF(w[d], w[d + 4], 4, 5, 6, 7, 12, 13, 14, 15));
            }
        }
}
DT_KERNEL_VARIANTS(att_pack, (int T, int hs, const float *x, int ld, const float *b, float *xh, float *xt), (T, hs, x, ld, b, xh, xt));

/* dx (T, hs) stride ld = 0 */
static void zero_head(int T, int hs, float *dx, int ld)
{
    for (int t = 0; t < T; t++)
        for (int d = 0; d < hs; d++)
            dx[(size_t)t * ld + d] = 0.0f;
}

/* The next head's q, k and v rows (T rows of hs floats at stride ld, C
 * apart) toward L1 while this head computes: the forward's packs read them
 * from L2, where c_attn's product left them, at a stride that the hardware
 * prefetchers do not follow across pages (GPT baby, one thread, Xeon SPR:
 * +0.6 to +1.4 % tokens/s under avx2, +0.7 to +1.1 % under avx512_core; GPT
 * small +0.5 %). In the backward, where they come from memory and the step
 * also reads the output gradient and writes dqkv, the same prefetch cost 1 %. */
static inline void prefetch_head(int T, int hs, const float *q, int C, int ld)
{
    for (int t = 0; t < T; t++)
        for (int m = 0; m < 3; m++)
            for (int d = 0; d < hs; d += 16)
                __builtin_prefetch(q + (size_t)t * ld + (size_t)m * C + d, 0, 3);
}

void attention_forward_tiled(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                             float *y, float *lse, float *probs, float p, uint64_t key,
                             float *work, int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        float *P = work + (size_t)att_thread_id() * attention_work(T); // (TB, T)
        float *kt = P + (size_t)3 * ATT_TB * T;                    // (hs, T)
        float *qh = kt + (size_t)ATT_HS_MAX * T, *vh = qh + (size_t)ATT_HS_MAX * T; // (T, hs)
        const float *q = qkv + head_qkv(bh, T, C, NH), *k = q + C, *v = q + 2 * C;
        if (bh + 1 < B * NH)
            prefetch_head(T, hs, qkv + head_qkv(bh + 1, T, C, NH), C, C3);
        float *yh = y + head_out(bh, T, C, NH), *l = lse + (size_t)bh * T;
        int ldq = C3, ldv = C3;
        const float *bq = bqkv ? bqkv + (bh % NH) * hs : NULL;
        DT_KERNEL(att_pack)(T, hs, k, C3, bq ? bq + C : NULL, NULL, kt);
        if (bq) { // q and v with their bias, (T, hs) each
            DT_KERNEL(att_pack)(T, hs, q, C3, bq, qh, NULL);
            DT_KERNEL(att_pack)(T, hs, v, C3, bq + 2 * C, vh, NULL);
            q = qh;
            v = vh;
            ldq = ldv = hs;
        }
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            DT_KERNEL(block_dot)(r0, hs, scale, q, ldq, kt, T, P, T); // S (TB, r0 + TB), causal tiles
            att_block_softmax(bh, T, r0, P, l, probs, p, key);
            DT_KERNEL(block_pv)(r0, hs, 1.0f, P, T, v, ldv, yh, C); // y[r0..] = P v
        }
    }
}

void attention_backward_tiled(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                              const float *lse, const float *probs, const float *dy, float p,
                              uint64_t key, float *dqkv, float *work, int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        float *Pw = work + (size_t)att_thread_id() * attention_work(T); // (TB, T) each
        float *dP = Pw + (size_t)ATT_TB * T, *Pd = Pw + (size_t)2 * ATT_TB * T;
        float *vt = Pw + (size_t)3 * ATT_TB * T, *kt = vt + (size_t)ATT_HS_MAX * T; // (hs, T)
        float *qh = kt + (size_t)ATT_HS_MAX * T, *kh = qh + (size_t)ATT_HS_MAX * T; // (T, hs)
        const size_t o = head_qkv(bh, T, C, NH);
        const float *q = qkv + o, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + o, *dk = dq + C, *dv = dq + 2 * C;
        const float *dyh = dy + head_out(bh, T, C, NH); // (T, hs), stride C
        const float *l = lse + (size_t)bh * T;
        zero_head(T, hs, dk, C3);
        zero_head(T, hs, dv, C3);
        const float *bq = bqkv ? bqkv + (bh % NH) * hs : NULL;
        int ldq = C3, ldk = C3;
        DT_KERNEL(att_pack)(T, hs, v, C3, bq ? bq + 2 * C : NULL, NULL, vt);
        if (bq) { // q and k with their bias, (T, hs) each, and k^T
            DT_KERNEL(att_pack)(T, hs, q, C3, bq, qh, NULL);
            DT_KERNEL(att_pack)(T, hs, k, C3, bq + C, kh, probs ? NULL : kt);
            q = qh;
            k = kh;
            ldq = ldk = hs;
        } else if (!probs)
            DT_KERNEL(att_pack)(T, hs, k, C3, NULL, NULL, kt);
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            const float *P = Pw; // (TB, r0 + TB) of the probabilities, stride T
            if (probs)
                P = probs + ((size_t)bh * T + r0) * T;
            else {
                DT_KERNEL(block_dot)(r0, hs, scale, q, ldq, kt, T, Pw, T);
                att_block_softmax_again(T, r0, l, Pw);
            }
            DT_KERNEL(block_dot)(r0, hs, 1.0f, dyh, C, vt, T, dP, T); // dP = dy v^T, causal tiles
            const float *Pv = P; // the probabilities v was multiplied by
            if (p > 0.0f) {
                att_block_dropout_grad(bh, T, r0, P, dP, Pd, p, key);
                Pv = Pd;
            }
            DT_KERNEL(block_ptd)(r0, hs, 1.0f, Pv, T, dyh, C, dv, C3); // dv += Pv^T dy[r0..]
            att_block_softmax_backward(T, r0, P, dP);
            DT_KERNEL(block_pv)(r0, hs, scale, dP, T, k, ldk, dq, C3);  // dq[r0..] = scale dS k
            DT_KERNEL(block_ptd)(r0, hs, scale, dP, T, q, ldq, dk, C3); // dk += scale dS^T q[r0..]
        }
    }
}
