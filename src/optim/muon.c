/* Muon on the flat vector (optim/muon.h) and its optimizer-table entry. */
#include "optim/muon.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/vec.h"
#include "optim/adamw.h"
#include "optim/newton_schulz.h"
#include "optim/optim.h"

/* One hidden matrix (rows, cols), row-major at `offset` of the flat vector. */
typedef struct muon_mat {
    size_t offset;
    int rows, cols;
} muon_mat;

/* What init works out once from the tensor table and the deck. */
typedef struct muon_plan {
    int nmat;
    muon_mat *mat;      /* (nmat) the hidden matrices, in flat order */
    int nadam;
    dt_segment *adam;   /* (nadam) runs of AdamW tensors, each with one decay rule */
    double mu;          /* optim.momentum, as the deck gives it */
    double adamw_lr;    /* optim.adamw_lr */
    double lr0;         /* optim.lr rounded to float: the step's rate over it scales adamw_lr */
    float *u;           /* (largest matrix) the update being orthogonalised */
    float *work;        /* newton_schulz_work of the largest need */
} muon_plan;

static inline __attribute__((always_inline)) float lerp_at(float a, float b, float w)
{
    return fabsf(w) < 0.5f ? fmaf(w, b - a, a) : fmaf(-(b - a), 1.0f - w, b);
}

float muon_lerp(float a, float b, float w) { return lerp_at(a, b, w); }

/* buf (n) <- lerp(buf, g, w1); u (n) <- nesterov ? lerp(g, buf, mu) : buf.
 * fmaf is one rounding in every variant (an instruction where the level has
 * FMA, libm's otherwise): the same bits at every ISA level. */
DT_KERNEL_BODY void momentum_body(size_t n, float w1, float mu, int nesterov, float *buf,
                                  const float *g, float *u)
{
    for (size_t i = 0; i < n; i++) {
        const float b = lerp_at(buf[i], g[i], w1);
        buf[i] = b;
        u[i] = nesterov ? lerp_at(g[i], b, mu) : b;
    }
}
DT_KERNEL_VARIANTS(momentum, (size_t n, float w1, float mu, int nesterov, float *buf,
                              const float *g, float *u),
                   (n, w1, mu, nesterov, buf, g, u));

/* x (n) <- x shrink (decay only), then x + nlr (u scale), fused as
 * PyTorch's add_(alpha) */
DT_KERNEL_BODY void apply_body(size_t n, float scale, int decay, float shrink, float nlr,
                               float *x, const float *u)
{
    for (size_t i = 0; i < n; i++) {
        const float ui = u[i] * scale;
        const float xi = decay ? x[i] * shrink : x[i];
        x[i] = fmaf(nlr, ui, xi);
    }
}
DT_KERNEL_VARIANTS(apply, (size_t n, float scale, int decay, float shrink, float nlr, float *x,
                           const float *u),
                   (n, scale, decay, shrink, nlr, x, u));

/* ---- the optimizer table's entry (optim/optim.h) --------------------------- */

static void plan_free(muon_plan *p)
{
    if (!p)
        return;
    free(p->mat);
    free(p->adam);
    free(p->u);
    free(p->work);
    free(p);
}

static void muon_free_ops(dt_optim *o)
{
    plan_free(o->own);
    o->own = NULL;
}

/* AdamW run of [offset, offset + count), joined to the previous run when it
 * follows it with the same decay rule */
static void plan_adam(muon_plan *p, size_t offset, size_t count, int decay)
{
    dt_segment *last = p->nadam ? &p->adam[p->nadam - 1] : NULL;
    if (last && last->offset + last->count == offset && (last->decay != 0) == (decay != 0)) {
        last->count += count;
        return;
    }
    p->adam = dt_realloc(p->adam, (size_t)(p->nadam + 1) * sizeof *p->adam);
    p->adam[p->nadam++] = (dt_segment){ offset, count, decay };
}

