/* dtrain-post summary: one table line per run. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/post.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "post/record_read.h"

typedef struct post_stats {
    double last_step, acc_mean, acc_avg, wall, images_per_s, comm_share;
} post_stats;

/* The *_time fields are per-interval amounts (since the previous row), so
 * their totals are sums over every row and rank; images is cumulative per
 * rank, so the total is the last row summed over ranks. */
static post_stats stats_compute(const post_run *run)
{
    post_stats s = {0, NAN, NAN, 0, NAN, NAN};
    size_t R = (size_t)run->ranks;
    double images = 0, comm = 0, all = 0;
    for (size_t i = 0; i < run->ntrain * R; i++) {
        comm += run->train[T_COMM][i] + run->train[T_WAIT][i];
        all += run->train[T_COMPUTE][i] + run->train[T_COMM][i] + run->train[T_WAIT][i];
    }
    if (run->ntrain > 0)
        for (size_t k = 0; k < R; k++) {
            size_t i = (run->ntrain - 1) * R + k;
            s.last_step = fmax(s.last_step, run->train[T_STEP][i]);
            s.wall = fmax(s.wall, run->train[T_WALL][i]);
            images += run->train[T_IMAGES][i];
        }
    if (run->neval > 0) {
        for (size_t k = 0; k < R; k++)
            s.wall = fmax(s.wall, run->eval[E_WALL][(run->neval - 1) * R + k]);
        s.acc_mean = run->scalar[S_ACC_MEAN][run->neval - 1];
        s.acc_avg = run->scalar[S_AVG_ACC][run->neval - 1];
    }
    if (s.wall > 0)
        s.images_per_s = images / s.wall;
    if (all > 0)
        s.comm_share = comm / all;
    return s;
}

int post_summary(char **paths, int npaths)
{
    enum { NCOL = 9 };
    static const char *const head[NCOL] = {"run",      "mode",          "ranks",
                                           "steps",    "test_acc_mean", "test_acc_avg_model",
                                           "wall_s",   "images_per_s",  "comm_share"};
    size_t ncells = (size_t)(npaths + 1) * NCOL;
    /* "tokens_per_s" when every run is a language model's */
    int all_tokens = 1;
    for (int p = 0; p < npaths && all_tokens; p++) {
        post_run run;
        if (post_run_load(paths[p], &run) != 0)
            return -1;
        all_tokens = run.tokens;
        post_run_free(&run);
    }
    char(*cell)[128] = dt_calloc(ncells, sizeof *cell);
    for (int c = 0; c < NCOL; c++)
        snprintf(cell[c], sizeof cell[c], "%s", c == 7 && all_tokens ? "tokens_per_s" : head[c]);
    for (int p = 0; p < npaths; p++) {
        post_run run;
        if (post_run_load(paths[p], &run) != 0) {
            free(cell);
            return -1;
        }
        post_stats s = stats_compute(&run);
        char(*row)[128] = cell + (size_t)(p + 1) * NCOL;
        double num[6] = {s.acc_mean, s.acc_avg, s.wall, s.images_per_s, s.comm_share, 0};
        snprintf(row[0], sizeof row[0], "%s", run.path);
        snprintf(row[1], sizeof row[1], "%s", run.mode);
        snprintf(row[2], sizeof row[2], "%lld", (long long)run.ranks);
        snprintf(row[3], sizeof row[3], "%lld", (long long)s.last_step);
        for (int c = 0; c < 5; c++) {
            if (isnan(num[c]))
                snprintf(row[4 + c], sizeof row[4 + c], "nan");
            else
                snprintf(row[4 + c], sizeof row[4 + c], "%.9g", num[c]);
        }
        post_run_free(&run);
    }
    size_t width[NCOL] = {0};
    for (size_t i = 0; i < ncells; i++)
        width[i % NCOL] = strlen(cell[i]) > width[i % NCOL] ? strlen(cell[i]) : width[i % NCOL];
    for (int r = 0; r <= npaths; r++) {
        for (int c = 0; c < NCOL; c++) {
            const char *v = cell[(size_t)r * NCOL + c];
            /* Text left-aligned, numbers right-aligned; no trailing blanks. */
            if (c < 2)
                printf("%-*s  ", (int)width[c], v);
            else
                printf(c == NCOL - 1 ? "%*s" : "%*s  ", (int)width[c], v);
        }
        putchar('\n');
    }
    free(cell);
    return 0;
}
