/* The quintic Newton-Schulz orthogonalisation (optim/newton_schulz.h). */
#include "optim/newton_schulz.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/sgemm.h"

size_t newton_schulz_work(int rows, int cols)
{
    const size_t m = (size_t)(rows < cols ? rows : cols), k = (size_t)(rows < cols ? cols : rows);
    return 2 * m * k + 3 * m * m;
}

/* dst (c, r) = src (r, c) transposed */
static void transpose(int r, int c, const float *src, float *dst)
{
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++)
            dst[(size_t)j * r + i] = src[(size_t)i * c + j];
}

void newton_schulz5(int rows, int cols, const float *G, float *out, float *work)
{
    const int tr = rows > cols;
    const int m = tr ? cols : rows, k = tr ? rows : cols;
    const size_t mk = (size_t)m * k, mm = (size_t)m * m;
    float *X = work;        /* (m, k) the iterate */
    float *Z = X + mk;      /* (m, k) B X */
    float *A = Z + mk;      /* (m, m) X X^T */
    float *S = A + mm;      /* (m, m) c A, then B */
    float *T = S + mm;      /* (m, m) (c A) A */
    if (tr)
        transpose(rows, cols, G, X);
    else
        memcpy(X, G, mk * sizeof *X);

    /* the Frobenius norm, summed in double and rounded to float as the
     * reference's norm is a float tensor; 1e-7 added in float */
    double ss = 0.0;
    for (size_t i = 0; i < mk; i++)
        ss += (double)X[i] * X[i];
    const float d = (float)sqrt(ss) + 1e-7f;
    for (size_t i = 0; i < mk; i++)
        X[i] = X[i] / d;

    for (int s = 0; s < NS_STEPS; s++) {
        cpu_sgemm(0, 1, m, m, k, 1.0f, X, k, X, k, 0.0f, A, m); /* A = X X^T */
        for (size_t i = 0; i < mm; i++)
            S[i] = NS_C * A[i];
        cpu_sgemm(0, 0, m, m, m, 1.0f, S, m, A, m, 0.0f, T, m); /* T = (c A) A */
        for (size_t i = 0; i < mm; i++) {
            const float bA = NS_B * A[i];
            S[i] = bA + T[i]; /* B */
        }
        cpu_sgemm(0, 0, m, k, m, 1.0f, S, m, X, k, 0.0f, Z, k); /* Z = B X */
        for (size_t i = 0; i < mk; i++) {
            const float aX = NS_A * X[i];
            X[i] = aX + Z[i];
        }
    }
    if (tr)
        transpose(m, k, X, out);
    else
        memcpy(out, X, mk * sizeof *out);
}
