/* The GPT through a backend's kernel table: models/gpt_backend.h.
 *
 * What the forward keeps per block (N = B T positions, C channels), all in
 * the backend's memory: the block's input (C), x after the attention branch
 * (C), qkv (3C), the attention's output before its projection (C), the MLP's
 * pre-activation (4C), the LayerNorm statistics and the attention's row
 * log-sum-exps. The backward recomputes each LayerNorm output from its kept
 * statistics, GELU's output and derivative from the pre-activation, and the
 * attention probabilities (the backend's attention never keeps them). The
 * backend's linear backward ADDS the input gradient (backend/backend.h), so
 * each is zeroed before.
 *
 * A training step queued as one piece (gpt_be_train_queue) reads nothing
 * back until gpt_be_train_result sums the loss rows, so on a backend that
 * records (CUDA graphs, backend/step_graphs.h) it is recorded once and
 * replayed. The dropout kernels read their keys from the backend's memory
 * (keys, written before each step), so a replay draws each step's masks. */
#include "models/gpt_backend.h"

#include <stdlib.h>

#include "backend/step_graphs.h"
#include "core/error.h"
#include "core/rng.h"

struct dt_gpt_be {
    dt_gpt_config c;
    const dt_backend *be;
    dt_gpt *shape;       /* the tensor table (models/gpt.c) */
    int Bcap, B, train;
    float *arena;        /* one backend allocation */
    uint64_t *keys, *keys_host; /* the step's dropout keys (key_of): arena, host staging */
    /* kept by the forward */
    float **res;         /* n_layer + 1 of (N, C) */
    float **mid, **qkv, **atty, **fch, **lse_att;
    float **ln1m, **ln1r, **ln2m, **ln2r;
    float *lnfm, *lnfr, *logits, *lse;
    void *rows;          /* the loss rows: DT_XENT_ROWS_BYTES(N) */
    int32_t *tok, *tgt;  /* (N) the batch's copies */
    /* scratch */
    float *ln;           /* (N, C) a LayerNorm output */
    float *h4, *dh4;     /* (N, 4C) GELU's output, and its gradient */
    float *dres, *dtmp, *dln, *dqkv; /* dln then dqkv: (N, 4C) together, GELU's derivative */
    float *work;         /* the linear kernels' scratch (linear_workspace), or NULL */
    int32_t *htok;       /* (N) host copy of the tokens and targets, for the check */
    int graphs;          /* 1: queued steps recorded and replayed */
    uint64_t gen;        /* bumped when the arena moves: records name the old one */
    dt_step_graphs rec;
};

/* the dropout keys of a step: four sites (models/gpt.h's SITE_*) for each
 * block and one more row, whose SITE_EMB is the embeddings' */
static size_t nkeys(const dt_gpt_be *m) { return 4 * ((size_t)m->c.n_layer + 1); }

static const uint64_t *key_of(const dt_gpt_be *m, int l, int site)
{
    return m->keys + 4 * (size_t)l + (size_t)site;
}

dt_gpt_be *gpt_be_create(const dt_gpt_config *c, const dt_backend *be)
{
    if (c->precision != be->precision) {
        dt_err_set("gpt: precision %d asked of the %s backend, whose products run at %d",
                   c->precision, be->name, be->precision);
        return NULL;
    }
    if (!be->linear_forward || !be->linear_backward || !be->embedding_forward ||
        !be->embedding_backward || !be->layernorm_forward || !be->layernorm_residual_forward ||
        !be->layernorm_apply || !be->layernorm_backward || !be->attention_forward ||
        !be->attention_backward || !be->gelu_forward || !be->gelu_forward_deriv ||
        !be->gelu_backward_deriv || !be->xent_seq_rows || !be->xent_seq_backward ||
        !be->branch_dropout_grad || !be->softmax_xent_sum) {
        dt_err_set("gpt: the %s backend lacks the GPT's kernels", be->name);
        return NULL;
    }
    // the shape only: the backend's linear kernels do the products at its precision
    dt_gpt_config fp32 = *c;
    fp32.precision = DT_PREC_FP32;
    dt_gpt *shape = gpt_create(&fp32);
    if (!shape)
        return NULL;
    dt_gpt_be *m = dt_calloc(1, sizeof *m);
    m->c = *c;
    m->be = be;
    m->shape = shape;
    const size_t L = (size_t)c->n_layer;
    m->keys_host = be->host_alloc(nkeys(m) * sizeof *m->keys_host);
    m->res = dt_calloc(L + 1, sizeof *m->res);
    float ***lists[] = { &m->mid, &m->qkv, &m->atty, &m->fch, &m->lse_att,
                         &m->ln1m, &m->ln1r, &m->ln2m, &m->ln2r };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        *lists[i] = dt_calloc(L, sizeof **lists[i]);
    return m;
}

