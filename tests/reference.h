/* The PyTorch reference fixtures (tests/fixtures/NAME_reference.txt) that
 * test_models and test_gpt hold the models to, and the raw dumps their
 * --dump option writes for the scripts that make those fixtures.
 *
 * A fixture is lines of
 *   model NAME loss X
 *   logits l2 X first A B C D          (optional, after its model line)
 *   grad TENSOR l2 X first A B C D     (one per tensor, in the model's order)
 * with '#' comments and blank lines between them. The comparison of a
 * model's loss, logits and gradients with those values is shared here too. */
#ifndef DT_TESTS_REFERENCE_H
#define DT_TESTS_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_view.h"
#include "tap.h"

#define REF_FIRST 4 /* leading entries of each tensor in the fixture */

typedef struct ref_vals {
    char name[40];
    double norm, first[REF_FIRST];
} ref_vals;

typedef struct ref_model {
    char name[32];
    double loss;
    int has_logits;
    ref_vals logits;
    int ngrads;
    ref_vals *grads;
} ref_model;

/* The fixture rel (e.g. "tests/fixtures/gpt_reference.txt"): first under
 * $top_srcdir (exported by `make check`), then beside the binary's directory,
 * then relative to the working directory; path gets the last name tried. */
static inline FILE *ref_open(const char *argv0, const char *rel, char *path, size_t len)
{
    const char *top = getenv("top_srcdir");
    if (top && *top) {
        snprintf(path, len, "%s/%s", top, rel);
        FILE *f = fopen(path, "r");
        if (f)
            return f;
    }
    const char *slash = strrchr(argv0, '/');
    if (slash) {
        snprintf(path, len, "%.*s/../%s", (int)(slash - argv0), argv0, rel);
        FILE *f = fopen(path, "r");
        if (f)
            return f;
    }
    snprintf(path, len, "%s", rel);
    return fopen(path, "r");
}

static inline void ref_models_free(ref_model *models, int nm)
{
    for (int i = 0; i < nm; i++)
        free(models[i].grads);
    free(models);
}

static inline void ref_vals_set(ref_vals *v, const char *name, const double g[1 + REF_FIRST])
{
    snprintf(v->name, sizeof v->name, "%s", name);
    v->norm = g[0];
    memcpy(v->first, g + 1, sizeof v->first);
}

/* Returns the number of models, or -1 with a message naming the file and line. */
static inline int ref_parse(FILE *f, const char *path, ref_model **out)
{
    ref_model *models = NULL;
    int nm = 0;
    char line[1024];
    long lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char name[64];
        double loss, g[1 + REF_FIRST];
        if (sscanf(line, "model %63s loss %lf", name, &loss) == 2 && strlen(name) < 32) {
            models = dt_realloc(models, (size_t)(nm + 1) * sizeof *models);
            models[nm] = (ref_model){ .loss = loss };
            snprintf(models[nm].name, sizeof models[nm].name, "%s", name);
            nm++;
        } else if (nm > 0 && sscanf(line, "logits l2 %lf first %lf %lf %lf %lf", &g[0], &g[1],
                                    &g[2], &g[3], &g[4]) == 1 + REF_FIRST) {
            ref_vals_set(&models[nm - 1].logits, "logits", g);
            models[nm - 1].has_logits = 1;
        } else if (nm > 0 &&
                   sscanf(line, "grad %63s l2 %lf first %lf %lf %lf %lf", name, &g[0], &g[1], &g[2],
                          &g[3], &g[4]) == 2 + REF_FIRST && strlen(name) < 40) {
            ref_model *md = &models[nm - 1];
            md->grads = dt_realloc(md->grads, (size_t)(md->ngrads + 1) * sizeof *md->grads);
            ref_vals_set(&md->grads[md->ngrads++], name, g);
        } else {
            printf("# %s:%ld: expected 'model NAME loss X', 'logits l2 X first A B C D' or "
                   "'grad NAME l2 X first A B C D'\n", path, lineno);
            ref_models_free(models, nm);
            return -1;
        }
    }
    *out = models;
    return nm;
}

/* n raw little-endian 32-bit words into dir/name.ext, whatever the host's
 * byte order, so the dump reads the same in numpy's '<f4' / '<i4'; prog
 * names the program in the messages. */
