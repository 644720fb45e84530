#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "run/groups.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "core/error.h"
#include "optim/optim.h"

/* Whether the mode runs the optimizer's step on what the optimizer needs: a
 * kind that steps on whole matrices (dt_optim_ops.whole: muon) cannot take a
 * parameter server's shard, and a mode with its own step (the edge-consensus
 * ISVR modes) never calls one but SGD's arithmetic (the algorithms' table
 * refuses adamw there already). 0, or -1 after dt_err_set(). */
static int optim_fits_mode(const dt_config *cfg, const dt_algo *a)
{
    const dt_optim_ops *ops = optim_find(cfg->optim.name);
    if (!ops)
        return dt_err_prefix("optim.name");
    if (ops->whole && a->servers)
        return dt_err_set("optim.name = %s with algorithm.mode = %s: the parameter servers "
                          "step on their shards of the flat vector, and %s; use optim.name = "
                          "sgd or adamw", ops->name, a->name, ops->whole);
    if (ops->whole && a->own_step)
        return dt_err_set("optim.name = %s with algorithm.mode = %s: the mode takes its own "
                          "step, never the optimizer's, so %s would not run; use optim.name = "
                          "sgd", ops->name, a->name, ops->name);
    return 0;
}

int groups_check(const dt_job *job)
{
    for (int i = 0; i < job->ngroups; i++) {
        const dt_group *g = &job->groups[i];
        const dt_algo *a = algo_find(g->cfg.algorithm.mode);
        if (!a)
            return dt_err_set("%s: algorithm.mode = %s is not built in", g->where,
                              g->cfg.algorithm.mode);
        if (optim_fits_mode(&g->cfg, a) != 0)
            return *g->name ? dt_err_prefix("%s", g->where) : -1;
        if (a->check(&g->cfg, g->ranks) != 0) {
            if (*g->name)
                return dt_err_prefix("%s = %d (algorithm.mode = %s)", g->where, g->ranks,
                                     g->cfg.algorithm.mode);
            return -1;
        }
    }
    return 0;
}

MPI_Comm groups_split(const dt_job *job, MPI_Comm world)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    const dt_group *g = deck_job_group(job, rank);
    if (!g)
        DT_FATAL("world rank %d belongs to no group", rank);
    MPI_Comm comm;
    MPI_CHECK(MPI_Comm_split(world, (int)(g - job->groups), rank, &comm));
    return comm;
}

/* Columns of groups.csv, documented in README.md. */
static const char *const columns =
    "group,mode,first_rank,ranks,status,steps,avg_model_accuracy,mean_accuracy,wall_s,"
    "images_per_s,comm_share";

/* Writes path via a temporary name, so a reader never sees half a file. */
static void file_replace(const char *path, const char *text)
{
    char tmp[DT_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "dtrain: warning: cannot write %s: %s\n", path, strerror(errno));
}

void groups_report(const dt_job *job, MPI_Comm world, const dt_run_result *mine, int status)
{
    if (job->ngroups == 1 && !job->groups[0].name[0])
        return;
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &size));
    enum { NV = 8 };
    double v[NV] = { (double)status, (double)mine->steps, mine->avg_model_acc, mine->mean_acc,
                     mine->wall, mine->images_per_s, mine->comm_share, 0 };
    double *all = rank == 0 ? dt_calloc((size_t)size * NV, sizeof *all) : NULL;
    MPI_CHECK(MPI_Gather(v, NV, MPI_DOUBLE, all, NV, MPI_DOUBLE, 0, world));
    if (rank != 0)
        return;

    char *csv = NULL;
    size_t csv_len = 0;
    FILE *c = open_memstream(&csv, &csv_len);
    if (!c)
        DT_FATAL("open_memstream: %s", strerror(errno));
    fprintf(c, "%s\n", columns);
    printf("\n%-16s %-9s %5s  %-8s %7s  %9s %9s  %8s %9s %6s\n", "group", "mode", "ranks",
           "status", "steps", "avg model", "mean acc", "wall s", "images/s", "comm");
    for (int i = 0; i < job->ngroups; i++) {
        const dt_group *g = &job->groups[i];
        const double *r = all + (size_t)g->first * NV;
        const char *st = r[0] == 0 ? "done" : r[0] == DT_EXIT_REQUEUE ? "stopped" : "failed";
        printf("%-16s %-9s %5d  %-8s %7.0f  %8.2f%% %8.2f%%  %8.1f %9.0f %5.1f%%\n", g->name,
               g->cfg.algorithm.mode, g->ranks, st, r[1], 100 * r[2], 100 * r[3], r[4], r[5],
               100 * r[6]);
        fprintf(c, "%s,%s,%d,%d,%s,%.0f,%.6f,%.6f,%.3f,%.3f,%.6f\n", g->name,
                g->cfg.algorithm.mode, g->first, g->ranks, st, r[1], r[2], r[3], r[4], r[5],
                r[6]);
    }
    fflush(stdout);
    if (fclose(c) != 0)
        DT_FATAL("open_memstream: %s", strerror(errno));
    free(all);

    /* the groups' directories are <output_dir>/<name>: the parent is the job's */
    char dir[DT_PATH_MAX], path[DT_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s", job->groups[0].cfg.run.output_dir);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    snprintf(path, sizeof path, "%s/groups.csv", dir);
    file_replace(path, csv);
    printf("group comparison: %s\n", path);
    snprintf(path, sizeof path, "%s/deck.ini", dir);
    file_replace(path, job->effective);
    free(csv);
}
