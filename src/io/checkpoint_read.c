/* Checkpoint reading (the files io/checkpoint.c writes): the metadata
 * checked against this run's, every array read by its rule (one rank's own
 * row, or on another rank count the old rank 0's row, the mean or the sum
 * of the old rows, or nothing), Fletcher32 verified, a damaged file named
 * with the newest intact one before it. Reads use independent transfers, so
 * a checksum failure on one rank's chunk cannot leave the other ranks
 * waiting in a collective read; the verdict is agreed afterwards with one
 * allreduce. */
#include "io/checkpoint.h"

#include "core/error.h"
#include "core/parse.h"
#include "core/watchdog.h"
#include "io/checkpoint_int.h"
#include "io/h5attr.h"

#include <errno.h>
#include <hdf5.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- read ----------------------------------------------------------------- */

/* Opens dataset `name` of path's file and checks that it is (rows, n):
 * *ds and *fspace are then open for the caller to close. Returns 0, or -1
 * or CKPT_DAMAGED after dt_err_set (nothing left open). */
static int dataset_open_rows(hid_t file, const char *path, const char *name, int rows,
                             size_t n, hid_t *ds, hid_t *fspace)
{
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return dt_err_set("checkpoint %s has no dataset '%s'; this run needs it", path, name);
    *ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (*ds < 0) {
        dt_err_set("checkpoint %s: dataset '%s' cannot be opened (damaged file)", path, name);
        return CKPT_DAMAGED;
    }
    int rc = 0;
    *fspace = H5Dget_space(*ds);
    hsize_t dims[2] = {0, 0};
    if (*fspace < 0 || H5Sget_simple_extent_ndims(*fspace) != 2 ||
        H5Sget_simple_extent_dims(*fspace, dims, NULL) < 0) {
        dt_err_set("checkpoint %s: dataset '%s' is not a 2-D (nranks, n) array (damaged file)",
                   path, name);
        rc = CKPT_DAMAGED;
    } else if (dims[0] != (hsize_t)rows || dims[1] != (hsize_t)n) {
        dt_err_set("checkpoint %s: dataset '%s' has shape (%llu, %llu), expected (%d, %zu)",
                   path, name, (unsigned long long)dims[0], (unsigned long long)dims[1],
                   rows, n);
        rc = -1;
    }
    if (rc != 0) {
        if (*fspace >= 0)
            H5Sclose(*fspace);
        H5Dclose(*ds);
    }
    return rc;
}

/* Reads row `rank` of (nranks, n) dataset `name` into data. Returns 0, or -1
 * or CKPT_DAMAGED after dt_err_set. */
static int dataset_read_row(hid_t file, hid_t dxpl, const char *path, const char *name,
                            hid_t mtype, int rank, int nranks, void *data, size_t n)
{
    hid_t ds, fspace, mspace = -1;
    int rc = dataset_open_rows(file, path, name, nranks, n, &ds, &fspace);
    if (rc != 0)
        return rc;
    rc = -1;
    if (n == 0) {
        rc = 0;
        goto out;
    }
    hsize_t start[2] = {(hsize_t)rank, 0}, count[2] = {1, (hsize_t)n}, mcount = n;
    mspace = H5Screate_simple(1, &mcount, NULL);
    if (mspace < 0 ||
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dread(ds, mtype, mspace, fspace, dxpl, data) < 0) {
        dt_err_set("checkpoint %s: reading row %d of '%s' failed (checksum mismatch or "
                   "truncated file)",
                   path, rank, name);
        rc = CKPT_DAMAGED;
        goto out;
    }
    rc = 0;
out:
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    H5Dclose(ds);
    return rc;
}

/* The mean (sum: the sum) over the file_ranks rows of (file_ranks, n)
 * dataset `name` into data (n), accumulated in double in row order (the
 * same bits on every reader); flagged: rows whose last element is 0 count as
 * zeros. Returns 0, or -1 or CKPT_DAMAGED after dt_err_set. */
