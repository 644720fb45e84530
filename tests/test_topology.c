/* Gossip graphs: hand-computed schedules (doc/references.md, Gossip topologies) and invariants
 * that every algorithm relies on (in-peers agree with out-peers, regular
 * degrees, active/passive pairs, no self or repeated peer in one step). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/parse.h"
#include "topology/egraph.h"
#include "topology/topology.h"
#include "tap.h"

enum { NMAX = 32, STEPS = 41 };

static int contains(const int *v, int cnt, int x)
{
    for (int i = 0; i < cnt; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Rank r's book as offsets (peer - r) mod n, the form in which the reference
 * states them. */
static int book_offsets_equal(const dt_topology *t, int r, const int *want, int cnt)
{
    if (t->len[r] != cnt)
        return 0;
    for (int i = 0; i < cnt; i++)
        if (((t->book[r][i] - r) % t->n + t->n) % t->n != want[i])
            return 0;
    return 1;
}

/* Every rank's out-peers at step s are (r + want[i]) mod n, in order. */
static int schedule_is(const dt_topology *t, int64_t s, const int *want, int cnt)
{
    int p[NMAX * 8];
    for (int r = 0; r < t->n; r++) {
        if (topology_out_peers(t, r, s, p) != cnt)
            return 0;
        for (int i = 0; i < cnt; i++)
            if (p[i] != (r + want[i]) % t->n)
                return 0;
    }
    return 1;
}

static void test_exponential_k1(void)
{
    dt_topology t;
    CHECK(topology_create(&t, "exponential", 8, 1, NULL) == 0, "exponential n=8 k=1");
    int ok = !t.is_static && t.k == 1 && topology_is_active(&t, 3) == 1;
    const int want8[] = { 1, 2, 4, 1, 2, 4, 1, 2, 4, 1 };
    for (int s = 0; s < 10; s++)
        ok &= schedule_is(&t, s, &want8[s], 1);
    CHECK(ok, "n=8 k=1: steps 0..9 send to +1,+2,+4,+1,+2,+4,... on every rank");
    int in[NMAX];
    CHECK(topology_in_peers(&t, 0, 2, in) == 1 && in[0] == 4, "n=8 step 2: rank 0 hears rank 4");
    CHECK(topology_in_peers(&t, 5, 1, in) == 1 && in[0] == 3, "n=8 step 1: rank 5 hears rank 3");
    topology_free(&t);

    CHECK(topology_create(&t, "exponential", 2, 1, NULL) == 0, "exponential n=2 k=1");
    ok = 1;
    for (int s = 0; s < 7; s++)
        ok &= schedule_is(&t, s, (const int[]){ 1 }, 1);
    CHECK(ok && t.len[0] == 1, "n=2: always +1");
    topology_free(&t);

    CHECK(topology_create(&t, "exponential", 5, 1, NULL) == 0, "exponential n=5 k=1");
    CHECK(book_offsets_equal(&t, 0, (const int[]){ 1, 2, 4 }, 3) &&
              book_offsets_equal(&t, 4, (const int[]){ 1, 2, 4 }, 3),
          "n=5 book: +1 +2 +4 (4 = n-1 is kept)");
    const int want5[] = { 1, 2, 4, 1, 2, 4, 1 };
    ok = 1;
    for (int s = 0; s < 7; s++)
        ok &= schedule_is(&t, s, &want5[s], 1);
    CHECK(ok, "n=5 steps 0..6: +1,+2,+4,+1,...");
    topology_free(&t);

    /* L = floor(log2(n-1)) + 1; step s sends to r + 2^(s mod L). */
    ok = 1;
    for (int n = 2; n <= NMAX; n++) {
        int L = 0;
        while ((1 << L) <= n - 1)
            L++;
        if (topology_create(&t, "exponential", n, 1, NULL)) {
            ok = 0;
            continue;
        }
        ok &= t.len[0] == L;
        for (int s = 0; s < STEPS; s++) {
            int d = 1 << (s % L);
            ok &= schedule_is(&t, s, &d, 1);
            for (int r = 0; r < n; r++)
                ok &= topology_in_peers(&t, r, s, in) == 1 && in[0] == (r - d + n) % n;
        }
        topology_free(&t);
    }
    CHECK(ok, "k=1, n=2..32, steps 0..40: out r+2^(s mod L), in r-2^(s mod L)");
}

