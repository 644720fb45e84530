/* GPT-2 on the CPU: the layer passes of nn/transformer.h strung together
 * over one flat parameter vector and one activation arena.
 *
 * What the forward keeps per block (T positions of B sequences, C channels):
 * the block's input x (C), x after the attention branch (C), qkv (3C), the
 * attention's output before its projection (C), the MLP's pre-activation
 * (4C), LayerNorm statistics and the attention's row log-sum-exps: 10 C
 * floats a token. LayerNorm outputs and GELU outputs are recomputed by the
 * backward pass (an elementwise pass each) rather than kept; the attention
 * probabilities are kept only where they cost at most 2 C floats a token
 * (n_head T <= 2 n_embd, as in the "baby" GPT) and otherwise recomputed one
 * block of query rows at a time; dropout masks are redrawn from their
 * counter-based keys.
 *
 * The linear layers' products run without their bias (beta 0: no pass of
 * bias rows before them, no reading them back): the pass that reads each
 * product's output adds it: c_proj's (attention and MLP) by the residual add
 * before the next LayerNorm; in fp32 also c_fc's by GELU (so the kept
 * pre-activation is c_fc's product alone) and c_attn's by the attention as it
 * copies each head's q, k and v (at the tiled attention's shapes). In bf16
 * those two stay in their products, whose outputs are rounded as autocast
 * rounds a linear layer's. In the fp32 backward, c_proj's input gradient
 * comes first and one GELU pass then recomputes GELU's output (c_proj's
 * weight-gradient operand) and multiplies the gradient by its derivative.
 *
 * compute.precision = bf16 (config precision DT_PREC_BF16): the four linear
 * layers of each block and the tied head (logits = h wte^T) run their
 * forward, dx and dW products in bf16 with fp32 accumulation. Each weight
 * is rounded to bf16 into one buffer the size of the largest (w16) just
 * before a product reads it: in the forward, and again for the input
 * gradient's product in the backward. A second rounding of every weight a
 * step costs a pass over the parameters (under 0.5 % of a "small" step);
 * keeping the copies from the forward cost 2 bytes a parameter (21 MB on
 * "small"), which put bf16's peak RSS above fp32's. Activations and output
 * gradients are rounded just before each product into fp32 scratch that is
 * free at that moment (the gradient buffers during the forward; per product
 * in the backward, see gpt_backward), not into buffers of their own. Two
 * activations are kept in bf16 instead of fp32: the
 * attention's output (atty16), whose only reader is attn.c_proj (its
 * forward and its dW), which would round it anyway; and the MLP's
 * pre-activation (fch16, 4 C a token, the largest kept tensor): c_fc's
 * fp32 output is rounded to bf16 as PyTorch's autocast stores a linear
 * layer's output, and GELU, forward and backward, reads the rounded values
 * widened back to fp32, so both passes see the same input (backend/cpu/gelu.c's bf16
 * passes: each reads and writes bf16 in one pass; "baby", 1,500
 * steps: validation loss 2.1140 against fp32's 2.1141). It is what puts
 * "baby"'s peak RSS below fp32's (oneDNN's bf16 kernels add code). GELU's
 * output rounded (gelu16), c_proj's operand, is kept too, for c_proj's
 * weight gradient, where the backward recomputed it: 2 bytes a channel of
 * the MLP, 37 MB on "small" (still about 20 MB under fp32's peak), for
 * 1.1 % of its step. The rest of what the forward keeps is the fp32 list
 * above.
 * The attention's own products (q k^T, P v and their gradients) run in bf16
 * too, but not through oneDNN: they are blocks of 16 query rows against at
 * most T keys over a head of at most 64 channels, where a oneDNN call's
 * fixed cost eats the bf16 rate (one thread, Zen 4, CPU time per call:
 * q k^T 16x64x64 1.8 us sgemm vs 2.9 us bf16; P v with P rounded per block
 * 1.2 vs 2.5 us at 64 keys); backend/cpu/attention_bf16.c's attention_*_bf16 run them in
 * its own vdpbf16ps register tiles, with no call at all (the fp32 tiles
 * where the shape or the CPU does not fit them). The softmax and its
 * backward stay fp32, as do LayerNorm, GELU, the loss, the bias sums and
 * the embedding. */
