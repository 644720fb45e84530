/* What DiLoCo's files share (algo/diloco.c: the algorithm, its set-up,
 * checkpoint arrays and ops tables; algo/diloco_wire.c: the exchange of a
 * pseudo-gradient over the network; algo/diloco_timed.c: the time-bounded
 * inner loops): the state and the calls between them. Private to those
 * files. */
#ifndef DT_DILOCO_INT_H
#define DT_DILOCO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "algo/gossip.h"
#include "algo/quant.h"
#include "algo/topk_codec.h"
#include "comm/transport.h"

struct dt_trainer;

typedef struct diloco_state {
    int64_t H, K, P, overlap;
    int64_t lag;         /* steps an exchange stays in flight: overlap, or H with delay */
    float lr, mu, alpha;
    float beta;          /* error feedback's decay */
    int nesterov, ef, gossip, topk, delay;
    dt_quant fmt;
    dt_tkc tk;           /* compress = topk: the codes' format */
    float *theta;        /* (n) outer parameters (replicated, or per rank with gossip) */
    float *b;            /* (n) outer momentum */
    float *delta;        /* (n) pseudo-gradient as sent (with the residual added) */
    float *err;          /* (n) residual of the codes (error feedback) */
    float *mean;         /* (n) averaged pseudo-gradient; scratch before it */
    float *x_sent;       /* (n) delay: x when the pseudo-gradient in flight was taken */
    float *x_local;      /* (n) delay: x as the local steps left it (checkpointed; differs
                          * from x only after the end's drain) */
    int pending;         /* fragment whose exchange is in flight; -1: none */
    int drained;         /* delay: the end applied the exchange in flight to x only */
    /* inner_time > 0: time-bounded loops (the timed table, algo_diloco_timed) */
    double inner_time;   /* seconds per outer loop */
    int loop_open;       /* a loop has started: loop_t0 and loop_images are its */
    double loop_t0;      /* trainer_clock() when the loop started */
    int64_t loop_images; /* t->meter.images then */
    int64_t loop_steps;  /* this rank's steps in the loop */
    int64_t outer;       /* outer steps done (the same on every rank) */
    int64_t sum_steps;   /* sum over ranks of their steps, agreed at the last exchange */
    int64_t prev_sum;    /* sum_steps at the exchange before (checkpoint_every) */
    int stop_seen;       /* a stop flag seen since the last exchange */
    int stop_any;        /* the last exchange: some rank had one */
    int exchanged;       /* an exchange happened in the step just taken */
    int64_t *counts;     /* (3 R) per rank: samples in the loop, steps, stop flag */
    float *wt;           /* (R) rank weights n_r / sum n; NULL: 1 / R each */
    float *scratch;      /* (values of a chunk or fragment) one rank's decoded codes */
    float clock[4];      /* the outer steps and sum_steps as ckpt_count_put pairs */
    /* reduce-scatter + all-gather of one fragment cut into R chunks of whole
     * QUANT_BLOCKs: rank r sums chunk r */
    size_t *ce, *cw;     /* (R + 1) chunk bounds in values and in wire words */
    float *enc;          /* (words of a fragment) this rank's codes, chunk by chunk */
    float *slots;        /* (R, words of a chunk) the codes of this rank's chunk, per rank */
    float *gather;       /* (words of a fragment) the codes of the averaged chunks */
    float *acc;          /* (values of a chunk) fp32 sum of this rank's chunk */
    /* compress = topk: enc holds this rank's codes of a fragment, gather
     * every rank's, rank r's at r times their length */
    dt_request *req;     /* (2 R) */
    int nreq;
    int gathering;       /* the all-gather is in flight (else the reduce-scatter) */
    /* outer_comm = sgp */
    dt_gossip g;
    float *u;            /* (n + 1) push-sum numerator w x (then mixed) */
    float *recv_sum;     /* (n + 1) sum of the received messages */
    float *w;            /* (1) push-sum weight (checkpointed) */
} diloco_state;

/* algo/diloco.c */
/* Fragment p of the flat vector: [off, off + len). */
void diloco_fragment(const struct dt_trainer *t, const diloco_state *s, int64_t p, size_t *off,
                     size_t *len);
/* The first K steps are the warm-up's, averaged as mode allreduce does
 * (returns 1: the step is taken); at step K the local phase starts from the
 * shared model. */
int diloco_warmup(struct dt_trainer *t, diloco_state *s);
/* Fragment p's averaged pseudo-gradient arrives: the outer step, the merge. */
void diloco_exchange_complete(struct dt_trainer *t, diloco_state *s, int64_t p, int64_t outer);
/* After a restore: the exchanges in flight at the checkpoint posted again. */
void diloco_resumed(struct dt_trainer *t);

/* algo/diloco_wire.c */
/* Plain fp32 with nothing to overlap: one allreduce of the flat vector. */
int diloco_uses_allreduce(const diloco_state *s);
/* Fragment p's pseudo-gradient taken and posted (error feedback's residual
 * kept). */
void diloco_exchange_begin(struct dt_trainer *t, diloco_state *s, int64_t p);
/* The exchange of v (len, a fragment) posted. */
void diloco_exchange_post(struct dt_trainer *t, diloco_state *s, const float *v, size_t len);
/* The reduce-scatter's end and the all-gather's start (dense codes). */
void diloco_scatter_finish_gather_start(struct dt_trainer *t, diloco_state *s);
/* Fragment p's averaged pseudo-gradient into s->mean; nothing in flight after. */
void diloco_exchange_mean(struct dt_trainer *t, diloco_state *s, int64_t p, int64_t outer);

/* algo/diloco_timed.c: the timed table's step, verdicts, finish and resume */
void diloco_timed_step(struct dt_trainer *t);
int diloco_timed_progress(struct dt_trainer *t, int stop_local, double *global_steps);
void diloco_timed_finish(struct dt_trainer *t);
void diloco_timed_resumed(struct dt_trainer *t);

#endif
