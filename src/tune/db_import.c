/* Importing a JSON export into the tuning database (anvil db import).
 *
 * The file may come from another machine, an older anvil or a hand edit, so nothing in it is
 * trusted: it is read whole under a size cap (a JSON tree costs several times the text, and a
 * wrong path to a huge file must not exhaust memory), parsed with cJSON, and every record is
 * converted and checked in a first pass that touches no database. Only a file that passes all of
 * it reaches the second pass, which writes through tune_db_merge_records in one transaction, so
 * a bad file never takes the write lock and a failure while writing rolls everything back.
 *
 * Numbers: JSON numbers are doubles, so the integer fields (dims, reps, unix_time) must be whole
 * and within 2^53, where a double holds every integer exactly; anything else was not written by
 * tune_db_export_json and is refused rather than rounded. */
#include "tune/tune.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Largest magnitude of an integer field: every integer up to it is exact in a double. */
#define TUNE_JSON_INT_MAX 9007199254740992.0 /* 2^53 */

/* Reads path whole into a NUL-terminated buffer (owned by the caller, free) of at most
 * TUNE_IMPORT_MAX_BYTES bytes. The size is checked before reading when the file reports one
 * and again while reading, for pipes and files that grow. */
static anvil_status tune_import_read(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return core_err(ANVIL_ERR_IO, "importing '%s': cannot open it: %s", path, strerror(errno));
    struct stat sb;
    anvil_status s = ANVIL_OK;
    if (fstat(fileno(f), &sb) != 0)
        s = core_err(ANVIL_ERR_IO, "importing '%s': %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        s = core_err(ANVIL_ERR_IO, "importing '%s': it is a folder, not a JSON file", path);
    else if (S_ISREG(sb.st_mode) && (uintmax_t)sb.st_size > TUNE_IMPORT_MAX_BYTES)
        s = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                     "importing '%s': the file has %jd bytes, more than the %zu MiB an export "
                     "may have; is it really a tuning export?",
                     path, (intmax_t)sb.st_size, TUNE_IMPORT_MAX_BYTES >> 20);
    size_t cap = 0, n = 0;
    char *buf = NULL;
    while (s == ANVIL_OK) {
        if (n + 1 >= cap) {
            size_t want = cap ? cap * 2 : 64 * 1024;
            if (want > TUNE_IMPORT_MAX_BYTES + 2) want = TUNE_IMPORT_MAX_BYTES + 2;
            char *grown = realloc(buf, want);
            if (!grown) {
                s = core_err(ANVIL_ERR_OUT_OF_MEMORY, "importing '%s': out of memory", path);
                break;
            }
            buf = grown;
            cap = want;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (n > TUNE_IMPORT_MAX_BYTES)
            s = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                         "importing '%s': the file is larger than the %zu MiB an export may "
                         "have; is it really a tuning export?",
                         path, TUNE_IMPORT_MAX_BYTES >> 20);
        else if (got == 0 && ferror(f))
            s = core_err(ANVIL_ERR_IO, "importing '%s': read failed: %s", path, strerror(errno));
        else if (got == 0)
            break;
    }
    fclose(f);
    if (s != ANVIL_OK) {
        free(buf);
        return s;
    }
    if (!buf) buf = calloc(1, 1);
    if (!buf) return core_err(ANVIL_ERR_OUT_OF_MEMORY, "importing '%s': out of memory", path);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return ANVIL_OK;
}

/* Names the file and the record (and its key once known) in a message about a record. */
typedef struct tune_import_ctx {
    const char *path;
    size_t index;
    const char *key; /* NULL until read */
} tune_import_ctx;

static anvil_status tune_import_bad(const tune_import_ctx *c, const char *field, const char *what) {
    if (c->key)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': records[%zu] (key '%.80s'): field '%s' %s; nothing was "
                        "imported",
                        c->path, c->index, c->key, field, what);
    return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                    "importing '%s': records[%zu]: field '%s' %s; nothing was imported", c->path,
                    c->index, field, what);
}

static anvil_status tune_import_text(const tune_import_ctx *c, const cJSON *o, const char *field,
                                     char *dst, size_t cap, bool nonempty) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!v) return tune_import_bad(c, field, "is missing");
    if (!cJSON_IsString(v) || !v->valuestring) return tune_import_bad(c, field, "is not a string");
    size_t n = strlen(v->valuestring);
    if (nonempty && n == 0) return tune_import_bad(c, field, "is empty");
    if (n >= cap) {
        char what[96];
        snprintf(what, sizeof what, "has %zu bytes, more than the %zu it may have", n, cap - 1);
        return tune_import_bad(c, field, what);
    }
    memcpy(dst, v->valuestring, n + 1);
    return ANVIL_OK;
}

