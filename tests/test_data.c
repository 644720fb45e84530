/* Data layer: IDX and CIFAR-10 readers (round trips and every rejected input),
 * named datasets, synthetic data, the three partitioners and the loader. */
#include "core/error.h"
#include "core/rng.h"
#include "data/data.h"
#include "data/source.h"
#include "tap.h"
#include "tmpdir.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>


/* ---- byte buffers and file writers ----------------------------------------- */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_be32(bytes *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
    put(b, x, 4);
}

/* An IDX file: magic, nd big-endian sizes, payload. */
static bytes idx_build(uint32_t magic, const uint32_t *dims, int nd, const uint8_t *payload,
                       size_t len)
{
    bytes b = { 0 };
    put_be32(&b, magic);
    for (int i = 0; i < nd; i++)
        put_be32(&b, dims[i]);
    put(&b, payload, len);
    return b;
}

/* The first len bytes of b, plain or gzip-compressed. */
static void write_file(const char *path, const bytes *b, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f || gzwrite(f, b->p, (unsigned)len) != (int)len || gzclose(f) != Z_OK) {
            printf("Bail out! cannot write %s\n", path);
            exit(1);
        }
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (len > 0 && fwrite(b->p, 1, len, f) != len) || fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", path);
        exit(1);
    }
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (f)
        fclose(f);
    return n;
}

/* The last error names every one of the given strings. */
static int msg_has(const char *a, const char *b)
{
    const char *m = dt_err_msg();
    int ok = strstr(m, a) != NULL && (!b || strstr(m, b) != NULL);
    printf("#   message: %s\n", m);
    return ok;
}

/* ---- IDX ------------------------------------------------------------------- */

enum { NI = 7, ROWS = 3, COLS = 5, NPX = NI * ROWS * COLS };
static const uint8_t test_labels[NI] = { 0, 9, 4, 1, 5, 9, 2 };

static void test_pixels(uint8_t *px)
{
    for (int i = 0; i < NPX; i++)
        px[i] = (uint8_t)(i * 37 + 11);
}

/* Writes an images file (3 dims) and a labels file (1 dim) under tmpdir. */
static void write_pair(const char *img, const char *lab, int gz)
{
    uint8_t px[NPX];
    test_pixels(px);
    uint32_t di[3] = { NI, ROWS, COLS }, dl[1] = { NI };
    bytes bi = idx_build(0x803, di, 3, px, NPX), bl = idx_build(0x801, dl, 1, test_labels, NI);
    write_file(tmp_path(img), &bi, bi.n, gz);
    write_file(tmp_path(lab), &bl, bl.n, gz);
    free(bi.p);
    free(bl.p);
}

static void check_pair(const dt_dataset *d, const char *what)
{
    uint8_t px[NPX];
    test_pixels(px);
    CHECK(d->n == NI && d->c == 1 && d->h == ROWS && d->w == COLS && d->classes == 10,
          "%s: shape n=%lld c=%d h=%d w=%d classes=%d", what, (long long)d->n, d->c, d->h,
          d->w, d->classes);
    CHECK(d->u8 && memcmp(d->u8, px, NPX) == 0 && !d->f32, "%s: pixels byte-identical",
          what);
    int same = d->labels != NULL;
    for (int i = 0; same && i < NI; i++)
        same = d->labels[i] == test_labels[i];
    CHECK(same, "%s: labels identical", what);
}

static void test_idx_roundtrip(void)
{
    dt_err_clear();
    dt_dataset d;
    write_pair("plain-images", "plain-labels", 0);
    CHECK(dataset_load_idx(&d, tmp_path("plain-images"), tmp_path("plain-labels")) == 0,
          "plain IDX pair loads (%s)", dt_err_msg());
    check_pair(&d, "plain IDX");

    /* (v/255 - mean)/std for a few pixels, with non-trivial constants */
    d.mean[0] = 0.25f;
    d.std[0] = 0.5f;
    float out[ROWS * COLS];
    dataset_sample(&d, 4, out);
    double maxerr = 0.0;
    for (int j = 0; j < ROWS * COLS; j++) {
        double want = (d.u8[4 * ROWS * COLS + j] / 255.0 - 0.25) / 0.5;
        double e = fabs(out[j] - want);
        maxerr = e > maxerr ? e : maxerr;
    }
    CHECK(maxerr < 1e-6, "dataset_sample normalizes u8: max error %.3g", maxerr);
    dataset_free(&d);
    CHECK(d.u8 == NULL && d.labels == NULL && d.n == 0, "dataset_free clears the struct");

    write_pair("gz-images", "gz-labels", 1);
    CHECK(file_size(tmp_path("gz-images")) > 2 && file_size(tmp_path("gz-images")) != 16 + NPX,
          "gzip fixture is really compressed (%ld bytes)", file_size(tmp_path("gz-images")));
    CHECK(dataset_load_idx(&d, tmp_path("gz-images"), tmp_path("gz-labels")) == 0,
          "gzip IDX pair loads (%s)", dt_err_msg());
    check_pair(&d, "gzip IDX");
    dataset_free(&d);

    CHECK(dataset_load_idx(&d, tmp_path("gz-images"), tmp_path("plain-labels")) == 0,
          "gzip images with plain labels load");
    check_pair(&d, "mixed IDX");
    dataset_free(&d);
}

