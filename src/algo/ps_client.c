/* Parameter server (algo/ps.c): the clients. A worker fetches the model
 * from every server, computes a gradient and pushes it (dense or
 * compressed); the supervisor fetches the servers' model on a schedule and
 * evaluates it (its curve: wall, clock, loss, accuracy). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/algo.h"
#include "algo/compress.h"
#include "algo/staleness.h"
#include "core/error.h"
#include "core/vec.h"
#include "io/runlog.h"
#include "engine/engine.h"
#include "algo/ps_int.h"

/* ---- worker -------------------------------------------------------------------- */

/* Fetch every server's range into params; returns the reply flags. */
static int worker_fetch(dt_trainer *t, ps_state *s, int64_t want)
{
    double t0 = trainer_clock();
    for (int i = 0; i < s->S; i++) {
        size_t m = s->lo[i + 1] - s->lo[i];
        MPI_CHECK(MPI_Irecv(s->rep[i], (int)(sizeof(ps_msg) + m * sizeof(float)), MPI_BYTE, i,
                            TAG_REP, s->comm, &s->reqs[i]));
    }
    ps_msg q = { .kind = K_FETCH, .clock = want };
    for (int i = 0; i < s->S; i++)
        MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
    MPI_CHECK(MPI_Waitall(s->S, s->reqs, s->sts));
    int flags = 0;
    for (int i = 0; i < s->S; i++) {
        const ps_msg *h = (const ps_msg *)s->rep[i];
        vec_copy(t->params + s->lo[i], (const float *)(h + 1), s->lo[i + 1] - s->lo[i]);
        flags |= h->flags;
        if (i == 0)
            s->seen_clock = h->clock;
    }
    t->meter.t_wait += trainer_clock() - t0;
    return flags;
}

static void worker_push(dt_trainer *t, ps_state *s)
{
    double t0 = trainer_clock();
    size_t k = 0;
    const int quantized = s->compress == C_ADACOMP;
    if (quantized)
        k = adacomp_compress(s->acc, s->residual, t->n, s->seg, s->nseg, s->idx, s->val);
    else if (s->compress == C_TOPK)
        k = topk_compress(s->acc, s->residual, t->n, s->seg, s->nseg, t->cfg->ps.ratio, s->idx,
                          s->val);
    size_t next = 0; /* the first pair of the next server's range */
    for (int i = 0; i < s->S; i++) {
        ps_msg *h = (ps_msg *)s->out[i];
        size_t m = s->lo[i + 1] - s->lo[i], body;
        h->flags = s->stop_sent ? F_STOP : 0;
        h->clock = s->seen_clock;
        if (s->compress != C_NONE) {
            size_t first = next;
            while (next < k && s->idx[next] < s->lo[i + 1])
                next++;
            h->kind = quantized ? K_PUSH_QSPARSE : K_PUSH_SPARSE;
            h->count = (int64_t)(next - first);
            body = (quantized ? qsparse_encode : sparse_encode)(
                h + 1, s->idx + first, s->val + first, next - first, (uint32_t)s->lo[i]);
        } else {
            h->kind = K_PUSH_DENSE;
            h->count = (int64_t)m;
            vec_copy((float *)(h + 1), s->acc + s->lo[i], m);
            body = m * sizeof(float);
        }
        MPI_CHECK(MPI_Isend(h, sizeof *h, MPI_BYTE, i, TAG_REQ, s->comm, &s->reqs[2 * i]));
        MPI_CHECK(MPI_Isend(h + 1, (int)body, MPI_BYTE, i, TAG_DATA, s->comm,
                            &s->reqs[2 * i + 1]));
        t->meter.bytes_sent += (int64_t)body;
    }
    MPI_CHECK(MPI_Waitall(2 * s->S, s->reqs, s->sts));
    vec_zero(s->acc, t->n);
    t->meter.t_comm += trainer_clock() - t0;
}

/* A reply said a periodic checkpoint is due: no more requests until it is
 * written; the fetch that was interrupted is the first after it. */
static void worker_pause(ps_state *s, int64_t want)
{
    s->pause = 1;
    s->fetched = 0;
    s->first_want = want;
    ps_msg q = { .kind = K_PAUSE };
    for (int i = 0; i < s->S; i++)
        MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
}

