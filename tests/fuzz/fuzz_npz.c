/* libFuzzer target: arbitrary bytes as a .npz archive, through npz_read_mem (the zip directory,
 * zip64 fields, stored and deflated entries, then each entry's .npy parser). Arrays that parse
 * are freed again. Any crash, sanitizer report, leak or allocation past the RSS limit is a bug;
 * a refusal must say why. tests/fuzz.cmake registers `fuzz.npz`, seeded with
 * tests/fuzz/seeds/npz. */
#include "api/api.h"
#include "core/core.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char **names = NULL;
    anvil_tensor **arrays = NULL;
    size_t count = 0;
    core_err_clear();
    anvil_status st = npz_read_mem(data, size, "fuzz.npz", &names, &arrays, &count);
    if (st == ANVIL_OK) {
        npz_free(names, arrays, count);
    } else if (st != ANVIL_ERR_OUT_OF_MEMORY && !core_err_message()[0]) {
        fprintf(stderr, "fuzz_npz: status %s without a message\n", core_status_name(st));
        abort();
    }
    return 0;
}
