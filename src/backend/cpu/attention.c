/* Causal multi-head self-attention over a fused qkv (B, T, 3C).
 *
 * Per (batch, head) the scores S = q k^T / sqrt(hs), the causal softmax P and
 * y = P v are formed one block of ATT_TB query rows at a time: rows r0 ..
 * r0+TB-1 see only keys 0 .. r0+TB-1, so the products skip the blocks above
 * the diagonal, and the scratch holds (TB, T) floats per buffer, never a
 * (T, T) block. The backward pass needs the probabilities: by default only
 * each row's log-sum-exp is kept and the backward recomputes S and
 * P = exp(S - lse) block by block, which costs one more q k^T product but
 * keeps B*NH*T*T floats per layer out of memory (for the "small" GPT 12.6 MB
 * a layer); where they are cheap to keep, the caller passes `probs` and the
 * backward reads them instead. exp is backend/cpu/fast_exp.h's, sixteen lanes at a
 * time; masked entries are exact zeros in P and dS, so they add nothing.
 *
 * Two paths compute the products, chosen by shape:
 * - tiled (T a multiple of 16, head size 16, 32, 48 or 64: every GPT
 *   configuration here; backend/cpu/attention_tiled.c): hand-vectorized register tiles of four rows by up
 *   to four 16-float vectors, no library call, following the causal edge four
 *   rows at a time; k and v are read transposed, packed once per (batch,
 *   head); the forward's softmax runs four rows interleaved. On one Zen 4
 *   thread (bench/gpt_step --profile, CPU time per layer, forward +
 *   backward): "baby" (T 64, hs 32, probabilities kept) 0.63 ms against the
 *   former sgemm path's 1.02 ms, "small" (T 256, hs 64, recomputed) 19.4
 *   against 26.0 ms. At baby's shapes an OpenBLAS
 *   call's fixed cost (5,400 calls a step) was as large as its arithmetic;
 *   one batched oneDNN matmul over all (batch, head) pairs would have to do
 *   the whole T x T square, 1.6x the blocked products' work.
 * - blocked (any other shape): OpenBLAS sgemms per block, the reference the
 *   tests compare the tiled path with (attention_*_blocked).
 * With compute.precision = bf16 (attention_*_bf16, backend/cpu/attention_bf16.c) the tiled shapes run the
 * same blocks and causal tiles with all six products in bf16 with fp32 sums
 * (vdpbf16ps, two multiply-adds a lane per instruction where an FMA does
 * one; the CPU needs AVX512-BF16): q, k, v, dy, the probabilities after
 * dropout and dS are rounded to bf16 where they enter a product, as
 * PyTorch's autocast does; the softmax, its backward, lse, the dropout
 * masks, the kept probabilities and the outputs stay fp32. Other shapes,
 * and CPUs without AVX512-BF16, take the fp32 paths. On one Zen 4 thread
 * (perf cpu-clock samples, 8 steps of "small" in bf16, two runs each) the
 * attention took 1,042 and 1,120 ms against 1,394 and 1,434 with the fp32
 * tiles, 8.3-8.4 % of the step against 10.6 %: its products in half the
 * time, the rest (softmax, packing, the first touch of each head's q, k, v
 * and dqkv) about the same. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/simd.h"
#include "backend/cpu/attention_int.h"
#include "backend/cpu/fast_exp.h"

/* Three (TB, T) float blocks, then for the fp32 tiled path k^T and v^T
 * (hs, T) and q, k, v with their bias (T, hs) (the forward: k^T, q, v; the
 * backward: v^T, k^T, q, k), or in the same place the bf16 path's: dk^T and
 * dv^T (hs, T) floats, seven packs of (T, hs) bf16 (q, k, v and dy in the
 * layouts its products read) and a (TB, T) bf16 block twice (P or dS as rows
 * and as row pairs), counted in floats. */
#define ATT_W16 (2 * ATT_HS_MAX + 7 * ATT_HS_MAX / 2 + ATT_TB)
size_t attention_work(int T)
{
    return (size_t)(3 * ATT_TB + (4 * ATT_HS_MAX > ATT_W16 ? 4 * ATT_HS_MAX : ATT_W16)) *
           (size_t)T;
}


