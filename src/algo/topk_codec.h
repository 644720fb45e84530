/* DiLoCo's sparse low-bit wire format (diloco.compress = topk): per chunk of
 * `chunk` values (the last one may be shorter), the k largest by magnitude,
 * k = max(1, round(density len)) (at most len), their positions and their
 * values quantised to `bits` bits with one fp32 scale per chunk.
 *
 * Selection: algo/compress.h's topk_select, a total order: larger |v| first,
 * among equal |v| the lower position; a NaN ranks above +inf (a diverged
 * pseudo-gradient is sent, and its scale is NaN).
 *
 * Values: scale = max |v| over the selected; M = 2^bits codes, no zero code
 * (the selected are the largest values, zero is the unsent rest), evenly
 * spaced over [-scale, scale]:
 *     code j in [0, M)   <->   value scale (2 j + 1 - M) / (M - 1)
 *     j = floor(v (M - 1) / (2 scale)) + M / 2, clamped to [0, M)
 * the nearest value (ties upwards), so |v - decoded| <= scale / (M - 1):
 * 2 bits give -s, -s/3, s/3, s;
 * 4 bits odd multiples of s/15; 8 bits odd multiples of s/255.
 *
 * Positions: whichever is shorter, ties to the list:
 *     a list of k offsets within the chunk, w = ceil(log2 len) bits each
 *         (12 bits for chunks of 4096), ascending;
 *     a bitmap of len bits, bit i set for a selected position i
 *         (denser than 1/w: density above 1/12 for chunks of 4096).
 *
 * Layout of one chunk of len values: a whole number of 4-byte words, so
 * that it travels through the transport's float messages unchanged:
 *     word 0           the scale (fp32)
 *     words 1..        a bit stream, least significant bit of each uint32
 *                      first (host order): the positions (k w or len bits),
 *                      then k codes of `bits` bits in position order, zero
 *                      padding to the word
 *     words = 1 + ceil((position bits + k bits) / 32)
 * A vector of n values is its chunks' encodings one after another; the
 * number of words depends only on n and the format, so every rank's
 * message has the same length. Chunks of 4096 at density 0.02 and 4 bits:
 * k = 82, 1 + ceil((984 + 328) / 32) = 42 words, 168 bytes for 16384 of
 * fp32 (1.03 %).
 *
 * Decoding is exact arithmetic on the stored bytes: every rank that decodes
 * the same words gets the same floats.
 *
 * In the simulator (DTRAIN_SIM) encoding and decoding touch no value, as
 * core/vec.h's operations: the vectors hold no model there; tkc_words still
 * gives the true message size. */
#ifndef DT_ALGO_TOPK_CODEC_H
#define DT_ALGO_TOPK_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct dt_tkc {
    size_t chunk;   /* values per chunk (>= 1) */
    double density; /* in (0, 1] */
    int bits;       /* 2, 4 or 8 */
} dt_tkc;

/* k of a chunk of len values: max(1, round(density len)), at most len. */
size_t tkc_k(const dt_tkc *f, size_t len);
/* 1 when a chunk of len values codes its positions as a bitmap, 0 as a list. */
int tkc_bitmap(const dt_tkc *f, size_t len);
/* 4-byte words of one chunk of len values, and of a vector of n values. */
size_t tkc_chunk_words(const dt_tkc *f, size_t len);
size_t tkc_words(const dt_tkc *f, size_t n);

/* wire (tkc_chunk_words(f, len)) <- the encoding of the chunk x (len);
 * idx: scratch of tkc_k(f, len) entries. */
void tkc_encode_chunk(const dt_tkc *f, const float *x, size_t len, float *wire, uint32_t *idx);
/* y (len) <- the chunk's values (zero where nothing was sent); with add,
 * y += them instead. */
void tkc_decode_chunk(const dt_tkc *f, const float *wire, size_t len, float *y, int add);

/* The same over a vector of n values cut into chunks of f->chunk. */
void tkc_encode(const dt_tkc *f, const float *x, size_t n, float *wire);
void tkc_decode(const dt_tkc *f, const float *wire, size_t n, float *y);
void tkc_decode_add(const dt_tkc *f, const float *wire, size_t n, float *acc);

#endif
