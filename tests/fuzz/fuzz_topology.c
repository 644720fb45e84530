/* libFuzzer: the gossip graph file reader (algorithm.topology = file).
 * Input: byte 0 = rank count 1..32; the rest is the graph file. */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "graph/topology.h"
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
    }
    dt_err_clear();
    return 0;
}
