/* Counter-free, saveable pseudo-random generator (SplitMix64 stream).
 *
 * The whole state is one 64-bit word, so a checkpoint stores it exactly and a
 * resumed run draws the same numbers. Streams are derived by hashing
 * (seed, a, b, c), e.g. (seed, rank, epoch) for the loader's shuffle. */
#ifndef DT_CORE_RNG_H
#define DT_CORE_RNG_H

#include <stdint.h>

#include "core/hd.h"

typedef struct dt_rng { uint64_t s; } dt_rng;

/* A generator for the stream named by (seed, a, b, c). */
dt_rng rng_make(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
uint64_t rng_u64(dt_rng *r);
/* Uniform in [0, 1) with 24 random bits. */
float rng_uniform(dt_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform_d(dt_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t rng_below(dt_rng *r, uint64_t n);
/* Standard normal (Box-Muller, no cached second value so state stays one word). */
double rng_normal(dt_rng *r);
/* The seed of era `era` of a stream family seeded with seed: seed itself for
 * era 0 (what a run draws before any rank-count change), another for each
 * later era. */
uint64_t rng_era_seed(uint64_t seed, uint64_t era);
/* Fisher-Yates shuffle of idx[0..n). */
void rng_shuffle(dt_rng *r, int64_t *idx, int64_t n);

/* Counter-based uniform in [0, 1): a pure function of (key, i), so a kernel can
 * draw element i in any order (dropout masks on CPU and GPU agree). Inline:
 * dropout calls it once per activation; DT_HD: the CUDA dropout kernel calls it too. */
#define RNG_GOLDEN 0x9e3779b97f4a7c15ULL
/* rng_mix64's steps on z in place: a uint64_t, or a GCC vector of them (the
 * dropout kernel hashes eight lanes at once with the same steps) */
#define RNG_MIX64_STEPS(z)                                                               \
    do {                                                                                 \
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;                                     \
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;                                     \
        z = z ^ (z >> 31);                                                               \
    } while (0)
static inline DT_HD uint64_t rng_mix64(uint64_t z)
{
    RNG_MIX64_STEPS(z);
    return z;
}
static inline DT_HD float rng_hash_uniform(uint64_t key, uint64_t i)
{
    return (float)(rng_mix64(key ^ rng_mix64(i + RNG_GOLDEN)) >> 40) * 0x1.0p-24f;
}
/* Mix several words into one key (e.g. seed, rank, step, layer). */
uint64_t rng_key(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

#endif
