/* Causal multi-head self-attention over a fused qkv (B, T, 3C).
 *
 * Per (batch, head) the scores S = q k^T / sqrt(hs), the causal softmax P and
 * y = P v are formed one block of ATT_TB query rows at a time: rows r0 ..
 * r0+TB-1 see only keys 0 .. r0+TB-1, so the sgemms skip the blocks above
 * the diagonal (for T = 256 they do 36/64 of the full products), and the
 * scratch holds (TB, T) floats per buffer, never a (T, T) block. The
 * backward pass needs the probabilities: by default only each row's
 * log-sum-exp is kept and the backward recomputes S and P = exp(S - lse)
 * block by block, which costs one more q k^T product but keeps B*NH*T*T
 * floats per layer out of memory (for the "small" GPT 12.6 MB a layer);
 * where they are cheap to keep, the caller passes `probs` and the backward
 * reads them instead. exp is nn/fast_exp.h's, sixteen lanes at a time. */
#include "nn/transformer.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/simd.h"
#include "nn/fast_exp.h"

/* Query rows per block. 16 keeps every sgemm here at or below OpenBLAS's
 * threading threshold (m n k <= 2^18) for T <= 256 and head size <= 64, so
 * OpenBLAS runs them on the calling thread while OpenMP spreads the heads over
 * the threads; 16, 32 and 64 cost the same within 5 % on one thread. */
#define ATT_TB 16

size_t attention_work(int T) { return (size_t)3 * ATT_TB * (size_t)T; }

static int thread_id(void)
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

/* Row i of a block: s (n = i + 1 scores, then up to `cols`) becomes the
 * softmax, zeros after it; returns the log-sum-exp. */
DT_CLONES static float softmax_row(int n, int cols, float *s)
{
    float mx = s[0];
    for (int j = 1; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    v16f acc = v16_splat(0);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        v16f e;
        V16_EXP(e, v16_ld(s + j) - mx);
        v16_st(s + j, e);
        acc += e;
    }
    float sum = 0;
    for (int k = 0; k < 16; k++)
        sum += acc[k];
    for (; j < n; j++) {
        s[j] = fast_expf(s[j] - mx);
        sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (j = 0; j + 16 <= n; j += 16)
        v16_st(s + j, v16_ld(s + j) * inv);
    for (; j < n; j++)
        s[j] *= inv;
    memset(s + n, 0, (size_t)(cols - n) * sizeof *s);
    return mx + logf(sum);
}

/* Row i recomputed: s = exp(s - lse) on the first n, zeros up to cols. */
DT_CLONES static void softmax_row_again(int n, int cols, float lse, float *s)
{
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        v16f e;
        V16_EXP(e, v16_ld(s + j) - lse);
        v16_st(s + j, e);
    }
    for (; j < n; j++)
        s[j] = fast_expf(s[j] - lse);
    memset(s + n, 0, (size_t)(cols - n) * sizeof *s);
}

/* Softmax backward of row i: d = p (d - sum(p d)) on the first n, zeros up to cols. */
DT_CLONES static void softmax_row_backward(int n, int cols, const float *p, float *d)
{
    v16f acc = v16_splat(0);
    int j = 0;
    for (; j + 16 <= n; j += 16)
        acc += v16_ld(p + j) * v16_ld(d + j);
    float dot = 0;
    for (int k = 0; k < 16; k++)
        dot += acc[k];
    for (; j < n; j++)
        dot += p[j] * d[j];
    for (j = 0; j + 16 <= n; j += 16)
        v16_st(d + j, v16_ld(p + j) * (v16_ld(d + j) - dot));
    for (; j < n; j++)
        d[j] = p[j] * (d[j] - dot);
    memset(d + n, 0, (size_t)(cols - n) * sizeof *d);
}

void attention_forward(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                       float *probs, float p, uint64_t key, float *work, int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        float *P = work + (size_t)thread_id() * attention_work(T); // (TB, T)
        const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
        float *yh = y + (size_t)b * T * C + (size_t)h * hs, *l = lse + (size_t)bh * T;
        for (int r0 = 0; r0 < T; r0 += ATT_TB) {
            const int rows = T - r0 < ATT_TB ? T - r0 : ATT_TB, cols = r0 + rows;
            // S (rows, cols) = scale q[r0..] (rows, hs) k[0..cols)^T (hs, cols)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, scale,
                        q + (size_t)r0 * C3, C3, k, C3, 0.0f, P, T);
            for (int i = 0; i < rows; i++) {
                float *s = P + (size_t)i * T;
                l[r0 + i] = softmax_row(r0 + i + 1, cols, s);
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

void attention_backward(int B, int T, int C, int NH, const float *qkv, const float *lse,
                        const float *probs, const float *dy, float p, uint64_t key, float *dqkv,
                        float *work, int nwork)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for schedule(dynamic) num_threads(nwork) if (nwork > 1)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        float *Pw = work + (size_t)thread_id() * attention_work(T); // (TB, T) each
        float *dP = Pw + (size_t)ATT_TB * T, *Pd = Pw + (size_t)2 * ATT_TB * T;
        const size_t o = (size_t)b * T * C3 + (size_t)h * hs;
        const float *q = qkv + o, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + o, *dk = dq + C, *dv = dq + 2 * C;
        const float *dyh = dy + (size_t)b * T * C + (size_t)h * hs; // (T, hs), stride C
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
                    softmax_row_again(r0 + i + 1, cols, l[r0 + i], Pw + (size_t)i * T);
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
                softmax_row_backward(r0 + i + 1, cols, P + (size_t)i * T, dP + (size_t)i * T);
            // dq[r0..] (rows, hs) = scale dS (rows, cols) k[0..cols) (cols, hs)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, scale, dP,
                        T, k, C3, 0.0f, dq + (size_t)r0 * C3, C3);
            // dk[0..cols) (cols, hs) += scale dS^T (cols, rows) q[r0..] (rows, hs)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, scale, dP, T,
                        q + (size_t)r0 * C3, C3, 1.0f, dk, C3);
        }
    }
}
