#include "core/error.h"

#include <errno.h>

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
