/* Checkpoints: what a rank saves (parameters, the optimizer's state
 * vectors, the algorithm's arrays, and the counters and batch source's
 * position of resume_blob) and restores, and the NaN/Inf scan that keeps a
 * non-finite model out of them (run.check_finite). */
#include "config.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/watchdog.h"
#include "io/checkpoint.h"
#include "run/finite.h"
#include "run/roles.h"
#include "run/run_int.h"

/* The newest checkpoint this run wrote or resumed from, for messages. */
static char last_ckpt[DT_PATH_MAX + 64] = "";
/* Rank-count changes in this run's history (the data streams' era; the
 * checkpoints' elastic_resumes). */
static int64_t ckpt_era = 0;

/* Everything besides the float arrays that a bit-exact resume needs; the
 * first `resume_blob_len` bytes are stored (the image source's state keeps
 * the layout of every checkpoint so far: 32 + 24 bytes). */
typedef struct resume_blob {
    int64_t step;
    int64_t images;
    int64_t bytes_sent;
    double wall;
    unsigned char source[DT_SOURCE_STATE_MAX]; /* the training source's state */
    int64_t decay_steps;    /* optim.schedule = cosine: its end, fixed at the first start */
} resume_blob;

/* The fields stored: the source's state, then (cosine schedule) the end of
 * its decay, right after it. */
static __attribute__((unused)) size_t resume_blob_len(const dt_trainer *t)
{
    return offsetof(resume_blob, source) + (t->data.train ? t->data.train->ops->state_size : 0) +
           (t->lsched.kind == DT_LR_COSINE ? sizeof(int64_t) : 0);
}

static __attribute__((unused)) unsigned char *blob_decay(resume_blob *b, const dt_trainer *t)
{
    return b->source + (t->data.train ? t->data.train->ops->state_size : 0);
}

static void ckpt_dir(const dt_trainer *t, char *buf, size_t len)
{
    snprintf(buf, len, "%s/checkpoints", t->cfg->run.output_dir);
}

/* The model and the optimizer's state follow the family's rule on a resume
 * on another rank count; the algorithm's arrays carry their own. */
static int ckpt_arrays(dt_trainer *t, dt_ckpt_array *a, int max)
{
    const int e = t->algo->elastic;
    const int rule = e == DT_ELASTIC_REPLICATED ? DT_CKPT_ROW0
                     : e == DT_ELASTIC_SHARDED  ? DT_CKPT_ROW0
                     : e == DT_ELASTIC_AVERAGE  ? DT_CKPT_MEAN
                     : e == DT_ELASTIC_LEADER   ? DT_CKPT_FRESH /* the hook fills it */
                                                : DT_CKPT_PER_RANK;
    a[0] = (dt_ckpt_array){ "params", t->params, t->n, rule };
    int k = 1;
    k += optim_state_arrays(&t->opt, a + k, max - k);
    for (int i = 1; i < k; i++)
        a[i].rule = e == DT_ELASTIC_SHARDED  ? DT_CKPT_SUM
                    : e == DT_ELASTIC_LEADER ? DT_CKPT_MEAN
                                             : rule;
    if (t->algo->state)
        k += t->algo->state(t, a + k, max - k);
    return k;
}

const char *ckpt_elastic_rule(const dt_trainer *t)
{
    static char rule[1024];
    const char *family;
    switch (t->algo->elastic) {
    case DT_ELASTIC_REPLICATED:
        family = "replicated: every rank takes old rank 0's parameters and optimizer state";
        break;
    case DT_ELASTIC_AVERAGE:
        family = "average: every rank takes the mean of the old ranks' parameters and of "
                 "their optimizer state, the exchanges' own state as at a fresh start";
        break;
    case DT_ELASTIC_SHARDED:
        family = "sharded: the servers' model and optimizer state, put together from the old "
                 "servers' ranges, are cut anew for the new servers; the workers start by "
                 "fetching";
        break;
    case DT_ELASTIC_LEADER:
        family = "leader: every rank takes the old global leader's model (as last broadcast) "
                 "and the mean of the old ranks' optimizer state";
        break;
    default:
        return "none: this mode resumes only on the rank count that wrote its checkpoint";
    }
    snprintf(rule, sizeof rule, "%s; %s%sthe group's step and samples drawn carry over, the "
             "shards are cut anew and each rank's stream is reseeded from (seed, resume "
             "count, rank)", family, t->algo->elastic_note ? t->algo->elastic_note : "",
             t->algo->elastic_note ? "; " : "");
    return rule;
}

