/* Input decks: INI files (libinih) validated against one schema table.
 *
 * Every key has a type, a default (or is required), and a documentation
 * string; inputs/reference.ini lists them all. Errors name the file, the line
 * and the key ("deck.ini:12: optim.lr = -1: expected a number > 0"), or the
 * command-line argument for an override ("argument 3: ..."). */
#ifndef DT_IO_DECK_H
#define DT_IO_DECK_H

#include <mpi.h>
#include <stdio.h>

#include "io/config.h"

/* Parse and validate a deck file plus "section.key=value" overrides (applied
 * after the file). On success fills cfg, and *effective (malloc'd) holds the
 * effective deck as INI text with every default filled in; returns 0.
 * On error returns -1 with dt_err_set(). Serial; no MPI. */
int deck_parse(const char *path, int noverrides, char *const *overrides,
               dt_config *cfg, char **effective);

/* Parse a deck from memory (name is used in messages). Same contract. */
int deck_parse_string(const char *name, const char *text, int noverrides,
                      char *const *overrides, dt_config *cfg, char **effective);

/* Collective: rank `root` of comm parses, the verdict and the effective deck
 * are broadcast, every rank fills cfg. Returns -1 on every rank (with the
 * message on every rank) if the deck is bad. */
int deck_load(MPI_Comm comm, int root, const char *path, int noverrides,
              char *const *overrides, dt_config *cfg, char **effective);

/* Print the reference of all keys (used by --help). */
void deck_print_keys(FILE *f);

#endif