#include "models/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "core/rng.h"
#include "backend/cpu/gemm_bf16.h"
#include "nn/transformer.h"

struct dt_gpt {
    dt_gpt_config c;
    int ntensors;
    dt_tensor_view *tv;
    size_t nparams;
    int Bcap;         /* batch the arena holds */
    float *arena;
    /* kept by the forward, per block l (N = B T positions) */
    float **res;      /* n_layer + 1 of (N, C): block inputs; res[L] feeds ln_f */
    float **mid;      /* (N, C): x after the attention branch */
    float **qkv;      /* (N, 3C) */
    float **atty;     /* (N, C): attention output before c_proj (fp32 only) */
    dt_bf16 **atty16; /* (N, C): the same rounded to bf16 (bf16 only) */
    float **fch;      /* (N, 4C): MLP pre-activation without c_fc's bias (fp32 only) */
    dt_bf16 **fch16;  /* (N, 4C): the same rounded to bf16 (bf16 only) */
    dt_bf16 **gelu16; /* (N, 4C): gelu of fch16, rounded: c_proj's operand (bf16 only) */
    float **lse_att;  /* (B, NH, T) */
    float **probs;    /* (B, NH, T, T) attention probabilities, or NULL (recomputed) */
    int keep_probs;   /* NH T <= 2 C: they cost at most two (N, C) buffers a layer */
    float **ln1m, **ln1r, **ln2m, **ln2r; /* (N) LayerNorm mean and 1/std */
    float *lnfm, *lnfr;                   /* (N) */
    float *logits;    /* (N, V); its gradient after backward */
    float *lse;       /* (N) */
    /* scratch shared by the layers */
    float *ln;        /* (N, C) a LayerNorm output */
    float *h4;        /* (N, 4C) GELU output, then its gradient */
    float *dres;      /* (N, C) gradient of the residual stream */
    float *dtmp;      /* (N, C) a branch's gradient through its dropout */
    float *dln;       /* (N, C) */
    float *dqkv;      /* (N, 3C), carved right after dln: together they hold (N, 4C),
                       * GELU's recomputed output (fp32) while c_proj's dW reads it */
    float *attw;      /* nwork * attention_work(T) */
    int nwork;        /* threads the attention may use: OpenMP's maximum at reserve time */
    int32_t *tok, *tgt; /* (B, T) copies of the last batch */
    /* precision bf16 only (NULL in fp32) */
    dt_bf16 *w16;     /* max(V C, 4 C C): the weight the next product reads, rounded */
    dt_bf16 *head16;  /* (N, V) the logits' gradient rounded, where V > 8C (else in h4) */
    int B, train;
    uint64_t key;
};

static void add_tensor(dt_gpt *m, const char *name, const char *shape, size_t count,
                       size_t fan_in, int init)
{
    dt_tensor_view *t = &m->tv[m->ntensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->shape, sizeof t->shape, "%s", shape);
    t->offset = m->nparams;
    t->count = count;
    t->fan_in = fan_in;
    t->init = init;
    t->ndim = 1; /* "(a, b)": one comma more than one dimension */
    for (const char *p = shape; *p; p++)
        t->ndim += *p == ',';
    m->nparams += count;
}

