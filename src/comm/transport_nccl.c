/* The NCCL transport: the algorithms' vectors reduced, broadcast and
 * exchanged by NCCL on the rank's GPU (see comm/transport.h for the
 * contract). The MPI communicator it was made from keeps the control
 * traffic: the unique id's broadcast and barriers.
 *
 * The communicator is nonblocking (ncclConfig_t.blocking = 0): no NCCL call
 * waits for the peers inside NCCL, each may return ncclInProgress, and the
 * host then polls ncclCommGetAsyncError (settle) with the same timeout as the
 * operations, so a peer that died, or never joined, ends the job with a
 * message instead of a hang. */
#include "config.h"

#include "comm/transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cuda_check.h"
#include "backend/cuda_device.h"
#include "comm/gpu_plan.h"
#include "core/error.h"
#include "core/watchdog.h"

#define NCCL_OK(call)                                                                    \
    do {                                                                                 \
        const ncclResult_t r_ = (call);                                                  \
        if (r_ != ncclSuccess)                                                           \
            DT_FATAL("%s: %s (%s); hint: NCCL_DEBUG=WARN prints NCCL's view", #call,     \
                     ncclGetErrorString(r_), ncclGetLastError(NULL));                    \
    } while (0)

/* The one NCCL call of a nonblocking communicator whose return code is not
 * settled by settle(): getting the state it polls. */
#define NCCL_ASYNC(comm, r)                                                              \
    do {                                                                                 \
        const ncclResult_t q_ = ncclCommGetAsyncError((comm), (r));                      \
        if (q_ != ncclSuccess)                                                           \
            DT_FATAL("ncclCommGetAsyncError: %s (%s)", ncclGetErrorString(q_),            \
                     ncclGetLastError(NULL));                                            \
    } while (0)

/* One isend or irecv waiting for waitall. */
typedef struct p2p_op {
    int send, peer;
    float *buf;       /* the caller's buffer */
    size_t n;
    float *dev;       /* its device copy (buf itself when buf is device memory) */
} p2p_op;

typedef struct nccl_transport {
    dt_transport base; /* first: a dt_transport * is a nccl_transport * */
    ncclComm_t comm;
    cudaStream_t stream;
    double timeout;
    float *stage;      /* device staging of host buffers, stage_n floats */
    size_t stage_n;
    p2p_op *ops;
    int nops, cap;
} nccl_transport;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int is_device(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); // plain host memory on old runtimes
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static float *stage(nccl_transport *t, size_t n)
{
    if (n > t->stage_n) {
        if (t->stage)
            cuda_device_free(t->stage);
        t->stage = cuda_device_malloc(n * sizeof(float));
        t->stage_n = n;
    }
    return t->stage;
}

/* Ends the job for a wait that failed or timed out (comm/gpu_plan.h decides
 * and words it): the communicator is aborted first, so no peer keeps waiting
 * on this rank's part of it. */
static void give_up(nccl_transport *t, dt_wait_verdict v, const char *what, ncclResult_t r)
{
    char err[512], line[1024];
    snprintf(err, sizeof err, "%s (%s)", ncclGetErrorString(r), ncclGetLastError(t->comm));
    gpu_wait_message(line, sizeof line, v, t->base.rank, t->base.size, what, t->timeout, err);
    const ncclResult_t a = ncclCommAbort(t->comm);
    if (a != ncclSuccess)
        DT_FATAL("%s; ncclCommAbort then failed too: %s", line, ncclGetErrorString(a));
    DT_FATAL("%s", line);
}

/* One poll of a wait begun at t0 (comm/gpu_plan.h decides): 1 when done; on
 * an error or after comm.nccl_timeout the job ends (give_up); else the CPU is
 * yielded and 0 returned, to poll again. */
static int polled(nccl_transport *t, int done, ncclResult_t r, double t0, const char *what)
{
    const dt_wait_verdict v = gpu_wait_verdict(done, r != ncclSuccess && r != ncclInProgress,
                                               now() - t0, t->timeout);
    if (v == WAIT_DONE)
        return 1;
    if (v != WAIT_AGAIN)
        give_up(t, v, what, r);
    sched_yield();
    return 0;
}