static int dataset_read_mean(hid_t file, hid_t dxpl, const char *path, const char *name,
                             int file_ranks, float *data, size_t n, int flagged, int sum)
{
    hid_t ds, fspace;
    int rc = dataset_open_rows(file, path, name, file_ranks, n, &ds, &fspace);
    if (rc != 0)
        return rc;
    rc = -1;
    double *acc = NULL;
    float *buf = NULL;
    unsigned char *use = NULL;
    if (n == 0) {
        rc = 0;
        goto out;
    }
    hsize_t width = n < CKPT_CHUNK_MAX ? (hsize_t)n : CKPT_CHUNK_MAX;
    acc = dt_malloc(n * sizeof *acc);
    buf = dt_malloc((size_t)width * sizeof *buf);
    use = dt_malloc((size_t)file_ranks);
    for (size_t i = 0; i < n; i++)
        acc[i] = 0.0;
    /* the flags first: a row that holds no message adds nothing */
    for (int r = 0; r < file_ranks; r++) {
        use[r] = 1;
        if (!flagged)
            continue;
        hsize_t start[2] = {(hsize_t)r, (hsize_t)n - 1}, count[2] = {1, 1}, one = 1;
        hid_t ms = H5Screate_simple(1, &one, NULL);
        if (ms < 0 || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dread(ds, H5T_NATIVE_FLOAT, ms, fspace, dxpl, buf) < 0) {
            dt_err_set("checkpoint %s: reading row %d of '%s' failed (checksum mismatch or "
                       "truncated file)", path, r, name);
            rc = CKPT_DAMAGED;
            if (ms >= 0)
                H5Sclose(ms);
            goto out;
        }
        H5Sclose(ms);
        use[r] = buf[0] != 0.0f;
    }
    for (hsize_t c = 0; c < (hsize_t)n; c += width) {
        hsize_t w = (hsize_t)n - c < width ? (hsize_t)n - c : width;
        for (int r = 0; r < file_ranks; r++) {
            if (!use[r])
                continue;
            hsize_t start[2] = {(hsize_t)r, c}, count[2] = {1, w};
            hid_t ms = H5Screate_simple(1, &w, NULL);
            if (ms < 0 ||
                H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                H5Dread(ds, H5T_NATIVE_FLOAT, ms, fspace, dxpl, buf) < 0) {
                dt_err_set("checkpoint %s: reading row %d of '%s' failed (checksum mismatch "
                           "or truncated file)", path, r, name);
                rc = CKPT_DAMAGED;
                if (ms >= 0)
                    H5Sclose(ms);
                goto out;
            }
            H5Sclose(ms);
            for (hsize_t i = 0; i < w; i++)
                acc[c + i] += (double)buf[i];
        }
    }
    for (size_t i = 0; i < n; i++)
        data[i] = (float)(sum ? acc[i] : acc[i] / file_ranks);
    rc = 0;
out:
    free(acc);
    free(buf);
    free(use);
    if (fspace >= 0)
        H5Sclose(fspace);
    H5Dclose(ds);
    return rc;
}

/* What rule `rule` reads of a (file_ranks, n) array for rank `rank` of
 * nranks. Returns 0, or -1 or CKPT_DAMAGED after dt_err_set. */
static int array_read_elastic(hid_t file, hid_t dxpl, const char *path, const dt_ckpt_array *a,
                              int rank, int nranks, int file_ranks)
{
    if (file_ranks == nranks)
        return dataset_read_row(file, dxpl, path, a->name, H5T_NATIVE_FLOAT, rank, nranks,
                                a->data, a->n);
    switch (a->rule) {
    case DT_CKPT_ROW0:
        return dataset_read_row(file, dxpl, path, a->name, H5T_NATIVE_FLOAT, 0, file_ranks,
                                a->data, a->n);
    case DT_CKPT_MEAN:
    case DT_CKPT_MEAN_FLAGGED:
    case DT_CKPT_SUM:
        return dataset_read_mean(file, dxpl, path, a->name, file_ranks, a->data, a->n,
                                 a->rule == DT_CKPT_MEAN_FLAGGED, a->rule == DT_CKPT_SUM);
    case DT_CKPT_FRESH:
        return 0;
    default:
        return dt_err_set("checkpoint %s was written by %d ranks, this run has %d: its array "
                          "'%s' is one rank's own state, with no meaning on another rank count",
                          path, file_ranks, nranks, a->name);
    }
}

