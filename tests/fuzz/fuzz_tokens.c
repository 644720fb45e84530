/* libFuzzer: the llm.c token-file reader (and the text reader on one file),
 * then the windows over whatever was accepted.
 * Input: byte 0 = mode (bits 0-1: 0 vocabulary 0 = GPT-2's, 1 vocabulary
 * 2 + byte 1, 2 vocabulary 65536, 3 the training file read as text);
 * byte 1 = small vocabulary / block size T = 1 + byte 1 % 16; bytes 2-3
 * (little endian) = the training file's length; the rest is the training
 * file, then the validation file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/tokens.h"
#include "fuzz_util.h"

/* What a loader accepted must hold: tokens < vocab, windows inside the
 * rank's part with y = x shifted, validation windows inside the split. */
static void check_corpus(const dt_corpus *c, int T)
{
    for (int64_t i = 0; i < c->n_train; i++)
        if (c->train[i] >= c->vocab)
            abort();
    for (int64_t i = 0; i < c->n_val; i++)
        if (c->val[i] >= c->vocab)
            abort();
    if (corpus_check(c, T) != 0)
        return;
    int32_t x[2 * 16], y[2 * 16];
    for (int r = 0; r < 2; r++) {
        dt_windows w;
        if (windows_init(&w, c, r, 2, T, 2, 99) != 0)
            continue;
        for (int s = 0; s < 4; s++) {
            windows_next(&w, x, y);
            for (int i = 0; i < 2 * T; i++)
                if ((i % T + 1 < T && y[i] != x[i + 1]) || x[i] < 0 || x[i] >= c->vocab)
                    abort();
        }
    }
    int64_t nv = windows_val_count(c, T);
    if (nv < 1 || nv * T + 1 > c->n_val)
        abort();
    for (int64_t k = 0; k < nv; k++) {
        windows_val(c, T, k, x, y);
        if (y[T - 1] != c->val[k * T + T])
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || size > (1 << 20))
        return 0;
    int mode = data[0] & 3, T = 1 + data[1] % 16;
    size_t nt = (size_t)data[2] | (size_t)data[3] << 8;
    data += 4;
    size -= 4;
    if (nt > size)
        nt = size;
    dt_corpus c;
    int rc;
    if (mode == 3) {
        const char *p = fuzz_file(0, "text.txt", data, nt);
        rc = corpus_load_text(&c, p);
    } else {
        const char *tr = fuzz_file(0, "train.bin", data, nt);
        const char *va = fuzz_file(1, "val.bin", data + nt, size - nt);
        int vocab = mode == 0 ? 0 : mode == 1 ? 2 + data[-3] : 65536;
        rc = corpus_load_tokens(&c, tr, va, vocab);
    }
    if (rc == 0) {
        check_corpus(&c, T);
        corpus_free(&c);
    } else if (!strstr(dt_err_msg(), fuzz_dir())) {
        abort(); /* every file error names the file */
    }
    dt_err_clear();
    return 0;
}
