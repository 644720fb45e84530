/* dt_tensor_view: one parameter tensor as a view into the flat vector. The
 * network engine (nn/net.c) and the GPT (models/gpt.c) describe their
 * tensors with it; the optimizers (optim/) read it for per-tensor rules
 * (AdamW decays only ndim >= 2) and the parameter server for its bins, so it
 * lives below all of them. */
#ifndef DT_CORE_TENSOR_VIEW_H
#define DT_CORE_TENSOR_VIEW_H

#include <stddef.h>

typedef struct dt_tensor_view {
    char name[32];         /* e.g. "conv1.weight" */
    char shape[40];        /* e.g. "(32, 1, 3, 3)" */
    size_t offset, count;
    size_t fan_in;         /* for initialization */
    int init;              /* 0: kaiming-uniform bound 1/sqrt(fan_in); 1: ones; 2: zeros */
    int ndim;              /* dimensions of the tensor: 1 for biases and normalisation
                            * gains, 2+ for weights and embeddings (weight decay of
                            * AdamW applies to ndim >= 2) */
    int conv;              /* belongs to a convolution (AdaComp bins its gradients
                            * apart from the dense layers', algo/ps.c) */
    int mats;              /* a hidden weight as `mats` row-major (rows, cols) matrices
                            * back to back, the ones Muon orthogonalises (optim/muon.h):
                            * a linear layer's (out, in), a convolution's (K, C, R, S)
                            * as (K, C R S), the GPT's fused (3C, C) qkv as three
                            * (C, C). 0: not a hidden matrix (an embedding, a
                            * network's first layer or classifier head, a bias, a
                            * normalisation gain): Muon leaves it to AdamW */
    size_t rows, cols;
} dt_tensor_view;

#endif
