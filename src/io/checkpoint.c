/* Checkpoints: one parallel-HDF5 file per checkpoint, made visible by rename.
 *
 * Write protocol (crash-safe at every point):
 *   1. all ranks write ckpt-<step>.h5.tmp collectively and close it (the
 *      close is preceded by a flush, i.e. MPI_File_sync);
 *   2. rank 0 renames it to ckpt-<step>.h5 and fsyncs the directory;
 *   3. rank 0 writes "latest.tmp", fsyncs it, renames it to "latest", fsyncs
 *      the directory;
 *   4. rank 0 deletes the oldest complete checkpoints beyond `keep` and any
 *      stale *.h5.tmp left by an earlier crash.
 * Before step 1 rank 0 checks the free space (statvfs) for about the size of
 * the checkpoint. A failure anywhere is agreed over the ranks: the .tmp file
 * is removed, `latest` is untouched, and every rank returns -1 with the
 * file, the failing step and errno's text (HDF5's stack with DTRAIN_DEBUG=1).
 * A reader trusts `latest`, and falls back to the newest ckpt-*.h5 if the
 * marker is missing; a .tmp file is never read (start-ups remove them).
 *
 * This file writes, prunes and finds checkpoints; io/checkpoint_read.c
 * reads them. */
#include "io/checkpoint.h"

#include "core/error.h"
#include "io/h5attr.h"
#include "core/watchdog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io/checkpoint_int.h"

/* ---- file-name helpers ---------------------------------------------------- */

int ckpt_is_name(const char *name, const char *suffix)
{
    if (strlen(name) != CKPT_NAME_LEN + strlen(suffix) || strncmp(name, "ckpt-", 5) != 0)
        return 0;
    for (int i = 5; i < 15; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    if (strncmp(name + 15, ".h5", 3) != 0)
        return 0;
    return strcmp(name + CKPT_NAME_LEN, suffix) == 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted (oldest first: the step has a fixed width) names in dir matching
 * ckpt-##########.h5<suffix>. Returns the count; *names is malloc'd. */
size_t ckpt_list(const char *dir, const char *suffix, char ***names)
{
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!ckpt_is_name(e->d_name, suffix))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *names = dt_realloc(*names, cap * sizeof **names);
        }
        (*names)[n++] = strdup(e->d_name);
        if (!(*names)[n - 1])
            DT_FATAL("out of memory listing %s", dir);
    }
    closedir(d);
    if (n > 1)
        qsort(*names, n, sizeof **names, name_cmp);
    return n;
}

void ckpt_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

void ckpt_path_join(char *out, size_t len, const char *dir, const char *name)
{
    int w = snprintf(out, len, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= len)
        DT_FATAL("checkpoint path %s/%s is longer than %zu bytes", dir, name, len - 1);
}

