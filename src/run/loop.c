/* The run of one rank group: setup in the order the pieces need, then the
 * synchronous or the asynchronous loop around the algorithm's step, the
 * final evaluation and checkpoint, and the record's close. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/dispatch.h"
#include "core/error.h"
#include "core/watchdog.h"
#include "run/roles.h"
#include "run/stop.h"
#include "run/run_int.h"
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#endif

/* ---- agreement: every rank leaves with the same verdict ------------------ */

/* Returns 0 if every rank's status is 0; otherwise -1 everywhere. A failing
 * rank prints its own message only if it is the lowest failing rank, so the
 * job log shows the cause once. */
static int agree(MPI_Comm comm, int rank, int status, const char *what)
{
    int mine = status ? rank : 1 << 30, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
    if (first == 1 << 30)
        return 0;
    if (first == rank)
        fprintf(stderr, "dtrain: %serror on rank %d: %s%s%s\n", trainer_group_tag, rank, what,
                *what ? ": " : "", dt_err_msg());
    return -1;
}

/* FNV-1a over the parameter bytes: equal on every rank iff (with
 * overwhelming probability) the replicas are identical bit for bit. */
static int replicas_identical(dt_trainer *t)
{
    const unsigned char *p = (const unsigned char *)engine_on_host(t, 0, t->params, t->n);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < t->n * sizeof(float); i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    uint64_t lo, hi;
    MPI_CHECK(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, t->comm));
    MPI_CHECK(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, t->comm));
    return lo == hi;
}

/* run.test_delay_ms on run.test_delay_rank: a slow worker, for tests. */
static void test_delay(const dt_trainer *t)
{
    const dt_config *c = t->cfg;
    if (c->run.test_delay_ms > 0 && t->rank == c->run.test_delay_rank)
        nanosleep((&(struct timespec){ c->run.test_delay_ms / 1000,
                                      (c->run.test_delay_ms % 1000) * 1000000L }), NULL);
}

/* Asynchronous modes: no collective until the budget is spent, a signal
 * stops the run or run.checkpoint_every of the group's steps are done (the
 * algorithm's count tells every rank at the same round). The learning rate
 * follows the group's step count; /train rows are kept in memory and written
 * together at each checkpoint and at the end (a collective write per
 * interval would make every rank wait for the slowest), and so are the
 * per-rank evaluations of run.eval_every; the collective evaluation
 * (averaged model, consensus) runs once, at the end. A periodic checkpoint
 * takes the signal's path: the algorithm completes its exchanges in flight,
 * one collective write, then the exchanges start again. A NaN or Inf in
 * the loss (run.check_finite) raises the algorithm's stop flag like a
 * signal. Returns 0, DT_EXIT_REQUEUE, DT_EXIT_NONFINITE, or 1 (a checkpoint
 * could not be written). */
