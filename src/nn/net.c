#include "nn/net.h"
#include "nn/net_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"


static int node_push(dt_net *n, dt_node d)
{
    if (n->nnodes == n->cap) {
        n->cap = n->cap ? 2 * n->cap : 16;
        n->nodes = dt_realloc(n->nodes, (size_t)n->cap * sizeof *n->nodes);
    }
    d.w_off = d.b_off = -1;
    n->nodes[n->nnodes] = d;
    return n->nnodes++;
}

static const dt_node *node_in(const dt_net *n, int in)
{
    if (in < 0 || in >= n->nnodes)
        DT_FATAL("network builder: input node %d does not exist", in);
    return &n->nodes[in];
}

dt_net *net_create(const dt_backend *be, int c, int h, int w)
{
    dt_net *n = dt_calloc(1, sizeof *n);
    n->be = be;
    node_push(n, (dt_node){ .op = OP_INPUT, .in0 = -1, .in1 = -1, .c = c, .h = h, .w = w });
    return n;
}

int net_linear(dt_net *n, int in, int out_features)
{
    node_in(n, in);
    return node_push(n, (dt_node){ .op = OP_LINEAR, .in0 = in, .in1 = -1, .c = out_features,
                                   .h = 1, .w = 1, .bias = 1 });
}

int net_conv2d(dt_net *n, int in, int out_channels, int k, int stride, int pad, int bias)
{
    const dt_node *x = node_in(n, in);
    int P = (x->h + 2 * pad - k) / stride + 1, Q = (x->w + 2 * pad - k) / stride + 1;
    if (P < 1 || Q < 1)
        DT_FATAL("network builder: conv %dx%d on a %dx%d input leaves no output", k, k, x->h, x->w);
    return node_push(n, (dt_node){ .op = OP_CONV2D, .in0 = in, .in1 = -1, .c = out_channels,
                                   .h = P, .w = Q, .k = k, .stride = stride, .pad = pad,
                                   .bias = bias });
}

int net_maxpool(dt_net *n, int in, int k, int stride)
{
    const dt_node *x = node_in(n, in);
    int P = (x->h - k) / stride + 1, Q = (x->w - k) / stride + 1;
    if (P < 1 || Q < 1)
        DT_FATAL("network builder: pool %dx%d on a %dx%d input leaves no output", k, k, x->h, x->w);
    return node_push(n, (dt_node){ .op = OP_MAXPOOL, .in0 = in, .in1 = -1, .c = x->c, .h = P,
                                   .w = Q, .k = k, .stride = stride });
}

int net_avgpool(dt_net *n, int in)
{
    const dt_node *x = node_in(n, in);
    return node_push(n, (dt_node){ .op = OP_AVGPOOL, .in0 = in, .in1 = -1, .c = x->c, .h = 1, .w = 1 });
}

static int elementwise(dt_net *n, dt_op op, int in)
{
    const dt_node *x = node_in(n, in);
    return node_push(n, (dt_node){ .op = op, .in0 = in, .in1 = -1, .c = x->c, .h = x->h, .w = x->w });
}

int net_relu(dt_net *n, int in) { return elementwise(n, OP_RELU, in); }
int net_sigmoid(dt_net *n, int in) { return elementwise(n, OP_SIGMOID, in); }

int net_dropout(dt_net *n, int in, float p)
{
    if (p <= 0.0f) /* no-op layer: keep the graph (and the flat vector) unchanged */
        return in;
    int id = elementwise(n, OP_DROPOUT, in);
    n->nodes[id].p = p;
    return id;
}

int net_groupnorm(dt_net *n, int in, int groups)
{
    const dt_node *x = node_in(n, in);
    if (groups < 1 || x->c % groups)
        DT_FATAL("network builder: GroupNorm with %d groups over %d channels", groups, x->c);
    int id = elementwise(n, OP_GROUPNORM, in);
    n->nodes[id].groups = groups;
    return id;
}

