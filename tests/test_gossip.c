/* The gossip modes on closed-form objectives (run under mpiexec -n 4 / 8).
 * The algorithms' own step functions run on a trainer whose gradient oracle
 * is replaced by a formula, so every property below is exact:
 *  - push-sum averaging (lr 0, different initial vectors per rank, graphs
 *    where weights leave 1): sum_i w_i = n and sum_i x_i constant at every
 *    step, and every de-biased z_i converges to the exact mean;
 *  - D-PSGD averaging: sum_i x_i constant, x_i -> exact mean;
 *  - OSGP (tau 0) with a constant gradient c_i: after T steps the network
 *    holds sum_i x_i(0) - lr T sum_i c_i in x plus the drained message, i.e.
 *    every gradient reaches the sum in full (SGP with stale messages, not
 *    SGP at 1/(k+1) of the learning rate);
 *  - AD-PSGD (lr 0): the asynchronous pairwise averages preserve sum_i x_i,
 *    the run ends without deadlock, and the consensus distance
 *    sum_i ||x_i - mean||^2 decreases (an average of two different vectors
 *    always lowers it; how far depends on how the ranks were scheduled). */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "algo/lsgd.h"
#include "comm/gcount.h"
#include "core/error.h"
#include "engine/engine.h"
#include "tap.h"

enum { N = 257 };  /* parameters: odd, not a multiple of a vector width */
static int rank, nranks;
static char graph[256];
static double easgd_beta = 0.9;          /* easgd settings for make_trainer */
static int64_t easgd_tau = 1;
static const char *easgd_center = "replicated";
static int same_start;                   /* make_trainer: every rank starts at x0(0) */
static dt_config lsgd_cfg;               /* lsgd settings for make_trainer */

/* Initial vector of rank r: distinct per rank and coordinate. */
static float x0(int r, size_t i) { return (float)(r * 1.5 - 2.0 + 0.01 * (double)(i % 17)); }

static void zero_gradient(dt_trainer *t, const float *x)
{
    (void)x;
    memset(t->grads, 0, t->n * sizeof *t->grads);
}

/* c_i: a constant gradient, different per rank. */
static void const_gradient(dt_trainer *t, const float *x)
{
    (void)x;
    for (size_t i = 0; i < t->n; i++)
        t->grads[i] = (float)(0.25 * (t->rank + 1) + 0.001 * (double)i);
}

static void make_trainer(dt_trainer *t, dt_config *cfg, const char *mode, const char *topo,
                         int peers, void (*grad)(dt_trainer *, const float *), float lr)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->algorithm.mode, sizeof cfg->algorithm.mode, "%s", mode);
    snprintf(cfg->algorithm.topology, sizeof cfg->algorithm.topology, "%s", topo);
    snprintf(cfg->algorithm.graph_file, sizeof cfg->algorithm.graph_file, "%s", graph);
    snprintf(cfg->algorithm.dpsgd_order, sizeof cfg->algorithm.dpsgd_order, "cta");
    cfg->algorithm.peers = peers;
    cfg->easgd.beta = easgd_beta;
    cfg->easgd.tau = easgd_tau;
    snprintf(cfg->easgd.center, sizeof cfg->easgd.center, "%s", easgd_center);
    cfg->lsgd = lsgd_cfg.lsgd;
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->comm = MPI_COMM_WORLD;
    t->rank = rank;
    t->nranks = nranks;
    t->n = N;
    t->params = dt_falloc(N);
    t->grads = dt_falloc(N);
    for (size_t i = 0; i < N; i++)
        t->params[i] = x0(same_start ? 0 : rank, i);
    if (optim_init(&t->opt, &optim_sgd, cfg, N, NULL, 0, NULL) != 0)
        DT_FATAL("%s", dt_err_msg());
    t->opt.momentum = t->opt.weight_decay = 0.0f; /* plain SGD */
    t->opt.nesterov = 0;
    t->lr = lr;
    t->meter.weight = 1.0f;
    t->gradient_fn = grad;
    t->tp = transport_mpi_create(MPI_COMM_WORLD);
    t->algo = algo_find(mode);
    if (!t->algo || t->algo->check(cfg, nranks) != 0)
        DT_FATAL("%s", dt_err_msg());
    t->algo->setup(t);
}

static void free_trainer(dt_trainer *t)
{
    if (t->algo->teardown)
        t->algo->teardown(t);
    free(t->params);
    free(t->grads);
    optim_free(&t->opt, NULL);
    transport_free(t->tp);
}

static double sum_all(double v)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return v;
}

static double max_all(double v)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return v;
}

