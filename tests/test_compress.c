/* Top-k and AdaComp compression, their wire formats and the staleness scales of the
 * parameter server (doc/references.md, Parameter server):
 *  - topk_select picks exactly what a full sort of (|v| descending, index
 *    ascending) picks, on random vectors of many sizes, with heavy ties,
 *    signed zeros, infinities and denormals, for k = 0, 1, n, > n and others;
 *  - topk_compress sends topk_count(size) pairs per tensor, ascending, the
 *    top entries of residual + g, and error feedback loses nothing: every
 *    round sent + new residual == old residual + g in float, and over 50
 *    rounds everything sent plus the final residual equals every gradient;
 *  - sparse_encode / sparse_decode round trip and reject malformed messages
 *    without touching their outputs;
 *  - adacomp_compress (Chen et al. 2018) on hand-built bins: what it sends
 *    (|G + g| >= the bin's max |G|), the ternary values +-mean of the bin
 *    maxima, the residual, a bin longer than the tensor as one bin, a
 *    non-finite residue sent as it is; error feedback over 50 rounds;
 *  - qsparse_encode / qsparse_decode round trip bit for bit in the documented
 *    size and reject malformed messages without touching their outputs;
 *  - staleness scales on a hand-built history and against a brute-force
 *    count over a random one (d = 0 gives 1, d beyond the history clamps). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/compress.h"
#include "algo/staleness.h"
#include "core/error.h"
#include "tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rng_below(size_t m) { return (size_t)(rng_next() % m); }
static float rng_unit(void) { return (float)((double)(rng_next() >> 11) / 9007199254740992.0 * 2 - 1); }

/* ---- reference selection: a full sort ------------------------------------------ */

typedef struct key {
    float a;
    uint32_t i;
} key;

static int key_cmp(const void *pa, const void *pb)
{
    const key *x = pa, *y = pb;
    if (x->a != y->a)
        return x->a > y->a ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int u32_cmp(const void *pa, const void *pb)
{
    uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
    return x < y ? -1 : x > y;
}

static size_t reference_topk(const float *v, size_t n, size_t k, uint32_t *idx)
{
    key *keys = dt_malloc((n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++)
        keys[i] = (key){ fabsf(v[i]), (uint32_t)i };
    qsort(keys, n, sizeof *keys, key_cmp);
    if (k > n)
        k = n;
    for (size_t j = 0; j < k; j++)
        idx[j] = keys[j].i;
    qsort(idx, k, sizeof *idx, u32_cmp);
    free(keys);
    return k;
}

/* kind 0: uniform; 1: quantized with many ties and signed zeros; 2: one
 * magnitude, random signs (all tied); 3: magnitudes over 2^-140 ... 2^60,
 * denormals and the odd infinity. */
static void fill(float *v, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: v[i] = rng_unit(); break;
        case 1: {
            int q = (int)rng_below(7) - 3;
            v[i] = q == 0 ? (rng_below(2) ? -0.0f : 0.0f) : 0.5f * (float)q;
            break;
        }
        case 2: v[i] = rng_below(2) ? 1.25f : -1.25f; break;
        default:
            v[i] = rng_below(200) == 0 ? (rng_below(2) ? INFINITY : -INFINITY)
                                       : ldexpf(rng_unit(), (int)rng_below(200) - 140);
        }
    }
}

