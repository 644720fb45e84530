/* The network engine's plans, made once per net (layouts, fusion: net_finish)
 * and per batch size (buffers: net_reserve): which layout each activation
 * has, which layers run fused, and which buffers activations and their
 * gradients share. The engine itself (net.c) only follows them. */
#include "nn/net_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int bwd_reads_input(dt_op op);

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
int net_base_of(const dt_net *n, int j)
{
    while (j > 0 && n->nodes[j].op == OP_FLATTEN)
        j = n->nodes[j].in0;
    return j;
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
 * read it (dropout, flatten, linear; an add of mixed layouts; a conv whose
 * own output is plain) the producing
 * chain is made plain instead, back to its convs; repeat until consistent. */
void net_plan_layouts(dt_net *n)
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
                /* a conv writing plain output reads plain input too: oneDNN
                 * 2.6 runs blocked -> plain only as a reference kernel */
                if (!reads_blocked(d->op) || ((keeps_layout(d->op) || d->op == OP_CONV2D) && !d->blk)) {
                    force_plain(n, plain, in);
                    changed = 1;
                }
            }
        }
    }
    free(plain);
}

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

/* relu(gn(x)) is cheap to recompute from x and the saved statistics, and x is
 * kept anyway (GroupNorm's backward reads it), so its output is not kept for
 * backward: it lives in a shared forward buffer, and is computed again into a
 * shared backward buffer just before its first reader in backward order (the
 * conv that consumes it, or the fused backward itself). Bitwise the same
 * values: the same kernel on the same inputs. In a GroupNorm ResNet this drops
 * a quarter of the activations kept for backward (bench/RESULTS.md §10). */
static void plan_recompute(dt_net *n, int g, int r)
{
    if (r == n->nnodes - 1)
        return;
    int at = g;
    for (int k = 1; k < n->nnodes; k++) {
        const dt_node *d = &n->nodes[k];
        if (d->in0 != r && d->in1 != r)
            continue;
        if (d->op == OP_FLATTEN) // a view: its readers are not followed here
            return;
        if (bwd_reads_input(d->op) && k > at)
            at = k;
    }
    n->nodes[g].recompute_at = at;
}

/* GroupNorm fused with what follows it in a residual block: a GroupNorm whose
 * only consumer is an in-place ReLU computes the ReLU too (FUSE_RELU); one
 * whose only consumer is an add of an operand computed before it, followed by
 * an in-place ReLU, computes relu(gn(x) + skip) straight into the ReLU's
 * buffer (FUSE_ADD_RELU). The absorbed nodes keep their place in the graph
 * (and so the parameter layout) but do no work of their own; the fused
 * backward masks the gradient by the ReLU's output and adds it into the skip
 * operand's gradient in the same pass. */
