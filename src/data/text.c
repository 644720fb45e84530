/* A byte-level text corpus: one file, or a directory's regular files in name
 * order, concatenated; vocabulary = the distinct bytes, sorted. */
#include "data/tokens.h"

#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The concatenated text, growing as files are read. */
typedef struct text_buf {
    uint8_t *p;
    int64_t n, cap;
} text_buf;

static void buf_reserve(text_buf *b, int64_t extra)
{
    if (b->n + extra <= b->cap)
        return;
    int64_t cap = b->cap ? b->cap : ((int64_t)1 << 16);
    while (cap < b->n + extra)
        cap *= 2;
    b->p = dt_realloc(b->p, (size_t)cap);
    b->cap = cap;
}

/* Appends the whole file; reads to the end rather than trusting a size, so a
 * file that grows or shrinks while read is still read consistently. */
static int buf_append_file(text_buf *b, const char *path)
{
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return dt_err_set("%s: cannot open: %s", path, errno ? strerror(errno) : "unknown error");
    for (;;) {
        buf_reserve(b, (int64_t)1 << 16);
        size_t want = (size_t)(b->cap - b->n);
        size_t k = fread(b->p + b->n, 1, want, f);
        b->n += (int64_t)k;
        if (k < want)
            break;
    }
    int bad = ferror(f);
    int err = errno;
    fclose(f);
    if (bad)
        return dt_err_set("%s: read error after byte %" PRId64 ": %s", path, b->n,
                          err ? strerror(err) : "unknown error");
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Prints only where one process speaks for all: rank 0, or before MPI. */
static int text_may_note(void) { return dt_world_rank() <= 0; }

static int load_dir(text_buf *b, dt_corpus *c, const char *dir)
{
    errno = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return dt_err_set("%s: cannot open the directory: %s", dir,
                          errno ? strerror(errno) : "unknown error");
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = dt_realloc(names, cap * sizeof *names);
        }
        size_t len = strlen(e->d_name) + 1;
        names[n] = dt_malloc(len);
        memcpy(names[n++], e->d_name, len);
    }
    closedir(dp);
    int rc = 0;
    if (n == 0) {
        rc = dt_err_set("%s: empty directory, expected text files in it", dir);
        goto done;
    }
    qsort(names, n, sizeof *names, cmp_names);
    size_t plen = strlen(dir) + 2;
    size_t first_binary = 0;      /* the first file skipped as binary, for the note */
    int64_t first_binary_at = 0;  /* where its NUL byte was */
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = dt_malloc(plen + strlen(names[i]));
        sprintf(p, "%s/%s", dir, names[i]);
        struct stat sb;
        /* lstat: a symbolic link is skipped, not followed (fortunes' *.u8
         * links would otherwise read each file twice) */
        if (lstat(p, &sb) != 0) {
            rc = dt_err_set("%s: cannot stat: %s", p, strerror(errno));
        } else if (!S_ISREG(sb.st_mode)) {
            c->files_other++;
        } else {
            int64_t start = b->n;
            rc = buf_append_file(b, p);
            const uint8_t *nul = rc == 0 ? memchr(b->p + start, 0, (size_t)(b->n - start)) : NULL;
            if (nul) {
                if (c->files_binary == 0) {
                    first_binary = i;
                    first_binary_at = (int64_t)(nul - (b->p + start));
                }
                b->n = start;
                c->files_binary++;
            } else if (rc == 0) {
                c->files_read++;
            }
        }
        free(p);
    }
    if (rc == 0 && c->files_read == 0)
        rc = dt_err_set("%s: no text file in the directory: %d binary file(s) (holding a NUL "
                        "byte) and %d entries that are not regular files skipped",
                        dir, c->files_binary, c->files_other);
    else if (rc == 0 && c->files_binary > 0 && text_may_note())
        fprintf(stderr, "dtrain: note: data.path: %d binary file(s) in %s skipped (each holds a "
                        "NUL byte; the first, %s, at offset %" PRId64 "), %d text file(s) read\n",
                c->files_binary, dir, names[first_binary], first_binary_at, c->files_read);
done:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static char *copy_str(const char *s)
{
    size_t len = strlen(s) + 1;
    char *p = dt_malloc(len);
    memcpy(p, s, len);
    return p;
}

int corpus_load_text(dt_corpus *c, const char *path)
{
    memset(c, 0, sizeof *c);
    struct stat sb;
    if (!path || !path[0])
        return dt_err_set("data.path: empty, expected a text file or a directory of text files");
    if (stat(path, &sb) != 0)
        return dt_err_set("%s: cannot open: %s", path, strerror(errno));
    text_buf b = { 0 };
    int rc;
    if (S_ISDIR(sb.st_mode)) {
        rc = load_dir(&b, c, path);
    } else {
        rc = buf_append_file(&b, path);
        const uint8_t *nul = rc == 0 && b.n ? memchr(b.p, 0, (size_t)b.n) : NULL;
        if (nul)
            rc = dt_err_set("%s: a NUL byte at offset %" PRId64 ", expected a text file",
                            path, (int64_t)(nul - b.p));
        c->files_read = 1;
    }
    if (rc == 0 && b.n == 0)
        rc = dt_err_set("%s: no text (0 bytes), expected a text corpus", path);
    if (rc != 0) {
        free(b.p);
        memset(c, 0, sizeof *c);
        return -1;
    }

    /* vocabulary: the distinct bytes in increasing order; id = rank */
    int64_t count[256] = { 0 };
    for (int64_t i = 0; i < b.n; i++)
        count[b.p[i]]++;
    uint16_t id_of[256] = { 0 };
    for (int v = 0; v < 256; v++)
        if (count[v]) {
            id_of[v] = (uint16_t)c->vocab;
            c->bytes[c->vocab++] = (uint8_t)v;
        }
    /* floor(0.9 n) exactly, in integers: n = 10 q + r gives 9 q + floor(9 r / 10) */
    c->n_train = b.n / 10 * 9 + b.n % 10 * 9 / 10;
    c->n_val = b.n - c->n_train;
    c->train = dt_malloc((size_t)(c->n_train ? c->n_train : 1) * sizeof *c->train);
    c->val = dt_malloc((size_t)(c->n_val ? c->n_val : 1) * sizeof *c->val);
    for (int64_t i = 0; i < c->n_train; i++)
        c->train[i] = id_of[b.p[i]];
    for (int64_t i = 0; i < c->n_val; i++)
        c->val[i] = id_of[b.p[c->n_train + i]];
    free(b.p);
    snprintf(c->name, sizeof c->name, "text");
    c->train_src = copy_str(path);
    c->val_src = copy_str(path);
    return 0;
}

int tokens_decode(const uint8_t *bytes, int vocab, const int32_t *ids, int64_t n, uint8_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab)
            return dt_err_set("token id %" PRId32 " at position %" PRId64 " is outside the "
                              "vocabulary, expected 0..%d",
                              ids[i], i, vocab - 1);
        out[i] = bytes[ids[i]];
    }
    return 0;
}
