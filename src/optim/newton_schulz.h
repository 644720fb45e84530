/* The orthogonalisation at the heart of Muon (optim/muon.h): five steps of
 * the quintic Newton-Schulz iteration of KellerJordan/Muon's
 * zeropower_via_newtonschulz5, in fp32 (the reference runs it in bf16 on a
 * GPU), on the CPU backend's sgemm.
 *
 * For G (rows, cols), with m = min(rows, cols) and k = max(rows, cols):
 *   X (m, k) = G, or G^T when rows > cols
 *   X <- X / (||X||_F + 1e-7)
 *   5 times:  A = X X^T             (m, m)
 *             B = b A + (c A) A     (m, m)
 *             X = a X + B X         (m, k)
 *   out = X, or X^T when rows > cols
 * with (a, b, c) = (3.4445, -4.7750, 2.0315). The quintic's slope at zero
 * is a, so every singular value of G, however small, is pushed towards one;
 * the coefficients overshoot, and the output's singular values land in a
 * band around one (about [0.7, 1.2]) rather than on it: U S' V^T for the SVD
 * G = U S V^T. Each product and each element-wise step rounds as the
 * reference's PyTorch expression does (c A first, then the products; b A and
 * a X rounded before their sums). */
#ifndef DT_OPTIM_NEWTON_SCHULZ_H
#define DT_OPTIM_NEWTON_SCHULZ_H

#include <stddef.h>

#define NS_STEPS 5
#define NS_A 3.4445f
#define NS_B (-4.7750f)
#define NS_C 2.0315f

/* Floats of scratch newton_schulz5 needs for a (rows, cols) matrix:
 * 2 m k + 3 m m. */
size_t newton_schulz_work(int rows, int cols);

/* out (rows, cols) <- the orthogonalised G (rows, cols), both row-major;
 * out may be G. work: newton_schulz_work(rows, cols) floats. */
void newton_schulz5(int rows, int cols, const float *G, float *out, float *work);

#endif
