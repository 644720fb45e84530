/* dtrain-post: reading run records (run.h5) and finding them from the
 * command line. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/record_read.h"

#include <errno.h>
#include <hdf5.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/parse.h"
#include "io/h5attr.h"
#include "post/output.h"

static const char *const train_names[NTRAIN] = {
    "step", "epoch", "wall", "loss", "accuracy", "lr", "compute_time", "comm_time",
    "wait_time", "images", "weight", "bytes_sent"};
static const char *const eval_names[NEVAL] = {"step", "epoch", "wall", "loss", "accuracy"};
static const char *const scalar_names[NSCALAR] = {
    "loss_mean",      "loss_std",           "accuracy_mean",     "accuracy_std",
    "avg_model_loss", "avg_model_accuracy", "consensus_distance"};

/* Reads "/group/name" as doubles; *rows gets its row count. 2-D datasets
 * must have `ranks` columns. Returns NULL after dt_err_set. */
double *post_table_read(hid_t file, const char *path, const char *group, const char *name,
                          int two_d, int64_t ranks, size_t *rows)
{
    char full[256];
    snprintf(full, sizeof full, "/%s/%s", group, name);
    if (H5Lexists(file, full, H5P_DEFAULT) <= 0) {
        dt_err_set("%s: dataset %s is missing; not a complete dtrain run record", path, full);
        return NULL;
    }
    hid_t ds = H5Dopen2(file, full, H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hsize_t dims[2] = {0, 0};
    int nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    double *v = NULL;
    if (nd != (two_d ? 2 : 1) || H5Sget_simple_extent_dims(sp, dims, NULL) < 0 ||
        (two_d && dims[1] != (hsize_t)ranks)) {
        dt_err_set("%s: dataset %s has the wrong shape (%d dimensions, %llu columns); expected "
                   "%s with %lld columns",
                   path, full, nd, two_d ? (unsigned long long)dims[1] : 0ULL,
                   two_d ? "(rows, ranks)" : "(rows)", (long long)ranks);
        goto out;
    }
    size_t n = (size_t)dims[0] * (two_d ? (size_t)ranks : 1);
    v = dt_malloc((n ? n : 1) * sizeof *v);
    if (n > 0 && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
        dt_err_set("%s: reading dataset %s failed (damaged file)", path, full);
        free(v);
        v = NULL;
        goto out;
    }
    *rows = (size_t)dims[0];
out:
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    return v;
}

/* "<name of the directory holding path> (<mode>)" */
static void label_make(post_run *run)
{
    char buf[PATH_MAX];
    const char *dirpart = ".";
    if (realpath(run->path, buf)) {
        dirpart = dirname(buf);
    } else {
        snprintf(buf, sizeof buf, "%s", run->path);
        dirpart = dirname(buf);
    }
    char dcopy[PATH_MAX];
    snprintf(dcopy, sizeof dcopy, "%s", dirpart);
    snprintf(run->label, sizeof run->label, "%s (%s)", basename(dcopy), run->mode);
}

int post_run_load(const char *path, post_run *run)
{
    memset(run, 0, sizeof *run);
    run->path = path;
    struct stat st;
    if (stat(path, &st) != 0)
        return dt_err_set("%s: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0)
        return dt_err_set("%s: not an HDF5 file; expected a dtrain run record (run.h5)", path);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return dt_err_set("%s: cannot be opened as HDF5 (damaged file?)", path);
    int rc = -1;
    if (H5Lexists(file, "/train", H5P_DEFAULT) <= 0 ||
        H5Lexists(file, "/eval", H5P_DEFAULT) <= 0) {
        dt_err_set("%s: not a dtrain run record (no /train or /eval group)", path);
        goto out;
    }
    /* in full width, then bounded: it sizes every table read below */
    if (h5attr_read_i64(file, "ranks", &run->ranks) != 0) {
        dt_err_prefix("%s: not a dtrain run record", path);
        goto out;
    }
    if (check_int64(run->ranks, 1, INT_MAX, path, "attribute 'ranks'") != 0)
        goto out;
    if (h5attr_read_string(file, "mode", run->mode, sizeof run->mode) != 0)
        snprintf(run->mode, sizeof run->mode, "?");
    char unit[16] = "";
    run->tokens = H5Aexists(file, "sample_unit") > 0 &&
                  h5attr_read_string(file, "sample_unit", unit, sizeof unit) == 0 &&
                  strcmp(unit, "tokens") == 0;

    /* A run that crashed mid-append can leave fields one row apart: the
     * shortest field is what was completely written. */
    size_t rows;
    run->ntrain = run->neval = SIZE_MAX;
    for (int f = 0; f < NTRAIN; f++) {
        if (!(run->train[f] = post_table_read(file, path, "train", train_names[f], 1, run->ranks,
                                         &rows)))
            goto out;
        run->ntrain = rows < run->ntrain ? rows : run->ntrain;
    }
    for (int f = 0; f < NEVAL; f++) {
        if (!(run->eval[f] = post_table_read(file, path, "eval", eval_names[f], 1, run->ranks,
                                        &rows)))
            goto out;
        run->neval = rows < run->neval ? rows : run->neval;
    }
    for (int f = 0; f < NSCALAR; f++) {
        if (!(run->scalar[f] = post_table_read(file, path, "eval", scalar_names[f], 0, run->ranks,
                                          &rows)))
            goto out;
        run->neval = rows < run->neval ? rows : run->neval;
    }
    label_make(run);
    rc = 0;
out:
    H5Fclose(file);
    return rc;
}

void post_run_free(post_run *run)
{
    for (int f = 0; f < NTRAIN; f++)
        free(run->train[f]);
    for (int f = 0; f < NEVAL; f++)
        free(run->eval[f]);
    for (int f = 0; f < NSCALAR; f++)
        free(run->scalar[f]);
}

char **post_runs_expand(char **args, int nargs, int *nruns)
{
    int cap = nargs + 8, n = 0;
    char **runs = dt_calloc((size_t)cap, sizeof *runs);
    char p[PATH_MAX];
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        const char *a = args[i];
        if (stat(a, &st) != 0 || !S_ISDIR(st.st_mode)) {
            if (n == cap)
                runs = dt_realloc(runs, (size_t)(cap *= 2) * sizeof *runs);
            runs[n] = dt_malloc(strlen(a) + 1);
            strcpy(runs[n++], a);
            continue;
        }
        if (post_path_fmt(p, sizeof p, "%s/run.h5", a) == 0 && access(p, F_OK) == 0) {
            if (n == cap)
                runs = dt_realloc(runs, (size_t)(cap *= 2) * sizeof *runs);
            runs[n] = dt_malloc(strlen(p) + 1);
            strcpy(runs[n++], p);
            continue;
        }
        FILE *f = post_path_fmt(p, sizeof p, "%s/groups.csv", a) == 0 ? fopen(p, "r") : NULL;
        if (!f) {
            dt_err_set("%s: a directory without run.h5 or groups.csv; expected a run record, "
                       "a run directory or a job directory with rank groups", a);
            goto fail;
        }
        char line[1024];
        int row = 0;
        while (fgets(line, sizeof line, f)) {
            if (row++ == 0)
                continue; /* header */
            line[strcspn(line, ",\r\n")] = '\0';
            if (!*line || post_path_fmt(p, sizeof p, "%s/%s/run.h5", a, line) != 0)
                continue;
            if (n == cap)
                runs = dt_realloc(runs, (size_t)(cap *= 2) * sizeof *runs);
            runs[n] = dt_malloc(strlen(p) + 1);
            strcpy(runs[n++], p);
        }
        fclose(f);
        if (row < 2) {
            dt_err_set("%s/groups.csv: no group rows", a);
            goto fail;
        }
    }
    *nruns = n;
    return runs;
fail:
    for (int i = 0; i < n; i++)
        free(runs[i]);
    free(runs);
    return NULL;
}
