#include "nn/net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"

static size_t node_size(const dt_node *d) { return (size_t)d->c * d->h * d->w; }

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

static void add_tensor(dt_net *n, int node, const char *kind, const char *shape,
                       size_t count, size_t fan_in, int init, int64_t *off)
{
    n->tensors = dt_realloc(n->tensors, (size_t)(n->ntensors + 1) * sizeof *n->tensors);
    dt_tensor_view *t = &n->tensors[n->ntensors++];
    static const char *opname[] = { "input", "linear", "conv", "maxpool", "avgpool", "relu",
                                    "sigmoid", "dropout", "gn", "add", "flatten" };
    snprintf(t->name, sizeof t->name, "%s%d.%s", opname[n->nodes[node].op], node, kind);
    snprintf(t->shape, sizeof t->shape, "%s", shape);
    t->offset = n->nparams;
    t->count = count;
    t->fan_in = fan_in;
    t->init = init;
    *off = (int64_t)n->nparams;
    n->nparams += count;
}

/* Ops that read a channel-blocked input (conv, pooling: a layout flag;
 * element-wise ops: layout-blind), and those whose output has their input's
 * layout. Dropout is not layout-blind: its mask is a function of the element
 * index, which must stay the plain one so that runs agree across backends. */
static int reads_blocked(dt_op op)
{
    return op == OP_CONV2D || op == OP_MAXPOOL || op == OP_AVGPOOL || op == OP_RELU ||
           op == OP_SIGMOID || op == OP_GROUPNORM || op == OP_ADD;
}

static int keeps_layout(dt_op op)
{
    return op == OP_RELU || op == OP_SIGMOID || op == OP_GROUPNORM || op == OP_ADD;
}

static void force_plain(const dt_net *n, char *plain, int j)
{
    if (j <= 0 || plain[j])
        return;
    plain[j] = 1;
    const dt_node *d = &n->nodes[j];
    if (keeps_layout(d->op)) {
        force_plain(n, plain, d->in0);
        if (d->op == OP_ADD)
            force_plain(n, plain, d->in1);
    }
}

/* Layouts: with a blocking backend, a conv whose K is a multiple of the block
 * writes blocked output, which flows through GroupNorm, ReLU and residual adds
 * to the next conv or pooling without a reorder. Wherever a consumer cannot
 * read it (dropout, flatten, linear; an add of mixed layouts) the producing
 * chain is made plain instead, back to its convs; repeat until consistent. */
static void plan_layouts(dt_net *n)
{
    const int cb = n->be->cblock;
    char *plain = dt_calloc((size_t)n->nnodes, 1);
    for (int changed = 1; changed;) {
        for (int i = 1; i < n->nnodes; i++) {
            dt_node *d = &n->nodes[i];
            const dt_node *a = &n->nodes[d->in0];
            d->blk = 0;
            if (!cb || plain[i])
                continue;
            if (d->op == OP_CONV2D)
                d->blk = d->c % cb == 0 ? cb : 0;
            else if (d->op == OP_ADD)
                d->blk = a->blk && n->nodes[d->in1].blk ? cb : 0;
            else if (keeps_layout(d->op))
                d->blk = a->blk;
        }
        changed = 0;
        for (int i = 1; i < n->nnodes; i++) {
            const dt_node *d = &n->nodes[i];
            for (int k = 0; k < 2; k++) {
                const int in = k ? d->in1 : d->in0;
                if (in <= 0 || !n->nodes[in].blk)
                    continue;
                if (!reads_blocked(d->op) || (keeps_layout(d->op) && !d->blk)) {
                    force_plain(n, plain, in);
                    changed = 1;
                }
            }
        }
    }
    free(plain);
}

static int relu_in_place(const dt_net *n, int i);

