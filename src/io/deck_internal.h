/* Internal interface between the deck's files (not for the rest of dtrain,
 * which uses io/deck.h):
 *   deck_schema.c     the key table, key look-up and suggestions, --help
 *   deck_value.c      one value: parse, check against its key, format back
 *   deck_parse.c      the inih reader and handler, command-line overrides
 *   deck_groups.c     [group.NAME] sections: the section pre-scan, jobs
 *   deck_effective.c  the effective deck (INI text with every default)
 *   deck_check.c      rules that involve more than one key
 * Dependency direction: parse and groups use check, effective, value and
 * schema; effective uses value and schema; value uses only the key type. */
#ifndef DT_IO_DECK_INTERNAL_H
#define DT_IO_DECK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/deck.h"

/* A deck is a few kilobytes; anything this large is the wrong file. */
#define DECK_BYTES_MAX ((size_t)1 << 20)
/* Room for the messages a value check writes ("item 3 ('x') is ..."). */
#define WHY_MAX 768
/* inih's MAX_SECTION (ini.c of libinih r55, not exported by ini.h): it keeps
 * at most DECK_SECTION_MAX - 1 bytes of a section name. The pre-scan keeps
 * the same, which tests/fuzz/fuzz_deck_sections.c verifies against inih. */
#define DECK_SECTION_MAX 50

typedef enum {
    KT_STRING,
    KT_INT,    /* int64_t field */
    KT_UINT64, /* uint64_t field */
    KT_DOUBLE,
    KT_BOOL,
    KT_ENUM    /* char[] field holding one of the choices */
} key_type;

/* Bounds of KT_INT and KT_DOUBLE values: closed or open at either end. */
enum { B_LO = 1, B_LO_OPEN = 2, B_HI = 4, B_HI_OPEN = 8 };

/* Validates a string value and writes its canonical form to out (cap bytes);
 * on failure writes the reason to why and returns -1. */
typedef int (*norm_fn)(const char *in, char *out, size_t cap, char *why, size_t whycap);

typedef struct deck_key {
    const char *section, *name;
    key_type type;
    const char *def;     /* NULL: required */
    unsigned bounds;     /* B_* */
    double lo, hi;
    const char *choices; /* KT_ENUM: "a|b|c", the first spelling is stored */
    const char *const *choices_from; /* KT_ENUM without choices: where a layer above
                                      * puts them at run time (deck_use_modes) */
    norm_fn norm;        /* KT_STRING: extra validation, canonical form */
    const char *expect;  /* KT_STRING: what a good value looks like */
    const char *hint;    /* appended when a value is rejected */
    bool nonempty;       /* KT_STRING: "" is refused */
    size_t offset, size; /* the field in dt_config */
    const char *doc;
} deck_key;

/* ---- deck_schema.c ---------------------------------------------------------
 * The key's choices (KT_ENUM): its own, or those given at run time ("" before). */
const char *deck_key_choices(const deck_key *k);
/* The rule deck_use_modes installed: 0, or -1 after dt_err_set(). */
int deck_mode_rule(const dt_config *cfg, const char *where);
/*
 * The rows of the table; deck_schema.c checks at compile time that the table
 * has exactly DECK_NKEYS rows (per-key arrays below are sized by it). */
#define DECK_NKEYS 121
extern const deck_key *const deck_keys;

/* The row of section.name, or -1. */
int deck_key_find(const char *section, const char *name);
/* "unknown key 'lrr' in [optim]; did you mean 'optim.lr'?" (no prefix). */
void deck_key_unknown_describe(const char *section, const char *name, char *out, size_t cap);
/* Every key at its default (required keys zero). Aborts on a schema whose
 * defaults fail their own checks: a programming error. */
void deck_schema_defaults_fill(dt_config *cfg);

/* ---- deck_value.c ---------------------------------------------------------- */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

void deck_sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Optimal-string-alignment distance (adjacent swaps cost 1), ignoring case;
 * strings longer than 63 characters are never close to anything. */
int deck_edit_distance(const char *a, const char *b);
/* A value or argument as messages show it: control characters as '?', cut
 * after max characters, '' when empty. */
void deck_text_echo(char *out, size_t cap, const char *s, size_t max);
/* Full-string strtoll: "" , " 1", "1.5", "1x" are refused. */
bool deck_int_parse(const char *s, int64_t *out, bool *overflow);
/* What a good value of k looks like: "a number in [0, 1)". */
void deck_expect_describe(const deck_key *k, char *out, size_t cap);
/* Parse and check value for key k and store it in cfg. On failure why says
 * what was expected (and what is wrong, where that is more than the type). */
int deck_value_set(const deck_key *k, const char *value, dt_config *cfg, char *why,
                   size_t whycap);
/* The value as the effective deck writes it; doubles in the shortest form
 * that reads back to the same bits. */
