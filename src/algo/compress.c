#include "algo/compress.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h"

/* |v| as an unsigned integer: for non-negative IEEE floats the bit patterns
 * order like the values, so selection needs no float comparisons and ties
 * are exact (-0 and +0 share the key 0). */
static inline uint32_t abs_key(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7fffffffu;
}

size_t topk_count(size_t size, double ratio)
{
    if (size == 0)
        return 0;
    double r = ratio * (double)size * (1.0 + 4.0 * DBL_EPSILON);
    if (!(r >= 1.0)) /* also a NaN or negative ratio */
        return 1;
    if (r >= (double)size)
        return size;
    return (size_t)floor(r);
}

size_t topk_capacity(const dt_segment *seg, int nseg, double ratio)
{
    size_t cap = 0;
    for (int s = 0; s < nseg; s++)
        cap += topk_count(seg[s].size, ratio);
    return cap;
}

/* Radix select over the 32-bit keys, most significant byte first: each pass
 * histograms the keys that share the prefix chosen so far and picks the byte
 * value where the k-th largest key lies. What remains is a threshold
 * (prefix, mask) and how many keys equal to it are still to be taken; those
 * go to the lowest indices, which one ascending scan gives for free. Indices
 * are written as base + i. */
static size_t select_into(const float *v, size_t n, size_t k, uint32_t *idx, uint32_t base)
{
    if (k == 0 || n == 0)
        return 0;
    if (k >= n) {
        for (size_t i = 0; i < n; i++)
            idx[i] = base + (uint32_t)i;
        return n;
    }
    uint32_t prefix = 0, mask = 0;
    size_t need = k; /* still to take among keys matching prefix under mask */
    for (int shift = 24; shift >= 0; shift -= 8) {
        size_t hist[256] = { 0 };
        for (size_t i = 0; i < n; i++) {
            uint32_t a = abs_key(v[i]);
            if ((a & mask) == prefix)
                hist[(a >> shift) & 0xffu]++;
        }
        /* the bucket holds >= need keys, so this stops at some b >= 0 */
        size_t above = 0;
        int b = 255;
        while (above + hist[b] < need)
            above += hist[b--];
        need -= above;
        prefix |= (uint32_t)b << shift;
        mask |= 0xffu << shift;
        if (hist[b] == need) /* the whole bucket is taken: lower bytes do not matter */
            break;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = abs_key(v[i]) & mask;
        if (a > prefix) {
            idx[m++] = base + (uint32_t)i;
        } else if (a == prefix && need > 0) {
            idx[m++] = base + (uint32_t)i;
            need--;
        }
    }
    return m;
}

static void check_index_range(size_t n)
{
    if (n > (size_t)UINT32_MAX + 1)
        DT_FATAL("top-k: %zu coordinates do not fit 32-bit indices", n);
}

size_t topk_select(const float *v, size_t n, size_t k, uint32_t *idx)
{
    check_index_range(n);
    return select_into(v, n, k, idx, 0);
}

static void check_segments(const dt_segment *seg, int nseg, size_t n, const char *who)
{
    check_index_range(n);
    size_t end = 0;
    for (int s = 0; s < nseg; s++) {
        if (seg[s].offset < end || seg[s].size > n || seg[s].offset > n - seg[s].size)
            DT_FATAL("%s: segment %d [%zu, +%zu) is out of order, overlaps or leaves [0, %zu)",
                     who, s, seg[s].offset, seg[s].size, n);
        end = seg[s].offset + seg[s].size;
    }
}

size_t topk_compress(const float *g, float *residual, size_t n, const dt_segment *seg, int nseg,
                     double ratio, uint32_t *idx, float *val)
{
    check_segments(seg, nseg, n, "top-k");
    const float *acc = g;
    if (residual) { /* the residual becomes acc in place; the sent entries are cleared below */
        for (size_t i = 0; i < n; i++)
            residual[i] += g[i];
        acc = residual;
    }
    size_t m = 0;
    for (int s = 0; s < nseg; s++) {
        size_t off = seg[s].offset;
        size_t k = topk_count(seg[s].size, ratio);
        size_t got = select_into(acc + off, seg[s].size, k, idx + m, (uint32_t)off);
        for (size_t j = m; j < m + got; j++)
            val[j] = acc[idx[j]];
        if (residual)
            for (size_t j = m; j < m + got; j++)
                residual[idx[j]] = 0.0f;
        m += got;
    }
    return m;
}

/* max |G| over [lo, hi); non-finite entries are left out (they are sent as
 * they are) */
static float bin_max(const float *G, size_t lo, size_t hi)
{
    float m = 0.0f;
    for (size_t i = lo; i < hi; i++) {
        float a = fabsf(G[i]);
        if (a > m && isfinite(a))
            m = a;
    }
    return m;
}

