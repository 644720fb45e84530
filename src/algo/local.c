/* Single-node reference: one rank, all the data, plain minibatch SGD. */
#include "algo/algo.h"
#include "core/error.h"
#include "engine/engine.h"

static int local_check(const dt_config *cfg, int nranks)
{
    (void)cfg;
    if (nranks != 1)
        return dt_err_set("algorithm.mode = local runs on exactly 1 rank, this job has %d "
                          "(use allreduce or a decentralized mode for several ranks)", nranks);
    return 0;
}

static void local_step(dt_trainer *t)
{
    trainer_gradient(t, t->params);   /* g = grad F(x) on the next minibatch */
    trainer_update(t, t->params);     /* x <- x - lr * sgd(g) */
}

static const float *local_model(dt_trainer *t) { return t->params; }

const dt_algo algo_local = {
    .name = "local",
    .summary = "single-rank reference SGD (one rank only)",
    .check = local_check,
    .elastic = DT_ELASTIC_REPLICATED,
    .step = local_step,
    .model = local_model,
    .device_vectors = 1, /* compute.device = cuda: params, grads, momentum stay on the GPU */
};
