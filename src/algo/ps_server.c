/* Parameter server (algo/ps.c): the servers' loop. A server answers
 * fetches and applies pushes to its range of the flat vector as they arrive
 * (async: one optimizer step per push, scaled by staleness; sync: one per R
 * fresh gradients, stale ones dropped), pauses every client for a periodic
 * checkpoint, and ends when its last client is done. */
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

/* ---- server ------------------------------------------------------------------ */

static void server_reply(ps_state *s, dt_trainer *t, int to)
{
    ps_msg *h = (ps_msg *)s->inbox; /* the inbox is free again: the request was read */
    int me = t->rank;
    h->kind = K_REPLY;
    /* a checkpoint first: the end and a stop come after it (every worker
     * must take the same path to the next collective) */
    h->flags = s->pausing ? F_PAUSE
                          : (s->clock >= s->budget ? F_END : 0) |
                                (s->stop_at >= 0 && s->clock >= s->stop_at ? F_STOP : 0);
    h->clock = s->clock;
    h->count = (int64_t)s->m;
    vec_copy((float *)(h + 1), t->params + s->lo[me], s->m);
    MPI_CHECK(MPI_Send(s->inbox, (int)(sizeof *h + s->m * sizeof(float)), MPI_BYTE, to, TAG_REP,
                       s->comm));
    t->meter.bytes_sent += (int64_t)(s->m * sizeof(float));
}

/* The pushed gradient, dense over the range, into g; -1 if malformed. */
static int server_decode(ps_state *s, const ps_msg *h, size_t bytes, float *g)
{
    const char *p = (const char *)(h + 1);
    size_t body = bytes - sizeof *h;
    if (h->kind == K_PUSH_DENSE) {
        if ((size_t)h->count != s->m || body != s->m * sizeof(float))
            return dt_err_set("dense push of %lld values for a range of %zu",
                              (long long)h->count, s->m);
        vec_copy(g, (const float *)p, s->m);
        return 0;
    }
    memset(g, 0, s->m * sizeof(float));
    if ((h->kind == K_PUSH_QSPARSE ? qsparse_decode : sparse_decode)(
            p, body, s->m, s->m, s->touched, s->tval, &s->ntouched) != 0)
        return -1;
    if ((int64_t)s->ntouched != h->count)
        return dt_err_set("sparse push: header says %lld pairs, body %zu", (long long)h->count,
                          s->ntouched);
    for (size_t i = 0; i < s->ntouched; i++)
        g[s->touched[i]] = s->tval[i];
    return 0;
}

static void server_apply(ps_state *s, dt_trainer *t, const float *g)
{
    float lr = ps_lr_at(t, s, s->clock);
    t->lr = lr;
    /* the trainer's optimizer on this server's range: its state vectors
     * hold the range's entries at the same offsets */
    optim_step_range(&t->opt, s->lo[t->rank], s->lo[t->rank + 1], t->params + s->lo[t->rank], g,
                     lr, s->clock + 1);
    s->clock++;
    if (s->ckpt_at >= 0 && s->clock >= s->ckpt_at && s->clock < s->budget &&
        !(s->stop_at >= 0 && s->clock >= s->stop_at))
        s->pausing = 1;
}

/* ps-sync: serve the fetches waiting for the clock just reached. */
static void server_release(ps_state *s, dt_trainer *t)
{
    for (int w = 0; w < s->W; w++)
        if (s->want[w] >= 0 && (s->want[w] <= s->clock || s->clock >= s->budget || s->pausing ||
                                (s->stop_at >= 0 && s->clock >= s->stop_at))) {
            s->want[w] = -1;
            server_reply(s, t, s->S + (s->sup >= 0) + w);
        }
}

static void server_push(ps_state *s, dt_trainer *t, const ps_msg *h, size_t bytes, int w)
{
    if ((h->flags & F_STOP) && s->stop_at < 0)
        s->stop_at = s->sync ? h->clock + 1 : s->clock + 1;
    if (s->sync) {
        if (h->clock != s->clock || s->have[w]) {
            s->dropped++;
            return;
        }
        if (server_decode(s, h, bytes, s->slots + (size_t)w * s->m) != 0)
            DT_FATAL("server %d: malformed push from worker %d: %s", t->rank, w, dt_err_msg());
        s->have[w] = 1;
        s->hist_delay[0]++;
        if (++s->nhave < s->R)
            return;
        /* the mean in worker order: deterministic whichever arrived first */
        vec_zero(s->g, s->m);
        for (int i = 0; i < s->W; i++)
            if (s->have[i]) {
                vec_add(s->g, s->slots + (size_t)i * s->m, s->m);
                s->have[i] = 0;
            }
        vec_scale(s->g, 1.0f / (float)s->R, s->m);
        s->nhave = 0;
        server_apply(s, t, s->g);
        server_release(s, t);
        return;
    }
    if (server_decode(s, h, bytes, s->g) != 0)
        DT_FATAL("server %d: malformed push from worker %d: %s", t->rank, w, dt_err_msg());
    int64_t d = s->clock - h->clock;
    s->hist_delay[d < HIST_DELAYS ? d : HIST_DELAYS]++;
    if (s->stale) {
        if (h->kind == K_PUSH_DENSE) {
            staleness_scales(s->stale, d, NULL, s->m, s->scale);
            vec_mul(s->g, s->scale, s->m);
            staleness_record(s->stale, NULL, 0);
        } else {
            staleness_scales(s->stale, d, s->touched, s->ntouched, s->scale);
            for (size_t j = 0; j < s->ntouched; j++)
                s->g[s->touched[j]] *= s->scale[j];
            staleness_record(s->stale, s->touched, s->ntouched);
        }
    }
    server_apply(s, t, s->g);
}

