/* The tuning database on SQLite.
 *
 * Why SQLite: several anvil processes (a tuning run, a server, the CLI) use one file at once, and a
 * tune that is killed must keep what it measured. SQLite's WAL mode lets readers and one writer
 * work concurrently, the busy timeout makes writers wait for each other instead of failing, and
 * every put is its own committed transaction, so a crash loses at most the put in flight.
 * synchronous=NORMAL keeps commits durable across a crash of the process (the WAL is in the OS's
 * page cache); only a power cut may lose the last few, which costs a re-measurement, not data.
 *
 * A file is checked before anything is written to it: an existing file must read as an SQLite
 * database whose application_id is anvil's and whose schema version this anvil understands. Only
 * then is journal_mode switched to WAL (which rewrites the header). An empty database (a new
 * file, or one of zero bytes) gets the schema inside an immediate transaction, re-checked there
 * so two processes creating the file at once do not both create it. */
#include "tune/tune.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How long a writer waits for another process's transaction before giving up. */
#define TUNE_BUSY_MS 5000
#define TUNE_PATH_MAX 4096

struct tune_db {
    sqlite3 *h;
    char path[TUNE_PATH_MAX];
};

/* The columns, in table order; every SELECT of whole records reads them in this order. */
#define TUNE_COLS                                                                                  \
    "key, fingerprint, family, n_dims, dims, variant, params, median_ns, spread, reps, max_err, "  \
    "source, unix_time"
static const char *const tune_col_names[] = {
    "key",       "fingerprint", "family", "n_dims",  "dims",   "variant",  "params",
    "median_ns", "spread",      "reps",   "max_err", "source", "unix_time"};
#define TUNE_NCOLS ((int)(sizeof tune_col_names / sizeof tune_col_names[0]))

static const char tune_schema_sql[] =
    "CREATE TABLE tune_records ("
    " key TEXT NOT NULL, fingerprint TEXT NOT NULL, family TEXT NOT NULL,"
    " n_dims INTEGER NOT NULL, dims TEXT NOT NULL, variant TEXT NOT NULL, params TEXT NOT NULL,"
    " median_ns REAL NOT NULL, spread REAL NOT NULL, reps INTEGER NOT NULL,"
    " max_err REAL NOT NULL, source TEXT NOT NULL, unix_time INTEGER NOT NULL,"
    " PRIMARY KEY (key, fingerprint));"
    "CREATE INDEX tune_records_family ON tune_records (family, fingerprint, n_dims);";

#define TUNE_UPSERT                                                                                \
    "INSERT INTO tune_records (" TUNE_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "   \
    "?11, ?12, ?13) ON CONFLICT (key, fingerprint) DO UPDATE SET family = excluded.family, "       \
    "n_dims = excluded.n_dims, dims = excluded.dims, variant = excluded.variant, "                 \
    "params = excluded.params, median_ns = excluded.median_ns, spread = excluded.spread, "         \
    "reps = excluded.reps, max_err = excluded.max_err, source = excluded.source, "                 \
    "unix_time = excluded.unix_time"

static anvil_status tune_sql_err(anvil_status s, const char *path, sqlite3 *h, const char *what) {
    return core_err(s, "tuning database '%s': %s failed: %s", path, what,
                    h ? sqlite3_errmsg(h) : "out of memory");
}

static anvil_status tune_exec(sqlite3 *h, const char *path, const char *sql) {
    if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, path, h, sql);
    return ANVIL_OK;
}

/* Runs a statement that yields one integer; returns SQLite's primary result code. */
static int tune_query_int(sqlite3 *h, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            *out = 0;
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc & 0xff;
}

static anvil_status tune_err_corrupt(const char *path, sqlite3 *h) {
    return core_err(ANVIL_ERR_IO,
                    "tuning database '%s' is not an SQLite database or is corrupt (sqlite: %s); "
                    "anvil left it unchanged: move or delete it and anvil will create a new one, "
                    "or use another path",
                    path, sqlite3_errmsg(h));
}