static void test_count(void)
{
    struct { size_t size; double ratio; size_t k; } t[] = {
        { 0, 0.01, 0 },    { 1, 0.01, 1 },     { 99, 0.01, 1 },   { 100, 0.01, 1 },
        { 250, 0.01, 2 },  { 1000, 0.01, 10 }, { 100, 0.29, 29 }, { 1000, 0.07, 70 },
        { 10, 1.5, 10 },   { 10, 1.0, 10 },    { 10, 0.0, 1 },    { 10, -1.0, 1 },
        { 7, 0.5, 3 },
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (topk_count(t[i].size, t[i].ratio) != t[i].k) {
            bad++;
            printf("# topk_count(%zu, %g) = %zu, expected %zu\n", t[i].size, t[i].ratio,
                   topk_count(t[i].size, t[i].ratio), t[i].k);
        }
    CHECK(bad == 0, "topk_count: max(1, floor(c size)) capped at size on 13 cases "
                    "(0.29 of 100 = 29, 0 of 10 = 1, 1.5 of 10 = 10)");
}

static void test_select(void)
{
    enum { MAXN = 2100 };
    float *v = dt_malloc(MAXN * sizeof *v);
    uint32_t *got = dt_malloc((MAXN + 8) * sizeof *got), *want = dt_malloc(MAXN * sizeof *want);
    const char *names[4] = { "uniform", "quantized ties and signed zeros", "all tied",
                             "wide exponents, denormals, infinities" };
    for (int kind = 0; kind < 4; kind++) {
        int cases = 0, bad = 0;
        for (int rep = 0; rep < 120; rep++) {
            size_t n = rep < 6 ? (size_t[]){ 1, 2, 3, 255, 256, 257 }[rep] : 1 + rng_below(MAXN);
            fill(v, n, kind);
            size_t ks[6] = { 0, 1, n, n + 5, 1 + rng_below(n), topk_count(n, 0.01) };
            for (int c = 0; c < 6; c++) {
                size_t k = ks[c];
                size_t nk = reference_topk(v, n, k, want);
                got[nk] = 0xdeadbeefu; /* nothing past the count is written */
                size_t m = topk_select(v, n, k, got);
                cases++;
                if (m != nk || memcmp(got, want, nk * sizeof *got) != 0 ||
                    got[nk] != 0xdeadbeefu) {
                    if (!bad)
                        printf("# %s: n %zu k %zu: %zu selected, expected %zu\n", names[kind], n,
                               k, m, nk);
                    bad++;
                }
            }
        }
        CHECK(bad == 0, "topk_select equals a full sort on %d %s cases (k = 0, 1, n, n + 5, "
                        "random, 1%%; n up to %d)", cases, names[kind], MAXN);
    }
    free(v);
    free(got);
    free(want);

    /* one large vector, 1% of it */
    size_t n = 200000, k = topk_count(n, 0.01);
    v = dt_malloc(n * sizeof *v);
    got = dt_malloc(k * sizeof *got);
    want = dt_malloc(k * sizeof *want);
    fill(v, n, 1);
    for (size_t i = 0; i < n; i += 97) /* a few distinct values above the quantized ties */
        v[i] = 2.0f + rng_unit();
    size_t m = topk_select(v, n, k, got);
    reference_topk(v, n, k, want);
    CHECK(m == k && memcmp(got, want, k * sizeof *got) == 0,
          "topk_select of %zu out of %zu with ties at the threshold equals a full sort", k, n);
    free(v);
    free(got);
    free(want);
}

/* ---- topk_compress ---------------------------------------------------------------- */

static void test_segments(void)
{
    enum { N = 1500 };
    /* gaps at 8-9, 1110-1199 and 1233-1499: never sent */
    dt_segment seg[5] = { { 0, 1, 0 },      { 1, 7, 0 },     { 10, 100, 0 },
                          { 110, 1000, 0 }, { 1200, 33, 0 } };
    size_t expect[5] = { 1, 1, 1, 10, 1 };
    float *g = dt_malloc(N * sizeof *g), *g0 = dt_malloc(N * sizeof *g0);
    float *res = dt_calloc(N, sizeof *res), *acc = dt_malloc(N * sizeof *acc);
    size_t cap = topk_capacity(seg, 5, 0.01);
    CHECK(cap == 14, "topk_capacity of tensors (1, 7, 100, 1000, 33) at 0.01 = 14 (got %zu)", cap);
    uint32_t *idx = dt_malloc(N * sizeof *idx), *want = dt_malloc(N * sizeof *want);
    float *val = dt_malloc(N * sizeof *val);

    for (size_t i = 0; i < N; i++)
        res[i] = 0.5f * rng_unit();
    fill(g, N, 1); /* ties decided by index */
    memcpy(g0, g, N * sizeof *g);
    for (size_t i = 0; i < N; i++)
        acc[i] = res[i] + g[i];
    size_t k = topk_compress(g, res, N, seg, 5, 0.01, idx, val);
    int per_ok = 1, sel_ok = 1, val_ok = 1, order_ok = 1;
    size_t at = 0;
    for (int s = 0; s < 5; s++) {
        size_t c = 0;
        while (at + c < k && idx[at + c] >= seg[s].offset &&
               idx[at + c] < seg[s].offset + seg[s].size)
            c++;
        per_ok &= c == expect[s];
        size_t w = reference_topk(acc + seg[s].offset, seg[s].size, expect[s], want);
        for (size_t j = 0; j < w && j < c; j++)
            sel_ok &= idx[at + j] == want[j] + seg[s].offset;
        at += c;
    }
    for (size_t j = 0; j < k; j++) {
        val_ok &= val[j] == acc[idx[j]] && res[idx[j]] == 0.0f;
        order_ok &= j == 0 || idx[j] > idx[j - 1];
    }
    CHECK(k == 14 && at == k && per_ok, "topk_compress: (1, 1, 1, 10, 1) pairs per tensor, "
                                        "none from the gaps (%zu pairs)", k);
    CHECK(sel_ok, "topk_compress: each tensor sends the top entries of residual + g");
    CHECK(val_ok && order_ok, "topk_compress: values are residual + g, ascending global indices, "
                              "sent entries cleared in the residual");
    int gap_ok = 1, rest_ok = 1;
    for (size_t i = 0; i < N; i++) {
        int sent = 0;
        for (size_t j = 0; j < k; j++)
            sent |= idx[j] == i;
        if (!sent)
            rest_ok &= res[i] == acc[i];
        if ((i >= 8 && i < 10) || (i >= 1110 && i < 1200) || i >= 1233)
            gap_ok &= !sent && res[i] == acc[i];
    }
    CHECK(rest_ok && gap_ok && memcmp(g, g0, N * sizeof *g) == 0,
          "topk_compress: unsent entries (gaps included) keep residual + g; g is not modified");

    /* no error feedback: the top entries of g itself */
    k = topk_compress(g, NULL, N, seg, 5, 0.05, idx, val);
    size_t w = 0;
    for (int s = 0; s < 5; s++) {
        size_t c = reference_topk(g + seg[s].offset, seg[s].size,
                                  topk_count(seg[s].size, 0.05), want + w);
        for (size_t j = 0; j < c; j++)
            want[w + j] += (uint32_t)seg[s].offset;
        w += c;
    }
    int same = k == w && memcmp(idx, want, k * sizeof *idx) == 0;
    for (size_t j = 0; same && j < k; j++)
        same = val[j] == g[idx[j]];
    CHECK(same && memcmp(g, g0, N * sizeof *g) == 0,
          "topk_compress without residual at 0.05: %zu pairs, the top entries of g", k);

    /* ratio 1: everything in the tensors is sent, the residual keeps only the gaps */
    memset(res, 0, N * sizeof *res);
    k = topk_compress(g, res, N, seg, 5, 1.0, idx, val);
    int all = k == 1141;
    for (int s = 0; s < 5; s++)
        for (size_t i = seg[s].offset; i < seg[s].offset + seg[s].size; i++)
            all &= res[i] == 0.0f;
    CHECK(all, "topk_compress at ratio 1 sends all 1141 tensor entries (got %zu)", k);

    /* sparse_add: x[idx] += scale val */
    float x[6] = { 1, 2, 3, 4, 5, 6 };
    uint32_t si[3] = { 0, 3, 5 };
    float sv[3] = { 2, -4, 8 };
    sparse_add(x, si, sv, 3, -0.5f);
    CHECK(x[0] == 0 && x[1] == 2 && x[2] == 3 && x[3] == 6 && x[4] == 5 && x[5] == 2,
          "sparse_add with scale -0.5 on 3 of 6 entries");
    free(g);
    free(g0);
    free(res);
    free(acc);
    free(idx);
    free(want);
    free(val);
}

static void test_feedback(void)
{
    enum { N = 1000, ROUNDS = 50 };
    dt_segment seg[4] = { { 0, 600, 0 }, { 600, 20, 0 }, { 620, 370, 0 }, { 990, 10, 0 } };
    const double ratio = 0.02;
    size_t cap = topk_capacity(seg, 4, ratio); /* 12 + 1 + 7 + 1 = 21 */
    float *g = dt_malloc(N * sizeof *g), *res = dt_calloc(N, sizeof *res);
    float *old = dt_malloc(N * sizeof *old), *sent = dt_malloc(N * sizeof *sent);
    double *sum_g = dt_calloc(N, sizeof *sum_g), *sum_sent = dt_calloc(N, sizeof *sum_sent);
    double *sum_plain = dt_calloc(N, sizeof *sum_plain);
    uint32_t *idx = dt_malloc(cap * sizeof *idx);
    float *val = dt_malloc(cap * sizeof *val);
    long mismatch = 0, counts_bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        float amp = 0.1f + (float)(r % 7); /* varying scale: old residuals matter */
        for (size_t i = 0; i < N; i++) {
            g[i] = amp * rng_unit();
            sum_g[i] += g[i];
        }
        memcpy(old, res, N * sizeof *res);
        size_t k = topk_compress(g, res, N, seg, 4, ratio, idx, val);
        counts_bad += k != cap;
        memset(sent, 0, N * sizeof *sent);
        sparse_add(sent, idx, val, k, 1.0f);
        for (size_t i = 0; i < N; i++) {
            float before = old[i] + g[i];
            mismatch += sent[i] + res[i] != before || (sent[i] != 0.0f && res[i] != 0.0f);
            sum_sent[i] += sent[i];
        }
        /* the same gradients without feedback, to show what dropping costs */
        k = topk_compress(g, NULL, N, seg, 4, ratio, idx, val);
        for (size_t j = 0; j < k; j++)
            sum_plain[idx[j]] += val[j];
    }
    double err = 0, lost = 0;
    for (size_t i = 0; i < N; i++) {
        err = fmax(err, fabs(sum_sent[i] + res[i] - sum_g[i]));
        lost = fmax(lost, fabs(sum_plain[i] - sum_g[i]));
    }
    CHECK(counts_bad == 0, "error feedback: %d rounds of %zu pairs each", ROUNDS, cap);
    CHECK(mismatch == 0, "error feedback: every round sent + new residual == old residual + g "
                         "in float on all %d x %d coordinates (%ld mismatches)", ROUNDS, N,
          mismatch);
    CHECK(err < 1e-4, "error feedback: sum of sent updates + final residual == sum of gradients "
                      "over %d rounds (max |diff| %.2e, in double)", ROUNDS, err);
    CHECK(lost > 1.0, "without feedback the unsent mass is lost (max |diff| %.2f)", lost);
    free(g);
    free(res);
    free(old);
    free(sent);
    free(sum_g);
    free(sum_sent);
    free(sum_plain);
    free(idx);
    free(val);
}

