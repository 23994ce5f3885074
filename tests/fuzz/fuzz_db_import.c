/* libFuzzer target: arbitrary bytes as the JSON text `anvil db import` reads, through
 * tune_db_import_json_text into an in-memory SQLite tuning database (the schema made by
 * tune_db_open, so a record that passes the checks is really written; a fresh one every
 * INPUTS_PER_DB inputs; the last one stays open at exit, reachable from a static, so it is no
 * leak). Any crash, sanitizer report, leak or allocation past the RSS limit is a bug; a refusal
 * must say why. tests/fuzz.cmake registers `fuzz.db_import`, seeded with
 * tests/fuzz/seeds/db_import and given the dictionary tests/fuzz/dict/db_import.dict. */
#include "tune/tune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Opening a database (its schema made in SQL) costs far more than an import; one in-memory
 * database serves this many inputs before a fresh one, so records imported earlier (clashing
 * keys, replacements) are exercised too while memory stays bounded. */
#define INPUTS_PER_DB 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tune_db *db;
    static int uses;
    /* an in-memory database cannot use WAL, which tune_db_open warns about */
    setenv("ANVIL_LOG", "error", 0);
    if (db && ++uses >= INPUTS_PER_DB) {
        tune_db_close(db);
        db = NULL;
    }
    if (!db) {
        uses = 0;
        if (tune_db_open(":memory:", &db) != ANVIL_OK) {
            fprintf(stderr, "fuzz_db_import: cannot open an in-memory database: %s\n",
                    core_err_message());
            abort();
        }
    }
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t changed = 0, kept = 0;
    core_err_clear();
    anvil_status st = tune_db_import_json_text(db, text, size, "fuzz.json", &changed, &kept);
    if (st != ANVIL_OK && st != ANVIL_ERR_OUT_OF_MEMORY && !core_err_message()[0]) {
        fprintf(stderr, "fuzz_db_import: status %s without a message\n", core_status_name(st));
        abort();
    }
    free(text);
    return 0;
}
