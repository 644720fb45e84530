#include <errno.h>
#include <stdlib.h>

#include "core/error.h"
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
