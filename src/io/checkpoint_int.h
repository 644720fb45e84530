/* What the checkpoint writer and finder (io/checkpoint.c) and the reader
 * (io/checkpoint_read.c) share: the file format's constants and the
 * checkpoint directory's names. Private to those two files. */
#ifndef DT_CHECKPOINT_INT_H
#define DT_CHECKPOINT_INT_H

#include <stddef.h>

#define CKPT_FORMAT_VERSION 1
/* ckpt- + 10 digits + .h5 */
#define CKPT_NAME_LEN 18
/* Chunk width in elements: one row, or at most 64 Ki elements (256 KiB), so a chunk stays
 * well under HDF5's 4 GiB chunk limit and the Fletcher32 buffer is small. */
#define CKPT_CHUNK_MAX ((hsize_t)1 << 16)
/* Return code of the read helpers for a file that is damaged (as opposed to
 * -1: intact but not what this run needs). */
#define CKPT_DAMAGED (-2)
/* "checkpoint <path>" for messages */
#define DT_CKPT_WHERE 4200

/* Whether name is ckpt-##########.h5<suffix>. */
int ckpt_is_name(const char *name, const char *suffix);
/* Sorted (oldest first: the step has a fixed width) names in dir matching
 * ckpt-##########.h5<suffix>. Returns the count; *names is malloc'd. */
size_t ckpt_list(const char *dir, const char *suffix, char ***names);
void ckpt_names_free(char **names, size_t n);
/* out = dir/name; fatal if it does not fit in len bytes. */
void ckpt_path_join(char *out, size_t len, const char *dir, const char *name);

#endif
