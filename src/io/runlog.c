/* The run record: parallel HDF5, one column per rank, one row per append.
 *
 * Every dataset is chunked and extendible along rows, so an append is
 * "grow by one row (collective), each rank writes its own element
 * (collective transfer)". Rank-independent scalars are written by rank 0 while
 * the others take part with an empty selection, since the write call itself is
 * collective.
 *
 * A run resumed on another rank count (an elastic resume) keeps one record:
 * the (rows, ranks) datasets are extendible in columns too and hold one
 * column per rank up to the largest rank count seen (the `ranks`
 * attribute); rank 0 fills the columns of ranks absent from the current
 * segment as rows are padded elsewhere: step -1, NaN, counts 0. */
#include "io/runlog.h"

#include "core/error.h"
#include "core/parse.h"
#include "io/h5attr.h"

#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TRAIN_NFIELDS = 12, EVAL_NFIELDS = 5, EVAL_NSCALARS = 7 };

/* Field order here is the order of the members in dt_train_row/dt_eval_row;
 * is_int selects int64 vs float64 storage. */
typedef struct field_def {
    const char *name;
    int is_int;
} field_def;

static const field_def train_fields[TRAIN_NFIELDS] = {
    {"step", 1},         {"epoch", 0},     {"wall", 0},      {"loss", 0},
    {"accuracy", 0},     {"lr", 0},        {"compute_time", 0},
    {"comm_time", 0},    {"wait_time", 0}, {"images", 1},
    {"weight", 0},       {"bytes_sent", 1},
};
static const field_def eval_fields[EVAL_NFIELDS] = {
    {"step", 1}, {"epoch", 0}, {"wall", 0}, {"loss", 0}, {"accuracy", 0},
};
static const char *const eval_scalars[EVAL_NSCALARS] = {
    "loss_mean",      "loss_std",           "accuracy_mean",     "accuracy_std",
    "avg_model_loss", "avg_model_accuracy", "consensus_distance",
};

struct dt_runlog {
    MPI_Comm comm;
    int rank, nranks;
    int ncols;          /* columns of the 2-D datasets: >= nranks after an elastic resume */
    int file_cols;      /* reopen: the columns the record had */
    char *path;
    hid_t file, dxpl;
    hid_t train[TRAIN_NFIELDS];
    hid_t eval[EVAL_NFIELDS];
    hid_t scalars[EVAL_NSCALARS];
    hsize_t train_rows, eval_rows;
};

/* A value of either storage type, so one append loop serves every field. */
typedef union cell {
    int64_t i;
    double d;
} cell;

/* The entry of a rank absent from this segment of the run (a column beyond
 * the current rank count): step -1, NaN, counters 0. */
static cell pad_cell(const char *name, int is_int)
{
    if (!is_int)
        return (cell){ .d = NAN };
    return (cell){ .i = strcmp(name, "step") == 0 ? -1 : 0 };
}

/* Rows per chunk: small enough that a chunk of a wide (many-rank) dataset stays
 * under ~64 KiB, large enough that a long run does not create a chunk per row. */
static hsize_t chunk_rows_for(int nranks)
{
    hsize_t rows = 65536 / (8 * (hsize_t)nranks);
    if (rows < 1)
        rows = 1;
    if (rows > 64)
        rows = 64;
    return rows;
}

/* Attribute values must be identical on every rank in parallel HDF5, so rank
 * 0's text is what gets written. Returns a malloc'd copy (never NULL). */
static char *bcast_string(MPI_Comm comm, const char *s)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    long long len = 0;
    if (rank == 0)
        len = s ? (long long)strlen(s) : 0;
    MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, comm));
    char *out = dt_malloc((size_t)len + 1);
    if (rank == 0 && len > 0)
        memcpy(out, s, (size_t)len);
    /* MPI counts are int: long decks are sent in pieces. */
    for (long long off = 0; off < len; off += 1 << 30) {
        long long piece = len - off < (1 << 30) ? len - off : (1 << 30);
        MPI_CHECK(MPI_Bcast(out + off, (int)piece, MPI_CHAR, 0, comm));
    }
    out[len] = '\0';
    return out;
}