/* A finite number >= 0 (median_ns, spread, max_err). */
static anvil_status tune_import_real(const tune_import_ctx *c, const cJSON *o, const char *field,
                                     double *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!v) return tune_import_bad(c, field, "is missing");
    if (!cJSON_IsNumber(v)) return tune_import_bad(c, field, "is not a number");
    if (!isfinite(v->valuedouble) || v->valuedouble < 0) {
        char what[96];
        snprintf(what, sizeof what, "is %g, not a finite number >= 0", v->valuedouble);
        return tune_import_bad(c, field, what);
    }
    *dst = v->valuedouble;
    return ANVIL_OK;
}

/* A whole number in [lo, hi] (both within 2^53). name is the field as the message shows it. */
static anvil_status tune_import_whole(const tune_import_ctx *c, const cJSON *v, const char *name,
                                      double lo, double hi, int64_t *dst) {
    if (!v) return tune_import_bad(c, name, "is missing");
    if (!cJSON_IsNumber(v)) return tune_import_bad(c, name, "is not a number");
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi) {
        char what[128];
        snprintf(what, sizeof what, "is %.17g, not a whole number from %.0f to %.0f", d, lo, hi);
        return tune_import_bad(c, name, what);
    }
    *dst = (int64_t)d;
    return ANVIL_OK;
}

/* Fills r (zeroed first) from records[c->index]. */
static anvil_status tune_import_record(tune_import_ctx *c, const cJSON *o, tune_record *r) {
    memset(r, 0, sizeof *r);
    c->key = NULL;
    if (!cJSON_IsObject(o))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': records[%zu] is not an object; nothing was imported",
                        c->path, c->index);
    CORE_TRY(tune_import_text(c, o, "key", r->key, sizeof r->key, true));
    c->key = r->key;
    CORE_TRY(tune_import_text(c, o, "fingerprint", r->fingerprint, sizeof r->fingerprint, true));
    CORE_TRY(tune_import_text(c, o, "family", r->family, sizeof r->family, true));
    CORE_TRY(tune_import_text(c, o, "variant", r->variant, sizeof r->variant, true));
    CORE_TRY(tune_import_text(c, o, "params", r->params, sizeof r->params, false));
    CORE_TRY(tune_import_text(c, o, "source", r->source, sizeof r->source, false));

    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(o, "dims");
    if (!dims) return tune_import_bad(c, "dims", "is missing");
    if (!cJSON_IsArray(dims)) return tune_import_bad(c, "dims", "is not an array");
    int n = cJSON_GetArraySize(dims);
    if (n > TUNE_MAX_DIMS) {
        char what[64];
        snprintf(what, sizeof what, "has %d numbers, more than %d", n, TUNE_MAX_DIMS);
        return tune_import_bad(c, "dims", what);
    }
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, dims) {
        char name[32];
        snprintf(name, sizeof name, "dims[%d]", i);
        CORE_TRY(tune_import_whole(c, d, name, -TUNE_JSON_INT_MAX, TUNE_JSON_INT_MAX, &r->dims[i]));
        i++;
    }
    r->n_dims = n;
    /* The export does not write n_dims (the array says it), but a file that does must agree. */
    const cJSON *nd = cJSON_GetObjectItemCaseSensitive(o, "n_dims");
    int64_t v = 0;
    if (nd) {
        CORE_TRY(tune_import_whole(c, nd, "n_dims", 0, TUNE_MAX_DIMS, &v));
        if (v != n) return tune_import_bad(c, "n_dims", "differs from the length of dims");
    }

    CORE_TRY(tune_import_real(c, o, "median_ns", &r->median_ns));
    CORE_TRY(tune_import_real(c, o, "spread", &r->spread));
    CORE_TRY(tune_import_real(c, o, "max_err", &r->max_err));
    CORE_TRY(
        tune_import_whole(c, cJSON_GetObjectItemCaseSensitive(o, "reps"), "reps", 0, INT_MAX, &v));
    r->reps = (int)v;
    CORE_TRY(tune_import_whole(c, cJSON_GetObjectItemCaseSensitive(o, "unix_time"), "unix_time",
                               -TUNE_JSON_INT_MAX, TUNE_JSON_INT_MAX, &r->unix_time));
    return ANVIL_OK;
}

