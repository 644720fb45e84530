/* What a run tells its user and its record: the output directory, the
 * effective deck, the provenance, /train rows and the progress lines, and
 * the figures of dt_run_result. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/build_info.h"
#include "core/error.h"
#include "run/run_int.h"

char trainer_group_tag[DT_GROUP_NAME_MAX + 4] = "";

static int mkdir_p(const char *path)
{
    char buf[DT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return dt_err_set("cannot create directory '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return dt_err_set("cannot create directory '%s': %s", buf, strerror(errno));
    return 0;
}

int record_prepare_output(const dt_config *cfg, int rank)
{
    if (rank != 0)
        return 0;
    const char *dir = cfg->run.output_dir;
    if (mkdir_p(dir) != 0)
        return dt_err_prefix("run.output_dir = '%s'", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return dt_err_set("run.output_dir = '%s' is not writable: %s", dir, strerror(errno));
    char probe[DT_PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.dtrain-write-test", dir);
    FILE *f = fopen(probe, "w");
    if (!f)
        return dt_err_set("run.output_dir = '%s' is not writable: %s", dir, strerror(errno));
    fclose(f);
    unlink(probe);
#ifdef DTRAIN_SIM
    /* sim.csv gathers one row per run: a new run appends to it */
    return 0;
#endif
    char rec[DT_PATH_MAX + 16];
    snprintf(rec, sizeof rec, "%s/run.h5", dir);
    if (!cfg->run.resume && !cfg->run.overwrite && access(rec, F_OK) == 0)
        return dt_err_set("run.output_dir = '%s' already holds a run (%s); set run.resume = true "
                          "to continue it or run.overwrite = true to replace it", dir, rec);
    return 0;
}

/* Written via a temporary name, so the run can be repeated with
 * `dtrain deck.ini`. */
void record_write_deck(const char *dir, const char *text)
{
    char path[DT_PATH_MAX + 16], tmp[DT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/deck.ini", dir);
    snprintf(tmp, sizeof tmp, "%s/deck.ini.tmp", dir);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) != 0 || rename(tmp, path) != 0)
        DT_FATAL("cannot write %s: %s", path, strerror(errno));
}

/* ---- provenance ------------------------------------------------------------ */

static char *gather_hosts(MPI_Comm comm, int rank, int nranks)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    char *all = rank == 0 ? dt_calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_CHECK(MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                         MPI_CHAR, 0, comm));
    if (rank != 0)
        return NULL;
    char *out = dt_calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME + 1);
    for (int i = 0; i < nranks; i++) {
        if (i)
            strcat(out, ",");
        strcat(out, all + (size_t)i * MPI_MAX_PROCESSOR_NAME);
    }
    free(all);
    return out;
}

dt_runlog *record_open(dt_trainer *t, const dt_group *g, int world_ranks, int resumed, char *rec)
{
    const dt_config *cfg = t->cfg;
    char *hosts = gather_hosts(t->comm, t->rank, t->nranks);
    char start[32];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    dt_provenance prov = { .version = build_version(), .git_revision = build_git_revision(),
                           .configure_flags = build_configure_args(),
                           .mpi_version = build_mpi_runtime(), .hosts = hosts ? hosts : "",
                           .start_time = start, .mode = cfg->algorithm.mode,
                           .model = cfg->model.name, .nparams = (int64_t)t->n,
                           .group = g->name, .group_first_rank = g->first,
                           .world_ranks = world_ranks };
    snprintf(rec, DT_PATH_MAX + 16, "%s/%s", cfg->run.output_dir,
             DT_SIMULATED ? "sim.csv" : "run.h5");
    /* an asynchronous run writes its rows at its end, after its last
     * checkpoint, and counts them in the group's steps: a resume keeps them */
    dt_runlog *log = runlog_open(t->comm, rec, &prov, g->effective, resumed,
                                 t->algo->async ? INT64_MAX : t->step);
    free(hosts);
    if (log && t->data.tokens) {
        /* a language model: the record's "images" count tokens; a byte-level
         * corpus keeps its bytes (token id -> byte) for dtrain-post sample */
        runlog_note(log, "sample_unit", "tokens");
        if (t->data.vocab_n > 0) {
            char hex[2 * 256 + 1];
            for (int i = 0; i < t->data.vocab_n; i++)
                snprintf(hex + 2 * i, 3, "%02x", t->data.vocab_bytes[i]);
            runlog_note(log, "vocab_hex", hex);
        }
    }
    return log;
}

/* ---- /train rows and progress lines ----------------------------------------- */

