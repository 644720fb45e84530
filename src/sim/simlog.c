/* The run record of the simulator: the runlog interface (io/runlog.h)
 * without HDF5. Parallel HDF5 cannot run inside SMPI, so the training rows
 * are reduced to this rank's totals, which sim_write_record puts into
 * sim.csv; evaluations, notes and the algorithms' own series have no place
 * in it and are not kept. Every call stays collective-free: the record is
 * written once, by the trainer, before runlog_close. */
#include "io/runlog.h"

#include <stdlib.h>

#include "core/error.h"
#include "sim/sim.h"

struct dt_runlog {
    dt_sim_totals tot;
};

dt_runlog *runlog_open(MPI_Comm comm, const char *path, const dt_provenance *prov,
                       const char *deck_text, int resume, int64_t resume_step)
{
    (void)comm, (void)path, (void)prov, (void)deck_text, (void)resume_step;
    if (resume) {
        dt_err_set("the simulator cannot resume a run");
        return NULL;
    }
    return dt_calloc(1, sizeof(dt_runlog));
}

static void add_row(dt_runlog *log, const dt_train_row *r)
{
    if (r->step < 0) /* padding of an asynchronous run's shorter column */
        return;
    log->tot.steps = r->step;
    log->tot.images = r->images;
    log->tot.bytes_sent = r->bytes_sent;
    log->tot.compute += r->compute_time;
    log->tot.comm += r->comm_time;
    log->tot.wait += r->wait_time;
    log->tot.wall = r->wall;
}

void runlog_append_train(dt_runlog *log, const dt_train_row *mine) { add_row(log, mine); }

void runlog_append_train_rows(dt_runlog *log, const dt_train_row *mine, int64_t nrows)
{
    for (int64_t i = 0; i < nrows; i++)
        add_row(log, &mine[i]);
}

void runlog_append_eval(dt_runlog *log, const dt_eval_row *mine, double avg_model_loss,
                        double avg_model_accuracy, double consensus_distance)
{
    (void)log, (void)mine, (void)avg_model_loss, (void)avg_model_accuracy;
    (void)consensus_distance;
}

void runlog_write_series(dt_runlog *log, const char *group, int root, int64_t rows,
                         int ncols, const char *const *names, const double *const *cols)
{
    (void)log, (void)group, (void)root, (void)rows, (void)ncols, (void)names, (void)cols;
}

void runlog_note(dt_runlog *log, const char *name, const char *text)
{
    (void)log, (void)name, (void)text;
}

void runlog_note_i64(dt_runlog *log, const char *name, int64_t v)
{
    (void)log, (void)name, (void)v;
}

void simlog_totals(const dt_runlog *log, dt_sim_totals *out) { *out = log->tot; }

void runlog_close(dt_runlog *log) { free(log); }
