/* The PyTorch reference fixtures (tests/fixtures/*_reference.txt) that
 * test_models and test_gpt hold the models to, and the raw dumps their
 * --dump option writes for the scripts that make those fixtures.
 *
 * A fixture is lines of
 *   model NAME loss X
 *   logits l2 X first A B C D          (optional, after its model line)
 *   grad TENSOR l2 X first A B C D     (one per tensor, in the model's order)
 * with '#' comments and blank lines between them. */
#ifndef DT_TESTS_REFERENCE_H
#define DT_TESTS_REFERENCE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

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

#endif
