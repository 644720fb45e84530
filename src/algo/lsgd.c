/* Leader SGD (Teng et al., NeurIPS 2019; doc/references.md, LSGD). Ranks form groups
 * of lsgd.group_size consecutive ranks (default: the ranks of one node). Each
 * step is local SGD followed by pulls towards the last broadcast leaders,
 * global first:
 *   x <- x - (p_g / tau_g) (x - xg),   then, with groups, x <- x - (p_l / tau_l) (x - xl)
 * A distributed step comes after ranks * tau_l local steps in total, counted
 * by rounds of a non-blocking sum that no rank holds (comm/gcount.h; a fast
 * rank does more of the steps, a rank's place in the group gives it none):
 * every rank contributes the running mean of its last lsgd.loss_window
 * losses; the lowest (ties: lowest rank) of each group is its local leader,
 * broadcast in the group, x <- (1 - c_l) x + c_l xl; every tau_g / tau_l
 * distributed steps the lowest overall is the global leader, broadcast to
 * all, x <- (1 - c_g) x + c_g xg. With one group, or tau_l = tau_g, only the
 * global leader exists. The pull targets stay the broadcast leaders between
 * distributed steps (never an average). A signal, the end of the budget and
 * run.checkpoint_every take effect at the round of the count where every
 * rank learns of them together. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/lsgd.h"
#include "comm/gcount.h"
#include "core/error.h"
#include "io/runlog.h"
#include "engine/engine.h"

typedef struct lsgd_state {
    MPI_Comm comm, group;      /* all ranks (a duplicate); this rank's group */
    dt_gcount gc;              /* the group's local steps, and stop requests */
    int gsize, grank, ngroups, has_local, global_every;
    float *xl, *xg;            /* (n) the last broadcast local and global leaders */
    double *losses;            /* (window) the last minibatch losses */
    int64_t nloss;
    int64_t dsteps, count;     /* distributed steps done; the count last seen */
    float ckpt[6];             /* checkpoint: dsteps, count, losses seen as (hi, lo) */
    /* rank 0: per distributed step, for the record */
    double *rec[4];            /* count, global leader, local leader of group 0, pull */
    int64_t nrec, cap;
} lsgd_state;

static const char *const rec_names[4] = { "count", "global_leader", "local_leader0",
                                          "pull_distance" };

int lsgd_leader(const double *loss, int first, int count)
{
    int best = first;
    for (int r = first + 1; r < first + count; r++)
        if (loss[r] < loss[best])
            best = r; /* strict: a tie keeps the lower rank */
    return best;
}

static int group_size_of(const dt_config *cfg, int nranks, MPI_Comm comm)
{
    if (cfg->lsgd.group_size > 0)
        return (int)cfg->lsgd.group_size;
    if (comm == MPI_COMM_NULL)
        return nranks;
    MPI_Comm node;
    int n;
    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &n));
    MPI_CHECK(MPI_Comm_free(&node));
    return n;
}

static int lsgd_check(const dt_config *cfg, int nranks)
{
    const int64_t gs = cfg->lsgd.group_size;
    if (gs > 0 && nranks % gs != 0)
        return dt_err_set("lsgd.group_size = %lld does not divide the %d ranks into equal groups",
                          (long long)gs, nranks);
    if (cfg->lsgd.tau_global < cfg->lsgd.tau_local)
        return dt_err_set("lsgd.tau_global = %lld is shorter than lsgd.tau_local = %lld: the "
                          "global leader is broadcast every tau_global / tau_local distributed "
                          "steps", (long long)cfg->lsgd.tau_global, (long long)cfg->lsgd.tau_local);
    return 0;
}

static void lsgd_setup(dt_trainer *t)
{
    lsgd_state *s = dt_calloc(1, sizeof *s);
    const dt_config *c = t->cfg;
    MPI_CHECK(MPI_Comm_dup(t->comm, &s->comm));
    s->gsize = group_size_of(c, t->nranks, t->comm);
    if (t->nranks % s->gsize != 0) /* node sizes differ */
        s->gsize = t->nranks;
    s->ngroups = t->nranks / s->gsize;
    s->has_local = s->ngroups > 1 && c->lsgd.tau_local != c->lsgd.tau_global;
    s->global_every = s->has_local ? (int)(c->lsgd.tau_global / c->lsgd.tau_local) : 1;
    MPI_CHECK(MPI_Comm_split(t->comm, t->rank / s->gsize, t->rank, &s->group));
    MPI_CHECK(MPI_Comm_rank(s->group, &s->grank));
    gcount_init(&s->gc, s->comm, 0);
    s->xl = dt_falloc(t->n);
    s->xg = dt_falloc(t->n);
    memcpy(s->xl, t->params, t->n * sizeof(float)); /* every replica starts equal */
    memcpy(s->xg, t->params, t->n * sizeof(float));
    s->losses = dt_calloc((size_t)c->lsgd.loss_window, sizeof *s->losses);
    t->algo_state = s;
    if (t->rank == 0)
        printf("lsgd: %d group(s) of %d rank(s), %s leader, distributed step every %lld local "
               "steps in total\n", s->ngroups, s->gsize, s->has_local ? "local and global" :
               "global", (long long)(c->lsgd.tau_local * t->nranks));
}

