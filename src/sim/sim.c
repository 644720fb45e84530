/* dtrain-sim's own part: its settings, the simulated compute time and the
 * CSV run record (src/sim/sim.h). */
#include "sim/sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <simgrid/host.h>
#include <smpi/smpi.h>

#include "core/build_info.h"
#include "core/error.h"

/* One copy per simulated rank: SMPI privatizes the globals of the program. */
static dt_sim sim = { .compute_time = 0.1, .slowdown = 1, .ranks_per_node = 1,
                      .platform = "unknown" };

double sim_real_clock(void)
{
    struct timespec ts;
    /* the parentheses skip smpicc's macro, which answers simulated time */
    (clock_gettime)(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const dt_sim *sim_config(void) { return &sim; }

static int parse_double(const char *key, const char *v, double lo, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo)
        return dt_err_set("%s = '%s': expected a number >= %g", key, v, lo);
    *out = x;
    return 0;
}

static int parse_int(const char *key, const char *v, long long lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo)
        return dt_err_set("%s = '%s': expected an integer >= %lld", key, v, lo);
    *out = x;
    return 0;
}

/* "3,5,17": ranks, each a non-negative integer */
static int check_rank_list(const char *v)
{
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long r = strtol(p, &end, 10);
        if (errno || end == p || r < 0 || (*end && *end != ','))
            return dt_err_set("sim.slow_ranks = '%s': expected comma-separated ranks, e.g. 0,5",
                              v);
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int set_key(const char *key, const char *v)
{
    if (!strcmp(key, "sim.compute_time"))
        return parse_double(key, v, 0, &sim.compute_time);
    if (!strcmp(key, "sim.params"))
        return parse_int(key, v, 0, &sim.params);
    if (!strcmp(key, "sim.slowdown"))
        return parse_double(key, v, 0, &sim.slowdown);
    if (!strcmp(key, "sim.ranks_per_node"))
        return parse_int(key, v, 1, &sim.ranks_per_node);
    if (!strcmp(key, "sim.slow_ranks")) {
        if (strlen(v) >= sizeof sim.slow_ranks)
            return dt_err_set("sim.slow_ranks: longer than %zu characters", sizeof sim.slow_ranks);
        snprintf(sim.slow_ranks, sizeof sim.slow_ranks, "%s", v);
        return check_rank_list(v);
    }
    if (!strcmp(key, "sim.platform")) {
        if (!*v || strlen(v) >= sizeof sim.platform || strpbrk(v, ",\"\n"))
            return dt_err_set("sim.platform = '%s': expected a name without commas or quotes", v);
        snprintf(sim.platform, sizeof sim.platform, "%s", v);
        return 0;
    }
    if (!strcmp(key, "sim.gather")) {
        if (strcmp(v, "peers") && strcmp(v, "links"))
            return dt_err_set("sim.gather = '%s': expected peers (every message as the code posts "
                              "it) or links (one message per rank to the next, the same bytes)", v);
        sim.gather_links = !strcmp(v, "links");
        return 0;
    }
    if (!strcmp(key, "sim.compute_from"))
        return dt_err_set("sim.compute_from: the simulator reads no HDF5; the dtrain-sim launcher "
                          "turns it into sim.compute_time (run it through dtrain-sim)");
    return dt_err_set("unknown key '%s' (simulator keys: sim.compute_time, sim.params, "
                      "sim.slow_ranks, sim.slowdown, sim.ranks_per_node, sim.gather, "
                      "sim.platform)", key);
}

int sim_parse_args(int *argc, char **argv)
{
    sim.wall_start = sim_real_clock();
    char seen[8][64];   /* as the deck's keys: each at most once */
    int nseen = 0, kept = 1;
    for (int i = 1; i < *argc; i++) {
        if (strncmp(argv[i], "sim.", 4) != 0) {
            argv[kept++] = argv[i];
            continue;
        }
        char key[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof key)
            return dt_err_set("'%s': expected sim.KEY=VALUE", argv[i]);
        memcpy(key, argv[i], (size_t)(eq - argv[i]));
        key[eq - argv[i]] = '\0';
        for (int j = 0; j < nseen; j++)
            if (!strcmp(seen[j], key))
                return dt_err_set("'%s': %s was already given", argv[i], key);
        if (set_key(key, eq + 1) != 0)
            return -1;
        if (nseen < 8) /* set_key knows fewer keys than that */
            snprintf(seen[nseen++], sizeof seen[0], "%s", key);
    }
    *argc = kept;
    argv[kept] = NULL;
    return 0;
}

int sim_check(const dt_config *cfg)
{
    if (cfg->run.resume)
        return dt_err_set("run.resume = true: the simulator writes no checkpoints");
    if (cfg->run.checkpoint_every > 0)
        return dt_err_set("run.checkpoint_every = %lld: the simulator writes no checkpoints; "
                          "set it to 0", (long long)cfg->run.checkpoint_every);
    if (cfg->run.max_steps <= 0)
        return dt_err_set("run.max_steps = 0: give the simulator its number of steps "
                          "(run.max_steps = N)");
    return 0;
}

static int is_slow(int rank)
{
    for (const char *p = sim.slow_ranks; *p;) {
        char *end;
        long r = strtol(p, &end, 10);
        if (r == rank)
            return 1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

void sim_compute(int rank)
{
    double s = sim.compute_time * (is_slow(rank) ? sim.slowdown : 1.0);
    /* seconds on this simulated node, whatever its speed: smpi_execute would
     * scale by smpi/host-speed, the speed of the machine running SimGrid */
    if (s > 0)
        smpi_execute_flops(s * sg_host_get_speed(sg_host_self()));
}

/* ---- the record ----------------------------------------------------------- */

/* The process's private memory now (RssAnon of /proc/self/status), in MB; -1
 * if unknown. The peak RSS counts every rank's mapping of the shared blocks
 * again, though they are the same pages: this is the memory the simulation
 * really holds, besides one shared block. */
static double anon_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

enum { F_WORKER, F_STEPS, F_IMAGES, F_BYTES, F_COMPUTE, F_COMM, F_WAIT, F_WALL, NF };

int sim_write_record(MPI_Comm comm, const char *dir, const char *mode, int64_t nparams,
                     int worker, double steps, const dt_sim_totals *mine)
{
    int rank, nranks;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &nranks));
    double v[NF] = { [F_WORKER] = worker, [F_STEPS] = (double)mine->steps,
                     [F_IMAGES] = (double)mine->images, [F_BYTES] = (double)mine->bytes_sent,
                     [F_COMPUTE] = mine->compute, [F_COMM] = mine->comm, [F_WAIT] = mine->wait,
                     [F_WALL] = mine->wall };
    double *all = rank == 0 ? dt_calloc((size_t)nranks * NF, sizeof *all) : NULL;
    MPI_CHECK(MPI_Gather(v, NF, MPI_DOUBLE, all, NF, MPI_DOUBLE, 0, comm));
    if (rank != 0)
        return 0;

    /* per step, mean over the ranks that train; the run's time is the last rank's */
    double nw = 0, compute = 0, comm_s = 0, wait = 0, bytes = 0, simulated = 0;
    for (int r = 0; r < nranks; r++) {
        const double *x = all + (size_t)r * NF;
        if (x[F_WALL] > simulated)
            simulated = x[F_WALL];
        if (!x[F_WORKER] || x[F_STEPS] <= 0)
            continue;
        nw++;
        compute += x[F_COMPUTE] / x[F_STEPS];
        comm_s += x[F_COMM] / x[F_STEPS];
        wait += x[F_WAIT] / x[F_STEPS];
        bytes += x[F_BYTES] / x[F_STEPS];
    }
    if (nw > 0) {
        compute /= nw;
        comm_s /= nw;
        wait /= nw;
        bytes /= nw;
    }
    double per_iter = steps > 0 ? simulated / steps : 0;
    double wall = sim_real_clock() - sim.wall_start;
    struct rusage ru;
    double rss_mb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : -1;
    double anon = anon_mb();

    char path[DT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/sim.csv", dir);
    FILE *f = fopen(path, "a");
    int rc = 0;
    if (!f) {
        rc = dt_err_set("cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    if (ftell(f) == 0)
        fprintf(f, "mode,ranks,platform,params,compute_s,time_per_iter_s,comm_s,wait_s,"
                   "simulated_s,wall_s,steps,bytes_per_step,maxrss_mb,anon_mb,slow_ranks,slowdown,"
                   "ranks_per_node,git\n");
    fprintf(f, "%s,%d,%s,%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.3f,%.6g,%.9g,%.1f,%.1f,\"%s\",%g,%lld,%s\n",
            mode, nranks, sim.platform, (long long)nparams, compute, per_iter, comm_s, wait,
            simulated, wall, steps, bytes, rss_mb, anon, sim.slow_ranks, sim.slowdown,
            (long long)sim.ranks_per_node, build_git_revision());
    if (fclose(f) != 0) {
        rc = dt_err_set("cannot write %s: %s", path, strerror(errno));
        goto out;
    }

    snprintf(path, sizeof path, "%s/sim_ranks.csv", dir);
    f = fopen(path, "w");
    if (!f) {
        rc = dt_err_set("cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    fprintf(f, "rank,worker,steps,images,bytes_sent,compute_s,comm_s,wait_s,simulated_s\n");
    for (int r = 0; r < nranks; r++) {
        const double *x = all + (size_t)r * NF;
        fprintf(f, "%d,%d,%.0f,%.0f,%.0f,%.9g,%.9g,%.9g,%.9g\n", r, (int)x[F_WORKER],
                x[F_STEPS], x[F_IMAGES], x[F_BYTES], x[F_COMPUTE], x[F_COMM], x[F_WAIT],
                x[F_WALL]);
    }
    if (fclose(f) != 0)
        rc = dt_err_set("cannot write %s: %s", path, strerror(errno));
    printf("dtrain-sim: %s on %d ranks (%s): %.6g s per iteration (compute %.4g, communication "
           "%.4g, wait %.4g), %.6g simulated s, %.1f s wall, private memory %.0f MB; record "
           "%s/sim.csv\n",
           mode, nranks, sim.platform, per_iter, compute, comm_s, wait, simulated, wall, anon, dir);
    fflush(stdout);
out:
    free(all);
    return rc;
}
