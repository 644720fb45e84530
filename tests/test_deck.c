/* Deck parsing and validation (io/deck_*.c): defaults, required keys, unknown
 * and duplicate keys, every kind of bad value, command-line overrides, the
 * effective deck round trip, deck_load under MPI and inputs/reference.ini
 * against the schema. Every error message must name the file, the line and
 * the key (or the command-line argument).
 *
 * Usage: test_deck [path/to/reference.ini]; with top_srcdir set in the
 * environment, $top_srcdir/inputs/reference.ini is used. Works as a
 * singleton MPI process or under mpiexec -n N. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ini.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "core/error.h"
#include "io/deck.h"
#include "tap.h"

static char tmpdir[64];
static char *made[64];
static int nmade;

/* Writes text to tmpdir/name; the path stays valid until cleanup. */
static const char *deck_write(const char *name, const char *text)
{
    char *path = malloc(strlen(tmpdir) + strlen(name) + 2);
    sprintf(path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", path);
        exit(1);
    }
    for (int i = 0; i < nmade; i++)
        if (strcmp(made[i], path) == 0) {
            free(path);
            return made[i];
        }
    if (nmade == 64) {
        printf("Bail out! too many deck files\n");
        exit(1);
    }
    made[nmade++] = path;
    return path;
}

static char *str_printf(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        exit(1);
    va_end(ap);
    return s;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The four required keys, as a deck would give them. */
static const char *const req[][3] = {
    {"run", "output_dir", "/tmp/dt-out"},
    {"model", "name", "mlp"},
    {"optim", "lr", "0.1"},
    {"optim", "batch_size", "32"},
};
static char *const req_overrides[] = {"run.output_dir=/tmp/dt-out", "model.name=mlp",
                                      "optim.lr=0.1", "optim.batch_size=32"};

/* A valid deck with the required keys, then `sec.key = value` at the end (the
 * required line for that key left out); *line gets its line number. */
static char *deck_with(const char *sec, const char *key, const char *value, int *line)
{
    char *s = str_printf("; test deck\n");
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        if (strcmp(req[i][0], sec) == 0 && strcmp(req[i][1], key) == 0)
            continue;
        char *t = str_printf("%s[%s]\n%s = %s\n", s, req[i][0], req[i][1], req[i][2]);
        free(s);
        s = t;
    }
    char *t = str_printf("%s\n; the key under test\n[%s]\n", s, sec);
    *line = count_lines(t) + 1;
    char *u = str_printf("%s%s = %s\n", t, key, value);
    free(s);
    free(t);
    return u;
}

/* Parses text written to file `name`, expects failure, and checks the
 * message holds "FILE:LINE: " (line > 0) or "FILE: " and every needle. */
static void expect_fail(const char *label, const char *name, const char *text, int line,
                        const char *const *needles, int nneedles)
{
    const char *path = deck_write(name, text);
    dt_config cfg, before;
    memset(&cfg, 0x5a, sizeof cfg);
    before = cfg;
    char *eff = (char *)"untouched";
    dt_err_clear();
    int rc = deck_parse(path, 0, NULL, &cfg, &eff);
    const char *msg = dt_err_msg();
    CHECK(rc == -1, "%s: rejected", label);
    CHECK(eff == NULL, "%s: no effective deck on error", label);
    CHECK(memcmp(&cfg, &before, sizeof cfg) == 0, "%s: cfg untouched on error", label);
    char *where = line > 0 ? str_printf("%s:%d: ", path, line) : str_printf("%s: ", path);
    CHECK(strstr(msg, where) != NULL, "%s: message names '%s'", label, where);
    for (int i = 0; i < nneedles; i++)
        CHECK(strstr(msg, needles[i]) != NULL, "%s: message has '%s'", label, needles[i]);
    printf("#   %s\n", msg);
    free(where);
}

static void expect_fail1(const char *label, const char *name, const char *text, int line,
                         const char *needle)
{
    const char *const n[1] = {needle};
    expect_fail(label, name, text, line, n, needle ? 1 : 0);
}

static void test_defaults(void)
{
    const char *text = "[run]\noutput_dir = /tmp/dt-out\n[model]\nname = mlp\n"
                       "[optim]\nlr = 0.1\nbatch_size = 32\n";
    const char *path = deck_write("minimal.ini", text);
    dt_config c;
    char *eff = NULL;
    int rc = deck_parse(path, 0, NULL, &c, &eff);
    CHECK(rc == 0, "minimal deck parses (%s)", rc ? dt_err_msg() : "ok");
    if (rc)
        return;
    CHECK(strcmp(c.run.output_dir, "/tmp/dt-out") == 0, "run.output_dir from the deck");
    CHECK(strcmp(c.model.name, "mlp") == 0, "model.name from the deck");
    CHECK(c.optim.lr == 0.1, "optim.lr = 0.1 exactly");
    CHECK(c.optim.batch_size == 32, "optim.batch_size = 32");
    CHECK(c.run.seed == 1 && c.run.epochs == 1 && c.run.max_steps == 0 && c.run.eval_every == 0,
          "run seed/epochs/max_steps/eval_every defaults 1/1/0/0");
    CHECK(c.run.log_every == 50 && c.run.checkpoint_every == 0 && c.run.checkpoint_keep == 2,
          "run log_every/checkpoint_every/checkpoint_keep defaults 50/0/2");
    CHECK(!c.run.resume && !c.run.overwrite, "run.resume, run.overwrite default false");
    CHECK(strcmp(c.algorithm.mode, "local") == 0, "algorithm.mode default local");
    CHECK(strcmp(c.model.hidden, "100") == 0 && strcmp(c.model.activation, "sigmoid") == 0 &&
              c.model.gn_groups == 2,
          "model hidden/activation/gn_groups defaults 100/sigmoid/2");
    CHECK(strcmp(c.data.name, "fashion-mnist") == 0 &&
              strcmp(c.data.path, "/usr/share/datasets/fashion-mnist") == 0 &&
              strcmp(c.data.partition, "iid") == 0,
          "data name/path/partition defaults");
    CHECK(c.data.samples_per_epoch == 0 && c.data.test_limit == 0 && c.data.skew_classes == 8 &&
              c.data.skew_shift == 4 && c.data.block_count == 1200 && c.data.block_size == 50,
          "data sizes defaults 0/0/8/4/1200/50");
    CHECK(c.data.synthetic_train == 4096 && c.data.synthetic_test == 1024 &&
              c.data.synthetic_classes == 10 && c.data.synthetic_channels == 1 &&
              c.data.synthetic_height == 8 && c.data.synthetic_width == 8 &&
              c.data.synthetic_noise == 1.0,
          "synthetic defaults 4096/1024/10/1/8/8/1.0");
    CHECK(c.optim.momentum == 0.9 && !c.optim.nesterov && c.optim.weight_decay == 0 &&
              !c.optim.lr_scaling && c.optim.warmup_epochs == 0 &&
              strcmp(c.optim.decay_epochs, "") == 0 && c.optim.decay_factor == 0.1,
          "optim defaults 0.9/false/0/false/0/\"\"/0.1");
    CHECK(strcmp(c.compute.device, "cpu") == 0 && c.compute.threads == 1,
          "compute defaults cpu/1");
    CHECK(eff && strstr(eff, "\n[optim]\n") && strstr(eff, "\nmomentum = 0.9\n"),
          "effective deck holds defaults");
    free(eff);

    /* accepted spellings, stored canonically */
    const char *text2 = "[run]\noutput_dir = /tmp/o\nresume = YES\noverwrite = on\n"
                        "seed = 18446744073709551615\n"
                        "[model]\nname = MLP\nhidden = 256 , 128,10\n"
                        "  activation = relu\n"
                        "[optim]\n  lr = 1e-3 ; inline comment\n    batch_size = 4\n"
                        "nesterov = 1\nlr_scaling = True\ndecay_epochs = 30, 60,80\n"
                        "decay_factor = 1\nmomentum = 0\n"
                        "# hash comment\n"
                        "[compute]\nthreads = +3\n";
    path = deck_write("spellings.ini", text2);
    rc = deck_parse(path, 0, NULL, &c, NULL);
    CHECK(rc == 0, "alternative spellings parse (%s)", rc ? dt_err_msg() : "ok");
    if (rc)
        return;
    CHECK(c.run.resume && c.run.overwrite && c.optim.nesterov && c.optim.lr_scaling,
          "YES, on, 1, True are true");
    CHECK(c.run.seed == UINT64_MAX, "seed 2^64-1 accepted");
    CHECK(strcmp(c.model.name, "mlp") == 0, "enum stored in canonical case ('%s')", c.model.name);
    CHECK(strcmp(c.model.hidden, "256,128,10") == 0, "hidden list canonical ('%s')",
          c.model.hidden);
    CHECK(strcmp(c.model.activation, "relu") == 0,
          "indented line after a key is a key, not a continuation");
    CHECK(c.optim.lr == 1e-3 && c.optim.batch_size == 4, "inline comment stripped, lr 1e-3");
    CHECK(strcmp(c.optim.decay_epochs, "30,60,80") == 0, "decay list canonical ('%s')",
          c.optim.decay_epochs);
    CHECK(c.optim.decay_factor == 1.0 && c.optim.momentum == 0.0, "closed bounds accepted");
    CHECK(c.compute.threads == 3, "+3 is 3");
}

