/* dtrain: one SPMD executable; every rank reads the deck (through rank 0),
 * takes its role from its rank, and trains. */
#include <mpi.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "backend/backend.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parse.h"
#include "io/deck.h"
#include "post/post.h"
#include "run/device.h"
#include "run/groups.h"
#include "run/omp_wait.h"
#include "run/roles.h"
#include "run/stop.h"
#include "run/run.h"
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#endif

/* MPICH 4.0 over UCX's TCP transport can hang in MPI_Finalize: a rank waits
 * for a peer's progress in the endpoint close while the peer already sits in
 * the process manager's barrier (seen in about one run in four with
 * UCX_TLS=self,tcp on 4 ranks). Everything dtrain writes is complete and
 * closed by then, so after DTRAIN_FINALIZE_TIMEOUT seconds (default 60; 0:
 * wait forever) a watchdog ends the process with the run's status instead of
 * letting the job sit until its time limit. */
static int finalize_status;

static void *finalize_watchdog(void *arg)
{
    unsigned seconds = *(unsigned *)arg;
    sleep(seconds);
    fprintf(stderr, "dtrain: MPI_Finalize did not return within %u s (a known MPICH/UCX TCP "
                    "shutdown hang); the run's outputs are complete; exiting with status %d\n",
            seconds, finalize_status);
    _exit(finalize_status);
    return NULL;
}

static void finalize_guarded(int status)
{
#ifdef DTRAIN_SIM
    /* the simulator: no host thread (SMPI's MPI_Finalize does not hang) */
    (void)finalize_watchdog;
    finalize_status = status;
    MPI_CHECK(MPI_Finalize());
    return;
#endif
    static unsigned seconds = 60;
    const char *env = getenv("DTRAIN_FINALIZE_TIMEOUT");
    if (env && *env) {
        /* checked in full width before the narrowing to unsigned */
        const char *p = env;
        int64_t v;
        int rc = parse_int64(&p, 0, INT32_MAX, "DTRAIN_FINALIZE_TIMEOUT", 0, "seconds", &v);
        if (rc == 0 && *p == '\0')
            seconds = (unsigned)v;
        else
            fprintf(stderr, "dtrain: %s; the finalize watchdog waits %u s\n",
                    rc < 0 ? dt_err_msg()
                           : "DTRAIN_FINALIZE_TIMEOUT: expected a whole number of seconds",
                    seconds);
    }
    finalize_status = status;
    pthread_t th;
    if (seconds > 0 && pthread_create(&th, NULL, finalize_watchdog, &seconds) == 0)
        pthread_detach(th);
    MPI_CHECK(MPI_Finalize());
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: mpiexec -n N dtrain DECK [section.key=value ...]\n"
        "       dtrain --print-deck DECK [section.key=value ...]\n"
        "       dtrain --help | --version\n"
        "\n"
        "Trains a neural network with distributed or decentralized SGD as described by the\n"
        "input deck DECK (an INI file; every key is documented in inputs/reference.ini).\n"
        "Arguments section.key=value override the deck. On SIGTERM or SIGUSR1 every rank\n"
        "checkpoints at the next step and dtrain exits with status %d (requeue me).\n"
        "\nModes (algorithm.mode):\n", DT_EXIT_REQUEUE);
    for (int i = 0; algo_table[i]; i++)
        fprintf(f, "  %-10s %s\n", algo_table[i]->name, algo_table[i]->summary);
    /* the deck's own list, so that --help and the parser agree */
    fprintf(f, "\nModels (model.name):");
    for (const char *c = deck_choices("model", "name"); *c;) {
        size_t n = strcspn(c, "|");
        fprintf(f, " %.*s", (int)n, c);
        c += n + (c[n] == '|');
    }
    fprintf(f, "\n\nDeck keys (section.key  type  default  meaning):\n");
    deck_print_keys(f);
    fprintf(f, "\nOutput: <run.output_dir>/run.h5 (metrics), <run.output_dir>/checkpoints/.\n"
               "Postprocess with dtrain-post ");
    for (int i = 0; post_command_names[i]; i++)
        fprintf(f, "%s%s", i ? "|" : "", post_command_names[i]);
    fprintf(f, " (dtrain-post --help).\n");
}

/* compute.precision: the backend the trainer takes (compute.device and
 * .kernels) must run it, else the job is refused before it starts, in one
 * line (from the lowest failing rank; a job may span unlike nodes). Then
 * backend_cpu_by_name hands out the backend at that precision. */
static int precision_open(const dt_config *cfg, MPI_Comm world)
{
    const int prec = backend_precision_of(cfg->compute.precision);
    int rank, bad = 0;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    if (prec != DT_PREC_FP32) {
        const dt_backend *be = strcmp(cfg->compute.device, "cuda") == 0 ? backend_cuda()
                               : cfg->compute.test_device_memory ? backend_cpu_devmem()
                               : backend_cpu_by_name(cfg->compute.kernels);
        /* no backend at all: the trainer says what the build lacks */
        bad = be && !backend_with_precision(be, prec);
    }
    int first_bad = bad ? rank : INT_MAX, who;
    MPI_CHECK(MPI_Allreduce(&first_bad, &who, 1, MPI_INT, MPI_MIN, world));
    if (who == INT_MAX) {
        backend_set_precision(prec);
        return 0;
    }
    if (rank == who)
        fprintf(stderr, "dtrain: rank %d: %s\n", rank, dt_err_msg());
    return -1;
}

