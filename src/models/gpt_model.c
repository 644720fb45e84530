/* dt_model over the GPT language model of models/gpt.h: input (B, T) i32
 * tokens, target (B, T) i32 next tokens; the loss and the accuracy count
 * every position (B * T predictions). On the CPU backends models/gpt.c, whose
 * precision (compute.precision) picks fp32 or bf16 products; on a device
 * backend models/gpt_backend.c, at the backend's precision. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "models/gpt.h"
#include "models/gpt_backend.h"
#include "models/model.h"

static void gpt_model_reserve(dt_model *m, int B) { gpt_reserve(m->impl, B); }

static dt_forward_result gpt_model_forward(dt_model *m, const float *params, const dt_sample *s,
                                           int train, uint64_t key)
{
    const int B = (int)s->input.shape[0];
    int64_t correct = 0;
    double loss = gpt_forward(m->impl, params, s->input.data, s->target.data, B, train, key,
                              &correct);
    return (dt_forward_result){ .loss = loss, .correct = correct,
                                .count = (int64_t)B * s->input.shape[1] };
}

static void gpt_model_backward(dt_model *m, const float *params, float *grads)
{
    gpt_backward(m->impl, params, grads);
}

static void gpt_model_init(const dt_model *m, float *params, uint64_t seed)
{
    gpt_init_params(m->impl, params, seed);
}

static void gpt_model_free(dt_model *m)
{
    gpt_free(m->impl);
    free(m);
}

static const dt_model_ops gpt_model_ops = {
    .kind = "gpt",
    .reserve = gpt_model_reserve,
    .forward = gpt_model_forward,
    .backward = gpt_model_backward,
    .init_params = gpt_model_init,
    .free = gpt_model_free,
};

/* the same over a device backend's table */
static void gpt_dev_reserve(dt_model *m, int B) { gpt_be_reserve(m->impl, B); }

static dt_forward_result gpt_dev_forward(dt_model *m, const float *params, const dt_sample *s,
                                         int train, uint64_t key)
{
    const int B = (int)s->input.shape[0];
    int64_t correct = 0;
    double loss = gpt_be_forward(m->impl, params, s->input.data, s->target.data, B, train, key,
                                 &correct);
    return (dt_forward_result){ .loss = loss, .correct = correct,
                                .count = (int64_t)B * s->input.shape[1] };
}

static void gpt_dev_backward(dt_model *m, const float *params, float *grads)
{
    gpt_be_backward(m->impl, params, grads);
}

static void gpt_dev_train_queue(dt_model *m, const float *params, const dt_sample *s,
                                uint64_t key, float *grads)
{
    gpt_be_train_queue(m->impl, params, s->input.data, s->target.data, (int)s->input.shape[0],
                       key, grads);
}

static dt_forward_result gpt_dev_train_result(dt_model *m)
{
    int64_t correct = 0, count = 0;
    const double loss = gpt_be_train_result(m->impl, &correct, &count);
    return (dt_forward_result){ .loss = loss, .correct = correct, .count = count };
}

static void gpt_dev_init(const dt_model *m, float *params, uint64_t seed)
{
    gpt_init_params(gpt_be_shape(m->impl), params, seed);
}

static void gpt_dev_free(dt_model *m)
{
    gpt_be_free(m->impl);
    free(m);
}

static const dt_model_ops gpt_dev_ops = {
    .kind = "gpt",
    .reserve = gpt_dev_reserve,
    .forward = gpt_dev_forward,
    .backward = gpt_dev_backward,
    .train_queue = gpt_dev_train_queue,
    .train_result = gpt_dev_train_result,
    .init_params = gpt_dev_init,
    .free = gpt_dev_free,
};

const char *const gpt_model_names[] = { "gpt", NULL };

dt_model *gpt_model_create(const dt_backend *be, const dt_config *cfg, const dt_model_data *data)
{
    const dt_tensor *x = &data->batch->input, *y = &data->batch->target;
    if (x->type != DT_I32 || x->rank != 2 || y->type != DT_I32 || y->rank != 2 ||
        y->shape[1] != x->shape[1]) {
        dt_err_set("model.name = gpt takes token sequences (B, T) with (B, T) next tokens "
                   "(data.name = text or tokens); the data gives samples of another shape");
        return NULL;
    }
    if (x->shape[1] != cfg->model.block_size) {
        dt_err_set("model.block_size = %lld but the data gives windows of %lld tokens",
                   (long long)cfg->model.block_size, (long long)x->shape[1]);
        return NULL;
    }
    int64_t V = cfg->model.vocab_size > 0 ? cfg->model.vocab_size : data->classes;
    if (V < data->classes || V > (1 << 24)) {
        dt_err_set("model.vocab_size = %lld: the data's tokens need at least %lld (and at most "
                   "2^24)", (long long)cfg->model.vocab_size, (long long)data->classes);
        return NULL;
    }
    dt_gpt_config gc = { .vocab = (int)V, .block = (int)cfg->model.block_size,
                         .n_layer = (int)cfg->model.n_layer, .n_head = (int)cfg->model.n_head,
                         .n_embd = (int)cfg->model.n_embd, .dropout = (float)cfg->model.dropout,
                         .precision = be->precision };
    dt_model *m;
    if (be->device) {
        dt_gpt_be *d = gpt_be_create(&gc, be);
        if (!d)
            return NULL;
        gpt_be_use_graphs(d, cfg->compute.cuda_graphs);
        const dt_gpt *g = gpt_be_shape(d);
        m = dt_calloc(1, sizeof *m);
        *m = (dt_model){ .ops = &gpt_dev_ops, .be = be, .nparams = gpt_nparams(g),
                         .ntensors = gpt_ntensors(g), .tensors = gpt_tensors(g), .impl = d };
        return m;
    }
    dt_gpt *g = gpt_create(&gc);
    if (!g)
        return NULL;
    m = dt_calloc(1, sizeof *m);
    *m = (dt_model){ .ops = &gpt_model_ops, .be = be, .nparams = gpt_nparams(g),
                     .ntensors = gpt_ntensors(g), .tensors = gpt_tensors(g), .impl = g };
    return m;
}
