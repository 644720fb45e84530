/* 2-D convolution through oneDNN, on plain or channel-blocked activations.
 *
 * oneDNN's AVX-512 (AVX2 on older nodes; the library picks at run time) direct
 * kernels read and write nChw16c activations; given plain NCHW tensors they
 * fall back to a lowering like ours. So the engine keeps the activations of a
 * conv-GroupNorm-ReLU chain blocked (nn/net.c) and this file only reorders the
 * weights, which are small, between the flat vector's OIHW and the primitive's
 * own format: once per call, since the parameters change every step.
 *
 * The algorithm is fixed by the shape, never by timing, so that a run and its
 * resume (another process) take the same arithmetic: Winograd F(4x4, 3x3) for
 * 3x3, stride-1 convolutions (padding 0 or 1) between blocked tensors where it
 * won on this machine (bench/RESULTS.md §10: 1.5-2.4x for 32 and 64 channels in
 * every pass, and for the weight gradient at 16 channels, where the direct
 * kernel is faster in the other two passes), direct otherwise. oneDNN 2.6
 * has Winograd only from AVX-512 on: at the AVX2 level the same 3x3 stride-1
 * shapes, on 8-channel blocks, go to dtrain's own F(2x2, 3x3) (conv2d_wino.c;
 * 1.5x oneDNN's direct kernel in every pass from 32 channels, bench/RESULTS.md
 * §23). A conv between plain
 * tensors goes to the native im2col kernel (conv2d.c), which is as fast there.
 *
 * Primitives are created on first use of a shape (batch size included) and
 * kept for the life of the process.
 *
 * bf16 (the backend's twin, compute.precision = bf16): the same primitives
 * with bf16 inputs and fp32 outputs and accumulation, direct (oneDNN has no
 * bf16 Winograd), plain pairs included. Without AMX a pass that fp32 runs as
 * Winograd stays fp32 (bf16_conv2d_pass_bf16), fixed by shape and ISA. The flat vector's
 * weights are reordered to bf16 per pass; x and dy are rounded to bf16 into
 * the engine's conv scratch (work; x in dx where the backward allows it,
 * bf16_conv2d_pass_workspace) on each call, so the kernels keep nothing
 * in bf16 between the forward and the backward: x is rounded again in the
 * weight-gradient pass, which costs a pass over x against the C R S
 * multiply-adds per element the convolution does. (The engine may keep x
 * in bf16 where the weight gradient is a bf16 pass, widened back to floats
 * before the call: bf16_conv2d_reads_x_bf16, nn/net_plan.c.) dx, dw, db and
 * y are fp32. */
#include "config.h"

#include "backend/cpu/kernels.h"

#ifdef HAVE_DNNL

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/isa.h"
#include "backend/cpu/dnnl_impl.h"
#include "nn/layout.h"

#define DNNL_CHECK(call)                                                                 \
    do {                                                                                 \
        dnnl_status_t dnnl_rc_ = (call);                                                 \
        if (dnnl_rc_ != dnnl_success)                                                    \
            DT_FATAL("oneDNN: %s failed: %s", #call, dnnl_status2str(dnnl_rc_));         \
    } while (0)

enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_WEIGHTS };

/* One primitive with its weights in the primitive's own format. */
typedef struct conv_prim {
    dnnl_primitive_t p;
    dnnl_memory_t w;          /* (diff) weights as the primitive wants them */
    dnnl_memory_t w_user;     /* the flat vector's OIHW view (handle set per call) */
    dnnl_primitive_t reorder; /* w_user -> w (fwd, bwd data), w -> w_user (bwd weights);
                               * NULL when the formats agree and w is w_user */
} conv_prim;

typedef struct conv_entry {
    dt_conv_shape s;
    int bias;
    int bf16;      /* bf16 inputs (x, w, dy), fp32 outputs */
    int threads;   /* oneDNN fixes a primitive's work split at creation */
    conv_prim pass[3];
    dnnl_primitive_desc_t fwd_pd;
    dnnl_memory_t src, dst, bias_m;  /* x / dx, y / dy, bias / diff bias (handles per call) */
    dnnl_memory_t src16, dst16;      /* bf16 entries: x and dy in bf16 */
    struct conv_entry *next;
} conv_entry;

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static conv_entry *cache;