/* ---- wire format ---------------------------------------------------------------- */

static int untouched(const uint32_t *idx, size_t cap, size_t k)
{
    for (size_t j = 0; j < cap; j++)
        if (idx[j] != 0xdeadbeefu)
            return 0;
    return k == 777;
}

static void put_u32(unsigned char *buf, size_t pos, uint32_t v)
{
    memcpy(buf + 4 + 4 * pos, &v, 4);
}

static void test_wire(void)
{
    enum { M = 300, BASE = 100, CAP = 64 };
    float g[M];
    for (size_t i = 0; i < M; i++)
        g[i] = rng_unit();
    uint32_t idx[CAP], out[CAP];
    float val[CAP], vout[CAP];
    size_t k = topk_select(g, M, 40, idx);
    for (size_t j = 0; j < k; j++) {
        val[j] = g[idx[j]];
        idx[j] += BASE; /* global indices of a range that starts at BASE */
    }
    unsigned char buf[4 + 8 * CAP + 8];
    size_t bytes = sparse_encode(buf, idx, val, k, BASE), got = 0;
    int rc = sparse_decode(buf, bytes, M, CAP, out, vout, &got);
    int same = rc == 0 && got == k && bytes == 4 + 8 * k;
    for (size_t j = 0; same && j < k; j++)
        same = out[j] == idx[j] - BASE && memcmp(&vout[j], &val[j], sizeof(float)) == 0;
    CHECK(same, "sparse_encode/decode round trip of %zu pairs in %zu bytes, base %d", k, bytes,
          BASE);
    /* an odd offset in a byte buffer, like a body after a header */
    unsigned char shifted[4 + 8 * CAP + 8];
    size_t b2 = sparse_encode(shifted + 3, idx, val, k, BASE);
    rc = sparse_decode(shifted + 3, b2, M, CAP, out, vout, &got);
    CHECK(rc == 0 && got == k && memcmp(shifted + 3, buf, bytes) == 0,
          "sparse_encode/decode at an unaligned address");
    bytes = sparse_encode(buf, idx, val, 0, BASE);
    rc = sparse_decode(buf, bytes, M, CAP, out, vout, &got);
    CHECK(rc == 0 && got == 0 && bytes == 4, "an empty update is 4 bytes and decodes");

    bytes = sparse_encode(buf, idx, val, k, BASE);
    struct {
        const char *what, *msg;
        size_t bytes, n, cap;
        int patch;       /* 0 none; 1 count v; 2 index v at pos; 3 predecessor - 1; 4 repeat */
        size_t pos;
        uint32_t v;
    } bad[] = {
        { "3 bytes, shorter than the count", "shorter", 3, M, CAP, 0, 0, 0 },
        { "count beyond the range", "exceeds", 4 + 8 * (M + 1), M, 1000, 1, 0, M + 1 },
        { "count beyond the receiver's capacity", "exceeds", bytes, M, k - 1, 0, 0, 0 },
        { "one byte short", "expected", bytes - 1, M, CAP, 0, 0, 0 },
        { "4 bytes too many", "expected", bytes + 4, M, CAP, 0, 0, 0 },
        { "an index equal to n", "outside", bytes, M, CAP, 2, 7, M },
        { "an index far out of range", "outside", bytes, M, CAP, 2, 0, 0xffffffffu },
        { "an index below its predecessor", "does not increase", bytes, M, CAP, 3, 5, 0 },
        { "a repeated index", "does not increase", bytes, M, CAP, 4, 12, 0 },
    };
    static unsigned char big[4 + 8 * (M + 1)];
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        unsigned char *b = bad[c].patch == 1 ? big : buf;
        sparse_encode(buf, idx, val, k, BASE);
        if (bad[c].patch == 1)
            memcpy(big, &bad[c].v, 4);
        if (bad[c].patch >= 2) {
            uint32_t v = bad[c].v;
            if (bad[c].patch >= 3) { /* relative to the previous index (>= pos - 1 >= 1) */
                memcpy(&v, buf + 4 + 4 * (bad[c].pos - 1), 4);
                v -= bad[c].patch == 3;
            }
            put_u32(buf, bad[c].pos, v);
        }
        uint32_t o[CAP];
        for (size_t j = 0; j < CAP; j++)
            o[j] = 0xdeadbeefu;
        size_t kk = 777;
        dt_err_clear();
        rc = sparse_decode(b, bad[c].bytes, bad[c].n, bad[c].cap, o, vout, &kk);
        CHECK(rc == -1 && strstr(dt_err_msg(), bad[c].msg) && untouched(o, CAP, kk),
              "sparse_decode rejects %s, outputs untouched: %s", bad[c].what, dt_err_msg());
    }
}