/* Reads every element of every dataset in file `path` (Fletcher32 verifies
 * each chunk) with a bounded buffer. Rank 0 only, serial (MPI_COMM_SELF). */
static int file_verify(const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_mpio(fapl, MPI_COMM_SELF, MPI_INFO_NULL) < 0)
        return -1;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (file < 0)
        return -1;
    int rc = 0;
    int64_t step;
    if (h5attr_read_i64(file, "step", &step) != 0)
        rc = -1;
    H5G_info_t info;
    if (rc == 0 && H5Gget_info(file, &info) < 0)
        rc = -1;
    for (hsize_t i = 0; rc == 0 && i < info.nlinks; i++) {
        char name[256];
        if (H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                               H5P_DEFAULT) < 0) {
            rc = -1;
            break;
        }
        hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
        hid_t space = ds >= 0 ? H5Dget_space(ds) : -1;
        hid_t type = ds >= 0 ? H5Dget_type(ds) : -1;
        hsize_t dims[2];
        if (space < 0 || type < 0 || H5Sget_simple_extent_ndims(space) != 2 ||
            H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
            rc = -1;
        } else {
            size_t esize = H5Tget_size(type);
            hsize_t width = dims[1] < CKPT_CHUNK_MAX ? dims[1] : CKPT_CHUNK_MAX;
            unsigned char *buf = dt_malloc((size_t)(width ? width : 1) * esize);
            for (hsize_t r = 0; rc == 0 && r < dims[0]; r++)
                for (hsize_t c = 0; rc == 0 && c < dims[1]; c += width) {
                    hsize_t start[2] = {r, c};
                    hsize_t count[2] = {1, dims[1] - c < width ? dims[1] - c : width};
                    hid_t ms = H5Screate_simple(1, &count[1], NULL);
                    if (ms < 0 ||
                        H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count,
                                            NULL) < 0 ||
                        H5Dread(ds, type, ms, space, H5P_DEFAULT, buf) < 0)
                        rc = -1;
                    if (ms >= 0)
                        H5Sclose(ms);
                }
            free(buf);
        }
        if (type >= 0)
            H5Tclose(type);
        if (space >= 0)
            H5Sclose(space);
        if (ds >= 0)
            H5Dclose(ds);
    }
    if (H5Fclose(file) < 0)
        rc = -1;
    return rc;
}

/* Appends to msg the newest checkpoint older than `path` in the same
 * directory that verifies completely. Rank 0 only. */
static void previous_intact(const char *path, char *msg, size_t len)
{
    char dcopy[4096], bcopy[4096];
    snprintf(dcopy, sizeof dcopy, "%s", path);
    snprintf(bcopy, sizeof bcopy, "%s", path);
    const char *dir = dirname(dcopy);
    const char *base = basename(bcopy);
    char **names;
    size_t n = ckpt_list(dir, "", &names);
    const char *prev = NULL;
    for (size_t i = n; i-- > 0;) {
        if (ckpt_is_name(base, "") && strcmp(names[i], base) >= 0)
            continue;
        if (strcmp(names[i], base) == 0)
            continue;
        char cand[4096];
        ckpt_path_join(cand, sizeof cand, dir, names[i]);
        if (file_verify(cand) == 0) {
            prev = names[i];
            break;
        }
    }
    size_t used = strlen(msg);
    if (prev)
        snprintf(msg + used, len - used,
                 "; the previous checkpoint %s is intact (point %s/latest at it, or delete "
                 "%s, to resume from it)",
                 prev, dir, base);
    else
        snprintf(msg + used, len - used, "; no earlier intact checkpoint in %s", dir);
    ckpt_names_free(names, n);
}

