#include "config.h"
#include "core/build_info.h"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>
#include <string.h>
#include <zlib.h>
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
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
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    fprintf(f, "dtrain %s (git %s)\n", build_version(), build_git_revision());
    fprintf(f, "  configure: %s\n", build_configure_args()[0] ? build_configure_args() : "(no flags)");
    fprintf(f, "  compiler:  %s\n", build_compiler());
    fprintf(f, "  MPI:       built with %s; runtime %s\n", DT_MPI_LIBRARY, build_mpi_runtime());
    fprintf(f, "  HDF5:      %u.%u.%u (parallel)\n", maj, min, rel);
    fprintf(f, "  BLAS:      %s\n", openblas_get_config());
    fprintf(f, "  zlib:      %s\n", zlibVersion());
#ifdef HAVE_DNNL
    const dnnl_version_t *dv = dnnl_version();
    fprintf(f, "  oneDNN:    %d.%d.%d (convolutions, compute.kernels = auto|dnnl)\n", dv->major,
            dv->minor, dv->patch);
#else
    fprintf(f, "  oneDNN:    not built (compute.kernels = native only)\n");
#endif
    fprintf(f, "  backends:  cpu (CUDA and NCCL: not built)\n");
}