static int consumers_of(const dt_net *n, int j, int *only)
{
    int count = 0;
    for (int k = 1; k < n->nnodes; k++)
        for (int e = 0; e < 2; e++)
            if ((e ? n->nodes[k].in1 : n->nodes[k].in0) == j) {
                count++;
                *only = k;
            }
    return count;
}

/* GroupNorm fused with what follows it in a residual block: a GroupNorm whose
 * only consumer is an in-place ReLU computes the ReLU too (FUSE_RELU); one
 * whose only consumer is an add of an operand computed before it, followed by
 * an in-place ReLU, computes relu(gn(x) + skip) straight into the ReLU's
 * buffer (FUSE_ADD_RELU). The absorbed nodes keep their place in the graph
 * (and so the parameter layout) but do no work of their own; the fused
 * backward masks the gradient by the ReLU's output and adds it into the skip
 * operand's gradient in the same pass. */
static void plan_fusion(dt_net *n)
{
    for (int g = 1; g < n->nnodes; g++) {
        dt_node *d = &n->nodes[g];
        int c, r;
        if (d->op != OP_GROUPNORM || consumers_of(n, g, &c) != 1)
            continue;
        dt_node *dc = &n->nodes[c];
        if (dc->op == OP_RELU && relu_in_place(n, c)) {
            d->fuse = FUSE_RELU;
            d->fuse_out = c;
            dc->fuse = FUSE_ABSORBED;
            dc->fuse_by = g;
        } else if (dc->op == OP_ADD && consumers_of(n, c, &r) == 1 &&
                   n->nodes[r].op == OP_RELU && relu_in_place(n, r)) {
            const int other = dc->in0 == g ? dc->in1 : dc->in0;
            if (other == g || other >= g || n->nodes[other].blk != d->blk)
                continue; // the skip must exist when the GroupNorm runs
            d->fuse = FUSE_ADD_RELU;
            d->fuse_out = r;
            d->fuse_skip = other;
            dc->fuse = FUSE_ABSORBED;
            dc->fuse_by = g;
            n->nodes[r].fuse = FUSE_ABSORBED;
            n->nodes[r].fuse_by = g;
        }
    }
}

/* A node whose gradient buffer no one uses: a fused GroupNorm's (its backward
 * reads the ReLU's gradient), and an absorbed add's. */
static int grad_unused(const dt_net *n, int j)
{
    const dt_node *d = &n->nodes[j];
    return (d->op == OP_GROUPNORM && d->fuse != FUSE_NONE) ||
           (d->op == OP_ADD && d->fuse == FUSE_ABSORBED);
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
            add_tensor(n, i, "weight", shape, d->w_n, in, 0, &d->w_off);
            snprintf(shape, sizeof shape, "(%d)", d->c);
            d->b_n = (size_t)d->c;
            add_tensor(n, i, "bias", shape, d->b_n, in, 0, &d->b_off);
            break;
        case OP_CONV2D: {
            size_t fan = (size_t)x->c * d->k * d->k;
            snprintf(shape, sizeof shape, "(%d, %d, %d, %d)", d->c, x->c, d->k, d->k); /* (K, C, R, S) */
            d->w_n = (size_t)d->c * fan;
            add_tensor(n, i, "weight", shape, d->w_n, fan, 0, &d->w_off);
            if (d->bias) {
                snprintf(shape, sizeof shape, "(%d)", d->c);
                d->b_n = (size_t)d->c;
                add_tensor(n, i, "bias", shape, d->b_n, fan, 0, &d->b_off);
            }
            break;
        }
        case OP_GROUPNORM:
            snprintf(shape, sizeof shape, "(%d)", d->c);
            d->w_n = d->b_n = (size_t)d->c;
            add_tensor(n, i, "weight", shape, d->w_n, 0, 1, &d->w_off);
            add_tensor(n, i, "bias", shape, d->b_n, 0, 2, &d->b_off);
            break;
        default:
            break;
        }
    }
    plan_layouts(n);
    plan_fusion(n);
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

