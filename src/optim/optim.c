/* The optimizer table and the calls every kind shares. */
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/sgd.h"

const dt_optim_ops *const optim_table[] = { &optim_sgd, &optim_adamw, &optim_muon, NULL };

const dt_optim_ops *optim_find(const char *name)
{
    for (int i = 0; optim_table[i]; i++)
        if (strcmp(optim_table[i]->name, name) == 0)
            return optim_table[i];
    char known[256] = "";
    for (int i = 0; optim_table[i]; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 optim_table[i]->name);
    dt_err_set("optimizer '%s' is unknown; known: %s", name, known);
    return NULL;
}

int optim_init(dt_optim *o, const dt_optim_ops *ops, const dt_config *cfg, size_t n,
               const dt_tensor_view *tensors, int ntensors, const dt_backend *be)
{
    memset(o, 0, sizeof *o);
    o->ops = ops;
    o->n = n;
    if (ops->init(o, cfg, tensors, ntensors) != 0)
        return -1;
    for (int k = 0; k < ops->nstate; k++)
        o->state[k] = be ? be->mem_alloc(n * sizeof(float)) : dt_falloc(n);
    return 0;
}

void optim_step(const dt_optim *o, const dt_backend *be, float *x, const float *g, float lr,
                int64_t step)
{
    if (o->ops->step_backend && be)
        o->ops->step_backend(o, be, x, g, o->state, lr, step);
    else if (be && be->device)
        DT_FATAL("optimizer %s has no step for vectors in %s memory", o->ops->name, be->name);
    else
        o->ops->step(o, 0, o->n, x, g, o->state, lr, step);
}

void optim_step_range(const dt_optim *o, size_t lo, size_t hi, float *x, const float *g,
                      float lr, int64_t step)
{
    float *st[DT_OPTIM_MAX_STATE] = { NULL };
    for (int k = 0; k < o->ops->nstate; k++)
        st[k] = o->state[k] + lo;
    o->ops->step(o, lo, hi, x, g, st, lr, step);
}

int optim_state_arrays(const dt_optim *o, dt_ckpt_array *out, int max)
{
    if (o->ops->nstate > max)
        DT_FATAL("optimizer %s: no room for its %d state arrays", o->ops->name, o->ops->nstate);
    for (int k = 0; k < o->ops->nstate; k++)
        out[k] = (dt_ckpt_array){ o->ops->state_names[k], o->state[k], o->n, DT_CKPT_PER_RANK };
    return o->ops->nstate;
}

void optim_free(dt_optim *o, const dt_backend *be)
{
    if (!o->ops)
        return;
    for (int k = 0; k < o->ops->nstate; k++) {
        if (be)
            be->mem_free(o->state[k]);
        else
            free(o->state[k]);
        o->state[k] = NULL;
    }
    if (o->ops->free)
        (o->ops->free)(o);
    free(o->seg);
    o->seg = NULL;
}

/* ---- sgd: torch.optim.SGD (optim/sgd.h) ------------------------------------ */

static int sgd_init_ops(dt_optim *o, const dt_config *cfg, const dt_tensor_view *tensors,
                        int ntensors)
{
    (void)tensors, (void)ntensors; /* one rule for the whole vector */
    o->momentum = (float)cfg->optim.momentum;
    o->weight_decay = (float)cfg->optim.weight_decay;
    o->nesterov = cfg->optim.nesterov;
    return 0;
}

static void sgd_step_range(const dt_optim *o, size_t lo, size_t hi, float *x, const float *g,
                           float *const *state, float lr, int64_t step)
{
    (void)step;
    sgd_step_flat(hi - lo, o->momentum, o->weight_decay, o->nesterov, lr, x, g, state[0]);
}

static void sgd_step_on(const dt_optim *o, const dt_backend *be, float *x, const float *g,
                        float *const *state, float lr, int64_t step)
{
    (void)step;
    be->flat_sgd(o->n, o->momentum, o->weight_decay, o->nesterov, lr, x, g, state[0]);
}

const dt_optim_ops optim_sgd = {
    .name = "sgd",
    .nstate = 1,
    .state_names = { "momentum" }, /* the name of every checkpoint so far */
    .init = sgd_init_ops,
    .step = sgd_step_range,
    .step_backend = sgd_step_on,
};
