/* Token data: the text corpus (file and directory rules, vocabulary, split),
 * llm.c token files (round trip and every rejected input), the corpus size
 * check, the training-window sampler (shift, bounds, determinism, resume,
 * ranks) and the validation windows. */
#include "core/error.h"
#include "data/tokens.h"
#include "tap.h"
#include "tmpdir.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n > 0 && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", path);
        exit(1);
    }
}

/* The last error names every one of the given strings. */
static int msg_has(const char *a, const char *b)
{
    const char *m = dt_err_msg();
    int ok = strstr(m, a) != NULL && (!b || strstr(m, b) != NULL);
    printf("#   message: %s\n", m);
    return ok;
}

/* The whole corpus decoded back to bytes equals text[0..n). */
static int corpus_is(const dt_corpus *c, const char *text, int64_t n)
{
    if (c->n_train + c->n_val != n)
        return 0;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint8_t *out = malloc((size_t)n);
    for (int64_t i = 0; i < c->n_train; i++)
        ids[i] = c->train[i];
    for (int64_t i = 0; i < c->n_val; i++)
        ids[c->n_train + i] = c->val[i];
    int ok = tokens_decode(c->bytes, c->vocab, ids, n, out) == 0 && memcmp(out, text, (size_t)n) == 0;
    free(ids);
    free(out);
    return ok;
}

/* ---- text ------------------------------------------------------------------ */

static void test_text_dir(void)
{
    const char *dir = tmp_path("corpus");
    mkdir(dir, 0700);
    char p[600];
    /* strcmp order: "Zeta" < "alpha" < "beta" (upper case first, whatever the locale) */
    const char *zeta = "Zz top\n", *alpha = "hello, ", *beta = "world! and more text\n";
    snprintf(p, sizeof p, "%s/beta", dir);
    write_bytes(p, beta, strlen(beta));
    snprintf(p, sizeof p, "%s/alpha", dir);
    write_bytes(p, alpha, strlen(alpha));
    snprintf(p, sizeof p, "%s/Zeta", dir);
    write_bytes(p, zeta, strlen(zeta));
    /* binary (a NUL byte in the middle), a symbolic link to a text file and a
     * subdirectory: all three skipped */
    const char bin[] = { 'a', 'b', 0, 'c' };
    snprintf(p, sizeof p, "%s/aardvark.dat", dir);
    write_bytes(p, bin, sizeof bin);
    snprintf(p, sizeof p, "%s/alpha.u8", dir);
    CHECK(symlink("alpha", p) == 0, "symlink created");
    snprintf(p, sizeof p, "%s/sub", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/sub/inner", dir);
    write_bytes(p, "inner text", 10);

    dt_corpus c;
    int rc = corpus_load_text(&c, dir);
    CHECK(rc == 0, "text directory loads: %s", rc ? dt_err_msg() : "ok");
    if (rc)
        return;
    char expect[256];
    snprintf(expect, sizeof expect, "%s%s%s", zeta, alpha, beta);
    int64_t n = (int64_t)strlen(expect);
    CHECK(corpus_is(&c, expect, n), "files concatenated in strcmp order (Zeta, alpha, beta), "
                                    "binary file, symlink and subdirectory left out");
    CHECK(c.files_read == 3 && c.files_binary == 1 && c.files_other == 2,
          "3 files read, 1 binary and 2 other entries skipped (got %d, %d, %d)", c.files_read,
          c.files_binary, c.files_other);
    /* distinct bytes of the expected text, counted here */
    int seen[256] = { 0 }, v = 0;
    for (int64_t i = 0; i < n; i++)
        seen[(uint8_t)expect[i]] = 1;
    for (int i = 0; i < 256; i++)
        v += seen[i];
    CHECK(c.vocab == v, "vocabulary = %d distinct bytes (got %d)", v, c.vocab);
    int sorted = 1;
    for (int i = 1; i < c.vocab; i++)
        sorted &= c.bytes[i - 1] < c.bytes[i];
    CHECK(sorted && c.bytes[0] == '\n', "byte table sorted ascending, id 0 = '\\n' (the smallest)");
    CHECK(c.n_train == n * 9 / 10 && c.n_val == n - n * 9 / 10,
          "split of %lld bytes: %lld training, %lld validation (floor 90 %%)", (long long)n,
          (long long)c.n_train, (long long)c.n_val);
    corpus_free(&c);

    /* the split for lengths around multiples of 10 */
    const int lens[] = { 10, 11, 19, 20, 99, 101 };
    char big[128];
    memset(big, 'x', sizeof big);
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        write_bytes(tmp_path("one.txt"), big, (size_t)lens[i]);
        rc = corpus_load_text(&c, tmp_path("one.txt"));
        int64_t want = (int64_t)lens[i] * 9 / 10;
        CHECK(rc == 0 && c.n_train == want && c.n_val == lens[i] - want && c.vocab == 1 &&
                  c.files_read == 1,
              "single file of %d bytes: %lld + %lld", lens[i], (long long)c.n_train,
              (long long)c.n_val);
        corpus_free(&c);
    }
}

