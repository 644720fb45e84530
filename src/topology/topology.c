/* Communication graphs of the gossip algorithms (doc/references.md, Gossip topologies).
 *
 * Built-in graphs are circulant: one list of offsets, reduced mod n, is
 * turned into every rank's book of absolute peers, so every rank sends to and
 * receives from the same number of peers at each step. The offsets are deduped
 * here because the SGP v1.0 reference does not (n = 8, k = 3 gave it 8 = 0 and
 * 12 = 4), and its exponents come from integer powers, not a floating-point
 * log (v1.0 lost 3^5 for n = 244, k = 2).
 *
 * Storage: one flat block of ints holds all books; book[r] points into it.
 */
#include "topology/topology.h"

#include "core/error.h"
#include "core/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Offsets in [1, n), first occurrence wins; `seen` (n bytes, zeroed) marks the
 * residues already taken. Returns the new count. */
static int offset_add(int *off, int cnt, char *seen, int n, int64_t d)
{
    int r = (int)(((d % n) + n) % n);
    if (r == 0 || seen[r])
        return cnt;
    seen[r] = 1;
    off[cnt] = r;
    return cnt + 1;
}

/* j * (k+1)^e, j = 1..k, for every e with (k+1)^e <= n - 1, ordered by e then
 * j. The power is grown in 64-bit integers, so no exponent is lost to
 * rounding. */
static int offsets_exponential(int *off, char *seen, int n, int k)
{
    int cnt = 0;
    for (int64_t p = 1; p <= n - 1; p *= (int64_t)k + 1)
        for (int64_t j = 1; j <= k; j++)
            cnt = offset_add(off, cnt, seen, n, j * p);
    return cnt;
}

/* +1, -1, +2, -2, +4, -4, ... over the powers of two below n. */
static int offsets_exponential_both(int *off, char *seen, int n)
{
    int cnt = 0;
    for (int64_t p = 1; p < n; p *= 2) {
        cnt = offset_add(off, cnt, seen, n, p);
        cnt = offset_add(off, cnt, seen, n, -p);
    }
    return cnt;
}

/* The active ranks' offsets +1, -1, +3, -3, +5, -5, +9, -9, ... (1 and
 * 1 + 2^e, e >= 1, below n); all odd, so with n even every edge joins an odd
 * rank to an even one. Passive books are the negations, index by index, so
 * deduping on the active value keeps the two aligned. */
static int offsets_bipartite(int *off, char *seen, int n)
{
    int cnt = 0;
    cnt = offset_add(off, cnt, seen, n, 1);
    cnt = offset_add(off, cnt, seen, n, -1);
    for (int64_t p = 2; 1 + p < n; p *= 2) {
        cnt = offset_add(off, cnt, seen, n, 1 + p);
        cnt = offset_add(off, cnt, seen, n, -(1 + p));
    }
    return cnt;
}

static void topology_alloc(dt_topology *t, const int *len)
{
    size_t total = 0;
    for (int r = 0; r < t->n; r++)
        total += (size_t)len[r];
    t->book = dt_malloc((size_t)t->n * sizeof *t->book);
    t->len = dt_malloc((size_t)t->n * sizeof *t->len);
    int *block = dt_malloc((total ? total : 1) * sizeof *block);
    for (int r = 0; r < t->n; r++) {
        t->book[r] = block;
        t->len[r] = len[r];
        block += len[r];
    }
}

/* Every rank's book from one offset list; passive (even) bipartite ranks use
 * the negated offsets. */
static void topology_fill_circulant(dt_topology *t, const int *off, int cnt)
{
    int n = t->n;
    int *len = dt_malloc((size_t)n * sizeof *len);
    for (int r = 0; r < n; r++)
        len[r] = cnt;
    topology_alloc(t, len);
    free(len);
    for (int r = 0; r < n; r++) {
        int negate = t->kind == TOPO_BIPARTITE && r % 2 == 0;
        for (int m = 0; m < cnt; m++) {
            int d = negate ? n - off[m] : off[m];
            t->book[r][m] = (r + d) % n;
        }
    }
}

/* ---- edge-list files ---- */

typedef struct edge_list {
    int *a, *b;
    size_t cnt, cap;
} edge_list;

static void edges_push(edge_list *e, int a, int b)
{
    if (e->cnt == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->a = dt_realloc(e->a, e->cap * sizeof *e->a);
        e->b = dt_realloc(e->b, e->cap * sizeof *e->b);
    }
    e->a[e->cnt] = a;
    e->b[e->cnt] = b;
    e->cnt++;
}

