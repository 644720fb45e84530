/* The learning rate as a function of the optimizer step (optim.warmup_steps,
 * optim.schedule = step | cosine, optim.min_lr, optim.decay_steps), beside
 * the epoch-based schedule of optim/sgd.h (schedule_init/schedule_lr), which
 * stays as it is.
 *
 * t is the 0-based count of optimizer steps taken before this one; W =
 * warmup_steps, D = decay_steps.
 *
 * cosine (nanoGPT's get_lr):
 *   t < W:       lr (t + 1) / (W + 1)
 *   W <= t <= D: min_lr + (lr - min_lr) (1 + cos(pi (t - W) / (D - W))) / 2
 *                (at t = W = D: lr)
 *   t > D:       min_lr
 * The epoch-based warm-up and decays do not apply: `lr` is the peak (the
 * caller passes the epoch schedule's target, so optim.lr_scaling still
 * scales it).
 *
 * step (the default): a warm-up in steps in front of the epoch-based schedule:
 *   t < W:  base (t + 1) / (W + 1)
 *   t >= W: base
 * where base = schedule_lr(epoch schedule, fractional epoch of step t): the
 * epoch-based warm-up and step decays run underneath, and W = 0 gives
 * exactly the epoch-based schedule alone. Given both warm-ups, both factors apply
 * (the deck may refuse the pair). min_lr and decay_steps do not apply. */
#ifndef DT_OPTIM_SCHEDULE_H
#define DT_OPTIM_SCHEDULE_H

#include <stdint.h>

typedef enum { DT_LR_STEP = 0, DT_LR_COSINE = 1 } dt_lr_kind;

typedef struct dt_lr_steps {
    dt_lr_kind kind;
    double lr, min_lr;       /* cosine: peak and floor */
    int64_t warmup, decay;   /* W, D (decay: cosine only) */
} dt_lr_steps;

/* kind: "step" or "cosine". Checks warmup >= 0, and for cosine lr > 0,
 * 0 <= min_lr <= lr, decay >= warmup; returns -1 after dt_err_set() naming
 * the optim.* key otherwise. */
int schedule_steps_init(dt_lr_steps *s, const char *kind, double lr, double min_lr,
                        int64_t warmup_steps, int64_t decay_steps);
/* The learning rate of step t; base: the epoch schedule's lr at step t
 * (used by kind step only, ignored by cosine). */
double schedule_steps_lr(const dt_lr_steps *s, int64_t t, double base);

#endif
