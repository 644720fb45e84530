/* Rank groups: [group.NAME] sections and the section pre-scan that finds
 * them, and the job they make up (each group a complete configuration).
 *
 * The pre-scan must see exactly the section lines inih sees: inih reports a
 * group's keys under the section name, and a group the pre-scan missed (or
 * named differently) would have no registration to hold them. So the
 * pre-scan applies inih's own rules to the very line inih gets;
 * tests/fuzz/fuzz_deck_sections.c runs both on the same bytes. */
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/deck_internal.h"


/* Keys every group shares: where the job writes and whether it continues. */
static bool key_shared(int k)
{
    return strcmp(deck_keys[k].section, "run") == 0 &&
           (strcmp(deck_keys[k].name, "output_dir") == 0 || strcmp(deck_keys[k].name, "resume") == 0 ||
            strcmp(deck_keys[k].name, "overwrite") == 0);
}

group_src *deck_group_find(const parse_ctx *c, const char *name, size_t len)
{
    for (int i = 0; i < c->ngroups; i++)
        if (strlen(c->groups[i]->name) == len && strncmp(c->groups[i]->name, name, len) == 0)
            return c->groups[i];
    return NULL;
}

/* A [group.NAME] header: names are directory names, so a safe alphabet. */
static void group_begin(parse_ctx *c, const char *name, int line)
{
    size_t len = strlen(name);
    bool ok = len > 0 && len < DT_GROUP_NAME_MAX && name[0] != '-';
    for (size_t i = 0; i < len && ok; i++)
        ok = isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '_';
    if (!ok) {
        deck_ctx_fail(c, line, "%s:%d: [group.%.60s]: a group name is 1 to %d letters, digits, '-' "
                 "or '_' (not starting with '-'); it names the group's output directory",
                 c->name, line, name, DT_GROUP_NAME_MAX - 1);
        return;
    }
    group_src *g = deck_group_find(c, name, len);
    if (g) {
        deck_ctx_fail(c, line, "%s:%d: [group.%s]: the group already begins on line %d; give each "
                 "group one section", c->name, line, name, g->line);
        return;
    }
    if (c->ngroups == DT_GROUPS_MAX) {
        deck_ctx_fail(c, line, "%s:%d: [group.%s]: more than %d groups", c->name, line, name,
                 DT_GROUPS_MAX);
        return;
    }
    g = dt_calloc(1, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->line = line;
    c->groups[c->ngroups++] = g;
}

/* inih r55's reading of one line (ini_parse_stream), step by step: on line 1
 * skip a UTF-8 byte-order mark; strip white space (isspace, as inih calls it)
 * at both ends; a line starting with ';' or '#' is a comment; a line starting
 * with '[' is a header when a ']' comes before the end and before any ';'
 * that follows white space (an inline comment), and the name is what lies
 * between, cut to MAX_SECTION - 1 bytes. inih's continuation lines (a line
 * that starts with white space) never reach it: the reader strips that white
 * space, and a byte-order mark, the other way to start past the line's first
 * byte, is only skipped on line 1, where no key precedes. */
bool deck_groups_section_line(const char *line, size_t n, bool first, char *section,
                              size_t cap)
{
    const char *s = line, *e = line + n;
    if (first && n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e || *s != '[')
        return false;
    const char *p = s + 1;
    bool was_space = false;
    while (p < e && *p != ']' && !(was_space && *p == ';')) {
        was_space = isspace((unsigned char)*p);
        p++;
    }
    if (p == e || *p != ']')
        return false; /* inih: a syntax error, the section stays as it was */
    size_t len = (size_t)(p - (s + 1));
    size_t keep = cap < DECK_SECTION_MAX ? cap : DECK_SECTION_MAX;
    if (len > keep - 1)
        len = keep - 1;
    memcpy(section, s + 1, len);
    section[len] = '\0';
    return true;
}

void deck_groups_scan_line(parse_ctx *c, const char *line, size_t n)
{
    char section[DECK_SECTION_MAX];
    if (!deck_groups_section_line(line, n, c->line == 1, section, sizeof section))
        return;
    memcpy(c->section, section, sizeof section);
    if (strncmp(c->section, "group.", 6) == 0)
        group_begin(c, c->section + 6, c->line);
}

/* One key of group g, from deck line `line` or command-line argument `arg`
 * (the other is 0): validated now, applied when the group is built. On error
 * writes "group.NAME.key = value: reason" to why and returns -1. */
int deck_group_key_record(group_src *g, const char *key, const char *value, int line, int arg,
                            char *why, size_t cap)
{
    char shown[256];
    deck_text_echo(shown, sizeof shown, value, 120);
    if (strcmp(key, "ranks") == 0) {
        int64_t v;
        bool overflow = false;
        int *seen = line ? &g->ranks_line : &g->ranks_arg;
        if (*seen) {
            snprintf(why, cap, "group.%s.ranks: duplicate key (already given by %s %d)", g->name,
                     line ? "line" : "command-line argument", *seen);
            return -1;
        }
        if (!deck_int_parse(value, &v, &overflow) || v < 1 || v > INT_MAX) {
            snprintf(why, cap, "group.%s.ranks = %s: expected an integer >= 1 (the number of "
                     "ranks of the group)", g->name, shown);
            return -1;
        }
        *seen = line ? line : arg;
        g->ranks = v;
        return 0;
    }
    char sec[64], what[1024];
    const char *dot = strchr(key, '.');
    if (!dot || dot == key || (size_t)(dot - key) >= sizeof sec || !dot[1]) {
        snprintf(why, cap, "group.%s: '%.60s' is not a key; a group section holds 'ranks = N' "
                 "and overrides written 'section.key = value' (e.g. optim.lr = 0.05)", g->name,
                 key);
        return -1;
    }
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - key), key);
    int k = deck_key_find(sec, dot + 1);
    if (k < 0) {
        deck_key_unknown_describe(sec, dot + 1, what, sizeof what);
        snprintf(why, cap, "group.%s.%s", g->name, what);
        return -1;
    }
    if (key_shared(k)) {
        snprintf(why, cap, "group.%s.%s: cannot differ between groups (every group writes to "
                 "run.output_dir/<group> and they stop and resume together); set it outside "
                 "the [group.*] sections", g->name, key);
        return -1;
    }
    int *seen = line ? &g->set_line[k] : &g->set_arg[k];
    if (*seen) {
        snprintf(why, cap, "group.%s.%s: duplicate key (already given by %s %d)", g->name, key,
                 line ? "line" : "command-line argument", *seen);
        return -1;
    }
    dt_config *scratch = dt_calloc(1, sizeof *scratch);
    char reason[WHY_MAX];
    int rc = deck_value_set(&deck_keys[k], value, scratch, reason, sizeof reason);
    free(scratch);
    if (rc < 0) {
        snprintf(why, cap, "group.%s.%s = %s: %s", g->name, key, shown, reason);
        return -1;
    }
    *seen = line ? line : arg;
    char **slot = line ? &g->deck_value[k] : &g->arg_value[k];
    *slot = dt_malloc(strlen(value) + 1);
    strcpy(*slot, value);
    return 0;
}