/* Exact mean over ranks of x0(., i). */
static double mean0(size_t i)
{
    double s = 0;
    for (int r = 0; r < nranks; r++)
        s += x0(r, i);
    return s / nranks;
}

/* This rank's sum of x and its weight, counting a message in flight (osgp:
 * drained through the checkpoint hook, which for tau = 0 changes nothing:
 * the next step would wait for it anyway). */
static void mass(dt_trainer *t, double *sx, double *sw)
{
    const float *pending = NULL;
    if (t->algo->state) {
        dt_ckpt_array a[4];
        int na = t->algo->state(t, a, 4);
        for (int k = 0; k < na; k++)
            if (!strcmp(a[k].name, "osgp_pending") && a[k].data[N + 1] != 0)
                pending = a[k].data;
    }
    *sx = 0;
    for (size_t i = 0; i < N; i++)
        *sx += (double)t->params[i] + (pending ? pending[i] : 0);
    *sw = (double)t->meter.weight + (pending ? pending[N] : 0);
}

static void test_averaging(const char *mode, const char *topo, int peers, int steps)
{
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, mode, topo, peers, zero_gradient, 0.0f);
    double sum0 = 0;
    for (size_t i = 0; i < N; i++)
        sum0 += t.params[i];
    sum0 = sum_all(sum0);
    double worst_w = 0, worst_sum = 0, wmin = 1, wmax = 1;
    for (int s = 0; s < steps; s++) {
        t.algo->step(&t);
        t.step++;
        if (s >= 10 && s % 10) /* every step at first, then every 10th */
            continue;
        double sx, sw;
        mass(&t, &sx, &sw);
        worst_sum = fmax(worst_sum, fabs(sum_all(sx) - sum0) / fabs(sum0));
        worst_w = fmax(worst_w, fabs(sum_all(sw) - nranks));
        wmin = fmin(wmin, -max_all(-sw));
        wmax = fmax(wmax, max_all(sw));
    }
    const float *z = t.algo->model(&t);
    double err = 0;
    for (size_t i = 0; i < N; i++)
        err = fmax(err, fabs(z[i] - mean0(i)));
    err = max_all(err);
    if (rank == 0) {
        CHECK(worst_sum < 1e-5, "%s/%s: sum of x over ranks constant over %d steps (worst rel %.1e)",
              mode, topo, steps, worst_sum);
        if (!strcmp(mode, "sgp") || !strcmp(mode, "osgp"))
            CHECK(worst_w < 1e-4 * nranks, "%s/%s: sum of push-sum weights = %d at every step "
                  "(worst %.1e; weights ranged %.3f..%.3f)", mode, topo, nranks, worst_w, wmin, wmax);
        CHECK(err < 1e-4, "%s/%s: every rank's model converged to the exact mean (max err %.1e)",
              mode, topo, err);
    }
    free_trainer(&t);
}

/* Irregular graph: a path 0-1-2-...-(n-1) plus a chord 0-2 (degrees differ,
 * so push-sum weights leave 1). */
static void write_graph(void)
{
    if (rank == 0) {
        snprintf(graph, sizeof graph, "/tmp/dtrain-gossip-%d.txt", (int)getpid());
        FILE *f = fopen(graph, "w");
        fprintf(f, "# path plus a chord\n");
        for (int r = 0; r + 1 < nranks; r++)
            fprintf(f, "%d %d\n", r, r + 1);
        if (nranks > 2)
            fprintf(f, "0 2\n");
        fclose(f);
    }
    MPI_CHECK(MPI_Bcast(graph, sizeof graph, MPI_CHAR, 0, MPI_COMM_WORLD));
}

static void test_osgp_full_gradient(void)
{
    const int T = 30;
    const float lr = 0.01f;
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, "osgp", "exponential", 1, const_gradient, lr);
    double sum0 = 0, csum = 0;
    for (size_t i = 0; i < N; i++)
        sum0 += t.params[i];
    for (int s = 0; s < T; s++) {
        t.algo->step(&t);
        t.step++;
    }
    for (size_t i = 0; i < N; i++)
        csum += 0.25 * (rank + 1) + 0.001 * (double)i;
    /* drain the message in flight into the state (the checkpoint hook) */
    dt_ckpt_array a[4];
    int na = t.algo->state(&t, a, 4);
    const float *pending = NULL;
    for (int k = 0; k < na; k++)
        if (!strcmp(a[k].name, "osgp_pending"))
            pending = a[k].data;
    double mass = 0;
    for (size_t i = 0; i < N; i++)
        mass += (double)t.params[i] + (pending && pending[N + 1] != 0 ? pending[i] : 0);
    mass = sum_all(mass);
    double want = sum_all(sum0) - lr * T * sum_all(csum);
    double buggy = sum_all(sum0) - lr * T * sum_all(csum) / 2; /* 1 peer: 1/(k+1) = 1/2 */
    if (rank == 0) {
        CHECK(pending != NULL, "osgp exposes its drained message as checkpoint state");
        CHECK(fabs(mass - want) < 1e-4 * fabs(want),
              "osgp tau=0: every gradient reaches the network sum in full (sum %.6f, expected "
              "%.6f; at half the learning rate it would be %.6f)", mass, want, buggy);
    }
    free_trainer(&t);
}