/* ---- AdaComp --------------------------------------------------------------------- */

static size_t sent_at(const uint32_t *idx, size_t k, uint32_t i)
{
    for (size_t j = 0; j < k; j++)
        if (idx[j] == i)
            return j;
    return (size_t)-1;
}

static void test_adacomp_hand(void)
{
    /* one tensor of 10 in bins of 5, an empty residual: G = g, H = 2 g, so an
     * entry goes when |g| >= half its bin's max |g| */
    float g[12] = { 1.0f, -0.4f, 0.6f, 0.2f, -0.5f, /* bin max 1: sends 0, 2, 4 */
                    0.0f, 0.3f, -0.3f, 0.1f, 0.05f, /* bin max 0.3: sends 6, 7 */
                    7.0f, 8.0f };                   /* outside the tensor */
    float res[12] = { 0 };
    dt_segment seg[1] = { { 0, 10, 5 } };
    uint32_t idx[12];
    float val[12];
    size_t k = adacomp_compress(g, res, 12, seg, 1, idx, val);
    const float scale = (float)(((double)1.0f + (double)0.3f) / 2);
    const uint32_t want[5] = { 0, 2, 4, 6, 7 };
    const float sign[5] = { 1, 1, -1, 1, -1 };
    int ok = k == 5;
    for (size_t j = 0; ok && j < k; j++)
        ok = idx[j] == want[j] && val[j] == sign[j] * scale;
    CHECK(ok, "adacomp: bins (1, -0.4, 0.6, 0.2, -0.5) (0, 0.3, -0.3, 0.1, 0.05) send entries "
              "0 2 4 6 7 as +-%.2f, the mean of the bin maxima (got %zu)", scale, k);
    int rok = res[10] == 7.0f && res[11] == 8.0f;
    for (int i = 0; i < 10; i++) {
        size_t j = sent_at(idx, k, (uint32_t)i);
        float expect = j == (size_t)-1 ? g[i] : g[i] - val[j];
        rok = rok && res[i] == expect;
    }
    CHECK(rok, "adacomp: the residual is G minus what was sent (overshoot kept), entries "
               "outside the tensor only accumulate");

    /* the new gradient decides: the bin's largest residue goes only when g
     * pushes it further; an entry with G = 0 never goes */
    float r2[5] = { 0.5f, -0.9f, 0.3f, 0.0f, 0.1f };
    float g2[5] = { 0.4f, 0.2f, -0.1f, 0.0f, 0.0f }; /* G = 0.9 -0.7 0.2 0 0.1 */
    dt_segment one[1] = { { 0, 5, 5 } };
    k = adacomp_compress(g2, r2, 5, one, 1, idx, val);
    CHECK(k == 1 && idx[0] == 0 && val[0] == 0.9f,
          "adacomp: G (0.9, -0.7, 0.2, 0, 0.1), H (1.3, -0.5, 0.1, 0, 0.1): only entry 0 goes, "
          "as the bin's max 0.9 (got %zu pairs)", k);

    /* a bin longer than the tensor is one bin; bin 1 sends every entry whose
     * gradient does not shrink its residue */
    enum { N = 1000 };
    float *a = dt_malloc(N * sizeof *a), *ra = dt_calloc(N, sizeof *ra);
    float *rb = dt_calloc(N, sizeof *rb), *va = dt_malloc(N * sizeof *va);
    float *vb = dt_malloc(N * sizeof *vb);
    uint32_t *ia = dt_malloc(N * sizeof *ia), *ib = dt_malloc(N * sizeof *ib);
    for (size_t i = 0; i < N; i++)
        a[i] = rng_unit();
    dt_segment sa[1] = { { 0, N, N } }, sb[1] = { { 0, N, 50 * N } };
    size_t ka = adacomp_compress(a, ra, N, sa, 1, ia, va);
    size_t kb = adacomp_compress(a, rb, N, sb, 1, ib, vb);
    CHECK(ka == kb && ka >= 1 && memcmp(ia, ib, ka * sizeof *ia) == 0 &&
              memcmp(va, vb, ka * sizeof *va) == 0 && memcmp(ra, rb, N * sizeof *ra) == 0,
          "adacomp: a bin of 50000 over a tensor of 1000 is one bin of 1000 (%zu pairs)", ka);
    for (size_t i = 0; i < N; i++) {
        ra[i] = rng_unit();
        a[i] = (i % 3 == 0) ? 0.0f : rng_unit();
    }
    memcpy(rb, ra, N * sizeof *ra);
    dt_segment s1[1] = { { 0, N, 1 } };
    ka = adacomp_compress(a, ra, N, s1, 1, ia, va);
    size_t expect = 0, bad = 0;
    for (size_t i = 0; i < N; i++) {
        float G = rb[i] + a[i];
        int go = G != 0.0f && fabsf(G + a[i]) >= fabsf(G);
        size_t j = sent_at(ia, ka, (uint32_t)i);
        expect += go;
        bad += go != (j != (size_t)-1);
    }
    CHECK(ka == expect && bad == 0, "adacomp: bins of 1 send exactly the %zu entries whose "
                                    "gradient does not shrink the residue", expect);

    /* a diverged gradient is sent as it is, not hidden in the residual */
    float gn[6] = { 0.1f, NAN, 0.3f, -INFINITY, 0.2f, 0.1f }, rn[6] = { 0 };
    dt_segment sn[1] = { { 0, 6, 3 } };
    k = adacomp_compress(gn, rn, 6, sn, 1, idx, val);
    size_t jn = sent_at(idx, k, 1), ji = sent_at(idx, k, 3);
    CHECK(jn != (size_t)-1 && isnan(val[jn]) && ji != (size_t)-1 && val[ji] == -INFINITY &&
              rn[1] == 0 && rn[3] == 0 && isfinite(val[sent_at(idx, k, 2)]),
          "adacomp: NaN and -inf are sent as they are, their residual 0, the finite entries "
          "still quantized");
    free(a);
    free(ra);
    free(rb);
    free(va);
    free(vb);
    free(ia);
    free(ib);
}