void deck_groups_free(parse_ctx *c)
{
    for (int i = 0; i < c->ngroups; i++) {
        for (int k = 0; k < DECK_NKEYS; k++) {
            free(c->groups[i]->deck_value[k]);
            free(c->groups[i]->arg_value[k]);
        }
        free(c->groups[i]);
    }
    c->ngroups = 0;
}

/* Group g's configuration: the base, its section, its arguments, and its
 * own output directory. */
static int group_build(const parse_ctx *c, const group_src *g, dt_group *out, strbuf *notes)
{
    char why[WHY_MAX];
    if (!g->ranks_line && !g->ranks_arg)
        return dt_err_set("%s:%d: [group.%s]: missing 'ranks = N' (how many ranks the group "
                          "takes)", c->name, g->line, g->name);
    if (deck_required_check(c, g) < 0)
        return -1;
    out->cfg = c->cfg;
    for (int k = 0; k < DECK_NKEYS; k++) {
        const char *v = g->arg_value[k] ? g->arg_value[k] : g->deck_value[k];
        if (v && deck_value_set(&deck_keys[k], v, &out->cfg, why, sizeof why) < 0)
            DT_FATAL("group.%s.%s.%s = %s was validated but no longer applies: %s", g->name,
                     deck_keys[k].section, deck_keys[k].name, v, why);
    }
    char dir[DT_PATH_MAX + DT_GROUP_NAME_MAX + 2];
    snprintf(dir, sizeof dir, "%s/%s", c->cfg.run.output_dir, g->name);
    int od = deck_key_find("run", "output_dir");
    if (deck_value_set(&deck_keys[od], dir, &out->cfg, why, sizeof why) < 0)
        return dt_err_set("%s: run.output_dir = '%s' with the group directory '/%s' appended: "
                          "%s", c->name, c->cfg.run.output_dir, g->name, why);
    if (deck_ctx_check(c, g, &out->cfg, notes) < 0)
        return -1;
    snprintf(out->name, sizeof out->name, "%s", g->name);
    out->ranks = (int)g->ranks;
    if (g->ranks_arg)
        snprintf(out->where, sizeof out->where, "command-line argument %d (group.%s.ranks)",
                 g->ranks_arg, g->name);
    else
        snprintf(out->where, sizeof out->where, "%s:%d: group.%s.ranks", c->name,
                 g->ranks_line, g->name);
    return 0;
}

