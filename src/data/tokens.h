/* Token data for a language model: a byte-level text corpus or llm.c token
 * files, split into training and validation, and the window samplers over them.
 *
 * Every rank loads the whole corpus itself (no communication) and samples its
 * own part of the training split. Functions returning int return 0 on success
 * and -1 after dt_err_set() with a message naming the file and what was
 * expected.
 */
#ifndef DT_DATA_TOKENS_H
#define DT_DATA_TOKENS_H

#include <stddef.h>
#include <stdint.h>

/* GPT-2's vocabulary, the size llm.c's token files are written for. */
#define DT_TOKENS_DEFAULT_VOCAB 50257
/* llm.c token files: 256 little-endian int32 (magic, version, token count,
 * then zeros), followed by the tokens as little-endian uint16. */
#define DT_TOKENS_MAGIC 20240520
#define DT_TOKENS_VERSION 1
#define DT_TOKENS_HEADER_INTS 256

/* A tokenised corpus, split into training and validation. */
typedef struct dt_corpus {
    char name[64];          /* "text" or "tokens" */
    int vocab;              /* text: number of distinct bytes; tokens: the given vocabulary */
    uint8_t bytes[256];     /* text: token id -> byte (the distinct bytes, sorted); tokens: 0 */
    int64_t n_train, n_val;
    uint16_t *train, *val;  /* token ids (n_train), (n_val), each < vocab */
    char *train_src, *val_src; /* where each split came from, for messages */
    int files_read;         /* text: files concatenated (1 for a single file) */
    int files_binary;       /* text, directory: files skipped for holding a NUL byte */
    int files_other;        /* text, directory: entries skipped as not regular files
                             * (symbolic links, subdirectories, devices) */
} dt_corpus;

/* A byte-level corpus from a text file, or from a directory whose regular
 * files (not symbolic links, not subdirectories) are read in name order
 * (strcmp, so byte order, independent of the locale) and concatenated. A
 * directory's file holding a NUL byte is binary: skipped, with a one-line note
 * on stderr naming it (printed by rank 0 only, or by the process before
 * MPI_Init). A single file given as the path must be text. Vocabulary: the
 * distinct bytes, sorted; token id = rank of the byte in that order. The
 * first floor(0.9 n) bytes are the training split, the rest validation. */
int corpus_load_text(dt_corpus *c, const char *path);
/* llm.c token files: train_path for training, val_path for validation;
 * vocab 0 means DT_TOKENS_DEFAULT_VOCAB, otherwise 2..65536 (tokens are
 * uint16). Every token must be < vocab. */
int corpus_load_tokens(dt_corpus *c, const char *train_path, const char *val_path, int vocab);
/* Whether the corpus can train a model of context T: the training split must
 * hold a window of T+1 tokens and the validation split one validation window
 * (T+1 tokens), i.e. the corpus holds at least two windows. The message says
 * how many tokens (for text: bytes of text) are needed. */
int corpus_check(const dt_corpus *c, int T);
void corpus_free(dt_corpus *c);

/* Token ids back to bytes with a text corpus's table (bytes[vocab], as stored
 * in the run record): out[i] = bytes[ids[i]]. -1 with a message naming the
 * position if an id is outside 0..vocab-1. */
int tokens_decode(const uint8_t *bytes, int vocab, const int32_t *ids, int64_t n, uint8_t *out);

/* Training windows.
 *
 * Partition rule: the training split of n_train tokens is cut into R
 * contiguous parts of floor(n_train / R) tokens each, in order; rank r
 * (0-based) of R takes part r, tokens r*floor(n_train/R) ..
 * (r+1)*floor(n_train/R) - 1 (the last n_train mod R tokens are unused).
 * Rank r draws windows of T+1 tokens at uniformly random offsets of its own
 * part, window i from the stream (seed, r, i): a pure function of its index,
 * so the whole state is `drawn`, the number of windows drawn so far. To
 * resume, windows_init() and then set drawn to the saved count. An epoch is
 * the part's length in tokens / (B T) steps (at least 1). */
typedef struct dt_windows {
    const dt_corpus *c;
    int rank, nranks, T, B;
    uint64_t seed;
    int64_t part_begin, part_len; /* this rank's part of the training split */
    int64_t drawn;                /* windows drawn so far: the whole state */
} dt_windows;

/* -1 if the rank's part is shorter than T+1 tokens (or T, B, rank, nranks are
 * out of range). */
int windows_init(dt_windows *w, const dt_corpus *c, int rank, int nranks, int T, int B,
                 uint64_t seed);
/* The next B windows: x, y (B, T), y[b][t] = x[b][t+1] within the window
 * (y is x shifted by one). */
void windows_next(dt_windows *w, int32_t *x, int32_t *y);
int64_t windows_steps_per_epoch(const dt_windows *w);
/* Non-overlapping validation windows: floor((n_val - 1) / T) (0 if empty). */
int64_t windows_val_count(const dt_corpus *c, int T);
/* Validation window k (0 <= k < windows_val_count): x (T) = tokens kT .. kT+T-1,
 * y (T) = kT+1 .. kT+T. */
void windows_val(const dt_corpus *c, int T, int64_t k, int32_t *x, int32_t *y);

#endif
