/* The rank's engine: its model, the flat vectors (params, grads), their
 * device mirrors, the optimizer and the batches it trains on. The
 * algorithms' calls live here: trainer_gradient, trainer_update,
 * trainer_scale, trainer_vectors. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/watchdog.h"
#include "optim/adamw.h"
#include "engine/engine.h"
#ifdef HAVE_CUDA
#include "backend/cuda_device.h"
#endif
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#endif

double trainer_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* compute.device = cuda: the modes with device_vectors keep params, grads
 * and the optimizer's state in the device's memory, and the model uses them
 * there. The other modes keep their flat vectors on the host, so the
 * parameters go up before a forward and the gradient comes down after
 * backward, one copy each. Batches go up from pinned memory on the copy
 * stream: the next one is loaded and sent while the current step's backward
 * runs on the device. */
const float *engine_params_on_backend(dt_trainer *t, const float *x)
{
    const dt_backend *be = t->model->be;
    if (!be->device || t->dev.vectors)
        return x;
    be->to_backend(t->dev.params, x, t->n * sizeof(float));
    return t->dev.params;
}

void engine_batch_to_backend(dt_trainer *t, int64_t b, const dt_sample *h, dt_sample *d)
{
    const size_t xb = tensor_bytes(&h->input, b), yb = tensor_bytes(&h->target, b);
#ifdef HAVE_CUDA
    if (t->model->be == backend_cuda() || t->model->be == backend_cuda_bf16()) {
        cuda_upload_async(d->input.data, h->input.data, xb);
        cuda_upload_async(d->target.data, h->target.data, yb);
        return;
    }
#endif
    t->model->be->to_backend(d->input.data, h->input.data, xb);
    t->model->be->to_backend(d->target.data, h->target.data, yb);
}

#define SWAP(T, a, b) do { T s_ = (a); (a) = (b); (b) = s_; } while (0)

void trainer_gradient(dt_trainer *t, const float *x)
{
    double t0 = trainer_clock();
    dt_meter *m = &t->meter;
    watchdog_phase("compute", -1);
    if (t->gradient_fn) {
        t->gradient_fn(t, x);
        m->t_compute += trainer_clock() - t0;
        return;
    }
    const int B = t->data.B;
#ifdef DTRAIN_SIM
    /* the simulator: the step's forward and backward pass as simulated time */
    (void)x;
    sim_compute(t->rank);
    m->seen += B;
    m->batches++;
    m->images += (int64_t)B * (t->data.tokens ? t->data.shape.input.shape[1] : 1);
    m->t_compute += trainer_clock() - t0;
    watchdog_phase("communication of the algorithm's step", -1);
    return;
#endif
    /* dropout masks depend on (seed, rank, step) only: a resumed run draws
     * the same masks as the uninterrupted one */
    uint64_t key = rng_key(t->cfg->run.seed, (uint64_t)t->worker, (uint64_t)t->step, 0xD0);
    dt_batches *d = &t->data;
    dt_forward_result f;
    if (!t->model->be->device) {
        source_next(d->train, &d->cur);
        f = model_forward(t->model, x, &d->cur, 1, key);
        model_backward(t->model, x, t->grads);
    } else {
        if (d->prefetched) { // on its way since the last step's backward
            SWAP(dt_sample, d->cur, d->next);
            SWAP(dt_sample, t->dev.cur, t->dev.next);
            d->prefetched = 0;
        } else {
            source_next(d->train, &d->cur);
            engine_batch_to_backend(t, B, &d->cur, &t->dev.cur);
        }
        const float *p = engine_params_on_backend(t, x);
        float *g = t->dev.vectors ? t->grads : t->dev.grads;
        model_train_queue(t->model, p, &t->dev.cur, key, g); // queued: the host goes on
        source_get_state(d->train, d->before_prefetch);
        source_next(d->train, &d->next);
        engine_batch_to_backend(t, B, &d->next, &t->dev.next);
        d->prefetched = 1;
        f = model_train_result(t->model);
        if (!t->dev.vectors)
            t->model->be->to_host(t->grads, t->dev.grads, t->n * sizeof(float));
    }
    if (t->cfg->run.test_zero_gradients) { /* tests: only the exchanges move the models */
        if (t->dev.vectors)
            t->model->be->mem_zero(t->grads, t->n * sizeof *t->grads);
        else
            memset(t->grads, 0, t->n * sizeof *t->grads);
    }
    m->loss_sum += f.loss;
    m->correct += f.correct;
    m->seen += f.count;
    m->batches++;
    m->images += (int64_t)B * (t->data.tokens ? t->data.shape.input.shape[1] : 1);
    m->t_compute += trainer_clock() - t0;
    watchdog_beat(-1);
    watchdog_phase("communication of the algorithm's step", -1);
}

