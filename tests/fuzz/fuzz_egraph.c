/* libFuzzer: the edge-consensus graph file reader (src/topology/egraph.c).
 * Input: byte 0 = rank count 2..33, byte 1 = round K 1..16; the rest is the
 * graph file (edge lines "I J" or "I J PI PJ", an optional "round K"). An
 * accepted file has mirrored ends and no number above 10^6. */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "topology/egraph.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 65536)
        return 0;
    int n = 2 + data[0] % 32, K = 1 + data[1] % 16;
    const char *path = fuzz_file(0, "egraph.txt", data + 2, size - 2);
    dt_egraph g;
    if (egraph_create(&g, "file", n, K, 1, 2.0, path) == 0) {
        /* every end has its mirror at the neighbour */
        for (int i = 0; i < n; i++)
            for (int m = 0; m < g.deg[i]; m++) {
                int j = g.adj[i][m].peer;
                if (j < 0 || j >= n || !egraph_end(&g, j, i) || g.adj[i][m].phase < 0 ||
                    g.adj[i][m].phase >= g.K)
                    abort();
            }
        egraph_free(&g);
        /* ranks < n <= 33, phases < 10^6, round K <= 10^6: a larger number
         * in an accepted file was narrowed instead of refused */
        if (fuzz_largest_number(data + 2, size - 2) > 1000000)
            abort();
    }
    dt_err_clear();
    return 0;
}