static void engine_init(void)
{
    DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
}

static int shape_equal(const dt_conv_shape *a, const dt_conv_shape *b)
{
    return a->B == b->B && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
           a->R == b->R && a->S == b->S && a->stride == b->stride && a->pad == b->pad &&
           a->P == b->P && a->Q == b->Q && a->xblk == b->xblk && a->yblk == b->yblk;
}

static int use_winograd(const dt_conv_shape *s, int pass, int bf16)
{
    if (bf16 || s->R != 3 || s->S != 3 || s->stride != 1 || s->pad > 1 || s->xblk != 16 ||
        s->yblk != 16 || s->C % 16 || s->K % 16 || isa_level() < DT_ISA_AVX512_CORE)
        return 0;
    return pass == PASS_BWD_WEIGHTS || (s->C >= 32 && s->K >= 32);
}

static void md_act(dnnl_memory_desc_t *md, int B, int C, int H, int W, int blk,
                   dnnl_data_type_t dt)
{
    dnnl_dims_t d = { B, C, H, W };
    const dnnl_format_tag_t tag = blk == 16 ? dnnl_nChw16c : blk == 8 ? dnnl_nChw8c : dnnl_nchw;
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(md, 4, d, dt, tag));
}

static void impl_note(const char *impl, const dt_conv_shape *s, int pass)
{
    char what[160];
    snprintf(what, sizeof what, "a convolution (pass %d, %dx%dx%d -> %dx%dx%d, blocks %d -> %d)",
             pass, s->C, s->H, s->W, s->K, s->P, s->Q, s->xblk, s->yblk);
    dnnl_impl_note(impl, what);
}

/* The primitive's weights memory and the reorder between it and the user's
 * OIHW weights (to_prim: user -> primitive). */
static void prim_weights(conv_prim *cp, const dnnl_memory_desc_t *want, const dt_conv_shape *s,
                         int to_prim)
{
    dnnl_memory_desc_t user;
    dnnl_dims_t d = { s->K, s->C, s->R, s->S };
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&user, 4, d, dnnl_f32, dnnl_oihw));
    DNNL_CHECK(dnnl_memory_create(&cp->w_user, &user, engine, DNNL_MEMORY_NONE));
    if (dnnl_memory_desc_equal(want, &user)) {
        cp->w = cp->w_user;
        cp->reorder = NULL;
        return;
    }
    DNNL_CHECK(dnnl_memory_create(&cp->w, want, engine, DNNL_MEMORY_ALLOCATE));
    dnnl_primitive_desc_t rpd;
    if (to_prim)
        DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, &user, engine, want, engine, NULL));
    else
        DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, want, engine, &user, engine, NULL));
    DNNL_CHECK(dnnl_primitive_create(&cp->reorder, rpd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(rpd));
}

static void run_reorder(conv_prim *cp, int to_prim)
{
    if (!cp->reorder)
        return;
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, to_prim ? cp->w_user : cp->w },
                             { DNNL_ARG_TO, to_prim ? cp->w : cp->w_user } };
    DNNL_CHECK(dnnl_primitive_execute(cp->reorder, stream, 2, a));
}

/* The primitive descriptor of one pass; Winograd where chosen and available
 * (it needs AVX-512), else direct. The backward passes take the forward's as
 * their hint.
 *
 * A bf16 weight gradient is created for one thread whatever compute.threads
 * is: oneDNN's AVX512-BF16 backward-weights kernel transposes x and dy
 * across its threads and waits for them in a spin barrier generated inside
 * the JIT code, which OMP_WAIT_POLICY does not reach. Where the two threads
 * do not both hold a core (this 2-core machine under any other load) the
 * waiting one spins out its time slice: on a Zen 4 under load, resnet20_gn's
 * bf16 dW shapes at batch 128 took 6x (conv1, 3 -> 16) and 3.7-4.6x (the
 * stride-2 convs) the one-thread time at two threads, with 3.5x (conv1) and
 * 8.5-11x the CPU time, nearly all of it at one address in the JIT code
 * (perf). oneDNN
 * runs a primitive made for one thread inline, without the barrier; the
 * weight gradient's arithmetic then no longer depends on the thread count. */