/* Attribute checks, one message per mismatch kind. */
static int meta_check(const char *path, const dt_ckpt_meta *got, const dt_ckpt_meta *expect,
                      int64_t version, int elastic)
{
    if (version != CKPT_FORMAT_VERSION)
        return dt_err_set("checkpoint %s has format_version %lld, this dtrain reads %d", path,
                          (long long)version, CKPT_FORMAT_VERSION);
    if (got->nranks != expect->nranks && !elastic)
        return dt_err_set("checkpoint %s was written by %lld ranks, this run has %lld%s%s%s",
                          path, (long long)got->nranks, (long long)expect->nranks,
                          expect->mode[0] ? " (algorithm.mode = " : "", expect->mode,
                          expect->mode[0] ? " resumes only on the rank count that wrote its "
                                            "checkpoint)" : "");
    if (got->nparams != expect->nparams)
        return dt_err_set("checkpoint %s has %lld parameters per model, this run's model has "
                          "%lld",
                          path, (long long)got->nparams, (long long)expect->nparams);
    if (strcmp(got->model, expect->model) != 0)
        return dt_err_set("checkpoint %s is for model '%s', this run uses model '%s'", path,
                          got->model, expect->model);
    if (expect->mode[0] && strcmp(got->mode, expect->mode) != 0)
        return dt_err_set("checkpoint %s was written by algorithm.mode = %s, this run uses %s",
                          path, got->mode, expect->mode);
    return 0;
}

/* This rank's part of checkpoint_read; returns 0, or -1 or CKPT_DAMAGED
 * after dt_err_set.
 * Every rank makes the same sequence of collective HDF5 calls (open, close)
 * whatever fails in between. */
static int read_local(MPI_Comm comm, const char *path, const dt_ckpt_meta *expect,
                      dt_ckpt_meta *got, dt_ckpt_array *arrays, int narrays, void *blob,
                      size_t blob_len, int rank, int nranks, unsigned char **blobs)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(fapl);
    H5_CHECK(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL));
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5_CHECK(H5Pclose(fapl));
    if (file < 0) {
        if (access(path, R_OK) != 0)
            return dt_err_set("checkpoint %s cannot be read: %s", path, strerror(errno));
        dt_err_set("checkpoint %s cannot be opened as HDF5 (truncated or damaged file)", path);
        return CKPT_DAMAGED;
    }
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(dxpl);
    H5_CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT));

    int rc = 0;
    dt_ckpt_meta m;
    memset(&m, 0, sizeof m);
    int64_t version = -1;
    /* Every integer attribute is read in full width (h5attr_read_i64) and
     * range-checked before meta_check compares it and before anything
     * narrows it; a value out of range marks a damaged or foreign file. */
    char where[DT_CKPT_WHERE];
    snprintf(where, sizeof where, "checkpoint %s", path);
    const struct {
        const char *name;
        int64_t *v, lo, hi;
    } ints[] = {
        { "step", &m.step, 0, INT64_MAX },
        { "epoch", &m.epoch, 0, INT64_MAX },
        { "nranks", &m.nranks, 1, INT_MAX },
        { "nparams", &m.nparams, 1, INT64_MAX },
        { "format_version", &version, 1, INT_MAX },
    };
    for (size_t i = 0; rc == 0 && i < sizeof ints / sizeof ints[0]; i++) {
        char what[48];
        snprintf(what, sizeof what, "attribute '%s'", ints[i].name);
        if (h5attr_read_i64(file, ints[i].name, ints[i].v) != 0) {
            dt_err_prefix("%s (not a dtrain checkpoint, or damaged)", where);
            rc = CKPT_DAMAGED;
        } else if (check_int64(*ints[i].v, ints[i].lo, ints[i].hi, where, what) != 0) {
            rc = CKPT_DAMAGED;
        }
    }
    const char *missing = NULL;
    if (rc == 0 && h5attr_read_string(file, "model", m.model, sizeof m.model) != 0)
        missing = "model";
    else if (rc == 0 && h5attr_read_string(file, "mode", m.mode, sizeof m.mode) != 0)
        missing = "mode";
    if (missing) {
        dt_err_set("checkpoint %s: attribute '%s' is missing or unreadable (not a dtrain "
                   "checkpoint, or damaged)",
                   path, missing);
        rc = CKPT_DAMAGED;
    }
    if (rc == 0 && H5Aexists(file, "elastic_resumes") > 0) {
        if (h5attr_read_i64(file, "elastic_resumes", &m.elastic) != 0) {
            dt_err_prefix("%s (damaged)", where);
            rc = CKPT_DAMAGED;
        } else if (check_int64(m.elastic, 0, INT_MAX, where, "attribute 'elastic_resumes'") !=
                   0) {
            rc = CKPT_DAMAGED;
        }
    }
    if (rc == 0)
        rc = meta_check(path, &m, expect, version, blobs != NULL);
    const int file_ranks = (int)m.nranks; /* range-checked above */
    for (int a = 0; rc == 0 && a < narrays; a++)
        rc = array_read_elastic(file, dxpl, path, &arrays[a], rank, nranks, file_ranks);
    if (rc == 0 && file_ranks == nranks) {
        rc = dataset_read_row(file, dxpl, path, "state", H5T_NATIVE_UINT8, rank, nranks, blob,
                              blob_len);
    } else if (rc == 0) {
        *blobs = dt_malloc((size_t)file_ranks * (blob_len ? blob_len : 1));
        for (int r = 0; rc == 0 && r < file_ranks; r++)
            rc = dataset_read_row(file, dxpl, path, "state", H5T_NATIVE_UINT8, r, file_ranks,
                                  *blobs + (size_t)r * blob_len, blob_len);
    }
    H5_CHECK(H5Pclose(dxpl));
    if (H5Fclose(file) < 0 && rc == 0) {
        dt_err_set("checkpoint %s: closing the file failed (damaged file)", path);
        rc = CKPT_DAMAGED;
    }
    if (rc == 0 && got)
        *got = m;
    return rc;
}

