/* The run record <output_dir>/run.h5, written with parallel HDF5.
 *
 * Layout (documented for users in doc/record.md):
 *   /                attributes: deck (effective deck text), version,
 *                    git_revision, configure_flags, mpi_version, hosts,
 *                    start_time, ranks, mode, model, nparams; resume_skipped
 *                    (only after a resume that passed over a checkpoint)
 *   /train/<field>   (rows, ranks) datasets, one row per logged step:
 *                    step (int64); epoch (fractional), wall, loss, accuracy, lr,
 *                    compute_time, comm_time, wait_time (float64);
 *                    images (int64); weight (float64); bytes_sent (int64)
 *   /eval/<field>    (rows, ranks): step (int64); epoch, wall, loss,
 *                    accuracy (float64); and (rows) datasets:
 *                    loss_mean, loss_std, accuracy_mean, accuracy_std,
 *                    avg_model_loss, avg_model_accuracy, consensus_distance
 * Every append is collective over the communicator; the file is flushed after
 * each append so a crash loses at most one interval. */
#ifndef DT_IO_RUNLOG_H
#define DT_IO_RUNLOG_H

#include <mpi.h>
#include <stdint.h>

typedef struct dt_provenance {
    const char *version;
    const char *git_revision;
    const char *configure_flags;
    const char *mpi_version;
    const char *hosts;        /* comma-separated, rank order */
    const char *start_time;   /* ISO 8601 UTC */
    const char *mode;
    const char *model;
    int64_t nparams;
    const char *group;        /* rank group name; "" when the job has no groups */
    int64_t group_first_rank; /* world rank of the group's rank 0 */
    int64_t world_ranks;      /* ranks of the whole job */
} dt_provenance;

/* wall: seconds since the start of the run (continued across restarts);
 * compute_time, comm_time, wait_time: seconds spent since the previous row;
 * loss, accuracy: means over the minibatches since the previous row;
 * images: samples processed by the rank since the start (cumulative). */
typedef struct dt_train_row {
    int64_t step;
    double epoch;       /* fractional: step / steps per epoch */
    double wall, loss, accuracy, lr, compute_time, comm_time, wait_time;
    int64_t images;
    double weight;      /* push-sum weight (1 where the mode has none) */
    int64_t bytes_sent; /* payload bytes sent by the rank since the start (cumulative) */
} dt_train_row;

typedef struct dt_eval_row {
    int64_t step;
    double epoch;
    double wall, loss, accuracy;
} dt_eval_row;

typedef struct dt_runlog dt_runlog;

/* Collective. Creates path (resume == 0) or reopens it (resume != 0), in which
 * case rows with step > resume_step are dropped so the record continues
 * exactly from the checkpoint (a missing file is created). Returns NULL after
 * dt_err_set() if the file to resume is not a run record of this rank count. */
dt_runlog *runlog_open(MPI_Comm comm, const char *path, const dt_provenance *prov,
                       const char *deck_text, int resume, int64_t resume_step);
/* Collective: each rank passes its own row (one column per rank). */
void runlog_append_train(dt_runlog *log, const dt_train_row *mine);
/* Collective: nrows rows at once (the same nrows on every rank), each rank
 * its own column: one write per field instead of one per row and field. */
void runlog_append_train_rows(dt_runlog *log, const dt_train_row *mine, int64_t nrows);
/* Collective: each rank passes its own row; the global scalars come from the
 * caller (same value on every rank). Mean and spread are computed here. */
void runlog_append_eval(dt_runlog *log, const dt_eval_row *mine, double avg_model_loss,
                        double avg_model_accuracy, double consensus_distance);
/* Collective: the series of one rank (root), e.g. the parameter server's
 * supervisor curve, as group/<names[c]> (rows) float64 datasets; replaces an
 * earlier series of that name. Only root's rows and cols are read. */
void runlog_write_series(dt_runlog *log, const char *group, int root, int64_t rows,
                         int ncols, const char *const *names, const double *const *cols);
/* Collective (the same text on every rank): root attribute `name` = text,
 * replacing an earlier one (e.g. resume_skipped: the checkpoints a resume
 * passed over, and why). */
void runlog_note(dt_runlog *log, const char *name, const char *text);
/* Collective: the root attribute `name` set to the integer v (replacing). */
void runlog_note_i64(dt_runlog *log, const char *name, int64_t v);
void runlog_close(dt_runlog *log);

#endif
