/* Partitioners: which samples of a dataset a rank trains on.
 *
 * Every rank computes the whole split from (dataset, seed) and keeps its own
 * part, so the shards are disjoint without any communication. Random choices
 * use fixed streams, part of the contract (a split must not change between
 * versions, or resumed and compared runs would train on different data):
 *   iid:        permutation of 0..N-1 by rng_make(seed, PART_IID_STREAM, 0, 0);
 *   class skew: permutation of the classes 0..C-1 by
 *               rng_make(seed, PART_SKEW_STREAM, 0, 0), then from the same
 *               generator one U(0.8, 1.0) weight per (class, holder), classes
 *               in id order, holders in rank order.
 */
#include "data/data.h"

#include "core/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PART_IID_STREAM 0x11Du
#define PART_SKEW_STREAM 0x5CE3u

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int check_ranks(const char *what, const dt_dataset *d, int rank, int nranks)
{
    if (nranks < 1)
        return dt_err_set("partition %s of %s: %d ranks, expected at least 1", what, d->name,
                          nranks);
    if (rank < 0 || rank >= nranks)
        return dt_err_set("partition %s of %s: rank %d, expected 0..%d", what, d->name, rank,
                          nranks - 1);
    return 0;
}

int partition_iid(const dt_dataset *d, int rank, int nranks, uint64_t seed, dt_shard *out)
{
    memset(out, 0, sizeof *out);
    if (check_ranks("iid", d, rank, nranks) < 0)
        return -1;
    int64_t per = d->n / nranks;
    if (per < 1)
        return dt_err_set("partition iid of %s: %" PRId64 " samples cannot give each of "
                          "%d ranks at least one",
                          d->name, d->n, nranks);
    int64_t *perm = dt_malloc((size_t)d->n * sizeof *perm);
    for (int64_t i = 0; i < d->n; i++)
        perm[i] = i;
    dt_rng r = rng_make(seed, PART_IID_STREAM, 0, 0);
    rng_shuffle(&r, perm, d->n);
    out->n = per;
    out->idx = dt_malloc((size_t)per * sizeof *out->idx);
    memcpy(out->idx, perm + (int64_t)rank * per, (size_t)per * sizeof *out->idx);
    free(perm);
    qsort(out->idx, (size_t)per, sizeof *out->idx, cmp_i64);
    return 0;
}

/* Does the rank whose window starts at position `start` hold position p? */
static int holds(int start, int p, int per_rank, int classes)
{
    return (p - start + classes) % classes < per_rank;
}

