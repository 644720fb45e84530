/* The linear layers of a transformer through OpenBLAS's sgemm, with the
 * weight (out, in) as in PyTorch. Unlike linear.c's, the input gradient is
 * written, not added: in a transformer every linear layer's input feeds
 * only that layer (the residual stream adds its own gradient separately). */
#include "nn/transformer.h"

#include <cblas.h>
#include <string.h>

#include "core/simd.h"

void matmul_forward(int N, int in, int out, const float *x, const float *W, const float *b,
                    float *y)
{
    // y (N, out) = x (N, in) W^T, with the bias broadcast into y first as sgemm's C operand
    float beta = 0.0f;
    if (b) {
        for (int i = 0; i < N; i++)
            memcpy(y + (size_t)i * out, b, (size_t)out * sizeof *y);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x, in, W, in, beta, y,
                out);
}

/* db (out) = column sums of dy (N, out), row by row so the loads are contiguous. */
DT_CLONES static void column_sums(int N, int out, const float *dy, float *db)
{
    memset(db, 0, (size_t)out * sizeof *db);
    for (int i = 0; i < N; i++) {
        const float *r = dy + (size_t)i * out;
        int o = 0;
        for (; o + 16 <= out; o += 16)
            v16_st(db + o, v16_ld(db + o) + v16_ld(r + o));
        for (; o < out; o++)
            db[o] += r[o];
    }
}

void matmul_backward(int N, int in, int out, const float *x, const float *W, const float *dy,
                     float *dx, float *dW, float *db)
{
    if (db)
        column_sums(N, out, dy, db);
    // dW (out, in) = dy^T (out, N) x (N, in)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy, out, x, in, 0.0f,
                dW, in);
    if (dx)
        // dx (N, in) = dy (N, out) W (out, in)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy, out, W, in,
                    0.0f, dx, in);
}