static void test_text_errors(void)
{
    dt_corpus c;
    const char *empty = tmp_path("empty-dir");
    mkdir(empty, 0700);
    CHECK(corpus_load_text(&c, empty) < 0 && msg_has(empty, "empty directory"),
          "an empty directory is refused, naming it");

    const char *onlybin = tmp_path("bin-dir");
    mkdir(onlybin, 0700);
    char p[600];
    snprintf(p, sizeof p, "%s/x.dat", onlybin);
    write_bytes(p, "\0\1\2", 3);
    CHECK(corpus_load_text(&c, onlybin) < 0 && msg_has(onlybin, "1 binary"),
          "a directory of binary files only is refused, counting them");

    const char *missing = tmp_path("no-such-file");
    CHECK(corpus_load_text(&c, missing) < 0 && msg_has(missing, "cannot open"),
          "a missing path is refused, naming it");

    const char *dangling = tmp_path("dangling");
    CHECK(symlink("no-such-target", dangling) == 0 && corpus_load_text(&c, dangling) < 0 &&
              msg_has(dangling, "cannot open"),
          "a dangling symbolic link as data.path is refused, naming it");

    const char *nulfile = tmp_path("nul.txt");
    write_bytes(nulfile, "abc\0def", 7);
    CHECK(corpus_load_text(&c, nulfile) < 0 && msg_has(nulfile, "offset 3"),
          "a single file with a NUL byte is refused, naming the offset");

    const char *zero = tmp_path("zero.txt");
    write_bytes(zero, "", 0);
    CHECK(corpus_load_text(&c, zero) < 0 && msg_has(zero, "0 bytes"),
          "an empty text file is refused");

    const char *unreadable = tmp_path("unreadable-dir");
    mkdir(unreadable, 0700);
    snprintf(p, sizeof p, "%s/locked.txt", unreadable);
    write_bytes(p, "secret", 6);
    chmod(p, 0);
    FILE *probe = fopen(p, "rb"); /* root reads anything: then there is nothing to test */
    if (probe) {
        fclose(probe);
        printf("ok - # SKIP unreadable file (running as a user who reads mode-0 files)\n");
    } else {
        CHECK(corpus_load_text(&c, unreadable) < 0 && msg_has(p, "cannot open"),
              "an unreadable file in the directory is an error naming it");
    }
    chmod(p, 0600);
}

/* corpus_check on text: the validation split (last 10 %) is the binding one;
 * 10 T + 1 bytes is the least that works. */
static void test_text_check(void)
{
    const int T = 16;
    char buf[10 * 16 + 1];
    memset(buf, 'q', sizeof buf);
    dt_corpus c;
    const char *p = tmp_path("short.txt");
    write_bytes(p, buf, 10 * T);
    CHECK(corpus_load_text(&c, p) == 0, "160 bytes load");
    CHECK(corpus_check(&c, T) < 0 && msg_has(p, "at least 161 bytes"),
          "10 T bytes are too few for T = %d: message says 10 T + 1 = 161 are needed", T);
    corpus_free(&c);
    write_bytes(p, buf, 10 * T + 1);
    CHECK(corpus_load_text(&c, p) == 0 && corpus_check(&c, T) == 0 && c.n_val == T + 1,
          "10 T + 1 bytes pass, validation split = T + 1");
    corpus_free(&c);
    CHECK(corpus_check(&c, 0) < 0 && msg_has("block_size", NULL), "T = 0 refused");
}

