/* Edge graphs with per-end swap phases (doc/references.md, Edge-consensus
 * learning); see egraph.h. */
#include "topology/egraph.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parse.h"
#include "core/rng.h"

#define EGRAPH_RANDOM_STREAM 0xEC1u

typedef struct pair { int a, b, pa, pb; } pair; /* pa, pb: phases, -1 = automatic */

typedef struct pair_list {
    pair *p;
    size_t cnt, cap;
} pair_list;

static void pairs_add(pair_list *l, int a, int b, int pa, int pb)
{
    if (l->cnt == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->p = dt_realloc(l->p, l->cap * sizeof *l->p);
    }
    l->p[l->cnt++] = (pair){ a, b, pa, pb };
}

static int pairs_has(const pair_list *l, int a, int b)
{
    for (size_t e = 0; e < l->cnt; e++)
        if ((l->p[e].a == a && l->p[e].b == b) || (l->p[e].a == b && l->p[e].b == a))
            return 1;
    return 0;
}

/* ---- generated graphs ---- */

static void gen_circulant(pair_list *l, int n, int reach)
{
    for (int d = 1; d <= reach; d++)
        for (int i = 0; i < n; i++)
            if (!pairs_has(l, i, (i + d) % n))
                pairs_add(l, i, (i + d) % n, -1, -1);
}

/* A random spanning tree (each rank, in a seeded random order, joins a rank
 * placed before it), then random extra pairs until 2|E|/n >= mean_degree. */
static void gen_random(pair_list *l, int n, uint64_t seed, double mean_degree)
{
    dt_rng r = rng_make(seed, EGRAPH_RANDOM_STREAM, (uint64_t)n, 0);
    int64_t *order = dt_malloc((size_t)n * sizeof *order);
    for (int i = 0; i < n; i++)
        order[i] = i;
    rng_shuffle(&r, order, n);
    for (int i = 1; i < n; i++)
        pairs_add(l, (int)order[i], (int)order[rng_below(&r, (uint64_t)i)], -1, -1);
    free(order);
    size_t want = (size_t)(mean_degree * n / 2 + 0.5), most = (size_t)n * (n - 1) / 2;
    if (want > most)
        want = most;
    while (l->cnt < want) {
        int a = (int)rng_below(&r, (uint64_t)n), b = (int)rng_below(&r, (uint64_t)n);
        if (a != b && !pairs_has(l, a, b))
            pairs_add(l, a, b, -1, -1);
    }
}

/* ---- files ---- */

/* The largest cycle a file's 'round K' may give; phases are below it. */
#define EGRAPH_ROUND_MAX 1000000

/* The integers of an edge line, each checked in full width against its own
 * range before the caller narrows it: fields 0 and 1 are ranks in [0, n),
 * fields 2 and 3 phases in [0, EGRAPH_ROUND_MAX) (checked against the file's
 * K once it is known). Returns how many (at most 4), -2 if the line holds
 * something else, or -1 after dt_err_set for a value out of range. */
static int read_edge_fields(const char *s, int n, const char *path, long long lineno,
                            int64_t *v)
{
    static const char *const what[4] = { "rank", "rank", "phase", "phase" };
    int k = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
            s++;
        if (*s == '\0' || *s == '#')
            return k;
        if (k == 4)
            return -2;
        int64_t hi = k < 2 ? n - 1 : EGRAPH_ROUND_MAX - 1;
        int rc = parse_int64(&s, 0, hi, path, lineno, what[k], &v[k]);
        if (rc)
            return rc < 0 ? -1 : -2;
        if (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n' && *s != '#')
            return -2;
        k++;
    }
}

/* Blank, or a comment, from s to the end of the line. */
static int line_rest_blank(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return *s == '\0' || *s == '#';
}

