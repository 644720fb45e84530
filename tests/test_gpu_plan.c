/* Host-side plans of the GPU path (comm/gpu_plan.h), no device needed: the GPU
 * a rank drives, the start-up errors, and one gossip step's NCCL send/receive
 * plan checked over every rank, step and topology: every send has exactly one
 * matching receive, the counts are the out- and in-degrees, receive slots are
 * 0.. in ascending peer order, and no rank talks to itself; and the NCCL
 * transport's wait decision (keep waiting, fail, time out) and its lines. */
#include "config.h"

#include "comm/gpu_plan.h"
#include "core/error.h"
#include "run/device.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_choose(void)
{
    int ok = 1;
    for (int size = 1; size <= 8; size++)
        for (int r = 0; r < size; r++)
            ok &= gpu_choose(r, size, 8) == r && gpu_choose(r, size, size) == r;
    CHECK(ok, "gpu_choose: the rank's index on its node is its GPU, for 1..8 ranks");

    dt_err_clear();
    CHECK(gpu_choose(0, 4, 0) == -1 && strstr(dt_err_msg(), "no GPU is visible"),
          "no visible GPU is an error (%s)", dt_err_msg());
    dt_err_clear();
    CHECK(gpu_choose(3, 4, 2) == -1 && strstr(dt_err_msg(), "4 ranks on this node but 2 visible"),
          "fewer GPUs than ranks on a node is an error (%s)", dt_err_msg());
    dt_err_clear();
    CHECK(gpu_choose(0, 4, 2) == -1,
          "fewer GPUs than ranks fails on every rank of the node, also on those with a GPU");
}

static void test_node_rank(void)
{
    int lr = -1, ls = -1, size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gpu_node_rank(MPI_COMM_WORLD, &lr, &ls);
    CHECK(lr == 0 && ls == size && ls == 1,
          "gpu_node_rank: a single process is local rank %d of %d on its node", lr, ls);
    const char *sets[] = { NULL, "", "0", "GPU-3f2a,GPU-77b1" };
    for (int i = 0; i < 4; i++) {
        lr = ls = -1;
        gpu_node_rank_visible(MPI_COMM_WORLD, sets[i], &lr, &ls);
        CHECK(lr == 0 && ls == size && ls == 1, "gpu_node_rank_visible (CUDA_VISIBLE_DEVICES %s%s%s): "
              "a single process is local rank %d of %d", sets[i] ? "'" : "", sets[i] ? sets[i] : "unset",
              sets[i] ? "'" : "", lr, ls);
    }
}

/* All ranks' plans at one step agree with each other and with the topology. */
static int check_step(const dt_topology *t, int64_t step, char *why, size_t whycap)
{
    const int n = t->n;
    dt_p2p_op *ops = malloc((size_t)n * 2 * (size_t)(n - 1) * sizeof *ops);
    int *cnt = calloc((size_t)n, sizeof *cnt);
    int *peers = malloc((size_t)n * sizeof *peers);
    // edge (i -> j) sent by i minus received by j: 0 for every pair
    int *bal = calloc((size_t)n * n, sizeof *bal);
    int bad = 0;
    for (int r = 0; r < n && !bad; r++) {
        dt_p2p_op *o = ops + (size_t)r * 2 * (n - 1);
        cnt[r] = gpu_gossip_plan(t, r, step, o);
        const int nout = topology_out_peers(t, r, step, peers);
        int ns = 0, nr = 0, last = -1;
        for (int i = 0; i < cnt[r]; i++) {
            if (o[i].peer == r || o[i].peer < 0 || o[i].peer >= n) {
                snprintf(why, whycap, "rank %d: peer %d", r, o[i].peer);
                bad = 1;
            } else if (o[i].kind == P2P_SEND) {
                if (nr > 0 || o[i].peer != peers[ns]) {
                    snprintf(why, whycap, "rank %d: send %d out of book order", r, ns);
                    bad = 1;
                }
                ns++;
                bal[(size_t)r * n + o[i].peer]++;
            } else {
                if (o[i].slot != nr || o[i].peer <= last) {
                    snprintf(why, whycap, "rank %d: receive %d slot %d peer %d after %d", r, nr,
                             o[i].slot, o[i].peer, last);
                    bad = 1;
                }
                last = o[i].peer;
                nr++;
                bal[(size_t)o[i].peer * n + r]--;
            }
        }
        if (!bad && (ns != nout || nr != topology_in_peers(t, r, step, peers))) {
            snprintf(why, whycap, "rank %d: %d sends, %d receives against the degrees", r, ns, nr);
            bad = 1;
        }
    }
    for (size_t e = 0; e < (size_t)n * n && !bad; e++)
        if (bal[e] != 0) {
            snprintf(why, whycap, "edge %zu -> %zu: %d unmatched", e / n, e % n, bal[e]);
            bad = 1;
        }
    free(ops), free(cnt), free(peers), free(bal);
    return !bad;
}

static void test_plan(const char *kind, int n, int k)
{
    dt_topology t;
    if (topology_create(&t, kind, n, k, NULL) != 0) {
        CHECK(0, "topology %s n=%d k=%d: %s", kind, n, k, dt_err_msg());
        return;
    }
    char why[160] = "";
    int ok = 1;
    int64_t s = 0;
    for (; s < 12 && ok; s++)
        ok = check_step(&t, s, why, sizeof why);
    CHECK(ok, "gossip plan %s n=%d k=%d, steps 0..11: every send matched by one receive, "
              "slots in in-peer order%s%s",
          kind, n, k, ok ? "" : ": ", why);
    topology_free(&t);
}

