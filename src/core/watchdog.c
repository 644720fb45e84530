#include "core/watchdog.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    pthread_t thread;
    int running;
    double timeout;
    int rank;
    char label[64];
    _Atomic(const char *) what;
    atomic_int peer;
    atomic_llong step;
    _Atomic double last;   /* CLOCK_MONOTONIC seconds of the last progress */
    atomic_int armed;
    atomic_int quit;
} wd = { .what = "start-up" };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *watch(void *arg)
{
    (void)arg;
    /* check ten times per timeout, at most once per second */
    double period = wd.timeout / 10 < 1 ? wd.timeout / 10 : 1;
    struct timespec nap = { (time_t)period, (long)((period - (double)(time_t)period) * 1e9) };
    while (!atomic_load(&wd.quit)) {
        nanosleep(&nap, NULL);
        if (!atomic_load(&wd.armed))
            continue;
        double idle = now() - atomic_load(&wd.last);
        if (idle < wd.timeout)
            continue;
        char what[160];
        const char *w = atomic_load(&wd.what);
        if (strstr(w, "%d"))
            snprintf(what, sizeof what, w, atomic_load(&wd.peer));
        else
            snprintf(what, sizeof what, "%s", w);
        fprintf(stderr, "dtrain: %srank %d: no progress for %.0f s (run.stall_timeout = %g) "
                        "after step %lld, waiting for %s; aborting the job\n",
                wd.label, wd.rank, idle, wd.timeout, atomic_load(&wd.step), what);
        fflush(stderr);
        /* mpiexec forwards output through its proxies, and tears them down
         * on an abort: a second for the line to reach the job's log */
        (nanosleep)(&(struct timespec){ 1, 0 }, NULL); /* (): never smpicc's macro */
        /* MPI_Abort should end every process; should it block (a lock held
         * by the hung main thread), the alarm's default action ends this
         * one and mpiexec ends the others */
        alarm(10);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return NULL;
}

void watchdog_start(double timeout_s, int rank, const char *label)
{
#ifdef DTRAIN_SIM
    /* the simulator: an OS thread would watch the host's clock, not the
     * simulated one, and SimGrid reports a deadlock itself */
    (void)timeout_s, (void)rank, (void)label;
    return;
#endif
    if (timeout_s <= 0 || wd.running)
        return;
    wd.timeout = timeout_s;
    wd.rank = rank;
    snprintf(wd.label, sizeof wd.label, "%s", label ? label : "");
    atomic_store(&wd.last, now());
    atomic_store(&wd.armed, 1);
    atomic_store(&wd.quit, 0);
    if (pthread_create(&wd.thread, NULL, watch, NULL) != 0) {
        fprintf(stderr, "dtrain: rank %d: cannot start the stall watchdog thread; "
                        "run.stall_timeout is not enforced\n", rank);
        return;
    }
    wd.running = 1;
}

void watchdog_phase(const char *what, int peer)
{
    atomic_store(&wd.peer, peer);
    atomic_store(&wd.what, what);
}

void watchdog_beat(long long step)
{
    if (step >= 0)
        atomic_store(&wd.step, step);
    atomic_store(&wd.last, now());
}

void watchdog_disarm(void)
{
    atomic_store(&wd.armed, 0);
}

void watchdog_stop(void)
{
    if (!wd.running)
        return;
    atomic_store(&wd.armed, 0);
    atomic_store(&wd.quit, 1);
    pthread_join(wd.thread, NULL);
    wd.running = 0;
}