static void test_adacomp_feedback(void)
{
    enum { N = 3000, ROUNDS = 50 };
    dt_segment seg[3] = { { 0, 288, 50 }, { 288, 32, 50 }, { 400, 2600, 500 } };
    float *g = dt_malloc(N * sizeof *g), *res = dt_calloc(N, sizeof *res);
    double *sum_g = dt_calloc(N, sizeof *sum_g), *sum_sent = dt_calloc(N, sizeof *sum_sent);
    uint32_t *idx = dt_malloc(N * sizeof *idx);
    float *val = dt_malloc(N * sizeof *val);
    size_t total = 0, worst_round = 0;
    int magnitudes_bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        float amp = 0.1f + (float)(r % 7);
        for (size_t i = 0; i < N; i++) {
            g[i] = amp * rng_unit() * rng_unit() * rng_unit(); /* heavy-tailed */
            sum_g[i] += g[i];
        }
        size_t k = adacomp_compress(g, res, N, seg, 3, idx, val);
        total += k;
        worst_round = k > worst_round ? k : worst_round;
        for (size_t j = 0; j < k; j++) {
            sum_sent[idx[j]] += val[j];
            /* one magnitude per tensor */
            int t = idx[j] < 288 ? 0 : idx[j] < 320 ? 1 : 2;
            for (size_t q = 0; q < j; q++) {
                int tq = idx[q] < 288 ? 0 : idx[q] < 320 ? 1 : 2;
                if (tq == t && fabsf(val[q]) != fabsf(val[j]))
                    magnitudes_bad++;
            }
        }
    }
    double err = 0, scale = 0;
    for (size_t i = 0; i < N; i++) {
        err = fmax(err, fabs(sum_sent[i] + res[i] - sum_g[i]));
        scale = fmax(scale, fabs(sum_g[i]));
    }
    CHECK(magnitudes_bad == 0, "adacomp: every value a tensor sends in a round has one magnitude");
    CHECK(err < 1e-5 * scale, "adacomp error feedback: sum of sent updates + final residual == "
                              "sum of gradients over %d rounds (max |diff| %.2e of %.2f)", ROUNDS,
          err, scale);
    CHECK(total > 0 && worst_round < N / 10, "adacomp: sends %.1f%% of the entries a round on "
                                             "average (at most %zu of %d)",
          100.0 * (double)total / (ROUNDS * (double)N), worst_round, N);
    free(g);
    free(res);
    free(sum_g);
    free(sum_sent);
    free(idx);
    free(val);
}

