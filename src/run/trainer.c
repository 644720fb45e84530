#include "config.h"

#include "run/trainer.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/build_info.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/runlog.h"
#include "models/models.h"
#include "run/roles.h"
#include "run/finite.h"
#include "run/stop.h"
#include "core/watchdog.h"
#ifdef HAVE_CUDA
#include "backend/cuda_device.h"
#endif
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#define DT_SIMULATED 1 /* vectors without meaning: no scans of their values */
#else
#define DT_SIMULATED 0
#endif

/* "[NAME] " in front of everything a rank group prints; "" without groups. */
static char group_tag[DT_GROUP_NAME_MAX + 4] = "";
#define say(...) say_(__VA_ARGS__, "")
#define say_(fmt, ...) printf("%s" fmt "%s", group_tag, __VA_ARGS__)

/* The newest checkpoint this run wrote or resumed from, for messages. */
static char last_ckpt[DT_PATH_MAX + 64] = "";

/* ---- helpers used by the algorithms -------------------------------------- */

double trainer_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* compute.device = cuda: the modes with device_vectors keep params, grads
 * and momentum in the device's memory, and the network uses them there. The
 * other modes keep their flat vectors on the host, so the parameters go up
 * before a forward and the gradient comes down after backward, one copy
 * each. Batches go up from pinned memory on the copy stream: the next one is
 * loaded and sent while the current step's backward runs on the device. */
static const float *params_on_backend(dt_trainer *t, const float *x)
{
    const dt_backend *be = t->net->be;
    if (!be->device || t->dev_vectors)
        return x;
    be->to_backend(t->dparams, x, t->n * sizeof(float));
    return t->dparams;
}

static void batch_to_backend(dt_trainer *t, int B, const float *hx, const int32_t *hy, float *dx,
                             int32_t *dy)
{
    const size_t xb = (size_t)B * t->train.c * t->train.h * t->train.w * sizeof(float);
#ifdef HAVE_CUDA
    if (t->net->be == backend_cuda()) {
        cuda_upload_async(dx, hx, xb);
        cuda_upload_async(dy, hy, (size_t)B * sizeof(int32_t));
        return;
    }
#endif
    t->net->be->to_backend(dx, hx, xb);
    t->net->be->to_backend(dy, hy, (size_t)B * sizeof(int32_t));
}

#define SWAP(T, a, b) do { T s_ = (a); (a) = (b); (b) = s_; } while (0)

void trainer_gradient(dt_trainer *t, const float *x)
{
    double t0 = trainer_clock();
    watchdog_phase("compute", -1);
    if (t->gradient_fn) {
        t->gradient_fn(t, x);
        t->t_compute += trainer_clock() - t0;
        return;
    }
#ifdef DTRAIN_SIM
    /* the simulator: the step's forward and backward pass as simulated time */
    (void)x;
    sim_compute(t->rank);
    t->seen += t->B;
    t->batches++;
    t->images += t->B;
    t->t_compute += trainer_clock() - t0;
    watchdog_phase("communication of the algorithm's step", -1);
    return;
#endif
    /* dropout masks depend on (seed, rank, step) only: a resumed run draws
     * the same masks as the uninterrupted one */
    uint64_t key = rng_key(t->cfg->run.seed, (uint64_t)t->worker, (uint64_t)t->step, 0xD0);
    int correct = 0;
    double loss;
    if (!t->net->be->device) {
        loader_next(&t->loader, t->x, t->y);
        loss = net_forward(t->net, x, t->x, t->y, t->B, 1, key, &correct);
        net_backward(t->net, x, t->grads);
    } else {
        if (t->prefetched) { // on its way since the last step's backward
            SWAP(float *, t->x, t->px);
            SWAP(int32_t *, t->y, t->py);
            SWAP(float *, t->dx, t->dpx);
            SWAP(int32_t *, t->dy, t->dpy);
            t->prefetched = 0;
        } else {
            loader_next(&t->loader, t->x, t->y);
            batch_to_backend(t, t->B, t->x, t->y, t->dx, t->dy);
        }
        const float *p = params_on_backend(t, x);
        float *g = t->dev_vectors ? t->grads : t->dgrads;
        loss = net_forward(t->net, p, t->dx, t->dy, t->B, 1, key, &correct);
        net_backward(t->net, p, g); // queued: the host goes on
        loader_get_state(&t->loader, &t->before_prefetch);
        loader_next(&t->loader, t->px, t->py);
        batch_to_backend(t, t->B, t->px, t->py, t->dpx, t->dpy);
        t->prefetched = 1;
        if (!t->dev_vectors)
            t->net->be->to_host(t->grads, t->dgrads, t->n * sizeof(float));
    }
    if (t->cfg->run.test_zero_gradients) { /* tests: only the exchanges move the models */
        if (t->dev_vectors)
            t->net->be->mem_zero(t->grads, t->n * sizeof *t->grads);
        else
            memset(t->grads, 0, t->n * sizeof *t->grads);
    }
    t->loss_sum += loss;
    t->correct += correct;
    t->seen += t->B;
    t->batches++;
    t->images += t->B;
    t->t_compute += trainer_clock() - t0;
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
    trainer_vectors(t)->flat_sgd(t->n, t->opt.momentum, t->opt.weight_decay, t->opt.nesterov,
                                 t->lr, x, t->grads, t->opt.v);
    t->t_compute += trainer_clock() - t0;
}

const dt_backend *trainer_vectors(const dt_trainer *t)
{
    return t->dev_vectors ? t->net->be : backend_cpu();
}

void trainer_scale(dt_trainer *t, float *x, float a)
{
    trainer_vectors(t)->flat_scale(t->n, a, x);
}

/* Host scratch k of n floats: the mirror of a vector in the backend's
 * memory (dev_vectors), valid from the to_host that fills it. */
static float *mirror(dt_trainer *t, int k, size_t n)
{
    if (n > t->mirror_n[k]) {
        free(t->mirror[k]);
        t->mirror[k] = dt_falloc(n);
        t->mirror_n[k] = n;
    }
    return t->mirror[k];
}

/* The host view of a vector: itself, or its mirror k filled from the backend. */
static const float *on_host(dt_trainer *t, int k, const float *x, size_t n)
{
    if (!t->dev_vectors)
        return x;
    float *h = mirror(t, k, n);
    t->net->be->to_host(h, x, n * sizeof(float));
    return h;
}

/* ---- agreement: every rank leaves with the same verdict ------------------ */

/* Returns 0 if every rank's status is 0; otherwise -1 everywhere. A failing
 * rank prints its own message only if it is the lowest failing rank, so the
 * job log shows the cause once. */
static int agree(MPI_Comm comm, int rank, int status, const char *what)
{
    int mine = status ? rank : 1 << 30, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
    if (first == 1 << 30)
        return 0;
    if (first == rank)
        fprintf(stderr, "dtrain: %serror on rank %d: %s%s%s\n", group_tag, rank, what,
                *what ? ": " : "", dt_err_msg());
    return -1;
}

