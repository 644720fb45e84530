#include "comm/gcount.h"

#include <time.h>

#include "core/error.h"

void gcount_init(dt_gcount *g, MPI_Comm comm, int64_t total)
{
    *g = (dt_gcount){ .req = MPI_REQUEST_NULL, .total = total, .before = total };
    MPI_CHECK(MPI_Comm_dup(comm, &g->comm));
    MPI_CHECK(MPI_Comm_dup(comm, &g->close));
    MPI_CHECK(MPI_Comm_size(g->comm, &g->nranks));
}

int gcount_poll(dt_gcount *g, int64_t steps, int stop)
{
    g->pending += steps;
    g->asked |= stop != 0; /* a request made while a round is in flight rides on the next */
    if (g->req == MPI_REQUEST_NULL) {
        g->send[0] = g->pending;
        g->send[1] = g->asked;
        g->pending = 0;
        g->posted++;
        MPI_CHECK(MPI_Iallreduce(g->send, g->recv, 2, MPI_INT64_T, MPI_SUM, g->comm, &g->req));
    }
    int done = 0;
    MPI_CHECK(MPI_Test(&g->req, &done, MPI_STATUS_IGNORE));
    if (!done)
        return 0;
    g->before = g->total;
    g->total += g->recv[0];
    g->stop |= g->recv[1] > 0;
    return 1;
}

int gcount_hold(dt_gcount *g, int64_t next)
{
    const int64_t left = next - g->total;
    int64_t share = (left + g->nranks - 1) / g->nranks;
    if (share < 1)
        share = 1;
    while ((g->req != MPI_REQUEST_NULL ? g->send[0] : 0) + g->pending >= share) {
        /* yield the core: on oversubscribed nodes the ranks this round
         * waits for may need it */
        nanosleep((&(struct timespec){ 0, 100000 }), NULL); /* (): SMPI makes it a macro */
        if (gcount_poll(g, 0, 0))
            return 1;
    }
    return 0;
}

int gcount_crossed(const dt_gcount *g, int64_t every)
{
    const int64_t per = every * g->nranks; /* group steps per rank -> all ranks' steps */
    return every > 0 && g->total / per > g->before / per;
}

int64_t gcount_next_multiple(const dt_gcount *g, int64_t every)
{
    if (every <= 0)
        return INT64_MAX;
    const int64_t per = every * g->nranks;
    return (g->total / per + 1) * per;
}

void gcount_settle(dt_gcount *g)
{
    if (g->req != MPI_REQUEST_NULL) { /* only off the decision path (an error's teardown) */
        MPI_CHECK(MPI_Wait(&g->req, MPI_STATUS_IGNORE));
        g->total += g->recv[0];
        g->stop |= g->recv[1] > 0;
    }
    int64_t sum = 0;
    MPI_CHECK(MPI_Allreduce(&g->pending, &sum, 1, MPI_INT64_T, MPI_SUM, g->comm));
    g->pending = 0;
    g->total += sum;
    g->before = g->total;
}

void gcount_free(dt_gcount *g)
{
    int64_t most = 0;
    MPI_CHECK(MPI_Allreduce(&g->posted, &most, 1, MPI_INT64_T, MPI_MAX, g->close));
    if (g->req != MPI_REQUEST_NULL)
        MPI_CHECK(MPI_Wait(&g->req, MPI_STATUS_IGNORE));
    for (; g->posted < most; g->posted++) { /* the rounds others started, with nothing */
        g->send[0] = g->send[1] = 0;
        MPI_CHECK(MPI_Iallreduce(g->send, g->recv, 2, MPI_INT64_T, MPI_SUM, g->comm, &g->req));
        MPI_CHECK(MPI_Wait(&g->req, MPI_STATUS_IGNORE));
    }
    MPI_CHECK(MPI_Comm_free(&g->close));
    MPI_CHECK(MPI_Comm_free(&g->comm));
}
