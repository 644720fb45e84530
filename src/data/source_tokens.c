/* The language-model sources over a tokenised corpus (data/tokens.h):
 * training windows drawn at random offsets of the rank's part of the
 * training split, and the validation split's non-overlapping windows in
 * order. Samples are (T) i32 tokens with their (T) i32 next tokens. Both
 * sources share one corpus; the last one freed releases it. */
#include "data/source.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/tokens.h"

typedef struct shared_corpus {
    dt_corpus c;
    int refs;
} shared_corpus;

typedef struct token_source {
    source_pass pass;         /* evaluation: first (data/source.h) */
    shared_corpus *sc;
    int T;
    dt_windows w;             /* training */
    uint64_t seed;            /* training: run.seed (the windows' is the era's) */
} token_source;
_Static_assert(offsetof(token_source, pass) == 0, "an evaluation source's pass comes first");

static dt_source *token_source_new(const dt_source_ops *ops, shared_corpus *sc, int B, int T,
                                   int64_t samples)
{
    dt_source *s = dt_calloc(1, sizeof *s);
    token_source *ts = dt_calloc(1, sizeof *ts);
    ts->sc = sc;
    ts->T = T;
    sc->refs++;
    int64_t shape[2] = { B, T };
    s->ops = ops;
    s->batch = (dt_sample){ .input = tensor_shape(DT_I32, 2, shape),
                            .target = tensor_shape(DT_I32, 2, shape) };
    s->classes = sc->c.vocab;
    s->samples = samples;
    s->impl = ts;
    return s;
}

static void token_free(dt_source *s)
{
    token_source *ts = s->impl;
    if (--ts->sc->refs == 0) {
        corpus_free(&ts->sc->c);
        free(ts->sc);
    }
    free(ts);
    free(s);
}

/* ---- training ------------------------------------------------------------ */

static int64_t train_next(dt_source *s, dt_sample *out) // x, y (B, T)
{
    windows_next(&((token_source *)s->impl)->w, out->input.data, out->target.data);
    return s->batch.input.shape[0];
}

static void train_get_state(const dt_source *s, void *state)
{
    memcpy(state, &((const token_source *)s->impl)->w.drawn, sizeof(int64_t));
}

static void train_set_state(dt_source *s, const void *state)
{
    int64_t drawn;
    memcpy(&drawn, state, sizeof drawn);
    if (drawn < 0)
        DT_FATAL("token source: a checkpoint's window count %lld is negative", (long long)drawn);
    ((token_source *)s->impl)->w.drawn = drawn;
}

static int64_t train_state_drawn(const void *state)
{
    int64_t drawn;
    memcpy(&drawn, state, sizeof drawn);
    return drawn;
}

static void train_set_era(dt_source *s, uint64_t era)
{
    token_source *ts = s->impl;
    ts->w.seed = rng_era_seed(ts->seed, era);
}

/* a window's offset is a pure function of (seed, rank, index): the count is
 * the whole position */
static void train_set_drawn(dt_source *s, int64_t drawn) { ((token_source *)s->impl)->w.drawn = drawn; }

static int64_t train_steps_per_epoch(const dt_source *s)
{
    return windows_steps_per_epoch(&((const token_source *)s->impl)->w);
}

static int64_t train_epoch(const dt_source *s)
{
    const dt_windows *w = &((const token_source *)s->impl)->w;
    return w->drawn / w->B / windows_steps_per_epoch(w);
}

static const dt_source_ops token_train_ops = {
    .name = "token windows",
    .state_size = sizeof(int64_t),
    .next = train_next,
    .get_state = train_get_state,
    .set_state = train_set_state,
    .steps_per_epoch = train_steps_per_epoch,
    .epoch = train_epoch,
    .state_drawn = train_state_drawn,
    .set_era = train_set_era,
    .set_drawn = train_set_drawn,
    .free = token_free,
};

/* ---- evaluation ---------------------------------------------------------- */

static int64_t eval_next(dt_source *s, dt_sample *out) // x, y (b, T), b <= B
{
    const token_source *ts = s->impl;
    int64_t first, b = source_pass_take(s, &first);
    int32_t *x = out->input.data, *y = out->target.data;
    for (int64_t j = 0; j < b; j++)
        windows_val(&ts->sc->c, ts->T, first + j, x + (size_t)j * (size_t)ts->T,
                    y + (size_t)j * (size_t)ts->T);
    return b;
}

static const dt_source_ops token_eval_ops = {
    .name = "validation windows",
    .state_size = sizeof(int64_t),
    .next = eval_next,
    .rewind = source_pass_rewind,
    .get_state = source_pass_get_state,
    .set_state = source_pass_set_state,
    .steps_per_epoch = source_pass_steps,
    .epoch = source_pass_epoch,
    .free = token_free,
};

int source_tokens(dt_corpus *c, int B, int T, uint64_t seed, int rank, int nranks,
                  int64_t eval_limit, dt_source **train, dt_source **eval)
{
    *train = *eval = NULL;
    if (corpus_check(c, T) != 0)
        return -1;
    shared_corpus *sc = dt_calloc(1, sizeof *sc);
    sc->c = *c;
    memset(c, 0, sizeof *c);
    dt_windows w;
    if (windows_init(&w, &sc->c, rank, nranks, T, B, seed) != 0) {
        corpus_free(&sc->c);
        free(sc);
        return -1;
    }
    int64_t nval = windows_val_count(&sc->c, T);
    if (eval_limit > 0 && eval_limit < nval)
        nval = eval_limit;
    *train = token_source_new(&token_train_ops, sc, B, T, w.part_len);
    ((token_source *)(*train)->impl)->w = w;
    ((token_source *)(*train)->impl)->seed = seed;
    *eval = token_source_new(&token_eval_ops, sc, B, T, nval * T);
    ((token_source *)(*eval)->impl)->pass.n = nval;
    return 0;
}