int net_add(dt_net *n, int a, int b)
{
    const dt_node *x = node_in(n, a), *y = node_in(n, b);
    if (a == 0 || b == 0 || node_size(x) != node_size(y) || x->c != y->c)
        DT_FATAL("network builder: add of nodes %d (%dx%dx%d) and %d (%dx%dx%d)", a, x->c, x->h,
                 x->w, b, y->c, y->h, y->w);
    int id = elementwise(n, OP_ADD, a);
    n->nodes[id].in1 = b;
    return id;
}

int net_flatten(dt_net *n, int in)
{
    const dt_node *x = node_in(n, in);
    return node_push(n, (dt_node){ .op = OP_FLATTEN, .in0 = in, .in1 = -1,
                                   .c = (int)node_size(x), .h = 1, .w = 1 });
}

static void add_tensor(dt_net *n, int node, const char *kind, const char *shape, int ndim,
                       size_t count, size_t fan_in, int init, int64_t *off)
{
    n->tensors = dt_realloc(n->tensors, (size_t)(n->ntensors + 1) * sizeof *n->tensors);
    dt_tensor_view *t = &n->tensors[n->ntensors++];
    *t = (dt_tensor_view){ 0 };
    static const char *opname[] = { "input", "linear", "conv", "maxpool", "avgpool", "relu",
                                    "sigmoid", "dropout", "gn", "add", "flatten" };
    snprintf(t->name, sizeof t->name, "%s%d.%s", opname[n->nodes[node].op], node, kind);
    snprintf(t->shape, sizeof t->shape, "%s", shape);
    t->offset = n->nparams;
    t->count = count;
    t->fan_in = fan_in;
    t->init = init;
    t->ndim = ndim;
    t->conv = n->nodes[node].op == OP_CONV2D;
    *off = (int64_t)n->nparams;
    n->nparams += count;
}

/* The weights between the first layer and the classifier head (the first and
 * the last weight in flat order, which is the nodes' order from the input) as
 * Muon's matrices: a linear layer's (out, in) as it is, a convolution's
 * (K, C, R, S) as (K, C R S). */
static void mark_hidden_matrices(dt_net *n)
{
    int first = -1, last = -1;
    for (int t = 0; t < n->ntensors; t++)
        if (n->tensors[t].ndim >= 2) {
            if (first < 0)
                first = t;
            last = t;
        }
    for (int t = first + 1; t < last; t++) {
        dt_tensor_view *v = &n->tensors[t];
        if (v->ndim < 2)
            continue;
        v->mats = 1;
        v->cols = v->fan_in; /* in, or C R S */
        v->rows = v->count / v->fan_in;
    }
}

void net_finish(dt_net *n, int classes)
{
    const dt_node *last = &n->nodes[n->nnodes - 1];
    if ((int)node_size(last) != classes)
        DT_FATAL("network builder: the last node has %zu outputs, expected %d classes",
                 node_size(last), classes);
    n->classes = classes;
    for (int i = 1; i < n->nnodes; i++) {
        dt_node *d = &n->nodes[i];
        const dt_node *x = &n->nodes[d->in0];
        char shape[40];
        size_t in = node_size(x);
        switch (d->op) {
        case OP_LINEAR:
            snprintf(shape, sizeof shape, "(%d, %zu)", d->c, in); /* (out, in) */
            d->w_n = (size_t)d->c * in;
            add_tensor(n, i, "weight", shape, 2, d->w_n, in, 0, &d->w_off);
            snprintf(shape, sizeof shape, "(%d)", d->c);
            d->b_n = (size_t)d->c;
            add_tensor(n, i, "bias", shape, 1, d->b_n, in, 0, &d->b_off);
            break;
        case OP_CONV2D: {
            size_t fan = (size_t)x->c * d->k * d->k;
            snprintf(shape, sizeof shape, "(%d, %d, %d, %d)", d->c, x->c, d->k, d->k); /* (K, C, R, S) */
            d->w_n = (size_t)d->c * fan;
            add_tensor(n, i, "weight", shape, 4, d->w_n, fan, 0, &d->w_off);
            if (d->bias) {
                snprintf(shape, sizeof shape, "(%d)", d->c);
                d->b_n = (size_t)d->c;
                add_tensor(n, i, "bias", shape, 1, d->b_n, fan, 0, &d->b_off);
            }
            break;
        }
        case OP_GROUPNORM:
            snprintf(shape, sizeof shape, "(%d)", d->c);
            d->w_n = d->b_n = (size_t)d->c;
            add_tensor(n, i, "weight", shape, 1, d->w_n, 0, 1, &d->w_off);
            add_tensor(n, i, "bias", shape, 1, d->b_n, 0, 2, &d->b_off);
            break;
        default:
            break;
        }
    }
    mark_hidden_matrices(n);
    net_plan_layouts(n);
    net_plan_fusion(n);
}

