#include "algo/quant.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/vec.h"

int quant_parse(const char *name)
{
    if (!strcmp(name, "fp32"))
        return QUANT_FP32;
    if (!strcmp(name, "bf16"))
        return QUANT_BF16;
    if (!strcmp(name, "int8"))
        return QUANT_INT8;
    return -1;
}

const char *quant_name(dt_quant q)
{
    return q == QUANT_BF16 ? "bf16" : q == QUANT_INT8 ? "int8" : "fp32";
}

static size_t nblocks(size_t n) { return (n + QUANT_BLOCK - 1) / QUANT_BLOCK; }

size_t quant_words(dt_quant q, size_t n)
{
    switch (q) {
    case QUANT_BF16:
        return (n + 1) / 2;
    case QUANT_INT8:
        return nblocks(n) + (n + 3) / 4;
    default:
        return n;
    }
}

/* Round to nearest even on the 16 bits dropped; a NaN stays a (quiet) NaN
 * instead of carrying into the exponent. */
static uint16_t bf16_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float float_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Block b of x (m values): its scale and its int8 values. */
static float int8_block(const float *x, size_t m, int8_t *q)
{
    float amax = 0.0f;
    for (size_t i = 0; i < m; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const float scale = amax / 127.0f;
    for (size_t i = 0; i < m; i++) {
        /* |x / scale| <= 127 up to rounding of the division: clamp */
        float r = scale > 0.0f ? nearbyintf(x[i] / scale) : 0.0f;
        q[i] = (int8_t)fmaxf(-127.0f, fminf(127.0f, r));
    }
    return scale;
}

void quant_encode(dt_quant q, const float *x, size_t n, float *wire)
{
    VEC_SKIP_IN_SIM; /* the simulator: x holds no model, only the message's size counts */
    if (q == QUANT_FP32) {
        memcpy(wire, x, n * sizeof *x);
    } else if (q == QUANT_BF16) {
        uint16_t *h = (uint16_t *)(void *)wire;
        for (size_t i = 0; i < n; i++)
            h[i] = bf16_of(x[i]);
        if (n % 2)
            h[n] = 0; /* the pad half: defined bytes on the wire */
    } else {
        const size_t nb = nblocks(n);
        int8_t *v = (int8_t *)(void *)(wire + nb);
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * QUANT_BLOCK, m = n - lo < QUANT_BLOCK ? n - lo : QUANT_BLOCK;
            wire[b] = int8_block(x + lo, m, v + lo);
        }
        memset(v + n, 0, 4 * ((n + 3) / 4) - n);
    }
}

static void decode(dt_quant q, const float *wire, size_t n, float *y, int add)
{
    VEC_SKIP_IN_SIM; /* the simulator: the codes mean nothing (core/vec.h) */
    if (q == QUANT_FP32) {
        for (size_t i = 0; i < n; i++)
            y[i] = add ? y[i] + wire[i] : wire[i];
    } else if (q == QUANT_BF16) {
        const uint16_t *h = (const uint16_t *)(const void *)wire;
        for (size_t i = 0; i < n; i++)
            y[i] = add ? y[i] + float_of_bf16(h[i]) : float_of_bf16(h[i]);
    } else {
        const size_t nb = nblocks(n);
        const int8_t *v = (const int8_t *)(const void *)(wire + nb);
        for (size_t i = 0; i < n; i++) {
            float d = wire[i / QUANT_BLOCK] * (float)v[i];
            y[i] = add ? y[i] + d : d;
        }
    }
}

void quant_decode(dt_quant q, const float *wire, size_t n, float *y) { decode(q, wire, n, y, 0); }

void quant_decode_add(dt_quant q, const float *wire, size_t n, float *acc)
{
    decode(q, wire, n, acc, 1);
}
