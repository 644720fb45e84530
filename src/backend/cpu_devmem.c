/* Tests only (compute.test_device_memory): a device backend without a device.
 *
 * The native CPU kernels run behind a table that says device = 1, so the
 * trainer takes every path a GPU run takes: its own allocations, explicit
 * to_host/to_backend copies, staging for the MPI transport, flat vectors in
 * the backend's memory for the modes with device_vectors. Each allocation is
 * its own anonymous mapping, kept PROT_NONE except while one of this
 * backend's own calls runs: host code that reads or writes backend memory
 * directly (a missing to_host, a vector handed to MPI unstaged) gets SIGSEGV
 * instead of a silently right answer. The kernels are the CPU's, so a run
 * must equal the plain CPU run bit for bit (tests/devmem.sh).
 * One thread calls the backend (the training thread). */
#include "config.h"

#include "backend/backend.h"
#include "core/error.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct region {
    void *p;
    size_t len, bytes; /* mapped, asked for */
} region;

static struct {
    region *r;
    size_t n, cap;
    size_t now, peak; /* bytes asked for and held: now, and the most at once */
    int open; /* nesting depth of backend calls */
} g;

static void protect_all(int prot)
{
    for (size_t i = 0; i < g.n; i++)
        if (mprotect(g.r[i].p, g.r[i].len, prot) != 0)
            DT_FATAL("compute.test_device_memory: mprotect: %s", strerror(errno));
}

/* Backend memory readable and writable inside the backend's calls only. */
static void enter(void)
{
    if (g.open++ == 0)
        protect_all(PROT_READ | PROT_WRITE);
}
static void leave(void)
{
    if (--g.open == 0)
        protect_all(PROT_NONE);
}

static void *dm_alloc(size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t len = ((bytes ? bytes : 1) + page - 1) / page * page;
    void *p = mmap(NULL, len, g.open ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* zero-filled */
    if (p == MAP_FAILED)
        DT_FATAL("compute.test_device_memory: mmap of %zu bytes: %s", len, strerror(errno));
    if (g.n == g.cap) {
        g.cap = g.cap ? 2 * g.cap : 64;
        g.r = dt_realloc(g.r, g.cap * sizeof *g.r);
    }
    g.r[g.n++] = (region){ p, len, bytes };
    g.now += bytes;
    g.peak = g.now > g.peak ? g.now : g.peak;
    return p;
}

static void dm_free(void *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < g.n; i++)
        if (g.r[i].p == p) {
            if (munmap(p, g.r[i].len) != 0)
                DT_FATAL("compute.test_device_memory: munmap: %s", strerror(errno));
            g.now -= g.r[i].bytes;
            g.r[i] = g.r[--g.n];
            return;
        }
    DT_FATAL("compute.test_device_memory: free of %p, which this backend did not allocate", p);
}

static size_t dm_mem_peak(void) { return g.peak; }

#define CPU (backend_cpu())
#define GUARD(call) do { enter(); call; leave(); } while (0)

static void dm_zero(void *p, size_t bytes) { GUARD(memset(p, 0, bytes)); }
static void dm_copy(void *d, const void *s, size_t bytes) { GUARD(memcpy(d, s, bytes)); }
static void *dm_host_alloc(size_t bytes) { return CPU->host_alloc(bytes); }
static void dm_host_free(void *p) { CPU->host_free(p); }

