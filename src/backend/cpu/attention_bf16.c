/* Causal multi-head self-attention with its six products in bf16
 * (compute.precision = bf16): the tiled path of backend/cpu/attention.c (blocks of
 * ATT_TB query rows, register tiles that follow the causal edge) with
 * AVX512-BF16 products; shapes or CPUs it does not fit take the fp32 paths.
 * The figures are in backend/cpu/attention.c's header. */
#include "core/isa.h"
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_int.h"
#include "core/bf16_round.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define ATT_HAVE_BF16 1
/* the bf16 kernels only: built for AVX512-BF16, called where the CPU has it */
#define ATT_BF16 __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,fma")))
#else
#define ATT_HAVE_BF16 0
#endif

/* ---- the tiled path in bf16 (compute.precision = bf16) ----
 *
 * The same blocks, tiles and causal edges as the fp32 tiled path, but every
 * product is tile_bf: out[r][c] (+)= alpha sum_k a[r][k] b[k][c] with both
 * operands rounded to bf16 (core/bf16_round.h, the rounding of every bf16 copy
 * here) and the products summed in fp32 by vdpbf16ps, two terms of the sum
 * per lane and instruction where the fp32 FMA does one. `a` is rows with the k pairs
 * adjacent (one 32-bit word broadcast per pair), `b` is (K/2, columns) words
 * holding rows 2k and 2k+1 of a column side by side (the "VNNI" layout).
 * Per (batch, head) q, k, v and dy are packed once in the layouts their
 * products read, and dk, dv are summed transposed, (hs, T), in the scratch
 * so that P and dS serve as `b` as they come, two rows side by side:
 *     q k^T:      a = q rows,           b = k's column pairs (hs/2, T)
 *     P v:        a = P rows,           b = v's row pairs (T/2, hs)
 *     dy v^T:     a = dy rows,          b = v's column pairs (hs/2, T)
 *     dv^T += dy^T P:  a = dy^T (hs, T/2) pairs, b = the block's P row pairs
 *     dS k:       a = dS rows,          b = k's row pairs (T/2, hs)
 *     dk^T += q^T dS:  a = q^T (hs, T/2) pairs,  b = the block's dS row pairs
 * The transposes go sixteen by sixteen 32-bit words in registers
 * (transpose16), the rounding sixteen lanes at a time (round_hi).
 * The probabilities (after dropout) and dS are rounded to bf16 where they
 * enter a product, as PyTorch's autocast does; the softmax, its backward,
 * the log-sum-exp, the dropout masks and every sum stay fp32, and so do y,
 * dq, dk, dv and the kept probabilities. */

#if ATT_HAVE_BF16

/* Sixteen floats rounded to bf16 exactly as bf16_round (core/bf16_round.h):
 * each lane's bf16 in its high half, the low half zero. */
static inline __attribute__((always_inline)) ATT_BF16 __m512i round_hi(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000)); // quiet NaN
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

/* sixteen pairs: lo's bf16 in the low half of each lane, hi's in the high */
static inline __attribute__((always_inline)) ATT_BF16 __m512i pair_of(__m512 lo, __m512 hi)
{
    return _mm512_or_si512(_mm512_srli_epi32(round_hi(lo), 16), round_hi(hi));
}

/* r[0 .. 15], sixteen rows of sixteen 32-bit words, transposed in place:
 * pairs of rows interleaved, then pairs of pairs, then 128-bit lanes twice */