static void test_adpsgd(void)
{
    dt_trainer t;
    dt_config cfg;
    make_trainer(&t, &cfg, "adpsgd", "auto", 1, zero_gradient, 0.0f);
    t.total_steps = 150;
    t.steps_per_epoch = 10;
    double sum0 = 0, spread0 = 0;
    for (size_t i = 0; i < N; i++) {
        sum0 += t.params[i];
        spread0 += (t.params[i] - mean0(i)) * (t.params[i] - mean0(i));
    }
    sum0 = sum_all(sum0);
    spread0 = sum_all(spread0);
    double global = 0;
    int end = 0;
    while (!end) {
        t.algo->step(&t);
        t.step++;
        end = t.algo->progress(&t, 0, &global);
    }
    t.algo->finish(&t);
    double sx = 0, spread = 0;
    for (size_t i = 0; i < N; i++) {
        sx += t.params[i];
        spread += (t.params[i] - mean0(i)) * (t.params[i] - mean0(i));
    }
    sx = sum_all(sx);
    spread = sum_all(spread);
    int64_t steps = t.step, lo, hi;
    MPI_CHECK(MPI_Allreduce(&steps, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&steps, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK(global >= 150, "adpsgd: global step budget of %d x 150 spent (global %.0f; local "
              "steps %lld..%lld), all exchanges drained", nranks, global, (long long)lo,
              (long long)hi);
        CHECK(fabs(sx - sum0) < 1e-5 * fabs(sum0), "adpsgd: pairwise averages preserve sum_i x_i "
              "(%.9g vs %.9g)", sx, sum0);
        CHECK(spread < 0.75 * spread0, "adpsgd: the averages lowered the consensus distance "
              "sum_i ||x_i - mean||^2 from %.3e to %.3e", spread0, spread);
    }
    free_trainer(&t);
}

/* f_r(x) = |x - a_r|^2 / 2 on rank r: gradient x - a_r. */
static float quad_a(int r, size_t i) { return (float)(0.3 * (r + 1) - 0.002 * (double)i); }

static void quad_gradient(dt_trainer *t, const float *x)
{
    for (size_t i = 0; i < t->n; i++)
        t->grads[i] = x[i] - quad_a(t->rank, i);
}

/* EASGD against its recursion (doc/references.md, EASGD), simulated in double for
 * every rank: every tau steps, from pre-update values,
 *   c <- c + beta (mean x - c),  x_r <- x_r - lr g_r(x_r) - (beta/n)(x_r - c);
 * else x_r <- x_r - lr g_r(x_r). With beta = 0 every replica is its own
 * local run, bit for bit against the same float arithmetic. */
static void test_easgd(const char *center, double beta, int64_t tau)
{
    easgd_beta = beta;
    easgd_tau = tau;
    easgd_center = center;
    const float lr = 0.1f;
    dt_trainer t;
    dt_config cfg;
    same_start = 1; /* EASGD starts from one model, as the runtime's broadcast gives */
    make_trainer(&t, &cfg, "easgd", "auto", 1, quad_gradient, lr);
    same_start = 0;
    double *x = malloc((size_t)nranks * N * sizeof *x), *c = malloc(N * sizeof *c);
    float *xf = malloc(N * sizeof *xf);
    for (size_t i = 0; i < N; i++) {
        c[i] = x0(0, i);
        xf[i] = x0(0, i);
        for (int r = 0; r < nranks; r++)
            x[(size_t)r * N + i] = x0(0, i);
    }
    const int steps = 24;
    double worst = 0, worst_c = 0;
    int exact = 1;
    for (int s = 0; s < steps; s++) {
        t.algo->step(&t);
        t.step++;
        int comm = (s + 1) % tau == 0;
        for (size_t i = 0; i < N; i++) {
            double mean = 0;
            for (int r = 0; r < nranks; r++)
                mean += x[(size_t)r * N + i] / nranks;
            double cold = c[i];
            if (comm)
                c[i] += beta * (mean - cold);
            for (int r = 0; r < nranks; r++) {
                double *xr = &x[(size_t)r * N + i];
                double pull = comm ? beta / nranks * (*xr - cold) : 0;
                *xr = *xr - lr * (*xr - quad_a(r, i)) - pull;
            }
            float g = xf[i] - quad_a(rank, i);
            xf[i] -= lr * g;
            worst = fmax(worst, fabs(t.params[i] - x[(size_t)rank * N + i]));
            worst_c = fmax(worst_c, fabs(t.algo->model(&t)[i] - c[i]));
            exact &= t.params[i] == xf[i];
        }
    }
    worst = max_all(worst);
    worst_c = max_all(worst_c);
    exact = (int)-max_all(-(double)exact);
    if (rank == 0) {
        CHECK(worst < 1e-5 && worst_c < 1e-5, "easgd (%s center, beta %.2g, tau %lld): %d steps "
              "follow the recursion (max err replicas %.1e, center %.1e)", center, beta,
              (long long)tau, steps, worst, worst_c);
        if (beta == 0)
            CHECK(exact, "easgd with beta 0: every replica equals its own local run bit for bit");
    }
    free(x);
    free(c);
    free(xf);
    free_trainer(&t);
}

/* Zero gradient; the loss of rank r is 1 + |r - 2| (+ r/100 for odd r when
 * ties are not wanted): rank 2 leads overall. */
static void leader_loss(dt_trainer *t, const float *x)
{
    (void)x;
    memset(t->grads, 0, t->n * sizeof *t->grads);
    t->meter.loss_sum += 1.0 + abs(t->rank - 2) + 0.01 * t->rank;
}

static void lsgd_set(int64_t group, double cl, double cg, double pl, double pg, int64_t taul,
                     int64_t taug)
{
    lsgd_cfg.lsgd.group_size = group;
    lsgd_cfg.lsgd.c_local = cl;
    lsgd_cfg.lsgd.c_global = cg;
    lsgd_cfg.lsgd.p_local = pl;
    lsgd_cfg.lsgd.p_global = pg;
    lsgd_cfg.lsgd.tau_local = taul;
    lsgd_cfg.lsgd.tau_global = taug;
    lsgd_cfg.lsgd.loss_window = 3;
}

/* LSGD: leader choice on hand-made losses; the per-step pull towards the
 * last broadcast leader on a closed form; a distributed step pulls every
 * rank towards the broadcast leaders exactly as (1 - c) x + c x_leader. */
static void test_lsgd(void)
{
    const double l1[] = { 3, 1, 1, 2 }, l2[] = { 0.5, 0.5, 0.5, 0.5 }, l3[] = { 4, 3, 2, 1 };
    if (rank == 0) {
        CHECK(lsgd_leader(l1, 0, 4) == 1 && lsgd_leader(l2, 0, 4) == 0 &&
                  lsgd_leader(l3, 0, 4) == 3 && lsgd_leader(l3, 0, 2) == 1 &&
                  lsgd_leader(l1, 2, 2) == 2 && lsgd_leader(l2, 2, 2) == 2,
              "lsgd leader: lowest loss, ties to the lowest rank, within a group's range");
    }
    /* per-step pull: lr 0, no distributed step within the test */
    lsgd_set(nranks, 0.1, 0.1, 0.1, 0.5, 1000, 1000);
    dt_trainer t;
    dt_config cfg;
    same_start = 1;
    make_trainer(&t, &cfg, "lsgd", "auto", 1, leader_loss, 0.0f);
    same_start = 0;
    t.total_steps = 1000000;
    t.steps_per_epoch = 10;
    for (size_t i = 0; i < N; i++) /* replicas move away from the leader x0(0) */
        t.params[i] = x0(rank, i);
    const int K = 30;
    double global = 0, err = 0;
    for (int k = 0; k < K; k++) {
        t.algo->step(&t);
        t.step++;
        t.algo->progress(&t, 0, &global);
    }
    const double q = pow(1.0 - 0.5 / 1000, K);
    for (size_t i = 0; i < N; i++)
        err = fmax(err, fabs(t.params[i] - (x0(0, i) + q * (x0(rank, i) - x0(0, i)))));
    err = max_all(err);
    if (rank == 0)
        CHECK(err < 5e-5, "lsgd: %d local steps pull x - xg down by (1 - p/tau)^k exactly "
              "(max err %.1e)", K, err);
    free_trainer(&t);

    /* distributed steps: no per-step pull; groups of 2, local leader every
     * tau_local, global every 2 tau_local */
    if (nranks % 2)
        return;
    lsgd_set(2, 0.25, 0.5, 0, 0, 2, 4);
    make_trainer(&t, &cfg, "lsgd", "auto", 1, leader_loss, 0.0f);
    t.total_steps = 1000000;
    t.steps_per_epoch = 10;
    /* the first distributed step is due once 2 * nranks local steps were
     * taken in all: every rank steps until its count shows that, taking
     * part in the step in that call (the second is due at 4 * nranks, out
     * of reach: each rank stops at its first count >= 2 * nranks) */
    global = 0;
    while (global < 2) {
        t.algo->step(&t);
        t.step++;
        t.algo->progress(&t, 0, &global);
    }
    /* local leader of rank r's group {2g, 2g+1}: the lower loss */
    int g0 = rank / 2 * 2;
    int lead = 1.0 + abs(g0 - 2) + 0.01 * g0 <= 1.0 + abs(g0 + 1 - 2) + 0.01 * (g0 + 1) ? g0
                                                                                   : g0 + 1;
    double derr = 0;
    for (size_t i = 0; i < N; i++)
        derr = fmax(derr, fabs(t.params[i] - (0.75f * x0(rank, i) + 0.25f * x0(lead, i))));
    derr = max_all(derr);
    if (rank == 0)
        CHECK(derr < 1e-6, "lsgd: the first distributed step pulls each rank to 0.75 x + 0.25 "
              "x(local leader) (max err %.1e)", derr);
    free_trainer(&t);
}

/* The group step count: rank r adds r + 1 steps per call; the last rank asks
 * for a stop after K / 4 calls. Every rank sees the same sequence of round
 * totals (compared by a hash of it), leaves at the round that carries the
 * stop, and after the settle holds the sum of every rank's steps. Then a
 * fixed number of calls (no verdict) and gcount_free: no round is left open. */
static void test_gcount(void)
{
    const int K = 400;
    dt_gcount g;
    gcount_init(&g, MPI_COMM_WORLD, 0);
    uint64_t seq = 1469598103934665603ULL;
    int64_t rounds = 0, mine = 0;
    int stopped = 0;
    for (int k = 0; k < K && !stopped; k++) {
        mine += rank + 1;
        if (gcount_poll(&g, rank + 1, rank == nranks - 1 && k >= K / 4)) {
            seq = (seq ^ (uint64_t)g.total) * 1099511628211ULL;
            rounds++;
            stopped = g.stop; /* a verdict: every rank leaves at this round */
        }
        usleep(200);
    }
    gcount_settle(&g);
    uint64_t lo, hi;
    int64_t v[4] = { g.total, -g.total, rounds, -rounds }, all = 0;
    MPI_CHECK(MPI_Allreduce(&seq, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&seq, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    int st = stopped, st_all;
    MPI_CHECK(MPI_Allreduce(&st, &st_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK(st_all && lo == hi && v[2] == -v[3],
              "gcount: every rank saw the same %lld round totals and left at the round that "
              "carried the last rank's stop", (long long)v[2]);
        CHECK(v[0] == -v[1] && v[0] == all,
              "gcount: after the settle every rank holds the sum of all ranks' steps (%lld = "
              "%lld)", (long long)v[0], (long long)all);
    }
    gcount_free(&g);
    /* a fixed number of calls: rank-dependent sleeps leave rounds open on
     * some ranks only; gcount_free must still return everywhere */
    gcount_init(&g, MPI_COMM_WORLD, 0);
    for (int k = 0; k < 50; k++) {
        gcount_poll(&g, 1, 0);
        usleep(100 * (rank + 1));
    }
    gcount_free(&g);
    if (rank == 0)
        CHECK(1, "gcount: freed after a fixed number of calls on every rank (no round left open)");
}

int main(int argc, char **argv)
{
    int provided;
    MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    write_graph();
    test_averaging("sgp", "exponential", 1, 60);
    test_averaging("sgp", "file", 1, 150);
    if (nranks >= 4)
        test_averaging("sgp", "exponential", 2, 40);
    test_averaging("osgp", "file", 1, 200);
    test_averaging("dpsgd", "bipartite", 1, 150);
    test_averaging("dpsgd", "file", 1, 250);
    test_osgp_full_gradient();
    if (nranks % 2 == 0)
        test_adpsgd();
    test_easgd("replicated", 0.9, 1);
    test_easgd("replicated", 0.5, 3);
    test_easgd("root", 0.5, 2);
    test_easgd("replicated", 0.0, 2);
    test_lsgd();
    test_gcount();
    if (rank == 0)
        unlink(graph);
    int rc = rank == 0 ? tap_done() : 0;
    MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    return rc;
}
