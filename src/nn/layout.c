/* Conversions between the plain and the channel-blocked activation layout.
 * Used at the edges of a blocked region that a kernel cannot read, and by the
 * tests that hold blocked kernels against plain ones. */
#include "nn/layout.h"

void layout_to_blocked(int blk, int B, int C, int HW, const float *src, float *dst)
{
    const int CB = C / blk;
    for (int b = 0; b < B; b++)
        for (int cb = 0; cb < CB; cb++) {
            const float *s = src + ((size_t)b * C + (size_t)cb * blk) * HW;
            float *d = dst + ((size_t)b * CB + cb) * (size_t)HW * blk;
            for (int j = 0; j < HW; j++)
                for (int l = 0; l < blk; l++)
                    d[(size_t)j * blk + l] = s[(size_t)l * HW + j];
        }
}

void layout_to_plain(int blk, int B, int C, int HW, const float *src, float *dst)
{
    const int CB = C / blk;
    for (int b = 0; b < B; b++)
        for (int cb = 0; cb < CB; cb++) {
            const float *s = src + ((size_t)b * CB + cb) * (size_t)HW * blk;
            float *d = dst + ((size_t)b * C + (size_t)cb * blk) * HW;
            for (int l = 0; l < blk; l++)
                for (int j = 0; j < HW; j++)
                    d[(size_t)l * HW + j] = s[(size_t)j * blk + l];
        }
}
