/* A training step queued as one piece (nn/net_step.c for the image models,
 * models/gpt_backend.c for the GPT on a device backend):
 *  - net_train_queue + net_train_result give net_forward + net_backward's
 *    loss, hits and gradient bit for bit, dropout included, on every CPU
 *    backend and the device-memory one (where every tensor is out of the
 *    host's reach), over steps with new keys and two batch buffers;
 *  - the records' bookkeeping, against a backend whose graph_* calls only
 *    count (the kernels still run eagerly outside them): the first sight of
 *    a step runs eagerly, the second records and launches, later ones only
 *    launch; a moved scratch (graph_epoch), a bigger batch (net_reserve) or
 *    other pointers record again; a failed record runs eagerly from then on;
 *    every record is freed. The CUDA recording itself runs on a GPU only
 *    (tests/test_gpu.c);
 *  - the GPT's queued step against gpt_be_forward + gpt_be_backward, bit for
 *    bit, with and without dropout, and its records' bookkeeping. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/gpt_backend.h"
#include "models/image_nets.h"
#include "nn/net.h"
#include "tap.h"

static dt_rng rng;

static void fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(2.0 * rng_uniform_d(&rng) - 1.0);
}

static void *up(const dt_backend *be, const void *h, size_t bytes)
{
    void *d = be->mem_alloc(bytes);
    be->to_backend(d, h, bytes);
    return d;
}

/* Four steps of model `name` on be, two batch buffers taken in turn, a key
 * a step: queued against forward + backward */
static void test_equal(const dt_backend *be, const char *name, int c, int hw, int B)
{
    dt_net *a = model_build(be, name, "32", "relu", 4, c, hw, hw, 10);
    dt_net *q = model_build(be, name, "32", "relu", 4, c, hw, hw, 10);
    if (!a || !q) {
        CHECK(0, "%s on %s: %s", name, be->name, dt_err_msg());
        return;
    }
    const size_t np = a->nparams, nx = (size_t)B * c * hw * hw;
    float *hp = malloc(np * sizeof *hp), *hx = malloc(nx * sizeof *hx);
    float *ga = malloc(np * sizeof *ga), *gq = malloc(np * sizeof *gq);
    int32_t *hy = malloc((size_t)B * sizeof *hy);
    net_init_params(a, hp, 7);
    float *p = up(be, hp, np * sizeof *hp);
    float *da = be->mem_alloc(np * sizeof(float)), *dq = be->mem_alloc(np * sizeof(float));
    float *x[2];
    int32_t *y[2];
    for (int k = 0; k < 2; k++) {
        fill(hx, nx);
        for (int i = 0; i < B; i++)
            hy[i] = (int32_t)(rng_uniform_d(&rng) * 10) % 10;
        x[k] = up(be, hx, nx * sizeof *hx);
        y[k] = up(be, hy, (size_t)B * sizeof *hy);
    }
    int same = 1;
    for (int s = 0; s < 4; s++) {
        const uint64_t key = rng_key(3, 0, (uint64_t)s, 0xD0);
        int ca = -1, cq = -2;
        const double la = net_forward(a, p, x[s % 2], y[s % 2], B, 1, key, &ca);
        net_backward(a, p, da);
        net_train_queue(q, p, x[s % 2], y[s % 2], B, key, dq);
        const double lq = net_train_result(q, &cq);
        be->to_host(ga, da, np * sizeof *ga);
        be->to_host(gq, dq, np * sizeof *gq);
        same &= memcmp(&la, &lq, sizeof la) == 0 && ca == cq &&
                memcmp(ga, gq, np * sizeof *ga) == 0;
    }
    CHECK(same, "%s on %s: four queued steps equal forward + backward bit for bit (loss, hits, "
          "gradient)", name, be->name);
    for (int k = 0; k < 2; k++) {
        be->mem_free(x[k]);
        be->mem_free(y[k]);
    }
    be->mem_free(p);
    be->mem_free(da);
    be->mem_free(dq);
    net_free(a);
    net_free(q);
    free(hp);
    free(hx);
    free(ga);
    free(gq);
    free(hy);
}

/* ---- a backend whose graphs only count ----------------------------------- */
static struct {
    int begins, ends, launches, frees, fail;
    uint64_t epoch;
} g;
static int token; /* what a record points to */

static void fake_begin(void) { g.begins++; }
static void *fake_end(void)
{
    g.ends++;
    if (g.fail) {
        dt_err_set("the test's backend refuses to record");
        return NULL;
    }
    return &token;
}
static void fake_launch(void *x)
{
    (void)x;
    g.launches++;
}
static void fake_free(void *x)
{
    (void)x;
    g.frees++;
}
static uint64_t fake_epoch(void) { return g.epoch; }