const dt_gpt *gpt_be_shape(const dt_gpt_be *m) { return m->shape; }

/* n floats at *at of the arena (base NULL: only count), 64-byte aligned */
static float *carve(float *base, size_t *at, size_t n)
{
    float *p = base ? base + *at : NULL;
    *at += (n + 15) & ~(size_t)15;
    return p;
}

static size_t layout(dt_gpt_be *m, int B, float *a)
{
    const int L = m->c.n_layer;
    const size_t N = (size_t)B * m->c.block, C = (size_t)m->c.n_embd, V = (size_t)m->c.vocab;
    size_t at = 0;
    for (int l = 0; l <= L; l++)
        m->res[l] = carve(a, &at, N * C);
    for (int l = 0; l < L; l++) {
        m->mid[l] = carve(a, &at, N * C);
        m->qkv[l] = carve(a, &at, N * 3 * C);
        m->atty[l] = carve(a, &at, N * C);
        m->fch[l] = carve(a, &at, N * 4 * C);
        m->lse_att[l] = carve(a, &at, N * (size_t)m->c.n_head);
        m->ln1m[l] = carve(a, &at, N);
        m->ln1r[l] = carve(a, &at, N);
        m->ln2m[l] = carve(a, &at, N);
        m->ln2r[l] = carve(a, &at, N);
    }
    m->lnfm = carve(a, &at, N);
    m->lnfr = carve(a, &at, N);
    m->logits = carve(a, &at, N * V);
    m->lse = carve(a, &at, N);
    m->keys = (uint64_t *)carve(a, &at, 2 * nkeys(m));
    m->rows = carve(a, &at, (DT_XENT_ROWS_BYTES(N) + sizeof(float) - 1) / sizeof(float));
    m->tok = (int32_t *)carve(a, &at, N);
    m->tgt = (int32_t *)carve(a, &at, N);
    m->ln = carve(a, &at, N * C);
    m->h4 = carve(a, &at, N * 4 * C);
    m->dh4 = carve(a, &at, N * 4 * C);
    m->dres = carve(a, &at, N * C);
    m->dtmp = carve(a, &at, N * C);
    m->dln = carve(a, &at, N * C);
    m->dqkv = carve(a, &at, N * 3 * C);
    m->work = NULL;
    if (m->be->linear_workspace) {
        const int Bn = (int)N, c = (int)C, v = (int)V;
        const int shapes[][2] = { { c, 3 * c }, { c, c }, { c, 4 * c }, { 4 * c, c }, { c, v } };
        size_t w = 0;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const size_t s = m->be->linear_workspace(Bn, shapes[i][0], shapes[i][1]);
            w = s > w ? s : w;
        }
        m->work = w ? carve(a, &at, w) : NULL;
    }
    return at;
}

void gpt_be_reserve(dt_gpt_be *m, int B)
{
    if (B <= m->Bcap)
        return;
    if (m->arena) {
        m->be->mem_free(m->arena);
        m->be->host_free(m->htok);
    }
    const size_t n = layout(m, B, NULL);
    m->arena = m->be->mem_alloc(n * sizeof(float));
    layout(m, B, m->arena);
    m->htok = m->be->host_alloc((size_t)B * m->c.block * sizeof *m->htok);
    m->Bcap = B;
    m->gen++;
}

