/* Wire formats of a flat float vector (DiLoCo's pseudo-gradient):
 * fp32 (the floats themselves), bf16 (the upper half of each float, rounded
 * to nearest even) and int8 (blocks of QUANT_BLOCK values, one fp32 scale per
 * block: scale = max|x| / 127, q = round(x / scale), symmetric, no zero
 * point).
 *
 * An encoding is a whole number of 4-byte words so that it travels through
 * the transport's float messages unchanged (MPI moves the bytes; nothing
 * reads them as floats on the way). Layout of n values:
 *   fp32: n words
 *   bf16: ceil(n / 2) words, value i in the 16-bit half i (host byte order)
 *   int8: ceil(n / 256) scales (fp32), then n int8 values padded to a word
 * Per-element error of encode then decode:
 *   bf16: |x - y| <= 2^-8 |x|;  int8: |x - y| <= scale / 2 (scale of the block).
 * Decoding is exact arithmetic on the stored bytes, so every rank that
 * decodes the same words gets the same floats.
 *
 * In the simulator (DTRAIN_SIM) encoding and decoding touch no value, as
 * core/vec.h's operations: the vectors hold no model there. */
#ifndef DT_ALGO_QUANT_H
#define DT_ALGO_QUANT_H

#include <stddef.h>

#define QUANT_BLOCK 256

typedef enum { QUANT_FP32 = 0, QUANT_BF16 = 1, QUANT_INT8 = 2 } dt_quant;

/* QUANT_* of "fp32" | "bf16" | "int8"; -1 for anything else. */
int quant_parse(const char *name);
const char *quant_name(dt_quant q);
/* 4-byte words of the encoding of n values. */
size_t quant_words(dt_quant q, size_t n);
/* wire (quant_words(q, n)) <- the encoding of x (n). */
void quant_encode(dt_quant q, const float *x, size_t n, float *wire);
/* y (n) <- the values of wire. */
void quant_decode(dt_quant q, const float *wire, size_t n, float *y);
/* acc (n) += the values of wire, element by element. */
void quant_decode_add(dt_quant q, const float *wire, size_t n, float *acc);

#endif
