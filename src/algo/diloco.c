/* DiLoCo (Douillard et al. 2023, Algorithm 1) and its streaming
 * (Douillard et al. 2025), low-precision, sparse (SparseLoCo, Sarfi et al.
 * 2025), delayed and gossip variants.
 *
 *   theta <- x(0) on every rank; b <- 0
 *   for the first K steps:  g <- mean_i g_i;  x <- x - lr sgd(g)   (warm-up, = allreduce)
 *   theta <- x
 *   per outer step:
 *     H steps of the inner optimizer on the rank's data:  x_i <- x_i - lr sgd(g_i)
 *     delta_i <- theta - x_i                     (the pseudo-gradient: old minus new)
 *     delta   <- mean_i delta_i                  (one allreduce; or reduce-scatter and
 *                                                 all-gather of bf16/int8 codes; or
 *                                                 all-gather of top-k codes)
 *     (gossip: delta_i <- theta_i - z_i, z_i the push-sum mix of the x_j)
 *     b       <- mu b + delta
 *     theta   <- theta - lr_out (delta + mu b)   (Nesterov; else theta - lr_out b)
 *     x_i     <- theta
 * The outer step is PyTorch's SGD (optim/sgd.h's sgd_step_flat) on delta;
 * the inner optimizer's state (t->opt) stays local.
 *
 * Streaming: the flat vector is cut into P contiguous fragments; fragment p
 * takes its outer step on its own slice of theta and b at local steps
 * c = (p + 1) H / P (mod H) of the local phase, its exchange started then and
 * completed `overlap` steps later, when the fragment of x becomes
 * (1 - alpha) theta + alpha x. P = 1, overlap 0, alpha 0 is the loop above.
 * With overlap > 0 (and for bf16/int8) the exchange is a reduce-scatter of
 * the codes, posted at the start, then the fp32 sum of this rank's chunk and
 * an all-gather of its re-encoded mean, posted one step later (at the
 * completion when overlap = 1) and decoded at the completion: both halves
 * overlap inner steps.
 *
 * Error feedback: each rank keeps e_i, what its codes left out, and sends
 * codes of the decayed residual plus its pseudo-gradient:
 *     v_i <- beta e_i + delta_i;   c_i <- codes(v_i);   e_i <- v_i - decode(c_i)
 * so with beta = 1 the values decoded over the outer steps plus e_i add up to
 * the sum of the delta_i: nothing is lost, only late. beta < 1 forgets old
 * residuals (SparseLoCo, with lr_out = 1 and mu = 0).
 *
 * Top-k (compress = topk, algo/topk_codec.h): c_i holds, per chunk of the
 * fragment, the k values of v_i largest by magnitude, low-bit with one
 * scale per chunk. Every rank gathers every c_r (one all-gather), then
 *     delta <- (1/R) sum_r decode(c_r)           (summed in rank order 0..R-1)
 * the same operations on the same bytes, so the same floats on every rank.
 *
 * Delayed outer step (delay = 1, P = 1): loop k's exchange is posted at the
 * end of loop k and completed at the end of loop k + 1, so it overlaps a
 * whole loop of inner steps. The rank does not wait at the post: it goes on
 * from its own x_i, keeping x_i^sent = x_i. At the completion
 *     theta_new <- the outer step on delta (as above)
 *     x_i       <- x_i - (x_i^sent - theta_new)
 * i.e. theta_new plus the local progress made since the post: the rank's own
 * step delta_i, already in x_i, is replaced by the average's outer step
 * (not a rewind). The next pseudo-gradient theta_new - x_i is then minus
 * that local progress, and the next exchange is posted. The dense exchange
 * is the reduce-scatter + all-gather above (the all-gather posted one step
 * after the post), top-k's one non-blocking all-gather.
 *
 * Gossip (outer_comm = sgp): no collective; each rank keeps its own theta_i
 * and b_i. Push-sum mixes the new local models x_j over the graph, and rank
 * i steps on delta_i = theta_i - z_i = mix(delta)_i + (theta_i - mix(theta)_i):
 * the mixed pseudo-gradient plus its outer parameters' distance from their
 * neighbours', which the outer step then closes. (Mixing the delta_j alone
 * leaves the theta_i apart for good: their distance grows with every outer
 * step, bench/RESULTS.md section 13b.) On the complete graph z is the mean of
 * the x_j and the theta_i are equal, so delta_i is the allreduce's mean.
 *
 * Positions are derived from t->step (inner steps, as run.* counts them):
 * after step s, c = s + 1 - K local steps are done. A checkpoint holds
 * theta, b and, while an exchange is in flight, the pseudo-gradient as it
 * was sent (and x_i^sent), so a resume posts the same bytes again and
 * reproduces the uninterrupted run bit for bit.
 *
 * Vectors live in host memory (no device_vectors): with compute.device =
 * cuda the network works on device copies of x and g.
 *
 * Every pass over a vector goes through core/vec.h, algo/quant.h or
 * algo/topk_codec.h, which return at once in the simulator (dtrain-sim):
 * there the vectors hold no model, and a 124 M-parameter pseudo-gradient
 * costs only its messages. */
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/gossip.h"
#include "algo/quant.h"
#include "algo/topk_codec.h"
#include "comm/transport.h"
#include "core/error.h"
#include "core/vec.h"
#include "optim/sgd.h"
#include "engine/engine.h"

