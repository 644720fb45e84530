#include "config.h"
#include "core/build_info.h"
#include "core/isa.h"

#include <cblas.h>
#ifndef DTRAIN_SIM /* the simulator has no HDF5 */
#include <hdf5.h>
#endif
#include <mpi.h>
#include <string.h>
#include <zlib.h>
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef HAVE_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

const char *build_version(void) { return PACKAGE_VERSION; }
const char *build_git_revision(void) { return DT_GIT_REVISION; }
const char *build_configure_args(void) { return DT_CONFIGURE_ARGS; }
const char *build_compiler(void) { return DT_CC_VERSION; }

const char *build_mpi_runtime(void)
{
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (!v[0] && MPI_Get_library_version(v, &len) == MPI_SUCCESS) {
        char *nl = strchr(v, '\n');
        if (nl)
            *nl = '\0';
        for (char *c = v; *c; c++)
            if (*c == '\t')
                *c = ' ';
    }
    return v;
}

void build_print(FILE *f)
{
#ifndef DTRAIN_SIM
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
#endif
    fprintf(f, "dtrain %s (git %s)\n", build_version(), build_git_revision());
    fprintf(f, "  configure: %s\n", build_configure_args()[0] ? build_configure_args() : "(no flags)");
    fprintf(f, "  compiler:  %s\n", build_compiler());
    fprintf(f, "  MPI:       built with %s; runtime %s\n", DT_MPI_LIBRARY, build_mpi_runtime());
#ifdef DTRAIN_SIM
    fprintf(f, "  HDF5:      none (the simulator, SimGrid SMPI: run record sim.csv)\n");
#else
    fprintf(f, "  HDF5:      %u.%u.%u (parallel)\n", maj, min, rel);
#endif
    fprintf(f, "  BLAS:      %s (kernels %s)\n", openblas_get_config(), openblas_get_corename());
    fprintf(f, "  CPU ISA:   %s; in force %s%s\n", isa_name(isa_detect()), isa_name(isa_level()),
            isa_level() != isa_detect() ? " (" DT_ISA_CAP_VAR ")" : "");
    fprintf(f, "  zlib:      %s\n", zlibVersion());
#ifdef HAVE_DNNL
    const dnnl_version_t *dv = dnnl_version();
    fprintf(f, "  oneDNN:    %d.%d.%d (convolutions, compute.kernels = auto|dnnl)\n", dv->major,
            dv->minor, dv->patch);
#else
    fprintf(f, "  oneDNN:    not built (compute.kernels = native only)\n");
#endif
#ifdef HAVE_CUDA
    // versions of the libraries linked, not of a GPU: none is needed to print them
    int rt = 0, drv = 0, cbmaj = 0, cbmin = 0, cbpat = 0;
    cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    cublasGetProperty(MAJOR_VERSION, &cbmaj);
    cublasGetProperty(MINOR_VERSION, &cbmin);
    cublasGetProperty(PATCH_LEVEL, &cbpat);
    fprintf(f, "  CUDA:      toolkit %s, cudart %d.%d, cuBLAS %d.%d.%d, driver %s "
               "(compute.device = cuda)\n",
            DT_CUDA_VERSION, rt / 1000, rt % 1000 / 10, cbmaj, cbmin, cbpat,
            drv ? "present" : "none");
#else
    fprintf(f, "  CUDA:      not built\n");
#endif
#ifdef HAVE_NCCL
    int nv = 0;
    ncclGetVersion(&nv);
    // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9
    fprintf(f, "  NCCL:      %d.%d.%d (built with %d.%d.%d; comm.transport = nccl)\n",
            nv / 10000, nv / 100 % 100, nv % 100, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
    fprintf(f, "  NCCL:      not built\n");
#endif
#ifdef HAVE_CUDA
    fprintf(f, "  backends:  cpu, cuda\n");
#else
    fprintf(f, "  backends:  cpu\n");
#endif
}
