/* Checkpoints: one HDF5 file per checkpoint in <output_dir>/checkpoints/.
 *
 *   ckpt-<step, 10 digits>.h5
 *     attributes: step, epoch, nranks, nparams, model, mode, format_version
 *     /<array name>  float32 (nranks, n) per-rank arrays (params, momentum, ...)
 *     /state         uint8   (nranks, blob_len) per-rank opaque state (RNG,
 *                    loader position, algorithm scalars)
 *   all datasets chunked with the Fletcher32 checksum filter.
 *
 * A checkpoint is written collectively to "ckpt-<step>.h5.tmp", closed, then
 * renamed by rank 0; then "latest" (a one-line text file naming it) is
 * rewritten through a temporary name and rename. Only the newest `keep`
 * complete checkpoints are kept. A crash at any point leaves the previous
 * checkpoint and marker intact. */
#ifndef DT_IO_CHECKPOINT_H
#define DT_IO_CHECKPOINT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct dt_ckpt_meta {
    int64_t step, epoch;
    int64_t nranks;
    int64_t nparams;
    int64_t elastic;    /* rank-count changes in the run's history (attribute
                         * elastic_resumes; 0 when absent): reseeds the data streams */
    char model[32];
    char mode[32];
} dt_ckpt_meta;

/* What a rank of a run on M ranks reads from an array written by N != M
 * ranks (checkpoint_read_elastic). With N == M every rule reads row `rank`. */
enum dt_ckpt_rule {
    DT_CKPT_PER_RANK = 0, /* no meaning on another rank count: such a resume is refused */
    DT_CKPT_ROW0,         /* replicated state: old rank 0's row */
    DT_CKPT_MEAN,         /* the mean of the old rows (in row order, in double) */
    DT_CKPT_MEAN_FLAGGED, /* the mean of the old rows whose last element is non-zero,
                           * the others counted as zeros (a message slot and its
                           * "not yet absorbed" flag) */
    DT_CKPT_FRESH,        /* not read: the value of a fresh start stays */
    DT_CKPT_SUM,          /* the sum of the old rows (in row order, in double): pieces
                           * held by different ranks, zero elsewhere, put together */
};

typedef struct dt_ckpt_array {
    const char *name;   /* dataset name, e.g. "params" */
    float *data;        /* this rank's n floats (read into on restore) */
    size_t n;           /* must be the same on every rank (rectangular datasets) */
    int rule;           /* enum dt_ckpt_rule: a resume on another rank count */
} dt_ckpt_array;

/* Integer counters travel in the float arrays of a checkpoint as two floats,
 * v = hi * 2^20 + lo, each exact in a float for counts below 2^44. */
static inline void ckpt_count_put(int64_t v, float out[2])
{
    out[0] = (float)(v >> 20);
    out[1] = (float)(v & ((1 << 20) - 1));
}

/* The pair is checked before the float-to-integer casts (a float out of
 * range there is undefined behaviour): both whole numbers, hi in [0, 2^24),
 * lo in [0, 2^20). The arrays passed their checksums, so a pair outside that
 * is a file built by hand or a bug, and stops the job with the values. */
static inline int64_t ckpt_count_get(const float in[2])
{
    float hi = in[0], lo = in[1];
    if (!(hi >= 0.0f && hi < 16777216.0f && hi == (float)(int32_t)hi && lo >= 0.0f &&
          lo < 1048576.0f && lo == (float)(int32_t)lo))
        DT_FATAL("checkpoint counter (%.9g, %.9g) is not a count: expected whole numbers "
                 "in 0..16777215 and 0..1048575 (hi * 2^20 + lo)",
                 (double)hi, (double)lo);
    return ((int64_t)hi << 20) + (int64_t)lo;
}

/* Collective. dir is created if missing. Returns 0 and the path of the new
 * checkpoint in `written` (may be NULL), or -1 on every rank with
 * dt_err_set() naming the file, the step that failed and the operating
 * system's reason (this rank's, or the lowest failing rank's); the partial
 * file is then removed and nothing previously written is touched. HDF5's
 * error stack is printed only with DTRAIN_DEBUG=1. */
int checkpoint_write(MPI_Comm comm, const char *dir, const dt_ckpt_meta *meta,
                     const dt_ckpt_array *arrays, int narrays, const void *blob,
                     size_t blob_len, int keep, char *written, size_t written_len);

/* Not collective (call on one rank): removes ckpt-*.h5.tmp and latest.tmp
 * left in dir by a killed job, printing each checkpoint removed. */
void checkpoint_clean_partial(const char *dir);

/* Collective. Finds the latest complete checkpoint in dir. Returns 1 and
 * writes its path into path (len bytes) if one exists, 0 if none. When
 * `latest` names a file that is missing, the newest file is taken and
 * checkpoint_find_note() says so (else it returns ""). */
int checkpoint_find_latest(MPI_Comm comm, const char *dir, char *path, size_t len);
const char *checkpoint_find_note(void);

/* Collective. The newest ckpt-*.h5 in dir older than the checkpoint `than`
 * (a path); returns 1 and its path in path (may alias than), or 0. */
int checkpoint_find_older(MPI_Comm comm, const char *dir, const char *than, char *path,
                          size_t len);

/* Collective. Reads checkpoint `path`; its attributes must match `expect`
 * (nranks, nparams, model, mode; step/epoch are returned in *got). Fills every
 * array and the blob. Returns 0, or -1 on every rank with dt_err_set() naming
 * the file and what is wrong (mismatch, truncated, checksum failure); for a
 * damaged file the message names the previous intact checkpoint if any. */
int checkpoint_read(MPI_Comm comm, const char *path, const dt_ckpt_meta *expect,
                    dt_ckpt_meta *got, dt_ckpt_array *arrays, int narrays, void *blob,
                    size_t blob_len);

/* Collective. checkpoint_read for a checkpoint written by any rank count:
 * with the same count as comm it is checkpoint_read; with another, each
 * array is read by its rule (an array of DT_CKPT_PER_RANK makes it fail,
 * naming the array), and *blobs (malloc'd; the caller frees it) receives
 * every old rank's blob, (got->nranks, blob_len), for the caller to combine;
 * `blob` is then left untouched. *blobs is NULL when the count is the same.
 * Every rank reads the same rows in the same order, so an array of ROW0 or
 * MEAN is bit for bit the same on every new rank. */
int checkpoint_read_elastic(MPI_Comm comm, const char *path, const dt_ckpt_meta *expect,
                            dt_ckpt_meta *got, dt_ckpt_array *arrays, int narrays, void *blob,
                            size_t blob_len, unsigned char **blobs);

#endif
