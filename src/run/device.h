/* compute.device and comm.transport at start-up: the checks that need no
 * GPU, the choice of one GPU per rank by its index among the ranks of its
 * node (comm/gpu_plan.c) and opening that GPU (backend/cuda_device.c). */
#ifndef DT_RUN_DEVICE_H
#define DT_RUN_DEVICE_H

#include <mpi.h>
#include <stddef.h>

#include "io/settings.h"

typedef struct dt_device {
    int cuda;         /* 1: compute.device = cuda */
    int gpu;          /* the CUDA device index, -1: none */
    char name[96];    /* for the rank table: "cpu" or "cuda:0 <GPU name>" */
} dt_device;

/* The one-line reason why cfg cannot run on this rank before any GPU is
 * touched (device = cuda in a CPU-only build, nccl without cuda or without
 * NCCL built in), or NULL. Pure: tested in tests/test_gpu_plan.c. */
const char *device_config_error(const dt_config *cfg, char *buf, size_t len);

/* Collective over world: each rank checks its own group's configuration,
 * chooses and opens its GPU; every rank that fails prints its one-line
 * error; returns 0 on every rank, or -1 on every rank if any failed. */
int device_open(const dt_config *cfg, MPI_Comm world, dt_device *d);
void device_close(dt_device *d);

#endif
