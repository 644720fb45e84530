/* The image sources: a rank's shard drawn by the loader for training, the
 * test set in order for evaluation. Samples are (C, H, W) f32 images with an
 * i32 label each. */
#include "data/source.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/data.h"

typedef struct image_source {
    source_pass pass;        /* evaluation: first (data/source.h) */
    dt_dataset d;
    dt_shard shard;          /* training only */
    dt_loader loader;        /* training only */
    uint64_t seed;           /* training: run.seed (the loader's is the era's) */
} image_source;
_Static_assert(offsetof(image_source, pass) == 0, "an evaluation source's pass comes first");

static dt_sample image_batch(const dt_dataset *d, int B)
{
    int64_t in[4] = { B, d->c, d->h, d->w }, lab[1] = { B };
    return (dt_sample){ .input = tensor_shape(DT_F32, 4, in),
                        .target = tensor_shape(DT_I32, 1, lab) };
}

static dt_source *image_source_new(const dt_source_ops *ops, dt_dataset *d, int B, int64_t samples)
{
    dt_source *s = dt_calloc(1, sizeof *s);
    image_source *im = dt_calloc(1, sizeof *im);
    im->d = *d;
    memset(d, 0, sizeof *d);
    s->ops = ops;
    s->batch = image_batch(&im->d, B);
    s->classes = im->d.classes;
    s->samples = samples;
    s->impl = im;
    return s;
}

/* ---- training ------------------------------------------------------------ */

static int64_t train_next(dt_source *s, dt_sample *out) // x (B, C, H, W), y (B)
{
    image_source *im = s->impl;
    loader_next(&im->loader, out->input.data, out->target.data);
    return s->batch.input.shape[0];
}

static void train_get_state(const dt_source *s, void *state)
{
    const image_source *im = s->impl;
    dt_loader_state st;
    loader_get_state(&im->loader, &st);
    memcpy(state, &st, sizeof st);
}

static void train_set_state(dt_source *s, const void *state)
{
    image_source *im = s->impl;
    dt_loader_state st;
    memcpy(&st, state, sizeof st);
    loader_set_state(&im->loader, &st);
}

static int64_t train_state_drawn(const void *state)
{
    dt_loader_state st;
    memcpy(&st, state, sizeof st);
    return st.drawn;
}

static void train_set_era(dt_source *s, uint64_t era)
{
    image_source *im = s->impl;
    im->loader.seed = rng_era_seed(im->seed, era);
}

static void train_set_drawn(dt_source *s, int64_t drawn)
{
    image_source *im = s->impl;
    dt_loader_state st = { .pass = 0, .pos = 0, .drawn = drawn };
    loader_set_state(&im->loader, &st); /* shuffles the era's pass 0 */
}

static int64_t train_steps_per_epoch(const dt_source *s)
{
    return loader_steps_per_epoch(&((const image_source *)s->impl)->loader);
}

static int64_t train_epoch(const dt_source *s)
{
    return loader_epoch(&((const image_source *)s->impl)->loader);
}

static void image_free(dt_source *s)
{
    image_source *im = s->impl;
    if (im->loader.perm)
        loader_free(&im->loader);
    shard_free(&im->shard);
    dataset_free(&im->d);
    free(im);
    free(s);
}

static const dt_source_ops image_train_ops = {
    .name = "images",
    .state_size = sizeof(dt_loader_state),
    .next = train_next,
    .get_state = train_get_state,
    .set_state = train_set_state,
    .steps_per_epoch = train_steps_per_epoch,
    .epoch = train_epoch,
    .state_drawn = train_state_drawn,
    .set_era = train_set_era,
    .set_drawn = train_set_drawn,
    .free = image_free,
};

dt_source *source_image_train(dt_dataset *d, dt_shard *shard, int B, uint64_t seed, int rank,
                              int64_t samples_per_epoch)
{
    dt_source *s = image_source_new(&image_train_ops, d, B, shard->n);
    image_source *im = s->impl;
    im->shard = *shard;
    im->seed = seed;
    memset(shard, 0, sizeof *shard);
    loader_init(&im->loader, &im->d, &im->shard, B, seed, rank,
                samples_per_epoch > 0 ? samples_per_epoch : im->shard.n);
    return s;
}

/* ---- evaluation ---------------------------------------------------------- */

static int64_t eval_next(dt_source *s, dt_sample *out) // x (b, C, H, W), y (b), b <= B
{
    const image_source *im = s->impl;
    int64_t first, b = source_pass_take(s, &first);
    const size_t per = tensor_row_count(&s->batch.input);
    float *x = out->input.data;
    int32_t *y = out->target.data;
    for (int64_t j = 0; j < b; j++) {
        dataset_sample(&im->d, first + j, x + (size_t)j * per);
        y[j] = im->d.labels[first + j];
    }
    return b;
}

static const dt_source_ops image_eval_ops = {
    .name = "images (evaluation)",
    .state_size = sizeof(int64_t),
    .next = eval_next,
    .rewind = source_pass_rewind,
    .get_state = source_pass_get_state,
    .set_state = source_pass_set_state,
    .steps_per_epoch = source_pass_steps,
    .epoch = source_pass_epoch,
    .free = image_free,
};

dt_source *source_image_eval(dt_dataset *d, int64_t n, int B)
{
    dt_source *s = image_source_new(&image_eval_ops, d, B, n);
    ((image_source *)s->impl)->pass.n = n;
    return s;
}
