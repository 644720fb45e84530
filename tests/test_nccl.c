/* The NCCL transport on GPUs (run by tests/gpu.sh under mpiexec, one rank
 * per GPU). Inputs are derived from (rank, index), so every rank knows the
 * expected result without communication:
 *  - allreduce of a host and of a device vector equals the closed-form sum
 *    (on one rank: the vector itself) and the MPI transport's result;
 *  - reduce to rank 0 and broadcast from the last rank;
 *  - with two or more ranks, one ring gossip step (send to rank + 1,
 *    receive from rank - 1 in one group) equals the MPI transport's.
 * Exit 77 (skip) with the reason without NCCL or without a GPU per rank. */
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/gpu_plan.h"
#include "comm/transport.h"
#include "core/error.h"
#include "tap.h"
#ifdef HAVE_NCCL
#include "backend/backend.h"
#include "backend/cuda_device.h"
#endif

#ifdef HAVE_NCCL
/* eighths of small integers: any sum over ranks is exact in float */
static float value(int rank, size_t i)
{
    return (float)((int)((i * 7 + (size_t)rank * 13) % 64) - 32) / 8.0f;
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifndef HAVE_NCCL
    if (rank == 0)
        printf("1..0 # SKIP dtrain was built without NCCL (configure --with-cuda --with-nccl)\n");
    MPI_Finalize();
    return 77;
#else
    const char *why = "";
    int lr, ls;
    gpu_node_rank(MPI_COMM_WORLD, &lr, &ls);
    const int ngpus = cuda_device_count(&why);
    int ok = gpu_choose(lr, ls, ngpus) >= 0, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (rank == 0)
            printf("1..0 # SKIP no GPU for every rank (%s; CUDA: %s)\n", dt_err_msg(), why);
        MPI_Finalize();
        return 77;
    }
    char name[96];
    if (cuda_device_open(lr, name, sizeof name) != 0)
        DT_FATAL("%s", dt_err_msg());
    const dt_backend *g = backend_cuda();
    dt_transport *nc = transport_nccl_create(MPI_COMM_WORLD, 60.0);
    dt_transport *mp = transport_mpi_create(MPI_COMM_WORLD);
    const size_t n = 1000003; // odd, past any chunking
    float *h = dt_falloc(n), *ref = dt_falloc(n), *want = dt_falloc(n);
    for (size_t i = 0; i < n; i++) {
        h[i] = ref[i] = value(rank, i);
        want[i] = 0.0f;
        for (int r = 0; r < size; r++)
            want[i] += value(r, i);
    }
    nc->allreduce_sum(nc, h, n);
    mp->allreduce_sum(mp, ref, n);
    CHECK(memcmp(h, want, n * sizeof(float)) == 0, "rank %d of %d (%s): NCCL allreduce of a "
          "host vector equals the closed-form sum", rank, size, name);
    CHECK(memcmp(h, ref, n * sizeof(float)) == 0, "rank %d: NCCL allreduce equals MPI's", rank);

    float *d = g->mem_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = value(rank, i);
    g->to_backend(d, h, n * sizeof(float));
    nc->allreduce_sum(nc, d, n);
    g->to_host(h, d, n * sizeof(float));
    CHECK(memcmp(h, want, n * sizeof(float)) == 0, "rank %d: NCCL allreduce of a device "
          "vector equals the closed-form sum", rank);

    for (size_t i = 0; i < n; i++)
        h[i] = value(rank, i);
    nc->reduce_sum(nc, h, n, 0);
    int same = 1;
    for (size_t i = 0; i < n; i++)
        same &= h[i] == (rank == 0 ? want[i] : value(rank, i));
    CHECK(same, "rank %d: NCCL reduce to rank 0 (others unchanged)", rank);
    for (size_t i = 0; i < n; i++)
        h[i] = value(rank, i);
    nc->bcast(nc, h, n, size - 1);
    same = 1;
    for (size_t i = 0; i < n; i++)
        same &= h[i] == value(size - 1, i);
    CHECK(same, "rank %d: NCCL broadcast from rank %d", rank, size - 1);

    if (size >= 2) { // one ring gossip step, as gossip.c issues it
        float *snd = dt_falloc(n), *rn = dt_falloc(n), *rm = dt_falloc(n);
        for (size_t i = 0; i < n; i++)
            snd[i] = value(rank, i);
        dt_request q[4];
        const int to = (rank + 1) % size, from = (rank + size - 1) % size;
        nc->irecv(nc, rn, n, from, 7, &q[0]);
        nc->isend(nc, snd, n, to, 7, &q[1]);
        nc->waitall(nc, q, 2);
        mp->irecv(mp, rm, n, from, 7, &q[2]);
        mp->isend(mp, snd, n, to, 7, &q[3]);
        mp->waitall(mp, q + 2, 2);
        CHECK(memcmp(rn, rm, n * sizeof(float)) == 0, "rank %d: NCCL ring gossip step equals "
              "MPI's (received from rank %d)", rank, from);
        free(snd);
        free(rn);
        free(rm);
    }
    g->mem_free(d);
    free(h);
    free(ref);
    free(want);
    transport_free(nc);
    transport_free(mp);
    cuda_device_close();
    int rc = tap_done();
    MPI_Finalize();
    return rc;
#endif
}
