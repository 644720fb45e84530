/* A batch as the trainer sees it: an input tensor and a target tensor, each
 * with its own element type and shape (shape[0] = B).
 *
 *   images:        input (B, C, H, W) f32,  target (B) i32 labels
 *   language model: input (B, T) i32 tokens, target (B, T) i32 next tokens
 *
 * The trainer moves samples between host and backend memory without knowing
 * what they hold; the model (models/model.h) reads them. */
#ifndef DT_DATA_SAMPLE_H
#define DT_DATA_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef enum dt_dtype { DT_F32 = 0, DT_I32 = 1 } dt_dtype;

#define DT_TENSOR_MAX_RANK 4

typedef struct dt_tensor {
    dt_dtype type;
    int rank;                         /* 1 .. DT_TENSOR_MAX_RANK */
    int64_t shape[DT_TENSOR_MAX_RANK]; /* shape[0]: the batch */
    void *data;                       /* shape[0] * ... elements, or NULL: a shape only */
} dt_tensor;

typedef struct dt_sample {
    dt_tensor input, target;
} dt_sample;

/* Bytes of one element of type t (4 for f32 and i32). */
size_t dtype_size(dt_dtype t);
/* Elements of one row (one sample: every dimension but the first). */
size_t tensor_row_count(const dt_tensor *x);
/* Bytes of the first b rows. */
size_t tensor_bytes(const dt_tensor *x, int64_t b);
/* A sample shaped like `like` whose two tensors get memory from alloc(bytes)
 * (NULL: zeroed host memory, released with free); the caller releases it
 * with the allocator's own free. */
dt_sample sample_like(const dt_sample *like, void *(*alloc)(size_t bytes));
/* dt_tensor constructors for the usual shapes (data NULL). */
dt_tensor tensor_shape(dt_dtype type, int rank, const int64_t *shape);

#endif
