/* dtrain-post: turn run records (run.h5, see io/runlog.h) into CSV tables,
 * a 2x2 figure and a summary table.
 *
 * Runs serially: the files are opened with HDF5's default (POSIX) driver, so
 * no MPI initialisation is needed even though HDF5 is the MPI build. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "core/error.h"
#include "core/parse.h"
#include "io/h5attr.h"
#include "post/post.h"

#include <errno.h>
#include <hdf5.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef DT_GNUPLOT
#define POST_GNUPLOT DT_GNUPLOT
#else
#define POST_GNUPLOT "gnuplot"
#endif

enum { NTRAIN = 12, NEVAL = 5, NSCALAR = 7 };
enum { T_STEP, T_EPOCH, T_WALL, T_LOSS, T_ACC, T_LR, T_COMPUTE, T_COMM, T_WAIT, T_IMAGES,
       T_WEIGHT, T_BYTES };
enum { E_STEP, E_EPOCH, E_WALL, E_LOSS, E_ACC };
enum { S_LOSS_MEAN, S_LOSS_STD, S_ACC_MEAN, S_ACC_STD, S_AVG_LOSS, S_AVG_ACC, S_CONSENSUS };

static const char *const train_names[NTRAIN] = {
    "step", "epoch", "wall", "loss", "accuracy", "lr", "compute_time", "comm_time",
    "wait_time", "images", "weight", "bytes_sent"};
static const int train_is_int[NTRAIN] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
static const char *const eval_names[NEVAL] = {"step", "epoch", "wall", "loss", "accuracy"};
static const int eval_is_int[NEVAL] = {1, 0, 0, 0, 0};
static const char *const scalar_names[NSCALAR] = {
    "loss_mean",      "loss_std",           "accuracy_mean",     "accuracy_std",
    "avg_model_loss", "avg_model_accuracy", "consensus_distance"};

/* One run record in memory. Integer fields are held as doubles (exact below
 * 2^53, far beyond any step or image count). */
typedef struct post_run {
    const char *path;
    char label[512]; /* "<directory name> (<mode>)" */
    char mode[64];
    int tokens;      /* a language model's record: its "images" count tokens */
    int64_t ranks;
    size_t ntrain, neval;
    double *train[NTRAIN]; // (ntrain, ranks)
    double *eval[NEVAL];   // (neval, ranks)
    double *scalar[NSCALAR]; // (neval)
} post_run;

/* snprintf into a path buffer; a path that does not fit is an error, not a
 * silently shortened name. */
static int path_fmt(char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int path_fmt(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= len)
        return dt_err_set("path '%s...' is longer than %zu bytes", out, len - 1);
    return 0;
}

/* ---- loading --------------------------------------------------------------- */


/* Reads "/group/name" as doubles; *rows gets its row count. 2-D datasets
 * must have `ranks` columns. Returns NULL after dt_err_set. */
