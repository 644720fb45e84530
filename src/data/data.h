/* Datasets, partitioners and the minibatch loader.
 *
 * A dataset keeps its images as raw bytes when it came from a file (MNIST,
 * Fashion-MNIST, CIFAR-10: 4x less memory than floats) and normalizes per
 * batch; the synthetic dataset keeps floats. Every rank loads the files itself
 * (no communication) and takes its shard as a list of indices.
 *
 * Errors: functions returning int return 0 on success and -1 after
 * dt_err_set() with a message naming the file, the byte offset or field, and
 * what was expected.
 */
#ifndef DT_DATA_H
#define DT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"

typedef struct dt_dataset {
    char name[64];
    int64_t n;          /* samples */
    int c, h, w;        /* per-sample shape (C, H, W) */
    int classes;
    uint8_t *u8;        /* (n, c, h, w) raw pixels, or NULL */
    float *f32;         /* (n, c, h, w) ready-to-use values, or NULL */
    int32_t *labels;    /* (n) in [0, classes) */
    float mean[3], std[3]; /* per-channel normalization of u8/255 */
} dt_dataset;

/* IDX pair (MNIST layout; plain or gzip, detected from the content). */
int dataset_load_idx(dt_dataset *d, const char *images_path, const char *labels_path);
/* CIFAR-10 binary batches in dir: train = data_batch_1..5.bin, else test_batch.bin. */
int dataset_load_cifar10(dt_dataset *d, const char *dir, int train);
/* By name: "fashion-mnist" or "mnist" (dir holds train-images-idx3-ubyte[.gz],
 * train-labels-idx1-ubyte[.gz], t10k-...), "cifar10" (dir of .bin batches).
 * Sets name and normalization constants. */
int dataset_load_named(dt_dataset *train, dt_dataset *test, const char *name,
                       const char *dir);
/* Learnable Gaussian class clusters: class centres drawn from (seed), samples
 * centre + noise * N(0,1) from (seed, split). Deterministic. */
void dataset_synthetic(dt_dataset *d, int64_t n, int c, int h, int w, int classes,
                       float noise, uint64_t seed, int split);
void dataset_free(dt_dataset *d);
/* Sample i, normalized, into out (c*h*w floats). */
void dataset_sample(const dt_dataset *d, int64_t i, float *out);

/* A rank's share of a dataset: indices into it, in dataset order. */
typedef struct dt_shard {
    int64_t n;
    int64_t *idx;
} dt_shard;

/* IID: a permutation seeded by seed alone (same on every rank), cut into
 * nranks equal contiguous chunks of floor(N / nranks); rank takes its chunk. */
int partition_iid(const dt_dataset *d, int rank, int nranks, uint64_t seed, dt_shard *out);
/* Class-skewed split (doc/references.md, Edge-consensus learning): classes
 * shuffled with seed; rank k holds `per_rank` classes at positions
 * (shift*k mod C) ... (wrapping); each
 * class divided among its holders with U(0.8, 1.0) weights, contiguous chunks
 * in dataset order, last holder takes the remainder. (§7: per_rank 8, shift 4.) */
int partition_class_skew(const dt_dataset *d, int rank, int nranks, uint64_t seed,
                         int per_rank, int shift, dt_shard *out);
/* Blocks (doc/references.md, Parameter server): dataset cut into nshards
 * blocks of `shard_size` in dataset order; worker m (0-based) of W takes
 * blocks m*floor(nshards/W) ... + floor(nshards/W)-1. */
int partition_blocks(const dt_dataset *d, int rank, int nranks, int64_t nshards,
                     int64_t shard_size, dt_shard *out);
void shard_free(dt_shard *s);

/* The loader walks its shard in passes; each pass is a fresh permutation
 * seeded by (seed, rank, pass). An epoch is `samples_per_epoch` samples
 * (default: the shard size, so pass == epoch). Batches are always full: a
 * batch that crosses a pass boundary continues into the next pass. */
typedef struct dt_loader_state {
    int64_t pass;       /* current pass over the shard */
    int64_t pos;        /* next position in the pass's permutation */
    int64_t drawn;      /* samples drawn since the start */
} dt_loader_state;

typedef struct dt_loader {
    const dt_dataset *d;
    const dt_shard *shard;
    int batch;
    uint64_t seed;
    int rank;
    int64_t samples_per_epoch;
    dt_loader_state st;
    int64_t *perm;      /* (shard->n) permutation of the current pass */
} dt_loader;

void loader_init(dt_loader *l, const dt_dataset *d, const dt_shard *shard, int batch,
                 uint64_t seed, int rank, int64_t samples_per_epoch);
/* Next batch: x (batch, c, h, w) normalized, y (batch). */
void loader_next(dt_loader *l, float *x, int32_t *y);
/* Epoch of the next batch: drawn / samples_per_epoch. */
int64_t loader_epoch(const dt_loader *l);
int64_t loader_steps_per_epoch(const dt_loader *l);
void loader_get_state(const dt_loader *l, dt_loader_state *st);
void loader_set_state(dt_loader *l, const dt_loader_state *st);
void loader_free(dt_loader *l);

#endif