void deck_value_format(const deck_key *k, const dt_config *cfg, char *out, size_t cap);
/* The KT_STRING normalisers the table names. */
int deck_norm_widths(const char *in, char *out, size_t cap, char *why, size_t whycap);
int deck_norm_epochs(const char *in, char *out, size_t cap, char *why, size_t whycap);

/* ---- deck_parse.c / deck_groups.c: one parse of a deck --------------------- */

/* A [group.NAME] section as written: its ranks and the keys it overrides,
 * from the deck and from group.NAME.section.key=value arguments. */
typedef struct group_src {
    char name[DT_GROUP_NAME_MAX];
    int line;                 /* of its [group.NAME] header */
    int64_t ranks;
    int ranks_line, ranks_arg;
    int set_line[DECK_NKEYS];
    int set_arg[DECK_NKEYS];
    char *deck_value[DECK_NKEYS];
    char *arg_value[DECK_NKEYS];
} group_src;

typedef struct parse_ctx {
    const char *name; /* deck name for messages */
    const char *text; /* whole deck */
    size_t len, pos;
    int line;         /* lines handed to inih so far */
    int err_line;     /* line of the first error we recorded; 0: none */
    char section[DECK_SECTION_MAX]; /* the pre-scan's view of the current section */
    char err[2048];
    int set_line[DECK_NKEYS]; /* 0: not set by the deck */
    int set_arg[DECK_NKEYS];  /* 0: not set by an override */
    dt_config cfg;
    int ngroups;
    group_src *groups[DT_GROUPS_MAX];
} parse_ctx;

/* Record the first error (later ones are dropped). */
void deck_ctx_fail(parse_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* inih's reader: hands out exactly one deck line per call and runs the
 * section pre-scan on it (deck_groups_scan_line). */
char *deck_reader(char *buf, int num, void *stream);
/* Parse the deck text and apply the overrides: c->cfg is the configuration
 * outside any group, c->groups what the group sections say. NULL on error. */
parse_ctx *deck_ctx_parse(const char *name, const char *text, size_t len, int noverrides,
                          char *const *overrides);
/* -1 with the message if a required key is given neither outside the groups
 * nor by group g (NULL: no group). */
int deck_required_check(const parse_ctx *c, const group_src *g);
/* deck_check_config on cfg, the complete configuration outside groups (g
 * NULL) or of group g, with the keys c (and g) were given, once
 * deck_dependent_defaults has filled in what another key decides. */
int deck_ctx_check(const parse_ctx *c, const group_src *g, dt_config *cfg, strbuf *notes);
/* The deck file's bytes, NUL-terminated; NULL with dt_err_set() on error. */
char *deck_slurp(const char *path, size_t *len);

/* ---- deck_groups.c --------------------------------------------------------- */
/* The section pre-scan: whether inih (r55, INI_ALLOW_BOM, inline comments
 * after white space) takes `line` (n bytes, as the reader hands it over, no
 * NUL inside; line 1 of the deck when first) as a "[section]" header, and if
 * so its name as inih stores it (cut to DECK_SECTION_MAX - 1 bytes). */
bool deck_groups_section_line(const char *line, size_t n, bool first, char *section,
                              size_t cap);
/* Pre-scan one line the reader hands inih: follow the section it opens and
 * register [group.NAME] headers. */
void deck_groups_scan_line(parse_ctx *c, const char *line, size_t n);
group_src *deck_group_find(const parse_ctx *c, const char *name, size_t len);
/* One key of group g, from deck line `line` or command-line argument `arg`
 * (the other is 0): validated now, applied when the group is built. On error
 * writes "group.NAME.key = value: reason" to why and returns -1. */
int deck_group_key_record(group_src *g, const char *key, const char *value, int line, int arg,
                          char *why, size_t cap);
void deck_groups_free(parse_ctx *c);

/* ---- deck_effective.c ------------------------------------------------------ */
/* The effective deck of cfg: every key with its value, in table order. */
char *deck_effective_build(const dt_config *cfg);
/* The job's effective deck: the base, then each group section with the keys
 * it sets, in canonical form. Reads back to the same job. */
char *deck_effective_job(const parse_ctx *c, const dt_job *job);

/* ---- deck_check.c ---------------------------------------------------------- */
/* Rules between keys, checked on a complete configuration (the one outside
 * groups, or one group's): `given(k)` says whether key row k was written in
 * the deck or an argument (not a default). `where` prefixes messages. 0, or -1
 * with dt_err_set(). Notes (keys that do not apply and are ignored) are
 * appended to *notes, one line each. */
int deck_check_config(const dt_config *cfg, const bool *given, const char *where,
                      strbuf *notes);
/* The defaults that depend on another key, for the keys not given:
 * optim.name = muon takes optim.momentum = 0.95 and optim.nesterov = true
 * (Muon's own). */
void deck_dependent_defaults(dt_config *cfg, const bool *given);

#endif
