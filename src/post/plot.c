/* dtrain-post plot: the 2x2 figure of one or more run records. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/post.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "post/gnuplot.h"
#include "post/output.h"
#include "post/record.h"

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
        if (post_path_fmt(path, sizeof path, "%s/run%d.%s.dat", dir, idx,
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
                post_fmt_g(f, out[5 * i + c]);
            }
            fputc('\n', f);
        }
        free(out);
        if (post_close_checked(f, path) != 0)
            return -1;
    }
    return 0;
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

static void dir_remove(const char *dir, int nruns)
{
    char p[PATH_MAX];
    for (int i = 1; i <= nruns; i++) {
        if (post_path_fmt(p, sizeof p, "%s/run%d.train.dat", dir, i) == 0)
            unlink(p);
        if (post_path_fmt(p, sizeof p, "%s/run%d.eval.dat", dir, i) == 0)
            unlink(p);
    }
    if (post_path_fmt(p, sizeof p, "%s/plot.gp", dir) == 0)
        unlink(p);
    rmdir(dir);
}

/* keep_dir: write data and script there and keep them; else a temp dir. */
int post_plot(char **paths, int npaths, const char *out, const char *keep_dir)
{
    char dir[PATH_MAX];
    if (post_workdir(dir, sizeof dir, keep_dir) != 0)
        return -1;
    int rc = -1;
    char *body = NULL;
    for (int p = 0; p < npaths; p++) {
        post_run run;
        if (post_run_load(paths[p], &run) != 0)
            goto out;
        int w = data_write(&run, dir, p + 1);
        post_run_free(&run);
        if (w != 0)
            goto out;
    }
    const char *tmpl = getenv("DTRAIN_PLOT_GP");
    if (tmpl && *tmpl && !(body = file_slurp(tmpl)))
        goto out;

    char script[PATH_MAX];
    if (post_path_fmt(script, sizeof script, "%s/plot.gp", dir) != 0)
        goto out;
    FILE *f = post_gp_script_open(script, "plot", dir, "nruns", npaths, out);
    if (!f)
        goto out;
    fputs("\n", f);
    fputs(body ? body : plot_body, f);
    if (post_close_checked(f, script) != 0)
        goto out;

    if (post_gnuplot_render(script, out) != 0)
        goto out;
    rc = 0;
out:
    free(body);
    if (!keep_dir)
        dir_remove(dir, npaths);
    return rc;
}