/* x <- (1 - c) x + c y */
static void pull_to(float *x, const float *y, size_t n, float c)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (1.0f - c) * x[i] + c * y[i];
}

static void distributed_step(dt_trainer *t, lsgd_state *s)
{
    const dt_config *c = t->cfg;
    double t0 = trainer_clock();
    int64_t w = s->nloss < c->lsgd.loss_window ? s->nloss : c->lsgd.loss_window;
    double mine[2] = { 0, 0 };
    for (int64_t i = 0; i < w; i++)
        mine[0] += s->losses[i] / (double)w;
    if (w == 0)
        mine[0] = 1e300; /* no loss yet: never the leader */
    for (size_t i = 0; i < t->n; i++)
        mine[1] += ((double)t->params[i] - s->xg[i]) * ((double)t->params[i] - s->xg[i]);
    double *all = dt_malloc(2 * (size_t)t->nranks * sizeof *all);
    MPI_CHECK(MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, s->comm));
    double *loss = dt_malloc((size_t)t->nranks * sizeof *loss), pull = 0;
    for (int r = 0; r < t->nranks; r++) {
        loss[r] = all[2 * r];
        pull += sqrt(all[2 * r + 1]) / t->nranks;
    }
    s->dsteps++;
    int first = (t->rank / s->gsize) * s->gsize;
    int local = lsgd_leader(loss, first, s->gsize), global = lsgd_leader(loss, 0, t->nranks);
    if (s->has_local) {
        if (t->rank == local)
            memcpy(s->xl, t->params, t->n * sizeof(float));
        MPI_CHECK(MPI_Bcast(s->xl, (int)t->n, MPI_FLOAT, local - first, s->group));
        pull_to(t->params, s->xl, t->n, (float)c->lsgd.c_local);
        t->meter.bytes_sent += t->rank == local ? (int64_t)(t->n * sizeof(float)) : 0;
    }
    if (!s->has_local || s->dsteps % s->global_every == 0) {
        if (t->rank == global)
            memcpy(s->xg, t->params, t->n * sizeof(float));
        MPI_CHECK(MPI_Bcast(s->xg, (int)t->n, MPI_FLOAT, global, s->comm));
        pull_to(t->params, s->xg, t->n, (float)c->lsgd.c_global);
        t->meter.bytes_sent += t->rank == global ? (int64_t)(t->n * sizeof(float)) : 0;
    }
    if (t->rank == 0) {
        if (s->nrec == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 64;
            for (int k = 0; k < 4; k++)
                s->rec[k] = dt_realloc(s->rec[k], (size_t)s->cap * sizeof(double));
        }
        double v[4] = { (double)s->count, global, lsgd_leader(loss, 0, s->gsize), pull };
        for (int k = 0; k < 4; k++)
            s->rec[k][s->nrec] = v[k];
        s->nrec++;
    }
    free(all);
    free(loss);
    t->meter.t_comm += trainer_clock() - t0;
}

static void lsgd_step(dt_trainer *t)
{
    lsgd_state *s = t->algo_state;
    const dt_config *c = t->cfg;
    double before = t->meter.loss_sum;
    trainer_gradient(t, t->params);
    s->losses[s->nloss++ % c->lsgd.loss_window] = t->meter.loss_sum - before;
    trainer_update(t, t->params);
    pull_to(t->params, s->xg, t->n, (float)(c->lsgd.p_global / (double)c->lsgd.tau_global));
    if (s->has_local)
        pull_to(t->params, s->xl, t->n, (float)(c->lsgd.p_local / (double)c->lsgd.tau_local));
}

static int lsgd_progress(dt_trainer *t, int stop_local, double *global_steps)
{
    lsgd_state *s = t->algo_state;
    const dt_config *c = t->cfg;
    const int64_t per = c->lsgd.tau_local * t->nranks;
    const int64_t budget = t->total_steps * t->nranks;
    double t0 = trainer_clock();
    int round = gcount_poll(&s->gc, 1, stop_local);
    t->meter.t_comm += trainer_clock() - t0;
    for (;;) {
        if (!round) {
            int64_t next = gcount_next_multiple(&s->gc, c->run.checkpoint_every);
            if ((s->dsteps + 1) * per < next)
                next = (s->dsteps + 1) * per;
            if (budget < next)
                next = budget;
            double t1 = trainer_clock();
            round = gcount_hold(&s->gc, next);
            t->meter.t_wait += trainer_clock() - t1;
        }
        if (!round) {
            *global_steps = (double)s->count / t->nranks;
            return ALGO_GO;
        }
        s->count = s->gc.total;
        *global_steps = (double)s->count / t->nranks;
        if (s->gc.stop)
            return ALGO_STOP;
        /* every rank runs the same distributed steps: those due at or before
         * the budget, in order, at the same round of the count */
        while ((s->dsteps + 1) * per <= s->count && (s->dsteps + 1) * per <= budget)
            distributed_step(t, s);
        if (s->count >= budget)
            return ALGO_END;
        if (gcount_crossed(&s->gc, c->run.checkpoint_every))
            return ALGO_CHECKPOINT;
        round = 0; /* no event: hold again while this rank's steps are uncounted */
    }
}