static void dm_linear_forward(int B, int in, int out, const float *x, const float *W,
                              const float *b, float *y, float *work)
{
    GUARD(CPU->linear_forward(B, in, out, x, W, b, y, work));
}
static void dm_linear_backward(int B, int in, int out, const float *x, const float *W,
                               const float *dy, float *dx, float *dW, float *db, float *work)
{
    GUARD(CPU->linear_backward(B, in, out, x, W, dy, dx, dW, db, work));
}
static size_t dm_conv2d_workspace(const dt_conv_shape *s) { return CPU->conv2d_workspace(s); }
static int dm_conv2d_dx_accumulates(const dt_conv_shape *s)
{
    return CPU->conv2d_dx_accumulates(s);
}
static void dm_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                              const float *b, float *y, float *work)
{
    GUARD(CPU->conv2d_forward(s, x, w, b, y, work));
}
static void dm_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                               const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                               float *work)
{
    GUARD(CPU->conv2d_backward(s, x, w, dy, dx, dx_fresh, dw, db, work));
}
static void dm_maxpool_forward(const dt_pool_shape *s, const float *x, float *y, int32_t *arg)
{
    GUARD(CPU->maxpool_forward(s, x, y, arg));
}
static void dm_maxpool_backward(const dt_pool_shape *s, const float *dy, const int32_t *arg,
                                float *dx, int dx_fresh)
{
    GUARD(CPU->maxpool_backward(s, dy, arg, dx, dx_fresh));
}
static void dm_avgpool_forward(int B, int C, int HW, int blk, const float *x, float *y)
{
    GUARD(CPU->avgpool_forward(B, C, HW, blk, x, y));
}
static void dm_avgpool_backward(int B, int C, int HW, int blk, const float *dy, float *dx)
{
    GUARD(CPU->avgpool_backward(B, C, HW, blk, dy, dx));
}
static void dm_relu_forward(size_t n, const float *x, float *y)
{
    GUARD(CPU->relu_forward(n, x, y));
}
static void dm_relu_backward(size_t n, const float *y, const float *dy, float *dx)
{
    GUARD(CPU->relu_backward(n, y, dy, dx));
}
static void dm_relu_backward_inplace(size_t n, const float *y, float *d)
{
    GUARD(CPU->relu_backward_inplace(n, y, d));
}
static void dm_sigmoid_forward(size_t n, const float *x, float *y)
{
    GUARD(CPU->sigmoid_forward(n, x, y));
}
static void dm_sigmoid_backward(size_t n, const float *y, const float *dy, float *dx)
{
    GUARD(CPU->sigmoid_backward(n, y, dy, dx));
}
static void dm_dropout_forward(size_t n, float p, uint64_t key, const float *x, float *y,
                               float *mask)
{
    GUARD(CPU->dropout_forward(n, p, key, x, y, mask));
}
static void dm_dropout_backward(size_t n, const float *mask, const float *dy, float *dx,
                                int dx_fresh)
{
    GUARD(CPU->dropout_backward(n, mask, dy, dx, dx_fresh));
}
static void dm_groupnorm_forward(int B, int C, int HW, int G, int blk, const float *x,
                                 const float *gamma, const float *beta, const float *skip,
                                 int relu, float *y, float *mean, float *rstd)
{
    GUARD(CPU->groupnorm_forward(B, C, HW, G, blk, x, gamma, beta, skip, relu, y, mean, rstd));
}
static void dm_groupnorm_backward(int B, int C, int HW, int G, int blk, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *y, const float *dy, float *dx, float *dskip,
                                  int dx_fresh, int dskip_fresh, float *dgamma, float *dbeta)
{
    GUARD(CPU->groupnorm_backward(B, C, HW, G, blk, x, gamma, mean, rstd, y, dy, dx, dskip,
                                  dx_fresh, dskip_fresh, dgamma, dbeta));
}
static void dm_add_forward(size_t n, const float *a, const float *b, float *y)
{
    GUARD(CPU->add_forward(n, a, b, y));
}
static void dm_add_backward(size_t n, const float *dy, float *da, float *db)
{
    GUARD(CPU->add_backward(n, dy, da, db));
}
static double dm_softmax_xent(int B, int K, const float *logits, const int32_t *labels,
                              float *dlogits, int *correct)
{
    double loss;
    GUARD(loss = CPU->softmax_xent(B, K, logits, labels, dlogits, correct));
    return loss;
}
static void dm_softmax_xent_rows(int B, int K, const float *logits, const int32_t *labels,
                                 float *dlogits, void *rows)
{
    GUARD(CPU->softmax_xent_rows(B, K, logits, labels, dlogits, rows));
}
static double dm_softmax_xent_sum(int B, int K, const void *rows, int *correct)
{
    double loss;
    GUARD(loss = CPU->softmax_xent_sum(B, K, rows, correct));
    return loss;
}
static void dm_dropout_forward_keyed(size_t n, float p, const uint64_t *key, const float *x,
                                     float *y, float *mask)
{
    GUARD(CPU->dropout_forward_keyed(n, p, key, x, y, mask));
}
static void dm_flat_sgd(size_t n, float momentum, float weight_decay, int nesterov, float lr,
                        float *x, const float *g, float *v)
{
    GUARD(CPU->flat_sgd(n, momentum, weight_decay, nesterov, lr, x, g, v));
}
static void dm_flat_scale(size_t n, float a, float *x) { GUARD(CPU->flat_scale(n, a, x)); }
static void dm_flat_diff_scale(size_t n, float a, const float *x, const float *c, float *out)
{
    GUARD(CPU->flat_diff_scale(n, a, x, c, out));
}
static void dm_flat_toward(size_t n, float beta, float inv, const float *mean, float *c)
{
    GUARD(CPU->flat_toward(n, beta, inv, mean, c));
}
static void dm_flat_sub(size_t n, const float *d, float *x) { GUARD(CPU->flat_sub(n, d, x)); }
static void dm_flat_scale_copy(size_t n, float a, float *x, float *y)
{
    GUARD(CPU->flat_scale_copy(n, a, x, y));
}
static void dm_flat_add(size_t n, const float *d, float *x) { GUARD(CPU->flat_add(n, d, x)); }
static void dm_flat_div(size_t n, const float *x, const float *w, float *z)
{
    GUARD(CPU->flat_div(n, x, w, z));
}
/* c is host memory, like the CUDA backend's */
static void dm_flat_sum_slots(size_t n, int k, const float *c, const float *slots, float *out)
{
    GUARD(CPU->flat_sum_slots(n, k, c, slots, out));
}
static void dm_flat_ax_plus(size_t n, float a, const float *x, float *y)
{
    GUARD(CPU->flat_ax_plus(n, a, x, y));
}

