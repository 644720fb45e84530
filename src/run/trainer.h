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
#include "io/deck.h"
#include "nn/net.h"
#include "optim/sgd.h"

/* Exit status asking the batch system to requeue (sysexits EX_TEMPFAIL). */
#define DT_EXIT_REQUEUE 75
/* Exit status of a run stopped on NaN or Inf (run.check_finite). */
#define DT_EXIT_NONFINITE 3

typedef struct dt_trainer {
    const dt_config *cfg;
    const dt_algo *algo;
    MPI_Comm comm;          /* the ranks that train together (every role) */
    int rank, nranks;
    const struct dt_roles *roles; /* every rank's role (run/roles.h) */
    int worker, nworkers;   /* this rank's data shard among the workers' */
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
    float *x;               /* (B, C, H, W) current batch (pinned host memory on a GPU) */
    int32_t *y;             /* (B) */
    /* compute.device = cuda: params, grads and opt.v live in the device's
     * memory (one backend allocation each) when the mode has device_vectors;
     * the runtime reads and writes them on the host only through the
     * mirrors, copied at the points that need them (evaluation, checks,
     * checkpoints). Other modes keep host vectors and the network gets
     * device copies, dparams and dgrads. */
    int dev_vectors;
    float *mirror[16];      /* (mirror_n[k]) host scratch, allocated when first needed */
    size_t mirror_n[16];
    float *dparams, *dgrads; /* (n) */
    float *dx;              /* (B, C, H, W) */
    int32_t *dy;            /* (B) */
    /* the next batch, loaded and sent while the current step's backward runs:
     * pinned px, py and device dpx, dpy; the loader's state before it, which
     * a checkpoint records (so a resume loads it again) */
    float *px, *dpx;
    int32_t *py, *dpy;
    int prefetched;
    dt_loader_state before_prefetch;

    int64_t step;           /* iterations completed by this rank */
    double global_step;     /* asynchronous modes, at the end: the group's steps per rank
                             * (the largest estimate of algo->progress over the group) */
    int64_t steps_per_epoch, total_steps;
    float lr;               /* learning rate of the current step */

    /* accumulated since the last /train row */
    double loss_sum, t_compute, t_comm, t_wait;
    int64_t correct, seen, batches;
    int64_t images;         /* since the start of the run (across restarts) */
    int64_t bytes_sent;     /* payload bytes sent, since the start (algorithms add) */
    float weight;           /* push-sum weight to log (algorithms set; 1 by default) */
    double wall_start;      /* clock at start, minus the wall time of earlier runs */
    double run_compute, run_comm; /* seconds in this process's run (comm includes wait) */
    double avg_model_acc;   /* test accuracy of the averaged model, last evaluation */

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
/* Loss and accuracy of params on the test set (data.test_limit samples). */
void trainer_evaluate(dt_trainer *t, const float *params, double *loss, double *acc);
/* x <- x - lr * sgd_direction(t->grads) with the current learning rate. */
void trainer_update(dt_trainer *t, float *x);
/* x (t->n) <- a x, where the flat vectors live (the backend's op with
 * device vectors). */
void trainer_scale(dt_trainer *t, float *x, float a);
/* The backend whose memory and flat_* ops hold the flat vectors (and an
 * algorithm's own vectors of the same kind): the network's with device
 * vectors, else the CPU backend (host memory). */
const dt_backend *trainer_vectors(const dt_trainer *t);

/* What a finished (or stopped) run reports; the same on every rank. */
typedef struct dt_run_result {
    int64_t steps;          /* steps of the group's rank 0 */
    double wall;            /* seconds since the run began, across restarts */
    double avg_model_acc;   /* test accuracy of the averaged model, last evaluation */
    double mean_acc;        /* test accuracy, mean over ranks, last evaluation */
    double images_per_s;    /* training samples per second, all ranks together */
    double comm_share;      /* (communication + wait) / step time, over ranks, this run */
} dt_run_result;

/* Run the training of group g (its configuration and effective deck) on
 * comm, the group's ranks, with their roles; world_ranks is the size of the job, for the
 * record. Returns the exit status: 0, 1 (error, already reported), or
 * DT_EXIT_REQUEUE after a signal-triggered checkpoint; res (may be NULL)
 * gets the figures. Collective over comm. */
int trainer_run(const dt_group *g, const struct dt_roles *roles, int world_ranks, MPI_Comm comm,
                dt_run_result *res);

#endif
