/* The linear layers of a transformer: fp32 through the CPU backend's sgemm
 * (backend/cpu/sgemm.h: oneDNN's where dtrain is built with oneDNN, else
 * OpenBLAS's); bf16 through oneDNN's matmul (backend/cpu/gemm_bf16.h). The
 * weight is (out, in) as in PyTorch. Unlike linear.c's, the input gradient is
 * written, not added: in a transformer every linear layer's input feeds only
 * that layer (the residual stream adds its own gradient separately). The
 * attention's many small products stay OpenBLAS's (backend/cpu/attention.c),
 * where its small-matrix kernels cost less per call. */
#include "nn/transformer.h"

#include <string.h>

#include "backend/cpu/sgemm.h"
#include "core/simd.h"

/* y (N, out) = the bias b (out) in every row: eight floats a store, no call
 * per row (GPT baby under avx2, one thread, Xeon SPR: 0.8 % more tokens/s
 * than a memcpy a row, median of five alternating runs each) */
DT_KERNEL_BODY void bias_rows_body(int N, int out, const float *b, float *y)
{
    for (int i = 0; i < N; i++) {
        float *r = y + (size_t)i * out;
        int o = 0;
        for (; o + 8 <= out; o += 8)
            vf8_st(r + o, vf8_ld(b + o));
        for (; o < out; o++)
            r[o] = b[o];
    }
}
DT_KERNEL_VARIANTS(bias_rows, (int N, int out, const float *b, float *y), (N, out, b, y));

void matmul_forward(int N, int in, int out, const float *x, const float *W, const float *b,
                    float *y)
{
    // y (N, out) = x (N, in) W^T, with the bias broadcast into y first as sgemm's C operand
    float beta = 0.0f;
    if (b) {
        DT_KERNEL(bias_rows)(N, out, b, y);
        beta = 1.0f;
    }
    cpu_sgemm(0, 1, N, out, in, 1.0f, x, in, W, in, beta, y, out);
}

/* db (out) = column sums of dy (N, out), row by row so the loads are
 * contiguous; sixteen columns a step, as one v16f or two vf8 (narrow: AVX2
 * and baseline, where a 64-byte vector has no register); every column sums
 * its rows in order either way, so the variants give the same bits. */
DT_KERNEL_BODY void column_sums_body(int narrow, int N, int out, const float *dy, float *db)
{
    memset(db, 0, (size_t)out * sizeof *db);
    for (int i = 0; i < N; i++) {
        const float *r = dy + (size_t)i * out;
        int o = 0;
        for (; o + 16 <= out; o += 16)
            if (narrow) {
                vf8_st(db + o, vf8_ld(db + o) + vf8_ld(r + o));
                vf8_st(db + o + 8, vf8_ld(db + o + 8) + vf8_ld(r + o + 8));
            } else {
                v16_st(db + o, v16_ld(db + o) + v16_ld(r + o));
            }
        for (; o < out; o++)
            db[o] += r[o];
    }
}
DT_KERNEL_VARIANTS_NARROW(column_sums, (int N, int out, const float *dy, float *db), (N, out, dy, db));

void matmul_backward(int N, int in, int out, const float *x, const float *W, const float *dy,
                     float *dx, float *dW, float *db)
{
    if (db)
        DT_KERNEL(column_sums)(N, out, dy, db);
    if (dW)
        // dW (out, in) = dy^T (out, N) x (N, in)
        cpu_sgemm(1, 0, out, in, N, 1.0f, dy, out, x, in, 0.0f, dW, in);
    if (dx)
        // dx (N, in) = dy (N, out) W (out, in)
        cpu_sgemm(0, 0, N, in, out, 1.0f, dy, out, W, in, 0.0f, dx, in);
}

void matmul_forward_bf16(int N, int in, int out, const float *x, const dt_bf16 *W16,
                         const float *b, float *y, dt_bf16 *x16)
{
    float beta = 0.0f;
    if (b) {
        DT_KERNEL(bias_rows)(N, out, b, y);
        beta = 1.0f;
    }
    if (x)
        bf16_from_f32((size_t)N * in, x, x16);
    // y (N, out) = x16 (N, in) W16^T (in, out) (+ the bias, summed in fp32)
    gemm_bf16_pre(0, 1, N, out, in, 1.0f, x16, in, W16, in, beta, y, out);
}

void matmul_bias_backward(int N, int out, const float *dy, float *db)
{
    DT_KERNEL(column_sums)(N, out, dy, db);
}

void matmul_backward_bf16(int N, int in, int out, const float *x, const dt_bf16 *W16,
                          const float *dy, float *dx, float *dW, float *db, dt_bf16 *x16,
                          dt_bf16 *dy16)
{
    if (db)
        DT_KERNEL(column_sums)(N, out, dy, db);
    if (x)
        bf16_from_f32((size_t)N * in, x, x16);
    if (dy)
        bf16_from_f32((size_t)N * out, dy, dy16);
    // dW (out, in) = dy16^T (out, N) x16 (N, in)
    gemm_bf16_pre(1, 0, out, in, N, 1.0f, dy16, out, x16, in, 0.0f, dW, in);
    if (dx)
        // dx (N, in) = dy16 (N, out) W16 (out, in)
        gemm_bf16_pre(0, 0, N, in, out, 1.0f, dy16, out, W16, in, 0.0f, dx, in);
}