static inline int ref_write_le32(const char *prog, const char *dir, const char *name,
                                 const char *ext, const void *words, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "%s --dump: cannot create %s\n", prog, path);
        return -1;
    }
    const unsigned char *src = words;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        uint32_t u;
        unsigned char buf[4];
        memcpy(&u, src + 4 * i, 4);
        for (int k = 0; k < 4; k++)
            buf[k] = (unsigned char)(u >> (8 * k));
        ok = fwrite(buf, 1, 4, f) == 4;
    }
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        fprintf(stderr, "%s --dump: write to %s failed\n", prog, path);
    return ok ? 0 : -1;
}

/* x (n) against a fixture line: *norm_err the relative error of the L2 norm
 * (norms below 1e-6 compared absolutely: float32 rounding of a nearly
 * cancelled sum is not a bug), *first_err the worst of the leading entries in
 * units of the allowed error abs + rel |want|. NaN counts as infinitely bad. */
static inline void ref_diff(const float *x, size_t n, const ref_vals *want, double abs, double rel,
                            double *norm_err, double *first_err)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double e = fabs(sqrt(ss) - want->norm) / fmax(want->norm, 1e-6);
    *norm_err = isnan(e) ? INFINITY : e;
    double worst = 0;
    for (size_t i = 0; i < REF_FIRST && i < n; i++) {
        double d = fabs(x[i] - want->first[i]) / (abs + rel * fabs(want->first[i]));
        worst = fmax(worst, isnan(d) ? INFINITY : d);
    }
    *first_err = worst;
}

/* The gradient g of a model with tensors tv (nt) against the fixture's: the
 * same tensors in the same order, every norm within norm_limit (relative),
 * every leading entry within abs + rel |want|. Two TAP checks. */
static inline void ref_check_grads(const char *name, const float *g, const dt_tensor_view *tv,
                                   int nt, const ref_model *want, double norm_limit, double abs,
                                   double rel)
{
    int same = want->ngrads == nt;
    for (int t = 0; same && t < nt; t++)
        same = strcmp(want->grads[t].name, tv[t].name) == 0;
    CHECK(same, "%s: the fixture lists the same %d tensors in the same order (it has %d)", name,
          nt, want->ngrads);
    if (!same)
        return;
    double worst_norm = 0, worst_first = 0, ne, fe;
    int bn = 0, bf = 0;
    for (int t = 0; t < nt; t++) {
        ref_diff(g + tv[t].offset, tv[t].count, &want->grads[t], abs, rel, &ne, &fe);
        if (ne > worst_norm) {
            worst_norm = ne;
            bn = t;
        }
        if (fe > worst_first) {
            worst_first = fe;
            bf = t;
        }
    }
    CHECK(worst_norm <= norm_limit,
          "%s: gradient L2 norms of all %d tensors match PyTorch (worst rel err %.2e in %s, "
          "limit %.0e)", name, nt, worst_norm, tv[bn].name, norm_limit);
    CHECK(worst_first <= 1.0,
          "%s: first %d gradient entries of every tensor match PyTorch (worst %.2g of the "
          "allowed %.0e + %.0e rel, in %s)", name, REF_FIRST, worst_first, abs, rel, tv[bf].name);
}

/* Reads the fixture rel and calls compare(k, its values) for each of the
 * ncases cases that name(k) names; a case without values fails. */
static inline void ref_check_fixture(const char *argv0, const char *rel, size_t ncases,
                                     const char *(*name)(size_t k),
                                     void (*compare)(size_t k, const ref_model *want))
{
    char path[4096];
    FILE *f = ref_open(argv0, rel, path, sizeof path);
    CHECK(f != NULL, "PyTorch reference fixture %s (%s)", f ? "found" : "not found, set top_srcdir",
          path);
    if (!f)
        return;
    ref_model *models = NULL;
    int nm = ref_parse(f, path, &models);
    fclose(f);
    CHECK(nm >= 0, "%s parses", path);
    for (size_t k = 0; k < ncases && nm >= 0; k++) {
        const ref_model *want = NULL;
        for (int i = 0; i < nm; i++)
            if (strcmp(models[i].name, name(k)) == 0)
                want = &models[i];
        if (want)
            compare(k, want);
        else
            CHECK(0, "%s has reference values for %s", path, name(k));
    }
    ref_models_free(models, nm);
}

#endif