/* segs is host memory, like the CUDA backend's */
static void dm_flat_adamw(size_t n, const dt_adamw_k *k, const dt_adamw_seg *segs, int nseg,
                          float *x, const float *g, float *m, float *v)
{
    GUARD(CPU->flat_adamw(n, k, segs, nseg, x, g, m, v));
}
static void dm_flat_clip(size_t n, double max_norm, float *g)
{
    GUARD(CPU->flat_clip(n, max_norm, g));
}

static void dm_embedding_forward(int B, int T, int C, const int32_t *tok, const float *wte,
                                 const float *wpe, float p, const uint64_t *key, float *x)
{
    GUARD(CPU->embedding_forward(B, T, C, tok, wte, wpe, p, key, x));
}
static void dm_layernorm_forward(int N, int C, const float *x, const float *g, const float *b,
                                 float *y, float *mean, float *rstd)
{
    GUARD(CPU->layernorm_forward(N, C, x, g, b, y, mean, rstd));
}
static void dm_layernorm_residual_forward(int N, int C, const float *x, const float *r, float p,
                                          const uint64_t *key, const float *g, const float *b,
                                          float *xo, float *y, float *mean, float *rstd)
{
    GUARD(CPU->layernorm_residual_forward(N, C, x, r, p, key, g, b, xo, y, mean, rstd));
}

static void dm_embedding_backward(int B, int T, int C, const int32_t *tok, const float *dx,
                                  float p, const uint64_t *key, float *dwte, float *dwpe)
{
    GUARD(CPU->embedding_backward(B, T, C, tok, dx, p, key, dwte, dwpe));
}
static void dm_layernorm_apply(int N, int C, const float *x, const float *mean,
                               const float *rstd, const float *g, const float *b, float *y)
{
    GUARD(CPU->layernorm_apply(N, C, x, mean, rstd, g, b, y));
}
static void dm_branch_dropout_grad(size_t n, const float *dres, float p, const uint64_t *key,
                                   float *d)
{
    GUARD(CPU->branch_dropout_grad(n, dres, p, key, d));
}
static void dm_layernorm_backward(int N, int C, const float *x, const float *mean,
                                  const float *rstd, const float *g, const float *dy, float *dx,
                                  int accumulate, float *dg, float *db)
{
    GUARD(CPU->layernorm_backward(N, C, x, mean, rstd, g, dy, dx, accumulate, dg, db));
}
static void dm_attention_forward(int B, int T, int C, int NH, const float *qkv, float *y,
                                 float *lse, float p, const uint64_t *key)
{
    GUARD(CPU->attention_forward(B, T, C, NH, qkv, y, lse, p, key));
}
static void dm_attention_backward(int B, int T, int C, int NH, const float *qkv,
                                  const float *lse, const float *dy, float p, const uint64_t *key,
                                  float *dqkv)
{
    GUARD(CPU->attention_backward(B, T, C, NH, qkv, lse, dy, p, key, dqkv));
}
static void dm_gelu_forward(size_t n, const float *x, float *y)
{
    GUARD(CPU->gelu_forward(n, x, y));
}
static void dm_gelu_forward_deriv(size_t n, const float *x, float *y, float *d)
{
    GUARD(CPU->gelu_forward_deriv(n, x, y, d));
}
static void dm_gelu_backward_deriv(size_t n, const float *d, float *dy)
{
    GUARD(CPU->gelu_backward_deriv(n, d, dy));
}
static void dm_xent_seq_rows(int N, int V, const float *logits, const int32_t *targets,
                             float *lse, void *rows)
{
    GUARD(CPU->xent_seq_rows(N, V, logits, targets, lse, rows));
}
static void dm_xent_seq_backward(int N, int V, const float *logits, const float *lse,
                                 const int32_t *targets, float scale, float *d)
{
    GUARD(CPU->xent_seq_backward(N, V, logits, lse, targets, scale, d));
}