void net_init_params(const dt_net *n, float *params, uint64_t seed)
{
    for (int t = 0; t < n->ntensors; t++) {
        const dt_tensor_view *v = &n->tensors[t];
        float *p = params + v->offset;
        if (v->init == 1) {
            for (size_t i = 0; i < v->count; i++)
                p[i] = 1.0f;
        } else if (v->init == 2) {
            memset(p, 0, v->count * sizeof *p);
        } else {
            dt_rng r = rng_make(seed, (uint64_t)t, 0x1417, 0);
            double bound = 1.0 / sqrt((double)v->fan_in);
            for (size_t i = 0; i < v->count; i++)
                p[i] = (float)((2.0 * rng_uniform_d(&r) - 1.0) * bound);
        }
    }
}

static dt_pool_shape pool_shape(const dt_net *n, const dt_node *d, int B)
{
    const dt_node *x = &n->nodes[d->in0];
    return (dt_pool_shape){ .B = B, .C = x->c, .H = x->h, .W = x->w, .k = d->k,
                            .stride = d->stride, .P = d->h, .Q = d->w, .blk = x->blk };
}

static void release_buffers(dt_net *n)
{
    if (!n->act)
        return;
    for (int i = 1; i < n->nnodes; i++)
        if (n->aux[i])
            n->be->mem_free(n->aux[i]);
    if (n->arena)
        n->be->mem_free(n->arena);
    free(n->act_fwd);
    free(n->act_rec);
    free(n->owner);
    free(n->stash);
    free(n->stash_at);
    free(n->widen_at);
    free(n->mask16);
    free(n->first_use);
    free(n->unwritten);
    free(n->dx_tmp);
    free(n->act);
    free(n->dact);
    free(n->aux);
    free(n->work_fwd);
    free(n->work_bwd);
    free(n->cols_kept);
    n->cols_kept = NULL;
    n->arena = NULL;
    n->arena_n = 0;
    n->act_fwd = n->act_rec = NULL;
    n->owner = n->stash_at = n->widen_at = NULL;
    n->stash = n->mask16 = NULL;
    n->first_use = NULL;
    n->unwritten = NULL;
    n->dx_tmp = NULL;
    n->act = n->dact = NULL;
    n->aux = NULL;
    n->work_fwd = n->work_bwd = NULL;
}

void net_reserve(dt_net *n, int B)
{
    if (n->act && B <= n->B)
        return;
    release_buffers(n);
    n->reserve_gen++; /* every recorded step names the old buffers */
    n->B = B;
    n->act = dt_calloc((size_t)n->nnodes, sizeof *n->act);
    n->dact = dt_calloc((size_t)n->nnodes, sizeof *n->dact);
    n->aux = dt_calloc((size_t)n->nnodes, sizeof *n->aux);
    for (int i = 1; i < n->nnodes; i++) {
        const dt_node *d = &n->nodes[i];
        size_t sz = (size_t)B * node_size(d);
        if (d->op == OP_FLATTEN) /* a view of its input */
            continue;
        if (d->op == OP_MAXPOOL)
            n->aux[i] = n->be->mem_alloc(sz * sizeof(int32_t));
        else if (d->op == OP_DROPOUT)
            n->aux[i] = n->be->mem_alloc(sz * sizeof(float));
        else if (d->op == OP_GROUPNORM) /* mean (B, G), rstd (B, G) */
            n->aux[i] = n->be->mem_alloc(2 * (size_t)B * d->groups * sizeof(float));
    }
    net_plan_buffers(n, B);
    n->dlogits = n->dact[n->nnodes - 1];
}