static void test_required(void)
{
    const char *needles[] = {"missing required key 'optim.lr'", "learning rate"};
    expect_fail("missing optim.lr", "nolr.ini",
                "[run]\noutput_dir = /o\n[model]\nname = mlp\n[optim]\nbatch_size = 2\n", 0,
                needles, 2);
    expect_fail1("missing model.name", "noname.ini",
                 "[run]\noutput_dir = /o\n[optim]\nlr = 1\nbatch_size = 2\n", 0,
                 "missing required key 'model.name'");
    const char *n2[] = {"missing required key 'run.output_dir'", "other required keys"};
    expect_fail("empty deck", "empty.ini", "", 0, n2, 2);

    /* a required key may come from the command line alone */
    const char *path = deck_write("empty.ini", "; nothing\n");
    dt_config c;
    int rc = deck_parse(path, 4, req_overrides, &c, NULL);
    CHECK(rc == 0 && c.optim.batch_size == 32 && strcmp(c.model.name, "mlp") == 0,
          "required keys given only as overrides (%s)", rc ? dt_err_msg() : "ok");
}

static void test_unknown(void)
{
    int line;
    char *t = deck_with("optim", "lrr", "0.1", &line);
    const char *n1[] = {"optim.lrr", "unknown key 'lrr'", "did you mean 'optim.lr'?"};
    expect_fail("unknown key", "lrr.ini", t, line, n1, 3);
    free(t);

    t = deck_with("optm", "lr", "0.1", &line);
    const char *n2[] = {"optm.lr", "unknown section [optm]", "did you mean 'optim.lr'?"};
    expect_fail("typo in section", "optm.ini", t, line, n2, 3);
    free(t);

    t = deck_with("run", "batch_size", "8", &line);
    expect_fail1("key in the wrong section", "wrongsec.ini", t, line,
                 "did you mean 'optim.batch_size'?");
    free(t);

    t = deck_with("optim", "zzzzzz", "1", &line);
    expect_fail1("unknown key, no suggestion", "zzz.ini", t, line,
                 "the keys of [optim] are name, lr, batch_size, momentum");
    free(t);

    t = deck_with("zzzzzz", "qqqqq", "1", &line);
    expect_fail1("unknown section, no suggestion", "zzzsec.ini", t, line,
                 "the sections are [run], [algorithm], [model], [data], [optim], [ps], [lsgd], [easgd], [ecl], [compute]");
    free(t);

    expect_fail1("key before any section", "nosec.ini", "; c\nlr = 0.1\n", 2,
                 "'lr' appears before any [section] header; did you mean 'optim.lr'?");
}

