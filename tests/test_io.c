/* Run record and checkpoints, under mpiexec -n 1 or -n 2 (any n works).
 *
 * Run record: every value each rank appended is read back (serial HDF5 on
 * rank 0) at its (row, rank) position; the eval mean/std equal the closed
 * forms; a resume drops exactly the rows after the checkpoint step.
 * Checkpoints: a write/find/read round trip is bit-exact per rank, `keep`
 * prunes the oldest, the marker names the newest, no .tmp is left; a wrong
 * rank count, model size or model name and a damaged file give -1 on every
 * rank with the message the user needs. */
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/runlog.h"
#include "tap.h"

#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, nranks;
static char dir[256];

/* ---- values each rank logs: distinct per (row, rank) ---------------------- */

static dt_train_row train_value(int row, int r)
{
    dt_train_row t = {
        .step = 10 * (row + 1),
        .epoch = row / 2.0 + 0.25, /* fractional epochs are stored as float64 */
        .wall = 1.25 * (row + 1) + 0.001 * r,
        .loss = 2.5 - 0.5 * row + 0.125 * r,
        .accuracy = 0.1 * row + 0.01 * r,
        .lr = 0.1 / (row + 1),
        .compute_time = 0.75 + r,
        .comm_time = 0.25 * (row + 1),
        .wait_time = 0.0625 * r,
        .images = 1000 * (row + 1) + r,
        .weight = 1.0 / (r + 1) + 0.5 * row,
        .bytes_sent = 4000000000LL * (row + 1) + r, /* beyond 32 bits */
    };
    return t;
}

/* Eval rows at steps 15 and 30. */
static dt_eval_row eval_value(int row, int r)
{
    dt_eval_row e = {
        .step = 15 * (row + 1),
        .epoch = row,
        .wall = 2.0 * (row + 1) + 0.002 * r,
        .loss = 1.0 + 0.5 * r + row,
        .accuracy = 0.5 + 0.125 * r * r - 0.25 * row,
    };
    return e;
}

static double read_scalar_d(hid_t f, const char *ds_name, hsize_t row)
{
    double v = NAN;
    hid_t ds = H5Dopen2(f, ds_name, H5P_DEFAULT);
    if (ds < 0)
        return v;
    hid_t fs = H5Dget_space(ds);
    hsize_t one = 1;
    hid_t ms = H5Screate_simple(1, &one, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &row, NULL, &one, NULL);
    if (H5Dread(ds, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, &v) < 0)
        v = NAN;
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    return v;
}

/* Whole (rows, ranks) dataset as doubles; *rows and *cols get its shape. */
static double *read_table(hid_t f, const char *name, hsize_t *rows, hsize_t *cols)
{
    *rows = *cols = 0;
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return NULL;
    hid_t fs = H5Dget_space(ds);
    hsize_t dims[2] = {0, 1};
    int nd = H5Sget_simple_extent_dims(fs, dims, NULL);
    *rows = dims[0];
    *cols = nd == 2 ? dims[1] : 1;
    double *v = dt_malloc((size_t)(*rows * *cols + 1) * sizeof *v);
    if (*rows * *cols > 0 && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        *rows = *cols = 0;
    H5Sclose(fs);
    H5Dclose(ds);
    return v;
}

static int attr_string_is(hid_t f, const char *name, const char *want)
{
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    if (a < 0)
        return 0;
    /* The file's own type: a variable-length UTF-8 string is what dtrain writes. */
    hid_t t = H5Aget_type(a);
    if (H5Tis_variable_str(t) <= 0 || H5Tget_cset(t) != H5T_CSET_UTF8) {
        H5Tclose(t);
        H5Aclose(a);
        return 0;
    }
    char *s = NULL;
    int ok = H5Aread(a, t, &s) >= 0 && s && strcmp(s, want) == 0;
    if (s)
        H5free_memory(s);
    H5Tclose(t);
    H5Aclose(a);
    return ok;
}

static int64_t attr_i64(hid_t f, const char *name)
{
    int64_t v = -999;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    if (a < 0)
        return v;
    if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0)
        v = -999;
    H5Aclose(a);
    return v;
}

/* ---- run record ------------------------------------------------------------ */

