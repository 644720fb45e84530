/* A network as a small DAG of layers over one flat parameter buffer.
 *
 * Models (models/image_nets.c) build a net node by node; the engine lays the
 * parameters of every node out in one contiguous float vector (the order in
 * which nodes were added), so params, grads and momentum are each one buffer
 * and every algorithm communicates (float *buf, size_t n) in one call.
 * Node 0 is the input; the last node added produces the logits.
 * Kernels are reached only through the dt_backend table. */
#ifndef DT_NN_NET_H
#define DT_NN_NET_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/step_graphs.h"
#include "core/tensor_view.h"

typedef enum dt_op {
    OP_INPUT, OP_LINEAR, OP_CONV2D, OP_MAXPOOL, OP_AVGPOOL, OP_RELU, OP_SIGMOID,
    OP_DROPOUT, OP_GROUPNORM, OP_ADD, OP_FLATTEN
} dt_op;

enum { FUSE_NONE, FUSE_RELU, FUSE_ADD_RELU, FUSE_ABSORBED };

typedef struct dt_node {
    dt_op op;
    int in0, in1;          /* input nodes (in1: second operand of OP_ADD) */
    int c, h, w;           /* per-sample output shape (C, H, W) */
    int k, stride, pad;    /* conv / pool geometry */
    int groups;            /* GroupNorm groups */
    int bias;              /* conv: has a bias */
    float p;               /* dropout probability */
    int blk;               /* layout of the output (and its gradient): 0 plain NCHW, or the
                            * channel block of nChw16c (backend/backend.h); net_finish */
    int fuse;              /* GroupNorm: FUSE_RELU, FUSE_ADD_RELU; a ReLU or add done by
                            * the GroupNorm before it: FUSE_ABSORBED (net_finish) */
    int fuse_out, fuse_skip; /* fused GroupNorm: the node holding its result (the ReLU),
                            * and the add's other operand (FUSE_ADD_RELU) */
    int fuse_by;           /* absorbed node: the GroupNorm that does its work */
    int recompute_at;      /* GroupNorm + ReLU whose output is not kept for backward but
                            * recomputed before node recompute_at's backward; 0: kept */
    int64_t w_off, b_off;  /* offsets of weight and bias in the flat vector, -1: none */
    size_t w_n, b_n;
} dt_node;

typedef struct dt_net_step {
    int graphs;            /* 1: record and replay the step (compute.cuda_graphs) */
    uint64_t *keys, *keys_host; /* (nnodes) dropout keys: backend memory, host staging */
    void *rows;            /* DT_XENT_ROWS_BYTES(rows_B) of backend memory */
    int rows_B;
    int B;                 /* the queued step's batch */
    dt_step_graphs rec;    /* its records (backend/step_graphs.h) */
} dt_net_step;

typedef struct dt_net {
    const dt_backend *be;
    int nnodes, cap;
    dt_node *nodes;
    int ntensors;
    dt_tensor_view *tensors;
    size_t nparams;
    int classes;
    /* buffers for a batch of B samples (net_reserve) */
    int B;
    float **act, **dact;   /* per node (B, c, h, w) output and its gradient: places in
                            * the arena, shared by buffers whose lifetimes do not meet */
    float *arena;          /* every activation and gradient buffer of a batch */
    size_t arena_n;        /* its floats */
    float **act_fwd, **act_rec; /* recomputed nodes, and activations kept in bf16 that a
                            * backward reader needs widened: their forward and backward
                            * buffers */
    int *owner;            /* per node: the node whose buffer holds its output */
    uint16_t **stash;      /* per owner: its bf16 copy kept for the backward (a bf16
                            * backend, nn/net_plan.c), NULL: none */
    int *stash_at;         /* per owner: the forward node after which the copy is made
                            * (by that node itself where it is a ReLU writing the owner) */
    int *widen_at;         /* per owner: the backward node before which the copy is widened
                            * into act_rec; 0: never (only ReLUs read it, from mask16) */
    uint16_t **mask16;     /* per ReLU node: the bf16 copy of its output its backward reads,
                            * NULL: it reads act */
    int *first_use;        /* per node: the backward step at which dact becomes live */
    unsigned char *unwritten; /* per node, during net_backward: dact is live but holds
                               * nothing yet (its first writer writes, or it is zeroed) */
    float **dx_tmp;        /* per node: a conv whose kernel cannot add into its input's
                            * gradient writes there first (a gradient buffer free at
                            * that step), NULL: none needed */
    void **aux;            /* per node: pool argmax, dropout mask, GroupNorm mean/rstd */
    float **work_fwd, **work_bwd; /* per conv or linear node: its kernel's scratch
                            * (conv2d_workspace, linear_workspace) at its forward and its backward
                            * step, buffers in the arena live for that step only;
                            * NULL: none needed */
    char *cols_kept;       /* per conv node: 1 where its backward reads the forward's
                            * workspace (backend conv2d_keep_cols at planning) */
    float *dlogits;        /* (B, classes) */
    int fwd_train;         /* last forward was in training mode */
    int last_B;            /* batch of the last forward */
    int no_dropout;        /* tests: dropout is the identity even in training */
    int no_keep_bf16;      /* tests: no activation kept in bf16 for the backward (the
                            * plan before that choice), set before the first forward */
    uint64_t reserve_gen;  /* counts the times net_reserve moved the buffers */
    dt_net_step step;      /* net_train_queue's state (nn/net_step.c) */
} dt_net;

