/* Fully connected layer on the CPU: y (B, out) = x (B, in) W^T + b, with W
 * stored (out, in) as in PyTorch so checkpoints and initialisers agree. */
#include "backend/cpu/kernels.h"

#include <cblas.h>
#include <string.h>

/* Floats of the stack buffer that holds y^T. */
#define LIN_TILE 8192

/* OpenBLAS packs a transposed right-hand operand slowly when the inner
 * dimension is long: for mnist_cnn's dense1 (B 32, in 9216, out 128) x W^T
 * takes 1.50 ms but y^T = W x^T plus a transpose 1.09 ms. So a small y is
 * formed as y^T in a stack buffer and transposed, bias added on the way. */
void cpu_linear_forward(int B, int in, int out, const float *x, const float *W,
                        const float *b, float *y, float *work)
{
    (void)work; /* no scratch: linear_workspace is NULL */
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
                         const float *dy, float *dx, float *dW, float *db, float *work)
{
    (void)work;
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
 * x, W and dy are rounded to bf16 on each call (backend/cpu/gemm_bf16.h), products
 * accumulate in fp32, y, dx, dW and db are fp32; the bias is added in fp32.
 * The kernels keep nothing between the forward and the backward (the engine
 * may keep x in bf16 for a layer that reads it so: nn/net_plan.c). The copies
 * go into the engine's work (bf16_linear_workspace), a span of its arena
 * live for this layer's step only: as process buffers of their own they
 * were 4.7 MB of mnist_cnn's peak RSS at batch 128 (fc1, 9216 -> 128). */

#include "core/error.h"
#include "backend/cpu/gemm_bf16.h"

/* A layer whose weight has fewer elements than this stays fp32 (the
 * functions above): there the three roundings and oneDNN's call cost more
 * than the product saves. One thread on a Zen 4 (AVX512-BF16), forward plus
 * backward, fp32 against bf16: B 32, 64 -> 10: 1.7 against 5.5 us; B 32,
 * 128 -> 10: 2.9 against 6.9 us; B 128, 128 -> 10: 15.4 against 15.7 us;
 * B 128, 640 -> 10: 71 against 64 us; B 128, 256 -> 64: 143 against 85 us.
 * So the classifier heads of the image models (resnet20_gn 64 -> 10,
 * mnist_cnn 128 -> 10) are fp32, and a model with no larger linear layer
 * creates no bf16 matmul at all (oneDNN's matmul code is then never
 * loaded: 1 MB of resnet20_gn's RSS). Fixed by shape, so that a run and its
 * resume compute alike. */
#define BF16_LINEAR_MIN_WEIGHTS 4096

int bf16_linear_is_bf16(int in, int out)
{
    return (size_t)(in > 0 ? in : 0) * (size_t)(out > 0 ? out : 0) >= BF16_LINEAR_MIN_WEIGHTS;
}

/* work: x16 (B, in), then W16 (out, in), then dy16 (B, out), each from a
 * 64-byte boundary (32 bf16) */
static size_t span32(size_t n) { return (n + 31) / 32 * 32; }

size_t bf16_linear_workspace(int B, int in, int out)
{
    if (B <= 0 || in <= 0 || out <= 0 || !bf16_linear_is_bf16(in, out))
        return 0;
    const size_t n = span32((size_t)B * in) + span32((size_t)out * in) + span32((size_t)B * out);
    return n / 2; /* floats: two bf16 each */
}

static dt_bf16 *slot16(float *work, int slot, int B, int in, int out)
{
    dt_bf16 *p = (dt_bf16 *)work;
    if (slot > 0)
        p += span32((size_t)B * in);
    if (slot > 1)
        p += span32((size_t)out * in);
    return p;
}

static dt_bf16 *to_bf16(float *work, int slot, int B, int in, int out, size_t n, const float *src)
{
    dt_bf16 *p = slot16(work, slot, B, in, out);
    bf16_from_f32(n, src, p);
    return p;
}

void bf16_linear_forward(int B, int in, int out, const float *x, const float *W,
                         const float *b, float *y, float *work)
{
    if (!bf16_linear_is_bf16(in, out)) {
        cpu_linear_forward(B, in, out, x, W, b, y, work);
        return;
    }
    if (B <= 0 || out <= 0)
        return;
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++)
            y[(size_t)i * out + o] = b ? b[o] : 0.0f;
    if (in <= 0)
        return;
    // y (B, out) += x (B, in) W^T (in, out), in the buffers backward uses again
    const dt_bf16 *x16 = to_bf16(work, 0, B, in, out, (size_t)B * in, x);
    const dt_bf16 *W16 = to_bf16(work, 1, B, in, out, (size_t)out * in, W);
    gemm_bf16_pre(0, 1, B, out, in, 1.0f, x16, in, W16, in, b ? 1.0f : 0.0f, y, out);
}

void bf16_linear_backward(int B, int in, int out, const float *x, const float *W,
                          const float *dy, float *dx, float *dW, float *db, float *work)
{
    if (!bf16_linear_is_bf16(in, out)) {
        cpu_linear_backward(B, in, out, x, W, dy, dx, dW, db, work);
        return;
    }
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
    const dt_bf16 *dy16 = to_bf16(work, 2, B, in, out, (size_t)B * out, dy);
    if (dW) {
        const dt_bf16 *x16 = to_bf16(work, 0, B, in, out, (size_t)B * in, x);
        // dW (out, in) = dy^T (out, B) x (B, in)
        gemm_bf16_pre(1, 0, out, in, B, 1.0f, dy16, out, x16, in, 0.0f, dW, in);
    }
    if (dx) {
        const dt_bf16 *W16 = to_bf16(work, 1, B, in, out, (size_t)out * in, W);
        // dx (B, in) += dy (B, out) W (out, in)
        gemm_bf16_pre(0, 0, B, in, out, 1.0f, dy16, out, W16, in, 1.0f, dx, in);
    }
}
