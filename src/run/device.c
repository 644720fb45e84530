/* Where a rank computes (compute.device) and how it moves device buffers
 * (comm.transport), decided once at start-up on every rank. */
#include "config.h"

#include "run/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/gpu_plan.h"
#include "core/error.h"
#ifdef HAVE_CUDA
#include "backend/cuda_device.h"
#endif

const char *device_config_error(const dt_config *cfg, char *buf, size_t len)
{
    const int cuda = strcmp(cfg->compute.device, "cuda") == 0;
    const int nccl = strcmp(cfg->comm.transport, "nccl") == 0;
    if (nccl && !cuda) {
        snprintf(buf, len, "comm.transport = nccl needs compute.device = cuda (NCCL moves "
                           "device buffers); use comm.transport = mpi on the CPU");
        return buf;
    }
#ifndef HAVE_CUDA
    if (cuda) {
        snprintf(buf, len, "compute.device = cuda: this dtrain was built without CUDA "
                           "(configure --with-cuda); use compute.device = cpu");
        return buf;
    }
#endif
#ifndef HAVE_NCCL
    if (nccl) {
        snprintf(buf, len, "comm.transport = nccl: this dtrain was built without NCCL "
                           "(configure --with-cuda --with-nccl); use comm.transport = mpi");
        return buf;
    }
#endif
    return NULL;
}

int device_open(const dt_config *cfg, MPI_Comm world, dt_device *d)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    memset(d, 0, sizeof *d);
    d->gpu = -1;
    d->cuda = strcmp(cfg->compute.device, "cuda") == 0;
    snprintf(d->name, sizeof d->name, "cpu");
    char why[512] = "";
    int bad = device_config_error(cfg, why, sizeof why) != NULL;

    // the GPU: this rank's index among the ranks of its node that use one and
    // see the same devices
    MPI_Comm users;
    MPI_CHECK(MPI_Comm_split(world, d->cuda && !bad, rank, &users));
    if (d->cuda && !bad) {
        int local_rank, local_size;
        gpu_node_rank_visible(users, getenv("CUDA_VISIBLE_DEVICES"), &local_rank, &local_size);
#ifdef HAVE_CUDA
        const char *reason = "";
        const int ngpus = cuda_device_count(&reason);
        d->gpu = gpu_choose(local_rank, local_size, ngpus);
        if (d->gpu < 0)
            snprintf(why, sizeof why, "%s%s%s%s", dt_err_msg(), ngpus ? "" : " (CUDA: ",
                     ngpus ? "" : reason, ngpus ? "" : ")");
        else if (cuda_device_open(d->gpu, d->name, sizeof d->name) != 0)
            snprintf(why, sizeof why, "%s", dt_err_msg());
        else if (cfg->compute.tf32) {
            cuda_device_tf32(1);
            const size_t l = strlen(d->name);
            snprintf(d->name + l, sizeof d->name - l, " tf32");
        }
        if (!why[0] && d->gpu >= 0 && cfg->compute.cuda_graphs) {
            const size_t l = strlen(d->name);
            snprintf(d->name + l, sizeof d->name - l, " graphs");
        }
        if (!why[0] && d->gpu >= 0 && cuda_device_cudnn() && local_rank == 0)
            fprintf(stderr, "dtrain: note: rank %d: cuDNN not loaded (%s): the convolutions "
                    "run lowered onto cuBLAS\n", rank, cuda_device_cudnn());
        bad = d->gpu < 0 || why[0];
#endif
    }
    MPI_CHECK(MPI_Comm_free(&users));
    if (bad) {
        fprintf(stderr, "dtrain: error on rank %d: %s\n", rank, why);
        fflush(stderr);
    }
    int any = bad;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, world));
    if (any && !bad)
        device_close(d);
    return any ? -1 : 0;
}

void device_close(dt_device *d)
{
#ifdef HAVE_CUDA
    if (d->gpu >= 0)
        cuda_device_close();
#endif
    d->gpu = -1;
}
