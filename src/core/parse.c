/* Range-checked integers from files; see parse.h. */
#include "core/parse.h"

#include <stdio.h>

#include "core/error.h"

/* Digits quoted in a message; a longer number is cut with "...". */
#define PARSE_QUOTE_MAX 40

static int out_of_range(const char *file, int64_t line, const char *what, const char *text,
                        int64_t lo, int64_t hi)
{
    if (line >= 1)
        return dt_err_set("%s:%lld: %s %s out of range, expected %lld..%lld", file,
                          (long long)line, what, text, (long long)lo, (long long)hi);
    return dt_err_set("%s: %s %s out of range, expected %lld..%lld", file, what, text,
                      (long long)lo, (long long)hi);
}

int parse_int64(const char **s, int64_t lo, int64_t hi, const char *file, int64_t line,
                const char *what, int64_t *v)
{
    const char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *start = p;
    int neg = 0;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (*p < '0' || *p > '9')
        return 1;
    /* Magnitude in uint64_t; `big` once it passes 2^63, the largest magnitude
     * an int64_t holds (as INT64_MIN), so no arithmetic ever overflows. */
    uint64_t mag = 0;
    int big = 0;
    const uint64_t limit = (uint64_t)INT64_MAX + 1;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (!big && mag > (limit - d) / 10)
            big = 1;
        else if (!big)
            mag = mag * 10 + d;
    }
    int fits = !big && (neg ? mag <= limit : mag <= (uint64_t)INT64_MAX);
    int64_t x = 0;
    if (fits)
        x = neg ? (mag == limit ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    if (!fits || x < lo || x > hi) {
        char text[PARSE_QUOTE_MAX + 4];
        int len = (int)(p - start);
        if (len > PARSE_QUOTE_MAX)
            snprintf(text, sizeof text, "%.*s...", PARSE_QUOTE_MAX, start);
        else
            snprintf(text, sizeof text, "%.*s", len, start);
        return out_of_range(file, line, what, text, lo, hi);
    }
    *v = x;
    *s = p;
    return 0;
}

int check_int64(int64_t v, int64_t lo, int64_t hi, const char *where, const char *what)
{
    if (v >= lo && v <= hi)
        return 0;
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)v);
    return out_of_range(where, 0, what, text, lo, hi);
}
