/* The test-only device-memory backend (backend/cpu_devmem.c) has teeth: its
 * memory cannot be read or written by the host outside its own calls (a
 * forked child that tries dies of SIGSEGV), while its own ops and copies
 * work. tests/devmem.sh relies on this to catch host code that touches a
 * device vector without to_host/to_backend. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "tap.h"

/* 1 if the child died of SIGSEGV touching p (read, or write when write) */
static int host_touch_faults(float *p, int write)
{
    pid_t pid = fork();
    if (pid == 0) {
        volatile float *q = p;
        if (write)
            q[0] = 1.0f;
        else
            (void)q[0];
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return 0;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

int main(void)
{
    const dt_backend *be = backend_cpu_devmem();
    CHECK(be->device == 1, "the backend says device = 1");
    const size_t n = 1000;
    float *x = be->mem_alloc(n * sizeof(float)), *g = be->mem_alloc(n * sizeof(float));
    float *v = be->mem_alloc(n * sizeof(float));
    CHECK(host_touch_faults(x, 0), "a host read of backend memory faults");
    CHECK(host_touch_faults(x, 1), "a host write of backend memory faults");

    float hx[1000], hg[1000], hv[1000] = { 0 }, back[1000];
    for (size_t i = 0; i < n; i++) {
        hx[i] = (float)i / 7.0f - 3.0f;
        hg[i] = (float)(i % 13) / 5.0f - 1.0f;
    }
    be->to_backend(x, hx, sizeof hx);
    be->to_backend(g, hg, sizeof hg);
    be->flat_sgd(n, 0.9f, 1e-4f, 1, 0.05f, x, g, v);
    be->flat_scale(n, 0.5f, x);
    backend_cpu()->flat_sgd(n, 0.9f, 1e-4f, 1, 0.05f, hx, hg, hv);
    backend_cpu()->flat_scale(n, 0.5f, hx);
    be->to_host(back, x, sizeof back);
    CHECK(memcmp(back, hx, sizeof hx) == 0, "flat_sgd and flat_scale equal the CPU's");
    be->to_host(back, v, sizeof back);
    CHECK(memcmp(back, hv, sizeof hv) == 0, "the momentum buffer equals the CPU's");
    CHECK(host_touch_faults(v, 0), "still unreadable after the backend's calls");
    be->mem_free(x);
    be->mem_free(g);
    be->mem_free(v);
    return tap_done();
}