enum { TAG_SCATTER = 41, TAG_GATHER = 42 };

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
    int pending;         /* fragment whose exchange is in flight; -1: none */
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

/* Fragment p of the flat vector: [off, off + len). */
static void fragment(const dt_trainer *t, const diloco_state *s, int64_t p, size_t *off,
                     size_t *len)
{
    size_t lo = (size_t)p * t->n / (size_t)s->P, hi = (size_t)(p + 1) * t->n / (size_t)s->P;
    *off = lo;
    *len = hi - lo;
}

/* The local step (1..H, as c mod H with 0 for H) after which fragment p starts. */
static int64_t start_of(const diloco_state *s, int64_t p) { return ((p + 1) * s->H / s->P) % s->H; }

/* Plain fp32 with nothing to overlap: one allreduce of the flat vector. */
static int uses_allreduce(const diloco_state *s)
{
    return !s->gossip && !s->topk && s->fmt == QUANT_FP32 && s->lag == 0;
}

static int uses_topk(const dt_config *cfg) { return !strcmp(cfg->diloco.compress, "topk"); }

/* diloco.error_feedback: auto is on with topk, off for the dense exchange. */
static int uses_ef(const dt_config *cfg)
{
    const char *e = cfg->diloco.error_feedback;
    return !strcmp(e, "true") || (!strcmp(e, "auto") && uses_topk(cfg));
}

static int diloco_check(const dt_config *cfg, int nranks)
{
    const int64_t H = cfg->diloco.inner_steps, P = cfg->diloco.fragments,
                  o = cfg->diloco.overlap, delay = cfg->diloco.delay;
    const int q = quant_parse(cfg->diloco.precision), topk = uses_topk(cfg);
    if (q < 0)
        return dt_err_set("diloco.precision = '%s': expected fp32, bf16 or int8",
                          cfg->diloco.precision);
    if (topk && q != QUANT_FP32)
        return dt_err_set("diloco.precision = %s with diloco.compress = topk: expected fp32 "
                          "(topk sends its own codes; precision is the dense exchange's)",
                          cfg->diloco.precision);
    if (H % P != 0)
        return dt_err_set("diloco.fragments = %lld does not divide diloco.inner_steps = %lld "
                          "(fragment p is synchronised at local step (p + 1) H / P)",
                          (long long)P, (long long)H);
    if (o >= H / P)
        return dt_err_set("diloco.overlap = %lld: expected fewer than diloco.inner_steps / "
                          "diloco.fragments = %lld steps (one fragment in flight at a time)",
                          (long long)o, (long long)(H / P));
    if (!strcmp(cfg->diloco.error_feedback, "true") && q == QUANT_FP32 && !topk)
        return dt_err_set("diloco.error_feedback = true needs diloco.precision = bf16 or int8, "
                          "or diloco.compress = topk (the dense fp32 exchange leaves no "
                          "residual)");
    if (delay && (P != 1 || o != 0 || cfg->diloco.merge != 0.0))
        return dt_err_set("diloco.delay = 1 takes diloco.fragments = 1, diloco.overlap = 0 and "
                          "diloco.merge = 0 (got %lld, %lld, %g): the exchange in flight spans "
                          "a whole outer loop", (long long)P, (long long)o, cfg->diloco.merge);
    if (!strcmp(cfg->diloco.outer_comm, "sgp")) {
        if (topk)
            return dt_err_set("diloco.compress = topk with diloco.outer_comm = sgp: expected "
                              "diloco.outer_comm = allreduce (every rank gathers every rank's "
                              "codes)");
        if (delay)
            return dt_err_set("diloco.delay = 1 with diloco.outer_comm = sgp: expected "
                              "diloco.outer_comm = allreduce");
        if (P != 1 || o != 0 || q != QUANT_FP32)
            return dt_err_set("diloco.outer_comm = sgp takes diloco.fragments = 1, "
                              "diloco.overlap = 0 and diloco.precision = fp32 (got %lld, %lld, "
                              "%s)", (long long)P, (long long)o, cfg->diloco.precision);
        dt_topology topo;
        if (gossip_topology(&topo, cfg, nranks, "exponential") != 0)
            return -1;
        topology_free(&topo);
    }
    return 0;
}