dt_gpt *gpt_create(const dt_gpt_config *c)
{
    if (c->vocab <= 0 || c->block <= 0 || c->n_layer <= 0 || c->n_head <= 0 || c->n_embd <= 0) {
        dt_err_set("gpt: vocab %d, block %d, n_layer %d, n_head %d, n_embd %d: every size must "
                   "be positive", c->vocab, c->block, c->n_layer, c->n_head, c->n_embd);
        return NULL;
    }
    if (c->n_embd % c->n_head != 0) {
        dt_err_set("gpt: n_embd %d is not a multiple of n_head %d", c->n_embd, c->n_head);
        return NULL;
    }
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f)) {
        dt_err_set("gpt: dropout %g is outside [0, 1)", (double)c->dropout);
        return NULL;
    }
    if (c->precision != DT_PREC_FP32 && c->precision != DT_PREC_BF16) {
        dt_err_set("gpt: precision %d is neither DT_PREC_FP32 nor DT_PREC_BF16", c->precision);
        return NULL;
    }
    if (c->precision == DT_PREC_BF16 && bf16_check_cpu() != 0)
        return NULL;
    /* the arena's offsets and the (T, T) attention block stay far inside size_t;
     * BLAS takes int sizes: V, 4C and T*T must fit */
    if ((int64_t)c->n_embd * 4 > INT32_MAX / 4 || (int64_t)c->block * c->block > INT32_MAX / 4) {
        dt_err_set("gpt: n_embd %d or block %d too large", c->n_embd, c->block);
        return NULL;
    }
    dt_gpt *m = dt_calloc(1, sizeof *m);
    m->c = *c;
    const int L = c->n_layer;
    const size_t V = (size_t)c->vocab, T = (size_t)c->block, C = (size_t)c->n_embd;
    m->tv = dt_calloc((size_t)(4 + T_PER_BLOCK * L), sizeof *m->tv);
    char name[32], shape[40];
    snprintf(shape, sizeof shape, "(%zu, %zu)", V, C);
    add_tensor(m, "wte.weight", shape, V * C, C, 0);
    snprintf(shape, sizeof shape, "(%zu, %zu)", T, C);
    add_tensor(m, "wpe.weight", shape, T * C, C, 0);
    /* rows, cols in units of C; mats: the hidden matrices a weight holds (the
     * fused qkv: q, k and v, each (C, C)) */
    static const struct { const char *name; int rows, cols; int init, mats; } blk[T_PER_BLOCK] = {
        { "ln_1.weight", 1, 0, 1, 0 },         { "ln_1.bias", 1, 0, 2, 0 },
        { "attn.c_attn.weight", 3, 1, 0, 3 },  { "attn.c_attn.bias", 3, 0, 2, 0 },
        { "attn.c_proj.weight", 1, 1, 0, 1 },  { "attn.c_proj.bias", 1, 0, 2, 0 },
        { "ln_2.weight", 1, 0, 1, 0 },         { "ln_2.bias", 1, 0, 2, 0 },
        { "mlp.c_fc.weight", 4, 1, 0, 1 },     { "mlp.c_fc.bias", 4, 0, 2, 0 },
        { "mlp.c_proj.weight", 1, 4, 0, 1 },   { "mlp.c_proj.bias", 1, 0, 2, 0 },
    };
    for (int l = 0; l < L; l++)
        for (int k = 0; k < T_PER_BLOCK; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, blk[k].name);
            const size_t rows = (size_t)blk[k].rows * C, cols = (size_t)blk[k].cols * C;
            if (cols)
                snprintf(shape, sizeof shape, "(%zu, %zu)", rows, cols);
            else
                snprintf(shape, sizeof shape, "(%zu)", rows);
            add_tensor(m, name, shape, rows * (cols ? cols : 1), cols, blk[k].init);
            if (blk[k].mats) {
                dt_tensor_view *t = &m->tv[m->ntensors - 1];
                t->mats = blk[k].mats;
                t->rows = rows / (size_t)blk[k].mats;
                t->cols = cols;
            }
        }
    snprintf(shape, sizeof shape, "(%zu)", C);
    add_tensor(m, "ln_f.weight", shape, C, 0, 1);
    add_tensor(m, "ln_f.bias", shape, C, 0, 2);
    if (c->precision == DT_PREC_BF16) /* wte, or mlp.c_fc / c_proj (the largest of a block) */
        m->w16 = dt_malloc((V > 4 * C ? V : 4 * C) * C * sizeof *m->w16);
    return m;
}

size_t gpt_nparams(const dt_gpt *m) { return m->nparams; }
const dt_gpt_config *gpt_config(const dt_gpt *m) { return &m->c; }
int gpt_ntensors(const dt_gpt *m) { return m->ntensors; }
const dt_tensor_view *gpt_tensors(const dt_gpt *m) { return m->tv; }

