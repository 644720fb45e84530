/* The training run of one rank group: the loop around an algorithm's step,
 * logging, evaluation, checkpoints and the run record. Its files share
 * run/run_int.h:
 *
 *   run/loop.c          run_group, the synchronous and asynchronous loops
 *   run/eval_group.c    the group's evaluation: each rank's model, the
 *                       averaged model, the consensus distance
 *   run/checkpointing.c save and restore, the non-finite scan before a save
 *   run/record.c        progress lines, /train rows, the run record, provenance
 *   run/roles.c, run/groups.c, run/stop.c: ranks' roles, rank groups, the
 *                       job-wide stop agreement
 *
 * dtrain.c -> run -> algo -> engine: the loop calls the algorithm, the
 * algorithm calls the engine. */
#ifndef DT_RUN_RUN_H
#define DT_RUN_RUN_H

#include <mpi.h>
#include <stdint.h>

#include "engine/engine.h"
#include "io/deck.h"

/* Exit status asking the batch system to requeue (sysexits EX_TEMPFAIL). */
#define DT_EXIT_REQUEUE 75
/* Exit status of a run stopped on NaN or Inf (run.check_finite). */
#define DT_EXIT_NONFINITE 3

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
int run_group(const dt_group *g, const dt_roles *roles, int world_ranks, MPI_Comm comm,
              dt_run_result *res);

#endif