void trainer_update(dt_trainer *t, float *x)
{
    if (t->cfg->run.test_zero_gradients)
        return; /* a zero update: no momentum, no weight decay either */
    double t0 = trainer_clock();
#ifdef DTRAIN_SIM
    /* the simulator: the update's time is part of sim.compute_time */
    if (!t->gradient_fn) {
        (void)x;
        return;
    }
#endif
    if (t->cfg->optim.clip_norm > 0) /* where the vectors live */
        trainer_vectors(t)->flat_clip(t->n, t->cfg->optim.clip_norm, t->grads);
    optim_step(&t->opt, trainer_vectors(t), x, t->grads, t->lr, t->step + 1);
    t->meter.t_compute += trainer_clock() - t0;
}

float trainer_lr_at(const dt_trainer *t, double steps)
{
    double base = schedule_lr(&t->sched, steps / (double)t->steps_per_epoch);
    return (float)schedule_steps_lr(&t->lsched, (int64_t)steps, base);
}

const dt_backend *trainer_vectors(const dt_trainer *t)
{
    return t->dev.vectors ? t->model->be : backend_cpu();
}

void trainer_scale(dt_trainer *t, float *x, float a)
{
    trainer_vectors(t)->flat_scale(t->n, a, x);
}

float *engine_mirror(dt_trainer *t, int k, size_t n)
{
    if (n > t->dev.host_n[k]) {
        free(t->dev.host[k]);
        t->dev.host[k] = dt_falloc(n);
        t->dev.host_n[k] = n;
    }
    return t->dev.host[k];
}

const float *engine_on_host(dt_trainer *t, int k, const float *x, size_t n)
{
    if (!t->dev.vectors)
        return x;
    float *h = engine_mirror(t, k, n);
    t->model->be->to_host(h, x, n * sizeof(float));
    return h;
}

/* ---- setup ----------------------------------------------------------------- */

static __attribute__((unused)) const dt_backend *engine_backend(const dt_config *cfg)
{
    const int on_gpu = strcmp(cfg->compute.device, "cuda") == 0;
    // on the GPU the precision's twin (dtrain.c checked that it runs); on the
    // CPU backend_cpu_by_name applies it
    const dt_backend *be = on_gpu && backend_cuda()
                               ? backend_with_precision(backend_cuda(),
                                                        backend_precision_of(cfg->compute.precision))
                           : on_gpu ? NULL
                           : cfg->compute.test_device_memory ? backend_cpu_devmem()
                           : backend_cpu_by_name(cfg->compute.kernels);
    if (!be && on_gpu)
        dt_err_set("compute.device = cuda: this dtrain was built without CUDA");
    else if (!be)
        dt_err_set("compute.kernels = %s: this dtrain was built without oneDNN (configure "
                   "found no libdnnl-dev); use native or auto", cfg->compute.kernels);
    return be;
}

#ifdef DTRAIN_SIM
/* sim.params, else the size of the deck's model (built once, on rank 0);
 * the model itself is never run. Collective. */
int engine_create_model(dt_trainer *t)
{
    const dt_config *cfg = t->cfg;
    int64_t np = sim_config()->params;
    int built = 0;
    if (np == 0 && t->rank == 0) {
        const dt_backend *be = backend_cpu_by_name(cfg->compute.kernels);
        dt_model_data md = { .batch = &t->data.shape, .classes = t->data.classes };
        dt_model *m = !be ? NULL : model_create(be, cfg, &md);
        if (!be)
            dt_err_set("compute.kernels = %s: not built in", cfg->compute.kernels);
        built = m ? 0 : -1;
        if (m)
            np = (int64_t)m->nparams;
        model_free(m);
    }
    MPI_CHECK(MPI_Bcast(&np, 1, MPI_INT64_T, 0, t->comm));
    t->n = (size_t)np;
    return built;
}

