/* The public tuning database API (anvil.h, "the tuning database"): src/tune's database behind
 * an opaque handle, for `anvil db` and for library users. */
#include "api/api.h"
#include "api/env.h"
#include "core/core.h"
#include "tune/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(ANVIL_TUNING_FINGERPRINT_MAX == TUNE_FINGERPRINT_MAX,
               "anvil.h and tune.h must agree on a fingerprint's size");

int anvil_tuning_db_schema_version(void) {
    return TUNE_SCHEMA_VERSION;
}

anvil_status anvil_tuning_fingerprint(char *buf, size_t cap) {
    API_CHECK(buf && cap, "anvil_tuning_fingerprint: no buffer");
    return tune_fingerprint(buf, cap);
}

anvil_status anvil_tuning_db_default_path(char *buf, size_t cap, int create_dir) {
    API_CHECK(buf && cap, "anvil_tuning_db_default_path: no buffer");
    const tune_path_env env = api_env_tune_paths();
    return tune_db_default_path(&env, buf, cap, create_dir != 0);
}

anvil_status anvil_tuning_db_open(const char *path, anvil_tuning_db **out) {
    API_CHECK(out, "anvil_tuning_db_open: out is NULL");
    *out = NULL;
    API_CHECK(path, "anvil_tuning_db_open: path is NULL");
    anvil_tuning_db *db = calloc(1, sizeof *db);
    if (!db) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "anvil_tuning_db_open: out of memory");
    anvil_status s = tune_db_open(path, &db->db);
    if (s != ANVIL_OK) {
        free(db);
        return s;
    }
    *out = db;
    return ANVIL_OK;
}

void anvil_tuning_db_close(anvil_tuning_db *db) {
    if (!db) return;
    tune_db_close(db->db);
    free(db);
}

const char *anvil_tuning_db_path(const anvil_tuning_db *db) {
    return db ? tune_db_path(db->db) : "";
}

typedef struct db_foreach_ctx {
    anvil_status (*fn)(const anvil_tuning_record *rec, void *arg);
    void *arg;
} db_foreach_ctx;

static anvil_status db_foreach_one(const tune_record *r, void *arg) {
    const db_foreach_ctx *c = arg;
    anvil_tuning_record rec = {r->key,    r->fingerprint, r->variant,   r->median_ns,
                               r->params, r->max_err,     r->unix_time, r->source};
    return c->fn(&rec, c->arg);
}

anvil_status anvil_tuning_db_foreach(anvil_tuning_db *db,
                                     anvil_status (*fn)(const anvil_tuning_record *rec, void *arg),
                                     void *arg) {
    API_CHECK(db, "anvil_tuning_db_foreach: db is NULL");
    API_CHECK(fn, "anvil_tuning_db_foreach: no function");
    db_foreach_ctx c = {fn, arg};
    return tune_db_foreach(db->db, db_foreach_one, &c);
}

anvil_status anvil_tuning_db_count(anvil_tuning_db *db, size_t *out) {
    API_CHECK(db && out, "anvil_tuning_db_count: db or out is NULL");
    return tune_db_count(db->db, out);
}

anvil_status anvil_tuning_db_check(anvil_tuning_db *db) {
    API_CHECK(db, "anvil_tuning_db_check: db is NULL");
    return tune_db_check(db->db);
}

anvil_status anvil_tuning_db_export_json(anvil_tuning_db *db,
                                         anvil_status (*write)(const char *text, size_t len,
                                                               void *arg),
                                         void *arg) {
    API_CHECK(db, "anvil_tuning_db_export_json: db is NULL");
    API_CHECK(write, "anvil_tuning_db_export_json: no write function");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "exporting the tuning database: out of memory");
    anvil_status s = tune_db_export_json(db->db, f);
    if (fclose(f) != 0 && s == ANVIL_OK)
        s = core_err(ANVIL_ERR_OUT_OF_MEMORY, "exporting the tuning database: out of memory");
    if (s == ANVIL_OK) s = write(text, len, arg);
    free(text);
    return s;
}

anvil_status anvil_tuning_db_import_json(anvil_tuning_db *db, const char *path, size_t *changed,
                                         size_t *kept) {
    API_CHECK(db && path, "anvil_tuning_db_import_json: db or path is NULL");
    return tune_db_import_json(db->db, path, changed, kept);
}

anvil_status anvil_tuning_db_merge(anvil_tuning_db *db, const char *other_path, size_t *changed) {
    API_CHECK(db && other_path, "anvil_tuning_db_merge: db or other_path is NULL");
    return tune_db_merge(db->db, other_path, changed);
}

anvil_status anvil_tuning_db_prune(anvil_tuning_db *db, const char *fingerprint, size_t *removed) {
    API_CHECK(db && fingerprint, "anvil_tuning_db_prune: db or fingerprint is NULL");
    return tune_db_prune(db->db, fingerprint, removed);
}
