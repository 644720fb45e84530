/* The CPU's instruction-set level and its cap (core/isa.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *const names[DT_ISA_COUNT] = {
    "x86_64", "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx",
};

/* oneDNN's ONEDNN_MAX_CPU_ISA value for each level */
static const char *const onednn_names[DT_ISA_COUNT] = {
    "SSE41", "AVX2", "AVX512_CORE", "AVX512_CORE_BF16", "AVX512_CORE_AMX",
};

/* OpenBLAS's core type for each level (its DYNAMIC_ARCH kernel sets): a
 * level above what it names is left to OpenBLAS's own choice */
static const char *const openblas_cores[DT_ISA_COUNT] = {
    "Nehalem", "Haswell", "SkylakeX", "Cooperlake", NULL,
};

const char *isa_name(dt_isa isa)
{
    return (unsigned)isa < DT_ISA_COUNT ? names[isa] : "?";
}

dt_isa isa_detect(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("x86-64-v3"))
        return DT_ISA_X86_64;
    if (!__builtin_cpu_supports("x86-64-v4"))
        return DT_ISA_AVX2;
    if (!__builtin_cpu_supports("avx512bf16"))
        return DT_ISA_AVX512_CORE;
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16"))
        return DT_ISA_AVX512_CORE_BF16;
    return DT_ISA_AVX512_CORE_AMX;
#else
    return DT_ISA_X86_64;
#endif
}

int isa_parse(const char *s)
{
    for (int i = 0; i < DT_ISA_COUNT; i++)
        if (s && strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

int isa_resolve(const char *cap, dt_isa cpu, dt_isa *level, char *msg, unsigned msglen)
{
    *level = cpu;
    if (!cap || !*cap)
        return 0;
    const int want = isa_parse(cap);
    if (want >= 0 && want <= (int)cpu) {
        *level = (dt_isa)want;
        return 0;
    }
    char offers[128] = "";
    for (int i = DT_ISA_AVX2; i <= (int)cpu; i++) {
        strncat(offers, i > DT_ISA_AVX2 ? ", " : "", sizeof offers - strlen(offers) - 1);
        strncat(offers, names[i], sizeof offers - strlen(offers) - 1);
    }
    snprintf(msg, msglen, "%s = '%s': %s; this CPU offers %s", DT_ISA_CAP_VAR, cap,
             want < 0 ? "not a level (avx2, avx512_core, avx512_core_bf16, avx512_core_amx)"
                      : "above what this CPU has",
             offers[0] ? offers : "none of them (baseline x86-64 only)");
    return -1;
}

static int cached = -1;

dt_isa isa_level(void)
{
    if (cached < 0) {
        dt_isa level;
        char msg[256];
        if (isa_resolve(getenv(DT_ISA_CAP_VAR), isa_detect(), &level, msg, sizeof msg) != 0)
            level = isa_detect();
        cached = (int)level;
    }
    return (dt_isa)cached;
}

int isa_vec(void)
{
    const dt_isa l = isa_level();
    return l >= DT_ISA_AVX512_CORE ? 2 : l == DT_ISA_AVX2 ? 1 : 0;
}

/* set name=value unless it already holds it; 1 where it changed */
static int set_var(const char *name, const char *value)
{
    const char *now = getenv(name);
    if (now && strcmp(now, value) == 0)
        return 0;
    return setenv(name, value, 1) == 0;
}

static int setup(char **argv)
{
    const char *cap = getenv(DT_ISA_CAP_VAR);
    const dt_isa cpu = isa_detect();
    dt_isa level;
    char msg[256];
    if (isa_resolve(cap, cpu, &level, msg, sizeof msg) != 0) {
        fprintf(stderr, "dtrain: %s\n", msg);
        return -1;
    }
    if (level == cpu) /* no cap in force: each library keeps its own choice */
        return 0;
    int changed = set_var("ONEDNN_MAX_CPU_ISA", onednn_names[level]);
    if (openblas_cores[level])
        changed |= set_var("OPENBLAS_CORETYPE", openblas_cores[level]);
    if (!changed || getenv("DTRAIN_ISA_REEXEC"))
        return 0;
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || (size_t)len >= sizeof self - 1 || setenv("DTRAIN_ISA_REEXEC", "1", 1) != 0) {
        fprintf(stderr, "dtrain: %s = %s: cannot re-execute to hand the cap to oneDNN and "
                        "OpenBLAS\n", DT_ISA_CAP_VAR, cap);
        return -1;
    }
    self[len] = '\0';
    execv(self, argv);
    fprintf(stderr, "dtrain: %s = %s: re-executing %s failed\n", DT_ISA_CAP_VAR, cap, self);
    return -1;
}

void isa_setup(char **argv)
{
    if (setup(argv) != 0)
        exit(1);
}

int isa_setup_test(char **argv) { return setup(argv); }
