/* What the parameter server's files share (algo/ps.c: the mode's ops,
 * set-up and state; algo/ps_server.c: the servers' loop; algo/ps_client.c:
 * the workers' step and the supervisor's loop): the wire format, the state,
 * the clock's arithmetic. Private to those files. */
#ifndef DT_PS_INT_H
#define DT_PS_INT_H

#include <mpi.h>
#include <stdint.h>

#include "optim/optim.h"

struct dt_trainer;

enum { TAG_REQ = 41, TAG_REP = 42, TAG_FIN = 43, TAG_DATA = 44, TAG_PAUSE = 45 };
enum { K_FETCH = 1, K_PUSH_DENSE, K_PUSH_SPARSE, K_DONE, K_REPLY, K_PUSH_QSPARSE, K_PAUSE };
enum { F_STOP = 1, F_END = 2, F_PAUSE = 4 }; /* flags: stop requested; the run is over;
                                              * a periodic checkpoint is due */
enum { C_NONE, C_TOPK, C_ADACOMP }; /* ps.compress */
enum { HIST_DELAYS = 64 };

typedef struct ps_msg {
    int32_t kind, flags;
    int64_t clock;                 /* FETCH: the clock wanted (sync); PUSH: the model's clock */
    int64_t count;                 /* entries that follow */
} ps_msg;

typedef struct ps_state {
    int sync, S, sup, W, R;        /* sup: the supervisor's rank, -1 none */
    int compress;                  /* C_* */
    size_t *lo;                    /* (S + 1) range bounds: server s holds [lo[s], lo[s+1]) */
    int64_t budget;                /* server clock at which the run ends */
    MPI_Comm comm;
    int role;
    float ckpt[6];                 /* clock, dropped, stop-at as (hi, lo) floats */

    /* server */
    int64_t clock, dropped, stop_at;
    int64_t ckpt_at;               /* clock of the next periodic checkpoint; -1 none */
    int pausing, npaused, told_sup; /* a checkpoint is due: clients paused; supervisor told */
    int nc, open;                  /* clients (supervisor, workers); those not done */
    ps_msg *head;                  /* (nc) one posted header receive per client */
    MPI_Request *hreq;             /* (nc) */
    char *paused;                  /* (nc) */
    size_t m;                      /* range length */
    char *inbox;                   /* one request */
    size_t inbox_bytes;
    float *g;                      /* (m) the update being applied */
    float *slots;                  /* sync: (W, m) this clock's gradients */
    char *have;                    /* sync: (W) */
    int nhave;
    int64_t *want;                 /* sync: (W) clock a waiting fetch wants; -1 none */
    float *scale;                  /* adacomp: (m) */
    uint32_t *touched;             /* a sparse push: its indices (m) */
    float *tval;                   /* and values (m) */
    size_t ntouched;
    dt_staleness *stale;
    double hist_delay[HIST_DELAYS + 1]; /* pushes by delay d (last bin: d >= HIST_DELAYS) */
    double *hist_queue;            /* (clients + 1) requests ready per wait, by count */

    /* worker; pause: a periodic checkpoint is due (supervisor too) */
    int fetched, stop_sent, ended, pause;
    int64_t first_want;            /* sync: the clock the first fetch after a pause wants */
    MPI_Request fin;               /* supervisor: server 0's end message */
    int64_t seen_clock;            /* clock of the model in params */
    float *acc;                    /* (n) gradients summed since the last push */
    float *residual;               /* (n) topk, adacomp-chen: what was not sent yet */
    dt_segment *seg;
    int nseg;
    uint32_t *idx;
    float *val;
    char **out;                    /* (S) push buffers */
    char **rep;                    /* (S) reply buffers */
    MPI_Request *reqs;             /* (2 S) */
    MPI_Status *sts;               /* (2 S) */

    /* supervisor */
    double *curve[4];              /* wall, clock, loss, accuracy */
    int64_t npoints, cap;
} ps_state;

/* Steps of each worker at server clock c: a clock tick is one global step
 * (sync) or one push of push_every steps by one of the W workers (async). */
double ps_worker_steps_at(const struct dt_trainer *t, const ps_state *s, int64_t c);
/* The learning rate at server clock c; an epoch is every worker's shard once. */
float ps_lr_at(struct dt_trainer *t, const ps_state *s, int64_t c);
/* The roles' loops (run until the run ends; a server and the supervisor
 * return after the last client is done). */
void ps_server_run(struct dt_trainer *t);
void ps_worker_step(struct dt_trainer *t);
void ps_supervisor_run(struct dt_trainer *t);

#endif