/* The softmax rows below run in 16-float vectors up to n rounded up to 16
 * wherever that stays within the row's cols (always on the tiled path, where
 * cols is a multiple of 16): lanes at or past n are masked out (their inputs
 * never reach a result, whatever they hold) and written as zeros. A row
 * ending less than 16 floats before cols finishes its last n % 16 entries
 * one at a time (the blocked path's last block when T % 16 != 0). */
static const v16i lane_ids = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

/* lanes of a where m is set, else of b */
#define V16_SEL(m, a, b) ((v16f)(((v16i)(a) & (m)) | ((v16i)(b) & ~(m))))

/* out = the sixteen lanes' sum (maximum) of v, as a tree of four shuffles:
 * four dependent steps, not fifteen. A macro for the reason in core/simd.h. */
#define V16_HREDUCE(out, v, OP)                                                          \
    do {                                                                                 \
        v16f h_ = (v);                                                                   \
        h_ = OP(h_, __builtin_shuffle(h_, (v16i){ 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, \
                                                  3, 4, 5, 6, 7 }));                     \
        h_ = OP(h_, __builtin_shuffle(h_, (v16i){ 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14,   \
                                                  15, 8, 9, 10, 11 }));                  \
        h_ = OP(h_, __builtin_shuffle(h_, (v16i){ 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9,  \
                                                  14, 15, 12, 13 }));                    \
        h_ = OP(h_, __builtin_shuffle(h_, (v16i){ 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10,  \
                                                  13, 12, 15, 14 }));                    \
        (out) = h_[0];                                                                   \
    } while (0)
#define ADD_(a, b) ((a) + (b))
#define MAX_(a, b) V16_SEL((b) > (a), (b), (a))

/* The narrow variants (AVX2, baseline) take each 16-float step as two
 * eight-float halves, whose maxima and sums are gathered in V16_HREDUCE's
 * order (the halves first, lane l with lane l + 8), so the same bits. */
static const vi8 lane8_ids = { 0, 1, 2, 3, 4, 5, 6, 7 };
#define VF8_SEL(m, a, b) ((vf8)(((vi8)(a) & (m)) | ((vi8)(b) & ~(m))))
#define VF8_HREDUCE(out, v, OP)                                                          \
    do {                                                                                 \
        vf8 h_ = (v);                                                                    \
        h_ = OP(h_, __builtin_shuffle(h_, (vi8){ 4, 5, 6, 7, 0, 1, 2, 3 }));             \
        h_ = OP(h_, __builtin_shuffle(h_, (vi8){ 2, 3, 0, 1, 6, 7, 4, 5 }));             \
        h_ = OP(h_, __builtin_shuffle(h_, (vi8){ 1, 0, 3, 2, 5, 4, 7, 6 }));             \
        (out) = h_[0];                                                                   \
    } while (0)
#define MAX8_(a, b) VF8_SEL((b) > (a), (b), (a))

/* floats of the row done in vectors: n rounded up to 16, or down where that would pass cols */
static inline int vec_span(int n, int cols)
{
    const int up = (n + 15) & ~15;
    return up <= cols ? up : n & ~15;
}

/* Row i of a block: s (n = i + 1 scores, then up to `cols`) becomes the
 * softmax, zeros after it; returns the log-sum-exp. */