/* mkdir -p; returns 0 or an errno value. */
static int mkdir_p(const char *dir)
{
    char buf[4096];
    if (strlen(dir) >= sizeof buf)
        return ENAMETOOLONG;
    strcpy(buf, dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return errno;
    struct stat st;
    if (stat(buf, &st) != 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* Returns 0 or an errno value. */
static int fsync_path(const char *path, int is_dir)
{
    int fd = open(path, is_dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0)
        return errno;
    /* Some filesystems refuse fsync on a directory; the rename is then as
     * durable as that filesystem makes it. */
    int e = 0;
    if (fsync(fd) != 0 && !(is_dir && (errno == EINVAL || errno == EBADF)))
        e = errno;
    close(fd);
    return e;
}

/* ---- write ---------------------------------------------------------------- */

/* The first failure of a checkpoint write on this rank: the operating
 * system's errno (EIO when the library left none) and the step that failed.
 * Later calls are still made, so every rank makes the same sequence of
 * collective HDF5 calls. */
typedef struct wfail {
    int err;
    char what[160];
} wfail;

static void wfail_note(wfail *f, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wfail_note(wfail *f, int err, const char *fmt, ...)
{
    if (f->err)
        return;
    f->err = err ? err : EIO;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->what, sizeof f->what, fmt, ap);
    va_end(ap);
}

/* call < 0: note its errno (read before anything else can change it). */
#define WCHK(f, call, ...)                                                     \
    do {                                                                       \
        errno = 0;                                                             \
        if ((long long)(call) < 0)                                             \
            wfail_note((f), errno, __VA_ARGS__);                               \
    } while (0)

/* Columns per collective write: HDF5 holds every chunk a filtered parallel
 * write selects in memory at once, which for a whole row of a large model
 * raised the process's peak (by 37 MB for the GPT "small" configuration), so
 * a row goes in slices of CKPT_SLICE_CHUNKS chunks (4 MiB). */
#define CKPT_SLICE_CHUNKS 16

/* (nranks, n) dataset of `type`, chunked by rows, Fletcher32; this rank
 * writes row `rank` collectively (filtered parallel writes must be
 * collective: every rank makes the same calls, as n is the same on all). */
static void dataset_write_rows(hid_t file, hid_t dxpl, const char *name, hid_t ftype,
                               hid_t mtype, int rank, int nranks, const void *data, size_t n,
                               wfail *f)
{
    hsize_t dims[2] = {(hsize_t)nranks, (hsize_t)n};
    /* A zero-width dataset must still be chunked (the filter needs it), and a
     * chunk may not exceed a fixed dimension. */
    hsize_t maxdims[2] = {(hsize_t)nranks, n ? (hsize_t)n : H5S_UNLIMITED};
    hsize_t width = n ? (n < CKPT_CHUNK_MAX ? (hsize_t)n : CKPT_CHUNK_MAX) : 1;
    hsize_t chunk[2] = {1, width};
    hid_t space = H5Screate_simple(2, dims, maxdims);
    H5_CHECK(space);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5_CHECK(dcpl);
    H5_CHECK(H5Pset_chunk(dcpl, 2, chunk));
    H5_CHECK(H5Pset_fletcher32(dcpl));
    hid_t ds;
    WCHK(f, ds = H5Dcreate2(file, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
         "creating dataset '%s'", name);

    hsize_t mcount = n ? (hsize_t)n : 1;
    hid_t mspace = H5Screate_simple(1, &mcount, NULL);
    H5_CHECK(mspace);
    if (!n) {
        H5_CHECK(H5Sselect_none(space));
        H5_CHECK(H5Sselect_none(mspace));
        if (ds >= 0)
            WCHK(f, H5Dwrite(ds, mtype, mspace, space, dxpl, data), "writing dataset '%s'",
                 name);
    }
    const hsize_t slice = CKPT_SLICE_CHUNKS * width;
    for (hsize_t off = 0; ds >= 0 && off < n; off += slice) {
        hsize_t len = n - off < slice ? n - off : slice;
        hsize_t start[2] = {(hsize_t)rank, off}, count[2] = {1, len};
        H5_CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
        H5_CHECK(H5Sselect_hyperslab(mspace, H5S_SELECT_SET, &off, NULL, &len, NULL));
        WCHK(f, H5Dwrite(ds, mtype, mspace, space, dxpl, data), "writing dataset '%s'", name);
    }
    if (ds >= 0)
        WCHK(f, H5Dclose(ds), "closing dataset '%s'", name);
    H5_CHECK(H5Sclose(mspace));
    H5_CHECK(H5Pclose(dcpl));
    H5_CHECK(H5Sclose(space));
}

/* Every rank must pass the same n (the dataset is rectangular). */
static void check_same(MPI_Comm comm, const char *what, size_t n)
{
    unsigned long long v[2] = {n, ~(unsigned long long)n}, r[2];
    MPI_CHECK(MPI_Allreduce(v, r, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm));
    if (r[0] != n || ~r[1] != n)
        DT_FATAL("checkpoint_write: %s has %zu elements on this rank but not on every rank; "
                 "checkpoint arrays must have the same length everywhere",
                 what, n);
}

static void dir_prune(const char *dir, int keep)
{
    char path[4096];
    char **names;
    size_t n = ckpt_list(dir, "", &names);
    size_t k = keep < 1 ? 1 : (size_t)keep;
    for (size_t i = 0; i + k < n; i++) {
        ckpt_path_join(path, sizeof path, dir, names[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            DT_FATAL("cannot delete old checkpoint %s: %s", path, strerror(errno));
    }
    ckpt_names_free(names, n);
    /* Partial checkpoints of a crashed run: never readable, only clutter. */
    n = ckpt_list(dir, ".tmp", &names);
    for (size_t i = 0; i < n; i++) {
        ckpt_path_join(path, sizeof path, dir, names[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            DT_FATAL("cannot delete stale partial checkpoint %s: %s", path, strerror(errno));
    }
    ckpt_names_free(names, n);
}

/* Steps 2-4 of the protocol, on rank 0 only. On failure (noted in *fl)
 * the new file is removed again and `latest` is left as it was. */
static void publish(const char *dir, const char *name, int keep, wfail *fl)
{
    char tmp[4096], final[4096], marker[4096], marker_tmp[4096], tmpname[80];
    snprintf(tmpname, sizeof tmpname, "%s.tmp", name);
    ckpt_path_join(tmp, sizeof tmp, dir, tmpname);
    ckpt_path_join(final, sizeof final, dir, name);
    ckpt_path_join(marker, sizeof marker, dir, "latest");
    ckpt_path_join(marker_tmp, sizeof marker_tmp, dir, "latest.tmp");

    int e = fsync_path(tmp, 0);
    if (e) {
        wfail_note(fl, e, "syncing %s", tmp);
        return;
    }
    if (rename(tmp, final) != 0) {
        wfail_note(fl, errno, "renaming %s to %s", tmp, final);
        return;
    }
    fsync_path(dir, 1);

    FILE *f = fopen(marker_tmp, "w");
    if (!f) {
        wfail_note(fl, errno, "creating %s", marker_tmp);
    } else {
        errno = 0;
        if (fprintf(f, "%s\n", name) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0)
            wfail_note(fl, errno, "writing %s", marker_tmp);
        errno = 0;
        if (fclose(f) != 0)
            wfail_note(fl, errno, "writing %s", marker_tmp);
        if (!fl->err && rename(marker_tmp, marker) != 0)
            wfail_note(fl, errno, "renaming %s to %s", marker_tmp, marker);
    }
    if (fl->err) {
        /* `latest` still names the previous checkpoint: the new one goes */
        unlink(marker_tmp);
        unlink(final);
        return;
    }
    fsync_path(dir, 1);
    dir_prune(dir, keep);
}

/* Where free space ran out, HDF5 and MPI-IO do not always leave errno set:
 * a full filesystem is still worth naming. */
static int reason_or_space(int err, const char *dir)
{
    struct statvfs sv;
    if ((err == 0 || err == EIO) && statvfs(dir, &sv) == 0 && sv.f_bavail == 0)
        return ENOSPC;
    return err ? err : EIO;
}

/* Collective: rank 0 creates dir; every rank must then see it. */
static void dir_ready(MPI_Comm comm, int rank, const char *dir)
{
    if (rank == 0) {
        int e = mkdir_p(dir);
        if (e != 0)
            DT_FATAL("cannot create checkpoint directory %s: %s", dir, strerror(e));
    }
    MPI_CHECK(MPI_Barrier(comm));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        DT_FATAL("checkpoint directory %s is not visible on this rank (%s); output_dir must "
                 "be on a filesystem shared by all ranks",
                 dir, strerror(errno ? errno : ENOTDIR));
}

/* Collective: a full filesystem is found before HDF5 is involved (a
 * collective write that fails inside HDF5 can leave the file half-open in
 * the library, which then crashes closing it at MPI_Finalize); the verdict
 * is rank 0's statvfs, the same on every rank. */
static void space_check(MPI_Comm comm, int rank, int nranks, const char *dir,
                        const dt_ckpt_array *arrays, int narrays, size_t blob_len, wfail *f)
{
    unsigned long long need = 0, avail = ~0ULL;
    for (int a = 0; a < narrays; a++)
        need += (unsigned long long)arrays[a].n * sizeof(float);
    need = (need + blob_len) * (unsigned long long)nranks;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &need, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm));
    need += need / 64 + 65536; /* chunk index, checksums, attributes */
    if (rank == 0) {
        struct statvfs sv;
        if (statvfs(dir, &sv) == 0)
            avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
    }
    MPI_CHECK(MPI_Bcast(&avail, 1, MPI_UNSIGNED_LONG_LONG, 0, comm));
    if (avail < need)
        wfail_note(f, ENOSPC, "checking free space (%llu bytes free, about %llu needed)",
                   avail, need);
}

/* Collective: the attributes, every rank's row of each array and of the
 * state blob into the open file, flushed and closed. */
static void file_fill(MPI_Comm comm, hid_t file, int rank, int nranks, const dt_ckpt_meta *m,
                      const dt_ckpt_array *arrays, int narrays, const void *blob,
                      size_t blob_len, wfail *f)
{
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(dxpl);
    H5_CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));

    h5attr_write_i64(file, "step", m->step);
    h5attr_write_i64(file, "epoch", m->epoch);
    h5attr_write_i64(file, "nranks", nranks);
    h5attr_write_i64(file, "nparams", m->nparams);
    h5attr_write_string(file, "model", m->model);
    h5attr_write_string(file, "mode", m->mode);
    h5attr_write_i64(file, "format_version", CKPT_FORMAT_VERSION);
    if (m->elastic > 0) /* absent: a history on one rank count */
        h5attr_write_i64(file, "elastic_resumes", m->elastic);

    for (int a = 0; a < narrays; a++) {
        check_same(comm, arrays[a].name, arrays[a].n);
        dataset_write_rows(file, dxpl, arrays[a].name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                           rank, nranks, arrays[a].data, arrays[a].n, f); // (nranks, n)
        watchdog_beat(-1);
    }
    check_same(comm, "the state blob", blob_len);
    dataset_write_rows(file, dxpl, "state", H5T_STD_U8LE, H5T_NATIVE_UINT8, rank, nranks,
                       blob, blob_len, f); // (nranks, blob_len)

    H5_CHECK(H5Pclose(dxpl));
    /* H5Fflush on an MPI-IO file is MPI_File_sync: the data is on disk
     * on every rank before rank 0 makes the file visible. */
    WCHK(f, H5Fflush(file, H5F_SCOPE_GLOBAL), "flushing the file");
    WCHK(f, H5Fclose(file), "closing the file");
    /* a failed close may leave the file open: once more, so the library
     * does not try again at MPI_Finalize */
    if (f->err && H5Iis_valid(file) > 0)
        H5Fclose(file);
}

/* Collective, after a failed write: the lowest failing rank's reason is
 * everyone's message (a rank's own reason where it failed itself). */
static int failure_agree(MPI_Comm comm, int first, const wfail *f, const char *tmp)
{
    int own = f->err != 0;
    wfail fr = *f;
    MPI_CHECK(MPI_Bcast(&fr, (int)sizeof fr, MPI_BYTE, first, comm));
    fr.what[sizeof fr.what - 1] = '\0';
    if (own)
        fr = *f;
    char where[32] = "";
    if (!own)
        snprintf(where, sizeof where, " (on rank %d)", first);
    return dt_err_set("cannot write checkpoint %s: %s failed%s: %s; no partial file is left",
                      tmp, fr.what, where, strerror(fr.err));
}

int checkpoint_write(MPI_Comm comm, const char *dir, const dt_ckpt_meta *meta,
                     const dt_ckpt_array *arrays, int narrays, const void *blob,
                     size_t blob_len, int keep, char *written, size_t written_len)
{
    int rank, nranks;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &nranks));
    dir_ready(comm, rank, dir);

    /* Attributes are collective metadata: every rank must write the same
     * values, so rank 0's are used (AD-PSGD ranks may disagree on the step). */
    dt_ckpt_meta m = *meta;
    MPI_CHECK(MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, 0, comm));
    m.model[sizeof m.model - 1] = '\0';
    m.mode[sizeof m.mode - 1] = '\0';
    if (m.step < 0 || m.step > 9999999999LL)
        DT_FATAL("checkpoint step %lld does not fit the 10-digit file name", (long long)m.step);

    char name[64], tmp[4096], final[4096];
    snprintf(name, sizeof name, "ckpt-%010lld.h5", (long long)m.step);
    char tmpname[80];
    snprintf(tmpname, sizeof tmpname, "%s.tmp", name);
    ckpt_path_join(tmp, sizeof tmp, dir, tmpname);
    ckpt_path_join(final, sizeof final, dir, name);

    /* A full disk or an I/O error is reported as one line by the caller;
     * HDF5's own stack only with DTRAIN_DEBUG=1. */
    H5E_auto2_t old_func;
    void *old_data;
    H5_CHECK(H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data));
    const char *debug = getenv("DTRAIN_DEBUG");
    if (!(debug && strcmp(debug, "1") == 0))
        H5_CHECK(H5Eset_auto2(H5E_DEFAULT, NULL, NULL));

    wfail f = { 0, "" };
    space_check(comm, rank, nranks, dir, arrays, narrays, blob_len, &f);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(fapl);
    H5_CHECK(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL));
    hid_t file = -1;
    if (!f.err) /* the same verdict on every rank: rank 0's statvfs */
        WCHK(&f, file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "creating the file");
    H5_CHECK(H5Pclose(fapl));
    /* H5Fcreate is collective: it fails on every rank or on none */
    if (file >= 0)
        file_fill(comm, file, rank, nranks, &m, arrays, narrays, blob, blob_len, &f);
    if (f.err)
        f.err = reason_or_space(f.err, dir);
    MPI_CHECK(MPI_Barrier(comm));

    /* every rank knows whether any failed; then rank 0 publishes */
    int any = f.err != 0, all;
    MPI_CHECK(MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, comm));
    if (rank == 0) {
        if (all)
            unlink(tmp); /* the partial file would only hold the space */
        else
            publish(dir, name, keep, &f);
    }
    H5_CHECK(H5Eset_auto2(H5E_DEFAULT, old_func, old_data));

    int mine = f.err ? rank : nranks, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
    if (first == nranks) {
        if (written)
            snprintf(written, written_len, "%s", final);
        return 0;
    }
    return failure_agree(comm, first, &f, tmp);
}