static void test_bad_values(void)
{
    static const char *const cases[][4] = {
        {"optim", "lr", "-1", "expected a number > 0"},
        {"optim", "lr", "0", "expected a number > 0"},
        {"optim", "lr", "abc", "expected a number > 0"},
        {"optim", "lr", "1.5x", "expected a number > 0"},
        {"optim", "lr", "", "expected a number > 0"},
        {"optim", "lr", "inf", "expected a number > 0"},
        {"optim", "lr", "nan", "expected a number > 0"},
        {"optim", "lr", "1e999", "out of range"},
        {"optim", "lr", "1e-400", "out of range"},
        {"optim", "lr", "-1e999", "out of range"},
        /* an exact denormal reads in, but its decimal form in the effective
         * deck would not read back */
        {"optim", "lr", "0x1p-1074", "out of range"},
        {"optim", "weight_decay", "0x1.8p-1060", "out of range"},
        {"optim", "lr", "0.1 0.2", "expected a number > 0"},
        {"optim", "batch_size", "0", "expected an integer in [1, 2147483647]"},
        {"optim", "batch_size", "2.5", "expected an integer"},
        {"optim", "batch_size", "3000000000", "expected an integer in [1, 2147483647]"},
        {"run", "epochs", "99999999999999999999", "out of range"},
        {"run", "epochs", "0", "expected an integer >= 1"},
        {"run", "max_steps", "-5", "expected an integer >= 0"},
        {"run", "seed", "-1", "expected an integer in [0, 18446744073709551615]"},
        {"run", "seed", "18446744073709551616", "out of range"},
        {"optim", "momentum", "1.0", "expected a number in [0, 1)"},
        {"optim", "momentum", "-0.1", "expected a number in [0, 1)"},
        {"optim", "decay_factor", "0", "expected a number in (0, 1]"},
        {"optim", "weight_decay", "-1e-4", "expected a number >= 0"},
        {"optim", "nesterov", "maybe", "expected true or false"},
        {"run", "resume", "2", "expected true or false"},
        {"model", "name", "foo", "one of logreg, mlp, mnist_cnn, resnet20_gn, resnet32_gn"},
        {"model", "name", "mpl", "did you mean 'mlp'?"},
        {"data", "partition", "skew", "one of iid, class-skew, blocks"},
        {"model", "hidden", "100,,10", "item 2 is empty"},
        {"model", "hidden", "100,0", "item 2 (0) is not in [1, 2147483647]"},
        {"model", "hidden", "100,", "item 2 is empty"},
        {"model", "hidden", "ten", "item 1 ('ten') is not an integer"},
        {"model", "hidden", "", "the list is empty"},
        {"optim", "decay_epochs", "30,20", "item 2 (20) is not larger than the one before (30)"},
        {"optim", "decay_epochs", "30,30", "not larger"},
        {"optim", "decay_epochs", "-1", "item 1 ('-1') is not a number >= 0"},
        {"optim", "decay_epochs", "0.5,x", "item 2 ('x') is not a number >= 0"},
        {"optim", "decay_epochs", "0x1.8p-1070", "item 1 ('0x1.8p-1070') is not a number >= 0"},
        {"optim", "decay_epochs", "0,", "item 2 is empty"},
        {"optim", "decay_epochs", "0.5,0.25", "item 2 (0.25) is not larger than the one before (0.5)"},
        {"optim", "decay_epochs",
         "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,"
         "32,33",
         "more than 32 items"},
        {"compute", "device", "gpu", "expected one of cpu, cuda"},
        {"comm", "transport", "ncc", "did you mean 'nccl'"},
        {"data", "synthetic_classes", "1", "expected an integer in [2, 2147483647]"},
        {"data", "synthetic_noise", "-1", "expected a number >= 0"},
        {"run", "output_dir", "", "expected a non-empty path"},
        /* the language-model and AdamW keys */
        {"model", "n_layer", "0", "expected an integer in [1, 2147483647]"},
        {"model", "n_head", "0", "expected an integer in [1, 2147483647]"},
        {"model", "n_embd", "-128", "expected an integer in [1, 2147483647]"},
        {"model", "block_size", "0", "expected an integer in [1, 2147483647]"},
        {"model", "vocab_size", "-1", "expected an integer in [0, 2147483647]"},
        {"model", "dropout", "1", "expected a number in [0, 1)"},
        {"model", "dropout", "-0.1", "expected a number in [0, 1)"},
        {"model", "name", "gtp", "did you mean 'gpt'?"},
        {"data", "name", "txt", "one of fashion-mnist, mnist, cifar10, synthetic, text, tokens"},
        {"optim", "name", "adam", "expected one of sgd, adamw, muon; did you mean 'adamw'?"},
        {"optim", "beta1", "1", "expected a number in [0, 1)"},
        {"optim", "beta2", "-0.5", "expected a number in [0, 1)"},
        {"optim", "eps", "0", "expected a number > 0"},
        {"optim", "clip_norm", "-1", "expected a number >= 0"},
        {"optim", "warmup_steps", "-1", "expected an integer >= 0"},
        {"optim", "schedule", "linear", "expected one of step, cosine"},
        {"optim", "min_lr", "-1e-4", "expected a number >= 0"},
        {"optim", "decay_steps", "1.5", "expected an integer >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int line;
        char *t = deck_with(cases[i][0], cases[i][1], cases[i][2], &line);
        char *label = str_printf("%s.%s = '%s'", cases[i][0], cases[i][1], cases[i][2]);
        char *key = str_printf("%s.%s = %s", cases[i][0], cases[i][1],
                               *cases[i][2] ? cases[i][2] : "''");
        const char *needles[] = {key, cases[i][3]};
        expect_fail(label, "bad.ini", t, line, needles, 2);
        free(label);
        free(key);
        free(t);
    }

    /* inih reads at most INI_MAX_LINE - 2 characters of a line, and the
     * effective deck writes "output_dir = value": 185 characters of path fit
     * (with INI_MAX_LINE 200); "output_dir=value" must not sneak in more */
    int line;
    char big[400];
    memset(big, 'a', sizeof big - 1);
    big[0] = '/';
    int vmax = INI_MAX_LINE - 2 - (int)strlen("output_dir = ");
    big[vmax + 2] = '\0';
    char *t = str_printf("[run]\noutput_dir=%s\n", big);
    char *needle = str_printf("too long (%d characters; at most %d fit", vmax + 2, vmax);
    expect_fail1("value too long for the effective deck", "long.ini", t, 2, needle);
    free(needle);
    free(t);
    {
        char *ov = str_printf("run.output_dir=%s", big);
        dt_config c;
        dt_err_clear();
        int rc = deck_parse_string("x", "", 1, &ov, &c, NULL);
        CHECK(rc == -1 && strstr(dt_err_msg(), "command-line argument 1 ('run.output_dir=/aaa") &&
                  strstr(dt_err_msg(), "too long"),
              "over-long override refused: %.120s", dt_err_msg());
        free(ov);
        /* the longest accepted path survives the effective-deck round trip */
        big[vmax] = '\0';
        char *const ovs[] = {req_overrides[1], req_overrides[2], req_overrides[3],
                             str_printf("run.output_dir=%s", big)};
        char *eff = NULL;
        dt_config d;
        rc = deck_parse_string("x", "", 4, ovs, &c, &eff);
        CHECK(rc == 0, "a %d-character path is accepted (%s)", vmax, rc ? dt_err_msg() : "ok");
        if (rc == 0) {
            rc = deck_parse_string("eff", eff, 0, NULL, &d, NULL);
            CHECK(rc == 0 && memcmp(&c, &d, sizeof c) == 0 &&
                      strlen(d.run.output_dir) == (size_t)vmax,
                  "the %d-character path round-trips (%s)", vmax, rc ? dt_err_msg() : "ok");
        }
        free(eff);
        free(ovs[3]);
        big[vmax] = 'a';
    }
    big[vmax + 2] = 'a';
    big[sizeof big - 1] = '\0';
    t = deck_with("run", "output_dir", big, &line);
    expect_fail1("line longer than inih's buffer", "longer.ini", t, line,
                 "run.output_dir: line is 412 characters long; at most");
    free(t);
    /* a long comment is harmless */
    char *ok = str_printf("; %s\n[run]\noutput_dir = /o\n[model]\nname = mlp\n[optim]\nlr = 1\n"
                          "batch_size = 1\n", big);
    dt_config c;
    int rc = deck_parse(deck_write("longcomment.ini", ok), 0, NULL, &c, NULL);
    CHECK(rc == 0, "a comment longer than a line buffer is skipped (%s)",
          rc ? dt_err_msg() : "ok");
    free(ok);
}

/* Rules between keys (io/deck_check.c): each refusal names the keys and what
 * was expected; keys that do not apply are ignored with a note (job API). */
static void test_cross_keys(void)
{
    static const char *const bad[][2] = {
        {"[optim]\nname = adamw\n[algorithm]\nmode = pdmm-isvr\n",
         "optim.name = adamw with algorithm.mode = pdmm-isvr: the edge-consensus modes take "
         "their own ISVR step"},
        {"[optim]\nname = adamw\n[algorithm]\nmode = admm-isvr\n",
         "algorithm.mode = admm-isvr"},
        {"[model]\nn_embd = 130\nn_head = 4\n[data]\nname = text\n",
         "model.n_embd = 130, model.n_head = 4: expected n_embd divisible by n_head"},
        {"[data]\nname = synthetic\n", "model.name = gpt with data.name = synthetic: expected "
         "data.name = text or tokens"},
        {"[data]\nname = tokens\npath = /t/train.bin\n",
         "data.name = tokens: missing data.val_path"},
        {"[data]\nname = text\n[optim]\nschedule = cosine\nwarmup_steps = 100\n"
         "decay_steps = 100\n", "optim.decay_steps = 100: expected 0 (the run's total steps) "
         "or more than optim.warmup_steps = 100"},
        {"[data]\nname = text\n[optim]\nschedule = cosine\nmin_lr = 2\n",
         "optim.min_lr = 2: expected a number <= optim.lr = 1"},
    };
    const char *base = "[run]\noutput_dir = /o\n[optim]\nlr = 1\nbatch_size = 4\n";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* model.name = gpt unless the case is about data for another model */
        char *t = str_printf("%s[model]\nname = gpt\n%s", base, bad[i][0]);
        /* sections may repeat in inih: keys of a second [model] join the first */
        char *label = str_printf("cross-key case %zu", i + 1);
        expect_fail1(label, "cross.ini", t, 0, bad[i][1]);
        free(label);
        free(t);
    }
    /* text data needs the language model */
    expect_fail1("text data with mlp", "cross.ini",
                 "[run]\noutput_dir = /o\n[optim]\nlr = 1\nbatch_size = 4\n[model]\nname = mlp\n"
                 "[data]\nname = text\n", 0,
                 "data.name = text with model.name = mlp: expected model.name = gpt");

    /* a good language-model deck: the defaults of the new keys */
    const char *gpt = "[run]\noutput_dir = /o\n[model]\nname = gpt\n[data]\nname = text\n"
                      "path = /usr/share/games/fortunes\n[optim]\nname = adamw\nlr = 1e-3\n"
                      "batch_size = 12\nschedule = cosine\nmin_lr = 1e-4\nwarmup_steps = 100\n";
    dt_config c;
    int rc = deck_parse_string("gpt.ini", gpt, 0, NULL, &c, NULL);
    CHECK(rc == 0, "a gpt + adamw + cosine deck parses (%s)", rc ? dt_err_msg() : "ok");
    if (rc == 0)
        CHECK(c.model.n_layer == 4 && c.model.n_head == 4 && c.model.n_embd == 128 &&
                  c.model.block_size == 64 && c.model.vocab_size == 0 && c.model.dropout == 0 &&
                  c.optim.beta1 == 0.9 && c.optim.beta2 == 0.999 && c.optim.eps == 1e-8 &&
                  c.optim.clip_norm == 0 && c.optim.warmup_steps == 100 &&
                  c.optim.decay_steps == 0 && c.optim.min_lr == 1e-4 &&
                  strcmp(c.optim.name, "adamw") == 0 && strcmp(c.optim.schedule, "cosine") == 0,
              "gpt deck: n_layer 4, n_head 4, n_embd 128, block_size 64, vocab_size 0, "
              "dropout 0, beta1 0.9, beta2 0.999, eps 1e-8, clip 0, decay_steps 0");
    /* and a deck without the keys keeps sgd and the step schedule */
    const char *old = "[run]\noutput_dir = /o\n[model]\nname = mlp\n[optim]\nlr = 1\n"
                      "batch_size = 4\n";
    rc = deck_parse_string("old.ini", old, 0, NULL, &c, NULL);
    CHECK(rc == 0 && strcmp(c.optim.name, "sgd") == 0 && strcmp(c.optim.schedule, "step") == 0,
          "a deck without optim.name trains with sgd on the step schedule");

    /* momentum given with adamw: accepted, one note naming the key */
    char *t = str_printf("%s[optim]\nmomentum = 0.5\n", gpt);
    const char *path = deck_write("note.ini", t);
    dt_job job;
    rc = deck_parse_job(path, 0, NULL, 1, &job);
    CHECK(rc == 0 && job.notes && strstr(job.notes, "note: optim.momentum does not apply to "
                                          "optim.name = adamw") &&
              count_lines(job.notes) == 1,
          "adamw + momentum: one note (%s)", rc ? dt_err_msg() : job.notes ? job.notes : "none");
    if (rc == 0)
        deck_job_free(&job);
    free(t);
    char *nest[] = {(char *)"optim.nesterov=true", (char *)"optim.momentum=0.8"};
    rc = deck_parse_job(path, 1, nest, 1, &job);
    CHECK(rc == 0 && job.notes && strstr(job.notes, "optim.momentum and optim.nesterov do not") &&
              count_lines(job.notes) == 1,
          "adamw + momentum + nesterov: one line (%s)", rc ? dt_err_msg() : job.notes);
    if (rc == 0)
        deck_job_free(&job);
    rc = deck_parse_job(deck_write("nonote.ini", gpt), 0, NULL, 1, &job);
    CHECK(rc == 0 && !job.notes, "adamw without momentum: no note");
    if (rc == 0)
        deck_job_free(&job);
    /* muon: Muon's momentum 0.95 and Nesterov unless given, in a group too; adamw_lr
     * given to another optimizer: one note */
    const char *mu = "[run]\noutput_dir = /o\n[model]\nname = gpt\n[data]\nname = text\n"
                     "path = /c\n[optim]\nname = muon\nlr = 0.02\nbatch_size = 4\n";
    rc = deck_parse_string("muon.ini", mu, 0, NULL, &c, NULL);
    CHECK(rc == 0 && c.optim.momentum == 0.95 && c.optim.nesterov && c.optim.adamw_lr == 3e-4,
          "muon: momentum 0.95, nesterov, adamw_lr 3e-4 when not given (%s)",
          rc ? dt_err_msg() : "ok");
    char *mu_given[] = {(char *)"optim.momentum=0.9", (char *)"optim.nesterov=false"};
    rc = deck_parse_string("muon.ini", mu, 2, mu_given, &c, NULL);
    CHECK(rc == 0 && c.optim.momentum == 0.9 && !c.optim.nesterov,
          "muon: momentum and nesterov as given");
    char *mu_sgd[] = {(char *)"optim.name=sgd"};
    rc = deck_parse_string("muon.ini", mu, 1, mu_sgd, &c, NULL);
    CHECK(rc == 0 && c.optim.momentum == 0.9 && !c.optim.nesterov,
          "sgd keeps its defaults (momentum 0.9, no nesterov)");
    char *g = str_printf("%s[group.a]\nranks = 1\n[group.b]\nranks = 1\noptim.name = sgd\n"
                   "optim.adamw_lr = 1e-3\n", mu);
    rc = deck_parse_job(deck_write("mugrp.ini", g), 0, NULL, 2, &job);
    CHECK(rc == 0 && job.groups[0].cfg.optim.momentum == 0.95 &&
              job.groups[1].cfg.optim.momentum == 0.9 && job.notes &&
              strstr(job.notes, "note: optim.adamw_lr applies to optim.name = muon only") &&
              count_lines(job.notes) == 1,
          "groups: muon's defaults in the muon group, sgd's in the other, one note on adamw_lr "
          "(%s)", rc ? dt_err_msg() : job.notes ? job.notes : "none");
    if (rc == 0)
        deck_job_free(&job);
    free(g);
    /* per group: the group that switches to adamw is the one refused */
    g = str_printf("%s[algorithm]\nmode = pdmm-isvr\n[group.a]\nranks = 1\n"
                         "[group.b]\nranks = 1\noptim.name = adamw\n",
                         "[run]\noutput_dir = /o\n[model]\nname = mlp\n[optim]\nlr = 1\n"
                         "batch_size = 4\n");
    rc = deck_parse_job(deck_write("grp.ini", g), 0, NULL, 2, &job);
    CHECK(rc == -1 && strstr(dt_err_msg(), "[group.b] (line 12): optim.name = adamw with "
                                           "algorithm.mode = pdmm-isvr"),
          "a group's adamw with pdmm-isvr is refused naming the group: %s", dt_err_msg());
    free(g);
}