static int async_loop(dt_trainer *t, dt_runlog *log)
{
    const dt_config *c = t->cfg;
    dt_train_row *rows = NULL;
    int64_t nrows = 0, cap = 0;
    double global = (double)t->step, last_print = trainer_clock();
    /* run.eval_every: each rank tests its own model every eval_every of its
     * own steps, with no collective; the rows wait in memory like /train's.
     * In the parameter-server modes the workers test the model they last
     * fetched; servers and the supervisor have no steps of their own (the
     * supervisor draws the servers' model by their clock instead). */
    const int64_t eval_every = t->roles->mine == ROLE_WORKER ? c->run.eval_every : 0;
    dt_eval_row *evals = NULL;
    int64_t nevals = 0, ecap = 0;
    int end = ALGO_GO, status = 0;
    while (end == ALGO_GO) {
        t->lr = trainer_lr_at(t, global);
        t->algo->step(t);
        t->step++;
        test_delay(t);
        if (c->run.check_finite && !isfinite(t->meter.loss_sum)) {
            char what[64];
            snprintf(what, sizeof what, "the training loss is %g", t->meter.loss_sum);
            nonfinite_note(t->step, what);
        }
        /* a NaN or Inf stops the group like a signal, through the mode's own
         * stop flag, within a step; the group then agrees on the status */
        end = t->algo->progress(t, stop_poll() | (nonfinite_seen() ? 2 : 0), &global);
        /* every role ends with a row at its last step (a server's step is
         * its clock and may jump past a multiple of log_every) */
        if (t->step % c->run.log_every == 0 ||
            (end != ALGO_GO && (nrows == 0 || rows[nrows - 1].step != t->step))) {
            if (nrows == cap) {
                cap = cap ? 2 * cap : 64;
                rows = dt_realloc(rows, (size_t)cap * sizeof *rows);
            }
            rows[nrows++] = record_take_row(t);
            if (t->rank == 0 && trainer_clock() - last_print > 2.0) {
                const dt_train_row *r = &rows[nrows - 1];
                double busy = r->compute_time + r->comm_time + r->wait_time;
                say("step %.0f/%lld (the group's, per rank)  rank 0: step %lld  loss %.4f  "
                    "acc %.2f%%  exchange wait %.0f%%\n", global, (long long)t->total_steps,
                    (long long)t->step, r->loss, 100 * r->accuracy,
                       busy > 0 ? 100 * r->wait_time / busy : 0.0);
                fflush(stdout);
                last_print = trainer_clock();
            }
        }
        if (eval_every > 0 && end == ALGO_GO && t->step % eval_every == 0) {
            if (nevals == ecap) {
                ecap = ecap ? 2 * ecap : 16;
                evals = dt_realloc(evals, (size_t)ecap * sizeof *evals);
            }
            /* step and epoch: the group's progress at this moment */
            dt_eval_row *e = &evals[nevals++];
            *e = (dt_eval_row){ .step = llround(global),
                                .epoch = global / (double)t->steps_per_epoch,
                                .wall = trainer_clock() - t->wall_start };
            trainer_evaluate(t, t->algo->model(t), &e->loss, &e->accuracy);
        }
        if (end == ALGO_CHECKPOINT) {
            t->algo->finish(t); /* exchanges completed; the count settled */
            t->global_step = global;
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t->global_step, 1, MPI_DOUBLE, MPI_MAX,
                                    t->comm));
            if ((status = ckpt_save(t)) != 0)
                break;
            /* the rows after the checkpoint they belong to: a resume from it
             * keeps them, and a kill before it leaves none twice */
            record_flush_rows(t, log, &rows, &nrows, &cap, evals, &nevals);
            if (t->algo->restart)
                t->algo->restart(t);
            end = ALGO_GO;
        }
    }
    t->algo->finish(t);
    /* roles may end differently (a parameter server ends when its workers
     * do): the group ends as one */
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &end, 1, MPI_INT, MPI_MAX, t->comm));
    /* a non-finite loss anywhere: the one line, and status 3 for all (a
     * failed periodic checkpoint has already agreed on its own status) */
    int nf = status == 0 && c->run.check_finite ? nonfinite_agree(t) : 0;
    if (end == ALGO_STOP && !nf && t->rank == 0)
        say("signal received: checkpointing and exiting with status %d for requeue\n",
               DT_EXIT_REQUEUE);
    record_flush_rows(t, log, &rows, &nrows, &cap, evals, &nevals);
    free(rows);
    free(evals);
    t->global_step = global;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t->global_step, 1, MPI_DOUBLE, MPI_MAX, t->comm));
    int64_t steps[2] = { t->step, -t->step };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, steps, 2, MPI_INT64_T, MPI_MAX, t->comm));
    if (t->rank == 0)
        say("asynchronous run ended: local steps per rank from %lld to %lld\n",
               (long long)-steps[1], (long long)steps[0]);
    if (status != 0)
        return status;
    if (nf)
        return DT_EXIT_NONFINITE;
    return end == ALGO_STOP ? DT_EXIT_REQUEUE : 0;
}