/* Whether the table has exactly anvil's columns, in order. */
static anvil_status tune_check_columns(sqlite3 *h, const char *path) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "PRAGMA table_info(tune_records)", -1, &st, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, path, h, "reading the schema");
    int i = 0, rc;
    bool ok = true;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (i >= TUNE_NCOLS || !name || strcmp(name, tune_col_names[i]) != 0) ok = false;
        i++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return tune_sql_err(ANVIL_ERR_IO, path, h, "reading the schema");
    if (!ok || i != TUNE_NCOLS)
        return core_err(ANVIL_ERR_IO,
                        "tuning database '%s' has anvil's application id but its table "
                        "tune_records has %d columns, not the %d of schema version %d; it is "
                        "damaged: move or delete it and anvil will create a new one",
                        path, i, TUNE_NCOLS, TUNE_SCHEMA_VERSION);
    return ANVIL_OK;
}

/* Reads the header fields and schema of an open file without writing. *empty: a database with no
 * tables and no ids (new); otherwise it must be anvil's, of a schema this anvil reads. */
static anvil_status tune_inspect(sqlite3 *h, const char *path, bool *empty) {
    int64_t app = 0, ver = 0, tables = 0;
    /* One read transaction (unless the caller holds one), so that the three reads see one state:
     * read one by one, they could see another process's new schema without its ids. */
    bool own = sqlite3_get_autocommit(h) != 0;
    int rc = own ? sqlite3_exec(h, "BEGIN", NULL, NULL, NULL) : SQLITE_OK;
    if (rc == SQLITE_OK) rc = tune_query_int(h, "PRAGMA application_id", &app);
    if (rc == SQLITE_OK) rc = tune_query_int(h, "PRAGMA user_version", &ver);
    if (rc == SQLITE_OK) rc = tune_query_int(h, "SELECT count(*) FROM sqlite_master", &tables);
    if (own && !sqlite3_get_autocommit(h)) sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) return tune_err_corrupt(path, h);
    if (rc != SQLITE_OK) return tune_sql_err(ANVIL_ERR_IO, path, h, "reading the header");
    *empty = app == 0 && ver == 0 && tables == 0;
    if (*empty) return ANVIL_OK;
    if (app != TUNE_APPLICATION_ID)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "'%s' is an SQLite database of another application (application_id "
                        "0x%08" PRIx32 ", %" PRId64 " schema objects), not an anvil tuning "
                        "database (application_id 0x%08x); anvil left it unchanged: use another "
                        "path (--db or ANVIL_TUNING_DB)",
                        path, (uint32_t)app, tables, TUNE_APPLICATION_ID);
    if (ver > TUNE_SCHEMA_VERSION)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "tuning database '%s' has schema version %" PRId64 ", newer than the %d "
                        "this anvil reads; anvil left it unchanged: use the newer anvil with it, "
                        "or another path for this one",
                        path, ver, TUNE_SCHEMA_VERSION);
    if (ver < 1)
        return core_err(ANVIL_ERR_IO,
                        "tuning database '%s' has anvil's application id but schema version "
                        "%" PRId64 "; it is damaged: move or delete it and anvil will create a new "
                        "one",
                        path, ver);
    return tune_check_columns(h, path);
}

/* Gives a new (empty) database anvil's schema and ids, in one transaction that re-checks the
 * file under the write lock. */
static anvil_status tune_init(sqlite3 *h, const char *path) {
    CORE_TRY(tune_exec(h, path, "BEGIN IMMEDIATE"));
    bool empty = false;
    anvil_status s = tune_inspect(h, path, &empty);
    if (s == ANVIL_OK && empty) {
        char sql[sizeof tune_schema_sql + 128];
        snprintf(sql, sizeof sql, "%s PRAGMA application_id = %d; PRAGMA user_version = %d;",
                 tune_schema_sql, (int)TUNE_APPLICATION_ID, TUNE_SCHEMA_VERSION);
        s = tune_exec(h, path, sql);
    }
    if (s == ANVIL_OK) return tune_exec(h, path, "COMMIT");
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    return s;
}

