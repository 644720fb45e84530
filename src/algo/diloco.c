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
 * costs only its messages.
 *
 * The exchange over the network is algo/diloco_wire.c, the time-bounded
 * inner loops (diloco.inner_time) are algo/diloco_timed.c; algo/diloco_int.h
 * holds the state the three share. */
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
#include "algo/diloco_int.h"

/* Fragment p of the flat vector: [off, off + len). */
void diloco_fragment(const dt_trainer *t, const diloco_state *s, int64_t p, size_t *off,
                     size_t *len)
{
    size_t lo = (size_t)p * t->n / (size_t)s->P, hi = (size_t)(p + 1) * t->n / (size_t)s->P;
    *off = lo;
    *len = hi - lo;
}

/* The local step (1..H, as c mod H with 0 for H) after which fragment p starts. */
static int64_t start_of(const diloco_state *s, int64_t p) { return ((p + 1) * s->H / s->P) % s->H; }

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
    if (cfg->diloco.inner_time > 0 &&
        (P != 1 || o != 0 || delay || strcmp(cfg->diloco.outer_comm, "allreduce") != 0))
        return dt_err_set("diloco.inner_time = %g takes diloco.fragments = 1, diloco.overlap = 0, "
                          "diloco.delay = 0 and diloco.outer_comm = allreduce (got %lld, %lld, "
                          "%lld, %s): each time-bounded loop ends in one whole exchange",
                          cfg->diloco.inner_time, (long long)P, (long long)o, (long long)delay,
                          cfg->diloco.outer_comm);
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
    if (s->delay) {
        s->x_sent = dt_falloc(n);
        s->x_local = dt_falloc(n);
    }
    s->inner_time = c->diloco.inner_time;
    if (s->inner_time > 0) {
        s->counts = dt_calloc(3 * R, sizeof *s->counts);
        s->wt = dt_falloc(R);
        for (size_t r = 0; r < R; r++)
            s->wt[r] = 1.0f / (float)R;
    }
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
        if (s->wt)
            s->scratch = dt_falloc(n / (size_t)s->P + 1);
    } else if (!diloco_uses_allreduce(s)) {
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
        if (s->wt)
            s->scratch = dt_falloc(chunk);
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
    char inner[64];
    if (s->inner_time > 0)
        snprintf(inner, sizeof inner, "%g s of inner steps", s->inner_time);
    else
        snprintf(inner, sizeof inner, "%lld inner steps", (long long)s->H);
    printf("diloco: %s per outer step (after %lld averaged), outer SGD lr %g "
           "momentum %g%s, %s over %s, %lld fragment(s), overlap %lld, merge %g%s",
           inner, (long long)s->K, (double)s->lr, (double)s->mu,
           s->nesterov ? " nesterov" : "", wire,
           s->gossip ? "push-sum" : diloco_uses_allreduce(s) ? "allreduce"
                                  : s->topk ? "all-gather" : "reduce-scatter + all-gather",
           (long long)s->P, (long long)s->overlap, (double)s->alpha,
           s->delay ? ", outer step delayed by one loop" : "");
    if (s->ef)
        printf(", error feedback (decay %g)", (double)s->beta);
    if (s->inner_time > 0)
        printf(", loops bounded by time, pseudo-gradients weighted by samples");
    printf("\n");
}

/* The outer step of fragment [off, off + len) on theta and b (the state's,
 * or copies of them), then the merge into x. */
static void outer_step(dt_trainer *t, diloco_state *s, size_t off, size_t len, float *theta,
                       float *b)
{
    /* b <- mu b + delta; theta <- theta - lr (delta + mu b), or theta - lr b */
    sgd_step_flat(len, s->mu, 0.0f, s->nesterov, s->lr, theta, s->mean + off, b);
    if (s->delay) { /* x <- x - (x_sent - theta): theta plus the progress since the post */
        vec_sub_axpy(t->params + off, 1.0f, s->x_sent + off, len);
        vec_add(t->params + off, theta, len);
    } else if (s->alpha == 0.0f) {
        vec_copy(t->params + off, theta, len);
    } else { /* x <- (1 - alpha) theta + alpha x */
        vec_mix(t->params + off, s->alpha, theta, len);
    }
}

