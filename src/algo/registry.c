#include <string.h>

#include "algo/algo.h"
#include "core/error.h"

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
    char known[512] = "";
    for (int i = 0; algo_table[i]; i++) {
        strcat(known, i ? ", " : "");
        strcat(known, algo_table[i]->name);
    }
    dt_err_set("algorithm.mode = '%s': unknown mode; expected one of %s", name, known);
    return NULL;
}