/* The group pre-scan and inih see the same section lines (the
 * differential harness is tests/fuzz/fuzz_deck_sections.c): one case per class
 * of disagreement it found, each of which either aborted dtrain ("[group.a] was
 * not registered") or registered a group inih never saw. */
static void test_section_prescan(void)
{
    const char *rest = "[run]\noutput_dir = /o\n[model]\nname = mlp\n[optim]\nlr = 1\n"
                       "batch_size = 1\n";
    /* a byte-order mark (an editor's UTF-8 signature), before the header or
     * before white space and the header: inih skips it on line 1 */
    static const char *const boms[] = {"\xef\xbb\xbf", "\xef\xbb\xbf \t\v\f", " \xef\xbb\xbf"};
    for (size_t i = 0; i < sizeof boms / sizeof boms[0]; i++) {
        char *t = str_printf("%s[group.a]\r\nranks = 1\r\noptim.lr = 0.5\r\n%s", boms[i], rest);
        dt_job job;
        int rc = deck_parse_job(deck_write("bom.ini", t), 0, NULL, 1, &job);
        CHECK(rc == 0 && job.ngroups == 1 && strcmp(job.groups[0].name, "a") == 0 &&
                  job.groups[0].cfg.optim.lr == 0.5,
              "byte-order mark variant %zu, CRLF lines: [group.a] on line 1 is a group (%s)",
              i + 1, rc ? dt_err_msg() : "ok");
        if (rc == 0)
            deck_job_free(&job);
        free(t);
    }
    /* a second byte-order mark is not skipped: a syntax error, no group */
    char *t = str_printf("\xef\xbb\xbf\xef\xbb\xbf[group.a]\nranks = 1\n%s", rest);
    expect_fail1("two byte-order marks", "bom2.ini", t, 1, "syntax error");
    free(t);
    /* an inline comment inside the brackets ends the header before its ']' */
    t = str_printf("%s[group.a ;note]\nranks = 1\n", rest);
    expect_fail1("inline comment inside a header", "inline.ini", t, 8, "syntax error in "
                 "'[group.a ;note]'");
    free(t);
    /* a header without ']' opens no section */
    t = str_printf("%s[group.a\nranks = 1\n", rest);
    expect_fail1("header without ']'", "nobracket.ini", t, 8, "syntax error in '[group.a'");
    free(t);
    /* a header line too long for inih's buffer is refused, not registered */
    t = str_printf("%s[group.a]%*s\nranks = 1\n", rest, INI_MAX_LINE, "");
    expect_fail1("header line longer than inih's buffer", "longhdr.ini", t, 8,
                 "line is 209 characters long");
    free(t);
    /* inih keeps 49 bytes of a section name; the group name is judged on them */
    t = str_printf("%s[group.%060d]\nranks = 1\n", rest, 0);
    expect_fail1("section name past inih's 49 bytes", "longname.ini", t, 8,
                 "[group.0000000000000000000000000000000000000000000]: a group name is 1 to 31");
    free(t);
}