void gpt_init_params(const dt_gpt *m, float *params, uint64_t seed)
{
    const double std = 0.02, std_proj = 0.02 / sqrt(2.0 * m->c.n_layer);
    for (int k = 0; k < m->ntensors; k++) {
        const dt_tensor_view *v = &m->tv[k];
        float *p = params + v->offset;
        if (v->init == 1 || v->init == 2) {
            const float x = v->init == 1 ? 1.0f : 0.0f;
            for (size_t i = 0; i < v->count; i++)
                p[i] = x;
            continue;
        }
        const size_t len = strlen(v->name), tail = strlen("c_proj.weight");
        const double s = len >= tail && strcmp(v->name + len - tail, "c_proj.weight") == 0
                             ? std_proj : std;
        dt_rng r = rng_make(seed, (uint64_t)k, 0, 0);
        for (size_t i = 0; i < v->count; i++)
            p[i] = (float)(s * rng_normal(&r));
    }
}

/* Whether c_attn's product leaves out its bias for the attention to add
 * (attention_bias_forward): fp32 at the attention's tiled shapes. */
static int qkv_bias(const dt_gpt *m)
{
    return m->c.precision == DT_PREC_FP32 &&
           attention_takes_bias(m->c.block, m->c.n_embd, m->c.n_head);
}

/* Carve n floats from the arena at *at. */
static float *carve(float *arena, size_t *at, size_t n)
{
    float *p = arena ? arena + *at : NULL;
    /* 16-float (64-byte) alignment for every buffer */
    *at += (n + 15) & ~(size_t)15;
    return p;
}

/* Lay the buffers out for B sequences; arena NULL: only count. Returns floats. */
static size_t layout(dt_gpt *m, int B, float *arena)
{
    const int L = m->c.n_layer;
    const size_t N = (size_t)B * m->c.block, C = (size_t)m->c.n_embd, V = (size_t)m->c.vocab;
    size_t at = 0;
    for (int l = 0; l <= L; l++)
        m->res[l] = carve(arena, &at, N * C);
    for (int l = 0; l < L; l++) {
        m->mid[l] = carve(arena, &at, N * C);
        m->qkv[l] = carve(arena, &at, N * 3 * C);
        if (m->c.precision == DT_PREC_BF16)
            m->atty16[l] = (dt_bf16 *)carve(arena, &at, (N * C + 1) / 2);
        else
            m->atty[l] = carve(arena, &at, N * C);
        if (m->c.precision == DT_PREC_BF16) {
            m->fch16[l] = (dt_bf16 *)carve(arena, &at, N * 4 * C / 2);
            m->gelu16[l] = (dt_bf16 *)carve(arena, &at, N * 4 * C / 2);
        } else
            m->fch[l] = carve(arena, &at, N * 4 * C);
        m->lse_att[l] = carve(arena, &at, N * (size_t)m->c.n_head);
        m->probs[l] = m->keep_probs ? carve(arena, &at, N * (size_t)m->c.n_head * m->c.block) : NULL;
        m->ln1m[l] = carve(arena, &at, N);
        m->ln1r[l] = carve(arena, &at, N);
        m->ln2m[l] = carve(arena, &at, N);
        m->ln2r[l] = carve(arena, &at, N);
    }
    m->lnfm = carve(arena, &at, N);
    m->lnfr = carve(arena, &at, N);
    m->logits = carve(arena, &at, N * V);
    m->lse = carve(arena, &at, N);
    m->ln = carve(arena, &at, N * C);
    m->h4 = carve(arena, &at, N * 4 * C);
    m->dres = carve(arena, &at, N * C);
    m->dtmp = carve(arena, &at, N * C);
    /* dln then dqkv: the (N, 4C) floats from dln lie within the two (GELU's derivative) */
    m->dln = carve(arena, &at, N * C);
    m->dqkv = carve(arena, &at, N * 3 * C);
    m->attw = carve(arena, &at, (size_t)m->nwork * attention_work(m->c.block));
    m->head16 = NULL;
    if (m->c.precision == DT_PREC_BF16 && V > 8 * C) /* two bf16 numbers a float */
        m->head16 = (dt_bf16 *)carve(arena, &at, (N * V + 1) / 2);
    return at;
}

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void gpt_reserve(dt_gpt *m, int B)
{
    if (B <= m->Bcap && max_threads() <= m->nwork)
        return;
    if (B < m->Bcap)
        B = m->Bcap;
    m->nwork = max_threads();
    const int L = m->c.n_layer;
    if (!m->res) {
        m->res = dt_calloc((size_t)L + 1, sizeof *m->res);
        m->keep_probs = (int64_t)m->c.n_head * m->c.block <= 2 * (int64_t)m->c.n_embd;
        float ***lists[] = { &m->mid, &m->qkv, &m->atty, &m->fch, &m->lse_att, &m->probs,
                             &m->ln1m, &m->ln1r, &m->ln2m, &m->ln2r };
        for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
            *lists[i] = dt_calloc((size_t)L, sizeof **lists[i]);
        m->atty16 = dt_calloc((size_t)L, sizeof *m->atty16);
        m->fch16 = dt_calloc((size_t)L, sizeof *m->fch16);
        m->gelu16 = dt_calloc((size_t)L, sizeof *m->gelu16);
    }
    free(m->arena);
    free(m->tok);
    free(m->tgt);
    const size_t n = layout(m, B, NULL);
    m->arena = dt_falloc(n);
    layout(m, B, m->arena);
    m->tok = dt_calloc((size_t)B * m->c.block, sizeof *m->tok);
    m->tgt = dt_calloc((size_t)B * m->c.block, sizeof *m->tgt);
    m->Bcap = B;
}