static int mkdir_p(const char *path)
{
    char buf[DT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return dt_err_set("cannot create directory '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return dt_err_set("cannot create directory '%s': %s", buf, strerror(errno));
    return 0;
}

/* Rank 0 prepares run.output_dir: created if missing, writable, and not
 * holding an earlier run unless resuming or overwriting. */
static int prepare_output(const dt_config *cfg, int rank)
{
    if (rank != 0)
        return 0;
    const char *dir = cfg->run.output_dir;
    if (mkdir_p(dir) != 0)
        return dt_err_prefix("run.output_dir = '%s'", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return dt_err_set("run.output_dir = '%s' is not writable: %s", dir, strerror(errno));
    char probe[DT_PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.dtrain-write-test", dir);
    FILE *f = fopen(probe, "w");
    if (!f)
        return dt_err_set("run.output_dir = '%s' is not writable: %s", dir, strerror(errno));
    fclose(f);
    unlink(probe);
#ifdef DTRAIN_SIM
    /* sim.csv gathers one row per run: a new run appends to it */
    return 0;
#endif
    char rec[DT_PATH_MAX + 16];
    snprintf(rec, sizeof rec, "%s/run.h5", dir);
    if (!cfg->run.resume && !cfg->run.overwrite && access(rec, F_OK) == 0)
        return dt_err_set("run.output_dir = '%s' already holds a run (%s); set run.resume = true "
                          "to continue it or run.overwrite = true to replace it", dir, rec);
    return 0;
}

#ifdef DTRAIN_SIM
/* The simulator loads no data: the sample shape (for the model's size) and
 * the epoch's length come from data.name and the deck. */
static int load_data(dt_trainer *t)
{
    const dt_config *c = t->cfg;
    static const struct { const char *name; int c, h, w, classes; int64_t n; } known[] = {
        { "fashion-mnist", 1, 28, 28, 10, 60000 }, { "mnist", 1, 28, 28, 10, 60000 },
        { "cifar10", 3, 32, 32, 10, 50000 },
    };
    dt_dataset *d = &t->train;
    if (!strcmp(c->data.name, "synthetic")) {
        d->c = (int)c->data.synthetic_channels;
        d->h = (int)c->data.synthetic_height;
        d->w = (int)c->data.synthetic_width;
        d->classes = (int)c->data.synthetic_classes;
        d->n = c->data.synthetic_train;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(c->data.name, known[i].name)) {
            d->c = known[i].c, d->h = known[i].h, d->w = known[i].w;
            d->classes = known[i].classes, d->n = known[i].n;
        }
    if (d->n <= 0)
        return dt_err_set("data.name = '%s': unknown to the simulator", c->data.name);
    return 0;
}
#else
static int load_data(dt_trainer *t)
{
    const dt_config *c = t->cfg;
    if (strcmp(c->data.name, "synthetic") == 0) {
        dataset_synthetic(&t->train, c->data.synthetic_train, (int)c->data.synthetic_channels,
                          (int)c->data.synthetic_height, (int)c->data.synthetic_width,
                          (int)c->data.synthetic_classes, (float)c->data.synthetic_noise,
                          c->run.seed, 0);
        dataset_synthetic(&t->test, c->data.synthetic_test, (int)c->data.synthetic_channels,
                          (int)c->data.synthetic_height, (int)c->data.synthetic_width,
                          (int)c->data.synthetic_classes, (float)c->data.synthetic_noise,
                          c->run.seed, 1);
    } else if (dataset_load_named(&t->train, &t->test, c->data.name, c->data.path) != 0) {
        return dt_err_prefix("data.path = '%s'", c->data.path);
    }
    if (c->data.test_limit > 0 && c->data.test_limit < t->test.n)
        t->test.n = c->data.test_limit;

    int rc;
    if (strcmp(c->data.partition, "class-skew") == 0)
        rc = partition_class_skew(&t->train, t->worker, t->nworkers, c->run.seed,
                                  (int)c->data.skew_classes, (int)c->data.skew_shift, &t->shard);
    else if (strcmp(c->data.partition, "blocks") == 0)
        rc = partition_blocks(&t->train, t->worker, t->nworkers, c->data.block_count,
                              c->data.block_size, &t->shard);
    else
        rc = partition_iid(&t->train, t->worker, t->nworkers, c->run.seed, &t->shard);
    if (rc != 0)
        return dt_err_prefix("data.partition = '%s'", c->data.partition);
    if (t->shard.n < t->B)
        return dt_err_set("rank %d's shard holds %lld samples, fewer than optim.batch_size = %d",
                          t->rank, (long long)t->shard.n, t->B);
    return 0;
}
#endif

/* ---- evaluation ---------------------------------------------------------- */

void trainer_evaluate(dt_trainer *t, const float *params, double *loss, double *acc)
{
#ifdef DTRAIN_SIM
    /* the simulator has neither a network nor data: nothing is evaluated */
    (void)t, (void)params;
    *loss = *acc = NAN;
    return;
#endif
    double lsum = 0;
    int64_t hits = 0, seen = 0;
    const size_t per = (size_t)t->test.c * t->test.h * t->test.w;
    const int dev = t->net->be->device;
    const float *p = params_on_backend(t, params);
    for (int64_t i = 0; i < t->test.n; i += t->B) {
        int b = (int)(t->test.n - i < t->B ? t->test.n - i : t->B);
        for (int j = 0; j < b; j++) {
            dataset_sample(&t->test, i + j, t->x + (size_t)j * per);
            t->y[j] = t->test.labels[i + j];
        }
        int correct = 0;
        watchdog_phase("evaluation", -1);
        if (dev)
            batch_to_backend(t, b, t->x, t->y, t->dx, t->dy);
        lsum += net_forward(t->net, p, dev ? t->dx : t->x, dev ? t->dy : t->y, b, 0, 0,
                            &correct) * b;
        watchdog_beat(-1);
        hits += correct;
        seen += b;
    }
    *loss = seen ? lsum / (double)seen : 0;
    *acc = seen ? (double)hits / (double)seen : 0;
    watchdog_phase("a collective (combining or recording an evaluation)", -1);
}

/* Per-rank test metrics, plus the averaged model and the consensus distance
 * (1/n) sum_i ||z_i - zbar||^2 (REFERENCE.md §0). */
static void run_eval(dt_trainer *t, dt_runlog *log, double wall, double *mean_acc)
{
#ifdef DTRAIN_SIM
    /* no evaluation in the simulator (its vectors hold no model) */
    (void)log, (void)wall;
    *mean_acc = t->avg_model_acc = NAN;
    return;
#endif
    const float *z = t->algo->model(t);
    /* the epoch of the run: asynchronous ranks count their own steps (a
     * parameter server its clock), so they take the group's estimate */
    double steps = t->algo->async ? t->global_step : (double)t->step;
    dt_eval_row row = { .step = t->algo->async ? llround(steps) : t->step,
                        .epoch = steps / (double)t->steps_per_epoch,
                        .wall = wall };
    trainer_evaluate(t, z, &row.loss, &row.accuracy);

    /* the gradient buffer is free between steps: it holds the sum, then
     * (on the host, or in the host mirror with device vectors) the average */
    float *zsum = t->grads;
    if (t->dev_vectors)
        t->net->be->mem_copy(zsum, z, t->n * sizeof *zsum);
    else
        memcpy(zsum, z, t->n * sizeof *zsum);
    t->tp->allreduce_sum(t->tp, zsum, t->n);
    const float *hz = on_host(t, 0, z, t->n);
    float *avg = (float *)on_host(t, 1, zsum, t->n);
    double dist = 0;
    for (size_t i = 0; i < t->n; i++) {
        avg[i] /= (float)t->nranks;
        double d = (double)hz[i] - avg[i];
        dist += d * d;
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &dist, 1, MPI_DOUBLE, MPI_SUM, t->comm));
    dist /= t->nranks;
    double avg_loss = row.loss, avg_acc = row.accuracy;
    if (t->algo->decentralized && t->dev_vectors) {
        t->net->be->to_backend(zsum, avg, t->n * sizeof *avg);
        trainer_evaluate(t, zsum, &avg_loss, &avg_acc);
    } else if (t->algo->decentralized)
        trainer_evaluate(t, avg, &avg_loss, &avg_acc);
    else { /* replicas are identical: the average is every rank's model */
        MPI_CHECK(MPI_Bcast(&avg_acc, 1, MPI_DOUBLE, 0, t->comm));
        MPI_CHECK(MPI_Bcast(&avg_loss, 1, MPI_DOUBLE, 0, t->comm));
    }
    runlog_append_eval(log, &row, avg_loss, avg_acc, dist);
    t->avg_model_acc = avg_acc;
    double sum = row.accuracy;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, t->comm));
    *mean_acc = sum / t->nranks;
    if (t->rank == 0) {
        say("eval  step %lld  epoch %.2f  test accuracy %.2f%% (mean over ranks)  "
               "averaged model %.2f%%  test loss %.4f  consensus %.3g\n",
               (long long)row.step, row.epoch, 100 * *mean_acc, 100 * avg_acc,
               row.loss, dist);
        fflush(stdout);
    }
}

/* ---- logging ------------------------------------------------------------- */

static void fmt_eta(char *buf, size_t len, double s)
{
    if (s < 0 || !isfinite(s))
        snprintf(buf, len, "?");
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

/* This rank's /train row for the interval since the last one; starts the
 * next interval. */
static dt_train_row take_row(dt_trainer *t)
{
    dt_train_row row = {
        .step = t->step, .epoch = (double)t->step / (double)t->steps_per_epoch,
        .wall = trainer_clock() - t->wall_start,
        .loss = t->batches ? t->loss_sum / t->batches : 0,
        .accuracy = t->seen ? (double)t->correct / t->seen : 0, .lr = t->lr,
        .compute_time = t->t_compute, .comm_time = t->t_comm, .wait_time = t->t_wait,
        .images = t->images, .weight = t->weight, .bytes_sent = t->bytes_sent,
    };
    t->run_compute += t->t_compute;
    t->run_comm += t->t_comm + t->t_wait;
    t->loss_sum = t->t_compute = t->t_comm = t->t_wait = 0;
    t->correct = t->seen = t->batches = 0;
    return row;
}

static void log_train(dt_trainer *t, dt_runlog *log, double *last_wall, int64_t *last_images)
{
    dt_train_row row = take_row(t);
    const double wall = row.wall;
    runlog_append_train(log, &row);
    /* progress line: totals over ranks */
    double v[5] = { row.loss, row.accuracy, (double)(t->images - *last_images),
                    row.comm_time + row.wait_time,
                    row.compute_time + row.comm_time + row.wait_time };
    MPI_CHECK(MPI_Reduce(t->rank ? v : MPI_IN_PLACE, v, 5, MPI_DOUBLE, MPI_SUM, 0, t->comm));
    if (t->rank == 0) {
        double dt = wall - *last_wall, rate = dt > 0 ? v[2] / dt : 0;
        char eta[32];
        fmt_eta(eta, sizeof eta, (double)(t->total_steps - t->step) * dt /
                                     (double)(t->cfg->run.log_every));
        say("step %lld/%lld  epoch %.2f  loss %.4f  acc %.2f%%  %.0f img/s  comm %.0f%%  ETA %s\n",
               (long long)t->step, (long long)t->total_steps, row.epoch,
               v[0] / t->nranks, 100 * v[1] / t->nranks, rate,
               v[4] > 0 ? 100 * v[3] / v[4] : 0.0, eta);
        fflush(stdout);
    }
    *last_wall = wall;
    *last_images = t->images;
}

/* ---- checkpoints --------------------------------------------------------- */

/* Everything besides the float arrays that a bit-exact resume needs. */
typedef struct resume_blob {
    int64_t step;
    int64_t images;
    int64_t bytes_sent;
    double wall;
    dt_loader_state loader;
} resume_blob;

static void ckpt_dir(const dt_trainer *t, char *buf, size_t len)
{
    snprintf(buf, len, "%s/checkpoints", t->cfg->run.output_dir);
}

static int ckpt_arrays(dt_trainer *t, dt_ckpt_array *a, int max)
{
    a[0] = (dt_ckpt_array){ "params", t->params, t->n };
    a[1] = (dt_ckpt_array){ "momentum", t->opt.v, t->n };
    int k = 2;
    if (t->algo->state)
        k += t->algo->state(t, a + 2, max - 2);
    return k;
}

/* ckpt_arrays with host data: with device vectors each array's mirror,
 * filled from the backend when down is set. dev (NULL: not wanted) gets the
 * arrays themselves: a restore reads into the mirrors, then sends them to
 * dev's. (algo->state may fill its arrays as it is called: it is called
 * once per write or read.) */
static int ckpt_host_arrays(dt_trainer *t, dt_ckpt_array *a, int max, int down,
                            dt_ckpt_array *dev)
{
    int na = ckpt_arrays(t, a, max);
    for (int k = 0; k < na; k++) {
        if (dev)
            dev[k] = a[k];
        if (t->dev_vectors)
            a[k].data = down ? (float *)on_host(t, k, a[k].data, a[k].n) : mirror(t, k, a[k].n);
    }
    return na;
}

#ifndef DTRAIN_SIM /* the simulator writes no checkpoints */
static dt_ckpt_meta ckpt_meta(const dt_trainer *t)
{
    dt_ckpt_meta m = { .step = t->step, .epoch = t->step / t->steps_per_epoch,
                       .nranks = t->nranks, .nparams = (int64_t)t->n };
    snprintf(m.model, sizeof m.model, "%s", t->cfg->model.name);
    snprintf(m.mode, sizeof m.mode, "%s", t->cfg->algorithm.mode);
    return m;
}
#endif

/* ---- non-finite values (run.check_finite) ---------------------------------- */

/* The first NaN/Inf this rank saw, kept until the group agrees to stop. */
static struct {
    int bad;
    int64_t step;
    char what[320];
} nonfinite;

static void nonfinite_note(int64_t step, const char *what)
{
    if (nonfinite.bad)
        return;
    nonfinite.bad = 1;
    nonfinite.step = step;
    snprintf(nonfinite.what, sizeof nonfinite.what, "%s", what);
}

/* Looks for NaN/Inf in this rank's checkpoint arrays (parameters, momentum,
 * algorithm state); notes the first. */
static void nonfinite_scan(dt_trainer *t, const dt_ckpt_array *a, int na)
{
    for (int i = 0; i < na && !nonfinite.bad; i++)
        if (finite_count_bad(a[i].data, a[i].n, NULL)) {
            char what[300];
            finite_describe(what, sizeof what, a[i].name, a[i].data, a[i].n);
            nonfinite_note(t->step, what);
        }
}

/* Collective. 0 if no rank of the group has seen a non-finite value; else
 * the lowest such rank prints the one line and DT_EXIT_NONFINITE is
 * returned everywhere. */
static int nonfinite_agree(dt_trainer *t)
{
    int mine = nonfinite.bad ? t->rank : 1 << 30, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, t->comm));
    if (first == 1 << 30)
        return 0;
    if (first == t->rank) {
        fprintf(stderr, "dtrain: %snon-finite value at step %lld on rank %d: %s; every rank "
                        "stops at step %lld (exit status %d, run.check_finite); last good "
                        "checkpoint: %s\n",
                group_tag, (long long)nonfinite.step, t->rank, nonfinite.what,
                (long long)t->step, DT_EXIT_NONFINITE,
                last_ckpt[0] ? last_ckpt : "none written by this run");
        fflush(stderr);
    }
    return DT_EXIT_NONFINITE;
}