static dnnl_primitive_desc_t pass_pd(const conv_entry *e, int pass)
{
    const dt_conv_shape *s = &e->s;
    /* bf16: what the pass reads is bf16 (x; w; dy), what it writes fp32 (y; dx; dw, db) */
    const dnnl_data_type_t in = e->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t src, dst, wts, bias;
    md_act(&src, s->B, s->C, s->H, s->W, s->xblk, pass == PASS_BWD_DATA ? dnnl_f32 : in);
    md_act(&dst, s->B, s->K, s->P, s->Q, s->yblk, pass == PASS_FWD ? dnnl_f32 : in);
    dnnl_dims_t wd = { s->K, s->C, s->R, s->S }, bd = { s->K };
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&wts, 4, wd, pass == PASS_BWD_WEIGHTS ? dnnl_f32 : in,
                                            dnnl_format_tag_any));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_x));
    dnnl_dims_t strides = { s->stride, s->stride }, pad = { s->pad, s->pad };
    dnnl_dims_t pad_r = { (s->P - 1) * s->stride + s->R - s->H - s->pad,
                          (s->Q - 1) * s->stride + s->S - s->W - s->pad };
    dnnl_primitive_desc_t pd = NULL;
    for (int wino = use_winograd(s, pass, e->bf16); wino >= 0 && !pd; wino--) {
        dnnl_alg_kind_t alg = wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
        dnnl_convolution_desc_t cd;
        dnnl_status_t rc;
        if (pass == PASS_FWD)
            rc = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, alg, &src, &wts,
                                                    e->bias ? &bias : NULL, &dst, strides, pad,
                                                    pad_r);
        else if (pass == PASS_BWD_DATA)
            rc = dnnl_convolution_backward_data_desc_init(&cd, alg, &src, &wts, &dst, strides,
                                                          pad, pad_r);
        else
            rc = dnnl_convolution_backward_weights_desc_init(&cd, alg, &src, &wts,
                                                             e->bias ? &bias : NULL, &dst,
                                                             strides, pad, pad_r);
        if (rc != dnnl_success)
            continue;
        if (dnnl_primitive_desc_create(&pd, &cd, NULL, engine,
                                       pass == PASS_FWD ? NULL : e->fwd_pd) != dnnl_success)
            pd = NULL;
        else if (wino && dnnl_impl_is_reference(dnnl_impl_of(pd))) { /* direct instead */
            DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
            pd = NULL;
        }
    }
    if (pd)
        impl_note(dnnl_impl_of(pd), s, pass);
    if (!pd)
        DT_FATAL("oneDNN has no %s convolution (pass %d) for B %d, %dx%dx%d -> %dx%dx%d, %dx%d "
                 "stride %d pad %d", e->bf16 ? "bf16" : "fp32", pass, s->B, s->C, s->H, s->W, s->K, s->P, s->Q, s->R, s->S,
                 s->stride, s->pad);
    return pd;
}

/* Create the primitive of one pass, with its weights memory and reorder, on
 * the pass's first call. The forward's descriptor is made with the entry
 * (the backward passes' hint), its primitive only where a forward runs: in
 * bf16 a pass that stays fp32 (bf16_conv2d_pass_bf16) may be a backward one
 * whose forward is bf16, and a primitive costs its JIT code and weights
 * buffer whether or not it is executed. */
