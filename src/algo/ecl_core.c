/* An edge-consensus node; see ecl_core.h. */
#include "algo/ecl_core.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

double ecl_eta(double mu, int K, int E, double theta_inv)
{
    return theta_inv / (mu * ((double)K * E + K - theta_inv * E));
}

void ecl_primal(float *w, float *g, const float *z, const int *sign, int E, size_t n,
                double mu, double lambda, double theta_inv, int K)
{
    const double eta = ecl_eta(mu, K, E, theta_inv), inv_mu = 1.0 / mu;
    const float self = (float)(inv_mu - lambda), denom = (float)(1.0 / (inv_mu + E * eta));
    for (size_t i = 0; i < n; i++) // g <- w / mu - (g + lambda w)
        g[i] = self * w[i] - g[i];
    for (int m = 0; m < E; m++) {
        const float c = (float)(sign[m] * eta), *zm = z + (size_t)m * n;
        for (size_t i = 0; i < n; i++)
            g[i] += c * zm[i];
    }
    for (size_t i = 0; i < n; i++)
        w[i] = g[i] * denom;
}

/* The outgoing vector of end m: y_ij = z_ij - 2 A_ij w, or D-SGD's w. */
static void ecl_fill(void *arg, int m, float *out)
{
    dt_ecl *e = arg;
    const float *w = e->w;
    if (e->sent_version[m] == e->version)
        e->stale++;
    e->sent_version[m] = e->version;
    if (e->kind == ECL_DSGD) {
        memcpy(out, w, e->n * sizeof *out);
        return;
    }
    const float c = (float)(-2 * e->g->adj[e->rank][m].sign), *z = e->buf + (size_t)m * e->n;
    for (size_t i = 0; i < e->n; i++)
        out[i] = z[i] + c * w[i];
}

/* Also accumulates the residual ||z_ij - y_ji||^2 of the swap: what a PDMM
 * swap changes (ADMM moves half of it); zero at a fixed point of either. */
static void ecl_absorb(void *arg, int m, const float *in)
{
    dt_ecl *e = arg;
    float *z = e->buf + (size_t)m * e->n;
    double d2 = 0;
    for (size_t i = 0; i < e->n; i++)
        d2 += (double)(in[i] - z[i]) * (in[i] - z[i]);
    if (e->kind == ECL_ADMM)
        for (size_t i = 0; i < e->n; i++)
            z[i] = 0.5f * (z[i] + in[i]);
    else /* PDMM overwrites the dual; D-SGD keeps the neighbour's w */
        memcpy(z, in, e->n * sizeof *z);
    e->dz2 += d2;
    e->nabsorbed++;
}

/* buf as at a start from w: zero duals, or (D-SGD) w as every neighbour's
 * last parameters. */
static void buf_start(dt_ecl *e)
{
    memset(e->buf, 0, (size_t)e->g->max_deg * e->n * sizeof *e->buf);
    if (e->kind == ECL_DSGD)
        for (int m = 0; m < e->E; m++)
            memcpy(e->buf + (size_t)m * e->n, e->w, e->n * sizeof *e->w);
}

void ecl_init(dt_ecl *e, MPI_Comm comm, const dt_egraph *g, int rank, dt_ecl_kind kind,
              float *w, size_t n, int threaded)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->g = g;
    e->rank = rank;
    e->E = g->deg[rank];
    e->n = n;
    e->w = w;
    e->buf = dt_falloc((size_t)g->max_deg * n);
    buf_start(e);
    e->sent_version = dt_calloc((size_t)(e->E ? e->E : 1), sizeof *e->sent_version);
    for (int m = 0; m < e->E; m++)
        e->sent_version[m] = -1;
    e->swap = swap_create(comm, g, rank, n, threaded, ecl_fill, ecl_absorb, e);
}

void ecl_lock(dt_ecl *e) { swap_lock(e->swap); }
void ecl_unlock(dt_ecl *e) { swap_unlock(e->swap); }

void ecl_update(dt_ecl *e, float *g, double mu, double lambda)
{
    if (e->kind == ECL_DSGD) {
        const float inv = 1.0f / (float)(e->E + 1);
        for (int m = 0; m < e->E; m++) {
            const float *wj = e->buf + (size_t)m * e->n;
            for (size_t i = 0; i < e->n; i++)
                e->w[i] += wj[i];
        }
        for (size_t i = 0; i < e->n; i++)
            e->w[i] *= inv;
    } else {
        int sign[e->E > 0 ? e->E : 1];
        for (int m = 0; m < e->E; m++)
            sign[m] = e->g->adj[e->rank][m].sign;
        ecl_primal(e->w, g, e->buf, sign, e->E, e->n, mu, lambda,
                   e->kind == ECL_ADMM ? 2.0 : 1.0, e->g->K);
    }
    e->version++;
}

void ecl_swaps(dt_ecl *e, int64_t step) { swap_due(e->swap, step); }

void ecl_snapshot(dt_ecl *e, float *out)
{
    swap_lock(e->swap);
    memcpy(out, e->buf, (size_t)e->g->max_deg * e->n * sizeof *out);
    swap_unlock(e->swap);
}

void ecl_restore(dt_ecl *e, const float *in)
{
    swap_lock(e->swap);
    memcpy(e->buf, in, (size_t)e->g->max_deg * e->n * sizeof *in);
    swap_unlock(e->swap);
}

void ecl_restart(dt_ecl *e)
{
    swap_lock(e->swap);
    buf_start(e);
    swap_unlock(e->swap);
}

void ecl_free(dt_ecl *e)
{
    swap_free(e->swap);
    free(e->buf);
    free(e->sent_version);
    memset(e, 0, sizeof *e);
}
