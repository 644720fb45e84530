/* Edge graphs of edge-consensus learning (doc/references.md, Edge-consensus learning).
 *
 * An undirected graph whose edges are swapped on a cycle of K steps: each
 * END of an edge has its own phase in 0..K-1, and at step t the rank swaps
 * with every neighbour whose edge end on its side has phase t mod K (so an
 * edge is swapped twice per cycle, once started by each end). The sign of an
 * edge end is A_ij = +1 if j < i (j comes before i in the node list), -1
 * otherwise, so A_ij = -A_ji.
 *
 * Kinds (every rank builds the same graph from the same inputs):
 *   ring            i -- i+1 (mod n)
 *   multiplex-ring  i -- i+1 and i -- i+2 (mod n): the reference's
 *                   "double ring" of its 8-node configurations
 *   random          a random spanning tree plus random extra edges until the
 *                   mean degree reaches `mean_degree` (seeded; connected)
 *   complete        every pair
 *   file            an edge list (see egraph_create)
 * Generated graphs get automatic phases: the ends of rank i, sorted by
 * neighbour, get phases (i + m * K / deg_i) mod K, m = 0..deg_i-1 (distinct
 * when deg_i <= K). */
#ifndef DT_TOPOLOGY_EGRAPH_H
#define DT_TOPOLOGY_EGRAPH_H

#include <stdint.h>

typedef struct dt_eend {
    int peer;           /* the neighbour j */
    int phase;          /* this end's phase: i starts the swap at t mod K == phase */
    int peer_phase;     /* the other end's: j starts the swap then */
    int sign;           /* A_ij: +1 if j < i, -1 if j > i */
} dt_eend;

typedef struct dt_egraph {
    int n;              /* ranks */
    int K;              /* steps per cycle */
    int max_deg;
    int *deg;           /* (n) */
    dt_eend **adj;      /* (n) per rank: its edge ends, sorted by peer */
} dt_egraph;

/* kind: "ring", "multiplex-ring", "random", "complete" or "file" (then
 * `file` is the path). K >= 1: the cycle (a file's "round K" line overrides
 * it). File format, one item per line, '#' starts a comment:
 *     round K          optional, the cycle length
 *     I J              an undirected edge, automatic phases
 *     I J PI PJ        an edge with the phase of its end at I and at J
 * (either every edge line has phases or none has). Returns -1 after
 * dt_err_set() naming the file and line: malformed line, rank outside
 * [0, n), self-loop, duplicate edge, phase outside [0, K), mixed phase
 * styles, a rank without edges, a graph that is not connected; for generated
 * kinds: n too small (ring 2, multiplex-ring 5, random 2), mean_degree < 2. */
int egraph_create(dt_egraph *g, const char *kind, int n, int K, uint64_t seed,
                  double mean_degree, const char *file);
void egraph_free(dt_egraph *g);

/* The end of rank i's edge to j, or NULL. */
const dt_eend *egraph_end(const dt_egraph *g, int i, int j);

#endif
