/* Models: parameter counts, deterministic initialization, a full gradient
 * check of every model on a tiny batch (central differences of the mean
 * loss), and agreement with PyTorch on committed reference values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/isa.h"
#include "core/rng.h"
#include "io/deck.h"
#include "models/image_nets.h"
#include "models/model.h"
#include "reference.h"
#include "tap.h"

/* The backend under test: the native one, then oneDNN's when built in (the
 * gradient checks and the PyTorch comparison run for each). */
static const dt_backend *be;

static dt_net *build(const char *name, int c, int h, int w)
{
    dt_net *n = model_build(be, name, "100", "sigmoid", 2, c, h, w, 10);
    if (!n)
        printf("# model_build(%s): %s\n", name, dt_err_msg());
    return n;
}

static void test_counts(void)
{
    struct { const char *name; int c, h, w; size_t want; } cases[] = {
        { "logreg", 1, 28, 28, 7850 },
        { "mlp", 1, 28, 28, 79510 },        /* 784*100+100 + 100*10+10 */
        { "mnist_cnn", 1, 28, 28, 1199882 },
        /* resnet20 with 1x1-conv+GN shortcuts, 3x32x32 input */
        { "resnet20_gn", 3, 32, 32, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_net *n = build(cases[i].name, cases[i].c, cases[i].h, cases[i].w);
        CHECK(n != NULL, "%s builds", cases[i].name);
        if (!n)
            continue;
        if (cases[i].want)
            CHECK(n->nparams == cases[i].want, "%s has %zu parameters (expected %zu)",
                  cases[i].name, n->nparams, cases[i].want);
        else /* ResNet-20 is ~0.27M parameters */
            CHECK(n->nparams > 260000 && n->nparams < 290000, "%s has %zu parameters",
                  cases[i].name, n->nparams);
        size_t sum = 0;
        for (int t = 0; t < n->ntensors; t++) {
            CHECK(n->tensors[t].offset == sum, "%s tensor %s is contiguous", cases[i].name,
                  n->tensors[t].name);
            sum += n->tensors[t].count;
        }
        CHECK(sum == n->nparams, "%s tensor views cover the flat vector", cases[i].name);
        /* ndim from the shape string: one dimension per comma plus one; a
         * conv tensor is one whose node is a convolution */
        int dims_ok = 1, conv_ok = 1;
        for (int t = 0; t < n->ntensors; t++) {
            const dt_tensor_view *v = &n->tensors[t];
            int commas = 0;
            for (const char *c = v->shape; *c; c++)
                commas += *c == ',';
            dims_ok &= v->ndim == commas + 1;
            conv_ok &= v->conv == (strncmp(v->name, "conv", 4) == 0);
        }
        CHECK(dims_ok, "%s: every tensor's ndim matches its shape", cases[i].name);
        CHECK(conv_ok, "%s: the conv flag marks exactly the convolutions' tensors",
              cases[i].name);
        net_free(n);
    }
    CHECK(model_build(backend_cpu(), "resnet18", "", "relu", 2, 3, 32, 32, 10) == NULL &&
              strstr(dt_err_msg(), "resnet18") != NULL,
          "unknown model name is an error naming it");
    CHECK(model_build(backend_cpu(), "mlp", "100,,10", "relu", 2, 1, 28, 28, 10) == NULL,
          "bad mlp widths are an error");
}

static void test_init(void)
{
    dt_net *n = build("mnist_cnn", 1, 28, 28);
    float *a = dt_falloc(n->nparams), *b = dt_falloc(n->nparams);
    net_init_params(n, a, 42);
    net_init_params(n, b, 42);
    CHECK(memcmp(a, b, n->nparams * sizeof *a) == 0, "same seed, same parameters");
    net_init_params(n, b, 43);
    CHECK(memcmp(a, b, n->nparams * sizeof *a) != 0, "another seed, other parameters");
    /* conv1 weights: U(-1/3, 1/3) (fan_in 9); dense 9216->128: bound 1/96 */
    const dt_tensor_view *c1 = &n->tensors[0];
    float mx = 0;
    for (size_t i = 0; i < c1->count; i++)
        mx = fmaxf(mx, fabsf(a[c1->offset + i]));
    CHECK(mx <= 1.0f / 3.0f && mx > 0.3f, "conv1 weights within the Kaiming-uniform bound 1/3 (max %g)", mx);
    free(a);
    free(b);
    net_free(n);
}

/* Central differences of the mean loss for `probes` random coordinates. */
static void gradcheck(const char *name, int c, int h, int w, int B, int probes, double tol)
{
    dt_net *n = build(name, c, h, w);
    if (!n)
        return;
    size_t np = n->nparams, in = (size_t)B * c * h * w;
    float *p = dt_falloc(np), *g = dt_falloc(np), *x = dt_falloc(in);
    int32_t *y = dt_calloc((size_t)B, sizeof *y);
    net_init_params(n, p, 7);
    dt_rng r = rng_make(11, 0, 0, 0);
    for (size_t i = 0; i < in; i++)
        x[i] = (float)rng_normal(&r);
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)rng_below(&r, 10);
    const uint64_t key = 99; /* same dropout masks in every evaluation */
    net_forward(n, p, x, y, B, 1, key, NULL);
    net_backward(n, p, g);
    double num = 0, den = 0, worst = 0;
    for (int k = 0; k < probes; k++) {
        size_t i = (size_t)rng_below(&r, np);
        float save = p[i];
        /* small enough not to cross ReLU and max-pool switch points */
        const float eps = 1e-3f * fmaxf(1.0f, fabsf(save));
        p[i] = save + eps;
        double lp = net_forward(n, p, x, y, B, 1, key, NULL);
        p[i] = save - eps;
        double lm = net_forward(n, p, x, y, B, 1, key, NULL);
        p[i] = save;
        double fd = (lp - lm) / (2.0 * eps);
        num += (fd - g[i]) * (fd - g[i]);
        den += fd * fd + (double)g[i] * g[i];
        worst = fmax(worst, fabs(fd - g[i]));
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    CHECK(rel < tol, "%s: gradient vs central differences over %d coordinates: relative error %.2e (worst abs %.2e)",
          name, probes, rel, worst);
    free(p);
    free(g);
    free(x);
    free(y);
    net_free(n);
}

/* ---- agreement with PyTorch ---------------------------------------------
 * tests/torch_reference.py loads what `test_models --dump DIR` writes (the
 * initial parameters, input batch and labels of each case below), runs the
 * same architecture in float64 PyTorch and writes the loss and, per tensor,
 * the gradient's L2 norm and first 4 entries to
 * tests/fixtures/models_reference.txt. Here the same batch goes through our
 * float32 engine and must match; the C test itself needs no PyTorch. */

#define REF_B 4                  /* batch of every case */
#define REF_PARAM_SEED 1234      /* net_init_params seed */
#define REF_DATA_SEED 4321       /* rng_make(REF_DATA_SEED, case index, 0, 0) */

static const struct ref_case { const char *name; int c, h, w; } ref_cases[] = {
    { "logreg", 1, 28, 28 },     /* the mlp is "100" sigmoid, resnet gn_groups 2: see build() */
    { "mlp", 1, 28, 28 },
    { "mnist_cnn", 1, 28, 28 },
    { "resnet20_gn", 3, 32, 32 },
};
#define REF_NCASES (sizeof ref_cases / sizeof ref_cases[0])

typedef struct ref_batch {
    dt_net *net;
    float *params;   // (nparams)
    float *x;        // (B, C, H, W)
    int32_t y[REF_B];
} ref_batch;

/* The deterministic parameters and batch of case m; NULL net if it does not build. */
static ref_batch ref_batch_make(size_t m)
{
    const struct ref_case *rc = &ref_cases[m];
    ref_batch rb = { .net = build(rc->name, rc->c, rc->h, rc->w) };
    if (!rb.net)
        return rb;
    size_t in = (size_t)REF_B * rc->c * rc->h * rc->w;
    rb.params = dt_falloc(rb.net->nparams);
    rb.x = dt_falloc(in);
    net_init_params(rb.net, rb.params, REF_PARAM_SEED);
    dt_rng r = rng_make(REF_DATA_SEED, (uint64_t)m, 0, 0);
    for (size_t i = 0; i < in; i++)
        rb.x[i] = (float)rng_normal(&r);
    for (int i = 0; i < REF_B; i++)
        rb.y[i] = (int32_t)rng_below(&r, 10);
    return rb;
}

static void ref_batch_free(ref_batch *rb)
{
    free(rb->params);
    free(rb->x);
    net_free(rb->net);
}

static int ref_dump(const char *dir)
{
    for (size_t m = 0; m < REF_NCASES; m++) {
        const struct ref_case *rc = &ref_cases[m];
        ref_batch rb = ref_batch_make(m);
        if (!rb.net)
            return 1;
        size_t in = (size_t)REF_B * rc->c * rc->h * rc->w;
        int err = ref_write_le32("test_models", dir, rc->name, "params.f32", rb.params,
                                 rb.net->nparams);
        err |= ref_write_le32("test_models", dir, rc->name, "x.f32", rb.x, in);
        err |= ref_write_le32("test_models", dir, rc->name, "y.i32", rb.y, REF_B);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.tensors.txt", dir, rc->name);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "test_models --dump: cannot create %s\n", path);
            err = -1;
        } else {
            for (int t = 0; t < rb.net->ntensors; t++) {
                const dt_tensor_view *v = &rb.net->tensors[t];
                fprintf(f, "%s %zu %zu %s\n", v->name, v->offset, v->count, v->shape);
            }
            if (fclose(f) != 0) {
                fprintf(stderr, "test_models --dump: write to %s failed\n", path);
                err = -1;
            }
        }
        if (!err)
            printf("%s: %zu parameters in %d tensors, input (%d, %d, %d, %d)\n", rc->name,
                   rb.net->nparams, rb.net->ntensors, REF_B, rc->c, rc->h, rc->w);
        ref_batch_free(&rb);
        if (err)
            return 1;
    }
    return 0;
}