/* One bad images file (with good labels), or bad labels (with good images). */
static void expect_idx_error(const char *name, int bad_images, const bytes *b, size_t len,
                             int gz, const char *field, const char *what)
{
    dt_dataset d;
    write_file(tmp_path(name), b, len, gz);
    const char *img = bad_images ? tmp_path(name) : tmp_path("plain-images");
    const char *lab = bad_images ? tmp_path("plain-labels") : tmp_path(name);
    memset(&d, 0x55, sizeof d);
    dt_err_clear();
    int rc = dataset_load_idx(&d, img, lab);
    CHECK(rc == -1, "%s: rejected", what);
    CHECK(msg_has(name, field), "%s: message names %s and '%s'", what, name, field);
    CHECK(d.u8 == NULL && d.labels == NULL && d.n == 0, "%s: nothing left allocated", what);
}

static void test_idx_errors(void)
{
    uint8_t px[NPX + 1];
    test_pixels(px);
    px[NPX] = 0;
    uint32_t di[3] = { NI, ROWS, COLS }, dl[1] = { NI };
    dt_dataset d;

    dt_err_clear();
    CHECK(dataset_load_idx(&d, tmp_path("no-such-images"), tmp_path("plain-labels")) == -1 &&
              msg_has("no-such-images", "open"),
          "missing images file rejected with its name");
    CHECK(dataset_load_idx(&d, tmp_path("plain-images"), tmp_path("no-such-labels")) == -1 &&
              msg_has("no-such-labels", "open"),
          "missing labels file rejected with its name");

    bytes b = idx_build(0x903, di, 3, px, NPX);
    expect_idx_error("magic-images", 1, &b, b.n, 0, "magic", "wrong magic (type byte 0x09)");
    free(b.p);
    b = idx_build(0x01000803, di, 3, px, NPX);
    expect_idx_error("magic0-images", 1, &b, b.n, 0, "magic", "wrong magic (byte 0 set)");
    free(b.p);
    b = idx_build(0x802, di, 2, px, NPX);
    expect_idx_error("dims-images", 1, &b, b.n, 0, "dimensions", "images with 2 dimensions");
    free(b.p);
    b = idx_build(0x803, dl, 1, test_labels, NI);
    expect_idx_error("dims-labels", 0, &b, b.n, 0, "dimensions", "labels with 3 dimensions");
    free(b.p);

    uint32_t zero_rows[3] = { NI, 0, COLS };
    b = idx_build(0x803, zero_rows, 3, px, 0);
    expect_idx_error("rows0-images", 1, &b, b.n, 0, "rows", "zero rows");
    free(b.p);
    uint32_t huge[3] = { 0xFFFFFFFFu, ROWS, COLS };
    b = idx_build(0x803, huge, 3, px, NPX);
    expect_idx_error("count-images", 1, &b, b.n, 0, "image count", "count beyond the limit");
    free(b.p);

    b = idx_build(0x803, di, 3, px, NPX);
    /* header 16 bytes + 105 pixels; cut 4 -> ends at byte 117 */
    expect_idx_error("trunc-images", 1, &b, b.n - 4, 0, "byte 117", "truncated images");
    expect_idx_error("trunc-header", 1, &b, 10, 0, "byte 10", "truncated images header");
    expect_idx_error("trunc-gzhead", 1, &b, 10, 1, "byte 10",
                     "truncated header inside a valid gzip file");
    free(b.p);
    b = idx_build(0x803, di, 3, px, NPX + 1);
    expect_idx_error("trailing-images", 1, &b, b.n, 0, "byte 121", "trailing byte (plain)");
    expect_idx_error("trailing-images-gz", 1, &b, b.n, 1, "byte 121", "trailing byte (gzip)");
    free(b.p);

    b = idx_build(0x801, dl, 1, test_labels, NI);
    expect_idx_error("trunc-labels", 0, &b, b.n - 2, 0, "byte 13", "truncated labels");
    free(b.p);
    uint32_t six[1] = { NI - 1 };
    b = idx_build(0x801, six, 1, test_labels, NI - 1);
    expect_idx_error("count-labels", 0, &b, b.n, 0, "label count 6", "6 labels for 7 images");
    free(b.p);
    uint8_t bad[NI];
    memcpy(bad, test_labels, NI);
    bad[3] = 10;
    b = idx_build(0x801, dl, 1, bad, NI);
    expect_idx_error("range-labels", 0, &b, b.n, 0, "byte 11", "label 10 at sample 3");
    free(b.p);

    /* Truncated gzip: an incompressible payload cut in the middle of the deflate
     * stream, and a complete payload whose 8-byte gzip trailer is cut. */
    enum { BIGN = 300, BIGPX = BIGN * 28 * 28 };
    uint8_t *big = malloc(BIGPX);
    dt_rng r = rng_make(7, 0, 0, 0);
    for (int i = 0; i < BIGPX; i++)
        big[i] = (uint8_t)rng_u64(&r);
    uint32_t dbig[3] = { BIGN, 28, 28 };
    b = idx_build(0x803, dbig, 3, big, BIGPX);
    write_file(tmp_path("big-gz"), &b, b.n, 1);
    long gzlen = file_size(tmp_path("big-gz"));
    FILE *f = fopen(tmp_path("big-gz"), "rb");
    bytes raw = { 0 };
    raw.p = malloc((size_t)gzlen);
    raw.n = raw.cap = fread(raw.p, 1, (size_t)gzlen, f) == (size_t)gzlen ? (size_t)gzlen : 0;
    fclose(f);
    CHECK(raw.n > 1000, "gzip fixture read back (%zu bytes)", raw.n);
    expect_idx_error("cut-gz-images", 1, &raw, raw.n / 2, 0, "truncated",
                     "gzip stream cut in half");
    expect_idx_error("cut-trailer-gz-images", 1, &raw, raw.n - 4, 0, "truncated",
                     "gzip trailer cut");
    raw.p[raw.n / 2] ^= 0x5A;
    expect_idx_error("corrupt-gz-images", 1, &raw, raw.n, 0, "byte",
                     "gzip stream with a flipped byte");
    free(raw.p);
    free(b.p);
    free(big);
}

