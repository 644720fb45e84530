/* Planning for the network engine (net_plan.c); used by net.c only. */
#ifndef DT_NN_NET_PLAN_H
#define DT_NN_NET_PLAN_H

#include "nn/net.h"

static inline size_t node_size(const dt_node *d) { return (size_t)d->c * d->h * d->w; }

/* net_finish: each node's activation layout (blk), then the GroupNorm fusions. */
void net_plan_layouts(dt_net *n);
void net_plan_fusion(dt_net *n);
/* net_reserve, for batches of B: activation buffers (act, act_own, fpool) and
 * gradient buffers (dact, pool, first_use). */
void net_plan_activations(dt_net *n, int B);
void net_plan_gradients(dt_net *n, int B);
/* The node whose buffers a flatten view shares. */
int net_base_of(const dt_net *n, int j);
/* Whether node j's gradient buffer goes unused (a fused GroupNorm, an absorbed add). */
int net_grad_unused(const dt_net *n, int j);

#endif