static inline __attribute__((always_inline)) float softmax_row_narrow(int n, int cols, float *s)
{
    const int nv = vec_span(n, cols);
    const vf8 ninf = (vf8){ 0 } - INFINITY, zero = (vf8){ 0 };
    vf8 mlo = ninf, mhi = ninf;
    for (int j = 0; j < nv; j += 16) {
        const vi8 m0 = lane8_ids + j < n, m1 = lane8_ids + (j + 8) < n;
        const vf8 x0 = VF8_SEL(m0, vf8_ld(s + j), ninf), x1 = VF8_SEL(m1, vf8_ld(s + j + 8), ninf);
        mlo = VF8_SEL(x0 > mlo, x0, mlo);
        mhi = VF8_SEL(x1 > mhi, x1, mhi);
    }
    float mx;
    VF8_HREDUCE(mx, MAX8_(mlo, mhi), MAX8_);
    for (int j = nv; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    vf8 alo = zero, ahi = zero;
    for (int j = 0; j < nv; j += 16) {
        const vi8 m0 = lane8_ids + j < n, m1 = lane8_ids + (j + 8) < n;
        vf8 e0, e1;
        VF8_EXP(e0, VF8_SEL(m0, vf8_ld(s + j) - mx, zero));
        VF8_EXP(e1, VF8_SEL(m1, vf8_ld(s + j + 8) - mx, zero));
        e0 = VF8_SEL(m0, e0, zero);
        e1 = VF8_SEL(m1, e1, zero);
        vf8_st(s + j, e0);
        vf8_st(s + j + 8, e1);
        alo += e0;
        ahi += e1;
    }
    float sum;
    VF8_HREDUCE(sum, alo + ahi, ADD_);
    for (int j = nv; j < n; j++) {
        s[j] = fast_expf(s[j] - mx);
        sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < nv; j += 8)
        vf8_st(s + j, vf8_ld(s + j) * inv);
    for (int j = nv; j < n; j++)
        s[j] *= inv;
    const int z = nv > n ? nv : n;
    memset(s + z, 0, (size_t)(cols - z) * sizeof *s);
    return mx + logf(sum);
}

DT_KERNEL_BODY float softmax_row_body(int narrow, int n, int cols, float *s)
{
    if (narrow)
        return softmax_row_narrow(n, cols, s);
    const int nv = vec_span(n, cols);
    v16f vmx = v16_splat(-INFINITY);
    for (int j = 0; j < nv; j += 16) {
        const v16i m = lane_ids + j < n;
        const v16f x = V16_SEL(m, v16_ld(s + j), v16_splat(-INFINITY));
        vmx = V16_SEL(x > vmx, x, vmx);
    }
    float mx;
    V16_HREDUCE(mx, vmx, MAX_);
    for (int j = nv; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    v16f acc = v16_splat(0);
    for (int j = 0; j < nv; j += 16) {
        const v16i m = lane_ids + j < n;
        v16f e;
        V16_EXP(e, V16_SEL(m, v16_ld(s + j) - mx, v16_splat(0)));
        e = V16_SEL(m, e, v16_splat(0));
        v16_st(s + j, e);
        acc += e;
    }
    float sum;
    V16_HREDUCE(sum, acc, ADD_);
    for (int j = nv; j < n; j++) {
        s[j] = fast_expf(s[j] - mx);
        sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < nv; j += 16)
        v16_st(s + j, v16_ld(s + j) * inv);
    for (int j = nv; j < n; j++)
        s[j] *= inv;
    const int z = nv > n ? nv : n;
    memset(s + z, 0, (size_t)(cols - z) * sizeof *s);
    return mx + logf(sum);
}
DT_KERNEL_VARIANTS_NARROW_FMA_RET(float, softmax_row, (int n, int cols, float *s), (n, cols, s));

/* softmax_row on four rows at once, s + r ld with n0 + r scores (r < 4),
 * interleaved: a row is a chain of dependent steps (maximum, exp, sum,
 * scale) too short to keep the vector units busy on its own. Needs
 * n0 + 3 rounded up to 16 within cols; lse[r] the rows' log-sum-exps. */

static inline __attribute__((always_inline)) void softmax_rows4_narrow(int n0, int cols,
                                                                       float *s, int ld,
                                                                       float *lse)
{
    const int nv = (n0 + 3 + 15) & ~15;
    const vf8 ninf = (vf8){ 0 } - INFINITY, zero = (vf8){ 0 };
    vf8 mlo[4], mhi[4], alo[4], ahi[4];
    float mx[4], inv[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        mlo[r] = mhi[r] = ninf;
    for (int j = 0; j < nv; j += 16)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const float *sr = s + (size_t)r * ld + j;
            const vi8 m0 = lane8_ids + j < n0 + r, m1 = lane8_ids + (j + 8) < n0 + r;
            const vf8 x0 = VF8_SEL(m0, vf8_ld(sr), ninf), x1 = VF8_SEL(m1, vf8_ld(sr + 8), ninf);
            mlo[r] = VF8_SEL(x0 > mlo[r], x0, mlo[r]);
            mhi[r] = VF8_SEL(x1 > mhi[r], x1, mhi[r]);
        }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        VF8_HREDUCE(mx[r], MAX8_(mlo[r], mhi[r]), MAX8_);
        alo[r] = ahi[r] = zero;
    }
    for (int j = 0; j < nv; j += 16)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            float *sr = s + (size_t)r * ld + j;
            const vi8 m0 = lane8_ids + j < n0 + r, m1 = lane8_ids + (j + 8) < n0 + r;
            vf8 e0, e1;
            VF8_EXP(e0, VF8_SEL(m0, vf8_ld(sr) - mx[r], zero));
            VF8_EXP(e1, VF8_SEL(m1, vf8_ld(sr + 8) - mx[r], zero));
            e0 = VF8_SEL(m0, e0, zero);
            e1 = VF8_SEL(m1, e1, zero);
            vf8_st(sr, e0);
            vf8_st(sr + 8, e1);
            alo[r] += e0;
            ahi[r] += e1;
        }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        float sum;
        VF8_HREDUCE(sum, alo[r] + ahi[r], ADD_);
        inv[r] = 1.0f / sum;
        lse[r] = mx[r] + logf(sum);
    }
    for (int j = 0; j < nv; j += 8)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            vf8_st(s + (size_t)r * ld + j, vf8_ld(s + (size_t)r * ld + j) * inv[r]);
    for (int r = 0; r < 4; r++)
        memset(s + (size_t)r * ld + nv, 0, (size_t)(cols - nv) * sizeof *s);
}