void checkpoint_clean_partial(const char *dir)
{
    char path[4096];
    char **names;
    size_t n = ckpt_list(dir, ".tmp", &names);
    for (size_t i = 0; i < n; i++) {
        ckpt_path_join(path, sizeof path, dir, names[i]);
        if (unlink(path) == 0) {
            printf("removed %s, a partial checkpoint left by an earlier run\n", path);
            fflush(stdout);
        }
    }
    ckpt_names_free(names, n);
    ckpt_path_join(path, sizeof path, dir, "latest.tmp");
    unlink(path);
}

/* ---- find ----------------------------------------------------------------- */

static char find_note[4400];

const char *checkpoint_find_note(void)
{
    return find_note;
}

int checkpoint_find_latest(MPI_Comm comm, const char *dir, char *path, size_t len)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    char found[4096] = "";
    find_note[0] = '\0';
    if (rank == 0) {
        char marker[4096], name[256] = "", cand[4096];
        ckpt_path_join(marker, sizeof marker, dir, "latest");
        FILE *f = fopen(marker, "r");
        if (f) {
            if (!fgets(name, sizeof name, f))
                name[0] = '\0';
            fclose(f);
            name[strcspn(name, "\r\n")] = '\0';
        }
        if (ckpt_is_name(name, "")) {
            ckpt_path_join(cand, sizeof cand, dir, name);
            if (access(cand, R_OK) == 0)
                snprintf(found, sizeof found, "%s", cand);
            else
                snprintf(find_note, sizeof find_note, "%s names %s, which cannot be read (%s)",
                         marker, name, strerror(errno));
        } else if (f) {
            snprintf(find_note, sizeof find_note, "%s does not name a checkpoint file", marker);
        }
        if (!found[0]) {
            /* No usable marker (crash before it was written, or deleted by
             * hand): the newest complete file is the best guess. */
            char **names;
            size_t n = ckpt_list(dir, "", &names);
            if (n > 0)
                ckpt_path_join(found, sizeof found, dir, names[n - 1]);
            ckpt_names_free(names, n);
        }
    }
    MPI_CHECK(MPI_Bcast(found, (int)sizeof found, MPI_CHAR, 0, comm));
    MPI_CHECK(MPI_Bcast(find_note, (int)sizeof find_note, MPI_CHAR, 0, comm));
    if (!found[0])
        return 0;
    if (strlen(found) >= len)
        DT_FATAL("checkpoint path %s does not fit the caller's %zu-byte buffer", found, len);
    memcpy(path, found, strlen(found) + 1);
    return 1;
}

int checkpoint_find_older(MPI_Comm comm, const char *dir, const char *than, char *path,
                          size_t len)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    char found[4096] = "";
    if (rank == 0) {
        const char *base = strrchr(than, '/');
        base = base ? base + 1 : than;
        char **names;
        size_t n = ckpt_list(dir, "", &names);
        for (size_t i = n; i-- > 0;)
            if (strcmp(names[i], base) < 0) {
                ckpt_path_join(found, sizeof found, dir, names[i]);
                break;
            }
        ckpt_names_free(names, n);
    }
    MPI_CHECK(MPI_Bcast(found, (int)sizeof found, MPI_CHAR, 0, comm));
    if (!found[0])
        return 0;
    if (strlen(found) >= len)
        DT_FATAL("checkpoint path %s does not fit the caller's %zu-byte buffer", found, len);
    memmove(path, found, strlen(found) + 1);
    return 1;
}
