/* Shared helpers of the libFuzzer harnesses: the readers under test take
 * file names, so an input is written to a private temporary directory. */
#ifndef DT_FUZZ_UTIL_H
#define DT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A directory for this process, created once (removed by the OS's tmp
 * cleaning; the harness rewrites the same few names). */
static inline const char *fuzz_dir(void)
{
    static char dir[64];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, sizeof dir, "%.40s/dtfuzz.XXXXXX", base);
        if (!mkdtemp(dir))
            abort();
    }
    return dir;
}

/* Writes n bytes to dir/name; returns the path (static buffer per slot). */
static inline const char *fuzz_file(int slot, const char *name, const uint8_t *d, size_t n)
{
    static char paths[4][256];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0)
        abort();
    return paths[slot];
}

#endif