/* Header fields at 2^31 and 2^32 - 1, the widest a 4-byte IDX field holds
 * (2^32 and 2^63 cannot be written there): each refused with its file, bytes
 * and range, never narrowed to an int first. */
static void test_idx_wide_fields(void)
{
    uint8_t px[NPX];
    test_pixels(px);
    const uint32_t wide[2] = { 0x80000000u, 0xFFFFFFFFu };
    for (int w = 0; w < 2; w++) {
        char name[64], field[128];
        uint32_t count[3] = { wide[w], ROWS, COLS }, rows[3] = { NI, wide[w], COLS },
                 cols[3] = { NI, ROWS, wide[w] }, lab[1] = { wide[w] };
        bytes b = idx_build(0x803, count, 3, px, NPX);
        snprintf(name, sizeof name, "wide-count-%d", w);
        snprintf(field, sizeof field, "image count (dimension 0, bytes 4..7) %" PRIu32
                 " out of range, expected 1..2147483647", wide[w]);
        expect_idx_error(name, 1, &b, b.n, 0, field, "image count at 2^31 / 2^32-1");
        free(b.p);
        b = idx_build(0x803, rows, 3, px, NPX);
        snprintf(name, sizeof name, "wide-rows-%d", w);
        snprintf(field, sizeof field, "image rows (dimension 1, bytes 8..11) %" PRIu32
                 " out of range, expected 1..", wide[w]);
        expect_idx_error(name, 1, &b, b.n, 0, field, "rows at 2^31 / 2^32-1");
        free(b.p);
        b = idx_build(0x803, cols, 3, px, NPX);
        snprintf(name, sizeof name, "wide-cols-%d", w);
        snprintf(field, sizeof field, "image columns (dimension 2, bytes 12..15) %" PRIu32
                 " out of range, expected 1..", wide[w]);
        expect_idx_error(name, 1, &b, b.n, 0, field, "columns at 2^31 / 2^32-1");
        free(b.p);
        b = idx_build(0x801, lab, 1, test_labels, NI);
        snprintf(name, sizeof name, "wide-labels-%d", w);
        snprintf(field, sizeof field, "label count %" PRIu32, wide[w]);
        expect_idx_error(name, 0, &b, b.n, 0, field, "label count at 2^31 / 2^32-1");
        free(b.p);
    }
}

/* ---- CIFAR-10 -------------------------------------------------------------- */

enum { CREC = 3073 };

static uint8_t cifar_pixel(int file, int rec, int j) { return (uint8_t)(file * 37 + rec * 11 + j); }
static int cifar_label(int file, int rec) { return (file + 3 * rec) % 10; }

/* File `file` (1..5 train, 0 test) with `recs` records. */
static void write_cifar(const char *dir, int file, int recs, size_t cut, int bad_rec)
{
    char name[600];
    bytes b = { 0 };
    if (file == 0)
        snprintf(name, sizeof name, "%s/test_batch.bin", dir);
    else
        snprintf(name, sizeof name, "%s/data_batch_%d.bin", dir, file);
    for (int r = 0; r < recs; r++) {
        uint8_t rec[CREC];
        rec[0] = (uint8_t)(r == bad_rec ? 10 : cifar_label(file, r));
        for (int j = 0; j < 3072; j++)
            rec[1 + j] = cifar_pixel(file, r, j);
        put(&b, rec, CREC);
    }
    write_file(name, &b, b.n - cut, 0);
    free(b.p);
}