static void test_qsparse(void)
{
    enum { M = 300, BASE = 100, CAP = 64 };
    uint32_t idx[CAP], out[CAP];
    float val[CAP], vout[CAP];
    /* three magnitudes (one with a negative zero run), random signs */
    size_t k = 0;
    for (uint32_t i = 0; i < M && k < 40; i += 1 + (uint32_t)rng_below(9)) {
        idx[k] = BASE + i;
        float mag = k < 15 ? 0.25f : k < 16 ? 0.0f : k < 33 ? 3e-7f : 1e30f;
        val[k++] = rng_next() & 1 ? -mag : mag;
    }
    static unsigned char buf[8 + 12 * CAP + CAP / 8 + 8], shifted[8 + 12 * CAP + CAP / 8 + 8];
    size_t bytes = qsparse_encode(buf, idx, val, k, BASE), got = 0;
    int rc = qsparse_decode(buf, bytes, M, CAP, out, vout, &got);
    int same = rc == 0 && got == k && bytes == 8 + 8 * 4 + 4 * k + (k + 7) / 8;
    for (size_t j = 0; same && j < k; j++)
        same = out[j] == idx[j] - BASE && memcmp(&vout[j], &val[j], sizeof(float)) == 0;
    CHECK(same, "qsparse_encode/decode: %zu pairs in 4 runs round trip bit for bit in "
                "8 + 8*4 + 4k + ceil(k/8) = %zu bytes", k, bytes);
    size_t b2 = qsparse_encode(shifted + 3, idx, val, k, BASE);
    rc = qsparse_decode(shifted + 3, b2, M, CAP, out, vout, &got);
    CHECK(rc == 0 && got == k && b2 == bytes && memcmp(shifted + 3, buf, bytes) == 0,
          "qsparse_encode/decode at an unaligned address");
    for (size_t j = 0; j < k; j++)
        val[j] = rng_unit();
    bytes = qsparse_encode(buf, idx, val, k, BASE);
    rc = qsparse_decode(buf, bytes, M, CAP, out, vout, &got);
    CHECK(rc == 0 && got == k && bytes == qsparse_bound(k) &&
              memcmp(vout, val, k * sizeof *val) == 0,
          "qsparse: %zu distinct values take the bound of %zu bytes and round trip", k, bytes);
    bytes = qsparse_encode(buf, idx, val, 0, BASE);
    rc = qsparse_decode(buf, bytes, M, CAP, out, vout, &got);
    CHECK(rc == 0 && got == 0 && bytes == 8, "qsparse: an empty update is 8 bytes and decodes");

    /* malformed messages; a well-formed one of 10 pairs in 2 runs to patch */
    for (size_t j = 0; j < 10; j++)
        val[j] = j < 4 ? 0.5f : -2.0f;
    const size_t good = qsparse_encode(buf, idx, val, 10, BASE); /* 8 + 16 + 40 + 2 = 66 */
    struct {
        const char *what, *msg;
        size_t bytes, cap;
        size_t pos;     /* byte offset of a uint32 to overwrite; 0: none */
        uint32_t v;
    } bad[] = {
        { "7 bytes, shorter than the header", "shorter", 7, CAP, 0, 0 },
        { "count beyond the range", "exceeds", good, 1000, 1, M + 1 },
        { "count beyond the receiver's capacity", "exceeds", good, 9, 0, 0 },
        { "more runs than pairs", "runs", good, CAP, 4, 11 },
        { "no run for 10 pairs", "runs", good, CAP, 4, 0 },
        { "a run end that does not increase", "ends at", good, CAP, 16, 4 },
        { "a last run that stops short of the count", "ends at", good, CAP, 16, 9 },
        { "one byte short", "expected", good - 1, CAP, 0, 0 },
        { "one byte too many", "expected", good + 1, CAP, 0, 0 },
        { "an index equal to n", "outside", good, CAP, 24 + 4 * 3, M },
        { "an index below its predecessor", "does not increase", good, CAP, 24 + 4 * 6, 0 },
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        qsparse_encode(buf, idx, val, 10, BASE);
        if (bad[c].pos) {
            size_t at = bad[c].pos == 1 ? 0 : bad[c].pos;
            memcpy(buf + at, &bad[c].v, 4);
        }
        uint32_t o[CAP];
        for (size_t j = 0; j < CAP; j++)
            o[j] = 0xdeadbeefu;
        size_t kk = 777;
        dt_err_clear();
        rc = qsparse_decode(buf, bad[c].bytes, M, bad[c].cap, o, vout, &kk);
        CHECK(rc == -1 && strstr(dt_err_msg(), bad[c].msg) && untouched(o, CAP, kk),
              "qsparse_decode rejects %s, outputs untouched: %s", bad[c].what, dt_err_msg());
    }
}

