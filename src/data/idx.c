/* IDX pairs (the MNIST / Fashion-MNIST layout).
 *
 * File layout: 4-byte magic 00 00 08 nd (unsigned bytes, nd dimensions), nd
 * big-endian uint32 sizes, then the payload in C order. Images are nd = 3
 * (count, rows, cols), labels nd = 1 (count). zlib's gz* readers return plain
 * files unchanged, so one code path reads both; byte offsets in messages are
 * offsets in the decompressed content.
 */
#include "data/data.h"

#include "core/error.h"
#include "core/parse.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { IDX_MAX_SIDE = 4096, IDX_CLASSES = 10 };
#define IDX_MAX_COUNT ((int64_t)INT32_MAX)
/* Growth step and read chunk: a header that lies about the count must not make
 * us allocate gigabytes before the data is seen to exist. */
#define IDX_FIRST_ALLOC ((int64_t)1 << 22)
#define IDX_READ_CHUNK ((int64_t)1 << 30)

typedef struct idx_reader {
    gzFile f;
    const char *path;
    int64_t off; /* bytes of decompressed content consumed */
} idx_reader;

static int reader_open(idx_reader *r, const char *path)
{
    r->path = path;
    r->off = 0;
    errno = 0;
    r->f = gzopen(path, "rb");
    if (!r->f)
        return dt_err_set("%s: cannot open: %s", path,
                          errno ? strerror(errno) : "zlib could not allocate its state");
    gzbuffer(r->f, 1u << 17);
    return 0;
}

/* A gz reader reports a cut-off gzip stream as a short read plus Z_BUF_ERROR,
 * a corrupt one as Z_DATA_ERROR; both end up here. */
static int reader_fail(idx_reader *r, const char *what, int64_t field_end)
{
    int zerr = Z_OK;
    const char *zmsg = gzerror(r->f, &zerr);
    if (zerr == Z_BUF_ERROR)
        return dt_err_set("%s: truncated gzip stream at byte %" PRId64 " (in %s, which "
                          "ends at byte %" PRId64 "): %s",
                          r->path, r->off, what, field_end, zmsg);
    if (zerr != Z_OK)
        return dt_err_set("%s: corrupt data, detected while reading byte %" PRId64
                          " (in %s): %s",
                          r->path, r->off, what, zmsg);
    return dt_err_set("%s: truncated at byte %" PRId64 " (in %s), expected the file to "
                      "continue to byte %" PRId64,
                      r->path, r->off, what, field_end);
}

/* Exactly n bytes or an error; field_end is where the field being read ends. */
static int reader_read(idx_reader *r, void *buf, int64_t n, const char *what,
                       int64_t field_end)
{
    unsigned char *p = buf;
    while (n > 0) {
        unsigned want = (unsigned)(n < IDX_READ_CHUNK ? n : IDX_READ_CHUNK);
        int k = gzread(r->f, p, want);
        if (k <= 0)
            return reader_fail(r, what, field_end);
        p += k;
        n -= k;
        r->off += k;
    }
    return 0;
}

/* The payload of n bytes, in a buffer that grows only as data arrives. */
static int reader_payload(idx_reader *r, int64_t n, const char *what, uint8_t **out)
{
    int64_t cap = n < IDX_FIRST_ALLOC ? n : IDX_FIRST_ALLOC, got = 0;
    int64_t end = r->off + n;
    uint8_t *buf = dt_malloc((size_t)cap);
    while (got < n) {
        if (got == cap) {
            cap = cap <= n / 2 ? cap * 2 : n;
            buf = dt_realloc(buf, (size_t)cap);
        }
        if (reader_read(r, buf + got, cap - got, what, end) < 0) {
            free(buf);
            return -1;
        }
        got = cap;
    }
    *out = buf;
    return 0;
}

/* The file must end exactly after the payload; a gzip member whose trailer is
 * missing also shows up here, as Z_BUF_ERROR. */
static int reader_close(idx_reader *r)
{
    unsigned char extra;
    int k = gzread(r->f, &extra, 1);
    int zerr = Z_OK, rc = 0;
    const char *zmsg = gzerror(r->f, &zerr);
    if (k > 0)
        rc = dt_err_set("%s: trailing data at byte %" PRId64 ", expected the file to end "
                        "there",
                        r->path, r->off);
    else if (zerr != Z_OK)
        rc = dt_err_set("%s: corrupt or truncated gzip stream after byte %" PRId64
                        " (all payload read): %s",
                        r->path, r->off, zmsg);
    int crc = gzclose_r(r->f);
    r->f = NULL;
    if (rc == 0 && crc != Z_OK)
        rc = dt_err_set("%s: error closing the file after byte %" PRId64 " (zlib code %d)",
                        r->path, r->off, crc);
    return rc;
}

static void reader_abort(idx_reader *r)
{
    if (r->f)
        gzclose_r(r->f);
    r->f = NULL;
}