/* ---- token files ----------------------------------------------------------- */

typedef struct tokfile {
    uint32_t word[256];
    const uint16_t *tok;
    size_t ntok;
    size_t extra; /* trailing bytes */
    size_t cut;   /* bytes dropped from the end (after extra) */
} tokfile;

static void tok_write(const char *path, const tokfile *t)
{
    size_t n = 1024 + 2 * t->ntok + t->extra;
    uint8_t *b = calloc(n, 1);
    for (int i = 0; i < 256; i++)
        for (int k = 0; k < 4; k++)
            b[4 * i + k] = (uint8_t)(t->word[i] >> (8 * k));
    for (size_t i = 0; i < t->ntok; i++) {
        b[1024 + 2 * i] = (uint8_t)t->tok[i];
        b[1024 + 2 * i + 1] = (uint8_t)(t->tok[i] >> 8);
    }
    write_bytes(path, b, n - t->cut);
    free(b);
}

static tokfile tok_good(const uint16_t *tok, size_t n)
{
    tokfile t = { .tok = tok, .ntok = n };
    t.word[0] = DT_TOKENS_MAGIC;
    t.word[1] = DT_TOKENS_VERSION;
    t.word[2] = (uint32_t)n;
    return t;
}

enum { NTR = 300, NVA = 70 };

static void test_tokens_roundtrip(void)
{
    static uint16_t tr[NTR], va[NVA];
    for (int i = 0; i < NTR; i++)
        tr[i] = (uint16_t)((i * 7919u + 13u) % DT_TOKENS_DEFAULT_VOCAB);
    tr[5] = DT_TOKENS_DEFAULT_VOCAB - 1; /* the largest valid token */
    for (int i = 0; i < NVA; i++)
        va[i] = (uint16_t)((i * 104729u + 1u) % DT_TOKENS_DEFAULT_VOCAB);
    tokfile a = tok_good(tr, NTR), b = tok_good(va, NVA);
    tok_write(tmp_path("train.bin"), &a);
    tok_write(tmp_path("val.bin"), &b);
    dt_corpus c;
    int rc = corpus_load_tokens(&c, tmp_path("train.bin"), tmp_path("val.bin"), 0);
    CHECK(rc == 0, "token files load: %s", rc ? dt_err_msg() : "ok");
    if (rc)
        return;
    CHECK(c.vocab == DT_TOKENS_DEFAULT_VOCAB && c.n_train == NTR && c.n_val == NVA &&
              strcmp(c.name, "tokens") == 0,
          "vocab 0 -> 50257, counts %d and %d", NTR, NVA);
    CHECK(memcmp(c.train, tr, sizeof tr) == 0 && memcmp(c.val, va, sizeof va) == 0,
          "tokens round-trip exactly (little-endian uint16)");
    CHECK(corpus_check(&c, NVA - 1) == 0, "corpus_check passes at T + 1 = validation size");
    CHECK(corpus_check(&c, NVA) < 0 && msg_has(tmp_path("val.bin"), "at least 71 tokens"),
          "corpus_check fails at T = %d, naming the validation file and 71 tokens", NVA);
    CHECK(corpus_check(&c, NTR) < 0 && msg_has(tmp_path("train.bin"), "training split"),
          "corpus_check fails at T = %d on the training file first", NTR);
    corpus_free(&c);

    /* an empty but well-formed file loads (the size check refuses it later) */
    tokfile e = tok_good(NULL, 0);
    tok_write(tmp_path("empty.bin"), &e);
    rc = corpus_load_tokens(&c, tmp_path("train.bin"), tmp_path("empty.bin"), 0);
    CHECK(rc == 0 && c.n_val == 0 && corpus_check(&c, 1) < 0 &&
              msg_has(tmp_path("empty.bin"), "holds 0 tokens"),
          "a token file of 0 tokens loads, and corpus_check refuses it");
    corpus_free(&c);

    /* a smaller vocabulary: tokens up to vocab - 1 are accepted */
    uint16_t small[4] = { 0, 1, 2, 9 };
    tokfile s = tok_good(small, 4);
    tok_write(tmp_path("small.bin"), &s);
    CHECK(corpus_load_tokens(&c, tmp_path("small.bin"), tmp_path("small.bin"), 10) == 0 &&
              c.vocab == 10 && c.train[3] == 9,
          "vocab 10 accepts token 9");
    corpus_free(&c);
}