/* ---- staleness ------------------------------------------------------------------ */

static int all_equal(const float *s, size_t n, float want)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != want)
            return 0;
    return 1;
}

static void test_staleness_hand(void)
{
    enum { N = 10 };
    float s[N];
    dt_staleness *st = staleness_create(N, 4);
    staleness_scales(st, 3, NULL, N, s);
    CHECK(all_equal(s, N, 1.0f), "staleness: empty history, d = 3: scale 1");

    uint32_t a[3] = { 1, 3, 5 }, b[2] = { 3, 4 };
    staleness_record(st, NULL, 0);
    staleness_record(st, NULL, 0);
    staleness_record(st, a, 3);
    staleness_record(st, b, 2); /* history, oldest first: D, D, {1,3,5}, {3,4} */

    staleness_scales(st, 0, NULL, N, s);
    CHECK(all_equal(s, N, 1.0f), "staleness: d = 0 with 4 updates held: every scale 1 "
                                 "(not the whole history)");
    staleness_scales(st, -5, NULL, N, s);
    CHECK(all_equal(s, N, 1.0f), "staleness: negative delay: scale 1");
    staleness_scales(st, 2, NULL, N, s);
    CHECK(s[3] == 0.5f && s[1] == 1 && s[4] == 1 && s[5] == 1 && s[0] == 1 && s[9] == 1,
          "staleness: d = 2: coordinate 3 touched twice -> 1/2, the rest at most once -> 1");
    staleness_scales(st, 3, NULL, N, s);
    CHECK(s[3] == 1.0f / 3 && s[1] == 0.5f && s[4] == 0.5f && s[5] == 0.5f && s[0] == 1 &&
              s[2] == 1 && s[9] == 1,
          "staleness: d = 3 (D, {1,3,5}, {3,4}): s = 3 at 3, 2 at 1, 4, 5, 1 elsewhere");
    float d4[N];
    staleness_scales(st, 4, NULL, N, d4);
    CHECK(d4[3] == 0.25f && d4[1] == 1.0f / 3 && d4[4] == 1.0f / 3 && d4[5] == 1.0f / 3 &&
              d4[0] == 0.5f && d4[9] == 0.5f,
          "staleness: d = 4: s = 4 at 3, 3 at 1, 4, 5, 2 elsewhere");
    staleness_scales(st, 100, NULL, N, s);
    CHECK(memcmp(s, d4, sizeof s) == 0, "staleness: d = 100 is clamped to the 4 updates held");
    uint32_t q[4] = { 9, 3, 5, 0 };
    float sq[4];
    staleness_scales(st, 4, q, 4, sq);
    CHECK(sq[0] == 0.5f && sq[1] == 0.25f && sq[2] == 1.0f / 3 && sq[3] == 0.5f,
          "staleness: a sparse query (9, 3, 5, 0) gets the dense query's scales");

    staleness_record(st, NULL, 0); /* the ring drops the oldest: D, {1,3,5}, {3,4}, D */
    staleness_scales(st, 4, NULL, N, s);
    CHECK(s[3] == 0.25f && s[1] == 1.0f / 3 && s[4] == 1.0f / 3 && s[0] == 0.5f,
          "staleness: after wrapping, d = 4 counts D, {1,3,5}, {3,4}, D");
    staleness_scales(st, 2, NULL, N, s);
    CHECK(s[3] == 0.5f && s[4] == 0.5f && s[1] == 1 && s[0] == 1,
          "staleness: after wrapping, d = 2 counts {3,4}, D");
    staleness_free(st);

    st = staleness_create(N, 8);
    for (int i = 0; i < 5; i++)
        staleness_record(st, NULL, 0);
    float s3[N], s5[N], s7[N];
    staleness_scales(st, 3, NULL, N, s3);
    staleness_scales(st, 5, NULL, N, s5);
    staleness_scales(st, 7, NULL, N, s7);
    CHECK(all_equal(s3, N, 1.0f / 3) && all_equal(s5, N, 0.2f) && all_equal(s7, N, 0.2f) &&
              staleness_held(st) == 5,
          "staleness: 5 dense updates: d = 3 -> 1/3, d = 5 -> 1/5, d = 7 -> 1/5 (5 held)");
    for (int i = 0; i < 10; i++)
        staleness_record(st, NULL, 0);
    staleness_scales(st, 20, NULL, N, s);
    CHECK(all_equal(s, N, 0.125f) && staleness_held(st) == 8,
          "staleness: 15 dense updates in a history of 8, d = 20 -> 1/8");
    staleness_free(st);
}

