/* libFuzzer target: arbitrary bytes as a training checkpoint, through train_ckpt_parse (what
 * anvil_train_load runs on the file before it touches the session). A checkpoint that parses is
 * freed again. The CRC-32 at the end would refuse almost every mutation before the parser proper,
 * so the target first writes the right CRC over the last 4 bytes (in a copy) when the first byte
 * is odd: half the inputs test the checksum, half the fields behind it. Any crash, sanitizer
 * report, leak or allocation past the RSS limit is a bug; a refusal must say why.
 * tests/fuzz.cmake registers `fuzz.ckpt`, seeded with tests/fuzz/seeds/ckpt. */
#include "train/train_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const bool fix_crc = data[0] & 1;
    data++;
    size--;
    unsigned char *p = malloc(size ? size : 1);
    if (!p) return 0;
    memcpy(p, data, size);
    if (fix_crc && size >= 4) {
        const uint32_t crc = (uint32_t)crc32(0L, p, (uInt)(size - 4));
        memcpy(p + size - 4, &crc, 4);
    }
    train_ckpt *c = NULL;
    core_err_clear();
    anvil_status st = train_ckpt_parse("fuzz.ckpt", p, size, &c);
    if (st == ANVIL_OK) {
        train_ckpt_free(c);
    } else if (st != ANVIL_ERR_OUT_OF_MEMORY && !core_err_message()[0]) {
        fprintf(stderr, "fuzz_ckpt: status %s without a message\n", core_status_name(st));
        abort();
    }
    free(p);
    return 0;
}