static void diloco_setup(dt_trainer *t)
{
    const dt_config *c = t->cfg;
    diloco_state *s = dt_calloc(1, sizeof *s);
    s->H = c->diloco.inner_steps;
    s->K = c->diloco.sync_steps;
    s->P = c->diloco.fragments;
    s->overlap = c->diloco.overlap;
    s->lr = (float)c->diloco.outer_lr;
    s->mu = (float)c->diloco.outer_momentum;
    s->alpha = (float)c->diloco.merge;
    s->nesterov = c->diloco.nesterov;
    s->ef = uses_ef(c);
    s->beta = (float)c->diloco.ef_decay;
    s->gossip = !strcmp(c->diloco.outer_comm, "sgp");
    s->fmt = (dt_quant)quant_parse(c->diloco.precision);
    s->topk = uses_topk(c);
    s->tk = (dt_tkc){ (size_t)c->diloco.chunk, c->diloco.density, atoi(c->diloco.bits) };
    s->delay = c->diloco.delay != 0;
    s->lag = s->delay ? s->H : s->overlap;
    s->pending = -1;
    const size_t n = t->n, R = (size_t)t->nranks;
    s->theta = dt_falloc(n);
    s->b = dt_falloc(n);
    s->delta = dt_falloc(n);
    s->mean = dt_falloc(n);
    if (s->ef)
        s->err = dt_falloc(n);
    if (s->delay)
        s->x_sent = dt_falloc(n);
    vec_copy(s->theta, t->params, n); /* replicas start equal */
    if (s->gossip) {
        if (gossip_init(&s->g, c, t->rank, t->nranks, n + 1, "exponential", backend_cpu()) != 0)
            DT_FATAL("%s", dt_err_msg()); /* diloco_check accepted this configuration */
        s->u = dt_falloc(n + 1);
        s->recv_sum = dt_falloc(n + 1);
        s->w = dt_falloc(1);
        s->w[0] = 1.0f;
    } else if (s->topk) {
        if (!t->tp->iallgather)
            DT_FATAL("diloco.compress = topk: transport %s has no all-gather", t->tp->name);
        const size_t w = tkc_words(&s->tk, n / (size_t)s->P + 1); /* the longest fragment's */
        s->enc = dt_falloc(w);
        s->gather = dt_falloc(R * w);
        s->req = dt_calloc(1, sizeof *s->req);
    } else if (!uses_allreduce(s)) {
        size_t most = n / (size_t)s->P + 1; /* the longest fragment */
        s->ce = dt_calloc(R + 1, sizeof *s->ce);
        s->cw = dt_calloc(R + 1, sizeof *s->cw);
        /* a chunk holds at most ceil(blocks / R) blocks */
        size_t blocks = (most + QUANT_BLOCK - 1) / QUANT_BLOCK;
        size_t chunk = ((blocks + R - 1) / R) * QUANT_BLOCK;
        s->enc = dt_falloc(quant_words(s->fmt, most) + R);
        s->gather = dt_falloc(quant_words(s->fmt, most) + R);
        s->slots = dt_falloc(R * quant_words(s->fmt, chunk));
        s->acc = dt_falloc(chunk);
        s->req = dt_calloc(2 * R, sizeof *s->req);
    }
    t->algo_state = s;
    if (t->rank != 0)
        return;
    char wire[160];
    if (s->topk) {
        const size_t ch = s->tk.chunk, w = tkc_chunk_words(&s->tk, ch);
        snprintf(wire, sizeof wire, "top-k %d-bit, %zu of every %zu values (%zu bytes, %.2f %% of "
                 "fp32)", s->tk.bits, tkc_k(&s->tk, ch), ch, 4 * w, 100.0 * (double)w / (double)ch);
    } else {
        snprintf(wire, sizeof wire, "%s", quant_name(s->fmt));
    }
    printf("diloco: %lld inner steps per outer step (after %lld averaged), outer SGD lr %g "
           "momentum %g%s, %s over %s, %lld fragment(s), overlap %lld, merge %g%s",
           (long long)s->H, (long long)s->K, (double)s->lr, (double)s->mu,
           s->nesterov ? " nesterov" : "", wire,
           s->gossip ? "push-sum" : uses_allreduce(s) ? "allreduce"
                                  : s->topk ? "all-gather" : "reduce-scatter + all-gather",
           (long long)s->P, (long long)s->overlap, (double)s->alpha,
           s->delay ? ", outer step delayed by one loop" : "");
    if (s->ef)
        printf(", error feedback (decay %g)", (double)s->beta);
    printf("\n");
}