static dt_conv_shape conv_shape(const dt_net *n, const dt_node *d, int B)
{
    const dt_node *x = &n->nodes[d->in0];
    return (dt_conv_shape){ .B = B, .C = x->c, .H = x->h, .W = x->w, .K = d->c, .R = d->k,
                            .S = d->k, .stride = d->stride, .pad = d->pad, .P = d->h, .Q = d->w,
                            .xblk = x->blk, .yblk = d->blk };
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
    for (int i = 1; i < n->nnodes; i++) {
        if (n->act_own[i])
            free(n->act[i]);
        free(n->aux[i]);
    }
    for (int p = 0; p < n->npool; p++)
        free(n->pool[p]);
    for (int p = 0; p < n->nfpool; p++)
        free(n->fpool[p]);
    free(n->pool);
    free(n->fpool);
    free(n->act_own);
    n->fpool = NULL;
    n->act_own = NULL;
    n->nfpool = 0;
    free(n->first_use);
    free(n->act);
    free(n->dact);
    free(n->aux);
    free(n->work);
    n->act = n->dact = NULL;
    n->aux = NULL;
    n->work = NULL;
    n->pool = NULL;
    n->first_use = NULL;
    n->npool = 0;
}

/* A ReLU may overwrite its input when it is the input's only consumer and the
 * input's own backward does not read its output (conv, linear, add and
 * GroupNorm read their inputs; ReLU/sigmoid backward read their outputs). */
static int relu_in_place(const dt_net *n, int i)
{
    const dt_node *d = &n->nodes[i];
    if (d->op != OP_RELU || d->in0 <= 0)
        return 0;
    dt_op src = n->nodes[d->in0].op;
    if (src != OP_CONV2D && src != OP_LINEAR && src != OP_ADD && src != OP_GROUPNORM)
        return 0;
    int consumers = 0;
    for (int k = 1; k < n->nnodes; k++)
        consumers += (n->nodes[k].in0 == d->in0) + (n->nodes[k].in1 == d->in0);
    return consumers == 1;
}

/* The node whose buffers a flatten view shares. */
static int base_of(const dt_net *n, int j)
{
    while (j > 0 && n->nodes[j].op == OP_FLATTEN)
        j = n->nodes[j].in0;
    return j;
}

/* Activation gradients live only during backward: dact[j] from the first
 * consumer of j that backward reaches (the highest-numbered one) until j's
 * own backward. Nodes whose intervals do not overlap share one buffer (a
 * greedy interval colouring in backward order), which roughly halves the
 * memory of a training batch; a buffer is zeroed when it becomes live. */
static void plan_gradients(dt_net *n, int B)
{
    const int N = n->nnodes, last = N - 1;
    n->first_use = dt_calloc((size_t)N, sizeof *n->first_use);
    for (int i = 1; i < N; i++) {
        const dt_node *d = &n->nodes[i];
        if (d->op == OP_FLATTEN)
            continue;
        int in[2] = { base_of(n, d->in0), d->in1 > 0 ? base_of(n, d->in1) : 0 };
        for (int k = 0; k < 2; k++)
            if (in[k] > 0 && i > n->first_use[in[k]])
                n->first_use[in[k]] = i;
    }
    n->first_use[last] = N; /* dlogits: written by the forward pass */
    float **owner = dt_calloc((size_t)N, sizeof *owner); /* pool buffer of each node */
    size_t *cap = NULL;
    int *busy = NULL;
    n->pool = NULL;
    n->npool = 0;
    for (int time = N; time >= 1; time--) {
        for (int j = 1; j < N; j++) { /* buffers that become live now */
            if (n->nodes[j].op == OP_FLATTEN || n->first_use[j] != time || grad_unused(n, j))
                continue;
            size_t need = (size_t)B * node_size(&n->nodes[j]);
            int pick = -1;
            for (int p = 0; p < n->npool; p++)
                if (!busy[p] && cap[p] >= need && (pick < 0 || cap[p] < cap[pick]))
                    pick = p;
            if (pick < 0) {
                n->pool = dt_realloc(n->pool, (size_t)(n->npool + 1) * sizeof *n->pool);
                cap = dt_realloc(cap, (size_t)(n->npool + 1) * sizeof *cap);
                busy = dt_realloc(busy, (size_t)(n->npool + 1) * sizeof *busy);
                n->pool[n->npool] = dt_falloc(need);
                cap[n->npool] = need;
                pick = n->npool++;
            }
            // dies after its own backward; an absorbed ReLU's gradient is read by the
            // fused GroupNorm's backward, later in backward order
            busy[pick] = (n->nodes[j].fuse == FUSE_ABSORBED ? n->nodes[j].fuse_by : j) + 1;
            owner[j] = n->pool[pick];
        }
        if (time < N && n->nodes[time].op != OP_FLATTEN) /* dact[time] dies after its backward */
            for (int p = 0; p < n->npool; p++)
                if (busy[p] == time + 1)
                    busy[p] = 0;
    }
    for (int j = 1; j < N; j++)
        n->dact[j] = owner[base_of(n, j)];
    free(owner);
    free(cap);
    free(busy);
}

