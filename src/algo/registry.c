#include <string.h>

#include "algo/algo.h"
#include "core/error.h"
#include "io/deck.h"

extern const dt_algo algo_local, algo_allreduce, algo_dpsgd, algo_sgp, algo_osgp, algo_adpsgd,
    algo_ps_async, algo_ps_sync, algo_easgd, algo_lsgd, algo_pdmm_isvr, algo_admm_isvr,
    algo_dsgd_ecl, algo_diloco;

const dt_algo *const algo_table[] = { &algo_local, &algo_allreduce, &algo_dpsgd, &algo_sgp,
                                      &algo_osgp, &algo_adpsgd, &algo_ps_async, &algo_ps_sync,
                                      &algo_easgd, &algo_lsgd, &algo_pdmm_isvr,
                                      &algo_admm_isvr, &algo_dsgd_ecl, &algo_diloco, NULL };

const dt_algo *algo_find(const char *name)
{
    for (int i = 0; algo_table[i]; i++)
        if (strcmp(algo_table[i]->name, name) == 0)
            return algo_table[i];
    dt_err_set("algorithm.mode = '%s': unknown mode; expected one of %s", name,
               algo_names(", "));
    return NULL;
}

const char *algo_names(const char *sep)
{
    static char joined[2][512];
    char *out = joined[strcmp(sep, "|") != 0];
    out[0] = '\0';
    for (int i = 0; algo_table[i]; i++) {
        strcat(out, i ? sep : "");
        strcat(out, algo_table[i]->name);
    }
    return out;
}

static int algo_deck_rule(const dt_config *cfg, const char *where)
{
    const dt_algo *a = algo_find(cfg->algorithm.mode);
    if (a && a->own_step && strcmp(cfg->optim.name, "adamw") == 0)
        return dt_err_set("%s: optim.name = adamw with algorithm.mode = %s: %s; use "
                          "optim.name = sgd", where, a->name, a->own_step);
    return 0;
}

void algo_deck_register(void)
{
    deck_use_modes(algo_names("|"), algo_deck_rule);
}
