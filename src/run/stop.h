/* Job-wide stop agreement. A SIGTERM or SIGUSR1 on any rank stops every rank
 * of every rank group, and no group ever waits for another while training:
 * the flags are summed by an MPI_Iallreduce on the whole job, started at a
 * step boundary and tested (never waited for) at the following ones, and
 * restarted each time it completes. Once a rank has seen the flag, its
 * group agrees inside itself on the step to stop at (run/loop.c). */
#ifndef DT_RUN_STOP_H
#define DT_RUN_STOP_H

#include <mpi.h>

/* Install the SIGTERM/SIGUSR1 handlers and start the agreement over world
 * (duplicated). Without it stop_poll reports this process's signals only. */
void stop_install(MPI_Comm world);

/* At a step boundary: 1 once a signal has reached this rank or, through a
 * completed round, any rank of the job. Never blocks. */
int stop_poll(void);

/* This rank is done training with `status` (0, 1, DT_EXIT_NONFINITE or
 * DT_EXIT_REQUEUE). Takes
 * part in the rounds, sleeping between tests rather than spinning, until
 * every rank of the job is done; returns the job's status on every rank:
 * 1 if any rank failed, else DT_EXIT_NONFINITE if any group stopped on NaN
 * or Inf, else DT_EXIT_REQUEUE if any group stopped on a
 * signal, else 0. Collective over the world given to stop_install. */
int stop_finish(int status);

#endif
