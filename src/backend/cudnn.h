/* cuDNN for the CUDA backend's fp32 convolutions (backend/cuda.c), loaded at
 * run time: a GPU node without cuDNN runs the convolutions lowered onto
 * cuBLAS (nn/lower.h) instead, with a note. Built only --with-cuda. */
#ifndef DT_BACKEND_CUDNN_H
#define DT_BACKEND_CUDNN_H

#include <stddef.h>

#include "backend/backend.h"

/* Loads libcudnn (unless DTRAIN_CUDNN=0) and binds a handle to stream (a
 * cudaStream_t). Returns 1 when loaded; 0 when not, with why (len bytes)
 * saying so. Called by cuda_device_open. */
int cudnn_open(void *stream, char *why, size_t len);
void cudnn_close(void);
/* 1 between a successful cudnn_open and cudnn_close */
int cudnn_active(void);
/* compute.tf32: TF32 tensor cores (1) or FMA only, full fp32 (0, the default) */
void cudnn_tf32(int on);

/* The convolution of shape s (plain NCHW, no bias) on device memory:
 *   y = conv(x, w);  dx = conv^T(dy, w) + beta dx (beta 0 or 1);
 *   dw = the weight gradient of x and dy (written).
 * Deterministic algorithms only, so a run and its resume give the same bits. */
void cudnn_conv_forward(const dt_conv_shape *s, const float *x, const float *w, float *y);
void cudnn_conv_backward_data(const dt_conv_shape *s, const float *w, const float *dy,
                              float beta, float *dx);
void cudnn_conv_backward_filter(const dt_conv_shape *s, const float *x, const float *dy,
                                float *dw);

#endif
