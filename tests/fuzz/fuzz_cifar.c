/* libFuzzer: the CIFAR-10 binary reader. Input: the test_batch.bin file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/data.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    fuzz_file(0, "test_batch.bin", data, size);
    dt_dataset d;
    memset(&d, 0, sizeof d);
    if (dataset_load_cifar10(&d, fuzz_dir(), 0) == 0)
        fuzz_check_dataset(&d);
    dt_err_clear();
    return 0;
}