/* Synchronous modes: every rank runs the same steps; logging, evaluation
 * and checkpoints are collective at fixed steps. Returns 0, 1 (replicas
 * differ under run.check_replicas) or DT_EXIT_REQUEUE. */
static int sync_loop(dt_trainer *t, dt_runlog *log, double *mean_acc, int64_t *last_eval)
{
    const dt_config *cfg = t->cfg;
    const int64_t eval_every = cfg->run.eval_every > 0 ? cfg->run.eval_every : t->steps_per_epoch;
    double last_wall = trainer_clock() - t->wall_start;
    int64_t last_images = t->meter.images;
    int status = 0;
    /* The group agrees on the step to stop at: the flags of stop_poll (this
     * rank's signal, or a signal anywhere in the job) are combined by an
     * MPI_Iallreduce over the group started at one step boundary and
     * completed at the next (it has had a whole step to finish), so every
     * rank of the group decides at the same step. */
    /* Bit 1 of the flags: a signal; bit 2: a NaN or Inf seen by this rank
     * (run.check_finite), so every rank stops within one step of it. */
    int stop_local = 0, stop_any = 0;
    MPI_Request stop_req = MPI_REQUEST_NULL;
    while (t->step < t->total_steps) {
        watchdog_phase("the step-boundary agreement (a collective over the group)", -1);
        if (stop_req != MPI_REQUEST_NULL)
            MPI_CHECK(MPI_Wait(&stop_req, MPI_STATUS_IGNORE));
        int any = stop_any;
        stop_local = stop_poll() | (nonfinite_seen() ? 2 : 0);
#ifndef DTRAIN_SIM
        MPI_CHECK(MPI_Iallreduce(&stop_local, &stop_any, 1, MPI_INT, MPI_BOR, t->comm, &stop_req));
#else
        (void)stop_local;
#endif /* the simulator computes no loss and gets no signal, so the agreement is
        * left out: SMPI's MPI_Iallreduce sends a message between every pair of
        * ranks (65 k per step at 256 ranks, most of a simulation's wall time),
        * while the real one is a few latencies hidden behind a step's compute */
        if (any & 2) {
            status = nonfinite_agree(t);
            break;
        }
        if (any) {
            if (t->rank == 0)
                say("signal received: checkpointing at step %lld and exiting with status %d "
                       "for requeue\n", (long long)t->step, DT_EXIT_REQUEUE);
            status = DT_EXIT_REQUEUE;
            break;
        }
        t->lr = trainer_lr_at(t, (double)t->step);
        t->algo->step(t);
        t->step++;
        watchdog_beat(t->step);
        /* the budget spent: what is in flight joins the final model before
         * its evaluation and checkpoint (not at a stop signal) */
        if (t->step == t->total_steps && t->algo->finish)
            t->algo->finish(t);
        if (cfg->run.check_finite && !isfinite(t->meter.loss_sum)) {
            char what[64];
            snprintf(what, sizeof what, "the training loss is %g", t->meter.loss_sum);
            nonfinite_note(t->step, what);
        }
        if (cfg->run.check_replicas && !DT_SIMULATED &&
            (!t->algo->replicas_equal || t->algo->replicas_equal(t)) && !replicas_identical(t)) {
            if (t->rank == 0)
                fprintf(stderr, "dtrain: %serror: run.check_replicas: the replicas differ after "
                                "step %lld\n", trainer_group_tag, (long long)t->step);
            status = 1;
            break;
        }
        if (t->step % cfg->run.log_every == 0 || t->step == t->total_steps) {
            watchdog_phase("a collective (the training log)", -1);
            record_log_train(t, log, &last_wall, &last_images);
            if (cfg->run.check_finite && !DT_SIMULATED) {
                nonfinite_scan_state(t);
                if ((status = nonfinite_agree(t)) != 0)
                    break;
            }
        }
        if (t->step % eval_every == 0 || t->step == t->total_steps) {
            eval_run(t, log, trainer_clock() - t->wall_start, mean_acc);
            *last_eval = t->step;
        }
        if (cfg->run.checkpoint_every > 0 && t->step % cfg->run.checkpoint_every == 0 &&
            t->step < t->total_steps && (status = ckpt_save(t)) != 0)
            break;
        test_delay(t);
    }
    if (stop_req != MPI_REQUEST_NULL)
        MPI_CHECK(MPI_Wait(&stop_req, MPI_STATUS_IGNORE));
    return status;
}

static dt_transport *transport_create(dt_trainer *t, const dt_config *cfg, MPI_Comm comm)
{
    if (strcmp(cfg->comm.transport, "nccl") != 0)
        return transport_mpi_create(comm);
    /* the modes built on one-sided MPI or a communication thread keep MPI
     * (host staging): dt_algo.nccl */
    if (!t->algo->nccl) {
        if (t->rank == 0)
            say("comm.transport = nccl: mode %s exchanges over one-sided MPI or a "
                "communication thread; its vectors go over MPI\n", cfg->algorithm.mode);
        return transport_mpi_create(comm);
    }
#ifdef HAVE_NCCL
    return transport_nccl_create(comm, (double)cfg->comm.nccl_timeout);
#else
    DT_FATAL("comm.transport = nccl in a build without NCCL (run/device.c lets none through)");
#endif
}

/* The algorithm's state, then the engine's. */
static void trainer_free(dt_trainer *t)
{
    if (t->algo && t->algo->teardown && t->algo_state)
        t->algo->teardown(t);
    engine_free(t);
}

/* The rank's place in the group and the settings the engine reads first. */
static void trainer_init(dt_trainer *t, const dt_group *g, const dt_roles *roles, MPI_Comm comm)
{
    const dt_config *cfg = &g->cfg;
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->comm = comm;
    MPI_CHECK(MPI_Comm_rank(comm, &t->rank));
    MPI_CHECK(MPI_Comm_size(comm, &t->nranks));
    t->roles = roles;
    t->poll_stop = stop_poll;
    /* servers and the supervisor train nothing: they carry worker 0's shard */
    t->worker = roles->mine == ROLE_WORKER ? roles->index : 0;
    t->nworkers = 0;
    for (int i = 0; i < roles->nranks; i++)
        t->nworkers += roles->role[i] == ROLE_WORKER;
    t->data.B = (int)cfg->optim.batch_size;
    t->meter.weight = 1.0f;
    backend_set_threads((int)cfg->compute.threads);
}

/* The mode by name and its own checks (the simulator's too): 0, or -1 after
 * dt_err_set(). */
static int mode_check(dt_trainer *t)
{
    const dt_config *cfg = t->cfg;
    t->algo = algo_find(cfg->algorithm.mode);
    if (!t->algo || t->algo->check(cfg, t->nranks) != 0)
        return -1;
    if (t->algo->variant && t->algo->variant(cfg))
        t->algo = t->algo->variant(cfg);
#ifdef DTRAIN_SIM
    if (t->algo->thread) {
        /* SMPI runs every simulated rank in one OS thread */
        static char simulated[512];
        simulated[0] = '\0';
        for (int i = 0; algo_table[i]; i++)
            if (!algo_table[i]->thread)
                snprintf(simulated + strlen(simulated), sizeof simulated - strlen(simulated),
                         "%s%s", simulated[0] ? ", " : "", algo_table[i]->name);
        return dt_err_set("algorithm.mode = %s is not simulated: %s, and SMPI cannot run an "
                          "application thread that calls MPI (simulated modes: %s)",
                          t->algo->name, t->algo->thread, simulated);
    }
    if (sim_check(cfg) != 0)
        return -1;
#endif
    return 0;
}

/* Collective: the engine (data, model, flat vectors, transport, optimizer)
 * and the step budget and schedules. 0, or 1 with every rank told why. */
static int engine_build(dt_trainer *t)
{
    const dt_config *cfg = t->cfg;
    MPI_Comm comm = t->comm;
    if (agree(comm, t->rank, data_setup(t), "") != 0 ||
        agree(comm, t->rank, engine_create_model(t), "") != 0)
        return 1;
    engine_alloc(t, t->algo->device_vectors);
#ifndef DTRAIN_SIM
    if (t->rank == 0 && t->model->be->device)
        printf("dtrain: flat vectors in %s\n",
               t->dev.vectors ? "device memory (parameters, gradient, optimizer state)"
                              : "host memory (copied to and from the device every step)");
#endif
    t->tp = transport_create(t, cfg, comm);
#ifndef DTRAIN_SIM
    /* NCCL takes device buffers; MPI gets them through host staging */
    if (t->dev.vectors && strcmp(t->tp->name, "nccl") != 0)
        t->tp = transport_staged_create(t->tp, t->model->be);
#endif
    /* one model for all: rank 0's parameters (doc/references.md, AllReduce SGD) */
    t->tp->bcast(t->tp, t->params, t->n, 0);
    if (agree(comm, t->rank, engine_create_optim(t), "") != 0 ||
        agree(comm, t->rank,
              schedule_init(&t->sched, cfg->optim.lr, cfg->optim.lr_scaling, t->data.B,
                            t->nworkers, cfg->optim.warmup_epochs, cfg->optim.decay_epochs,
                            cfg->optim.decay_factor), "") != 0)
        return 1;
    /* synchronous modes step together: every rank uses the smallest epoch */
    int64_t spe = data_steps_per_epoch(t);
    MPI_CHECK(MPI_Allreduce(&spe, &t->steps_per_epoch, 1, MPI_INT64_T, MPI_MIN, comm));
    if (t->steps_per_epoch < 1) {
        if (t->rank == 0)
            fprintf(stderr, "dtrain: %serror: data.samples_per_epoch = %lld is smaller than "
                            "optim.batch_size = %d: an epoch would have no step\n",
                    trainer_group_tag, (long long)cfg->data.samples_per_epoch, t->data.B);
        return 1;
    }
    t->total_steps = cfg->run.epochs * t->steps_per_epoch;
    if (cfg->run.max_steps > 0 && cfg->run.max_steps < t->total_steps)
        t->total_steps = cfg->run.max_steps;
    /* the cosine ends at optim.decay_steps, or at this budget (a resume
     * takes the end stored in its checkpoint) */
    int64_t cosine_end = cfg->optim.decay_steps > 0 ? cfg->optim.decay_steps
                         : t->total_steps > cfg->optim.warmup_steps ? t->total_steps
                         : cfg->optim.warmup_steps;
    if (agree(comm, t->rank,
              schedule_steps_init(&t->lsched, cfg->optim.schedule, t->sched.target,
                                  cfg->optim.min_lr, cfg->optim.warmup_steps, cosine_end),
              "") != 0)
        return 1;
    return 0;
}

/* run.resume: 1 if a checkpoint was restored, 0 for a fresh start, -1 after
 * rank 0 said why; skipped (len) gets what was passed over. */
static int run_resume(dt_trainer *t, char *skipped, size_t len)
{
    const dt_config *cfg = t->cfg;
    if (!cfg->run.resume)
        return 0;
    int resumed = ckpt_restore(t, skipped, len);
    if (resumed < 0) {
        if (t->rank == 0)
            fprintf(stderr, "dtrain: %serror: %s\n", trainer_group_tag, dt_err_msg());
        return -1;
    }
    if (!resumed && t->rank == 0)
        say("run.resume = true but %s/checkpoints holds no checkpoint: starting fresh\n",
               cfg->run.output_dir);
    return resumed;
}

/* Collective: the effective deck, the run record (path rec) with what a
 * resume passed over and the rank-count change, and rank 0's first line.
 * NULL with every rank told why. */
static dt_runlog *run_record_open(dt_trainer *t, const dt_group *g, int world_ranks, int resumed,
                                  const char *skipped, char *rec)
{
    const dt_config *cfg = t->cfg;
    if (t->rank == 0)
        record_write_deck(cfg->run.output_dir, g->effective);
    dt_runlog *log = record_open(t, g, world_ranks, resumed, rec);
    if (agree(t->comm, t->rank, log ? 0 : -1, rec) != 0)
        return NULL;
    if (skipped[0])
        runlog_note(log, "resume_skipped", skipped);
    /* what the CPU runs: the level, layouts and kernels (backend/cpu/dispatch.h) */
    const int on_cpu = strcmp(cfg->compute.device, "cpu") == 0;
    char compute[512];
    cpu_dispatch_describe(compute, sizeof compute);
    /* rank 0's (ranks on unlike nodes may differ; the record holds one) */
    MPI_CHECK(MPI_Bcast(compute, (int)sizeof compute, MPI_CHAR, 0, t->comm));
    if (on_cpu)
        runlog_note(log, "compute", compute);
    if (t->elastic_from) { /* the latest rank-count change and its rule */
        char how[1024];
        snprintf(how, sizeof how, "%d -> %d ranks at step %lld: %s", t->elastic_from,
                 t->nranks, (long long)t->step, ckpt_elastic_rule(t));
        runlog_note_i64(log, "resume_from_ranks", t->elastic_from);
        runlog_note(log, "elastic_rule", how);
    }
    if (t->rank == 0) {
        say("dtrain: mode %s, model %s (%zu parameters), %d rank(s), batch %d, "
               "%lld steps (%lld per epoch), output %s\n",
               cfg->algorithm.mode, cfg->model.name, t->n, t->nranks, t->data.B,
               (long long)t->total_steps, (long long)t->steps_per_epoch, cfg->run.output_dir);
        if (on_cpu)
            say("compute: %s\n", compute);
        fflush(stdout);
    }
    return log;
}

/* Collective: the training loop with its evaluations, the final checkpoint
 * and the algorithm's own series. Returns the exit status. */
static int run_train(dt_trainer *t, dt_runlog *log, int resumed, double *mean_acc)
{
    const dt_config *cfg = t->cfg;
    /* resumed from the final checkpoint (another group was signalled after
     * this one finished): the final evaluation is already in the record */
    int at_end = resumed && t->step >= t->total_steps;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &at_end, 1, MPI_INT, MPI_MIN, t->comm));
    int64_t last_eval = at_end ? t->step : -1;
    /* a resume on another rank count: the resumed model is evaluated at once
     * (a row at the resume step, after the old segment's: the averaged model,
     * and the consensus distance, 0 where every rank took the same model) */
    if (t->elastic_from && !at_end)
        eval_run(t, log, trainer_clock() - t->wall_start, mean_acc);
    /* asynchronous modes are not watched: their ranks make progress at their
     * own pace, a server without any step of its own */
    if (!t->algo->async)
        watchdog_start((double)cfg->run.stall_timeout, t->rank, trainer_group_tag);
    /* resumed at the end: the final model as the finished run had it */
    if (at_end && !t->algo->async && t->algo->finish)
        t->algo->finish(t);
    int status = t->algo->async ? async_loop(t, log) : sync_loop(t, log, mean_acc, &last_eval);
    if (status == 0 && last_eval != t->step)
        eval_run(t, log, trainer_clock() - t->wall_start, mean_acc);
    if (status == 0 || status == DT_EXIT_REQUEUE) {
        int s = ckpt_save(t);
        if (s != 0)
            status = s;
    }
    if (status != 1 && t->algo->record)
        t->algo->record(t, log);
    return status;
}