static void make_pass(conv_entry *e, int pass)
{
#ifdef _OPENMP
    const int one_thread = e->bf16 && pass == PASS_BWD_WEIGHTS && e->threads > 1;
    if (one_thread) // oneDNN sizes its thread split by OpenMP's maximum at creation
        omp_set_num_threads(1);
#endif
    dnnl_primitive_desc_t pd = pass == PASS_FWD ? e->fwd_pd : pass_pd(e, pass);
    conv_prim *cp = &e->pass[pass];
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(
        pd, pass == PASS_BWD_WEIGHTS ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    prim_weights(cp, w_md, &e->s, pass != PASS_BWD_WEIGHTS);
    DNNL_CHECK(dnnl_primitive_create(&cp->p, pd));
#ifdef _OPENMP
    if (one_thread)
        omp_set_num_threads(e->threads);
#endif
    if (pass != PASS_FWD)
        DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
}

/* The entry's pass, created on first use */
static conv_prim *entry_pass(conv_entry *e, int pass)
{
    pthread_mutex_lock(&cache_lock);
    if (!e->pass[pass].p)
        make_pass(e, pass);
    pthread_mutex_unlock(&cache_lock);
    return &e->pass[pass];
}

static conv_entry *entry_get(const dt_conv_shape *s, int bias, int bf16)
{
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    pthread_once(&engine_once, engine_init);
    pthread_mutex_lock(&cache_lock);
    conv_entry *e = cache;
    while (e && !(shape_equal(&e->s, s) && e->bias == bias && e->bf16 == bf16 &&
                  e->threads == threads))
        e = e->next;
    if (!e) {
        e = dt_calloc(1, sizeof *e);
        e->s = *s;
        e->bias = bias;
        e->bf16 = bf16;
        e->threads = threads;
        dnnl_memory_desc_t src, dst, b;
        md_act(&src, s->B, s->C, s->H, s->W, s->xblk, dnnl_f32);
        md_act(&dst, s->B, s->K, s->P, s->Q, s->yblk, dnnl_f32);
        dnnl_dims_t bd = { s->K };
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x));
        DNNL_CHECK(dnnl_memory_create(&e->src, &src, engine, DNNL_MEMORY_NONE));
        DNNL_CHECK(dnnl_memory_create(&e->dst, &dst, engine, DNNL_MEMORY_NONE));
        DNNL_CHECK(dnnl_memory_create(&e->bias_m, &b, engine, DNNL_MEMORY_NONE));
        if (bf16) {
            md_act(&src, s->B, s->C, s->H, s->W, s->xblk, dnnl_bf16);
            md_act(&dst, s->B, s->K, s->P, s->Q, s->yblk, dnnl_bf16);
            DNNL_CHECK(dnnl_memory_create(&e->src16, &src, engine, DNNL_MEMORY_NONE));
            DNNL_CHECK(dnnl_memory_create(&e->dst16, &dst, engine, DNNL_MEMORY_NONE));
        }
        e->fwd_pd = pass_pd(e, PASS_FWD);
        e->next = cache;
        cache = e;
    }
    pthread_mutex_unlock(&cache_lock);
    return e;
}

static void set(dnnl_memory_t m, const void *p)
{
    DNNL_CHECK(dnnl_memory_set_data_handle(m, (void *)p));
}

static int plain_pair(const dt_conv_shape *s) { return !s->xblk && !s->yblk; }

static int wino8_on = 1;
void dnnl_conv2d_wino8(int on) { wino8_on = on; }
static int wino8(const dt_conv_shape *s) { return wino8_on && wino8_applies(s); }

/* A plain input and blocked output (a network's first conv): oneDNN 2.6 runs
 * its forward and, on AVX-512, its weight gradient with JIT kernels, but its
 * data gradient at every level, and its weight gradient on AVX2 (8-channel
 * blocks), only as reference implementations. Those passes run natively on dy
 * made plain: one reorder of dy against the reference's 100x. */
static int first_layer(const dt_conv_shape *s) { return !s->xblk && s->yblk; }
static int native_dw(const dt_conv_shape *s) { return first_layer(s) && s->yblk == 8; }