static void test_exponential_books(void)
{
    dt_topology t;
    /* Base 3, e = 0..2 (9 <= 9): 1 2 | 3 6 | 9 18; 18 mod 10 = 8. */
    CHECK(topology_create(&t, "exponential", 10, 2, NULL) == 0, "exponential n=10 k=2");
    CHECK(book_offsets_equal(&t, 0, (const int[]){ 1, 2, 3, 6, 9, 8 }, 6) &&
              book_offsets_equal(&t, 7, (const int[]){ 1, 2, 3, 6, 9, 8 }, 6),
          "n=10 k=2 book: 1 2 3 6 9 8 (18 reduced mod 10)");
    const int seq[] = { 1, 2, 3, 6, 9, 8, 1, 2, 3, 6, 9, 8 };
    int ok = 1;
    for (int s = 0; s < 6; s++)
        ok &= schedule_is(&t, s, &seq[(2 * s) % 6], 2);
    CHECK(ok, "n=10 k=2: steps 0..5 use [1,2] [3,6] [9,8] [1,2] ...");
    topology_free(&t);

    /* Base 3, 3^5 = 243 <= 243: e = 5 is present (1 2 3 6 9 18 27 54 81 162 243 486). */
    CHECK(topology_create(&t, "exponential", 244, 2, NULL) == 0, "exponential n=244 k=2");
    const int w244[] = { 1, 2, 3, 6, 9, 18, 27, 54, 81, 162, 243, 242 };
    CHECK(book_offsets_equal(&t, 0, w244, 12) && book_offsets_equal(&t, 243, w244, 12),
          "n=244 k=2 book keeps e=5: ... 162 243 242 (486 mod 244)");
    CHECK(t.book[1][10] == 0, "n=244: rank 1 + 243 wraps to rank 0");
    topology_free(&t);
    CHECK(topology_create(&t, "exponential", 243, 2, NULL) == 0 && t.len[0] == 10,
          "n=243 k=2: 3^5 = 243 > 242, book has 10 entries");
    topology_free(&t);

    /* Base 4, e = 0..1: 1 2 3 | 4 8 12 -> 8 = 0 and 12 = 4 are dropped. */
    CHECK(topology_create(&t, "exponential", 8, 3, NULL) == 0, "exponential n=8 k=3");
    CHECK(book_offsets_equal(&t, 0, (const int[]){ 1, 2, 3, 4 }, 4) &&
              book_offsets_equal(&t, 5, (const int[]){ 1, 2, 3, 4 }, 4),
          "n=8 k=3 book: 1 2 3 4 (self and duplicate dropped)");
    ok = schedule_is(&t, 0, (const int[]){ 1, 2, 3 }, 3) &&
         schedule_is(&t, 1, (const int[]){ 4, 1, 2 }, 3) &&
         schedule_is(&t, 2, (const int[]){ 3, 4, 1 }, 3) &&
         schedule_is(&t, 3, (const int[]){ 2, 3, 4 }, 3) &&
         schedule_is(&t, 4, (const int[]){ 1, 2, 3 }, 3);
    CHECK(ok, "n=8 k=3: windows wrap: [1 2 3] [4 1 2] [3 4 1] [2 3 4] [1 2 3]");
    topology_free(&t);

    CHECK(topology_create(&t, "exponential", 1000, 1, NULL) == 0 && t.len[0] == 10 &&
              t.book[0][9] == 512,
          "n=1000 k=1: 10 offsets, the last 512");
    topology_free(&t);
}