/* Whether ReLU node i writes the bf16 copy of its output (a training
 * forward: the backward reads it) */
static int relu_keeps_bf16(const dt_net *n, int i)
{
    const int o = n->owner[i];
    return n->nodes[i].op == OP_RELU && o != i && n->stash[o] && n->stash_at[o] == i;
}

/* The bf16 copies made after forward node i (a training forward), but for
 * one a ReLU made as it wrote it */
static void keep_bf16_after(dt_net *n, int i, int B)
{
    for (int j = 1; j < n->nnodes; j++)
        if (n->stash[j] && n->stash_at[j] == i && !relu_keeps_bf16(n, i))
            n->be->to_bf16((size_t)B * node_size(&n->nodes[j]), n->act[j], n->stash[j]);
}

/* Before backward node i: the bf16 copies its readers need as floats,
 * widened into their backward buffers, which every node sharing the
 * owner's output follows until the backward ends (widen_back). */
static void widen_before(dt_net *n, int i, int B)
{
    for (int j = 1; j < n->nnodes; j++) {
        if (!n->stash[j] || n->widen_at[j] != i)
            continue;
        n->be->from_bf16((size_t)B * node_size(&n->nodes[j]), n->stash[j], n->act_rec[j]);
        for (int k = 1; k < n->nnodes; k++)
            if (n->owner[k] == j)
                n->act[k] = n->act_rec[j];
    }
}

/* A gradient buffer (by its base node) live but unwritten: fresh() hands it
 * to its first writer to write rather than add to; settle() zeroes it for a
 * kernel that can only add, or before it is read. */
static int fresh(dt_net *n, int b)
{
    if (b <= 0 || !n->unwritten[b])
        return 0;
    n->unwritten[b] = 0;
    return 1;
}

static void settle(dt_net *n, int b, int B)
{
    if (fresh(n, b))
        n->be->mem_zero(n->dact[b], (size_t)B * node_size(&n->nodes[b]) * sizeof(float));
}

static void widen_back(dt_net *n)
{
    for (int j = 1; j < n->nnodes; j++)
        if (n->stash[j] && n->widen_at[j])
            for (int k = 1; k < n->nnodes; k++)
                if (n->owner[k] == j)
                    n->act[k] = n->act_fwd[j];
}

void net_bind_input(dt_net *n, const float *x)
{
    n->act[0] = (float *)x; /* read only: no kernel writes its input */
    for (int i = 1; i < n->nnodes; i++)
        if (n->nodes[i].op == OP_FLATTEN) /* a view: follows its input */
            n->act[i] = n->act[n->nodes[i].in0];
}

uint64_t net_dropout_key(uint64_t dropout_key, int node)
{
    return rng_key(dropout_key, (uint64_t)node, 0xD60, 0);
}

