/* Batch sources: where the trainer's samples come from, one ops table per
 * kind of data, as algo/algo.h does for the algorithms.
 *
 * A training source draws batches of B samples forever (an epoch is
 * steps_per_epoch of them) and saves and restores its position exactly, for
 * a bit-for-bit resume. An evaluation source walks a fixed set once per pass
 * (rewind starts a pass; next returns 0 at its end); its last batch may be
 * short. The image sources (data/source_image.c) are the first kind. */
#ifndef DT_DATA_SOURCE_H
#define DT_DATA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "data/sample.h"

/* The largest state a source saves into a checkpoint, in bytes. */
#define DT_SOURCE_STATE_MAX 64

typedef struct dt_source dt_source;

typedef struct dt_source_ops {
    const char *name;
    size_t state_size;      /* bytes get_state writes (<= DT_SOURCE_STATE_MAX) */
    /* Fill out's tensors (shaped as the source's `batch`, data allocated by
     * the caller) with the next batch; returns its sample count: B for a
     * training source, 1..B for an evaluation source, 0 when its pass is
     * done. */
    int64_t (*next)(dt_source *s, dt_sample *out);
    /* Evaluation sources: start the pass again (NULL for training sources). */
    void (*rewind)(dt_source *s);
    void (*get_state)(const dt_source *s, void *state);
    void (*set_state)(dt_source *s, const void *state);
    int64_t (*steps_per_epoch)(const dt_source *s);
    int64_t (*epoch)(const dt_source *s); /* epoch of the next batch */
    /* Training sources, for a resume on another rank count: the samples
     * drawn in a saved state; the era of the stream (0 at the first start,
     * then the count of rank-count changes: the draws come from (seed, era,
     * rank), so each elastic resume is reproducible), set before set_state
     * or set_drawn; and a fresh pass over the (new) shard with `drawn`
     * samples already counted. */
    int64_t (*state_drawn)(const void *state);
    void (*set_era)(dt_source *s, uint64_t era);
    void (*set_drawn)(dt_source *s, int64_t drawn);
    void (*free)(dt_source *s);
} dt_source_ops;

struct dt_source {
    const dt_source_ops *ops;
    dt_sample batch;        /* the shape of a full batch (data NULL) */
    int64_t classes;        /* targets lie in [0, classes): labels, or the vocabulary */
    int64_t samples;        /* samples behind the source (its shard, or the test set) */
    void *impl;             /* the kind's own state */
};

/* The ops, as calls. */
int64_t source_next(dt_source *s, dt_sample *out);
void source_rewind(dt_source *s);
void source_get_state(const dt_source *s, void *state);
void source_set_state(dt_source *s, const void *state);
int64_t source_steps_per_epoch(const dt_source *s);
int64_t source_state_drawn(const dt_source *s, const void *state);
void source_set_era(dt_source *s, uint64_t era);
void source_set_drawn(dt_source *s, int64_t drawn);
void source_free(dt_source *s); /* NULL: nothing */

/* ---- evaluation passes ------------------------------------------------- */

/* An evaluation source's place in its pass over n items in order (images,
 * windows). The kind's impl struct starts with it, so that the ops below
 * serve every evaluation source; its saved state is pos. */
typedef struct source_pass {
    int64_t n, pos;         /* items of a pass, the next one */
} source_pass;

/* The next batch of the pass: returns its item count b (the batch size B at
 * most, 0 once the pass is done), *first the index of its first item, and
 * moves the pass past them. */
int64_t source_pass_take(dt_source *s, int64_t *first);
/* The evaluation ops: rewind, get_state and set_state (pos), the batches of
 * a pass (ceil(n / B)), and the epoch (always 0). */
void source_pass_rewind(dt_source *s);
void source_pass_get_state(const dt_source *s, void *state);
void source_pass_set_state(dt_source *s, const void *state);
int64_t source_pass_steps(const dt_source *s);
int64_t source_pass_epoch(const dt_source *s);

/* ---- images (data/source_image.c) ----------------------------------------- */
struct dt_dataset;
struct dt_shard;

/* Training batches (B, C, H, W) f32 with labels (B) i32 from the rank's
 * shard of d, drawn by the loader (data/data.h) with (seed, rank). The
 * source takes d and the shard over (their structs are copied; it frees
 * them). */
dt_source *source_image_train(struct dt_dataset *d, struct dt_shard *shard, int B, uint64_t seed,
                              int rank, int64_t samples_per_epoch);
/* Evaluation batches of the first n samples of d in order (B at most). The
 * source takes d over. */
dt_source *source_image_eval(struct dt_dataset *d, int64_t n, int B);

/* ---- token sequences (data/source_tokens.c) ------------------------------ */
struct dt_corpus;

/* The language-model sources over corpus c (taken over; released when both
 * sources are freed): training windows (B, T) i32 with their (B, T) next
 * tokens from this rank's part of the training split (data/tokens.h), and
 * the validation split's non-overlapping windows in order (the first
 * eval_limit of them, 0: all). -1 after dt_err_set() for a corpus too short
 * for T. */
int source_tokens(struct dt_corpus *c, int B, int T, uint64_t seed, int rank, int nranks,
                  int64_t eval_limit, dt_source **train, dt_source **eval);

#endif