DT_KERNEL_BODY void softmax_rows4_body(int narrow, int n0, int cols, float *s, int ld,
                                       float *lse)
{
    if (narrow) {
        softmax_rows4_narrow(n0, cols, s, ld, lse);
        return;
    }
    const int nv = (n0 + 3 + 15) & ~15;
    v16f vmx[4], acc[4];
    float mx[4], inv[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        vmx[r] = v16_splat(-INFINITY);
    for (int j = 0; j < nv; j += 16)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const v16i m = lane_ids + j < n0 + r;
            const v16f x = V16_SEL(m, v16_ld(s + (size_t)r * ld + j), v16_splat(-INFINITY));
            vmx[r] = V16_SEL(x > vmx[r], x, vmx[r]);
        }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        V16_HREDUCE(mx[r], vmx[r], MAX_);
        acc[r] = v16_splat(0);
    }
    for (int j = 0; j < nv; j += 16)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const v16i m = lane_ids + j < n0 + r;
            float *sr = s + (size_t)r * ld + j;
            v16f e;
            V16_EXP(e, V16_SEL(m, v16_ld(sr) - mx[r], v16_splat(0)));
            e = V16_SEL(m, e, v16_splat(0));
            v16_st(sr, e);
            acc[r] += e;
        }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        float sum;
        V16_HREDUCE(sum, acc[r], ADD_);
        inv[r] = 1.0f / sum;
        lse[r] = mx[r] + logf(sum);
    }
    for (int j = 0; j < nv; j += 16)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            v16_st(s + (size_t)r * ld + j, v16_ld(s + (size_t)r * ld + j) * inv[r]);
    for (int r = 0; r < 4; r++)
        memset(s + (size_t)r * ld + nv, 0, (size_t)(cols - nv) * sizeof *s);
}
DT_KERNEL_VARIANTS_NARROW_FMA(softmax_rows4, (int n0, int cols, float *s, int ld, float *lse), (n0, cols, s, ld, lse));