int partition_class_skew(const dt_dataset *d, int rank, int nranks, uint64_t seed,
                         int per_rank, int shift, dt_shard *out)
{
    const int nc = d->classes;
    memset(out, 0, sizeof *out);
    if (check_ranks("class-skew", d, rank, nranks) < 0)
        return -1;
    if (nc < 1)
        return dt_err_set("partition class-skew of %s: %d classes, expected at least 1",
                          d->name, nc);
    if (per_rank < 1 || per_rank > nc)
        return dt_err_set("partition class-skew of %s: %d classes per rank, expected "
                          "1..%d (the dataset's classes)",
                          d->name, per_rank, nc);

    /* Sample indices grouped by class, each group in dataset order (counting sort). */
    int64_t *count = dt_calloc((size_t)nc + 1, sizeof *count);
    for (int64_t i = 0; i < d->n; i++) {
        if (d->labels[i] < 0 || d->labels[i] >= nc) {
            free(count);
            return dt_err_set("partition class-skew of %s: label %" PRId32 " of sample %" PRId64
                              ", expected 0..%d",
                              d->name, d->labels[i], i, nc - 1);
        }
        count[d->labels[i] + 1]++;
    }
    for (int c = 0; c < nc; c++)
        count[c + 1] += count[c]; // count[c] = first slot of class c
    int64_t *byclass = dt_malloc((size_t)d->n * sizeof *byclass);
    int64_t *fill = dt_malloc((size_t)nc * sizeof *fill);
    memcpy(fill, count, (size_t)nc * sizeof *fill);
    for (int64_t i = 0; i < d->n; i++)
        byclass[fill[d->labels[i]]++] = i;

    int64_t *perm = dt_malloc((size_t)nc * sizeof *perm); // position -> class
    int *pos_of = dt_malloc((size_t)nc * sizeof *pos_of); // class -> position
    int *start = dt_malloc((size_t)nranks * sizeof *start);
    double *wt = dt_malloc((size_t)nranks * sizeof *wt);
    for (int c = 0; c < nc; c++)
        perm[c] = c;
    dt_rng r = rng_make(seed, PART_SKEW_STREAM, 0, 0);
    rng_shuffle(&r, perm, nc);
    for (int p = 0; p < nc; p++)
        pos_of[perm[p]] = p;
    for (int k = 0; k < nranks; k++)
        start[k] = (int)((((int64_t)shift * k) % nc + nc) % nc);

    out->idx = dt_malloc(((size_t)d->n + 1) * sizeof *out->idx);
    for (int c = 0; c < nc; c++) {
        int p = pos_of[c], holders = 0;
        double total = 0.0;
        /* Every class draws its weights, held by this rank or not, so all ranks
         * consume the generator identically. */
        for (int k = 0; k < nranks; k++) {
            wt[k] = 0.0;
            if (holds(start[k], p, per_rank, nc)) {
                wt[k] = 0.8 + 0.2 * rng_uniform_d(&r);
                total += wt[k];
                holders++;
            }
        }
        if (holders == 0 || !holds(start[rank], p, per_rank, nc))
            continue;
        int64_t nc_samples = count[c + 1] - count[c], first = 0, mine = 0;
        int seen = 0;
        for (int k = 0; k < nranks; k++) {
            if (wt[k] == 0.0)
                continue;
            int64_t take = ++seen == holders ? nc_samples - first
                                             : (int64_t)(wt[k] / total * (double)nc_samples);
            if (k == rank) {
                mine = take;
                break;
            }
            first += take;
        }
        memcpy(out->idx + out->n, byclass + count[c] + first, (size_t)mine * sizeof *out->idx);
        out->n += mine;
    }
    free(count);
    free(byclass);
    free(fill);
    free(perm);
    free(pos_of);
    free(start);
    free(wt);
    if (out->n == 0) {
        shard_free(out);
        return dt_err_set("partition class-skew of %s: rank %d of %d would get no samples "
                          "(%d classes per rank, shift %d)",
                          d->name, rank, nranks, per_rank, shift);
    }
    qsort(out->idx, (size_t)out->n, sizeof *out->idx, cmp_i64);
    return 0;
}

int partition_blocks(const dt_dataset *d, int rank, int nranks, int64_t nshards,
                     int64_t shard_size, dt_shard *out)
{
    memset(out, 0, sizeof *out);
    if (check_ranks("blocks", d, rank, nranks) < 0)
        return -1;
    if (nshards < 1 || shard_size < 1)
        return dt_err_set("partition blocks of %s: %" PRId64 " blocks of %" PRId64
                          " samples, expected both at least 1",
                          d->name, nshards, shard_size);
    if (nshards > d->n / shard_size)
        return dt_err_set("partition blocks of %s: %" PRId64 " blocks of %" PRId64
                          " samples do not fit in its %" PRId64 " samples",
                          d->name, nshards, shard_size, d->n);
    int64_t per = nshards / nranks;
    if (per < 1)
        return dt_err_set("partition blocks of %s: %" PRId64 " blocks cannot give each of "
                          "%d workers at least one",
                          d->name, nshards, nranks);
    out->n = per * shard_size;
    out->idx = dt_malloc((size_t)out->n * sizeof *out->idx);
    int64_t first = (int64_t)rank * per * shard_size;
    for (int64_t i = 0; i < out->n; i++)
        out->idx[i] = first + i;
    return 0;
}

void shard_free(dt_shard *s)
{
    if (!s)
        return;
    free(s->idx);
    s->idx = NULL;
    s->n = 0;
}
