/* Reading a deck: the bytes go line by line through our reader into libinih,
 * whose handler checks each key against the schema; command-line overrides
 * follow. Serial parsing (deck_parse*) and the collective load (deck_load).
 *
 * The reader counts lines (inih calls it once per line, so the line of the
 * current handler call is the number of lines handed out so far), strips
 * leading whitespace (so an indented line is never taken as an inih
 * continuation of the previous value) and refuses lines longer than inih's
 * buffer instead of letting inih split them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/deck_internal.h"


void deck_ctx_fail(parse_ctx *c, int line, const char *fmt, ...)
{
    if (c->err_line)
        return;
    c->err_line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

/* inih's fgets-like reader: exactly one deck line per call. */
char *deck_reader(char *buf, int num, void *stream)
{
    parse_ctx *c = stream;
    if (c->pos >= c->len || num < 3)
        return NULL;
    const char *start = c->text + c->pos;
    const char *eol = memchr(start, '\n', c->len - c->pos);
    size_t n = eol ? (size_t)(eol - start) : c->len - c->pos;
    c->pos += n + (eol != NULL);
    c->line++;

    // inih takes a line that starts with white space (isspace: \r, \v and \f
    // too) for the continuation of the previous value; here it starts a line
    while (n > 0 && isspace((unsigned char)*start)) {
        start++;
        n--;
    }
    if (memchr(start, '\0', n)) {
        deck_ctx_fail(c, c->line, "%s:%d: NUL byte in the line; a deck is a text file", c->name,
                 c->line);
        strcpy(buf, "\n");
        return buf;
    }
    if (n + 2 > (size_t)num) {
        /* name the key, as every other message does */
        size_t kn = 0; /* within the line: the text need not end in a NUL */
        while (kn < n && start[kn] != '=' && start[kn] != ':')
            kn++;
        while (kn > 0 && kn < n && isspace((unsigned char)start[kn - 1]))
            kn--;
        if (*start != ';' && *start != '#' && *start != '[' && kn < n)
            deck_ctx_fail(c, c->line, "%s:%d: %s.%.*s: line is %zu characters long; at most %d fit",
                     c->name, c->line, c->section, (int)(kn > 60 ? 60 : kn), start, n, num - 2);
        else if (*start != ';' && *start != '#')
            deck_ctx_fail(c, c->line, "%s:%d: line is %zu characters long; at most %d fit", c->name,
                     c->line, n, num - 2);
        strcpy(buf, ";\n");
        return buf;
    }
    memcpy(buf, start, n);
    buf[n] = '\n';
    buf[n + 1] = '\0';
    // the pre-scan reads exactly the bytes inih gets (a refused line above is
    // an empty line or a comment to both)
    deck_groups_scan_line(c, buf, n);
    return buf;
}

static int deck_handler(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    int line = c->line;
    if (c->err_line)
        return 1; /* only the first error is reported */
    if (strncmp(section, "group.", 6) == 0) {
        group_src *g = deck_group_find(c, section + 6, strlen(section + 6));
        char why[WHY_MAX + 1024];
        if (!g) /* the reader registered every valid header */
            DT_FATAL("%s:%d: [%s] was not registered", c->name, line, section);
        if (deck_group_key_record(g, name, value, line, 0, why, sizeof why) < 0) {
            deck_ctx_fail(c, line, "%s:%d: %s", c->name, line, why);
            return 0;
        }
        return 1;
    }
    int k = deck_key_find(section, name);
    if (k < 0) {
        char what[1024];
        deck_key_unknown_describe(section, name, what, sizeof what);
        deck_ctx_fail(c, line, "%s:%d: %s", c->name, line, what);
        return 0;
    }
    if (c->set_line[k]) {
        deck_ctx_fail(c, line, "%s:%d: %s.%s: duplicate key (already set on line %d)", c->name, line,
                 section, name, c->set_line[k]);
        return 0;
    }
    c->set_line[k] = line;
    char why[WHY_MAX], shown[256];
    if (deck_value_set(&deck_keys[k], value, &c->cfg, why, sizeof why) < 0) {
        deck_text_echo(shown, sizeof shown, value, 200);
        deck_ctx_fail(c, line, "%s:%d: %s.%s = %s: %s", c->name, line, section, name, shown, why);
        return 0;
    }
    return 1;
}

/* Line `line` of the deck (1-based), for syntax-error messages. */
static void line_text(const char *text, size_t len, int line, char *out, size_t cap)
{
    const char *p = text, *end = text + len;
    for (int i = 1; i < line && p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    size_t n = 0;
    while (p + n < end && p[n] != '\r' && p[n] != '\n')
        n++;
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    snprintf(out, cap, "%.*s%s", (int)(n > 60 ? 60 : n), p, n > 60 ? "..." : "");
}

static void str_trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (isspace((unsigned char)s[a]))
        a++;
    memmove(s, s + a, n - a + 1);
}