/* Row i recomputed: s = exp(s - lse) on the first n, zeros up to cols. */
DT_KERNEL_BODY void softmax_row_again_body(int narrow, int n, int cols, float lse, float *s)
{
    const int nv = vec_span(n, cols);
    for (int j = 0; narrow && j < nv; j += 8) {
        const vi8 m = lane8_ids + j < n;
        vf8 e;
        VF8_EXP(e, VF8_SEL(m, vf8_ld(s + j) - lse, (vf8){ 0 }));
        vf8_st(s + j, VF8_SEL(m, e, (vf8){ 0 }));
    }
    for (int j = 0; !narrow && j < nv; j += 16) {
        const v16i m = lane_ids + j < n;
        v16f e;
        V16_EXP(e, V16_SEL(m, v16_ld(s + j) - lse, v16_splat(0)));
        v16_st(s + j, V16_SEL(m, e, v16_splat(0)));
    }
    for (int j = nv; j < n; j++)
        s[j] = fast_expf(s[j] - lse);
    const int z = nv > n ? nv : n;
    memset(s + z, 0, (size_t)(cols - z) * sizeof *s);
}
DT_KERNEL_VARIANTS_NARROW_FMA(softmax_row_again, (int n, int cols, float lse, float *s), (n, cols, lse, s));

/* Softmax backward of row i: d = p (d - sum(p d)) on the first n, zeros up to cols. */
DT_KERNEL_BODY void softmax_row_backward_body(int narrow, int n, int cols, const float *p,
                                              float *d)
{
    const int nv = vec_span(n, cols);
    float dot;
    if (narrow) {
        const vf8 zero = (vf8){ 0 };
        vf8 alo = zero, ahi = zero;
        for (int j = 0; j < nv; j += 16) {
            const vi8 m0 = lane8_ids + j < n, m1 = lane8_ids + (j + 8) < n;
            alo += VF8_SEL(m0, vf8_ld(p + j) * vf8_ld(d + j), zero);
            ahi += VF8_SEL(m1, vf8_ld(p + j + 8) * vf8_ld(d + j + 8), zero);
        }
        VF8_HREDUCE(dot, alo + ahi, ADD_);
    } else {
        v16f acc = v16_splat(0);
        for (int j = 0; j < nv; j += 16) {
            const v16i m = lane_ids + j < n;
            acc += V16_SEL(m, v16_ld(p + j) * v16_ld(d + j), v16_splat(0));
        }
        V16_HREDUCE(dot, acc, ADD_);
    }
    for (int j = nv; j < n; j++)
        dot += p[j] * d[j];
    for (int j = 0; narrow && j < nv; j += 8) {
        const vi8 m = lane8_ids + j < n;
        vf8_st(d + j, VF8_SEL(m, vf8_ld(p + j) * (vf8_ld(d + j) - dot), (vf8){ 0 }));
    }
    for (int j = 0; !narrow && j < nv; j += 16) {
        const v16i m = lane_ids + j < n;
        v16_st(d + j, V16_SEL(m, v16_ld(p + j) * (v16_ld(d + j) - dot), v16_splat(0)));
    }
    for (int j = nv; j < n; j++)
        d[j] = p[j] * (d[j] - dot);
    const int z = nv > n ? nv : n;
    memset(d + z, 0, (size_t)(cols - z) * sizeof *d);
}
DT_KERNEL_VARIANTS_NARROW_FMA(softmax_row_backward, (int n, int cols, const float *p, float *d), (n, cols, p, d));


void attention_forward_blocked(int B, int T, int C, int NH, const float *qkv, float *y,
                               float *lse, float *probs, float p, uint64_t key, float *work,
                               int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        float *P = work + (size_t)att_thread_id() * attention_work(T); // (TB, T)
        const float *q = qkv + head_qkv(bh, T, C, NH), *k = q + C, *v = q + 2 * C;
        float *yh = y + head_out(bh, T, C, NH), *l = lse + (size_t)bh * T;
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            const int rows = T - r0 < ATT_TB ? T - r0 : ATT_TB, cols = r0 + rows;
            // S (rows, cols) = scale q[r0..] (rows, hs) k[0..cols)^T (hs, cols)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, scale,
                        q + (size_t)r0 * C3, C3, k, C3, 0.0f, P, T);
            for (int i = 0; i < rows; i++) {
                float *s = P + (size_t)i * T;
                l[r0 + i] = DT_KERNEL(softmax_row)(r0 + i + 1, cols, s);
                if (probs)
                    memcpy(probs + ((size_t)bh * T + r0 + i) * T, s, (size_t)cols * sizeof *s);
                if (p > 0.0f)
                    for (int j = 0; j <= r0 + i; j++)
                        s[j] *= dropout_factor(key, att_index(bh, T, r0 + i, j), p);
            }
            // y[r0..] (rows, hs) = P (rows, cols) v[0..cols) (cols, hs), stride C
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, 1.0f, P, T,
                        v, C3, 0.0f, yh + (size_t)r0 * C, C);
        }
    }
}