static dt_conv_shape plain_shape(const dt_conv_shape *s)
{
    dt_conv_shape p = *s;
    p.xblk = p.yblk = 0;
    return p;
}

/* dy plain (B, K, P, Q), then the native kernel's */
static size_t native_work(const dt_conv_shape *s)
{
    const dt_conv_shape p = plain_shape(s);
    return (size_t)s->B * s->K * s->P * s->Q + cpu_conv2d_workspace(&p);
}

size_t dnnl_conv2d_workspace(const dt_conv_shape *s)
{
    if (wino8(s))
        return wino8_workspace(s);
    if (first_layer(s))
        return native_work(s);
    return plain_pair(s) ? cpu_conv2d_workspace(s) : 0;
}

size_t dnnl_conv2d_pass_workspace(const dt_conv_shape *s, int pass)
{
    if (wino8(s))
        return wino8_workspace(s);
    if (first_layer(s))
        return pass == DT_CONV_WORK_BACKWARD || (pass == DT_CONV_WORK_BACKWARD_NO_DX && native_dw(s))
                   ? native_work(s) : 0;
    return plain_pair(s) ? cpu_conv2d_workspace(s) : 0;
}

/* oneDNN's backward-data primitive writes diff_src; it has no "add into" mode,
 * so the engine hands a blocked pass a fresh buffer and adds it in itself. */
int dnnl_conv2d_dx_accumulates(const dt_conv_shape *s) { return plain_pair(s) || first_layer(s); }

void dnnl_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *b, float *y, float *work)
{
    if (plain_pair(s)) {
        cpu_conv2d_forward(s, x, w, b, y, work);
        return;
    }
    if (s->B == 0)
        return;
    if (wino8(s)) {
        wino8_forward(s, x, w, b, y, work);
        return;
    }
    conv_entry *e = entry_get(s, b != NULL, 0);
    conv_prim *cp = entry_pass(e, PASS_FWD);
    set(cp->w_user, w);
    run_reorder(cp, 1);
    set(e->src, x);
    set(e->dst, y);
    dnnl_exec_arg_t a[4] = { { DNNL_ARG_SRC, e->src }, { DNNL_ARG_WEIGHTS, cp->w },
                             { DNNL_ARG_DST, e->dst }, { DNNL_ARG_BIAS, e->bias_m } };
    if (b)
        set(e->bias_m, b);
    DNNL_CHECK(dnnl_primitive_execute(cp->p, stream, b ? 4 : 3, a));
    DNNL_CHECK(dnnl_stream_wait(stream));
}

