/* libFuzzer: the IDX reader (MNIST / Fashion-MNIST files), plain and gzip.
 * Input: byte 0 bit 0 = gzip both files; bytes 1-2 (little endian) = the
 * length of the images file; the rest is the images file, then the labels
 * file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "data/data.h"
#include "fuzz_util.h"

static const char *put(int slot, const char *name, const uint8_t *d, size_t n, int gz)
{
    if (!gz)
        return fuzz_file(slot, name, d, n);
    uLongf cap = compressBound(n) + 32;
    uint8_t *z = malloc(cap);
    /* a gzip stream (windowBits 31) as gzopen reads */
    z_stream s;
    memset(&s, 0, sizeof s);
    if (deflateInit2(&s, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    s.next_in = (Bytef *)d;
    s.avail_in = (uInt)n;
    s.next_out = z;
    s.avail_out = (uInt)cap;
    if (deflate(&s, Z_FINISH) != Z_STREAM_END)
        abort();
    size_t zn = cap - s.avail_out;
    deflateEnd(&s);
    const char *p = fuzz_file(slot, name, z, zn);
    free(z);
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > (1 << 20))
        return 0;
    int gz = data[0] & 1;
    size_t ni = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (ni > size)
        ni = size;
    const char *img = put(0, gz ? "img.gz" : "img", data, ni, gz);
    const char *lab = put(1, gz ? "lab.gz" : "lab", data + ni, size - ni, gz);
    dt_dataset d;
    memset(&d, 0, sizeof d);
    if (dataset_load_idx(&d, img, lab) == 0)
        fuzz_check_dataset(&d);
    dt_err_clear();
    return 0;
}
