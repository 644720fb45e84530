#include "run/roles.h"

#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "core/error.h"

const char *role_name(dt_role role)
{
    switch (role) {
    case ROLE_WORKER: return "worker";
    case ROLE_SERVER: return "server";
    case ROLE_SUPERVISOR: return "supervisor";
    }
    return "?";
}

void roles_build(dt_roles *r, MPI_Comm comm, const dt_config *cfg)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &r->nranks));
    r->role = dt_calloc((size_t)r->nranks, sizeof *r->role);
    int servers = 0, supervisor = 0;
    const dt_algo *a = algo_find(cfg->algorithm.mode);
    if (a && a->servers) {
        servers = (int)cfg->ps.servers;
        supervisor = cfg->ps.supervisor;
    }
    for (int i = 0; i < r->nranks; i++)
        r->role[i] = i < servers ? ROLE_SERVER
                     : i < servers + supervisor ? ROLE_SUPERVISOR : ROLE_WORKER;
    r->mine = r->role[rank];
    r->index = r->count = 0;
    for (int i = 0; i < r->nranks; i++)
        if (r->role[i] == r->mine) {
            r->index += i < rank;
            r->count++;
        }
    MPI_CHECK(MPI_Comm_split(comm, (int)r->mine, rank, &r->role_comm));
}

void roles_print(const dt_roles *r, MPI_Comm world, const dt_job *job, const char *device,
                 FILE *f)
{
    int rank, size, len = 0;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &size));
    /* (host, role) of every rank */
    struct { char host[MPI_MAX_PROCESSOR_NAME]; char device[96]; int role; } mine, *all = NULL;
    memset(&mine, 0, sizeof mine);
    MPI_CHECK(MPI_Get_processor_name(mine.host, &len));
    mine.role = (int)r->mine;
    snprintf(mine.device, sizeof mine.device, "%s", device);
    if (rank == 0)
        all = dt_calloc((size_t)size, sizeof *all);
    MPI_CHECK(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0,
                         world));
    if (rank == 0) {
        int grouped = job->ngroups > 1 || job->groups[0].name[0];
        fprintf(f, "%6s  %-24s  %-*s%-10s  %s\n", "rank", "host", grouped ? 18 : 0,
                grouped ? "group" : "", "role", "device");
        for (int i = 0; i < size; i++) {
            const dt_group *g = deck_job_group(job, i);
            fprintf(f, "%6d  %-24s  %-*s%-10s  %s\n", i, all[i].host, grouped ? 18 : 0,
                    grouped ? g->name : "", role_name((dt_role)all[i].role), all[i].device);
        }
        fflush(f);
    }
    free(all);
}

void roles_free(dt_roles *r)
{
    free(r->role);
    MPI_CHECK(MPI_Comm_free(&r->role_comm));
}
