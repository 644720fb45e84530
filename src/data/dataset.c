/* Named datasets, per-sample normalization and release. */
#include "data/data.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DATASET_PATH_MAX = 4096 };

/* Per-channel mean and std of the training pixels scaled to [0, 1] (the
 * constants torchvision users quote for these sets). */
typedef struct dataset_norm {
    const char *name;
    float mean[3], std[3];
} dataset_norm;

static const dataset_norm norms[] = {
    { "fashion-mnist", { 0.2860f, 0.2860f, 0.2860f }, { 0.3530f, 0.3530f, 0.3530f } },
    { "mnist", { 0.1307f, 0.1307f, 0.1307f }, { 0.3081f, 0.3081f, 0.3081f } },
    { "cifar10", { 0.4914f, 0.4822f, 0.4465f }, { 0.2470f, 0.2435f, 0.2616f } },
};

/* dir/base if it exists, else dir/base.gz; the message names both when neither does. */
static int idx_find(char *out, const char *dir, const char *base)
{
    char gz[DATASET_PATH_MAX];
    int a = snprintf(out, DATASET_PATH_MAX, "%s/%s", dir, base);
    int b = snprintf(gz, sizeof gz, "%s/%s.gz", dir, base);
    if (a < 0 || b < 0 || a >= DATASET_PATH_MAX || b >= DATASET_PATH_MAX)
        return dt_err_set("%s/%s: path longer than %d bytes", dir, base,
                          DATASET_PATH_MAX - 1);
    if (access(out, F_OK) == 0)
        return 0;
    if (access(gz, F_OK) == 0) {
        memcpy(out, gz, (size_t)b + 1);
        return 0;
    }
    return dt_err_set("%s: not found (nor %s), expected the IDX file plain or gzipped",
                      out, gz);
}

static int load_idx_split(dt_dataset *d, const char *dir, const char *prefix)
{
    char images[DATASET_PATH_MAX], labels[DATASET_PATH_MAX], base[64];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    if (idx_find(images, dir, base) < 0)
        return -1;
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    if (idx_find(labels, dir, base) < 0)
        return -1;
    return dataset_load_idx(d, images, labels);
}

static int load_split(dt_dataset *d, const char *name, const char *dir, int train)
{
    if (strcmp(name, "cifar10") == 0)
        return dataset_load_cifar10(d, dir, train);
    return load_idx_split(d, dir, train ? "train" : "t10k");
}

int dataset_load_named(dt_dataset *train, dt_dataset *test, const char *name,
                       const char *dir)
{
    const dataset_norm *norm = NULL;
    dt_dataset *sets[2] = { train, test };
    for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
        if (strcmp(name, norms[i].name) == 0)
            norm = &norms[i];
    for (int s = 0; s < 2; s++)
        if (sets[s])
            memset(sets[s], 0, sizeof *sets[s]);
    if (!norm)
        return dt_err_set("dataset name '%s': unknown, expected fashion-mnist, mnist or "
                          "cifar10 (synthetic data is generated, not loaded)",
                          name);
    /* Either split may be NULL: a rank that only evaluates needs only the test set. */
    for (int s = 0; s < 2; s++) {
        if (!sets[s])
            continue;
        if (load_split(sets[s], name, dir, s == 0) < 0) {
            if (s == 1 && train)
                dataset_free(train);
            return -1;
        }
        snprintf(sets[s]->name, sizeof sets[s]->name, "%s", name);
        memcpy(sets[s]->mean, norm->mean, sizeof norm->mean);
        memcpy(sets[s]->std, norm->std, sizeof norm->std);
    }
    if (train && test &&
        (train->c != test->c || train->h != test->h || train->w != test->w)) {
        int e = dt_err_set("%s: test images are %dx%dx%d but training images are "
                           "%dx%dx%d, expected the same shape",
                           dir, test->c, test->h, test->w, train->c, train->h, train->w);
        dataset_free(train);
        dataset_free(test);
        return e;
    }
    return 0;
}

void dataset_free(dt_dataset *d)
{
    if (!d)
        return;
    free(d->u8);
    free(d->f32);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

void dataset_sample(const dt_dataset *d, int64_t i, float *out)
{
    size_t plane = (size_t)d->h * (size_t)d->w, per = (size_t)d->c * plane;
    if (d->f32) {
        memcpy(out, d->f32 + (size_t)i * per, per * sizeof *out);
        return;
    }
    const uint8_t *px = d->u8 + (size_t)i * per; // (C, H, W)
    for (int c = 0; c < d->c; c++) {
        /* (v/255 - mean) / std folded into one multiply-add per pixel */
        float scale = 1.0f / (255.0f * d->std[c]), shift = d->mean[c] / d->std[c];
        const uint8_t *src = px + (size_t)c * plane;
        float *dst = out + (size_t)c * plane;
        for (size_t j = 0; j < plane; j++)
            dst[j] = (float)src[j] * scale - shift;
    }
}
