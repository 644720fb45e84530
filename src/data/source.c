#include "data/source.h"

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
