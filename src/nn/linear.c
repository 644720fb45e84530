/* Fully connected layer on the CPU: y (B, out) = x (B, in) W^T + b, with W
 * stored (out, in) as in PyTorch so checkpoints and initialisers agree. */
#include "nn/kernels_cpu.h"

#include <cblas.h>
#include <string.h>

void cpu_linear_forward(int B, int in, int out, const float *x, const float *W,
                        const float *b, float *y)
{
    if (B <= 0 || out <= 0)
        return;
    // the bias is folded in as the GEMM's C operand (beta = 1)
    if (b) {
        for (int i = 0; i < B; i++)
            memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
    } else if (in <= 0) {
        memset(y, 0, (size_t)B * out * sizeof(float));
    }
    if (in <= 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, x, in, W, in,
                b ? 1.0f : 0.0f, y, out);
}

void cpu_linear_backward(int B, int in, int out, const float *x, const float *W,
                         const float *dy, float *dx, float *dW, float *db)
{
    if (db) {
        // column sums of dy (B, out), accumulated row by row so the inner loop is contiguous
        memset(db, 0, (size_t)(out > 0 ? out : 0) * sizeof(float));
        for (int i = 0; i < B; i++) {
            const float *row = dy + (size_t)i * out;
            for (int j = 0; j < out; j++)
                db[j] += row[j];
        }
    }
    if (dW) {
        if (B <= 0 && out > 0 && in > 0)
            memset(dW, 0, (size_t)out * in * sizeof(float));
        else if (out > 0 && in > 0)
            // dW (out, in) = dy^T (out, B) x (B, in)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, dy, out, x, in,
                        0.0f, dW, in);
    }
    if (dx && B > 0 && in > 0 && out > 0)
        // dx (B, in) += dy (B, out) W (out, in)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, dy, out, W, in,
                    1.0f, dx, in);
}