/* The file at `name`, written from t, is refused with a message holding the
 * path and `what`; as the training file and as the validation file. */
static void expect_refused(const char *name, const tokfile *t, int vocab, const char *what,
                           const char *desc)
{
    static uint16_t ok[NVA];
    tokfile g = tok_good(ok, NVA);
    tok_write(tmp_path("good.bin"), &g);
    const char *bad = tmp_path(name);
    tok_write(bad, t);
    dt_corpus c;
    memset(&c, 0x5a, sizeof c);
    int rc = corpus_load_tokens(&c, bad, tmp_path("good.bin"), vocab);
    CHECK(rc < 0 && msg_has(bad, what) && c.train == NULL, "%s: refused as training file", desc);
    bad = tmp_path(name);
    rc = corpus_load_tokens(&c, tmp_path("good.bin"), bad, vocab);
    CHECK(rc < 0 && msg_has(bad, what) && c.train == NULL && c.val == NULL,
          "%s: refused as validation file", desc);
}

static void test_tokens_errors(void)
{
    static uint16_t tok[40];
    for (int i = 0; i < 40; i++)
        tok[i] = (uint16_t)i;
    tokfile t;

    t = tok_good(tok, 40);
    t.word[0] = 20240521;
    expect_refused("magic.bin", &t, 0, "bad magic 20240521", "wrong magic");
    t = tok_good(tok, 40);
    t.word[0] = 20240801;
    t.word[1] = 7;
    expect_refused("u32.bin", &t, 0, "uint32 token file", "llm.c's uint32 format named");
    t = tok_good(tok, 40);
    t.word[1] = 2;
    expect_refused("version.bin", &t, 0, "version 2", "wrong version");
    t = tok_good(tok, 40);
    t.word[2] = 41;
    expect_refused("short.bin", &t, 0, "truncated", "count 41, 40 tokens present (too short)");
    t = tok_good(tok, 40);
    t.cut = 1;
    expect_refused("odd.bin", &t, 0, "39 tokens and a half", "last token cut in half");
    t = tok_good(tok, 40);
    t.word[2] = 39;
    expect_refused("long.bin", &t, 0, "trailing data", "count 39, 40 tokens present");
    t = tok_good(tok, 40);
    t.extra = 1;
    expect_refused("extra.bin", &t, 0, "trailing data", "one byte after the tokens");
    t = tok_good(tok, 0);
    t.cut = 1024 - 100;
    expect_refused("header.bin", &t, 0, "shorter than the 1024-byte header", "header cut at 100 bytes");
    t = tok_good(tok, 0);
    t.cut = 1024 - 5;
    expect_refused("tiny.bin", &t, 0, "5 bytes", "a 5-byte file");
    t = tok_good(tok, 40);
    expect_refused("vocab.bin", &t, 7, "token 7 at index 7", "token >= vocab (7), index named");
    t = tok_good(tok, 40);
    expect_refused("vocab-last.bin", &t, 39, "token 39 at index 39 (byte 1102)",
                   "the last token >= vocab, index and byte named");

    /* counts at 2^31, 2^32, 2^63 (the last two as a 64-bit little-endian
     * count over words 2-3, as a writer with a wider count would put them),
     * and 2^32 - 1: refused from the header alone, nothing allocated */
    t = tok_good(tok, 40);
    t.word[2] = 0x80000000u;
    expect_refused("c31.bin", &t, 0, "token count 2147483648", "count 2^31 refused (> INT32_MAX)");
    t = tok_good(tok, 40);
    t.word[2] = 0xffffffffu;
    expect_refused("c32m1.bin", &t, 0, "token count 4294967295", "count 2^32 - 1 refused");
    t = tok_good(tok, 40);
    t.word[2] = 0;
    t.word[3] = 1;
    expect_refused("c32.bin", &t, 0, "header word 3", "64-bit count 2^32 refused");
    t = tok_good(tok, 40);
    t.word[2] = 0;
    t.word[3] = 0x80000000u;
    expect_refused("c63.bin", &t, 0, "header word 3", "64-bit count 2^63 refused");
    t = tok_good(tok, 40);
    t.word[255] = 7;
    expect_refused("w255.bin", &t, 0, "header word 255", "non-zero reserved header word");

    dt_corpus c;
    const char *missing = tmp_path("missing.bin");
    CHECK(corpus_load_tokens(&c, missing, missing, 0) < 0 && msg_has(missing, "cannot open"),
          "a missing token file is refused, naming it");
    CHECK(corpus_load_tokens(&c, tmpdir, tmpdir, 0) < 0 && msg_has(tmpdir, "not a regular file"),
          "a directory as a token file is refused");
    CHECK(corpus_load_tokens(&c, missing, NULL, 0) < 0 && msg_has("data.val_path", NULL),
          "no validation path is refused, naming the key");
    CHECK(corpus_load_tokens(&c, missing, missing, 1) < 0 && msg_has("vocab_size = 1", NULL),
          "vocab 1 refused");
    CHECK(corpus_load_tokens(&c, missing, missing, 65537) < 0 && msg_has("65537", NULL),
          "vocab 65537 refused (tokens are uint16)");
}