/* Fragment p's averaged pseudo-gradient arrives: the outer step on theta,
 * then the merge into x. */
void diloco_exchange_complete(dt_trainer *t, diloco_state *s, int64_t p, int64_t outer)
{
    size_t off, len;
    diloco_fragment(t, s, p, &off, &len);
    diloco_exchange_mean(t, s, p, outer);
    outer_step(t, s, off, len, s->theta + off, s->b + off);
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

/* The first K steps are the warm-up's (returns 1: the step is taken); at step
 * K the local phase starts from the shared model. */
int diloco_warmup(dt_trainer *t, diloco_state *s)
{
    if (t->step < s->K) {
        sync_step(t);
        return 1;
    }
    if (t->step == s->K)
        vec_copy(s->theta, t->params, t->n);
    return 0;
}

/* The exchanges started lag steps before local step c complete. */
static void complete_due(dt_trainer *t, diloco_state *s, int64_t c)
{
    const int64_t d = c - s->lag;
    for (int64_t p = 0; p < s->P; p++)
        if (d >= 1 && d % s->H == start_of(s, p))
            diloco_exchange_complete(t, s, p, (d - 1) / s->H);
}

static void diloco_step(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    if (diloco_warmup(t, s))
        return;
    trainer_gradient(t, t->params);
    trainer_update(t, t->params);
    const int64_t c = t->step + 1 - s->K; /* local steps done */
    /* in flight for lag > 0 steps: completed first (with delay, loop k's
     * before loop k + 1's is posted); with lag 0 in the step it starts */
    if (s->lag > 0)
        complete_due(t, s, c);
    for (int64_t p = 0; p < s->P; p++)
        if (c % s->H == start_of(s, p))
            diloco_exchange_begin(t, s, p);
    /* one step after its start, the reduce-scatter has had a step of compute to
     * finish: sum and start the all-gather, which then overlaps the rest */
    if (s->pending >= 0 && !s->topk && !s->gathering && s->lag >= 2 &&
        c % s->H == (start_of(s, s->pending) + 1) % s->H) {
        /* timed: on a slow network the reduce-scatter outlasts the step and this waits */
        double t0 = trainer_clock();
        diloco_scatter_finish_gather_start(t, s);
        t->meter.t_comm += trainer_clock() - t0;
    }
    if (s->lag == 0)
        complete_due(t, s, c);
}

/* run.check_replicas: identical in the warm-up and after an outer step that
 * set every value of x to the shared theta (with delay, x keeps the rank's
 * own progress: only at the end's drain of an exchange posted at that very
 * step, x = theta_new + 0). */
static int diloco_replicas_equal(dt_trainer *t)
{
    const diloco_state *s = t->algo_state;
    const int64_t c = t->step - s->K, d = c - s->lag;
    if (c <= 0)
        return 1;
    if (s->delay)
        return s->drained && c % s->H == 0;
    return !s->gossip && !s->delay && s->P == 1 && s->alpha == 0.0f && d >= 1 && d % s->H == 0;
}

static const float *diloco_model(dt_trainer *t) { return t->params; }

static int diloco_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    diloco_state *s = t->algo_state;
    if (max < 8)
        DT_FATAL("diloco: no room for its checkpoint arrays");
    int k = 0;
    out[k++] = (dt_ckpt_array){ "diloco_outer_params", s->theta, t->n, DT_CKPT_ROW0 };
    out[k++] = (dt_ckpt_array){ "diloco_outer_momentum", s->b, t->n, DT_CKPT_ROW0 };
    if (s->lag > 0) /* the pseudo-gradient of a fragment in flight */
        out[k++] = (dt_ckpt_array){ "diloco_sent", s->delta, t->n, DT_CKPT_PER_RANK };
    if (s->delay) { /* x when it was taken; x as the local steps left it */
        out[k++] = (dt_ckpt_array){ "diloco_x_sent", s->x_sent, t->n, DT_CKPT_PER_RANK };
        if (!s->drained)
            vec_copy(s->x_local, t->params, t->n);
        out[k++] = (dt_ckpt_array){ "diloco_x_local", s->x_local, t->n, DT_CKPT_PER_RANK };
    }
    if (s->inner_time > 0) /* the group's clock, the same on every rank */
        out[k++] = (dt_ckpt_array){ "diloco_clock", s->clock, 4, DT_CKPT_ROW0 };
    if (s->ef)
        out[k++] = (dt_ckpt_array){ "diloco_residual", s->err, t->n, DT_CKPT_FRESH };
    if (s->gossip)
        out[k++] = (dt_ckpt_array){ "push_sum_weight", s->w, 1, DT_CKPT_PER_RANK };
    return k;
}

