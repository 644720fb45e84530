/* Communication graphs of the gossip algorithms (doc/references.md, Gossip topologies).
 *
 * Every rank builds the same dt_topology from (kind, n, k, file), so the
 * out-peers and in-peers of ANY rank at ANY gossip step are computed locally,
 * without communication. Each rank has a "phone book", an ordered list of
 * peers; at gossip step s a rank sends to the k book entries starting at
 * index (s * k) mod len (time-varying graphs); static graphs use their whole
 * book at every step. j is an in-peer of i at step s iff i is an out-peer of
 * j at s.
 *
 * Kinds:
 *   exponential       offsets j*(k+1)^e, j = 1..k, e = 0..floor(log_{k+1}(n-1))
 *                     (integer arithmetic), ordered by e then j, reduced mod n,
 *                     0 and duplicates dropped; forward only; time-varying.
 *                     k = 1: step s sends to i + 2^(s mod L).
 *   exponential-both  +1, -1, +2, -2, +4, -4, ... (powers of two < n), mod n,
 *                     deduplicated (+d == -d mod n appears once); time-varying.
 *   bipartite         even ranks passive, odd active; offsets +-1, +-3, +-5,
 *                     +-9, +-17, ... (1 and 1 + 2^e, e >= 1, while < n);
 *                     active books [+d, -d, ...], passive books [-d, +d, ...]
 *                     so at every index an active rank's out-peer is the
 *                     passive rank whose out-peer it is (symmetric pairs);
 *                     n even; time-varying.
 *   ring              +1 (k = 1) or +1, -1 (k = 2); static.
 *   complete          all other ranks; static; k = n - 1.
 *   file              undirected edge list; static; a rank's peers are its
 *                     neighbours (k = its degree, may differ between ranks).
 */
#ifndef DT_TOPOLOGY_TOPOLOGY_H
#define DT_TOPOLOGY_TOPOLOGY_H

#include <stdint.h>

typedef enum dt_topo_kind {
    TOPO_EXPONENTIAL, TOPO_EXPONENTIAL_BOTH, TOPO_BIPARTITE, TOPO_RING, TOPO_COMPLETE,
    TOPO_FILE
} dt_topo_kind;

typedef struct dt_topology {
    dt_topo_kind kind;
    int n;              /* ranks */
    int k;              /* peers per step (file graphs: the largest degree) */
    int is_static;      /* the whole book at every step */
    int **book;         /* (n) per rank: absolute peer ranks, in book order */
    int *len;           /* (n) book lengths */
} dt_topology;

/* kind: "exponential", "exponential-both", "bipartite", "ring", "complete",
 * "file" (then `file` is the edge-list path). k: peers per step (ignored for
 * complete and file). Returns -1 after dt_err_set() for an invalid
 * combination: unknown kind, n < 2, k < 1, k >= n, bipartite with odd n, ring
 * with k > 2, a time-varying book shorter than k, a file that cannot be read,
 * has a malformed line (message names file and line), names a rank outside
 * [0, n), a self-loop, or is not connected. */
int topology_create(dt_topology *t, const char *kind, int n, int k, const char *file);
void topology_free(dt_topology *t);

/* Out-peers of `rank` at gossip step `step` into peers (capacity >= t->k, or
 * the rank's degree for file graphs); returns how many. */
int topology_out_peers(const dt_topology *t, int rank, int64_t step, int *peers);
/* In-peers of `rank` at `step` (capacity n - 1), ascending rank order. */
int topology_in_peers(const dt_topology *t, int rank, int64_t step, int *peers);
/* Bipartite graphs: 1 for active (odd) ranks, 0 for passive. Others: 1. */
int topology_is_active(const dt_topology *t, int rank);
/* Edge-list file format, for the documentation and the error messages:
 *   # comment lines and blank lines are ignored
 *   I J            one undirected edge between ranks I and J per line
 * Duplicate edges are merged. */

#endif
