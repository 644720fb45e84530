/* libFuzzer: the gossip graph file reader (algorithm.topology = file).
 * Input: byte 0 = rank count 1..32; the rest is the graph file. An accepted
 * file has every peer in [0, n) and no number of n or more. */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "topology/topology.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    int n = 1 + data[0] % 32;
    const char *path = fuzz_file(0, "graph.txt", data + 1, size - 1);
    dt_topology t;
    if (topology_create(&t, "file", n, 1, path) == 0) {
        int peers[64];
        for (int r = 0; r < n; r++) {
            int k = topology_out_peers(&t, r, 0, peers);
            for (int j = 0; j < k; j++)
                if (peers[j] < 0 || peers[j] >= n)
                    abort();
        }
        topology_free(&t);
        /* every number of an accepted file is a rank below n: a larger one
         * (2^32 + 1, say) must have been refused, not narrowed */
        if (fuzz_largest_number(data + 1, size - 1) >= (uint64_t)n)
            abort();
    }
    dt_err_clear();
    return 0;
}