/* A random history of dense and sparse updates against a brute-force count
 * over every update ever recorded. */
static void test_staleness_random(void)
{
    enum { N = 200, H = 16, STEPS = 300 };
    static unsigned char touched[STEPS][N];
    dt_staleness *st = staleness_create(N, H);
    uint32_t idx[N], q[N];
    float dense[N], sparse[N];
    int bad = 0, checks = 0;
    for (int t = 0; t < STEPS; t++) {
        int64_t d = (int64_t)rng_below(H + 6);
        /* a sorted random query */
        size_t kq = 0;
        for (size_t i = 0; i < N; i++)
            if (rng_below(5) == 0)
                q[kq++] = (uint32_t)i;
        staleness_scales(st, d, NULL, N, dense);
        staleness_scales(st, d, q, kq, sparse);
        int dd = (int)(d < H ? d : H);
        if (dd > t)
            dd = t;
        for (size_t i = 0; i < N; i++) {
            int s = 0;
            for (int back = 1; back <= dd; back++)
                s += touched[t - back][i];
            float want = 1.0f / (float)(s > 1 ? s : 1);
            bad += dense[i] != want;
            checks++;
        }
        for (size_t j = 0; j < kq; j++)
            bad += sparse[j] != dense[q[j]];
        checks += (int)kq;
        /* record: dense one time in 5, else a random sorted subset */
        if (rng_below(5) == 0) {
            memset(touched[t], 1, N);
            staleness_record(st, NULL, 0);
        } else {
            size_t k = 0;
            size_t p = 1 + rng_below(30);
            for (size_t i = 0; i < N; i++)
                if (rng_below(p) == 0) {
                    idx[k++] = (uint32_t)i;
                    touched[t][i] = 1;
                }
            staleness_record(st, idx, k);
        }
    }
    staleness_free(st);
    CHECK(bad == 0, "staleness: %d steps of a random history (H %d, d up to %d): %d scales "
                    "equal a brute-force count, sparse queries equal dense ones (%d wrong)",
          STEPS, H, H + 5, checks, bad);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_count();
    test_select();
    test_segments();
    test_feedback();
    test_wire();
    test_adacomp_hand();
    test_adacomp_feedback();
    test_qsparse();
    test_staleness_hand();
    test_staleness_random();
    MPI_Finalize();
    return tap_done();
}
