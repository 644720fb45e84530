/* Shared helpers of the libFuzzer harnesses: the readers under test take
 * file names, so an input is written to a private temporary directory. */
#ifndef DT_FUZZ_UTIL_H
#define DT_FUZZ_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir_path[64];

/* At exit: the few names the harnesses write, then the directory. */
static inline void fuzz_dir_remove(void)
{
    static const char *names[] = { "deck.ini", "img", "lab", "img.gz", "lab.gz",
                                   "test_batch.bin", "graph.txt", "egraph.txt",
                                   "train.bin", "val.bin", "text.txt" };
    char p[320];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, names[i]);
        unlink(p);
    }
    rmdir(fuzz_dir_path);
}

/* A directory for this process, created once; the harness rewrites the
 * same few names in it. */
static inline const char *fuzz_dir(void)
{
    char *dir = fuzz_dir_path;
    if (!dir[0]) {
        const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, sizeof fuzz_dir_path, "%.40s/dtfuzz.XXXXXX", base);
        if (!mkdtemp(dir)) {
            fprintf(stderr, "fuzz: mkdtemp %s: %s\n", dir, strerror(errno));
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return dir;
}

/* Writes n bytes to dir/name; returns the path (static buffer per slot). */
static inline const char *fuzz_file(int slot, const char *name, const uint8_t *d, size_t n)
{
    static char paths[4][256];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %zu bytes to %s: %s\n", n, paths[slot],
                strerror(errno));
        abort();
    }
    return paths[slot];
}

#ifdef DT_DATA_H
/* A data set a reader accepted: every sample can be read and every label is a
 * class (abort otherwise, which libFuzzer reports); then freed. */
static inline void fuzz_check_dataset(dt_dataset *d)
{
    float *x = malloc((size_t)d->c * d->h * d->w * sizeof *x + 1);
    for (int64_t i = 0; i < d->n; i++) {
        dataset_sample(d, i, x);
        if (d->labels[i] < 0 || d->labels[i] >= d->classes)
            abort();
    }
    free(x);
    dataset_free(d);
}
#endif

/* The largest decimal number written in a text input outside comments: the
 * digit runs of each line before its first '#' (or NUL, where the readers'
 * string functions stop), saturating at UINT64_MAX. A reader that accepts
 * an input whose largest number is beyond every field's range narrowed a
 * value instead of refusing it. */
static inline uint64_t fuzz_largest_number(const uint8_t *d, size_t n)
{
    uint64_t best = 0, cur = 0;
    int in_num = 0, skip = 0;
    for (size_t i = 0; i <= n; i++) {
        int c = i < n ? d[i] : '\n';
        if (c == '\n') {
            skip = 0;
        } else if (c == '#' || c == '\0') {
            skip = 1;
        }
        if (!skip && c >= '0' && c <= '9') {
            unsigned v = (unsigned)(c - '0');
            cur = !in_num ? v : cur > (UINT64_MAX - v) / 10 ? UINT64_MAX : cur * 10 + v;
            in_num = 1;
        } else {
            if (in_num && cur > best)
                best = cur;
            in_num = 0;
            cur = 0;
        }
    }
    return best;
}

/* The harnesses build the deck without the algorithms, whose table gives
 * algorithm.mode its spellings in dtrain (algo_deck_register): these stand
 * in for them. */
#define FUZZ_MODES                                                             \
    "local|allreduce|dpsgd|sgp|osgp|adpsgd|ps-async|ps-sync|easgd|lsgd|"      \
    "pdmm-isvr|admm-isvr|dsgd-ecl|diloco"

#endif