static void test_exponential_both(void)
{
    dt_topology t;
    CHECK(topology_create(&t, "exponential-both", 8, 1, NULL) == 0, "exponential-both n=8");
    CHECK(book_offsets_equal(&t, 0, (const int[]){ 1, 7, 2, 6, 4 }, 5) &&
              book_offsets_equal(&t, 3, (const int[]){ 1, 7, 2, 6, 4 }, 5),
          "n=8 book: +1 -1 +2 -2 +4 (+4 = -4 once)");
    const int seq[] = { 1, 7, 2, 6, 4, 1, 7 };
    int ok = 1;
    for (int s = 0; s < 7; s++)
        ok &= schedule_is(&t, s, &seq[s], 1);
    CHECK(ok, "n=8 k=1: +1 -1 +2 -2 +4 +1 -1");
    topology_free(&t);

    CHECK(topology_create(&t, "exponential-both", 8, 2, NULL) == 0, "exponential-both n=8 k=2");
    ok = schedule_is(&t, 0, (const int[]){ 1, 7 }, 2) &&
         schedule_is(&t, 1, (const int[]){ 2, 6 }, 2) &&
         schedule_is(&t, 2, (const int[]){ 4, 1 }, 2) &&
         schedule_is(&t, 3, (const int[]){ 7, 2 }, 2);
    CHECK(ok, "n=8 k=2: [+1 -1] [+2 -2] [+4 +1] [-1 +2]");
    topology_free(&t);

    const struct {
        int n, len, off[6];
    } cases[] = {
        { 2, 1, { 1 } },       { 3, 2, { 1, 2 } },          { 4, 3, { 1, 3, 2 } },
        { 6, 4, { 1, 5, 2, 4 } }, { 5, 4, { 1, 4, 2, 3 } },
    };
    ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ok &= topology_create(&t, "exponential-both", cases[i].n, 1, NULL) == 0;
        if (t.book)
            ok &= book_offsets_equal(&t, cases[i].n - 1, cases[i].off, cases[i].len);
        topology_free(&t);
    }
    CHECK(ok, "exponential-both books: n=2 [1], n=3 [1 2], n=4 [1 3 2], n=6 [1 5 2 4] "
              "(+4 = -2), n=5 [1 4 2 3]");
}

/* Bipartite, every even n and every k the book allows. */
static void test_bipartite(void)
{
    dt_topology t;
    CHECK(topology_create(&t, "bipartite", 8, 1, NULL) == 0, "bipartite n=8");
    /* Offsets 1 3 5 (9 >= 8): active +1 -1 +3 -3 (+5 = -3, -5 = +3 dropped). */
    CHECK(book_offsets_equal(&t, 1, (const int[]){ 1, 7, 3, 5 }, 4) &&
              book_offsets_equal(&t, 0, (const int[]){ 7, 1, 5, 3 }, 4),
          "n=8: active book +1 -1 +3 -3, passive book -1 +1 -3 +3");
    CHECK(topology_is_active(&t, 1) == 1 && topology_is_active(&t, 0) == 0 &&
              topology_is_active(&t, 7) == 1 && topology_is_active(&t, 6) == 0,
          "odd ranks active, even passive");
    topology_free(&t);
    CHECK(topology_create(&t, "bipartite", 32, 1, NULL) == 0 &&
              book_offsets_equal(&t, 3, (const int[]){ 1, 31, 3, 29, 5, 27, 9, 23, 17, 15 },
                                 10),
          "n=32: active offsets +-1 +-3 +-5 +-9 +-17");
    topology_free(&t);

    int pairs = 1, parity = 1, symmetric = 1, counts = 1, created = 1, cases = 0;
    int out[NMAX], in[NMAX], o2[NMAX];
    for (int n = 2; n <= NMAX; n += 2) {
        for (int k = 1; k < n; k++) {
            if (topology_create(&t, "bipartite", n, k, NULL)) {
                /* Refused only because the book is shorter than k. */
                created &= strstr(dt_err_msg(), "fewer than") != NULL;
                continue;
            }
            cases++;
            for (int s = 0; s < STEPS; s++)
                for (int r = 0; r < n; r++) {
                    int no = topology_out_peers(&t, r, s, out);
                    int ni = topology_in_peers(&t, r, s, in);
                    counts &= no == k && ni == k;
                    for (int i = 0; i < no; i++) {
                        parity &= (out[i] + r) % 2 == 1;
                        if (r % 2 == 1)
                            pairs &= topology_out_peers(&t, out[i], s, o2) == k &&
                                     o2[i] == r;
                        /* in-peers are sorted: out-peers must each appear. */
                        symmetric &= contains(in, ni, out[i]);
                    }
                }
            topology_free(&t);
        }
    }
    CHECK(created && cases > 60, "bipartite n=2..32 even, all k: %d graphs built", cases);
    CHECK(pairs, "bipartite: at each index an active rank's out-peer sends back to it");
    CHECK(parity, "bipartite: every edge joins an odd rank to an even rank");
    CHECK(symmetric, "bipartite: out-peers == in-peers for every rank and step");
    CHECK(counts, "bipartite: each rank sends exactly k and receives exactly k per step");
}

