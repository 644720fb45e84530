/* Stall watchdog (run.stall_timeout): one thread per rank. When no progress
 * has been reported for the timeout, it prints what the rank is waiting for
 * (the phase last set by the trainer or the transport) and ends the whole
 * job with MPI_Abort, so a job with a hung rank frees its nodes instead of
 * waiting until its time limit.
 *
 * Progress is a completed step, a completed gradient, an evaluated test
 * batch or a written checkpoint dataset; a rank that has finished training
 * disarms its watchdog (it may wait for other rank groups for long). */
#ifndef DT_CORE_WATCHDOG_H
#define DT_CORE_WATCHDOG_H

/* Starts the thread, armed (timeout_s <= 0: does nothing). label is printed
 * in front of the message ("[group] " or ""). */
void watchdog_start(double timeout_s, int rank, const char *label);

/* What this rank waits for now: `what` is a string constant, with an
 * optional "%d" that is replaced by peer (e.g. "a message from rank %d"). */
void watchdog_phase(const char *what, int peer);

/* Progress: the timeout starts again. step: the rank's step count, or -1 to
 * keep the last one. */
void watchdog_beat(long long step);

/* Disarm (the rank is done training) or stop the thread. */
void watchdog_disarm(void);
void watchdog_stop(void);

#endif
