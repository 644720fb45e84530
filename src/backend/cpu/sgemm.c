/* The CPU backend's fp32 sgemm (backend/cpu/sgemm.h).
 *
 * Why oneDNN's sgemm where it is built in: at the transformer's shapes (N = B T
 * rows against C .. 4C columns, one of the three sizes as small as 128) it
 * runs 5-17 % faster than OpenBLAS 0.3.21 on one thread of an AMD Zen 4 (CPU
 * time per call; "baby" GPT 768 x 128 x 512: 107 against 91 GFLOP/s for dW,
 * 106 against 98 for dx; "small" 2048 x 384 x 1536: 104-110 against 95-101),
 * and it threads with the engine's OpenMP team instead of a second pool.
 * The exception is the kernel table's (backend/cpu/dispatch.h): at the AVX2
 * level a product with A transposed runs on OpenBLAS when the engine runs one
 * thread. */
#include "config.h"

#include "backend/cpu/sgemm.h"

#include <cblas.h>

#ifdef HAVE_DNNL
#ifdef _OPENMP
#include <omp.h>
#endif
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "backend/cpu/dispatch.h"
#include "core/error.h"
#endif

void cpu_sgemm(int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc)
{
#ifdef HAVE_DNNL
#ifdef _OPENMP
    const int one_thread = omp_get_max_threads() == 1;
#else
    const int one_thread = 1;
#endif
    if (!(tA && one_thread && cpu_dispatch()->sgemm_ta_blas)) {
        const dnnl_status_t rc = dnnl_sgemm(tA ? 'T' : 'N', tB ? 'T' : 'N', M, N, K, alpha, A, lda,
                                                 B, ldb, beta, C, ldc);
        if (rc != dnnl_success)
            DT_FATAL("sgemm: oneDNN dnnl_sgemm(%c%c, M %d, N %d, K %d) failed: %s",
                     tA ? 'T' : 'N', tB ? 'T' : 'N', M, N, K, dnnl_status2str(rc));
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
