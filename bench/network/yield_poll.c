/* LD_PRELOAD shim for the network benchmark (bench/network/run.sh --yield-shim):
 * give the CPU away after a fruitless non-blocking epoll_wait.
 *
 * Why: with UCX_TLS=tcp, a rank blocked in MPI spins in ucp_worker_progress,
 * whose TCP transport polls its sockets with epoll_wait(..., timeout = 0).
 * With 8 ranks on 2 cores, that spinning takes time slices from ranks that
 * have computing (or kernel TCP work) to do. MPICH's ch4 device has no knob for
 * this (MPIR_CVAR_POLLS_BEFORE_YIELD is read only by ch3:nemesis), UCX none
 * either. After YIELD_POLL_EVERY (default 1) consecutive empty polls in a
 * thread, this shim calls sched_yield(), which lets any other runnable task on
 * that core go first and costs a system call when there is none.
 *
 *   gcc -O2 -shared -fPIC -o yield_poll.so yield_poll.c -ldl
 *   LD_PRELOAD=./yield_poll.so mpiexec ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);

static _Atomic(epoll_wait_fn) real_epoll_wait;
static long yield_every = 1;
static _Thread_local long empty_polls;

__attribute__((constructor)) static void yield_poll_init(void)
{
    const char *s = getenv("YIELD_POLL_EVERY");
    if (s && atol(s) > 0)
        yield_every = atol(s);
    atomic_store(&real_epoll_wait, (epoll_wait_fn)dlsym(RTLD_NEXT, "epoll_wait"));
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    epoll_wait_fn real = atomic_load(&real_epoll_wait);
    if (!real) { /* called before our constructor ran */
        real = (epoll_wait_fn)dlsym(RTLD_NEXT, "epoll_wait");
        atomic_store(&real_epoll_wait, real);
    }
    int rc = real(epfd, events, maxevents, timeout);
    if (timeout == 0 && rc == 0) {
        if (++empty_polls >= yield_every) {
            empty_polls = 0;
            sched_yield();
        }
    } else {
        empty_polls = 0;
    }
    return rc;
}