/* Collective. 0 if written; DT_EXIT_NONFINITE, with nothing written, if
 * run.check_finite finds NaN or Inf on any rank; 1 if the write failed
 * (every rank has printed its line; the previous checkpoint is intact). */
static int save_checkpoint(dt_trainer *t)
{
#ifdef DTRAIN_SIM
    (void)t; /* the simulator writes no checkpoints (sim_check) */
    return 0;
#else
    char dir[DT_PATH_MAX + 16];
    ckpt_dir(t, dir, sizeof dir);
    dt_ckpt_array a[16];
    int na = ckpt_host_arrays(t, a, 16, 1, NULL);
    if (t->cfg->run.check_finite) {
        nonfinite_scan(t, a, na);
        if (nonfinite_agree(t) != 0)
            return DT_EXIT_NONFINITE;
    }
    watchdog_phase("checkpoint I/O", -1);
    resume_blob b = { .step = t->step, .images = t->images, .bytes_sent = t->bytes_sent,
                      .wall = trainer_clock() - t->wall_start };
    if (t->prefetched) // the batch loaded ahead is loaded again after a resume
        b.loader = t->before_prefetch;
    else
        loader_get_state(&t->loader, &b.loader);
    dt_ckpt_meta m = ckpt_meta(t);
    char written[DT_PATH_MAX + 64];
    if (checkpoint_write(t->comm, dir, &m, a, na, &b, sizeof b,
                         (int)t->cfg->run.checkpoint_keep, written, sizeof written) != 0) {
        fprintf(stderr, "dtrain: %srank %d: %s; %s%s\n", group_tag, t->rank, dt_err_msg(),
                last_ckpt[0] ? "intact: " : "no earlier checkpoint of this run",
                last_ckpt);
        fflush(stderr);
        return 1;
    }
    snprintf(last_ckpt, sizeof last_ckpt, "%s", written);
    watchdog_beat(-1);
    if (t->rank == 0) {
        if (t->algo->async) /* the file is named by rank 0's own step */
            say("checkpoint at the group's step %.0f (rank 0: step %lld) written to %s\n",
                t->global_step, (long long)t->step, dir);
        else
            say("checkpoint step %lld written to %s\n", (long long)t->step, dir);
        fflush(stdout);
    }
    return 0;
#endif
}

