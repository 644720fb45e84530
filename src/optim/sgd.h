/* SGD with momentum on the flat vectors, and the learning-rate schedule
 * (doc/references.md, Common pieces).
 *
 * Step (PyTorch's torch.optim.SGD, dampening 0):
 *   g  <- g + wd * x
 *   v  <- m * v + g                   (v starts at 0, so the first v = g)
 *   d  <- nesterov ? g + m * v : v
 *   x  <- x - lr * d
 * The momentum buffer v is local to the rank and never communicated. */
#ifndef DT_OPTIM_SGD_H
#define DT_OPTIM_SGD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct dt_sgd {
    size_t n;
    float momentum, weight_decay;
    bool nesterov;
    float *v;              /* (n) momentum buffer */
} dt_sgd;

void sgd_init(dt_sgd *o, size_t n, double momentum, double weight_decay, bool nesterov);
/* sgd_init without the momentum buffer: the caller puts v where the vectors
 * live (a device backend's memory, zero-filled). */
void sgd_config(dt_sgd *o, size_t n, double momentum, double weight_decay, bool nesterov);
/* x <- x - lr * direction(g); g is not modified. */
void sgd_step(dt_sgd *o, float *x, const float *g, float lr);
/* The same step on host vectors x, g, v (n) given as arguments: the CPU
 * backends' flat_sgd (backend/backend.h). */
void sgd_step_flat(size_t n, float momentum, float weight_decay, int nesterov, float lr,
                   float *x, const float *g, float *v);
void sgd_free(dt_sgd *o);

/* Learning rate as a function of the (fractional) epoch:
 *   target = lr_scaling ? lr * batch * ranks / 256 : lr
 *   epoch < warmup: lr + (target - lr) * epoch / warmup
 *   then target * factor^(number of decay epochs <= epoch) */
typedef struct dt_schedule {
    double lr, target, warmup, factor;
    int ndecay;
    double decay[32];
} dt_schedule;

/* decay_epochs: comma-separated increasing epochs ("" for none). Returns -1
 * after dt_err_set() if the list is malformed. */
int schedule_init(dt_schedule *s, double lr, bool scaling, int batch, int ranks,
                  double warmup_epochs, const char *decay_epochs, double factor);
double schedule_lr(const dt_schedule *s, double epoch);

#endif