void attention_backward_blocked(int B, int T, int C, int NH, const float *qkv, const float *lse,
                                const float *probs, const float *dy, float p, uint64_t key,
                                float *dqkv, float *work, int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        float *Pw = work + (size_t)att_thread_id() * attention_work(T); // (TB, T) each
        float *dP = Pw + (size_t)ATT_TB * T, *Pd = Pw + (size_t)2 * ATT_TB * T;
        const size_t o = head_qkv(bh, T, C, NH);
        const float *q = qkv + o, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + o, *dk = dq + C, *dv = dq + 2 * C;
        const float *dyh = dy + head_out(bh, T, C, NH); // (T, hs), stride C
        const float *l = lse + (size_t)bh * T;
        // dk and dv gather from every later query block: zero, then add
        for (int t = 0; t < T; t++) {
            memset(dk + (size_t)t * C3, 0, (size_t)hs * sizeof *dk);
            memset(dv + (size_t)t * C3, 0, (size_t)hs * sizeof *dv);
        }
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            const int rows = T - r0 < ATT_TB ? T - r0 : ATT_TB, cols = r0 + rows;
            const float *P = Pw; // (rows, cols) of the probabilities, stride T
            if (probs)
                P = probs + ((size_t)bh * T + r0) * T;
            else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, scale,
                            q + (size_t)r0 * C3, C3, k, C3, 0.0f, Pw, T);
                for (int i = 0; i < rows; i++)
                    DT_KERNEL(softmax_row_again)(r0 + i + 1, cols, l[r0 + i], Pw + (size_t)i * T);
            }
            // dP (rows, cols) = dy[r0..] (rows, hs) v[0..cols)^T: the gradient of the dropped P
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, 1.0f,
                        dyh + (size_t)r0 * C, C, v, C3, 0.0f, dP, T);
            const float *Pv = P; // the probabilities v was multiplied by
            if (p > 0.0f) {
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < cols; j++) {
                        const float m = j <= r0 + i
                                            ? dropout_factor(key, att_index(bh, T, r0 + i, j), p)
                                            : 0.0f;
                        Pd[(size_t)i * T + j] = P[(size_t)i * T + j] * m;
                        dP[(size_t)i * T + j] *= m;
                    }
                Pv = Pd;
            }
            // dv[0..cols) (cols, hs) += Pv^T (cols, rows) dy[r0..] (rows, hs)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, 1.0f, Pv, T,
                        dyh + (size_t)r0 * C, C, 1.0f, dv, C3);
            for (int i = 0; i < rows; i++)
                DT_KERNEL(softmax_row_backward)(r0 + i + 1, cols, P + (size_t)i * T, dP + (size_t)i * T);
            // dq[r0..] (rows, hs) = scale dS (rows, cols) k[0..cols) (cols, hs)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, scale, dP,
                        T, k, C3, 0.0f, dq + (size_t)r0 * C3, C3);
            // dk[0..cols) (cols, hs) += scale dS^T (cols, rows) q[r0..] (rows, hs)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, scale, dP, T,
                        q + (size_t)r0 * C3, C3, 1.0f, dk, C3);
        }
    }
}

/* ---- the steps of a tiled block both precisions share (backend/cpu/attention_int.h) ---- */