void net_forward_kernels(dt_net *n, const float *params, const float *x, int B, int train,
                         uint64_t dropout_key, const uint64_t *keys)
{
    const dt_backend *be = n->be;
    if (!n->act || B > n->B)
        net_reserve(n, B);
    net_bind_input(n, x);
    for (int i = 1; i < n->nnodes; i++) {
        if (train && i > 1)
            keep_bf16_after(n, i - 1, B);
        const dt_node *d = &n->nodes[i];
        const float *in = n->act[d->in0];
        float *out = n->act[i];
        size_t sz = (size_t)B * node_size(d);
        const float *W = d->w_off >= 0 ? params + d->w_off : NULL;
        const float *b = d->b_off >= 0 ? params + d->b_off : NULL;
        if (d->fuse == FUSE_ABSORBED) // done by the GroupNorm before it
            continue;
        switch (d->op) {
        case OP_LINEAR:
            be->linear_forward(B, (int)node_size(&n->nodes[d->in0]), d->c, in, W, b, out,
                               n->work_fwd[i]);
            break;
        case OP_CONV2D: {
            dt_conv_shape s = conv_shape(n, d, B);
            be->conv2d_forward(&s, in, W, b, out, n->work_fwd[i]);
            break;
        }
        case OP_MAXPOOL: {
            dt_pool_shape s = pool_shape(n, d, B);
            be->maxpool_forward(&s, in, out, n->aux[i]);
            break;
        }
        case OP_AVGPOOL: {
            const dt_node *xi = &n->nodes[d->in0];
            be->avgpool_forward(B, xi->c, xi->h * xi->w, xi->blk, in, out);
            break;
        }
        case OP_RELU:
            if (train && relu_keeps_bf16(n, i))
                be->relu_forward_bf16(sz, in, out, n->stash[n->owner[i]]);
            else
                be->relu_forward(sz, in, out);
            break;
        case OP_SIGMOID: be->sigmoid_forward(sz, in, out); break;
        case OP_DROPOUT:
            if (train && !n->no_dropout && keys)
                be->dropout_forward_keyed(sz, d->p, keys + i, in, out, n->aux[i]);
            else if (train && !n->no_dropout)
                be->dropout_forward(sz, d->p, net_dropout_key(dropout_key, i), in, out,
                                    n->aux[i]);
            else
                be->mem_copy(out, in, sz * sizeof *out);
            break;
        case OP_GROUPNORM: {
            float *mean = n->aux[i], *rstd = mean + (size_t)B * d->groups;
            const float *skip = d->fuse == FUSE_ADD_RELU ? n->act[d->fuse_skip] : NULL;
            be->groupnorm_forward(B, d->c, d->h * d->w, d->groups, d->blk, in, W, b, skip,
                                  d->fuse != FUSE_NONE, d->fuse ? n->act[d->fuse_out] : out,
                                  mean, rstd);
            break;
        }
        case OP_ADD: be->add_forward(sz, in, n->act[d->in1], out); break;
        case OP_FLATTEN: break; /* a view of its input (net_bind_input) */
        case OP_INPUT: break;
        }
    }
    if (train)
        keep_bf16_after(n, n->nnodes - 1, B);
    n->fwd_train = train;
    n->last_B = B;
}

double net_forward(dt_net *n, const float *params, const float *x, const int32_t *y, int B,
                   int train, uint64_t dropout_key, int *correct)
{
    net_forward_kernels(n, params, x, B, train, dropout_key, NULL);
    int hits = 0;
    double loss = n->be->softmax_xent(B, n->classes, n->act[n->nnodes - 1], y,
                                      train ? n->dlogits : NULL, &hits);
    if (correct)
        *correct = hits;
    return loss;
}

/* A GroupNorm + ReLU output not kept for backward, computed again into its
 * backward buffer (net_plan.c: plan_recompute). */
static void recompute(dt_net *n, const float *params, int g, int B)
{
    const dt_node *d = &n->nodes[g];
    float *mean = n->aux[g], *rstd = mean + (size_t)B * d->groups;
    n->act[g] = n->act[d->fuse_out] = n->act_rec[g];
    n->be->groupnorm_forward(B, d->c, d->h * d->w, d->groups, d->blk, n->act[d->in0],
                             params + d->w_off, params + d->b_off, NULL, 1, n->act[g], mean,
                             rstd);
}

/* A conv's backward: dx written fresh or added to, through the plan's
 * scratch where the kernel cannot add; the forward's columns where kept. */
