#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

int schedule_init(dt_schedule *s, double lr, bool scaling, int batch, int ranks,
                  double warmup_epochs, const char *decay_epochs, double factor)
{
    s->lr = lr;
    s->target = scaling ? lr * batch * ranks / 256.0 : lr;
    s->warmup = warmup_epochs;
    s->factor = factor;
    s->ndecay = 0;
    const char *p = decay_epochs;
    while (p && *p) {
        char *end;
        errno = 0;
        double e = strtod(p, &end);
        if (end == p || errno || e < 0 || (*end && *end != ',') ||
            (s->ndecay && e <= s->decay[s->ndecay - 1]) || s->ndecay == 32)
            return dt_err_set("optim.decay_epochs = '%s': expected up to 32 increasing "
                              "non-negative epochs separated by commas", decay_epochs);
        s->decay[s->ndecay++] = e;
        p = *end ? end + 1 : end;
    }
    return 0;
}

double schedule_lr(const dt_schedule *s, double epoch)
{
    if (epoch < s->warmup)
        return s->lr + (s->target - s->lr) * epoch / s->warmup;
    double lr = s->target;
    for (int i = 0; i < s->ndecay && s->decay[i] <= epoch; i++)
        lr *= s->factor;
    return lr;
}

int schedule_steps_init(dt_lr_steps *s, const char *kind, double lr, double min_lr,
                        int64_t warmup_steps, int64_t decay_steps)
{
    if (!kind || !strcmp(kind, "step"))
        s->kind = DT_LR_STEP;
    else if (!strcmp(kind, "cosine"))
        s->kind = DT_LR_COSINE;
    else
        return dt_err_set("optim.schedule = '%s': expected step or cosine", kind);
    if (warmup_steps < 0)
        return dt_err_set("optim.warmup_steps = %" PRId64 ": expected a count >= 0",
                          warmup_steps);
    if (s->kind == DT_LR_COSINE) {
        if (!(lr > 0))
            return dt_err_set("optim.lr = %g: the cosine schedule needs a peak > 0", lr);
        if (!(min_lr >= 0 && min_lr <= lr))
            return dt_err_set("optim.min_lr = %g: expected 0 <= min_lr <= optim.lr (%g)",
                              min_lr, lr);
        if (decay_steps < warmup_steps)
            return dt_err_set("optim.decay_steps = %" PRId64 ": expected >= optim.warmup_steps"
                              " (%" PRId64 ")", decay_steps, warmup_steps);
    }
    s->lr = lr;
    s->min_lr = min_lr;
    s->warmup = warmup_steps;
    s->decay = decay_steps;
    return 0;
}

double schedule_steps_lr(const dt_lr_steps *s, int64_t t, double base)
{
    const double peak = s->kind == DT_LR_COSINE ? s->lr : base;
    if (t < s->warmup)
        return peak * (double)(t + 1) / (double)(s->warmup + 1);
    if (s->kind == DT_LR_STEP)
        return base;
    if (t > s->decay)
        return s->min_lr;
    if (s->decay == s->warmup)
        return s->lr;
    const double r = (double)(t - s->warmup) / (double)(s->decay - s->warmup);
    return s->min_lr + (s->lr - s->min_lr) * (1.0 + cos(M_PI * r)) / 2.0;
}