static void test_cifar(void)
{
    dt_err_clear();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cifar", tmpdir);
    if (mkdir(dir, 0700) != 0) {
        CHECK(0, "mkdir %s", dir);
        return;
    }
    for (int f = 1; f <= 5; f++)
        write_cifar(dir, f, f, 0, -1); // 1 + 2 + ... + 5 = 15 records
    write_cifar(dir, 0, 3, 0, -1);

    dt_dataset tr, te;
    CHECK(dataset_load_cifar10(&tr, dir, 1) == 0, "CIFAR train batches load (%s)",
          dt_err_msg());
    CHECK(tr.n == 15 && tr.c == 3 && tr.h == 32 && tr.w == 32 && tr.classes == 10,
          "CIFAR train: 15 samples of 3x32x32, 10 classes (n=%lld)", (long long)tr.n);
    int ok = tr.n == 15, i = 0;
    for (int f = 1; ok && f <= 5; f++)
        for (int r = 0; ok && r < f; r++, i++) {
            ok = tr.labels[i] == cifar_label(f, r);
            for (int j = 0; ok && j < 3072; j++)
                ok = tr.u8[(size_t)i * 3072 + j] == cifar_pixel(f, r, j);
        }
    CHECK(ok, "CIFAR train: labels and CHW pixels in file order");
    dataset_free(&tr);
    CHECK(dataset_load_cifar10(&te, dir, 0) == 0 && te.n == 3 && te.labels[2] == cifar_label(0, 2) &&
              te.u8[2 * 3072 + 5] == cifar_pixel(0, 2, 5),
          "CIFAR test batch: 3 records read back");
    dataset_free(&te);

    CHECK(dataset_load_named(&tr, &te, "cifar10", dir) == 0 && tr.n == 15 && te.n == 3 &&
              strcmp(tr.name, "cifar10") == 0 && tr.mean[1] == 0.4822f &&
              te.std[2] == 0.2616f,
          "named cifar10: both splits with per-channel constants");
    float out[3072];
    dataset_sample(&te, 1, out);
    CHECK_CLOSE(out[2 * 1024 + 7], (cifar_pixel(0, 1, 2048 + 7) / 255.0 - 0.4465) / 0.2616,
                1e-5, 0, "cifar sample uses the blue channel's constants");
    dataset_free(&tr);
    dataset_free(&te);

    write_cifar(dir, 0, 3, 100, -1); // 3 * 3073 - 100 bytes: last record starts at 6146
    CHECK(dataset_load_cifar10(&te, dir, 0) == -1 && msg_has("test_batch.bin", "byte 6146"),
          "CIFAR truncated record rejected at its offset");
    CHECK(te.u8 == NULL && te.n == 0, "CIFAR failure leaves nothing allocated");
    write_cifar(dir, 0, 3, 0, 1); // label 10 in record 1 at byte 3073
    CHECK(dataset_load_cifar10(&te, dir, 0) == -1 && msg_has("test_batch.bin", "byte 3073"),
          "CIFAR label out of range rejected at its offset");
    write_cifar(dir, 0, 0, 0, -1);
    CHECK(dataset_load_cifar10(&te, dir, 0) == -1 && msg_has("test_batch.bin", "empty"),
          "CIFAR empty file rejected");
    /* A record count comes from the file size: sparse files of 2^31 and 2^32
     * records (6.6 and 13.2 TB, no blocks written) are refused before any
     * allocation; 2^63 bytes is beyond what a file system holds. */
    const int64_t many[2] = { (int64_t)1 << 31, (int64_t)1 << 32 };
    for (int w = 0; w < 2; w++) {
        char tb[600], want[160];
        snprintf(tb, sizeof tb, "%s/test_batch.bin", dir);
        if (truncate(tb, (off_t)(many[w] * CREC)) != 0) {
            printf("# skipping the %lld-record sparse file: %s\n", (long long)many[w],
                   strerror(errno));
            continue;
        }
        snprintf(want, sizeof want, "record count (the file size over 3073 bytes) %lld out of "
                 "range, expected 1..2147483647", (long long)many[w]);
        dt_err_clear();
        CHECK(dataset_load_cifar10(&te, dir, 0) == -1 && msg_has("test_batch.bin", want) &&
                  te.u8 == NULL,
              "CIFAR file of %lld records refused before allocating: %s", (long long)many[w],
              dt_err_msg());
        CHECK(truncate(tb, 0) == 0, "sparse test batch emptied");
    }
    char p3[600];
    snprintf(p3, sizeof p3, "%s/data_batch_3.bin", dir);
    unlink(p3);
    CHECK(dataset_load_cifar10(&tr, dir, 1) == -1 && msg_has("data_batch_3.bin", "open"),
          "CIFAR missing train batch named");
}

/* ---- named IDX sets --------------------------------------------------------- */

static void test_named(void)
{
    dt_err_clear();
    dt_dataset tr, te;
    /* train split plain, test split gzipped: both spellings are found */
    write_pair("train-images-idx3-ubyte", "train-labels-idx1-ubyte", 0);
    write_pair("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 1);
    CHECK(dataset_load_named(&tr, &te, "mnist", tmpdir) == 0, "named mnist loads (%s)",
          dt_err_msg());
    check_pair(&tr, "named train");
    check_pair(&te, "named test");
    CHECK(strcmp(tr.name, "mnist") == 0 && tr.mean[0] == 0.1307f && te.std[0] == 0.3081f,
          "named mnist: name and constants set on both splits");
    dataset_free(&tr);
    dataset_free(&te);
    CHECK(dataset_load_named(NULL, &te, "fashion-mnist", tmpdir) == 0 && te.n == NI &&
              te.mean[0] == 0.2860f,
          "named fashion-mnist: test split alone");
    dataset_free(&te);

    CHECK(dataset_load_named(&tr, &te, "mnist", "/nonexistent-dtrain-dir") == -1 &&
              msg_has("train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"),
          "named set missing: message names the plain and .gz file");
    CHECK(tr.u8 == NULL && te.u8 == NULL, "named failure leaves nothing allocated");
    CHECK(dataset_load_named(&tr, &te, "imagenet", tmpdir) == -1 && msg_has("imagenet", NULL),
          "unknown dataset name rejected");
}

/* ---- synthetic --------------------------------------------------------------- */

static void test_synthetic(void)
{
    enum { D = 32, K = 10, NTR = 2000, NTE = 1000 };
    dt_dataset tr, te, tr2;
    dataset_synthetic(&tr, NTR, 2, 4, 4, K, 1.0f, 42, 0);
    dataset_synthetic(&tr2, NTR, 2, 4, 4, K, 1.0f, 42, 0);
    dataset_synthetic(&te, NTE, 2, 4, 4, K, 1.0f, 42, 1);
    CHECK(strcmp(tr.name, "synthetic") == 0 && tr.f32 && !tr.u8 && tr.classes == K &&
              tr.c == 2 && tr.h == 4 && tr.w == 4,
          "synthetic: float storage and shape");
    CHECK(memcmp(tr.f32, tr2.f32, sizeof(float) * NTR * D) == 0 &&
              memcmp(tr.labels, tr2.labels, sizeof(int32_t) * NTR) == 0,
          "synthetic: deterministic for (seed, split)");
    CHECK(memcmp(tr.f32, te.f32, sizeof(float) * D * 10) != 0, "synthetic: splits differ");
    int counts[K] = { 0 }, inorder = 1;
    for (int i = 0; i < NTR; i++) {
        counts[tr.labels[i]]++;
        inorder &= tr.labels[i] == i % K;
    }
    int bal = 1;
    for (int k = 0; k < K; k++)
        bal &= counts[k] == NTR / K;
    CHECK(bal && !inorder, "synthetic: exactly %d per class, in shuffled order", NTR / K);

    /* Class means from the training split classify the test split: a linear rule,
     * so the data are learnable by logistic regression, and the two splits share
     * their centres. */
    double mu[K][D] = { { 0 } };
    for (int i = 0; i < NTR; i++)
        for (int j = 0; j < D; j++)
            mu[tr.labels[i]][j] += tr.f32[i * D + j] / (NTR / K);
    int correct = 0;
    float x[D];
    for (int i = 0; i < NTE; i++) {
        dataset_sample(&te, i, x);
        int best = 0;
        double bestd = 1e300;
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int j = 0; j < D; j++)
                s += (x[j] - mu[k][j]) * (x[j] - mu[k][j]);
            if (s < bestd) {
                bestd = s;
                best = k;
            }
        }
        correct += best == te.labels[i];
    }
    CHECK(correct >= 0.95 * NTE, "synthetic: nearest class mean on the test split %d/%d",
          correct, NTE);
    dataset_free(&tr);
    dataset_free(&tr2);
    dataset_free(&te);
}

