/* The training runtime: owns the model, data, optimizer, transport, run
 * record and checkpoints of one rank, and runs the loop around an algorithm's
 * step. Algorithms include this header and use the engine's calls
 * (trainer_gradient, trainer_update, trainer_scale, trainer_vectors) and the
 * flat vectors; the runtime's own files share run/trainer_int.h:
 *
 *   run/loop.c          trainer_run, the synchronous and asynchronous loops
 *   run/engine.c        the rank's model, flat vectors, device mirrors, optimizer
 *   run/data_setup.c    data sets, shards, batch sources
 *   run/evaluate.c      the test-set evaluation, the averaged model, consensus
 *   run/checkpointing.c save and restore, the non-finite scan before a save
 *   run/record.c        progress lines, /train rows, the run record, provenance
 *
 * loop -> algorithm -> engine: nothing below calls back up. */
#ifndef DT_RUN_TRAINER_H
#define DT_RUN_TRAINER_H

#include <mpi.h>
#include <stdint.h>

#include "algo/algo.h"
#include "comm/transport.h"
#include "data/source.h"
#include "io/config.h"
#include "io/deck.h"
#include "models/model.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

/* Exit status asking the batch system to requeue (sysexits EX_TEMPFAIL). */
#define DT_EXIT_REQUEUE 75
/* Exit status of a run stopped on NaN or Inf (run.check_finite). */
#define DT_EXIT_NONFINITE 3

/* What the rank measured: the interval since the last /train row, and
 * totals of the run. Algorithms add their communication time and bytes. */
typedef struct dt_meter {
    double loss_sum, t_compute, t_comm, t_wait; /* since the last /train row */
    int64_t correct, seen, batches;             /* predictions right, made; batches */
    int64_t images;         /* samples since the start of the run (across restarts) */
    int64_t bytes_sent;     /* payload bytes sent, since the start (algorithms add) */
    float weight;           /* push-sum weight to log (algorithms set; 1 by default) */
    double run_compute, run_comm; /* seconds in this process's run (comm includes wait) */
} dt_meter;

/* Where the batches come from and the host buffers they land in. */
typedef struct dt_batches {
    dt_source *train, *test; /* run/data_setup.c */
    int B;
    dt_sample shape;        /* a full batch's shape (the simulator: without sources) */
    int64_t classes;        /* targets in [0, classes) */
    int64_t train_samples;  /* the simulator: the training set's size */
    int tokens;             /* a language model's data: a sample is a token position */
    int vocab_n;            /* data.name = text: the corpus's distinct bytes, */
    unsigned char vocab_bytes[256]; /* token id -> byte (the run record keeps them) */
    dt_sample cur;          /* the current batch (pinned host memory on a GPU) */
    /* a device backend: the next batch, loaded and sent while the current
     * step's backward runs, and the source's state before it, which a
     * checkpoint records (so a resume loads it again) */
    dt_sample next;
    int prefetched;
    unsigned char before_prefetch[DT_SOURCE_STATE_MAX];
} dt_batches;

/* compute.device = cuda: params, grads and the optimizer's state live in the
 * device's memory (one backend allocation each) when the mode has
 * device_vectors; the runtime reads and writes them on the host only through
 * the mirrors, copied at the points that need them (evaluation, checks,
 * checkpoints). Other modes keep host vectors and the model gets device
 * copies, params and grads. */
typedef struct dt_mirrors {
    int vectors;            /* the flat vectors live in the backend's memory */
    float *host[16];        /* (host_n[k]) host scratch, allocated when first needed */
    size_t host_n[16];
    float *params, *grads;  /* (n) device copies of host vectors */
    dt_sample cur, next;    /* device copies of the batches */
} dt_mirrors;

typedef struct dt_trainer {
    const dt_config *cfg;
    const dt_algo *algo;
    MPI_Comm comm;          /* the ranks that train together (every role) */
    int rank, nranks;
    const struct dt_roles *roles; /* every rank's role (run/roles.h) */
    int worker, nworkers;   /* this rank's data shard among the workers' */
    dt_transport *tp;

    /* the engine (run/engine.c) */
    dt_model *model;        /* NULL in the simulator and the algorithms' tests */
    size_t n;               /* parameters in the flat vector */
    float *params;          /* (n) this rank's x */
    float *grads;           /* (n) gradient of the last trainer_gradient */
    dt_optim opt;           /* state vectors (n), local to the rank */
    dt_schedule sched;      /* epoch-based: warm-up and step decays */
    dt_lr_steps lsched;     /* step-based: warm-up steps, the cosine (optim/schedule.h) */
    dt_batches data;
    dt_mirrors dev;

    int64_t step;           /* iterations completed by this rank */
    int elastic_from;       /* resumed from a checkpoint of another rank count: that
                             * count (0: a fresh start or the same count) */
    double global_step;     /* asynchronous modes, at the end: the group's steps per rank
                             * (the largest estimate of algo->progress over the group) */
    int64_t steps_per_epoch, total_steps;
    float lr;               /* learning rate of the current step */

    dt_meter meter;
    double wall_start;      /* clock at start, minus the wall time of earlier runs */
    double avg_model_acc;   /* test accuracy of the averaged model, last evaluation */

    void *algo_state;       /* owned by the algorithm */

    /* The gradient oracle: NULL means the model on the next minibatch.
     * Tests of the algorithms install closed-form objectives here. It must
     * write the gradient at x into t->grads and may set t->meter.loss_sum etc. */
    void (*gradient_fn)(struct dt_trainer *t, const float *x);
} dt_trainer;

/* Seconds on a monotonic clock. */
double trainer_clock(void);
/* Draw the next minibatch and compute the gradient of its loss at x into
 * t->grads (timed as compute). */
void trainer_gradient(dt_trainer *t, const float *x);
/* Loss and accuracy of params on the test set (data.test_limit samples). */
void trainer_evaluate(dt_trainer *t, const float *params, double *loss, double *acc);
/* The learning rate after `steps` optimizer steps of this rank (fractional
 * for the asynchronous modes' group estimate): the epoch-based schedule,
 * with the step-based warm-up or the cosine on top (optim.schedule). */
float trainer_lr_at(const dt_trainer *t, double steps);
/* x <- one optimizer step with t->grads at the current learning rate
 * (clipped first to optim.clip_norm). */
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
