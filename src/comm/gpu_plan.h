/* Host-side plans of the GPU path that need no device, so they are built and
 * tested in every build (tests/test_gpu_plan.c):
 *  - which GPU a rank drives: its index among the ranks of its node
 *    (MPI_Comm_split_type, shared memory), one GPU per rank, because NCCL
 *    refuses two ranks on one GPU;
 *  - the point-to-point operations of one gossip step as NCCL will issue them
 *    inside one ncclGroupStart/ncclGroupEnd: a send to each out-peer, a
 *    receive from each in-peer into its own slot (ascending in-peer order, the
 *    order the MPI transport sums them in);
 *  - when the NCCL transport stops waiting for an operation, and the line it
 *    ends the job with. */
#ifndef DT_COMM_GPU_PLAN_H
#define DT_COMM_GPU_PLAN_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "topology/topology.h"

/* The device of the rank with index local_rank among the local_size ranks of
 * its node, where ngpus devices are visible. Returns the device (local_rank),
 * or -1 after dt_err_set() when no GPU is visible or the node has fewer GPUs
 * than ranks. */
int gpu_choose(int local_rank, int local_size, int ngpus);

/* The calling rank's index and the number of ranks on its node, among the
 * ranks of comm (collective over comm). */
void gpu_node_rank(MPI_Comm comm, int *local_rank, int *local_size);
/* The same among the ranks of the node that see the same devices: visible
 * is the rank's CUDA_VISIBLE_DEVICES (NULL: unset, every device). Where the
 * scheduler binds one GPU to each task (Slurm's --gpus-per-task=1), each
 * rank is alone with its set and drives its device 0; where all ranks see
 * all GPUs, rank i drives GPU i; two ranks bound to one GPU still meet. */
void gpu_node_rank_visible(MPI_Comm comm, const char *visible, int *local_rank,
                           int *local_size);

typedef enum dt_p2p_kind { P2P_SEND, P2P_RECV } dt_p2p_kind;

typedef struct dt_p2p_op {
    dt_p2p_kind kind;
    int peer;   /* rank in the gossip communicator */
    int slot;   /* receives: index of the receive buffer; sends: -1 (one send buffer) */
} dt_p2p_op;

/* The operations of `rank` at gossip step `step` into ops (capacity 2 (n - 1)):
 * sends in out-peer (book) order, then receives in ascending in-peer order,
 * slot i for the i-th. Returns how many. */
int gpu_gossip_plan(const dt_topology *t, int rank, int64_t step, dt_p2p_op *ops);

/* One poll of an NCCL wait (comm/transport_nccl.c): done (the operation or the
 * stream completed), failed (the communicator reports an error other than
 * "in progress"), seconds elapsed since the wait began. Completion wins over
 * an error seen at the same poll, an error over the timeout; the wait times
 * out only after more than timeout seconds. */
typedef enum dt_wait_verdict {
    WAIT_DONE,      /* return */
    WAIT_AGAIN,     /* yield and poll again */
    WAIT_FAILED,    /* abort the communicator, end the job: gpu_wait_message */
    WAIT_TIMED_OUT, /* the same: a peer died, stopped or never joined */
} dt_wait_verdict;
dt_wait_verdict gpu_wait_verdict(int done, int failed, double elapsed, double timeout);
/* The one line (into buf, len bytes) a rank ends the job with for WAIT_FAILED
 * (error: NCCL's error string and last error) or WAIT_TIMED_OUT: this rank,
 * the operation (what) and the timeout. */
void gpu_wait_message(char *buf, size_t len, dt_wait_verdict v, int rank, int size,
                      const char *what, double timeout, const char *error);

#endif