static void conv_node_backward(dt_net *n, int i, int B, const float *x, const float *W,
                               const float *dy, float *dx, float *dW, float *db)
{
    const dt_backend *be = n->be;
    const dt_node *d = &n->nodes[i], *xi = &n->nodes[d->in0];
    const int b0 = d->in0 > 0 ? net_base_of(n, d->in0) : 0;
    dt_conv_shape s = conv_shape(n, d, B);
    float *tmp = n->dx_tmp[i];
    const int dx_fresh = fresh(n, b0);
    void (*bwd)(const dt_conv_shape *, const float *, const float *, const float *, float *, int,
                float *, float *, float *) =
        n->cols_kept[i] ? be->conv2d_backward_kept : be->conv2d_backward;
    if (dx && !dx_fresh && tmp) { // dx += (the kernel's fresh output)
        bwd(&s, x, W, dy, tmp, 1, dW, db, n->work_bwd[i]);
        be->add_backward((size_t)B * node_size(xi), tmp, dx, NULL);
    } else {
        bwd(&s, x, W, dy, dx, dx_fresh, dW, db, n->work_bwd[i]);
    }
}

/* A GroupNorm's backward, with the ReLU (and residual add) fused after it:
 * the gradient of the fused output, masked by the ReLU there. */
static void groupnorm_node_backward(dt_net *n, int i, int B, const float *x, const float *W,
                                    const float *dy, float *dx, float *dW, float *db)
{
    const dt_backend *be = n->be;
    const dt_node *d = &n->nodes[i];
    const int b0 = d->in0 > 0 ? net_base_of(n, d->in0) : 0;
    const float *mean = n->aux[i], *rstd = mean + (size_t)B * d->groups;
    const int dx_fresh = fresh(n, b0);
    if (d->fuse) {
        const int add = d->fuse == FUSE_ADD_RELU;
        const int skip_fresh = add && fresh(n, net_base_of(n, d->fuse_skip));
        settle(n, net_base_of(n, d->fuse_out), B);
        be->groupnorm_backward(B, d->c, d->h * d->w, d->groups, d->blk, x, W, mean, rstd,
                               n->act[d->fuse_out], n->dact[d->fuse_out], dx,
                               add ? n->dact[d->fuse_skip] : NULL, dx_fresh, skip_fresh, dW, db);
    } else {
        be->groupnorm_backward(B, d->c, d->h * d->w, d->groups, d->blk, x, W, mean, rstd, NULL,
                               dy, dx, NULL, dx_fresh, 0, dW, db);
    }
}

/* Node i's backward step: its inputs' gradient buffers become live (unwritten)
 * at their first consumer, then the layer's kernel. */