static hid_t dataset_create(hid_t group, const char *name, int is_int, int rank2,
                            int nranks)
{
    hsize_t dims[2] = {0, (hsize_t)nranks};
    /* columns extendible: a resume on more ranks adds theirs */
    hsize_t maxdims[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
    hsize_t chunk[2] = {chunk_rows_for(nranks), (hsize_t)nranks};
    int nd = rank2 ? 2 : 1;
    hid_t space = H5Screate_simple(nd, dims, maxdims);
    H5_CHECK(space);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5_CHECK(dcpl);
    H5_CHECK(H5Pset_chunk(dcpl, nd, chunk));
    hid_t ds = H5Dcreate2(group, name, is_int ? H5T_STD_I64LE : H5T_IEEE_F64LE, space,
                          H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5_CHECK(ds);
    H5_CHECK(H5Pclose(dcpl));
    H5_CHECK(H5Sclose(space));
    return ds;
}

static void layout_create(dt_runlog *log)
{
    hid_t train = H5Gcreate2(log->file, "train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(train);
    for (int f = 0; f < TRAIN_NFIELDS; f++)
        log->train[f] = dataset_create(train, train_fields[f].name, train_fields[f].is_int, 1,
                                       log->nranks);
    H5_CHECK(H5Gclose(train));

    hid_t eval = H5Gcreate2(log->file, "eval", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(eval);
    for (int f = 0; f < EVAL_NFIELDS; f++)
        log->eval[f] = dataset_create(eval, eval_fields[f].name, eval_fields[f].is_int, 1,
                                      log->nranks);
    for (int f = 0; f < EVAL_NSCALARS; f++)
        log->scalars[f] = dataset_create(eval, eval_scalars[f], 0, 0, log->nranks);
    H5_CHECK(H5Gclose(eval));
}

static void attrs_write(dt_runlog *log, const dt_provenance *prov, const char *deck_text)
{
    const char *names[] = {"deck",        "version",     "git_revision", "configure_flags",
                           "mpi_version", "hosts",       "start_time",   "mode",
                           "model",       "group"};
    const char *values[] = {deck_text,          prov->version,    prov->git_revision,
                            prov->configure_flags, prov->mpi_version, prov->hosts,
                            prov->start_time,   prov->mode,       prov->model,
                            prov->group ? prov->group : ""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *v = bcast_string(log->comm, values[i]);
        h5attr_write_string(log->file, names[i], v);
        free(v);
    }
    int64_t v[3] = { prov->nparams, prov->group_first_rank, prov->world_ranks };
    MPI_CHECK(MPI_Bcast(v, 3, MPI_INT64_T, 0, log->comm));
    h5attr_write_i64(log->file, "ranks", log->nranks);
    h5attr_write_i64(log->file, "nparams", v[0]);
    h5attr_write_i64(log->file, "group_first_rank", v[1]);
    h5attr_write_i64(log->file, "world_ranks", v[2] > 0 ? v[2] : log->nranks);
}

/* Opens group/name and checks it is a (rows, nranks) or (rows) dataset.
 * Returns the dataset and its row count, or -1 after dt_err_set. */
static hid_t dataset_open_checked(dt_runlog *log, const char *group, const char *name,
                                  int rank2, hsize_t *rows)
{
    char full[256];
    snprintf(full, sizeof full, "/%s/%s", group, name);
    htri_t exists = H5Lexists(log->file, group, H5P_DEFAULT);
    if (exists > 0)
        exists = H5Lexists(log->file, full, H5P_DEFAULT);
    if (exists <= 0) {
        dt_err_set("%s: dataset %s is missing; expected a dtrain run record", log->path, full);
        return -1;
    }
    hid_t ds = H5Dopen2(log->file, full, H5P_DEFAULT);
    H5_CHECK(ds);
    hid_t space = H5Dget_space(ds);
    H5_CHECK(space);
    hsize_t dims[2] = {0, 0}, maxdims[2] = {0, 0};
    int nd = H5Sget_simple_extent_ndims(space);
    H5_CHECK(nd);
    int ok = nd == (rank2 ? 2 : 1);
    if (ok)
        H5_CHECK(H5Sget_simple_extent_dims(space, dims, maxdims));
    H5_CHECK(H5Sclose(space));
    if (!ok || (rank2 && dims[1] != (hsize_t)log->file_cols)) {
        dt_err_set("%s: dataset %s has %d dimensions and %llu columns; expected %s with "
                   "%d columns (the record's `ranks` attribute)",
                   log->path, full, nd, rank2 ? (unsigned long long)dims[1] : 0ULL,
                   rank2 ? "(rows, ranks)" : "(rows)", log->file_cols);
        H5_CHECK(H5Dclose(ds));
        return -1;
    }
    if (rank2 && maxdims[1] != H5S_UNLIMITED && maxdims[1] < (hsize_t)log->ncols) {
        dt_err_set("%s: dataset %s holds at most %llu columns (a record written before "
                   "records could grow), this run has %d ranks; move the record aside to "
                   "resume on more ranks",
                   log->path, full, (unsigned long long)maxdims[1], log->nranks);
        H5_CHECK(H5Dclose(ds));
        return -1;
    }
    *rows = dims[0];
    return ds;
}

/* Number of leading rows whose step (column 0, rank 0's step) is <= step.
 * Every rank reads the same column, so all agree. */
static hsize_t rows_through_step(dt_runlog *log, hid_t step_ds, hsize_t rows, int64_t step)
{
    if (rows == 0)
        return 0;
    int64_t *col = dt_malloc(rows * sizeof *col);
    hid_t fspace = H5Dget_space(step_ds);
    H5_CHECK(fspace);
    hsize_t start[2] = {0, 0}, count[2] = {rows, 1};
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mspace = H5Screate_simple(1, &rows, NULL);
    H5_CHECK(mspace);
    H5_CHECK(H5Dread(step_ds, H5T_NATIVE_INT64, mspace, fspace, log->dxpl, col));
    H5_CHECK(H5Sclose(mspace));
    H5_CHECK(H5Sclose(fspace));
    hsize_t keep = 0;
    for (hsize_t r = 0; r < rows; r++)
        if (col[r] <= step)
            keep = r + 1;
    free(col);
    return keep;
}

/* A record widened for more ranks: rank 0 pads the new columns of its
 * first `rows` rows (collective: the others select nothing). */
static void widen_pad(dt_runlog *log, hid_t ds, hsize_t rows, cell pad, int is_int)
{
    if (log->ncols == log->file_cols || rows == 0)
        return;
    hsize_t w = (hsize_t)(log->ncols - log->file_cols), n = rows * w;
    cell *buf = dt_malloc((size_t)n * sizeof *buf);
    for (hsize_t i = 0; i < n; i++)
        buf[i] = pad;
    hid_t fspace = H5Dget_space(ds);
    H5_CHECK(fspace);
    hid_t mspace = H5Screate_simple(1, &n, NULL);
    H5_CHECK(mspace);
    if (log->rank == 0) {
        hsize_t start[2] = {0, (hsize_t)log->file_cols}, count[2] = {rows, w};
        H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    } else {
        H5_CHECK(H5Sselect_none(fspace));
        H5_CHECK(H5Sselect_none(mspace));
    }
    H5_CHECK(H5Dwrite(ds, is_int ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, mspace, fspace,
                      log->dxpl, buf));
    H5_CHECK(H5Sclose(mspace));
    H5_CHECK(H5Sclose(fspace));
    free(buf);
}

/* Reopens an existing record and drops the rows logged after the checkpoint.
 * Returns 0 or -1 after dt_err_set (the file is left untouched then). */
static int layout_reopen(dt_runlog *log, int64_t resume_step)
{
    for (int f = 0; f < TRAIN_NFIELDS; f++)
        log->train[f] = -1;
    for (int f = 0; f < EVAL_NFIELDS; f++)
        log->eval[f] = -1;
    for (int f = 0; f < EVAL_NSCALARS; f++)
        log->scalars[f] = -1;

    /* read in full width (a float or a wider value is refused, not converted),
     * then compared with this run's count */
    int64_t file_ranks = -1;
    if (h5attr_read_i64(log->file, "ranks", &file_ranks) != 0)
        return dt_err_prefix("%s: expected a dtrain run record", log->path);
    if (check_int64(file_ranks, 1, INT_MAX, log->path, "attribute 'ranks'") != 0)
        return -1;
    log->file_cols = (int)file_ranks;
    log->ncols = log->file_cols > log->nranks ? log->file_cols : log->nranks;

    hsize_t train_rows[TRAIN_NFIELDS], eval_rows[EVAL_NFIELDS], scalar_rows[EVAL_NSCALARS];
    int bad = 0;
    for (int f = 0; f < TRAIN_NFIELDS && !bad; f++)
        bad = (log->train[f] = dataset_open_checked(log, "train", train_fields[f].name, 1,
                                                    &train_rows[f])) < 0;
    for (int f = 0; f < EVAL_NFIELDS && !bad; f++)
        bad = (log->eval[f] = dataset_open_checked(log, "eval", eval_fields[f].name, 1,
                                                   &eval_rows[f])) < 0;
    for (int f = 0; f < EVAL_NSCALARS && !bad; f++)
        bad = (log->scalars[f] = dataset_open_checked(log, "eval", eval_scalars[f], 0,
                                                      &scalar_rows[f])) < 0;
    if (bad)
        return -1;

    /* A crash between two set_extent calls can leave fields of unequal length;
     * the shortest is what was completely written. */
    hsize_t nt = train_rows[0], ne = eval_rows[0];
    for (int f = 1; f < TRAIN_NFIELDS; f++)
        nt = train_rows[f] < nt ? train_rows[f] : nt;
    for (int f = 1; f < EVAL_NFIELDS; f++)
        ne = eval_rows[f] < ne ? eval_rows[f] : ne;
    for (int f = 0; f < EVAL_NSCALARS; f++)
        ne = scalar_rows[f] < ne ? scalar_rows[f] : ne;

    log->train_rows = rows_through_step(log, log->train[0], nt, resume_step);
    log->eval_rows = rows_through_step(log, log->eval[0], ne, resume_step);

    for (int f = 0; f < TRAIN_NFIELDS; f++) {
        hsize_t dims[2] = {log->train_rows, (hsize_t)log->ncols};
        H5_CHECK(H5Dset_extent(log->train[f], dims));
        widen_pad(log, log->train[f], log->train_rows,
                  pad_cell(train_fields[f].name, train_fields[f].is_int),
                  train_fields[f].is_int);
    }
    for (int f = 0; f < EVAL_NFIELDS; f++) {
        hsize_t dims[2] = {log->eval_rows, (hsize_t)log->ncols};
        H5_CHECK(H5Dset_extent(log->eval[f], dims));
        widen_pad(log, log->eval[f], log->eval_rows,
                  pad_cell(eval_fields[f].name, eval_fields[f].is_int), eval_fields[f].is_int);
    }
    for (int f = 0; f < EVAL_NSCALARS; f++)
        H5_CHECK(H5Dset_extent(log->scalars[f], &log->eval_rows));
    if (log->ncols != log->file_cols) { /* the columns now held */
        H5_CHECK(H5Adelete(log->file, "ranks"));
        h5attr_write_i64(log->file, "ranks", log->ncols);
    }
    H5_CHECK(H5Fflush(log->file, H5F_SCOPE_GLOBAL));
    return 0;
}

static void handles_close(dt_runlog *log)
{
    for (int f = 0; f < TRAIN_NFIELDS; f++)
        if (log->train[f] >= 0)
            H5_CHECK(H5Dclose(log->train[f]));
    for (int f = 0; f < EVAL_NFIELDS; f++)
        if (log->eval[f] >= 0)
            H5_CHECK(H5Dclose(log->eval[f]));
    for (int f = 0; f < EVAL_NSCALARS; f++)
        if (log->scalars[f] >= 0)
            H5_CHECK(H5Dclose(log->scalars[f]));
    H5_CHECK(H5Pclose(log->dxpl));
    H5_CHECK(H5Fclose(log->file));
}

dt_runlog *runlog_open(MPI_Comm comm, const char *path, const dt_provenance *prov,
                       const char *deck_text, int resume, int64_t resume_step)
{
    dt_runlog *log = dt_calloc(1, sizeof *log);
    log->comm = comm;
    MPI_CHECK(MPI_Comm_rank(comm, &log->rank));
    MPI_CHECK(MPI_Comm_size(comm, &log->nranks));
    log->ncols = log->file_cols = log->nranks;
    log->path = bcast_string(comm, path);
    MPI_CHECK(MPI_Bcast(&resume_step, 1, MPI_INT64_T, 0, comm));

    /* Resuming after the record was deleted starts a new one: the checkpoint,
     * not the record, is what a resume needs. */
    int exists = 0;
    if (resume && log->rank == 0)
        exists = access(log->path, F_OK) == 0;
    MPI_CHECK(MPI_Bcast(&exists, 1, MPI_INT, 0, comm));

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(fapl);
    H5_CHECK(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL));
    log->dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(log->dxpl);
    H5_CHECK(H5Pset_dxpl_mpio(log->dxpl, H5FD_MPIO_COLLECTIVE));

    if (resume && exists) {
        log->file = H5Fopen(log->path, H5F_ACC_RDWR, fapl);
        if (log->file < 0) {
            H5_CHECK(H5Pclose(fapl));
            H5_CHECK(H5Pclose(log->dxpl));
            dt_err_set("%s: cannot reopen the run record to resume (not an HDF5 file, or "
                       "not writable)",
                       log->path);
            free(log->path);
            free(log);
            return NULL;
        }
        H5_CHECK(H5Pclose(fapl));
        if (layout_reopen(log, resume_step) != 0) {
            handles_close(log);
            free(log->path);
            free(log);
            return NULL;
        }
        return log;
    }

    log->file = H5Fcreate(log->path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5_CHECK(log->file);
    H5_CHECK(H5Pclose(fapl));
    attrs_write(log, prov, deck_text);
    layout_create(log);
    H5_CHECK(H5Fflush(log->file, H5F_SCOPE_GLOBAL));
    return log;
}

/* Grows the 2-D ds to row0 + nrows rows and writes this rank's column of
 * the new rows (mine, nrows); rank 0 also writes `pad` into the columns of
 * the ranks absent from this segment (its selection, in row-major order:
 * its own cell, then the padding, row by row). */
static void append_column(dt_runlog *log, hid_t ds, hsize_t row0, hsize_t nrows, int is_int,
                          const cell *mine, cell pad)
{
    hsize_t dims[2] = {row0 + nrows, (hsize_t)log->ncols};
    H5_CHECK(H5Dset_extent(ds, dims));
    hid_t fspace = H5Dget_space(ds);
    H5_CHECK(fspace);
    hsize_t start[2] = {row0, (hsize_t)log->rank}, count[2] = {nrows, 1};
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    const hsize_t absent = (hsize_t)(log->ncols - log->nranks);
    hsize_t n = nrows;
    cell *buf = NULL;
    const cell *src = mine;
    if (log->rank == 0 && absent > 0) {
        hsize_t pstart[2] = {row0, (hsize_t)log->nranks}, pcount[2] = {nrows, absent};
        H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_OR, pstart, NULL, pcount, NULL));
        n = nrows * (1 + absent);
        buf = dt_malloc((size_t)n * sizeof *buf);
        for (hsize_t r = 0; r < nrows; r++) {
            buf[r * (1 + absent)] = mine[r];
            for (hsize_t c = 0; c < absent; c++)
                buf[r * (1 + absent) + 1 + c] = pad;
        }
        src = buf;
    }
    hid_t mspace = H5Screate_simple(1, &n, NULL);
    H5_CHECK(mspace);
    H5_CHECK(H5Dwrite(ds, is_int ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, mspace, fspace,
                      log->dxpl, src));
    H5_CHECK(H5Sclose(mspace));
    H5_CHECK(H5Sclose(fspace));
    free(buf);
}

/* Grows ds by one row and writes this rank's element of the new row
 * (or, for a 1-D scalar dataset, rank 0's value). */
static void append_cell(dt_runlog *log, hid_t ds, int rank2, hsize_t row, int is_int,
                        const cell *value, cell pad)
{
    if (rank2) {
        append_column(log, ds, row, 1, is_int, value, pad);
        return;
    }
    hsize_t dims[1] = {row + 1};
    H5_CHECK(H5Dset_extent(ds, dims));
    hid_t fspace = H5Dget_space(ds);
    H5_CHECK(fspace);
    hsize_t one = 1;
    hid_t mspace = H5Screate_simple(1, &one, NULL);
    H5_CHECK(mspace);
    if (log->rank == 0) {
        hsize_t start = row, count = 1;
        H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL));
    } else {
        H5_CHECK(H5Sselect_none(fspace));
        H5_CHECK(H5Sselect_none(mspace));
    }
    H5_CHECK(H5Dwrite(ds, is_int ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, mspace, fspace,
                      log->dxpl, value));
    H5_CHECK(H5Sclose(mspace));
    H5_CHECK(H5Sclose(fspace));
}