/* tokens or targets (N, backend memory) inside [0, V), checked on a host copy */
static void check_vocab(dt_gpt_be *m, const int32_t *t, int N, const char *what)
{
    m->be->to_host(m->htok, t, (size_t)N * sizeof *t);
    for (int i = 0; i < N; i++)
        if (m->htok[i] < 0 || m->htok[i] >= m->c.vocab)
            DT_FATAL("gpt_forward: position %d holds %s %d: outside the vocabulary [0, %d)", i,
                     what, (int)m->htok[i], m->c.vocab);
}

static const float *tensor(const dt_gpt_be *m, const float *params, int k)
{
    return params + gpt_tensors(m->shape)[k].offset;
}

/* The forward's kernels from the batch in tok, tgt (m->B, m->train and the
 * keys set) up to the loss rows */
static void forward_kernels(dt_gpt_be *m, const float *params)
{
    const dt_backend *be = m->be;
    const int L = m->c.n_layer, T = m->c.block, C = m->c.n_embd, V = m->c.vocab,
              NH = m->c.n_head, B = m->B, N = B * T;
    const float p = m->train ? m->c.dropout : 0.0f;
    const int kf = gpt_ntensors(m->shape) - 2; /* ln_f.weight, then ln_f.bias */
#define W(l, kind) tensor(m, params, 2 + T_PER_BLOCK * (l) + (kind))
    be->embedding_forward(B, T, C, m->tok, tensor(m, params, 0), tensor(m, params, 1), p,
                          key_of(m, L, SITE_EMB), m->res[0]);
    be->layernorm_forward(N, C, m->res[0], W(0, T_LN1W), W(0, T_LN1B), m->ln, m->ln1m[0],
                          m->ln1r[0]);
    for (int l = 0; l < L; l++) {
        // x after the attention branch: mid = res + dropout(c_proj(attn(c_attn(ln_1(res)))))
        be->linear_forward(N, C, 3 * C, m->ln, W(l, T_QKVW), W(l, T_QKVB), m->qkv[l], m->work);
        be->attention_forward(B, T, C, NH, m->qkv[l], m->atty[l], m->lse_att[l], p,
                              key_of(m, l, SITE_ATT));
        be->linear_forward(N, C, C, m->atty[l], W(l, T_APW), W(l, T_APB), m->mid[l], m->work);
        be->layernorm_residual_forward(N, C, m->res[l], m->mid[l], p,
                                       key_of(m, l, SITE_ATT_RES), W(l, T_LN2W),
                                       W(l, T_LN2B), m->mid[l], m->ln, m->ln2m[l], m->ln2r[l]);
        // the MLP branch: res[l+1] = mid + dropout(c_proj(gelu(c_fc(ln_2(mid)))))
        be->linear_forward(N, C, 4 * C, m->ln, W(l, T_FCW), W(l, T_FCB), m->fch[l], m->work);
        be->gelu_forward((size_t)N * 4 * C, m->fch[l], m->h4);
        be->linear_forward(N, 4 * C, C, m->h4, W(l, T_FPW), W(l, T_FPB), m->res[l + 1], m->work);
        // then the next LayerNorm: the next block's ln_1, or ln_f
        const int last = l == L - 1;
        be->layernorm_residual_forward(
            N, C, m->mid[l], m->res[l + 1], p, key_of(m, l, SITE_MLP_RES),
            last ? tensor(m, params, kf) : W(l + 1, T_LN1W),
            last ? tensor(m, params, kf + 1) : W(l + 1, T_LN1B), m->res[l + 1], m->ln,
            last ? m->lnfm : m->ln1m[l + 1], last ? m->lnfr : m->ln1r[l + 1]);
    }
    // logits (N, V) = ln_f(x) wte^T, the head tied to the token embedding
    be->linear_forward(N, C, V, m->ln, tensor(m, params, 0), NULL, m->logits, m->work);
    be->xent_seq_rows(N, V, m->logits, m->tgt, m->lse, m->rows);
#undef W
}

/* the batch's mean loss from the rows, and the hits */
static double loss_mean(dt_gpt_be *m, int64_t *correct)
{
    int hits = 0;
    const int N = m->B * m->c.block;
    const double loss = m->be->softmax_xent_sum(N, m->c.vocab, m->rows, &hits);
    if (correct)
        *correct = hits;
    return loss;
}