static void test_syntax_and_duplicates(void)
{
    expect_fail1("missing '='", "syntax.ini", "[optim]\nlr = 0.1\nbatch_size 4\n", 3,
                 "syntax error in 'batch_size 4'");
    expect_fail1("unclosed section", "syntax2.ini", "; x\n[optim\nlr = 0.1\n", 2,
                 "syntax error");
    /* the first error wins, whichever kind it is */
    expect_fail1("syntax error before a bad key", "order1.ini",
                 "[optim]\nbatch_size 4\nlrr = 1\n", 2, "syntax error");
    expect_fail1("bad key before a syntax error", "order2.ini",
                 "[optim]\nlrr = 1\nbatch_size 4\n", 2, "did you mean 'optim.lr'?");

    const char *dup = "[optim]\nlr = 0.1\nbatch_size = 4\n[run]\noutput_dir = /o\n[optim]\n"
                      "lr = 0.2\n";
    const char *needles[] = {"optim.lr: duplicate key", "already set on line 2"};
    expect_fail("duplicate key", "dup.ini", dup, 7, needles, 2);
}

static void test_overrides(void)
{
    const char *text = "[run]\noutput_dir = /tmp/dt-out\n[model]\nname = mlp\n"
                       "[optim]\nlr = 0.1\nbatch_size = 32\n";
    const char *path = deck_write("ov.ini", text);
    dt_config c;
    char *eff = NULL;
    char *const ov1[] = {"optim.lr=0.5", " data.name = synthetic ", "run.resume=yes"};
    int rc = deck_parse(path, 3, ov1, &c, &eff);
    CHECK(rc == 0, "overrides apply (%s)", rc ? dt_err_msg() : "ok");
    if (rc == 0) {
        CHECK(c.optim.lr == 0.5, "override wins over the deck (lr %g)", c.optim.lr);
        CHECK(strcmp(c.data.name, "synthetic") == 0 && c.run.resume,
              "overrides with spaces and of defaults");
        CHECK(strstr(eff, "\nlr = 0.5\n") != NULL, "effective deck shows the override");
    }
    free(eff);

    struct {
        const char *label;
        char *args[3];
        int n;
        const char *needle1, *needle2;
    } bad[] = {
        {"bad override value", {"optim.momentum=0.5", "optim.lr=abc"}, 2,
         "command-line argument 2 ('optim.lr=abc'): optim.lr = abc", "expected a number > 0"},
        {"unknown override key", {"optim.lrr=1"}, 1, "command-line argument 1 ('optim.lrr=1')",
         "did you mean 'optim.lr'?"},
        {"override without '='", {"optim.lr"}, 1, "command-line argument 1 ('optim.lr')",
         "expected section.key=value"},
        {"override without section", {"lr=0.1"}, 1, "command-line argument 1 ('lr=0.1')",
         "expected section.key=value"},
        {"override given twice", {"optim.lr=0.1", "optim.lr=0.2"}, 2,
         "command-line argument 2 ('optim.lr=0.2')", "already given by command-line argument 1"},
        {"newline in a string override", {"run.output_dir=/a\n[optim]"}, 1,
         "command-line argument 1 ('run.output_dir=/a?[optim]')", "control character 0x0a"},
        {"comment marker in a string override", {"run.output_dir=/a ;b"}, 1,
         "command-line argument 1", "would start a comment"},
        {"bad enum override", {"compute.device=gpu"}, 1,
         "command-line argument 1 ('compute.device=gpu')", "cpu, cuda"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_config before;
        memset(&c, 0x33, sizeof c);
        before = c;
        dt_err_clear();
        rc = deck_parse(path, bad[i].n, bad[i].args, &c, NULL);
        const char *msg = dt_err_msg();
        CHECK(rc == -1, "%s: rejected", bad[i].label);
        CHECK(memcmp(&c, &before, sizeof c) == 0, "%s: cfg untouched", bad[i].label);
        CHECK(strstr(msg, bad[i].needle1) != NULL, "%s: message has '%s'", bad[i].label,
              bad[i].needle1);
        CHECK(strstr(msg, bad[i].needle2) != NULL, "%s: message has '%s'", bad[i].label,
              bad[i].needle2);
        printf("#   %s\n", msg);
    }
}

/* Keys as deck_print_keys lists them: "section.key type default doc". */
static int keys_list(char names[][64], char defs[][64], int max)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    deck_print_keys(f);
    fclose(f);
    int n = 0;
    for (char *line = strtok(buf, "\n"); line && n < max; line = strtok(NULL, "\n")) {
        char type[32];
        if (sscanf(line, "%63s %31s %63s", names[n], type, defs[n]) == 3)
            n++;
    }
    free(buf);
    return n;
}

