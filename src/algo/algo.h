/* Training algorithms: one file each, one ops table, chosen by algorithm.mode.
 *
 * An algorithm sees only the trainer's flat vectors (params, grads), the
 * trainer's gradient/optimizer helpers and the transport. The runtime
 * (src/run/) owns the loop, logging,
 * evaluation and checkpoints. */
#ifndef DT_ALGO_H
#define DT_ALGO_H

#include "io/checkpoint.h"
#include "io/settings.h"

struct dt_trainer;
struct dt_runlog;

/* What progress tells the asynchronous loop. */
enum {
    ALGO_GO = 0,         /* go on */
    ALGO_END = 1,        /* the step budget is spent */
    ALGO_STOP = 2,       /* a stop (signal) was requested: checkpoint and exit for requeue */
    ALGO_CHECKPOINT = 3, /* run.checkpoint_every of the group's steps: drain, write, go on */
};

/* What a rank starts from when a run resumes on another rank count than
 * the one that wrote its checkpoint (run/checkpointing.c). */
enum dt_algo_elastic {
    DT_ELASTIC_NONE = 0,    /* refused: the mode resumes only on the same rank count */
    DT_ELASTIC_REPLICATED,  /* params and optimizer state: old rank 0's (one replicated
                             * state; the algorithm's arrays by their own rules) */
    DT_ELASTIC_AVERAGE,     /* params and optimizer state: the mean over the old ranks
                             * (the algorithm's resumed hook de-biases push-sum) */
    DT_ELASTIC_SHARDED,     /* params: old rank 0's (the servers' model, gathered on
                             * every rank); optimizer state: the sum of the old rows
                             * (each server's range, zero elsewhere), re-cut by setup */
    DT_ELASTIC_LEADER,      /* params: not read; the algorithm's resumed hook copies
                             * in the leader's model from its own replicated array;
                             * optimizer state: the mean over the old ranks */
};

typedef struct dt_algo {
    const char *name;
    const char *summary;    /* one line for --help: what it does and its invariant */
    int decentralized;      /* replicas may differ: evaluate the averaged model too */
    int async;              /* ranks step independently: no collective in the training
                             * loop; the algorithm counts global steps (progress) */
    int device_vectors;     /* with a device backend (compute.device = cuda), params,
                             * grads and momentum live in the backend's memory: the
                             * algorithm touches them, and keeps its own vectors and
                             * state arrays, only through trainer_update,
                             * trainer_scale, trainer_vectors(t)'s memory and flat_*
                             * ops, and the transport (run/engine.c) */
    /* Reject configurations the algorithm cannot run (rank count...):
     * -1 after dt_err_set(). */
    int (*check)(const dt_config *cfg, int nranks);
    int elastic;            /* enum dt_algo_elastic */
    const char *elastic_note; /* what the mode's own arrays start from then (NULL: none) */
    int nccl;               /* comm.transport = nccl carries its vectors: its exchanges
                             * go through the transport from the training thread (the
                             * others use one-sided MPI or a communication thread, and
                             * keep MPI) */
    int servers;            /* ranks 0..ps.servers-1 serve the model and, with
                             * ps.supervisor, the next rank evaluates it (run/roles.c);
                             * 0: every rank is a worker */
    const char *thread;     /* why its exchanges run on a communication thread that
                             * calls MPI (NULL: none); SMPI cannot simulate such a mode */
    const char *own_step;   /* why it takes its own step rather than the optimizer's,
                             * and so refuses optim.name = adamw (NULL: the optimizer's) */
    void (*setup)(struct dt_trainer *t);
    /* One training iteration: gradient(s), communication, update. */
    void (*step)(struct dt_trainer *t);
    /* The parameters to evaluate and checkpoint as "the model" of this rank. */
    const float *(*model)(struct dt_trainer *t);
    /* Extra per-rank float arrays to checkpoint (filled into out, at most
     * max); returns how many. NULL: none. */
    int (*state)(struct dt_trainer *t, dt_ckpt_array *out, int max);
    /* async only: after each step, publish this rank's step (and a stop
     * request); *global_steps = steps of all ranks / ranks. Returns an
     * ALGO_* verdict, the same on every rank of the group in the same order. */
    int (*progress)(struct dt_trainer *t, int stop_local, double *global_steps);
    /* async: complete every exchange before a collective (the end, or a
     * periodic checkpoint); the algorithm's counters are then final.
     * Synchronous (NULL: nothing to do): after the last step of a run whose
     * budget is spent (not at a stop signal), before the final evaluation
     * and checkpoint: apply what is still in flight to the final model. */
    void (*finish)(struct dt_trainer *t);
    /* async only: after a periodic checkpoint, start the exchanges that
     * finish stopped (NULL: finish stopped nothing). */
    void (*restart)(struct dt_trainer *t);
    /* Collective, before the run record is closed: write the algorithm's own
     * series (NULL: none). */
    void (*record)(struct dt_trainer *t, struct dt_runlog *log);
    /* Collective, after a checkpoint was restored (NULL: nothing to do);
     * t->elastic_from says whether it was written by another rank count. */
    void (*resumed)(struct dt_trainer *t);
    /* run.check_replicas: whether the replicas must be bit-identical after
     * the step just taken (t->step counts it). NULL: after every step. */
    int (*replicas_equal)(struct dt_trainer *t);
    void (*teardown)(struct dt_trainer *t);
    /* The table a configuration runs under this mode's name (NULL, or NULL
     * returned: this one), e.g. the synchronous or the asynchronous loop. */
    const struct dt_algo *(*variant)(const dt_config *cfg);
} dt_algo;

/* NULL after dt_err_set() naming the known modes. */
const dt_algo *algo_find(const char *name);
/* The table's names joined by sep ("local|allreduce|...", or ", "); static
 * storage, one buffer per separator kind. */
const char *algo_names(const char *sep);
/* Hands the deck (io/deck.h) the spellings of algorithm.mode and the rule
 * only the chosen mode knows (a mode with its own step refuses AdamW).
 * Before the first deck is parsed. */
void algo_deck_register(void);
/* NULL-terminated table of all algorithms. */
extern const dt_algo *const algo_table[];

#endif