static void node_backward(dt_net *n, const float *params, float *grads, int i, int B)
{
    const dt_backend *be = n->be;
    const dt_node *d = &n->nodes[i];
    const dt_node *xi = &n->nodes[d->in0];
    const float *x = n->act[d->in0], *dy = n->dact[i];
    float *dx = d->in0 == 0 ? NULL : n->dact[d->in0];
    size_t sz = (size_t)B * node_size(d);
    if (d->op == OP_FLATTEN)
        return;
    // a gradient buffer becomes live here, unwritten, unless a ReLU masks it in
    // place (its output's gradient handed on)
    const int in_place = d->op == OP_RELU && dx && dx == dy;
    const int b0 = d->in0 > 0 ? net_base_of(n, d->in0) : 0;
    const int b1 = d->in1 > 0 ? net_base_of(n, d->in1) : 0;
    for (int k = 0; k < 2; k++) {
        const int b = k ? b1 : b0;
        if (b > 0 && n->first_use[b] == i && !net_grad_unused(n, b) && !in_place)
            n->unwritten[b] = 1;
    }
    if (d->fuse == FUSE_ABSORBED) // its fused GroupNorm, later in backward order
        return;
    settle(n, net_base_of(n, i), B); // dy (every consumer has written it)
    const float *W = d->w_off >= 0 ? params + d->w_off : NULL;
    float *dW = d->w_off >= 0 ? grads + d->w_off : NULL;
    float *db = d->b_off >= 0 ? grads + d->b_off : NULL;
    switch (d->op) {
    case OP_LINEAR:
        settle(n, b0, B);
        be->linear_backward(B, (int)node_size(xi), d->c, x, W, dy, dx, dW, db,
                            n->work_bwd[i]);
        break;
    case OP_CONV2D:
        conv_node_backward(n, i, B, x, W, dy, dx, dW, db);
        break;
    case OP_MAXPOOL:
        if (dx) {
            dt_pool_shape s = pool_shape(n, d, B);
            be->maxpool_backward(&s, dy, n->aux[i], dx, fresh(n, b0));
        }
        break;
    case OP_AVGPOOL:
        settle(n, b0, B);
        if (dx)
            be->avgpool_backward(B, xi->c, xi->h * xi->w, xi->blk, dy, dx);
        break;
    case OP_RELU:
        settle(n, b0, B);
        if (n->mask16[i] && in_place)
            be->relu_backward_inplace_bf16(sz, n->mask16[i], dx);
        else if (n->mask16[i] && dx)
            be->relu_backward_bf16(sz, n->mask16[i], dy, dx);
        else if (in_place)
            be->relu_backward_inplace(sz, n->act[i], dx);
        else if (dx)
            be->relu_backward(sz, n->act[i], dy, dx);
        break;
    case OP_SIGMOID:
        settle(n, b0, B);
        if (dx)
            be->sigmoid_backward(sz, n->act[i], dy, dx);
        break;
    case OP_DROPOUT:
        if (dx && n->no_dropout) { /* identity: dx += dy */
            settle(n, b0, B);
            be->add_backward(sz, dy, dx, NULL);
        } else if (dx) {
            be->dropout_backward(sz, n->aux[i], dy, dx, fresh(n, b0));
        }
        break;
    case OP_GROUPNORM:
        groupnorm_node_backward(n, i, B, x, W, dy, dx, dW, db);
        break;
    case OP_ADD:
        settle(n, b0, B);
        settle(n, b1, B);
        be->add_backward(sz, dy, dx, n->dact[d->in1]);
        break;
    case OP_FLATTEN:
    case OP_INPUT: break;
    }
}

void net_backward(dt_net *n, const float *params, float *grads)
{
    const int B = n->last_B;
    if (!n->fwd_train)
        DT_FATAL("net_backward after a forward in evaluation mode");
    /* dlogits lives in dact[last]; every other gradient accumulates in a buffer
     * that becomes live, unwritten, at its first consumer: the first kernel to
     * reach it writes it where it can, else it is zeroed first */
    memset(n->unwritten, 0, (size_t)n->nnodes * sizeof *n->unwritten);
    for (int i = n->nnodes - 1; i >= 1; i--) {
        for (int g = 1; g < n->nnodes; g++) // before anything reads node g's output
            if (n->nodes[g].recompute_at == i)
                recompute(n, params, g, B);
        widen_before(n, i, B);
        node_backward(n, params, grads, i, B);
    }
    // the forward buffers back, for the next forward
    for (int g = 1; g < n->nnodes; g++)
        if (n->nodes[g].recompute_at)
            n->act[g] = n->act[n->nodes[g].fuse_out] = n->act_fwd[g];
    widen_back(n);
}

const float *net_logits(const dt_net *n) { return n->act[n->nnodes - 1]; }

/* What net_train_queue (nn/net_step.c) made: its records and buffers */
static void release_step(dt_net *n)
{
    dt_net_step *s = &n->step;
    step_graphs_free(&s->rec, n->be);
    if (s->keys)
        n->be->mem_free(s->keys);
    if (s->keys_host)
        n->be->host_free(s->keys_host);
    if (s->rows)
        n->be->mem_free(s->rows);
    *s = (dt_net_step){ 0 };
}

void net_free(dt_net *n)
{
    if (!n)
        return;
    release_step(n);
    release_buffers(n);
    free(n->nodes);
    free(n->tensors);
    free(n);
}