static void test_effective_round_trip(void)
{
    const char *full =
        "[run]\noutput_dir = /scratch/a b/run 1\nseed = 18446744073709551615\nepochs = 90\n"
        "max_steps = 123456789012\neval_every = 7\nlog_every = 3\ncheckpoint_every = 11\n"
        "checkpoint_keep = 5\nresume = on\noverwrite = yes\n"
        "[algorithm]\nmode = allreduce\n"
        "[model]\nname = resnet20_gn\nhidden = 512, 256,10\nactivation = relu\ngn_groups = 4\n"
        "[data]\nname = synthetic\npath = /data/x\npartition = class-skew\n"
        "samples_per_epoch = 1000\ntest_limit = 99\nskew_classes = 3\nskew_shift = 0\n"
        "block_count = 7\nblock_size = 9\nsynthetic_train = 10\nsynthetic_test = 11\n"
        "synthetic_classes = 2\nsynthetic_channels = 3\nsynthetic_height = 32\n"
        "synthetic_width = 31\nsynthetic_noise = 0.1\n"
        "[optim]\nlr = 0.30000000000000004\nbatch_size = 128\nmomentum = 0.99999999999999989\n"
        "nesterov = true\nweight_decay = 2.2250738585072014e-308\nlr_scaling = 1\n"
        "warmup_epochs = 1e300\ndecay_epochs = 0,30,60,80\ndecay_factor = 0.2\n"
        "[compute]\nthreads = 2\n";
    dt_config a, b;
    char *eff = NULL, *eff2 = NULL;
    int rc = deck_parse_string("full.ini", full, 0, NULL, &a, &eff);
    CHECK(rc == 0, "deck with every key set parses (%s)", rc ? dt_err_msg() : "ok");
    if (rc)
        return;
    CHECK(a.optim.lr == 0.1 + 0.2 && a.optim.momentum == 1.0 - 0x1p-53,
          "doubles parsed exactly");
    printf("# effective deck:\n");
    for (char *p = eff; *p;) {
        size_t n = strcspn(p, "\n");
        printf("#   %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    rc = deck_parse_string("effective", eff, 0, NULL, &b, &eff2);
    CHECK(rc == 0, "effective deck re-parses (%s)", rc ? dt_err_msg() : "ok");
    CHECK(rc == 0 && memcmp(&a, &b, sizeof a) == 0, "re-parsed effective deck: identical config");
    CHECK(rc == 0 && strcmp(eff, eff2) == 0, "effective deck of the effective deck is identical");
    free(eff2);

    int longest = 0;
    for (char *p = eff; *p;) {
        int n = (int)strcspn(p, "\n");
        longest = n > longest ? n : longest;
        p += n + (p[n] == '\n');
    }
    CHECK(longest <= INI_MAX_LINE - 2, "effective lines fit inih's buffer (longest %d)", longest);

    /* every key appears once as "key = value" under its section */
    char names[128][64], defs[128][64];
    int nkeys = keys_list(names, defs, 128);
    int found = 0, nvalue_lines = 0;
    for (char *p = eff; *p;) {
        size_t n = strcspn(p, "\n");
        if (*p != ';' && *p != '[' && n > 0)
            nvalue_lines++;
        p += n + (p[n] == '\n');
    }
    for (int i = 0; i < nkeys; i++) {
        char sec[64];
        snprintf(sec, sizeof sec, "%.63s", names[i]);
        char *dot = strchr(sec, '.');
        if (!dot)
            continue;
        *dot = '\0';
        char *hdr = str_printf("\n[%s]\n", sec);
        char *kv = str_printf("\n%s =", dot + 1);
        char *s = strstr(eff, hdr);
        found += s && strstr(s, kv) != NULL;
        free(hdr);
        free(kv);
    }
    CHECK(nkeys >= 40 && found == nkeys && nvalue_lines == nkeys,
          "effective deck lists all %d keys (%d found, %d value lines)", nkeys, found,
          nvalue_lines);
    free(eff);

    /* defaults round trip too */
    rc = deck_parse_string("min", "", 4, req_overrides, &a, &eff);
    CHECK(rc == 0, "defaults + overrides parse");
    if (rc == 0) {
        rc = deck_parse_string("effective", eff, 0, NULL, &b, NULL);
        CHECK(rc == 0 && memcmp(&a, &b, sizeof a) == 0, "defaults: effective deck round trip");
    }
    free(eff);
}

static void test_print_keys(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    deck_print_keys(f);
    fclose(f);
    CHECK(strstr(buf, "optim.lr ") && strstr(buf, "(required)"), "print_keys marks optim.lr");
    int ok = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "optim.momentum ", 15) == 0)
            ok = strstr(line, " double ") && strstr(line, " 0.9 ") && strstr(line, "[0, 1)");
    CHECK(ok, "print_keys: 'optim.momentum  double  0.9  ... [0, 1)'");
    free(buf);
}

