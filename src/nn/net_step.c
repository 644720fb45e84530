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
 * made before the net's or the backend's buffers moved (net_reserve,
 * graph_epoch) is made again. */
#include "nn/net.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

int net_use_graphs(dt_net *n, int on)
{
    const dt_backend *be = n->be;
    const int can = be->graph_begin && be->graph_end && be->graph_launch && be->graph_free &&
                    be->graph_epoch;
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

static void free_graph(dt_net *n, dt_net_graph *g)
{
    if (g->exec)
        n->be->graph_free(g->exec);
    *g = (dt_net_graph){ 0 };
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
static void step_kernels(dt_net *n, const float *params, const float *x, const int32_t *y,
                         int B, float *grads)
{
    net_forward_kernels(n, params, x, B, 1, 0, n->step.keys);
    n->be->softmax_xent_rows(B, n->classes, n->act[n->nnodes - 1], y, n->dlogits, n->step.rows);
    net_backward(n, params, grads);
}

/* The record for these pointers and batch: found, or a free or the oldest
 * slot, cleared, that the caller fills */
static dt_net_graph *lookup(dt_net *n, const float *params, const float *x, const int32_t *y,
                            int B, float *grads, int *found)
{
    dt_net_step *s = &n->step;
    const uint64_t epoch = n->be->graph_epoch();
    dt_net_graph *old = &s->graph[0];
    for (int k = 0; k < DT_NET_GRAPHS; k++) {
        dt_net_graph *g = &s->graph[k];
        if (g->B == B && g->params == params && g->x == x && g->y == y && g->grads == grads) {
            if (g->epoch == epoch && g->reserve_gen == n->reserve_gen) {
                *found = 1;
                return g;
            }
            old = g; /* stale: the memory it names has moved */
            break;
        }
        if (g->used < old->used)
            old = g;
    }
    free_graph(n, old);
    *found = 0;
    return old;
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
    s->count++;
    if (!s->graphs) {
        step_kernels(n, params, x, y, B, grads);
        return;
    }
    int found;
    dt_net_graph *g = lookup(n, params, x, y, B, grads, &found);
    g->used = s->count;
    if (!found) { /* first sight: run it eagerly, so every buffer is in place */
        *g = (dt_net_graph){ .params = params, .x = x, .y = y, .grads = grads, .B = B,
                             .reserve_gen = n->reserve_gen, .used = s->count };
        step_kernels(n, params, x, y, B, grads);
        g->epoch = be->graph_epoch(); /* after the scratch this step grew */
        return;
    }
    /* second sight: record it. A call that may not be recorded (an allocation,
     * a synchronous copy) ends the job with its name (backend/cuda_check.h);
     * the eager runs before make sure none is left. A record that cannot be
     * made or instantiated leaves this step to run eagerly from then on. */
    if (!g->exec && !g->failed) {
        be->graph_begin();
        step_kernels(n, params, x, y, B, grads);
        g->exec = be->graph_end();
        if (g->exec && be->graph_epoch() != g->epoch) {
            be->graph_free(g->exec);
            g->exec = NULL;
            dt_err_set("CUDA graph: scratch memory moved while the step was recorded");
        }
        if (!g->exec) {
            fprintf(stderr, "dtrain: note: %s; this step runs without a graph\n", dt_err_msg());
            g->failed = 1;
        }
    }
    if (g->exec) {
        be->graph_launch(g->exec);
        /* the host's view of the buffers, as the recorded calls left it */
        net_bind_input(n, x);
        n->fwd_train = 1;
        n->last_B = B;
    } else {
        step_kernels(n, params, x, y, B, grads); /* recording ran nothing */
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