#ifndef DTRAIN_SIM
/* Appends "; " and text to the buffer s (len bytes), truncating. */
static void append(char *s, size_t len, const char *text)
{
    size_t used = strlen(s);
    if (used + 1 < len)
        snprintf(s + used, len - used, "%s%s", used ? "; " : "", text);
}
#endif

/* Returns 1 if resumed, 0 if there was nothing to resume, -1 on error.
 * A checkpoint that cannot be used (truncated, damaged, written by another
 * model, rank count or mode) is skipped for the next older one; rank 0
 * prints each skip, and `skipped` (the same on every rank) says what was
 * passed over and why, for the run record. */
static int restore_checkpoint(dt_trainer *t, char *skipped, size_t slen)
{
#ifdef DTRAIN_SIM
    (void)t, (void)slen; /* the simulator does not resume (sim_check) */
    skipped[0] = '\0';
    return 0;
#else
    char dir[DT_PATH_MAX + 16], path[DT_PATH_MAX + 64];
    ckpt_dir(t, dir, sizeof dir);
    skipped[0] = '\0';
    watchdog_phase("checkpoint I/O", -1);
    if (!checkpoint_find_latest(t->comm, dir, path, sizeof path))
        return 0;
    if (checkpoint_find_note()[0]) {
        append(skipped, slen, checkpoint_find_note());
        if (t->rank == 0)
            fprintf(stderr, "dtrain: %sresume: %s; trying the newest checkpoint file\n",
                    group_tag, checkpoint_find_note());
    }
    dt_ckpt_array a[16], dev[16];
    int na = ckpt_host_arrays(t, a, 16, 0, dev);
    dt_ckpt_meta want = ckpt_meta(t), got;
    resume_blob b;
    while (checkpoint_read(t->comm, path, &want, &got, a, na, &b, sizeof b) != 0) {
        /* the pointer to an older intact file is this loop's job */
        char why[2048];
        snprintf(why, sizeof why, "%s", dt_err_msg());
        char *tail = strstr(why, "; the previous checkpoint ");
        if (!tail)
            tail = strstr(why, "; no earlier intact checkpoint");
        if (tail)
            *tail = '\0';
        char line[DT_PATH_MAX + 2200];
        snprintf(line, sizeof line, "skipped %s: %s", path, why);
        append(skipped, slen, line);
        if (t->rank == 0) {
            fprintf(stderr, "dtrain: %sresume: %s\n", group_tag, line);
            fflush(stderr);
        }
        if (!checkpoint_find_older(t->comm, dir, path, path, sizeof path)) {
            dt_err_set("run.resume = true: no intact checkpoint of this run in %s (%s)", dir,
                       skipped);
            return -1;
        }
    }
    for (int k = 0; k < na && t->dev_vectors; k++)
        t->net->be->to_backend(dev[k].data, a[k].data, a[k].n * sizeof(float));
    snprintf(last_ckpt, sizeof last_ckpt, "%s", path);
    t->step = b.step;
    if (t->algo->resumed)
        t->algo->resumed(t);
    t->images = b.images;
    t->bytes_sent = b.bytes_sent;
    t->wall_start = trainer_clock() - b.wall;
    loader_set_state(&t->loader, &b.loader);
    t->prefetched = 0;
    if (t->rank == 0) {
        say("resumed from %s at step %lld\n", path, (long long)t->step);
        fflush(stdout);
    }
    return 1;
#endif
}

/* <output_dir>/deck.ini: the effective deck, beside the record, so the run
 * can be repeated with `dtrain deck.ini`. Written via a temporary name. */
static void write_effective_deck(const char *dir, const char *text)
{
    char path[DT_PATH_MAX + 16], tmp[DT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/deck.ini", dir);
    snprintf(tmp, sizeof tmp, "%s/deck.ini.tmp", dir);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) != 0 || rename(tmp, path) != 0)
        DT_FATAL("cannot write %s: %s", path, strerror(errno));
}

/* ---- provenance ------------------------------------------------------------ */

static char *gather_hosts(MPI_Comm comm, int rank, int nranks)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    char *all = rank == 0 ? dt_calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_CHECK(MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                         MPI_CHAR, 0, comm));
    if (rank != 0)
        return NULL;
    char *out = dt_calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME + 1);
    for (int i = 0; i < nranks; i++) {
        if (i)
            strcat(out, ",");
        strcat(out, all + (size_t)i * MPI_MAX_PROCESSOR_NAME);
    }
    free(all);
    return out;
}

