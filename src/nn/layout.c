/* Conversions between the plain and the channel-blocked activation layout.
 * Used at the edges of a blocked region that a kernel cannot read, and by the
 * tests that hold blocked kernels against plain ones. */
#include "nn/layout.h"

void layout_to_blocked(int B, int C, int HW, const float *src, float *dst)
{
    const int CB = C / DT_CBLOCK;
    for (int b = 0; b < B; b++)
        for (int cb = 0; cb < CB; cb++) {
            const float *s = src + ((size_t)b * C + (size_t)cb * DT_CBLOCK) * HW;
            float *d = dst + ((size_t)b * CB + cb) * (size_t)HW * DT_CBLOCK;
            for (int j = 0; j < HW; j++)
                for (int l = 0; l < DT_CBLOCK; l++)
                    d[(size_t)j * DT_CBLOCK + l] = s[(size_t)l * HW + j];
        }
}

void layout_to_plain(int B, int C, int HW, const float *src, float *dst)
{
    const int CB = C / DT_CBLOCK;
    for (int b = 0; b < B; b++)
        for (int cb = 0; cb < CB; cb++) {
            const float *s = src + ((size_t)b * CB + cb) * (size_t)HW * DT_CBLOCK;
            float *d = dst + ((size_t)b * C + (size_t)cb * DT_CBLOCK) * HW;
            for (int l = 0; l < DT_CBLOCK; l++)
                for (int j = 0; j < HW; j++)
                    d[(size_t)l * HW + j] = s[(size_t)j * DT_CBLOCK + l];
        }
}