/* Checks the top level: an object with a known schema_version and a records array. */
static anvil_status tune_import_top(const char *path, const cJSON *root, const cJSON **records) {
    if (!cJSON_IsObject(root))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': the file is JSON but not an object {\"schema_version\": "
                        "N, \"records\": [...]} as `anvil db export --json` writes",
                        path);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(ver))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': \"schema_version\" is %s; an export has a number there",
                        path, ver ? "not a number" : "missing");
    double v = ver->valuedouble;
    if (v > TUNE_SCHEMA_VERSION)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': schema version %.17g is newer than the %d this anvil "
                        "reads; import it with the newer anvil that wrote it",
                        path, v, TUNE_SCHEMA_VERSION);
    if (!(v >= 1) || v != floor(v))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': schema version %.17g is not one anvil ever wrote (1 to "
                        "%d)",
                        path, v, TUNE_SCHEMA_VERSION);
    *records = cJSON_GetObjectItemCaseSensitive(root, "records");
    if (!cJSON_IsArray(*records))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "importing '%s': \"records\" is %s; an export has an array there", path,
                        *records ? "not an array" : "missing");
    return ANVIL_OK;
}

/* The file's records as a tune_record_next_fn for tune_db_merge_records. */
typedef struct tune_import_src {
    tune_import_ctx ctx;
    const cJSON *next;
} tune_import_src;

static anvil_status tune_import_next(void *arg, tune_record *out, bool *end) {
    tune_import_src *s = arg;
    *end = s->next == NULL;
    if (*end) return ANVIL_OK;
    anvil_status st = tune_import_record(&s->ctx, s->next, out);
    s->next = s->next->next;
    s->ctx.index++;
    return st;
}

/* Parse error position as line and column (from 1) for the message. */
static void tune_import_where(const char *text, const char *at, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

anvil_status tune_db_import_json(tune_db *db, const char *path, size_t *changed, size_t *kept) {
    if (changed) *changed = 0;
    if (kept) *kept = 0;
    if (!db || !path)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tune_db_import_json: db and path are required");
    char *text = NULL;
    size_t len = 0;
    CORE_TRY(tune_import_read(path, &text, &len));
    anvil_status s = tune_db_import_json_text(db, text, len, path, changed, kept);
    free(text);
    return s;
}

anvil_status tune_db_import_json_text(tune_db *db, const char *text, size_t len, const char *path,
                                      size_t *changed, size_t *kept) {
    if (changed) *changed = 0;
    if (kept) *kept = 0;
    if (!db || !text || !path)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tune_db_import_json_text: db, text and path are required");
    anvil_status s = ANVIL_OK;
    cJSON *root = NULL;
    if (len == 0) {
        s = core_err(ANVIL_ERR_INVALID_ARGUMENT, "importing '%s': the file is empty, not JSON",
                     path);
    } else if (memchr(text, 0, len)) {
        s = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                     "importing '%s': the file holds NUL bytes: it is not JSON text", path);
    } else {
        /* require_null_terminated: text after the JSON value (a second document, garbage) is an
         * error, not silently ignored. */
        const char *end = NULL;
        root = cJSON_ParseWithLengthOpts(text, len + 1, &end, true);
        if (!root) {
            size_t line = 0, col = 0;
            tune_import_where(text, end ? end : text, &line, &col);
            s = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                         "importing '%s': not JSON (a syntax error at line %zu, column %zu); "
                         "import reads what `anvil db export --json` writes",
                         path, line, col);
        }
    }
    const cJSON *records = NULL;
    if (s == ANVIL_OK) s = tune_import_top(path, root, &records);
    /* First pass: every record converted and checked, before the database is touched. */
    size_t total = 0;
    if (s == ANVIL_OK) {
        tune_record *r = core_alloc(sizeof *r);
        tune_import_src src = {{path, 0, NULL}, records->child};
        bool end = false;
        if (!r) s = ANVIL_ERR_OUT_OF_MEMORY;
        while (s == ANVIL_OK && (s = tune_import_next(&src, r, &end)) == ANVIL_OK && !end) total++;
        free(r);
    }
    /* Second pass: written in one transaction. */
    size_t n = 0;
    if (s == ANVIL_OK) {
        tune_import_src src = {{path, 0, NULL}, records->child};
        s = tune_db_merge_records(db, tune_import_next, &src, &n);
        if (s != ANVIL_OK) s = core_err_prefix(s, "importing '%s' (nothing was imported)", path);
    }
    cJSON_Delete(root);
    if (s != ANVIL_OK) return s;
    if (changed) *changed = n;
    if (kept) *kept = total - n;
    return ANVIL_OK;
}
