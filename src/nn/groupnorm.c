/* Group normalisation (Wu & He 2018): for each sample, the C channels are split
 * into G groups of C/G, and each group's (C/G)*HW values are normalised by
 * their own mean and biased variance (as PyTorch), then scaled per channel:
 *   y = (x - mean) * rstd * gamma[c] + beta[c],   rstd = 1 / sqrt(var + eps).
 * Unlike BatchNorm nothing depends on the batch, so replicas need no sync. */
#include "nn/kernels_cpu.h"

#include <math.h>
#include <string.h>

#define GN_EPS 1e-5

void cpu_groupnorm_forward(int B, int C, int HW, int G, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *rstd)
{
    const int Cg = C / G;
    const size_t n = (size_t)Cg * HW;
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < G; g++) {
            const size_t base = ((size_t)b * C + (size_t)g * Cg) * HW;
            const float *xg = x + base;
            // two passes in double: the one-pass E[x^2] - E[x]^2 cancels badly
            double s = 0.0;
            for (size_t j = 0; j < n; j++)
                s += xg[j];
            const double mu = n ? s / (double)n : 0.0;
            double ss = 0.0;
            for (size_t j = 0; j < n; j++) {
                const double d = xg[j] - mu;
                ss += d * d;
            }
            const double var = n ? ss / (double)n : 0.0;
            // y is computed from the saved float statistics so backward sees the same ones
            const float m = (float)mu, rs = (float)(1.0 / sqrt(var + GN_EPS));
            mean[(size_t)b * G + g] = m;
            rstd[(size_t)b * G + g] = rs;
            for (int c = g * Cg; c < (g + 1) * Cg; c++) {
                const float a = rs * gamma[c], sh = beta[c] - m * a;
                const float *xc = x + ((size_t)b * C + c) * HW;
                float *yc = y + ((size_t)b * C + c) * HW;
                for (int j = 0; j < HW; j++)
                    yc[j] = xc[j] * a + sh;
            }
        }
    }
}

/* With xhat = (x - mean) rstd and gd = dy * gamma, over the N = (C/G) HW values
 * of a group:  dx = rstd (gd - mean(gd) - xhat mean(gd xhat)),
 *              dgamma[c] = sum_{b,hw} dy xhat,  dbeta[c] = sum_{b,hw} dy. */
void cpu_groupnorm_backward(int B, int C, int HW, int G, const float *x,
                            const float *gamma, const float *mean, const float *rstd,
                            const float *dy, float *dx, float *dgamma, float *dbeta)
{
    const int Cg = C / G;
    const double n = (double)Cg * HW;
    if (dgamma)
        memset(dgamma, 0, (size_t)C * sizeof(float));
    if (dbeta)
        memset(dbeta, 0, (size_t)C * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < G; g++) {
            const float m = mean[(size_t)b * G + g], rs = rstd[(size_t)b * G + g];
            double sum_gd = 0.0, sum_gdx = 0.0;
            for (int c = g * Cg; c < (g + 1) * Cg; c++) {
                const float *xc = x + ((size_t)b * C + c) * HW;
                const float *dyc = dy + ((size_t)b * C + c) * HW;
                double sdy = 0.0, sdyx = 0.0;
                for (int j = 0; j < HW; j++) {
                    const double xh = (double)(xc[j] - m) * rs;
                    sdy += dyc[j];
                    sdyx += dyc[j] * xh;
                }
                if (dgamma)
                    dgamma[c] += (float)sdyx;
                if (dbeta)
                    dbeta[c] += (float)sdy;
                sum_gd += gamma[c] * sdy;
                sum_gdx += gamma[c] * sdyx;
            }
            if (!dx || n == 0.0)
                continue;
            const float mgd = (float)(sum_gd / n), mgdx = (float)(sum_gdx / n);
            for (int c = g * Cg; c < (g + 1) * Cg; c++) {
                const float *xc = x + ((size_t)b * C + c) * HW;
                const float *dyc = dy + ((size_t)b * C + c) * HW;
                float *dxc = dx + ((size_t)b * C + c) * HW;
                const float gc = gamma[c];
                for (int j = 0; j < HW; j++) {
                    const float xh = (xc[j] - m) * rs;
                    dxc[j] += rs * (dyc[j] * gc - mgd - xh * mgdx);
                }
            }
        }
    }
}
