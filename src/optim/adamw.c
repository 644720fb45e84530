#include "optim/adamw.h"
#include "optim/optim.h"

#include <math.h>
#include <pthread.h>

#include "core/error.h"
#include "core/isa.h"
#include "core/simd.h"
#include "core/vec.h"

typedef dt_adamw_k adamw_k;

/* One element, in PyTorch's order: mul_ (decay), mul_ + add_(alpha),
 * mul_ + addcmul_, sqrt / bc2s + eps, addcdiv_(value = nss). PyTorch's AVX2
 * and AVX-512 kernels fuse add_(alpha)'s multiply-add and addcmul_'s last
 * multiply-add (Vectorized::fmadd and the compiler's contraction); `fused`
 * does the same, so that on such CPUs the result is PyTorch's bit for bit.
 * The vector bodies below compute the same expression lane by lane. */
static inline __attribute__((always_inline)) void adamw_at(size_t i, const adamw_k *k, int decay,
                                                           int fused, float *x, const float *g,
                                                           float *m, float *v)
{
    if (fused) { /* the device's body (nn/cuda/adamw.h) */
        adamw_fused_at(i, *k, decay, x, g, m, v);
        return;
    }
    const float gi = g[i];
    float xi = x[i];
    if (decay)
        xi = xi * k->shrink;
    const float mi = m[i] * k->b1 + k->c1 * gi;
    const float vi = v[i] * k->b2 + k->c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    x[i] = xi + k->nss * mi / (sqrtf(vi) / k->bc2s + k->eps);
}

/* The v16f kernel's body for elements [i0, i0 + len): SQRT16(r, a) and
 * FMA16(r, a, b, c) (r = a b + c, fused or not as `fused` says) are the
 * kernel's vector square root and multiply-add. Writing the square root
 * explicitly is what vectorises it: GCC will not vectorise sqrtf under the
 * default -fmath-errno, nor contract a multiply-add under -std=c11. */
#define ADAMW_V16_BODY(SQRT16, FMA16, fused)                                             \
    const v16f b1 = v16_splat(k->b1), c1 = v16_splat(k->c1), b2 = v16_splat(k->b2),     \
               c2 = v16_splat(k->c2), bc2s = v16_splat(k->bc2s), eps = v16_splat(k->eps), \
               nss = v16_splat(k->nss), sh = v16_splat(k->shrink);                      \
    size_t i = i0;                                                                      \
    for (; i + 16 <= i0 + len; i += 16) {                                               \
        const v16f gi = v16_ld(g + i);                                                  \
        v16f xi = v16_ld(x + i), mi, vi, r;                                             \
        if (decay)                                                                      \
            xi = xi * sh;                                                               \
        FMA16(mi, c1, gi, v16_ld(m + i) * b1);                                          \
        FMA16(vi, c2 * gi, gi, v16_ld(v + i) * b2);                                     \
        v16_st(m + i, mi);                                                              \
        v16_st(v + i, vi);                                                              \
        SQRT16(r, vi);                                                                  \
        v16_st(x + i, xi + nss * mi / (r / bc2s + eps));                                \
    }                                                                                   \
    for (; i < i0 + len; i++)                                                           \
        adamw_at(i, k, decay, fused, x, g, m, v);

#define FMA16_SPLIT(r, a, b, c) ((r) = (a) * (b) + (c))

#if defined(__GNUC__) && defined(__x86_64__) && !defined(DT_NO_CLONES)
#include <immintrin.h>
#include <string.h>

/* v16f <-> native registers through memcpy, which GCC turns into register moves */
#define SQRT16_512(r, a)                                                               \
    do {                                                                               \
        __m512 t_;                                                                     \
        memcpy(&t_, &(a), 64);                                                         \
        t_ = _mm512_sqrt_ps(t_);                                                       \
        memcpy(&(r), &t_, 64);                                                         \
    } while (0)
#define SQRT16_256(r, a)                                                               \
    do {                                                                               \
        __m256 t_[2];                                                                  \
        memcpy(t_, &(a), 64);                                                          \
        t_[0] = _mm256_sqrt_ps(t_[0]);                                                 \
        t_[1] = _mm256_sqrt_ps(t_[1]);                                                 \
        memcpy(&(r), t_, 64);                                                          \
    } while (0)
