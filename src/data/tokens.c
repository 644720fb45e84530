/* llm.c token files, and the checks every corpus shares.
 *
 * File layout (karpathy/llm.c dev/data): a header of 256 little-endian int32
 * -- word 0 the magic 20240520, word 1 the version 1, word 2 the token count,
 * words 3..255 zero -- then `count` little-endian uint16 tokens, nothing
 * after. Header words are read as uint32 (their full width, no sign) and
 * range-checked before they become signed counts; the file's size is checked
 * against the count before anything is allocated, so a header that lies
 * cannot make us allocate memory the file does not back.
 */
#include "data/tokens.h"

#include "core/error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { HEADER_BYTES = 4 * DT_TOKENS_HEADER_INTS, MAX_VOCAB = 65536 };
/* llm.c's other format (version 7, uint32 tokens): named in the message. */
#define LLMC_U32_MAGIC 20240801u

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A whole read of n bytes at the current position, or an error saying where
 * the file ended. */
static int read_exact(FILE *f, const char *path, void *buf, size_t n, int64_t at,
                      const char *what)
{
    size_t k = fread(buf, 1, n, f);
    if (k == n)
        return 0;
    if (ferror(f))
        return dt_err_set("%s: read error in %s (bytes %" PRId64 "..%" PRId64 "): %s", path,
                          what, at, at + (int64_t)n - 1, strerror(errno));
    return dt_err_set("%s: truncated at byte %" PRId64 " (in %s), expected the file to "
                      "continue to byte %" PRId64,
                      path, at + (int64_t)k, what, at + (int64_t)n);
}

/* The header: magic, version, count in 0..INT32_MAX, zeros after it. */
static int read_header(FILE *f, const char *path, int64_t size, int64_t *count)
{
    uint8_t h[HEADER_BYTES];
    if (size < 8) {
        return dt_err_set("%s: %" PRId64 " bytes, shorter than an llm.c token file's %d-byte "
                          "header (256 int32: magic %d, version %d, token count)",
                          path, size, HEADER_BYTES, DT_TOKENS_MAGIC, DT_TOKENS_VERSION);
    }
    /* the magic and version first, so a file of another kind is named as such
     * rather than as a short token file */
    if (read_exact(f, path, h, 8, 0, "the header's magic and version") < 0)
        return -1;
    uint32_t magic = le32(h), version = le32(h + 4);
    if (magic == LLMC_U32_MAGIC)
        return dt_err_set("%s: magic %" PRIu32 " (header word 0) is llm.c's uint32 token file "
                          "(version 7, for vocabularies over 65536), which is not read here; "
                          "expected %d (uint16 tokens)",
                          path, magic, DT_TOKENS_MAGIC);
    if (magic != DT_TOKENS_MAGIC)
        return dt_err_set("%s: bad magic %" PRIu32 " (0x%08" PRIx32 ", header word 0, bytes "
                          "0..3), expected %d (an llm.c token file)",
                          path, magic, magic, DT_TOKENS_MAGIC);
    if (version != DT_TOKENS_VERSION)
        return dt_err_set("%s: version %" PRIu32 " (header word 1, bytes 4..7), expected %d "
                          "(llm.c's uint16 GPT-2 token files)",
                          path, version, DT_TOKENS_VERSION);
    if (size < HEADER_BYTES)
        return dt_err_set("%s: %" PRId64 " bytes, shorter than the %d-byte header (256 int32)",
                          path, size, HEADER_BYTES);
    if (read_exact(f, path, h + 8, HEADER_BYTES - 8, 8, "the header") < 0)
        return -1;
    uint32_t n = le32(h + 8);
    if (n > (uint32_t)INT32_MAX)
        return dt_err_set("%s: token count %" PRIu32 " (header word 2, bytes 8..11) is out of "
                          "range, expected 0..%" PRId32 " (a signed 32-bit count)",
                          path, n, INT32_MAX);
    for (int w = 3; w < DT_TOKENS_HEADER_INTS; w++) {
        uint32_t v = le32(h + 4 * w);
        if (v != 0)
            return dt_err_set("%s: header word %d (bytes %d..%d) is %" PRIu32 ", expected 0: "
                              "llm.c writes zeros after the 32-bit token count (a count "
                              "wider than 32 bits is not this format)",
                              path, w, 4 * w, 4 * w + 3, v);
    }
    int64_t want = HEADER_BYTES + 2 * (int64_t)n;
    if (size < want)
        return dt_err_set("%s: %" PRId64 " bytes hold %" PRId64 " tokens%s, but the header "
                          "(word 2) says %" PRIu32 ": expected %" PRId64 " bytes (%d-byte "
                          "header + 2 bytes per token); the file is truncated",
                          path, size, (size - HEADER_BYTES) / 2,
                          (size - HEADER_BYTES) % 2 ? " and a half" : "", n, want, HEADER_BYTES);
    if (size > want)
        return dt_err_set("%s: trailing data: %" PRId64 " bytes, expected %" PRId64 " (%d-byte "
                          "header + 2 bytes for each of the header's %" PRIu32 " tokens)",
                          path, size, want, HEADER_BYTES, n);
    *count = (int64_t)n;
    return 0;
}

