/* DiLoCo (algo/diloco.c): the exchange of a pseudo-gradient over the
 * network. A fragment's pseudo-gradient, with error feedback's residual, goes
 * out as one allreduce (fp32, nothing to overlap), a reduce-scatter and
 * all-gather of its bf16/int8 codes in chunks of whole QUANT_BLOCKs, an
 * all-gather of its top-k codes, or push-sum mixing of the local models over
 * the gossip graph (outer_comm = sgp); the averaged pseudo-gradient arrives in
 * s->mean. */
#include "algo/gossip.h"
#include "algo/quant.h"
#include "algo/topk_codec.h"
#include "comm/transport.h"
#include "core/error.h"
#include "core/vec.h"
#include "engine/engine.h"
#include "algo/diloco_int.h"

enum { TAG_SCATTER = 41, TAG_GATHER = 42 };

/* Plain fp32 with nothing to overlap: one allreduce of the flat vector. */
int diloco_uses_allreduce(const diloco_state *s)
{
    return !s->gossip && !s->topk && s->fmt == QUANT_FP32 && s->lag == 0;
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

#ifdef DTRAIN_SIM
/* The fewest words of any rank's chunk: the smallest message of the
 * reduce-scatter and of the all-gather, the same on every rank. */
static size_t smallest_chunk(const diloco_state *s, int R)
{
    size_t least = s->cw[1] - s->cw[0];
    for (int r = 1; r < R; r++)
        if (s->cw[r + 1] - s->cw[r] < least)
            least = s->cw[r + 1] - s->cw[r];
    return least;
}
#endif

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
#ifdef DTRAIN_SIM
    /* sim.gather = links: what this rank sends to all (every chunk but its
     * own) to the next rank; from the previous, what it sends (the bytes a
     * rank receives differ from R - 1 of its chunks by under a QUANT_BLOCK
     * per peer) */
    const int prev = (me + R - 1) % R;
    if (transport_sim_links(t->tp, s->enc, s->cw[R] - mine, s->slots,
                            s->cw[R] - (s->cw[prev + 1] - s->cw[prev]), smallest_chunk(s, R),
                            TAG_SCATTER, &s->req[0])) {
        s->nreq = 1;
        return;
    }
#endif
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
void diloco_scatter_finish_gather_start(dt_trainer *t, diloco_state *s)
{
    const int R = t->nranks, me = t->rank;
    const size_t m = s->ce[me + 1] - s->ce[me], mine = s->cw[me + 1] - s->cw[me];
    t->tp->waitall(t->tp, s->req, s->nreq);
    vec_zero(s->acc, m);
    for (int r = 0; r < R; r++) {
        const float *codes = r == me ? s->enc + s->cw[me] : s->slots + (size_t)r * mine;
        if (s->wt) { /* acc += w_r decode(codes of rank r) */
            quant_decode(s->fmt, codes, m, s->scratch);
            vec_axpy(s->acc, s->wt[r], s->scratch, m);
        } else {
            quant_decode_add(s->fmt, codes, m, s->acc);
        }
    }
    if (!s->wt)
        vec_scale(s->acc, 1.0f / (float)R, m);
    quant_encode(s->fmt, s->acc, m, s->gather + s->cw[me]);
    s->nreq = 0;
    s->gathering = 1;
#ifdef DTRAIN_SIM
    /* sim.gather = links: R - 1 copies of this rank's chunk to the next rank,
     * as many of the previous rank's from it (slots has room for R chunks
     * and is free again) */
    const int prev = (me + R - 1) % R;
    if (transport_sim_links(t->tp, s->slots, (size_t)(R - 1) * mine, s->slots,
                            (size_t)(R - 1) * (s->cw[prev + 1] - s->cw[prev]),
                            smallest_chunk(s, R), TAG_GATHER, &s->req[0])) {
        s->nreq = 1;
        return;
    }
#endif
    for (int r = 0; r < R; r++) {
        if (r == me)
            continue;
        t->tp->irecv(t->tp, s->gather + s->cw[r], s->cw[r + 1] - s->cw[r], r, TAG_GATHER,
                     &s->req[s->nreq++]);
        t->tp->isend(t->tp, s->gather + s->cw[me], mine, r, TAG_GATHER, &s->req[s->nreq++]);
    }
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
 * rank order, the same floats on every rank (timed loops: sum_r w_r decode). */
static void gather_codes_finish(dt_trainer *t, diloco_state *s, float *mean, size_t len)
{
    t->tp->waitall(t->tp, s->req, s->nreq);
    s->nreq = 0;
    const size_t w = tkc_words(&s->tk, len);
    vec_zero(mean, len);
    for (int r = 0; r < t->nranks; r++) {
        if (s->wt) {
            tkc_decode(&s->tk, s->gather + (size_t)r * w, len, s->scratch);
            vec_axpy(mean, s->wt[r], s->scratch, len);
        } else {
            tkc_decode_add(&s->tk, s->gather + (size_t)r * w, len, mean);
        }
    }
    if (!s->wt)
        vec_scale(mean, 1.0f / (float)t->nranks, len);
}

/* The exchange of v (len, a fragment) posted: top-k codes, or the first half
 * of the reduce-scatter. */
void diloco_exchange_post(dt_trainer *t, diloco_state *s, const float *v, size_t len)
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
void diloco_exchange_begin(dt_trainer *t, diloco_state *s, int64_t p)
{
    size_t off, len;
    diloco_fragment(t, s, p, &off, &len);
    float *v = s->delta + off;
    vec_copy(v, s->theta + off, len);
    vec_sub_axpy(v, 1.0f, t->params + off, len);
    if (s->ef)
        vec_axpy(v, s->beta, s->err + off, len);
    if (s->delay)
        vec_copy(s->x_sent + off, t->params + off, len);
    s->pending = (int)p;
    if (s->gossip || diloco_uses_allreduce(s)) {
        if (!s->gossip)
            t->meter.bytes_sent += (int64_t)(len * sizeof(float));
        return; /* exchanged at diloco_exchange_complete, in the same step */
    }
    double t0 = trainer_clock();
    diloco_exchange_post(t, s, v, len);
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

/* Fragment p's averaged pseudo-gradient arrives in s->mean: the exchange in
 * flight completed (or, lag 0, done whole). */
void diloco_exchange_mean(dt_trainer *t, diloco_state *s, int64_t p, int64_t outer)
{
    if (s->pending != (int)p)
        DT_FATAL("diloco: fragment %lld completes while %d is in flight", (long long)p,
                 s->pending);
    size_t off, len;
    diloco_fragment(t, s, p, &off, &len);
    float *mean = s->mean + off;
    double t0 = trainer_clock();
    if (s->gossip) {
        pushsum_mix(t, s, outer);
    } else if (diloco_uses_allreduce(s)) {
        vec_copy(mean, s->delta + off, len);
        if (s->wt) { /* sum_r w_r delta_r */
            vec_scale(mean, s->wt[t->rank], len);
            t->tp->allreduce_sum(t->tp, mean, len);
        } else {
            t->tp->allreduce_sum(t->tp, mean, len);
            vec_scale(mean, 1.0f / (float)t->nranks, len);
        }
    } else if (s->topk) {
        gather_codes_finish(t, s, mean, len);
    } else {
        if (!s->gathering)
            diloco_scatter_finish_gather_start(t, s);
        gather_finish(t, s, mean);
    }
    t->meter.t_comm += trainer_clock() - t0;
    s->pending = -1;
}
