/* An edge-consensus node (doc/references.md, Edge-consensus learning): its
 * duals (or, for D-SGD, its neighbours' last parameters), the ISVR primal
 * update and the swaps.
 *
 * Notation for node i with E edges, step size mu, L2 strength lambda,
 * cycle K, theta_inv = 1 (PDMM, Peaceman-Rachford) or 2 (ADMM,
 * Douglas-Rachford), A_ij = +1 if j < i else -1:
 *   eta  = theta_inv / (mu (K E + K - theta_inv E))
 *   w   <- (w / mu - (g + lambda w) + sum_j A_ij eta z_ij) / (1 / mu + E eta)
 *   y_ij = z_ij - 2 A_ij w                       (the outgoing dual)
 *   swap:  PDMM  z_ij <- y_ji
 *          ADMM  z_ij <- (z_ij + y_ji) / 2
 * D-SGD: after the caller's local SGD step, w <- (w + sum_j w_j) / (E + 1)
 * with the last received w_j (initially the node's own start), and the
 * swaps exchange w.
 *
 * The public code's ADMM passes theta_inv = 1, which makes it PDMM, and
 * averages into a separate buffer every step; dtrain implements the two
 * splittings as the theory defines them (above). */
#ifndef DT_ALGO_ECL_CORE_H
#define DT_ALGO_ECL_CORE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/swap.h"
#include "topology/egraph.h"

typedef enum dt_ecl_kind { ECL_PDMM, ECL_ADMM, ECL_DSGD } dt_ecl_kind;

typedef struct dt_ecl {
    dt_ecl_kind kind;
    const dt_egraph *g;
    int rank, E;
    size_t n;
    float *w;           /* (n) the node's parameters (the caller's buffer) */
    float *buf;         /* (max_deg, n) one contiguous buffer: z_ij, or D-SGD's w_j */
    dt_swap *swap;
    double dz2;         /* sum over absorbed swaps of ||z_ij - y_ji||^2 (D-SGD:
                         * ||w_j new - w_j old||^2) */
    int64_t nabsorbed;
    int64_t version;    /* primal updates so far */
    int64_t *sent_version; /* (E) version last sent on each end */
    int64_t stale;      /* swaps that sent no newer w than the edge's previous one */
} dt_ecl;

/* eta of §7. */
double ecl_eta(double mu, int K, int E, double theta_inv);

/* The primal update alone, on plain arrays (g is overwritten): z holds E
 * vectors of n, sign the E signs A_ij. */
void ecl_primal(float *w, float *g, const float *z, const int *sign, int E, size_t n,
                double mu, double lambda, double theta_inv, int K);

/* Collective over comm. w: the node's parameters (n); buf starts at zero
 * (PDMM/ADMM) or at copies of w (D-SGD). threaded: asynchronous swaps. */
void ecl_init(dt_ecl *e, MPI_Comm comm, const dt_egraph *g, int rank, dt_ecl_kind kind,
              float *w, size_t n, int threaded);
/* The node's data are shared with the thread that answers swaps: change w
 * only between ecl_lock and ecl_unlock. */
void ecl_lock(dt_ecl *e);
void ecl_unlock(dt_ecl *e);
/* PDMM/ADMM: the primal step from gradient g (overwritten). D-SGD: the
 * neighbour average (g unused; the caller has taken its SGD step). Call
 * with the lock held. */
void ecl_update(dt_ecl *e, float *g, double mu, double lambda);
/* The swaps due at `step`. */
void ecl_swaps(dt_ecl *e, int64_t step);
/* Copy of buf taken under the swap lock (for a checkpoint). */
void ecl_snapshot(dt_ecl *e, float *out);
/* Put a restored buf back (before the first swap). */
void ecl_restore(dt_ecl *e, const float *in);
/* buf as ecl_init sets it, from the current w (before the first swap): a
 * start of the dual phase from the model w holds. */
void ecl_restart(dt_ecl *e);
void ecl_free(dt_ecl *e);

#endif