/* ---- partitions -------------------------------------------------------------- */

static int sorted_strict(const dt_shard *s)
{
    for (int64_t i = 1; i < s->n; i++)
        if (s->idx[i] <= s->idx[i - 1])
            return 0;
    return 1;
}

static void test_class_skew(void)
{
    dt_err_clear();
    enum { R = 8, C = 10, PER = 8, SHIFT = 4, N = 6000 };
    const uint64_t seed = 1234;
    dt_dataset d;
    dataset_synthetic(&d, N, 1, 1, 1, C, 0.1f, 99, 0); // 600 per class, shuffled
    dt_shard sh[R];
    int ok = 1;
    for (int k = 0; k < R; k++)
        ok &= partition_class_skew(&d, k, R, seed, PER, SHIFT, &sh[k]) == 0;
    CHECK(ok, "class skew: 8 ranks partition (%s)", dt_err_msg());
    if (!ok)
        return;

    /* The documented class order: rng_make(seed, 0x5CE3, 0, 0) shuffles 0..C-1. */
    int64_t perm[C];
    for (int c = 0; c < C; c++)
        perm[c] = c;
    dt_rng r = rng_make(seed, 0x5CE3, 0, 0);
    rng_shuffle(&r, perm, C);

    int64_t ncls[C] = { 0 };
    for (int i = 0; i < N; i++)
        ncls[d.labels[i]]++;
    int *owner = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++)
        owner[i] = -1;
    int once = 1, classes_ok = 1, sorted = 1;
    int64_t held[R][C] = { { 0 } };
    for (int k = 0; k < R; k++) {
        sorted &= sorted_strict(&sh[k]);
        for (int64_t j = 0; j < sh[k].n; j++) {
            int64_t i = sh[k].idx[j];
            once &= owner[i] == -1;
            owner[i] = k;
            held[k][d.labels[i]]++;
        }
        int want[C] = { 0 };
        for (int p = 0; p < PER; p++)
            want[perm[(SHIFT * k + p) % C]] = 1;
        for (int c = 0; c < C; c++)
            classes_ok &= (held[k][c] > 0) == want[c];
    }
    int all = 1;
    for (int i = 0; i < N; i++)
        all &= owner[i] >= 0;
    CHECK(once && all, "class skew: every sample on exactly one rank");
    CHECK(classes_ok, "class skew: rank k holds the 8 classes at positions (4k mod 10)..+7");
    CHECK(sorted, "class skew: shards in dataset order");
    int same = 1;
    for (int k = 0; k + 5 < R; k++)
        for (int c = 0; c < C; c++)
            same &= (held[k][c] > 0) == (held[k + 5][c] > 0);
    CHECK(same, "class skew: ranks k and k+5 hold the same classes (4*5 = 0 mod 10)");

    /* Normalized U(0.8, 1) weights of H holders lie in [0.8/(0.8 + H-1), 1/(1 + 0.8(H-1))];
     * floors move a count by < 1, the remainder by < H. */
    int prop_ok = 1, contig = 1;
    double lo_seen = 1, hi_seen = 0;
    for (int c = 0; c < C; c++) {
        int h = 0;
        for (int k = 0; k < R; k++)
            h += held[k][c] > 0;
        double lo = 0.8 / (0.8 + (h - 1)), hi = 1.0 / (1.0 + 0.8 * (h - 1));
        for (int k = 0; k < R; k++) {
            if (!held[k][c])
                continue;
            double f = (double)held[k][c] / ncls[c];
            lo_seen = f < lo_seen ? f : lo_seen;
            hi_seen = f > hi_seen ? f : hi_seen;
            prop_ok &= held[k][c] >= lo * ncls[c] - 1 && held[k][c] <= hi * ncls[c] + h;
        }
        /* contiguous chunks, holders in rank order: owners never decrease */
        int last = -1;
        for (int i = 0; i < N; i++) {
            if (d.labels[i] != c)
                continue;
            contig &= owner[i] >= last;
            last = owner[i];
        }
    }
    CHECK(prop_ok, "class skew: shares within the U(0.8,1) bounds (seen %.4f..%.4f)", lo_seen,
          hi_seen);
    CHECK(contig, "class skew: each class cut into contiguous chunks in rank order");
    CHECK(lo_seen < hi_seen - 0.005, "class skew: weights are not all equal");

    dt_shard again, other;
    CHECK(partition_class_skew(&d, 3, R, seed, PER, SHIFT, &again) == 0 && again.n == sh[3].n &&
              memcmp(again.idx, sh[3].idx, sizeof(int64_t) * again.n) == 0,
          "class skew: deterministic");
    int differs = 0;
    for (int s = 1; s <= 3 && !differs; s++) {
        CHECK(partition_class_skew(&d, 0, R, seed + s, PER, SHIFT, &other) == 0, "other seed");
        differs = other.n != sh[0].n || memcmp(other.idx, sh[0].idx, sizeof(int64_t) * other.n);
        shard_free(&other);
    }
    CHECK(differs, "class skew: another seed gives another split");
    shard_free(&again);

    dt_shard bad;
    CHECK(partition_class_skew(&d, 0, R, seed, 11, SHIFT, &bad) == -1 && msg_has("classes per rank", NULL),
          "class skew: 11 classes per rank of 10 rejected");
    CHECK(partition_class_skew(&d, 0, 0, seed, PER, SHIFT, &bad) == -1 && msg_has("ranks", NULL),
          "class skew: 0 ranks rejected");
    CHECK(partition_class_skew(&d, R, R, seed, PER, SHIFT, &bad) == -1 && msg_has("rank 8", NULL),
          "class skew: rank 8 of 8 rejected");
    for (int i = 0; i < N; i++)
        d.labels[i] = 0; // only class 0 present: a rank without it gets nothing
    int empty = 0;
    for (int k = 0; k < 2; k++) { // ranks hold positions 0..4 and 5..9: one lacks class 0
        empty += partition_class_skew(&d, k, 2, seed, 5, 5, &bad) == -1;
        if (empty == 0)
            shard_free(&bad);
    }
    CHECK(empty == 1 && msg_has("no samples", NULL), "class skew: a rank with no samples rejected");
    shard_free(&bad);

    free(owner);
    for (int k = 0; k < R; k++)
        shard_free(&sh[k]);
    dataset_free(&d);
}