static int line_blank_or_comment(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return *s == '\0' || *s == '#';
}

static int line_rest_empty(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    return *s == '\0';
}

/* Stops at the first bad line and names it; nothing is built from a file
 * that fails, so a job never starts on half a graph. */
static int edges_read(edge_list *e, const char *path, int n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return dt_err_set("%s: cannot open the graph file: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long long lineno = 0;
    int rc = 0;
    while (getline(&line, &cap, f) != -1) {
        lineno++;
        if (line_blank_or_comment(line))
            continue;
        const char *s = line;
        int64_t a = 0, b = 0;
        /* ranks are checked against [0, n) in full width, before the cast to int */
        int pa = parse_int64(&s, 0, n - 1, path, lineno, "rank", &a);
        int pb = pa == 0 ? parse_int64(&s, 0, n - 1, path, lineno, "rank", &b) : pa;
        if (pa < 0 || pb < 0) {
            rc = -1;
            break;
        }
        if (pa || pb || !line_rest_empty(s)) {
            rc = dt_err_set("%s:%lld: malformed line, expected 'I J' (two rank numbers "
                            "joined by an undirected edge), '# comment' or a blank line",
                            path, lineno);
            break;
        }
        if (a == b) {
            rc = dt_err_set("%s: self-loop at rank %lld (line %lld); a rank is not its own "
                            "peer", path, (long long)a, lineno);
            break;
        }
        edges_push(e, (int)a, (int)b);
    }
    if (rc == 0 && ferror(f))
        rc = dt_err_set("%s: read error after line %lld: %s", path, lineno, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Books are the sorted, merged neighbour lists; then every rank must have an
 * edge and reach rank 0 (breadth-first search). */
static int topology_from_file(dt_topology *t, const char *path)
{
    int n = t->n;
    edge_list e = { 0 };
    if (edges_read(&e, path, n)) {
        free(e.a);
        free(e.b);
        return -1;
    }
    int *deg = dt_calloc((size_t)n, sizeof *deg);
    for (size_t i = 0; i < e.cnt; i++) {
        deg[e.a[i]]++;
        deg[e.b[i]]++;
    }
    topology_alloc(t, deg);
    for (int r = 0; r < n; r++)
        t->len[r] = 0;
    for (size_t i = 0; i < e.cnt; i++) {
        t->book[e.a[i]][t->len[e.a[i]]++] = e.b[i];
        t->book[e.b[i]][t->len[e.b[i]]++] = e.a[i];
    }
    free(e.a);
    free(e.b);
    free(deg);
    t->k = 0;
    for (int r = 0; r < n; r++) {
        int *bk = t->book[r], m = 0;
        qsort(bk, (size_t)t->len[r], sizeof *bk, cmp_int);
        for (int i = 0; i < t->len[r]; i++)
            if (m == 0 || bk[i] != bk[m - 1])
                bk[m++] = bk[i];
        t->len[r] = m;
        if (m > t->k)
            t->k = m;
    }
    for (int r = 0; r < n; r++)
        if (t->len[r] == 0)
            return dt_err_set("%s: rank %d has no edges; every rank of the %d-rank job needs "
                              "at least one", path, r, n);
    char *seen = dt_calloc((size_t)n, 1);
    int *queue = dt_malloc((size_t)n * sizeof *queue);
    int head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int r = queue[head++];
        for (int i = 0; i < t->len[r]; i++)
            if (!seen[t->book[r][i]]) {
                seen[t->book[r][i]] = 1;
                queue[tail++] = t->book[r][i];
            }
    }
    int lost = -1;
    for (int r = 0; r < n && lost < 0; r++)
        if (!seen[r])
            lost = r;
    free(seen);
    free(queue);
    if (lost >= 0)
        return dt_err_set("%s: graph is not connected: rank %d cannot reach rank 0", path,
                          lost);
    return 0;
}

int topology_create(dt_topology *t, const char *kind, int n, int k, const char *file)
{
    memset(t, 0, sizeof *t);
    static const struct {
        const char *name;
        dt_topo_kind kind;
    } kinds[] = {
        { "exponential", TOPO_EXPONENTIAL }, { "exponential-both", TOPO_EXPONENTIAL_BOTH },
        { "bipartite", TOPO_BIPARTITE },     { "ring", TOPO_RING },
        { "complete", TOPO_COMPLETE },       { "file", TOPO_FILE },
    };
    int found = -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kind && strcmp(kind, kinds[i].name) == 0)
            found = (int)i;
    if (found < 0)
        return dt_err_set("topology: unknown graph kind '%s', expected exponential, "
                          "exponential-both, bipartite, ring, complete or file",
                          kind ? kind : "(null)");
    dt_topo_kind kd = kinds[found].kind;
    const char *name = kinds[found].name;
    if (n < 2)
        return dt_err_set("topology %s: %d rank(s); gossip needs at least 2", name, n);
    int uses_k = kd != TOPO_COMPLETE && kd != TOPO_FILE;
    if (uses_k && (k < 1 || k >= n))
        return dt_err_set("topology %s: k = %d peers per step, expected 1 <= k < n = %d", name,
                          k, n);
    if (kd == TOPO_BIPARTITE && n % 2 != 0)
        return dt_err_set("topology bipartite: n = %d ranks; the active/passive pairing "
                          "needs an even number", n);
    if (kd == TOPO_RING && k > 2)
        return dt_err_set("topology ring: k = %d, expected 1 (+1) or 2 (+1, -1)", k);
    if (kd == TOPO_FILE && (!file || !*file))
        return dt_err_set("topology file: no edge-list file given");

    t->kind = kd;
    t->n = n;
    t->k = k;
    t->is_static = kd == TOPO_RING || kd == TOPO_COMPLETE || kd == TOPO_FILE;
    if (kd == TOPO_FILE) {
        if (topology_from_file(t, file)) {
            topology_free(t);
            return -1;
        }
        return 0;
    }

    /* Distinct nonzero residues: never more than n - 1 of them. */
    int *off = dt_malloc((size_t)n * sizeof *off);
    char *seen = dt_calloc((size_t)n, 1);
    int cnt = 0;
    switch (kd) {
    case TOPO_EXPONENTIAL:
        cnt = offsets_exponential(off, seen, n, k);
        break;
    case TOPO_EXPONENTIAL_BOTH:
        cnt = offsets_exponential_both(off, seen, n);
        break;
    case TOPO_BIPARTITE:
        cnt = offsets_bipartite(off, seen, n);
        break;
    case TOPO_RING:
        cnt = offset_add(off, cnt, seen, n, 1);
        if (k == 2)
            cnt = offset_add(off, cnt, seen, n, -1);
        break;
    case TOPO_COMPLETE:
        for (int d = 1; d < n; d++)
            cnt = offset_add(off, cnt, seen, n, d);
        t->k = n - 1;
        break;
    case TOPO_FILE:
        break;
    }
    free(seen);
    /* A window of k entries must hold k distinct peers. */
    if (!t->is_static && cnt < k) {
        free(off);
        memset(t, 0, sizeof *t);
        return dt_err_set("topology %s: only %d distinct peer offsets for n = %d, fewer than "
                          "k = %d peers per step",
                          name, cnt, n, k);
    }
    topology_fill_circulant(t, off, cnt);
    free(off);
    return 0;
}

void topology_free(dt_topology *t)
{
    if (t->book)
        free(t->book[0]);
    free(t->book);
    free(t->len);
    memset(t, 0, sizeof *t);
}

/* First book index used at `step` and how many entries follow it (wrapping). */
static int window(const dt_topology *t, int rank, int64_t step, int *start)
{
    int len = t->len[rank];
    if (t->is_static || len == 0) {
        *start = 0;
        return len;
    }
    int64_t s = step % len;
    if (s < 0)
        s += len;
    *start = (int)((s * t->k) % len);
    return t->k;
}

int topology_out_peers(const dt_topology *t, int rank, int64_t step, int *peers)
{
    if (rank < 0 || rank >= t->n)
        return dt_err_set("topology: rank %d out of range [0, %d)", rank, t->n);
    int start, cnt = window(t, rank, step, &start), len = t->len[rank];
    for (int i = 0; i < cnt; i++)
        peers[i] = t->book[rank][(start + i) % len];
    return cnt;
}

int topology_in_peers(const dt_topology *t, int rank, int64_t step, int *peers)
{
    if (rank < 0 || rank >= t->n)
        return dt_err_set("topology: rank %d out of range [0, %d)", rank, t->n);
    int cnt = 0;
    for (int j = 0; j < t->n; j++) {
        if (j == rank)
            continue;
        int start, w = window(t, j, step, &start), len = t->len[j];
        for (int i = 0; i < w; i++)
            if (t->book[j][(start + i) % len] == rank) {
                peers[cnt++] = j;
                break;
            }
    }
    return cnt;
}

int topology_is_active(const dt_topology *t, int rank)
{
    return t->kind == TOPO_BIPARTITE ? rank % 2 == 1 : 1;
}