/* Serve until every worker (and the supervisor) is done, or has paused for
 * a periodic checkpoint. Every client has a header receive posted;
 * MPI_Waitsome hands over all that arrived, so a busy worker cannot starve
 * another (a probe for any source may keep matching the same sender). A
 * push's body follows its header. A pause: once this server's clock passes
 * the checkpoint's (or a worker paused on another server's word) replies
 * carry F_PAUSE; a worker that sees it sends K_PAUSE after its last push,
 * so when every open client has paused no push is in flight; server 0 then
 * tells the supervisor, which pauses too. */
void ps_server_run(dt_trainer *t)
{
    ps_state *s = t->algo_state;
    const int first = s->S, nc = s->nc; /* clients: the supervisor, then workers */
    int first_worker = s->S + (s->sup >= 0);
    ps_msg *head = s->head;
    MPI_Request *req = s->hreq;
    MPI_Status *st = dt_malloc((size_t)nc * sizeof *st);
    int *ready = dt_malloc((size_t)nc * sizeof *ready);
    for (int c = 0; c < nc; c++)
        if (req[c] == MPI_REQUEST_NULL && (s->paused[c] || !s->hist_queue))
            MPI_CHECK(MPI_Irecv(&head[c], sizeof head[c], MPI_BYTE, first + c, TAG_REQ, s->comm,
                                &req[c]));
    memset(s->paused, 0, (size_t)nc);
    s->npaused = 0;
    if (!s->hist_queue)
        s->hist_queue = dt_calloc((size_t)nc + 1, sizeof *s->hist_queue);
    while (s->open > 0 && !(s->npaused > 0 && s->npaused == s->open)) {
        int nready = 0;
        MPI_CHECK(MPI_Waitsome(nc, req, &nready, ready, st));
        s->hist_queue[nready]++;
        for (int r = 0; r < nready; r++) {
            int c = ready[r], src = first + c, w = src - first_worker;
            ps_msg h = head[c];
            if (h.kind == K_FETCH) {
                if (s->sync && w >= 0 && h.clock > s->clock && s->clock < s->budget &&
                    !s->pausing && !(s->stop_at >= 0 && s->clock >= s->stop_at))
                    s->want[w] = h.clock;
                else
                    server_reply(s, t, src);
            } else if (h.kind == K_PUSH_DENSE || h.kind == K_PUSH_SPARSE ||
                       h.kind == K_PUSH_QSPARSE) {
                if (h.count < 0 || (size_t)h.count > s->m)
                    DT_FATAL("server %d: push of %lld entries from rank %d for a range of %zu",
                             t->rank, (long long)h.count, src, s->m);
                /* the body's length is the message's (decoding checks it) */
                MPI_Status bs;
                int body = 0;
                memcpy(s->inbox, &h, sizeof h);
                MPI_CHECK(MPI_Recv(s->inbox + sizeof h, (int)(s->inbox_bytes - sizeof h),
                                   MPI_BYTE, src, TAG_DATA, s->comm, &bs));
                MPI_CHECK(MPI_Get_count(&bs, MPI_BYTE, &body));
                server_push(s, t, (const ps_msg *)s->inbox, sizeof h + (size_t)body, w);
            } else if (h.kind == K_DONE) {
                s->open--;
                if (w >= 0 && s->open == (s->sup >= 0) && s->sup >= 0 && t->rank == 0)
                    MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, s->sup, TAG_FIN, s->comm));
                continue; /* no more requests from this client */
            } else if (h.kind == K_PAUSE) {
                s->pausing = 1; /* a worker saw another server's pause */
                s->paused[c] = 1;
                s->npaused++;
                continue; /* its next request comes after the checkpoint */
            } else {
                DT_FATAL("server %d: unknown request kind %d from rank %d", t->rank, h.kind,
                         src);
            }
            MPI_CHECK(MPI_Irecv(&head[c], sizeof head[c], MPI_BYTE, src, TAG_REQ, s->comm,
                                &req[c]));
        }
        if (t->poll_stop && t->poll_stop() && s->stop_at < 0)
            s->stop_at = s->clock; /* a signal reached this server: end at the next reply */
        if (s->sync && (s->stop_at >= 0 || s->pausing))
            server_release(s, t);
        /* every worker has paused: the supervisor (if any) pauses next */
        if (s->pausing && s->sup >= 0 && !s->told_sup && !s->paused[0] &&
            s->npaused == s->open - 1 && t->rank == 0) {
            MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, s->sup, TAG_PAUSE, s->comm));
            s->told_sup = 1;
        }
    }
    free(st);
    free(ready);
    t->step = s->clock - 1; /* the loop adds the last one */
}