static void test_iid_blocks(void)
{
    enum { N = 1000, R = 7 };
    dt_dataset d;
    dataset_synthetic(&d, N, 1, 1, 1, 10, 0.1f, 5, 0);
    int *hits = calloc(N, sizeof(int));
    int ok = 1, sizes = 1, sorted = 1;
    dt_shard s[R];
    for (int k = 0; k < R; k++) {
        ok &= partition_iid(&d, k, R, 77, &s[k]) == 0;
        sizes &= s[k].n == N / R;
        sorted &= sorted_strict(&s[k]);
        for (int64_t j = 0; j < s[k].n; j++)
            hits[s[k].idx[j]]++;
    }
    int disjoint = 1, total = 0;
    for (int i = 0; i < N; i++) {
        disjoint &= hits[i] <= 1;
        total += hits[i];
    }
    CHECK(ok && sizes && sorted, "iid: 7 shards of %d, each in dataset order", N / R);
    CHECK(disjoint && total == R * (N / R), "iid: disjoint, %d samples covered", total);
    CHECK(s[0].idx[s[0].n - 1] - s[0].idx[0] > 2 * s[0].n, "iid: a shard is spread over the set");
    dt_shard t;
    CHECK(partition_iid(&d, 2, R, 78, &t) == 0 && memcmp(t.idx, s[2].idx, sizeof(int64_t) * t.n) != 0,
          "iid: another seed, another shard");
    shard_free(&t);
    for (int k = 0; k < R; k++)
        shard_free(&s[k]);
    CHECK(partition_iid(&d, 0, N + 1, 77, &t) == -1 && msg_has("ranks", NULL),
          "iid: more ranks than samples rejected");

    /* blocks: 120 blocks of 8; 7 workers take floor(120/7) = 17 blocks each */
    int form = 1;
    for (int m = 0; m < R; m++) {
        ok = partition_blocks(&d, m, R, 120, 8, &t) == 0;
        form &= ok && t.n == 17 * 8;
        for (int64_t j = 0; ok && j < t.n; j++)
            form &= t.idx[j] == m * 17 * 8 + j;
        shard_free(&t);
    }
    CHECK(form, "blocks: worker m takes samples 136m .. 136m+135");
    CHECK(partition_blocks(&d, 0, 1, 1200, 50, &t) == -1 && msg_has("do not fit", NULL),
          "blocks: 1200 x 50 do not fit 1000 samples");
    CHECK(partition_blocks(&d, 0, 9, 8, 100, &t) == -1 && msg_has("workers", NULL),
          "blocks: 8 blocks for 9 workers rejected");
    CHECK(partition_blocks(&d, 0, 2, 8, 0, &t) == -1, "blocks: zero block size rejected");
    free(hits);
    dataset_free(&d);
}

/* ---- loader ------------------------------------------------------------------- */

enum { LN = 100, LS = 37, LB = 5 };

/* Sample i is (i, -i) with label i % 10, so outputs identify the sample. */
static void loader_fixture(dt_dataset *d, dt_shard *s)
{
    memset(d, 0, sizeof *d);
    d->n = LN;
    d->c = 1;
    d->h = 1;
    d->w = 2;
    d->classes = 10;
    d->f32 = malloc(sizeof(float) * 2 * LN);
    d->labels = malloc(sizeof(int32_t) * LN);
    for (int i = 0; i < LN; i++) {
        d->f32[2 * i] = (float)i;
        d->f32[2 * i + 1] = (float)-i;
        d->labels[i] = i % 10;
    }
    s->n = LS;
    s->idx = malloc(sizeof(int64_t) * LS);
    for (int k = 0; k < LS; k++)
        s->idx[k] = 2 * k + 3;
}

/* nb batches as sample ids; returns 0 if an output was not a consistent sample. */
static int draw(dt_loader *l, int nb, int *ids)
{
    float x[LB * 2];
    int32_t y[LB];
    int ok = 1;
    for (int b = 0; b < nb; b++) {
        loader_next(l, x, y);
        for (int j = 0; j < LB; j++) {
            int id = (int)x[2 * j];
            ok &= x[2 * j + 1] == -x[2 * j] && y[j] == id % 10;
            ids[b * LB + j] = id;
        }
    }
    return ok;
}

