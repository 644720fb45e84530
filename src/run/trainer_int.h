/* Declarations shared by the runtime's own files (run/trainer.h lists
 * them); algorithms do not include this header. */
#ifndef DT_RUN_TRAINER_INT_H
#define DT_RUN_TRAINER_INT_H

#include <stdio.h>

#include "io/runlog.h"
#include "run/trainer.h"

#ifdef DTRAIN_SIM
#define DT_SIMULATED 1 /* vectors without meaning: no scans of their values */
#else
#define DT_SIMULATED 0
#endif

/* ---- run/record.c ---------------------------------------------------------- */

/* "[NAME] " in front of everything a rank group prints; "" without groups. */
extern char trainer_group_tag[DT_GROUP_NAME_MAX + 4];
#define say(...) say_(__VA_ARGS__, "")
#define say_(fmt, ...) printf("%s" fmt "%s", trainer_group_tag, __VA_ARGS__)

/* Rank 0 prepares run.output_dir: created if missing, writable, and not
 * holding an earlier run unless resuming or overwriting. -1 after
 * dt_err_set(). */
int record_prepare_output(const dt_config *cfg, int rank);
/* <output_dir>/deck.ini: the effective deck, beside the record. */
void record_write_deck(const char *dir, const char *text);
/* Collective: opens the run record (path rec, DT_PATH_MAX + 16 bytes) with
 * the provenance of group g; NULL on failure. */
dt_runlog *record_open(dt_trainer *t, const dt_group *g, int world_ranks, int resumed, char *rec);
/* This rank's /train row for the interval since the last one; starts the
 * next interval. */
dt_train_row record_take_row(dt_trainer *t);
/* Collective: the /train row and rank 0's progress line. */
void record_log_train(dt_trainer *t, dt_runlog *log, double *last_wall, int64_t *last_images);
/* Collective: appends this rank's rows kept in memory (asynchronous modes). */
void record_flush_rows(dt_trainer *t, dt_runlog *log, dt_train_row **rows, int64_t *nrows,
                       int64_t *cap, dt_eval_row *evals, int64_t *nevals);
/* The figures of dt_run_result, agreed over the group. */
void record_result(dt_trainer *t, double mean_acc, dt_run_result *res);

/* ---- run/engine.c ---------------------------------------------------------- */

/* The model for the data (not in the simulator, which only sizes it): -1
 * after dt_err_set(). */
int engine_create_model(dt_trainer *t);
/* The flat vectors (initialised from run.seed), the model's activations and
 * the batch buffers. */
void engine_alloc(dt_trainer *t);
/* The optimizer and its state vectors where the flat vectors live: -1 after
 * dt_err_set(). */
int engine_create_optim(dt_trainer *t);
/* The parameters x where the model reads them (a device copy if needed). */
const float *engine_params_on_backend(dt_trainer *t, const float *x);
/* The first b samples of the host batch h into the device batch d. */
void engine_batch_to_backend(dt_trainer *t, int64_t b, const dt_sample *h, dt_sample *d);
/* Host scratch k of n floats: the mirror of a vector in the backend's
 * memory, valid from the to_host that fills it. */
float *engine_mirror(dt_trainer *t, int k, size_t n);
/* The host view of a vector: itself, or its mirror k filled from the backend. */
const float *engine_on_host(dt_trainer *t, int k, const float *x, size_t n);
/* Everything the rank's engine, data and transport hold (after the
 * algorithm's teardown). */
void engine_free(dt_trainer *t);

/* ---- run/data_setup.c ------------------------------------------------------ */

/* The data sets, this worker's shard and the batch sources (the simulator:
 * the sample shape and the training set's size only). -1 after
 * dt_err_set(). */
int data_setup(dt_trainer *t);
/* Steps of this rank's epoch (before the group agrees on the smallest). */
int64_t data_steps_per_epoch(const dt_trainer *t);

/* ---- run/evaluate.c -------------------------------------------------------- */

/* Collective: per-rank test metrics, the averaged model and the consensus
 * distance, into the record and rank 0's line. */
void eval_run(dt_trainer *t, dt_runlog *log, double wall, double *mean_acc);

/* ---- run/checkpointing.c --------------------------------------------------- */

/* Collective. 0 if written; DT_EXIT_NONFINITE, with nothing written, if
 * run.check_finite finds NaN or Inf on any rank; 1 if the write failed. */
int ckpt_save(dt_trainer *t);
/* Collective. 1 if resumed, 0 if there was nothing to resume, -1 on error;
 * skipped gets what was passed over and why. */
int ckpt_restore(dt_trainer *t, char *skipped, size_t slen);
/* What a rank starts from when this run's mode resumes on another rank
 * count (the run record's elastic_rule). */
const char *ckpt_elastic_rule(const dt_trainer *t);
/* A new run: no checkpoint written yet, no non-finite value seen; rank 0
 * removes half-written checkpoint files. */
void ckpt_start(dt_trainer *t);
/* Notes the first NaN/Inf this rank saw (step, what). */
void nonfinite_note(int64_t step, const char *what);
/* This rank has seen a non-finite value. */
int nonfinite_seen(void);
/* Looks for NaN/Inf in this rank's checkpoint arrays; notes the first. */
void nonfinite_scan_state(dt_trainer *t);
/* Collective: 0, or DT_EXIT_NONFINITE everywhere after the one line. */
int nonfinite_agree(dt_trainer *t);

#endif
