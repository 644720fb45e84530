/* dtrain-post: a run record (run.h5, see io/runlog.h) in memory, and the
 * records that command-line arguments name. */
#ifndef DT_POST_RECORD_READ_H
#define DT_POST_RECORD_READ_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* The per-rank fields of /train and /eval, and the per-evaluation scalars of
 * /eval, in the order of the record's datasets. */
enum { NTRAIN = 12, NEVAL = 5, NSCALAR = 7 };
enum { T_STEP, T_EPOCH, T_WALL, T_LOSS, T_ACC, T_LR, T_COMPUTE, T_COMM, T_WAIT, T_IMAGES,
       T_WEIGHT, T_BYTES };
enum { E_STEP, E_EPOCH, E_WALL, E_LOSS, E_ACC };
enum { S_LOSS_MEAN, S_LOSS_STD, S_ACC_MEAN, S_ACC_STD, S_AVG_LOSS, S_AVG_ACC, S_CONSENSUS };

/* One run record in memory. Integer fields are held as doubles (exact below
 * 2^53, far beyond any step or image count). */
typedef struct post_run {
    const char *path;
    char label[512]; /* "<directory name> (<mode>)" */
    char mode[64];
    int tokens;      /* a language model's record: its "images" count tokens */
    int64_t ranks;
    size_t ntrain, neval;
    double *train[NTRAIN]; // (ntrain, ranks)
    double *eval[NEVAL];   // (neval, ranks)
    double *scalar[NSCALAR]; // (neval)
} post_run;

/* Reads a run record; -1 after dt_err_set() for a missing, foreign or
 * damaged file. post_run_free releases it. */
int post_run_load(const char *path, post_run *run);
void post_run_free(post_run *run);

/* Reads "/group/name" of file (named path in messages) as doubles; *rows
 * gets its row count. 2-D datasets must have `ranks` columns. Returns
 * malloc'd values, or NULL after dt_err_set. */
double *post_table_read(hid_t file, const char *path, const char *group, const char *name,
                        int two_d, int64_t ranks, size_t *rows);

/* Run records named by the arguments: a RUN.h5 as it is, a run directory
 * as its run.h5, and a job directory with rank groups (groups.csv) as the
 * run.h5 of each group, in the order of groups.csv. The result is
 * malloc'd strings; NULL with dt_err_set() on error. */
char **post_runs_expand(char **args, int nargs, int *nruns);

#endif
