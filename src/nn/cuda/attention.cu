/* The GPT's causal attention on the device, in the tiled form of
 * nn/cuda/attention.h: a block of GPT_ATT_TILE threads per (batch x head,
 * tile of rows), the other side's rows staged a tile at a time in shared
 * memory and read by every thread of the block (the same address at once: a
 * broadcast), each thread's own query row and sums in registers (the keys'
 * kernel reads its own k and v rows where they lie). The kernels are
 * instantiated for the head sizes 16, 32 and 64, so the per-row arrays are
 * indexed by constants once unrolled; other head sizes (<= 64) run the
 * generic instance. ptxas for sm_90: the head-64 instances take all 255
 * registers a thread may have, and the keys' kernel spills about 1 KiB a
 * thread (the compiler keeps its k and v rows beside the two sums); with 32
 * to 32.5 KiB of shared memory a block of 64 threads, an SM holds at most 7
 * blocks (448 threads): the first places to look in a profile. */
#include "nn/cuda/attention.h"

#include <limits.h>

#include "nn/cuda/check.h"
#include "nn/cuda/kernels_cuda.h"

/* the opening of every kernel: head size, scale, key and the thread's rows */
#define ATT_THREAD                                                                       \
    const int hs = HS ? HS : C / NH, t = (int)threadIdx.x;                               \
    const float scale = 1.0f / sqrtf((float)hs);                                         \
    const uint64_t k = gpt_key_at(p, key);                                               \
    const gpt_att_thread a = gpt_att_thread_at(blockIdx.x, t, T, NH)

/* the queries' pass: y and lse */
template <int HS>
__global__ static void __launch_bounds__(GPT_ATT_TILE)
    attention_k(int T, int C, int NH, const float *__restrict__ qkv, float *__restrict__ y,
                float *__restrict__ lse, float p, const uint64_t *key)
{
    __shared__ float ks[GPT_ATT_TILE * GPT_ATT_HS_MAX], vs[GPT_ATT_TILE * GPT_ATT_HS_MAX];
    ATT_THREAD;
    float q[GPT_ATT_HS_MAX], acc[GPT_ATT_HS_MAX], mx = -INFINITY, l = 0.0f;
    if (a.own)
        gpt_att_copy(hs, qkv + gpt_att_qkv(a.b, a.r, a.h, T, C, NH), q);
    gpt_att_zero(hs, acc);
    for (int j0 = 0; j0 < a.end; j0 += GPT_ATT_TILE) {
        const int n =
            gpt_att_stage_kv(qkv, a.b, a.h, T, C, NH, j0, a.end, hs, ks, vs, t, GPT_ATT_TILE);
        __syncthreads();
        if (a.own)
            gpt_att_fwd_tile(hs, scale, a.bh, T, a.r, j0, n, q, ks, vs, p, k, &mx, &l, acc);
        __syncthreads();
    }
    if (!a.own)
        return;
    float *yr = y + gpt_att_out(a.b, a.r, a.h, T, C, NH);
    for (int d = 0; d < hs; d++)
        yr[d] = acc[d] / l;
    lse[(size_t)a.bh * T + (size_t)a.r] = mx + logf(l);
}