static const dt_backend devmem = {
    .name = "cpu-devmem",
    .cblock = 0,
    .device = 1,
    .mem_alloc = dm_alloc, .mem_free = dm_free, .mem_zero = dm_zero, .mem_copy = dm_copy,
    .mem_peak = dm_mem_peak,
    .to_backend = dm_copy, .to_host = dm_copy,
    .host_alloc = dm_host_alloc, .host_free = dm_host_free,
    .linear_forward = dm_linear_forward, .linear_backward = dm_linear_backward,
    .conv2d_workspace = dm_conv2d_workspace, .conv2d_dx_accumulates = dm_conv2d_dx_accumulates,
    .conv2d_forward = dm_conv2d_forward, .conv2d_backward = dm_conv2d_backward,
    .maxpool_forward = dm_maxpool_forward, .maxpool_backward = dm_maxpool_backward,
    .avgpool_forward = dm_avgpool_forward, .avgpool_backward = dm_avgpool_backward,
    .relu_forward = dm_relu_forward, .relu_backward = dm_relu_backward,
    .relu_backward_inplace = dm_relu_backward_inplace,
    .sigmoid_forward = dm_sigmoid_forward, .sigmoid_backward = dm_sigmoid_backward,
    .dropout_forward = dm_dropout_forward, .dropout_backward = dm_dropout_backward,
    .groupnorm_forward = dm_groupnorm_forward, .groupnorm_backward = dm_groupnorm_backward,
    .add_forward = dm_add_forward, .add_backward = dm_add_backward,
    .softmax_xent = dm_softmax_xent,
    .softmax_xent_rows = dm_softmax_xent_rows,
    .softmax_xent_sum = dm_softmax_xent_sum,
    .dropout_forward_keyed = dm_dropout_forward_keyed,
    .flat_sgd = dm_flat_sgd, .flat_scale = dm_flat_scale,
    .flat_diff_scale = dm_flat_diff_scale, .flat_toward = dm_flat_toward, .flat_sub = dm_flat_sub,
    .flat_scale_copy = dm_flat_scale_copy, .flat_add = dm_flat_add, .flat_div = dm_flat_div,
    .flat_sum_slots = dm_flat_sum_slots, .flat_ax_plus = dm_flat_ax_plus,
    .flat_adamw = dm_flat_adamw, .flat_clip = dm_flat_clip,
    .embedding_forward = dm_embedding_forward, .layernorm_forward = dm_layernorm_forward,
    .layernorm_residual_forward = dm_layernorm_residual_forward,
    .embedding_backward = dm_embedding_backward, .layernorm_apply = dm_layernorm_apply,
    .branch_dropout_grad = dm_branch_dropout_grad,
    .layernorm_backward = dm_layernorm_backward, .attention_forward = dm_attention_forward,
    .attention_backward = dm_attention_backward,
    .gelu_forward = dm_gelu_forward, .gelu_forward_deriv = dm_gelu_forward_deriv,
    .gelu_backward_deriv = dm_gelu_backward_deriv, .xent_seq_rows = dm_xent_seq_rows,
    .xent_seq_backward = dm_xent_seq_backward,
};

const dt_backend *backend_cpu_devmem(void) { return &devmem; }