/* --print-deck: rank 0 parses the deck and its overrides (argv[0] is the
 * deck) and prints the effective deck, without checking it against this
 * job's size. Returns the exit status on every rank. */
static int print_deck(int rank, int argc, char **argv)
{
    int rc = 0;
    if (rank == 0) {
        dt_job job;
        rc = deck_parse_job(argv[0], argc - 1, argv + 1, 0, &job);
        if (rc == 0 && job.notes)
            fputs(job.notes, stderr);
        if (rc == 0)
            fputs(job.effective, stdout);
        else
            fprintf(stderr, "dtrain: %s\n", dt_err_msg());
        if (rc == 0)
            deck_job_free(&job);
    }
    MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    return rc == 0 ? 0 : 1;
}

/* This rank's group of the job: its roles, device and precision, the run,
 * then the job-wide verdict (stop_finish) and the groups' comparison.
 * Returns the exit status; the job's deck is the caller's to free. */
static int run_job(const dt_job *job, int rank, int size)
{
    const dt_group *g = deck_job_group(job, rank);
    MPI_Comm group_comm = groups_split(job, MPI_COMM_WORLD);
    dt_roles roles;
    roles_build(&roles, group_comm, &g->cfg);
    dt_device dev;
    if (device_open(&g->cfg, MPI_COMM_WORLD, &dev) != 0) { /* each failing rank said why */
        roles_free(&roles);
        MPI_CHECK(MPI_Comm_free(&group_comm));
        return -1;
    }
    if (precision_open(&g->cfg, MPI_COMM_WORLD) != 0) {
        device_close(&dev);
        roles_free(&roles);
        MPI_CHECK(MPI_Comm_free(&group_comm));
        return -1;
    }
    roles_print(&roles, MPI_COMM_WORLD, job, dev.name, stdout);
    dt_run_result res = {0};
    int group_status = run_group(g, &roles, size, group_comm, &res);
    if (group_status == 1 && job->ngroups > 1) {
        /* the other groups would train on for nothing: end the job now */
        int grank;
        MPI_CHECK(MPI_Comm_rank(group_comm, &grank));
        if (grank == 0) {
            fprintf(stderr, "dtrain: group '%s' (world ranks %d..%d) failed; aborting the job\n",
                    g->name, g->first, g->first + g->ranks - 1);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    device_close(&dev);
    int status = stop_finish(group_status);
    groups_report(job, MPI_COMM_WORLD, &res, group_status);
    roles_free(&roles);
    MPI_CHECK(MPI_Comm_free(&group_comm));
    return status;
}

int main(int argc, char **argv)
{
    algo_deck_register(); /* the deck's algorithm.mode: the algorithms' table */
#ifndef DTRAIN_SIM /* the simulator runs no OpenMP region and must not re-execute */
    isa_setup(argv); /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
    omp_wait_setup(argv);
#endif
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int status = 0;
#ifdef DTRAIN_SIM
    /* sim.KEY=VALUE arguments are the simulator's; the simulated modes use
     * no communication thread, so any thread level will do */
    if (sim_parse_args(&argc, argv) != 0) {
        if (rank == 0)
            fprintf(stderr, "dtrain-sim: %s\n", dt_err_msg());
        MPI_CHECK(MPI_Finalize());
        return 2;
    }
    provided = MPI_THREAD_MULTIPLE;
#endif

    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        if (rank == 0)
            build_print(stdout);
        MPI_CHECK(MPI_Finalize());
        return 0;
    }
    int print_only = argc >= 2 && !strcmp(argv[1], "--print-deck");
    int first = print_only ? 2 : 1;
    if (argc <= first || argv[first][0] == '-') {
        if (rank == 0) {
            if (argc > first)
                fprintf(stderr, "dtrain: unknown option '%s'\n", argv[first]);
            else
                fprintf(stderr, "dtrain: no deck given\n");
            usage(stderr);
        }
        MPI_CHECK(MPI_Finalize());
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "dtrain: the MPI library provides thread level %d, dtrain needs "
                            "MPI_THREAD_MULTIPLE (%d)\n", provided, MPI_THREAD_MULTIPLE);
        MPI_CHECK(MPI_Finalize());
        return 1;
    }

    if (print_only)
        return print_deck(rank, argc - first, argv + first);
    dt_job job;
    int rc = deck_load_job(MPI_COMM_WORLD, argv[first], argc - first - 1, argv + first + 1,
                           &job);
    if (rc == 0 && groups_check(&job) != 0) {
        deck_job_free(&job);
        rc = -1;
    }
    if (rc != 0) { /* every rank parsed the same bytes: the same verdict everywhere */
        if (rank == 0)
            fprintf(stderr, "dtrain: %s\n", dt_err_msg());
        MPI_CHECK(MPI_Finalize());
        return 1;
    }
#ifndef DTRAIN_SIM
    stop_install(MPI_COMM_WORLD);
#endif /* a simulated rank gets no signal: no job-wide stop rounds (see sync_loop) */
    if (rank == 0) {
        printf("dtrain %s (git %s), %d rank(s), deck %s\n", build_version(), build_git_revision(),
               size, argv[first]);
        if (job.notes)
            fputs(job.notes, stdout);
        fflush(stdout);
    }
    status = run_job(&job, rank, size);
    deck_job_free(&job);
    if (status < 0) { /* the run never started; each failing rank said why */
        MPI_CHECK(MPI_Finalize());
        return 1;
    }
    finalize_guarded(status);
    return status;
}
