/* Rules between keys: each key's own type and bounds are checked as it is
 * read (deck_value.c); what depends on two or more keys is checked here, once
 * the configuration is complete (for a deck with groups: once per group). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "io/deck_internal.h"

static bool given_key(const bool *given, const char *section, const char *name)
{
    int k = deck_key_find(section, name);
    if (k < 0)
        DT_FATAL("deck_check: no key %s.%s in the schema", section, name);
    return given[k];
}

static bool is_language_data(const char *data)
{
    return strcmp(data, "text") == 0 || strcmp(data, "tokens") == 0;
}

void deck_dependent_defaults(dt_config *cfg, const bool *given)
{
    if (strcmp(cfg->optim.name, "muon") == 0) {
        /* KellerJordan/Muon's defaults: momentum 0.95, Nesterov */
        if (!given_key(given, "optim", "momentum"))
            cfg->optim.momentum = 0.95;
        if (!given_key(given, "optim", "nesterov"))
            cfg->optim.nesterov = true;
    }
}

int deck_check_config(const dt_config *cfg, const bool *given, const char *where,
                      strbuf *notes)
{
    bool adamw = strcmp(cfg->optim.name, "adamw") == 0;
    bool muon = strcmp(cfg->optim.name, "muon") == 0;

    if (deck_mode_rule(cfg, where) != 0)
        return -1;
    if (adamw) {
        /* AdamW has no momentum buffer: beta1 plays that role */
        bool m = given_key(given, "optim", "momentum"), n = given_key(given, "optim", "nesterov");
        if (m || n)
            deck_sb_printf(notes, "%s: note: %s%s%s do%s not apply to optim.name = adamw "
                           "(optim.beta1 and optim.beta2 do); ignored\n", where,
                           m ? "optim.momentum" : "", m && n ? " and " : "",
                           n ? "optim.nesterov" : "", m && n ? "" : "es");
    }

    if (!muon && given_key(given, "optim", "adamw_lr"))
        deck_sb_printf(notes, "%s: note: optim.adamw_lr applies to optim.name = muon only (its "
                       "AdamW part); ignored with optim.name = %s\n", where, cfg->optim.name);

    if (cfg->compute.tf32 && strcmp(cfg->compute.device, "cuda") != 0)
        deck_sb_printf(notes, "%s: note: compute.tf32 applies to compute.device = cuda only; "
                       "ignored\n", where);

    if (cfg->compute.cuda_graphs && strcmp(cfg->compute.device, "cuda") != 0)
        deck_sb_printf(notes, "%s: note: compute.cuda_graphs applies to compute.device = cuda "
                       "only; ignored\n", where);
    bool gpt = strcmp(cfg->model.name, "gpt") == 0;
    if (gpt && cfg->model.n_embd % cfg->model.n_head != 0)
        return dt_err_set("%s: model.n_embd = %lld, model.n_head = %lld: expected n_embd "
                          "divisible by n_head (each head takes n_embd / n_head channels)",
                          where, (long long)cfg->model.n_embd, (long long)cfg->model.n_head);
    if (gpt && !is_language_data(cfg->data.name))
        return dt_err_set("%s: model.name = gpt with data.name = %s: expected data.name = text "
                          "or tokens (a language model trains on token sequences)", where,
                          cfg->data.name);
    if (!gpt && is_language_data(cfg->data.name))
        return dt_err_set("%s: data.name = %s with model.name = %s: expected model.name = gpt "
                          "(only the language model reads token sequences)", where,
                          cfg->data.name, cfg->model.name);
    if (strcmp(cfg->data.name, "tokens") == 0 && !cfg->data.val_path[0])
        return dt_err_set("%s: data.name = tokens: missing data.val_path (the validation token "
                          "file; data.path is the training one)", where);

    /* the cosine's half period is decay_steps - warmup_steps */
    if (strcmp(cfg->optim.schedule, "cosine") == 0 && cfg->optim.decay_steps != 0 &&
        cfg->optim.decay_steps <= cfg->optim.warmup_steps)
        return dt_err_set("%s: optim.decay_steps = %lld: expected 0 (the run's total steps) or "
                          "more than optim.warmup_steps = %lld (the cosine runs from the end of "
                          "the warmup to decay_steps)", where, (long long)cfg->optim.decay_steps,
                          (long long)cfg->optim.warmup_steps);
    if (strcmp(cfg->optim.schedule, "cosine") == 0 && cfg->optim.min_lr > cfg->optim.lr)
        return dt_err_set("%s: optim.min_lr = %g: expected a number <= optim.lr = %g (the "
                          "cosine decays from lr to min_lr)", where, cfg->optim.min_lr,
                          cfg->optim.lr);
    return 0;
}
