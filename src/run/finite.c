#include "run/finite.h"

#include <math.h>
#include <stdio.h>

size_t finite_count_bad(const float *x, size_t n, size_t *first)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            if (bad++ == 0 && first)
                *first = i;
        }
    return bad;
}

int finite_describe(char *buf, size_t len, const char *name, const float *x, size_t n)
{
    size_t first = 0, bad = finite_count_bad(x, n, &first);
    if (bad == 0)
        return snprintf(buf, len, "'%s' is finite", name);
    return snprintf(buf, len, "'%s' has %zu of %zu values NaN or Inf (first at index %zu: %g)",
                    name, bad, n, first, (double)x[first]);
}