/* FNV-1a over the parameter bytes: equal on every rank iff (with
 * overwhelming probability) the replicas are identical bit for bit. */
static int replicas_identical(dt_trainer *t)
{
    const unsigned char *p = (const unsigned char *)on_host(t, 0, t->params, t->n);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < t->n * sizeof(float); i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    uint64_t lo, hi;
    MPI_CHECK(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, t->comm));
    MPI_CHECK(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, t->comm));
    return lo == hi;
}

/* run.test_delay_ms on run.test_delay_rank: a slow worker, for tests. */
static void test_delay(const dt_trainer *t)
{
    const dt_config *c = t->cfg;
    if (c->run.test_delay_ms > 0 && t->rank == c->run.test_delay_rank)
        nanosleep((&(struct timespec){ c->run.test_delay_ms / 1000,
                                      (c->run.test_delay_ms % 1000) * 1000000L }), NULL);
}

/* Collective: appends this rank's rows kept in memory (/train, then the
 * per-rank evaluations) with the others'; ranks with fewer pad with step -1.
 * The averaged model and the consensus need every rank at one moment: the
 * final evaluation gives them. */
static void flush_rows(dt_trainer *t, dt_runlog *log, dt_train_row **rows, int64_t *nrows,
                       int64_t *cap, dt_eval_row *evals, int64_t *nevals)
{
    int64_t most = *nrows;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, t->comm));
    if (most > *cap || !*rows) {
        *cap = most > *cap ? most : 1;
        *rows = dt_realloc(*rows, (size_t)*cap * sizeof **rows);
    }
    for (int64_t i = *nrows; i < most; i++)
        (*rows)[i] = (dt_train_row){ .step = -1, .epoch = NAN, .wall = NAN, .loss = NAN,
                                     .accuracy = NAN, .lr = NAN, .compute_time = 0,
                                     .comm_time = 0, .wait_time = 0, .images = t->images,
                                     .weight = NAN, .bytes_sent = t->bytes_sent };
    runlog_append_train_rows(log, *rows, most);
    most = *nevals;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, t->comm));
    for (int64_t i = 0; i < most; i++) {
        dt_eval_row pad = { .step = -1, .epoch = NAN, .wall = NAN, .loss = NAN,
                            .accuracy = NAN };
        runlog_append_eval(log, i < *nevals ? &evals[i] : &pad, NAN, NAN, NAN);
    }
    *nrows = *nevals = 0;
}

static int save_checkpoint(dt_trainer *t);

/* Asynchronous modes: no collective until the budget is spent, a signal
 * stops the run or run.checkpoint_every of the group's steps are done (the
 * algorithm's count tells every rank at the same round). The learning rate
 * follows the group's step count; /train rows are kept in memory and written
 * together at each checkpoint and at the end (a collective write per
 * interval would make every rank wait for the slowest), and so are the
 * per-rank evaluations of run.eval_every; the collective evaluation
 * (averaged model, consensus) runs once, at the end. A periodic checkpoint
 * takes the signal's path: the algorithm completes its exchanges in flight,
 * one collective write, then the exchanges start again. A NaN or Inf in
 * the loss (run.check_finite) raises the algorithm's stop flag like a
 * signal. Returns 0, DT_EXIT_REQUEUE, DT_EXIT_NONFINITE, or 1 (a checkpoint
 * could not be written). */
static int async_loop(dt_trainer *t, dt_runlog *log)
{
    const dt_config *c = t->cfg;
    dt_train_row *rows = NULL;
    int64_t nrows = 0, cap = 0;
    double global = (double)t->step, last_print = trainer_clock();
    /* run.eval_every: each rank tests its own model every eval_every of its
     * own steps, with no collective; the rows wait in memory like /train's.
     * In the parameter-server modes the workers test the model they last
     * fetched; servers and the supervisor have no steps of their own (the
     * supervisor draws the servers' model by their clock instead). */
    const int64_t eval_every = t->roles->mine == ROLE_WORKER ? c->run.eval_every : 0;
    dt_eval_row *evals = NULL;
    int64_t nevals = 0, ecap = 0;
    int end = ALGO_GO, status = 0;
    while (end == ALGO_GO) {
        t->lr = (float)schedule_lr(&t->sched, global / (double)t->steps_per_epoch);
        t->algo->step(t);
        t->step++;
        test_delay(t);
        if (c->run.check_finite && !isfinite(t->loss_sum)) {
            char what[64];
            snprintf(what, sizeof what, "the training loss is %g", t->loss_sum);
            nonfinite_note(t->step, what);
        }
        /* a NaN or Inf stops the group like a signal, through the mode's own
         * stop flag, within a step; the group then agrees on the status */
        end = t->algo->progress(t, stop_poll() | (nonfinite.bad ? 2 : 0), &global);
        /* every role ends with a row at its last step (a server's step is
         * its clock and may jump past a multiple of log_every) */
        if (t->step % c->run.log_every == 0 ||
            (end != ALGO_GO && (nrows == 0 || rows[nrows - 1].step != t->step))) {
            if (nrows == cap) {
                cap = cap ? 2 * cap : 64;
                rows = dt_realloc(rows, (size_t)cap * sizeof *rows);
            }
            rows[nrows++] = take_row(t);
            if (t->rank == 0 && trainer_clock() - last_print > 2.0) {
                const dt_train_row *r = &rows[nrows - 1];
                double busy = r->compute_time + r->comm_time + r->wait_time;
                say("step %.0f/%lld (the group's, per rank)  rank 0: step %lld  loss %.4f  "
                    "acc %.2f%%  exchange wait %.0f%%\n", global, (long long)t->total_steps,
                    (long long)t->step, r->loss, 100 * r->accuracy,
                       busy > 0 ? 100 * r->wait_time / busy : 0.0);
                fflush(stdout);
                last_print = trainer_clock();
            }
        }
        if (eval_every > 0 && end == ALGO_GO && t->step % eval_every == 0) {
            if (nevals == ecap) {
                ecap = ecap ? 2 * ecap : 16;
                evals = dt_realloc(evals, (size_t)ecap * sizeof *evals);
            }
            /* step and epoch: the group's progress at this moment */
            dt_eval_row *e = &evals[nevals++];
            *e = (dt_eval_row){ .step = llround(global),
                                .epoch = global / (double)t->steps_per_epoch,
                                .wall = trainer_clock() - t->wall_start };
            trainer_evaluate(t, t->algo->model(t), &e->loss, &e->accuracy);
        }
        if (end == ALGO_CHECKPOINT) {
            t->algo->finish(t); /* exchanges completed; the count settled */
            t->global_step = global;
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t->global_step, 1, MPI_DOUBLE, MPI_MAX,
                                    t->comm));
            if ((status = save_checkpoint(t)) != 0)
                break;
            /* the rows after the checkpoint they belong to: a resume from it
             * keeps them, and a kill before it leaves none twice */
            flush_rows(t, log, &rows, &nrows, &cap, evals, &nevals);
            if (t->algo->restart)
                t->algo->restart(t);
            end = ALGO_GO;
        }
    }
    t->algo->finish(t);
    /* roles may end differently (a parameter server ends when its workers
     * do): the group ends as one */
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &end, 1, MPI_INT, MPI_MAX, t->comm));
    /* a non-finite loss anywhere: the one line, and status 3 for all (a
     * failed periodic checkpoint has already agreed on its own status) */
    int nf = status == 0 && c->run.check_finite ? nonfinite_agree(t) : 0;
    if (end == ALGO_STOP && !nf && t->rank == 0)
        say("signal received: checkpointing and exiting with status %d for requeue\n",
               DT_EXIT_REQUEUE);
    flush_rows(t, log, &rows, &nrows, &cap, evals, &nevals);
    free(rows);
    free(evals);
    t->global_step = global;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t->global_step, 1, MPI_DOUBLE, MPI_MAX, t->comm));
    int64_t steps[2] = { t->step, -t->step };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, steps, 2, MPI_INT64_T, MPI_MAX, t->comm));
    if (t->rank == 0)
        say("asynchronous run ended: local steps per rank from %lld to %lld\n",
               (long long)-steps[1], (long long)steps[0]);
    if (status != 0)
        return status;
    if (nf)
        return DT_EXIT_NONFINITE;
    return end == ALGO_STOP ? DT_EXIT_REQUEUE : 0;
}

