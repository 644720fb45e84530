/* dtrain-post: running gnuplot on a script it wrote (plot, simplot). */
#ifndef DT_POST_GNUPLOT_H
#define DT_POST_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

/* A gnuplot single-quoted string: '' stands for one quote. */
void post_gp_quote(FILE *f, const char *s);

/* The directory of a figure's data files and script: keep_dir (created if
 * need be), or when NULL a new temporary one under $TMPDIR (else /tmp) that
 * the caller removes. -1 after dt_err_set(), dir then empty unless it is
 * keep_dir. */
int post_workdir(char *dir, size_t len, const char *keep_dir);

/* Creates the gnuplot script at path and writes its header: a comment
 * naming the command, then the definitions of dir, `count_name` = count and
 * out (the figure), the last without its newline. NULL after dt_err_set(). */
FILE *post_gp_script_open(const char *path, const char *cmd, const char *dir,
                          const char *count_name, int count, const char *out);

/* Runs gnuplot ($DTRAIN_GNUPLOT, else the configured one) on script, which
 * writes the figure out; 0 once out exists and is not empty (its name is
 * printed), else -1 with the reason set. */
int post_gnuplot_render(const char *script, const char *out);

#endif
