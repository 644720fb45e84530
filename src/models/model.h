/* The model as the trainer sees it: a small ops table over one flat
 * parameter vector, so that the runtime, the algorithms and the evaluation
 * never depend on what the network is.
 *
 * A model kind is one adapter file that fills dt_model_ops and one line in
 * the factory's table (models/model.c). The first kind is the layer DAG of
 * nn/net.h (models/net_model.c: logreg, mlp, mnist_cnn, resnet*_gn). */
#ifndef DT_MODELS_MODEL_H
#define DT_MODELS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "data/sample.h"
#include "io/settings.h"
#include "nn/net.h"

typedef struct dt_model dt_model;

/* What a forward pass reports. */
typedef struct dt_forward_result {
    double loss;            /* mean over the predictions */
    int64_t correct;        /* predictions equal to their target */
    int64_t count;          /* predictions: B for images, B*T for a language model */
} dt_forward_result;

typedef struct dt_model_ops {
    const char *kind;
    /* Activations for batches of up to B samples. */
    void (*reserve)(dt_model *m, int B);
    /* Forward over s (its shape[0] samples; every pointer in the backend's
     * memory), keeping what backward needs. train: dropout (and the like)
     * active with key (mixed with the layer). */
    dt_forward_result (*forward)(dt_model *m, const float *params, const dt_sample *s, int train,
                                 uint64_t key);
    /* Gradient of the last forward's mean loss into grads (nparams). */
    void (*backward)(dt_model *m, const float *params, float *grads);
    /* Optional (NULL: forward, then backward): a training step's forward and
     * backward queued at once, nothing read back between them (nn/net.h:
     * net_train_queue), and then what forward would have returned. */
    void (*train_queue)(dt_model *m, const float *params, const dt_sample *s, uint64_t key,
                        float *grads);
    dt_forward_result (*train_result)(dt_model *m);
    /* The initial parameters for seed: the same on every rank. */
    void (*init_params)(const dt_model *m, float *params, uint64_t seed);
    void (*free)(dt_model *m);
} dt_model_ops;

struct dt_model {
    const dt_model_ops *ops;
    const dt_backend *be;   /* whose memory and kernels the model uses */
    size_t nparams;
    int ntensors;
    const dt_tensor_view *tensors; /* (ntensors) the flat vector's tensors, in order */
    void *impl;             /* the kind's own state (models/net_model.c: the dt_net) */
    dt_forward_result last; /* model_train_queue's result where the kind has no train_queue */
};

/* What the data tells the model: the shape of a batch and the number of
 * target classes (labels, or the vocabulary). */
typedef struct dt_model_data {
    const dt_sample *batch;
    int64_t classes;
} dt_model_data;

/* The model model.name of cfg on backend be for the data; NULL after
 * dt_err_set() for an unknown name or bad options. */
dt_model *model_create(const dt_backend *be, const dt_config *cfg, const dt_model_data *data);
/* The ops, as calls. */
void model_reserve(dt_model *m, int B);
dt_forward_result model_forward(dt_model *m, const float *params, const dt_sample *s, int train,
                                uint64_t key);
void model_backward(dt_model *m, const float *params, float *grads);
/* Forward and backward of a training step: queued as one piece where the
 * model can (train_queue; model_train_result waits for it), else run at
 * once with model_train_result returning the forward's result. */
void model_train_queue(dt_model *m, const float *params, const dt_sample *s, uint64_t key,
                       float *grads);
dt_forward_result model_train_result(dt_model *m);
void model_init_params(const dt_model *m, float *params, uint64_t seed);
void model_free(dt_model *m); /* NULL: nothing */

/* The kinds (one adapter file each). */
dt_model *net_model_create(const dt_backend *be, const dt_config *cfg, const dt_model_data *data);
/* models/gpt_model.c: the GPT language model of models/gpt.h (CPU) */
extern const char *const gpt_model_names[];
dt_model *gpt_model_create(const dt_backend *be, const dt_config *cfg, const dt_model_data *data);

#endif
