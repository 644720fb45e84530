/* Compressed pushes for the parameter-server modes: top-k and AdaComp.
 *
 * Top-k sparsification with error feedback
 * (doc/references.md, Parameter server, Hardy et al. 2017): each tensor of the flat parameter
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

/* One tensor of the flat parameter vector: entries [offset, offset + size);
 * bin: AdaComp's bin length for it (unused by top-k). */
typedef struct dt_segment {
    size_t offset, size, bin;
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

/* AdaComp (Chen et al., "AdaComp: Adaptive Residual Gradient Compression
 * for Data-Parallel Distributed Training", AAAI 2018), one push of g (n):
 *     G = residual + g,  H = G + g
 *     per segment, per bin of seg.bin consecutive entries (the last may be
 *     shorter): gmax = max |G| over the bin
 *     scale = mean of the segment's bin maxima
 *     send entry i if G_i != 0 and |H_i| >= gmax of its bin, as the ternary
 *     value sign(G_i) * scale; residual = G - sent
 * The threshold adapts to local activity (a bin sends its largest residue
 * when the new gradient pushes it further; a bin whose residue is quiet may
 * send nothing); the quantization overshoot stays in the residual, so
 * sent + new residual == fl(old residual + g) up to one rounding of the
 * subtraction. A residue that is not finite is sent as it is (a diverged
 * gradient reaches the model instead of hiding in the residual) and leaves
 * the residual 0. idx/val need room for n entries; returns the number sent,
 * in ascending index order. Segments as for topk_compress; a bin of 0 is a
 * programming error. */
size_t adacomp_compress(const float *g, float *residual, size_t n, const dt_segment *seg,
                        int nseg, uint32_t *idx, float *val);

/* Wire format of one quantized sparse update (qsparse_encode / decode): a
 * lossless encoding of (index, value) pairs whose values take few distinct
 * magnitudes, as AdaComp's do (one per tensor), host byte order:
 *     uint32 count
 *     uint32 nrun
 *     {uint32 end; float32 magnitude}[nrun]   pairs [previous end, end) have
 *                                             this |value|; ends strictly
 *                                             increasing, the last == count
 *     uint32 index[count]                     strictly increasing, relative
 *                                             to a base offset
 *     uint8  sign[ceil(count / 8)]            bit j % 8 of byte j / 8: pair j
 *                                             is negative (the float's sign bit)
 * i.e. 8 + 8 nrun + 4 count + ceil(count / 8) bytes: about 4.1 bytes a pair
 * instead of top-k's 8. Decoding gives back the values bit for bit. */

/* The most bytes an update of k pairs can take (nrun = k). */
size_t qsparse_bound(size_t k);

/* Encodes k pairs (idx ascending, every idx >= base) into buf
 * (qsparse_bound(k) bytes suffice); returns the bytes written. */
size_t qsparse_encode(void *buf, const uint32_t *idx, const float *val, size_t k, uint32_t base);

/* Decodes an update of `bytes` bytes for a range of n coordinates into idx
 * and val (cap entries each), its pair count into *k. Returns -1 after
 * dt_err_set() naming the byte offset if the header is short, the count
 * exceeds n or cap, the runs are empty, do not increase or do not end at the
 * count, the size is not the one the counts give, or an index is >= n or not
 * above the previous one; the outputs are then left untouched. */
int qsparse_decode(const void *buf, size_t bytes, size_t n, size_t cap, uint32_t *idx, float *val,
                   size_t *k);

#endif