/* The return code r of an NCCL call on the nonblocking communicator (what
 * names it): ncclInProgress is polled until the communicator is idle, at most
 * comm.nccl_timeout seconds; an error or the timeout aborts the communicator
 * and ends the job with one line naming this rank. */
static void settle(nccl_transport *t, ncclResult_t r, const char *what)
{
    const double t0 = now();
    while (!polled(t, r == ncclSuccess, r, t0, what))
        NCCL_ASYNC(t->comm, &r);
}

/* Waits for the stream, polling NCCL's asynchronous error: a peer that died
 * makes the communicator fail (or never finish) instead of hanging the job. */
static void wait_stream(nccl_transport *t, const char *what)
{
    const double t0 = now();
    for (;;) {
        const cudaError_t e = cudaStreamQuery(t->stream);
        if (e != cudaSuccess && e != cudaErrorNotReady)
            CUDA_OK(e);
        ncclResult_t r = ncclSuccess;
        if (e != cudaSuccess)
            NCCL_ASYNC(t->comm, &r);
        if (polled(t, e == cudaSuccess, r, t0, what))
            return;
    }
}

/* A host buffer's device copy for a collective, or the buffer itself: a
 * device vector (the modes with device_vectors) is used in place, once the
 * compute stream's kernels that write it have run. */
static float *to_dev(nccl_transport *t, float *buf, size_t n, int copy)
{
    if (is_device(buf)) {
        cuda_stream_after_compute(t->stream);
        return buf;
    }
    float *d = stage(t, n);
    if (copy)
        CUDA_OK(cudaMemcpyAsync(d, buf, n * sizeof(float), cudaMemcpyHostToDevice, t->stream));
    return d;
}

static void from_dev(nccl_transport *t, float *buf, const float *d, size_t n)
{
    if (d != buf)
        CUDA_OK(cudaMemcpyAsync(buf, d, n * sizeof(float), cudaMemcpyDeviceToHost, t->stream));
}

static void nccl_allreduce_sum(dt_transport *base, float *buf, size_t n)
{
    nccl_transport *t = (nccl_transport *)base;
    watchdog_phase("a collective (NCCL allreduce over the group)", -1);
    float *d = to_dev(t, buf, n, 1);
    settle(t, ncclAllReduce(d, d, n, ncclFloat, ncclSum, t->comm, t->stream), "allreduce");
    from_dev(t, buf, d, n);
    wait_stream(t, "allreduce");
}

static void nccl_reduce_sum(dt_transport *base, float *buf, size_t n, int root)
{
    nccl_transport *t = (nccl_transport *)base;
    watchdog_phase("a collective (NCCL reduce to rank %d)", root);
    float *d = to_dev(t, buf, n, 1);
    settle(t, ncclReduce(d, d, n, ncclFloat, ncclSum, root, t->comm, t->stream), "reduce");
    if (base->rank == root) // elsewhere buf is unchanged
        from_dev(t, buf, d, n);
    wait_stream(t, "reduce");
}

static void nccl_bcast(dt_transport *base, float *buf, size_t n, int root)
{
    nccl_transport *t = (nccl_transport *)base;
    watchdog_phase("a collective (NCCL broadcast from rank %d)", root);
    float *d = to_dev(t, buf, n, base->rank == root);
    settle(t, ncclBroadcast(d, d, n, ncclFloat, root, t->comm, t->stream), "broadcast");
    from_dev(t, buf, d, n);
    wait_stream(t, "broadcast");
}

static void push_op(nccl_transport *t, int send, const float *buf, size_t n, int peer,
                    dt_request *r)
{
    if (t->nops == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->ops = dt_realloc(t->ops, (size_t)t->cap * sizeof *t->ops);
    }
    t->ops[t->nops++] = (p2p_op){ send, peer, (float *)buf, n, NULL };
    r->n = 0; // nothing for MPI to wait on
    r->peer = peer;
    r->recv = !send;
}

static void nccl_isend(dt_transport *base, const float *buf, size_t n, int peer, int tag,
                       dt_request *r)
{
    push_op((nccl_transport *)base, 1, buf, n, peer, r);
}

