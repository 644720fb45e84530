/* libFuzzer: the parameter server's wire-format decoders, top-k
 * (sparse_decode) and AdaComp (qsparse_decode). Input: byte 0 bit 0 picks
 * the decoder, bytes 1-2 the range length n (little endian); the rest is
 * the message. A message that decodes must re-encode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/compress.h"
#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > (1 << 20))
        return 0;
    int q = data[0] & 1;
    size_t n = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    /* the buffers a server passes: the range's length */
    size_t cap = n ? n : 1;
    uint32_t *idx = malloc(cap * sizeof *idx);
    float *val = malloc(cap * sizeof *val);
    /* the decoders read uint32 fields: hand them an aligned copy, as MPI does */
    void *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    size_t k = 0;
    int rc = q ? qsparse_decode(buf, size, n, n, idx, val, &k)
               : sparse_decode(buf, size, n, n, idx, val, &k);
    if (rc == 0) {
        if (k > n)
            abort();
        for (size_t i = 0; i < k; i++)
            if (idx[i] >= n || (i && idx[i] <= idx[i - 1]))
                abort();
        size_t bound = q ? qsparse_bound(k) : sparse_bytes(k);
        uint8_t *re = malloc(bound ? bound : 1);
        size_t w = q ? qsparse_encode(re, idx, val, k, 0) : sparse_encode(re, idx, val, k, 0);
        /* AdaComp's runs are merged on encoding: only top-k is byte-exact */
        if (!q && (w != size || memcmp(re, data, size) != 0))
            abort();
        free(re);
    }
    free(buf);
    free(idx);
    free(val);
    dt_err_clear();
    return 0;
}