static inline __attribute__((always_inline)) ATT_BF16 void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { // r[4i + c], lane L: rows 4i .. 4i+3, word 4L + c
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        t[c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
        t[4 + c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
        t[8 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
        r[4 + c] = _mm512_shuffle_i32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(t[4 + c], t[12 + c], 0xdd);
    }
}

/* xr (rows, n) bf16 stride ldr = x (rows, n) stride ld rounded, n a
 * multiple of 16: rows with their k pairs adjacent (an `a` operand) */
ATT_BF16 static void pack_rows_bf(int rows, int n, const float *x, int ld, uint16_t *xr, int ldr)
{
    for (int t = 0; t < rows; t++)
        for (int d = 0; d < n; d += 16)
            _mm256_storeu_si256(
                (__m256i *)(xr + (size_t)t * ldr + d),
                _mm512_cvtepi32_epi16(_mm512_srli_epi32(
                    round_hi(_mm512_loadu_ps(x + (size_t)t * ld + d)), 16)));
}

/* xv (rows/2, n) pairs stride ldv: rows 2t and 2t+1 of x (rows, n) stride
 * ld side by side (a `b` operand), n a multiple of 16 */
ATT_BF16 static void pack_vnni_bf(int rows, int n, const float *x, int ld, uint32_t *xv, int ldv)
{
    for (int t = 0; t < rows / 2; t++)
        for (int d = 0; d < n; d += 16)
            _mm512_storeu_si512(xv + (size_t)t * ldv + d,
                                pair_of(_mm512_loadu_ps(x + (size_t)2 * t * ld + d),
                                        _mm512_loadu_ps(x + (size_t)(2 * t + 1) * ld + d)));
}

/* kt (hs/2, T) pairs = x (T, hs) stride ld with its column pairs as rows:
 * kt[d][t] = (x[t][2d], x[t][2d+1]), sixteen rows of x at a time through
 * transpose16 (the `b` of q k^T and dy v^T) */
ATT_BF16 static void pack_t_bf(int T, int hs, const float *x, int ld, uint32_t *kt)
{
    uint16_t row[16][64] = { { 0 } }; // sixteen rows rounded: 32 pairs each
    for (int t0 = 0; t0 < T; t0 += 16) {
        pack_rows_bf(16, hs, x + (size_t)t0 * ld, ld, &row[0][0], 64);
        for (int w0 = 0; w0 < hs / 2; w0 += 16) {
            __m512i r[16];
            for (int t = 0; t < 16; t++)
                r[t] = _mm512_loadu_si512(&row[t][2 * w0]);
            transpose16(r);
            for (int w = w0; w < hs / 2 && w < w0 + 16; w++)
                _mm512_storeu_si512(kt + (size_t)w * T + t0, r[w - w0]);
        }
    }
}

/* xt (hs, T/2) pairs = x (T, hs) stride ld with its row pairs along rows:
 * xt[d][t] = (x[2t][d], x[2t+1][d]), sixteen row pairs at a time (the `a`
 * of dy^T P and q^T dS); T/2 a multiple of 8 */
ATT_BF16 static void pack_tv_bf(int T, int hs, const float *x, int ld, uint32_t *xt)
{
    const int T2 = T / 2;
    for (int t0 = 0; t0 < T2; t0 += 16) {
        const int nt = T2 - t0 < 16 ? T2 - t0 : 16;
        const __mmask16 m = (__mmask16)((1u << nt) - 1);
        for (int d0 = 0; d0 < hs; d0 += 16) {
            __m512i r[16];
            for (int t = 0; t < 16; t++)
                r[t] = t < nt ? pair_of(_mm512_loadu_ps(x + (size_t)2 * (t0 + t) * ld + d0),
                                        _mm512_loadu_ps(x + (size_t)(2 * (t0 + t) + 1) * ld + d0))
                              : _mm512_setzero_si512();
            transpose16(r);
            for (int c = 0; c < 16; c++)
                _mm512_mask_storeu_epi32(xt + (size_t)(d0 + c) * T2 + t0, m, r[c]);
        }
    }
}

/* out (T, hs) stride ldo = xt (hs, T) transposed, sixteen by sixteen */
ATT_BF16 static void unpack_t(int T, int hs, const float *xt, float *out, int ldo)
{
    for (int j0 = 0; j0 < T; j0 += 16)
        for (int d0 = 0; d0 < hs; d0 += 16) {
            __m512i r[16];
            for (int c = 0; c < 16; c++)
                r[c] = _mm512_castps_si512(_mm512_loadu_ps(xt + (size_t)(d0 + c) * T + j0));
            transpose16(r);
            for (int c = 0; c < 16; c++)
                _mm512_storeu_ps(out + (size_t)(j0 + c) * ldo + d0, _mm512_castsi512_ps(r[c]));
        }
}

/* One register tile: out[r ldo + 16 v + c] = alpha sum_{k = k0 .. k1-1}
 * (a[r lda + k] . b[k ldb + 16 v + c]) for r < ATT_R, v < nv, where each
 * operand is a pair of bf16 and . their two products' sum; add: out +=
 * instead of =. */
static inline __attribute__((always_inline)) ATT_BF16 void
tile_bf(int nv, int k0, int k1, float alpha, const uint32_t *a, int lda, const uint32_t *b,
        int ldb, float *out, int ldo, int add)
{
    __m512 acc[ATT_R][4];
    #pragma GCC unroll 4
    for (int r = 0; r < ATT_R; r++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (int k = k0; k < k1; k++) {
        __m512i bk[4];
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            bk[v] = _mm512_loadu_si512(b + (size_t)k * ldb + 16 * v);
        #pragma GCC unroll 4
        for (int r = 0; r < ATT_R; r++) {
            const __m512i ar = _mm512_set1_epi32((int)a[(size_t)r * lda + k]);
            #pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)ar, (__m512bh)bk[v]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha);
    #pragma GCC unroll 4
    for (int r = 0; r < ATT_R; r++)
        #pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *o = out + (size_t)r * ldo + 16 * v;
            _mm512_storeu_ps(o, add ? _mm512_fmadd_ps(al, acc[r][v], _mm512_loadu_ps(o))
                                    : _mm512_mul_ps(al, acc[r][v]));
        }
}

/* block_dot in bf16: S (TB, ·) stride T = alpha a[r0 ..] bt, a (T, hs/2)
 * pairs, bt (hs/2, T) pairs; the same causal tiles */
ATT_BF16 static void block_dot_bf(int r0, int hs, int T, float alpha, const uint32_t *a,
                                  const uint32_t *bt, float *out)
{
    const int h2 = hs / 2;
    for (int i = 0; i < ATT_TB; i += ATT_R) {
        const uint32_t *ar = a + (size_t)(r0 + i) * h2;
        float *o = out + (size_t)i * T;
        const int cols = round16(r0 + i + ATT_R);
        int j = 0;
        for (; j + 64 <= cols; j += 64)
            tile_bf(4, 0, h2, alpha, ar, h2, bt + j, T, o + j, T, 0);
        switch ((cols - j) / 16) {
        case 3: tile_bf(3, 0, h2, alpha, ar, h2, bt + j, T, o + j, T, 0); break;
        case 2: tile_bf(2, 0, h2, alpha, ar, h2, bt + j, T, o + j, T, 0); break;
        case 1: tile_bf(1, 0, h2, alpha, ar, h2, bt + j, T, o + j, T, 0); break;
        default: break;
        }
    }
}

/* block_pv in bf16: out[r0 ..] (TB, hs) stride ldo = alpha p v, p the
 * block's rows (TB, ·) pairs, stride ldp, v (T/2, hs) pairs; the tile of
 * rows i0 .. i0+3 sums keys 0 .. i0+3 */
ATT_BF16 static void block_pv_bf(int r0, int hs, float alpha, const uint32_t *p, int ldp,
                                 const uint32_t *v, float *out, int ldo)
{
    for (int i = 0; i < ATT_TB; i += ATT_R) {
        const uint32_t *pr = p + (size_t)i * ldp;
        float *o = out + (size_t)(r0 + i) * ldo;
        const int n2 = (r0 + i + ATT_R) / 2;
        switch (hs / 16) {
        case 4: tile_bf(4, 0, n2, alpha, pr, ldp, v, hs, o, ldo, 0); break;
        case 3: tile_bf(3, 0, n2, alpha, pr, ldp, v, hs, o, ldo, 0); break;
        case 2: tile_bf(2, 0, n2, alpha, pr, ldp, v, hs, o, ldo, 0); break;
        default: tile_bf(1, 0, n2, alpha, pr, ldp, v, hs, o, ldo, 0); break;
        }
    }
}


/* outT (hs, T) += alpha aT[:, r0 ..] pv: the transposed dv (or dk) of the
 * block, aT (hs, T/2) pairs (dy or q with its row pairs along rows), pv
 * (TB/2, ·) pairs stride T (the block's P or dS, row pairs side by side,
 * zero past each row's key); the tile of keys j .. j+63 sums the block's
 * rows from max(j, r0) on */
ATT_BF16 static void block_tp_bf(int r0, int hs, int T, float alpha, const uint32_t *aT,
                                 const uint32_t *pv, float *outT)
{
    const int cols = r0 + ATT_TB, T2 = T / 2, b2 = ATT_TB / 2;
    for (int d = 0; d < hs; d += ATT_R) {
        const uint32_t *ar = aT + (size_t)d * T2 + r0 / 2;
        float *o = outT + (size_t)d * T;
        int j = 0;
        for (; j + 64 <= cols; j += 64) {
            const int k0 = j > r0 ? (j - r0) / 2 : 0;
            tile_bf(4, k0, b2, alpha, ar, T2, pv + j, T, o + j, T, 1);
        }
        const int k0 = j > r0 ? (j - r0) / 2 : 0;
        switch ((cols - j) / 16) {
        case 3: tile_bf(3, k0, b2, alpha, ar, T2, pv + j, T, o + j, T, 1); break;
        case 2: tile_bf(2, k0, b2, alpha, ar, T2, pv + j, T, o + j, T, 1); break;
        case 1: tile_bf(1, k0, b2, alpha, ar, T2, pv + j, T, o + j, T, 1); break;
        default: break;
        }
    }
}

static void attention_forward_tiled_bf16(int B, int T, int C, int NH, const float *qkv,
                                         float *y, float *lse, float *probs, float p,
                                         uint64_t key, float *work, int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const size_t th = (size_t)T * hs / 2; // pairs in a packed (T, hs)
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        float *P = work + (size_t)att_thread_id() * attention_work(T); // (TB, T)
        uint32_t *qr = (uint32_t *)(P + (size_t)3 * ATT_TB * T);   // (T, hs) bf16
        uint32_t *kt = qr + th, *vv = kt + th, *p16 = vv + th; // (hs/2, T) (T/2, hs) (TB, T) bf16
        const float *q = qkv + head_qkv(bh, T, C, NH), *k = q + C, *v = q + 2 * C;
        float *yh = y + head_out(bh, T, C, NH), *l = lse + (size_t)bh * T;
        pack_rows_bf(T, hs, q, C3, (uint16_t *)qr, hs);
        pack_t_bf(T, hs, k, C3, kt);
        pack_vnni_bf(T, hs, v, C3, vv, hs);
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            const int cols = r0 + ATT_TB;
            block_dot_bf(r0, hs, T, scale, qr, kt, P); // S (TB, cols), causal tiles
            att_block_softmax(bh, T, r0, P, l, probs, p, key);
            pack_rows_bf(ATT_TB, cols, P, T, (uint16_t *)p16, T);
            block_pv_bf(r0, hs, 1.0f, p16, T / 2, vv, yh, C); // y[r0..] = P v
        }
    }
}

static void attention_backward_tiled_bf16(int B, int T, int C, int NH, const float *qkv,
                                          const float *lse, const float *probs, const float *dy,
                                          float p, uint64_t key, float *dqkv, float *work,
                                          int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const size_t th = (size_t)T * hs / 2, tb = (size_t)T * ATT_TB / 2;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        float *Pw = work + (size_t)att_thread_id() * attention_work(T); // (TB, T) each
        float *dP = Pw + (size_t)ATT_TB * T, *Pd = Pw + (size_t)2 * ATT_TB * T;
        float *dvt = Pw + (size_t)3 * ATT_TB * T, *dkt = dvt + 2 * th; // (hs, T) each
        // rows (T, hs) bf16: q, dy; column pairs (hs/2, T): k, v; row pairs (T/2, hs): k;
        // row pairs along rows (hs, T/2): q, dy; the block's P or dS (TB, T) bf16, (TB/2, T)
        uint32_t *qr = (uint32_t *)(dkt + 2 * th), *dyr = qr + th, *kt = dyr + th;
        uint32_t *vt = kt + th, *kv = vt + th, *qtv = kv + th, *dytv = qtv + th;
        uint32_t *s16 = dytv + th, *sv = s16 + tb;
        const size_t o = head_qkv(bh, T, C, NH);
        const float *q = qkv + o, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + o, *dk = dq + C, *dv = dq + 2 * C;
        const float *dyh = dy + head_out(bh, T, C, NH); // (T, hs), stride C
        const float *l = lse + (size_t)bh * T;
        memset(dvt, 0, 4 * th * sizeof *dvt); // dvt and dkt
        pack_rows_bf(T, hs, dyh, C, (uint16_t *)dyr, hs);
        pack_t_bf(T, hs, v, C3, vt);
        pack_vnni_bf(T, hs, k, C3, kv, hs);
        pack_tv_bf(T, hs, q, C3, qtv);
        pack_tv_bf(T, hs, dyh, C, dytv);
        if (!probs) {
            pack_rows_bf(T, hs, q, C3, (uint16_t *)qr, hs);
            pack_t_bf(T, hs, k, C3, kt);
        }
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            const int cols = r0 + ATT_TB;
            const float *P = Pw; // (TB, cols) of the probabilities, stride T
            if (probs)
                P = probs + ((size_t)bh * T + r0) * T;
            else {
                block_dot_bf(r0, hs, T, scale, qr, kt, Pw);
                att_block_softmax_again(T, r0, l, Pw);
            }
            block_dot_bf(r0, hs, T, 1.0f, dyr, vt, dP); // dP = dy v^T, causal tiles
            const float *Pv = P; // the probabilities v was multiplied by
            if (p > 0.0f) {
                att_block_dropout_grad(bh, T, r0, P, dP, Pd, p, key);
                Pv = Pd;
            }
            pack_vnni_bf(ATT_TB, cols, Pv, T, sv, T);
            block_tp_bf(r0, hs, T, 1.0f, dytv, sv, dvt); // dv^T += dy[r0..]^T Pv
            att_block_softmax_backward(T, r0, P, dP);
            pack_rows_bf(ATT_TB, cols, dP, T, (uint16_t *)s16, T);
            pack_vnni_bf(ATT_TB, cols, dP, T, sv, T);
            block_pv_bf(r0, hs, scale, s16, T / 2, kv, dq, C3); // dq[r0..] = scale dS k
            block_tp_bf(r0, hs, T, scale, qtv, sv, dkt);        // dk^T += scale q[r0..]^T dS
        }
        unpack_t(T, hs, dvt, dv, C3);
        unpack_t(T, hs, dkt, dk, C3);
    }
}

