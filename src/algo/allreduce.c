/* AllReduce SGD (doc/references.md, AllReduce SGD): every step
 *   g <- allreduce_sum(g_i) / n;  x <- x - lr * sgd(g)
 * on every rank. Replicas start equal (rank 0's parameters are broadcast by
 * the runtime) and stay equal bit for bit: every rank applies the same update
 * to the same x. */
#include "algo/algo.h"
#include "comm/transport.h"
#include "core/error.h"
#include "engine/engine.h"

static int allreduce_check(const dt_config *cfg, int nranks)
{
    (void)cfg;
    (void)nranks;
    return 0;
}

static void allreduce_step(dt_trainer *t)
{
    trainer_gradient(t, t->params);
    double t0 = trainer_clock();
    t->tp->allreduce_sum(t->tp, t->grads, t->n);
    t->meter.bytes_sent += (int64_t)(t->n * sizeof(float)); /* the vector this rank contributes */
    const float inv = 1.0f / (float)t->nranks;
    trainer_scale(t, t->grads, inv);
    t->meter.t_comm += trainer_clock() - t0;
    trainer_update(t, t->params);
}

static const float *allreduce_model(dt_trainer *t) { return t->params; }

const dt_algo algo_allreduce = {
    .name = "allreduce",
    .summary = "gradients averaged with one MPI_Allreduce per step; replicas stay identical",
    .check = allreduce_check,
    .elastic = DT_ELASTIC_REPLICATED,
    .nccl = 1,
    .step = allreduce_step,
    .model = allreduce_model,
    .device_vectors = 1,
};