#define FMA16_512(r, a, b, c)                                                          \
    do {                                                                               \
        __m512 a_, b_, c_;                                                             \
        const v16f av_ = (a), bv_ = (b), cv_ = (c);                                    \
        memcpy(&a_, &av_, 64);                                                         \
        memcpy(&b_, &bv_, 64);                                                         \
        memcpy(&c_, &cv_, 64);                                                         \
        a_ = _mm512_fmadd_ps(a_, b_, c_);                                              \
        memcpy(&(r), &a_, 64);                                                         \
    } while (0)
#define FMA16_256(r, a, b, c)                                                          \
    do {                                                                               \
        __m256 a_[2], b_[2], c_[2];                                                    \
        const v16f av_ = (a), bv_ = (b), cv_ = (c);                                    \
        memcpy(a_, &av_, 64);                                                          \
        memcpy(b_, &bv_, 64);                                                          \
        memcpy(c_, &cv_, 64);                                                          \
        a_[0] = _mm256_fmadd_ps(a_[0], b_[0], c_[0]);                                  \
        a_[1] = _mm256_fmadd_ps(a_[1], b_[1], c_[1]);                                  \
        memcpy(&(r), a_, 64);                                                          \
    } while (0)
#define SQRT16_128(r, a)                                                               \
    do {                                                                               \
        __m128 t_[4];                                                                  \
        memcpy(t_, &(a), 64);                                                          \
        for (int q_ = 0; q_ < 4; q_++)                                                 \
            t_[q_] = _mm_sqrt_ps(t_[q_]);                                              \
        memcpy(&(r), t_, 64);                                                          \
    } while (0)

__attribute__((target("avx512f"))) static void adamw_kernel_avx512(
    size_t i0, size_t len, const adamw_k *k, int decay, float *restrict x,
    const float *restrict g, float *restrict m, float *restrict v)
{
    ADAMW_V16_BODY(SQRT16_512, FMA16_512, 1)
}

__attribute__((target("avx2,fma"))) static void adamw_kernel_avx2(
    size_t i0, size_t len, const adamw_k *k, int decay, float *restrict x,
    const float *restrict g, float *restrict m, float *restrict v)
{
    ADAMW_V16_BODY(SQRT16_256, FMA16_256, 1)
}

static void adamw_kernel_sse(size_t i0, size_t len, const adamw_k *k, int decay,
                             float *restrict x, const float *restrict g, float *restrict m,
                             float *restrict v)
{
    ADAMW_V16_BODY(SQRT16_128, FMA16_SPLIT, 0)
}

typedef void (*adamw_kernel_fn)(size_t, size_t, const adamw_k *, int, float *, const float *,
                                float *, float *);

/* The kernel of the level in force (core/isa.h), and its name. */
static adamw_kernel_fn adamw_kernel_pick(const char **name)
{
    switch (isa_vec()) {
    case 2:
        *name = "avx512f";
        return adamw_kernel_avx512;
    case 1:
        *name = "avx2+fma";
        return adamw_kernel_avx2;
    default:
        *name = "sse";
        return adamw_kernel_sse;
    }
}
#else
/* elsewhere: the plain loop, left to the compiler */
static void adamw_kernel_plain(size_t i0, size_t len, const adamw_k *k, int decay,
                               float *restrict x, const float *restrict g, float *restrict m,
                               float *restrict v)
{
    for (size_t i = i0; i < i0 + len; i++)
        adamw_at(i, k, decay, 0, x, g, m, v);
}
typedef void (*adamw_kernel_fn)(size_t, size_t, const adamw_k *, int, float *, const float *,
                                float *, float *);
static adamw_kernel_fn adamw_kernel_pick(const char **name)
{
    *name = "plain";
    return adamw_kernel_plain;
}
#endif

static adamw_kernel_fn adamw_kernel_chosen;
static const char *adamw_kernel_chosen_name;
static pthread_once_t adamw_kernel_once = PTHREAD_ONCE_INIT;