/* Before the end or a checkpoint: the steps not yet counted join the count. */
static void lsgd_finish(dt_trainer *t)
{
    lsgd_state *s = t->algo_state;
    gcount_settle(&s->gc);
    s->count = s->gc.total;
    ckpt_count_put(s->dsteps, s->ckpt);
    ckpt_count_put(s->count, s->ckpt + 2);
    ckpt_count_put(s->nloss, s->ckpt + 4);
}

static const float *lsgd_model(dt_trainer *t) { return t->params; }

static int lsgd_state_arrays(dt_trainer *t, dt_ckpt_array *out, int max)
{
    lsgd_state *s = t->algo_state;
    if (max < 3)
        DT_FATAL("lsgd: no room for its checkpoint arrays");
    /* On another rank count: the global leader is broadcast to every rank,
     * so old rank 0's row is every old rank's; a local leader belongs to a
     * group of the old grouping (lsgd_resumed sets it); the distributed
     * steps and the settled count are the same on every old rank. */
    out[0] = (dt_ckpt_array){ "lsgd_local_leader", s->xl, t->n, DT_CKPT_FRESH };
    out[1] = (dt_ckpt_array){ "lsgd_global_leader", s->xg, t->n, DT_CKPT_ROW0 };
    out[2] = (dt_ckpt_array){ "lsgd_counters", s->ckpt, 6, DT_CKPT_ROW0 };
    return 3;
}

/* On another rank count (t->elastic_from ranks wrote the checkpoint):
 * every rank starts from the old global leader's model, which is also its
 * local leader in the groups setup formed for the new count, until the next
 * distributed step elects both anew. The group's steps per rank carry over,
 * so the count of all ranks' local steps is scaled to the new count; the
 * distributed steps done, dsteps * tau_local steps per rank, carry over
 * unchanged, and the next is due after tau_local more per rank. */
static void lsgd_resumed(dt_trainer *t)
{
    lsgd_state *s = t->algo_state;
    s->dsteps = ckpt_count_get(s->ckpt);
    s->count = ckpt_count_get(s->ckpt + 2);
    s->nloss = 0; /* the loss window refills */
    int64_t most = s->count;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, s->comm));
    if (t->elastic_from) {
        const double per_rank = (double)most / t->elastic_from;
        most = llround(per_rank * t->nranks);
        t->step = llround(per_rank);
        t->global_step = per_rank;
        memcpy(t->params, s->xg, t->n * sizeof(float));
        memcpy(s->xl, s->xg, t->n * sizeof(float));
    }
    s->count = s->gc.total = s->gc.before = most;
}

static void lsgd_record(dt_trainer *t, dt_runlog *log)
{
    lsgd_state *s = t->algo_state;
    const double *cols[4] = { s->rec[0], s->rec[1], s->rec[2], s->rec[3] };
    runlog_write_series(log, "lsgd", 0, s->nrec, 4, rec_names, cols);
}

static void lsgd_teardown(dt_trainer *t)
{
    lsgd_state *s = t->algo_state;
    gcount_free(&s->gc);
    MPI_CHECK(MPI_Comm_free(&s->group));
    MPI_CHECK(MPI_Comm_free(&s->comm));
    free(s->xl);
    free(s->xg);
    free(s->losses);
    for (int k = 0; k < 4; k++)
        free(s->rec[k]);
    free(s);
    t->algo_state = NULL;
}

const dt_algo algo_lsgd = {
    .name = "lsgd",
    .summary = "leader SGD: local steps pulled towards the last broadcast local and global "
               "leaders (lowest running loss); distributed steps by a step count of non-blocking sums",
    .decentralized = 1,
    .async = 1,
    .check = lsgd_check,
    .elastic = DT_ELASTIC_LEADER,
    .elastic_note = "the groups are formed anew for the new rank count with that model as "
                    "their local leader, the leaders are elected anew at the next distributed "
                    "step (the loss windows refill); the distributed steps done carry over",
    .setup = lsgd_setup,
    .step = lsgd_step,
    .model = lsgd_model,
    .state = lsgd_state_arrays,
    .progress = lsgd_progress,
    .finish = lsgd_finish,
    .resumed = lsgd_resumed,
    .record = lsgd_record,
    .teardown = lsgd_teardown,
};
