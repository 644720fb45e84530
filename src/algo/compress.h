/* Top-k sparsification with error feedback for the parameter-server modes
 * (REFERENCE.md §8, Hardy et al. 2017): each tensor of the flat parameter
 * vector (weights and biases separately) sends its k = max(1, ⌊c·size⌋)
 * entries of largest |g| as (index, value) pairs; what is not sent stays in a
 * residual that is added to the next gradient (the reference dropped it).
 *
 * Selection order is total and deterministic: larger |v| first, and among
 * equal |v| the lower index first. |v| is compared through the float's bit
 * pattern with the sign cleared, so -0 ties with +0, and a NaN ranks above
 * +inf (a diverged gradient is sent, not hidden in the residual).
 *
 * Wire format of one sparse update (sparse_encode / sparse_decode), host byte
 * order (dtrain runs on homogeneous clusters; messages are MPI_BYTE):
 *     uint32 count
 *     uint32 index[count]   strictly increasing, relative to a base offset
 *     float32 value[count]
 * i.e. 4 + 8·count bytes with no padding. The indices come first so the
 * receiver can validate the whole index list before it touches its model. */
#ifndef DT_ALGO_COMPRESS_H
#define DT_ALGO_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* One tensor of the flat parameter vector: entries [offset, offset + size). */
typedef struct dt_segment {
    size_t offset, size;
} dt_segment;

/* k = max(1, ⌊ratio·size⌋), capped at size (0 for an empty tensor). The
 * product is taken a few ulps generously so that ratio 0.29 of 100 gives 29,
 * not the 28 of a literal floor(0.29 * 100.0). */
size_t topk_count(size_t size, double ratio);

/* Upper bound on the pairs topk_compress emits: Σ topk_count(seg size). */
size_t topk_capacity(const dt_segment *seg, int nseg, double ratio);

/* The k entries of v (n) of largest |v| (ties: lower index) into idx (k),
 * ascending index order; returns min(k, n). Radix selection on the bit
 * pattern of |v|: at most four counting passes and one emitting pass, O(n)
 * whatever the data, no allocation. n - 1 must fit in uint32. */
size_t topk_select(const float *v, size_t n, size_t k, uint32_t *idx);

/* One compressed push of the gradient g (n):
 *     acc = residual + g                  (residual NULL: acc = g, no feedback)
 *     per segment, the topk_count(size, ratio) entries of acc of largest |acc|
 *     idx/val (topk_capacity) <- (global index, acc[index]), ascending index
 *     residual <- acc with the sent entries set to 0
 * so, coordinate by coordinate, sent + new residual == fl(old residual + g)
 * bit for bit. Segments must be ascending and disjoint within [0, n)
 * (DT_FATAL otherwise); coordinates outside every segment are never sent and
 * only accumulate in the residual. Returns the number of pairs. */
size_t topk_compress(const float *g, float *residual, size_t n, const dt_segment *seg, int nseg,
                     double ratio, uint32_t *idx, float *val);

/* x[idx[j]] += scale · val[j] for j < k. */
void sparse_add(float *x, const uint32_t *idx, const float *val, size_t k, float scale);

/* Bytes of an encoded update of k pairs: 4 + 8 k. */
size_t sparse_bytes(size_t k);

/* Writes the k pairs (idx ascending, every idx >= base) to buf
 * (sparse_bytes(k) bytes) with indices made relative to base; returns the
 * bytes written. A pair below base or k beyond uint32 is a programming error
 * (DT_FATAL). */
size_t sparse_encode(void *buf, const uint32_t *idx, const float *val, size_t k, uint32_t base);

/* Reads an update of `bytes` bytes for a range of n coordinates into idx and
 * val (cap entries each) and its pair count into *k. Returns -1 after
 * dt_err_set() naming the byte offset if the message is shorter than its
 * header, its count exceeds n or cap, its size is not 4 + 8·count, or an
 * index is >= n or not above the previous one; the outputs are then left
 * untouched (the message is validated before anything is written). */
int sparse_decode(const void *buf, size_t bytes, size_t n, size_t cap, uint32_t *idx, float *val,
                  size_t *k);

#endif
