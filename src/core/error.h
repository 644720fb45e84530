/* Error reporting and checking macros.
 *
 * Two kinds of failure:
 *  - recoverable input errors (bad deck, bad data file): the function records a
 *    message with dt_err_set() and returns -1; the caller decides (the runtime
 *    agrees across ranks and exits non-zero everywhere, tests read the message);
 *  - programming or library failures (MPI, HDF5, allocation): DT_FATAL prints
 *    rank, time, file:line and the library's own message, then MPI_Abort()s so
 *    no rank is left hanging.
 */
#ifndef DT_CORE_ERROR_H
#define DT_CORE_ERROR_H

#include <stddef.h>
#include <stdnoreturn.h>

/* dt_malloc and the other allocators: every file that checks also allocates */
#include "core/alloc.h"

/* Record a formatted message for the calling thread; always returns -1. */
int dt_err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefix the recorded message with context: "<prefix>: <old message>";
 * always returns -1. */
int dt_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The last message recorded by dt_err_set() ("" if none). */
const char *dt_err_msg(void);
void dt_err_clear(void);

noreturn void dt_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define DT_FATAL(...) dt_fatal(__FILE__, __LINE__, __VA_ARGS__)

/* Every MPI call is checked: the error string of the MPI library is printed. */
#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int mpi_rc_ = (call);                                                  \
        if (mpi_rc_ != 0 /* MPI_SUCCESS */)                                    \
            dt_mpi_fail(__FILE__, __LINE__, #call, mpi_rc_);                   \
    } while (0)
noreturn void dt_mpi_fail(const char *file, int line, const char *what, int rc);

/* HDF5 returns negative herr_t / hid_t on failure. */
#define H5_CHECK(call)                                                         \
    do {                                                                       \
        if ((long long)(call) < 0)                                             \
            dt_h5_fail(__FILE__, __LINE__, #call);                             \
    } while (0)
noreturn void dt_h5_fail(const char *file, int line, const char *what);

/* Rank of this process in MPI_COMM_WORLD, or -1 before MPI_Init. */
int dt_world_rank(void);

#endif