static int read_file(pair_list *l, const char *path, int n, int *K)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return dt_err_set("%s: cannot open the graph file: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long long lineno = 0;
    int rc = 0, style = 0; /* 2: "I J" lines, 4: "I J PI PJ" lines */
    while (rc == 0 && getline(&line, &cap, f) != -1) {
        lineno++;
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        int64_t v[4];
        if (strncmp(s, "round", 5) == 0 && (s[5] == ' ' || s[5] == '\t')) {
            const char *p = s + 5;
            int pr = parse_int64(&p, 1, EGRAPH_ROUND_MAX, path, lineno, "round K", &v[0]);
            if (pr < 0)
                rc = -1;
            else if (pr > 0 || !line_rest_blank(p))
                rc = dt_err_set("%s:%lld: 'round K' needs one integer K in 1..%d (the steps "
                                "of a swap cycle)", path, lineno, EGRAPH_ROUND_MAX);
            else
                *K = (int)v[0];
            continue;
        }
        int k = read_edge_fields(s, n, path, lineno, v);
        if (k == -1) {
            rc = -1;
            break;
        }
        if (k == 0)
            continue; /* blank or comment */
        if (k != 2 && k != 4) {
            rc = dt_err_set("%s:%lld: malformed line, expected 'I J' (an edge), 'I J PI PJ' "
                            "(an edge and the swap phases of its ends at I and J), "
                            "'round K', '# comment' or a blank line", path, lineno);
            break;
        }
        if (style && k != style) {
            rc = dt_err_set("%s:%lld: %s; either every edge line gives the two phases or "
                            "none does", path, lineno,
                            k == 4 ? "this edge has phases, earlier ones did not"
                                   : "this edge has no phases, earlier ones did");
            break;
        }
        style = k;
        /* every field is in its range (read_edge_fields): the casts below keep it */
        if (v[0] == v[1])
            rc = dt_err_set("%s:%lld: self-loop at rank %lld; a rank is not its own "
                            "neighbour", path, lineno, (long long)v[0]);
        if (rc == 0 && pairs_has(l, (int)v[0], (int)v[1]))
            rc = dt_err_set("%s:%lld: edge %lld -- %lld given twice", path, lineno,
                            (long long)v[0], (long long)v[1]);
        if (rc == 0)
            pairs_add(l, (int)v[0], (int)v[1], k == 4 ? (int)v[2] : -1, k == 4 ? (int)v[3] : -1);
    }
    if (rc == 0 && ferror(f))
        rc = dt_err_set("%s: read error after line %lld: %s", path, lineno, strerror(errno));
    free(line);
    fclose(f);
    /* phases are checked against K once the whole file (and its round) is read */
    for (size_t e = 0; rc == 0 && e < l->cnt; e++)
        if (l->p[e].pa >= *K || l->p[e].pb >= *K)
            rc = dt_err_set("%s: edge %d -- %d has phase %d, outside 0..%d (round %d)", path,
                            l->p[e].a, l->p[e].b, l->p[e].pa >= *K ? l->p[e].pa : l->p[e].pb,
                            *K - 1, *K);
    return rc;
}

/* ---- assembly ---- */

static int cmp_end(const void *x, const void *y)
{
    const dt_eend *a = x, *b = y;
    return (a->peer > b->peer) - (a->peer < b->peer);
}

static int connected(const dt_egraph *g)
{
    char *seen = dt_calloc((size_t)g->n, 1);
    int *queue = dt_malloc((size_t)g->n * sizeof *queue), head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int r = queue[head++];
        for (int m = 0; m < g->deg[r]; m++)
            if (!seen[g->adj[r][m].peer]) {
                seen[g->adj[r][m].peer] = 1;
                queue[tail++] = g->adj[r][m].peer;
            }
    }
    free(seen);
    free(queue);
    return tail == g->n;
}