/* ckpt_arrays with host data: with device vectors each array's mirror,
 * filled from the backend when down is set. dev (NULL: not wanted) gets the
 * arrays themselves: a restore reads into the mirrors, then sends them to
 * dev's. (algo->state may fill its arrays as it is called: it is called
 * once per write or read.) */
static int ckpt_host_arrays(dt_trainer *t, dt_ckpt_array *a, int max, int down,
                            dt_ckpt_array *dev)
{
    int na = ckpt_arrays(t, a, max);
    for (int k = 0; k < na; k++) {
        if (dev)
            dev[k] = a[k];
        if (t->dev.vectors)
            a[k].data = down ? (float *)engine_on_host(t, k, a[k].data, a[k].n)
                             : engine_mirror(t, k, a[k].n);
    }
    return na;
}

#ifndef DTRAIN_SIM /* the simulator writes no checkpoints */
static dt_ckpt_meta ckpt_meta(const dt_trainer *t)
{
    dt_ckpt_meta m = { .step = t->step, .epoch = t->step / t->steps_per_epoch,
                       .nranks = t->nranks, .nparams = (int64_t)t->n, .elastic = ckpt_era };
    snprintf(m.model, sizeof m.model, "%s", t->cfg->model.name);
    snprintf(m.mode, sizeof m.mode, "%s", t->cfg->algorithm.mode);
    return m;
}
#endif

/* ---- non-finite values (run.check_finite) ---------------------------------- */

/* The first NaN/Inf this rank saw, kept until the group agrees to stop. */
static struct {
    int bad;
    int64_t step;
    char what[320];
} nonfinite;

void nonfinite_note(int64_t step, const char *what)
{
    if (nonfinite.bad)
        return;
    nonfinite.bad = 1;
    nonfinite.step = step;
    snprintf(nonfinite.what, sizeof nonfinite.what, "%s", what);
}

int nonfinite_seen(void) { return nonfinite.bad; }

/* Looks for NaN/Inf in the arrays a (na); notes the first. */
static void nonfinite_scan(dt_trainer *t, const dt_ckpt_array *a, int na)
{
    for (int i = 0; i < na && !nonfinite.bad; i++)
        if (finite_count_bad(a[i].data, a[i].n, NULL)) {
            char what[300];
            finite_describe(what, sizeof what, a[i].name, a[i].data, a[i].n);
            nonfinite_note(t->step, what);
        }
}

void nonfinite_scan_state(dt_trainer *t)
{
    dt_ckpt_array a[16];
    nonfinite_scan(t, a, ckpt_host_arrays(t, a, 16, 1, NULL));
}

int nonfinite_agree(dt_trainer *t)
{
    int mine = nonfinite.bad ? t->rank : 1 << 30, first;
    MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, t->comm));
    if (first == 1 << 30)
        return 0;
    if (first == t->rank) {
        fprintf(stderr, "dtrain: %snon-finite value at step %lld on rank %d: %s; every rank "
                        "stops at step %lld (exit status %d, run.check_finite); last good "
                        "checkpoint: %s\n",
                trainer_group_tag, (long long)nonfinite.step, t->rank, nonfinite.what,
                (long long)t->step, DT_EXIT_NONFINITE,
                last_ckpt[0] ? last_ckpt : "none written by this run");
        fflush(stderr);
    }
    return DT_EXIT_NONFINITE;
}

void ckpt_start(dt_trainer *t)
{
    last_ckpt[0] = '\0';
    ckpt_era = 0;
    t->elastic_from = 0;
    memset(&nonfinite, 0, sizeof nonfinite);
    if (t->rank == 0) {
        char dir[DT_PATH_MAX + 16];
        ckpt_dir(t, dir, sizeof dir);
#ifndef DTRAIN_SIM
        checkpoint_clean_partial(dir);
#endif
    }
}

/* ---- save and restore ------------------------------------------------------ */

