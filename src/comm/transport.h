/* Transport: the communication an algorithm needs, on flat float vectors.
 *
 * Algorithms never call MPI for their data: they call a dt_transport, so an
 * NCCL transport slots in beside the MPI one. Counts are size_t; transports
 * split messages larger than their library's count type. */
#ifndef DT_COMM_TRANSPORT_H
#define DT_COMM_TRANSPORT_H

#include <mpi.h>
#include <stddef.h>

#include "backend/backend.h"

typedef struct dt_transport dt_transport;

/* Handle of a non-blocking transfer. */
typedef struct dt_request {
    int n;
    MPI_Request req[8];
    int peer, recv;     /* for the stall watchdog: whom a wait is for (-1: a collective) */
} dt_request;

struct dt_transport {
    const char *name;
    MPI_Comm comm;
    int rank, size;
    /* buf <- sum over ranks of buf (in place) */
    void (*allreduce_sum)(dt_transport *t, float *buf, size_t n);
    /* on root: buf <- sum over ranks of buf (in place); elsewhere buf is unchanged */
    void (*reduce_sum)(dt_transport *t, float *buf, size_t n, int root);
    /* buf <- root's buf */
    void (*bcast)(dt_transport *t, float *buf, size_t n, int root);
    void (*isend)(dt_transport *t, const float *buf, size_t n, int peer, int tag, dt_request *r);
    void (*irecv)(dt_transport *t, float *buf, size_t n, int peer, int tag, dt_request *r);
    /* Non-blocking all-gather, completed by waitall: recv (size * n) <- the
     * send (n) of every rank, rank r's at recv + r n. Collective: every rank
     * posts it with the same n, in the same order as its other collectives.
     * NULL where the transport has none (NCCL: the modes that gather keep
     * MPI, dt_algo.nccl). */
    void (*iallgather)(dt_transport *t, const float *send, size_t n, float *recv, dt_request *r);
    /* Completes every request in r[0..count). */
    void (*waitall)(dt_transport *t, dt_request *r, int count);
    void (*barrier)(dt_transport *t);
    /* the transport's own teardown before transport_free's (NULL: none) */
    void (*destroy)(dt_transport *t);
};

/* An MPI transport over comm (the communicator is duplicated, so transport
 * traffic never matches other messages). */
dt_transport *transport_mpi_create(MPI_Comm comm);
void transport_free(dt_transport *t);

#ifdef DTRAIN_SIM
/* The simulator's model of an exchange in which every rank sends to every
 * other rank at once (sim.gather = links; src/sim/sim.h): this rank's whole
 * share, nsend floats of send, goes as one message to the next rank (rank + 1
 * mod size), and nrecv floats, what the previous rank passes as its nsend,
 * arrive in recv from the previous rank; both in r, completed by waitall.
 * On a platform whose nodes meet at one non-blocking switch, every node's
 * link carries the same bytes as with one message per peer, in p flows
 * instead of p (p - 1), which SMPI simulates in a fraction of the time. The
 * contents are meaningless (the simulator's vectors are shared). each: the
 * smallest per-peer message of the exchange, in floats, the same on every
 * rank. Returns 0 and posts nothing where sim.gather = peers, on one rank, or
 * where each is under 65,472 bytes (below that SMPI's bandwidth and latency
 * factors depend on the message size, which one message per rank would
 * change); the caller then posts its messages to every peer. */
int transport_sim_links(dt_transport *t, const float *send, size_t nsend, float *recv,
                        size_t nrecv, size_t each, int tag, dt_request *r);
#endif

/* A transport for vectors in a device backend's memory (be->device) over a
 * host transport (MPI): every buffer is staged through host memory of
 * be->host_alloc (page-locked on CUDA) with be->to_host and be->to_backend.
 * Takes inner over: transport_free frees both. */
dt_transport *transport_staged_create(dt_transport *inner, const dt_backend *be);

/* An NCCL transport over comm (comm/transport_nccl.c, built --with-nccl): one
 * NCCL communicator for comm's ranks, from an ncclUniqueId that comm's rank 0
 * creates and broadcasts over MPI; collectives by ncclAllReduce, ncclReduce,
 * ncclBroadcast; isend/irecv are gathered and issued at waitall in one
 * ncclGroupStart/ncclGroupEnd (NCCL matches a pair's operations in issue
 * order: tags are not used). Buffers may be device or host memory; host
 * buffers are staged through one device buffer; a device buffer is used in
 * place once the compute stream's work before the call is done. The
 * communicator is nonblocking: while it is created and while an operation
 * runs, ncclCommGetAsyncError is polled; an error, or no completion within
 * timeout_s seconds, ends the job with a message naming the rank. Barriers
 * go over MPI.
 * Collective over comm; every rank must have opened its GPU. */
dt_transport *transport_nccl_create(MPI_Comm comm, double timeout_s);

#endif