/* "section.key=value" arguments, applied after the deck. */
static int overrides_apply(parse_ctx *c, int noverrides, char *const *overrides)
{
    for (int i = 0; i < noverrides; i++) {
        const char *arg = overrides[i] ? overrides[i] : "";
        char where[320], shown[256];
        deck_text_echo(shown, sizeof shown, arg, 200);
        snprintf(where, sizeof where, "command-line argument %d ('%s')", i + 1,
                 *arg ? shown : "");
        const char *eq = strchr(arg, '=');
        size_t klen = eq ? (size_t)(eq - arg) : 0;
        char key[128];
        if (!eq || klen >= sizeof key) {
            return dt_err_set("%s: expected section.key=value, e.g. optim.lr=0.05", where);
        }
        memcpy(key, arg, klen);
        key[klen] = '\0';
        str_trim(key);
        char *dot = strchr(key, '.');
        if (!dot || dot == key || !dot[1])
            return dt_err_set("%s: expected section.key=value, e.g. optim.lr=0.05", where);
        if (strncmp(key, "group.", 6) == 0) {
            const char *gname = key + 6, *gdot = strchr(gname, '.');
            group_src *g = gdot ? deck_group_find(c, gname, (size_t)(gdot - gname)) : NULL;
            if (!g) {
                strbuf b = {0};
                deck_sb_printf(&b, "%s: expected group.NAME.section.key=value or group.NAME.ranks=N "
                          "with NAME a [group.NAME] of the deck", where);
                for (int i = 0; i < c->ngroups; i++)
                    deck_sb_printf(&b, "%s%s", i ? ", " : "; its groups are ", c->groups[i]->name);
                if (!c->ngroups)
                    deck_sb_printf(&b, "; the deck has no group sections");
                dt_err_set("%s", b.s);
                free(b.s);
                return -1;
            }
            char *value = dt_malloc(strlen(eq + 1) + 1), why[WHY_MAX + 1024];
            strcpy(value, eq + 1);
            str_trim(value);
            int rc = deck_group_key_record(g, gdot + 1, value, 0, i + 1, why, sizeof why);
            free(value);
            if (rc < 0)
                return dt_err_set("%s: %s", where, why);
            continue;
        }
        *dot = '\0';
        const char *section = key, *name = dot + 1;
        int k = deck_key_find(section, name);
        if (k < 0) {
            char what[1024];
            deck_key_unknown_describe(section, name, what, sizeof what);
            return dt_err_set("%s: %s", where, what);
        }
        if (c->set_arg[k])
            return dt_err_set("%s: %s.%s was already given by command-line argument %d", where,
                              section, name, c->set_arg[k]);
        c->set_arg[k] = i + 1;
        char *value = dt_malloc(strlen(eq + 1) + 1);
        strcpy(value, eq + 1);
        str_trim(value);
        char why[WHY_MAX];
        int rc = deck_value_set(&deck_keys[k], value, &c->cfg, why, sizeof why);
        if (rc < 0) {
            deck_text_echo(shown, sizeof shown, value, 200);
            dt_err_set("%s: %s.%s = %s: %s", where, section, name, shown, why);
        }
        free(value);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Parse the deck text and apply the overrides: c->cfg is the configuration
 * outside any group, c->groups what the group sections say. NULL on error. */
parse_ctx *deck_ctx_parse(const char *name, const char *text, size_t len, int noverrides,
                            char *const *overrides)
{
    parse_ctx *c = dt_calloc(1, sizeof *c);
    c->name = name ? name : "(deck)";
    c->text = text;
    c->len = len;
    deck_schema_defaults_fill(&c->cfg);

    int rc = ini_parse_stream(deck_reader, c, deck_handler, c);
    if (rc == -2)
        DT_FATAL("%s: libinih ran out of memory", c->name);
    if (rc > 0 && (!c->err_line || rc < c->err_line)) {
        char what[96];
        line_text(text, len, rc, what, sizeof what);
        dt_err_set("%s:%d: syntax error in '%s': expected '[section]', 'key = value' or a "
                   "comment (';' or '#')", c->name, rc, what);
        goto fail;
    }
    if (c->err_line || rc != 0) {
        if (c->err_line)
            dt_err_set("%s", c->err);
        else
            dt_err_set("%s: the INI parser failed (code %d)", c->name, rc);
        goto fail;
    }
    if (overrides_apply(c, noverrides > 0 ? noverrides : 0, overrides) < 0)
        goto fail;
    return c;
fail:
    deck_groups_free(c);
    free(c);
    return NULL;
}

/* -1 with the message if a required key is given neither outside the groups
 * nor by group g (NULL: no group). */
int deck_required_check(const parse_ctx *c, const group_src *g)
{
    int missing = -1, nmissing = 0;
    for (int i = 0; i < DECK_NKEYS; i++)
        if (!deck_keys[i].def && !c->set_line[i] && !c->set_arg[i] &&
            !(g && (g->set_line[i] || g->set_arg[i]))) {
            if (missing < 0)
                missing = i;
            nmissing++;
        }
    if (missing < 0)
        return 0;
    const deck_key *k = &deck_keys[missing];
    char in[DT_GROUP_NAME_MAX + 64] = "";
    if (g)
        snprintf(in, sizeof in, " for [group.%s] (line %d)", g->name, g->line);
    return dt_err_set("%s: missing required key '%s.%s'%s (%s); add '%s = ...' under [%s] or "
                      "pass %s.%s=...%s", c->name, k->section, k->name, in, k->doc, k->name,
                      k->section, k->section, k->name,
                      nmissing > 1 ? " (and other required keys are missing too)" : "");
}

int deck_ctx_check(const parse_ctx *c, const group_src *g, dt_config *cfg, strbuf *notes)
{
    bool given[DECK_NKEYS];
    for (int i = 0; i < DECK_NKEYS; i++)
        given[i] = c->set_line[i] || c->set_arg[i] || (g && (g->set_line[i] || g->set_arg[i]));
    char where[DT_PATH_MAX + DT_GROUP_NAME_MAX + 32];
    if (g)
        snprintf(where, sizeof where, "%s: [group.%s] (line %d)", c->name, g->name, g->line);
    else
        snprintf(where, sizeof where, "%s", c->name);
    deck_dependent_defaults(cfg, given);
    return deck_check_config(cfg, given, where, notes);
}

static int deck_parse_text(const char *name, const char *text, size_t len, int noverrides,
                           char *const *overrides, dt_config *cfg, char **effective)
{
    if (effective)
        *effective = NULL;
    parse_ctx *c = deck_ctx_parse(name, text, len, noverrides, overrides);
    if (!c)
        return -1;
    strbuf notes = {0}; /* this API reports no notes; the job API does */
    int rc = deck_required_check(c, NULL);
    if (rc == 0)
        rc = deck_ctx_check(c, NULL, &c->cfg, &notes);
    free(notes.s);
    if (rc == 0) {
        if (effective)
            *effective = deck_effective_build(&c->cfg);
        *cfg = c->cfg;
    }
    deck_groups_free(c);
    free(c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* API                                                                      */

int deck_parse_string(const char *name, const char *text, int noverrides,
                      char *const *overrides, dt_config *cfg, char **effective)
{
    if (!text) {
        if (effective)
            *effective = NULL;
        return dt_err_set("%s: no deck text", name ? name : "(deck)");
    }
    return deck_parse_text(name, text, strlen(text), noverrides, overrides, cfg, effective);
}

int deck_parse(const char *path, int noverrides, char *const *overrides, dt_config *cfg,
               char **effective)
{
    if (effective)
        *effective = NULL;
    size_t len = 0;
    char *text = deck_slurp(path, &len);
    if (!text)
        return -1;
    int rc = deck_parse_text(path, text, len, noverrides, overrides, cfg, effective);
    free(text);
    return rc;
}

/* The deck file's bytes, NUL-terminated; NULL with dt_err_set() on error. */
char *deck_slurp(const char *path, size_t *len)
{
    if (!path || !*path) {
        dt_err_set("deck: no deck file given");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        dt_err_set("%s: cannot open the deck: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = dt_malloc(cap);
    while (!feof(f) && !ferror(f)) {
        if (n + 1 >= cap) {
            if (cap >= DECK_BYTES_MAX) {
                fclose(f);
                free(buf);
                dt_err_set("%s: larger than %zu bytes; is this really a deck?", path,
                           DECK_BYTES_MAX);
                return NULL;
            }
            cap *= 2;
            buf = dt_realloc(buf, cap);
        }
        n += fread(buf + n, 1, cap - 1 - n, f);
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(buf);
        dt_err_set("%s: cannot read the deck: %s", path, strerror(e));
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

int deck_load(MPI_Comm comm, int root, const char *path, int noverrides,
              char *const *overrides, dt_config *cfg, char **effective)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (effective)
        *effective = NULL;

    /* head[0]: 0 or -1; head[1]: bytes of the message or effective deck */
    int head[2] = {0, 0};
    char *payload = NULL;
    if (rank == root) {
        dt_config mine;
        char *eff = NULL;
        head[0] = deck_parse(path, noverrides, overrides, &mine, &eff);
        if (head[0] == 0) {
            payload = eff;
            *cfg = mine;
        } else {
            const char *msg = dt_err_msg();
            payload = dt_malloc(strlen(msg) + 1);
            strcpy(payload, msg);
        }
        size_t len = strlen(payload);
        if (len >= INT_MAX)
            DT_FATAL("%s: effective deck of %zu bytes is too large to broadcast", path, len);
        head[1] = (int)len;
    }
    MPI_CHECK(MPI_Bcast(head, 2, MPI_INT, root, comm));
    if (rank != root)
        payload = dt_malloc((size_t)head[1] + 1);
    MPI_CHECK(MPI_Bcast(payload, head[1] + 1, MPI_CHAR, root, comm));

    if (head[0] != 0) {
        if (rank != root)
            dt_err_set("%s", payload);
        free(payload);
        return -1;
    }
    if (rank == root) {
        if (effective)
            *effective = payload;
        else
            free(payload);
        return 0;
    }
    /* the effective deck already holds the overrides */
    if (deck_parse_string(path, payload, 0, NULL, cfg, effective) < 0)
        DT_FATAL("rank %d cannot re-read the effective deck broadcast by rank %d: %s", rank,
                 root, dt_err_msg());
    free(payload);
    return 0;
}