static int job_parse_text(const char *name, const char *text, size_t len, int noverrides,
                          char *const *overrides, int world_size, dt_job *job)
{
    memset(job, 0, sizeof *job);
    parse_ctx *c = deck_ctx_parse(name, text, len, noverrides, overrides);
    if (!c)
        return -1;
    int rc = 0;
    strbuf notes = {0};
    if (c->ngroups == 0) {
        rc = deck_required_check(c, NULL);
        if (rc == 0)
            rc = deck_ctx_check(c, NULL, &c->cfg, &notes);
        if (rc == 0) {
            job->ngroups = 1;
            job->groups = dt_calloc(1, sizeof *job->groups);
            job->groups[0].cfg = c->cfg;
            job->groups[0].ranks = world_size;
            job->groups[0].effective = deck_effective_build(&c->cfg);
            snprintf(job->groups[0].where, sizeof job->groups[0].where, "the job");
            job->effective = deck_effective_build(&c->cfg);
        }
        goto out;
    }
    job->ngroups = c->ngroups;
    job->groups = dt_calloc((size_t)c->ngroups, sizeof *job->groups);
    int64_t total = 0;
    for (int gi = 0; gi < c->ngroups && rc == 0; gi++) {
        dt_group *g = &job->groups[gi];
        rc = group_build(c, c->groups[gi], g, &notes);
        if (rc == 0) {
            g->first = (int)total;
            total += g->ranks;
        }
    }
    if (rc == 0 && world_size > 0 && total != world_size) {
        strbuf b = {0};
        deck_sb_printf(&b, "%s: the groups take %lld rank(s) (", c->name, (long long)total);
        for (int gi = 0; gi < c->ngroups; gi++)
            deck_sb_printf(&b, "%s%s: %d from %s", gi ? "; " : "", job->groups[gi].name,
                      job->groups[gi].ranks, job->groups[gi].where);
        deck_sb_printf(&b, ") but the job has %d; group.*.ranks must add up to the number of ranks",
                  world_size);
        dt_err_set("%s", b.s);
        free(b.s);
        rc = -1;
    }
    if (rc == 0) {
        for (int gi = 0; gi < c->ngroups; gi++) {
            dt_group *g = &job->groups[gi];
            strbuf b = {0};
            deck_sb_printf(&b, "; group %s of the job deck %s: world ranks %d..%d\n", g->name,
                      c->name, g->first, g->first + g->ranks - 1);
            char *eff = deck_effective_build(&g->cfg);
            deck_sb_printf(&b, "%s", eff);
            free(eff);
            g->effective = b.s;
        }
        job->effective = deck_effective_job(c, job);
    }
out:
    deck_groups_free(c);
    free(c);
    if (rc == 0)
        job->notes = notes.s;
    else
        free(notes.s);
    if (rc != 0)
        deck_job_free(job);
    return rc;
}

int deck_parse_job(const char *path, int noverrides, char *const *overrides, int world_size,
                   dt_job *job)
{
    memset(job, 0, sizeof *job);
    size_t len = 0;
    char *text = deck_slurp(path, &len);
    if (!text)
        return -1;
    int rc = job_parse_text(path, text, len, noverrides, overrides, world_size, job);
    free(text);
    return rc;
}

int deck_load_job(MPI_Comm world, const char *path, int noverrides, char *const *overrides,
                  dt_job *job)
{
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &size));
    memset(job, 0, sizeof *job);
    /* head[0]: 0, or -1 when rank 0 could not read the file; head[1]: bytes */
    long long head[2] = {0, 0};
    size_t len = 0;
    char *text = NULL;
    if (rank == 0) {
        text = deck_slurp(path, &len);
        if (!text) {
            const char *msg = dt_err_msg();
            len = strlen(msg);
            text = dt_malloc(len + 1);
            strcpy(text, msg);
            head[0] = -1;
        }
        head[1] = (long long)len;
    }
    MPI_CHECK(MPI_Bcast(head, 2, MPI_LONG_LONG, 0, world));
    len = (size_t)head[1];
    if (rank != 0)
        text = dt_malloc(len + 1);
    MPI_CHECK(MPI_Bcast(text, (int)len + 1, MPI_CHAR, 0, world));
    int rc;
    if (head[0] != 0) {
        dt_err_set("%s", text);
        rc = -1;
    } else {
        rc = job_parse_text(path, text, len, noverrides, overrides, size, job);
    }
    free(text);
    return rc;
}

const dt_group *deck_job_group(const dt_job *job, int rank)
{
    for (int i = 0; i < job->ngroups; i++)
        if (rank >= job->groups[i].first && rank < job->groups[i].first + job->groups[i].ranks)
            return &job->groups[i];
    return NULL;
}

void deck_job_free(dt_job *job)
{
    for (int i = 0; i < job->ngroups && job->groups; i++)
        free(job->groups[i].effective);
    free(job->groups);
    free(job->effective);
    free(job->notes);
    memset(job, 0, sizeof *job);
}

