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

void source_free(dt_source *s)
{
    if (s)
        (s->ops->free)(s);
}