void dnnl_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                          const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                          float *work)
{
    if (plain_pair(s)) {
        cpu_conv2d_backward(s, x, w, dy, dx, dx_fresh, dw, db, work);
        return;
    }
    if (first_layer(s) && (dx || native_dw(s))) {
        const dt_conv_shape p = plain_shape(s);
        float *dy_plain = work, *native = work + (size_t)s->B * s->K * s->P * s->Q;
        layout_to_plain(s->yblk, s->B, s->K, s->P * s->Q, dy, dy_plain);
        if (native_dw(s) || !dw) {
            cpu_conv2d_backward(&p, x, w, dy_plain, dx, dx_fresh, dw, db, native);
            return;
        }
        cpu_conv2d_backward(&p, x, w, dy_plain, dx, dx_fresh, NULL, NULL, native);
        dx = NULL; /* the weight gradient below, by oneDNN */
    }
    if (dx && !dx_fresh)
        DT_FATAL("dnnl_conv2d_backward: a blocked pass cannot add into dx "
                 "(conv2d_dx_accumulates)");
    if (s->B == 0) {
        if (dw)
            memset(dw, 0, (size_t)s->K * s->C * s->R * s->S * sizeof(float));
        if (db)
            memset(db, 0, (size_t)s->K * sizeof(float));
        return;
    }
    if (db && !dw) // a bias without a weight gradient does not occur in the engine
        DT_FATAL("dnnl_conv2d_backward: a bias gradient needs the weight gradient");
    if (wino8(s)) {
        wino8_backward(s, x, w, dy, dx, dw, db, work);
        return;
    }
    conv_entry *e = entry_get(s, db != NULL, 0);
    pthread_mutex_lock(&cache_lock);
    if (dx && !e->pass[PASS_BWD_DATA].p)
        make_pass(e, PASS_BWD_DATA);
    if (dw && !e->pass[PASS_BWD_WEIGHTS].p)
        make_pass(e, PASS_BWD_WEIGHTS);
    pthread_mutex_unlock(&cache_lock);
    set(e->dst, dy);
    if (dw) {
        conv_prim *cp = &e->pass[PASS_BWD_WEIGHTS];
        set(cp->w_user, dw);
        set(e->src, x);
        dnnl_exec_arg_t a[4] = { { DNNL_ARG_SRC, e->src }, { DNNL_ARG_DIFF_DST, e->dst },
                                 { DNNL_ARG_DIFF_WEIGHTS, cp->w },
                                 { DNNL_ARG_DIFF_BIAS, e->bias_m } };
        if (db)
            set(e->bias_m, db);
        DNNL_CHECK(dnnl_primitive_execute(cp->p, stream, db ? 4 : 3, a));
        run_reorder(cp, 0);
    }
    if (dx) {
        conv_prim *cp = &e->pass[PASS_BWD_DATA];
        set(cp->w_user, w);
        run_reorder(cp, 1);
        (void)work;
        set(e->src, dx);
        dnnl_exec_arg_t a[3] = { { DNNL_ARG_DIFF_SRC, e->src }, { DNNL_ARG_WEIGHTS, cp->w },
                                 { DNNL_ARG_DIFF_DST, e->dst } };
        DNNL_CHECK(dnnl_primitive_execute(cp->p, stream, 3, a));
    }
    DNNL_CHECK(dnnl_stream_wait(stream));
}

#endif /* HAVE_DNNL */

#ifdef HAVE_DNNL

#include "backend/cpu/gemm_bf16.h"

/* Where the bf16 copies of x and dy go: the forward's x in the conv
 * scratch; the backward's dy at the start of the scratch, and x (read only
 * by the weight gradient, which runs before the data gradient writes dx) in
 * dx when the data gradient is a bf16 pass of this call, else in the
 * scratch after dy at a 64-byte boundary. So a pass's scratch is one
 * tensor's bf16 copy, two only where no dx is asked for. */
static size_t x_elems(const dt_conv_shape *s) { return (size_t)s->B * s->C * s->H * s->W; }
static size_t y_elems(const dt_conv_shape *s) { return (size_t)s->B * s->K * s->P * s->Q; }
static size_t y16_span(const dt_conv_shape *s) { return (y_elems(s) + 31) / 32 * 32; }
static size_t floats_of_bf16(size_t n) { return (n + 1) / 2; }

/* Without AMX, oneDNN's bf16 kernels (AVX512-BF16: a dot product of bf16
 * pairs per fp32 lane) run at most twice fp32's rate, and Winograd F(4x4,
 * 3x3) does a quarter of the direct multiplies in fp32: measured on a Zen 4,
 * bf16 direct took 1.0-1.3x fp32 Winograd's time forward and backward-data
 * and 1.4-1.7x for the weight gradient (C 16-64, batch 32). So there the
 * passes fp32 runs as Winograd stay fp32 (bit for bit the fp32 backend's),
 * but for the data gradient of an unpadded convolution at batch 64 and more
 * (below); with AMX
 * every pass is bf16. Fixed by shape and ISA, never by timing, so a
 * run and its resume on the same kind of machine compute alike. */
static int have_amx(void)
{
    const unsigned amx = (unsigned)dnnl_cpu_isa_avx512_core_amx;
    return ((unsigned)dnnl_get_effective_cpu_isa() & amx) == amx;
}

