/* dt_model over the layer DAG of nn/net.h: image classifiers, input
 * (B, C, H, W) f32, target (B) i32 labels. */
#include <stdlib.h>

#include "core/error.h"
#include "models/model.h"
#include "models/image_nets.h"

static void net_model_reserve(dt_model *m, int B) { net_reserve(m->impl, B); }

static dt_forward_result net_model_forward(dt_model *m, const float *params, const dt_sample *s,
                                           int train, uint64_t key)
{
    const int B = (int)s->input.shape[0];
    int correct = 0;
    double loss = net_forward(m->impl, params, s->input.data, s->target.data, B, train, key,
                              &correct);
    return (dt_forward_result){ .loss = loss, .correct = correct, .count = B };
}

static void net_model_backward(dt_model *m, const float *params, float *grads)
{
    net_backward(m->impl, params, grads);
}

static void net_model_train_queue(dt_model *m, const float *params, const dt_sample *s,
                                  uint64_t key, float *grads)
{
    net_train_queue(m->impl, params, s->input.data, s->target.data, (int)s->input.shape[0], key,
                    grads);
}

static dt_forward_result net_model_train_result(dt_model *m)
{
    const dt_net *n = m->impl;
    int correct = 0;
    double loss = net_train_result(m->impl, &correct);
    return (dt_forward_result){ .loss = loss, .correct = correct, .count = n->step.B };
}

static void net_model_init(const dt_model *m, float *params, uint64_t seed)
{
    net_init_params(m->impl, params, seed);
}

static void net_model_free(dt_model *m)
{
    net_free(m->impl);
    free(m);
}

static const dt_model_ops net_model_ops = {
    .kind = "net",
    .reserve = net_model_reserve,
    .forward = net_model_forward,
    .backward = net_model_backward,
    .train_queue = net_model_train_queue,
    .train_result = net_model_train_result,
    .init_params = net_model_init,
    .free = net_model_free,
};

dt_model *net_model_create(const dt_backend *be, const dt_config *cfg, const dt_model_data *data)
{
    const dt_tensor *x = &data->batch->input;
    if (x->type != DT_F32 || x->rank != 4 || data->batch->target.type != DT_I32 ||
        data->batch->target.rank != 1) {
        dt_err_set("model.name = %s takes images (B, C, H, W) with one label each; the data "
                   "gives samples of another shape", cfg->model.name);
        return NULL;
    }
    dt_net *net = model_build(be, cfg->model.name, cfg->model.hidden, cfg->model.activation,
                              (int)cfg->model.gn_groups, (int)x->shape[1], (int)x->shape[2],
                              (int)x->shape[3], (int)data->classes);
    if (!net)
        return NULL;
    net_use_graphs(net, cfg->compute.cuda_graphs);
    dt_model *m = dt_calloc(1, sizeof *m);
    *m = (dt_model){ .ops = &net_model_ops, .be = be, .nparams = net->nparams,
                     .ntensors = net->ntensors, .tensors = net->tensors, .impl = net };
    return m;
}
