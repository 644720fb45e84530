/* The group's evaluation: each rank's model on the test set, the averaged
 * model and the consensus distance, into the run record and rank 0's line. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "run/run_int.h"

/* Per-rank test metrics, plus the averaged model and the consensus distance
 * (1/n) sum_i ||z_i - zbar||^2 (doc/references.md, Common pieces). */
void eval_run(dt_trainer *t, dt_runlog *log, double wall, double *mean_acc)
{
#ifdef DTRAIN_SIM
    /* no evaluation in the simulator (its vectors hold no model) */
    (void)log, (void)wall;
    *mean_acc = t->avg_model_acc = NAN;
    return;
#endif
    const float *z = t->algo->model(t);
    /* the epoch of the run: asynchronous ranks count their own steps (a
     * parameter server its clock), so they take the group's estimate */
    double steps = t->algo->async ? t->global_step : (double)t->step;
    dt_eval_row row = { .step = t->algo->async ? llround(steps) : t->step,
                        .epoch = steps / (double)t->steps_per_epoch,
                        .wall = wall };
    trainer_evaluate(t, z, &row.loss, &row.accuracy);

    /* the gradient buffer is free between steps: it holds the sum, then
     * (on the host, or in the host mirror with device vectors) the average */
    float *zsum = t->grads;
    if (t->dev.vectors)
        t->model->be->mem_copy(zsum, z, t->n * sizeof *zsum);
    else
        memcpy(zsum, z, t->n * sizeof *zsum);
    t->tp->allreduce_sum(t->tp, zsum, t->n);
    const float *hz = engine_on_host(t, 0, z, t->n);
    float *avg = (float *)engine_on_host(t, 1, zsum, t->n);
    double dist = 0;
    for (size_t i = 0; i < t->n; i++) {
        avg[i] /= (float)t->nranks;
        double d = (double)hz[i] - avg[i];
        dist += d * d;
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &dist, 1, MPI_DOUBLE, MPI_SUM, t->comm));
    dist /= t->nranks;
    double avg_loss = row.loss, avg_acc = row.accuracy;
    if (t->algo->decentralized && t->dev.vectors) {
        t->model->be->to_backend(zsum, avg, t->n * sizeof *avg);
        trainer_evaluate(t, zsum, &avg_loss, &avg_acc);
    } else if (t->algo->decentralized)
        trainer_evaluate(t, avg, &avg_loss, &avg_acc);
    else { /* replicas are identical: the average is every rank's model */
        MPI_CHECK(MPI_Bcast(&avg_acc, 1, MPI_DOUBLE, 0, t->comm));
        MPI_CHECK(MPI_Bcast(&avg_loss, 1, MPI_DOUBLE, 0, t->comm));
    }
    runlog_append_eval(log, &row, avg_loss, avg_acc, dist);
    t->avg_model_acc = avg_acc;
    double sum = row.accuracy;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, t->comm));
    *mean_acc = sum / t->nranks;
    if (t->rank == 0) {
        /* a language model's evaluation is next-token accuracy and
         * validation loss in nats */
        const int lm = t->data.tokens != 0;
        say("eval  step %lld  epoch %.2f  %s %.2f%% (mean over ranks)  "
               "averaged model %.2f%%  %s %.4f  consensus %.3g\n",
               (long long)row.step, row.epoch, lm ? "next-token accuracy" : "test accuracy",
               100 * *mean_acc, 100 * avg_acc, lm ? "validation loss" : "test loss", row.loss,
               dist);
        fflush(stdout);
    }
}