void ps_worker_step(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const dt_config *c = t->cfg;
    if (!s->fetched) {
        s->fetched = 1;
        int64_t want = s->sync ? s->first_want : 0;
        int f = worker_fetch(t, s, want);
        if (f & F_PAUSE) {
            worker_pause(s, want);
            return;
        }
        if (f & (F_END | F_STOP)) {
            s->ended = f & F_STOP ? 2 : 1;
            return;
        }
    }
    trainer_gradient(t, t->params);
    vec_add(s->acc, t->grads, t->n);
    int64_t k = t->step + 1;
    if (c->ps.fetch_every > 1) { /* between fetches the worker steps its own copy */
        float lr = ps_lr_at(t, s, s->seen_clock);
        vec_sub_axpy(t->params, lr, t->grads, t->n);
    }
    if (k % c->ps.push_every == 0)
        worker_push(t, s);
    if (k % c->ps.fetch_every == 0) {
        int64_t want = s->sync ? s->seen_clock + 1 : 0;
        int f = worker_fetch(t, s, want);
        if (f & F_PAUSE)
            worker_pause(s, want);
        else if (f & (F_END | F_STOP))
            s->ended = f & F_STOP ? 2 : 1;
    }
}

/* ---- supervisor ------------------------------------------------------------------ */

/* fetch: get the servers' model first (else it was just fetched) */
static void supervisor_eval(dt_trainer *t, ps_state *s, int fetch)
{
    if (fetch)
        worker_fetch(t, s, -1);
    double loss, acc;
    trainer_evaluate(t, t->params, &loss, &acc);
    if (s->npoints == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        for (int c = 0; c < 4; c++)
            s->curve[c] = dt_realloc(s->curve[c], (size_t)s->cap * sizeof(double));
    }
    double wall = trainer_clock() - t->wall_start;
    double v[4] = { wall, (double)s->seen_clock, loss, acc };
    for (int c = 0; c < 4; c++)
        s->curve[c][s->npoints] = v[c];
    s->npoints++;
    printf("supervisor  wall %.1f s  server clock %lld  test accuracy %.2f%%  loss %.4f\n", wall,
           (long long)s->seen_clock, 100 * acc, loss);
    fflush(stdout);
}

/* Evaluate every ps.eval_seconds, or (without it) every run.eval_every of
 * the servers' clock in worker steps, until server 0 says the workers are
 * done, then once more; sleeps between checks. By steps, the supervisor
 * fetches the model every check (20 ms) and evaluates it when the clock has
 * passed the next multiple. */
void ps_supervisor_run(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const dt_config *c = t->cfg;
    const double seconds = c->ps.eval_seconds > 0 ? c->ps.eval_seconds
                           : c->run.eval_every > 0 ? 0 : 60;
    if (s->fin == MPI_REQUEST_NULL) /* posted once: a pause leaves it waiting */
        MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, 0, TAG_FIN, s->comm, &s->fin));
    MPI_Request pause;
    MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, 0, TAG_PAUSE, s->comm, &pause));
    double next = trainer_clock() + seconds;
    int64_t mark = seconds == 0 ? (int64_t)(ps_worker_steps_at(t, s, s->seen_clock) /
                                            (double)c->run.eval_every) : 0;
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Test(&s->fin, &done, MPI_STATUS_IGNORE));
        if (done)
            break;
        MPI_CHECK(MPI_Test(&pause, &done, MPI_STATUS_IGNORE));
        if (done) { /* every worker has paused for a checkpoint */
            ps_msg q = { .kind = K_PAUSE };
            for (int i = 0; i < s->S; i++)
                MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
            s->pause = 1;
            return;
        }
        if (t->poll_stop)
            t->poll_stop(); /* take part in the job-wide stop rounds */
        if (seconds > 0 && trainer_clock() >= next) {
            supervisor_eval(t, s, 1);
            next = trainer_clock() + seconds;
        } else if (seconds == 0) {
            worker_fetch(t, s, -1);
            int64_t m = (int64_t)(ps_worker_steps_at(t, s, s->seen_clock) /
                                  (double)c->run.eval_every);
            if (m > mark) {
                mark = m;
                supervisor_eval(t, s, 0);
            }
        }
        nanosleep((&(struct timespec){ 0, 20000000L }), NULL);
    }
    MPI_CHECK(MPI_Cancel(&pause));
    MPI_CHECK(MPI_Wait(&pause, MPI_STATUS_IGNORE));
    supervisor_eval(t, s, 1);
    ps_msg q = { .kind = K_DONE };
    for (int i = 0; i < s->S; i++)
        MPI_CHECK(MPI_Send(&q, sizeof q, MPI_BYTE, i, TAG_REQ, s->comm));
}
