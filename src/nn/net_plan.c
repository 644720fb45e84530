/* The network engine's plans, made once per net (layouts, fusion: net_finish)
 * and per batch size (buffers: net_reserve): which layout each activation
 * has, which layers run fused, and which buffers activations and their
 * gradients share. The engine itself (net.c) only follows them. */
#include "nn/net_plan.h"

#include <stdlib.h>

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
 * read it (dropout, flatten, linear; an add of mixed layouts) the producing
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
                if (!reads_blocked(d->op) || (keeps_layout(d->op) && !d->blk)) {
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

/* Activation gradients live only during backward: dact[j] from the first
 * consumer of j that backward reaches (the highest-numbered one) until j's
 * own backward. Nodes whose intervals do not overlap share one buffer (a
 * greedy interval colouring in backward order), which roughly halves the
 * memory of a training batch; a buffer is zeroed when it becomes live. */
void net_plan_gradients(dt_net *n, int B)
{
    const int N = n->nnodes, last = N - 1;
    n->first_use = dt_calloc((size_t)N, sizeof *n->first_use);
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
    // slots first, buffers after: a slot grows to its largest tenant, so the
    // small gradients of the last stage, freed before the first stage's larger
    // ones become live, do not each keep a buffer of their own
    int *slot = dt_malloc((size_t)N * sizeof *slot); /* pool slot of each node, -1: none */
    size_t *cap = NULL;
    int *busy = NULL, nslots = 0;
    for (int j = 0; j < N; j++)
        slot[j] = -1;
    for (int time = N; time >= 1; time--) {
        for (int j = 1; j < N; j++) { /* buffers that become live now */
            if (n->nodes[j].op == OP_FLATTEN || n->first_use[j] != time || net_grad_unused(n, j))
                continue;
            size_t need = (size_t)B * node_size(&n->nodes[j]);
            int pick = -1, grow = -1; // the smallest free slot that fits, else the largest free
            for (int p = 0; p < nslots; p++) {
                if (busy[p])
                    continue;
                if (cap[p] >= need && (pick < 0 || cap[p] < cap[pick]))
                    pick = p;
                if (grow < 0 || cap[p] > cap[grow])
                    grow = p;
            }
            if (pick < 0 && grow >= 0) {
                pick = grow;
                cap[pick] = need;
            }
            if (pick < 0) {
                cap = dt_realloc(cap, (size_t)(nslots + 1) * sizeof *cap);
                busy = dt_realloc(busy, (size_t)(nslots + 1) * sizeof *busy);
                cap[nslots] = need;
                pick = nslots++;
            }
            // dies after its own backward; an absorbed ReLU's gradient is read by the
            // fused GroupNorm's backward, later in backward order
            busy[pick] = (n->nodes[j].fuse == FUSE_ABSORBED ? n->nodes[j].fuse_by : j) + 1;
            slot[j] = pick;
        }
        if (time < N && n->nodes[time].op != OP_FLATTEN) /* dact[time] dies after its backward */
            for (int p = 0; p < nslots; p++)
                if (busy[p] == time + 1)
                    busy[p] = 0;
    }
    n->npool = nslots;
    n->pool = dt_calloc((size_t)(nslots ? nslots : 1), sizeof *n->pool);
    for (int p = 0; p < nslots; p++)
        n->pool[p] = dt_falloc(cap[p]);
    for (int j = 1; j < N; j++) {
        const int b = net_base_of(n, j);
        n->dact[j] = slot[b] >= 0 ? n->pool[slot[b]] : NULL;
    }
    free(slot);
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
/* Greedy interval colouring into slots that grow to their largest tenant:
 * the smallest free slot that fits, else the largest free one, else a new one. */
typedef struct slots {
    int n;
    size_t *cap;
    int *busy;  /* forward: last reader's index; backward: owner's index + 1; 0: free */
} slots;

static int slot_take(slots *sl, size_t need, int (*is_free)(const slots *, int, int), int now)
{
    int pick = -1, grow = -1;
    for (int p = 0; p < sl->n; p++) {
        if (!is_free(sl, p, now))
            continue;
        if (sl->cap[p] >= need && (pick < 0 || sl->cap[p] < sl->cap[pick]))
            pick = p;
        if (grow < 0 || sl->cap[p] > sl->cap[grow])
            grow = p;
    }
    if (pick < 0 && grow >= 0) {
        pick = grow;
        sl->cap[pick] = need;
    }
    if (pick < 0) {
        sl->cap = dt_realloc(sl->cap, (size_t)(sl->n + 1) * sizeof *sl->cap);
        sl->busy = dt_realloc(sl->busy, (size_t)(sl->n + 1) * sizeof *sl->busy);
        sl->cap[sl->n] = need;
        sl->busy[sl->n] = 0;
        pick = sl->n++;
    }
    return pick;
}

/* forward: a slot is free for node j once its last reader ran (index < j) */
static int free_fwd(const slots *sl, int p, int j) { return sl->busy[p] < j; }
/* backward: free when released */
static int free_bwd(const slots *sl, int p, int t) { (void)t; return sl->busy[p] == 0; }

/* Forward activations: an output that no backward reads (a GroupNorm feeding
 * only a residual add, a pooling feeding only dropout) or that backward
 * recomputes is needed only until its last consumer's forward, so such
 * outputs share a few buffers (forward slots). The recomputed outputs get
 * backward slots, live from their recomputation to the fused GroupNorm's
 * backward; forward and backward slots are the same memory. The others, and
 * the logits, get their own buffer. */
void net_plan_activations(dt_net *n, int B)
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
    for (int j = 1; j < N; j++)
        if (n->nodes[j].recompute_at)
            keep[j] = 0;
    slots fw = { 0, NULL, NULL }, bw = { 0, NULL, NULL };
    int *fslot = dt_malloc((size_t)N * sizeof *fslot), *bslot = dt_malloc((size_t)N * sizeof *bslot);
    n->act_own = dt_calloc((size_t)N, 1);
    for (int j = 0; j < N; j++)
        fslot[j] = bslot[j] = -1;
    for (int j = 1; j < N; j++) {
        if (act_owner(n, j) != j || n->nodes[j].fuse == FUSE_ADD_RELU) // the latter writes
            continue;                                                  // into its ReLU's buffer
        const size_t need = (size_t)B * node_size(&n->nodes[j]);
        if (keep[j] || last[j] == 0) {
            n->act[j] = dt_falloc(need);
            n->act_own[j] = 1;
            continue;
        }
        fslot[j] = slot_take(&fw, need, free_fwd, j);
        fw.busy[fslot[j]] = last[j];
    }
    for (int t = N - 1; t >= 1; t--) { // backward order
        for (int g = 1; g < N; g++)
            if (n->nodes[g].recompute_at == t) {
                bslot[g] = slot_take(&bw, (size_t)B * node_size(&n->nodes[g]), free_bwd, t);
                bw.busy[bslot[g]] = g + 1;
            }
        for (int p = 0; p < bw.n; p++) // released after node t's backward
            if (bw.busy[p] == t + 1)
                bw.busy[p] = 0;
    }
    n->nfpool = fw.n > bw.n ? fw.n : bw.n;
    n->fpool = dt_calloc((size_t)(n->nfpool ? n->nfpool : 1), sizeof *n->fpool);
    for (int p = 0; p < n->nfpool; p++) {
        const size_t a = p < fw.n ? fw.cap[p] : 0, b = p < bw.n ? bw.cap[p] : 0;
        n->fpool[p] = dt_falloc(a > b ? a : b);
    }
    n->act_fwd = dt_calloc((size_t)N, sizeof *n->act_fwd);
    n->act_rec = dt_calloc((size_t)N, sizeof *n->act_rec);
    for (int j = 1; j < N; j++) {
        if (fslot[j] >= 0)
            n->act[j] = n->fpool[fslot[j]];
        if (bslot[j] >= 0) {
            n->act_fwd[j] = n->act[j];
            n->act_rec[j] = n->fpool[bslot[j]];
        }
    }
    for (int j = 1; j < N; j++)
        n->act[j] = n->act[act_owner(n, j)];
    free(keep);
    free(last);
    free(fslot);
    free(bslot);
    free(fw.cap);
    free(fw.busy);
    free(bw.cap);
    free(bw.busy);
}