static double *table_read(hid_t file, const char *path, const char *group, const char *name,
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

static int run_load(const char *path, post_run *run)
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
        if (!(run->train[f] = table_read(file, path, "train", train_names[f], 1, run->ranks,
                                         &rows)))
            goto out;
        run->ntrain = rows < run->ntrain ? rows : run->ntrain;
    }
    for (int f = 0; f < NEVAL; f++) {
        if (!(run->eval[f] = table_read(file, path, "eval", eval_names[f], 1, run->ranks,
                                        &rows)))
            goto out;
        run->neval = rows < run->neval ? rows : run->neval;
    }
    for (int f = 0; f < NSCALAR; f++) {
        if (!(run->scalar[f] = table_read(file, path, "eval", scalar_names[f], 0, run->ranks,
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

static void run_free(post_run *run)
{
    for (int f = 0; f < NTRAIN; f++)
        free(run->train[f]);
    for (int f = 0; f < NEVAL; f++)
        free(run->eval[f]);
    for (int f = 0; f < NSCALAR; f++)
        free(run->scalar[f]);
}

/* ---- formatting ------------------------------------------------------------ */

/* %.9g, with one spelling of NaN whatever its sign bit. */
static void fmt_g(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else
        fprintf(f, "%.9g", v);
}

static void fmt_value(FILE *f, double v, int is_int)
{
    if (is_int && isfinite(v))
        fprintf(f, "%lld", (long long)v);
    else
        fmt_g(f, v);
}

/* ---- csv ------------------------------------------------------------------- */

static int write_checked(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return dt_err_set("%s: write failed: %s", path, strerror(errno));
    return 0;
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
            col[c] = table_read(file, path, gname, cname, 0, 1, &r);
            ok = col[c] && (c == 0 || r == rows);
            rows = r;
        }
        H5Gclose(g);
        char spath[PATH_MAX];
        FILE *f = NULL;
        if (ok && path_fmt(spath, sizeof spath, "%s/%s.csv", outdir, gname) == 0 &&
            (f = fopen(spath, "w"))) {
            for (int c = 0; c < nc; c++)
                fprintf(f, "%s%s", c ? "," : "", names[c]);
            fputc('\n', f);
            for (size_t i = 0; i < rows; i++)
                for (int c = 0; c < nc; c++) {
                    if (c)
                        fputc(',', f);
                    fmt_g(f, col[c][i]);
                    if (c == nc - 1)
                        fputc('\n', f);
                }
            ok = write_checked(f, spath) == 0;
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

static int cmd_csv(const char *path, const char *outdir)
{
    post_run run;
    if (run_load(path, &run) != 0)
        return -1;
    char dbuf[PATH_MAX];
    if (!outdir) {
        snprintf(dbuf, sizeof dbuf, "%s", path);
        outdir = dirname(dbuf);
    } else if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        run_free(&run);
        return dt_err_set("%s: cannot create: %s", outdir, strerror(errno));
    }
    char tpath[PATH_MAX], epath[PATH_MAX];
    if (path_fmt(tpath, sizeof tpath, "%s/train.csv", outdir) != 0 ||
        path_fmt(epath, sizeof epath, "%s/eval.csv", outdir) != 0) {
        run_free(&run);
        return -1;
    }
    int64_t R = run.ranks;

    FILE *f = fopen(tpath, "w");
    if (!f) {
        run_free(&run);
        return dt_err_set("%s: cannot create: %s", tpath, strerror(errno));
    }
    fprintf(f, "step,epoch,rank,wall,loss,accuracy,lr,compute_time,comm_time,wait_time,%s,weight,"
               "bytes_sent\n", run.tokens ? "tokens" : "images");
    for (size_t r = 0; r < run.ntrain; r++)
        for (int64_t k = 0; k < R; k++) {
            size_t i = r * (size_t)R + (size_t)k;
            if (run.train[T_STEP][i] < 0) /* padding of asynchronous runs */
                continue;
            fmt_value(f, run.train[T_STEP][i], 1);
            fputc(',', f);
            fmt_value(f, run.train[T_EPOCH][i], 0);
            fprintf(f, ",%lld", (long long)k);
            for (int c = T_WALL; c < NTRAIN; c++) {
                fputc(',', f);
                fmt_value(f, run.train[c][i], train_is_int[c]);
            }
            fputc('\n', f);
        }
    if (write_checked(f, tpath) != 0) {
        run_free(&run);
        return -1;
    }

    f = fopen(epath, "w");
    if (!f) {
        run_free(&run);
        return dt_err_set("%s: cannot create: %s", epath, strerror(errno));
    }
    fputs("step,epoch,rank,wall,loss,accuracy,loss_mean,loss_std,accuracy_mean,accuracy_std,"
          "avg_model_loss,avg_model_accuracy,consensus_distance\n",
          f);
    for (size_t r = 0; r < run.neval; r++)
        for (int64_t k = 0; k < R; k++) {
            size_t i = r * (size_t)R + (size_t)k;
            if (run.eval[E_STEP][i] < 0) /* padding of asynchronous runs */
                continue;
            fmt_value(f, run.eval[E_STEP][i], 1);
            fputc(',', f);
            fmt_value(f, run.eval[E_EPOCH][i], 0);
            fprintf(f, ",%lld", (long long)k);
            for (int c = E_WALL; c < NEVAL; c++) {
                fputc(',', f);
                fmt_value(f, run.eval[c][i], eval_is_int[c]);
            }
            for (int s = 0; s < NSCALAR; s++) {
                fputc(',', f);
                fmt_g(f, run.scalar[s][r]);
            }
            fputc('\n', f);
        }
    run_free(&run);
    if (write_checked(f, epath) != 0)
        return -1;
    printf("%s\n%s\n", tpath, epath);
    return series_csv(path, outdir);
}

/* ---- summary --------------------------------------------------------------- */

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

static int cmd_summary(char **paths, int npaths)
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
        if (run_load(paths[p], &run) != 0)
            return -1;
        all_tokens = run.tokens;
        run_free(&run);
    }
    char(*cell)[128] = dt_calloc(ncells, sizeof *cell);
    for (int c = 0; c < NCOL; c++)
        snprintf(cell[c], sizeof cell[c], "%s", c == 7 && all_tokens ? "tokens_per_s" : head[c]);
    for (int p = 0; p < npaths; p++) {
        post_run run;
        if (run_load(paths[p], &run) != 0) {
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
        run_free(&run);
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

/* ---- plot ------------------------------------------------------------------ */

/* The plotting commands; postproc/plot.gp carries the same text with its
 * documentation, for users who want to restyle the figure (point
 * DTRAIN_PLOT_GP at an edited copy). The caller defines dir, nruns and out. */
static const char plot_body[] =
    "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
    "    set terminal pngcairo size 1400,1000 noenhanced font ',10'\n"
    "} else {\n"
    "    set terminal png size 1400,1000 noenhanced truecolor\n"
    "}\n"
    "set output out\n"
    "set datafile separator whitespace\n"
    "set key autotitle columnheader bottom right\n"
    "set grid\n"
    "set style fill transparent solid 0.2 noborder\n"
    "trainf(i) = sprintf('%s/run%d.train.dat', dir, i)\n"
    "evalf(i) = sprintf('%s/run%d.eval.dat', dir, i)\n"
    "set multiplot layout 2,2\n"
    "set title 'test accuracy vs wall time'\n"
    "set xlabel 'wall time (s)'\n"
    "set ylabel 'test accuracy'\n"
    "plot for [i=1:nruns] evalf(i) using 1:4:5 with filledcurves lc i notitle, \\\n"
    "     for [i=1:nruns] evalf(i) using 1:3 with linespoints lc i pt 7 ps 0.6 title columnheader(1)\n"
    "set title 'test accuracy vs epoch'\n"
    "set xlabel 'epoch'\n"
    "plot for [i=1:nruns] evalf(i) using 2:4:5 with filledcurves lc i notitle, \\\n"
    "     for [i=1:nruns] evalf(i) using 2:3 with linespoints lc i pt 7 ps 0.6 title columnheader(1)\n"
    "set key top right\n"
    "set title 'training loss vs wall time'\n"
    "set xlabel 'wall time (s)'\n"
    "set ylabel 'training loss'\n"
    "plot for [i=1:nruns] trainf(i) using 1:4:5 with filledcurves lc i notitle, \\\n"
    "     for [i=1:nruns] trainf(i) using 1:3 with lines lc i lw 1.5 title columnheader(1)\n"
    "set title 'training loss vs epoch'\n"
    "set xlabel 'epoch'\n"
    "plot for [i=1:nruns] trainf(i) using 2:4:5 with filledcurves lc i notitle, \\\n"
    "     for [i=1:nruns] trainf(i) using 2:3 with lines lc i lw 1.5 title columnheader(1)\n"
    "unset multiplot\n"
    "set output\n";

/* qsort order of data rows (5 doubles) by epoch */
static int by_epoch(const void *a, const void *b)
{
    double x = ((const double *)a)[1], y = ((const double *)b)[1];
    return (x > y) - (x < y);
}

/* Writes run<idx>.{train,eval}.dat: a header whose first word is the curve's
 * title, then x (mean wall), x (epoch), mean, min, max over ranks, in the
 * order of the epoch (an asynchronous rank's k-th row need not be at the
 * same moment as another's). */
static int data_write(const post_run *run, const char *dir, int idx)
{
    size_t R = (size_t)run->ranks;
    char title[512];
    snprintf(title, sizeof title, "%s", run->label);
    for (char *c = title; *c; c++)
        if (*c == '"')
            *c = '\'';
    for (int which = 0; which < 2; which++) {
        char path[PATH_MAX];
        if (path_fmt(path, sizeof path, "%s/run%d.%s.dat", dir, idx,
                     which ? "eval" : "train") != 0)
            return -1;
        FILE *f = fopen(path, "w");
        if (!f)
            return dt_err_set("%s: cannot create: %s", path, strerror(errno));
        fprintf(f, "\"%s\" epoch mean min max\n", title);
        size_t n = which ? run->neval : run->ntrain;
        const double *wall = which ? run->eval[E_WALL] : run->train[T_WALL];
        const double *y = which ? run->eval[E_ACC] : run->train[T_LOSS];
        /* the record's epoch is fractional (step / steps per epoch); the
         * mean over the ranks that have the row (asynchronous runs pad a
         * rank's shorter series with step -1) */
        const double *ep = which ? run->eval[E_EPOCH] : run->train[T_EPOCH];
        const double *st = which ? run->eval[E_STEP] : run->train[T_STEP];
        double *out = dt_malloc((n ? n : 1) * 5 * sizeof *out); // (rows, 5)
        size_t nout = 0;
        for (size_t i = 0; i < n; i++) {
            double w = 0, e = 0, s = 0, lo = INFINITY, hi = -INFINITY;
            size_t m = 0;
            for (size_t k = 0; k < R; k++) {
                if (st[i * R + k] < 0)
                    continue;
                double v = y[i * R + k];
                w += wall[i * R + k];
                e += ep[i * R + k];
                s += v;
                lo = fmin(lo, v);
                hi = fmax(hi, v);
                m++;
            }
            if (m == 0)
                continue;
            double vals[5] = {w / (double)m, e / (double)m, s / (double)m, lo, hi};
            memcpy(out + 5 * nout++, vals, sizeof vals);
        }
        qsort(out, nout, 5 * sizeof *out, by_epoch);
        for (size_t i = 0; i < nout; i++) {
            for (int c = 0; c < 5; c++) {
                if (c)
                    fputc(' ', f);
                fmt_g(f, out[5 * i + c]);
            }
            fputc('\n', f);
        }
        free(out);
        if (write_checked(f, path) != 0)
            return -1;
    }
    return 0;
}

/* A gnuplot single-quoted string: '' stands for one quote. */
static void gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static char *file_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        dt_err_set("%s: %s (DTRAIN_PLOT_GP)", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = dt_malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap)
            buf = dt_realloc(buf, cap *= 2);
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        dt_err_set("%s: read error (DTRAIN_PLOT_GP)", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Runs gnuplot ($DTRAIN_GNUPLOT, else the configured one) on script, which
 * writes the figure out; 0 once out exists and is not empty (its name is
 * printed), else -1 with the reason set. */
static int gnuplot_render(const char *script, const char *out)
{
    const char *gnuplot = getenv("DTRAIN_GNUPLOT");
    if (!gnuplot || !*gnuplot)
        gnuplot = POST_GNUPLOT;
    unlink(out);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return dt_err_set("fork failed: %s", strerror(errno));
    if (pid == 0) {
        execlp(gnuplot, gnuplot, script, (char *)NULL);
        fprintf(stderr, "dtrain-post: cannot run %s: %s\n", gnuplot, strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return dt_err_set("waitpid failed: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return dt_err_set("gnuplot not found or not runnable ('%s'); install gnuplot (e.g. "
                          "gnuplot-nox) or set DTRAIN_GNUPLOT to its path",
                          gnuplot);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return dt_err_set("%s failed on %s (its messages are above)", gnuplot, script);
    struct stat st;
    if (stat(out, &st) != 0 || st.st_size == 0)
        return dt_err_set("%s: gnuplot finished but wrote no figure", out);
    printf("%s\n", out);
    return 0;
}

static void dir_remove(const char *dir, int nruns)
{
    char p[PATH_MAX];
    for (int i = 1; i <= nruns; i++) {
        if (path_fmt(p, sizeof p, "%s/run%d.train.dat", dir, i) == 0)
            unlink(p);
        if (path_fmt(p, sizeof p, "%s/run%d.eval.dat", dir, i) == 0)
            unlink(p);
    }
    if (path_fmt(p, sizeof p, "%s/plot.gp", dir) == 0)
        unlink(p);
    rmdir(dir);
}

/* keep_dir: write data and script there and keep them; else a temp dir. */
static int cmd_plot(char **paths, int npaths, const char *out, const char *keep_dir)
{
    char dir[PATH_MAX];
    if (keep_dir) {
        snprintf(dir, sizeof dir, "%s", keep_dir);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return dt_err_set("%s: cannot create: %s", dir, strerror(errno));
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/dtrain-post-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            return dt_err_set("%s: cannot create a temporary directory: %s", dir,
                              strerror(errno));
    }
    int rc = -1;
    char *body = NULL;
    for (int p = 0; p < npaths; p++) {
        post_run run;
        if (run_load(paths[p], &run) != 0)
            goto out;
        int w = data_write(&run, dir, p + 1);
        run_free(&run);
        if (w != 0)
            goto out;
    }
    const char *tmpl = getenv("DTRAIN_PLOT_GP");
    if (tmpl && *tmpl && !(body = file_slurp(tmpl)))
        goto out;

    char script[PATH_MAX];
    if (path_fmt(script, sizeof script, "%s/plot.gp", dir) != 0)
        goto out;
    FILE *f = fopen(script, "w");
    if (!f) {
        dt_err_set("%s: cannot create: %s", script, strerror(errno));
        goto out;
    }
    fputs("# written by dtrain-post plot\ndir = ", f);
    gp_quote(f, dir);
    fprintf(f, "\nnruns = %d\nout = ", npaths);
    gp_quote(f, out);
    fputs("\n", f);
    fputs(body ? body : plot_body, f);
    if (write_checked(f, script) != 0)
        goto out;

    if (gnuplot_render(script, out) != 0)
        goto out;
    rc = 0;
out:
    free(body);
    if (!keep_dir)
        dir_remove(dir, npaths);
    return rc;
}

/* ---- simulator records: time per iteration vs ranks ---------------------- */

/* Splits one CSV line in place at commas outside double quotes; quotes are
 * dropped. Returns the number of fields (at most max). */
static int csv_split(char *line, char **field, int max)
{
    int n = 0, quoted = 0;
    char *w = line;
    field[n++] = w;
    for (char *r = line; *r && *r != '\n' && *r != '\r'; r++) {
        if (*r == '"') {
            quoted = !quoted;
        } else if (*r == ',' && !quoted) {
            *w++ = '\0';
            if (n == max)
                return n;
            field[n++] = w;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return n;
}

typedef struct sim_series {
    char label[160];        /* "mode" or "mode (platform)" */
    int n;
    double ranks[256], t[256];
} sim_series;

/* The series named label ("mode|platform"), created if new; NULL if full. */
static sim_series *series_of(sim_series *s, int *ns, int max, const char *label)
{
    for (int i = 0; i < *ns; i++)
        if (!strcmp(s[i].label, label))
            return &s[i];
    if (*ns == max)
        return NULL;
    memset(&s[*ns], 0, sizeof s[*ns]);
    snprintf(s[*ns].label, sizeof s[*ns].label, "%s", label);
    return &s[(*ns)++];
}

static int by_x(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* sim.csv files of dtrain-sim: one line per mode (and platform, when they
 * differ), time per iteration against the rank count, log-log. */
static int cmd_simplot(char **paths, int npaths, const char *out, const char *keep_dir)
{
    enum { MAXS = 64 };
    sim_series *s = dt_calloc(MAXS, sizeof *s);
    int ns = 0, rc = -1, nplat = 0;
    char plat0[128] = "", dir[PATH_MAX] = "";
    for (int p = 0; p < npaths; p++) {
        FILE *f = fopen(paths[p], "r");
        if (!f) {
            dt_err_set("%s: %s", paths[p], strerror(errno));
            goto out;
        }
        char line[4096], *fld[64];
        int c_mode = -1, c_ranks = -1, c_plat = -1, c_t = -1, row = 0;
        while (fgets(line, sizeof line, f)) {
            int nf = csv_split(line, fld, 64);
            if (row++ == 0) {
                for (int i = 0; i < nf; i++) {
                    c_mode = !strcmp(fld[i], "mode") ? i : c_mode;
                    c_ranks = !strcmp(fld[i], "ranks") ? i : c_ranks;
                    c_plat = !strcmp(fld[i], "platform") ? i : c_plat;
                    c_t = !strcmp(fld[i], "time_per_iter_s") ? i : c_t;
                }
                if (c_mode < 0 || c_ranks < 0 || c_plat < 0 || c_t < 0) {
                    fclose(f);
                    dt_err_set("%s: not a dtrain-sim record (no mode, ranks, platform, "
                               "time_per_iter_s columns)", paths[p]);
                    goto out;
                }
                continue;
            }
            if (nf <= c_t || nf <= c_plat || nf <= c_mode || nf <= c_ranks) {
                fclose(f);
                dt_err_set("%s:%d: %d fields, too few", paths[p], row, nf);
                goto out;
            }
            if (!plat0[0])
                snprintf(plat0, sizeof plat0, "%s", fld[c_plat]);
            if (strcmp(plat0, fld[c_plat]))
                nplat = 2;
            char label[160];
            snprintf(label, sizeof label, "%s|%s", fld[c_mode], fld[c_plat]);
            sim_series *se = series_of(s, &ns, MAXS, label);
            if (!se || se->n == 256) {
                fclose(f);
                dt_err_set("more than %d series or 256 points in one", MAXS);
                goto out;
            }
            se->ranks[se->n] = atof(fld[c_ranks]);
            se->t[se->n++] = atof(fld[c_t]);
        }
        fclose(f);
    }
    if (ns == 0) {
        dt_err_set("no rows in the sim.csv files given");
        goto out;
    }
    if (keep_dir) {
        snprintf(dir, sizeof dir, "%s", keep_dir);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            dt_err_set("%s: cannot create: %s", dir, strerror(errno));
            goto out;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/dtrain-post-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            dt_err_set("%s: cannot create a temporary directory: %s", dir, strerror(errno));
            dir[0] = '\0';
            goto out;
        }
    }
    char path[PATH_MAX];
    for (int i = 0; i < ns; i++) {
        double xy[256][2];
        for (int k = 0; k < s[i].n; k++)
            xy[k][0] = s[i].ranks[k], xy[k][1] = s[i].t[k];
        qsort(xy, (size_t)s[i].n, sizeof xy[0], by_x);
        if (path_fmt(path, sizeof path, "%s/sim%d.dat", dir, i + 1) != 0)
            goto out;
        FILE *f = fopen(path, "w");
        if (!f) {
            dt_err_set("%s: cannot create: %s", path, strerror(errno));
            goto out;
        }
        char *bar = strchr(s[i].label, '|');
        *bar = '\0';
        fprintf(f, "ranks \"%s%s%s%s\"\n", s[i].label, nplat ? " (" : "", nplat ? bar + 1 : "",
                nplat ? ")" : "");
        for (int k = 0; k < s[i].n; k++)
            fprintf(f, "%.0f %.9g\n", xy[k][0], xy[k][1]);
        if (write_checked(f, path) != 0)
            goto out;
    }
    if (path_fmt(path, sizeof path, "%s/plot.gp", dir) != 0)
        goto out;
    FILE *f = fopen(path, "w");
    if (!f) {
        dt_err_set("%s: cannot create: %s", path, strerror(errno));
        goto out;
    }
    fputs("# written by dtrain-post simplot\ndir = ", f);
    gp_quote(f, dir);
    fprintf(f, "\nnseries = %d\nout = ", ns);
    gp_quote(f, out);
    fprintf(f, "\ntitle = ");
    gp_quote(f, nplat ? "dtrain-sim: time per iteration" : plat0);
    fputs("\nif (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
          "    set terminal pngcairo size 1000,700 noenhanced font ',11'\n"
          "} else {\n"
          "    set terminal png size 1000,700 noenhanced truecolor\n"
          "}\n"
          "set output out\n"
          "set key autotitle columnheader outside right\n"
          "set grid\n"
          "set logscale x 2\n"
          "set logscale y\n"
          "set title sprintf('%s: simulated time per iteration', title)\n"
          "set xlabel 'ranks'\n"
          "set ylabel 'time per iteration (s)'\n"
          "plot for [i=1:nseries] sprintf('%s/sim%d.dat', dir, i) using 1:2 with linespoints "
          "pt 7 ps 0.8 lw 1.5\n"
          "set output\n", f);
    if (write_checked(f, path) != 0)
        goto out;
    if (gnuplot_render(path, out) != 0)
        goto out;
    rc = 0;
out:
    if (dir[0] && !keep_dir) {
        for (int i = 1; i <= ns; i++)
            if (path_fmt(path, sizeof path, "%s/sim%d.dat", dir, i) == 0)
                unlink(path);
        if (path_fmt(path, sizeof path, "%s/plot.gp", dir) == 0)
            unlink(path);
        rmdir(dir);
    }
    free(s);
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

/* Run records named by the arguments: a RUN.h5 as it is, a run directory
 * as its run.h5, and a job directory with rank groups (groups.csv) as the
 * run.h5 of each group, in the order of groups.csv. The result is
 * malloc'd strings; NULL with dt_err_set() on error. */
static char **runs_expand(char **args, int nargs, int *nruns)
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
        if (path_fmt(p, sizeof p, "%s/run.h5", a) == 0 && access(p, F_OK) == 0) {
            if (n == cap)
                runs = dt_realloc(runs, (size_t)(cap *= 2) * sizeof *runs);
            runs[n] = dt_malloc(strlen(p) + 1);
            strcpy(runs[n++], p);
            continue;
        }
        FILE *f = path_fmt(p, sizeof p, "%s/groups.csv", a) == 0 ? fopen(p, "r") : NULL;
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
            if (!*line || path_fmt(p, sizeof p, "%s/%s/run.h5", a, line) != 0)
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

static void usage(FILE *f)
{
    fputs("usage: dtrain-post csv RUN.h5 [-o DIR]\n"
          "         write DIR/train.csv and DIR/eval.csv (default DIR: the directory of "
          "RUN.h5)\n"
          "       dtrain-post plot RUN.h5 [RUN2.h5 ...] -o FIG.png [--data DIR]\n"
          "         2x2 figure: test accuracy and training loss vs wall time and epoch,\n"
          "         mean over ranks with the min..max band; --data keeps the data files and\n"
          "         the gnuplot script in DIR (see postproc/plot.gp). Environment:\n"
          "         DTRAIN_GNUPLOT (gnuplot to run), DTRAIN_PLOT_GP (script body to use)\n"
          "       dtrain-post summary RUN.h5 [RUN2.h5 ...]\n"
          "         one line per run: final test accuracy (mean over ranks, averaged model),\n"
          "         wall time, images/s or tokens/s (all ranks), communication share of\n"
          "         logged time\n"
          "       dtrain-post simplot SIM.csv [SIM2.csv ...] -o FIG.png [--data DIR]\n"
          "         dtrain-sim records: time per iteration against ranks, one line per mode\n"
          "         (and platform, when the files hold several), log-log\n"
          "       dtrain-post sample RUN_OR_CHECKPOINT [--prompt TEXT] [--tokens N]\n"
          "                          [--temperature X] [--seed S]\n"
          "         text generated by a trained byte-level gpt model (data.name = text) from\n"
          "         a checkpoint (a run directory or run.h5: its latest); defaults: no prompt,\n"
          "         200 tokens, temperature 0.8, seed 1; temperature 0 takes the argmax\n"
          "A RUN.h5 may also be given as its run directory, or as a job directory with\n"
          "rank groups (holding groups.csv), which stands for every group's run.h5.\n",
          f);
}

/* dtrain-post sample ARG [--prompt TEXT] [--tokens N] [--temperature X] [--seed S] */
static int cmd_sample(int argc, char **argv)
{
    const char *arg = NULL, *prompt = "";
    long ntokens = 200;
    double temp = 0.8;
    unsigned long long seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        int opt = !strcmp(o, "--prompt") || !strcmp(o, "--tokens") ||
                  !strcmp(o, "--temperature") || !strcmp(o, "--seed");
        if (opt && i + 1 >= argc) {
            fprintf(stderr, "dtrain-post: sample: %s needs an argument\n", o);
            return 1;
        }
        char *end = NULL;
        errno = 0;
        if (!strcmp(o, "--prompt")) {
            prompt = argv[++i];
        } else if (!strcmp(o, "--tokens")) {
            ntokens = strtol(argv[++i], &end, 10);
            if (*end || errno || ntokens < 0 || ntokens > 1000000) {
                fprintf(stderr, "dtrain-post: sample: --tokens %s: expected 0..1000000\n", argv[i]);
                return 1;
            }
        } else if (!strcmp(o, "--temperature")) {
            temp = strtod(argv[++i], &end);
            if (*end || errno || !(temp >= 0 && temp <= 100)) {
                fprintf(stderr, "dtrain-post: sample: --temperature %s: expected a number in "
                                "0..100\n", argv[i]);
                return 1;
            }
        } else if (!strcmp(o, "--seed")) {
            seed = strtoull(argv[++i], &end, 10);
            if (*end || errno || argv[i][0] == '-') {
                fprintf(stderr, "dtrain-post: sample: --seed %s: expected an unsigned integer\n",
                        argv[i]);
                return 1;
            }
        } else if (o[0] == '-' && o[1]) {
            fprintf(stderr, "dtrain-post: sample: unknown option %s\n", o);
            return 1;
        } else if (arg) {
            fprintf(stderr, "dtrain-post: sample takes one RUN_OR_CHECKPOINT\n");
            return 1;
        } else {
            arg = o;
        }
    }
    if (!arg) {
        fprintf(stderr, "dtrain-post: sample needs a run directory, run.h5 or checkpoint\n");
        return 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (post_sample(arg, prompt, ntokens, temp, (uint64_t)seed) != 0) {
        fprintf(stderr, "dtrain-post: %s\n", dt_err_msg());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "sample"))
        return cmd_sample(argc - 2, argv + 2);
    const char *out = NULL, *data_dir = NULL;
    char **paths = dt_calloc((size_t)argc, sizeof *paths);
    int npaths = 0, rc;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--data")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dtrain-post: %s needs an argument\n", argv[i]);
                free(paths);
                return 1;
            }
            if (!strcmp(argv[i], "-o"))
                out = argv[++i];
            else
                data_dir = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "dtrain-post: unknown option %s\n", argv[i]);
            usage(stderr);
            free(paths);
            return 1;
        } else {
            paths[npaths++] = argv[i];
        }
    }

    if (!strcmp(cmd, "simplot")) { /* CSV files, not run records */
        if (npaths < 1 || !out) {
            fprintf(stderr, "dtrain-post: simplot needs at least one sim.csv and -o FIG.png\n");
            free(paths);
            return 1;
        }
        rc = cmd_simplot(paths, npaths, out, data_dir);
        free(paths);
        if (rc != 0)
            fprintf(stderr, "dtrain-post: %s\n", dt_err_msg());
        return rc ? 1 : 0;
    }
    /* HDF5's own error stack would bury our one-line message. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int nruns = 0;
    char **runs = runs_expand(paths, npaths, &nruns);
    free(paths);
    if (!runs) {
        fprintf(stderr, "dtrain-post: %s\n", dt_err_msg());
        return 1;
    }
    paths = runs;
    npaths = nruns;
    if (!strcmp(cmd, "csv")) {
        if (npaths != 1 || data_dir) {
            fprintf(stderr, "dtrain-post: csv takes exactly one RUN.h5 and optionally -o DIR\n");
            free(paths);
            return 1;
        }
        rc = cmd_csv(paths[0], out);
    } else if (!strcmp(cmd, "plot")) {
        if (npaths < 1 || !out) {
            fprintf(stderr, "dtrain-post: plot needs at least one RUN.h5 and -o FIG.png\n");
            free(paths);
            return 1;
        }
        rc = cmd_plot(paths, npaths, out, data_dir);
    } else if (!strcmp(cmd, "summary")) {
        if (npaths < 1 || out || data_dir) {
            fprintf(stderr, "dtrain-post: summary takes one or more RUN.h5 and no options\n");
            free(paths);
            return 1;
        }
        rc = cmd_summary(paths, npaths);
    } else {
        fprintf(stderr, "dtrain-post: unknown command '%s'\n", cmd);
        usage(stderr);
        free(paths);
        return 1;
    }
    for (int i = 0; i < npaths; i++)
        free(paths[i]);
    free(paths);
    if (rc != 0) {
        fprintf(stderr, "dtrain-post: %s\n", dt_err_msg());
        return 1;
    }
    return 0;
}