int bf16_conv2d_pass_bf16(const dt_conv_shape *s, int pass)
{
    if (have_amx() || !use_winograd(s, pass, 0))
        return 1;
    /* The one exception without AMX: the data gradient of an unpadded 3x3
     * convolution (a convolution of dy padded by 2 on every side) runs
     * faster as bf16 direct than as fp32 Winograd. mnist_cnn's conv2 (32 ->
     * 64, 26x26 -> 24x24), one Zen 4 thread, whole bf16 steps, alternating:
     * batch 128 1,807-1,851 -> 1,980-2,006 and 1,706-1,785 -> 1,923-1,929
     * img/s; batch 32 1,887-1,933 -> 2,010-2,080 and 1,947-1,979 ->
     * 1,943-1,954. Batches under 64 keep fp32: there the gain is within the
     * noise and the copy of dy it needs put bf16's peak RSS above fp32's
     * (mnist_cnn batch 32: 125.9 against 125.5-125.7 MB). The padded
     * convolutions of the ResNets keep the rule (resnet20_gn, batch 128,
     * with them bf16 too: 555-577 -> 537-574). */
    return pass == PASS_BWD_DATA && s->pad == 0 && s->B >= 64;
}

/* The weight gradient reads x only as its bf16 copy where it is a bf16
 * pass: there the engine may keep x in bf16 for the backward (backend.h) */
int bf16_conv2d_reads_x_bf16(const dt_conv_shape *s)
{
    return bf16_conv2d_pass_bf16(s, PASS_BWD_WEIGHTS);
}

size_t bf16_conv2d_pass_workspace(const dt_conv_shape *s, int pass)
{
    const size_t fp32 = dnnl_conv2d_workspace(s); /* the passes that stay fp32 */
    size_t mine = 0;
    if (pass == DT_CONV_WORK_FORWARD) {
        if (bf16_conv2d_pass_bf16(s, PASS_FWD))
            mine = floats_of_bf16(x_elems(s));
    } else {
        const int dw16 = bf16_conv2d_pass_bf16(s, PASS_BWD_WEIGHTS);
        const int dx16 = pass == DT_CONV_WORK_BACKWARD && bf16_conv2d_pass_bf16(s, PASS_BWD_DATA);
        if (dw16 || dx16)
            mine = floats_of_bf16(y16_span(s) + (dw16 && !dx16 ? x_elems(s) : 0));
    }
    return mine > fp32 ? mine : fp32;
}

size_t bf16_conv2d_workspace(const dt_conv_shape *s)
{
    const size_t f = bf16_conv2d_pass_workspace(s, DT_CONV_WORK_FORWARD);
    const size_t b = bf16_conv2d_pass_workspace(s, DT_CONV_WORK_BACKWARD);
    const size_t n = bf16_conv2d_pass_workspace(s, DT_CONV_WORK_BACKWARD_NO_DX);
    const size_t m = f > b ? f : b; /* b < n where dy and x are rounded, b > n where dy alone */
    return m > n ? m : n;
}

/* Every bf16 pass is oneDNN's, whose backward-data writes dx. */
int bf16_conv2d_dx_accumulates(const dt_conv_shape *s) { return 0; }

void bf16_conv2d_forward(const dt_conv_shape *s, const float *x, const float *w,
                         const float *b, float *y, float *work)
{
    if (s->B == 0)
        return;
    if (!bf16_conv2d_pass_bf16(s, PASS_FWD)) {
        dnnl_conv2d_forward(s, x, w, b, y, work);
        return;
    }
    conv_entry *e = entry_get(s, b != NULL, 1);
    conv_prim *cp = entry_pass(e, PASS_FWD);
    dt_bf16 *x16 = (dt_bf16 *)work;
    bf16_from_f32(x_elems(s), x, x16);
    set(cp->w_user, w);
    run_reorder(cp, 1);
    set(e->src16, x16);
    set(e->dst, y);
    dnnl_exec_arg_t a[4] = { { DNNL_ARG_SRC, e->src16 }, { DNNL_ARG_WEIGHTS, cp->w },
                             { DNNL_ARG_DST, e->dst }, { DNNL_ARG_BIAS, e->bias_m } };
    if (b)
        set(e->bias_m, b);
    DNNL_CHECK(dnnl_primitive_execute(cp->p, stream, b ? 4 : 3, a));
    DNNL_CHECK(dnnl_stream_wait(stream));
}

