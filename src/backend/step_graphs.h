/* A training step recorded once and replayed through a backend's graph_*
 * members (CUDA graphs), for any model whose step is one function that
 * queues kernels with nothing read back between them.
 *
 * A record is looked up by what the step was queued with: up to
 * DT_STEP_GRAPH_PTRS pointers (parameters, batch, gradients, ...), the batch
 * size and the owner's buffer generation (bumped by the owner whenever the
 * buffers its kernels name move); a record made before the backend's own
 * scratch moved (graph_epoch) is made again. The first time a key comes the
 * step runs eagerly (so every buffer it grows is in place), the second time
 * it is recorded, then the record is launched. What changes from step to
 * step inside the kernels (a dropout key, a learning rate) must be read by
 * them from backend memory, not passed by value. */
#ifndef DT_BACKEND_STEP_GRAPHS_H
#define DT_BACKEND_STEP_GRAPHS_H

#include <stdint.h>

#include "backend/backend.h"

#define DT_STEP_GRAPH_PTRS 5
#define DT_STEP_GRAPHS 4

typedef struct dt_step_graph {
    void *exec;            /* the backend's record; NULL: seen once, not recorded yet */
    const void *ptr[DT_STEP_GRAPH_PTRS];
    int B;
    int failed;            /* recording failed (the reason printed once): runs eagerly */
    uint64_t epoch, gen;   /* the backend's graph_epoch and the owner's generation */
    uint64_t used;         /* the step that last used it (the oldest is replaced) */
} dt_step_graph;

typedef struct dt_step_graphs {
    dt_step_graph slot[DT_STEP_GRAPHS];
    uint64_t count;        /* steps queued */
} dt_step_graphs;

/* whether be records and replays */
int step_graphs_supported(const dt_backend *be);

/* Queue a step: run(ctx) queues its kernels. Returns 1 where a record was
 * launched instead of run(ctx) (the host-side state run(ctx) would have left
 * is the caller's to set), 0 where run(ctx) ran. */
int step_graphs_queue(dt_step_graphs *g, const dt_backend *be,
                      const void *const ptr[DT_STEP_GRAPH_PTRS], int B, uint64_t gen,
                      void (*run)(void *ctx), void *ctx);

/* the records held (made, not yet freed) */
int step_graphs_live(const dt_step_graphs *g);

/* the records freed, g emptied */
void step_graphs_free(dt_step_graphs *g, const dt_backend *be);

#endif
