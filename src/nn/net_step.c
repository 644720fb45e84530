/* A training step of the layer DAG queued as one piece: forward, loss rows
 * and backward with nothing read back between them, then the loss read
 * once. On a backend that records its work (CUDA graphs) the piece is
 * recorded the second time a step with the same pointers and batch comes,
 * and replayed from then on: one launch instead of a hundred.
 *
 * What changes from step to step must not be baked into the record: the
 * dropout keys are read by the kernels from backend memory (keys, written
 * before each launch), the batch's pointers are part of what a record is
 * looked up by (the engine's two batch buffers: two records), and a record
 * made before the net's buffers moved (net_reserve's reserve_gen) is made
 * again (backend/step_graphs.h). */
#include "nn/net.h"

int net_use_graphs(dt_net *n, int on)
{
    const int can = step_graphs_supported(n->be);
    n->step.graphs = on && can;
    return can;
}

/* the keys and loss rows in backend memory, for batches of up to n->B */
static void step_buffers(dt_net *n)
{
    dt_net_step *s = &n->step;
    const dt_backend *be = n->be;
    if (!s->keys) {
        s->keys = be->mem_alloc((size_t)n->nnodes * sizeof *s->keys);
        s->keys_host = be->host_alloc((size_t)n->nnodes * sizeof *s->keys_host);
    }
    if (s->rows_B < n->B) {
        if (s->rows)
            be->mem_free(s->rows);
        s->rows = be->mem_alloc(DT_XENT_ROWS_BYTES(n->B));
        s->rows_B = n->B;
        n->reserve_gen++; /* records name the old rows */
    }
}

/* whether a training forward draws dropout masks */
static int dropout_active(const dt_net *n)
{
    for (int i = 1; i < n->nnodes && !n->no_dropout; i++)
        if (n->nodes[i].op == OP_DROPOUT)
            return 1;
    return 0;
}

/* The kernels of one step, as net_forward then net_backward queue them. */
typedef struct {
    dt_net *n;
    const float *params, *x;
    const int32_t *y;
    int B;
    float *grads;
} step_args;

static void step_kernels(void *ctx)
{
    const step_args *a = ctx;
    dt_net *n = a->n;
    net_forward_kernels(n, a->params, a->x, a->B, 1, 0, n->step.keys);
    n->be->softmax_xent_rows(a->B, n->classes, n->act[n->nnodes - 1], a->y, n->dlogits,
                             n->step.rows);
    net_backward(n, a->params, a->grads);
}

void net_train_queue(dt_net *n, const float *params, const float *x, const int32_t *y, int B,
                     uint64_t dropout_key, float *grads)
{
    const dt_backend *be = n->be;
    dt_net_step *s = &n->step;
    if (!n->act || B > n->B)
        net_reserve(n, B);
    step_buffers(n);
    if (dropout_active(n)) { /* the keys the dropout kernels read: a copy that waits */
        for (int i = 0; i < n->nnodes; i++)
            s->keys_host[i] = net_dropout_key(dropout_key, i);
        be->to_backend(s->keys, s->keys_host, (size_t)n->nnodes * sizeof *s->keys);
    }
    s->B = B;
    step_args a = { n, params, x, y, B, grads };
    if (!s->graphs) {
        step_kernels(&a);
        return;
    }
    const void *key[DT_STEP_GRAPH_PTRS] = { params, x, y, grads, NULL };
    if (step_graphs_queue(&s->rec, be, key, B, n->reserve_gen, step_kernels, &a)) {
        /* the host's view of the buffers, as the recorded calls left it */
        net_bind_input(n, x);
        n->fwd_train = 1;
        n->last_B = B;
    }
}

double net_train_result(dt_net *n, int *correct)
{
    int hits = 0;
    const double loss = n->be->softmax_xent_sum(n->step.B, n->classes, n->step.rows, &hits);
    if (correct)
        *correct = hits;
    return loss;
}
