/* Fully connected layer on the CPU: y (B, out) = x (B, in) W^T + b, with W
 * stored (out, in) as in PyTorch so checkpoints and initialisers agree. */
#include "nn/kernels_cpu.h"

#include <cblas.h>
#include <string.h>

/* Floats of the stack buffer that holds y^T. */
#define LIN_TILE 8192

/* OpenBLAS packs a transposed right-hand operand slowly when the inner
 * dimension is long: for mnist_cnn's dense1 (B 32, in 9216, out 128) x W^T
 * takes 1.50 ms but y^T = W x^T plus a transpose 1.09 ms. So a small y is
 * formed as y^T in a stack buffer and transposed, bias added on the way. */
void cpu_linear_forward(int B, int in, int out, const float *x, const float *W,
                        const float *b, float *y)
{
    if (B <= 0 || out <= 0)
        return;
    if (in > 0 && (size_t)B * (size_t)out <= LIN_TILE) {
        float yt[LIN_TILE];
        // yt (out, B) = W (out, in) x^T (in, B)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out, B, in, 1.0f, W, in, x, in, 0.0f,
                    yt, B);
        for (int i = 0; i < B; i++) {
            float *yr = y + (size_t)i * out;
            for (int o = 0; o < out; o++)
                yr[o] = yt[(size_t)o * B + i] + (b ? b[o] : 0.0f);
        }
        return;
    }
    // y (B, out) = x (B, in) W^T with the bias folded in as the C operand
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++)
            y[(size_t)i * out + o] = b ? b[o] : 0.0f;
    if (in > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, x, in, W, in, 1.0f,
                    y, out);
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

/* ---- bf16 (compute.precision = bf16): the same layer on bf16 operands ----
 * x, W and dy are rounded to bf16 on each call (nn/gemm_bf16.h), products
 * accumulate in fp32, y, dx, dW and db are fp32; the bias is added in fp32.
 * Nothing is kept in bf16 between the forward and the backward. */

#include "core/error.h"
#include "nn/gemm_bf16.h"

#include <stdlib.h>

/* bf16 copies of x, W, dy; grown to the largest layer, kept for the process */
static dt_bf16 *lin16[3];
static size_t lin16_cap[3];

static dt_bf16 *to_bf16(int slot, size_t n, const float *src)
{
    if (n > lin16_cap[slot]) {
        free(lin16[slot]);
        lin16[slot] = dt_malloc(n * sizeof(dt_bf16));
        lin16_cap[slot] = n;
    }
    bf16_from_f32(n, src, lin16[slot]);
    return lin16[slot];
}

void bf16_linear_forward(int B, int in, int out, const float *x, const float *W,
                         const float *b, float *y)
{
    if (B <= 0 || out <= 0)
        return;
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++)
            y[(size_t)i * out + o] = b ? b[o] : 0.0f;
    if (in <= 0)
        return;
    // y (B, out) += x (B, in) W^T (in, out), in the buffers backward uses again
    const dt_bf16 *x16 = to_bf16(0, (size_t)B * in, x), *W16 = to_bf16(1, (size_t)out * in, W);
    gemm_bf16_pre(0, 1, B, out, in, 1.0f, x16, in, W16, in, b ? 1.0f : 0.0f, y, out);
}

void bf16_linear_backward(int B, int in, int out, const float *x, const float *W,
                          const float *dy, float *dx, float *dW, float *db)
{
    if (db) { // fp32, as in cpu_linear_backward
        memset(db, 0, (size_t)(out > 0 ? out : 0) * sizeof(float));
        for (int i = 0; i < B; i++) {
            const float *row = dy + (size_t)i * out;
            for (int j = 0; j < out; j++)
                db[j] += row[j];
        }
    }
    if (out <= 0 || in <= 0)
        return;
    if (B <= 0) {
        if (dW)
            memset(dW, 0, (size_t)out * in * sizeof(float));
        return;
    }
    const dt_bf16 *dy16 = to_bf16(2, (size_t)B * out, dy);
    if (dW) {
        const dt_bf16 *x16 = to_bf16(0, (size_t)B * in, x);
        // dW (out, in) = dy^T (out, B) x (B, in)
        gemm_bf16_pre(1, 0, out, in, B, 1.0f, dy16, out, x16, in, 0.0f, dW, in);
    }
    if (dx) {
        const dt_bf16 *W16 = to_bf16(1, (size_t)out * in, W);
        // dx (B, in) += dy (B, out) W (out, in)
        gemm_bf16_pre(0, 0, B, in, out, 1.0f, dy16, out, W16, in, 1.0f, dx, in);
    }
}
