/* Allocation for the whole code base (core/alloc.c). */
#ifndef DT_CORE_ALLOC_H
#define DT_CORE_ALLOC_H

#include <stddef.h>

/* Allocation that never returns NULL (fatal on failure, names the size). */
void *dt_malloc_(size_t bytes, const char *file, int line);
void *dt_calloc_(size_t n, size_t size, const char *file, int line);
void *dt_realloc_(void *p, size_t bytes, const char *file, int line);
#define dt_malloc(b) dt_malloc_((b), __FILE__, __LINE__)
#define dt_calloc(n, s) dt_calloc_((n), (s), __FILE__, __LINE__)
#define dt_realloc(p, b) dt_realloc_((p), (b), __FILE__, __LINE__)
/* 64-byte aligned float buffer (SIMD-friendly), zero-filled. */
float *dt_falloc_(size_t n, const char *file, int line);
#define dt_falloc(n) dt_falloc_((n), __FILE__, __LINE__)
/* A message buffer: a header of at most DT_MSG_HEADER bytes, then a payload
 * of floats. In the simulator a large one has its payload shared like the
 * flat vectors (only the header's page is the rank's own, and only it is
 * copied when the message is delivered); elsewhere it is dt_malloc's. */
#define DT_MSG_HEADER 4096
void *dt_msg_alloc_(size_t bytes, const char *file, int line);
#define dt_msg_alloc(b) dt_msg_alloc_((b), __FILE__, __LINE__)

/* The simulator (DTRAIN_SIM): flat buffers at least this long (floats) are
 * shared between ranks. */
#define SIM_SHARED_MIN ((size_t)1 << 16)

#endif