/* Opens path with flags, extended codes and the busy timeout; *out is closed on failure. */
static anvil_status tune_connect(const char *path, int flags, sqlite3 **out) {
    sqlite3 *h = NULL;
    int rc = sqlite3_open_v2(path, &h, flags, NULL);
    if (rc != SQLITE_OK) {
        anvil_status s = core_err(ANVIL_ERR_IO,
                                  "tuning database '%s' cannot be opened: %s; check that its "
                                  "folder exists and is writable",
                                  path, h ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
        sqlite3_close(h);
        return s;
    }
    sqlite3_busy_timeout(h, TUNE_BUSY_MS);
    *out = h;
    return ANVIL_OK;
}

anvil_status tune_db_open(const char *path, tune_db **out) {
    if (!path || !path[0] || !out)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_open: path and out are required");
    *out = NULL;
    if (strlen(path) >= TUNE_PATH_MAX)
        return core_err(ANVIL_ERR_LIMIT, "tuning database path is longer than %d bytes",
                        TUNE_PATH_MAX - 1);
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return core_err(ANVIL_ERR_IO, "tuning database '%s' is not a regular file; use a file path",
                        path);
    tune_db *db = core_calloc(1, sizeof *db);
    if (!db) return ANVIL_ERR_OUT_OF_MEMORY;
    snprintf(db->path, sizeof db->path, "%s", path);
    int flags = SQLITE_OPEN_READWRITE | (exists ? 0 : SQLITE_OPEN_CREATE);
    anvil_status s = tune_connect(path, flags, &db->h);
    bool empty = false;
    if (s == ANVIL_OK) s = tune_inspect(db->h, path, &empty);
    if (s == ANVIL_OK && empty) s = tune_init(db->h, path);
    if (s == ANVIL_OK) {
        /* Switching to WAL needs the file to itself and answers BUSY at once, without the busy
         * handler, while another process has it open (a new file opened by several at once):
         * retry for as long as the busy timeout. Once the file is in WAL mode it stays so. */
        sqlite3_stmt *jm = NULL;
        int rc = sqlite3_prepare_v2(db->h, "PRAGMA journal_mode = WAL", -1, &jm, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(jm);
        for (int waited = 0; (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && waited < TUNE_BUSY_MS;
             waited += 10) {
            sqlite3_reset(jm);
            sqlite3_sleep(10);
            rc = sqlite3_step(jm);
        }
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *)sqlite3_column_text(jm, 0);
            if (!mode || strcmp(mode, "wal") != 0)
                core_log(CORE_LOG_WARN, "tuning database '%s': journal mode %s, not wal", path,
                         mode ? mode : "?");
        } else {
            s = tune_sql_err(ANVIL_ERR_IO, path, db->h, "PRAGMA journal_mode = WAL");
        }
        sqlite3_finalize(jm);
    }
    if (s == ANVIL_OK) s = tune_exec(db->h, path, "PRAGMA synchronous = NORMAL");
    if (s != ANVIL_OK) {
        tune_db_close(db);
        return s;
    }
    *out = db;
    return ANVIL_OK;
}

void tune_db_close(tune_db *db) {
    if (!db) return;
    sqlite3_close(db->h);
    free(db);
}

const char *tune_db_path(const tune_db *db) {
    return db ? db->path : "";
}

/* ---- records <-> rows ----------------------------------------------------------------------- */

static bool tune_text_ok(const char *s, size_t cap, bool nonempty) {
    size_t n = strnlen(s, cap);
    return n < cap && (!nonempty || n > 0);
}

static anvil_status tune_record_check(const tune_record *r) {
    const char *bad = NULL;
    if (!tune_text_ok(r->key, sizeof r->key, true))
        bad = "key";
    else if (!tune_text_ok(r->family, sizeof r->family, true))
        bad = "family";
    else if (!tune_text_ok(r->fingerprint, sizeof r->fingerprint, true))
        bad = "fingerprint";
    else if (!tune_text_ok(r->variant, sizeof r->variant, true))
        bad = "variant";
    else if (!tune_text_ok(r->params, sizeof r->params, false))
        bad = "params";
    else if (!tune_text_ok(r->source, sizeof r->source, false))
        bad = "source";
    if (bad)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "tuning record: field %s is empty or not NUL-terminated", bad);
    if (r->n_dims < 0 || r->n_dims > TUNE_MAX_DIMS)
        return core_err(ANVIL_ERR_LIMIT, "tuning record '%s': %d shape numbers, at most %d", r->key,
                        r->n_dims, TUNE_MAX_DIMS);
    return ANVIL_OK;
}