/* ---- windows --------------------------------------------------------------- */

/* A corpus whose token i of the training split is i (so a window's first
 * token is its offset) and whose validation token i is 2i+1. */
static void ramp_corpus(dt_corpus *c, int64_t n_train, int64_t n_val)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "ramp");
    c->vocab = 65536;
    c->n_train = n_train;
    c->n_val = n_val;
    c->train = malloc((size_t)(n_train + 1) * sizeof *c->train);
    c->val = malloc((size_t)(n_val + 1) * sizeof *c->val);
    for (int64_t i = 0; i < n_train; i++)
        c->train[i] = (uint16_t)i;
    for (int64_t i = 0; i < n_val; i++)
        c->val[i] = (uint16_t)(2 * i + 1);
}

static void test_windows_train(void)
{
    dt_corpus c;
    ramp_corpus(&c, 10000, 100);
    const int T = 8, B = 4, R = 3;
    int32_t x[4 * 8], y[4 * 8];
    int64_t part = 10000 / R;
    for (int r = 0; r < R; r++) {
        dt_windows w;
        CHECK(windows_init(&w, &c, r, R, T, B, 42) == 0 && w.part_begin == r * part &&
                  w.part_len == part,
              "rank %d of %d: part [%lld, %lld)", r, R, (long long)(r * part),
              (long long)((r + 1) * part));
        int shifted = 1, inside = 1, contiguous = 1;
        for (int s = 0; s < 200; s++) {
            windows_next(&w, x, y);
            for (int b = 0; b < B; b++) {
                const int32_t *xb = x + b * T, *yb = y + b * T;
                int64_t off = xb[0];
                inside &= off >= r * part && off + T <= (r + 1) * part - 1;
                for (int t = 0; t < T; t++) {
                    contiguous &= xb[t] == off + t;
                    shifted &= yb[t] == (t + 1 < T ? xb[t + 1] : off + T);
                }
            }
        }
        CHECK(shifted && contiguous, "rank %d: x is a run of the split, y = x shifted by one", r);
        CHECK(inside, "rank %d: all T+1 tokens of 800 windows inside the rank's part", r);
        CHECK(w.drawn == 800, "rank %d: drawn counts windows (800)", r);
        CHECK(windows_steps_per_epoch(&w) == part / (B * T), "steps per epoch = %lld / 32",
              (long long)part);
    }

    /* uniform over every valid offset, the extremes included: a part of 20
     * tokens has 20 - T = 12 starting offsets */
    dt_corpus s;
    ramp_corpus(&s, 41, 10);
    dt_windows w;
    CHECK(windows_init(&w, &s, 1, 2, T, 1, 7) == 0, "part of 20 tokens (41 / 2 ranks) accepts T = 8");
    int hits[41] = { 0 };
    for (int i = 0; i < 1200; i++) {
        windows_next(&w, x, y);
        hits[x[0]]++;
    }
    int all = 1, none_outside = 1;
    for (int o = 0; o < 41; o++) {
        int valid = o >= 20 && o <= 20 + 20 - T - 1;
        if (valid)
            all &= hits[o] > 50; /* expected 100 each */
        else
            none_outside &= hits[o] == 0;
    }
    CHECK(all && none_outside, "every one of the 12 offsets 20..31 drawn (about 100 times "
                               "each), none outside them");
    CHECK(windows_steps_per_epoch(&w) == 2, "steps per epoch = 20 / (1 x 8) = 2");
    CHECK(windows_init(&w, &s, 4, 5, T, 1, 7) < 0 && msg_has("rank 4", "holds 8 tokens"),
          "a part of 8 tokens (41 / 5) is refused for T = 8, with the size");
    CHECK(windows_init(&w, &s, 0, 2, 20, 1, 7) < 0 && msg_has("at least 42 tokens", NULL),
          "a part of 20 tokens is refused for T = 20, saying 42 are needed for 2 ranks");
    CHECK(windows_init(&w, &s, 2, 2, T, 1, 7) < 0, "rank 2 of 2 refused");
    CHECK(windows_init(&w, &s, 0, 2, T, 0, 7) < 0, "B = 0 refused");
    CHECK(windows_init(&w, &s, 0, 1, 10, 100, 7) == 0 && windows_steps_per_epoch(&w) == 1,
          "steps per epoch at least 1");
    corpus_free(&s);
    corpus_free(&c);
}

