/* Pairwise swaps with graph neighbours; see swap.h.
 *
 * Threaded protocol (tags on a private duplicate of the communicator):
 *   starter i -> j   REQ  i's vector for the edge (n floats)
 *   j's thread       fills its own vector, absorbs i's, replies
 *   j -> starter i   REP  j's vector (n floats)
 *   i -> j           REQ  with no data: i starts no more swaps
 * The thread only ever receives REQ and the main thread only REP, so the two
 * never steal each other's messages. Messages from one rank to another
 * arrive in order, so a neighbour's last request is answered before its
 * "done" is counted. */
#include "comm/swap.h"
#include "core/watchdog.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/progress.h"
#include "core/error.h"

enum { TAG_REQ = 41, TAG_REP = 42, TAG_LOCKSTEP = 43 };

struct dt_swap {
    MPI_Comm comm;
    const dt_egraph *g;
    int rank, threaded;
    size_t n;
    dt_swap_fill fill;
    dt_swap_absorb absorb;
    void *arg;
    pthread_mutex_t lock;
    dt_progress *server;        /* threaded: answers the neighbours' swaps */
    int finished;
    float *out, *in;            /* (max_deg, n) lockstep; (n) each, threaded main */
    float *s_in, *s_out;        /* (n) the thread's */
    MPI_Request *reqs;          /* (2 max_deg) */
    MPI_Status *stats;          /* (2 max_deg) */
    dt_swap_stats st;           /* main thread's */
    int64_t t_answered, t_bytes;/* the thread's, under the lock */
};

void swap_lock(dt_swap *s)
{
    if (pthread_mutex_lock(&s->lock))
        DT_FATAL("swap: pthread_mutex_lock failed");
}

void swap_unlock(dt_swap *s)
{
    if (pthread_mutex_unlock(&s->lock))
        DT_FATAL("swap: pthread_mutex_unlock failed");
}

static int end_of(const dt_swap *s, int peer)
{
    for (int m = 0; m < s->g->deg[s->rank]; m++)
        if (s->g->adj[s->rank][m].peer == peer)
            return m;
    return -1;
}

/* The thread: poll (a blocking receive would spin a core inside MPI) for
 * requests until every neighbour has sent its empty "done". */
static void serve(void *arg)
{
    dt_swap *s = arg;
    int deg = s->g->deg[s->rank], done = 0;
    while (done < deg) {
        MPI_Request r;
        MPI_Status st;
        int flag = 0, count;
        MPI_CHECK(MPI_Irecv(s->s_in, (int)s->n, MPI_FLOAT, MPI_ANY_SOURCE, TAG_REQ, s->comm, &r));
        for (long spins = 0; !flag; spins++) {
            MPI_CHECK(MPI_Test(&r, &flag, &st));
            if (!flag && spins > 64)
                nanosleep((&(struct timespec){ 0, 50000 }), NULL);
        }
        MPI_CHECK(MPI_Get_count(&st, MPI_FLOAT, &count));
        int m = end_of(s, st.MPI_SOURCE);
        if (m < 0)
            DT_FATAL("swap: rank %d got a request from rank %d, which is not its neighbour",
                     s->rank, st.MPI_SOURCE);
        if (count == 0) {
            done++;
            continue;
        }
        swap_lock(s);
        s->fill(s->arg, m, s->s_out);
        s->absorb(s->arg, m, s->s_in);
        s->t_answered++;
        s->t_bytes += (int64_t)(s->n * sizeof(float));
        swap_unlock(s);
        MPI_CHECK(MPI_Send(s->s_out, (int)s->n, MPI_FLOAT, st.MPI_SOURCE, TAG_REP, s->comm));
    }
}

dt_swap *swap_create(MPI_Comm comm, const dt_egraph *g, int rank, size_t n, int threaded,
                     dt_swap_fill fill, dt_swap_absorb absorb, void *arg)
{
    dt_swap *s = dt_calloc(1, sizeof *s);
    MPI_CHECK(MPI_Comm_dup(comm, &s->comm));
    s->g = g;
    s->rank = rank;
    s->n = n;
    s->threaded = threaded;
    s->fill = fill;
    s->absorb = absorb;
    s->arg = arg;
    if (pthread_mutex_init(&s->lock, NULL))
        DT_FATAL("swap: pthread_mutex_init failed");
    int slots = threaded ? 1 : (g->max_deg > 0 ? g->max_deg : 1);
    s->out = dt_falloc((size_t)slots * n);
    s->in = dt_falloc((size_t)slots * n);
    s->reqs = dt_malloc(2 * (size_t)slots * sizeof *s->reqs);
    s->stats = dt_malloc(2 * (size_t)slots * sizeof *s->stats);
    if (threaded) {
        s->s_in = dt_falloc(n);
        s->s_out = dt_falloc(n);
    }
    return s;
}