/* "1,64,56,56"; at most 16 numbers of at most 20 characters and a comma each. */
static void tune_dims_text(const tune_record *r, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < r->n_dims && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? "," : "", r->dims[i]);
}

static bool tune_dims_parse(const char *s, int n, int64_t *dims) {
    if (!s) return n == 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && *s++ != ',') return false;
        char *end = NULL;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno) return false;
        dims[i] = v;
        s = end;
    }
    return *s == 0;
}

static void tune_bind(sqlite3_stmt *st, const tune_record *r, char *dims, size_t dims_cap) {
    tune_dims_text(r, dims, dims_cap);
    sqlite3_bind_text(st, 1, r->key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->family, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, r->n_dims);
    sqlite3_bind_text(st, 5, dims, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, r->variant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, r->params, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 8, r->median_ns);
    sqlite3_bind_double(st, 9, r->spread);
    sqlite3_bind_int(st, 10, r->reps);
    sqlite3_bind_double(st, 11, r->max_err);
    sqlite3_bind_text(st, 12, r->source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 13, r->unix_time);
}

static bool tune_col_text(sqlite3_stmt *st, int col, char *dst, size_t cap) {
    const char *s = (const char *)sqlite3_column_text(st, col);
    if (!s) s = "";
    size_t n = strlen(s);
    if (n >= cap) return false;
    memcpy(dst, s, n + 1);
    return true;
}

/* Fills r from a row of TUNE_COLS; a row that does not fit a record means a damaged file. */
static anvil_status tune_row_read(sqlite3_stmt *st, const char *path, tune_record *r) {
    memset(r, 0, sizeof *r);
    int64_t n_dims = sqlite3_column_int64(st, 3);
    bool ok = tune_col_text(st, 0, r->key, sizeof r->key) &&
              tune_col_text(st, 1, r->fingerprint, sizeof r->fingerprint) &&
              tune_col_text(st, 2, r->family, sizeof r->family) &&
              tune_col_text(st, 5, r->variant, sizeof r->variant) &&
              tune_col_text(st, 6, r->params, sizeof r->params) &&
              tune_col_text(st, 11, r->source, sizeof r->source) && n_dims >= 0 &&
              n_dims <= TUNE_MAX_DIMS &&
              tune_dims_parse((const char *)sqlite3_column_text(st, 4), (int)n_dims, r->dims);
    if (!ok)
        return core_err(ANVIL_ERR_IO,
                        "tuning database '%s': a record (key '%.80s') has a field that is too "
                        "long or malformed shape numbers; run `anvil db check`",
                        path, r->key);
    r->n_dims = (int)n_dims;
    r->median_ns = sqlite3_column_double(st, 7);
    r->spread = sqlite3_column_double(st, 8);
    r->reps = sqlite3_column_int(st, 9);
    r->max_err = sqlite3_column_double(st, 10);
    r->unix_time = sqlite3_column_int64(st, 12);
    return ANVIL_OK;
}