static void adamw_kernel_choose(void)
{
    adamw_kernel_chosen = adamw_kernel_pick(&adamw_kernel_chosen_name);
}

static adamw_kernel_fn adamw_kernel_fn_get(const char **name)
{
    pthread_once(&adamw_kernel_once, adamw_kernel_choose);
    if (name)
        *name = adamw_kernel_chosen_name;
    return adamw_kernel_chosen;
}

const char *adamw_kernel(void)
{
    const char *name;
    adamw_kernel_fn_get(&name);
    return name;
}

dt_adamw_k adamw_scalars(double lr, double beta1, double beta2, double eps, double wd,
                         int64_t step)
{
    /* PyTorch: bias_correction = 1 - beta ** step in Python floats; step_size
     * = lr / bc1; denom divides by math.sqrt(bc2); each scalar becomes a
     * float where it multiplies a tensor. */
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    const adamw_k k = {
        .b1 = (float)beta1,
        .c1 = (float)(1.0 - beta1),
        .b2 = (float)beta2,
        .c2 = (float)(1.0 - beta2),
        .bc2s = (float)sqrt(bc2),
        .eps = (float)eps,
        .nss = (float)(-(lr / bc1)),
        .shrink = (float)(1.0 - lr * wd),
    };
    return k;
}

/* x, g, m, v point at element `origin` of their vectors (origin <= lo). */
static void adamw_step_from_k(size_t origin, size_t lo, size_t hi, float *x, const float *g,
                              float *m, float *v, const dt_segment *segs, int nsegs,
                              const adamw_k *kp)
{
    VEC_SKIP_IN_SIM;
    const adamw_kernel_fn kernel = adamw_kernel_fn_get(NULL);
    const adamw_k k = *kp;
    for (int s = 0; s < nsegs && lo < hi; s++) {
        const size_t b = segs[s].offset + segs[s].count;
        if (b <= lo)
            continue;
        if (segs[s].offset > lo)
            DT_FATAL("adamw_step_range: element %zu lies in no segment (segment %d starts at "
                     "%zu: the table must be sorted and contiguous)", lo, s, segs[s].offset);
        const size_t e = b < hi ? b : hi, n = e - lo;
        const int decay = segs[s].decay != 0;
        float *xr = x + (lo - origin), *mr = m + (lo - origin), *vr = v + (lo - origin);
        const float *gr = g + (lo - origin);
        /* chunks are independent element by element: threads change nothing */
        DT_PARALLEL_CHUNKS(n, i0, len, kernel(i0, len, &k, decay, xr, gr, mr, vr));
        lo = e;
    }
    if (lo < hi)
        DT_FATAL("adamw_step_range: elements [%zu, %zu) lie outside the %d segments (the "
                 "segment table must cover the range)", lo, hi, nsegs);
}

static void adamw_step_from(size_t origin, size_t lo, size_t hi, float *x, const float *g,
                            float *m, float *v, const dt_segment *segs, int nsegs, double lr,
                            double beta1, double beta2, double eps, double wd, int64_t step)
{
    const adamw_k k = adamw_scalars(lr, beta1, beta2, eps, wd, step);
    adamw_step_from_k(origin, lo, hi, x, g, m, v, segs, nsegs, &k);
}

void adamw_step_range(size_t lo, size_t hi, float *x, const float *g, float *m, float *v,
                      const dt_segment *segs, int nsegs, double lr, double beta1, double beta2,
                      double eps, double wd, int64_t step)
{
    adamw_step_from(0, lo, hi, x, g, m, v, segs, nsegs, lr, beta1, beta2, eps, wd, step);
}

void adamw_step_k(size_t lo, size_t hi, float *x, const float *g, float *m, float *v,
                  const dt_segment *segs, int nsegs, const dt_adamw_k *k)
{
    adamw_step_from_k(0, lo, hi, x, g, m, v, segs, nsegs, k);
}

