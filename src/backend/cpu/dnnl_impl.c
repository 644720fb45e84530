/* Which oneDNN implementations run (backend/cpu/dnnl_impl.h). */
#include "config.h"

#include "backend/cpu/dnnl_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char seen[512];
static long references;

int dnnl_impl_is_reference(const char *impl)
{
    return strncmp(impl, "ref", 3) == 0 || strstr(impl, "_ref") != NULL;
}

/* impl in the comma-separated list */
static int listed(const char *impl)
{
    const size_t len = strlen(impl);
    for (const char *p = seen; (p = strstr(p, impl)) != NULL; p += len)
        if ((p == seen || p[-1] == ' ') && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

void dnnl_impl_note(const char *impl, const char *what)
{
    pthread_mutex_lock(&lock);
    if (dnnl_impl_is_reference(impl) && references++ == 0)
        fprintf(stderr, "dtrain: warning: oneDNN runs its reference implementation '%s' for %s: "
                        "slow; compute.kernels = native avoids it\n", impl, what);
    if (!listed(impl) && strlen(seen) + strlen(impl) + 3 < sizeof seen) {
        if (seen[0])
            strcat(seen, ", ");
        strcat(seen, impl);
    }
    pthread_mutex_unlock(&lock);
}

long dnnl_reference_count(void)
{
    pthread_mutex_lock(&lock);
    const long n = references;
    pthread_mutex_unlock(&lock);
    return n;
}

void dnnl_impls(char *out, size_t len)
{
    pthread_mutex_lock(&lock);
    snprintf(out, len, "%s", seen[0] ? seen : "none");
    pthread_mutex_unlock(&lock);
}

#ifdef HAVE_DNNL
const char *dnnl_impl_of(const struct dnnl_primitive_desc *pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "?";
    return impl;
}

const char *dnnl_isa_in_force(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}
#endif