/* ---- put, get, nearest ---------------------------------------------------------------------- */

static anvil_status tune_check_db(const tune_db *db, const char *fn) {
    if (!db || !db->h) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "%s: no database", fn);
    return ANVIL_OK;
}

/* Binds and steps one upsert; *changed += rows it changed. */
static anvil_status tune_upsert(tune_db *db, sqlite3_stmt *st, const tune_record *r,
                                size_t *changed) {
    char dims[TUNE_MAX_DIMS * 22 + 1];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    tune_bind(st, r, dims, sizeof dims);
    if (sqlite3_step(st) != SQLITE_DONE)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "writing a record");
    if (changed) *changed += (size_t)sqlite3_changes(db->h);
    return ANVIL_OK;
}

anvil_status tune_db_put(tune_db *db, const tune_record *rec) {
    CORE_TRY(tune_check_db(db, "tune_db_put"));
    if (!rec) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_put: no record");
    CORE_TRY(tune_record_check(rec));
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, TUNE_UPSERT, -1, &st, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "preparing a put");
    anvil_status s = tune_upsert(db, st, rec, NULL);
    sqlite3_finalize(st);
    return s;
}

anvil_status tune_db_get(tune_db *db, const char *key, const char *fingerprint, tune_record *out,
                         bool *found) {
    CORE_TRY(tune_check_db(db, "tune_db_get"));
    if (!key || !fingerprint || !out || !found)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_get: an argument is NULL");
    *found = false;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(
            db->h, "SELECT " TUNE_COLS " FROM tune_records WHERE key = ?1 AND fingerprint = ?2", -1,
            &st, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "preparing a lookup");
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, fingerprint, -1, SQLITE_STATIC);
    anvil_status s = ANVIL_OK;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        s = tune_row_read(st, db->path, out);
        *found = s == ANVIL_OK;
    } else if (rc != SQLITE_DONE) {
        s = tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "looking a record up");
    }
    sqlite3_finalize(st);
    return s;
}

static double tune_log2_dim(int64_t d) {
    return d <= 0 ? 0.0 : log2((double)d);
}

anvil_status tune_db_nearest(tune_db *db, const char *family, const char *fingerprint, int n_dims,
                             const int64_t *dims, tune_record *out, bool *found) {
    CORE_TRY(tune_check_db(db, "tune_db_nearest"));
    if (!family || !fingerprint || !out || !found || (n_dims > 0 && !dims))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_nearest: an argument is NULL");
    if (n_dims < 0 || n_dims > TUNE_MAX_DIMS)
        return core_err(ANVIL_ERR_LIMIT, "tune_db_nearest: %d shape numbers, at most %d", n_dims,
                        TUNE_MAX_DIMS);
    *found = false;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT " TUNE_COLS " FROM tune_records WHERE family = ?1 AND "
                           "fingerprint = ?2 AND n_dims = ?3 ORDER BY key",
                           -1, &st, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "preparing a nearest lookup");
    sqlite3_bind_text(st, 1, family, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, n_dims);
    tune_record *cand = core_alloc(sizeof *cand);
    if (!cand) {
        sqlite3_finalize(st);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    anvil_status s = ANVIL_OK;
    double best = INFINITY;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        s = tune_row_read(st, db->path, cand);
        if (s != ANVIL_OK) break;
        double dist = 0.0;
        for (int i = 0; i < n_dims; i++)
            dist += fabs(tune_log2_dim(cand->dims[i]) - tune_log2_dim(dims[i]));
        if (dist < best) {
            best = dist;
            *out = *cand;
            *found = true;
        }
    }
    if (s == ANVIL_OK && rc != SQLITE_DONE)
        s = tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "reading records of a family");
    if (s != ANVIL_OK) *found = false;
    if (*found) out->nearest = true;
    free(cand);
    sqlite3_finalize(st);
    return s;
}

