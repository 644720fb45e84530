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
#include "post/record_read.h"

/* What the figure's panels are called: an image classifier's record, or a
 * language model's (run.h5 attribute sample_unit = tokens), whose accuracy
 * is the next-token accuracy on the validation split and whose losses are
 * cross-entropies in nats; its panels of the loss also draw the validation
 * loss (columns 6..8 of its eval.dat). */
typedef struct plot_labels {
    const char *acc_title, *acc_axis;   /* the evaluation panels */
    const char *loss_title, *loss_axis; /* the training panels */
    int val_loss;
} plot_labels;

static const plot_labels labels_image = {"test accuracy", "test accuracy", "training loss",
                                         "training loss", 0};
static const plot_labels labels_lm = {"next-token accuracy", "next-token accuracy (validation)",
                                      "training and validation loss",
                                      "training and validation loss (nats)", 1};

/* The plotting commands; tools/plot.gp carries the same text (image
 * labels) with its documentation, for users who want to restyle the figure
 * (point DTRAIN_PLOT_GP at an edited copy). The caller defines dir, nruns
 * and out. */
static void plot_body_write(FILE *f, const plot_labels *lb)
{
    fprintf(f,
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
            "trainf(i) = sprintf('%%s/run%%d.train.dat', dir, i)\n"
            "evalf(i) = sprintf('%%s/run%%d.eval.dat', dir, i)\n"
            "set multiplot layout 2,2\n");
    static const char *const x_col[2] = {"1", "2"}, *const x_name[2] = {"wall time", "epoch"},
                             *const x_axis[2] = {"wall time (s)", "epoch"};
    for (int row = 0; row < 2; row++) { /* the evaluations, then the training loss */
        const char *title = row ? lb->loss_title : lb->acc_title;
        const char *data = row ? "trainf" : "evalf";
        const char *style = row ? "lines lc i lw 1.5" : "linespoints lc i pt 7 ps 0.6";
        if (row)
            fputs("set key top right\n", f);
        for (int x = 0; x < 2; x++) {
            fprintf(f, "set title '%s vs %s'\nset xlabel '%s'\n", title, x_name[x], x_axis[x]);
            if (x == 0)
                fprintf(f, "set ylabel '%s'\n", row ? lb->loss_axis : lb->acc_axis);
            fprintf(f,
                    "plot for [i=1:nruns] %s(i) using %s:4:5 with filledcurves lc i notitle, \\\n"
                    "     for [i=1:nruns] %s(i) using %s:3 with %s title columnheader(1)",
                    data, x_col[x], data, x_col[x], style);
            if (row && lb->val_loss)
                fprintf(f, ", \\\n     for [i=1:nruns] evalf(i) using %s:6:7:8 with yerrorbars "
                           "lc i pt 6 ps 0.9 title columnheader(6)",
                        x_col[x]);
            fputc('\n', f);
        }
    }
    fputs("unset multiplot\nset output\n", f);
}

/* qsort order of data rows (epoch second) by epoch */
static int by_epoch(const void *a, const void *b)
{
    double x = ((const double *)a)[1], y = ((const double *)b)[1];
    return (x > y) - (x < y);
}

/* Writes run<idx>.{train,eval}.dat: a header whose first word is the curve's
 * title, then x (mean wall), x (epoch), mean, min, max over ranks, in the
 * order of the epoch (an asynchronous rank's k-th row need not be at the
 * same moment as another's). The y of train.dat is the training loss, of
 * eval.dat the test accuracy; a language model's eval.dat goes on with the
 * validation loss's mean, min and max (its header word: the curve title of
 * the validation loss). */
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
        /* a language model's evaluations: y then y2, the validation loss */
        const int two = which && run->tokens, nc = two ? 8 : 5;
        if (two)
            fprintf(f, "\"%s\" epoch mean min max \"%s validation\" min max\n", title, title);
        else
            fprintf(f, "\"%s\" epoch mean min max\n", title);
        size_t n = which ? run->neval : run->ntrain;
        const double *wall = which ? run->eval[E_WALL] : run->train[T_WALL];
        const double *y = which ? run->eval[E_ACC] : run->train[T_LOSS];
        const double *y2 = run->eval[E_LOSS];
        /* the record's epoch is fractional (step / steps per epoch); the
         * mean over the ranks that have the row (asynchronous runs pad a
         * rank's shorter series with step -1) */
        const double *ep = which ? run->eval[E_EPOCH] : run->train[T_EPOCH];
        const double *st = which ? run->eval[E_STEP] : run->train[T_STEP];
        double *out = dt_malloc((n ? n : 1) * (size_t)nc * sizeof *out); // (rows, nc)
        size_t nout = 0;
        for (size_t i = 0; i < n; i++) {
            double w = 0, e = 0, s = 0, lo = INFINITY, hi = -INFINITY;
            double s2 = 0, lo2 = INFINITY, hi2 = -INFINITY;
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
                if (two) {
                    double v2 = y2[i * R + k];
                    s2 += v2;
                    lo2 = fmin(lo2, v2);
                    hi2 = fmax(hi2, v2);
                }
                m++;
            }
            if (m == 0)
                continue;
            double vals[8] = {w / (double)m, e / (double)m, s / (double)m, lo, hi,
                              s2 / (double)m, lo2, hi2};
            memcpy(out + (size_t)nc * nout++, vals, (size_t)nc * sizeof *vals);
        }
        qsort(out, nout, (size_t)nc * sizeof *out, by_epoch);
        for (size_t i = 0; i < nout; i++) {
            for (int c = 0; c < nc; c++) {
                if (c)
                    fputc(' ', f);
                post_fmt_g(f, out[(size_t)nc * i + (size_t)c]);
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
    int all_tokens = 1; /* the language-model labels when every run is one */
    for (int p = 0; p < npaths; p++) {
        post_run run;
        if (post_run_load(paths[p], &run) != 0)
            goto out;
        all_tokens = all_tokens && run.tokens;
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
    if (body)
        fputs(body, f);
    else
        plot_body_write(f, all_tokens ? &labels_lm : &labels_image);
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