void bf16_conv2d_backward(const dt_conv_shape *s, const float *x, const float *w,
                          const float *dy, float *dx, int dx_fresh, float *dw, float *db,
                          float *work)
{
    if (dx && !dx_fresh)
        DT_FATAL("bf16_conv2d_backward: cannot add into dx (conv2d_dx_accumulates)");
    if (s->B == 0) {
        if (dw)
            memset(dw, 0, (size_t)s->K * s->C * s->R * s->S * sizeof(float));
        if (db)
            memset(db, 0, (size_t)s->K * sizeof(float));
        return;
    }
    if (db && !dw) // a bias without a weight gradient does not occur in the engine
        DT_FATAL("bf16_conv2d_backward: a bias gradient needs the weight gradient");
    /* the passes that stay fp32 (bf16_conv2d_pass_bf16) in one call, so that
     * they share one fp32 entry (with the bias the weight gradient has), then
     * the rest here */
    const int dw32 = dw && !bf16_conv2d_pass_bf16(s, PASS_BWD_WEIGHTS);
    const int dx32 = dx && !bf16_conv2d_pass_bf16(s, PASS_BWD_DATA);
    if (dw32 || dx32) {
        dnnl_conv2d_backward(s, x, w, dy, dx32 ? dx : NULL, 1, dw32 ? dw : NULL,
                             dw32 ? db : NULL, work);
        if (dw32)
            dw = db = NULL;
        if (dx32)
            dx = NULL;
    }
    if (!dw && !dx)
        return;
    conv_entry *e = entry_get(s, db != NULL, 1);
    pthread_mutex_lock(&cache_lock);
    if (dx && !e->pass[PASS_BWD_DATA].p)
        make_pass(e, PASS_BWD_DATA);
    if (dw && !e->pass[PASS_BWD_WEIGHTS].p)
        make_pass(e, PASS_BWD_WEIGHTS);
    pthread_mutex_unlock(&cache_lock);
    dt_bf16 *dy16 = (dt_bf16 *)work;
    dt_bf16 *x16 = dx ? (dt_bf16 *)dx : dy16 + y16_span(s);
    bf16_from_f32(y_elems(s), dy, dy16);
    set(e->dst16, dy16);
    if (dw) {
        conv_prim *cp = &e->pass[PASS_BWD_WEIGHTS];
        bf16_from_f32(x_elems(s), x, x16);
        set(cp->w_user, dw);
        set(e->src16, x16);
        dnnl_exec_arg_t a[4] = { { DNNL_ARG_SRC, e->src16 }, { DNNL_ARG_DIFF_DST, e->dst16 },
                                 { DNNL_ARG_DIFF_WEIGHTS, cp->w },
                                 { DNNL_ARG_DIFF_BIAS, e->bias_m } };
        if (db)
            set(e->bias_m, db);
        DNNL_CHECK(dnnl_primitive_execute(cp->p, stream, db ? 4 : 3, a));
        run_reorder(cp, 0);
    }
    if (dx) {
        conv_prim *cp = &e->pass[PASS_BWD_DATA];
        set(cp->w_user, w);
        run_reorder(cp, 1);
        set(e->src, dx);
        dnnl_exec_arg_t a[3] = { { DNNL_ARG_DIFF_SRC, e->src }, { DNNL_ARG_WEIGHTS, cp->w },
                                 { DNNL_ARG_DIFF_DST, e->dst16 } };
        DNNL_CHECK(dnnl_primitive_execute(cp->p, stream, 3, a));
    }
    DNNL_CHECK(dnnl_stream_wait(stream));
}

#endif /* HAVE_DNNL */