/* Threaded: started here, answered by the neighbour's thread. */
static void swap_start(dt_swap *s, int m)
{
    int peer = s->g->adj[s->rank][m].peer;
    MPI_Request r;
    MPI_CHECK(MPI_Irecv(s->in, (int)s->n, MPI_FLOAT, peer, TAG_REP, s->comm, &r));
    swap_lock(s);
    s->fill(s->arg, m, s->out);
    swap_unlock(s);
    watchdog_phase("a swap with rank %d", peer);
    MPI_CHECK(MPI_Send(s->out, (int)s->n, MPI_FLOAT, peer, TAG_REQ, s->comm));
    MPI_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    swap_lock(s);
    s->absorb(s->arg, m, s->in);
    swap_unlock(s);
    s->st.started++;
    s->st.bytes_sent += (int64_t)(s->n * sizeof(float));
}

/* Lockstep: every edge with an end due at `step`, all at once, both ranks
 * at the same step; absorbed in end order after all have arrived. */
static void swap_lockstep(dt_swap *s, int64_t step)
{
    const dt_eend *e = s->g->adj[s->rank];
    int deg = s->g->deg[s->rank], nreq = 0, k = (int)(step % s->g->K);
    int *due = dt_malloc((size_t)(deg ? deg : 1) * sizeof *due), ndue = 0;
    for (int m = 0; m < deg; m++)
        if (e[m].phase == k || e[m].peer_phase == k)
            due[ndue++] = m;
    swap_lock(s);
    for (int d = 0; d < ndue; d++)
        s->fill(s->arg, due[d], s->out + (size_t)d * s->n);
    swap_unlock(s);
    for (int d = 0; d < ndue; d++) {
        int peer = e[due[d]].peer;
        MPI_CHECK(MPI_Irecv(s->in + (size_t)d * s->n, (int)s->n, MPI_FLOAT, peer, TAG_LOCKSTEP,
                            s->comm, &s->reqs[nreq++]));
        MPI_CHECK(MPI_Isend(s->out + (size_t)d * s->n, (int)s->n, MPI_FLOAT, peer, TAG_LOCKSTEP,
                            s->comm, &s->reqs[nreq++]));
    }
    watchdog_phase(ndue == 1 ? "a swap with rank %d" : "swaps with the due neighbours "
                                                      "(the first: rank %d)",
                   ndue ? e[due[0]].peer : -1);
    MPI_CHECK(MPI_Waitall(nreq, s->reqs, s->stats));
    swap_lock(s);
    for (int d = 0; d < ndue; d++)
        s->absorb(s->arg, due[d], s->in + (size_t)d * s->n);
    swap_unlock(s);
    s->st.started += ndue;
    s->st.bytes_sent += (int64_t)ndue * (int64_t)(s->n * sizeof(float));
    free(due);
}

void swap_due(dt_swap *s, int64_t step)
{
    if (!s->threaded) {
        swap_lockstep(s, step);
        return;
    }
    if (!s->server) {
        /* started at the first step, not at creation: a restored checkpoint
         * must be in place before the thread answers with it. Not later
         * either: a neighbour may be waiting for an answer while this rank
         * goes on to a collective (a log write) without a swap of its own */
        s->server = progress_start();
        progress_post(s->server, serve, s);
    }
    int k = (int)(step % s->g->K);
    for (int m = 0; m < s->g->deg[s->rank]; m++)
        if (s->g->adj[s->rank][m].phase == k)
            swap_start(s, m);
}

void swap_finish(dt_swap *s)
{
    if (!s->threaded || s->finished)
        return;
    s->finished = 1;
    if (!s->server) { /* no swap was due yet: the neighbours still need an answer */
        s->server = progress_start();
        progress_post(s->server, serve, s);
    }
    for (int m = 0; m < s->g->deg[s->rank]; m++)
        MPI_CHECK(MPI_Send(NULL, 0, MPI_FLOAT, s->g->adj[s->rank][m].peer, TAG_REQ, s->comm));
    progress_stop(s->server);
    s->server = NULL;
}

dt_swap_stats swap_stats(dt_swap *s)
{
    swap_lock(s);
    dt_swap_stats r = s->st;
    r.answered = s->t_answered;
    r.bytes_sent += s->t_bytes;
    swap_unlock(s);
    return r;
}

void swap_free(dt_swap *s)
{
    if (!s)
        return;
    swap_finish(s);
    MPI_CHECK(MPI_Comm_free(&s->comm));
    pthread_mutex_destroy(&s->lock);
    free(s->out);
    free(s->in);
    free(s->reqs);
    free(s->stats);
    free(s->s_in);
    free(s->s_out);
    free(s);
}