/* the backward's queries: D, then dq (two sweeps over the keys) */
template <int HS>
__global__ static void __launch_bounds__(GPT_ATT_TILE)
    attention_dq_k(int T, int C, int NH, const float *__restrict__ qkv,
                   const float *__restrict__ lse, const float *__restrict__ dy, float p,
                   const uint64_t *key, float *__restrict__ dqkv, float *__restrict__ D)
{
    __shared__ float ks[GPT_ATT_TILE * GPT_ATT_HS_MAX], vs[GPT_ATT_TILE * GPT_ATT_HS_MAX];
    ATT_THREAD;
    const size_t r = (size_t)a.bh * T + (size_t)a.r;
    float q[GPT_ATT_HS_MAX], dyr[GPT_ATT_HS_MAX], acc[GPT_ATT_HS_MAX], di = 0.0f, li = 0.0f;
    if (a.own) {
        gpt_att_copy(hs, qkv + gpt_att_qkv(a.b, a.r, a.h, T, C, NH), q);
        gpt_att_copy(hs, dy + gpt_att_out(a.b, a.r, a.h, T, C, NH), dyr);
        li = lse[r];
    }
    gpt_att_zero(hs, acc);
    for (int sweep = 0; sweep < 2; sweep++)
        for (int j0 = 0; j0 < a.end; j0 += GPT_ATT_TILE) {
            const int n =
                gpt_att_stage_kv(qkv, a.b, a.h, T, C, NH, j0, a.end, hs, ks, vs, t, GPT_ATT_TILE);
            __syncthreads();
            if (a.own)
                gpt_att_dq_tile(sweep, hs, scale, a.bh, T, a.r, j0, n, q, dyr, li, ks, vs, p, k,
                                &di, acc);
            __syncthreads();
        }
    if (!a.own)
        return;
    float *dq = dqkv + gpt_att_qkv(a.b, a.r, a.h, T, C, NH);
    for (int d = 0; d < hs; d++)
        dq[d] = scale * acc[d];
    D[r] = di;
}

/* the backward's keys: dk and dv over the queries from the block's first key
 * on; the thread's own k and v rows are read where they lie (64 rows a block:
 * they stay in L1), so its registers hold the two sums */
template <int HS>
__global__ static void __launch_bounds__(GPT_ATT_TILE)
    attention_dkv_k(int T, int C, int NH, const float *__restrict__ qkv,
                    const float *__restrict__ lse, const float *__restrict__ dy,
                    const float *__restrict__ D, float p, const uint64_t *key,
                    float *__restrict__ dqkv)
{
    __shared__ float qs[GPT_ATT_TILE * GPT_ATT_HS_MAX], dys[GPT_ATT_TILE * GPT_ATT_HS_MAX];
    __shared__ float ls[GPT_ATT_TILE], Ds[GPT_ATT_TILE];
    ATT_THREAD;
    const float *kr = qkv + gpt_att_qkv(a.b, a.own ? a.r : 0, a.h, T, C, NH) + C, *vr = kr + C;
    float ak[GPT_ATT_HS_MAX], av[GPT_ATT_HS_MAX];
    gpt_att_zero(hs, ak);
    gpt_att_zero(hs, av);
    const float *q0 = qkv + gpt_att_qkv(a.b, 0, a.h, T, C, NH);
    const float *dy0 = dy + gpt_att_out(a.b, 0, a.h, T, C, NH);
    const float *l0 = lse + (size_t)a.bh * T, *D0 = D + (size_t)a.bh * T;
    for (int i0 = a.r0; i0 < T; i0 += GPT_ATT_TILE) {
        const int n = min(GPT_ATT_TILE, T - i0);
        gpt_att_stage(q0, 3 * (size_t)C, i0, n, hs, qs, t, GPT_ATT_TILE);
        gpt_att_stage(dy0, (size_t)C, i0, n, hs, dys, t, GPT_ATT_TILE);
        gpt_att_stage_vec(l0, i0, n, ls, t, GPT_ATT_TILE);
        gpt_att_stage_vec(D0, i0, n, Ds, t, GPT_ATT_TILE);
        __syncthreads();
        if (a.own)
            gpt_att_dkv_tile(hs, scale, a.bh, T, a.r, i0, n, kr, vr, qs, dys, ls, Ds, p, k, ak,
                             av);
        __syncthreads();
    }
    if (!a.own)
        return;
    float *dk = dqkv + gpt_att_qkv(a.b, a.r, a.h, T, C, NH) + C, *dv = dk + C;
    for (int d = 0; d < hs; d++) {
        dk[d] = scale * ak[d];
        dv[d] = av[d];
    }
}

/* The row form's kernels, a thread per query or key row (nn/cuda/attention.h),
 * run instead of the tiles where cuda_attention_rows(1) asked: the same bits,
 * for measuring the tiles against */
__global__ static void attention_rows_k(size_t n, int T, int C, int NH, const float *qkv,
                                        float *y, float *lse, float p, const uint64_t *key)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(r, n) gpt_attention_row(r, T, C, NH, qkv, y, lse, p, k);
}

