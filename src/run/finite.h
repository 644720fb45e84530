/* Non-finite values (run.check_finite): a diverged run (NaN or Inf in the
 * loss or the parameters) stops on every rank with DT_EXIT_NONFINITE instead
 * of training on and checkpointing a useless model over the good ones. */
#ifndef DT_RUN_FINITE_H
#define DT_RUN_FINITE_H

#include <stddef.h>

/* Number of NaN/Inf entries of x (n floats); *first gets the index of the
 * first one (unchanged if there is none). */
size_t finite_count_bad(const float *x, size_t n, size_t *first);

/* One phrase for a message, e.g. "'params' has 12 of 431080 values NaN or
 * Inf (first at index 17: nan)"; returns the length snprintf would write. */
int finite_describe(char *buf, size_t len, const char *name, const float *x, size_t n);

#endif
