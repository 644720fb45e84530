/* dtrain-post csv: a run record's tables as CSV files. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/post.h"

#include <errno.h>
#include <hdf5.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "post/output.h"
#include "post/record_read.h"

/* the columns written as integers */
static const int train_is_int[NTRAIN] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
static const int eval_is_int[NEVAL] = {1, 0, 0, 0, 0};

/* The rows of a table of per-rank fields, each (rows, R), whose first two
 * are the step and the epoch (T_STEP, T_EPOCH; E_STEP, E_EPOCH): one line
 * per row and rank, "step,epoch,rank," then the other fields, then the
 * row's scalars (each (rows)). A rank's padding rows of an asynchronous run
 * (step -1) are left out. */
static void rows_write(FILE *f, size_t rows, int64_t R, double *const *field, const int *is_int,
                       int nfield, double *const *scalar, int nscalar)
{
    for (size_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < R; k++) {
            size_t i = r * (size_t)R + (size_t)k;
            if (field[0][i] < 0) /* padding of asynchronous runs */
                continue;
            post_fmt_value(f, field[0][i], 1);
            fputc(',', f);
            post_fmt_value(f, field[1][i], 0);
            fprintf(f, ",%lld", (long long)k);
            for (int c = 2; c < nfield; c++) {
                fputc(',', f);
                post_fmt_value(f, field[c][i], is_int[c]);
            }
            for (int s = 0; s < nscalar; s++) {
                fputc(',', f);
                post_fmt_g(f, scalar[s][r]);
            }
            fputc('\n', f);
        }
}

/* Every other top-level group of the record is a series written by one
 * rank (runlog_write_series: the parameter server's supervisor curve and
 * histograms): each becomes <name>.csv, one column per dataset. */
static int series_csv(const char *path, const char *outdir)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return dt_err_set("%s: cannot reopen", path);
    H5G_info_t info;
    int rc = -1;
    if (H5Gget_info(file, &info) < 0) {
        dt_err_set("%s: cannot list its groups", path);
        goto out_file;
    }
    for (hsize_t gi = 0; gi < info.nlinks; gi++) {
        char gname[128], cname[128];
        if (H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, gi, gname, sizeof gname,
                               H5P_DEFAULT) < 0) {
            dt_err_set("%s: cannot read the name of group %llu", path, (unsigned long long)gi);
            goto out_file;
        }
        if (!strcmp(gname, "train") || !strcmp(gname, "eval"))
            continue;
        hid_t g = H5Gopen2(file, gname, H5P_DEFAULT);
        H5G_info_t gin;
        if (g < 0 || H5Gget_info(g, &gin) < 0 || gin.nlinks == 0 || gin.nlinks > 16) {
            if (g >= 0)
                H5Gclose(g);
            continue; /* not a series */
        }
        int nc = (int)gin.nlinks;
        double *col[16] = {0};
        char names[16][128];
        size_t rows = 0, r = 0;
        int ok = 1;
        for (int c = 0; c < nc && ok; c++) {
            ok = H5Lget_name_by_idx(g, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, (hsize_t)c, cname,
                                    sizeof cname, H5P_DEFAULT) >= 0 ||
                 H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, (hsize_t)c, cname,
                                    sizeof cname, H5P_DEFAULT) >= 0;
            if (!ok)
                break;
            snprintf(names[c], sizeof names[c], "%s", cname);
            col[c] = post_table_read(file, path, gname, cname, 0, 1, &r);
            ok = col[c] && (c == 0 || r == rows);
            rows = r;
        }
        H5Gclose(g);
        char spath[PATH_MAX];
        FILE *f = NULL;
        if (ok && post_path_fmt(spath, sizeof spath, "%s/%s.csv", outdir, gname) == 0 &&
            (f = fopen(spath, "w"))) {
            for (int c = 0; c < nc; c++)
                fprintf(f, "%s%s", c ? "," : "", names[c]);
            fputc('\n', f);
            for (size_t i = 0; i < rows; i++)
                for (int c = 0; c < nc; c++) {
                    if (c)
                        fputc(',', f);
                    post_fmt_g(f, col[c][i]);
                    if (c == nc - 1)
                        fputc('\n', f);
                }
            ok = post_close_checked(f, spath) == 0;
            if (ok)
                printf("%s\n", spath);
        } else if (ok) {
            dt_err_set("%s/%s.csv: cannot create: %s", outdir, gname, strerror(errno));
            ok = 0;
        }
        for (int c = 0; c < nc; c++)
            free(col[c]);
        if (!ok)
            goto out_file;
    }
    rc = 0;
out_file:
    H5Fclose(file);
    return rc;
}

int post_csv(const char *path, const char *outdir)
{
    post_run run;
    if (post_run_load(path, &run) != 0)
        return -1;
    char dbuf[PATH_MAX];
    if (!outdir) {
        snprintf(dbuf, sizeof dbuf, "%s", path);
        outdir = dirname(dbuf);
    } else if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        post_run_free(&run);
        return dt_err_set("%s: cannot create: %s", outdir, strerror(errno));
    }
    char tpath[PATH_MAX], epath[PATH_MAX];
    if (post_path_fmt(tpath, sizeof tpath, "%s/train.csv", outdir) != 0 ||
        post_path_fmt(epath, sizeof epath, "%s/eval.csv", outdir) != 0) {
        post_run_free(&run);
        return -1;
    }
    int64_t R = run.ranks;

    FILE *f = fopen(tpath, "w");
    if (!f) {
        post_run_free(&run);
        return dt_err_set("%s: cannot create: %s", tpath, strerror(errno));
    }
    fprintf(f, "step,epoch,rank,wall,loss,accuracy,lr,compute_time,comm_time,wait_time,%s,weight,"
               "bytes_sent\n", run.tokens ? "tokens" : "images");
    rows_write(f, run.ntrain, R, run.train, train_is_int, NTRAIN, NULL, 0);
    if (post_close_checked(f, tpath) != 0) {
        post_run_free(&run);
        return -1;
    }

    f = fopen(epath, "w");
    if (!f) {
        post_run_free(&run);
        return dt_err_set("%s: cannot create: %s", epath, strerror(errno));
    }
    fputs("step,epoch,rank,wall,loss,accuracy,loss_mean,loss_std,accuracy_mean,accuracy_std,"
          "avg_model_loss,avg_model_accuracy,consensus_distance\n",
          f);
    rows_write(f, run.neval, R, run.eval, eval_is_int, NEVAL, run.scalar, NSCALAR);
    post_run_free(&run);
    if (post_close_checked(f, epath) != 0)
        return -1;
    printf("%s\n%s\n", tpath, epath);
    return series_csv(path, outdir);
}
