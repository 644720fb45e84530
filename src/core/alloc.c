/* The allocators: never NULL (fatal on failure, naming the size), flat
 * float arrays aligned for SIMD and on huge pages when big, and in the
 * simulator the big ones shared between ranks. */
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#ifdef DTRAIN_SIM
#include <mpi.h> /* smpicc's: SMPI_SHARED_MALLOC */
#endif

void *dt_malloc_(size_t bytes, const char *file, int line)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        dt_fatal(file, line, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *dt_calloc_(size_t n, size_t size, const char *file, int line)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        dt_fatal(file, line, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *dt_realloc_(void *p, size_t bytes, const char *file, int line)
{
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        dt_fatal(file, line, "out of memory reallocating to %zu bytes", bytes);
    return q;
}

void *dt_msg_alloc_(size_t bytes, const char *file, int line)
{
#ifdef DTRAIN_SIM
    if (bytes >= DT_MSG_HEADER + SIM_SHARED_MIN * sizeof(float)) {
        size_t shared[2] = { DT_MSG_HEADER, bytes };
        void *s = SMPI_PARTIAL_SHARED_MALLOC(bytes, shared, 1);
        if (!s)
            dt_fatal(file, line, "SMPI_PARTIAL_SHARED_MALLOC of %zu bytes failed", bytes);
        return s;
    }
#endif
    return dt_malloc_(bytes, file, line);
}

enum { HUGE_PAGE = 2 << 20, HUGE_MIN = 4 << 20 };

float *dt_falloc_(size_t n, const char *file, int line)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
#ifdef DTRAIN_SIM
    /* the simulator: the big flat vectors of every rank share their pages
     * (their contents do not matter); free() is smpicc's, which knows them */
    if (n >= SIM_SHARED_MIN) {
        void *s = SMPI_SHARED_MALLOC(bytes);
        if (!s)
            dt_fatal(file, line, "SMPI_SHARED_MALLOC of %zu floats failed", n);
        return s;
    }
#endif
    void *p = NULL;
    if (bytes >= HUGE_MIN) {
        /* big arrays (activations, flat vectors, workspaces) on 2 MiB pages:
         * the loops that stream them otherwise miss the TLB every 4 KiB, a
         * page walk that costs most under virtualisation (nested paging).
         * madvise before the first touch (the memset); it is advice only: a
         * kernel with transparent huge pages off answers EINVAL and the
         * array keeps small pages, which is not an error. */
        bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
            dt_fatal(file, line, "out of memory allocating %zu floats", n);
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    } else if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        dt_fatal(file, line, "out of memory allocating %zu floats", n);
    }
    memset(p, 0, bytes);
    return p;
}
