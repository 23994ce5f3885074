/* libFuzzer target: arbitrary bytes as a .npy file, through npy_read_mem (the parser behind
 * npy_read, which the CLI and the C API use for input and training data). A tensor that parses
 * is freed again. Any crash, sanitizer report, leak or allocation past the RSS limit is a bug; a
 * refusal must say why. tests/fuzz.cmake registers `fuzz.npy`, seeded with tests/fuzz/seeds/npy. */
#include "api/api.h"
#include "core/core.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    anvil_tensor *t = NULL;
    core_err_clear();
    anvil_status st = npy_read_mem(data, size, "fuzz.npy", &t);
    if (st == ANVIL_OK) {
        anvil_tensor_free(t);
    } else if (st != ANVIL_ERR_OUT_OF_MEMORY && !core_err_message()[0]) {
        fprintf(stderr, "fuzz_npy: status %s without a message\n", core_status_name(st));
        abort();
    }
    return 0;
}
