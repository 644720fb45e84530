/* The GPT of models/gpt.h through a backend's kernel table (backend/backend.h):
 * the path of the backends whose tensors live in device memory (CUDA, and the
 * tests' devmem backend), where models/gpt.c's direct CPU calls cannot go.
 *
 * Same parameter vector, equations and dropout masks as models/gpt.c. The
 * precision is the backend's: on a bf16 backend (backend_cuda_bf16) the
 * linear layers and the tied head take bf16 operands with fp32 accumulation,
 * everything else, the attention's products included, stays fp32.
 * Parameters, gradients, tokens, targets and every activation are in the
 * backend's memory; the host sees only the loss rows and, in gpt_be_forward,
 * a copy of the tokens for the vocabulary check. Each pass is one backend call:
 * the linear layers (the tied head included) are the backend's linear
 * kernels, the rest its GPT entries. */
#ifndef DT_MODELS_GPT_BACKEND_H
#define DT_MODELS_GPT_BACKEND_H

#include <stdint.h>

#include "backend/backend.h"
#include "models/gpt.h"

typedef struct dt_gpt_be dt_gpt_be;

/* NULL after dt_err_set() for a bad config (gpt_create's checks), a precision
 * other than the backend's, or a backend without one of the GPT's entries. */
dt_gpt_be *gpt_be_create(const dt_gpt_config *c, const dt_backend *be);
/* The tensor table and parameter layout (models/gpt.h). */
const dt_gpt *gpt_be_shape(const dt_gpt_be *m);
/* gpt_reserve, gpt_forward, gpt_backward of models/gpt.h with every pointer
 * in the backend's memory. */
void gpt_be_reserve(dt_gpt_be *m, int B);
double gpt_be_forward(dt_gpt_be *m, const float *params, const int32_t *tokens,
                      const int32_t *targets, int B, int train, uint64_t key, int64_t *correct);
void gpt_be_backward(dt_gpt_be *m, const float *params, float *grads);
/* A training step (forward, loss rows, backward into grads) queued with
 * nothing read back, and then its mean loss, hits and positions (B T):
 * gpt_be_forward (train) + gpt_be_backward's results, bit for bit. Tokens
 * and targets are not checked here (that would be a copy to the host that
 * waits, each step): they must lie in [0, vocab), as the engine's batches do,
 * whose sources check every token when they load it (data/tokens.c;
 * data/text.c makes only ids of its vocabulary). */
void gpt_be_train_queue(dt_gpt_be *m, const float *params, const int32_t *tokens,
                        const int32_t *targets, int B, uint64_t key, float *grads);
double gpt_be_train_result(dt_gpt_be *m, int64_t *correct, int64_t *count);
/* Record the queued step once and replay it where the backend can
 * (backend/step_graphs.h) and on (compute.cuda_graphs); returns whether the
 * backend can. */
int gpt_be_use_graphs(dt_gpt_be *m, int on);
/* the records held (tests) */
int gpt_be_recorded(const dt_gpt_be *m);
void gpt_be_free(dt_gpt_be *m);

#endif
