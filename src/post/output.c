/* dtrain-post: the text it writes. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "post/output.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

int post_path_fmt(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= len)
        return dt_err_set("path '%s...' is longer than %zu bytes", out, len - 1);
    return 0;
}

void post_fmt_g(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else
        fprintf(f, "%.9g", v);
}

void post_fmt_value(FILE *f, double v, int is_int)
{
    if (is_int && isfinite(v))
        fprintf(f, "%lld", (long long)v);
    else
        post_fmt_g(f, v);
}

int post_close_checked(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return dt_err_set("%s: write failed: %s", path, strerror(errno));
    return 0;
}