static void check_open(const dt_runlog *log, const char *what)
{
    if (!log)
        DT_FATAL("%s called on a run record that failed to open", what);
}

void runlog_append_train(dt_runlog *log, const dt_train_row *mine)
{
    check_open(log, "runlog_append_train");
    const cell v[TRAIN_NFIELDS] = {
        {.i = mine->step},      {.d = mine->epoch},          {.d = mine->wall},
        {.d = mine->loss},      {.d = mine->accuracy},       {.d = mine->lr},
        {.d = mine->compute_time}, {.d = mine->comm_time},   {.d = mine->wait_time},
        {.i = mine->images}, {.d = mine->weight}, {.i = mine->bytes_sent},
    };
    for (int f = 0; f < TRAIN_NFIELDS; f++)
        append_cell(log, log->train[f], 1, log->train_rows, train_fields[f].is_int, &v[f],
                    pad_cell(train_fields[f].name, train_fields[f].is_int));
    log->train_rows++;
    H5_CHECK(H5Fflush(log->file, H5F_SCOPE_GLOBAL));
}

void runlog_append_train_rows(dt_runlog *log, const dt_train_row *mine, int64_t nrows)
{
    check_open(log, "runlog_append_train_rows");
    if (nrows <= 0)
        return;
    cell *col = dt_malloc((size_t)nrows * sizeof *col);
    for (int f = 0; f < TRAIN_NFIELDS; f++) {
        for (int64_t r = 0; r < nrows; r++) {
            const dt_train_row *m = &mine[r];
            const cell v[TRAIN_NFIELDS] = {
                {.i = m->step},         {.d = m->epoch},        {.d = m->wall},
                {.d = m->loss},         {.d = m->accuracy},     {.d = m->lr},
                {.d = m->compute_time}, {.d = m->comm_time},    {.d = m->wait_time},
                {.i = m->images},       {.d = m->weight},       {.i = m->bytes_sent},
            };
            col[r] = v[f];
        }
        append_column(log, log->train[f], log->train_rows, (hsize_t)nrows,
                      train_fields[f].is_int, col,
                      pad_cell(train_fields[f].name, train_fields[f].is_int));
    }
    free(col);
    log->train_rows += (hsize_t)nrows;
    H5_CHECK(H5Fflush(log->file, H5F_SCOPE_GLOBAL));
}

