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

#include "io/settings.h"

/* The spellings of algorithm.mode ("a|b|c") and a rule between keys that
 * only the chosen mode knows (0, or -1 after dt_err_set(); NULL: none),
 * from the layer that holds the algorithms (algo_deck_register), set once
 * before the first deck is parsed: the deck knows no mode by itself. */
void deck_use_modes(const char *choices, int (*rule)(const dt_config *cfg, const char *where));

/* The spellings of enum key section.name, "a|b|c" ("" for another key). */
const char *deck_choices(const char *section, const char *name);

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

/* ---- rank groups ------------------------------------------------------------
 * A deck may hold sections [group.NAME] with `ranks = N` and overrides written
 * `section.key = value`; on the command line `group.NAME.section.key=value`
 * and `group.NAME.ranks=N`. Groups take consecutive world ranks in the order
 * their sections appear; each trains on its own in <run.output_dir>/<NAME>.
 * Precedence, lowest first: the deck outside groups, plain command-line
 * overrides, the group's section, the group's command-line overrides. */
#define DT_GROUP_NAME_MAX 32
#define DT_GROUPS_MAX 64

typedef struct dt_group {
    char name[DT_GROUP_NAME_MAX]; /* "": the implicit group of a deck without groups */
    int first, ranks;             /* world ranks first .. first + ranks - 1 */
    char where[DT_PATH_MAX + 32]; /* where its rank count was given, for messages */
    dt_config cfg;                /* complete; run.output_dir is the group's own */
    char *effective;              /* its effective deck: a deck of its own, no groups */
} dt_group;

typedef struct dt_job {
    int ngroups;                  /* >= 1; 1 and name "" without [group.*] sections */
    dt_group *groups;
    char *effective;              /* the whole effective deck, group sections included */
    char *notes;                  /* NULL, or lines "DECK: note: ..." on keys that were given
                                   * but do not apply (ignored); for rank 0 to print */
} dt_job;

/* Parse a deck with its group sections for a job of world_size ranks: the
 * group rank counts must add up to it (a deck without groups makes one group
 * of world_size ranks). Serial; -1 with dt_err_set() on error. */
int deck_parse_job(const char *path, int noverrides, char *const *overrides, int world_size,
                   dt_job *job);
/* Collective over world: rank 0 reads the file and broadcasts its bytes,
 * every rank parses them, so every rank holds every group's configuration
 * and a bad deck fails on every rank with the same message. */
int deck_load_job(MPI_Comm world, const char *path, int noverrides, char *const *overrides,
                  dt_job *job);
/* The group holding world rank `rank`. */
const dt_group *deck_job_group(const dt_job *job, int rank);
void deck_job_free(dt_job *job);

/* Print the reference of all keys (used by --help). */
void deck_print_keys(FILE *f);

#endif