/* Chunk r of a fragment of len values: whole QUANT_BLOCKs, so that each
 * chunk's int8 codes carry their own scales. Fills s->ce and s->cw. */
static void chunk_layout(diloco_state *s, size_t len, int R)
{
    size_t blocks = (len + QUANT_BLOCK - 1) / QUANT_BLOCK;
    s->cw[0] = 0;
    for (int r = 0; r < R; r++) {
        size_t hi = ((size_t)(r + 1) * blocks / (size_t)R) * QUANT_BLOCK;
        s->ce[r + 1] = hi < len ? hi : len;
        s->cw[r + 1] = s->cw[r] + quant_words(s->fmt, s->ce[r + 1] - s->ce[r]);
    }
}

/* Reduce-scatter, first half: this rank's codes of v (len) go chunk r to
 * rank r; the codes of its own chunk arrive from every rank. */
static void scatter_start(dt_trainer *t, diloco_state *s, const float *v, size_t len)
{
    const int R = t->nranks, me = t->rank;
    chunk_layout(s, len, R);
    for (int r = 0; r < R; r++)
        quant_encode(s->fmt, v + s->ce[r], s->ce[r + 1] - s->ce[r], s->enc + s->cw[r]);
    const size_t mine = s->cw[me + 1] - s->cw[me];
    s->nreq = 0;
    for (int r = 0; r < R; r++) {
        if (r == me)
            continue;
        t->tp->irecv(t->tp, s->slots + (size_t)r * mine, mine, r, TAG_SCATTER, &s->req[s->nreq++]);
        t->tp->isend(t->tp, s->enc + s->cw[r], s->cw[r + 1] - s->cw[r], r, TAG_SCATTER,
                     &s->req[s->nreq++]);
    }
}

/* Reduce-scatter, second half, and the all-gather's start: this rank sums
 * its chunk in fp32 in rank order and sends the codes of its mean to every
 * rank. */
static void scatter_finish_gather_start(dt_trainer *t, diloco_state *s)
{
    const int R = t->nranks, me = t->rank;
    const size_t m = s->ce[me + 1] - s->ce[me], mine = s->cw[me + 1] - s->cw[me];
    t->tp->waitall(t->tp, s->req, s->nreq);
    vec_zero(s->acc, m);
    for (int r = 0; r < R; r++)
        quant_decode_add(s->fmt, r == me ? s->enc + s->cw[me] : s->slots + (size_t)r * mine, m,
                         s->acc);
    vec_scale(s->acc, 1.0f / (float)R, m);
    quant_encode(s->fmt, s->acc, m, s->gather + s->cw[me]);
    s->nreq = 0;
    for (int r = 0; r < R; r++) {
        if (r == me)
            continue;
        t->tp->irecv(t->tp, s->gather + s->cw[r], s->cw[r + 1] - s->cw[r], r, TAG_GATHER,
                     &s->req[s->nreq++]);
        t->tp->isend(t->tp, s->gather + s->cw[me], mine, r, TAG_GATHER, &s->req[s->nreq++]);
    }
    s->gathering = 1;
}

/* The all-gather's end: out (len) gets the decoded codes of every chunk,
 * the same bytes, hence the same floats, on every rank. */
