/* CPU kernels, one layer per file in src/backend/cpu/, gathered into the CPU backend
 * table by backend/cpu/cpu.c. Signatures and conventions: backend/backend.h. */
#ifndef DT_BACKEND_CPU_KERNELS_H
#define DT_BACKEND_CPU_KERNELS_H

#include "backend/backend.h"

/* linear.c */
void cpu_linear_forward(int B, int in, int out, const float *x, const float *W,
                        const float *b, float *y, float *work);
void cpu_linear_backward(int B, int in, int out, const float *x, const float *W,
                         const float *dy, float *dx, float *dW, float *db, float *work);
/* linear.c, bf16 products (backend/cpu/gemm_bf16.h; needs oneDNN) */
size_t bf16_linear_workspace(int B, int in, int out);
int bf16_linear_is_bf16(int in, int out);
void bf16_linear_forward(int B, int in, int out, const float *x, const float *W,
                         const float *b, float *y, float *work);
void bf16_linear_backward(int B, int in, int out, const float *x, const float *W,
                          const float *dy, float *dx, float *dW, float *db, float *work);
/* conv2d.c */
size_t cpu_conv2d_workspace(const dt_conv_shape *s);
int cpu_conv2d_dx_accumulates(const dt_conv_shape *s);
void cpu_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                        const float *b, float *y, float *work);
void cpu_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                         float *work);
/* conv2d_dnnl.c (oneDNN; both layouts) */
size_t dnnl_conv2d_workspace(const dt_conv_shape *s);
size_t dnnl_conv2d_pass_workspace(const dt_conv_shape *s, int pass);
int dnnl_conv2d_dx_accumulates(const dt_conv_shape *s);
void dnnl_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *b, float *y, float *work);
void dnnl_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                          const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                          float *work);
/* 0: the shapes conv2d_wino.c takes run oneDNN's direct kernels instead
 * (bench/conv_bench times both); 1, the default: Winograd */
void dnnl_conv2d_wino8(int on);
/* conv2d_wino.c: Winograd F(2x2, 3x3) on 8-channel blocks at the AVX2 level
 * (3x3, stride 1, padding 0 or 1, channels multiples of 8); conv2d_dnnl.c
 * hands it the shapes it applies to */
int wino8_applies(const dt_conv_shape *s);
size_t wino8_workspace(const dt_conv_shape *s);
void wino8_forward(const dt_conv_shape *s, const float *x, const float *w, const float *b,
                   float *y, float *work);
void wino8_backward(const dt_conv_shape *s, const float *x, const float *w, const float *dy,
                    float *dx, float *dw, float *db, float *work);
/* conv2d_dnnl.c, bf16 inputs and fp32 outputs (both layouts, all oneDNN);
 * whether pass (0 forward, 1 backward-data, 2 weight gradient) of shape s
 * runs in bf16 (1) or stays fp32 (0: a Winograd pass on a CPU without AMX) */
int bf16_conv2d_pass_bf16(const dt_conv_shape *s, int pass);
int bf16_conv2d_reads_x_bf16(const dt_conv_shape *s);
size_t bf16_conv2d_workspace(const dt_conv_shape *s);
size_t bf16_conv2d_pass_workspace(const dt_conv_shape *s, int pass);
int bf16_conv2d_dx_accumulates(const dt_conv_shape *s);
void bf16_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *b, float *y, float *work);
void bf16_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                          const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                          float *work);
/* pool.c */
void cpu_maxpool_forward(const dt_pool_shape *s, const float *x, float *y, int32_t *arg);
void cpu_maxpool_backward(const dt_pool_shape *s, const float *dy, const int32_t *arg,
                          float *dx, int dx_fresh);
void cpu_avgpool_forward(int B, int C, int HW, int blk, const float *x, float *y);
void cpu_avgpool_backward(int B, int C, int HW, int blk, const float *dy, float *dx);
/* activation.c */
void cpu_relu_forward(size_t n, const float *x, float *y);
void cpu_relu_backward(size_t n, const float *y, const float *dy, float *dx);
void cpu_relu_backward_inplace(size_t n, const float *y, float *d);
void cpu_relu_backward_bf16(size_t n, const uint16_t *y, const float *dy, float *dx);
void cpu_relu_backward_inplace_bf16(size_t n, const uint16_t *y, float *d);
void cpu_relu_forward_bf16(size_t n, const float *x, float *y, uint16_t *y16);
void cpu_sigmoid_forward(size_t n, const float *x, float *y);
void cpu_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx);
/* dropout.c */
void cpu_dropout_forward(size_t n, float p, uint64_t key, const float *x, float *y,
                         float *mask);
void cpu_dropout_backward(size_t n, const float *mask, const float *dy, float *dx,
                          int dx_fresh);
void cpu_dropout_forward_keyed(size_t n, float p, const uint64_t *key, const float *x, float *y,
                               float *mask);
/* groupnorm.c */
void cpu_groupnorm_forward(int B, int C, int HW, int G, int blk, const float *x,
                           const float *gamma, const float *beta, const float *skip, int relu,
                           float *y, float *mean, float *rstd);
void cpu_groupnorm_backward(int B, int C, int HW, int G, int blk, const float *x,
                            const float *gamma, const float *mean, const float *rstd,
                            const float *y, const float *dy, float *dx, float *dskip,
                            int dx_fresh, int dskip_fresh, float *dgamma, float *dbeta);
/* add.c */
void cpu_add_forward(size_t n, const float *a, const float *b, float *y);
void cpu_add_backward(size_t n, const float *dy, float *da, float *db);
/* xent.c */
double cpu_softmax_xent(int B, int K, const float *logits, const int32_t *labels,
                        float *dlogits, int *correct);
void cpu_softmax_xent_rows(int B, int K, const float *logits, const int32_t *labels,
                           float *dlogits, void *rows);
double cpu_softmax_xent_sum(int B, int K, const void *rows, int *correct);

#endif
