/* libFuzzer target: arbitrary bytes as an ONNX model, through the public loader (protobuf
 * decoding, import, op checks, load-time shape inference, verification). A model that loads is
 * freed again. Any crash, sanitizer report, leak or run past the RSS limit is a bug.
 *
 * Built only with -DANVIL_FUZZ=ON and CC=clang; tests/onnx_import.cmake registers the ctest
 * `fuzz.load`, seeded with the bad-model corpus and the valid unit-test models. */
#include "anvil.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    anvil_model *m = NULL;
    if (anvil_model_load_buffer(data, size, &m) == ANVIL_OK) anvil_model_free(m);
    return 0;
}
