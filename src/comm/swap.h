/* Pairwise swaps with graph neighbours (edge-consensus learning:
 * doc/references.md, Edge-consensus learning).
 *
 * Every edge end of this rank carries one vector of n floats. A swap of an
 * edge sends this rank's vector for it and receives the neighbour's (both
 * directions in one exchange). Which swaps happen at step t comes from the
 * edge graph's phases (topology/egraph.h):
 *
 *   threaded (asynchronous): this rank starts the swaps of its ends with
 *     phase t mod K and blocks until each is answered; a communication thread
 *     answers the swaps its neighbours start, whenever they arrive, without
 *     pausing training. Between the two ranks the vectors are whatever each
 *     had last made.
 *   lockstep (synchronous): at step t both ranks of every edge with an end due
 *     swap in their main threads, so the result depends on nothing but the
 *     step: runs (and resumed runs) are reproducible bit for bit.
 *
 * The caller supplies fill(arg, end, out) (write the outgoing vector of an
 * end) and absorb(arg, end, in) (take the neighbour's vector); both are
 * called with the swap lock held, so the caller guards the data they read
 * and write with swap_lock/swap_unlock. Threaded swaps need
 * MPI_THREAD_MULTIPLE. */
#ifndef DT_COMM_SWAP_H
#define DT_COMM_SWAP_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "topology/egraph.h"

typedef void (*dt_swap_fill)(void *arg, int end, float *out);
typedef void (*dt_swap_absorb)(void *arg, int end, const float *in);

typedef struct dt_swap_stats {
    int64_t started;    /* swaps this rank started (or, lockstep, took part in) */
    int64_t answered;   /* threaded: swaps its thread answered */
    int64_t bytes_sent;
} dt_swap_stats;

typedef struct dt_swap dt_swap;

/* Collective over comm (duplicates it). g: the edge graph, rank: this
 * rank's node in it (its rank in comm). */
dt_swap *swap_create(MPI_Comm comm, const dt_egraph *g, int rank, size_t n, int threaded,
                     dt_swap_fill fill, dt_swap_absorb absorb, void *arg);
void swap_lock(dt_swap *s);
void swap_unlock(dt_swap *s);
/* The swaps due at step `step` (blocking until they are done). */
void swap_due(dt_swap *s, int64_t step);
/* Threaded: tell every neighbour this rank starts no more swaps, and wait
 * until every neighbour has said the same (its thread answers until then).
 * Every rank of the graph must call it. Lockstep: nothing to do. */
void swap_finish(dt_swap *s);
/* Counters since the start (threaded: the thread's are folded in under the lock). */
dt_swap_stats swap_stats(dt_swap *s);
void swap_free(dt_swap *s);

#endif
