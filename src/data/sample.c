#include "data/sample.h"

#include <string.h>

#include "core/error.h"

size_t dtype_size(dt_dtype t)
{
    (void)t; /* f32 and i32 */
    return 4;
}

size_t tensor_row_count(const dt_tensor *x)
{
    size_t n = 1;
    for (int i = 1; i < x->rank; i++)
        n *= (size_t)x->shape[i];
    return n;
}

size_t tensor_bytes(const dt_tensor *x, int64_t b)
{
    return (size_t)b * tensor_row_count(x) * dtype_size(x->type);
}

static void *host_calloc(size_t bytes)
{
    return dt_calloc(bytes ? bytes : 1, 1);
}

dt_sample sample_like(const dt_sample *like, void *(*alloc)(size_t bytes))
{
    if (!alloc)
        alloc = host_calloc;
    dt_sample s = *like;
    s.input.data = alloc(tensor_bytes(&like->input, like->input.shape[0]));
    s.target.data = alloc(tensor_bytes(&like->target, like->target.shape[0]));
    return s;
}

dt_tensor tensor_shape(dt_dtype type, int rank, const int64_t *shape)
{
    if (rank < 1 || rank > DT_TENSOR_MAX_RANK)
        DT_FATAL("tensor of rank %d: 1 to %d dimensions", rank, DT_TENSOR_MAX_RANK);
    dt_tensor x = { .type = type, .rank = rank };
    memcpy(x.shape, shape, (size_t)rank * sizeof *shape);
    return x;
}