/* After a restore at step t->step: a fragment whose exchange started within
 * the last `lag` steps is sent again from the checkpointed pseudo-gradient
 * (the same codes; its bytes and residual already counted). */
void diloco_resumed(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    s->pending = -1;
    if (s->delay) { /* the final checkpoint holds the drained model; x_local goes on */
        vec_copy(t->params, s->x_local, t->n);
        s->drained = 0;
    }
    const int64_t c = t->step - s->K;
    for (int64_t back = 0; back < s->lag; back++)
        for (int64_t p = 0; p < s->P; p++)
            if (c - back >= 1 && (c - back) % s->H == start_of(s, p)) {
                size_t off, len;
                diloco_fragment(t, s, p, &off, &len);
                diloco_exchange_post(t, s, s->delta + off, len);
                s->pending = (int)p;
                /* the all-gather had started: the same sum, the same codes */
                if (back >= 1 && !s->topk)
                    diloco_scatter_finish_gather_start(t, s);
            }
    if (s->gossip)
        t->meter.weight = s->w[0];
}

/* The end of a run whose budget is spent (not a stop signal's checkpoint):
 * with delay, the exchange in flight is completed and applied, so the final
 * model and its evaluation include the last outer step:
 *     theta' <- the outer step on the averaged delta    (on copies of theta, b)
 *     x_i    <- x_i - (x_i^sent - theta')               (theta' + progress since the post)
 * Every rank holds theta' when no local step followed the post (a budget
 * ending at a loop's end), else theta' plus its own progress. theta, b and
 * x_local (x before this) keep their values, and the final checkpoint holds
 * them with the exchange as sent: a resume to a longer budget takes
 * x <- x_local, posts the same bytes again and applies them in place, so it
 * reproduces the uninterrupted run bit for bit. */
static void diloco_finish(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    if (!s->delay || s->pending < 0 || s->drained)
        return;
    const size_t n = t->n;
    vec_copy(s->x_local, t->params, n);
    diloco_exchange_mean(t, s, s->pending, 0);
    float *theta = dt_falloc(n), *b = dt_falloc(n);
    vec_copy(theta, s->theta, n);
    vec_copy(b, s->b, n);
    outer_step(t, s, 0, n, theta, b);
    free(theta);
    free(b);
    s->drained = 1;
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
    free(s->x_local);
    free(s->counts);
    free(s->wt);
    free(s->scratch);
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

/* diloco.inner_time > 0: the same state and exchanges, run by the
 * asynchronous loop (no collective between two exchanges). */
static const dt_algo algo_diloco_timed = {
    .name = "diloco",
    .summary = "DiLoCo with time-bounded inner loops (diloco.inner_time): pseudo-gradients "
               "weighted by the samples each rank processed; replicas equal after every "
               "outer step",
    .decentralized = 1,
    .async = 1,
    .check = diloco_check,
    .elastic = DT_ELASTIC_AVERAGE,
    .elastic_note = "the outer parameters and outer momentum: old rank 0's (replicated); the "
                    "error-feedback residuals zero; the group's steps per rank carry over",
    .setup = diloco_setup,
    .step = diloco_timed_step,
    .model = diloco_model,
    .state = diloco_state_arrays,
    .progress = diloco_timed_progress,
    .finish = diloco_timed_finish,
    .resumed = diloco_timed_resumed,
    .teardown = diloco_teardown,
};

static const dt_algo *diloco_variant(const dt_config *cfg)
{
    return cfg->diloco.inner_time > 0 ? &algo_diloco_timed : NULL;
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
    .finish = diloco_finish,
    .variant = diloco_variant,
    .teardown = diloco_teardown,
};
