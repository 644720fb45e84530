/* dtrain-sim: dtrain's own algorithms, transport and training loop on a
 * simulated cluster (SimGrid SMPI). Compiled only into the simulator
 * (smpicc -DDTRAIN_SIM); the real dtrain never includes this header.
 *
 * Differences from the real run, all behind DTRAIN_SIM:
 *  - trainer_gradient does not run the network: each step costs
 *    sim.compute_time seconds of simulated time (smpi_execute), times
 *    sim.slowdown on the ranks of sim.slow_ranks; the optimizer update is part
 *    of that time and is not executed either (sgd_step returns at once);
 *  - the algorithms' element-wise arithmetic on the flat vectors
 *    (src/core/vec.c: averaging, scaling, copies) is not executed and costs
 *    no simulated time: on a real node it is a few passes over the vector
 *    per step, which the prediction leaves out;
 *  - flat vectors of SIM_SHARED_MIN floats or more are SMPI_SHARED_MALLOC'd:
 *    every rank maps the same pages, their contents are meaningless, and
 *    1,000 ranks of a 25 M-parameter model fit in memory;
 *  - with sim.gather = links, an exchange in which every rank sends to every
 *    other rank (MPI_Iallgather, diloco's reduce-scatter and all-gather of
 *    codes) is one message per rank to the next rank, of all the bytes the
 *    rank sends: the same bytes on every node's links, p flows instead of
 *    p (p - 1) (transport_sim_links);
 *  - the run record is <run.output_dir>/sim.csv and sim_ranks.csv (parallel
 *    HDF5 cannot run inside SMPI); no evaluation, no checkpoints. */
#ifndef DT_SIM_SIM_H
#define DT_SIM_SIM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/alloc.h" /* SIM_SHARED_MIN */
#include "io/settings.h"

typedef struct dt_sim {
    double compute_time;        /* sim.compute_time: simulated seconds per step */
    int64_t params;             /* sim.params: flat vector length; 0: the deck's model */
    char slow_ranks[256];       /* sim.slow_ranks: comma-separated ranks, "" none */
    double slowdown;            /* sim.slowdown: compute-time factor of the slow ranks */
    int64_t ranks_per_node;     /* sim.ranks_per_node (the launcher places the ranks) */
    char platform[256];         /* sim.platform: the platform's name, for the record */
    int gather_links;           /* sim.gather = links (1) or peers (0, the default): how an
                                 * all-gather, and diloco's own reduce-scatter and all-gather,
                                 * go on the wire (comm/transport_mpi.c) */
    double wall_start;          /* real seconds (monotonic) when the process started */
} dt_sim;

/* Takes the sim.KEY=VALUE arguments out of argv (argc updated) into the
 * simulator's settings. -1 after dt_err_set() for an unknown key or a bad
 * value. */
int sim_parse_args(int *argc, char **argv);
const dt_sim *sim_config(void);
/* -1 after dt_err_set() for a setting the simulator cannot run (the loop
 * refuses the modes with a communication thread: dt_algo.thread). */
int sim_check(const dt_config *cfg);
/* One step's forward and backward pass: simulated time only. */
void sim_compute(int rank);
/* Real (host) seconds on a monotonic clock, not the simulated one. */
double sim_real_clock(void);

/* What one rank did in the training loop (kept by the run record). */
typedef struct dt_sim_totals {
    int64_t steps, images, bytes_sent;
    double compute, comm, wait;     /* seconds of simulated time */
    double wall;                    /* simulated seconds from the loop's start to the last row */
} dt_sim_totals;

struct dt_runlog;
void simlog_totals(const struct dt_runlog *log, dt_sim_totals *out);

/* Collective over comm: rank 0 appends one row to <dir>/sim.csv (header
 * first if the file is new) and writes <dir>/sim_ranks.csv. worker: this
 * rank trains (parameter servers and the supervisor do not); steps: the
 * group's steps per worker. Returns 0, or -1 after dt_err_set() on rank 0. */
int sim_write_record(MPI_Comm comm, const char *dir, const char *mode, int64_t nparams,
                     int worker, double steps, const dt_sim_totals *mine);

#endif
