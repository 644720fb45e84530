/* bf16 GEMM through oneDNN's matmul primitive (backend/cpu/gemm_bf16.h). */
#include "config.h"

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/dnnl_impl.h"
#include "core/bf16_round.h"

#include "core/error.h"
#include "core/isa.h"
#include "core/simd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the rounding of one float (core/bf16_round.h) */
static inline dt_bf16 bf16_of(float f) { return bf16_round(f); }

/* AVX-512 where the CPU has it (the integer steps above, 16 at a time; the
 * same bits as the default clone), else the baseline build */
DT_KERNEL_BODY void convert_span_body(size_t n, const float *x, dt_bf16 *y)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = bf16_of(x[i]);
}
DT_KERNEL_VARIANTS(convert_span, (size_t n, const float *x, dt_bf16 *y), (n, x, y));

void bf16_from_f32(size_t n, const float *x, dt_bf16 *y)
{
    DT_PARALLEL_CHUNKS(n, i0, len, DT_KERNEL(convert_span)(len, x + i0, y + i0));
}

void bf16_to_f32(size_t n, const dt_bf16 *x, float *y)
{
    DT_PARALLEL_CHUNKS(n, i0, len, {
        for (size_t i = i0; i < i0 + len; i++) {
            const uint32_t u = (uint32_t)x[i] << 16;
            memcpy(&y[i], &u, sizeof u);
        }
    });
}

void bf16_round_f32(size_t n, float *x)
{
    DT_PARALLEL_CHUNKS(n, i0, len, {
        for (size_t i = i0; i < i0 + len; i++) {
            const uint32_t u = (uint32_t)bf16_of(x[i]) << 16;
            memcpy(&x[i], &u, sizeof u);
        }
    });
}

#ifdef HAVE_DNNL

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define DNNL_CHECK(call)                                                                 \
    do {                                                                                 \
        dnnl_status_t dnnl_rc_ = (call);                                                 \
        if (dnnl_rc_ != dnnl_success)                                                    \
            DT_FATAL("oneDNN: %s failed: %s", #call, dnnl_status2str(dnnl_rc_));         \
    } while (0)

int bf16_check_cpu(void)
{
    /* the ISA values are nested bit sets: AMX includes AVX512-BF16 */
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const unsigned need = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    if (isa_level() < DT_ISA_AVX512_CORE_BF16 && isa_detect() >= DT_ISA_AVX512_CORE_BF16)
        return dt_err_set("compute.precision = bf16: %s = %s caps this rank below "
                          "avx512_core_bf16, which this CPU has; lift the cap or use "
                          "compute.precision = fp32", DT_ISA_CAP_VAR, isa_name(isa_level()));
    if (((unsigned)isa & need) == need)
        return 0;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16"))
        return dt_err_set("compute.precision = bf16: oneDNN's CPU ISA is capped at %s "
                          "(ONEDNN_MAX_CPU_ISA), below avx512_core_bf16, which this CPU "
                          "has; lift the cap or use compute.precision = fp32",
                          dnnl_isa_in_force());
    return dt_err_set("compute.precision = bf16: this CPU has no bf16 instructions "
                      "(neither AVX512-BF16 nor AMX-BF16; oneDNN's best ISA here is %s, where "
                      "bf16 is emulated and slower than fp32); use compute.precision = fp32",
                      dnnl_isa_in_force());
}

typedef struct mm_key {
    int ta, tb, M, N, K, lda, ldb, ldc, threads;
    float alpha, beta;
} mm_key;

typedef struct mm_entry {
    mm_key k;
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c; /* handles set per call */
    dnnl_memory_t scratch; /* the primitive's scratchpad: a view of the shared one */
    size_t scratch_bytes;
    struct mm_entry *next;
} mm_entry;

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static mm_entry *cache;
/* One scratchpad for every primitive (user mode), grown to the largest any
 * of them asks for: calls run one at a time, so they can share it, where
 * oneDNN's default gives each matmul primitive its own (2.5 MB over the
 * "baby" GPT's shapes, as much again as its bf16 weights). */
static void *scratch_buf;
static size_t scratch_cap;

static void engine_init(void)
{
    DNNL_CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
}

/* A (rows, cols) row-major view with row stride ld, or its transpose: oneDNN
 * takes both as strides over the logical (rows, cols) of op(X). */
static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans,
                  dnnl_data_type_t dt)
{
    dnnl_dims_t d = { rows, cols };
    dnnl_dims_t s = { trans ? 1 : ld, trans ? ld : 1 };
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 2, d, dt, s));
}

static mm_entry *entry_make(const mm_key *k)
{
    mm_entry *e = dt_calloc(1, sizeof *e);
    e->k = *k;
    dnnl_memory_desc_t a, b, c;
    md_2d(&a, k->M, k->K, k->lda, k->ta, dnnl_bf16);
    md_2d(&b, k->K, k->N, k->ldb, k->tb, dnnl_bf16);
    md_2d(&c, k->M, k->N, k->ldc, 0, dnnl_f32);
    dnnl_matmul_desc_t md;
    DNNL_CHECK(dnnl_matmul_desc_init(&md, &a, &b, NULL, &c));
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (k->alpha != 1.0f)
        DNNL_CHECK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha));
    if (k->beta != 0.0f) {
        dnnl_post_ops_t po;
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, k->beta));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        DNNL_CHECK(dnnl_post_ops_destroy(po));
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t rc = dnnl_primitive_desc_create(&pd, &md, attr, engine, NULL);
    if (rc != dnnl_success)
        DT_FATAL("oneDNN has no bf16 matmul for M %d N %d K %d (trans %d/%d, ld %d/%d/%d): %s",
                 k->M, k->N, k->K, k->ta, k->tb, k->lda, k->ldb, k->ldc, dnnl_status2str(rc));
    DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    char what[96];
    snprintf(what, sizeof what, "a bf16 matmul (M %d N %d K %d)", k->M, k->N, k->K);
    dnnl_impl_note(dnnl_impl_of(pd), what);
    DNNL_CHECK(dnnl_primitive_create(&e->p, pd));
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = dnnl_memory_desc_get_size(sp);
    DNNL_CHECK(dnnl_memory_create(&e->scratch, sp, engine, DNNL_MEMORY_NONE));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    DNNL_CHECK(dnnl_memory_create(&e->a, &a, engine, DNNL_MEMORY_NONE));
    DNNL_CHECK(dnnl_memory_create(&e->b, &b, engine, DNNL_MEMORY_NONE));
    DNNL_CHECK(dnnl_memory_create(&e->c, &c, engine, DNNL_MEMORY_NONE));
    return e;
}

