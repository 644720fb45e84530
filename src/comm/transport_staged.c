/* A host transport (MPI) carrying vectors that live in a device backend's
 * memory: each buffer goes through host memory from the backend's
 * host_alloc (page-locked on CUDA), down before the transfer and up after.
 * Collectives share one staging buffer; each pending send or receive has its
 * own until its waitall, from a pool that is reused step after step (a
 * gossip step wants the same few buffers each time: page-locked allocations
 * are slow) and grows on demand. See comm/transport.h. */
#include <stdlib.h>

#include "comm/transport.h"
#include "core/error.h"

typedef struct staged_op {
    const dt_request *req; /* the caller's request, matched at waitall */
    float *buf;            /* the caller's (backend) buffer */
    int slot;              /* its host buffer: pool[slot] */
    size_t n;
    int recv;
} staged_op;

typedef struct pool_buf {
    float *host;           /* (n) from be->host_alloc */
    size_t n;
    int busy;              /* lent to a pending op */
} pool_buf;

typedef struct staged {
    dt_transport base; /* first: a dt_transport * is a staged * */
    dt_transport *inner;
    const dt_backend *be;
    float *host;       /* collectives' staging, host_n floats */
    size_t host_n;
    staged_op *ops;
    int nops, cap;
    pool_buf *pool;    /* host buffers of the pending ops, kept across steps */
    int npool;
} staged;

static float *host_of(staged *s, size_t n)
{
    if (n > s->host_n) {
        s->be->host_free(s->host);
        s->host = s->be->host_alloc(n * sizeof(float));
        s->host_n = n;
    }
    return s->host;
}

static void st_allreduce_sum(dt_transport *b, float *buf, size_t n)
{
    staged *s = (staged *)b;
    float *h = host_of(s, n);
    s->be->to_host(h, buf, n * sizeof(float));
    s->inner->allreduce_sum(s->inner, h, n);
    s->be->to_backend(buf, h, n * sizeof(float));
}

static void st_reduce_sum(dt_transport *b, float *buf, size_t n, int root)
{
    staged *s = (staged *)b;
    float *h = host_of(s, n);
    s->be->to_host(h, buf, n * sizeof(float));
    s->inner->reduce_sum(s->inner, h, n, root);
    if (b->rank == root) /* elsewhere buf is unchanged */
        s->be->to_backend(buf, h, n * sizeof(float));
}

static void st_bcast(dt_transport *b, float *buf, size_t n, int root)
{
    staged *s = (staged *)b;
    float *h = host_of(s, n);
    if (b->rank == root)
        s->be->to_host(h, buf, n * sizeof(float));
    s->inner->bcast(s->inner, h, n, root);
    if (b->rank != root)
        s->be->to_backend(buf, h, n * sizeof(float));
}

/* A free pool buffer of at least n floats: the smallest that fits, else a
 * free one grown to n, else a new one. */
static int pool_take(staged *s, size_t n)
{
    int fit = -1, spare = -1;
    for (int i = 0; i < s->npool; i++) {
        if (s->pool[i].busy)
            continue;
        if (s->pool[i].n >= n && (fit < 0 || s->pool[i].n < s->pool[fit].n))
            fit = i;
        spare = i;
    }
    if (fit < 0 && spare >= 0) {
        fit = spare;
        s->be->host_free(s->pool[fit].host);
        s->pool[fit].host = s->be->host_alloc(n * sizeof(float));
        s->pool[fit].n = n;
    }
    if (fit < 0) {
        s->pool = dt_realloc(s->pool, (size_t)(s->npool + 1) * sizeof *s->pool);
        fit = s->npool++;
        s->pool[fit] = (pool_buf){ s->be->host_alloc(n * sizeof(float)), n, 0 };
    }
    s->pool[fit].busy = 1;
    return fit;
}

static staged_op *push_op(staged *s, const dt_request *r, float *buf, size_t n, int recv)
{
    if (s->nops == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->ops = dt_realloc(s->ops, (size_t)s->cap * sizeof *s->ops);
    }
    staged_op *o = &s->ops[s->nops++];
    *o = (staged_op){ r, buf, pool_take(s, n), n, recv };
    return o;
}

static void st_isend(dt_transport *b, const float *buf, size_t n, int peer, int tag,
                     dt_request *r)
{
    staged *s = (staged *)b;
    staged_op *o = push_op(s, r, (float *)buf, n, 0);
    float *h = s->pool[o->slot].host;
    s->be->to_host(h, buf, n * sizeof(float));
    s->inner->isend(s->inner, h, n, peer, tag, r);
}

static void st_irecv(dt_transport *b, float *buf, size_t n, int peer, int tag, dt_request *r)
{
    staged *s = (staged *)b;
    staged_op *o = push_op(s, r, buf, n, 1);
    s->inner->irecv(s->inner, s->pool[o->slot].host, n, peer, tag, r);
}

/* The send staged down now; the receive's host buffer, tied to the same
 * request, goes up at its waitall. */
static void st_iallgather(dt_transport *b, const float *send, size_t n, float *recv,
                          dt_request *r)
{
    staged *s = (staged *)b;
    staged_op *o = push_op(s, r, (float *)send, n, 0);
    float *h = s->pool[o->slot].host;
    s->be->to_host(h, send, n * sizeof(float));
    staged_op *in = push_op(s, r, recv, (size_t)b->size * n, 1);
    s->inner->iallgather(s->inner, h, n, s->pool[in->slot].host, r);
}

static void st_waitall(dt_transport *b, dt_request *r, int count)
{
    staged *s = (staged *)b;
    s->inner->waitall(s->inner, r, count);
    for (int i = 0; i < s->nops;) {
        staged_op *o = &s->ops[i];
        if (o->req < r || o->req >= r + count) {
            i++;
            continue;
        }
        if (o->recv)
            s->be->to_backend(o->buf, s->pool[o->slot].host, o->n * sizeof(float));
        s->pool[o->slot].busy = 0;
        s->ops[i] = s->ops[--s->nops];
    }
}

static void st_barrier(dt_transport *b)
{
    staged *s = (staged *)b;
    s->inner->barrier(s->inner);
}

static void st_destroy(dt_transport *b)
{
    staged *s = (staged *)b;
    for (int i = 0; i < s->npool; i++)
        s->be->host_free(s->pool[i].host);
    free(s->pool);
    free(s->ops);
    s->be->host_free(s->host);
    transport_free(s->inner);
}

dt_transport *transport_staged_create(dt_transport *inner, const dt_backend *be)
{
    staged *s = dt_calloc(1, sizeof *s);
    dt_transport *b = &s->base;
    b->name = inner->name;
    MPI_CHECK(MPI_Comm_dup(inner->comm, &b->comm));
    b->rank = inner->rank;
    b->size = inner->size;
    s->inner = inner;
    s->be = be;
    b->allreduce_sum = st_allreduce_sum;
    b->reduce_sum = st_reduce_sum;
    b->bcast = st_bcast;
    b->isend = st_isend;
    b->irecv = st_irecv;
    b->iallgather = st_iallgather;
    b->waitall = st_waitall;
    b->barrier = st_barrier;
    b->destroy = st_destroy;
    return b;
}