void net_plan_fusion(dt_net *n)
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
            plan_recompute(n, g, c);
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
int net_grad_unused(const dt_net *n, int j)
{
    const dt_node *d = &n->nodes[j];
    return (d->op == OP_GROUPNORM && d->fuse != FUSE_NONE) ||
           (d->op == OP_ADD && d->fuse == FUSE_ABSORBED);
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

/* A ReLU (not fused) whose input's gradient becomes live at its own backward
 * masks its output's gradient in place and hands the buffer on: the input's
 * gradient continues the output gradient's buffer. */
static int relu_grad_in_place(const dt_net *n, int r, int j)
{
    const dt_node *d = &n->nodes[r];
    return d->op == OP_RELU && d->fuse == FUSE_NONE && d->in0 == j && r < n->nnodes - 1 &&
           net_base_of(n, j) == j;
}

/* A conv at backward step i that adds into an input gradient already live
 * (not its first consumer), with a kernel that cannot add by itself: it needs
 * a fresh buffer for that step. */
static int needs_dx_tmp(const dt_net *n, int i, int B)
{
    const dt_node *d = &n->nodes[i];
    if (d->op != OP_CONV2D || d->in0 <= 0)
        return 0;
    const int b = net_base_of(n, d->in0);
    if (b <= 0 || net_grad_unused(n, b) || n->first_use[b] == i)
        return 0;
    const dt_conv_shape s = conv_shape(n, d, B);
    return !n->be->conv2d_dx_accumulates(&s);
}

/* The buffers of a batch as spans of one arena: each is live over an
 * interval of the step clock, forward node i at step i and backward node i
 * at step 2N - i, and spans live at the same step get disjoint bytes. */
typedef struct span {
    size_t size, off; /* floats */
    int t0, t1;       /* live from step t0 to step t1, both included */
} span;

typedef struct spans {
    span *s;
    int n;
} spans;

static int span_add(spans *a, size_t floats, int t0, int t1)
{
    a->s = dt_realloc(a->s, (size_t)(a->n + 1) * sizeof *a->s);
    // 16 floats: every buffer starts on a 64-byte line, as the vector kernels like
    a->s[a->n] = (span){ (floats + 15) / 16 * 16, 0, t0, t1 };
    return a->n++;
}

static const spans *sort_ctx;
static int by_size(const void *x, const void *y)
{
    const span *a = &sort_ctx->s[*(const int *)x], *b = &sort_ctx->s[*(const int *)y];
    if (a->size != b->size)
        return a->size < b->size ? 1 : -1;
    return a->t0 != b->t0 ? a->t0 - b->t0 : *(const int *)x - *(const int *)y;
}

/* by the bytes a span holds over its life (size times steps), then by size */
static int by_area(const void *x, const void *y)
{
    const span *a = &sort_ctx->s[*(const int *)x], *b = &sort_ctx->s[*(const int *)y];
    const double ea = (double)a->size * (a->t1 - a->t0 + 1);
    const double eb = (double)b->size * (b->t1 - b->t0 + 1);
    if (ea != eb)
        return ea < eb ? 1 : -1;
    return by_size(x, y);
}

/* by when a span starts, the larger first among those starting together */
static int by_start(const void *x, const void *y)
{
    const span *a = &sort_ctx->s[*(const int *)x], *b = &sort_ctx->s[*(const int *)y];
    return a->t0 != b->t0 ? a->t0 - b->t0 : by_size(x, y);
}

/* by how long a span lives, then by size */
static int by_life(const void *x, const void *y)
{
    const span *a = &sort_ctx->s[*(const int *)x], *b = &sort_ctx->s[*(const int *)y];
    const int la = a->t1 - a->t0, lb = b->t1 - b->t0;
    return la != lb ? lb - la : by_size(x, y);
}

/* by when a span ends, the latest first */
static int by_end(const void *x, const void *y)
{
    const span *a = &sort_ctx->s[*(const int *)x], *b = &sort_ctx->s[*(const int *)y];
    return a->t1 != b->t1 ? b->t1 - a->t1 : by_size(x, y);
}

static int by_off(const void *x, const void *y)
{
    const span *a = &sort_ctx->s[*(const int *)x], *b = &sort_ctx->s[*(const int *)y];
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Offsets by the greedy rule of static memory planners: each span in the
 * given order at the lowest offset clear of the placed spans it meets in
 * time. Returns the arena's size in floats. */
static size_t spans_place(spans *a, int (*order_by)(const void *, const void *), int *order,
                          int *met)
{
    size_t total = 0;
    for (int k = 0; k < a->n; k++)
        order[k] = k;
    sort_ctx = a;
    qsort(order, (size_t)a->n, sizeof *order, order_by);
    for (int k = 0; k < a->n; k++) {
        span *s = &a->s[order[k]];
        int m = 0;
        for (int q = 0; q < k; q++) {
            const span *o = &a->s[order[q]];
            if (o->t0 <= s->t1 && s->t0 <= o->t1)
                met[m++] = order[q];
        }
        qsort(met, (size_t)m, sizeof *met, by_off);
        size_t off = 0;
        for (int q = 0; q < m; q++) {
            const span *o = &a->s[met[q]];
            if (o->off >= off + s->size)
                break; // the gap before o fits
            if (o->off + o->size > off)
                off = o->off + o->size;
        }
        s->off = off;
        if (off + s->size > total)
            total = off + s->size;
    }
    return total;
}

/* The smallest of the greedy placements in five orders: largest first (the
 * usual rule), most bytes times steps first, earliest first, longest-lived
 * first, latest-ending first. None is best for every plan: on mnist_cnn at
 * batch 32 with bf16 scratch spans, largest first leaves 1.2 MB above the
 * most that is ever live at once, where the other orders reach it.
 * Returns the arena's size in floats. */
static size_t spans_pack(spans *a)
{
    static int (*const orders[])(const void *, const void *) = { by_size, by_area, by_start, by_life, by_end };
    int *order = dt_malloc((size_t)(a->n ? a->n : 1) * sizeof *order);
    int *met = dt_malloc((size_t)(a->n ? a->n : 1) * sizeof *met);
    size_t *best = dt_malloc((size_t)(a->n ? a->n : 1) * sizeof *best);
    size_t total = 0;
    for (size_t r = 0; r < sizeof orders / sizeof *orders; r++) {
        const size_t t = spans_place(a, orders[r], order, met);
        if (r == 0 || t < total) {
            total = t;
            for (int k = 0; k < a->n; k++)
                best[k] = a->s[k].off;
        }
    }
    for (int k = 0; k < a->n; k++)
        a->s[k].off = best[k];
    free(order);
    free(met);
    free(best);
    return total;
}

/* Activations the backward may read from a bf16 copy (backend.h:
 * to_bf16, a bf16 backend): per activation owner, its latest backward
 * reader in node order (the first to run), whether every backward reader
 * takes no more than bf16 of it (a conv whose weight gradient reads x
 * rounded, a bf16 linear layer's x, a ReLU's or a fused GroupNorm's mask),
 * and whether one of them needs it widened back to floats (all but an
 * unfused ReLU, which reads the bf16 copy itself). A GroupNorm's input and
 * a sigmoid's output are read as floats: not eligible. */
static void bf16_readers(const dt_net *n, int B, int *maxread, char *bad, char *widen)
{
    const dt_backend *be = n->be;
    for (int i = 1; i < n->nnodes; i++) {
        const dt_node *d = &n->nodes[i];
        if (d->op == OP_FLATTEN || d->fuse == FUSE_ABSORBED)
            continue;
        int o[2] = { 0, 0 }, ok[2] = { 0, 0 }, wid[2] = { 1, 1 };
        if (bwd_reads_input(d->op) && d->in0 > 0) {
            o[0] = act_owner(n, d->in0);
            if (d->op == OP_CONV2D) {
                const dt_conv_shape cs = conv_shape(n, d, B);
                ok[0] = be->conv2d_reads_x_bf16 && be->conv2d_reads_x_bf16(&cs);
            } else if (d->op == OP_LINEAR) {
                ok[0] = be->linear_reads_x_bf16 &&
                        be->linear_reads_x_bf16((int)node_size(&n->nodes[d->in0]), d->c);
            }
        }
        if (d->op == OP_RELU) {
            o[1] = act_owner(n, i);
            ok[1] = be->relu_backward_bf16 != NULL;
            wid[1] = 0;
        } else if (d->op == OP_SIGMOID) {
            o[1] = act_owner(n, i);
        } else if (d->op == OP_GROUPNORM && d->fuse != FUSE_NONE) {
            o[1] = act_owner(n, d->fuse_out);
            ok[1] = 1;
        }
        for (int k = 0; k < 2; k++) {
            if (o[k] <= 0)
                continue;
            if (i > maxread[o[k]])
                maxread[o[k]] = i;
            bad[o[k]] |= !ok[k];
            widen[o[k]] |= wid[k];
        }
    }
}

/* The ReLU that runs in place on activation j, which then writes j's bf16
 * copy as it writes j (backend.h: relu_forward_bf16); 0: none */
static int relu_writer(const dt_net *n, int j)
{
    for (int r = j + 1; r < n->nnodes; r++)
        if (n->nodes[r].in0 == j && n->nodes[r].fuse == FUSE_NONE && relu_in_place(n, r))
            return n->be->relu_forward_bf16 ? r : 0;
    return 0;
}

/* Keep activation j in bf16 between its last forward reader and its first
 * backward one, in a of the spans: its float span ends at the former (tf),
 * a bf16 span (half the floats) runs from where the copy is made (ts: tf,
 * or the ReLU that writes j) to the latter, and where a reader needs
 * floats a float span from there to its last backward reader holds it
 * widened. Returns the bf16 span; *rec the widened one (-1: none). */
static int keep_bf16(spans *a, int aspan, size_t sz, int ts, int tf, int tb_first, int tb_last,
                     int widen, int *rec)
{
    a->s[aspan].t1 = tf;
    const int k = span_add(a, (sz + 1) / 2, ts, widen ? tb_first : tb_last);
    *rec = widen ? span_add(a, sz, tb_first, tb_last) : -1;
    return k;
}

/* What net_plan_buffers knows of each node j (arrays of N), and the spans
 * it places in the arena. */
typedef struct buffer_plan {
    int N, last, end;       /* nodes; the logits' node; END: backward step t is END - t */
    int logits;             /* the node owning the logits' buffer */
    int *born;              /* the step that writes activation j (a fused GroupNorm
                             * writes its ReLU's buffer early) */
    int *fwd_last;          /* the last forward step that reads j, 0: none */
    int *bwd_first;         /* the earliest backward step that reads j, 0: none */
    int *act_span;          /* j's activation, -1: none (a view or written in place) */
    int *rec_span;          /* j recomputed before backward, or kept widened from bf16 */
    int *grad_span;         /* j's gradient */
    int *dx_span;           /* scratch for node j's dx when it cannot add in place */
    int *work_fwd_span, *work_bwd_span; /* node j's kernel scratch, per pass */
    int *bf16_span;         /* j kept as a bf16 copy between forward and backward */
    int *max_bwd_read;      /* the last backward reader of j's bf16 copy */
    char *bf16_bad, *bf16_widen; /* a reader needs j in floats; a reader widens it */
    char *cols_kept;        /* conv j's backward reads its forward's columns (handed to the net) */
    spans a;
} buffer_plan;

static int *plan_ints(int N, int fill)
{
    int *v = dt_malloc((size_t)N * sizeof *v);
    for (int j = 0; j < N; j++)
        v[j] = fill;
    return v;
}

static void plan_init(buffer_plan *p, const dt_net *n)
{
    const int N = n->nnodes;
    memset(p, 0, sizeof *p);
    p->N = N;
    p->last = N - 1;
    p->end = 2 * N;
    p->born = dt_calloc((size_t)N, sizeof *p->born);
    for (int j = 0; j < N; j++)
        p->born[j] = j;
    p->fwd_last = dt_calloc((size_t)N, sizeof *p->fwd_last);
    p->bwd_first = dt_calloc((size_t)N, sizeof *p->bwd_first);
    p->act_span = plan_ints(N, -1);
    p->rec_span = plan_ints(N, -1);
    p->grad_span = plan_ints(N, -1);
    p->dx_span = plan_ints(N, -1);
    p->work_fwd_span = plan_ints(N, -1);
    p->work_bwd_span = plan_ints(N, -1);
    p->bf16_span = plan_ints(N, -1);
    p->max_bwd_read = dt_calloc((size_t)N, sizeof *p->max_bwd_read);
    p->bf16_bad = dt_calloc((size_t)N, 1);
    p->cols_kept = dt_calloc((size_t)N, 1);
    p->bf16_widen = dt_calloc((size_t)N, 1);
    p->a = (spans){ NULL, 0 };
}

static void plan_free(buffer_plan *p)
{
    free(p->born);
    free(p->fwd_last);
    free(p->bwd_first);
    free(p->act_span);
    free(p->rec_span);
    free(p->grad_span);
    free(p->dx_span);
    free(p->work_fwd_span);
    free(p->work_bwd_span);
    free(p->bf16_span);
    free(p->max_bwd_read);
    free(p->bf16_bad);
    free(p->bf16_widen);
    free(p->a.s);
}

/* When each activation is written, last read forward, first read backward. */
static void plan_lifetimes(buffer_plan *p, const dt_net *n)
{
    for (int i = 1; i < p->N; i++) {
        const dt_node *d = &n->nodes[i];
        for (int k = 0; k < 2; k++) { // forward readers
            const int in = k ? d->in1 : d->in0;
            if (in > 0 && i > p->fwd_last[act_owner(n, in)])
                p->fwd_last[act_owner(n, in)] = i;
        }
        if (d->op == OP_GROUPNORM && d->fuse != FUSE_NONE) {
            const int o = act_owner(n, d->fuse_out);
            if (i < p->born[o])
                p->born[o] = i;
            if (d->fuse == FUSE_ADD_RELU && i > p->fwd_last[act_owner(n, d->fuse_skip)])
                p->fwd_last[act_owner(n, d->fuse_skip)] = i;
        }
        if (d->op == OP_FLATTEN || d->fuse == FUSE_ABSORBED) // no backward of its own
            continue;
        int reads[2] = { 0, 0 }; // backward readers, in the order net_backward reads
        if (bwd_reads_input(d->op) && d->in0 > 0)
            reads[0] = act_owner(n, d->in0);
        if (bwd_reads_output(d->op))
            reads[1] = act_owner(n, i);
        if (d->op == OP_GROUPNORM && d->fuse != FUSE_NONE)
            reads[1] = act_owner(n, d->fuse_out);
        for (int k = 0; k < 2; k++)
            if (reads[k] > 0 && (p->bwd_first[reads[k]] == 0 || i < p->bwd_first[reads[k]]))
                p->bwd_first[reads[k]] = i;
    }
    p->logits = act_owner(n, p->last);
}

/* The activations' spans (and the recomputed ones'). */
static void plan_activations(buffer_plan *p, const dt_net *n, int B)
{
    const int END = p->end;
    for (int j = 1; j < p->N; j++) {
        const dt_node *d = &n->nodes[j];
        if (act_owner(n, j) != j || (d->op == OP_GROUPNORM && d->fuse == FUSE_ADD_RELU))
            continue; // a view, an in-place ReLU, or a GroupNorm writing its ReLU's buffer
        const size_t sz = (size_t)B * node_size(d);
        int t1 = p->fwd_last[j] > 0 ? p->fwd_last[j] : j;
        if (j == p->logits)
            t1 = END;
        else if (d->recompute_at)
            p->rec_span[j] = span_add(&p->a, sz, END - d->recompute_at, END - j);
        else if (p->bwd_first[j])
            t1 = END - p->bwd_first[j];
        p->act_span[j] = span_add(&p->a, sz, p->born[j], t1);
    }
}

/* The gradients' spans, from each one's first consumer's backward (n's
 * first_use) to its own; a ReLU's input gradient continues its output's. */
static void plan_gradients(buffer_plan *p, dt_net *n, int B)
{
    const int N = p->N, last = p->last, END = p->end;
    n->first_use = dt_calloc((size_t)N, sizeof *n->first_use);
    n->unwritten = dt_calloc((size_t)N, sizeof *n->unwritten);
    for (int i = 1; i < N; i++) {
        const dt_node *d = &n->nodes[i];
        if (d->op == OP_FLATTEN)
            continue;
        int in[2] = { net_base_of(n, d->in0), d->in1 > 0 ? net_base_of(n, d->in1) : 0 };
        for (int k = 0; k < 2; k++)
            if (in[k] > 0 && i > n->first_use[in[k]])
                n->first_use[in[k]] = i;
    }
    n->first_use[last] = N; /* dlogits: written by the forward pass */
    for (int j = last; j >= 1; j--) { // a ReLU before its input: the in-place hand-on
        const dt_node *d = &n->nodes[j];
        if (d->op == OP_FLATTEN || n->first_use[j] == 0 || net_grad_unused(n, j))
            continue;
        // dies after its own backward; an absorbed ReLU's gradient is read by the
        // fused GroupNorm's backward, later in backward order
        const int until = END - (d->fuse == FUSE_ABSORBED ? d->fuse_by : j);
        const int r = n->first_use[j];
        if (r < N && p->grad_span[r] >= 0 && relu_grad_in_place(n, r, j)) {
            p->grad_span[j] = p->grad_span[r];
            p->a.s[p->grad_span[j]].t1 = until;
        } else {
            p->grad_span[j] = span_add(&p->a, (size_t)B * node_size(d),
                                       j == last ? last : END - r, until);
        }
    }
}

/* Scratch for one step each: dx that cannot be added in place, and the
 * linear and convolution kernels' workspaces per pass. */
static void plan_scratch(buffer_plan *p, const dt_net *n, int B)
{
    const int N = p->N, last = p->last, END = p->end;
    for (int i = 1; i < last; i++)
        if (needs_dx_tmp(n, i, B))
            p->dx_span[i] = span_add(&p->a, (size_t)B * node_size(&n->nodes[n->nodes[i].in0]),
                                     END - i, END - i);
    for (int i = 1; i < N; i++) {
        const dt_node *d = &n->nodes[i];
        if (d->op == OP_LINEAR && n->be->linear_workspace) {
            const size_t w = n->be->linear_workspace(B, (int)node_size(&n->nodes[d->in0]), d->c);
            if (w) {
                p->work_fwd_span[i] = span_add(&p->a, w, i, i);
                p->work_bwd_span[i] = span_add(&p->a, w, END - i, END - i);
            }
            continue;
        }
        if (d->op != OP_CONV2D)
            continue;
        const dt_conv_shape cs = conv_shape(n, d, B);
        // net_backward passes dx exactly when the input's gradient has a buffer
        const int has_dx = d->in0 > 0 && p->grad_span[net_base_of(n, d->in0)] >= 0;
        size_t wf = n->be->conv2d_workspace(&cs), wb = wf;
        if (n->be->conv2d_pass_workspace) {
            wf = n->be->conv2d_pass_workspace(&cs, DT_CONV_WORK_FORWARD);
            wb = n->be->conv2d_pass_workspace(&cs, has_dx ? DT_CONV_WORK_BACKWARD
                                                          : DT_CONV_WORK_BACKWARD_NO_DX);
        }
        if (n->be->conv2d_keep_cols && n->be->conv2d_backward_kept &&
            n->be->conv2d_keep_cols(&cs)) {
            // the backward reads the forward's columns: one workspace for both
            p->work_fwd_span[i] = p->work_bwd_span[i] = span_add(&p->a, wf > wb ? wf : wb, i, END - i);
            p->cols_kept[i] = 1;
            continue;
        }
        if (wf)
            p->work_fwd_span[i] = span_add(&p->a, wf, i, i);
        if (wb)
            p->work_bwd_span[i] = span_add(&p->a, wb, END - i, END - i);
    }
}

/* On a bf16 backend: each activation whose backward readers take bf16 of
 * it, largest first, kept as a bf16 copy where that shrinks the packed
 * arena. Returns the arena's floats. */
static size_t plan_keep_bf16(buffer_plan *p, const dt_net *n, int B, size_t total)
{
    const int N = p->N, END = p->end;
    bf16_readers(n, B, p->max_bwd_read, p->bf16_bad, p->bf16_widen);
    int *order = dt_malloc((size_t)N * sizeof *order), m = 0;
    for (int j = 1; j < N; j++)
        if (p->act_span[j] >= 0 && p->rec_span[j] < 0 && j != p->logits &&
            p->bwd_first[j] > 0 && !p->bf16_bad[j] && p->fwd_last[j] > 0)
            order[m++] = j;
    for (int q = 1; q < m; q++) // largest first, then in node order
        for (int r = q; r > 0 && node_size(&n->nodes[order[r]]) >
                                     node_size(&n->nodes[order[r - 1]]); r--) {
            const int t = order[r];
            order[r] = order[r - 1];
            order[r - 1] = t;
        }
    for (int q = 0; q < m; q++) {
        const int j = order[q];
        spans trial = { dt_malloc((size_t)(p->a.n + 2) * sizeof *p->a.s), p->a.n };
        memcpy(trial.s, p->a.s, (size_t)p->a.n * sizeof *p->a.s);
        int rec;
        const int r = relu_writer(n, j);
        const int k = keep_bf16(&trial, p->act_span[j], (size_t)B * node_size(&n->nodes[j]),
                                r ? r : p->fwd_last[j], p->fwd_last[j], END - p->max_bwd_read[j],
                                END - p->bwd_first[j], p->bf16_widen[j], &rec);
        const size_t t = spans_pack(&trial);
        if (t < total) {
            free(p->a.s);
            p->a = trial;
            total = t;
            p->bf16_span[j] = k;
            p->rec_span[j] = rec;
        } else {
            free(trial.s);
        }
    }
    free(order);
    return spans_pack(&p->a);
}

/* One arena of total floats, and every node's pointers into it. */
static void plan_assign(const buffer_plan *p, dt_net *n, size_t total)
{
    const int N = p->N;
    n->arena = total ? n->be->mem_alloc(total * sizeof(float)) : NULL; // one device allocation on a GPU
    n->arena_n = total;
    n->act_fwd = dt_calloc((size_t)N, sizeof *n->act_fwd);
    n->act_rec = dt_calloc((size_t)N, sizeof *n->act_rec);
    n->dx_tmp = dt_calloc((size_t)N, sizeof *n->dx_tmp);
    n->work_fwd = dt_calloc((size_t)N, sizeof *n->work_fwd);
    n->work_bwd = dt_calloc((size_t)N, sizeof *n->work_bwd);
    n->cols_kept = p->cols_kept;
    n->owner = dt_calloc((size_t)N, sizeof *n->owner);
    n->stash = dt_calloc((size_t)N, sizeof *n->stash);
    n->stash_at = dt_calloc((size_t)N, sizeof *n->stash_at);
    n->widen_at = dt_calloc((size_t)N, sizeof *n->widen_at);
    n->mask16 = dt_calloc((size_t)N, sizeof *n->mask16);
    const span *s = p->a.s;
    for (int j = 1; j < N; j++) {
        n->owner[j] = act_owner(n, j);
        if (p->act_span[j] >= 0)
            n->act[j] = n->arena + s[p->act_span[j]].off;
        if (p->rec_span[j] >= 0) {
            n->act_fwd[j] = n->act[j];
            n->act_rec[j] = n->arena + s[p->rec_span[j]].off;
        }
        if (p->bf16_span[j] >= 0) {
            n->stash[j] = (uint16_t *)(n->arena + s[p->bf16_span[j]].off);
            n->stash_at[j] = relu_writer(n, j) ? relu_writer(n, j) : p->fwd_last[j];
            n->widen_at[j] = p->rec_span[j] >= 0 ? p->max_bwd_read[j] : 0;
        }
        if (p->dx_span[j] >= 0)
            n->dx_tmp[j] = n->arena + s[p->dx_span[j]].off;
        if (p->work_fwd_span[j] >= 0)
            n->work_fwd[j] = n->arena + s[p->work_fwd_span[j]].off;
        if (p->work_bwd_span[j] >= 0)
            n->work_bwd[j] = n->arena + s[p->work_bwd_span[j]].off;
    }
    for (int j = 1; j < N; j++) {
        n->act[j] = n->act[act_owner(n, j)];
        if (n->nodes[j].op == OP_RELU && n->stash[act_owner(n, j)] &&
            !p->bf16_widen[act_owner(n, j)])
            n->mask16[j] = n->stash[act_owner(n, j)];
        const int b = net_base_of(n, j);
        n->dact[j] = p->grad_span[b] >= 0 ? n->arena + s[p->grad_span[b]].off : NULL;
    }
}

/* Activations: an output lives from the step that writes it (a fused
 * GroupNorm writes its ReLU's buffer) to its last reader: the last consumer's
 * forward for outputs no backward reads, the earliest backward step that
 * reads it otherwise; the logits live to the end. relu(gn(x)) outputs that
 * backward recomputes have two spans: forward, and from the recomputation to
 * the fused GroupNorm's backward. Gradients live from their first consumer's
 * backward (dlogits: written by the forward's loss) to their own backward; a
 * ReLU's input gradient continues its output's (masked in place); a conv that
 * cannot add into its input's gradient gets a span for its own step, and
 * a conv or linear layer whose kernel needs scratch (conv2d_workspace:
 * im2col columns, the bf16 copies of x and dy; linear_workspace: the bf16
 * copies of x, W and dy) one for its forward step and one for its backward
 * step: placed in what is free at that step, rather than one
 * buffer the size of the largest beside the arena; a conv whose backward
 * reuses the forward's columns (conv2d_keep_cols, the CUDA backend where
 * they fit) one span from its forward to its backward.
 *
 * On a bf16 backend an activation whose backward readers take no more than
 * bf16 of it (bf16_readers) is kept as a bf16 copy between its forward and
 * its backward (keep_bf16) where that makes the arena smaller, tried
 * largest first: mnist_cnn's conv2 ReLU output, read in the backward only as
 * the ReLU's mask; resnet20_gn's stage outputs read by the stride-2 convs,
 * whose weight gradients round x anyway, and by a fused GroupNorm's mask.
 * The kernels see the same values as from the float buffer (rounding a
 * bf16 value again gives it back), the masks the same signs except for
 * ReLU outputs below 2^-134, which round to zero. */
void net_plan_buffers(dt_net *n, int B)
{
    buffer_plan p;
    plan_init(&p, n);
    plan_lifetimes(&p, n);
    plan_activations(&p, n, B);
    plan_gradients(&p, n, B);
    plan_scratch(&p, n, B);
    size_t total = spans_pack(&p.a);
    if (n->be->to_bf16 && !n->no_keep_bf16)
        total = plan_keep_bf16(&p, n, B, total);
    plan_assign(&p, n, total);
    plan_free(&p);
}
