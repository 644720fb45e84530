#include "algo/staleness.h"

#include <stdlib.h>

#include "core/error.h"

typedef struct update {
    int dense;
    size_t k, cap;
    uint32_t *idx;                 /* (k) strictly increasing */
} update;

struct dt_staleness {
    size_t n;
    int h;                         /* ring size H */
    int held;                      /* updates in the ring, <= H */
    int head;                      /* slot the next update goes to */
    update *ring;                  /* (H) */
};

dt_staleness *staleness_create(size_t n, int history)
{
    if (history < 1 || history > 65536)
        DT_FATAL("staleness: history of %d updates, expected 1 ... 65536", history);
    if (n > (size_t)UINT32_MAX + 1)
        DT_FATAL("staleness: %zu coordinates do not fit 32-bit indices", n);
    dt_staleness *st = dt_calloc(1, sizeof *st);
    st->n = n;
    st->h = history;
    st->ring = dt_calloc((size_t)history, sizeof *st->ring);
    return st;
}

int staleness_held(const dt_staleness *st) { return st->held; }

/* Whether the sorted list a (k) holds i. */
static int contains(const uint32_t *a, size_t k, uint32_t i)
{
    size_t lo = 0, hi = k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k && a[lo] == i;
}

void staleness_scales(const dt_staleness *st, int64_t delay, const uint32_t *idx, size_t k,
                      float *scale)
{
    int d = delay <= 0 ? 0 : delay >= st->held ? st->held : (int)delay;
    size_t len = idx ? k : st->n;
    /* scale holds the counts s_c first: small integers, exact in float */
    for (size_t j = 0; j < len; j++)
        scale[j] = 0.0f;
    int ndense = 0;
    for (int back = 1; back <= d; back++) {
        const update *u = &st->ring[(st->head - back + st->h) % st->h];
        if (u->dense) {
            ndense++;
        } else if (idx) {
            for (size_t j = 0; j < k; j++)
                scale[j] += (float)contains(u->idx, u->k, idx[j]);
        } else {
            for (size_t j = 0; j < u->k; j++)
                scale[u->idx[j]] += 1.0f;
        }
    }
    for (size_t j = 0; j < len; j++) {
        float s = scale[j] + (float)ndense;
        scale[j] = s > 1.0f ? 1.0f / s : 1.0f;
    }
}

void staleness_record(dt_staleness *st, const uint32_t *idx, size_t k)
{
    update *u = &st->ring[st->head];
    if (idx) {
        for (size_t j = 0; j < k; j++)
            if (idx[j] >= st->n || (j > 0 && idx[j] <= idx[j - 1]))
                DT_FATAL("staleness: index %u at position %zu is outside [0, %zu) or does not "
                         "increase", idx[j], j, st->n);
        if (k > u->cap) {
            u->cap = k;
            u->idx = dt_realloc(u->idx, k * sizeof *u->idx);
        }
        for (size_t j = 0; j < k; j++)
            u->idx[j] = idx[j];
        u->k = k;
        u->dense = 0;
    } else {
        u->k = 0;
        u->dense = 1;
    }
    st->head = (st->head + 1) % st->h;
    if (st->held < st->h)
        st->held++;
}

void staleness_free(dt_staleness *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->h; i++)
        free(st->ring[i].idx);
    free(st->ring);
    free(st);
}
