/* Optimizers: one ops table each, chosen by name, as algo/algo.h does for
 * the algorithms.
 *
 * An optimizer keeps `nstate` vectors of the flat vector's length n (SGD:
 * the momentum; AdamW: the two moments; Muon: its momentum and its AdamW
 * part's two moments), local to the rank and never communicated; each is
 * checkpointed under its name and restored bit for bit. Its step works on a
 * range [lo, hi) of the flat vector, so a parameter server updates its shard
 * and an outer optimizer (DiLoCo) a fragment with the same code as a rank
 * updating everything; a kind whose rule spans whole matrices (Muon) says so
 * in `whole` and steps on [0, n) only. */
#ifndef DT_OPTIM_OPTIM_H
#define DT_OPTIM_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/tensor_view.h"
#include "io/checkpoint.h"
#include "io/settings.h"

#define DT_OPTIM_MAX_STATE 4

/* A run of the flat vector with one rule: decay = 0 exempts it from weight
 * decay (AdamW decays tensors of ndim >= 2 only). */
typedef struct dt_optim_segment {
    size_t offset, count;
    int decay;
} dt_optim_segment;

typedef struct dt_optim dt_optim;

typedef struct dt_optim_ops {
    const char *name;
    int nstate;                                   /* state vectors of length n */
    const char *state_names[DT_OPTIM_MAX_STATE];  /* their checkpoint dataset names */
    const char *whole;  /* why its step takes the whole vector at once, never a shard
                         * (NULL: any range [lo, hi) will do) */
    /* Hyper-parameters from cfg, and per-tensor rules from the flat vector's
     * tensors (ntensors, in flat order; may be 0 for a vector without
     * tensors). -1 after dt_err_set(). */
    int (*init)(dt_optim *o, const dt_config *cfg, const dt_tensor_view *tensors, int ntensors);
    /* One step on the range [lo, hi) of the flat vector: x, g and state[k]
     * point at element lo of their vectors (hi - lo elements each); lo
     * places the range among the segments. step: the optimizer steps taken
     * before this one plus 1 (AdamW's bias correction). Host memory. */
    void (*step)(const dt_optim *o, size_t lo, size_t hi, float *x, const float *g,
                 float *const *state, float lr, int64_t step);
    /* The whole vector with a backend's own op, where the vectors live in
     * its memory (NULL: only host vectors, through step). */
    void (*step_backend)(const dt_optim *o, const dt_backend *be, float *x, const float *g,
                         float *const *state, float lr, int64_t step);
    void (*free)(dt_optim *o); /* the kind's own allocations (NULL: none) */
} dt_optim_ops;

struct dt_optim {
    const dt_optim_ops *ops;
    size_t n;
    /* hyper-parameters (each kind reads its own) */
    float momentum, weight_decay;
    int nesterov;
    double b1, b2, epsd, wd;                /* adamw: as the deck gives them (double) */
    void *own;                              /* the kind's own plan (muon), freed by its free */
    int nseg;
    dt_optim_segment *seg;                 /* (nseg) in flat order, or NULL: one rule */
    float *state[DT_OPTIM_MAX_STATE];      /* (n) each, zero at the start */
};

/* NULL after dt_err_set() naming the known optimizers. */
const dt_optim_ops *optim_find(const char *name);
/* NULL-terminated table of every optimizer. */
extern const dt_optim_ops *const optim_table[];

/* The optimizer ops for a flat vector of n floats: hyper-parameters from
 * cfg, state vectors zero-filled in be's memory (be NULL: host memory).
 * -1 after dt_err_set(). */
int optim_init(dt_optim *o, const dt_optim_ops *ops, const dt_config *cfg, size_t n,
               const dt_tensor_view *tensors, int ntensors, const dt_backend *be);
/* x (n) <- one step with g (n) over the whole vector, where the vectors live
 * (be: their backend; its own op when the kind has one). */
void optim_step(const dt_optim *o, const dt_backend *be, float *x, const float *g, float lr,
                int64_t step);
/* One step on [lo, hi) of host vectors: x and g point at element lo. */
void optim_step_range(const dt_optim *o, size_t lo, size_t hi, float *x, const float *g,
                      float lr, int64_t step);
/* The state vectors as checkpoint arrays (at most max); returns how many. */
int optim_state_arrays(const dt_optim *o, dt_ckpt_array *out, int max);
/* Frees the state vectors (from be's memory, NULL: host). */
void optim_free(dt_optim *o, const dt_backend *be);

/* The kinds. */
extern const dt_optim_ops optim_sgd;
extern const dt_optim_ops optim_adamw; /* optim/adamw.c */
extern const dt_optim_ops optim_muon;  /* optim/muon.c */

#endif