static void test_reference(const char *argv1)
{
    const char *top = getenv("top_srcdir");
    char *path = top ? str_printf("%s/inputs/reference.ini", top)
                     : str_printf("%s", argv1 ? argv1 : "../inputs/reference.ini");
    int must = top || argv1;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (must)
            CHECK(0, "cannot open %s", path);
        else
            printf("# skip: %s not found (set top_srcdir or pass its path)\n", path);
        free(path);
        return;
    }
    char names[128][64], defs[128][64];
    int nkeys = keys_list(names, defs, 128);
    int seen[128] = {0}, strays = 0;
    char section[64] = "", line[512];
    char *uncommented = str_printf("%s", "");
    while (fgets(line, sizeof line, f)) {
        const char *out = line;
        if (line[0] == '[') {
            snprintf(section, sizeof section, "%.*s", (int)strcspn(line + 1, "]"), line + 1);
        } else if (line[0] == ';' && line[1] >= 'a' && line[1] <= 'z') {
            char name[64], full[160];
            sscanf(line + 1, "%63[a-z_0-9]", name);
            snprintf(full, sizeof full, "%s.%s", section, name);
            int k = -1;
            for (int i = 0; i < nkeys; i++)
                if (strcmp(names[i], full) == 0)
                    k = i;
            if (k < 0) {
                strays++;
                printf("# reference.ini: '%s' is not a deck key\n", full);
            } else {
                seen[k]++;
                /* required keys stay commented: their values come from overrides */
                if (strcmp(defs[k], "(required)") != 0)
                    out = line + 1;
            }
        }
        char *t = str_printf("%s%s", uncommented, out);
        free(uncommented);
        uncommented = t;
    }
    fclose(f);
    int once = 0;
    for (int i = 0; i < nkeys; i++) {
        once += seen[i] == 1;
        if (seen[i] != 1)
            printf("# reference.ini: %s appears %d times\n", names[i], seen[i]);
    }
    CHECK(nkeys >= 40 && once == nkeys && strays == 0,
          "reference.ini lists each of the %d keys once (%d ok, %d strays)", nkeys, once, strays);

    /* uncommented, the reference must give exactly the schema defaults */
    dt_config ref, def;
    int rc = deck_parse_string(path, uncommented, 4, req_overrides, &ref, NULL);
    CHECK(rc == 0, "uncommented reference.ini parses (%s)", rc ? dt_err_msg() : "ok");
    int rc2 = deck_parse_string("defaults", "", 4, req_overrides, &def, NULL);
    CHECK(rc == 0 && rc2 == 0 && memcmp(&ref, &def, sizeof ref) == 0,
          "reference.ini defaults equal the schema defaults");
    rc = deck_parse_string(path, uncommented, 0, NULL, &ref, NULL);
    CHECK(rc == -1 && strstr(dt_err_msg(), "missing required key"),
          "reference.ini keeps required keys without a value");
    free(uncommented);
    free(path);
}

static void test_load(void)
{
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int root = size - 1;
    const char *text = "[run]\noutput_dir = /tmp/dt-out\nseed = 7\n[model]\nname = mlp\n"
                       "[optim]\nlr = 0.1\nbatch_size = 32\nmomentum = 0.5\n";
    const char *path = deck_write("load.ini", text);
    char *const ov[] = {"optim.lr=0.25"};
    dt_config got, want;
    char *eff = NULL, *want_eff = NULL;
    memset(&got, 0x77, sizeof got);
    int rc = deck_load(MPI_COMM_WORLD, root, path, 1, ov, &got, &eff);
    int rc2 = deck_parse(path, 1, ov, &want, &want_eff);
    CHECK(rc == 0 && rc2 == 0, "deck_load on rank %d of %d, root %d (%s)", rank, size, root,
          rc ? dt_err_msg() : "ok");
    CHECK(rc == 0 && memcmp(&got, &want, sizeof got) == 0 && got.optim.lr == 0.25,
          "deck_load gives deck_parse's config, override included (rank %d)", rank);
    CHECK(eff && want_eff && strcmp(eff, want_eff) == 0,
          "deck_load gives the same effective deck (rank %d)", rank);
    free(eff);
    free(want_eff);

    const char *bad = deck_write("loadbad.ini", "[run]\noutput_dir = /o\n[optim]\nlr = -3\n");
    dt_err_clear();
    eff = (char *)"untouched";
    rc = deck_load(MPI_COMM_WORLD, root, bad, 0, NULL, &got, &eff);
    CHECK(rc == -1 && eff == NULL, "deck_load fails on every rank for a bad deck (rank %d)",
          rank);
    CHECK(strstr(dt_err_msg(), "loadbad.ini:4: optim.lr = -3: expected a number > 0") != NULL,
          "every rank has root's message (rank %d): %s", rank, dt_err_msg());

    rc = deck_load(MPI_COMM_WORLD, root, path, 1, (char *const[]){"optim.lr=x"}, &got, NULL);
    CHECK(rc == -1 && strstr(dt_err_msg(), "command-line argument 1 ('optim.lr=x')"),
          "deck_load: bad override reported on every rank (rank %d)", rank);

    char *missing = str_printf("%s/no-such-deck.ini", tmpdir);
    rc = deck_load(MPI_COMM_WORLD, root, missing, 0, NULL, &got, NULL);
    CHECK(rc == -1 && strstr(dt_err_msg(), "no-such-deck.ini: cannot open the deck"),
          "deck_load: missing file reported on every rank (rank %d)", rank);
    free(missing);
}