static int assemble(dt_egraph *g, const pair_list *l, const char *what)
{
    int n = g->n;
    g->deg = dt_calloc((size_t)n, sizeof *g->deg);
    g->adj = dt_calloc((size_t)n, sizeof *g->adj);
    for (size_t e = 0; e < l->cnt; e++) {
        g->deg[l->p[e].a]++;
        g->deg[l->p[e].b]++;
    }
    for (int i = 0; i < n; i++) {
        if (g->deg[i] == 0)
            return dt_err_set("%s: rank %d has no edges; every rank of the %d-rank job needs "
                              "at least one", what, i, n);
        g->adj[i] = dt_calloc((size_t)g->deg[i], sizeof **g->adj);
        g->deg[i] = 0;
    }
    for (size_t e = 0; e < l->cnt; e++) {
        const pair *p = &l->p[e];
        g->adj[p->a][g->deg[p->a]++] = (dt_eend){ p->b, p->pa, p->pb, p->b < p->a ? 1 : -1 };
        g->adj[p->b][g->deg[p->b]++] = (dt_eend){ p->a, p->pb, p->pa, p->a < p->b ? 1 : -1 };
    }
    g->max_deg = 0;
    for (int i = 0; i < n; i++) {
        qsort(g->adj[i], (size_t)g->deg[i], sizeof **g->adj, cmp_end);
        if (g->deg[i] > g->max_deg)
            g->max_deg = g->deg[i];
    }
    /* automatic phases, then each end learns its partner's */
    for (int i = 0; i < n; i++)
        for (int m = 0; m < g->deg[i]; m++)
            if (g->adj[i][m].phase < 0)
                g->adj[i][m].phase = (int)((i + (int64_t)m * g->K / g->deg[i]) % g->K);
    for (int i = 0; i < n; i++)
        for (int m = 0; m < g->deg[i]; m++)
            g->adj[i][m].peer_phase = egraph_end(g, g->adj[i][m].peer, i)->phase;
    if (!connected(g))
        return dt_err_set("%s: the graph is not connected (rank 0 cannot reach every rank)",
                          what);
    return 0;
}

int egraph_create(dt_egraph *g, const char *kind, int n, int K, uint64_t seed,
                  double mean_degree, const char *file)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->K = K;
    if (K < 1)
        return dt_err_set("edge graph: cycle of %d steps, expected >= 1", K);
    pair_list l = { 0 };
    int rc = 0, min_n = 2;
    char what[96];
    snprintf(what, sizeof what, "%s graph on %d ranks", kind, n);
    if (strcmp(kind, "multiplex-ring") == 0)
        min_n = 5; /* below 5, i+2 folds onto i-1 or i-2 and the rings coincide */
    if (strcmp(kind, "file") == 0) {
        if (!file || !*file)
            rc = dt_err_set("algorithm.topology = file needs algorithm.graph_file");
        else
            rc = read_file(&l, file, n, &g->K);
        if (file)
            snprintf(what, sizeof what, "%s", file);
    } else if (n < min_n) {
        rc = dt_err_set("%s: needs at least %d ranks", what, min_n);
    } else if (strcmp(kind, "ring") == 0) {
        gen_circulant(&l, n, 1);
    } else if (strcmp(kind, "multiplex-ring") == 0) {
        gen_circulant(&l, n, 2);
    } else if (strcmp(kind, "complete") == 0) {
        gen_circulant(&l, n, n / 2);
    } else if (strcmp(kind, "random") == 0) {
        if (mean_degree < 2)
            rc = dt_err_set("%s: mean degree %g, expected >= 2", what, mean_degree);
        else
            gen_random(&l, n, seed, mean_degree);
    } else {
        rc = dt_err_set("edge graph '%s': unknown kind; expected ring, multiplex-ring, random, "
                        "complete or file", kind);
    }
    if (rc == 0)
        rc = assemble(g, &l, what);
    free(l.p);
    if (rc)
        egraph_free(g);
    return rc;
}

void egraph_free(dt_egraph *g)
{
    if (g->adj)
        for (int i = 0; i < g->n; i++)
            free(g->adj[i]);
    free(g->adj);
    free(g->deg);
    memset(g, 0, sizeof *g);
}

const dt_eend *egraph_end(const dt_egraph *g, int i, int j)
{
    for (int m = 0; m < g->deg[i]; m++)
        if (g->adj[i][m].peer == j)
            return &g->adj[i][m];
    return NULL;
}