static void gather_finish(dt_trainer *t, diloco_state *s, float *out)
{
    t->tp->waitall(t->tp, s->req, s->nreq);
    s->nreq = 0;
    s->gathering = 0;
    for (int r = 0; r < t->nranks; r++)
        quant_decode(s->fmt, s->gather + s->cw[r], s->ce[r + 1] - s->ce[r], out + s->ce[r]);
}

/* Top-k: this rank's codes of v (len) posted to every rank; every rank's
 * arrive in s->gather. */
static void gather_codes_start(dt_trainer *t, diloco_state *s, const float *v, size_t len)
{
    tkc_encode(&s->tk, v, len, s->enc);
    t->tp->iallgather(t->tp, s->enc, tkc_words(&s->tk, len), s->gather, &s->req[0]);
    s->nreq = 1;
}

/* Top-k's end: mean (len) <- (1/R) sum_r decode(codes of rank r), added in
 * rank order, the same floats on every rank. */
static void gather_codes_finish(dt_trainer *t, diloco_state *s, float *mean, size_t len)
{
    t->tp->waitall(t->tp, s->req, s->nreq);
    s->nreq = 0;
    const size_t w = tkc_words(&s->tk, len);
    vec_zero(mean, len);
    for (int r = 0; r < t->nranks; r++)
        tkc_decode_add(&s->tk, s->gather + (size_t)r * w, len, mean);
    vec_scale(mean, 1.0f / (float)t->nranks, len);
}

/* The exchange of v (len, a fragment) posted: top-k codes, or the first half
 * of the reduce-scatter. */
static void exchange_post(dt_trainer *t, diloco_state *s, const float *v, size_t len)
{
    if (s->topk)
        gather_codes_start(t, s, v, len);
    else
        scatter_start(t, s, v, len);
}

/* out (len) <- what this rank's codes, as posted, say. */
static void own_codes_decoded(dt_trainer *t, diloco_state *s, size_t len, float *out)
{
    if (s->topk) {
        tkc_decode(&s->tk, s->enc, len, out);
        return;
    }
    for (int r = 0; r < t->nranks; r++)
        quant_decode(s->fmt, s->enc + s->cw[r], s->ce[r + 1] - s->ce[r], out + s->ce[r]);
}

/* Fragment p's pseudo-gradient sent: v = theta - x_i, plus beta e_i with
 * error feedback, and e_i <- v - decode(codes of v). */
static void exchange_begin(dt_trainer *t, diloco_state *s, int64_t p)
{
    size_t off, len;
    fragment(t, s, p, &off, &len);
    float *v = s->delta + off;
    vec_copy(v, s->theta + off, len);
    vec_sub_axpy(v, 1.0f, t->params + off, len);
    if (s->ef)
        vec_axpy(v, s->beta, s->err + off, len);
    if (s->delay)
        vec_copy(s->x_sent + off, t->params + off, len);
    s->pending = (int)p;
    if (s->gossip || uses_allreduce(s)) {
        if (!s->gossip)
            t->meter.bytes_sent += (int64_t)(len * sizeof(float));
        return; /* exchanged at exchange_complete, in the same step */
    }
    double t0 = trainer_clock();
    exchange_post(t, s, v, len);
    t->meter.t_comm += trainer_clock() - t0;
    /* the vector this rank contributes, in its wire format (allreduce counts n floats) */
    const size_t words = s->topk ? tkc_words(&s->tk, len) : s->cw[t->nranks];
    t->meter.bytes_sent += (int64_t)(words * sizeof(float));
    if (s->ef) { /* residual = what was meant - what the codes say */
        own_codes_decoded(t, s, len, s->mean + off);
        vec_copy(s->err + off, v, len);
        vec_sub_axpy(s->err + off, 1.0f, s->mean + off, len);
    }
}

/* Push-sum of the local models over the gossip graph at gossip step j:
 * z <- u / w after one exchange of (w x, w); the pseudo-gradient this rank
 * steps on is then mean <- theta - z. On the complete graph every rank keeps
 * and sends 1/n of the same messages: theta minus the mean of the x_i, the
 * mean of the delta_i. */
