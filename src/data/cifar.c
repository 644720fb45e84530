/* CIFAR-10 binary batches.
 *
 * Each file is a run of 3073-byte records: one label byte, then the image as
 * 3 x 32 x 32 bytes (R plane, G plane, B plane; row-major), which is already
 * our (C, H, W) order, so records are copied as they are. The official files
 * hold 10000 records each; any positive whole number of records is accepted so
 * tests and subsets work.
 */
#include "data/data.h"

#include "core/error.h"
#include "core/parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    CIFAR_SIDE = 32,
    CIFAR_CHANNELS = 3,
    CIFAR_PIXELS = CIFAR_CHANNELS * CIFAR_SIDE * CIFAR_SIDE,
    CIFAR_RECORD = 1 + CIFAR_PIXELS,
    CIFAR_CLASSES = 10,
    CIFAR_TRAIN_FILES = 5,
    CIFAR_PATH_MAX = 4096,
    /* records per fread: 256 x 3073 bytes keeps the buffer under 1 MiB */
    CIFAR_BLOCK = 256,
};

/* The most samples a dataset holds (as IDX_MAX_COUNT): a record count comes
 * from a file's size, so a sparse or foreign file must not size an allocation
 * of terabytes before it is read. */
#define CIFAR_MAX_RECORDS ((int64_t)INT32_MAX)

typedef struct cifar_file {
    char path[CIFAR_PATH_MAX];
    FILE *f;
    int64_t records;
} cifar_file;

/* Opens the file and counts its records from its size. */
static int cifar_open(cifar_file *cf, const char *dir, const char *base)
{
    struct stat sb;
    cf->f = NULL;
    cf->records = 0;
    int len = snprintf(cf->path, sizeof cf->path, "%s/%s", dir, base);
    if (len < 0 || len >= (int)sizeof cf->path)
        return dt_err_set("%s/%s: path longer than %d bytes", dir, base, CIFAR_PATH_MAX - 1);
    errno = 0;
    cf->f = fopen(cf->path, "rb");
    if (!cf->f)
        return dt_err_set("%s: cannot open: %s", cf->path, strerror(errno));
    if (fstat(fileno(cf->f), &sb) != 0)
        return dt_err_set("%s: cannot stat: %s", cf->path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return dt_err_set("%s: not a regular file, expected a CIFAR-10 binary batch",
                          cf->path);
    int64_t size = (int64_t)sb.st_size;
    if (size == 0)
        return dt_err_set("%s: empty file at byte 0, expected records of %d bytes "
                          "(1 label + 3x32x32 pixels)",
                          cf->path, CIFAR_RECORD);
    if (size % CIFAR_RECORD != 0)
        return dt_err_set("%s: truncated record at byte %" PRId64 ": file size %" PRId64
                          " is not a multiple of the %d-byte record (1 label + 3x32x32 "
                          "pixels)",
                          cf->path, size / CIFAR_RECORD * CIFAR_RECORD, size, CIFAR_RECORD);
    if (check_int64(size / CIFAR_RECORD, 1, CIFAR_MAX_RECORDS, cf->path,
                    "record count (the file size over 3073 bytes)") < 0)
        return -1;
    cf->records = size / CIFAR_RECORD;
    return 0;
}

/* Reads all records into pixels (records, 3, 32, 32) and labels (records). */
static int cifar_read(cifar_file *cf, uint8_t *pixels, int32_t *labels)
{
    uint8_t *buf = dt_malloc((size_t)CIFAR_BLOCK * CIFAR_RECORD);
    int64_t done = 0;
    int rc = 0;
    while (done < cf->records && rc == 0) {
        int64_t k = cf->records - done < CIFAR_BLOCK ? cf->records - done : CIFAR_BLOCK;
        size_t got = fread(buf, 1, (size_t)(k * CIFAR_RECORD), cf->f);
        if (got != (size_t)(k * CIFAR_RECORD)) {
            /* the file shrank after fstat, or the device failed */
            rc = dt_err_set("%s: truncated at byte %" PRId64 ", expected %" PRId64
                            " bytes%s%s",
                            cf->path, done * CIFAR_RECORD + (int64_t)got,
                            cf->records * CIFAR_RECORD, ferror(cf->f) ? ": " : "",
                            ferror(cf->f) ? strerror(errno) : "");
            break;
        }
        for (int64_t r = 0; r < k; r++) {
            const uint8_t *rec = buf + r * CIFAR_RECORD;
            int64_t i = done + r;
            if (rec[0] >= CIFAR_CLASSES) {
                rc = dt_err_set("%s: label %d at byte %" PRId64 " (record %" PRId64
                                ") is out of range, expected 0..%d",
                                cf->path, rec[0], i * CIFAR_RECORD, i, CIFAR_CLASSES - 1);
                break;
            }
            labels[i] = rec[0];
            memcpy(pixels + i * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
        }
        done += k;
    }
    if (rc == 0 && fgetc(cf->f) != EOF)
        rc = dt_err_set("%s: trailing data at byte %" PRId64 " (the file grew while read)",
                        cf->path, cf->records * CIFAR_RECORD);
    free(buf);
    return rc;
}

int dataset_load_cifar10(dt_dataset *d, const char *dir, int train)
{
    cifar_file files[CIFAR_TRAIN_FILES];
    int nfiles = train ? CIFAR_TRAIN_FILES : 1, opened = 0, rc = 0;
    int64_t total = 0;
    memset(d, 0, sizeof *d);
    for (int i = 0; i < nfiles && rc == 0; i++) {
        char base[32];
        if (train)
            snprintf(base, sizeof base, "data_batch_%d.bin", i + 1);
        else
            snprintf(base, sizeof base, "test_batch.bin");
        rc = cifar_open(&files[i], dir, base);
        opened = i + 1;
        total += files[i].records;
        if (rc == 0)
            rc = check_int64(total, 1, CIFAR_MAX_RECORDS, files[i].path,
                             "record count of the training batches up to this one");
    }
    uint8_t *pixels = NULL;
    int32_t *labels = NULL;
    if (rc == 0) {
        pixels = dt_malloc((size_t)total * CIFAR_PIXELS);
        labels = dt_malloc((size_t)total * sizeof *labels);
    }
    int64_t at = 0;
    for (int i = 0; i < nfiles && rc == 0; i++) {
        rc = cifar_read(&files[i], pixels + at * CIFAR_PIXELS, labels + at);
        at += files[i].records;
    }
    for (int i = 0; i < opened; i++)
        if (files[i].f)
            fclose(files[i].f);
    if (rc != 0) {
        free(pixels);
        free(labels);
        return -1;
    }
    snprintf(d->name, sizeof d->name, "cifar10");
    d->n = total;
    d->c = CIFAR_CHANNELS;
    d->h = CIFAR_SIDE;
    d->w = CIFAR_SIDE;
    d->classes = CIFAR_CLASSES;
    d->u8 = pixels;
    d->labels = labels;
    static const float mean[3] = { 0.4914f, 0.4822f, 0.4465f };
    static const float std[3] = { 0.2470f, 0.2435f, 0.2616f };
    memcpy(d->mean, mean, sizeof mean);
    memcpy(d->std, std, sizeof std);
    return 0;
}