static const char *train_names[] = {"step", "epoch", "wall", "loss", "accuracy", "lr",
                                    "compute_time", "comm_time", "wait_time", "images",
                                    "weight",       "bytes_sent"};

static double train_field(const dt_train_row *t, int f)
{
    switch (f) {
    case 0: return (double)t->step;
    case 1: return (double)t->epoch;
    case 2: return t->wall;
    case 3: return t->loss;
    case 4: return t->accuracy;
    case 5: return t->lr;
    case 6: return t->compute_time;
    case 7: return t->comm_time;
    case 8: return t->wait_time;
    case 9: return (double)t->images;
    case 10: return t->weight;
    default: return (double)t->bytes_sent;
    }
}

/* Checks rows [0, nrows) of /train against train_value, except that row
 * `alt_row` (if >= 0) holds train_value(alt_src) instead. */
static void check_train(hid_t f, int nrows, int alt_row, int alt_src)
{
    for (int fi = 0; fi < 12; fi++) {
        char name[64];
        snprintf(name, sizeof name, "/train/%s", train_names[fi]);
        hsize_t rows, cols;
        double *v = read_table(f, name, &rows, &cols);
        CHECK(rows == (hsize_t)nrows && cols == (hsize_t)nranks,
              "%s has shape (%llu, %llu), expected (%d, %d)", name, (unsigned long long)rows,
              (unsigned long long)cols, nrows, nranks);
        int bad = 0;
        for (hsize_t r = 0; r < rows && rows == (hsize_t)nrows; r++)
            for (int k = 0; k < nranks; k++) {
                int src = (int)r == alt_row ? alt_src : (int)r;
                dt_train_row t = train_value(src, k);
                bad += v[r * cols + k] != train_field(&t, fi);
            }
        CHECK(bad == 0, "%s: every (row, rank) value as appended (%d wrong)", name, bad);
        free(v);
    }
}

