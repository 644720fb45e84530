/* dtrain-post: the text it writes (paths, numbers, files closed with their
 * errors checked). */
#ifndef DT_POST_OUTPUT_H
#define DT_POST_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

/* snprintf into a path buffer; a path that does not fit is an error, not a
 * silently shortened name: -1 after dt_err_set(). */
int post_path_fmt(char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* %.9g, with one spelling of NaN whatever its sign bit. */
void post_fmt_g(FILE *f, double v);
/* A column's value: an integer column's finite values as integers, else
 * post_fmt_g. */
void post_fmt_value(FILE *f, double v, int is_int);

/* fclose(f) of the file at path, which was written: -1 after dt_err_set()
 * if any write or the close failed. */
int post_close_checked(FILE *f, const char *path);

#endif