static int muon_init_ops(dt_optim *o, const dt_config *cfg, const dt_tensor_view *tensors,
                         int ntensors)
{
    o->momentum = (float)cfg->optim.momentum;
    o->nesterov = cfg->optim.nesterov;
    o->weight_decay = (float)cfg->optim.weight_decay;
    o->wd = cfg->optim.weight_decay;
    o->b1 = cfg->optim.beta1;
    o->b2 = cfg->optim.beta2;
    o->epsd = cfg->optim.eps;
    muon_plan *p = dt_calloc(1, sizeof *p);
    o->own = p;
    p->mu = cfg->optim.momentum;
    p->adamw_lr = cfg->optim.adamw_lr;
    p->lr0 = (double)(float)cfg->optim.lr;
#ifdef DTRAIN_SIM
    /* the simulator's vectors hold no model and no step runs: no plan */
    if (ntensors == 0)
        return 0;
#endif
    if (ntensors == 0)
        return dt_err_set("optim.name = muon: the flat vector comes with no tensor table "
                          "(Muon needs the shapes of the weight matrices)");
    size_t at = 0, most = 0, most_work = 0;
    for (int i = 0; i < ntensors; i++) {
        const dt_tensor_view *t = &tensors[i];
        if (t->offset != at)
            return dt_err_set("muon: tensor %s starts at %zu, expected %zu (the tensors must "
                              "tile the flat vector)", t->name, t->offset, at);
        at += t->count;
        if (!t->mats) {
            plan_adam(p, t->offset, t->count, t->ndim >= 2);
            continue;
        }
        if (t->rows == 0 || t->cols == 0 || t->rows > INT_MAX || t->cols > INT_MAX ||
            t->rows * t->cols * (size_t)t->mats != t->count)
            return dt_err_set("muon: tensor %s %s: %d matrices of (%zu, %zu) do not make its "
                              "%zu elements", t->name, t->shape, t->mats, t->rows, t->cols,
                              t->count);
        const size_t rc = t->rows * t->cols;
        p->mat = dt_realloc(p->mat, (size_t)(p->nmat + t->mats) * sizeof *p->mat);
        for (int j = 0; j < t->mats; j++)
            p->mat[p->nmat++] = (muon_mat){ t->offset + (size_t)j * rc, (int)t->rows,
                                            (int)t->cols };
        const size_t w = newton_schulz_work((int)t->rows, (int)t->cols);
        most = rc > most ? rc : most;
        most_work = w > most_work ? w : most_work;
    }
    if (at != o->n)
        return dt_err_set("muon: the tensors cover %zu of %zu parameters", at, o->n);
    if (p->nmat == 0)
        return dt_err_set("optim.name = muon: none of the model's %d tensors is a hidden "
                          "weight matrix (the first layer, the classifier head, embeddings, "
                          "biases and gains take AdamW), so Muon would be AdamW: use "
                          "optim.name = adamw", ntensors);
    p->u = dt_falloc(most);
    p->work = dt_falloc(most_work);
    return 0;
}

static void muon_step_ops(const dt_optim *o, size_t lo, size_t hi, float *x, const float *g,
                          float *const *state, float lr, int64_t step)
{
    if (lo != 0 || hi != o->n)
        DT_FATAL("muon: a step on [%zu, %zu) of %zu parameters: Muon orthogonalises whole "
                 "matrices and steps on the whole vector only", lo, hi, o->n);
    VEC_SKIP_IN_SIM;
    const muon_plan *p = o->own;
    float *mom = state[0], *m = state[1], *v = state[2];
    /* PyTorch's scalars: lerp weights 1 - mu (a Python float) and mu as floats,
     * the decay factor 1 - lr wd and alpha = -lr likewise */
    const float w1 = (float)(1.0 - p->mu), mu = (float)p->mu;
    const int decay = o->wd != 0.0;
    const float shrink = (float)(1.0 - (double)lr * o->wd), nlr = -lr;
    for (int k = 0; k < p->nmat; k++) {
        const muon_mat *a = &p->mat[k];
        const size_t rc = (size_t)a->rows * a->cols;
        DT_KERNEL(momentum)(rc, w1, mu, o->nesterov, mom + a->offset, g + a->offset, p->u);
        newton_schulz5(a->rows, a->cols, p->u, p->u, p->work);
        const float scale =
            a->rows > a->cols ? (float)sqrt((double)a->rows / (double)a->cols) : 1.0f;
        DT_KERNEL(apply)(rc, scale, decay, shrink, nlr, x + a->offset, p->u);
    }
    /* AdamW's rate follows Muon's schedule: adamw_lr (lr / optim.lr) */
    const double alr = p->adamw_lr * ((double)lr / p->lr0);
    for (int s = 0; s < p->nadam; s++)
        adamw_step_range(p->adam[s].offset, p->adam[s].offset + p->adam[s].count, x, g, m, v,
                         &p->adam[s], 1, alr, o->b1, o->b2, o->epsd, o->wd, step);
}

const dt_optim_ops optim_muon = {
    .name = "muon",
    .nstate = 3,
    .state_names = { "muon_momentum", "adam_m", "adam_v" },
    .whole = "Muon orthogonalises each weight matrix whole",
    .init = muon_init_ops,
    .step = muon_step_ops,
    .free = muon_free_ops,
};