/* Rank groups: precedence of the four sources, output directories, rank
 * ranges, the job's effective deck reading back to the same groups, and a
 * deck without groups as one group equal to deck_parse's configuration. */
static void test_groups(void)
{
    const char *text =
        "[run]\noutput_dir = /tmp/job\nseed = 7\n[model]\nname = mlp\n"
        "[optim]\nlr = 0.1\nbatch_size = 8\nmomentum = 0.5\n"
        "[group.a]\nranks = 3\nalgorithm.mode = allreduce\noptim.lr = 0.2\n"
        "[group.b-2]\nranks = 1\noptim.momentum = 0.25\n";
    const char *path = deck_write("groups.ini", text);
    char *const ov[] = {"optim.lr=0.3", "optim.momentum=0.75", "group.b-2.optim.lr=0.4",
                        "group.a.ranks=2"};
    dt_job job;
    int rc = deck_parse_job(path, 4, ov, 3, &job);
    CHECK(rc == 0 && job.ngroups == 2, "two groups parse (%s)", rc ? dt_err_msg() : "ok");
    if (rc != 0)
        return;
    const dt_config *a = &job.groups[0].cfg, *b = &job.groups[1].cfg;
    CHECK(strcmp(job.groups[0].name, "a") == 0 && job.groups[0].first == 0 &&
              job.groups[0].ranks == 2 && strcmp(job.groups[1].name, "b-2") == 0 &&
              job.groups[1].first == 2 && job.groups[1].ranks == 1,
          "groups take consecutive ranks in deck order; group.a.ranks=2 overrides the deck");
    CHECK(a->optim.lr == 0.2 && b->optim.lr == 0.4,
          "optim.lr: group section (0.2) beats the plain argument (0.3); group argument (0.4) "
          "beats both");
    CHECK(a->optim.momentum == 0.75 && b->optim.momentum == 0.25,
          "optim.momentum: plain argument (0.75) where the group is silent; group section "
          "(0.25) beats it");
    CHECK(strcmp(a->algorithm.mode, "allreduce") == 0 && strcmp(b->algorithm.mode, "local") == 0 &&
              a->run.seed == 7 && b->run.seed == 7,
          "keys outside groups reach every group; a group's override stays in it");
    CHECK(strcmp(a->run.output_dir, "/tmp/job/a") == 0 &&
              strcmp(b->run.output_dir, "/tmp/job/b-2") == 0,
          "each group writes to run.output_dir/NAME (%s, %s)", a->run.output_dir,
          b->run.output_dir);
    dt_config alone;
    rc = deck_parse_string("g", job.groups[1].effective, 0, NULL, &alone, NULL);
    CHECK(rc == 0 && memcmp(&alone, b, sizeof alone) == 0,
          "a group's effective deck is a deck of its own giving the group's configuration");
    const char *eff = deck_write("job-effective.ini", job.effective);
    dt_job again;
    rc = deck_parse_job(eff, 0, NULL, 3, &again);
    int same = rc == 0 && again.ngroups == 2;
    for (int i = 0; same && i < 2; i++)
        same = memcmp(&again.groups[i].cfg, &job.groups[i].cfg, sizeof(dt_config)) == 0 &&
               again.groups[i].ranks == job.groups[i].ranks &&
               strcmp(again.groups[i].name, job.groups[i].name) == 0;
    CHECK(same, "the job's effective deck reads back to the same groups (%s)",
          rc ? dt_err_msg() : "ok");
    if (rc == 0)
        deck_job_free(&again);
    deck_job_free(&job);

    rc = deck_parse_job(path, 4, ov, 4, &job);
    CHECK(rc == -1 && strstr(dt_err_msg(), "the groups take 3 rank(s)") &&
              strstr(dt_err_msg(), "but the job has 4") &&
              strstr(dt_err_msg(), "command-line argument 4 (group.a.ranks)") &&
              strstr(dt_err_msg(), "groups.ini:15: group.b-2.ranks"),
          "rank counts that do not add up name where each was given (%s)", dt_err_msg());
    char *const dup[] = {"group.a.optim.lr=1", "group.a.optim.lr=2"};
    rc = deck_parse_job(path, 2, dup, 4, &job);
    CHECK(rc == -1 && strstr(dt_err_msg(), "command-line argument 2") &&
              strstr(dt_err_msg(), "duplicate key (already given by command-line argument 1)"),
          "a group key given twice on the command line (%s)", dt_err_msg());
    const char *missing = deck_write("groups-missing.ini",
                                     "[run]\noutput_dir = /tmp/job\n[optim]\nlr = 0.1\n"
                                     "batch_size = 8\n[group.x]\nranks = 1\nmodel.name = mlp\n"
                                     "[group.y]\nranks = 1\n");
    rc = deck_parse_job(missing, 0, NULL, 2, &job);
    CHECK(rc == -1 && strstr(dt_err_msg(), "missing required key 'model.name' for [group.y] "
                                           "(line 9)"),
          "a required key may come from a group, and its absence names the group (%s)",
          dt_err_msg());

    const char *plain = deck_write("nogroups.ini",
                                   "[run]\noutput_dir = /tmp/one\n[model]\nname = mlp\n"
                                   "[optim]\nlr = 0.1\nbatch_size = 8\n");
    dt_config c;
    char *e1 = NULL;
    rc = deck_parse(plain, 0, NULL, &c, &e1);
    int rc2 = deck_parse_job(plain, 0, NULL, 5, &job);
    CHECK(rc == 0 && rc2 == 0 && job.ngroups == 1 && job.groups[0].name[0] == '\0' &&
              job.groups[0].ranks == 5 && memcmp(&job.groups[0].cfg, &c, sizeof c) == 0 &&
              strcmp(job.effective, e1) == 0,
          "a deck without groups is one group of every rank, configured as deck_parse says");
    free(e1);
    if (rc2 == 0)
        deck_job_free(&job);
}

int main(int argc, char **argv)
{
    MPI_CHECK(MPI_Init(&argc, &argv));
    algo_deck_register();
    snprintf(tmpdir, sizeof tmpdir, "%s", "/tmp/test_deck.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp failed\n");
        return 1;
    }

    test_defaults();
    test_required();
    test_unknown();
    test_bad_values();
    test_cross_keys();
    test_syntax_and_duplicates();
    test_overrides();
    test_effective_round_trip();
    test_print_keys();
    test_reference(argc > 1 ? argv[1] : NULL);
    test_load();
    test_groups();
    test_section_prescan();

    for (int i = 0; i < nmade; i++) {
        unlink(made[i]);
        free(made[i]);
    }
    rmdir(tmpdir);
    int rc = tap_done();
    MPI_CHECK(MPI_Finalize());
    return rc;
}