static const float *tensor(const dt_gpt *m, const float *params, int k)
{
    return params + m->tv[k].offset;
}
static const float *blockp(const dt_gpt *m, const float *params, int l, int kind)
{
    return params + m->tv[2 + T_PER_BLOCK * l + kind].offset;
}
static float *blockg(const dt_gpt *m, float *grads, int l, int kind)
{
    return grads + m->tv[2 + T_PER_BLOCK * l + kind].offset;
}

/* Weight W (out, in) rounded to bf16 into w16, for the product about to read it. */
static const dt_bf16 *w16_of(dt_gpt *m, const float *W, int in, int out)
{
    bf16_from_f32((size_t)out * in, W, m->w16);
    return m->w16;
}

/* bf16 scratch at base + off floats, off rounded up to a 64-byte line */
static dt_bf16 *b16_at(float *base, size_t off)
{
    return (dt_bf16 *)(base + ((off + 15) & ~(size_t)15));
}

/* A linear layer's forward in the model's precision, weight W (out, in). In
 * bf16, x (N, in <= 4C) is rounded into dln and dqkv, which only the
 * backward uses: (N, 4C) floats, twice what the rounding needs; x NULL: the
 * LayerNorm before it left its output rounded there. */
static void linear_fwd(dt_gpt *m, int N, int in, int out, const float *x,
                       const float *W, const float *b, float *y)
{
    if (m->w16)
        matmul_forward_bf16(N, in, out, x, w16_of(m, W, in, out), b, y, (dt_bf16 *)m->dln);
    else
        matmul_forward(N, in, out, x, W, b, y);
}

/* Its backward; in bf16, x16 and dy16 are where the caller found room for
 * x (N, in) and dy (N, out) rounded. */
static void linear_bwd(dt_gpt *m, int N, int in, int out, const float *x,
                       const float *W, const float *dy, float *dx, float *dW, float *db,
                       dt_bf16 *x16, dt_bf16 *dy16)
{
    if (m->w16)
        matmul_backward_bf16(N, in, out, x, dx ? w16_of(m, W, in, out) : NULL, dy, dx, dW, db,
                             x16, dy16);
    else
        matmul_backward(N, in, out, x, W, dy, dx, dW, db);
}