int checkpoint_read(MPI_Comm comm, const char *path, const dt_ckpt_meta *expect,
                    dt_ckpt_meta *got, dt_ckpt_array *arrays, int narrays, void *blob,
                    size_t blob_len)
{
    return checkpoint_read_elastic(comm, path, expect, got, arrays, narrays, blob, blob_len,
                                   NULL);
}

int checkpoint_read_elastic(MPI_Comm comm, const char *path, const dt_ckpt_meta *expect,
                            dt_ckpt_meta *got, dt_ckpt_array *arrays, int narrays, void *blob,
                            size_t blob_len, unsigned char **blobs)
{
    if (blobs)
        *blobs = NULL;
    int rank, nranks;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &nranks));

    /* A damaged file is an expected input error here: HDF5's own stack dump
     * would only bury the message the caller prints. */
    H5E_auto2_t old_func;
    void *old_data;
    H5_CHECK(H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data));
    H5_CHECK(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));
    int rc = read_local(comm, path, expect, got, arrays, narrays, blob, blob_len, rank, nranks,
                        blobs);

    /* Agree: the lowest failing rank's message becomes everyone's. */
    int mine = rc != 0 ? rank : nranks, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
    if (first == nranks) {
        H5_CHECK(H5Eset_auto2(H5E_DEFAULT, old_func, old_data));
        return 0;
    }
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", dt_err_msg());
    int damaged = rc == CKPT_DAMAGED;
    MPI_CHECK(MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, comm));
    MPI_CHECK(MPI_Bcast(&damaged, 1, MPI_INT, first, comm));
    /* Only a damaged file gets the pointer to an older one; a mismatch would
     * be the same for every checkpoint of the run. */
    if (rank == 0 && damaged)
        previous_intact(path, msg, sizeof msg);
    MPI_CHECK(MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, 0, comm));
    H5_CHECK(H5Eset_auto2(H5E_DEFAULT, old_func, old_data));
    if (blobs) {
        free(*blobs);
        *blobs = NULL;
    }
    dt_err_set("%s", msg);
    return -1;
}