static void pushsum_mix(dt_trainer *t, diloco_state *s, int64_t j)
{
    const size_t n = t->n;
    vec_copy(s->u, t->params, n); /* u = w x */
    vec_scale(s->u, s->w[0], n);
    t->meter.bytes_sent += pushsum_share(&s->g, t->rank, j, s->u, n, s->w);
    gossip_start(&s->g, t->tp, s->g.send);
    gossip_finish(&s->g, t->tp);
    gossip_sum_received(&s->g, NULL, s->recv_sum);
    pushsum_absorb(&s->g, s->recv_sum, s->u, n, s->w);
    pushsum_debias(&s->g, s->u, n, s->w, s->mean); /* z */
    vec_ax_plus(s->mean, -1.0f, s->theta, n);     /* theta - z */
    t->meter.weight = s->w[0];
}

/* Fragment p's averaged pseudo-gradient arrives: the outer step on theta,
 * then the merge into x. */
static void exchange_complete(dt_trainer *t, diloco_state *s, int64_t p, int64_t outer)
{
    if (s->pending != (int)p)
        DT_FATAL("diloco: fragment %lld completes while %d is in flight", (long long)p,
                 s->pending);
    size_t off, len;
    fragment(t, s, p, &off, &len);
    float *mean = s->mean + off;
    double t0 = trainer_clock();
    if (s->gossip) {
        pushsum_mix(t, s, outer);
    } else if (uses_allreduce(s)) {
        vec_copy(mean, s->delta + off, len);
        t->tp->allreduce_sum(t->tp, mean, len);
        vec_scale(mean, 1.0f / (float)t->nranks, len);
    } else if (s->topk) {
        gather_codes_finish(t, s, mean, len);
    } else {
        if (!s->gathering)
            scatter_finish_gather_start(t, s);
        gather_finish(t, s, mean);
    }
    t->meter.t_comm += trainer_clock() - t0;
    s->pending = -1;
    /* b <- mu b + delta; theta <- theta - lr (delta + mu b), or theta - lr b */
    sgd_step_flat(len, s->mu, 0.0f, s->nesterov, s->lr, s->theta + off, mean, s->b + off);
    if (s->delay) { /* x <- x - (x_sent - theta): theta plus the progress since the post */
        vec_sub_axpy(t->params + off, 1.0f, s->x_sent + off, len);
        vec_add(t->params + off, s->theta + off, len);
    } else if (s->alpha == 0.0f) {
        vec_copy(t->params + off, s->theta + off, len);
    } else { /* x <- (1 - alpha) theta + alpha x */
        vec_mix(t->params + off, s->alpha, s->theta + off, len);
    }
}

/* Warm-up step: the gradients averaged as mode allreduce does. */
static void sync_step(dt_trainer *t)
{
    trainer_gradient(t, t->params);
    double t0 = trainer_clock();
    t->tp->allreduce_sum(t->tp, t->grads, t->n);
    t->meter.bytes_sent += (int64_t)(t->n * sizeof(float));
    trainer_scale(t, t->grads, 1.0f / (float)t->nranks);
    t->meter.t_comm += trainer_clock() - t0;
    trainer_update(t, t->params);
}

/* The exchanges started lag steps before local step c complete. */
static void complete_due(dt_trainer *t, diloco_state *s, int64_t c)
{
    const int64_t d = c - s->lag;
    for (int64_t p = 0; p < s->P; p++)
        if (d >= 1 && d % s->H == start_of(s, p))
            exchange_complete(t, s, p, (d - 1) / s->H);
}

static void diloco_step(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    if (t->step < s->K) {
        sync_step(t);
        return;
    }
    if (t->step == s->K) /* the local phase starts from the shared model */
        vec_copy(s->theta, t->params, t->n);
    trainer_gradient(t, t->params);
    trainer_update(t, t->params);
    const int64_t c = t->step + 1 - s->K; /* local steps done */
    /* in flight for lag > 0 steps: completed first (with delay, loop k's
     * before loop k + 1's is posted); with lag 0 in the step it starts */
    if (s->lag > 0)
        complete_due(t, s, c);
    for (int64_t p = 0; p < s->P; p++)
        if (c % s->H == start_of(s, p))
            exchange_begin(t, s, p);
    /* one step after its start, the reduce-scatter has had a step of compute to
     * finish: sum and start the all-gather, which then overlaps the rest */
    if (s->pending >= 0 && !s->topk && !s->gathering && s->lag >= 2 &&
        c % s->H == (start_of(s, s->pending) + 1) % s->H) {
        /* timed: on a slow network the reduce-scatter outlasts the step and this waits */
        double t0 = trainer_clock();
        scatter_finish_gather_start(t, s);
        t->meter.t_comm += trainer_clock() - t0;
    }
    if (s->lag == 0)
        complete_due(t, s, c);
}