/* The most backend memory any rank of the group held at once, in MiB, on
 * rank 0 (collective over the group: every rank's compute.device is the
 * group's); -1 where the tensors live in host memory. */
static double device_peak_mib(const dt_trainer *t, MPI_Comm comm)
{
    const dt_config *cfg = t->cfg;
    if (strcmp(cfg->compute.device, "cuda") != 0 && !cfg->compute.test_device_memory)
        return -1;
    const dt_backend *be = t->model ? t->model->be : NULL;
    double mine = be && be->mem_peak ? (double)be->mem_peak() / 1048576.0 : 0.0, most = 0.0;
    MPI_CHECK(MPI_Reduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, 0, comm));
    return most;
}

/* Rank 0's last line of a finished run. */
static void run_report_done(const dt_trainer *t, double mean_acc, const char *rec)
{
    char steps[64];
    if (t->algo->async) /* rank 0's own count may be a server's clock */
        snprintf(steps, sizeof steps, "%.0f steps per rank (rank 0: %lld)", t->global_step,
                 (long long)t->step);
    else
        snprintf(steps, sizeof steps, "%lld steps", (long long)t->step);
    say("done: %s in %.1f s, final %s %.2f%% (mean over ranks); record %s\n", steps,
        trainer_clock() - t->wall_start,
        t->data.tokens ? "next-token accuracy" : "test accuracy", 100 * mean_acc, rec);
    fflush(stdout);
}