/* One token file into *out (count tokens, each < vocab). */
static int read_token_file(const char *path, int vocab, uint16_t **out, int64_t *count)
{
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return dt_err_set("%s: cannot open: %s", path, errno ? strerror(errno) : "unknown error");
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return dt_err_set("%s: not a regular file, expected an llm.c token file", path);
    }
    int64_t size = (int64_t)sb.st_size, n = 0;
    uint8_t *raw = NULL;
    uint16_t *tok = NULL;
    if (read_header(f, path, size, &n) < 0)
        goto fail;
    raw = dt_malloc((size_t)(2 * n + 1));
    tok = dt_malloc((size_t)(n ? n : 1) * sizeof *tok);
    if (read_exact(f, path, raw, (size_t)(2 * n), HEADER_BYTES, "the tokens") < 0)
        goto fail;
    /* the size was checked; a byte more means the file grew while read */
    if (fread(raw + 2 * n, 1, 1, f) != 0) {
        dt_err_set("%s: trailing data at byte %" PRId64 " (the file changed while read)", path,
                   HEADER_BYTES + 2 * n);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        unsigned t = (unsigned)raw[2 * i] | (unsigned)raw[2 * i + 1] << 8;
        if (t >= (unsigned)vocab) {
            dt_err_set("%s: token %u at index %" PRId64 " (byte %" PRId64 ") is >= the "
                       "vocabulary size %d (model.vocab_size)",
                       path, t, i, HEADER_BYTES + 2 * i, vocab);
            goto fail;
        }
        tok[i] = (uint16_t)t;
    }
    free(raw);
    fclose(f);
    *out = tok;
    *count = n;
    return 0;
fail:
    free(raw);
    free(tok);
    fclose(f);
    return -1;
}

static char *copy_str(const char *s)
{
    size_t len = strlen(s) + 1;
    char *p = dt_malloc(len);
    memcpy(p, s, len);
    return p;
}

int corpus_load_tokens(dt_corpus *c, const char *train_path, const char *val_path, int vocab)
{
    memset(c, 0, sizeof *c);
    if (vocab == 0)
        vocab = DT_TOKENS_DEFAULT_VOCAB;
    if (vocab < 2 || vocab > MAX_VOCAB)
        return dt_err_set("model.vocab_size = %d is out of range for token files, expected "
                          "2..%d (tokens are uint16)",
                          vocab, MAX_VOCAB);
    if (!train_path || !train_path[0])
        return dt_err_set("data.path: empty, expected an llm.c token file (training split)");
    if (!val_path || !val_path[0])
        return dt_err_set("data.val_path: empty, expected an llm.c token file (validation "
                          "split)");
    if (read_token_file(train_path, vocab, &c->train, &c->n_train) < 0)
        return -1;
    if (read_token_file(val_path, vocab, &c->val, &c->n_val) < 0) {
        free(c->train);
        memset(c, 0, sizeof *c);
        return -1;
    }
    snprintf(c->name, sizeof c->name, "tokens");
    c->vocab = vocab;
    c->train_src = copy_str(train_path);
    c->val_src = copy_str(val_path);
    return 0;
}

int corpus_check(const dt_corpus *c, int T)
{
    if (T < 1)
        return dt_err_set("model.block_size = %d, expected at least 1", T);
    int64_t need = (int64_t)T + 1;
    int text = strcmp(c->name, "text") == 0;
    if (text && (c->n_train < need || c->n_val < need)) {
        /* the validation split is the last ceil(n / 10) bytes: it holds T+1
         * from n = 10 T + 1 on, and the training split then holds 9 T >= T+1 */
        int64_t n = c->n_train + c->n_val;
        return dt_err_set("%s: %" PRId64 " bytes of text split into %" PRId64 " for training "
                          "and %" PRId64 " for validation; each split needs a window of T+1 = "
                          "%" PRId64 " bytes (model.block_size T = %d): the corpus needs at "
                          "least %" PRId64 " bytes of text",
                          c->train_src, n, c->n_train, c->n_val, need, T, 10 * (int64_t)T + 1);
    }
    if (c->n_train < need)
        return dt_err_set("%s: the training split holds %" PRId64 " tokens, fewer than one "
                          "window of T+1 = %" PRId64 " (model.block_size T = %d): the corpus "
                          "needs two windows, at least %" PRId64 " tokens in each file",
                          c->train_src, c->n_train, need, T, need);
    if (c->n_val < need)
        return dt_err_set("%s: the validation split holds %" PRId64 " tokens, fewer than one "
                          "window of T+1 = %" PRId64 " (model.block_size T = %d): the corpus "
                          "needs two windows, at least %" PRId64 " tokens in each file",
                          c->val_src, c->n_val, need, T, need);
    return 0;
}

void corpus_free(dt_corpus *c)
{
    free(c->train);
    free(c->val);
    free(c->train_src);
    free(c->val_src);
    memset(c, 0, sizeof *c);
}