static mm_entry *entry_get(const mm_key *k)
{
    pthread_once(&engine_once, engine_init);
    pthread_mutex_lock(&cache_lock);
    mm_entry *e = cache;
    while (e && memcmp(&e->k, k, sizeof *k) != 0)
        e = e->next;
    if (!e) {
        e = entry_make(k);
        e->next = cache;
        cache = e;
    }
    pthread_mutex_unlock(&cache_lock);
    return e;
}

/* C = beta C without a product (K = 0); beta = 0 clears, NaN included */
static void scale_c(int M, int N, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
}

void gemm_bf16_pre(int transA, int transB, int M, int N, int K, float alpha, const dt_bf16 *A,
                   int lda, const dt_bf16 *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    mm_key k;
    memset(&k, 0, sizeof k); /* the key is compared bytewise */
    k.ta = !!transA;
    k.tb = !!transB;
    k.M = M;
    k.N = N;
    k.K = K;
    k.lda = lda;
    k.ldb = ldb;
    k.ldc = ldc;
    k.alpha = alpha;
    k.beta = beta;
#ifdef _OPENMP
    k.threads = omp_get_max_threads(); /* oneDNN fixes the work split at creation */
#else
    k.threads = 1;
#endif
    mm_entry *e = entry_get(&k);
    if (e->scratch_bytes > scratch_cap) {
        free(scratch_buf); /* 64-byte aligned, as oneDNN's own scratchpads */
        if (posix_memalign(&scratch_buf, 64, e->scratch_bytes) != 0)
            DT_FATAL("gemm_bf16: out of memory for a %zu-byte oneDNN scratchpad",
                     e->scratch_bytes);
        scratch_cap = e->scratch_bytes;
    }
    DNNL_CHECK(dnnl_memory_set_data_handle(e->scratch, scratch_buf));
    DNNL_CHECK(dnnl_memory_set_data_handle(e->a, (void *)A));
    DNNL_CHECK(dnnl_memory_set_data_handle(e->b, (void *)B));
    DNNL_CHECK(dnnl_memory_set_data_handle(e->c, C));
    dnnl_exec_arg_t args[4] = { { DNNL_ARG_SRC, e->a }, { DNNL_ARG_WEIGHTS, e->b },
                                { DNNL_ARG_DST, e->c }, { DNNL_ARG_SCRATCHPAD, e->scratch } };
    DNNL_CHECK(dnnl_primitive_execute(e->p, stream, 4, args));
    DNNL_CHECK(dnnl_stream_wait(stream));
}

/* The operands' bf16 copies, grown to the largest call: a (rows, cols)
 * matrix with row stride ld is packed to row stride cols. */
static dt_bf16 *pack_buf[2];
static size_t pack_cap[2];

static const dt_bf16 *pack(int which, int rows, int cols, const float *X, int ld)
{
    const size_t n = (size_t)rows * cols;
    if (n > pack_cap[which]) {
        free(pack_buf[which]);
        pack_buf[which] = dt_malloc(n * sizeof(dt_bf16));
        pack_cap[which] = n;
    }
    if (ld == cols)
        bf16_from_f32(n, X, pack_buf[which]);
    else
        for (int r = 0; r < rows; r++)
            bf16_from_f32((size_t)cols, X + (size_t)r * ld, pack_buf[which] + (size_t)r * cols);
    return pack_buf[which];
}

void gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    /* stored shapes: A (M, K) or (K, M), B (K, N) or (N, K) */
    const int ar = transA ? K : M, ac = transA ? M : K;
    const int br = transB ? N : K, bc = transB ? K : N;
    const dt_bf16 *a = pack(0, ar, ac, A, lda);
    const dt_bf16 *b = pack(1, br, bc, B, ldb);
    gemm_bf16_pre(transA, transB, M, N, K, alpha, a, ac, b, bc, beta, C, ldc);
}

#else /* without oneDNN: bf16 is refused before any product is asked for */

int bf16_check_cpu(void)
{
    return dt_err_set("compute.precision = bf16: this dtrain was built without oneDNN "
                      "(configure found no libdnnl-dev), which runs the bf16 products; use "
                      "compute.precision = fp32");
}

void gemm_bf16_pre(int transA, int transB, int M, int N, int K, float alpha, const dt_bf16 *A,
                   int lda, const dt_bf16 *B, int ldb, float beta, float *C, int ldc)
{
    DT_FATAL("gemm_bf16: this dtrain was built without oneDNN");
}

void gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
    DT_FATAL("gemm_bf16: this dtrain was built without oneDNN");
}

#endif /* HAVE_DNNL */