/* ---- merge, prune, check, count, export ----------------------------------------------------- */

anvil_status tune_db_merge_records(tune_db *db, tune_record_next_fn next, void *arg,
                                   size_t *changed) {
    CORE_TRY(tune_check_db(db, "tune_db_merge_records"));
    if (!next) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_merge_records: no source");
    if (changed) *changed = 0;
    /* The WHERE on the upsert's UPDATE leaves a clash's stored record in place unless the new
     * one is faster; sqlite3_changes then reports 0 rows, which is how kept records are told
     * from written ones. */
    sqlite3_stmt *wr = NULL;
    if (sqlite3_prepare_v2(db->h, TUNE_UPSERT " WHERE excluded.median_ns < tune_records.median_ns",
                           -1, &wr, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "preparing a merge");
    tune_record *r = core_alloc(sizeof *r);
    anvil_status s = r ? tune_exec(db->h, db->path, "BEGIN IMMEDIATE") : ANVIL_ERR_OUT_OF_MEMORY;
    if (s == ANVIL_OK) {
        size_t n = 0;
        for (bool end = false; s == ANVIL_OK;) {
            s = next(arg, r, &end);
            if (s != ANVIL_OK || end) break;
            s = tune_record_check(r);
            if (s == ANVIL_OK) s = tune_upsert(db, wr, r, &n);
        }
        if (s == ANVIL_OK) s = tune_exec(db->h, db->path, "COMMIT");
        /* All or nothing: a failure part way (a bad record, a full disk) undoes the records
         * already written, so the caller can fix the input and run it again. */
        if (s != ANVIL_OK) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
        if (s == ANVIL_OK && changed) *changed = n;
    }
    free(r);
    sqlite3_finalize(wr);
    return s;
}

/* The rows of another database, as a tune_record_next_fn for tune_db_merge_records. */
typedef struct tune_merge_src {
    sqlite3 *h;
    sqlite3_stmt *rd;
    const char *path;
} tune_merge_src;

static anvil_status tune_merge_next(void *arg, tune_record *out, bool *end) {
    tune_merge_src *m = arg;
    int rc = sqlite3_step(m->rd);
    *end = rc == SQLITE_DONE;
    if (rc == SQLITE_ROW) return tune_row_read(m->rd, m->path, out);
    if (rc == SQLITE_DONE) return ANVIL_OK;
    return tune_sql_err(ANVIL_ERR_IO, m->path, m->h, "reading records");
}

anvil_status tune_db_merge(tune_db *db, const char *other_path, size_t *changed) {
    CORE_TRY(tune_check_db(db, "tune_db_merge"));
    if (!other_path) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_merge: no path");
    if (changed) *changed = 0;
    struct stat sb;
    if (stat(other_path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return core_err(ANVIL_ERR_IO, "tuning database to merge '%s': %s", other_path,
                        stat(other_path, &sb) != 0 ? strerror(errno) : "not a regular file");
    sqlite3 *o = NULL;
    CORE_TRY(tune_connect(other_path, SQLITE_OPEN_READONLY, &o));
    bool empty = false;
    anvil_status s = tune_inspect(o, other_path, &empty);
    if (s == ANVIL_OK && empty)
        s = core_err(ANVIL_ERR_INVALID_ARGUMENT,
                     "tuning database to merge '%s' is empty: it has no anvil schema", other_path);
    tune_merge_src src = {o, NULL, other_path};
    if (s == ANVIL_OK &&
        sqlite3_prepare_v2(o, "SELECT " TUNE_COLS " FROM tune_records ORDER BY key, fingerprint",
                           -1, &src.rd, NULL) != SQLITE_OK)
        s = tune_sql_err(ANVIL_ERR_IO, other_path, o, "reading records");
    if (s == ANVIL_OK) s = tune_db_merge_records(db, tune_merge_next, &src, changed);
    sqlite3_finalize(src.rd);
    sqlite3_close(o);
    return s;
}

anvil_status tune_db_prune(tune_db *db, const char *fingerprint, size_t *removed) {
    CORE_TRY(tune_check_db(db, "tune_db_prune"));
    if (!fingerprint) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_prune: no fingerprint");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, "DELETE FROM tune_records WHERE fingerprint <> ?1", -1, &st,
                           NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "preparing a prune");
    sqlite3_bind_text(st, 1, fingerprint, -1, SQLITE_STATIC);
    anvil_status s = ANVIL_OK;
    if (sqlite3_step(st) != SQLITE_DONE)
        s = tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "pruning records");
    else if (removed)
        *removed = (size_t)sqlite3_changes(db->h);
    sqlite3_finalize(st);
    return s;
}

anvil_status tune_db_check(tune_db *db) {
    CORE_TRY(tune_check_db(db, "tune_db_check"));
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "PRAGMA integrity_check");
    anvil_status s = ANVIL_OK;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *res = (const char *)sqlite3_column_text(st, 0);
        if (!res || strcmp(res, "ok") != 0)
            s = core_err(ANVIL_ERR_IO,
                         "tuning database '%s' fails PRAGMA integrity_check: %.200s; move or "
                         "delete it and anvil will create a new one",
                         db->path, res ? res : "(no message)");
    } else {
        s = tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "PRAGMA integrity_check");
    }
    sqlite3_finalize(st);
    bool empty = false;
    if (s == ANVIL_OK) s = tune_inspect(db->h, db->path, &empty);
    if (s == ANVIL_OK && empty)
        s = core_err(ANVIL_ERR_IO, "tuning database '%s' has lost its schema", db->path);
    if (s != ANVIL_OK) return s;
    if (sqlite3_prepare_v2(db->h, "SELECT " TUNE_COLS " FROM tune_records", -1, &st, NULL) !=
        SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "reading records");
    tune_record *r = core_alloc(sizeof *r);
    if (!r) s = ANVIL_ERR_OUT_OF_MEMORY;
    while (s == ANVIL_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        s = tune_row_read(st, db->path, r);
        if (s == ANVIL_OK && tune_record_check(r) != ANVIL_OK)
            s = core_err_prefix(ANVIL_ERR_IO, "tuning database '%s'", db->path);
    }
    if (s == ANVIL_OK && rc != SQLITE_DONE)
        s = tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "reading records");
    free(r);
    sqlite3_finalize(st);
    return s;
}

