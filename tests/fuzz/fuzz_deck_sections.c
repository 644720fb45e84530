/* libFuzzer, differential: the deck's section pre-scan (the reader's view of
 * the current section, which registers [group.NAME] headers) against libinih,
 * on the same bytes. Both see the lines the deck's reader hands inih; at every
 * key inih reports, the section inih names must be the one the pre-scan
 * followed, and a [group.*] section must be registered (unless the pre-scan
 * refused its name, which is an error of its own). Any difference aborts.
 *
 * inih (r55) calls back only for keys, so a header followed by no key would
 * go unseen: each input runs twice, as it is and with a probe key line after
 * every line, which makes every header inih accepts observable at once. The
 * probe changes no line's reading: the reader strips leading white space (no
 * continuation lines) and a byte-order mark counts on line 1 only, which the
 * probe never is. Input: any bytes (up to 64 KiB). */
#include <ini.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/deck.h"
#include "io/deck_internal.h"
#include "fuzz_util.h"

typedef struct probe_state {
    parse_ctx *c;
    const char *what; /* "input" or "probed" */
    long keys;
} probe_state;

static int compare_handler(void *user, const char *section, const char *name,
                           const char *value)
{
    probe_state *st = user;
    parse_ctx *c = st->c;
    (void)value;
    st->keys++;
    if (strcmp(section, c->section) != 0) {
        fprintf(stderr, "fuzz_deck_sections (%s): line %d, key '%s': inih's section is '%s', "
                "the pre-scan's '%s'\n", st->what, c->line, name, section, c->section);
        abort();
    }
    if (strncmp(section, "group.", 6) == 0 && !c->err_line &&
        !deck_group_find(c, section + 6, strlen(section + 6))) {
        fprintf(stderr, "fuzz_deck_sections (%s): line %d: inih reports [%s], which the "
                "pre-scan did not register\n", st->what, c->line, section);
        abort();
    }
    return 1;
}

static void run_both(const char *text, size_t len, const char *what)
{
    parse_ctx *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->name = "fuzz.ini";
    c->text = text;
    c->len = len;
    probe_state st = {c, what, 0};
    if (ini_parse_stream(deck_reader, c, compare_handler, &st) == -2)
        abort();
    deck_groups_free(c);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int modes_set;
    if (!modes_set++)
        deck_use_modes(FUZZ_MODES, NULL);
    if (size > 65536)
        return 0;
    run_both((const char *)data, size, "input");

    static const char probe[] = "\nprobe=1\n";
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    char *probed = malloc(size + lines * (sizeof probe - 1) + 1);
    if (!probed)
        abort();
    size_t o = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n') {
            memcpy(probed + o, probe, sizeof probe - 1); /* ends the line, then the probe */
            o += sizeof probe - 1;
        } else {
            probed[o++] = (char)data[i];
        }
    }
    run_both(probed, o, "probed");
    free(probed);
    dt_err_clear();
    return 0;
}