int ckpt_save(dt_trainer *t)
{
#ifdef DTRAIN_SIM
    (void)t; /* the simulator writes no checkpoints (sim_check) */
    return 0;
#else
    char dir[DT_PATH_MAX + 16];
    ckpt_dir(t, dir, sizeof dir);
    dt_ckpt_array a[16];
    int na = ckpt_host_arrays(t, a, 16, 1, NULL);
    if (t->cfg->run.check_finite) {
        nonfinite_scan(t, a, na);
        if (nonfinite_agree(t) != 0)
            return DT_EXIT_NONFINITE;
    }
    watchdog_phase("checkpoint I/O", -1);
    resume_blob b;
    memset(&b, 0, sizeof b);
    b.step = t->step;
    b.images = t->meter.images;
    b.bytes_sent = t->meter.bytes_sent;
    b.wall = trainer_clock() - t->wall_start;
    if (t->data.prefetched) // the batch loaded ahead is loaded again after a resume
        memcpy(b.source, t->data.before_prefetch, sizeof b.source);
    else
        source_get_state(t->data.train, b.source);
    if (t->lsched.kind == DT_LR_COSINE)
        memcpy(blob_decay(&b, t), &t->lsched.decay, sizeof(int64_t));
    dt_ckpt_meta m = ckpt_meta(t);
    char written[DT_PATH_MAX + 64];
    if (checkpoint_write(t->comm, dir, &m, a, na, &b, resume_blob_len(t),
                         (int)t->cfg->run.checkpoint_keep, written, sizeof written) != 0) {
        fprintf(stderr, "dtrain: %srank %d: %s; %s%s\n", trainer_group_tag, t->rank, dt_err_msg(),
                last_ckpt[0] ? "intact: " : "no earlier checkpoint of this run",
                last_ckpt);
        fflush(stderr);
        return 1;
    }
    snprintf(last_ckpt, sizeof last_ckpt, "%s", written);
    watchdog_beat(-1);
    if (t->rank == 0) {
        if (t->algo->async) /* the file is named by rank 0's own step */
            say("checkpoint at the group's step %.0f (rank 0: step %lld) written to %s\n",
                t->global_step, (long long)t->step, dir);
        else
            say("checkpoint step %lld written to %s\n", (long long)t->step, dir);
        fflush(stdout);
    }
    return 0;
#endif
}

#ifndef DTRAIN_SIM
/* Appends "; " and text to the buffer s (len bytes), truncating. */
static void append(char *s, size_t len, const char *text)
{
    size_t used = strlen(s);
    if (used + 1 < len)
        snprintf(s + used, len - used, "%s%s", used ? "; " : "", text);
}
#endif

#ifndef DTRAIN_SIM
/* This rank's part of total split over nranks: the low ranks take the
 * remainder, so the parts add up to total. */
static int64_t share(int64_t total, int rank, int nranks)
{
    return total / nranks + (rank < total % nranks ? 1 : 0);
}

/* The group's samples drawn in the checkpoint being resumed on another
 * rank count (blobs_combine). */
static int64_t elastic_drawn;

/* The resume blob of a rank of a run on another rank count than the
 * checkpoint's nold (rows (nold, blob length) in old): the group's step and
 * wall clock from old rank 0 (the synchronous modes' ranks agree on both),
 * the counters of the meter split over the new ranks so their sum carries
 * over, and the samples the old ranks drew summed into elastic_drawn. */
static void blobs_combine(dt_trainer *t, const unsigned char *old, int nold, resume_blob *b)
{
    const size_t len = resume_blob_len(t);
    int64_t images = 0, bytes = 0;
    elastic_drawn = 0;
    for (int r = nold - 1; r >= 0; r--) { /* ends with row 0 in *b */
        memset(b, 0, sizeof *b);
        memcpy(b, old + (size_t)r * len, len);
        images += b->images;
        bytes += b->bytes_sent;
        elastic_drawn += source_state_drawn(t->data.train, b->source);
    }
    b->images = share(images, t->rank, t->nranks);
    b->bytes_sent = share(bytes, t->rank, t->nranks);
}
#endif

/* A checkpoint that cannot be used (truncated, damaged, written by another
 * model or mode, or by another rank count in a mode without an elastic rule:
 * dt_algo.elastic) is skipped for the next older one; rank 0
 * prints each skip, and `skipped` (the same on every rank) says what was
 * passed over and why, for the run record. */