static void fmt_eta(char *buf, size_t len, double s)
{
    if (s < 0 || !isfinite(s))
        snprintf(buf, len, "?");
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

dt_train_row record_take_row(dt_trainer *t)
{
    dt_meter *m = &t->meter;
    dt_train_row row = {
        .step = t->step, .epoch = (double)t->step / (double)t->steps_per_epoch,
        .wall = trainer_clock() - t->wall_start,
        .loss = m->batches ? m->loss_sum / m->batches : 0,
        .accuracy = m->seen ? (double)m->correct / m->seen : 0, .lr = t->lr,
        .compute_time = m->t_compute, .comm_time = m->t_comm, .wait_time = m->t_wait,
        .images = m->images, .weight = m->weight, .bytes_sent = m->bytes_sent,
    };
    m->run_compute += m->t_compute;
    m->run_comm += m->t_comm + m->t_wait;
    m->loss_sum = m->t_compute = m->t_comm = m->t_wait = 0;
    m->correct = m->seen = m->batches = 0;
    return row;
}

void record_log_train(dt_trainer *t, dt_runlog *log, double *last_wall, int64_t *last_images)
{
    dt_train_row row = record_take_row(t);
    const double wall = row.wall;
    runlog_append_train(log, &row);
    /* progress line: totals over ranks */
    double v[5] = { row.loss, row.accuracy, (double)(t->meter.images - *last_images),
                    row.comm_time + row.wait_time,
                    row.compute_time + row.comm_time + row.wait_time };
    MPI_CHECK(MPI_Reduce(t->rank ? v : MPI_IN_PLACE, v, 5, MPI_DOUBLE, MPI_SUM, 0, t->comm));
    if (t->rank == 0) {
        double dt = wall - *last_wall, rate = dt > 0 ? v[2] / dt : 0;
        char eta[32];
        fmt_eta(eta, sizeof eta, (double)(t->total_steps - t->step) * dt /
                                     (double)(t->cfg->run.log_every));
        say("step %lld/%lld  epoch %.2f  loss %.4f  acc %.2f%%  %.0f %s/s  comm %.0f%%  ETA %s\n",
               (long long)t->step, (long long)t->total_steps, row.epoch,
               v[0] / t->nranks, 100 * v[1] / t->nranks, rate, t->data.tokens ? "tok" : "img",
               v[4] > 0 ? 100 * v[3] / v[4] : 0.0, eta);
        fflush(stdout);
    }
    *last_wall = wall;
    *last_images = t->meter.images;
}

/* Ranks with fewer rows pad with step -1. The averaged model and the
 * consensus need every rank at one moment: the final evaluation gives them. */
void record_flush_rows(dt_trainer *t, dt_runlog *log, dt_train_row **rows, int64_t *nrows,
                       int64_t *cap, dt_eval_row *evals, int64_t *nevals)
{
    int64_t most = *nrows;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, t->comm));
    if (most > *cap || !*rows) {
        *cap = most > *cap ? most : 1;
        *rows = dt_realloc(*rows, (size_t)*cap * sizeof **rows);
    }
    for (int64_t i = *nrows; i < most; i++)
        (*rows)[i] = (dt_train_row){ .step = -1, .epoch = NAN, .wall = NAN, .loss = NAN,
                                     .accuracy = NAN, .lr = NAN, .compute_time = 0,
                                     .comm_time = 0, .wait_time = 0, .images = t->meter.images,
                                     .weight = NAN, .bytes_sent = t->meter.bytes_sent };
    runlog_append_train_rows(log, *rows, most);
    most = *nevals;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, t->comm));
    for (int64_t i = 0; i < most; i++) {
        dt_eval_row pad = { .step = -1, .epoch = NAN, .wall = NAN, .loss = NAN,
                            .accuracy = NAN };
        runlog_append_eval(log, i < *nevals ? &evals[i] : &pad, NAN, NAN, NAN);
    }
    *nrows = *nevals = 0;
}

void record_result(dt_trainer *t, double mean_acc, dt_run_result *res)
{
    double v[4] = { (double)t->meter.images, t->meter.run_compute, t->meter.run_comm,
                    t->avg_model_acc };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_SUM, t->comm));
    /* asynchronous runs: the group's progress, as in eval.csv's step column */
    double r[3] = { t->algo->async ? (double)llround(t->global_step) : (double)t->step,
                    trainer_clock() - t->wall_start, v[3] };
    MPI_CHECK(MPI_Bcast(r, 3, MPI_DOUBLE, 0, t->comm));
    res->steps = (int64_t)r[0];
    res->wall = r[1];
    res->avg_model_acc = r[2];
    res->mean_acc = mean_acc;
    res->images_per_s = r[1] > 0 ? v[0] / r[1] : 0;
    res->comm_share = v[1] + v[2] > 0 ? v[2] / (v[1] + v[2]) : 0;
}