int run_group(const dt_group *g, const dt_roles *roles, int world_ranks, MPI_Comm comm,
              dt_run_result *res)
{
    const dt_config *cfg = &g->cfg;
    trainer_group_tag[0] = '\0';
    if (g->name[0])
        snprintf(trainer_group_tag, sizeof trainer_group_tag, "[%s] ", g->name);
    dt_trainer tr, *t = &tr;
    trainer_init(t, g, roles, comm);
    if (agree(comm, t->rank, mode_check(t), "") != 0)
        return 1;
    if (agree(comm, t->rank, record_prepare_output(cfg, t->rank), "") != 0)
        return 1;
    if (engine_build(t) != 0) {
        trainer_free(t);
        return 1;
    }
    if (t->algo->setup)
        t->algo->setup(t);

    t->wall_start = trainer_clock();
    ckpt_start(t);
    char skipped[8192] = "";
    int resumed = run_resume(t, skipped, sizeof skipped);
    if (resumed < 0) {
        trainer_free(t);
        return 1;
    }
    char rec[DT_PATH_MAX + 16];
    dt_runlog *log = run_record_open(t, g, world_ranks, resumed, skipped, rec);
    if (!log) {
        trainer_free(t);
        return 1;
    }

    double mean_acc = 0;
    int status = run_train(t, log, resumed, &mean_acc);
    watchdog_phase("writing the run record", -1);
#ifdef DTRAIN_SIM
    if (status == 0) {
        dt_sim_totals tot;
        simlog_totals(log, &tot);
        double steps = t->algo->async ? t->global_step : (double)t->step;
        int w = sim_write_record(comm, cfg->run.output_dir, cfg->algorithm.mode, (int64_t)t->n,
                                 roles->mine == ROLE_WORKER, steps, &tot);
        if (agree(comm, t->rank, w, "") != 0)
            status = 1;
    }
#endif
    runlog_close(log);
    /* done training: waiting for other rank groups is no stall */
    watchdog_stop();
    if (res)
        record_result(t, mean_acc, res);
    const double dev_mib = status == 0 ? device_peak_mib(t, comm) : -1;
    if (t->rank == 0 && status == 0) {
        run_report_done(t, mean_acc, rec);
        if (dev_mib >= 0)
            say("device memory: at most %.0f MiB held at once on a rank (every allocation of "
                "dtrain's on the device, its libraries' workspaces included; the CUDA context "
                "not)\n", dev_mib);
    }
    trainer_free(t);
    return status;
}