static void test_loader(void)
{
    dt_dataset d;
    dt_shard s;
    dt_loader l, l2, l3;
    loader_fixture(&d, &s);
    enum { NB = 23 }; // 115 samples: three passes of 37 and 4 more
    int ids[NB * LB], ids2[NB * LB];
    loader_init(&l, &d, &s, LB, 9, 3, 0);
    CHECK(loader_steps_per_epoch(&l) == LS / LB && loader_epoch(&l) == 0,
          "loader: %d steps per epoch of the shard", LS / LB);
    CHECK(draw(&l, NB, ids), "loader: outputs are whole samples with their labels");
    int perpass = 1;
    for (int p = 0; p < 3; p++) {
        int seen[LN] = { 0 };
        for (int j = 0; j < LS; j++) {
            int id = ids[p * LS + j];
            perpass &= id >= 3 && id <= 75 && id % 2 == 1 && seen[id] == 0;
            seen[id] = 1;
        }
    }
    CHECK(perpass, "loader: each of 3 passes draws every shard sample exactly once");
    CHECK(memcmp(ids, ids + LS, sizeof(int) * LS) != 0 &&
              memcmp(ids + LS, ids + 2 * LS, sizeof(int) * LS) != 0,
          "loader: passes use different orders");
    int ident = 1;
    for (int j = 0; j < LS; j++)
        ident &= ids[j] == 2 * j + 3;
    CHECK(!ident, "loader: pass 0 is shuffled");
    CHECK(loader_epoch(&l) == (NB * LB) / LS, "loader: epoch %lld after %d samples",
          (long long)loader_epoch(&l), NB * LB);

    loader_init(&l2, &d, &s, LB, 9, 3, 0);
    CHECK(draw(&l2, NB, ids2) && memcmp(ids, ids2, sizeof ids) == 0,
          "loader: two loaders with the same (seed, rank) agree");
    loader_free(&l2);
    loader_init(&l2, &d, &s, LB, 9, 4, 0);
    draw(&l2, NB, ids2);
    CHECK(memcmp(ids, ids2, sizeof ids) != 0, "loader: another rank draws another order");
    loader_free(&l2);

    /* batch 7 holds samples 35..39: pass 0 ends after 37 */
    int b7[LB];
    memcpy(b7, ids + 7 * LB, sizeof b7);
    CHECK(b7[0] == ids[35] && b7[2] == ids[LS] && b7[4] == ids[LS + 2],
          "loader: a full batch crosses the pass boundary");

    /* Save at several points, restore into a fresh loader, compare what follows. */
    int restore_ok = 1;
    const int saves[] = { 0, 3, 7, 10, 14 };
    for (size_t t = 0; t < sizeof saves / sizeof saves[0]; t++) {
        dt_loader_state st;
        loader_init(&l2, &d, &s, LB, 9, 3, 0);
        draw(&l2, saves[t], ids2);
        loader_get_state(&l2, &st);
        int rest = NB - saves[t];
        draw(&l2, rest, ids2);
        loader_init(&l3, &d, &s, LB, 9, 3, 0);
        int scratch[2 * LB];
        draw(&l3, 2, scratch); // disturb its state before restoring
        loader_set_state(&l3, &st);
        int tail[NB * LB];
        draw(&l3, rest, tail);
        restore_ok &= memcmp(tail, ids2, sizeof(int) * rest * LB) == 0 &&
                      memcmp(tail, ids + saves[t] * LB, sizeof(int) * rest * LB) == 0 &&
                      l3.st.drawn == l2.st.drawn;
        loader_free(&l2);
        loader_free(&l3);
    }
    CHECK(restore_ok, "loader: restored state reproduces the rest of the sequence");

    /* the shard cut to 35 with batch 5: a state saved exactly at the end of a pass */
    s.n = 35;
    loader_init(&l2, &d, &s, LB, 1, 0, 100);
    loader_init(&l3, &d, &s, LB, 1, 0, 100);
    dt_loader_state st;
    draw(&l2, 7, ids);
    loader_get_state(&l2, &st);
    CHECK(st.pos == 35 && st.pass == 0, "loader: state at the end of pass 0 (pos %lld)",
          (long long)st.pos);
    loader_set_state(&l3, &st);
    draw(&l2, 5, ids);
    draw(&l3, 5, ids2);
    CHECK(memcmp(ids, ids2, sizeof(int) * 5 * LB) == 0, "loader: restore at a pass boundary");
    CHECK(loader_steps_per_epoch(&l2) == 20 && loader_epoch(&l2) == 0,
          "loader: 100 samples per epoch = 20 steps; 60 drawn is epoch 0");
    draw(&l2, 8, ids);
    CHECK(loader_epoch(&l2) == 1, "loader: 100 drawn is epoch 1");
    loader_free(&l2);
    loader_free(&l3);
    loader_free(&l);
    shard_free(&s);
    dataset_free(&d);
}

/* ---- the real Fashion-MNIST, when installed ----------------------------------- */