static void ref_compare(size_t m, const ref_model *want)
{
    const char *name = ref_cases[m].name;
    ref_batch rb = ref_batch_make(m);
    if (!rb.net) {
        CHECK(0, "%s builds for the PyTorch comparison", name);
        return;
    }
    dt_net *n = rb.net;
    float *g = dt_falloc(n->nparams);
    n->no_dropout = 1; /* the reference ran PyTorch with dropout off */
    double loss = net_forward(n, rb.params, rb.x, rb.y, REF_B, 1, 0, NULL);
    net_backward(n, rb.params, g);
    CHECK_CLOSE(loss, want->loss, 0.0, 1e-5, "%s: loss %.9g matches PyTorch's %.9g (rel 1e-5)",
                name, loss, want->loss);

    /* the leading entries within 1e-5 + 1e-3 |want|, the norms within 1e-3 */
    ref_check_grads(name, g, n->tensors, n->ntensors, want, 1e-3, 1e-5, 1e-3);
    free(g);
    ref_batch_free(&rb);
}

static const char *ref_case_name(size_t m) { return ref_cases[m].name; }

static void test_torch_reference(const char *argv0)
{
    ref_check_fixture(argv0, "tests/fixtures/models_reference.txt", REF_NCASES, ref_case_name,
                      ref_compare);
}

