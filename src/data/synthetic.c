/* Synthetic classification data: one Gaussian cluster per class.
 *
 * Class centres come from the stream (seed, 0xC1A55) only, so the training and
 * test splits (split 0, 1, ...) share them and a model fitted on one split
 * generalizes to the other. With D = c*h*w features the centres are about
 * sqrt(2D) apart while the noise along the line joining two centres has std
 * `noise`, so a linear classifier separates the classes whenever noise is
 * well below sqrt(D/2).
 */
#include "data/data.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_CENTRE_STREAM 0xC1A55u
#define SYNTH_LABEL_STREAM 0x1ABE1u
#define SYNTH_NOISE_STREAM 0x7015Eu

void dataset_synthetic(dt_dataset *d, int64_t n, int c, int h, int w, int classes,
                       float noise, uint64_t seed, int split)
{
    if (n < 1 || c < 1 || h < 1 || w < 1 || classes < 1 || !(noise >= 0.0f))
        DT_FATAL("dataset_synthetic: n=%lld c=%d h=%d w=%d classes=%d noise=%g, expected "
                 "positive sizes and noise >= 0",
                 (long long)n, c, h, w, classes, (double)noise);
    size_t dim = (size_t)c * (size_t)h * (size_t)w;
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "synthetic");
    d->n = n;
    d->c = c;
    d->h = h;
    d->w = w;
    d->classes = classes;
    for (int i = 0; i < 3; i++) {
        d->mean[i] = 0.0f;
        d->std[i] = 1.0f;
    }

    float *centres = dt_falloc((size_t)classes * dim); // (classes, D)
    dt_rng rc = rng_make(seed, SYNTH_CENTRE_STREAM, 0, 0);
    for (size_t j = 0; j < (size_t)classes * dim; j++)
        centres[j] = (float)rng_normal(&rc);

    /* Balanced labels (counts differ by at most one) in a shuffled order, like
     * the real sets, so partitions that cut the dataset in order see every class. */
    d->labels = dt_malloc((size_t)n * sizeof *d->labels);
    for (int64_t i = 0; i < n; i++)
        d->labels[i] = (int32_t)(i % classes);
    dt_rng rl = rng_make(seed, (uint64_t)split, SYNTH_LABEL_STREAM, 0);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&rl, (uint64_t)i + 1);
        int32_t t = d->labels[i];
        d->labels[i] = d->labels[j];
        d->labels[j] = t;
    }

    d->f32 = dt_falloc((size_t)n * dim); // (n, c, h, w)
    dt_rng rn = rng_make(seed, (uint64_t)split, SYNTH_NOISE_STREAM, 0);
    for (int64_t i = 0; i < n; i++) {
        const float *mu = centres + (size_t)d->labels[i] * dim;
        float *x = d->f32 + (size_t)i * dim;
        for (size_t j = 0; j < dim; j++)
            x[j] = mu[j] + noise * (float)rng_normal(&rn);
    }
    free(centres);
}
