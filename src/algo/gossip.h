/* What the gossip modes (dpsgd, sgp, osgp) share: the topology chosen by the
 * deck, and one exchange of a flat message with the step's peers.
 *
 * A message is the parameter vector plus, for push-sum, the weight appended
 * at the end: (n + 1) floats, sent with one call per peer. Received messages
 * are summed in ascending in-peer order into one accumulator, so the result
 * does not depend on arrival order (bit-exact restarts).
 *
 * The buffers live in the memory of the backend `v` given to gossip_init
 * (trainer_vectors(t): device memory for the modes with device_vectors) and
 * all arithmetic on them goes through its flat_* ops; the push-sum weight w
 * is a 1-float vector of the same memory, so it is scaled, sent and summed
 * like the rest of the message. */
#ifndef DT_ALGO_GOSSIP_H
#define DT_ALGO_GOSSIP_H

#include <stddef.h>
#include <stdint.h>

#include "comm/transport.h"
#include "topology/topology.h"
#include "io/settings.h"

typedef struct dt_gossip {
    dt_topology topo;
    const dt_backend *v;   /* whose memory holds the buffers, whose ops do the sums */
    size_t len;            /* floats per message */
    float *send;           /* (len) push-sum's outgoing message (pushsum_share
                            * allocates it; dpsgd sends x itself) */
    float *recv;           /* (nslots, len) one slot per in-peer of the exchange */
    int nslots;            /* the most in-peers of an exchange so far: a rank has
                            * few at a step (1 on the exponential graph), not n - 1 */
    int *out, *in;         /* peers of the current exchange */
    int nout, nin;
    dt_request *req;       /* (2 (n - 1)) */
    int nreq;
} dt_gossip;

/* The topology named by the deck (`fallback` for topology = auto). Returns
 * -1 after dt_err_set() naming the key for an invalid combination. */
int gossip_topology(dt_topology *topo, const dt_config *cfg, int nranks, const char *fallback);
/* Builds the topology and the buffers for messages of `len` floats in v's
 * memory. */
int gossip_init(dt_gossip *g, const dt_config *cfg, int rank, int nranks, size_t len,
                const char *fallback, const dt_backend *v);
/* Out- and in-peers of `rank` at gossip step `step` into g->out / g->in. */
void gossip_peers(dt_gossip *g, int rank, int64_t step);
/* Starts sending msg (len floats, left unchanged until gossip_finish) to
 * every out-peer and receiving from every in-peer into g->recv. */
void gossip_start(dt_gossip *g, dt_transport *tp, const float *msg);
/* Completes the exchange started by gossip_start. */
void gossip_finish(dt_gossip *g, dt_transport *tp);
/* acc (len) = sum of the received messages, ascending in-peer order; with
 * weights c (nin floats, host memory; NULL: all 1) the weighted sum. */
void gossip_sum_received(const dt_gossip *g, const float *c, float *acc);
void gossip_free(dt_gossip *g);

/* Push-sum pieces shared by sgp and osgp (doc/references.md, SGP); the message is
 * x (n floats) followed by the weight w (1 float); x, w, acc and z in g->v's
 * memory.
 * Keep (x, w) / (k+1) and put the same share into g->send for the out-peers
 * of gossip step `step`; returns the payload bytes the exchange will send. */
int64_t pushsum_share(dt_gossip *g, int rank, int64_t step, float *x, size_t n, float *w);
/* x += acc[0..n); w += acc[n] (acc from gossip_sum_received). */
void pushsum_absorb(const dt_gossip *g, const float *acc, float *x, size_t n, float *w);
/* z = x / w, the de-biased model. */
void pushsum_debias(const dt_gossip *g, const float *x, size_t n, const float *w, float *z);

#endif
