/* The CPU backend's kernel table (backend/cpu/dispatch.h). */
#include "config.h"

#include "backend/cpu/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "backend/cpu/dnnl_impl.h"

static const char *const vec_names[3] = { "sse2", "avx2+fma", "avx512" };

static dt_cpu_dispatch table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    table.cpu = isa_detect();
    table.level = isa_level();
    table.vec = isa_vec();
    table.vec_name = vec_names[table.vec];
    table.cblock = table.level >= DT_ISA_AVX512_CORE ? 16 : 8;
    table.attention = table.vec == 2 ? "avx512 tiles" : table.vec == 1 ? "avx2+fma tiles"
                                                                         : "sse2 tiles";
    /* The products with A transposed (a linear layer's weight gradient, dy^T x)
     * at the AVX2 level: OpenBLAS's Haswell kernels ran them 4-9 % faster than
     * oneDNN's sgemm on one thread of a Xeon (Sapphire Rapids) capped to avx2,
     * at the GPT's shapes (K = B T = 768 rows against 128-512 columns); on two
     * threads, and at the AVX-512 levels, oneDNN's ran every shape faster. */
    table.sgemm_ta_blas = table.level == DT_ISA_AVX2;
}

const dt_cpu_dispatch *cpu_dispatch(void)
{
    pthread_once(&table_once, table_init);
    return &table;
}

void cpu_dispatch_describe(char *out, size_t len)
{
    const dt_cpu_dispatch *d = cpu_dispatch();
    char cap[128] = "";
    if (d->level != d->cpu)
        snprintf(cap, sizeof cap, " (cap %s=%s on an %s CPU)", DT_ISA_CAP_VAR, isa_name(d->level),
                 isa_name(d->cpu));
#ifdef HAVE_DNNL
    char conv[160];
    /* conv2d_wino.c takes the 3x3 stride-1 convolutions at the AVX2 level */
    snprintf(conv, sizeof conv, "conv oneDNN %s on %d-channel blocks%s", dnnl_isa_in_force(),
             d->cblock, d->level == DT_ISA_AVX2 ? ", 3x3 stride 1 Winograd F(2x2,3x3) avx2+fma" : "");
#else
    const char *conv = "conv native";
#endif
#ifdef HAVE_DNNL
    const char *sgemm =
        d->sgemm_ta_blas ? "sgemm oneDNN, A^T on one thread OpenBLAS" : "sgemm oneDNN";
#else
    const char *sgemm = "sgemm OpenBLAS";
#endif
    snprintf(out, len, "%s%s; own kernels %s; %s; attention %s; %s; OpenBLAS %s",
             isa_name(d->level), cap, d->vec_name, conv, d->attention, sgemm,
             openblas_get_corename());
}