size_t adacomp_compress(const float *g, float *residual, size_t n, const dt_segment *seg,
                        int nseg, uint32_t *idx, float *val)
{
    check_segments(seg, nseg, n, "adacomp");
    float *G = residual;
    for (size_t i = 0; i < n; i++)
        G[i] += g[i];
    size_t m = 0;
    for (int s = 0; s < nseg; s++) {
        size_t lo = seg[s].offset, hi = lo + seg[s].size, bin = seg[s].bin, first = m;
        if (seg[s].size == 0)
            continue;
        if (bin == 0)
            DT_FATAL("adacomp: segment %d has bin length 0", s);
        /* select bin by bin (the bin is still in cache for its second scan);
         * the values need the segment's scale, known once every bin is seen */
        double sum = 0.0;
        size_t bins = 0;
        for (size_t b = lo; b < hi; b += bin, bins++) {
            size_t e = bin < hi - b ? b + bin : hi;
            const float gmax = bin_max(G, b, e);
            sum += gmax;
            for (size_t i = b; i < e; i++)
                if (!isfinite(G[i]) || (G[i] != 0.0f && fabsf(G[i] + g[i]) >= gmax))
                    idx[m++] = (uint32_t)i;
        }
        const float scale = (float)(sum / (double)bins);
        for (size_t j = first; j < m; j++) {
            float *r = &G[idx[j]];
            if (isfinite(*r)) {
                val[j] = copysignf(scale, *r);
                *r -= val[j];
            } else {
                val[j] = *r;
                *r = 0.0f;
            }
        }
    }
    return m;
}

void sparse_add(float *x, const uint32_t *idx, const float *val, size_t k, float scale)
{
    for (size_t j = 0; j < k; j++)
        x[idx[j]] += scale * val[j];
}

size_t sparse_bytes(size_t k) { return sizeof(uint32_t) + k * (sizeof(uint32_t) + sizeof(float)); }

size_t sparse_encode(void *buf, const uint32_t *idx, const float *val, size_t k, uint32_t base)
{
    if (k > UINT32_MAX)
        DT_FATAL("sparse update: %zu pairs do not fit a 32-bit count", k);
    /* memcpy, not casts: the body may start at any offset of a byte buffer */
    unsigned char *p = buf;
    uint32_t count = (uint32_t)k;
    memcpy(p, &count, sizeof count);
    p += sizeof count;
    for (size_t j = 0; j < k; j++) {
        if (idx[j] < base)
            DT_FATAL("sparse update: index %u below the range start %u", idx[j], base);
        uint32_t rel = idx[j] - base;
        memcpy(p + j * sizeof rel, &rel, sizeof rel);
    }
    if (k)
        memcpy(p + k * sizeof(uint32_t), val, k * sizeof(float));
    return sparse_bytes(k);
}

/* The count indices at ib (unaligned uint32) are < n and strictly
 * increasing; otherwise -1 after dt_err_set() naming the byte offset from
 * the message start msg. */
static int check_indices(const char *what, const unsigned char *msg, const unsigned char *ib,
                         uint32_t count, size_t n)
{
    uint32_t prev = 0;
    for (uint32_t j = 0; j < count; j++) {
        uint32_t i;
        memcpy(&i, ib + (size_t)j * sizeof i, sizeof i);
        size_t at = (size_t)(ib - msg) + (size_t)j * sizeof i;
        if (i >= n)
            return dt_err_set("%s: index %u at byte offset %zu (pair %u) is outside the range "
                              "[0, %zu)", what, i, at, j, n);
        if (j > 0 && i <= prev)
            return dt_err_set("%s: index %u at byte offset %zu (pair %u) does not increase "
                              "(previous %u)", what, i, at, j, prev);
        prev = i;
    }
    return 0;
}

int sparse_decode(const void *buf, size_t bytes, size_t n, size_t cap, uint32_t *idx, float *val,
                  size_t *k)
{
    const unsigned char *p = buf;
    uint32_t count;
    if (bytes < sizeof count)
        return dt_err_set("sparse update: %zu bytes, shorter than its 4-byte count", bytes);
    memcpy(&count, p, sizeof count);
    if (count > n || count > cap)
        return dt_err_set("sparse update: count %u at byte offset 0 exceeds the range of %zu "
                          "coordinates or the %zu pairs the receiver holds", count, n, cap);
    if (bytes != sparse_bytes(count))
        return dt_err_set("sparse update: %zu bytes for count %u, expected 4 + 8 * %u = %zu",
                          bytes, count, count, sparse_bytes(count));
    const unsigned char *ib = p + sizeof count;
    if (check_indices("sparse update", p, ib, count, n) != 0)
        return -1;
    if (count) {
        memcpy(idx, ib, (size_t)count * sizeof(uint32_t));
        memcpy(val, ib + (size_t)count * sizeof(uint32_t), (size_t)count * sizeof(float));
    }
    *k = count;
    return 0;
}