/* The batch into the model's copies, and a training step's dropout keys into
 * the backend's memory (a copy that waits): outside any record, whose kernels
 * read the copies and the keys, so one record serves every batch buffer */
static void take_batch(dt_gpt_be *m, const int32_t *tokens, const int32_t *targets, int B,
                       int train, uint64_t key)
{
    const size_t N = (size_t)B * m->c.block;
    m->be->mem_copy(m->tok, tokens, N * sizeof *tokens);
    m->be->mem_copy(m->tgt, targets, N * sizeof *targets);
    m->B = B;
    m->train = train;
    if (train && m->c.dropout > 0.0f) {
        for (int l = 0; l <= m->c.n_layer; l++)
            for (int site = 0; site < 4; site++)
                m->keys_host[4 * l + site] = rng_key(key, (uint64_t)l, (uint64_t)site, 0);
        m->be->to_backend(m->keys, m->keys_host, nkeys(m) * sizeof *m->keys);
    }
}

double gpt_be_forward(dt_gpt_be *m, const float *params, const int32_t *tokens,
                      const int32_t *targets, int B, int train, uint64_t key, int64_t *correct)
{
    gpt_be_reserve(m, B);
    const int N = B * m->c.block;
    check_vocab(m, tokens, N, "token");
    check_vocab(m, targets, N, "target");
    take_batch(m, tokens, targets, B, train, key);
    forward_kernels(m, params);
    return loss_mean(m, correct);
}

/* A residual branch's output gradient: dres through the branch's dropout */
static const float *branch_grad(dt_gpt_be *m, size_t n, float p, const uint64_t *key)
{
    if (p <= 0.0f)
        return m->dres;
    m->be->branch_dropout_grad(n, m->dres, p, key, m->dtmp);
    return m->dtmp;
}

void gpt_be_backward(dt_gpt_be *m, const float *params, float *grads)
{
    const dt_backend *be = m->be;
    const int L = m->c.n_layer, T = m->c.block, C = m->c.n_embd, V = m->c.vocab,
              NH = m->c.n_head, B = m->B, N = B * T;
    const size_t NC = (size_t)N * C;
    const float p = m->train ? m->c.dropout : 0.0f;
    const dt_tensor_view *tv = gpt_tensors(m->shape);
    const int kf = gpt_ntensors(m->shape) - 2;
    float *dwte = grads + tv[0].offset, *dwpe = grads + tv[1].offset;
    float *gd = m->dln; /* (N, 4C): dln and dqkv, free from GELU's recompute to c_fc's dx */
#define W(l, kind) tensor(m, params, 2 + T_PER_BLOCK * (l) + (kind))
#define G(l, kind) (grads + tv[2 + T_PER_BLOCK * (l) + (kind)].offset)

    // the logits become their gradient in place
    be->xent_seq_backward(N, V, m->logits, m->lse, m->tgt, 1.0f / (float)N, m->logits);
    be->layernorm_apply(N, C, m->res[L], m->lnfm, m->lnfr, tensor(m, params, kf),
                        tensor(m, params, kf + 1), m->ln);
    // dwte = dlogits^T ln (written; the embedding's backward adds to it), dln = dlogits wte
    be->mem_zero(m->dln, NC * sizeof(float));
    be->linear_backward(N, C, V, m->ln, tensor(m, params, 0), m->logits, m->dln, dwte, NULL,
                        m->work);
    be->layernorm_backward(N, C, m->res[L], m->lnfm, m->lnfr, tensor(m, params, kf), m->dln,
                           m->dres, 0, grads + tv[kf].offset, grads + tv[kf + 1].offset);
    for (int l = L - 1; l >= 0; l--) {
        // the MLP branch
        const float *dbr = branch_grad(m, NC, p, key_of(m, l, SITE_MLP_RES));
        be->gelu_forward_deriv(4 * NC, m->fch[l], m->h4, gd);
        be->mem_zero(m->dh4, 4 * NC * sizeof(float));
        be->linear_backward(N, 4 * C, C, m->h4, W(l, T_FPW), dbr, m->dh4, G(l, T_FPW),
                            G(l, T_FPB), m->work);
        be->gelu_backward_deriv(4 * NC, gd, m->dh4);
        be->layernorm_apply(N, C, m->mid[l], m->ln2m[l], m->ln2r[l], W(l, T_LN2W), W(l, T_LN2B),
                            m->ln);
        be->mem_zero(m->dln, NC * sizeof(float));
        be->linear_backward(N, C, 4 * C, m->ln, W(l, T_FCW), m->dh4, m->dln, G(l, T_FCW),
                            G(l, T_FCB), m->work);
        be->layernorm_backward(N, C, m->mid[l], m->ln2m[l], m->ln2r[l], W(l, T_LN2W), m->dln,
                               m->dres, 1, G(l, T_LN2W), G(l, T_LN2B));
        // the attention branch
        dbr = branch_grad(m, NC, p, key_of(m, l, SITE_ATT_RES));
        be->mem_zero(m->dln, NC * sizeof(float));
        be->linear_backward(N, C, C, m->atty[l], W(l, T_APW), dbr, m->dln, G(l, T_APW),
                            G(l, T_APB), m->work);
        be->attention_backward(B, T, C, NH, m->qkv[l], m->lse_att[l], m->dln, p,
                               key_of(m, l, SITE_ATT), m->dqkv);
        be->layernorm_apply(N, C, m->res[l], m->ln1m[l], m->ln1r[l], W(l, T_LN1W), W(l, T_LN1B),
                            m->ln);
        be->mem_zero(m->dln, NC * sizeof(float));
        be->linear_backward(N, C, 3 * C, m->ln, W(l, T_QKVW), m->dqkv, m->dln, G(l, T_QKVW),
                            G(l, T_QKVB), m->work);
        be->layernorm_backward(N, C, m->res[l], m->ln1m[l], m->ln1r[l], W(l, T_LN1W), m->dln,
                               m->dres, 1, G(l, T_LN1W), G(l, T_LN1B));
    }
    be->embedding_backward(B, T, C, m->tok, m->dres, p, key_of(m, L, SITE_EMB),
                           dwte, dwpe);
#undef W
#undef G
}

