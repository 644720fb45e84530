/* A communication thread: runs one posted job at a time (e.g. a gossip
 * exchange's sends, receives and wait) while the training thread computes.
 * Needs MPI_THREAD_MULTIPLE (dtrain checks it at start-up). */
#ifndef DT_COMM_PROGRESS_H
#define DT_COMM_PROGRESS_H

typedef struct dt_progress dt_progress;

dt_progress *progress_start(void);
/* Runs fn(arg) on the thread. At most one job at a time: the previous one
 * must have been waited for. */
void progress_post(dt_progress *p, void (*fn)(void *), void *arg);
/* 1 if the posted job has finished (or none was posted), without blocking. */
int progress_test(dt_progress *p);
/* Blocks until the posted job has finished. */
void progress_wait(dt_progress *p);
/* Waits for the job in hand, ends the thread, frees p. */
void progress_stop(dt_progress *p);

#endif