/* The deck's model.name choices (which --help lists) are exactly the names
 * the model kinds build: the image networks' and the GPT's. */
static void test_deck_names(void)
{
    const char *const *kinds[] = { model_names, gpt_model_names };
    char built[512] = "";
    for (int k = 0; k < 2; k++)
        for (int i = 0; kinds[k][i]; i++)
            snprintf(built + strlen(built), sizeof built - strlen(built), "%s%s",
                     built[0] ? "|" : "", kinds[k][i]);
    const char *deck = deck_choices("model", "name");
    CHECK(strcmp(deck, built) == 0, "model.name's choices '%s' are the models built: '%s'", deck,
          built);
}

int main(int argc, char **argv)
{
    if (isa_setup_test(argv) != 0) /* DTRAIN_MAX_CPU_ISA handed to oneDNN and OpenBLAS */
        return 1;
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) {
        be = backend_cpu(); /* the parameters and batch do not depend on it */
        return ref_dump(argv[2]);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--dump DIR]\n", argv[0]);
        return 2;
    }
    const dt_backend *backends[2] = { backend_cpu(), backend_cpu_dnnl() };
    for (int k = 0; k < 2; k++) {
        be = backends[k];
        if (!be) {
            printf("# backend dnnl: not built (no oneDNN), its model checks skipped\n");
            continue;
        }
        printf("# backend %s\n", be->name);
        if (k == 0) {
            test_deck_names();
            test_counts();
            test_init();
        }
        gradcheck("logreg", 1, 6, 5, 3, 200, 1e-2);
        gradcheck("mlp", 1, 7, 7, 3, 200, 1e-2);
        gradcheck("mnist_cnn", 1, 10, 9, 2, 200, 2e-2);
        gradcheck("resnet20_gn", 3, 8, 8, 2, 200, 2e-2);
        test_torch_reference(argv[0]);
    }
    return tap_done();
}
