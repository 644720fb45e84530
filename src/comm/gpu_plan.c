#include "comm/gpu_plan.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"

int gpu_choose(int local_rank, int local_size, int ngpus)
{
    if (ngpus <= 0)
        return dt_err_set("compute.device = cuda: no GPU is visible on this node");
    if (ngpus < local_size)
        return dt_err_set("compute.device = cuda: %d ranks on this node but %d visible GPU%s "
                          "(one GPU per rank: NCCL refuses two ranks on one GPU; place at most "
                          "%d ranks per node, e.g. --gpus-per-task=1)",
                          local_size, ngpus, ngpus == 1 ? "" : "s", ngpus);
    if (local_rank < 0 || local_rank >= local_size)
        return dt_err_set("gpu_choose: local rank %d outside [0, %d)", local_rank, local_size);
    return local_rank;
}

void gpu_node_rank(MPI_Comm comm, int *local_rank, int *local_size)
{
    MPI_Comm node;
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    // key = rank in comm: the node's ranks are numbered in comm's order
    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, local_rank));
    MPI_CHECK(MPI_Comm_size(node, local_size));
    MPI_CHECK(MPI_Comm_free(&node));
}

void gpu_node_rank_visible(MPI_Comm comm, const char *visible, int *local_rank,
                           int *local_size)
{
    MPI_Comm node, same;
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    // colour: FNV-1a of the device list (unset and "" differ); ranks whose lists
    // collide would share a colour and be counted together: an error, not a
    // silent share of one GPU
    uint32_t h = 2166136261u;
    if (visible) {
        for (const char *c = visible; *c; c++)
            h = (h ^ (uint8_t)*c) * 16777619u;
        h ^= 0x5a5a5a5au;
    }
    MPI_CHECK(MPI_Comm_split(node, (int)(h & 0x3fffffff), rank, &same));
    MPI_CHECK(MPI_Comm_rank(same, local_rank));
    MPI_CHECK(MPI_Comm_size(same, local_size));
    MPI_CHECK(MPI_Comm_free(&same));
    MPI_CHECK(MPI_Comm_free(&node));
}

int gpu_gossip_plan(const dt_topology *t, int rank, int64_t step, dt_p2p_op *ops)
{
    int *peers = dt_malloc((size_t)(t->n > 1 ? t->n - 1 : 1) * sizeof(int));
    int m = 0;
    const int nout = topology_out_peers(t, rank, step, peers);
    for (int i = 0; i < nout; i++)
        ops[m++] = (dt_p2p_op){P2P_SEND, peers[i], -1};
    const int nin = topology_in_peers(t, rank, step, peers);
    for (int i = 0; i < nin; i++)
        ops[m++] = (dt_p2p_op){P2P_RECV, peers[i], i};
    free(peers);
    return m;
}

dt_wait_verdict gpu_wait_verdict(int done, int failed, double elapsed, double timeout)
{
    if (done)
        return WAIT_DONE;
    if (failed)
        return WAIT_FAILED;
    if (elapsed > timeout)
        return WAIT_TIMED_OUT;
    return WAIT_AGAIN;
}

void gpu_wait_message(char *buf, size_t len, dt_wait_verdict v, int rank, int size,
                      const char *what, double timeout, const char *error)
{
    if (v == WAIT_TIMED_OUT)
        snprintf(buf, len, "rank %d of %d: NCCL %s not complete after comm.nccl_timeout = %.0f s "
                 "(a peer died, stopped or never joined); the job ends", rank, size, what,
                 timeout);
    else if (v == WAIT_FAILED)
        snprintf(buf, len, "rank %d of %d: NCCL %s failed: %s; hint: NCCL_DEBUG=WARN prints "
                 "NCCL's view", rank, size, what, error ? error : "(no error string)");
    else
        snprintf(buf, len, "rank %d of %d: NCCL %s: nothing to report (%s)", rank, size, what,
                 v == WAIT_DONE ? "done" : "still waiting");
}
