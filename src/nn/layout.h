/* Activation layouts (see backend/backend.h): plain NCHW, and channel-blocked
 * nChw16c = (B, C/16, H, W, 16) on AVX-512 or nChw8c = (B, C/8, H, W, 8)
 * below it (the blocks oneDNN's convolutions read at each level), which need
 * C to be a multiple of the block. */
#ifndef DT_NN_LAYOUT_H
#define DT_NN_LAYOUT_H

#include <stddef.h>

/* the largest block */
#define DT_CBLOCK_MAX 16

/* Offset of element (b, c, j) of a (B, C, HW) tensor, j the flat (h, w) index. */
static inline size_t layout_index(int blk, int C, int HW, int b, int c, int j)
{
    if (!blk)
        return ((size_t)b * C + c) * HW + j;
    return (((size_t)b * (C / blk) + c / blk) * HW + j) * blk + (size_t)(c % blk);
}

/* dst (B, C/blk, HW, blk) = src (B, C, HW), and back. C % blk == 0. */
void layout_to_blocked(int blk, int B, int C, int HW, const float *src, float *dst);
void layout_to_plain(int blk, int B, int C, int HW, const float *src, float *dst);

#endif
