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
    snprintf(out, len, "%s%s; own kernels %s; %s; attention %s; OpenBLAS %s", isa_name(d->level),
             cap, d->vec_name, conv, d->attention, openblas_get_corename());
}
