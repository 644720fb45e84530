/* A group's step count kept by rounds of a non-blocking sum, for the
 * asynchronous modes. Each rank adds its own steps; a round is one
 * MPI_Iallreduce of (steps since the last round, stop flag) over a
 * duplicate of the group's communicator, posted at one step and tested at
 * the next ones without waiting. No rank holds the count: every rank pays
 * the same for it: no rank owns a one-sided window and runs ahead of the
 * others. Rounds are matched by order, so every rank sees
 * the same sequence of totals and can take a decision (a distributed step,
 * a checkpoint, the end) at the same round as the others. */
#ifndef DT_COMM_GCOUNT_H
#define DT_COMM_GCOUNT_H

#include <mpi.h>
#include <stdint.h>

typedef struct dt_gcount {
    MPI_Comm comm, close;     /* the rounds; the closing agreement */
    int nranks;
    int64_t posted;           /* rounds this rank has started */
    MPI_Request req;
    int64_t send[2], recv[2]; /* (steps, stop flags) of the round in flight */
    int64_t pending;          /* this rank's steps not yet in a round */
    int64_t total;            /* the group's steps, as of the last completed round */
    int64_t before;           /* total before that round */
    int stop;                 /* a stop was requested by some rank, as of that round */
    int asked;                /* this rank has requested a stop */
} dt_gcount;

/* Collective over comm. The count starts at total (a resumed run's). */
void gcount_init(dt_gcount *g, MPI_Comm comm, int64_t total);
/* Adds this rank's steps (and a stop request); starts a round if none is in
 * flight, then tests it. Returns 1 when a round has completed: total,
 * before and stop are updated, and no round is in flight until the next
 * call (so a caller that stops after it leaves nothing open). */
int gcount_poll(dt_gcount *g, int64_t steps, int stop);
/* Called after gcount_poll returned 0, and again after a completed round
 * that brought no event. The group's next event (a distributed step, a
 * checkpoint, the end) comes when the count reaches next: this rank waits,
 * testing the round, while it holds its share ((next - total) / ranks,
 * rounded up) of the steps left uncounted, so however slowly rounds
 * complete (on oversubscribed cores a round takes tens of milliseconds) the
 * count passes next by less than a step per rank, plus the steps a rank
 * takes while it has not yet seen a round that others have (seen on 4
 * ranks on 2 busy cores: 66-69 steps for a budget of 64).
 * Returns 1 if a round completed while waiting (as gcount_poll), else 0. */
int gcount_hold(dt_gcount *g, int64_t next);
/* The first multiple of every (> 0) group steps per rank after the count,
 * in all ranks' steps; INT64_MAX when every is 0. */
int64_t gcount_next_multiple(const dt_gcount *g, int64_t every);
/* Did the last completed round carry the group's steps per rank across a
 * multiple of every (> 0)? */
int gcount_crossed(const dt_gcount *g, int64_t every);
/* Collective, at a point every rank reaches after the same completed round
 * (a checkpoint, the end): adds every rank's steps not yet counted. */
void gcount_settle(dt_gcount *g);
/* Collective: every rank completes as many rounds as the most any rank
 * started (a caller that stops after a fixed number of steps, not at a
 * round's verdict, may leave one open on some ranks only); frees the
 * communicators. */
void gcount_free(dt_gcount *g);

#endif
