/* A training step recorded once and replayed: backend/step_graphs.h. */
#include "backend/step_graphs.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

int step_graphs_supported(const dt_backend *be)
{
    return be->graph_begin && be->graph_end && be->graph_launch && be->graph_free &&
           be->graph_epoch;
}

static void clear(dt_step_graph *s, const dt_backend *be)
{
    if (s->exec)
        be->graph_free(s->exec);
    *s = (dt_step_graph){ 0 };
}

/* The record for this key: found, or a free or the oldest slot, cleared,
 * that the caller fills */
static dt_step_graph *lookup(dt_step_graphs *g, const dt_backend *be,
                             const void *const ptr[DT_STEP_GRAPH_PTRS], int B, uint64_t gen,
                             int *found)
{
    const uint64_t epoch = be->graph_epoch();
    dt_step_graph *old = &g->slot[0];
    for (int k = 0; k < DT_STEP_GRAPHS; k++) {
        dt_step_graph *s = &g->slot[k];
        if (s->B == B && !memcmp(s->ptr, ptr, sizeof s->ptr)) {
            if (s->epoch == epoch && s->gen == gen) {
                *found = 1;
                return s;
            }
            old = s; /* stale: the memory it names has moved */
            break;
        }
        if (s->used < old->used)
            old = s;
    }
    clear(old, be);
    *found = 0;
    return old;
}

int step_graphs_queue(dt_step_graphs *g, const dt_backend *be,
                      const void *const ptr[DT_STEP_GRAPH_PTRS], int B, uint64_t gen,
                      void (*run)(void *ctx), void *ctx)
{
    g->count++;
    int found;
    dt_step_graph *s = lookup(g, be, ptr, B, gen, &found);
    s->used = g->count;
    if (!found) { /* first sight: run it eagerly, so every buffer is in place */
        s->B = B;
        s->gen = gen;
        memcpy(s->ptr, ptr, sizeof s->ptr);
        run(ctx);
        s->epoch = be->graph_epoch(); /* after the scratch this step grew */
        return 0;
    }
    /* second sight: record it. A call that may not be recorded (an allocation,
     * a synchronous copy) ends the job with its name (backend/cuda_check.h);
     * the eager run before makes sure none is left. A record that cannot be
     * made or instantiated leaves this step to run eagerly from then on. */
    if (!s->exec && !s->failed) {
        be->graph_begin();
        run(ctx);
        s->exec = be->graph_end();
        if (s->exec && be->graph_epoch() != s->epoch) {
            be->graph_free(s->exec);
            s->exec = NULL;
            dt_err_set("CUDA graph: scratch memory moved while the step was recorded");
        }
        if (!s->exec) {
            fprintf(stderr, "dtrain: note: %s; this step runs without a graph\n", dt_err_msg());
            s->failed = 1;
        }
    }
    if (!s->exec) {
        run(ctx); /* recording ran nothing */
        return 0;
    }
    be->graph_launch(s->exec);
    return 1;
}

int step_graphs_live(const dt_step_graphs *g)
{
    int n = 0;
    for (int k = 0; k < DT_STEP_GRAPHS; k++)
        n += g->slot[k].exec != NULL;
    return n;
}

void step_graphs_free(dt_step_graphs *g, const dt_backend *be)
{
    for (int k = 0; k < DT_STEP_GRAPHS; k++)
        clear(&g->slot[k], be);
    g->count = 0;
}