/* Synchronous modes: every rank runs the same steps; logging, evaluation
 * and checkpoints are collective at fixed steps. Returns 0, 1 (replicas
 * differ under run.check_replicas) or DT_EXIT_REQUEUE. */
static int sync_loop(dt_trainer *t, dt_runlog *log, double *mean_acc, int64_t *last_eval)
{
    const dt_config *cfg = t->cfg;
    const int64_t eval_every = cfg->run.eval_every > 0 ? cfg->run.eval_every : t->steps_per_epoch;
    double last_wall = trainer_clock() - t->wall_start;
    int64_t last_images = t->images;
    int status = 0;
    /* The group agrees on the step to stop at: the flags of stop_poll (this
     * rank's signal, or a signal anywhere in the job) are combined by an
     * MPI_Iallreduce over the group started at one step boundary and
     * completed at the next (it has had a whole step to finish), so every
     * rank of the group decides at the same step. */
    /* Bit 1 of the flags: a signal; bit 2: a NaN or Inf seen by this rank
     * (run.check_finite), so every rank stops within one step of it. */
    int stop_local = 0, stop_any = 0;
    MPI_Request stop_req = MPI_REQUEST_NULL;
    while (t->step < t->total_steps) {
        watchdog_phase("the step-boundary agreement (a collective over the group)", -1);
        if (stop_req != MPI_REQUEST_NULL)
            MPI_CHECK(MPI_Wait(&stop_req, MPI_STATUS_IGNORE));
        int any = stop_any;
        stop_local = stop_poll() | (nonfinite.bad ? 2 : 0);
#ifndef DTRAIN_SIM
        MPI_CHECK(MPI_Iallreduce(&stop_local, &stop_any, 1, MPI_INT, MPI_BOR, t->comm, &stop_req));
#else
        (void)stop_local;
#endif /* the simulator computes no loss and gets no signal, so the agreement is
        * left out: SMPI's MPI_Iallreduce sends a message between every pair of
        * ranks (65 k per step at 256 ranks, most of a simulation's wall time),
        * while the real one is a few latencies hidden behind a step's compute */
        if (any & 2) {
            status = nonfinite_agree(t);
            break;
        }
        if (any) {
            if (t->rank == 0)
                say("signal received: checkpointing at step %lld and exiting with status %d "
                       "for requeue\n", (long long)t->step, DT_EXIT_REQUEUE);
            status = DT_EXIT_REQUEUE;
            break;
        }
        t->lr = (float)schedule_lr(&t->sched, (double)t->step / (double)t->steps_per_epoch);
        t->algo->step(t);
        t->step++;
        watchdog_beat(t->step);
        if (cfg->run.check_finite && !isfinite(t->loss_sum)) {
            char what[64];
            snprintf(what, sizeof what, "the training loss is %g", t->loss_sum);
            nonfinite_note(t->step, what);
        }
        if (cfg->run.check_replicas && !DT_SIMULATED &&
            (!t->algo->replicas_equal || t->algo->replicas_equal(t)) && !replicas_identical(t)) {
            if (t->rank == 0)
                fprintf(stderr, "dtrain: %serror: run.check_replicas: the replicas differ after "
                                "step %lld\n", group_tag, (long long)t->step);
            status = 1;
            break;
        }
        if (t->step % cfg->run.log_every == 0 || t->step == t->total_steps) {
            watchdog_phase("a collective (the training log)", -1);
            log_train(t, log, &last_wall, &last_images);
            if (cfg->run.check_finite && !DT_SIMULATED) {
                dt_ckpt_array a[16];
                nonfinite_scan(t, a, ckpt_host_arrays(t, a, 16, 1, NULL));
                if ((status = nonfinite_agree(t)) != 0)
                    break;
            }
        }
        if (t->step % eval_every == 0 || t->step == t->total_steps) {
            run_eval(t, log, trainer_clock() - t->wall_start, mean_acc);
            *last_eval = t->step;
        }
        if (cfg->run.checkpoint_every > 0 && t->step % cfg->run.checkpoint_every == 0 &&
            t->step < t->total_steps && (status = save_checkpoint(t)) != 0)
            break;
        test_delay(t);
    }
    if (stop_req != MPI_REQUEST_NULL)
        MPI_CHECK(MPI_Wait(&stop_req, MPI_STATUS_IGNORE));
    return status;
}

/* ---- the run --------------------------------------------------------------- */

/* comm.transport = nccl moves the vectors of the modes whose data traffic
 * goes through the transport from the training thread; the modes built on
 * one-sided MPI or a communication thread keep MPI (host staging). */
static int nccl_moves(const char *mode)
{
    static const char *modes[] = { "allreduce", "easgd", "sgp", "dpsgd" };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(mode, modes[i]) == 0)
            return 1;
    return 0;
}

static dt_transport *transport_create(dt_trainer *t, const dt_config *cfg, MPI_Comm comm)
{
    if (strcmp(cfg->comm.transport, "nccl") != 0)
        return transport_mpi_create(comm);
    if (!nccl_moves(cfg->algorithm.mode)) {
        if (t->rank == 0)
            say("comm.transport = nccl: mode %s exchanges over one-sided MPI or a "
                "communication thread; its vectors go over MPI\n", cfg->algorithm.mode);
        return transport_mpi_create(comm);
    }
#ifdef HAVE_NCCL
    return transport_nccl_create(comm, (double)cfg->comm.nccl_timeout);
#else
    DT_FATAL("comm.transport = nccl in a build without NCCL (run/device.c lets none through)");
#endif
}

static void trainer_free(dt_trainer *t)
{
    if (t->algo && t->algo->teardown && t->algo_state)
        t->algo->teardown(t);
    if (t->net && t->net->be->device) {
        const dt_backend *be = t->net->be;
        if (t->dev_vectors) {
            be->mem_free(t->params);
            be->mem_free(t->grads);
            be->mem_free(t->opt.v);
            t->params = t->grads = t->opt.v = NULL;
        }
        be->mem_free(t->dparams);
        be->mem_free(t->dgrads);
        be->mem_free(t->dx);
        be->mem_free(t->dy);
        be->mem_free(t->dpx);
        be->mem_free(t->dpy);
        be->host_free(t->x);
        be->host_free(t->y);
        be->host_free(t->px);
        be->host_free(t->py);
        t->x = NULL;
        t->y = NULL;
    }
    net_free(t->net);
    free(t->params);
    free(t->grads);
    free(t->x);
    free(t->y);
    if (t->opt.v)
        sgd_free(&t->opt);
    for (int k = 0; k < 16; k++)
        free(t->mirror[k]);
    loader_free(&t->loader);
    shard_free(&t->shard);
    dataset_free(&t->train);
    dataset_free(&t->test);
    transport_free(t->tp);
}