/* the bf16 path runs: built for x86-64 with GCC's intrinsics and the CPU has them */
static int bf16_fits(int T, int hs)
{
    return tiled_fits(T, hs) && isa_level() >= DT_ISA_AVX512_CORE_BF16;
}

#endif /* ATT_HAVE_BF16 */

void attention_forward_bf16(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                            float *probs, float p, uint64_t key, float *work, int nwork)
{
#if ATT_HAVE_BF16
    if (bf16_fits(T, C / NH)) {
        attention_forward_tiled_bf16(B, T, C, NH, qkv, y, lse, probs, p, key, work, nwork);
        return;
    }
#endif
    attention_forward(B, T, C, NH, qkv, y, lse, probs, p, key, work, nwork);
}

void attention_backward_bf16(int B, int T, int C, int NH, const float *qkv, const float *lse,
                             const float *probs, const float *dy, float p, uint64_t key,
                             float *dqkv, float *work, int nwork)
{
#if ATT_HAVE_BF16
    if (bf16_fits(T, C / NH)) {
        attention_backward_tiled_bf16(B, T, C, NH, qkv, lse, probs, dy, p, key, dqkv, work,
                                      nwork);
        return;
    }
#endif
    attention_backward(B, T, C, NH, qkv, lse, probs, dy, p, key, dqkv, work, nwork);
}

int attention_bf16_native(int T, int hs)
{
#if ATT_HAVE_BF16
    return bf16_fits(T, hs);
#else
    (void)T, (void)hs;
    return 0;
#endif
}