static void test_windows_resume(void)
{
    dt_corpus c;
    ramp_corpus(&c, 50000, 10);
    const int T = 16;
    int32_t x10[10 * 16], y10[10 * 16], x5[5 * 16], y5[5 * 16], xa[10 * 16], ya[10 * 16];
    dt_windows a, b;
    /* ten windows, one batch of 5 twice */
    windows_init(&a, &c, 1, 2, T, 5, 1234);
    windows_next(&a, x10, y10);
    windows_next(&a, x10 + 5 * T, y10 + 5 * T);
    /* the same ten in one batch of 10: the batch size does not change the stream */
    windows_init(&b, &c, 1, 2, T, 10, 1234);
    windows_next(&b, xa, ya);
    CHECK(memcmp(xa, x10, sizeof xa) == 0 && memcmp(ya, y10, sizeof ya) == 0,
          "2 batches of 5 = 1 batch of 10 (same windows)");
    /* resume: a fresh sampler with drawn = 5 continues where the first stopped */
    windows_init(&b, &c, 1, 2, T, 5, 1234);
    b.drawn = 5;
    windows_next(&b, x5, y5);
    CHECK(memcmp(x5, x10 + 5 * T, sizeof x5) == 0 && memcmp(y5, y10 + 5 * T, sizeof y5) == 0,
          "re-init with drawn = 5, then 5 windows = windows 5..9 of a 10-window run");
    windows_init(&b, &c, 1, 2, T, 10, 1234);
    windows_next(&b, xa, ya);
    CHECK(memcmp(xa, x10, sizeof xa) == 0, "same seed and rank: same windows (deterministic)");
    windows_init(&b, &c, 1, 2, T, 10, 1235);
    windows_next(&b, xa, ya);
    CHECK(memcmp(xa, x10, sizeof xa) != 0, "another seed: other windows");
    /* rank 0 of the same two: relative offsets differ too (its own stream,
     * not rank 1's offsets shifted by the part) */
    windows_init(&b, &c, 0, 2, T, 10, 1234);
    windows_next(&b, xa, ya);
    int same_rel = 0, rank0_inside = 1;
    for (int i = 0; i < 10; i++) {
        same_rel += xa[i * T] == x10[i * T] - 25000;
        rank0_inside &= xa[i * T] + T < 25000;
    }
    CHECK(same_rel < 10 && rank0_inside, "ranks 0 and 1 draw different windows "
                                         "(%d of 10 relative offsets equal)", same_rel);
    corpus_free(&c);
}

