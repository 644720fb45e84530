/* The rank's data: the data sets, this worker's shard of the training set
 * (data.partition) and the batch sources the engine draws from. */
#include "config.h"

#include <string.h>

#include "core/error.h"
#include "data/data.h"
#include "data/tokens.h"
#include "engine/engine.h"

#ifdef DTRAIN_SIM
/* The simulator loads no data: the sample shape (for the model's size) and
 * the epoch's length come from data.name and the deck. */
int data_setup(dt_trainer *t)
{
    const dt_config *c = t->cfg;
    static const struct { const char *name; int c, h, w, classes; int64_t n; } known[] = {
        { "fashion-mnist", 1, 28, 28, 10, 60000 }, { "mnist", 1, 28, 28, 10, 60000 },
        { "cifar10", 3, 32, 32, 10, 50000 },
    };
    int64_t ch = 0, h = 0, w = 0, classes = 0, n = 0;
    if (!strcmp(c->data.name, "synthetic")) {
        ch = c->data.synthetic_channels;
        h = c->data.synthetic_height;
        w = c->data.synthetic_width;
        classes = c->data.synthetic_classes;
        n = c->data.synthetic_train;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(c->data.name, known[i].name)) {
            ch = known[i].c, h = known[i].h, w = known[i].w;
            classes = known[i].classes, n = known[i].n;
        }
    if (n <= 0)
        return dt_err_set("data.name = '%s': unknown to the simulator", c->data.name);
    int64_t in[4] = { t->data.B, ch, h, w }, lab[1] = { t->data.B };
    t->data.shape = (dt_sample){ .input = tensor_shape(DT_F32, 4, in),
                                 .target = tensor_shape(DT_I32, 1, lab) };
    t->data.classes = classes;
    t->data.train_samples = n;
    return 0;
}

/* the epoch a worker's shard would give (the learning-rate schedule) */
int64_t data_steps_per_epoch(const dt_trainer *t)
{
    const dt_config *c = t->cfg;
    return (c->data.samples_per_epoch > 0 ? c->data.samples_per_epoch
                                          : t->data.train_samples / (t->nworkers ? t->nworkers : 1)) /
           t->data.B;
}
#else
/* data.name = text | tokens: a corpus, its training windows and its
 * validation windows (T = model.block_size). */
static int data_setup_tokens(dt_trainer *t)
{
    const dt_config *c = t->cfg;
    dt_corpus corpus = { 0 };
    int rc = strcmp(c->data.name, "text") == 0
                 ? corpus_load_text(&corpus, c->data.path)
                 : corpus_load_tokens(&corpus, c->data.path, c->data.val_path,
                                      (int)c->model.vocab_size);
    if (rc != 0) {
        corpus_free(&corpus);
        return dt_err_prefix("data.path = '%s'", c->data.path);
    }
    if (corpus.n_train == 0 || corpus.vocab < 1) {
        corpus_free(&corpus);
        return dt_err_set("data.path = '%s': no tokens", c->data.path);
    }
    t->data.tokens = 1;
    t->data.vocab_n = strcmp(c->data.name, "text") == 0 ? corpus.vocab : 0;
    memcpy(t->data.vocab_bytes, corpus.bytes, sizeof t->data.vocab_bytes);
    if (source_tokens(&corpus, t->data.B, (int)c->model.block_size, c->run.seed, t->worker,
                      t->nworkers, c->data.test_limit, &t->data.train, &t->data.test) != 0) {
        corpus_free(&corpus);
        return dt_err_prefix("data.path = '%s'", c->data.path);
    }
    t->data.shape = t->data.train->batch;
    t->data.classes = t->data.train->classes;
    return 0;
}

int data_setup(dt_trainer *t)
{
    const dt_config *c = t->cfg;
    if (strcmp(c->data.name, "text") == 0 || strcmp(c->data.name, "tokens") == 0)
        return data_setup_tokens(t);
    dt_dataset train = { 0 }, test = { 0 };
    dt_shard shard = { 0 };
    if (strcmp(c->data.name, "synthetic") == 0) {
        dataset_synthetic(&train, c->data.synthetic_train, (int)c->data.synthetic_channels,
                          (int)c->data.synthetic_height, (int)c->data.synthetic_width,
                          (int)c->data.synthetic_classes, (float)c->data.synthetic_noise,
                          c->run.seed, 0);
        dataset_synthetic(&test, c->data.synthetic_test, (int)c->data.synthetic_channels,
                          (int)c->data.synthetic_height, (int)c->data.synthetic_width,
                          (int)c->data.synthetic_classes, (float)c->data.synthetic_noise,
                          c->run.seed, 1);
    } else if (dataset_load_named(&train, &test, c->data.name, c->data.path) != 0) {
        dataset_free(&train);
        dataset_free(&test);
        return dt_err_prefix("data.path = '%s'", c->data.path);
    }
    int64_t ntest = c->data.test_limit > 0 && c->data.test_limit < test.n ? c->data.test_limit
                                                                           : test.n;
    int rc;
    if (strcmp(c->data.partition, "class-skew") == 0)
        rc = partition_class_skew(&train, t->worker, t->nworkers, c->run.seed,
                                  (int)c->data.skew_classes, (int)c->data.skew_shift, &shard);
    else if (strcmp(c->data.partition, "blocks") == 0)
        rc = partition_blocks(&train, t->worker, t->nworkers, c->data.block_count,
                              c->data.block_size, &shard);
    else
        rc = partition_iid(&train, t->worker, t->nworkers, c->run.seed, &shard);
    if (rc == 0 && shard.n < t->data.B)
        rc = dt_err_set("rank %d's shard holds %lld samples, fewer than optim.batch_size = %d",
                        t->rank, (long long)shard.n, t->data.B);
    else if (rc != 0)
        dt_err_prefix("data.partition = '%s'", c->data.partition);
    if (rc != 0) {
        shard_free(&shard);
        dataset_free(&train);
        dataset_free(&test);
        return -1;
    }
    t->data.test = source_image_eval(&test, ntest, t->data.B);
    t->data.train = source_image_train(&train, &shard, t->data.B, c->run.seed, t->worker,
                                       c->data.samples_per_epoch);
    t->data.shape = t->data.train->batch;
    t->data.classes = t->data.train->classes;
    return 0;
}

int64_t data_steps_per_epoch(const dt_trainer *t)
{
    return source_steps_per_epoch(t->data.train);
}
#endif