static void test_runlog(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/run.h5", dir);
    char deck[] = "[run]\noutput_dir = out\n[algorithm]\nmode = sgp\n";
    dt_provenance prov = {
        .version = "0.1-test", .git_revision = "abc123", .configure_flags = "--with-x",
        .mpi_version = "MPICH 4", .hosts = "h0,h1", .start_time = "2024-01-02T03:04:05Z",
        .mode = "sgp", .model = "mlp", .nparams = 79510,
    };
    dt_runlog *log = runlog_open(MPI_COMM_WORLD, path, &prov, deck, 0, 0);
    CHECK(log != NULL, "runlog_open creates %s", path);
    for (int r = 0; r < 3; r++) {
        dt_train_row t = train_value(r, rank);
        runlog_append_train(log, &t);
    }
    for (int r = 0; r < 2; r++) {
        dt_eval_row e = eval_value(r, rank);
        runlog_append_eval(log, &e, 0.5 + r, 0.875 - r, 0.03125 * (r + 1));
    }
    runlog_close(log);
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        CHECK(f >= 0, "run record reopens with serial HDF5");
        CHECK(attr_string_is(f, "deck", deck), "attribute deck holds the deck text");
        CHECK(attr_string_is(f, "version", "0.1-test") && attr_string_is(f, "git_revision", "abc123") &&
                  attr_string_is(f, "configure_flags", "--with-x") &&
                  attr_string_is(f, "mpi_version", "MPICH 4") && attr_string_is(f, "hosts", "h0,h1") &&
                  attr_string_is(f, "start_time", "2024-01-02T03:04:05Z") &&
                  attr_string_is(f, "mode", "sgp") && attr_string_is(f, "model", "mlp"),
              "provenance string attributes as given");
        CHECK(attr_i64(f, "ranks") == nranks, "attribute ranks = %d", nranks);
        CHECK(attr_i64(f, "nparams") == 79510, "attribute nparams = 79510");
        check_train(f, 3, -1, 0);

        const char *en[] = {"step", "epoch", "wall", "loss", "accuracy"};
        for (int fi = 0; fi < 5; fi++) {
            char name[64];
            snprintf(name, sizeof name, "/eval/%s", en[fi]);
            hsize_t rows, cols;
            double *v = read_table(f, name, &rows, &cols);
            int bad = rows != 2 || cols != (hsize_t)nranks;
            for (hsize_t r = 0; r < rows && !bad; r++)
                for (int k = 0; k < nranks; k++) {
                    dt_eval_row e = eval_value((int)r, k);
                    double want[] = {(double)e.step, (double)e.epoch, e.wall, e.loss, e.accuracy};
                    bad += v[r * cols + k] != want[fi];
                }
            CHECK(bad == 0, "%s: shape (2, %d) and every value as appended", name, nranks);
            free(v);
        }
        for (int r = 0; r < 2; r++) {
            /* Closed forms over k = 0..n-1 of loss = 1 + 0.5k + r and
             * accuracy = 0.5 + 0.125k^2 - 0.25r (population moments). */
            double n = nranks, s1 = n * (n - 1) / 2, s2 = (n - 1) * n * (2 * n - 1) / 6;
            double s4 = (n - 1) * n * (2 * n - 1) * (3 * (n - 1) * (n - 1) + 3 * (n - 1) - 1) / 30;
            double lm = 1 + r + 0.5 * s1 / n, ls = 0.5 * sqrt(s2 / n - (s1 / n) * (s1 / n));
            double am = 0.5 - 0.25 * r + 0.125 * s2 / n;
            double as = 0.125 * sqrt(s4 / n - (s2 / n) * (s2 / n));
            CHECK_CLOSE(read_scalar_d(f, "/eval/loss_mean", r), lm, 1e-12, 1e-12, "loss_mean row %d", r);
            CHECK_CLOSE(read_scalar_d(f, "/eval/loss_std", r), ls, 1e-12, 1e-12, "loss_std row %d", r);
            CHECK_CLOSE(read_scalar_d(f, "/eval/accuracy_mean", r), am, 1e-12, 1e-12,
                        "accuracy_mean row %d", r);
            CHECK_CLOSE(read_scalar_d(f, "/eval/accuracy_std", r), as, 1e-12, 1e-12,
                        "accuracy_std row %d", r);
            CHECK(read_scalar_d(f, "/eval/avg_model_loss", r) == 0.5 + r &&
                      read_scalar_d(f, "/eval/avg_model_accuracy", r) == 0.875 - r &&
                      read_scalar_d(f, "/eval/consensus_distance", r) == 0.03125 * (r + 1),
                  "global eval scalars of row %d as given", r);
        }
        H5Fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Resume from a checkpoint at step 20: train rows 10, 20 stay (30 goes),
     * eval row 15 stays (30 goes); the next append continues after them. */
    log = runlog_open(MPI_COMM_WORLD, path, &prov, deck, 1, 20);
    CHECK(log != NULL, "runlog_open resumes %s", path);
    if (log) {
        dt_train_row t = train_value(5, rank);
        runlog_append_train(log, &t);
        runlog_close(log);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        check_train(f, 3, 2, 5);
        hsize_t rows, cols;
        free(read_table(f, "/eval/accuracy", &rows, &cols));
        CHECK(rows == 1, "resume at step 20 keeps 1 eval row (got %llu)", (unsigned long long)rows);
        free(read_table(f, "/eval/consensus_distance", &rows, &cols));
        CHECK(rows == 1, "resume trims the eval scalars too (got %llu)", (unsigned long long)rows);
        CHECK(read_scalar_d(f, "/eval/loss_mean", 0) == 1 + 0.25 * (nranks - 1),
              "kept eval scalar unchanged");
        CHECK(attr_i64(f, "nparams") == 79510 && attr_string_is(f, "deck", deck),
              "attributes survive the resume");
        H5Fclose(f);

        /* A file that is HDF5 but not a run record. */
        char other[512];
        snprintf(other, sizeof other, "%s/other.h5", dir);
        hid_t g = H5Fcreate(other, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        H5Fclose(g);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    char other[512];
    snprintf(other, sizeof other, "%s/other.h5", dir);
    H5E_auto2_t fn;
    void *fd;
    H5Eget_auto2(H5E_DEFAULT, &fn, &fd);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    log = runlog_open(MPI_COMM_WORLD, other, &prov, deck, 1, 20);
    H5Eset_auto2(H5E_DEFAULT, fn, fd);
    CHECK(log == NULL && strstr(dt_err_msg(), "other.h5") && strstr(dt_err_msg(), "ranks"),
          "resume of a foreign HDF5 file fails with a message: %s", dt_err_msg());
    runlog_close(log);
}

/* ---- checkpoints ----------------------------------------------------------- */

/* n = 2^20 + 37: two chunks per row, the second one partial. */
#define NPAR (((size_t)1 << 20) + 37)
#define NMOM 1000
#define BLOB 24

static float param_value(int64_t step, int r, size_t i)
{
    uint32_t bits = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u) ^ (uint32_t)(step * 97u);
    float v;
    /* Arbitrary bit patterns except NaNs, whose payload may not survive a copy. */
    if ((bits & 0x7f800000u) == 0x7f800000u)
        bits &= ~0x00800000u;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void fill(int64_t step, int r, float *p, float *m, unsigned char *blob)
{
    for (size_t i = 0; i < NPAR; i++)
        p[i] = param_value(step, r, i);
    for (size_t i = 0; i < NMOM; i++)
        m[i] = (float)(r * 1000 + step) + 0.5f * (float)i;
    for (size_t i = 0; i < BLOB; i++)
        blob[i] = (unsigned char)(r * 31 + step + i * 7);
}

static int exists(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/ckpt/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* All ranks agree that `ok` held on every rank. */
static int all(int ok)
{
    int r = 0;
    MPI_Allreduce(&ok, &r, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return r;
}

static void test_checkpoint(void)
{
    char cdir[512];
    snprintf(cdir, sizeof cdir, "%s/ckpt", dir);
    float *p = dt_falloc(NPAR), *m = dt_falloc(NMOM), *p2 = dt_falloc(NPAR), *m2 = dt_falloc(NMOM);
    unsigned char blob[BLOB], blob2[BLOB];
    dt_ckpt_meta meta = {.step = 0, .epoch = 0, .nranks = nranks, .nparams = NPAR,
                         .model = "mlp", .mode = "sgp"};
    char path[1024];

    CHECK(checkpoint_find_latest(MPI_COMM_WORLD, cdir, path, sizeof path) == 0,
          "no checkpoint found before the directory exists");

    for (int64_t step = 10; step <= 30; step += 10) {
        fill(step, rank, p, m, blob);
        meta.step = step;
        meta.epoch = step / 10;
        dt_ckpt_array arrays[] = {{"params", p, NPAR}, {"momentum", m, NMOM}};
        CHECK(checkpoint_write(MPI_COMM_WORLD, cdir, &meta, arrays, 2, blob, BLOB, 2, NULL, 0) == 0,
              "checkpoint_write of step %lld succeeds: %s", (long long)meta.step, dt_err_msg());
        if (step == 10 && rank == 0) {
            /* Files the pruning must leave alone. */
            char q[600];
            snprintf(q, sizeof q, "%s/ckpt-foo.h5", cdir);
            FILE *g = fopen(q, "w");
            if (g)
                fclose(g);
            snprintf(q, sizeof q, "%s/ckpt-000000001.h5", cdir);
            g = fopen(q, "w");
            if (g)
                fclose(g);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0) {
        CHECK(!exists("ckpt-0000000010.h5") && exists("ckpt-0000000020.h5") &&
                  exists("ckpt-0000000030.h5"),
              "keep=2 deleted step 10 and kept steps 20, 30");
        CHECK(exists("ckpt-foo.h5") && exists("ckpt-000000001.h5"),
              "pruning touches only ckpt-##########.h5 names");
        CHECK(!exists("ckpt-0000000030.h5.tmp") && !exists("latest.tmp"), "no temporary files left");
        char q[600], line[128] = "";
        snprintf(q, sizeof q, "%s/latest", cdir);
        FILE *f = fopen(q, "r");
        if (f) {
            if (!fgets(line, sizeof line, f))
                line[0] = '\0';
            fclose(f);
        }
        CHECK(strcmp(line, "ckpt-0000000030.h5\n") == 0, "latest holds one line, ckpt-0000000030.h5");
    }

    char want[1024];
    snprintf(want, sizeof want, "%s/ckpt-0000000030.h5", cdir);
    int found = checkpoint_find_latest(MPI_COMM_WORLD, cdir, path, sizeof path);
    CHECK(all(found == 1 && strcmp(path, want) == 0), "find_latest names %s", want);

    dt_ckpt_meta got;
    memset(&got, 0, sizeof got);
    dt_ckpt_array rd[] = {{"params", p2, NPAR}, {"momentum", m2, NMOM}};
    int rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, rd, 2, blob2, BLOB);
    fill(30, rank, p, m, blob);
    CHECK(all(rc == 0), "checkpoint_read of step 30 succeeds: %s", dt_err_msg());
    CHECK(all(memcmp(p, p2, NPAR * sizeof *p) == 0 && memcmp(m, m2, NMOM * sizeof *m) == 0 &&
              memcmp(blob, blob2, BLOB) == 0),
          "params, momentum and blob read back bit-exact on every rank");
    CHECK(all(got.step == 30 && got.epoch == 3 && got.nranks == nranks && got.nparams == (int64_t)NPAR &&
              strcmp(got.model, "mlp") == 0 && strcmp(got.mode, "sgp") == 0),
          "metadata read back");

    /* Mismatches. */
    dt_ckpt_meta bad = meta;
    bad.nranks = nranks + 1;
    rc = checkpoint_read(MPI_COMM_WORLD, path, &bad, &got, rd, 2, blob2, BLOB);
    char msg[512];
    snprintf(msg, sizeof msg, "ckpt-0000000030.h5 was written by %d ranks, this run has %d", nranks,
             nranks + 1);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), msg)), "rank-count mismatch: %s", dt_err_msg());
    bad = meta;
    bad.nparams = 7;
    rc = checkpoint_read(MPI_COMM_WORLD, path, &bad, &got, rd, 2, blob2, BLOB);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), "1048613 parameters") && strstr(dt_err_msg(), " 7")),
          "parameter-count mismatch: %s", dt_err_msg());
    bad = meta;
    snprintf(bad.model, sizeof bad.model, "resnet20");
    rc = checkpoint_read(MPI_COMM_WORLD, path, &bad, &got, rd, 2, blob2, BLOB);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), "'mlp'") && strstr(dt_err_msg(), "'resnet20'")),
          "model mismatch: %s", dt_err_msg());
    dt_ckpt_array extra[] = {{"params", p2, NPAR}, {"velocity", m2, NMOM}};
    rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, extra, 2, blob2, BLOB);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), "'velocity'")), "missing array: %s", dt_err_msg());
    rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, rd, 2, blob2, BLOB - 1);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), "'state'")), "blob size mismatch: %s", dt_err_msg());

    /* Damage the last rank's first params chunk in the middle: only that rank
     * sees the checksum failure, yet every rank must return -1. */
    if (rank == 0) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t ds = H5Dopen2(f, "params", H5P_DEFAULT);
        hsize_t coord[2] = {(hsize_t)nranks - 1, 0};
        haddr_t addr = 0;
        hsize_t size = 0;
        unsigned mask = 0;
        herr_t e = H5Dget_chunk_info_by_coord(ds, coord, &mask, &addr, &size);
        H5Dclose(ds);
        H5Fclose(f);
        CHECK(e >= 0 && size > 1000, "located the chunk to damage at %llu (%llu bytes)",
              (unsigned long long)addr, (unsigned long long)size);
        FILE *g = fopen(path, "r+b");
        unsigned char b[16];
        if (g && fseeko(g, (off_t)(addr + size / 2), SEEK_SET) == 0 && fread(b, 1, sizeof b, g) == sizeof b) {
            for (size_t i = 0; i < sizeof b; i++)
                b[i] ^= 0x5a;
            fseeko(g, (off_t)(addr + size / 2), SEEK_SET);
            fwrite(b, 1, sizeof b, g);
        }
        if (g)
            fclose(g);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, rd, 2, blob2, BLOB);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), "ckpt-0000000030.h5") &&
              strstr(dt_err_msg(), "the previous checkpoint ckpt-0000000020.h5 is intact")),
          "flipped bytes: -1 on every rank, previous named: %s", dt_err_msg());

    /* Truncated to half. */
    if (rank == 0) {
        struct stat st;
        CHECK(stat(path, &st) == 0 && truncate(path, st.st_size / 2) == 0, "truncated %s", path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, rd, 2, blob2, BLOB);
    CHECK(all(rc == -1 && strstr(dt_err_msg(), "ckpt-0000000030.h5") &&
              strstr(dt_err_msg(), "the previous checkpoint ckpt-0000000020.h5 is intact")),
          "truncated file: -1 on every rank, previous named: %s", dt_err_msg());

    /* The previous one is still good, bit for bit. */
    snprintf(want, sizeof want, "%s/ckpt-0000000020.h5", cdir);
    rc = checkpoint_read(MPI_COMM_WORLD, want, &meta, &got, rd, 2, blob2, BLOB);
    fill(20, rank, p, m, blob);
    CHECK(all(rc == 0 && got.step == 20 && memcmp(p, p2, NPAR * sizeof *p) == 0 &&
              memcmp(m, m2, NMOM * sizeof *m) == 0 && memcmp(blob, blob2, BLOB) == 0),
          "step-20 checkpoint still reads back bit-exact: %s", rc ? dt_err_msg() : "");

    /* Without the marker the newest complete file is found. */
    if (rank == 0) {
        char q[600];
        snprintf(q, sizeof q, "%s/latest", cdir);
        unlink(q);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    found = checkpoint_find_latest(MPI_COMM_WORLD, cdir, path, sizeof path);
    snprintf(want, sizeof want, "%s/ckpt-0000000030.h5", cdir);
    CHECK(all(found == 1 && strcmp(path, want) == 0), "without 'latest' the newest file is found");

    free(p);
    free(m);
    free(p2);
    free(m2);
}

/* ---- checkpoint attributes read in full width ---------------------------------- */

/* Replaces attribute `name` of the file at `path` (rank 0, serial HDF5) with one
 * of `npoints` values of file type `ftype`, given in memory as `mtype`. */
static void attr_replace(const char *path, const char *name, hid_t ftype, hid_t mtype,
                         const void *value, hsize_t npoints)
{
    if (rank != 0)
        return;
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int ok = f >= 0 && H5Adelete(f, name) >= 0;
    hid_t space = npoints == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &npoints, NULL);
    hid_t a = ok ? H5Acreate2(f, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
    ok = ok && a >= 0 && H5Awrite(a, mtype, value) >= 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    if (f >= 0)
        H5Fclose(f);
    CHECK(ok, "attribute %s of %s replaced", name, path);
}

/* Every integer attribute of a checkpoint at 2^31, 2^32 + nranks (an int cast
 * would make it this run's rank count), 2^63 (unsigned), 2^64 - 1 and -1, as a
 * float and as two values: each is refused with the file, the attribute, the
 * value and the allowed range; the file is skipped as damaged, not narrowed. */
static void test_checkpoint_attributes(void)
{
    char cdir[512], path[1024];
    snprintf(cdir, sizeof cdir, "%s/ckpt-attr", dir);
    float par[8], par2[8];
    unsigned char blob[4] = { 1, 2, 3, 4 }, blob2[4];
    for (int i = 0; i < 8; i++)
        par[i] = (float)(rank * 8 + i);
    dt_ckpt_meta meta = { .step = 40, .epoch = 4, .nranks = nranks, .nparams = 8,
                          .model = "mlp", .mode = "sgp" };
    dt_ckpt_array arr[] = { { "params", par, 8 } }, rd[] = { { "params", par2, 8 } };
    CHECK(all(checkpoint_write(MPI_COMM_WORLD, cdir, &meta, arr, 1, blob, 4, 1, path,
                               sizeof path) == 0),
          "small checkpoint written: %s", dt_err_msg());
    dt_ckpt_meta got;
    const int64_t two31 = (int64_t)1 << 31, wrap = ((int64_t)1 << 32) + nranks;
    const uint64_t two63 = (uint64_t)1 << 63, max64 = UINT64_MAX;
    const double half = 3.5;
    const int64_t pair[2] = { 1, 1 };
    char v_wrap[32], v_ok[32];
    snprintf(v_wrap, sizeof v_wrap, "%lld", (long long)wrap);
    const struct {
        const char *name;
        hid_t ftype, mtype;
        const void *value;
        hsize_t npoints;
        const char *value_text, *range; /* range NULL: the type is refused */
        const char *why;
    } c[] = {
        { "nranks", H5T_STD_I64LE, H5T_NATIVE_INT64, &two31, 1, "2147483648", "1..2147483647", "" },
        { "nranks", H5T_STD_I64LE, H5T_NATIVE_INT64, &wrap, 1, v_wrap, "1..2147483647", "" },
        { "nranks", H5T_STD_U64LE, H5T_NATIVE_UINT64, &two63, 1, "9223372036854775808",
          "-9223372036854775808..9223372036854775807", "" },
        { "nparams", H5T_STD_U64LE, H5T_NATIVE_UINT64, &max64, 1, "18446744073709551615",
          "-9223372036854775808..9223372036854775807", "" },
        { "step", H5T_STD_I64LE, H5T_NATIVE_INT64, &(int64_t){ -1 }, 1, "-1",
          "0..9223372036854775807", "" },
        { "format_version", H5T_STD_I64LE, H5T_NATIVE_INT64, &wrap, 1, v_wrap,
          "1..2147483647", "" },
        { "epoch", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &half, 1, NULL, NULL,
          "is not an integer of at most 64 bits" },
        { "nranks", H5T_STD_I64LE, H5T_NATIVE_INT64, pair, 2, NULL, NULL,
          "holds 2 values, expected one integer" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        attr_replace(path, c[i].name, c[i].ftype, c[i].mtype, c[i].value, c[i].npoints);
        MPI_Barrier(MPI_COMM_WORLD);
        char want[256];
        if (c[i].range)
            snprintf(want, sizeof want, "attribute '%s' %s out of range, expected %s", c[i].name,
                     c[i].value_text, c[i].range);
        else
            snprintf(want, sizeof want, "attribute '%s' %s", c[i].name, c[i].why);
        int rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, rd, 1, blob2, 4);
        CHECK(all(rc == -1 && strstr(dt_err_msg(), "ckpt-0000000040.h5") &&
                  strstr(dt_err_msg(), want)),
              "%s refused: %s", want, dt_err_msg());
        /* back to the written value, which must read again */
        int64_t orig = strcmp(c[i].name, "nranks") == 0    ? nranks
                       : strcmp(c[i].name, "nparams") == 0 ? 8
                       : strcmp(c[i].name, "step") == 0    ? 40
                       : strcmp(c[i].name, "epoch") == 0   ? 4
                                                           : 1;
        attr_replace(path, c[i].name, H5T_STD_I64LE, H5T_NATIVE_INT64, &orig, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        rc = checkpoint_read(MPI_COMM_WORLD, path, &meta, &got, rd, 1, blob2, 4);
        snprintf(v_ok, sizeof v_ok, "%lld", (long long)orig);
        CHECK(all(rc == 0 && got.nranks == nranks && got.step == 40 && got.epoch == 4 &&
                  memcmp(par, par2, sizeof par) == 0),
              "%s = %s restored: the checkpoint reads again: %s", c[i].name, v_ok,
              rc ? dt_err_msg() : "");
    }
    if (rank == 0) {
        char q[1100];
        snprintf(q, sizeof q, "%s/latest", cdir);
        unlink(q);
        unlink(path);
        rmdir(cdir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void remove_tree(const char *d)
{
    const char *names[] = {"run.h5", "other.h5", "ckpt/ckpt-0000000020.h5", "ckpt/ckpt-0000000030.h5",
                           "ckpt/ckpt-foo.h5", "ckpt/ckpt-000000001.h5", "ckpt/latest", "ckpt", ""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char q[600];
        snprintf(q, sizeof q, "%s/%s", d, names[i]);
        if (remove(q) != 0 && access(q, F_OK) == 0)
            printf("# could not remove %s\n", q);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/dtrain-test-io-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            DT_FATAL("mkdtemp %s failed", dir);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    /* Per-rank results are combined with all() and reported by rank 0. */
    if (rank != 0 && !freopen("/dev/null", "w", stdout))
        return 1;

    test_runlog();
    MPI_Barrier(MPI_COMM_WORLD);
    test_checkpoint();
    MPI_Barrier(MPI_COMM_WORLD);
    test_checkpoint_attributes();
    MPI_Barrier(MPI_COMM_WORLD);

    int failed = tap_done(), any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        remove_tree(dir);
    MPI_Finalize();
    return any;
}