/* base with the counting graph_* members, the counts cleared */
static dt_backend counting(const dt_backend *base)
{
    dt_backend be = *base;
    be.graph_begin = fake_begin;
    be.graph_end = fake_end;
    be.graph_launch = fake_launch;
    be.graph_free = fake_free;
    be.graph_epoch = fake_epoch;
    memset(&g, 0, sizeof g);
    return be;
}

static void test_records(void)
{
    dt_backend be = counting(backend_cpu());
    dt_net *n = model_build(&be, "mlp", "16", "relu", 4, 1, 6, 6, 10);
    CHECK(net_use_graphs(n, 1) == 1, "a backend with graph_* members can record");
    const int B = 4;
    float *p = calloc(n->nparams, sizeof *p), *gr = calloc(n->nparams, sizeof *gr);
    float *xa = calloc((size_t)2 * B * 36, sizeof *xa), *xb = calloc((size_t)2 * B * 36, sizeof *xb);
    int32_t *y = calloc((size_t)2 * B, sizeof *y);
#define STEP(x, b) net_train_queue(n, p, (x), y, (b), 1, gr)
#define SAW(bg, l) (g.begins == (bg) && g.ends == (bg) && g.launches == (l))
    STEP(xa, B);
    STEP(xb, B);
    CHECK(SAW(0, 0), "first sight of each of two batch buffers: eager, nothing recorded");
    STEP(xa, B);
    STEP(xb, B);
    CHECK(SAW(2, 2), "second sight: each recorded once and launched");
    STEP(xa, B);
    STEP(xb, B);
    STEP(xa, B);
    CHECK(SAW(2, 5), "later steps launch the records without recording (%d begins, %d "
          "launches)", g.begins, g.launches);
    g.epoch++;
    STEP(xa, B);
    CHECK(SAW(2, 5) && g.frees == 1, "a moved scratch: the stale record freed, the step eager");
    STEP(xa, B);
    CHECK(SAW(3, 6), "then recorded again");
    STEP(xa, 2 * B); /* net_reserve moves every buffer */
    STEP(xa, 2 * B);
    CHECK(SAW(4, 7), "a bigger batch: eager, then recorded");
    STEP(xb, B);
    CHECK(SAW(4, 7), "the smaller batch's record named the old buffers: eager");
    g.fail = 1;
    STEP(xb, B);
    STEP(xb, B);
    CHECK(g.ends == 5 && g.launches == 7, "a record that fails is tried once, then the step "
          "runs eagerly (%d ends, %d launches)", g.ends, g.launches);
    g.fail = 0;
    const int live = (g.ends - 1) - g.frees; /* one end failed */
    net_free(n);
    CHECK(live > 0 && g.frees == g.ends - 1, "net_free frees the %d live records (%d freed of %d "
          "made)", live, g.frees, g.ends - 1);
    free(p);
    free(gr);
    free(xa);
    free(xb);
    free(y);
}

/* ---- the GPT ---------------------------------------------------------------- */
static const dt_gpt_config gpt_cfg = { .vocab = 37, .block = 16, .n_layer = 2, .n_head = 2,
                                       .n_embd = 32 };
enum { GPT_B = 3 };

typedef struct {
    float *p, *ga, *gq;
    int32_t *tok[2], *tgt[2];
    size_t np;
} gpt_fixture;

static gpt_fixture gpt_fixture_make(const dt_backend *be, const dt_gpt_be *m)
{
    gpt_fixture f = { .np = gpt_nparams(gpt_be_shape(m)) };
    const size_t N = (size_t)GPT_B * gpt_cfg.block;
    float *hp = malloc(f.np * sizeof *hp);
    int32_t *ht = malloc(N * sizeof *ht);
    gpt_init_params(gpt_be_shape(m), hp, 11);
    f.p = up(be, hp, f.np * sizeof *hp);
    f.ga = be->mem_alloc(f.np * sizeof(float));
    f.gq = be->mem_alloc(f.np * sizeof(float));
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < N; i++)
            ht[i] = (int32_t)(rng_uniform_d(&rng) * gpt_cfg.vocab) % gpt_cfg.vocab;
        f.tok[k] = up(be, ht, N * sizeof *ht);
        for (size_t i = 0; i < N; i++)
            ht[i] = (int32_t)(rng_uniform_d(&rng) * gpt_cfg.vocab) % gpt_cfg.vocab;
        f.tgt[k] = up(be, ht, N * sizeof *ht);
    }
    free(hp);
    free(ht);
    return f;
}

static void gpt_fixture_free(const dt_backend *be, gpt_fixture *f)
{
    be->mem_free(f->p);
    be->mem_free(f->ga);
    be->mem_free(f->gq);
    for (int k = 0; k < 2; k++) {
        be->mem_free(f->tok[k]);
        be->mem_free(f->tgt[k]);
    }
}

