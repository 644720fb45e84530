/* Rank roles, computed once at start-up from the deck and the group's rank
 * count: workers train; in the parameter-server modes ranks 0..S-1 are
 * servers (ps.servers) and the next rank a supervisor (ps.supervisor).
 * Each role gets its own sub-communicator. The types (dt_roles) are the
 * engine's (engine/engine.h): an algorithm reads its rank's role. */
#ifndef DT_RUN_ROLES_H
#define DT_RUN_ROLES_H

#include <mpi.h>
#include <stdio.h>

#include "engine/engine.h"
#include "io/settings.h"
#include "io/deck.h"

/* Collective over comm, the ranks of one group. */
void roles_build(dt_roles *r, MPI_Comm comm, const dt_config *cfg);
/* World rank 0 prints one line per rank of the job: world rank, host,
 * group, role, device (each rank's own: "cpu", "cuda:0 <GPU name>").
 * Collective over world. */
void roles_print(const dt_roles *r, MPI_Comm world, const dt_job *job, const char *device,
                 FILE *f);
const char *role_name(dt_role role);
void roles_free(dt_roles *r);

#endif
