/* AdamW on ranges of the flat vectors (PyTorch 1.13's torch.optim.AdamW,
 * amsgrad off), and global-norm gradient clipping.
 *
 * Step k (1-based), per element, in float as PyTorch's _single_tensor_adamw
 * computes it (torch/optim/adamw.py):
 *   x <- x * (1 - lr wd)                        decayed segments only, first
 *   m <- beta1 m + (1 - beta1) g
 *   v <- beta2 v + (1 - beta2) g g
 *   x <- x + (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
 * with bc1 = 1 - beta1^k and bc2 = 1 - beta2^k computed in double (Python
 * floats) and each scalar rounded to float where it meets the tensor (the
 * two multiply-adds fused where the CPU has FMA, as PyTorch's kernels). The
 * hyper-parameters arrive as double, as Python floats reach PyTorch: given
 * the same values (a deck's 0.9 is Python's 0.9), the scalars round alike.
 *
 * m and v (the optimizer's state, checkpointed with the model) start at zero
 * and are local to the rank, never communicated. */
#ifndef DT_OPTIM_ADAMW_H
#define DT_OPTIM_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "nn/cuda/adamw.h" /* dt_adamw_seg, dt_adamw_k and the per-element step */

typedef dt_adamw_seg dt_segment;

/* One AdamW step on x[lo, hi), a range of the flat vector (a parameter
 * server's shard, a DiLoCo fragment, or all of it). x, g, m, v: (n) full
 * vectors indexed alike; only [lo, hi) is read or written. segs: nsegs
 * segments sorted by offset, contiguous, covering at least [lo, hi) (a gap
 * is a programming error: DT_FATAL); decay applies where segs[i].decay.
 * step: the 1-based step count (bias correction). Splitting [lo, hi) into
 * several calls gives bit-identical results; so does any OpenMP thread count
 * (chunks of DT_PAR_CHUNK elements run in parallel). */
void adamw_step_range(size_t lo, size_t hi, float *x, const float *g, float *m, float *v,
                      const dt_segment *segs, int nsegs, double lr, double beta1, double beta2,
                      double eps, double wd, int64_t step);

/* The same step with x, g, m, v pointing at element lo of their vectors (a
 * parameter server's shard buffers): the optimizer table's step. */
void adamw_step_at(size_t lo, size_t hi, float *x, const float *g, float *m, float *v,
                   const dt_segment *segs, int nsegs, double lr, double beta1, double beta2,
                   double eps, double wd, int64_t step);

/* The float scalars of step `step` (1-based) from the double
 * hyper-parameters: what adamw_step_range computes first, and what a
 * backend's flat_adamw takes. */
dt_adamw_k adamw_scalars(double lr, double beta1, double beta2, double eps, double wd,
                         int64_t step);
/* adamw_step_range's step on x[lo, hi) with the scalars k (the CPU
 * backend's flat_adamw over [0, n)). */
void adamw_step_k(size_t lo, size_t hi, float *x, const float *g, float *m, float *v,
                  const dt_segment *segs, int nsegs, const dt_adamw_k *k);

/* The kernel adamw_step_range runs on this CPU: "avx512f" or "avx2+fma"
 * (fused multiply-adds, PyTorch's AVX2/AVX-512 results bit for bit), "sse"
 * (x86-64 without FMA) or "plain" (elsewhere; both unfused: an ulp or so from
 * PyTorch's fused results per step). */
const char *adamw_kernel(void);

/* Clipping to a global L2 norm, as torch.nn.utils.clip_grad_norm_ (norm_type
 * 2): norm = sqrt(sum g^2); when norm > max_norm, g *= max_norm / (norm +
 * 1e-6) (the factor rounded to float, as PyTorch multiplies by a float
 * tensor). */

/* sum of g[i]^2 over (n), accumulated in double: the piece a distributed
 * caller sums over ranks or shards before clip_scale. */
double clip_sumsq(const float *g, size_t n);
/* Scale g (n) for a global norm sqrt(sumsq) (clip_sumsq summed over every
 * piece); returns that norm, before clipping. max_norm <= 0: no clipping. */
double clip_scale(float *g, size_t n, double sumsq, double max_norm);
/* Both on one vector g (n): returns the norm before clipping. */
double clip_grad_norm(float *g, size_t n, double max_norm);

#endif