anvil_status tune_db_count(tune_db *db, size_t *out) {
    CORE_TRY(tune_check_db(db, "tune_db_count"));
    if (!out) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_count: out is NULL");
    int64_t n = 0;
    if (tune_query_int(db->h, "SELECT count(*) FROM tune_records", &n) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "counting records");
    *out = (size_t)n;
    return ANVIL_OK;
}

/* A number as JSON text that reads back as the same double. cJSON prints 15 significant digits,
 * enough to look right but not to round-trip (0.1 + 0.2 comes back as 0.3, 2^53 as
 * 9.00719925474099e+15), and tune_db_import_json must reproduce a record bit for bit: the
 * shortest of %.15g, %.16g, %.17g that strtod reads back exactly (17 always does). NaN and the
 * infinities, which JSON cannot spell, become null as cJSON writes them. */
static cJSON *tune_json_real(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

/* An integer as exact JSON text (cJSON would go through a double and 15 digits). */
static cJSON *tune_json_int(int64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_CreateRaw(buf);
}

/* Adds item (may be NULL: out of memory) to o as name; false and item freed on failure. */
static bool tune_json_add(cJSON *o, const char *name, cJSON *item) {
    if (item && cJSON_AddItemToObject(o, name, item)) return true;
    cJSON_Delete(item);
    return false;
}

/* One record as a JSON object; NULL when out of memory. */
static cJSON *tune_record_json(const tune_record *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON *dims = cJSON_CreateArray();
    if (!o || !dims) {
        cJSON_Delete(o);
        cJSON_Delete(dims);
        return NULL;
    }
    bool ok = cJSON_AddStringToObject(o, "key", r->key) &&
              cJSON_AddStringToObject(o, "fingerprint", r->fingerprint) &&
              cJSON_AddStringToObject(o, "family", r->family);
    for (int i = 0; ok && i < r->n_dims; i++) {
        cJSON *d = tune_json_int(r->dims[i]);
        ok = d && cJSON_AddItemToArray(dims, d);
        if (!ok) cJSON_Delete(d);
    }
    ok = tune_json_add(o, "dims", dims) && ok;
    ok = ok && cJSON_AddStringToObject(o, "variant", r->variant) &&
         cJSON_AddStringToObject(o, "params", r->params) &&
         tune_json_add(o, "median_ns", tune_json_real(r->median_ns)) &&
         tune_json_add(o, "spread", tune_json_real(r->spread)) &&
         tune_json_add(o, "reps", tune_json_int(r->reps)) &&
         tune_json_add(o, "max_err", tune_json_real(r->max_err)) &&
         cJSON_AddStringToObject(o, "source", r->source) &&
         tune_json_add(o, "unix_time", tune_json_int(r->unix_time));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

anvil_status tune_db_foreach(tune_db *db, tune_record_fn fn, void *arg) {
    CORE_TRY(tune_check_db(db, "tune_db_foreach"));
    if (!fn) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_foreach: no function");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT " TUNE_COLS " FROM tune_records ORDER BY key, fingerprint", -1,
                           &st, NULL) != SQLITE_OK)
        return tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "reading records");
    tune_record *r = core_alloc(sizeof *r);
    anvil_status s = r ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    int rc = SQLITE_DONE;
    while (s == ANVIL_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        s = tune_row_read(st, db->path, r);
        if (s == ANVIL_OK) s = fn(r, arg);
    }
    if (s == ANVIL_OK && rc != SQLITE_DONE)
        s = tune_sql_err(ANVIL_ERR_IO, db->path, db->h, "reading records");
    free(r);
    sqlite3_finalize(st);
    return s;
}

