/* Declarations shared by the loop's own files (run/run.h lists them);
 * nothing below src/run/ includes this header. */
#ifndef DT_RUN_RUN_INT_H
#define DT_RUN_RUN_INT_H

#include <stdio.h>

#include "algo/algo.h"
#include "engine/engine.h"
#include "io/runlog.h"
#include "run/run.h"

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

/* ---- run/eval_group.c ----------------------------------------------------- */

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
