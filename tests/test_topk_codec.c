/* DiLoCo's top-k codes (algo/topk_codec.c) against references written here:
 *  - k = max(1, round(density len)), at most len;
 *  - sizes: 1 scale word + positions (a list of ceil(log2 len)-bit offsets,
 *    or a len-bit bitmap when that is shorter) + k codes, padded to a word;
 *    the encoder writes exactly that many words and no bit past its stream;
 *  - the values sent are the true top k by magnitude (a sort of the chunk,
 *    ties to the lower position), every other value decodes to 0;
 *  - the decoded values are within scale / (2^bits - 1) of the originals,
 *    scale the largest magnitude sent; 2 bits decode to -s, -s/3, s/3, s;
 *  - decode_add adds; a vector is its chunks one after another (a short
 *    last chunk); a NaN is sent and makes its chunk's scale NaN. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/topk_codec.h"
#include "core/alloc.h"
#include "tap.h"

static uint64_t rng = 88172645463325252ULL;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Values over 8 decades, some zeros and some repeated magnitudes (ties). */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double u = uniform() - 0.5;
        x[i] = (float)(u * pow(10.0, floor(8 * uniform()) - 4));
        if (i % 29 == 0)
            x[i] = 0.0f;
        if (i % 31 == 5)
            x[i] = i % 2 ? 0.125f : -0.125f;
    }
}

static const float *sort_x;

/* larger |x| first, then the lower position */
static int by_magnitude(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    float u = fabsf(sort_x[i]), v = fabsf(sort_x[j]);
    if (u != v)
        return u > v ? -1 : 1;
    return i < j ? -1 : 1;
}

static size_t ceil_log2(size_t len)
{
    size_t w = 1;
    while (((size_t)1 << w) < len)
        w++;
    return w;
}

/* The words of one chunk, from the format's description. */
static size_t want_words(size_t len, size_t k, int bits)
{
    size_t list = k * ceil_log2(len), pos = list <= len ? list : len;
    return 1 + (pos + k * (size_t)bits + 31) / 32;
}

/* One chunk of len values in the given format: selection, bound, zeros,
 * size, no write past the stream. Returns the number of failed properties. */
static int check_chunk(size_t len, double density, int bits, double *worst)
{
    dt_tkc f = { len, density, bits };
    float *x = dt_falloc(len), *y = dt_falloc(len);
    fill(x, len);
    size_t k = tkc_k(&f, len), words = tkc_chunk_words(&f, len);
    float *wire = dt_falloc(words + 4);
    uint32_t *idx = dt_malloc((k + 1) * sizeof *idx);
    for (size_t i = 0; i < words + 4; i++)
        wire[i] = -7.0f; /* sentinels: the encoder must clear or keep what it owns */
    tkc_encode_chunk(&f, x, len, wire, idx);
    tkc_decode_chunk(&f, wire, len, y, 0);
    int bad = 0;
    bad += words != want_words(len, k, bits);
    for (size_t i = words; i < words + 4; i++)
        bad += wire[i] != -7.0f;
    /* the padding bits of the last word are zero */
    size_t list = k * ceil_log2(len), used = (list <= len ? list : len) + k * (size_t)bits;
    uint32_t last;
    memcpy(&last, &wire[words - 1], sizeof last);
    if (used % 32)
        bad += (last >> (used % 32)) != 0;
    /* the reference top k */
    size_t *order = dt_malloc(len * sizeof *order);
    for (size_t i = 0; i < len; i++)
        order[i] = i;
    sort_x = x;
    qsort(order, len, sizeof *order, by_magnitude);
    char *sent = dt_calloc(len, 1);
    double scale = 0;
    for (size_t j = 0; j < k; j++) {
        sent[order[j]] = 1;
        scale = fmax(scale, fabs((double)x[order[j]]));
    }
    const double step = scale / (double)((1 << bits) - 1);
    for (size_t i = 0; i < len; i++) {
        if (!sent[i]) {
            bad += y[i] != 0.0f;
        } else {
            bad += y[i] == 0.0f && scale > 0; /* no zero code */
            double e = fabs((double)x[i] - y[i]);
            *worst = fmax(*worst, step > 0 ? e / step : e);
            bad += e > step * (1 + 1e-6) + 1e-30;
        }
    }
    free(x);
    free(y);
    free(wire);
    free(idx);
    free(order);
    free(sent);
    return bad;
}

