/* One deck value: parse it as its key's type, check it against the key's
 * bounds or choices, and format it back as the effective deck writes it. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "io/deck_internal.h"

void deck_sb_printf(strbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            DT_FATAL("vsnprintf failed while building the effective deck");
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->s = dt_realloc(b->s, b->cap);
    }
}

static void *field_at(dt_config *cfg, const deck_key *k)
{
    return (char *)cfg + k->offset;
}

static const void *field_at_const(const dt_config *cfg, const deck_key *k)
{
    return (const char *)cfg + k->offset;
}

/* Longest value of key k that still fits on one "name = value" line of the
 * effective deck inside inih's line buffer (value, newline and NUL). */
static size_t value_len_max(const deck_key *k)
{
    size_t line = (size_t)INI_MAX_LINE - 2 - strlen(k->name) - 3;
    return line < k->size - 1 ? line : k->size - 1;
}

/* Optimal-string-alignment distance (adjacent swaps cost 1), ignoring case;
 * strings longer than 63 characters are never close to a key. */
int deck_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return INT_MAX;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

/* A value or argument as messages show it: control characters as '?', cut
 * after max characters, '' when empty. */
void deck_text_echo(char *out, size_t cap, const char *s, size_t max)
{
    size_t i = 0, o = 0;
    if (!*s) {
        snprintf(out, cap, "''");
        return;
    }
    for (; s[i] && i < max && o + 4 < cap; i++)
        out[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i] && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* What a good value of k looks like: "a number in [0, 1)". */
void deck_expect_describe(const deck_key *k, char *out, size_t cap)
{
    const char *what = k->type == KT_INT ? "an integer" : "a number";
    switch (k->type) {
    case KT_STRING:
        snprintf(out, cap, "%s", k->expect ? k->expect : "text");
        return;
    case KT_UINT64:
        snprintf(out, cap, "an integer in [0, %" PRIu64 "]", UINT64_MAX);
        return;
    case KT_BOOL:
        snprintf(out, cap, "true or false (also yes/no, on/off, 1/0)");
        return;
    case KT_ENUM: {
        strbuf b = {0};
        deck_sb_printf(&b, "one of ");
        const char *choices = deck_key_choices(k);
        for (const char *c = choices; *c;) {
            size_t n = strcspn(c, "|");
            deck_sb_printf(&b, "%s%.*s", c == choices ? "" : ", ", (int)n, c);
            c += n + (c[n] == '|');
        }
        snprintf(out, cap, "%s", b.s);
        free(b.s);
        return;
    }
    case KT_INT:
    case KT_DOUBLE:
        break;
    }
    unsigned bd = k->bounds;
    char lo[32], hi[32];
    /* %.17g would print 0.1 as 0.10000000000000001 */
    snprintf(lo, sizeof lo, k->type == KT_INT ? "%.0f" : "%g", k->lo);
    snprintf(hi, sizeof hi, k->type == KT_INT ? "%.0f" : "%g", k->hi);
    if ((bd & (B_LO | B_LO_OPEN)) && (bd & (B_HI | B_HI_OPEN)))
        snprintf(out, cap, "%s in %c%s, %s%c", what, (bd & B_LO) ? '[' : '(', lo, hi,
                 (bd & B_HI) ? ']' : ')');
    else if (bd & (B_LO | B_LO_OPEN))
        snprintf(out, cap, "%s %s %s", what, (bd & B_LO) ? ">=" : ">", lo);
    else if (bd & (B_HI | B_HI_OPEN))
        snprintf(out, cap, "%s %s %s", what, (bd & B_HI) ? "<=" : "<", hi);
    else
        snprintf(out, cap, "%s", what);
}

/* Full-string strtoll: "" , " 1", "1.5", "1x" are refused. */
bool deck_int_parse(const char *s, int64_t *out, bool *overflow)
{
    char *end;
    *overflow = false;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return false;
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    *out = (int64_t)v;
    return true;
}

static bool uint_parse(const char *s, uint64_t *out, bool *overflow)
{
    char *end;
    *overflow = false;
    /* strtoull would wrap "-1" to 2^64 - 1 */
    if (!*s || isspace((unsigned char)*s) || *s == '-')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end)
        return false;
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

/* Full-string strtod, finite only; underflow to a denormal or zero counts as
 * out of range too, since it silently changes the number. A denormal spelt
 * exactly (hex "0x1p-1074": strtod leaves errno alone) is refused as well: the
 * effective deck writes it in decimal, which strtod would refuse on reading
 * it back. */
static bool double_parse(const char *s, double *out, bool *overflow)
{
    char *end;
    *overflow = false;
    if (!*s || isspace((unsigned char)*s))
        return false;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end)
        return false;
    if (errno == ERANGE) {
        *overflow = true;
        return false;
    }
    if (!isfinite(v))
        return false;
    if (v != 0 && fabs(v) < DBL_MIN) {
        *overflow = true;
        return false;
    }
    *out = v;
    return true;
}

