/* Planning for the network engine (net_plan.c); used by net.c only. */
#ifndef DT_NN_NET_PLAN_H
#define DT_NN_NET_PLAN_H

#include "nn/net.h"

static inline size_t node_size(const dt_node *d) { return (size_t)d->c * d->h * d->w; }

static inline dt_conv_shape conv_shape(const dt_net *n, const dt_node *d, int B)
{
    const dt_node *x = &n->nodes[d->in0];
    return (dt_conv_shape){ .B = B, .C = x->c, .H = x->h, .W = x->w, .K = d->c, .R = d->k,
                            .S = d->k, .stride = d->stride, .pad = d->pad, .P = d->h, .Q = d->w,
                            .xblk = x->blk, .yblk = d->blk };
}

/* net_finish: each node's activation layout (blk), then the GroupNorm fusions. */
void net_plan_layouts(dt_net *n);
void net_plan_fusion(dt_net *n);
/* net_reserve, for batches of B: the arena and the places in it of every
 * activation (act, act_fwd, act_rec) and gradient (dact, dx_tmp); first_use. */
void net_plan_buffers(dt_net *n, int B);
/* The node whose buffers a flatten view shares. */
int net_base_of(const dt_net *n, int j);
/* Whether node j's gradient buffer goes unused (a fused GroupNorm, an absorbed add). */
int net_grad_unused(const dt_net *n, int j);

#endif