double gpt_forward(dt_gpt *m, const float *params, const int32_t *tokens, const int32_t *targets,
                   int B, int train, uint64_t key, int64_t *correct)
{
    gpt_reserve(m, B);
    const int L = m->c.n_layer, T = m->c.block, C = m->c.n_embd, V = m->c.vocab,
              NH = m->c.n_head, N = B * T;
    for (int i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V || targets[i] < 0 || targets[i] >= V)
            DT_FATAL("gpt_forward: position %d holds token %d, target %d: outside the "
                     "vocabulary [0, %d)", i, (int)tokens[i], (int)targets[i], V);
    memcpy(m->tok, tokens, (size_t)N * sizeof *tokens);
    memcpy(m->tgt, targets, (size_t)N * sizeof *targets);
    m->B = B;
    m->train = train;
    m->key = key;
    const float p = train ? m->c.dropout : 0.0f;
    const float *wte = tensor(m, params, 0), *wpe = tensor(m, params, 1);

    embedding_forward(B, T, C, m->tok, wte, wpe, p, rng_key(key, (uint64_t)L, SITE_EMB, 0),
                      m->res[0]);
    // in bf16 each LayerNorm also leaves its output rounded in dln, where the
    // product after it reads it (lnx NULL), instead of that product rounding it
    dt_bf16 *ln16 = m->w16 ? (dt_bf16 *)m->dln : NULL;
    const float *lnx = m->w16 ? NULL : m->ln;
    layernorm_forward(N, C, m->res[0], blockp(m, params, 0, T_LN1W), blockp(m, params, 0, T_LN1B),
                      m->ln, ln16, m->ln1m[0], m->ln1r[0]);
    for (int l = 0; l < L; l++) {
#define W(kind) blockp(m, params, l, kind)
        // c_attn's bias is added by the attention as it copies each head's q, k
        // and v, where it can (qkv_bias)
        linear_fwd(m, N, C, 3 * C, lnx, W(T_QKVW), qkv_bias(m) ? NULL : W(T_QKVB), m->qkv[l]);
        // in bf16 the output passes through ln (free until ln_2) into atty16
        float *att_out = m->w16 ? m->ln : m->atty[l];
        if (qkv_bias(m))
            attention_bias_forward(B, T, C, NH, m->qkv[l], W(T_QKVB), att_out, m->lse_att[l],
                                   m->probs[l], p, rng_key(key, (uint64_t)l, SITE_ATT, 0),
                                   m->attw, m->nwork);
        else
            (m->w16 ? attention_forward_bf16 : attention_forward)(
                B, T, C, NH, m->qkv[l], att_out, m->lse_att[l], m->probs[l], p,
                rng_key(key, (uint64_t)l, SITE_ATT, 0), m->attw, m->nwork);
        // the branch's output lands in mid[l] without c_proj's bias, then
        // mid[l] = res[l] + dropout(branch + bias) on the way into ln_2
        if (m->w16) {
            bf16_from_f32((size_t)N * C, att_out, m->atty16[l]);
            matmul_forward_bf16(N, C, C, NULL, w16_of(m, W(T_APW), C, C), NULL, m->mid[l],
                                m->atty16[l]);
        } else
            matmul_forward(N, C, C, att_out, W(T_APW), NULL, m->mid[l]);
        layernorm_bias_residual_forward(N, C, m->res[l], m->mid[l], W(T_APB), p,
                                        rng_key(key, (uint64_t)l, SITE_ATT_RES, 0), W(T_LN2W),
                                        W(T_LN2B), m->mid[l], m->ln, ln16, m->ln2m[l],
                                        m->ln2r[l]);
        if (m->w16) {
            // c_fc's output rounded is kept (fch16), and gelu of it, rounded: c_proj's
            // operand in the forward and in its weight gradient (gelu16)
            linear_fwd(m, N, C, 4 * C, lnx, W(T_FCW), W(T_FCB), m->h4);
            gelu_forward_bf16((size_t)N * 4 * C, m->h4, m->fch16[l], m->gelu16[l]);
            matmul_forward_bf16(N, 4 * C, C, NULL, w16_of(m, W(T_FPW), 4 * C, C), NULL,
                                m->res[l + 1], m->gelu16[l]);
        } else {
            // c_fc's bias is added by GELU, which reads c_fc's output once anyway
            linear_fwd(m, N, C, 4 * C, m->ln, W(T_FCW), NULL, m->fch[l]);
            gelu_bias_forward(N, 4 * C, m->fch[l], W(T_FCB), m->h4);
            linear_fwd(m, N, 4 * C, C, m->h4, W(T_FPW), NULL, m->res[l + 1]);
        }
        // the next LayerNorm (the next block's ln_1, or ln_f), c_proj's bias added
        // on the way in as above
        const int last = l == L - 1;
        const float *g = last ? tensor(m, params, m->ntensors - 2) : blockp(m, params, l + 1, T_LN1W);
        const float *b = last ? tensor(m, params, m->ntensors - 1) : blockp(m, params, l + 1, T_LN1B);
        layernorm_bias_residual_forward(N, C, m->mid[l], m->res[l + 1], W(T_FPB), p,
                                        rng_key(key, (uint64_t)l, SITE_MLP_RES, 0), g, b,
                                        m->res[l + 1], m->ln, ln16,
                                        last ? m->lnfm : m->ln1m[l + 1],
                                        last ? m->lnfr : m->ln1r[l + 1]);
#undef W
    }
    // logits (N, V) = ln_f(x) (N, C) wte^T (C, V)
    linear_fwd(m, N, C, V, lnx, wte, NULL, m->logits);
    const double sum = xent_seq_forward(N, V, m->logits, m->tgt, m->lse, correct);
    return sum / N;
}