int gpt_be_use_graphs(dt_gpt_be *m, int on)
{
    const int can = step_graphs_supported(m->be);
    m->graphs = on && can;
    return can;
}

int gpt_be_recorded(const dt_gpt_be *m) { return step_graphs_live(&m->rec); }

typedef struct {
    dt_gpt_be *m;
    const float *params;
    float *grads;
} step_args;

static void step_kernels(void *ctx)
{
    const step_args *a = ctx;
    forward_kernels(a->m, a->params);
    gpt_be_backward(a->m, a->params, a->grads);
}

void gpt_be_train_queue(dt_gpt_be *m, const float *params, const int32_t *tokens,
                        const int32_t *targets, int B, uint64_t key, float *grads)
{
    gpt_be_reserve(m, B);
    step_args a = { m, params, grads };
    take_batch(m, tokens, targets, B, 1, key);
    if (!m->graphs) {
        step_kernels(&a);
        return;
    }
    const void *ptr[DT_STEP_GRAPH_PTRS] = { params, grads, NULL, NULL, NULL };
    (void)step_graphs_queue(&m->rec, m->be, ptr, B, m->gen, step_kernels, &a);
}

double gpt_be_train_result(dt_gpt_be *m, int64_t *correct, int64_t *count)
{
    if (count)
        *count = (int64_t)m->B * m->c.block;
    return loss_mean(m, correct);
}

void gpt_be_free(dt_gpt_be *m)
{
    if (!m)
        return;
    step_graphs_free(&m->rec, m->be);
    m->be->host_free(m->keys_host);
    if (m->arena) {
        m->be->mem_free(m->arena);
        m->be->host_free(m->htok);
    }
    float **lists[] = { m->mid, m->qkv, m->atty, m->fch, m->lse_att,
                        m->ln1m, m->ln1r, m->ln2m, m->ln2r, m->res };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        free(lists[i]);
    gpt_free(m->shape);
    free(m);
}
