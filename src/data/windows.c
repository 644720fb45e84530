/* Windows of a token corpus: random training windows from each rank's part of
 * the training split, and the fixed validation windows. The partition rule is
 * stated in tokens.h. */
#include "data/tokens.h"

#include "core/error.h"
#include "core/rng.h"

#include <inttypes.h>

/* The fourth word of the stream (seed, rank, window, WINDOWS_STREAM): keeps
 * these draws apart from other (seed, rank, i) streams, e.g. the image
 * loader's (seed, rank, pass) shuffles. */
#define WINDOWS_STREAM 0x746f6b656e77696eULL /* "tokenwin" */

int windows_init(dt_windows *w, const dt_corpus *c, int rank, int nranks, int T, int B,
                 uint64_t seed)
{
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return dt_err_set("token windows: rank %d of %d, expected 0 <= rank < ranks", rank,
                          nranks);
    if (T < 1 || B < 1)
        return dt_err_set("token windows: block size T = %d and batch B = %d, expected both "
                          ">= 1",
                          T, B);
    int64_t part = c->n_train / nranks;
    if (part < (int64_t)T + 1)
        return dt_err_set("%s: rank %d's part of the training split holds %" PRId64 " tokens "
                          "(%" PRId64 " tokens / %d ranks, floor), fewer than one window of "
                          "T+1 = %d: the training split needs at least %" PRId64 " tokens "
                          "for %d ranks",
                          c->train_src ? c->train_src : c->name, rank, part, c->n_train,
                          nranks, T + 1, ((int64_t)T + 1) * nranks, nranks);
    *w = (dt_windows){ .c = c, .rank = rank, .nranks = nranks, .T = T, .B = B, .seed = seed,
                       .part_begin = (int64_t)rank * part, .part_len = part, .drawn = 0 };
    return 0;
}

void windows_next(dt_windows *w, int32_t *x, int32_t *y)
{
    const int T = w->T;
    /* part_len - T starting offsets keep all T+1 tokens inside the part */
    const uint64_t starts = (uint64_t)(w->part_len - T);
    for (int b = 0; b < w->B; b++) {
        dt_rng r = rng_make(w->seed, (uint64_t)w->rank, (uint64_t)w->drawn, WINDOWS_STREAM);
        int64_t off = w->part_begin + (int64_t)rng_below(&r, starts);
        const uint16_t *s = w->c->train + off;
        for (int t = 0; t < T; t++) {
            x[(int64_t)b * T + t] = s[t];
            y[(int64_t)b * T + t] = s[t + 1];
        }
        w->drawn++;
    }
}

int64_t windows_steps_per_epoch(const dt_windows *w)
{
    int64_t s = w->part_len / ((int64_t)w->B * w->T);
    return s > 0 ? s : 1;
}

int64_t windows_val_count(const dt_corpus *c, int T)
{
    /* window k needs tokens up to kT + T, i.e. kT + T <= n_val - 1 */
    return c->n_val > 0 && T > 0 ? (c->n_val - 1) / T : 0;
}

void windows_val(const dt_corpus *c, int T, int64_t k, int32_t *x, int32_t *y)
{
    const uint16_t *s = c->val + k * T;
    for (int t = 0; t < T; t++) {
        x[t] = s[t];
        y[t] = s[t + 1];
    }
}
