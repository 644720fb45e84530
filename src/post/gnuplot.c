/* dtrain-post: running gnuplot. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/gnuplot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"

#ifdef DT_GNUPLOT
#define POST_GNUPLOT DT_GNUPLOT
#else
#define POST_GNUPLOT "gnuplot"
#endif

void post_gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

int post_gnuplot_render(const char *script, const char *out)
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

int post_workdir(char *dir, size_t len, const char *keep_dir)
{
    if (keep_dir) {
        snprintf(dir, len, "%s", keep_dir);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return dt_err_set("%s: cannot create: %s", dir, strerror(errno));
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, len, "%s/dtrain-post-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dt_err_set("%s: cannot create a temporary directory: %s", dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

FILE *post_gp_script_open(const char *path, const char *cmd, const char *dir,
                          const char *count_name, int count, const char *out)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        dt_err_set("%s: cannot create: %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f, "# written by dtrain-post %s\ndir = ", cmd);
    post_gp_quote(f, dir);
    fprintf(f, "\n%s = %d\nout = ", count_name, count);
    post_gp_quote(f, out);
    return f;
}