/* Invariants for every built-in kind, n = 2..32 and every valid k. */
static void test_invariants(void)
{
    const char *kinds[] = { "exponential", "exponential-both", "bipartite", "ring", "complete" };
    static unsigned char sends[NMAX][NMAX];
    int out[NMAX], in[NMAX];
    for (size_t kd = 0; kd < sizeof kinds / sizeof kinds[0]; kd++) {
        int regular = 1, consistent = 1, noself = 1, nodup = 1, sorted = 1, graphs = 0;
        for (int n = 2; n <= NMAX; n++)
            for (int k = 1; k < n; k++) {
                dt_topology t;
                if (topology_create(&t, kinds[kd], n, k, NULL))
                    continue;
                graphs++;
                int want = t.is_static ? t.len[0] : k;
                for (int s = 0; s < STEPS; s++) {
                    memset(sends, 0, sizeof sends);
                    for (int r = 0; r < n; r++) {
                        int no = topology_out_peers(&t, r, s, out);
                        regular &= no == want;
                        for (int i = 0; i < no; i++) {
                            noself &= out[i] != r && out[i] >= 0 && out[i] < n;
                            nodup &= !contains(out, i, out[i]);
                            sends[r][out[i]] = 1;
                        }
                    }
                    for (int r = 0; r < n; r++) {
                        int ni = topology_in_peers(&t, r, s, in), hear = 0;
                        regular &= ni == want;
                        for (int i = 0; i < ni; i++) {
                            consistent &= sends[in[i]][r];
                            sorted &= i == 0 || in[i] > in[i - 1];
                        }
                        for (int j = 0; j < n; j++)
                            hear += sends[j][r];
                        consistent &= hear == ni;
                    }
                }
                topology_free(&t);
                if (!strcmp(kinds[kd], "complete"))
                    break; /* k is ignored */
            }
        CHECK(graphs > 0 && regular,
              "%s (%d graphs): every rank sends and receives the same count each step",
              kinds[kd], graphs);
        CHECK(consistent && sorted, "%s: in-peers are exactly the senders, ascending",
              kinds[kd]);
        CHECK(noself && nodup, "%s: no self and no repeated peer within a step", kinds[kd]);
    }
}

static void test_visits(void)
{
    int ok = 1;
    int out[1];
    for (int n = 2; n <= NMAX; n++) {
        dt_topology t;
        if (topology_create(&t, "exponential", n, 1, NULL)) {
            ok = 0;
            continue;
        }
        int L = t.len[0];
        for (int s0 = 0; s0 <= L; s0++) {
            int hits[NMAX] = { 0 };
            for (int s = s0; s < s0 + L; s++) {
                topology_out_peers(&t, 0, s, out);
                hits[out[0]]++;
            }
            for (int m = 0; m < L; m++)
                ok &= hits[t.book[0][m]] == 1;
        }
        topology_free(&t);
    }
    CHECK(ok, "exponential k=1: any L consecutive steps visit each of the L offsets once");
}

