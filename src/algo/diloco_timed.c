/* DiLoCo (algo/diloco.c) with time-bounded inner loops (diloco.inner_time
 * > 0): the step, the verdicts and the resume of its ops table, run by the
 * asynchronous loop.
 *
 * Each rank takes inner steps until inner_time seconds have passed since its
 * loop started (at least one step), then enters the exchange, a collective:
 * a fast rank waits there for the slowest once per loop, not once per step,
 * and every loop lasts about inner_time on every rank. With n_r the samples
 * (images, or tokens) rank r processed in the loop:
 *     (n_r, steps_r, stop_r) for every r <- one all-gather of 3 integers
 *     w_r   <- n_r / sum_j n_j                (the same floats on every rank)
 *     delta <- sum_r w_r delta_r              (fp32: one allreduce of w_r delta_r;
 *                                              bf16/int8 and top-k: each rank's
 *                                              decoded codes times w_r, added in
 *                                              rank order)
 *     the outer step, x_i <- theta            (algo/diloco.c)
 * The ranks' steps differ; the group's clock is S = sum_r steps_r as agreed
 * at the last exchange, S / R steps per rank (the learning rate's step in
 * between: S / R plus the rank's steps in the loop). The budget
 * (run.max_steps, run.epochs: steps per rank) ends the run at the first
 * exchange with S >= R budget, run.checkpoint_every checkpoints at those
 * where S / R passes one of its multiples, a stop signal stops it at the
 * exchange after one rank saw it: all on every rank at the same exchange,
 * right after it, with nothing in flight. The K warm-up steps are the same
 * on every rank, S = R t->step. The loop runs as the asynchronous modes'
 * (run/loop.c): /train rows per rank, run.eval_every by the rank's own
 * steps. A checkpoint holds S and the outer steps (diloco_clock); a resume
 * starts a new loop. */
#include <math.h>

#include "algo/algo.h"
#include "core/error.h"
#include "core/vec.h"
#include "engine/engine.h"
#include "algo/diloco_int.h"

/* A loop starts: its clock and sample count. */
static void loop_open(dt_trainer *t, diloco_state *s)
{
    s->loop_open = 1;
    s->loop_t0 = trainer_clock();
    s->loop_images = t->meter.images;
    s->loop_steps = 0;
}

/* The loop's end on this rank: the counts, the weights, the weighted
 * exchange and the outer step, the clock. */
static void timed_exchange(dt_trainer *t, diloco_state *s)
{
    const int R = t->nranks;
    int64_t mine[3] = { t->meter.images - s->loop_images, t->step + 1, s->stop_seen != 0 };
    double t0 = trainer_clock(); /* the fast ranks wait here for the slowest */
    MPI_CHECK(MPI_Allgather(mine, 3, MPI_INT64_T, s->counts, 3, MPI_INT64_T, t->comm));
    t->meter.t_wait += trainer_clock() - t0;
    int64_t samples = 0, steps = 0;
    int stop = 0;
    for (int r = 0; r < R; r++) {
        samples += s->counts[3 * r];
        steps += s->counts[3 * r + 1];
        stop |= s->counts[3 * r + 2] != 0;
    }
    for (int r = 0; r < R; r++) /* no samples counted (a gradient oracle): 1 / R */
        s->wt[r] = samples > 0 ? (float)((double)s->counts[3 * r] / (double)samples)
                               : 1.0f / (float)R;
    diloco_exchange_begin(t, s, 0);
    diloco_exchange_complete(t, s, 0, s->outer);
    s->outer++;
    s->sum_steps = steps;
    s->stop_any = stop;
    s->exchanged = 1;
    ckpt_count_put(s->outer, s->clock);
    ckpt_count_put(s->sum_steps, s->clock + 2);
    loop_open(t, s);
}

void diloco_timed_step(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    if (diloco_warmup(t, s))
        return;
    if (!s->loop_open)
        loop_open(t, s);
    trainer_gradient(t, t->params);
    trainer_update(t, t->params);
    s->loop_steps++;
    if (trainer_clock() - s->loop_t0 >= s->inner_time)
        timed_exchange(t, s);
}

/* After each step: the verdict of the exchange just taken (between two:
 * go on), the same on every rank at the same exchange. */
int diloco_timed_progress(dt_trainer *t, int stop_local, double *global_steps)
{
    diloco_state *s = t->algo_state;
    const int64_t R = t->nranks, every = t->cfg->run.checkpoint_every;
    s->stop_seen |= stop_local;
    if (t->step <= s->K) { /* warm-up: every rank at the same step */
        int stop = s->stop_seen;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, t->comm));
        s->sum_steps = s->prev_sum = t->step * R;
        ckpt_count_put(s->outer, s->clock);
        ckpt_count_put(s->sum_steps, s->clock + 2);
        *global_steps = (double)t->step;
        if (stop)
            return ALGO_STOP;
        if (t->step >= t->total_steps)
            return ALGO_END;
        return every > 0 && t->step % every == 0 ? ALGO_CHECKPOINT : ALGO_GO;
    }
    if (!s->exchanged) {
        *global_steps = (double)s->sum_steps / (double)R + (double)s->loop_steps;
        return ALGO_GO;
    }
    s->exchanged = 0;
    const int64_t before = s->prev_sum;
    s->prev_sum = s->sum_steps;
    *global_steps = (double)s->sum_steps / (double)R;
    if (s->stop_any)
        return ALGO_STOP;
    if (s->sum_steps >= t->total_steps * R)
        return ALGO_END;
    if (every > 0 && before / (every * R) < s->sum_steps / (every * R))
        return ALGO_CHECKPOINT;
    return ALGO_GO;
}

/* Nothing is in flight at a verdict: the exchange completes in its step. */
void diloco_timed_finish(dt_trainer *t) { (void)t; }

/* After a restore: the group's clock from the checkpoint (scaled to the new
 * rank count on another one); a new loop starts at the next step. */
void diloco_timed_resumed(dt_trainer *t)
{
    diloco_state *s = t->algo_state;
    diloco_resumed(t);
    s->outer = ckpt_count_get(s->clock);
    int64_t sum = ckpt_count_get(s->clock + 2);
    if (t->elastic_from)
        sum = llround((double)sum / t->elastic_from * t->nranks);
    s->sum_steps = s->prev_sum = sum;
    s->loop_open = 0;
    s->stop_seen = 0;
    t->global_step = (double)sum / t->nranks;
}