void adamw_step_at(size_t lo, size_t hi, float *x, const float *g, float *m, float *v,
                   const dt_segment *segs, int nsegs, double lr, double beta1, double beta2,
                   double eps, double wd, int64_t step)
{
    adamw_step_from(lo, lo, hi, x, g, m, v, segs, nsegs, lr, beta1, beta2, eps, wd, step);
}

/* ---- the optimizer table's entry (optim/optim.h) --------------------------- */

/* AdamW's rules per tensor: weight decay on tensors of two or more
 * dimensions (matrices, embeddings), none on biases and normalisation
 * parameters; a vector without tensors (the algorithms' tests) decays all. */
static int adamw_init_ops(dt_optim *o, const dt_config *cfg, const dt_tensor_view *tensors,
                          int ntensors)
{
    o->weight_decay = (float)cfg->optim.weight_decay;
    o->wd = cfg->optim.weight_decay;
    o->b1 = cfg->optim.beta1;
    o->b2 = cfg->optim.beta2;
    o->epsd = cfg->optim.eps;
    o->nseg = ntensors > 0 ? ntensors : 1;
    o->seg = dt_calloc((size_t)o->nseg, sizeof *o->seg);
    if (ntensors == 0) {
        o->seg[0] = (dt_optim_segment){ 0, o->n, 1 };
        return 0;
    }
    size_t at = 0;
    for (int i = 0; i < ntensors; i++) {
        if (tensors[i].offset != at)
            return dt_err_set("adamw: tensor %s starts at %zu, expected %zu (the tensors must "
                              "tile the flat vector)", tensors[i].name, tensors[i].offset, at);
        o->seg[i] = (dt_optim_segment){ tensors[i].offset, tensors[i].count,
                                        tensors[i].ndim >= 2 };
        at += tensors[i].count;
    }
    if (at != o->n)
        return dt_err_set("adamw: the tensors cover %zu of %zu parameters", at, o->n);
    return 0;
}

static void adamw_step_ops(const dt_optim *o, size_t lo, size_t hi, float *x, const float *g,
                           float *const *state, float lr, int64_t step)
{
    _Static_assert(sizeof(dt_segment) == sizeof(dt_optim_segment), "one segment layout");
    adamw_step_at(lo, hi, x, g, state[0], state[1], (const dt_segment *)o->seg, o->nseg, lr,
                  o->b1, o->b2, o->epsd, o->wd, step);
}

/* the whole vector where it lives: the backend's flat_adamw (the CPU's is
 * adamw_step_k, the same step as adamw_step_ops) */
static void adamw_step_on(const dt_optim *o, const dt_backend *be, float *x, const float *g,
                          float *const *state, float lr, int64_t step)
{
    const dt_adamw_k k = adamw_scalars(lr, o->b1, o->b2, o->epsd, o->wd, step);
    be->flat_adamw(o->n, &k, (const dt_segment *)o->seg, o->nseg, x, g, state[0], state[1]);
}

const dt_optim_ops optim_adamw = {
    .name = "adamw",
    .nstate = 2,
    .state_names = { "adam_m", "adam_v" },
    .init = adamw_init_ops,
    .step = adamw_step_ops,
    .step_backend = adamw_step_on,
};

double clip_sumsq(const float *g, size_t n)
{
#ifdef DTRAIN_SIM
    return 0.0; /* the simulator's vectors hold no model: nothing to clip */
#endif
    /* four partial sums: four independent additions in flight, a fixed order */
    double s[4] = { 0, 0, 0, 0 };
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++)
            s[l] += (double)g[i + l] * g[i + l];
    for (; i < n; i++)
        s[0] += (double)g[i] * g[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

double clip_scale(float *g, size_t n, double sumsq, double max_norm)
{
    const double norm = sqrt(sumsq);
    if (max_norm <= 0.0)
        return norm;
    /* clip_grad_norm_: clamp(max_norm / (norm + 1e-6), max = 1); a factor of
     * 1 leaves g as it is, so it is skipped */
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        vec_scale(g, (float)coef, n);
    return norm;
}

double clip_grad_norm(float *g, size_t n, double max_norm)
{
    return clip_scale(g, n, clip_sumsq(g, n), max_norm);
}
