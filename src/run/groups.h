/* Rank groups at run time: each group of the deck (io/deck.h) trains on its
 * own communicator; world rank 0 compares them at the end. Nothing in an
 * algorithm knows that groups exist. */
#ifndef DT_RUN_GROUPS_H
#define DT_RUN_GROUPS_H

#include <mpi.h>

#include "io/deck.h"
#include "run/run.h"

/* Every group's mode accepts its rank count (bipartite needs an even count,
 * and so on) and its optimizer (muon steps on whole matrices, which neither
 * a parameter server's shards nor a mode's own step give it). Serial and the
 * same on every rank; -1 with a message that names where the group's ranks
 * were given. */
int groups_check(const dt_job *job);

/* The communicator of the group holding this world rank. Collective. */
MPI_Comm groups_split(const dt_job *job, MPI_Comm world);

/* After every group has finished: world rank 0 prints one table comparing
 * the groups and writes it as <run.output_dir>/groups.csv, with the job's
 * effective deck as <run.output_dir>/deck.ini. `mine` is this rank's group
 * result, `status` its group's exit status. Collective over world; nothing
 * is written for a job without group sections. */
void groups_report(const dt_job *job, MPI_Comm world, const dt_run_result *mine, int status);

#endif