void att_block_softmax(int bh, int T, int r0, float *P, float *lse, float *probs, float p,
                       uint64_t key)
{
    const int cols = r0 + ATT_TB;
    for (int i = 0; i < ATT_TB; i += 4)
        DT_KERNEL(softmax_rows4)(r0 + i + 1, cols, P + (size_t)i * T, T, lse + r0 + i);
    for (int i = 0; i < ATT_TB; i++) {
        float *s = P + (size_t)i * T;
        if (probs)
            memcpy(probs + ((size_t)bh * T + r0 + i) * T, s, (size_t)cols * sizeof *s);
        if (p > 0.0f)
            for (int j = 0; j <= r0 + i; j++)
                s[j] *= dropout_factor(key, att_index(bh, T, r0 + i, j), p);
    }
}

void att_block_softmax_again(int T, int r0, const float *lse, float *P)
{
    for (int i = 0; i < ATT_TB; i++)
        DT_KERNEL(softmax_row_again)(r0 + i + 1, r0 + ATT_TB, lse[r0 + i], P + (size_t)i * T);
}

void att_block_dropout_grad(int bh, int T, int r0, const float *P, float *dP, float *Pd, float p,
                            uint64_t key)
{
    const int cols = r0 + ATT_TB;
    for (int i = 0; i < ATT_TB; i++) {
        const float *pr = P + (size_t)i * T;
        float *dr = dP + (size_t)i * T, *qr = Pd + (size_t)i * T;
        for (int j = 0; j <= r0 + i; j++) {
            const float m = dropout_factor(key, att_index(bh, T, r0 + i, j), p);
            qr[j] = pr[j] * m;
            dr[j] *= m;
        }
        // past the key: Pd zero; dP is zeroed by the softmax backward
        memset(qr + r0 + i + 1, 0, (size_t)(cols - r0 - i - 1) * sizeof *qr);
    }
}

void att_block_softmax_backward(int T, int r0, const float *P, float *dP)
{
    for (int i = 0; i < ATT_TB; i++)
        DT_KERNEL(softmax_row_backward)(r0 + i + 1, r0 + ATT_TB, P + (size_t)i * T, dP + (size_t)i * T);
}

void attention_forward(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                       float *probs, float p, uint64_t key, float *work, int nwork)
{
    if (tiled_fits(T, C / NH))
        attention_forward_tiled(B, T, C, NH, qkv, NULL, y, lse, probs, p, key, work, nwork);
    else
        attention_forward_blocked(B, T, C, NH, qkv, y, lse, probs, p, key, work, nwork);
}

void attention_backward(int B, int T, int C, int NH, const float *qkv, const float *lse,
                        const float *probs, const float *dy, float p, uint64_t key, float *dqkv,
                        float *work, int nwork)
{
    if (tiled_fits(T, C / NH))
        attention_backward_tiled(B, T, C, NH, qkv, NULL, lse, probs, dy, p, key, dqkv, work,
                                 nwork);
    else
        attention_backward_blocked(B, T, C, NH, qkv, lse, probs, dy, p, key, dqkv, work, nwork);
}

int attention_takes_bias(int T, int C, int NH) { return tiled_fits(T, C / NH); }

void attention_bias_forward(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                            float *y, float *lse, float *probs, float p, uint64_t key,
                            float *work, int nwork)
{
    if (!attention_takes_bias(T, C, NH))
        DT_FATAL("attention_bias_forward: T %d, head size %d: not a shape of the tiled path", T,
                 C / NH);
    attention_forward_tiled(B, T, C, NH, qkv, bqkv, y, lse, probs, p, key, work, nwork);
}

void attention_bias_backward(int B, int T, int C, int NH, const float *qkv, const float *bqkv,
                             const float *lse, const float *probs, const float *dy, float p,
                             uint64_t key, float *dqkv, float *work, int nwork)
{
    if (!attention_takes_bias(T, C, NH))
        DT_FATAL("attention_bias_backward: T %d, head size %d: not a shape of the tiled path", T,
                 C / NH);
    attention_backward_tiled(B, T, C, NH, qkv, bqkv, lse, probs, dy, p, key, dqkv, work, nwork);
}
