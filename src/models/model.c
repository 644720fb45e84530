/* The model factory: model.name -> the kind that builds it. */
#include "models/model.h"

#include <string.h>

#include "core/error.h"
#include "models/image_nets.h"

/* One line per kind: the names it answers to and its constructor. */
static const struct {
    const char *const *names;
    dt_model *(*create)(const dt_backend *be, const dt_config *cfg, const dt_model_data *data);
} kinds[] = {
    { model_names, net_model_create },
    { gpt_model_names, gpt_model_create },
};

dt_model *model_create(const dt_backend *be, const dt_config *cfg, const dt_model_data *data)
{
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (const char *const *n = kinds[k].names; *n; n++)
            if (strcmp(*n, cfg->model.name) == 0)
                return kinds[k].create(be, cfg, data);
    dt_err_set("model.name = '%s': unknown model", cfg->model.name);
    return NULL;
}

void model_reserve(dt_model *m, int B) { m->ops->reserve(m, B); }

dt_forward_result model_forward(dt_model *m, const float *params, const dt_sample *s, int train,
                                uint64_t key)
{
    return m->ops->forward(m, params, s, train, key);
}

void model_backward(dt_model *m, const float *params, float *grads)
{
    m->ops->backward(m, params, grads);
}

void model_train_queue(dt_model *m, const float *params, const dt_sample *s, uint64_t key,
                       float *grads)
{
    if (m->ops->train_queue) {
        m->ops->train_queue(m, params, s, key, grads);
        return;
    }
    m->last = m->ops->forward(m, params, s, 1, key);
    m->ops->backward(m, params, grads);
}

dt_forward_result model_train_result(dt_model *m)
{
    return m->ops->train_queue ? m->ops->train_result(m) : m->last;
}

void model_init_params(const dt_model *m, float *params, uint64_t seed)
{
    m->ops->init_params(m, params, seed);
}

void model_free(dt_model *m)
{
    if (m)
        (m->ops->free)(m);
}