/* Population mean and standard deviation over ranks (the spread of the
 * replicas, not an estimate of a larger population). Summed in rank order
 * from an allgather so every rank gets bit-identical values. */
static void mean_std(const double *v, int stride, int n, double *mean, double *std)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += v[(size_t)i * stride];
    *mean = s / n;
    double q = 0.0;
    for (int i = 0; i < n; i++) {
        double d = v[(size_t)i * stride] - *mean;
        q += d * d;
    }
    *std = sqrt(q / n);
}

void runlog_append_eval(dt_runlog *log, const dt_eval_row *mine, double avg_model_loss,
                        double avg_model_accuracy, double consensus_distance)
{
    check_open(log, "runlog_append_eval");
    double pair[2] = {mine->loss, mine->accuracy};
    double *all = dt_malloc(2 * (size_t)log->nranks * sizeof *all); // (ranks, 2)
    MPI_CHECK(MPI_Allgather(pair, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, log->comm));
    double lm, ls, am, as;
    mean_std(all, 2, log->nranks, &lm, &ls);
    mean_std(all + 1, 2, log->nranks, &am, &as);
    free(all);

    const cell v[EVAL_NFIELDS] = {
        {.i = mine->step}, {.d = mine->epoch}, {.d = mine->wall},
        {.d = mine->loss}, {.d = mine->accuracy},
    };
    for (int f = 0; f < EVAL_NFIELDS; f++)
        append_cell(log, log->eval[f], 1, log->eval_rows, eval_fields[f].is_int, &v[f],
                    pad_cell(eval_fields[f].name, eval_fields[f].is_int));
    const cell s[EVAL_NSCALARS] = {
        {.d = lm}, {.d = ls}, {.d = am}, {.d = as},
        {.d = avg_model_loss}, {.d = avg_model_accuracy}, {.d = consensus_distance},
    };
    for (int f = 0; f < EVAL_NSCALARS; f++)
        append_cell(log, log->scalars[f], 0, log->eval_rows, 0, &s[f], (cell){ .d = NAN });
    log->eval_rows++;
    H5_CHECK(H5Fflush(log->file, H5F_SCOPE_GLOBAL));
}

