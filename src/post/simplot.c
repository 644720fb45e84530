/* dtrain-post simplot: dtrain-sim records, time per iteration against
 * ranks. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/post.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "post/gnuplot.h"
#include "post/output.h"

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
enum { SIM_SERIES_MAX = 64 };

/* One sim.csv file's rows into the series s (*ns of them), one per mode and
 * platform; plat0 (128 bytes) the first platform seen, *nplat 2 once a
 * second one appears. 0, or -1 after dt_err_set(). */
static int sim_csv_read(const char *path, sim_series *s, int *ns, char *plat0, int *nplat)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return dt_err_set("%s: %s", path, strerror(errno));
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
                return dt_err_set("%s: not a dtrain-sim record (no mode, ranks, platform, "
                                  "time_per_iter_s columns)", path);
            }
            continue;
        }
        if (nf <= c_t || nf <= c_plat || nf <= c_mode || nf <= c_ranks) {
            fclose(f);
            return dt_err_set("%s:%d: %d fields, too few", path, row, nf);
        }
        if (!plat0[0])
            snprintf(plat0, 128, "%s", fld[c_plat]);
        if (strcmp(plat0, fld[c_plat]))
            *nplat = 2;
        char label[160];
        snprintf(label, sizeof label, "%s|%s", fld[c_mode], fld[c_plat]);
        sim_series *se = series_of(s, ns, SIM_SERIES_MAX, label);
        if (!se || se->n == 256) {
            fclose(f);
            return dt_err_set("more than %d series or 256 points in one", SIM_SERIES_MAX);
        }
        se->ranks[se->n] = atof(fld[c_ranks]);
        se->t[se->n++] = atof(fld[c_t]);
    }
    fclose(f);
    return 0;
}

/* dir/simK.dat: series K's (ranks, time per iteration) in rank order, its
 * title the mode (and the platform when there are several). */
static int sim_series_write(const char *dir, sim_series *s, int ns, int nplat)
{
    char path[PATH_MAX];
    for (int i = 0; i < ns; i++) {
        double xy[256][2];
        for (int k = 0; k < s[i].n; k++)
            xy[k][0] = s[i].ranks[k], xy[k][1] = s[i].t[k];
        qsort(xy, (size_t)s[i].n, sizeof xy[0], by_x);
        if (post_path_fmt(path, sizeof path, "%s/sim%d.dat", dir, i + 1) != 0)
            return -1;
        FILE *f = fopen(path, "w");
        if (!f)
            return dt_err_set("%s: cannot create: %s", path, strerror(errno));
        char *bar = strchr(s[i].label, '|');
        *bar = '\0';
        fprintf(f, "ranks \"%s%s%s%s\"\n", s[i].label, nplat ? " (" : "", nplat ? bar + 1 : "",
                nplat ? ")" : "");
        for (int k = 0; k < s[i].n; k++)
            fprintf(f, "%.0f %.9g\n", xy[k][0], xy[k][1]);
        if (post_close_checked(f, path) != 0)
            return -1;
    }
    return 0;
}

/* dir/plot.gp: time per iteration against ranks, log-log, one line per
 * series; rendered into out. */
static int sim_plot_render(const char *dir, int ns, int nplat, const char *plat0, const char *out)
{
    char path[PATH_MAX];
    if (post_path_fmt(path, sizeof path, "%s/plot.gp", dir) != 0)
        return -1;
    FILE *f = post_gp_script_open(path, "simplot", dir, "nseries", ns, out);
    if (!f)
        return -1;
    fprintf(f, "\ntitle = ");
    post_gp_quote(f, nplat ? "dtrain-sim: time per iteration" : plat0);
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
          // gnuplot's colours repeat after eight: the next eight series dashed
          "plot for [i=1:nseries] sprintf('%s/sim%d.dat', dir, i) using 1:2 with linespoints "
          "lc i dt 1 + (i - 1) / 8 pt 7 ps 0.8 lw 1.5\n"
          "set output\n", f);
    if (post_close_checked(f, path) != 0)
        return -1;
    return post_gnuplot_render(path, out);
}

int post_simplot(char **paths, int npaths, const char *out, const char *keep_dir)
{
    sim_series *s = dt_calloc(SIM_SERIES_MAX, sizeof *s);
    int ns = 0, rc = -1, nplat = 0;
    char plat0[128] = "", dir[PATH_MAX] = "", path[PATH_MAX];
    for (int p = 0; p < npaths; p++)
        if (sim_csv_read(paths[p], s, &ns, plat0, &nplat) != 0)
            goto out;
    if (ns == 0) {
        dt_err_set("no rows in the sim.csv files given");
        goto out;
    }
    if (post_workdir(dir, sizeof dir, keep_dir) != 0 ||
        sim_series_write(dir, s, ns, nplat) != 0 ||
        sim_plot_render(dir, ns, nplat, plat0, out) != 0)
        goto out;
    rc = 0;
out:
    if (dir[0] && !keep_dir) {
        for (int i = 1; i <= ns; i++)
            if (post_path_fmt(path, sizeof path, "%s/sim%d.dat", dir, i) == 0)
                unlink(path);
        if (post_path_fmt(path, sizeof path, "%s/plot.gp", dir) == 0)
            unlink(path);
        rmdir(dir);
    }
    free(s);
    return rc;
}
