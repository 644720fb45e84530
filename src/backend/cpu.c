#include "backend/backend.h"
#include "nn/kernels_cpu.h"

static const dt_backend cpu = {
    .name = "cpu",
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    .conv2d_workspace = cpu_conv2d_workspace,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward = cpu_conv2d_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .sigmoid_forward = cpu_sigmoid_forward,
    .sigmoid_backward = cpu_sigmoid_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .groupnorm_forward = cpu_groupnorm_forward,
    .groupnorm_backward = cpu_groupnorm_backward,
    .add_forward = cpu_add_forward,
    .add_backward = cpu_add_backward,
    .softmax_xent = cpu_softmax_xent,
};

const dt_backend *backend_cpu(void) { return &cpu; }
