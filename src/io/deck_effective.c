/* The effective deck: INI text holding every key with the value a run uses
 * (defaults filled in), in the schema's order with each key's documentation;
 * reading it back gives the same configuration. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "io/deck_internal.h"


/* The effective deck of cfg. With `set` (per key: given by the deck or an
 * argument), required keys that were not given are left out, so the text
 * still reads back when a group supplies them. */
static void effective_append(strbuf *b, const dt_config *cfg, const int *set)
{
    char v[DT_PATH_MAX + 32];
    for (int i = 0; i < DECK_NKEYS; i++) {
        const deck_key *k = &deck_keys[i];
        if (i == 0 || strcmp(k->section, deck_keys[i - 1].section) != 0)
            deck_sb_printf(b, "\n[%s]\n", k->section);
        if (set && !k->def && !set[i])
            continue;
        deck_value_format(k, cfg, v, sizeof v);
        deck_sb_printf(b, "; %s\n%s =%s%s\n", k->doc, k->name, *v ? " " : "", v);
    }
}

char *deck_effective_build(const dt_config *cfg)
{
    strbuf b = {0};
    deck_sb_printf(&b, "; dtrain effective deck: every key with the value this run used.\n"
                  "; Reading it back gives the same configuration.\n");
    effective_append(&b, cfg, NULL);
    return b.s;
}

/* The job's effective deck: the base, then each group section with the
 * keys it sets, in canonical form. Reads back to the same job. */
char *deck_effective_job(const parse_ctx *c, const dt_job *job)
{
    strbuf b = {0};
    int set[DECK_NKEYS];
    for (int i = 0; i < DECK_NKEYS; i++)
        set[i] = c->set_line[i] || c->set_arg[i];
    deck_sb_printf(&b, "; dtrain effective deck: every key with the value this run used.\n"
                  "; Reading it back gives the same configuration.\n");
    effective_append(&b, &c->cfg, c->ngroups ? set : NULL);
    char v[DT_PATH_MAX + 32];
    for (int gi = 0; gi < c->ngroups; gi++) {
        const group_src *g = c->groups[gi];
        const dt_group *out = &job->groups[gi];
        deck_sb_printf(&b, "\n; world ranks %d..%d\n[group.%s]\nranks = %d\n", out->first,
                  out->first + out->ranks - 1, g->name, out->ranks);
        for (int k = 0; k < DECK_NKEYS; k++)
            if (g->deck_value[k] || g->arg_value[k]) {
                deck_value_format(&deck_keys[k], &out->cfg, v, sizeof v);
                deck_sb_printf(&b, "%s.%s =%s%s\n", deck_keys[k].section, deck_keys[k].name, *v ? " " : "",
                          v);
            }
    }
    return b.s;
}