/* Four GPT steps on be, two batch buffers in turn, a key a step: queued
 * against forward + backward */
static void test_gpt_equal(const dt_backend *be, float dropout)
{
    dt_gpt_config c = gpt_cfg;
    c.dropout = dropout;
    c.precision = be->precision;
    dt_gpt_be *a = gpt_be_create(&c, be), *q = gpt_be_create(&c, be);
    if (!a || !q) {
        CHECK(0, "gpt on %s: %s", be->name, dt_err_msg());
        return;
    }
    gpt_fixture f = gpt_fixture_make(be, a);
    float *ha = malloc(f.np * sizeof *ha), *hq = malloc(f.np * sizeof *hq);
    int same = 1;
    for (int s = 0; s < 4; s++) {
        const uint64_t key = rng_key(5, 0, (uint64_t)s, 0xD0);
        int64_t ca = -1, cq = -2, nq = 0;
        const double la = gpt_be_forward(a, f.p, f.tok[s % 2], f.tgt[s % 2], GPT_B, 1, key, &ca);
        gpt_be_backward(a, f.p, f.ga);
        gpt_be_train_queue(q, f.p, f.tok[s % 2], f.tgt[s % 2], GPT_B, key, f.gq);
        const double lq = gpt_be_train_result(q, &cq, &nq);
        be->to_host(ha, f.ga, f.np * sizeof *ha);
        be->to_host(hq, f.gq, f.np * sizeof *hq);
        same &= memcmp(&la, &lq, sizeof la) == 0 && ca == cq && isfinite(la) &&
                nq == (int64_t)GPT_B * c.block && memcmp(ha, hq, f.np * sizeof *ha) == 0;
    }
    CHECK(same, "gpt on %s, dropout %g: four queued steps equal forward + backward bit for bit "
          "(loss, hits, positions, gradient)", be->name, dropout);
    gpt_fixture_free(be, &f);
    free(ha);
    free(hq);
    gpt_be_free(a);
    gpt_be_free(q);
}

static void test_gpt_records(void)
{
    dt_backend be = counting(backend_cpu_devmem());
    dt_gpt_config c = gpt_cfg;
    c.dropout = 0.1f; /* its keys are read from backend memory: recorded as well */
    dt_gpt_be *m = gpt_be_create(&c, &be);
    CHECK(m && gpt_be_use_graphs(m, 1) == 1, "gpt on a backend that records: can");
    if (!m)
        return;
    gpt_fixture f = gpt_fixture_make(&be, m);
    for (int s = 0; s < 6; s++)
        gpt_be_train_queue(m, f.p, f.tok[s % 2], f.tgt[s % 2], GPT_B, (uint64_t)s, f.gq);
    CHECK(SAW(1, 5), "gpt: six steps over two batch buffers: one eager, one recorded, five "
          "launched (the batch is copied in outside the record: %d begins, %d launches)",
          g.begins, g.launches);
    gpt_be_reserve(m, GPT_B + 1); /* the arena moves */
    gpt_be_train_queue(m, f.p, f.tok[0], f.tgt[0], GPT_B, 9, f.gq);
    CHECK(SAW(1, 5), "gpt: after the arena moved, the old record runs no more: eager");
    gpt_be_train_queue(m, f.p, f.tok[0], f.tgt[0], GPT_B, 10, f.gq);
    CHECK(SAW(2, 6), "gpt: then recorded again");
    CHECK(gpt_be_recorded(m) == 1, "gpt: the new record replaced the stale one (%d held)",
          gpt_be_recorded(m));
    gpt_be_free(m);
    CHECK(g.frees == g.ends, "gpt_be_free frees its records (%d of %d)", g.frees, g.ends);
    gpt_fixture_free(&be, &f);
}

int main(void)
{
    rng = rng_make(2026, 11, 29, 0);
    const dt_backend *bes[] = { backend_cpu(), backend_cpu_dnnl(), backend_cpu_devmem() };
    for (size_t k = 0; k < sizeof bes / sizeof bes[0]; k++) {
        if (!bes[k])
            continue;
        test_equal(bes[k], "mnist_cnn", 1, 28, 8);
        test_equal(bes[k], "resnet20_gn", 3, 8, 4);
        test_equal(bes[k], "logreg", 1, 28, 8);
    }
    test_records();
    const dt_backend *gbes[] = { backend_cpu(), backend_cpu_devmem() };
    for (size_t k = 0; k < 2; k++) {
        test_gpt_equal(gbes[k], 0.0f);
        test_gpt_equal(gbes[k], 0.1f);
    }
    test_gpt_records();
    return tap_done();
}