/* Whether an op's backward reads its own output, or its input. */
static int bwd_reads_output(dt_op op) { return op == OP_RELU || op == OP_SIGMOID; }
static int bwd_reads_input(dt_op op)
{
    return op == OP_CONV2D || op == OP_LINEAR || op == OP_GROUPNORM;
}

/* The node whose buffer holds node j's output (views and in-place ReLUs share). */
static int act_owner(const dt_net *n, int j)
{
    while (j > 0 && (n->nodes[j].op == OP_FLATTEN || relu_in_place(n, j)))
        j = n->nodes[j].in0;
    return j;
}

/* Forward activations: an output that no backward reads (a GroupNorm feeding
 * only a residual add, a pooling feeding only dropout) is needed only until
 * its last consumer's forward, so such outputs share a few buffers by the
 * same greedy interval colouring as the gradients, in forward order. The
 * others, and the logits, get their own buffer. */
static void plan_activations(dt_net *n, int B)
{
    const int N = n->nnodes;
    char *keep = dt_calloc((size_t)N, 1);
    int *last = dt_calloc((size_t)N, sizeof *last);
    keep[act_owner(n, N - 1)] = 1;
    for (int i = 1; i < N; i++) {
        const dt_node *d = &n->nodes[i];
        if (bwd_reads_output(d->op))
            keep[act_owner(n, i)] = 1;
        for (int k = 0; k < 2; k++) {
            const int in = k ? d->in1 : d->in0;
            if (in <= 0)
                continue;
            const int o = act_owner(n, in);
            if (bwd_reads_input(d->op))
                keep[o] = 1;
            if (i > last[o])
                last[o] = i;
        }
    }
    size_t *cap = NULL;
    int *busy_until = NULL;
    n->act_own = dt_calloc((size_t)N, 1);
    for (int j = 1; j < N; j++) {
        if (act_owner(n, j) != j)
            continue;
        const size_t need = (size_t)B * node_size(&n->nodes[j]);
        if (n->nodes[j].fuse == FUSE_ADD_RELU) // writes into its ReLU's buffer
            continue;
        if (keep[j] || last[j] == 0) {
            n->act[j] = dt_falloc(need);
            n->act_own[j] = 1;
            continue;
        }
        int pick = -1; // the smallest free buffer that fits
        for (int p = 0; p < n->nfpool; p++)
            if (busy_until[p] < j && cap[p] >= need && (pick < 0 || cap[p] < cap[pick]))
                pick = p;
        if (pick < 0) {
            n->fpool = dt_realloc(n->fpool, (size_t)(n->nfpool + 1) * sizeof *n->fpool);
            cap = dt_realloc(cap, (size_t)(n->nfpool + 1) * sizeof *cap);
            busy_until = dt_realloc(busy_until, (size_t)(n->nfpool + 1) * sizeof *busy_until);
            n->fpool[n->nfpool] = dt_falloc(need);
            cap[n->nfpool] = need;
            pick = n->nfpool++;
        }
        busy_until[pick] = last[j];
        n->act[j] = n->fpool[pick];
    }
    for (int j = 1; j < N; j++)
        n->act[j] = n->act[act_owner(n, j)];
    free(keep);
    free(last);
    free(cap);
    free(busy_until);
}

