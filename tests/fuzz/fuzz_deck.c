/* libFuzzer: the deck parser with overrides and rank groups.
 * Input: deck text, then optionally a NUL byte and override arguments
 * ("section.key=value"), one per line. Parsed for a job of 1..8 ranks (the
 * first byte of the input picks the count: groups must add up to it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/deck.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int modes_set;
    if (!modes_set++)
        deck_use_modes(FUZZ_MODES, NULL);
    if (size == 0 || size > 65536)
        return 0;
    int world = 1 + data[0] % 8;
    const uint8_t *nul = memchr(data, 0, size);
    size_t deck_len = nul ? (size_t)(nul - data) : size;
    const char *path = fuzz_file(0, "deck.ini", data, deck_len);

    char *ov = NULL, *args[16];
    int nov = 0;
    if (nul) {
        size_t n = size - deck_len - 1;
        ov = malloc(n + 1);
        memcpy(ov, nul + 1, n);
        ov[n] = '\0';
        for (char *p = ov, *line; nov < 16 && (line = strsep(&p, "\n")) != NULL;)
            if (*line)
                args[nov++] = line;
    }
    dt_job job;
    if (deck_parse_job(path, nov, args, world, &job) == 0) {
        /* every rank belongs to exactly one group */
        for (int r = 0; r < world; r++)
            if (!deck_job_group(&job, r)) {
                fprintf(stderr, "fuzz_deck: rank %d of %d is in no group\n", r, world);
                abort();
            }
        deck_job_free(&job);
    }
    dt_config cfg;
    char *eff = NULL;
    if (deck_parse(path, nov, args, &cfg, &eff) == 0) {
        /* the effective deck parses again to the same effective deck */
        char *eff2 = NULL;
        dt_config cfg2;
        if (deck_parse_string("effective", eff, 0, NULL, &cfg2, &eff2) != 0) {
            fprintf(stderr, "fuzz_deck: the effective deck does not read back: %s\n%s\n",
                    dt_err_msg(), eff);
            abort();
        }
        if (strcmp(eff, eff2) != 0) {
            size_t i = 0;
            while (eff[i] == eff2[i])
                i++;
            fprintf(stderr, "fuzz_deck: the effective deck reads back to another one, from "
                    "byte %zu: '%.80s' became '%.80s'\n", i, eff + i, eff2 + i);
            abort();
        }
        free(eff2);
    }
    free(eff);
    free(ov);
    dt_err_clear();
    return 0;
}