/* dtmp = dres through a residual branch's dropout (p > 0), or dres itself. */
static const float *branch_grad(dt_gpt *m, size_t n, float p, uint64_t key)
{
    if (p <= 0.0f)
        return m->dres;
    for (size_t i = 0; i < n; i++)
        m->dtmp[i] = m->dres[i] * dropout_factor(key, i, p);
    return m->dtmp;
}

void gpt_backward(dt_gpt *m, const float *params, float *grads)
{
    const int L = m->c.n_layer, T = m->c.block, C = m->c.n_embd, V = m->c.vocab,
              NH = m->c.n_head, B = m->B, N = B * T;
    const float p = m->train ? m->c.dropout : 0.0f;
    const uint64_t key = m->key;
    const float *wte = tensor(m, params, 0);
    float *dwte = grads + m->tv[0].offset, *dwpe = grads + m->tv[1].offset;
    const int kf = m->ntensors - 2; // ln_f.weight, then ln_f.bias

    // the logits become their gradient in place
    xent_seq_backward(N, V, m->logits, m->lse, m->tgt, 1.0f / (float)N, m->logits);
    // in bf16 each recomputed LayerNorm output is left rounded where the product
    // after it reads it (lnx NULL)
    const float *lnx = m->w16 ? NULL : m->ln;
    layernorm_apply(N, C, m->res[L], m->lnfm, m->lnfr, tensor(m, params, kf),
                    tensor(m, params, kf + 1), m->ln, m->w16 ? (dt_bf16 *)m->dtmp : NULL);
    // dwte (V, C) = dlogits^T ln (written; the embedding adds later), dln = dlogits wte.
    // bf16 scratch of the products below, in buffers free at that product: here
    // ln in dtmp, dlogits in h4 ((N, 4C) floats hold (N, 8C) bf16) or head16
    const size_t NC = (size_t)N * C;
    linear_bwd(m, N, C, V, lnx, wte, m->logits, m->dln, dwte, NULL, (dt_bf16 *)m->dtmp,
               m->head16 ? m->head16 : (dt_bf16 *)m->h4);
    layernorm_backward(N, C, m->res[L], m->lnfm, m->lnfr, tensor(m, params, kf), m->dln, m->dres,
                       0, grads + m->tv[kf].offset, grads + m->tv[kf + 1].offset);
    for (int l = L - 1; l >= 0; l--) {
#define W(kind) blockp(m, params, l, kind)
#define G(kind) blockg(m, grads, l, kind)
        // MLP branch: res[l+1] = mid[l] + dropout(c_proj(gelu(c_fc(ln_2(mid[l])))))
        const float *dbr = branch_grad(m, (size_t)N * C, p, rng_key(key, (uint64_t)l, SITE_MLP_RES, 0));
        float *gd = m->dln; // (N, 4C): dln and dqkv, free until c_fc's input gradient
        if (m->w16) {
            // c_proj's dW from the kept gelu16, dbr rounded into ln (free until
            // ln_2 below); the input gradient into h4, then through gelu's backward
            // from the kept pre-activation, also rounded into dqkv for c_fc's
            // products below
            linear_bwd(m, N, 4 * C, C, NULL, W(T_FPW), dbr, m->h4, G(T_FPW), G(T_FPB),
                       m->gelu16[l], (dt_bf16 *)m->ln);
            gelu_backward_bf16(4 * NC, m->fch16[l], m->h4, m->h4, (dt_bf16 *)m->dqkv);
        } else {
            // c_proj's input gradient into h4; GELU's backward recomputes its output
            // into gd, c_proj's dW operand, and turns h4 into c_fc's output gradient
            matmul_backward(N, 4 * C, C, NULL, W(T_FPW), dbr, m->h4, NULL, NULL);
            gelu_bias_backward(N, 4 * C, m->fch[l], W(T_FCB), gd, m->h4);
            matmul_backward(N, 4 * C, C, gd, W(T_FPW), dbr, NULL, G(T_FPW), G(T_FPB));
        }
        layernorm_apply(N, C, m->mid[l], m->ln2m[l], m->ln2r[l], W(T_LN2W), W(T_LN2B), m->ln,
                        m->w16 ? b16_at(m->dqkv, 2 * NC) : NULL);
        // bf16: h4's gradient is in dqkv already (free until the attention's
        // backward), ln rounded after it
        if (m->w16) {
            matmul_bias_backward(N, 4 * C, m->h4, G(T_FCB));
            matmul_backward_bf16(N, C, 4 * C, NULL, w16_of(m, W(T_FCW), C, 4 * C), NULL,
                                 m->dln, G(T_FCW), NULL, b16_at(m->dqkv, 2 * NC),
                                 (dt_bf16 *)m->dqkv);
        } else
            matmul_backward(N, C, 4 * C, m->ln, W(T_FCW), m->h4, m->dln, G(T_FCW), G(T_FCB));
        layernorm_backward(N, C, m->mid[l], m->ln2m[l], m->ln2r[l], W(T_LN2W), m->dln, m->dres, 1,
                           G(T_LN2W), G(T_LN2B));
        // attention branch: mid[l] = res[l] + dropout(c_proj(attn(c_attn(ln_1(res[l])))))
        dbr = branch_grad(m, (size_t)N * C, p, rng_key(key, (uint64_t)l, SITE_ATT_RES, 0));
        if (m->w16)
            matmul_backward_bf16(N, C, C, NULL, w16_of(m, W(T_APW), C, C), dbr, m->dln,
                                 G(T_APW), G(T_APB), m->atty16[l], (dt_bf16 *)m->h4);
        else
            matmul_backward(N, C, C, m->atty[l], W(T_APW), dbr, m->dln, G(T_APW), G(T_APB));
        if (qkv_bias(m))
            attention_bias_backward(B, T, C, NH, m->qkv[l], W(T_QKVB), m->lse_att[l],
                                    m->probs[l], m->dln, p, rng_key(key, (uint64_t)l, SITE_ATT, 0),
                                    m->dqkv, m->attw, m->nwork);
        else
            (m->w16 ? attention_backward_bf16 : attention_backward)(
                B, T, C, NH, m->qkv[l], m->lse_att[l], m->probs[l], m->dln, p,
                rng_key(key, (uint64_t)l, SITE_ATT, 0), m->dqkv, m->attw, m->nwork);
        layernorm_apply(N, C, m->res[l], m->ln1m[l], m->ln1r[l], W(T_LN1W), W(T_LN1B), m->ln,
                        m->w16 ? b16_at(m->h4, 2 * NC) : NULL);
        // bf16: dqkv rounded into h4 (free until the next block's MLP), ln after it
        linear_bwd(m, N, C, 3 * C, lnx, W(T_QKVW), m->dqkv, m->dln, G(T_QKVW), G(T_QKVB),
                   b16_at(m->h4, 2 * NC), (dt_bf16 *)m->h4);
        layernorm_backward(N, C, m->res[l], m->ln1m[l], m->ln1r[l], W(T_LN1W), m->dln, m->dres, 1,
                           G(T_LN1W), G(T_LN1B));
#undef W
#undef G
    }
    embedding_backward(B, T, C, m->tok, m->dres, p, rng_key(key, (uint64_t)L, SITE_EMB, 0), dwte,
                       dwpe);
}

const float *gpt_logits(const dt_gpt *m) { return m->logits; }

void gpt_free(dt_gpt *m)
{
    if (!m)
        return;
    free(m->arena);
    free(m->tok);
    free(m->tgt);
    free(m->res);
    free(m->mid);
    free(m->qkv);
    free(m->atty);
    free(m->atty16);
    free(m->fch);
    free(m->fch16);
    free(m->gelu16);
    free(m->lse_att);
    free(m->probs);
    free(m->ln1m);
    free(m->ln1r);
    free(m->ln2m);
    free(m->ln2r);
    free(m->tv);
    free(m->w16);
    free(m);
}
