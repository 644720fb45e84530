/* The rank's engine: its network, the flat vectors (params, grads) and
 * their device mirrors, the optimizer, the batch sources and the test-set
 * evaluation. Algorithms (src/algo/) call it through trainer_gradient,
 * trainer_update, trainer_scale and trainer_vectors and read the flat
 * vectors; the loop (src/run/) creates and frees it. Its files:
 *
 *   engine/engine.c      the model, flat vectors, device mirrors, optimizer
 *   engine/data_setup.c  data sets, shards, batch sources
 *   engine/evaluate.c    a model's loss and accuracy on the test set
 *
 * run -> algo -> engine: this header includes nothing above it and only
 * names the algorithm's ops (struct dt_algo) it carries a pointer to. */
#ifndef DT_ENGINE_ENGINE_H
#define DT_ENGINE_ENGINE_H

#include <mpi.h>
#include <stdint.h>

#include "comm/transport.h"
#include "data/source.h"
#include "io/settings.h"
#include "io/deck.h"
#include "models/model.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

struct dt_algo; /* the algorithm's ops (algo/algo.h) */

/* A rank's role in its group, fixed at start-up (run/roles.c builds it):
 * workers train; in the modes with servers, ranks 0..S-1 are servers and
 * the next one may be a supervisor. */
typedef enum dt_role { ROLE_WORKER = 0, ROLE_SERVER = 1, ROLE_SUPERVISOR = 2 } dt_role;

typedef struct dt_roles {
    int nranks;
    dt_role *role;          /* (nranks) role of every rank */
    dt_role mine;
    int index, count;       /* this rank's position among the ranks of its role, and
                             * how many share it (workers: the data shard) */
    MPI_Comm role_comm;     /* the ranks sharing this rank's role */
} dt_roles;

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
    dt_source *train, *test; /* engine/data_setup.c */
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
    const struct dt_algo *algo;
    MPI_Comm comm;          /* the ranks that train together (every role) */
    int rank, nranks;
    const dt_roles *roles;  /* every rank's role */
    int worker, nworkers;   /* this rank's data shard among the workers' */
    dt_transport *tp;

    /* the engine (engine/engine.c) */
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

    /* The loop's job-wide stop agreement (run/stop.h), which a rank that
     * serves others polls while it waits: 1 once a stop was requested.
     * NULL: none (the algorithms' tests). */
    int (*poll_stop)(void);

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

/* ---- engine/engine.c: created by the loop in this order ------------------ */

/* The model for the data (not in the simulator, which only sizes it): -1
 * after dt_err_set(). */
int engine_create_model(dt_trainer *t);
/* The flat vectors (initialised from run.seed), the model's activations and
 * the batch buffers; device_vectors: the mode keeps its flat vectors in a
 * device backend's memory (dt_algo.device_vectors). */
void engine_alloc(dt_trainer *t, int device_vectors);
/* The optimizer and its state vectors where the flat vectors live: -1 after
 * dt_err_set(). */
int engine_create_optim(dt_trainer *t);
/* The parameters x where the model reads them (a device copy if needed). */
const float *engine_params_on_backend(dt_trainer *t, const float *x);
/* The first b samples of the host batch h into the device batch d. */
void engine_batch_to_backend(dt_trainer *t, int64_t b, const dt_sample *h, dt_sample *d);
/* Host scratch k of n floats: the mirror of a vector in the backend's
 * memory, valid from the to_host that fills it. */
float *engine_mirror(dt_trainer *t, int k, size_t n);
/* The host view of a vector: itself, or its mirror k filled from the backend. */
const float *engine_on_host(dt_trainer *t, int k, const float *x, size_t n);
/* Everything the rank's engine, data and transport hold (after the
 * algorithm's teardown). */
void engine_free(dt_trainer *t);

/* ---- engine/data_setup.c --------------------------------------------------- */

/* The data sets, this worker's shard and the batch sources (the simulator:
 * the sample shape and the training set's size only). -1 after
 * dt_err_set(). */
int data_setup(dt_trainer *t);
/* Steps of this rank's epoch (before the group agrees on the smallest). */
int64_t data_steps_per_epoch(const dt_trainer *t);

#endif