__global__ static void attention_rows_dq_k(size_t n, int T, int C, int NH, const float *qkv,
                                           const float *lse, const float *dy, float p,
                                           const uint64_t *key, float *dqkv, float *D)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(r, n) gpt_attention_backward_q(r, T, C, NH, qkv, lse, dy, p, k, dqkv, D);
}

__global__ static void attention_rows_dkv_k(size_t n, int T, int C, int NH, const float *qkv,
                                            const float *lse, const float *dy, const float *D,
                                            float p, const uint64_t *key, float *dqkv)
{
    const uint64_t k = gpt_key_at(p, key);
    GRID_STRIDE(r, n) gpt_attention_backward_kv(r, T, C, NH, qkv, lse, dy, D, p, k, dqkv);
}

static int att_rows;

extern "C" void cuda_attention_rows(int on) { att_rows = on; }

/* the blocks of a launch, or -1 after dt_err_set() */
static long long att_blocks(int B, int T, int C, int NH)
{
    if (NH <= 0 || C % NH || C / NH > GPT_ATT_HS_MAX)
        return dt_err_set("cuda attention: head size C / NH = %d / %d, expected a divisor of C of "
                          "at most %d", C, NH, GPT_ATT_HS_MAX);
    const long long g = (long long)B * NH * ((T + GPT_ATT_TILE - 1) / GPT_ATT_TILE);
    if (g > INT_MAX)
        return dt_err_set("cuda attention: %lld blocks of %d rows, more than a launch takes", g,
                          GPT_ATT_TILE);
    return g;
}

/* kernel's instance for head size hs on grid blocks of stream, the launch checked */
#define ATT_LAUNCH(kernel, hs, grid, stream, ...)                                        \
    do {                                                                                 \
        const cudaStream_t s_ = (cudaStream_t)(stream);                                  \
        switch (hs) {                                                                    \
        case 64: kernel<64><<<(unsigned)(grid), GPT_ATT_TILE, 0, s_>>>(__VA_ARGS__); break; \
        case 32: kernel<32><<<(unsigned)(grid), GPT_ATT_TILE, 0, s_>>>(__VA_ARGS__); break; \
        case 16: kernel<16><<<(unsigned)(grid), GPT_ATT_TILE, 0, s_>>>(__VA_ARGS__); break; \
        default: kernel<0><<<(unsigned)(grid), GPT_ATT_TILE, 0, s_>>>(__VA_ARGS__); break;  \
        }                                                                                \
        CUDA_CHECK(cudaGetLastError());                                                  \
    } while (0)

extern "C" int cuda_attention_forward(int B, int T, int C, int NH, const float *qkv, float *y,
                                      float *lse, float p, const uint64_t *key, void *stream)
{
    const long long g = att_blocks(B, T, C, NH);
    if (g < 0)
        return -1;
    if (att_rows)
        DT_LAUNCH(attention_rows_k, (size_t)B * NH * T, stream, T, C, NH, qkv, y, lse, p, key);
    else if (g > 0)
        ATT_LAUNCH(attention_k, C / NH, g, stream, T, C, NH, qkv, y, lse, p, key);
    return 0;
}

extern "C" int cuda_attention_backward(int B, int T, int C, int NH, const float *qkv,
                                       const float *lse, const float *dy, float p,
                                       const uint64_t *key, float *dqkv, float *D, void *stream)
{
    const long long g = att_blocks(B, T, C, NH);
    if (g < 0)
        return -1;
    const size_t n = (size_t)B * NH * T;
    if (att_rows) {
        DT_LAUNCH(attention_rows_dq_k, n, stream, T, C, NH, qkv, lse, dy, p, key, dqkv, D);
        DT_LAUNCH(attention_rows_dkv_k, n, stream, T, C, NH, qkv, lse, dy, D, p, key, dqkv);
    } else if (g > 0) {
        ATT_LAUNCH(attention_dq_k, C / NH, g, stream, T, C, NH, qkv, lse, dy, p, key, dqkv, D);
        ATT_LAUNCH(attention_dkv_k, C / NH, g, stream, T, C, NH, qkv, lse, dy, D, p, key, dqkv);
    }
    return 0;
}