dt_net *net_create(const dt_backend *be, int c, int h, int w);
int net_linear(dt_net *n, int in, int out_features);
int net_conv2d(dt_net *n, int in, int out_channels, int k, int stride, int pad, int bias);
int net_maxpool(dt_net *n, int in, int k, int stride);
int net_avgpool(dt_net *n, int in);
int net_relu(dt_net *n, int in);
int net_sigmoid(dt_net *n, int in);
int net_dropout(dt_net *n, int in, float p);
int net_groupnorm(dt_net *n, int in, int groups);
int net_add(dt_net *n, int a, int b);
int net_flatten(dt_net *n, int in);
/* Ends the build: the last node is the logits; lays out parameters. */
void net_finish(dt_net *n, int classes);

/* PyTorch's default initialization (Kaiming-uniform with a = sqrt(5): weights
 * and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)); GroupNorm gamma 1, beta 0),
 * drawn from (seed, tensor index): identical on every rank for one seed. */
void net_init_params(const dt_net *n, float *params, uint64_t seed);

/* Allocate activations for batches of up to B samples. */
void net_reserve(dt_net *n, int B);
/* Every pointer handed to the engine (params, grads, x, y) and every buffer
 * it keeps lives in the backend's memory (be->device: on the GPU).
 * Forward over x (B, C, H, W) with labels y (B); returns the mean loss and
 * the number of correct predictions. train: dropout active with key
 * dropout_key (mixed with the node index). Keeps what backward needs. */
double net_forward(dt_net *n, const float *params, const float *x, const int32_t *y,
                   int B, int train, uint64_t dropout_key, int *correct);
/* Gradient of the last forward's mean loss, written into grads (nparams). */
void net_backward(dt_net *n, const float *params, float *grads);
/* A training step's forward and backward queued on the backend with
 * nothing read back between them (nn/net_step.c), so that it can be
 * recorded once as a CUDA graph and replayed (net_use_graphs): the same
 * kernels as net_forward then net_backward, the dropout keys read from
 * backend memory, the loss from the rows softmax_xent_rows left.
 * net_train_result waits for the step and returns net_forward's loss and
 * hits. The backend needs softmax_xent_rows, softmax_xent_sum and
 * dropout_forward_keyed (every backend in this tree has them). */
void net_train_queue(dt_net *n, const float *params, const float *x, const int32_t *y, int B,
                     uint64_t dropout_key, float *grads);
double net_train_result(dt_net *n, int *correct);
/* on: record steps as graphs where the backend can (its graph_* members);
 * returns whether it can */
int net_use_graphs(dt_net *n, int on);
/* For nn/net_step.c: the forward's kernels, the loss left to the caller,
 * dropout keyed by keys (nnodes, backend memory) where not NULL; node 0
 * and the flatten views bound to x; the key of dropout node i. */
void net_forward_kernels(dt_net *n, const float *params, const float *x, int B, int train,
                         uint64_t dropout_key, const uint64_t *keys);
void net_bind_input(dt_net *n, const float *x);
uint64_t net_dropout_key(uint64_t dropout_key, int node);

/* The logits (B, classes) of the last forward. */
const float *net_logits(const dt_net *n);
void net_free(dt_net *n);

#endif