void engine_alloc(dt_trainer *t, int device_vectors)
{
    t->params = dt_falloc(t->n);
    t->grads = dt_falloc(t->n);
    t->data.cur = sample_like(&t->data.shape, NULL);
}
#else
int engine_create_model(dt_trainer *t)
{
    const dt_backend *be = engine_backend(t->cfg);
    dt_model_data md = { .batch = &t->data.shape, .classes = t->data.classes };
    t->model = be ? model_create(be, t->cfg, &md) : NULL;
    if (!t->model)
        return -1;
    t->n = t->model->nparams;
    return 0;
}

static const dt_backend *alloc_be; /* the backend of the pinned allocations below */
static void *host_alloc(size_t bytes) { return alloc_be->host_alloc(bytes); }
static void *dev_alloc(size_t bytes) { return alloc_be->mem_alloc(bytes); }

void engine_alloc(dt_trainer *t, int device_vectors)
{
    const dt_config *cfg = t->cfg;
    const dt_backend *be = t->model->be;
    /* device vectors where the mode allows them and the optimizer (SGD,
     * AdamW) and the clipping step on the backend without host work */
    const dt_optim_ops *ops = optim_find(cfg->optim.name);
    t->dev.vectors = be->device && device_vectors && ops && ops->step_backend &&
                     !(cfg->optim.clip_norm > 0 && !be->flat_clip);
    if (t->dev.vectors) { /* initialized on the host, then sent up once */
        t->params = be->mem_alloc(t->n * sizeof(float));
        t->grads = be->mem_alloc(t->n * sizeof(float));
        float *h = engine_mirror(t, 0, t->n);
        model_init_params(t->model, h, cfg->run.seed);
        be->to_backend(t->params, h, t->n * sizeof(float));
    } else {
        t->params = dt_falloc(t->n);
        t->grads = dt_falloc(t->n);
        model_init_params(t->model, t->params, cfg->run.seed);
    }
    model_reserve(t->model, t->data.B);
    if (be->device) {
        alloc_be = be;
        t->data.cur = sample_like(&t->data.shape, host_alloc);
        t->data.next = sample_like(&t->data.shape, host_alloc);
        t->dev.cur = sample_like(&t->data.shape, dev_alloc);
        t->dev.next = sample_like(&t->data.shape, dev_alloc);
        if (!t->dev.vectors) {
            t->dev.params = be->mem_alloc(t->n * sizeof(float));
            t->dev.grads = be->mem_alloc(t->n * sizeof(float));
        }
    } else {
        t->data.cur = sample_like(&t->data.shape, NULL);
    }
}
#endif

int engine_create_optim(dt_trainer *t)
{
    /* with device vectors the state lives in the backend's memory, zero-filled */
    const dt_model *m = t->model;
    const dt_optim_ops *ops = optim_find(t->cfg->optim.name);
    if (!ops)
        return dt_err_prefix("optim.name");
    return optim_init(&t->opt, ops, t->cfg, t->n, m ? m->tensors : NULL, m ? m->ntensors : 0,
                      t->dev.vectors ? m->be : NULL);
}

static void sample_free_with(dt_sample *s, void (*release)(void *))
{
    release(s->input.data);
    release(s->target.data);
    s->input.data = s->target.data = NULL;
}

void engine_free(dt_trainer *t)
{
    const dt_backend *be = t->model ? t->model->be : NULL;
    optim_free(&t->opt, t->dev.vectors ? be : NULL);
    if (be && be->device) {
        if (t->dev.vectors) {
            be->mem_free(t->params);
            be->mem_free(t->grads);
            t->params = t->grads = NULL;
        }
        be->mem_free(t->dev.params);
        be->mem_free(t->dev.grads);
        if (t->dev.cur.input.data) {
            sample_free_with(&t->dev.cur, be->mem_free);
            sample_free_with(&t->dev.next, be->mem_free);
            sample_free_with(&t->data.cur, be->host_free);
            sample_free_with(&t->data.next, be->host_free);
        }
    }
    model_free(t->model);
    free(t->params);
    free(t->grads);
    free(t->data.cur.input.data);
    free(t->data.cur.target.data);
    for (int k = 0; k < 16; k++)
        free(t->dev.host[k]);
    source_free(t->data.train);
    source_free(t->data.test);
    transport_free(t->tp);
}