void net_reserve(dt_net *n, int B)
{
    if (n->act && B <= n->B)
        return;
    release_buffers(n);
    n->B = B;
    n->act = dt_calloc((size_t)n->nnodes, sizeof *n->act);
    n->dact = dt_calloc((size_t)n->nnodes, sizeof *n->dact);
    n->aux = dt_calloc((size_t)n->nnodes, sizeof *n->aux);
    n->work_n = 0;
    plan_activations(n, B);
    for (int i = 1; i < n->nnodes; i++) {
        const dt_node *d = &n->nodes[i];
        size_t sz = (size_t)B * node_size(d);
        if (d->op == OP_FLATTEN) /* a view of its input */
            continue;
        if (d->op == OP_MAXPOOL)
            n->aux[i] = dt_calloc(sz, sizeof(int32_t));
        else if (d->op == OP_DROPOUT)
            n->aux[i] = dt_falloc(sz);
        else if (d->op == OP_GROUPNORM)
            n->aux[i] = dt_falloc(2 * (size_t)B * d->groups); /* mean (B, G), rstd (B, G) */
        else if (d->op == OP_CONV2D) {
            dt_conv_shape s = conv_shape(n, d, B);
            size_t w = n->be->conv2d_workspace(&s);
            if (w > n->work_n)
                n->work_n = w;
        }
    }
    n->work = n->work_n ? dt_falloc(n->work_n) : NULL;
    plan_gradients(n, B);
    n->dlogits = n->dact[n->nnodes - 1];
}

double net_forward(dt_net *n, const float *params, const float *x, const int32_t *y, int B,
                   int train, uint64_t dropout_key, int *correct)
{
    const dt_backend *be = n->be;
    if (!n->act || B > n->B)
        net_reserve(n, B);
    n->act[0] = (float *)x; /* read only: no kernel writes its input */
    for (int i = 1; i < n->nnodes; i++) {
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
            be->linear_forward(B, (int)node_size(&n->nodes[d->in0]), d->c, in, W, b, out);
            break;
        case OP_CONV2D: {
            dt_conv_shape s = conv_shape(n, d, B);
            be->conv2d_forward(&s, in, W, b, out, n->work);
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
        case OP_RELU: be->relu_forward(sz, in, out); break;
        case OP_SIGMOID: be->sigmoid_forward(sz, in, out); break;
        case OP_DROPOUT:
            if (train && !n->no_dropout)
                be->dropout_forward(sz, d->p, rng_key(dropout_key, (uint64_t)i, 0xD60, 0), in, out,
                                    n->aux[i]);
            else
                memcpy(out, in, sz * sizeof *out);
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
        case OP_FLATTEN: /* a view: follows its input (node 0 changes per call) */
            n->act[i] = n->act[d->in0];
            break;
        case OP_INPUT: break;
        }
    }
    n->fwd_train = train;
    int hits = 0;
    double loss = be->softmax_xent(B, n->classes, n->act[n->nnodes - 1], y,
                                   train ? n->dlogits : NULL, &hits);
    if (correct)
        *correct = hits;
    n->last_B = B;
    return loss;
}

