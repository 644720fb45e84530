#include "algo/topk_codec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/compress.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/vec.h"

size_t tkc_k(const dt_tkc *f, size_t len)
{
    if (len == 0)
        return 0;
    double r = nearbyint(f->density * (double)len);
    size_t k = r < 1.0 ? 1 : (size_t)r;
    return k < len ? k : len;
}

/* ceil(log2 len) bits, at least 1: an offset in [0, len). */
static unsigned offset_bits(size_t len)
{
    unsigned w = 1;
    while (w < 63 && ((size_t)1 << w) < len)
        w++;
    return w;
}

int tkc_bitmap(const dt_tkc *f, size_t len) { return tkc_k(f, len) * offset_bits(len) > len; }

static size_t position_bits(const dt_tkc *f, size_t len)
{
    return tkc_bitmap(f, len) ? len : tkc_k(f, len) * offset_bits(len);
}

size_t tkc_chunk_words(const dt_tkc *f, size_t len)
{
    if (len == 0)
        return 0;
    size_t bits = position_bits(f, len) + tkc_k(f, len) * (size_t)f->bits;
    return 1 + (bits + 31) / 32;
}

size_t tkc_words(const dt_tkc *f, size_t n)
{
    size_t full = n / f->chunk, rest = n % f->chunk;
    return full * tkc_chunk_words(f, f->chunk) + tkc_chunk_words(f, rest);
}

/* nb (<= 32) bits of v at bit pos of the zeroed stream s */
static void put_bits(uint32_t *s, size_t pos, uint32_t v, unsigned nb)
{
    size_t i = pos / 32;
    unsigned sh = (unsigned)(pos % 32);
    s[i] |= v << sh;
    if (sh + nb > 32)
        s[i + 1] |= v >> (32 - sh);
}

static uint32_t get_bits(const uint32_t *s, size_t pos, unsigned nb)
{
    size_t i = pos / 32;
    unsigned sh = (unsigned)(pos % 32);
    uint64_t x = s[i] >> sh;
    if (sh + nb > 32)
        x |= (uint64_t)s[i + 1] << (32 - sh);
    return (uint32_t)(x & ((UINT64_C(1) << nb) - 1));
}

/* code j of v, the nearest level (ties upwards): the levels are the odd
 * integers of u = v (M - 1) / scale, so j = floor(u / 2) + M / 2, clamped to
 * [0, M). In double, so that v a hair below a midpoint stays below it. */
static uint32_t code_of(float v, float scale, uint32_t M)
{
    if (!(scale > 0.0f) || isinf(scale))
        return 0; /* all selected zero (decodes to 0), or a non-finite scale (decodes to it) */
    double h = floor((double)v / (double)scale * (0.5 * (double)(M - 1))) + (double)(M / 2);
    return h <= 0.0 ? 0 : h >= (double)(M - 1) ? M - 1 : (uint32_t)h;
}

/* scale (2 j + 1 - M) / (M - 1) */
static float value_of(uint32_t j, float scale, uint32_t M)
{
    return scale * ((float)(2 * (int64_t)j + 1 - (int64_t)M) / (float)(M - 1));
}

void tkc_encode_chunk(const dt_tkc *f, const float *x, size_t len, float *wire, uint32_t *idx)
{
    const size_t k = topk_select(x, len, tkc_k(f, len), idx), words = tkc_chunk_words(f, len);
    const unsigned w = offset_bits(len), nb = (unsigned)f->bits;
    const uint32_t M = (uint32_t)1 << nb;
    float scale = 0.0f;
    for (size_t j = 0; j < k; j++) {
        float a = fabsf(x[idx[j]]);
        if (isnan(a)) { /* a NaN becomes the scale */
            scale = a;
            break;
        }
        scale = fmaxf(scale, a);
    }
    wire[0] = scale;
    uint32_t *s = (uint32_t *)(void *)(wire + 1);
    memset(s, 0, (words - 1) * sizeof *s);
    size_t pos = 0;
    if (tkc_bitmap(f, len)) {
        for (size_t j = 0; j < k; j++)
            put_bits(s, idx[j], 1, 1);
        pos = len;
    } else {
        for (size_t j = 0; j < k; j++, pos += w)
            put_bits(s, pos, idx[j], w);
    }
    for (size_t j = 0; j < k; j++, pos += nb)
        put_bits(s, pos, code_of(x[idx[j]], scale, M), nb);
}

void tkc_decode_chunk(const dt_tkc *f, const float *wire, size_t len, float *y, int add)
{
    const size_t k = tkc_k(f, len);
    const unsigned w = offset_bits(len), nb = (unsigned)f->bits;
    const uint32_t M = (uint32_t)1 << nb;
    const float scale = wire[0];
    const uint32_t *s = (const uint32_t *)(const void *)(wire + 1);
    if (!add)
        memset(y, 0, len * sizeof *y);
    const int bitmap = tkc_bitmap(f, len);
    size_t code = bitmap ? len : k * w, i = 0;
    for (size_t j = 0; j < k; j++, code += nb) {
        if (bitmap) {
            while (i < len && !get_bits(s, i, 1))
                i++;
        } else {
            i = get_bits(s, j * w, w);
        }
        if (i >= len)
            DT_FATAL("top-k codes: position %zu of a chunk of %zu values (damaged message)", i,
                     len);
        const float v = value_of(get_bits(s, code, nb), scale, M);
        y[i] = add ? y[i] + v : v;
        if (bitmap)
            i++;
    }
}

/* The chunks of a vector of n values: [lo, lo + len) and their words at wire + at. */
#define FOR_CHUNKS(f, n)                                                                     \
    for (size_t lo = 0, at = 0, len = (n) < (f)->chunk ? (n) : (f)->chunk; lo < (n);         \
         at += tkc_chunk_words((f), len), lo += len,                                          \
                len = (n) - lo < (f)->chunk ? (n) - lo : (f)->chunk)

void tkc_encode(const dt_tkc *f, const float *x, size_t n, float *wire)
{
    VEC_SKIP_IN_SIM; /* the simulator: x holds no model, only the message's size counts */
    uint32_t *idx = dt_malloc((tkc_k(f, f->chunk) + 1) * sizeof *idx);
    FOR_CHUNKS(f, n)
        tkc_encode_chunk(f, x + lo, len, wire + at, idx);
    free(idx);
}

void tkc_decode(const dt_tkc *f, const float *wire, size_t n, float *y)
{
    VEC_SKIP_IN_SIM; /* the simulator: the codes mean nothing (core/vec.h) */
    FOR_CHUNKS(f, n)
        tkc_decode_chunk(f, wire + at, len, y + lo, 0);
}

void tkc_decode_add(const dt_tkc *f, const float *wire, size_t n, float *acc)
{
    VEC_SKIP_IN_SIM;
    FOR_CHUNKS(f, n)
        tkc_decode_chunk(f, wire + at, len, acc + lo, 1);
}
