/* Causal multi-head self-attention over a fused qkv (B, T, 3C).
 *
 * Per (batch, head) the scores S = q k^T / sqrt(hs) form one (T, T) block in
 * the scratch; softmax (causal: row i sees columns 0..i) turns it into the
 * probabilities P, and y = P v. Only each row's log-sum-exp is kept: the
 * backward pass recomputes S and P = exp(S - lse) one block at a time, which
 * costs one more q k^T product but keeps B*NH*T*T floats per layer out of
 * memory (for the "small" GPT 12.6 MB a layer). */
#include "nn/transformer.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

size_t attention_work(int T) { return (size_t)3 * T * T; }

/* Mask index of probability (i, j) of head bh: one dropout site per layer. */
static inline uint64_t att_index(int bh, int T, int i, int j)
{
    return ((uint64_t)bh * T + (uint64_t)i) * T + (uint64_t)j;
}

void attention_forward(int B, int T, int C, int NH, const float *qkv, float *y, float *lse,
                       float p, uint64_t key, float *work)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    float *P = work; // (T, T)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int bh = b * NH + h;
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
            // S (T, T) = scale q (T, hs) k^T (hs, T)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, P, T);
            float *l = lse + (size_t)bh * T;
            for (int i = 0; i < T; i++) {
                float *s = P + (size_t)i * T;
                float mx = s[0];
                for (int j = 1; j <= i; j++)
                    mx = s[j] > mx ? s[j] : mx;
                float sum = 0;
                for (int j = 0; j <= i; j++) {
                    s[j] = expf(s[j] - mx);
                    sum += s[j];
                }
                const float inv = 1.0f / sum;
                l[i] = mx + logf(sum);
                if (p > 0.0f)
                    for (int j = 0; j <= i; j++)
                        s[j] *= inv * dropout_factor(key, att_index(bh, T, i, j), p);
                else
                    for (int j = 0; j <= i; j++)
                        s[j] *= inv;
                memset(s + i + 1, 0, (size_t)(T - 1 - i) * sizeof *s);
            }
            // y (T, hs) = P (T, T) v (T, hs), into columns h*hs.. of y (B, T, C)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, v, C3,
                        0.0f, y + (size_t)b * T * C + (size_t)h * hs, C);
        }
}

void attention_backward(int B, int T, int C, int NH, const float *qkv, const float *lse,
                        const float *dy, float p, uint64_t key, float *dqkv, float *work)
{
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    float *P = work, *dP = work + (size_t)T * T, *Pd = work + (size_t)2 * T * T; // (T, T) each
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int bh = b * NH + h;
            const size_t o = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + o, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + o, *dk = dq + C, *dv = dq + 2 * C;
            const float *dyh = dy + (size_t)b * T * C + (size_t)h * hs; // (T, hs), stride C
            const float *l = lse + (size_t)bh * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, P, T);
            for (int i = 0; i < T; i++) {
                float *s = P + (size_t)i * T;
                for (int j = 0; j <= i; j++)
                    s[j] = expf(s[j] - l[i]);
                memset(s + i + 1, 0, (size_t)(T - 1 - i) * sizeof *s);
            }
            // dP (T, T) = dy (T, hs) v^T (hs, T): the gradient of the dropped probabilities
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dyh, C, v, C3,
                        0.0f, dP, T);
            const float *Pv = P; // the probabilities v was multiplied by
            if (p > 0.0f) {
                for (int i = 0; i < T; i++)
                    for (int j = 0; j < T; j++) {
                        const float m = j <= i ? dropout_factor(key, att_index(bh, T, i, j), p) : 0.0f;
                        Pd[(size_t)i * T + j] = P[(size_t)i * T + j] * m;
                        dP[(size_t)i * T + j] *= m;
                    }
                Pv = Pd;
            }
            // dv (T, hs) = Pv^T (T, T) dy (T, hs)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, Pv, T, dyh, C,
                        0.0f, dv, C3);
            // softmax backward: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik), in place in dP
            for (int i = 0; i < T; i++) {
                const float *pr = P + (size_t)i * T;
                float *dr = dP + (size_t)i * T;
                float d = 0;
                for (int j = 0; j <= i; j++)
                    d += pr[j] * dr[j];
                for (int j = 0; j <= i; j++)
                    dr[j] = pr[j] * (dr[j] - d);
                memset(dr + i + 1, 0, (size_t)(T - 1 - i) * sizeof *dr);
            }
            // dq = scale dS k, dk = scale dS^T q
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dP, T, k, C3,
                        0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dP, T, q, C3,
                        0.0f, dk, C3);
        }
}