/* Magic and dimension sizes; kind names the file's role for messages. */
static int read_header(idx_reader *r, int want_nd, uint32_t *dims, const char *kind)
{
    unsigned char m[4];
    int64_t header_end = 4 + 4 * (int64_t)want_nd;
    if (reader_read(r, m, 4, "the magic number, bytes 0..3", 4) < 0)
        return -1;
    if (m[0] != 0 || m[1] != 0 || m[2] != 0x08)
        return dt_err_set("%s: bad magic number 0x%02x%02x%02x%02x at byte 0, expected "
                          "0x000008%02x (IDX %s, unsigned bytes, %d dimensions)",
                          r->path, m[0], m[1], m[2], m[3], want_nd, kind, want_nd);
    if (m[3] != want_nd)
        return dt_err_set("%s: magic number 0x%02x%02x%02x%02x declares %d dimensions "
                          "(byte 3), expected %d for IDX %s (magic 0x000008%02x)",
                          r->path, m[0], m[1], m[2], m[3], m[3], want_nd, kind, want_nd);
    for (int i = 0; i < want_nd; i++) {
        unsigned char b[4];
        if (reader_read(r, b, 4, "the header's dimension sizes", header_end) < 0)
            return -1;
        dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    }
    return 0;
}

static int load_images(const char *path, uint8_t **px, int64_t *n, int *rows, int *cols)
{
    idx_reader r;
    uint32_t dims[3];
    if (reader_open(&r, path) < 0)
        return -1;
    if (read_header(&r, 3, dims, "images") < 0)
        goto fail;
    /* uint32 header fields, compared as int64 before the casts to int below */
    if (check_int64(dims[0], 1, IDX_MAX_COUNT, path,
                    "image count (dimension 0, bytes 4..7)") < 0)
        goto fail;
    for (int i = 1; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "image %s (dimension %d, bytes %d..%d)",
                 i == 1 ? "rows" : "columns", i, 4 + 4 * i, 7 + 4 * i);
        if (check_int64(dims[i], 1, IDX_MAX_SIDE, path, what) < 0)
            goto fail;
    }
    int64_t bytes = (int64_t)dims[0] * dims[1] * dims[2];
    if (reader_payload(&r, bytes, "the pixel data", px) < 0)
        goto fail;
    if (reader_close(&r) < 0) {
        free(*px);
        *px = NULL;
        return -1;
    }
    *n = dims[0];
    *rows = (int)dims[1];
    *cols = (int)dims[2];
    return 0;
fail:
    reader_abort(&r);
    return -1;
}

static int load_labels(const char *path, const char *images_path, int64_t n,
                       int32_t **labels)
{
    idx_reader r;
    uint32_t count;
    uint8_t *raw = NULL;
    if (reader_open(&r, path) < 0)
        return -1;
    if (read_header(&r, 1, &count, "labels") < 0)
        goto fail;
    if ((int64_t)count != n) {
        dt_err_set("%s: label count %" PRIu32 " (dimension 0, bytes 4..7) does not match "
                   "the %" PRId64 " images of %s",
                   path, count, n, images_path);
        goto fail;
    }
    int64_t start = r.off;
    if (reader_payload(&r, n, "the labels", &raw) < 0)
        goto fail;
    for (int64_t i = 0; i < n; i++) {
        if (raw[i] >= IDX_CLASSES) {
            dt_err_set("%s: label %d at byte %" PRId64 " (sample %" PRId64 ") is out of "
                       "range, expected 0..%d",
                       path, raw[i], start + i, i, IDX_CLASSES - 1);
            goto fail;
        }
    }
    if (reader_close(&r) < 0) {
        free(raw);
        return -1;
    }
    int32_t *lab = dt_malloc((size_t)n * sizeof *lab);
    for (int64_t i = 0; i < n; i++)
        lab[i] = raw[i];
    free(raw);
    *labels = lab;
    return 0;
fail:
    free(raw);
    reader_abort(&r);
    return -1;
}

int dataset_load_idx(dt_dataset *d, const char *images_path, const char *labels_path)
{
    uint8_t *px = NULL;
    int32_t *labels = NULL;
    int64_t n = 0;
    int rows = 0, cols = 0;
    memset(d, 0, sizeof *d);
    if (load_images(images_path, &px, &n, &rows, &cols) < 0)
        return -1;
    if (load_labels(labels_path, images_path, n, &labels) < 0) {
        free(px);
        return -1;
    }
    snprintf(d->name, sizeof d->name, "idx");
    d->n = n;
    d->c = 1;
    d->h = rows;
    d->w = cols;
    d->classes = IDX_CLASSES;
    d->u8 = px;
    d->labels = labels;
    /* Plain v/255 until dataset_load_named sets the dataset's constants. */
    for (int i = 0; i < 3; i++) {
        d->mean[i] = 0.0f;
        d->std[i] = 1.0f;
    }
    return 0;
}