/* The figures of dt_run_result, agreed over the group. */
static void result_fill(dt_trainer *t, double mean_acc, dt_run_result *res)
{
    double v[4] = { (double)t->images, t->run_compute, t->run_comm, t->avg_model_acc };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_SUM, t->comm));
    /* asynchronous runs: the group's progress, as in eval.csv's step column */
    double r[3] = { t->algo->async ? (double)llround(t->global_step) : (double)t->step,
                    trainer_clock() - t->wall_start, v[3] };
    MPI_CHECK(MPI_Bcast(r, 3, MPI_DOUBLE, 0, t->comm));
    res->steps = (int64_t)r[0];
    res->wall = r[1];
    res->avg_model_acc = r[2];
    res->mean_acc = mean_acc;
    res->images_per_s = r[1] > 0 ? v[0] / r[1] : 0;
    res->comm_share = v[1] + v[2] > 0 ? v[2] / (v[1] + v[2]) : 0;
}

int trainer_run(const dt_group *g, const dt_roles *roles, int world_ranks, MPI_Comm comm,
                dt_run_result *res)
{
    const dt_config *cfg = &g->cfg;
    const char *deck_text = g->effective;
    group_tag[0] = '\0';
    if (g->name[0])
        snprintf(group_tag, sizeof group_tag, "[%s] ", g->name);
    dt_trainer tr, *t = &tr;
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->comm = comm;
    MPI_CHECK(MPI_Comm_rank(comm, &t->rank));
    MPI_CHECK(MPI_Comm_size(comm, &t->nranks));
    t->roles = roles;
    /* servers and the supervisor train nothing: they carry worker 0's shard */
    t->worker = roles->mine == ROLE_WORKER ? roles->index : 0;
    t->nworkers = 0;
    for (int i = 0; i < roles->nranks; i++)
        t->nworkers += roles->role[i] == ROLE_WORKER;
    t->B = (int)cfg->optim.batch_size;
    t->weight = 1.0f;
    backend_set_threads((int)cfg->compute.threads);

    int rc = 0;
    t->algo = algo_find(cfg->algorithm.mode);
    if (!t->algo || t->algo->check(cfg, t->nranks) != 0)
        rc = -1;
#ifdef DTRAIN_SIM
    if (rc == 0 && sim_check(cfg) != 0)
        rc = -1;
#endif
    if (agree(comm, t->rank, rc, "") != 0)
        return 1;
    if (agree(comm, t->rank, prepare_output(cfg, t->rank), "") != 0)
        return 1;
    if (agree(comm, t->rank, load_data(t), "") != 0) {
        trainer_free(t);
        return 1;
    }

#ifdef DTRAIN_SIM
    /* sim.params, else the size of the deck's model (built once, on rank 0);
     * the network itself is never run */
    int64_t np = sim_config()->params;
    int built = 0;
    if (np == 0 && t->rank == 0) {
        const dt_backend *be = backend_cpu_by_name(cfg->compute.kernels);
        dt_net *net = !be ? NULL : model_build(be, cfg->model.name, cfg->model.hidden,
                                               cfg->model.activation, (int)cfg->model.gn_groups,
                                               t->train.c, t->train.h, t->train.w,
                                               t->train.classes);
        if (!be)
            dt_err_set("compute.kernels = %s: not built in", cfg->compute.kernels);
        built = net ? 0 : -1;
        if (net)
            np = (int64_t)net->nparams;
        net_free(net);
    }
    if (agree(comm, t->rank, built, "") != 0) {
        trainer_free(t);
        return 1;
    }
    MPI_CHECK(MPI_Bcast(&np, 1, MPI_INT64_T, 0, comm));
    t->n = (size_t)np;
    t->params = dt_falloc(t->n);
    t->grads = dt_falloc(t->n);
    t->x = dt_falloc((size_t)t->B * t->train.c * t->train.h * t->train.w);
    t->y = dt_calloc((size_t)t->B, sizeof *t->y);
    t->tp = transport_create(t, cfg, comm);
#else
    const int on_gpu = strcmp(cfg->compute.device, "cuda") == 0;
    const dt_backend *be = on_gpu ? backend_cuda()
                           : cfg->compute.test_device_memory ? backend_cpu_devmem()
                           : backend_cpu_by_name(cfg->compute.kernels);
    if (!be && on_gpu)
        dt_err_set("compute.device = cuda: this dtrain was built without CUDA");
    else if (!be)
        dt_err_set("compute.kernels = %s: this dtrain was built without oneDNN (configure "
                   "found no libdnnl-dev); use native or auto", cfg->compute.kernels);
    t->net = !be ? NULL : model_build(be, cfg->model.name, cfg->model.hidden, cfg->model.activation,
                         (int)cfg->model.gn_groups, t->train.c, t->train.h, t->train.w,
                         t->train.classes);
    if (agree(comm, t->rank, t->net ? 0 : -1, "") != 0) {
        trainer_free(t);
        return 1;
    }
    t->n = t->net->nparams;
    t->dev_vectors = be->device && t->algo->device_vectors;
    if (t->dev_vectors) { /* initialized on the host, then sent up once */
        t->params = be->mem_alloc(t->n * sizeof(float));
        t->grads = be->mem_alloc(t->n * sizeof(float));
        float *h = mirror(t, 0, t->n);
        net_init_params(t->net, h, cfg->run.seed);
        be->to_backend(t->params, h, t->n * sizeof(float));
    } else {
        t->params = dt_falloc(t->n);
        t->grads = dt_falloc(t->n);
        net_init_params(t->net, t->params, cfg->run.seed);
    }
    net_reserve(t->net, t->B);
    const size_t xn = (size_t)t->B * t->train.c * t->train.h * t->train.w;
    if (be->device) {
        t->x = be->host_alloc(xn * sizeof(float));
        t->y = be->host_alloc((size_t)t->B * sizeof *t->y);
        t->px = be->host_alloc(xn * sizeof(float));
        t->py = be->host_alloc((size_t)t->B * sizeof *t->py);
        t->dx = be->mem_alloc(xn * sizeof(float));
        t->dy = be->mem_alloc((size_t)t->B * sizeof *t->dy);
        t->dpx = be->mem_alloc(xn * sizeof(float));
        t->dpy = be->mem_alloc((size_t)t->B * sizeof *t->dpy);
        if (!t->dev_vectors) {
            t->dparams = be->mem_alloc(t->n * sizeof(float));
            t->dgrads = be->mem_alloc(t->n * sizeof(float));
        }
    } else {
        t->x = dt_falloc(xn);
        t->y = dt_calloc((size_t)t->B, sizeof *t->y);
    }
    t->tp = transport_create(t, cfg, comm);
    /* NCCL takes device buffers; MPI gets them through host staging */
    if (t->dev_vectors && strcmp(t->tp->name, "nccl") != 0)
        t->tp = transport_staged_create(t->tp, be);
#endif
    /* one model for all: rank 0's parameters (REFERENCE.md §1) */
    t->tp->bcast(t->tp, t->params, t->n, 0);
    if (t->dev_vectors) { /* momentum in the backend's memory, zero-filled */
        sgd_config(&t->opt, t->n, cfg->optim.momentum, cfg->optim.weight_decay,
                   cfg->optim.nesterov);
        t->opt.v = t->net->be->mem_alloc(t->n * sizeof(float));
    } else {
        sgd_init(&t->opt, t->n, cfg->optim.momentum, cfg->optim.weight_decay,
                 cfg->optim.nesterov);
    }
    if (agree(comm, t->rank,
              schedule_init(&t->sched, cfg->optim.lr, cfg->optim.lr_scaling, t->B, t->nworkers,
                            cfg->optim.warmup_epochs, cfg->optim.decay_epochs,
                            cfg->optim.decay_factor), "") != 0) {
        trainer_free(t);
        return 1;
    }
#ifdef DTRAIN_SIM
    /* the epoch a worker's shard would give (the learning-rate schedule) */
    int64_t spe = (cfg->data.samples_per_epoch > 0 ? cfg->data.samples_per_epoch
                                                   : t->train.n / (t->nworkers ? t->nworkers : 1)) /
                  t->B;
#else
    loader_init(&t->loader, &t->train, &t->shard, t->B, cfg->run.seed, t->worker,
                cfg->data.samples_per_epoch > 0 ? cfg->data.samples_per_epoch : t->shard.n);
    /* synchronous modes step together: every rank uses the smallest epoch */
    int64_t spe = loader_steps_per_epoch(&t->loader);
#endif
    MPI_CHECK(MPI_Allreduce(&spe, &t->steps_per_epoch, 1, MPI_INT64_T, MPI_MIN, comm));
    if (t->steps_per_epoch < 1) {
        if (t->rank == 0)
            fprintf(stderr, "dtrain: %serror: data.samples_per_epoch = %lld is smaller than "
                            "optim.batch_size = %d: an epoch would have no step\n",
                    group_tag, (long long)cfg->data.samples_per_epoch, t->B);
        trainer_free(t);
        return 1;
    }
    t->total_steps = cfg->run.epochs * t->steps_per_epoch;
    if (cfg->run.max_steps > 0 && cfg->run.max_steps < t->total_steps)
        t->total_steps = cfg->run.max_steps;
    if (t->algo->setup)
        t->algo->setup(t);

    t->wall_start = trainer_clock();
    last_ckpt[0] = '\0';
    memset(&nonfinite, 0, sizeof nonfinite);
    if (t->rank == 0) {
        char dir[DT_PATH_MAX + 16];
        ckpt_dir(t, dir, sizeof dir);
#ifndef DTRAIN_SIM
        checkpoint_clean_partial(dir);
#endif
    }
    int resumed = 0;
    char skipped[8192] = "";
    if (cfg->run.resume) {
        resumed = restore_checkpoint(t, skipped, sizeof skipped);
        if (resumed < 0) {
            if (t->rank == 0)
                fprintf(stderr, "dtrain: %serror: %s\n", group_tag, dt_err_msg());
            trainer_free(t);
            return 1;
        }
        if (!resumed && t->rank == 0)
            say("run.resume = true but %s/checkpoints holds no checkpoint: starting fresh\n",
                   cfg->run.output_dir);
    }

    if (t->rank == 0)
        write_effective_deck(cfg->run.output_dir, deck_text);
    char *hosts = gather_hosts(comm, t->rank, t->nranks);
    char start[32];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    dt_provenance prov = { .version = build_version(), .git_revision = build_git_revision(),
                           .configure_flags = build_configure_args(),
                           .mpi_version = build_mpi_runtime(), .hosts = hosts ? hosts : "",
                           .start_time = start, .mode = cfg->algorithm.mode,
                           .model = cfg->model.name, .nparams = (int64_t)t->n,
                           .group = g->name, .group_first_rank = g->first,
                           .world_ranks = world_ranks };
    char rec[DT_PATH_MAX + 16];
    snprintf(rec, sizeof rec, "%s/%s", cfg->run.output_dir, DT_SIMULATED ? "sim.csv" : "run.h5");
    /* an asynchronous run writes its rows at its end, after its last
     * checkpoint, and counts them in the group's steps: a resume keeps them */
    dt_runlog *log = runlog_open(comm, rec, &prov, deck_text, resumed,
                                 t->algo->async ? INT64_MAX : t->step);
    free(hosts);
    if (agree(comm, t->rank, log ? 0 : -1, rec) != 0) {
        trainer_free(t);
        return 1;
    }
    if (skipped[0])
        runlog_note(log, "resume_skipped", skipped);

    if (t->rank == 0) {
        say("dtrain: mode %s, model %s (%zu parameters), %d rank(s), batch %d, "
               "%lld steps (%lld per epoch), output %s\n",
               cfg->algorithm.mode, cfg->model.name, t->n, t->nranks, t->B,
               (long long)t->total_steps, (long long)t->steps_per_epoch, cfg->run.output_dir);
        fflush(stdout);
    }

    double mean_acc = 0;
    /* resumed from the final checkpoint (another group was signalled after
     * this one finished): the final evaluation is already in the record */
    int at_end = resumed && t->step >= t->total_steps;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &at_end, 1, MPI_INT, MPI_MIN, comm));
    int64_t last_eval = at_end ? t->step : -1;
    /* asynchronous modes are not watched: their ranks make progress at their
     * own pace, a server without any step of its own */
    if (!t->algo->async)
        watchdog_start((double)cfg->run.stall_timeout, t->rank, group_tag);
    int status = t->algo->async ? async_loop(t, log) : sync_loop(t, log, &mean_acc, &last_eval);
    if (status == 0 && last_eval != t->step)
        run_eval(t, log, trainer_clock() - t->wall_start, &mean_acc);
    if (status == 0 || status == DT_EXIT_REQUEUE) {
        int s = save_checkpoint(t);
        if (s != 0)
            status = s;
    }
    if (status != 1 && t->algo->record)
        t->algo->record(t, log);
    watchdog_phase("writing the run record", -1);
#ifdef DTRAIN_SIM
    if (status == 0) {
        dt_sim_totals tot;
        simlog_totals(log, &tot);
        double steps = t->algo->async ? t->global_step : (double)t->step;
        int w = sim_write_record(comm, cfg->run.output_dir, cfg->algorithm.mode, (int64_t)t->n,
                                 roles->mine == ROLE_WORKER, steps, &tot);
        if (agree(comm, t->rank, w, "") != 0)
            status = 1;
    }
#endif
    runlog_close(log);
    /* done training: waiting for other rank groups is no stall */
    watchdog_stop();
    if (res)
        result_fill(t, mean_acc, res);
    if (t->rank == 0 && status == 0) {
        char steps[64];
        if (t->algo->async) /* rank 0's own count may be a server's clock */
            snprintf(steps, sizeof steps, "%.0f steps per rank (rank 0: %lld)", t->global_step,
                     (long long)t->step);
        else
            snprintf(steps, sizeof steps, "%lld steps", (long long)t->step);
        say("done: %s in %.1f s, final test accuracy %.2f%% (mean over ranks); record %s\n",
            steps, trainer_clock() - t->wall_start, 100 * mean_acc, rec);
        fflush(stdout);
    }
    trainer_free(t);
    return status;
}