int ckpt_restore(dt_trainer *t, char *skipped, size_t slen)
{
#ifdef DTRAIN_SIM
    (void)t, (void)slen; /* the simulator does not resume (sim_check) */
    skipped[0] = '\0';
    return 0;
#else
    char dir[DT_PATH_MAX + 16], path[DT_PATH_MAX + 64];
    ckpt_dir(t, dir, sizeof dir);
    skipped[0] = '\0';
    watchdog_phase("checkpoint I/O", -1);
    if (!checkpoint_find_latest(t->comm, dir, path, sizeof path))
        return 0;
    if (checkpoint_find_note()[0]) {
        append(skipped, slen, checkpoint_find_note());
        if (t->rank == 0)
            fprintf(stderr, "dtrain: %sresume: %s; trying the newest checkpoint file\n",
                    trainer_group_tag, checkpoint_find_note());
    }
    dt_ckpt_array a[16], dev[16];
    int na = ckpt_host_arrays(t, a, 16, 0, dev);
    dt_ckpt_meta want = ckpt_meta(t), got;
    resume_blob b;
    memset(&b, 0, sizeof b);
    unsigned char *old = NULL; /* (got.nranks, blob length): another rank count */
    while (checkpoint_read_elastic(t->comm, path, &want, &got, a, na, &b, resume_blob_len(t),
                                   t->algo->elastic != DT_ELASTIC_NONE ? &old : NULL) != 0) {
        /* the pointer to an older intact file is this loop's job */
        char why[2048];
        snprintf(why, sizeof why, "%s", dt_err_msg());
        char *tail = strstr(why, "; the previous checkpoint ");
        if (!tail)
            tail = strstr(why, "; no earlier intact checkpoint");
        if (tail)
            *tail = '\0';
        char line[DT_PATH_MAX + 2200];
        snprintf(line, sizeof line, "skipped %s: %s", path, why);
        append(skipped, slen, line);
        if (t->rank == 0) {
            fprintf(stderr, "dtrain: %sresume: %s\n", trainer_group_tag, line);
            fflush(stderr);
        }
        if (!checkpoint_find_older(t->comm, dir, path, path, sizeof path)) {
            dt_err_set("run.resume = true: no intact checkpoint of this run in %s (%s)", dir,
                       skipped);
            return -1;
        }
    }
    for (int k = 0; k < na && t->dev.vectors; k++)
        if (!(old && a[k].rule == DT_CKPT_FRESH)) /* not read: its mirror holds nothing */
            t->model->be->to_backend(dev[k].data, a[k].data, a[k].n * sizeof(float));
    snprintf(last_ckpt, sizeof last_ckpt, "%s", path);
    ckpt_era = got.elastic;
    if (old) {
        blobs_combine(t, old, (int)got.nranks, &b);
        free(old);
        t->elastic_from = (int)got.nranks;
        ckpt_era++;
    }
    t->step = b.step;
    /* asynchronous modes: the group's steps per rank, until the loop's own
     * estimate (the resumed hook may say better) */
    t->global_step = (double)t->step;
    if (t->algo->resumed)
        t->algo->resumed(t);
    t->meter.images = b.images;
    t->meter.bytes_sent = b.bytes_sent;
    t->wall_start = trainer_clock() - b.wall;
    if (ckpt_era > 0) /* the draws of this era: (seed, era, rank) */
        source_set_era(t->data.train, (uint64_t)ckpt_era);
    if (t->elastic_from) /* the workers draw: servers and a supervisor start at 0 */
        source_set_drawn(t->data.train, t->roles->mine == ROLE_WORKER
                                            ? share(elastic_drawn, t->worker, t->nworkers) : 0);
    else
        source_set_state(t->data.train, b.source);
    if (t->lsched.kind == DT_LR_COSINE && t->cfg->optim.decay_steps == 0) {
        int64_t d;
        memcpy(&d, blob_decay(&b, t), sizeof d);
        if (d < t->lsched.warmup) {
            dt_err_set("%s: the cosine schedule's stored end (step %lld) precedes "
                       "optim.warmup_steps = %lld", path, (long long)d, (long long)t->lsched.warmup);
            return -1;
        }
        t->lsched.decay = d; /* the end fixed when the run first started */
    }
    t->data.prefetched = 0;
    if (t->rank == 0) {
        if (t->elastic_from)
            say("resumed from %s at step %lld on %d ranks (written by %d; %lld samples drawn "
                "carried over): %s\n", path,
                t->algo->async ? llround(t->global_step) : (long long)t->step, t->nranks,
                t->elastic_from, (long long)elastic_drawn, ckpt_elastic_rule(t));
        else
            say("resumed from %s at step %lld\n", path, (long long)t->step);
        fflush(stdout);
    }
    return 1;
#endif
}
