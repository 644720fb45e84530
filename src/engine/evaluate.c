/* A model's loss and accuracy over the test source (the group's
 * evaluation, which calls it, is run/eval_group.c). */
#include "config.h"

#include <math.h>

#include "core/error.h"
#include "core/watchdog.h"
#include "engine/engine.h"

void trainer_evaluate(dt_trainer *t, const float *params, double *loss, double *acc)
{
#ifdef DTRAIN_SIM
    /* the simulator has neither a model nor data: nothing is evaluated */
    (void)t, (void)params;
    *loss = *acc = NAN;
    return;
#endif
    double lsum = 0;
    int64_t hits = 0, seen = 0;
    const int dev = t->model->be->device;
    const float *p = engine_params_on_backend(t, params);
    dt_source *src = t->data.test;
    source_rewind(src);
    /* the current batch's buffers: free between steps (a prefetched batch
     * waits in the other pair) */
    for (;;) {
        dt_sample h = t->data.cur, d = t->dev.cur;
        int64_t b = source_next(src, &h);
        if (b == 0)
            break;
        h.input.shape[0] = h.target.shape[0] = b;
        d.input.shape[0] = d.target.shape[0] = b;
        watchdog_phase("evaluation", -1);
        if (dev)
            engine_batch_to_backend(t, b, &h, &d);
        dt_forward_result f = model_forward(t->model, p, dev ? &d : &h, 0, 0);
        /* the mean loss of the batch, weighted by its predictions */
        lsum += f.loss * (double)f.count;
        watchdog_beat(-1);
        hits += f.correct;
        seen += f.count;
    }
    *loss = seen ? lsum / (double)seen : 0;
    *acc = seen ? (double)hits / (double)seen : 0;
    watchdog_phase("a collective (combining or recording an evaluation)", -1);
}