/* run.check_replicas: identical in the warm-up and after an outer step that
 * set every value of x to the shared theta (with delay, x keeps the rank's
 * own progress: never). */
static int diloco_replicas_equal(dt_trainer *t)
{
    const diloco_state *s = t->algo_state;
    const int64_t c = t->step - s->K, d = c - s->lag;
    if (c <= 0)
        return 1;
    return !s->gossip && !s->delay && s->P == 1 && s->alpha == 0.0f && d >= 1 && d % s->H == 0;
}

static const float *diloco_model(dt_trainer *t) { return t->params; }

static int diloco_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    diloco_state *s = t->algo_state;
    if (max < 6)
        DT_FATAL("diloco: no room for its checkpoint arrays");
    int k = 0;
    out[k++] = (dt_ckpt_array){ "diloco_outer_params", s->theta, t->n, DT_CKPT_ROW0 };
    out[k++] = (dt_ckpt_array){ "diloco_outer_momentum", s->b, t->n, DT_CKPT_ROW0 };
    if (s->lag > 0) /* the pseudo-gradient of a fragment in flight */
        out[k++] = (dt_ckpt_array){ "diloco_sent", s->delta, t->n, DT_CKPT_PER_RANK };
    if (s->delay) /* x when it was taken */
        out[k++] = (dt_ckpt_array){ "diloco_x_sent", s->x_sent, t->n, DT_CKPT_PER_RANK };
    if (s->ef)
        out[k++] = (dt_ckpt_array){ "diloco_residual", s->err, t->n, DT_CKPT_FRESH };
    if (s->gossip)
        out[k++] = (dt_ckpt_array){ "push_sum_weight", s->w, 1, DT_CKPT_PER_RANK };
    return k;
}

/* After a restore at step t->step: a fragment whose exchange started within
 * the last `lag` steps is sent again from the checkpointed pseudo-gradient
 * (the same codes; its bytes and residual already counted). */
static void diloco_resumed(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    s->pending = -1;
    const int64_t c = t->step - s->K;
    for (int64_t back = 0; back < s->lag; back++)
        for (int64_t p = 0; p < s->P; p++)
            if (c - back >= 1 && (c - back) % s->H == start_of(s, p)) {
                size_t off, len;
                fragment(t, s, p, &off, &len);
                exchange_post(t, s, s->delta + off, len);
                s->pending = (int)p;
                /* the all-gather had started: the same sum, the same codes */
                if (back >= 1 && !s->topk)
                    scatter_finish_gather_start(t, s);
            }
    if (s->gossip)
        t->meter.weight = s->w[0];
}

static void diloco_teardown(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    if (s->nreq > 0) /* a budget that ended with an exchange in flight: every rank has it */
        t->tp->waitall(t->tp, s->req, s->nreq);
    free(s->theta);
    free(s->b);
    free(s->delta);
    free(s->mean);
    free(s->err);
    free(s->x_sent);
    free(s->ce);
    free(s->cw);
    free(s->enc);
    free(s->slots);
    free(s->gather);
    free(s->acc);
    free(s->req);
    if (s->gossip) {
        gossip_free(&s->g);
        free(s->u);
        free(s->recv_sum);
        free(s->w);
    }
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_diloco = {
    .name = "diloco",
    .summary = "DiLoCo: diloco.inner_steps local steps of the inner optimizer, then outer "
               "Nesterov SGD on the averaged pseudo-gradient theta - x_i (fp32/bf16/int8, "
               "top-k low-bit codes, streaming fragments, a delayed outer step, or push-sum); "
               "replicas equal after every outer step",
    .decentralized = 1,
    .check = diloco_check,
    .elastic = DT_ELASTIC_AVERAGE,
    .elastic_note = "the outer parameters and outer momentum: old rank 0's (replicated); the "
                    "error-feedback residuals zero; refused with an exchange in flight "
                    "(diloco.overlap > 0 or diloco.delay = 1) or gossip outer steps",
    .setup = diloco_setup,
    .step = diloco_step,
    .model = diloco_model,
    .state = diloco_state_arrays,
    .resumed = diloco_resumed,
    .replicas_equal = diloco_replicas_equal,
    .teardown = diloco_teardown,
};