/* Adds one record to the export's array. */
static anvil_status tune_export_one(const tune_record *r, void *arg) {
    cJSON *o = tune_record_json(r);
    if (!o || !cJSON_AddItemToArray((cJSON *)arg, o)) {
        cJSON_Delete(o);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "exporting the tuning database: out of memory");
    }
    return ANVIL_OK;
}

anvil_status tune_db_export_json(tune_db *db, FILE *f) {
    CORE_TRY(tune_check_db(db, "tune_db_export_json"));
    if (!f) return core_err(ANVIL_ERR_INVALID_ARGUMENT, "tune_db_export_json: no file");
    cJSON *root = cJSON_CreateObject();
    cJSON *ver = root ? cJSON_AddNumberToObject(root, "schema_version", TUNE_SCHEMA_VERSION) : NULL;
    cJSON *arr = ver ? cJSON_AddArrayToObject(root, "records") : NULL;
    if (!arr) {
        cJSON_Delete(root);
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "exporting the tuning database: out of memory");
    }
    anvil_status s = tune_db_foreach(db, tune_export_one, arr);
    char *text = s == ANVIL_OK ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (s == ANVIL_OK && !text)
        s = core_err(ANVIL_ERR_OUT_OF_MEMORY, "exporting the tuning database: out of memory");
    if (s == ANVIL_OK && (fputs(text, f) < 0 || fputc('\n', f) == EOF || fflush(f) != 0))
        s = core_err(ANVIL_ERR_IO, "exporting the tuning database '%s': write failed: %s", db->path,
                     strerror(errno));
    free(text);
    return s;
}