void net_backward(dt_net *n, const float *params, float *grads)
{
    const dt_backend *be = n->be;
    int B = n->last_B;
    if (!n->fwd_train)
        DT_FATAL("net_backward after a forward in evaluation mode");
    /* dlogits lives in dact[last]; every other gradient accumulates from zero in
     * a buffer that becomes live (and is zeroed) at its first consumer */
    for (int i = n->nnodes - 1; i >= 1; i--) {
        const dt_node *d = &n->nodes[i];
        const dt_node *xi = &n->nodes[d->in0];
        const float *x = n->act[d->in0], *dy = n->dact[i];
        float *dx = d->in0 == 0 ? NULL : n->dact[d->in0];
        size_t sz = (size_t)B * node_size(d);
        if (d->op == OP_FLATTEN)
            continue;
        // a gradient buffer becomes live here: zeroed, unless a conv overwrites it
        int dx_fresh = 0;
        for (int k = 0; k < 2; k++) {
            int in = k ? d->in1 : d->in0;
            int b = in > 0 ? base_of(n, in) : 0;
            if (b > 0 && n->first_use[b] == i && !grad_unused(n, b)) {
                if (d->op == OP_CONV2D)
                    dx_fresh = 1;
                else
                    memset(n->dact[b], 0, (size_t)B * node_size(&n->nodes[b]) * sizeof(float));
            }
        }
        if (d->fuse == FUSE_ABSORBED)
            continue;
        const float *W = d->w_off >= 0 ? params + d->w_off : NULL;
        float *dW = d->w_off >= 0 ? grads + d->w_off : NULL;
        float *db = d->b_off >= 0 ? grads + d->b_off : NULL;
        switch (d->op) {
        case OP_LINEAR:
            be->linear_backward(B, (int)node_size(xi), d->c, x, W, dy, dx, dW, db);
            break;
        case OP_CONV2D: {
            dt_conv_shape s = conv_shape(n, d, B);
            be->conv2d_backward(&s, x, W, dy, dx, dx_fresh, dW, db, n->work);
            break;
        }
        case OP_MAXPOOL:
            if (dx) {
                dt_pool_shape s = pool_shape(n, d, B);
                be->maxpool_backward(&s, dy, n->aux[i], dx);
            }
            break;
        case OP_AVGPOOL:
            if (dx)
                be->avgpool_backward(B, xi->c, xi->h * xi->w, xi->blk, dy, dx);
            break;
        case OP_RELU:
            if (dx)
                be->relu_backward(sz, n->act[i], dy, dx);
            break;
        case OP_SIGMOID:
            if (dx)
                be->sigmoid_backward(sz, n->act[i], dy, dx);
            break;
        case OP_DROPOUT:
            if (dx && n->no_dropout) /* identity: dx += dy */
                be->add_backward(sz, dy, dx, NULL);
            else if (dx)
                be->dropout_backward(sz, n->aux[i], dy, dx);
            break;
        case OP_GROUPNORM: {
            const float *mean = n->aux[i], *rstd = mean + (size_t)B * d->groups;
            if (d->fuse) // the gradient of the fused output, masked by the ReLU there
                be->groupnorm_backward(B, d->c, d->h * d->w, d->groups, d->blk, x, W, mean, rstd,
                                       n->act[d->fuse_out], n->dact[d->fuse_out], dx,
                                       d->fuse == FUSE_ADD_RELU ? n->dact[d->fuse_skip] : NULL,
                                       dW, db);
            else
                be->groupnorm_backward(B, d->c, d->h * d->w, d->groups, d->blk, x, W, mean, rstd,
                                       NULL, dy, dx, NULL, dW, db);
            break;
        }
        case OP_ADD: be->add_backward(sz, dy, dx, n->dact[d->in1]); break;
        case OP_FLATTEN:
        case OP_INPUT: break;
        }
    }
}

const float *net_logits(const dt_net *n) { return n->act[n->nnodes - 1]; }

void net_free(dt_net *n)
{
    if (!n)
        return;
    release_buffers(n);
    free(n->nodes);
    free(n->tensors);
    free(n);
}