static void test_windows_val(void)
{
    const int T = 5;
    const int64_t sizes[] = { 0, 1, 5, 6, 10, 11, 12, 23 };
    const int64_t counts[] = { 0, 0, 0, 1, 1, 2, 2, 4 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        dt_corpus c;
        ramp_corpus(&c, 1, sizes[i]);
        CHECK(windows_val_count(&c, T) == counts[i], "n_val %lld, T 5: %lld windows",
              (long long)sizes[i], (long long)counts[i]);
        corpus_free(&c);
    }
    dt_corpus c;
    ramp_corpus(&c, 1, 21);
    int ok = 1;
    int32_t x[5], y[5];
    for (int64_t k = 0; k < windows_val_count(&c, T); k++) {
        windows_val(&c, T, k, x, y);
        for (int t = 0; t < T; t++)
            ok &= x[t] == 2 * (k * T + t) + 1 && y[t] == 2 * (k * T + t + 1) + 1;
    }
    CHECK(ok, "window k: inputs tokens kT..kT+T-1, targets kT+1..kT+T (4 windows of 21 tokens)");
    windows_val(&c, T, 3, x, y);
    CHECK(y[T - 1] == c.val[20], "the last window's last target is the split's last token");
    corpus_free(&c);
}

static void test_decode(void)
{
    const uint8_t bytes[3] = { '\n', 'a', 'z' };
    const int32_t ids[4] = { 1, 2, 0, 1 };
    uint8_t out[4];
    CHECK(tokens_decode(bytes, 3, ids, 4, out) == 0 && memcmp(out, "az\na", 4) == 0,
          "decode maps ids through the byte table");
    const int32_t bad[3] = { 0, 3, 1 };
    CHECK(tokens_decode(bytes, 3, bad, 3, out) < 0 && msg_has("position 1", "0..2"),
          "an id outside the vocabulary is refused with its position");
}

/* The default corpus of the examples: what it yields (figures for the README). */
static void test_fortunes(void)
{
    const char *dir = "/usr/share/games/fortunes";
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        printf("ok - # SKIP %s not installed (Debian package fortunes)\n", dir);
        return;
    }
    dt_corpus c;
    int rc = corpus_load_text(&c, dir);
    CHECK(rc == 0, "fortunes loads: %s", rc ? dt_err_msg() : "ok");
    if (rc)
        return;
    printf("# fortunes: %lld bytes (%lld training, %lld validation), vocabulary %d, %d files "
           "read, %d binary skipped, %d other entries skipped\n",
           (long long)(c.n_train + c.n_val), (long long)c.n_train, (long long)c.n_val, c.vocab,
           c.files_read, c.files_binary, c.files_other);
    CHECK(c.files_binary > 0 && c.files_other > 0 && c.files_read > 0,
          "fortunes: the .dat indexes skipped as binary, the .u8 links as not regular");
    CHECK(corpus_check(&c, 256) == 0, "fortunes holds two windows of T = 256");
    corpus_free(&c);
}

int main(void)
{
    if (tmpdir_make("tokens") != 0)
        return 1;
    test_text_dir();
    test_text_errors();
    test_text_check();
    test_tokens_roundtrip();
    test_tokens_errors();
    test_windows_train();
    test_windows_resume();
    test_windows_val();
    test_decode();
    test_fortunes();
    remove_tree(tmpdir);
    return tap_done();
}