static void test_ring_complete(void)
{
    int ok1 = 1, ok2 = 1, okc = 1;
    int out[NMAX], in[NMAX];
    for (int n = 2; n <= NMAX; n++) {
        dt_topology t;
        if (topology_create(&t, "ring", n, 1, NULL) == 0) {
            ok1 &= t.is_static;
            for (int s = 0; s < 5; s++)
                for (int r = 0; r < n; r++)
                    ok1 &= topology_out_peers(&t, r, s, out) == 1 && out[0] == (r + 1) % n &&
                           topology_in_peers(&t, r, s, in) == 1 && in[0] == (r + n - 1) % n;
            topology_free(&t);
        } else {
            ok1 = 0;
        }
        if (n >= 3) {
            if (topology_create(&t, "ring", n, 2, NULL) == 0) {
                for (int s = 0; s < 5; s++)
                    for (int r = 0; r < n; r++)
                        ok2 &= topology_out_peers(&t, r, s, out) == 2 &&
                               out[0] == (r + 1) % n && out[1] == (r + n - 1) % n;
                topology_free(&t);
            } else {
                ok2 = 0;
            }
        }
        if (topology_create(&t, "complete", n, 1, NULL) == 0) {
            okc &= t.k == n - 1 && t.is_static;
            for (int s = 0; s < 3; s++)
                for (int r = 0; r < n; r++) {
                    int no = topology_out_peers(&t, r, s, out);
                    int ni = topology_in_peers(&t, r, s, in);
                    okc &= no == n - 1 && ni == n - 1;
                    for (int j = 0, m = 0; j < n; j++)
                        if (j != r)
                            okc &= contains(out, no, j) && in[m++] == j;
                }
            topology_free(&t);
        } else {
            okc = 0;
        }
    }
    CHECK(ok1, "ring k=1, n=2..32: out r+1, in r-1, every step");
    CHECK(ok2, "ring k=2, n=3..32: out [r+1, r-1]");
    CHECK(okc, "complete n=2..32: k = n-1, every other rank out and in, every step");
}

/* ---- edge-list files ---- */

static char tmpdir[64];

