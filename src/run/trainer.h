/* The training runtime: owns the model, data, optimizer, transport, run
 * record and checkpoints of one rank, and runs the loop around an algorithm's
 * step. Algorithms use trainer_gradient/trainer_update and the flat vectors. */
#ifndef DT_RUN_TRAINER_H
#define DT_RUN_TRAINER_H

#include <mpi.h>
#include <stdint.h>

#include "algo/algo.h"
#include "comm/transport.h"
#include "data/data.h"
#include "io/config.h"
#include "nn/net.h"
#include "optim/sgd.h"

/* Exit status asking the batch system to requeue (sysexits EX_TEMPFAIL). */
#define DT_EXIT_REQUEUE 75

typedef struct dt_trainer {
    const dt_config *cfg;
    const dt_algo *algo;
    MPI_Comm comm;          /* the ranks that train together */
    int rank, nranks;
    dt_transport *tp;

    dt_net *net;
    size_t n;               /* parameters in the flat vector */
    float *params;          /* (n) this rank's x */
    float *grads;           /* (n) gradient of the last trainer_gradient */
    dt_sgd opt;             /* momentum (n), local to the rank */
    dt_schedule sched;

    dt_dataset train, test;
    dt_shard shard;
    dt_loader loader;
    int B;
    float *x;               /* (B, C, H, W) current batch */
    int32_t *y;             /* (B) */

    int64_t step;           /* iterations completed by this rank */
    int64_t steps_per_epoch, total_steps;
    float lr;               /* learning rate of the current step */

    /* accumulated since the last /train row */
    double loss_sum, t_compute, t_comm, t_wait;
    int64_t correct, seen, batches;
    int64_t images;         /* since the start of the run (across restarts) */
    int64_t bytes_sent;     /* payload bytes sent, since the start (algorithms add) */
    float weight;           /* push-sum weight to log (algorithms set; 1 by default) */
    double wall_start;      /* clock at start, minus the wall time of earlier runs */

    void *algo_state;       /* owned by the algorithm */

    /* The gradient oracle: NULL means the network on the next minibatch.
     * Tests of the algorithms install closed-form objectives here. It must
     * write the gradient at x into t->grads and may set t->loss_sum etc. */
    void (*gradient_fn)(struct dt_trainer *t, const float *x);
} dt_trainer;

/* Seconds on a monotonic clock. */
double trainer_clock(void);
/* Draw the next minibatch and compute the gradient of its loss at x into
 * t->grads (timed as compute). */
void trainer_gradient(dt_trainer *t, const float *x);
/* x <- x - lr * sgd_direction(t->grads) with the current learning rate. */
void trainer_update(dt_trainer *t, float *x);

/* Run the whole training described by cfg on comm. Returns the process exit
 * status: 0, 1 (error, already reported), or DT_EXIT_REQUEUE after a
 * signal-triggered checkpoint. Collective over comm. */
int trainer_run(const dt_config *cfg, const char *deck_text, MPI_Comm comm);

/* Install the SIGTERM/SIGUSR1 handlers that request a checkpoint-and-exit. */
void trainer_install_signals(void);

#endif
