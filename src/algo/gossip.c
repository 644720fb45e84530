#include "algo/gossip.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { TAG_GOSSIP = 17 };

int gossip_topology(dt_topology *topo, const dt_config *cfg, int nranks, const char *fallback)
{
    const char *kind = strcmp(cfg->algorithm.topology, "auto") ? cfg->algorithm.topology : fallback;
    if (!strcmp(kind, "file") && !cfg->algorithm.graph_file[0])
        return dt_err_set("algorithm.topology = file needs algorithm.graph_file");
    if (topology_create(topo, kind, nranks, (int)cfg->algorithm.peers,
                        cfg->algorithm.graph_file) != 0)
        return dt_err_prefix("algorithm.topology = %s with algorithm.peers = %lld on %d ranks",
                             kind, (long long)cfg->algorithm.peers, nranks);
    return 0;
}

int gossip_init(dt_gossip *g, const dt_config *cfg, int rank, int nranks, size_t len,
                const char *fallback, const dt_backend *v)
{
    memset(g, 0, sizeof *g);
    if (gossip_topology(&g->topo, cfg, nranks, fallback) != 0)
        return -1;
    (void)rank;
    g->v = v;
    g->len = len;
    g->out = dt_calloc((size_t)nranks, sizeof *g->out);
    g->in = dt_calloc((size_t)nranks, sizeof *g->in);
    g->req = dt_calloc(2 * (size_t)nranks, sizeof *g->req);
    return 0;
}

void gossip_peers(dt_gossip *g, int rank, int64_t step)
{
    g->nout = topology_out_peers(&g->topo, rank, step, g->out);
    g->nin = topology_in_peers(&g->topo, rank, step, g->in);
}

void gossip_start(dt_gossip *g, dt_transport *tp, const float *msg)
{
    g->nreq = 0;
    if (g->nin > g->nslots) { /* the slots' contents need not survive */
        if (g->recv)
            g->v->mem_free(g->recv);
        g->recv = g->v->mem_alloc((size_t)g->nin * g->len * sizeof(float));
        g->nslots = g->nin;
    }
    for (int j = 0; j < g->nin; j++)
        tp->irecv(tp, g->recv + (size_t)j * g->len, g->len, g->in[j], TAG_GOSSIP,
                  &g->req[g->nreq++]);
    for (int j = 0; j < g->nout; j++)
        tp->isend(tp, msg, g->len, g->out[j], TAG_GOSSIP, &g->req[g->nreq++]);
}

void gossip_finish(dt_gossip *g, dt_transport *tp)
{
    tp->waitall(tp, g->req, g->nreq);
    g->nreq = 0;
}

void gossip_sum_received(const dt_gossip *g, const float *c, float *acc)
{
    g->v->flat_sum_slots(g->len, g->nin, c, g->recv, acc);
}

int64_t pushsum_share(dt_gossip *g, int rank, int64_t step, float *x, size_t n, float *w)
{
    if (!g->send) /* (len) = (n + 1): x, then w */
        g->send = g->v->mem_alloc(g->len * sizeof(float));
    gossip_peers(g, rank, step);
    const float share = 1.0f / (float)(g->nout + 1);
    g->v->flat_scale_copy(n, share, x, g->send);
    g->v->flat_scale_copy(1, share, w, g->send + n); /* the weight travels with x */
    return (int64_t)(g->nout * g->len * sizeof(float));
}

void pushsum_absorb(const dt_gossip *g, const float *acc, float *x, size_t n, float *w)
{
    g->v->flat_add(n, acc, x);
    g->v->flat_add(1, acc + n, w);
}

void pushsum_debias(const dt_gossip *g, const float *x, size_t n, const float *w, float *z)
{
    g->v->flat_div(n, x, w, z);
}

void gossip_free(dt_gossip *g)
{
    topology_free(&g->topo);
    if (g->send)
        g->v->mem_free(g->send);
    if (g->recv)
        g->v->mem_free(g->recv);
    free(g->out);
    free(g->in);
    free(g->req);
    memset(g, 0, sizeof *g);
}