static const char *write_file(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* The graph's books, as "r: a b c; ..." for a one-line comparison. */
static int books_are(const dt_topology *t, const char *want)
{
    char buf[1024] = "";
    size_t off = 0;
    for (int r = 0; r < t->n; r++) {
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%d:", r);
        for (int i = 0; i < t->len[r]; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, " %d", t->book[r][i]);
        off += (size_t)snprintf(buf + off, sizeof buf - off, r + 1 < t->n ? "; " : "");
    }
    if (strcmp(buf, want))
        printf("#   books: %s\n#    want: %s\n", buf, want);
    return !strcmp(buf, want);
}

/* Static and undirected: the same peers every step, in == out. */
static int file_graph_ok(const dt_topology *t)
{
    int out[NMAX], in[NMAX], ok = t->is_static;
    for (int s = 0; s < 4; s++)
        for (int r = 0; r < t->n; r++) {
            int no = topology_out_peers(t, r, s, out);
            int ni = topology_in_peers(t, r, s, in);
            ok &= no == t->len[r] && ni == no && no <= t->k;
            for (int i = 0; i < no; i++)
                ok &= out[i] == t->book[r][i] && in[i] == out[i];
        }
    return ok;
}

static void test_file_graphs(void)
{
    dt_topology t;
    dt_err_clear();
    const char *p = write_file("star.txt", "# a star around rank 0\n\n0 1\n0 2\n  3 0  \n"
                                           "0\t4\r\n1 0\n   # indented comment\n");
    CHECK(topology_create(&t, "file", 5, 0, p) == 0, "star file parses: %s", dt_err_msg());
    if (t.book) {
        CHECK(books_are(&t, "0: 1 2 3 4; 1: 0; 2: 0; 3: 0; 4: 0"),
              "star: centre has 4 peers, the duplicate 1 0 merged");
        CHECK(t.k == 4 && file_graph_ok(&t), "star: k = 4, static, in == out");
    }
    topology_free(&t);

    p = write_file("path.txt", "2 3\n1 2\n0 1\n");
    CHECK(topology_create(&t, "file", 4, 0, p) == 0, "path file parses");
    if (t.book)
        CHECK(books_are(&t, "0: 1; 1: 0 2; 2: 1 3; 3: 2") && t.k == 2 && file_graph_ok(&t),
              "path 0-1-2-3: degrees 1 2 2 1, k = 2");
    topology_free(&t);

    p = write_file("irregular.txt", "0 1\n0 2\n0 3\n1 2\n3 4\n4 5\n");
    CHECK(topology_create(&t, "file", 6, 0, p) == 0, "irregular file parses");
    if (t.book)
        CHECK(books_are(&t, "0: 1 2 3; 1: 0 2; 2: 0 1; 3: 0 4; 4: 3 5; 5: 4") && t.k == 3 &&
                  file_graph_ok(&t),
              "irregular graph: degrees 3 2 2 2 2 1, in == out");
    topology_free(&t);

    const struct {
        const char *name, *text;
        int n;
        const char *msg;
    } bad[] = {
        { "word.txt", "0 1\n# c\n1 x\n", 4, "word.txt:3: malformed line" },
        { "three.txt", "0 1\n0 1 2\n", 4, "three.txt:2: malformed line" },
        { "one.txt", "\n\n5\n", 8, "one.txt:3: malformed line" },
        { "huge.txt", "0 99999999999999999999\n", 8,
          "huge.txt:1: rank 99999999999999999999 out of range, expected 0..7" },
        { "range.txt", "0 1\n0 9\n", 8, "range.txt:2: rank 9 out of range, expected 0..7" },
        { "neg.txt", "-1 2\n", 8, "neg.txt:1: rank -1 out of range, expected 0..7" },
        { "loop.txt", "0 1\n1 2\n2 2\n", 3, "loop.txt: self-loop at rank 2" },
        { "split.txt", "0 1\n2 3\n", 4, "split.txt: graph is not connected: rank 2 cannot "
                                        "reach rank 0" },
        { "lonely.txt", "0 1\n1 2\n", 4, "lonely.txt: rank 3 has no edges" },
        { "empty.txt", "# nothing\n", 2, "empty.txt: rank 0 has no edges" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_err_clear();
        p = write_file(bad[i].name, bad[i].text);
        int rc = topology_create(&t, "file", bad[i].n, 0, p);
        const char *m = dt_err_msg();
        CHECK(rc == -1 && t.book == NULL && strstr(m, bad[i].msg) && !strncmp(m, tmpdir,
                                                                                strlen(tmpdir)),
              "%s refused: %s", bad[i].name, m);
    }
    dt_err_clear();
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing.txt", tmpdir);
    CHECK(topology_create(&t, "file", 4, 0, missing) == -1 &&
              strstr(dt_err_msg(), "missing.txt: cannot open"),
          "missing file refused: %s", dt_err_msg());
    CHECK(topology_create(&t, "file", 4, 0, NULL) == -1, "file kind without a path refused");
}

/* ---- integers from files: parse_int64 and every graph-file field ---- */

static void test_parse_int64(void)
{
    const struct {
        const char *text;
        int64_t lo, hi;
        int rc;
        int64_t v;
        const char *msg; /* for rc == -1 */
    } c[] = {
        { " \t42 7", 0, 100, 0, 42, NULL },
        { "-7", -10, 10, 0, -7, NULL },
        { "+7", -10, 10, 0, 7, NULL },
        { "2147483647", 0, INT32_MAX, 0, INT32_MAX, NULL },
        { "2147483648", 0, INT32_MAX, -1, 0, "f.txt:3: n 2147483648 out of range, expected 0..2147483647" },
        { "4294967296", 0, INT32_MAX, -1, 0, "n 4294967296 out of range" },
        { "4294967297", 0, 7, -1, 0, "n 4294967297 out of range, expected 0..7" },
        { "9223372036854775807", INT64_MIN, INT64_MAX, 0, INT64_MAX, NULL },
        { "9223372036854775808", INT64_MIN, INT64_MAX, -1, 0,
          "n 9223372036854775808 out of range, expected -9223372036854775808..9223372036854775807" },
        { "-9223372036854775808", INT64_MIN, INT64_MAX, 0, INT64_MIN, NULL },
        { "-9223372036854775809", INT64_MIN, INT64_MAX, -1, 0, "n -9223372036854775809 out of range" },
        { "18446744073709551616", INT64_MIN, INT64_MAX, -1, 0, "n 18446744073709551616 out of range" },
        { "-1", 0, 7, -1, 0, "n -1 out of range, expected 0..7" },
        { "123456789012345678901234567890123456789012345678901234567890", 0, 7, -1, 0,
          "n 1234567890123456789012345678901234567890... out of range" },
        { "x1", 0, 7, 1, 0, NULL },
        { "-", 0, 7, 1, 0, NULL },
        { "", 0, 7, 1, 0, NULL },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        dt_err_clear();
        const char *s = c[i].text;
        int64_t v = -12345;
        int rc = parse_int64(&s, c[i].lo, c[i].hi, "f.txt", 3, "n", &v);
        int ok = rc == c[i].rc;
        if (rc == 0)
            ok &= v == c[i].v && s > c[i].text && (*s == '\0' || *s == ' ');
        else
            ok &= v == -12345 && s == c[i].text;
        if (rc == -1)
            ok &= strstr(dt_err_msg(), c[i].msg) != NULL;
        CHECK(ok, "parse_int64('%s', %lld..%lld) -> %d (%s)", c[i].text, (long long)c[i].lo,
              (long long)c[i].hi, rc, dt_err_msg());
    }
    dt_err_clear();
    CHECK(check_int64(INT64_MAX, 0, INT32_MAX, "h.bin", "field") == -1 &&
              strstr(dt_err_msg(), "h.bin: field 9223372036854775807 out of range, expected "
                                   "0..2147483647"),
          "check_int64 names the place, the value and the range: %s", dt_err_msg());
    CHECK(check_int64(-1, 0, 7, "h.bin", "field") == -1 &&
              strstr(dt_err_msg(), "field -1 out of range"),
          "check_int64 refuses -1 below 0");
    CHECK(check_int64(7, 0, 7, "h.bin", "field") == 0, "check_int64 accepts its bounds");
}

/* A rank, phase or round at 2^31, 2^32 (which an int cast would wrap to 0),
 * 2^32 + 1 (wraps to 1, a valid value), 2^63 and -1: each refused with the
 * file, line, value and range; none narrowed into a valid one. */
static void test_file_integers(void)
{
    static const char *const big[] = { "2147483648", "4294967296", "4294967297",
                                       "9223372036854775808", "-1" };
    char text[160], want[160];
    dt_topology t;
    dt_egraph g;
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        /* gossip graph file: both columns */
        for (int col = 0; col < 2; col++) {
            snprintf(text, sizeof text, "0 1\n# c\n%s %s\n", col ? "1" : big[i], col ? big[i] : "0");
            const char *p = write_file("wide.txt", text);
            dt_err_clear();
            snprintf(want, sizeof want, "wide.txt:3: rank %s out of range, expected 0..3", big[i]);
            CHECK(topology_create(&t, "file", 4, 0, p) == -1 && t.book == NULL &&
                      strstr(dt_err_msg(), want),
                  "gossip graph: rank %s in column %d refused: %s", big[i], col, dt_err_msg());
            topology_free(&t);
        }
        /* edge graph file: a rank, a phase, the round */
        snprintf(text, sizeof text, "round 4\n0 1 0 1\n1 %s 2 3\n", big[i]);
        const char *p = write_file("wide.txt", text);
        snprintf(want, sizeof want, "wide.txt:3: rank %s out of range, expected 0..2", big[i]);
        dt_err_clear();
        CHECK(egraph_create(&g, "file", 3, 8, 1, 4, p) == -1 && strstr(dt_err_msg(), want),
              "edge graph: rank %s refused: %s", big[i], dt_err_msg());
        snprintf(text, sizeof text, "round 4\n0 1 0 1\n1 2 %s 3\n", big[i]);
        p = write_file("wide.txt", text);
        snprintf(want, sizeof want, "wide.txt:3: phase %s out of range, expected 0..999999", big[i]);
        dt_err_clear();
        CHECK(egraph_create(&g, "file", 3, 8, 1, 4, p) == -1 && strstr(dt_err_msg(), want),
              "edge graph: phase %s refused: %s", big[i], dt_err_msg());
        snprintf(text, sizeof text, "0 1\n1 2\nround %s\n", big[i]);
        p = write_file("wide.txt", text);
        snprintf(want, sizeof want, "wide.txt:3: round K %s out of range, expected 1..1000000",
                 big[i]);
        dt_err_clear();
        CHECK(egraph_create(&g, "file", 3, 8, 1, 4, p) == -1 && strstr(dt_err_msg(), want),
              "edge graph: round %s refused: %s", big[i], dt_err_msg());
    }
    /* the widest valid values still read */
    const char *p = write_file("wide.txt", "round 1000000\n0 1 999999 0\n1 2 5 6\n");
    dt_err_clear();
    int ok = egraph_create(&g, "file", 3, 8, 1, 4, p) == 0;
    CHECK(ok && g.K == 1000000 && egraph_end(&g, 0, 1)->phase == 999999,
          "edge graph: round 1000000 and phase 999999 accepted: %s", dt_err_msg());
    if (ok)
        egraph_free(&g);
    p = write_file("wide.txt", "round 4 x\n0 1\n1 2\n");
    dt_err_clear();
    CHECK(egraph_create(&g, "file", 3, 8, 1, 4, p) == -1 &&
              strstr(dt_err_msg(), "wide.txt:1: 'round K' needs one integer K in 1..1000000"),
          "edge graph: 'round 4 x' refused: %s", dt_err_msg());
}

static void test_invalid(void)
{
    dt_topology t;
    const struct {
        const char *kind;
        int n, k;
        const char *msg;
    } bad[] = {
        { "bipartite", 5, 1, "even" },       { "bipartite", 31, 2, "even" },
        { "exponential", 1, 1, "at least 2" }, { "bipartite", 1, 1, "at least 2" },
        { "ring", 1, 1, "at least 2" },       { "complete", 1, 1, "at least 2" },
        { "exponential", 4, 4, "k = 4" },    { "exponential-both", 8, 9, "k = 9" },
        { "ring", 2, 2, "k = 2" },           { "exponential", 4, 0, "k = 0" },
        { "ring", 8, 3, "k = 3" },           { "torus", 8, 1, "unknown graph kind 'torus'" },
        { "exponential-both", 6, 5, "fewer than" }, { "bipartite", 8, 5, "fewer than" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_err_clear();
        int rc = topology_create(&t, bad[i].kind, bad[i].n, bad[i].k, NULL);
        CHECK(rc == -1 && t.book == NULL && strstr(dt_err_msg(), bad[i].msg),
              "%s n=%d k=%d refused: %s", bad[i].kind, bad[i].n, bad[i].k, dt_err_msg());
        topology_free(&t);
    }
    CHECK(topology_create(&t, NULL, 4, 1, NULL) == -1, "NULL kind refused");
    CHECK(topology_create(&t, "complete", 4, 99, NULL) == 0 && t.k == 3,
          "complete ignores k (k = n-1)");
    topology_free(&t);
    CHECK(topology_create(&t, "bipartite", 8, 4, NULL) == 0 && t.len[0] == 4,
          "bipartite n=8 k=4 (the whole book) accepted");
    topology_free(&t);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dt_topology_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_exponential_k1();
    test_exponential_books();
    test_exponential_both();
    test_bipartite();
    test_invariants();
    test_visits();
    test_ring_complete();
    test_file_graphs();
    test_parse_int64();
    test_file_integers();
    test_invalid();

    const char *names[] = { "star.txt", "path.txt", "irregular.txt", "word.txt", "three.txt",
                            "one.txt", "huge.txt", "range.txt", "neg.txt", "loop.txt",
                            "split.txt", "lonely.txt", "empty.txt", "wide.txt" };
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    rmdir(tmpdir);
    return tap_done();
}
