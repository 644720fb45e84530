#include "core/rng.h"

#include <math.h>


dt_rng rng_make(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = rng_mix64(seed + RNG_GOLDEN);
    h = rng_mix64(h ^ (a + 0x632be59bd9b4e019ULL));
    h = rng_mix64(h ^ (b + 0x85157af5ULL));
    h = rng_mix64(h ^ (c + 0x2545f4914f6cdd1dULL));
    return (dt_rng){ h };
}

uint64_t rng_u64(dt_rng *r)
{
    r->s += RNG_GOLDEN;
    return rng_mix64(r->s);
}

float rng_uniform(dt_rng *r) { return (float)(rng_u64(r) >> 40) * 0x1.0p-24f; }

double rng_uniform_d(dt_rng *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t rng_below(dt_rng *r, uint64_t n)
{
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
    do
        x = rng_u64(r);
    while (x >= lim);
    return x % n;
}

double rng_normal(dt_rng *r)
{
    double u1 = 1.0 - rng_uniform_d(r); /* (0, 1] */
    double u2 = rng_uniform_d(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void rng_shuffle(dt_rng *r, int64_t *idx, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(r, (uint64_t)i + 1);
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}

uint64_t rng_key(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return rng_make(a, b, c, d).s;
}

uint64_t rng_era_seed(uint64_t seed, uint64_t era)
{
    return era ? rng_mix64(seed ^ rng_mix64(era * RNG_GOLDEN)) : seed;
}
