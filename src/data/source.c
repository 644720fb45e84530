#include "data/source.h"

#include <string.h>

int64_t source_next(dt_source *s, dt_sample *out) { return s->ops->next(s, out); }

void source_rewind(dt_source *s)
{
    if (s->ops->rewind)
        s->ops->rewind(s);
}

void source_get_state(const dt_source *s, void *state) { s->ops->get_state(s, state); }

void source_set_state(dt_source *s, const void *state) { s->ops->set_state(s, state); }

int64_t source_steps_per_epoch(const dt_source *s) { return s->ops->steps_per_epoch(s); }

int64_t source_state_drawn(const dt_source *s, const void *state)
{
    return s->ops->state_drawn(state);
}

void source_set_era(dt_source *s, uint64_t era) { s->ops->set_era(s, era); }

void source_set_drawn(dt_source *s, int64_t drawn) { s->ops->set_drawn(s, drawn); }

void source_free(dt_source *s)
{
    if (s)
        (s->ops->free)(s);
}

/* ---- evaluation passes ------------------------------------------------- */

static source_pass *pass_of(const dt_source *s) { return (source_pass *)s->impl; }

int64_t source_pass_take(dt_source *s, int64_t *first)
{
    source_pass *p = pass_of(s);
    const int64_t B = s->batch.input.shape[0];
    int64_t b = p->n - p->pos < B ? p->n - p->pos : B;
    *first = p->pos;
    if (b <= 0)
        return 0;
    p->pos += b;
    return b;
}

void source_pass_rewind(dt_source *s) { pass_of(s)->pos = 0; }

void source_pass_get_state(const dt_source *s, void *state)
{
    memcpy(state, &pass_of(s)->pos, sizeof(int64_t));
}

void source_pass_set_state(dt_source *s, const void *state)
{
    memcpy(&pass_of(s)->pos, state, sizeof(int64_t));
}

int64_t source_pass_steps(const dt_source *s)
{
    const int64_t B = s->batch.input.shape[0];
    return (pass_of(s)->n + B - 1) / B;
}

int64_t source_pass_epoch(const dt_source *s)
{
    (void)s;
    return 0;
}
