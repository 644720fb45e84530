/* Minibatch loader over a shard.
 *
 * The permutation of pass p is a pure function of (seed, rank, p), so the
 * whole loader state is three integers: a checkpoint stores them and a resumed
 * run regenerates the permutation and draws the same batches.
 */
#include "data/data.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#define LOADER_STREAM 0x10ADu

static void loader_shuffle(dt_loader *l)
{
    for (int64_t i = 0; i < l->shard->n; i++)
        l->perm[i] = i;
    dt_rng r = rng_make(l->seed, (uint64_t)l->rank, (uint64_t)l->st.pass, LOADER_STREAM);
    rng_shuffle(&r, l->perm, l->shard->n);
}

void loader_init(dt_loader *l, const dt_dataset *d, const dt_shard *shard, int batch,
                 uint64_t seed, int rank, int64_t samples_per_epoch)
{
    if (!d || !shard || shard->n < 1 || batch < 1)
        DT_FATAL("loader_init: shard of %lld samples, batch %d: expected at least one "
                 "sample and a positive batch",
                 shard ? (long long)shard->n : 0LL, batch);
    memset(l, 0, sizeof *l);
    l->d = d;
    l->shard = shard;
    l->batch = batch;
    l->seed = seed;
    l->rank = rank;
    l->samples_per_epoch = samples_per_epoch > 0 ? samples_per_epoch : shard->n;
    l->perm = dt_malloc((size_t)shard->n * sizeof *l->perm);
    loader_shuffle(l);
}

void loader_next(dt_loader *l, float *x, int32_t *y)
{
    size_t per = (size_t)l->d->c * (size_t)l->d->h * (size_t)l->d->w;
    for (int b = 0; b < l->batch; b++) {
        /* A pass ends lazily, on the next draw, so a saved state with pos == n
         * resumes exactly like the loader it came from. */
        if (l->st.pos == l->shard->n) {
            l->st.pass++;
            l->st.pos = 0;
            loader_shuffle(l);
        }
        int64_t i = l->shard->idx[l->perm[l->st.pos++]];
        dataset_sample(l->d, i, x + (size_t)b * per);
        y[b] = l->d->labels[i];
        l->st.drawn++;
    }
}

int64_t loader_epoch(const dt_loader *l) { return l->st.drawn / l->samples_per_epoch; }

int64_t loader_steps_per_epoch(const dt_loader *l) { return l->samples_per_epoch / l->batch; }

void loader_get_state(const dt_loader *l, dt_loader_state *st) { *st = l->st; }

void loader_set_state(dt_loader *l, const dt_loader_state *st)
{
    /* The checkpoint reader is expected to have validated the state against the
     * shard; a state that does not fit here is a programming error. */
    if (st->pass < 0 || st->pos < 0 || st->pos > l->shard->n || st->drawn < 0)
        DT_FATAL("loader_set_state: pass %lld, position %lld, drawn %lld do not fit a "
                 "shard of %lld samples",
                 (long long)st->pass, (long long)st->pos, (long long)st->drawn,
                 (long long)l->shard->n);
    l->st = *st;
    loader_shuffle(l);
}

void loader_free(dt_loader *l)
{
    if (!l)
        return;
    free(l->perm);
    memset(l, 0, sizeof *l);
}
