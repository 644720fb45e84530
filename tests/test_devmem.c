/* The test-only device-memory backend (backend/cpu_devmem.c) has teeth: its
 * memory cannot be read or written by the host outside its own calls (a
 * forked child that tries dies of SIGSEGV), while its own ops and copies
 * work. tests/devmem.sh relies on this to catch host code that touches a
 * device vector without to_host/to_backend. */
#include <mpi.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo/algo.h"
#include "backend/backend.h"
#include "comm/transport.h"
#include "core/error.h"
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

/* The devmem backend with its staging allocations counted. */
static int host_allocs, host_frees;
static void *(*devmem_host_alloc)(size_t);
static void (*devmem_host_free)(void *);
static void *count_alloc(size_t bytes)
{
    host_allocs++;
    return devmem_host_alloc(bytes);
}
static void count_free(void *p)
{
    host_frees += p != NULL;
    devmem_host_free(p);
}

/* Gossip-like steps over the staged transport to this rank itself: two
 * sends and two receives of device buffers per step. The received values
 * equal the sent ones, the host buffers of the first step serve the later
 * ones, a larger message grows them, and teardown frees them all. */
static void test_staging_pool(void)
{
    dt_backend counting = *backend_cpu_devmem();
    devmem_host_alloc = counting.host_alloc;
    devmem_host_free = counting.host_free;
    counting.host_alloc = count_alloc;
    counting.host_free = count_free;
    const dt_backend *be = &counting;
    dt_transport *tp = transport_staged_create(transport_mpi_create(MPI_COMM_SELF), be);
    enum { N = 300, BIG = 5000, STEPS = 6 };
    float *src[2], *dst[2];
    for (int k = 0; k < 2; k++) {
        src[k] = be->mem_alloc(BIG * sizeof(float));
        dst[k] = be->mem_alloc(BIG * sizeof(float));
    }
    static float h[BIG], back[BIG];
    int wrong = 0, after_first = 0, after_steady = 0;
    for (int step = 0; step < STEPS; step++) {
        const size_t n = step == STEPS - 1 ? BIG : N; /* the last step's message is larger */
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < n; i++)
                h[i] = (float)(step * 1000 + k * 100) + (float)i / 8.0f;
            be->to_backend(src[k], h, n * sizeof(float));
        }
        dt_request req[4];
        for (int k = 0; k < 2; k++)
            tp->irecv(tp, dst[k], n, 0, 40 + k, &req[k]);
        for (int k = 0; k < 2; k++)
            tp->isend(tp, src[k], n, 0, 40 + k, &req[2 + k]);
        tp->waitall(tp, req, 4);
        for (int k = 0; k < 2; k++) {
            be->to_host(back, dst[k], n * sizeof(float));
            for (size_t i = 0; i < n; i++)
                wrong += back[i] != (float)(step * 1000 + k * 100) + (float)i / 8.0f;
        }
        if (step == 0)
            after_first = host_allocs;
        if (step == STEPS - 2)
            after_steady = host_allocs;
    }
    CHECK(wrong == 0, "staged transport: %d steps of 2 sends and 2 receives of device buffers "
          "arrive intact (%d wrong)", STEPS, wrong);
    CHECK(after_first == 4 && after_steady == after_first,
          "staged transport: the first step's 4 host buffers serve the next %d steps "
          "(%d allocations after step 1, %d after step %d)", STEPS - 2, after_first,
          after_steady, STEPS - 1);
    CHECK(host_allocs - after_steady <= 4 && host_allocs > after_steady,
          "staged transport: a larger message grows the pool (%d more allocations)",
          host_allocs - after_steady);
    transport_free(tp);
    CHECK(host_frees == host_allocs, "staged transport: teardown frees every host buffer "
          "(%d allocated, %d freed)", host_allocs, host_frees);
    for (int k = 0; k < 2; k++) {
        be->mem_free(src[k]);
        be->mem_free(dst[k]);
    }
}

int main(int argc, char **argv)
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

    /* the gossip modes' ops: a push-sum share, sum of two slots, absorb and
     * de-bias of (x, w), and D-PSGD's weighted mix and self term */
    const size_t len = n + 1;
    float *msg = be->mem_alloc(len * sizeof(float)), *slots = be->mem_alloc(2 * len * sizeof(float));
    float *acc = be->mem_alloc(len * sizeof(float)), *z = be->mem_alloc(n * sizeof(float));
    float *w = be->mem_alloc(sizeof(float));
    static float hs[2 * 1001], hmsg[1001], hacc[1001], hz[1000], bz[1000];
    float hw = 1.0f, bw;
    const float c[2] = { 1.0f / 3.0f, 1.0f / 3.0f };
    for (size_t i = 0; i < 2 * len; i++)
        hs[i] = (float)(i % 17) / 3.0f - 2.0f;
    be->to_backend(slots, hs, sizeof hs);
    be->to_backend(w, &hw, sizeof hw);
    const dt_backend *cpu = backend_cpu();
    be->flat_scale_copy(n, 0.5f, x, msg);
    be->flat_scale_copy(1, 0.5f, w, msg + n);
    be->flat_sum_slots(len, 2, NULL, slots, acc);
    be->flat_add(n, acc, x);
    be->flat_add(1, acc + n, w);
    be->flat_div(n, x, w, z);
    cpu->flat_scale_copy(n, 0.5f, hx, hmsg);
    cpu->flat_scale_copy(1, 0.5f, &hw, hmsg + n);
    cpu->flat_sum_slots(len, 2, NULL, hs, hacc);
    cpu->flat_add(n, hacc, hx);
    cpu->flat_add(1, hacc + n, &hw);
    cpu->flat_div(n, hx, &hw, hz);
    be->to_host(back, x, sizeof back);
    be->to_host(bz, z, sizeof bz);
    be->to_host(&bw, w, sizeof bw);
    CHECK(memcmp(back, hx, sizeof hx) == 0 && memcmp(bz, hz, sizeof hz) == 0 && bw == hw &&
          hw != 1.0f, "push-sum share, sum, absorb, de-bias equal the CPU's (weight %g)", hw);
    be->flat_sum_slots(n, 2, c, slots, acc);
    be->flat_ax_plus(n, 1.0f / 3.0f, acc, x);
    cpu->flat_sum_slots(n, 2, c, hs, hacc);
    cpu->flat_ax_plus(n, 1.0f / 3.0f, hacc, hx);
    be->to_host(back, x, sizeof back);
    CHECK(memcmp(back, hx, sizeof hx) == 0, "the weighted sum of slots and x <- a x + mix "
          "equal the CPU's");
    CHECK(host_touch_faults(msg, 0) && host_touch_faults(w, 0),
          "the message and the weight are backend memory too");

    /* the modes whose vectors tests/devmem.sh runs in this backend's memory */
    const char *dev_modes[] = { "allreduce", "easgd", "sgp", "dpsgd" };
    for (size_t k = 0; k < sizeof dev_modes / sizeof dev_modes[0]; k++) {
        const dt_algo *a = algo_find(dev_modes[k]);
        CHECK(a && a->device_vectors, "%s keeps its vectors in device memory", dev_modes[k]);
    }
    be->mem_free(msg);
    be->mem_free(slots);
    be->mem_free(acc);
    be->mem_free(z);
    be->mem_free(w);
    be->mem_free(x);
    be->mem_free(g);
    be->mem_free(v);
    MPI_CHECK(MPI_Init(&argc, &argv)); /* after the forks above */
    test_staging_pool();
    const int rc = tap_done();
    MPI_CHECK(MPI_Finalize());
    return rc;
}