void runlog_write_series(dt_runlog *log, const char *group, int root, int64_t rows,
                         int ncols, const char *const *names, const double *const *cols)
{
    check_open(log, group);
    long long nrows = rows;
    MPI_CHECK(MPI_Bcast(&nrows, 1, MPI_LONG_LONG, root, log->comm));
    /* a resumed run rewrites the series as a whole */
    htri_t exists = H5Lexists(log->file, group, H5P_DEFAULT);
    H5_CHECK(exists);
    if (exists > 0)
        H5_CHECK(H5Ldelete(log->file, group, H5P_DEFAULT));
    hid_t g = H5Gcreate2(log->file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(g);
    hsize_t dims[1] = {(hsize_t)nrows};
    hid_t space = H5Screate_simple(1, dims, NULL);
    H5_CHECK(space);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(xfer);
    H5_CHECK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_INDEPENDENT));
    for (int c = 0; c < ncols; c++) {
        hid_t ds = H5Dcreate2(g, names[c], H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
        H5_CHECK(ds);
        if (log->rank == root && nrows > 0)
            H5_CHECK(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, xfer, cols[c]));
        H5_CHECK(H5Dclose(ds));
    }
    H5_CHECK(H5Pclose(xfer));
    H5_CHECK(H5Sclose(space));
    H5_CHECK(H5Gclose(g));
    H5_CHECK(H5Fflush(log->file, H5F_SCOPE_GLOBAL));
}

void runlog_note(dt_runlog *log, const char *name, const char *text)
{
    htri_t e = H5Aexists(log->file, name);
    H5_CHECK(e);
    if (e > 0)
        H5_CHECK(H5Adelete(log->file, name));
    h5attr_write_string(log->file, name, text);
}

void runlog_note_i64(dt_runlog *log, const char *name, int64_t v)
{
    htri_t e = H5Aexists(log->file, name);
    H5_CHECK(e);
    if (e > 0)
        H5_CHECK(H5Adelete(log->file, name));
    MPI_CHECK(MPI_Bcast(&v, 1, MPI_INT64_T, 0, log->comm));
    h5attr_write_i64(log->file, name, v);
}

void runlog_close(dt_runlog *log)
{
    if (!log)
        return;
    handles_close(log);
    free(log->path);
    free(log);
}