static void nccl_irecv(dt_transport *base, float *buf, size_t n, int peer, int tag,
                       dt_request *r)
{
    push_op((nccl_transport *)base, 0, buf, n, peer, r);
}

/* Every gathered send and receive in one group (one gossip step). */
static void nccl_waitall(dt_transport *base, dt_request *r, int count)
{
    nccl_transport *t = (nccl_transport *)base;
    if (t->nops == 0)
        return;
    watchdog_phase("NCCL sends and receives of rank %d's step", base->rank);
    // host buffers get slots of the staging buffer; a send buffer given to
    // several peers is staged once
    size_t need = 0;
    for (int i = 0; i < t->nops; i++)
        if (!is_device(t->ops[i].buf))
            need += t->ops[i].n;
    float *s = stage(t, need);
    size_t off = 0;
    for (int i = 0; i < t->nops; i++) {
        p2p_op *o = &t->ops[i];
        if (is_device(o->buf)) {
            cuda_stream_after_compute(t->stream);
            o->dev = o->buf;
            continue;
        }
        for (int j = 0; j < i && o->send; j++)
            if (t->ops[j].send && t->ops[j].buf == o->buf && t->ops[j].n == o->n)
                o->dev = t->ops[j].dev;
        if (o->dev)
            continue;
        o->dev = s + off;
        off += o->n;
        if (o->send)
            CUDA_OK(cudaMemcpyAsync(o->dev, o->buf, o->n * sizeof(float),
                                    cudaMemcpyHostToDevice, t->stream));
    }
    NCCL_OK(ncclGroupStart());
    for (int i = 0; i < t->nops; i++) {
        const p2p_op *o = &t->ops[i];
        // inside a group the calls only queue: ncclGroupEnd's code is settled
        const ncclResult_t r = o->send
            ? ncclSend(o->dev, o->n, ncclFloat, o->peer, t->comm, t->stream)
            : ncclRecv(o->dev, o->n, ncclFloat, o->peer, t->comm, t->stream);
        if (r != ncclInProgress)
            NCCL_OK(r);
    }
    settle(t, ncclGroupEnd(), "send/receive group");
    for (int i = 0; i < t->nops; i++)
        if (!t->ops[i].send)
            from_dev(t, t->ops[i].buf, t->ops[i].dev, t->ops[i].n);
    wait_stream(t, "send/receive group");
    t->nops = 0;
}

static void nccl_barrier(dt_transport *base)
{
    watchdog_phase("a collective (barrier)", -1);
    MPI_CHECK(MPI_Barrier(base->comm));
}

static void nccl_destroy(dt_transport *base)
{
    nccl_transport *t = (nccl_transport *)base;
    CUDA_OK(cudaStreamSynchronize(t->stream));
    settle(t, ncclCommFinalize(t->comm), "communicator finalize");
    NCCL_OK(ncclCommDestroy(t->comm));
    if (t->stage)
        cuda_device_free(t->stage);
    CUDA_OK(cudaStreamDestroy(t->stream));
    free(t->ops);
}

dt_transport *transport_nccl_create(MPI_Comm comm, double timeout_s)
{
    nccl_transport *t = dt_calloc(1, sizeof *t);
    dt_transport *b = &t->base;
    b->name = "nccl";
    MPI_CHECK(MPI_Comm_dup(comm, &b->comm));
    MPI_CHECK(MPI_Comm_rank(b->comm, &b->rank));
    MPI_CHECK(MPI_Comm_size(b->comm, &b->size));
    t->timeout = timeout_s;
    ncclUniqueId id;
    if (b->rank == 0)
        NCCL_OK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, b->comm));
    CUDA_OK(cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    settle(t, ncclCommInitRankConfig(&t->comm, b->size, id, b->rank, &config),
           "communicator creation (ncclCommInitRankConfig)");
    b->allreduce_sum = nccl_allreduce_sum;
    b->reduce_sum = nccl_reduce_sum;
    b->bcast = nccl_bcast;
    b->isend = nccl_isend;
    b->irecv = nccl_irecv;
    b->waitall = nccl_waitall;
    b->barrier = nccl_barrier;
    b->destroy = nccl_destroy;
    return b;
}