static void test_fashion_mnist(void)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    if (access(dir, R_OK) != 0) {
        printf("# skip: %s not installed, Fashion-MNIST not checked\n", dir);
        return;
    }
    dt_dataset tr, te;
    if (dataset_load_named(&tr, &te, "fashion-mnist", dir) != 0) {
        CHECK(0, "Fashion-MNIST loads: %s", dt_err_msg());
        return;
    }
    CHECK(tr.n == 60000 && te.n == 10000 && tr.c == 1 && tr.h == 28 && tr.w == 28 &&
              tr.classes == 10,
          "Fashion-MNIST: 60000/10000 samples of 1x28x28, 10 classes");
    int64_t ctr[10] = { 0 }, cte[10] = { 0 };
    for (int64_t i = 0; i < tr.n; i++)
        ctr[tr.labels[i]]++;
    for (int64_t i = 0; i < te.n; i++)
        cte[te.labels[i]]++;
    int bal = 1;
    for (int c = 0; c < 10; c++)
        bal &= ctr[c] == 6000 && cte[c] == 1000;
    CHECK(bal, "Fashion-MNIST: 6000 train and 1000 test samples per class");
    double s = 0, s2 = 0;
    size_t np = (size_t)tr.n * 784;
    for (size_t i = 0; i < np; i++) {
        double v = tr.u8[i] / 255.0;
        s += v;
        s2 += v * v;
    }
    double mean = s / np, sd = sqrt(s2 / np - mean * mean);
    CHECK_CLOSE(mean, tr.mean[0], 5e-4, 0, "Fashion-MNIST: pixel mean matches its constant");
    CHECK_CLOSE(sd, tr.std[0], 5e-4, 0, "Fashion-MNIST: pixel std matches its constant");
    dataset_free(&tr);
    dataset_free(&te);
}

/* The image sources: the training source's batches are the loader's, and
 * its saved state replays the same next batch bit for bit; the evaluation
 * source walks the first n samples in order, in batches of B and a short
 * last one, then reports the end, and rewinds. */
static void test_sources(void)
{
    enum { B = 4, N = 30, NTEST = 10 };
    dt_dataset d, ref, test;
    dataset_synthetic(&d, N, 1, 3, 3, 5, 0.5f, 9, 0);
    dataset_synthetic(&ref, N, 1, 3, 3, 5, 0.5f, 9, 0);
    dataset_synthetic(&test, 12, 1, 3, 3, 5, 0.5f, 9, 1);
    dt_shard shard, rshard;
    partition_iid(&d, 1, 2, 9, &shard);
    partition_iid(&ref, 1, 2, 9, &rshard);
    dt_loader l;
    loader_init(&l, &ref, &rshard, B, 9, 1, 0);
    dt_source *s = source_image_train(&d, &shard, B, 9, 1, 0);
    CHECK(s->batch.input.type == DT_F32 && s->batch.input.rank == 4 &&
              s->batch.input.shape[0] == B && s->batch.input.shape[1] == 1 &&
              s->batch.input.shape[2] == 3 && s->batch.target.type == DT_I32 &&
              s->batch.target.rank == 1 && s->classes == 5 && s->samples == N / 2,
          "image training source: (B, C, H, W) f32, (B) i32, 5 classes, its shard's samples");
    dt_sample a = sample_like(&s->batch, NULL), b = sample_like(&s->batch, NULL);
    float x[B * 9];
    int32_t y[B];
    int same = 1;
    for (int k = 0; k < 7; k++) { /* across a pass boundary (15 samples) */
        CHECK(source_next(s, &a) == B, "a training batch holds B samples");
        loader_next(&l, x, y);
        same &= !memcmp(a.input.data, x, sizeof x) && !memcmp(a.target.data, y, sizeof y);
    }
    CHECK(same, "the training source draws the loader's batches");
    CHECK(source_steps_per_epoch(s) == loader_steps_per_epoch(&l), "steps per epoch: the loader's");
    unsigned char st[DT_SOURCE_STATE_MAX];
    CHECK(s->ops->state_size <= sizeof st, "its state fits DT_SOURCE_STATE_MAX");
    source_get_state(s, st);
    source_next(s, &a);
    source_next(s, &a);
    source_set_state(s, st);
    source_next(s, &b);
    source_next(s, &b);
    CHECK(!memcmp(a.input.data, b.input.data, tensor_bytes(&a.input, B)) &&
              !memcmp(a.target.data, b.target.data, tensor_bytes(&a.target, B)),
          "a restored state draws the same batches again");
    source_free(s);
    free(a.input.data), free(a.target.data), free(b.input.data), free(b.target.data);
    loader_free(&l);
    shard_free(&rshard);
    dataset_free(&ref);

    int32_t want[NTEST];
    memcpy(want, test.labels, sizeof want);
    dt_source *e = source_image_eval(&test, NTEST, B);
    dt_sample v = sample_like(&e->batch, NULL);
    for (int pass = 0; pass < 2; pass++) {
        source_rewind(e);
        int64_t got[4] = { 0 }, total = 0;
        int nb = 0, labels_ok = 1;
        for (int64_t n; nb < 4 && (n = source_next(e, &v)) > 0; nb++) {
            got[nb] = n;
            for (int64_t j = 0; j < n; j++)
                labels_ok &= ((int32_t *)v.target.data)[j] == want[total + j];
            total += n;
        }
        CHECK(nb == 3 && got[0] == B && got[1] == B && got[2] == NTEST - 2 * B &&
                  labels_ok && source_next(e, &v) == 0,
              "evaluation pass %d: batches 4, 4, 2 of the first 10 samples in order, then the end",
              pass);
    }
    free(v.input.data), free(v.target.data);
    source_free(e);
}

int main(void)
{
    if (tmpdir_make("data") != 0)
        return 1;
    test_idx_roundtrip();
    test_idx_errors();
    test_idx_wide_fields();
    test_cifar();
    test_named();
    test_synthetic();
    test_class_skew();
    test_iid_blocks();
    test_loader();
    test_sources();
    test_fashion_mnist();
    remove_tree(tmpdir);
    return tap_done();
}