static bool bounds_ok(const deck_key *k, double v)
{
    if ((k->bounds & B_LO) && !(v >= k->lo))
        return false;
    if ((k->bounds & B_LO_OPEN) && !(v > k->lo))
        return false;
    if ((k->bounds & B_HI) && !(v <= k->hi))
        return false;
    if ((k->bounds & B_HI_OPEN) && !(v < k->hi))
        return false;
    return true;
}

static bool bool_parse(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* One item of a comma-separated list: check the trimmed token `tok` (item
 * number `item`, from 1) against `state` (bounds, the previous item) and write
 * its canonical spelling into buf. 0, or -1 with `why` filled. */
typedef int (*item_norm)(const char *tok, int item, void *state, char *buf, size_t len,
                         char *why, size_t whycap);

/* Comma-separated lists, written back as "a,b,c" without spaces. */
static int list_norm(const char *in, bool allow_empty, int max_items, item_norm norm,
                     void *state, char *out, size_t cap, char *why, size_t whycap)
{
    size_t used = 0;
    int item = 0;
    const char *p = in;
    out[0] = '\0';
    while (isspace((unsigned char)*p))
        p++;
    if (!*p) {
        if (allow_empty)
            return 0;
        snprintf(why, whycap, "the list is empty");
        return -1;
    }
    for (;;) {
        if (++item > max_items) {
            snprintf(why, whycap, "more than %d items", max_items);
            return -1;
        }
        size_t n = strcspn(p, ",");
        char tok[64], buf[64];
        const char *a = p, *z = p + n;
        while (a < z && isspace((unsigned char)*a))
            a++;
        while (z > a && isspace((unsigned char)z[-1]))
            z--;
        if (z == a) {
            snprintf(why, whycap, "item %d is empty", item);
            return -1;
        }
        if ((size_t)(z - a) >= sizeof tok) {
            snprintf(why, whycap, "item %d is too long", item);
            return -1;
        }
        memcpy(tok, a, (size_t)(z - a));
        tok[z - a] = '\0';
        if (norm(tok, item, state, buf, sizeof buf, why, whycap) != 0)
            return -1;
        int w = snprintf(out + used, cap - used, "%s%s", item > 1 ? "," : "", buf);
        if (w < 0 || (size_t)w >= cap - used) {
            snprintf(why, whycap, "the list is longer than %zu characters", cap - 1);
            out[0] = '\0';
            return -1;
        }
        used += (size_t)w;
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

/* Positive layer widths (model.hidden): integers in [1, INT_MAX]. */
static int width_norm(const char *tok, int item, void *state, char *buf, size_t len, char *why,
                      size_t whycap)
{
    (void)state;
    int64_t v = 0;
    bool overflow = false;
    if (!deck_int_parse(tok, &v, &overflow)) {
        snprintf(why, whycap, "item %d ('%s') is not an integer", item, tok);
        return -1;
    }
    if (v < 1 || v > INT_MAX) {
        snprintf(why, whycap, "item %d (%s) is not in [1, %d]", item, tok, INT_MAX);
        return -1;
    }
    snprintf(buf, len, "%" PRId64, v);
    return 0;
}

int deck_norm_widths(const char *in, char *out, size_t cap, char *why, size_t whycap)
{
    return list_norm(in, false, INT_MAX, width_norm, NULL, out, cap, why, whycap);
}

/* Decay epochs: non-negative numbers (fractions allowed: the schedule runs on
 * the fractional epoch of every step), strictly increasing. */
static int epoch_norm(const char *tok, int item, void *state, char *buf, size_t len, char *why,
                      size_t whycap)
{
    double *prev = state, v;
    bool overflow;
    if (!double_parse(tok, &v, &overflow) || v < 0) {
        snprintf(why, whycap, "item %d ('%s') is not a number >= 0", item, tok);
        return -1;
    }
    if (item > 1 && v <= *prev) {
        snprintf(why, whycap, "item %d (%s) is not larger than the one before (%.17g)", item, tok,
                 *prev);
        return -1;
    }
    *prev = v;
    snprintf(buf, len, "%.17g", v);
    return 0;
}

int deck_norm_epochs(const char *in, char *out, size_t cap, char *why, size_t whycap)
{
    /* the schedule (optim/sgd.h) holds at most 32 decay epochs */
    double prev = 0;
    return list_norm(in, true, 32, epoch_norm, &prev, out, cap, why, whycap);
}

/* KT_ENUM: one of the key's choices, any case; the stored spelling is the
 * choice's. On a miss, why names the choices and the nearest one. */
static int enum_set(const deck_key *k, const char *value, void *f, const char *expect, char *why,
                    size_t whycap)
{
    size_t vlen = strlen(value);
    int best_d = 3;
    const char *best = NULL;
    size_t best_n = 0;
    for (const char *c = deck_key_choices(k); *c;) {
        size_t n = strcspn(c, "|");
        if (n == vlen && strncasecmp(c, value, n) == 0) {
            memset(f, 0, k->size);
            memcpy(f, c, n);
            return 0;
        }
        char choice[64];
        snprintf(choice, sizeof choice, "%.*s", (int)n, c);
        int d = deck_edit_distance(value, choice);
        if (d < best_d) {
            best_d = d;
            best = c;
            best_n = n;
        }
        c += n + (c[n] == '|');
    }
    int w = snprintf(why, whycap, "expected %s", expect);
    if (k->hint && w >= 0 && (size_t)w < whycap)
        w += snprintf(why + w, whycap - (size_t)w, " (%s)", k->hint);
    if (best && w >= 0 && (size_t)w < whycap)
        snprintf(why + w, whycap - (size_t)w, "; did you mean '%.*s'?", (int)best_n, best);
    return -1;
}

/* KT_STRING: no control character and no ' ;' (inih would cut the value
 * there when the effective deck is re-read), one deck line at most, then
 * the key's own check and canonical form (norm). */
static int string_set(const deck_key *k, const char *value, void *f, const char *expect,
                      char *why, size_t whycap)
{
    size_t len = strlen(value), max = value_len_max(k);
    for (const char *p = value; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            snprintf(why, whycap, "control character 0x%02x at position %zu; expected %s",
                     (unsigned char)*p, (size_t)(p - value) + 1, expect);
            return -1;
        }
        /* inih would cut the value there when the effective deck is re-read */
        if (*p == ';' && p > value && isspace((unsigned char)p[-1])) {
            snprintf(why, whycap, "' ;' would start a comment in the deck; expected %s", expect);
            return -1;
        }
    }
    if (len > max) {
        snprintf(why, whycap, "too long (%zu characters; at most %zu fit on one deck line)", len,
                 max);
        return -1;
    }
    if (k->nonempty && len == 0) {
        snprintf(why, whycap, "expected %s", expect);
        return -1;
    }
    char canon[DT_PATH_MAX];
    if (k->norm) {
        char reason[WHY_MAX / 2];
        if (k->norm(value, canon, k->size < sizeof canon ? k->size : sizeof canon, reason,
                    sizeof reason) < 0) {
            snprintf(why, whycap, "expected %s; %s", expect, reason);
            return -1;
        }
    } else {
        snprintf(canon, sizeof canon, "%s", value);
    }
    /* zero the tail so two parses of one deck compare equal byte for byte */
    memset(f, 0, k->size);
    memcpy(f, canon, strlen(canon));
    return 0;
}

/* Parse and check value for key k and store it in cfg. On failure why says
 * what was expected (and what is wrong, where that is more than the type). */
int deck_value_set(const deck_key *k, const char *value, dt_config *cfg, char *why,
                     size_t whycap)
{
    char expect[256];
    bool overflow = false;
    void *f = field_at(cfg, k);
    deck_expect_describe(k, expect, sizeof expect);

    switch (k->type) {
    case KT_INT: {
        int64_t v;
        if (!deck_int_parse(value, &v, &overflow) || !bounds_ok(k, (double)v)) {
            snprintf(why, whycap, "%sexpected %s", overflow ? "out of range; " : "", expect);
            return -1;
        }
        *(int64_t *)f = v;
        return 0;
    }
    case KT_UINT64: {
        uint64_t v;
        if (!uint_parse(value, &v, &overflow)) {
            snprintf(why, whycap, "%sexpected %s", overflow ? "out of range; " : "", expect);
            return -1;
        }
        *(uint64_t *)f = v;
        return 0;
    }
    case KT_DOUBLE: {
        double v;
        if (!double_parse(value, &v, &overflow) || !bounds_ok(k, v)) {
            snprintf(why, whycap, "%sexpected %s", overflow ? "out of range; " : "", expect);
            return -1;
        }
        *(double *)f = v;
        return 0;
    }
    case KT_BOOL: {
        bool v;
        if (!bool_parse(value, &v)) {
            snprintf(why, whycap, "expected %s", expect);
            return -1;
        }
        *(bool *)f = v;
        return 0;
    }
    case KT_ENUM:
        return enum_set(k, value, f, expect, why, whycap);
    case KT_STRING:
        return string_set(k, value, f, expect, why, whycap);
    }
    return -1;
}

/* The value as the effective deck writes it; doubles in the shortest form
 * that reads back to the same bits. */
void deck_value_format(const deck_key *k, const dt_config *cfg, char *out, size_t cap)
{
    const void *f = field_at_const(cfg, k);
    switch (k->type) {
    case KT_STRING:
    case KT_ENUM:
        snprintf(out, cap, "%.*s", (int)k->size, (const char *)f);
        return;
    case KT_INT:
        snprintf(out, cap, "%" PRId64, *(const int64_t *)f);
        return;
    case KT_UINT64:
        snprintf(out, cap, "%" PRIu64, *(const uint64_t *)f);
        return;
    case KT_BOOL:
        snprintf(out, cap, "%s", *(const bool *)f ? "true" : "false");
        return;
    case KT_DOUBLE: {
        double v = *(const double *)f;
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(out, cap, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                return;
        }
        return;
    }
    }
}
