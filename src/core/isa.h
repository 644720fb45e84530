/* The CPU's instruction-set level, and the cap a user may put on it.
 *
 * dtrain names the levels as oneDNN does. Each rank detects what its CPU has
 * (cpuid) and takes the lower of that and DTRAIN_MAX_CPU_ISA, once, before
 * any kernel runs; its own kernel table (backend/cpu/dispatch.h) is chosen
 * for that level, and the same cap is handed to oneDNN (ONEDNN_MAX_CPU_ISA)
 * and OpenBLAS (OPENBLAS_CORETYPE), which read theirs before main: so
 * isa_setup re-executes the process with them set. Every level below the
 * machine's own thus runs, and is tested, on any machine that has it. */
#ifndef DT_CORE_ISA_H
#define DT_CORE_ISA_H

typedef enum dt_isa {
    DT_ISA_X86_64,           /* baseline x86-64 (SSE2) */
    DT_ISA_AVX2,             /* AVX2 + FMA (x86-64-v3) */
    DT_ISA_AVX512_CORE,      /* AVX-512 F/BW/VL/DQ/CD (x86-64-v4) */
    DT_ISA_AVX512_CORE_BF16, /* ... and AVX512-BF16 */
    DT_ISA_AVX512_CORE_AMX,  /* ... and AMX tiles (BF16) */
    DT_ISA_COUNT
} dt_isa;

/* The environment variable of the cap. */
#define DT_ISA_CAP_VAR "DTRAIN_MAX_CPU_ISA"

/* "x86_64", "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx" */
const char *isa_name(dt_isa isa);

/* What this CPU (and its operating system) offers, from cpuid. */
dt_isa isa_detect(void);

/* The level a cap names (case-insensitive, oneDNN's names), or -1. */
int isa_parse(const char *s);

/* cap (NULL or "": none) checked against the CPU's level: 0 and *level the
 * level in force, or -1 with one line in msg naming the variable, the value and
 * the levels this CPU offers. Pure: for the tests. */
int isa_resolve(const char *cap, dt_isa cpu, dt_isa *level, char *msg, unsigned msglen);

/* The level in force in this process: the CPU's, capped by DTRAIN_MAX_CPU_ISA
 * (a bad cap reads as the CPU's level here; isa_setup refuses it first). */
dt_isa isa_level(void);

/* The vector kernels' variant for the level in force: 0 baseline, 1 AVX2 +
 * FMA, 2 AVX-512. */
int isa_vec(void);

/* Before MPI_Init: check the cap (exit 1 with its line on a bad one), and
 * where it lowers the level, set ONEDNN_MAX_CPU_ISA and OPENBLAS_CORETYPE
 * and re-execute argv once so the libraries read them. */
void isa_setup(char **argv);

/* The same for a test program: the cap checked and the libraries' variables
 * set, re-executing argv; 0, or -1 with the line printed. */
int isa_setup_test(char **argv);

#endif
