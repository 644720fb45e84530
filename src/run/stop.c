#include "run/stop.h"

#include <signal.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "run/run.h"

static volatile sig_atomic_t signalled = 0;

static void on_signal(int sig)
{
    (void)sig;
    signalled = 1;
}

/* One round sums (signal flag, still training) over the job. Rounds are
 * matched by order on the communicator; a rank starts the next only after
 * the previous completed, so every rank sees the same sequence of sums. */
static struct {
    MPI_Comm world;
    MPI_Request req;
    int send[2], recv[2];
    int seen;
} job = { MPI_COMM_NULL, MPI_REQUEST_NULL, {0, 0}, {0, 0}, 0 };

void stop_install(MPI_Comm world)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    MPI_CHECK(MPI_Comm_dup(world, &job.world));
}

static void round_start(int training)
{
    job.send[0] = signalled ? 1 : 0;
    job.send[1] = training;
    MPI_CHECK(MPI_Iallreduce(job.send, job.recv, 2, MPI_INT, MPI_SUM, job.world, &job.req));
}

/* 1 if a round completed (its sums in job.recv). */
static int round_test(void)
{
    if (job.req == MPI_REQUEST_NULL)
        return 0;
    int done = 0;
    MPI_CHECK(MPI_Test(&job.req, &done, MPI_STATUS_IGNORE));
    if (done && job.recv[0] > 0)
        job.seen = 1;
    return done;
}

int stop_poll(void)
{
    if (job.world == MPI_COMM_NULL)
        return signalled;
    if (job.req == MPI_REQUEST_NULL || round_test())
        round_start(1);
    return job.seen || signalled;
}

int stop_finish(int status)
{
    if (job.world == MPI_COMM_NULL)
        return status;
    if (job.req == MPI_REQUEST_NULL)
        round_start(0);
    for (;;) {
        if (round_test()) {
            if (job.recv[1] == 0)
                break; /* nobody was training in this round: all are here */
            round_start(0);
        }
        nanosleep((&(struct timespec){ 0, 2000000L }), NULL);
    }
    int v[3] = { status == 1, status == DT_EXIT_NONFINITE, status == DT_EXIT_REQUEUE }, all[3];
    MPI_CHECK(MPI_Allreduce(v, all, 3, MPI_INT, MPI_MAX, job.world));
    MPI_CHECK(MPI_Comm_free(&job.world));
    return all[0] ? 1 : all[1] ? DT_EXIT_NONFINITE : all[2] ? DT_EXIT_REQUEUE : 0;
}
