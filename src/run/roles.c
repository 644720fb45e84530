#include "run/roles.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

const char *role_name(dt_role role)
{
    switch (role) {
    case ROLE_WORKER: return "worker";
    }
    return "?";
}

void roles_build(dt_roles *r, MPI_Comm world, const dt_config *cfg)
{
    (void)cfg;
    int rank;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &r->nranks));
    r->role = dt_calloc((size_t)r->nranks, sizeof *r->role);
    for (int i = 0; i < r->nranks; i++)
        r->role[i] = ROLE_WORKER;
    r->mine = r->role[rank];
    MPI_CHECK(MPI_Comm_split(world, (int)r->mine, rank, &r->role_comm));
}

void roles_print(const dt_roles *r, MPI_Comm world, const dt_config *cfg, FILE *f)
{
    int rank;
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Get_processor_name(host, &len));
    char *all = rank == 0 ? dt_calloc((size_t)r->nranks, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_CHECK(MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                         MPI_CHAR, 0, world));
    if (rank == 0) {
        fprintf(f, "%6s  %-24s  %-10s  %s\n", "rank", "host", "role", "device");
        for (int i = 0; i < r->nranks; i++)
            fprintf(f, "%6d  %-24s  %-10s  %s\n", i, all + (size_t)i * MPI_MAX_PROCESSOR_NAME,
                    role_name(r->role[i]), cfg->compute.device);
        fflush(f);
    }
    free(all);
}

void roles_free(dt_roles *r)
{
    free(r->role);
    MPI_CHECK(MPI_Comm_free(&r->role_comm));
}
