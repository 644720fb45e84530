/* Staleness-aware step of the asynchronous parameter server (doc/references.md,
 * Parameter server; Hardy et al. 2017). A gradient computed on the model of clock t_f
 * arrives at clock t_now, delay d = t_now - t_f; for each coordinate c,
 * s_c = how many of the last d applied updates touched c, and the step is
 *     w_c <- w_c - γ · g_c / max(1, s_c).
 * d = 0 means nothing is stale: every scale is 1 (the public code's
 * history[-0:] counted the whole history there; dtrain does not).
 *
 * The server keeps the last H updates in a ring, each either dense (touched
 * every coordinate) or a strictly increasing index list. A delay beyond what
 * the ring holds (more than H, or more than have been recorded, e.g. just
 * after a resume, since the ring is not checkpointed) is clamped to the
 * updates held: s_c <= min(d, H). A negative delay is treated as 0. */
#ifndef DT_ALGO_STALENESS_H
#define DT_ALGO_STALENESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_staleness dt_staleness;

/* History of the last `history` updates (1 ... 65536) of an n-coordinate
 * vector; out-of-range arguments are a programming error (DT_FATAL). */
dt_staleness *staleness_create(size_t n, int history);

/* Scales 1 / max(1, s_c) for an update arriving with the given delay:
 *   idx == NULL: a dense update, scale (n) for every coordinate (k ignored);
 *   otherwise:   scale (k), scale[j] for coordinate idx[j] (any order).
 * Cost: dense O(n + entries of the last d sparse updates); sparse
 * O(k · d · log(update size)). Does not record the update. */
void staleness_scales(const dt_staleness *st, int64_t delay, const uint32_t *idx, size_t k,
                      float *scale);

/* Appends an applied update to the history, dropping the oldest beyond H:
 * idx == NULL for a dense one, else its k strictly increasing indices < n
 * (DT_FATAL otherwise; the server validated them when decoding). */
void staleness_record(dt_staleness *st, const uint32_t *idx, size_t k);

/* Updates held now: min(recorded, H). */
int staleness_held(const dt_staleness *st);

void staleness_free(dt_staleness *st);

#endif
