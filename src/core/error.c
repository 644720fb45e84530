#include "core/error.h"

#include <errno.h>

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#endif

static _Thread_local char err_buf[2048];

int dt_err_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return -1;
}

int dt_err_prefix(const char *fmt, ...)
{
    char old[sizeof err_buf], pre[512];
    memcpy(old, err_buf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(err_buf, sizeof err_buf, "%s: %s", pre, old);
    return -1;
}

const char *dt_err_msg(void) { return err_buf; }
void dt_err_clear(void) { err_buf[0] = '\0'; }

int dt_world_rank(void)
{
    int init = 0, fin = 0, rank = -1;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

static noreturn void die(void)
{
    int init = 0, fin = 0;
    fflush(stdout);
    fflush(stderr);
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static void prefix(const char *file, int line)
{
    char ts[32];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", gmtime_r(&now, &tmv));
    fprintf(stderr, "dtrain: [rank %d, %s UTC] %s:%d: ", dt_world_rank(), ts, file, line);
}

noreturn void dt_fatal(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    prefix(file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    die();
}

noreturn void dt_mpi_fail(const char *file, int line, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "unknown MPI error %d", rc);
    prefix(file, line);
    fprintf(stderr, "%s failed: %s\n  hint: check the MPI launcher (mpiexec/srun --mpi=pmi2) "
                    "and that every rank runs the same deck\n", what, msg);
    die();
}

noreturn void dt_h5_fail(const char *file, int line, const char *what)
{
    int e = errno; /* the operating system's reason, if the failure was I/O */
    prefix(file, line);
    fprintf(stderr, "HDF5 call %s failed%s%s%s (HDF5's error stack above)\n"
                    "  hint: check the output directory is writable and on a "
                    "filesystem that supports MPI-IO\n", what, e ? " (" : "",
            e ? strerror(e) : "", e ? ")" : "");
    die();
}

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
