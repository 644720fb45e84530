/* Which oneDNN implementations run (the convolutions and the bf16 matmuls).
 *
 * oneDNN names each primitive's implementation; its reference ones ("ref:any",
 * "ref_fused_convolution:any", "bnorm_ref:any", ...) are plain C loops,
 * 100-1000x slower than its JIT kernels, and must never run a training step:
 * each primitive is noted when it is created, a reference one counted (the
 * tests hold the count at zero for every model at every ISA level) and said
 * once on stderr, and the distinct names of the others kept for the run
 * record. */
#ifndef DT_BACKEND_CPU_DNNL_IMPL_H
#define DT_BACKEND_CPU_DNNL_IMPL_H

#include <stddef.h>

struct dnnl_primitive_desc;

/* oneDNN's name of a primitive descriptor's implementation ("?" where it
 * gives none) */
const char *dnnl_impl_of(const struct dnnl_primitive_desc *pd);

/* oneDNN's effective CPU ISA (ONEDNN_MAX_CPU_ISA applied), in its own names */
const char *dnnl_isa_in_force(void);

/* 1 where impl names one of oneDNN's reference implementations */
int dnnl_impl_is_reference(const char *impl);

/* Note a primitive created with implementation impl; what says which (for
 * the warning). Thread-safe. */
void dnnl_impl_note(const char *impl, const char *what);

/* how many primitives took a reference implementation (none should) */
long dnnl_reference_count(void);

/* the distinct implementation names noted so far, comma-separated */
void dnnl_impls(char *out, size_t len);

#endif