/* The start-up errors that need no GPU (run/device.c), per build. */
static void test_config_errors(void)
{
    static const struct { const char *device, *transport, *needle; } c[] = {
        { "cpu", "mpi", NULL },
        { "cpu", "nccl", "comm.transport = nccl needs compute.device = cuda" },
#ifdef HAVE_CUDA
        { "cuda", "mpi", NULL },
#else
        { "cuda", "mpi", "this dtrain was built without CUDA" },
#endif
#if defined(HAVE_NCCL)
        { "cuda", "nccl", NULL },
#elif defined(HAVE_CUDA)
        { "cuda", "nccl", "this dtrain was built without NCCL" },
#else
        { "cuda", "nccl", "this dtrain was built without CUDA" },
#endif
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        dt_config cfg;
        memset(&cfg, 0, sizeof cfg);
        snprintf(cfg.compute.device, sizeof cfg.compute.device, "%s", c[i].device);
        snprintf(cfg.comm.transport, sizeof cfg.comm.transport, "%s", c[i].transport);
        char buf[512];
        const char *e = device_config_error(&cfg, buf, sizeof buf);
        if (!c[i].needle)
            CHECK(e == NULL, "device = %s, transport = %s: accepted at start-up (%s)",
                  c[i].device, c[i].transport, e ? e : "no error");
        else
            CHECK(e && strstr(e, c[i].needle), "device = %s, transport = %s: '%s'", c[i].device,
                  c[i].transport, e ? e : "(accepted)");
    }
}

/* The NCCL transport's wait decision over a table of polls, and its lines. */
static void test_wait(void)
{
    static const struct {
        int done, failed;
        double elapsed, timeout;
        dt_wait_verdict want;
    } polls[] = {
        {1, 0, 0.0, 600.0, WAIT_DONE},        /* complete at the first poll */
        {1, 0, 900.0, 600.0, WAIT_DONE},      /* complete, late: still complete */
        {1, 1, 0.0, 600.0, WAIT_DONE},        /* the stream finished: its work is done */
        {0, 0, 0.0, 600.0, WAIT_AGAIN},       /* in progress */
        {0, 0, 600.0, 600.0, WAIT_AGAIN},     /* exactly the timeout: not yet past it */
        {0, 0, 600.001, 600.0, WAIT_TIMED_OUT},
        {0, 0, 0.5, 0.0, WAIT_TIMED_OUT},     /* timeout 0: the first slow poll ends it */
        {0, 1, 0.0, 600.0, WAIT_FAILED},      /* an error fails at once */
        {0, 1, 900.0, 600.0, WAIT_FAILED},    /* an error wins over the timeout */
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof polls / sizeof polls[0]; i++)
        if (gpu_wait_verdict(polls[i].done, polls[i].failed, polls[i].elapsed,
                             polls[i].timeout) != polls[i].want) {
            bad++;
            fprintf(stderr, "# poll %zu: done %d failed %d elapsed %g timeout %g: verdict %d, "
                    "want %d\n", i, polls[i].done, polls[i].failed, polls[i].elapsed,
                    polls[i].timeout,
                    (int)gpu_wait_verdict(polls[i].done, polls[i].failed, polls[i].elapsed,
                                          polls[i].timeout), (int)polls[i].want);
        }
    CHECK(bad == 0, "NCCL wait: done wins, then an error, then the timeout (strictly past it); "
          "else wait again (%d of %zu polls wrong)", bad, sizeof polls / sizeof polls[0]);

    char line[512];
    gpu_wait_message(line, sizeof line, WAIT_TIMED_OUT, 3, 8, "send/receive group", 600.0, NULL);
    CHECK(strstr(line, "rank 3 of 8") && strstr(line, "send/receive group") &&
          strstr(line, "comm.nccl_timeout = 600 s") && strstr(line, "the job ends"),
          "a timeout names the rank, the operation and the timeout: %s", line);
    gpu_wait_message(line, sizeof line, WAIT_FAILED, 0, 2, "allreduce", 600.0,
                     "remote process exited or there was a network error (x)");
    CHECK(strstr(line, "rank 0 of 2") && strstr(line, "allreduce failed: remote process exited") &&
          strstr(line, "NCCL_DEBUG=WARN"),
          "a failure names the rank, the operation and NCCL's error: %s", line);
    char small[16];
    gpu_wait_message(small, sizeof small, WAIT_TIMED_OUT, 3, 8, "allreduce", 600.0, NULL);
    CHECK(strlen(small) == sizeof small - 1, "a short buffer gets a truncated, terminated line");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_config_errors();
    test_choose();
    test_wait();
    test_node_rank();
    test_plan("exponential", 8, 1);
    test_plan("exponential", 16, 2);
    test_plan("exponential-both", 6, 2);
    test_plan("bipartite", 8, 1);
    test_plan("ring", 5, 2);
    test_plan("complete", 4, 3);
    const int rc = tap_done();
    MPI_Finalize();
    return rc;
}