/* ---- quantized sparse updates ------------------------------------------------ */

static inline uint32_t float_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static size_t qsparse_size(size_t k, size_t nrun)
{
    return 2 * sizeof(uint32_t) + nrun * (sizeof(uint32_t) + sizeof(float)) +
           k * sizeof(uint32_t) + (k + 7) / 8;
}

size_t qsparse_bound(size_t k) { return qsparse_size(k, k); }

size_t qsparse_encode(void *buf, const uint32_t *idx, const float *val, size_t k, uint32_t base)
{
    if (k > UINT32_MAX)
        DT_FATAL("quantized sparse update: %zu pairs do not fit a 32-bit count", k);
    unsigned char *p = buf;
    uint32_t nrun = 0;
    for (size_t j = 0; j < k; j++)
        if (j == 0 || abs_key(val[j]) != abs_key(val[j - 1]))
            nrun++;
    uint32_t head[2] = { (uint32_t)k, nrun };
    memcpy(p, head, sizeof head);
    unsigned char *r = p + sizeof head;
    for (size_t j = 0; j < k; j++) { /* a run ends where the magnitude changes */
        if (j + 1 == k || abs_key(val[j + 1]) != abs_key(val[j])) {
            uint32_t end = (uint32_t)(j + 1), mag = abs_key(val[j]);
            memcpy(r, &end, sizeof end);
            memcpy(r + sizeof end, &mag, sizeof mag);
            r += sizeof end + sizeof mag;
        }
    }
    for (size_t j = 0; j < k; j++) {
        if (idx[j] < base)
            DT_FATAL("quantized sparse update: index %u below the range start %u", idx[j], base);
        uint32_t rel = idx[j] - base;
        memcpy(r + j * sizeof rel, &rel, sizeof rel);
    }
    unsigned char *sign = r + k * sizeof(uint32_t);
    memset(sign, 0, (k + 7) / 8);
    for (size_t j = 0; j < k; j++)
        if (float_bits(val[j]) >> 31)
            sign[j / 8] |= (unsigned char)(1u << (j % 8));
    return qsparse_size(k, nrun);
}

int qsparse_decode(const void *buf, size_t bytes, size_t n, size_t cap, uint32_t *idx, float *val,
                   size_t *k)
{
    const unsigned char *p = buf;
    uint32_t head[2];
    if (bytes < sizeof head)
        return dt_err_set("quantized sparse update: %zu bytes, shorter than its 8-byte header",
                          bytes);
    memcpy(head, p, sizeof head);
    uint32_t count = head[0], nrun = head[1];
    if (count > n || count > cap)
        return dt_err_set("quantized sparse update: count %u at byte offset 0 exceeds the range "
                          "of %zu coordinates or the %zu pairs the receiver holds", count, n, cap);
    if (nrun > count || (count > 0) != (nrun > 0))
        return dt_err_set("quantized sparse update: %u runs at byte offset 4 for %u pairs", nrun,
                          count);
    if (bytes != qsparse_size(count, nrun))
        return dt_err_set("quantized sparse update: %zu bytes for count %u and %u runs, expected "
                          "%zu", bytes, count, nrun, qsparse_size(count, nrun));
    const unsigned char *r = p + sizeof head;
    const size_t run_bytes = sizeof(uint32_t) + sizeof(float);
    uint32_t prev_end = 0;
    for (uint32_t q = 0; q < nrun; q++) {
        uint32_t end;
        memcpy(&end, r + (size_t)q * run_bytes, sizeof end);
        if (end <= prev_end || end > count || (q + 1 == nrun && end != count))
            return dt_err_set("quantized sparse update: run %u at byte offset %zu ends at %u "
                              "(previous end %u, pairs %u)", q, sizeof head + q * run_bytes, end,
                              prev_end, count);
        prev_end = end;
    }
    const unsigned char *ib = r + (size_t)nrun * run_bytes;
    if (check_indices("quantized sparse update", p, ib, count, n) != 0)
        return -1;
    const unsigned char *sign = ib + (size_t)count * sizeof(uint32_t);
    uint32_t j = 0;
    for (uint32_t q = 0; q < nrun; q++) {
        uint32_t end, mag;
        memcpy(&end, r + (size_t)q * run_bytes, sizeof end);
        memcpy(&mag, r + (size_t)q * run_bytes + sizeof end, sizeof mag);
        for (; j < end; j++) {
            uint32_t bits = (mag & 0x7fffffffu) | ((uint32_t)((sign[j / 8] >> (j % 8)) & 1u) << 31);
            memcpy(&val[j], &bits, sizeof bits);
        }
    }
    if (count)
        memcpy(idx, ib, (size_t)count * sizeof(uint32_t));
    *k = count;
    return 0;
}
