/* Provenance compiled into the binary (configure flags, git revision) and
 * read at run time (MPI library). */
#ifndef DT_CORE_BUILD_INFO_H
#define DT_CORE_BUILD_INFO_H

#include <stdio.h>

const char *build_version(void);
const char *build_git_revision(void);
const char *build_configure_args(void);
const char *build_compiler(void);
/* MPI library version string reported at run time (first line). */
const char *build_mpi_runtime(void);
/* Multi-line report for --version. */
void build_print(FILE *f);

#endif