static void test_k(void)
{
    dt_tkc f = { 4096, 0.02, 4 };
    CHECK(tkc_k(&f, 4096) == 82 && tkc_k(&f, 100) == 2 && tkc_k(&f, 10) == 1 &&
              tkc_k(&f, 1) == 1,
          "k = max(1, round(density len)): 0.02 of 4096 -> %zu, of 100 -> %zu, of 10 -> %zu",
          tkc_k(&f, 4096), tkc_k(&f, 100), tkc_k(&f, 10));
    f.density = 1.0;
    CHECK(tkc_k(&f, 64) == 64, "density 1 sends the whole chunk (%zu of 64)", tkc_k(&f, 64));
    f.density = 0.02;
    CHECK(tkc_chunk_words(&f, 4096) == 42 && !tkc_bitmap(&f, 4096),
          "4096 values at 0.02 and 4 bits: 82 offsets of 12 bits + 82 codes of 4 bits + a scale "
          "= %zu words (168 bytes expected)", tkc_chunk_words(&f, 4096));
    f.density = 0.1;
    CHECK(tkc_bitmap(&f, 4096) && tkc_chunk_words(&f, 4096) == 1 + (4096 + 410 * 4 + 31) / 32,
          "density 0.1 of 4096: a 4096-bit bitmap (shorter than 410 x 12 bits), %zu words",
          tkc_chunk_words(&f, 4096));
}

static void test_chunks(void)
{
    const size_t lens[] = { 64, 100, 4096, 1000, 1 };
    const double dens[] = { 0.02, 0.1, 0.5, 1.0 };
    const int bitss[] = { 2, 4, 8 };
    for (size_t b = 0; b < 3; b++) {
        int bad = 0, cases = 0;
        double worst = 0;
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (size_t d = 0; d < sizeof dens / sizeof dens[0]; d++) {
                bad += check_chunk(lens[l], dens[d], bitss[b], &worst);
                cases++;
            }
        CHECK(bad == 0 && worst > 0.3,
              "%d bits, %d chunks (lists and bitmaps, 1 to 4096 values): the true top k by "
              "magnitude sent, zeros elsewhere, within scale / %d (worst %.3f of it), the words "
              "the format says and nothing past them", bitss[b], cases, (1 << bitss[b]) - 1,
              worst);
    }
}

static void test_levels(void)
{
    dt_tkc f = { 64, 1.0, 2 };
    float x[64], y[64], wire[64];
    uint32_t idx[64];
    for (int i = 0; i < 64; i++) /* -3 .. 3 in steps of 3/32 */
        x[i] = (float)(i - 32) * 3.0f / 32.0f;
    tkc_encode_chunk(&f, x, 64, wire, idx);
    tkc_decode_chunk(&f, wire, 64, y, 0);
    int ok = wire[0] == 3.0f;
    for (int i = 0; i < 64; i++) {
        float want = x[i] < -2.0f ? -3.0f : x[i] < 0.0f ? -1.0f : x[i] <= 2.0f ? 1.0f : 3.0f;
        if (x[i] == -2.0f || x[i] == 2.0f) /* halfway: either neighbour */
            ok &= fabsf(y[i]) == 1.0f || fabsf(y[i]) == 3.0f;
        else
            ok &= y[i] == want;
    }
    CHECK(ok, "2 bits, scale 3: values decode to the nearest of -3, -1, 1, 3 (no zero code)");
}

static void test_vector(void)
{
    const size_t n = 1000;
    dt_tkc f = { 64, 0.1, 8 };
    float *x = dt_falloc(n), *y = dt_falloc(n), *acc = dt_falloc(n), *one = dt_falloc(64);
    fill(x, n);
    size_t words = tkc_words(&f, n);
    float *wire = dt_falloc(words), *cw = dt_falloc(words);
    uint32_t idx[64];
    tkc_encode(&f, x, n, wire);
    tkc_decode(&f, wire, n, y);
    int same = words == 15 * tkc_chunk_words(&f, 64) + tkc_chunk_words(&f, 40);
    for (size_t lo = 0, at = 0; lo < n; lo += 64) { /* chunk by chunk, by hand */
        size_t len = n - lo < 64 ? n - lo : 64;
        tkc_encode_chunk(&f, x + lo, len, cw, idx);
        same &= !memcmp(cw, wire + at, tkc_chunk_words(&f, len) * sizeof *cw);
        tkc_decode_chunk(&f, cw, len, one, 0);
        same &= !memcmp(one, y + lo, len * sizeof *one);
        at += tkc_chunk_words(&f, len);
    }
    CHECK(same, "a vector of 1000 values: 15 chunks of 64 and one of 40, each coded as alone "
                "(%zu words)", words);
    for (size_t i = 0; i < n; i++)
        acc[i] = 0.5f;
    tkc_decode_add(&f, wire, n, acc);
    int added = 1;
    for (size_t i = 0; i < n; i++)
        added &= acc[i] == 0.5f + y[i];
    CHECK(added, "decode_add adds the decoded values");
    x[70] = NAN;
    tkc_encode(&f, x, n, wire);
    tkc_decode(&f, wire, n, y);
    CHECK(isnan(y[70]) && isnan(wire[tkc_chunk_words(&f, 64)]),
          "a NaN is sent and its chunk's scale is NaN");
    free(x);
    free(y);
    free(acc);
    free(one);
    free(wire);
    free(cw);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_k();
    test_chunks();
    test_levels();
    test_vector();
    int rc = tap_done();
    MPI_Finalize();
    return rc;
}
