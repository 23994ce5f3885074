/* The tuning database (src/tune): round trips and upserts, fingerprints and pruning, the
 * nearest-shape fallback, merging, refusal of corrupt, foreign and newer files (left byte for byte
 * as they were), durability of committed puts when the writer is killed with SIGKILL, the JSON
 * export and its import (exact round trip, the faster kept on a clash, malformed files refused
 * with the database unchanged), and the fingerprint text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tune/tune.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_tmpdir.h"

static tune_record make_rec(const char *key, const char *family, const char *fp, int n,
                            const int64_t *dims, const char *variant, double median) {
    tune_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.key, sizeof r.key, "%s", key);
    snprintf(r.family, sizeof r.family, "%s", family);
    snprintf(r.fingerprint, sizeof r.fingerprint, "%s", fp);
    r.n_dims = n;
    for (int i = 0; i < n; i++) r.dims[i] = dims[i];
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    r.median_ns = median;
    r.spread = 1.25;
    r.reps = 30;
    r.max_err = 1e-6;
    snprintf(r.source, sizeof r.source, "offline");
    r.unix_time = 1764000000;
    return r;
}

static tune_db *open_ok(const char *path) {
    tune_db *db = NULL;
    anvil_status s = tune_db_open(path, &db);
    if (s != ANVIL_OK) fprintf(stderr, "open: %s\n", core_err_message());
    assert_int_equal(s, ANVIL_OK);
    assert_non_null(db);
    return db;
}

static size_t count_of(tune_db *db) {
    size_t n = 0;
    assert_int_equal(tune_db_count(db, &n), ANVIL_OK);
    return n;
}

static void test_round_trip_and_upsert(void **state) {
    (void)state;
    const char *path = tmp_path("rt.db");
    tune_db *db = open_ok(path);
    assert_int_equal(count_of(db), 0);
    int64_t dims[4] = {1, 64, 56, 56};
    tune_record r = make_rec("Conv|k3s1p1|f32[1,64,56,56]|t2", "Conv|k3s1p1|f32", "fpA", 4, dims,
                             "conv_winograd_f32_avx512", 12345.5);
    snprintf(r.params, sizeof r.params, "tile=6x6 blocks=4");
    snprintf(r.source, sizeof r.source, "online");
    assert_int_equal(tune_db_put(db, &r), ANVIL_OK);

    tune_record g;
    bool found = false;
    assert_int_equal(tune_db_get(db, r.key, "fpA", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.key, r.key);
    assert_string_equal(g.family, r.family);
    assert_string_equal(g.fingerprint, "fpA");
    assert_int_equal(g.n_dims, 4);
    for (int i = 0; i < 4; i++) assert_int_equal(g.dims[i], dims[i]);
    assert_string_equal(g.variant, r.variant);
    assert_string_equal(g.params, "tile=6x6 blocks=4");
    assert_true(g.median_ns == 12345.5);
    assert_true(g.spread == 1.25);
    assert_int_equal(g.reps, 30);
    assert_true(g.max_err == 1e-6);
    assert_string_equal(g.source, "online");
    assert_int_equal(g.unix_time, 1764000000);
    assert_false(g.nearest);

    /* the same key and fingerprint again replaces the record */
    tune_record r2 = make_rec(r.key, r.family, "fpA", 4, dims, "conv_im2col_f32", 999.0);
    assert_int_equal(tune_db_put(db, &r2), ANVIL_OK);
    assert_int_equal(count_of(db), 1);
    assert_int_equal(tune_db_get(db, r.key, "fpA", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "conv_im2col_f32");
    assert_string_equal(g.params, "");
    assert_true(g.median_ns == 999.0);
    tune_db_close(db);

    /* reopening an existing database keeps the record */
    db = open_ok(path);
    assert_int_equal(count_of(db), 1);
    assert_int_equal(tune_db_check(db), ANVIL_OK);
    /* an unknown key is not found */
    assert_int_equal(tune_db_get(db, "nope", "fpA", &g, &found), ANVIL_OK);
    assert_false(found);
    /* a record with an empty variant is refused */
    tune_record bad = make_rec("k", "f", "fpA", 0, NULL, "", 1.0);
    assert_int_not_equal(tune_db_put(db, &bad), ANVIL_OK);
    tune_db_close(db);
}

static void test_fingerprint_mismatch_and_prune(void **state) {
    (void)state;
    tune_db *db = open_ok(tmp_path("fp.db"));
    int64_t dims[2] = {128, 256};
    tune_record a = make_rec("Gemm|128x256", "Gemm", "fpA", 2, dims, "gemm_a", 10.0);
    tune_record b = make_rec("Gemm|128x256", "Gemm", "fpB", 2, dims, "gemm_b", 20.0);
    tune_record b2 = make_rec("Gemm|64x64", "Gemm", "fpB", 2, dims, "gemm_b", 5.0);
    assert_int_equal(tune_db_put(db, &a), ANVIL_OK);
    assert_int_equal(tune_db_put(db, &b), ANVIL_OK);
    assert_int_equal(tune_db_put(db, &b2), ANVIL_OK);
    assert_int_equal(count_of(db), 3);

    tune_record g;
    bool found = true;
    assert_int_equal(tune_db_get(db, a.key, "fpC", &g, &found), ANVIL_OK);
    assert_false(found);
    assert_int_equal(tune_db_get(db, a.key, "fpB", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "gemm_b");

    size_t removed = 0;
    assert_int_equal(tune_db_prune(db, "fpA", &removed), ANVIL_OK);
    assert_int_equal(removed, 2);
    assert_int_equal(count_of(db), 1);
    assert_int_equal(tune_db_get(db, a.key, "fpB", &g, &found), ANVIL_OK);
    assert_false(found);
    assert_int_equal(tune_db_get(db, a.key, "fpA", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "gemm_a");
    tune_db_close(db);
}

static void test_nearest_shape(void **state) {
    (void)state;
    tune_db *db = open_ok(tmp_path("near.db"));
    const int64_t s1[4] = {1, 64, 56, 56}, s2[4] = {1, 64, 28, 28}, s3[4] = {1, 256, 14, 14};
    tune_record r1 = make_rec("Conv|k3|[1,64,56,56]", "Conv|k3", "fp", 4, s1, "v56", 1.0);
    tune_record r2 = make_rec("Conv|k3|[1,64,28,28]", "Conv|k3", "fp", 4, s2, "v28", 1.0);
    tune_record r3 = make_rec("Conv|k3|[1,256,14,14]", "Conv|k3", "fp", 4, s3, "v14", 1.0);
    /* the same shape in another family and under another fingerprint must not be chosen */
    tune_record r4 = make_rec("Conv|k1|[1,64,54,54]", "Conv|k1", "fp", 4, s1, "other", 1.0);
    tune_record r5 = make_rec("Conv|k3|[1,64,54,54]", "Conv|k3", "fp2", 4, s1, "otherfp", 1.0);
    tune_record *all[] = {&r1, &r2, &r3, &r4, &r5};
    for (size_t i = 0; i < 5; i++) assert_int_equal(tune_db_put(db, all[i]), ANVIL_OK);

    const int64_t q[4] = {1, 64, 54, 54};
    tune_record g;
    bool found = false;
    assert_int_equal(tune_db_nearest(db, "Conv|k3", "fp", 4, q, &g, &found), ANVIL_OK);
    assert_true(found);
    assert_true(g.nearest);
    assert_string_equal(g.variant, "v56");
    assert_string_equal(g.key, r1.key);

    const int64_t q2[4] = {1, 200, 16, 16};
    assert_int_equal(tune_db_nearest(db, "Conv|k3", "fp", 4, q2, &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "v14");

    /* another family, another rank, another fingerprint: nothing */
    assert_int_equal(tune_db_nearest(db, "MaxPool|k3", "fp", 4, q, &g, &found), ANVIL_OK);
    assert_false(found);
    assert_int_equal(tune_db_nearest(db, "Conv|k3", "fp", 3, q, &g, &found), ANVIL_OK);
    assert_false(found);
    assert_int_equal(tune_db_nearest(db, "Conv|k3", "fp3", 4, q, &g, &found), ANVIL_OK);
    assert_false(found);
    tune_db_close(db);
}

static void test_merge_keeps_faster(void **state) {
    (void)state;
    const char *p1 = tmp_path("m1.db"), *p2 = tmp_path("m2.db");
    tune_db *d1 = open_ok(p1), *d2 = open_ok(p2);
    int64_t dims[1] = {8};
    tune_record a1 = make_rec("k1", "f", "fp", 1, dims, "a", 100.0);
    tune_record a2 = make_rec("k2", "f", "fp", 1, dims, "a", 200.0);
    tune_record b1 = make_rec("k1", "f", "fp", 1, dims, "b", 50.0);
    tune_record b2 = make_rec("k2", "f", "fp", 1, dims, "b", 300.0);
    tune_record b3 = make_rec("k3", "f", "fp", 1, dims, "b", 10.0);
    assert_int_equal(tune_db_put(d1, &a1), ANVIL_OK);
    assert_int_equal(tune_db_put(d1, &a2), ANVIL_OK);
    assert_int_equal(tune_db_put(d2, &b1), ANVIL_OK);
    assert_int_equal(tune_db_put(d2, &b2), ANVIL_OK);
    assert_int_equal(tune_db_put(d2, &b3), ANVIL_OK);
    tune_db_close(d2);

    size_t changed = 0;
    assert_int_equal(tune_db_merge(d1, p2, &changed), ANVIL_OK);
    assert_int_equal(changed, 2); /* k1 replaced, k3 added, k2 kept */
    assert_int_equal(count_of(d1), 3);
    tune_record g;
    bool found = false;
    assert_int_equal(tune_db_get(d1, "k1", "fp", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "b");
    assert_true(g.median_ns == 50.0);
    assert_int_equal(tune_db_get(d1, "k2", "fp", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "a");
    assert_true(g.median_ns == 200.0);
    assert_int_equal(tune_db_get(d1, "k3", "fp", &g, &found), ANVIL_OK);
    assert_true(found);

    /* a missing file is an error naming it */
    assert_int_not_equal(tune_db_merge(d1, tmp_path("absent.db"), NULL), ANVIL_OK);
    assert_non_null(strstr(core_err_message(), "absent.db"));
    assert_int_equal(tune_db_check(d1), ANVIL_OK);
    tune_db_close(d1);
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* Opening path must fail with `want`, name the path, and leave the file's bytes as they were. */
static void expect_refused(const char *path, anvil_status want) {
    size_t n0 = 0, n1 = 0;
    unsigned char *before = read_all(path, &n0);
    tune_db *db = NULL;
    assert_int_equal(tune_db_open(path, &db), want);
    assert_null(db);
    assert_non_null(strstr(core_err_message(), path));
    unsigned char *after = read_all(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
}

static void test_corrupt_file_refused(void **state) {
    (void)state;
    const char *path = tmp_path("random.db");
    unsigned char bytes[8192];
    srand(1234);
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(rand() & 0xff);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, sizeof bytes, f), sizeof bytes);
    fclose(f);
    expect_refused(path, ANVIL_ERR_IO);
    assert_non_null(strstr(core_err_message(), "not an SQLite database or is corrupt"));
}

static void sql_file(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

static void test_foreign_and_newer_refused(void **state) {
    (void)state;
    const char *path = tmp_path("foreign.db");
    sql_file(path, "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES ('mine');");
    expect_refused(path, ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(core_err_message(), "another application"));

    /* merging from it is refused too */
    tune_db *db = open_ok(tmp_path("target.db"));
    assert_int_not_equal(tune_db_merge(db, path, NULL), ANVIL_OK);
    assert_non_null(strstr(core_err_message(), path));
    tune_db_close(db);

    /* an anvil database of a newer schema */
    const char *newer = tmp_path("newer.db");
    db = open_ok(newer);
    tune_db_close(db);
    sql_file(newer, "PRAGMA user_version = 99;");
    expect_refused(newer, ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(core_err_message(), "newer"));
}

static void test_kill9_keeps_commits(void **state) {
    (void)state;
    const char *path = tmp_path("kill.db");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        tune_db *db = NULL;
        if (tune_db_open(path, &db) != ANVIL_OK) _exit(2);
        int64_t dims[2] = {1, 1};
        for (int i = 1; i <= 1000000; i++) {
            char key[32];
            snprintf(key, sizeof key, "k%d", i);
            dims[1] = i;
            tune_record r = make_rec(key, "f", "fp", 2, dims, "v", (double)i);
            if (tune_db_put(db, &r) != ANVIL_OK) _exit(3);
            if (write(fds[1], &i, sizeof i) != (ssize_t)sizeof i) _exit(4);
        }
        _exit(0);
    }
    close(fds[1]);
    int last = 0, v = 0;
    while (last < 50) {
        ssize_t got = read(fds[0], &v, sizeof v);
        if (got != (ssize_t)sizeof v) break;
        last = v;
    }
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(fds[0]);
    assert_true(last >= 50);

    tune_db *db = open_ok(path);
    assert_true(count_of(db) >= (size_t)last);
    assert_int_equal(tune_db_check(db), ANVIL_OK);
    tune_db_close(db);
}

/* Four processes open one new file at once and each puts 100 records: the busy timeout makes
 * them wait for each other, so every put succeeds and every record is there. */
static void test_concurrent_writers(void **state) {
    (void)state;
    const char *path = tmp_path("shared.db");
    enum { PROCS = 4, PUTS = 100 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            tune_db *db = NULL;
            if (tune_db_open(path, &db) != ANVIL_OK) {
                fprintf(stderr, "child open: %s\n", anvil_last_error());
                _exit(2);
            }
            for (int i = 0; i < PUTS; i++) {
                char key[32];
                snprintf(key, sizeof key, "p%d_k%d", p, i);
                tune_record r = make_rec(key, "f", "fp", 0, NULL, "v", 1.0 + i);
                if (tune_db_put(db, &r) != ANVIL_OK) _exit(3);
            }
            tune_db_close(db);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status = -1;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    tune_db *db = open_ok(path);
    assert_int_equal(count_of(db), PROCS * PUTS);
    assert_int_equal(tune_db_check(db), ANVIL_OK);
    tune_db_close(db);
}

/* Counts records; returns ANVIL_ERR_RUNTIME at the second when *arg starts negative. */
static anvil_status count_each(const tune_record *r, void *arg) {
    int *n = arg;
    assert_true(r->key[0] != 0);
    if (*n == -2) return ANVIL_ERR_RUNTIME;
    *n += *n < 0 ? -1 : 1;
    return ANVIL_OK;
}

static void test_export_json(void **state) {
    (void)state;
    tune_db *db = open_ok(tmp_path("json.db"));
    int64_t dims[3] = {2, 3, 4};
    tune_record a = make_rec("MatMul|\"q\"|[2,3,4]", "MatMul", "fp", 3, dims, "gemm_x", 7.5);
    tune_record b = make_rec("Add|[2,3,4]", "Add", "fp", 3, dims, "add_avx2", 1.5);
    assert_int_equal(tune_db_put(db, &a), ANVIL_OK);
    assert_int_equal(tune_db_put(db, &b), ANVIL_OK);

    int n = 0;
    assert_int_equal(tune_db_foreach(db, count_each, &n), ANVIL_OK);
    assert_int_equal(n, 2);
    n = -1; /* stops at the second record with the callback's status */
    assert_int_equal(tune_db_foreach(db, count_each, &n), ANVIL_ERR_RUNTIME);
    assert_int_equal(n, -2);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tune_db_export_json(db, f), ANVIL_OK);
    fclose(f);
    tune_db_close(db);

    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    assert_true(cJSON_IsNumber(ver));
    assert_int_equal((int)ver->valuedouble, TUNE_SCHEMA_VERSION);
    cJSON *recs = cJSON_GetObjectItemCaseSensitive(root, "records");
    assert_true(cJSON_IsArray(recs));
    assert_int_equal(cJSON_GetArraySize(recs), 2);
    int seen = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, recs) {
        const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "key"));
        const char *var = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "variant"));
        assert_non_null(key);
        assert_non_null(var);
        cJSON *d = cJSON_GetObjectItemCaseSensitive(r, "dims");
        assert_int_equal(cJSON_GetArraySize(d), 3);
        assert_int_equal((int)cJSON_GetArrayItem(d, 2)->valuedouble, 4);
        double med = cJSON_GetObjectItemCaseSensitive(r, "median_ns")->valuedouble;
        if (strcmp(key, a.key) == 0) {
            assert_string_equal(var, "gemm_x");
            assert_true(med == 7.5);
            seen |= 1;
        } else if (strcmp(key, b.key) == 0) {
            assert_string_equal(var, "add_avx2");
            assert_true(med == 1.5);
            seen |= 2;
        }
    }
    assert_int_equal(seen, 3);
    cJSON_Delete(root);
    free(text);
}

/* ---- import ------------------------------------------------------------------------------- */

static void expect_same_record(const tune_record *a, const tune_record *b) {
    assert_string_equal(a->key, b->key);
    assert_string_equal(a->family, b->family);
    assert_string_equal(a->fingerprint, b->fingerprint);
    assert_int_equal(a->n_dims, b->n_dims);
    for (int i = 0; i < a->n_dims; i++) assert_int_equal(a->dims[i], b->dims[i]);
    assert_string_equal(a->variant, b->variant);
    assert_string_equal(a->params, b->params);
    /* bit for bit: the export must print doubles so that they read back exactly */
    assert_memory_equal(&a->median_ns, &b->median_ns, sizeof(double));
    assert_memory_equal(&a->spread, &b->spread, sizeof(double));
    assert_int_equal(a->reps, b->reps);
    assert_memory_equal(&a->max_err, &b->max_err, sizeof(double));
    assert_string_equal(a->source, b->source);
    assert_int_equal(a->unix_time, b->unix_time);
}

static void export_to(tune_db *db, const char *path) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(tune_db_export_json(db, f), ANVIL_OK);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* Compares every record of src with its copy in dst. */
typedef struct same_ctx {
    tune_db *dst;
    int n;
} same_ctx;

static anvil_status same_in_dst(const tune_record *r, void *arg) {
    same_ctx *c = arg;
    tune_record g;
    bool found = false;
    assert_int_equal(tune_db_get(c->dst, r->key, r->fingerprint, &g, &found), ANVIL_OK);
    assert_true(found);
    expect_same_record(r, &g);
    c->n++;
    return ANVIL_OK;
}

static void test_import_round_trip(void **state) {
    (void)state;
    char src_path[160], dst_path[160], json[160];
    snprintf(src_path, sizeof src_path, "%s", tmp_path("imp_src.db"));
    snprintf(dst_path, sizeof dst_path, "%s", tmp_path("imp_dst.db"));
    snprintf(json, sizeof json, "%s", tmp_path("imp.json"));
    tune_db *src = open_ok(src_path);

    /* texts at their longest, quotes, backslashes, control and non-ASCII characters */
    int64_t dims16[TUNE_MAX_DIMS];
    for (int i = 0; i < TUNE_MAX_DIMS; i++) dims16[i] = (int64_t)1 << (i * 3); /* up to 2^45 */
    tune_record a = make_rec("", "", "", TUNE_MAX_DIMS, dims16, "", 0.1 + 0.2);
    memset(a.key, 'k', sizeof a.key - 1);
    const char *odd = "Conv|\"q\"\\\t\x01\xc3\xa9|";
    memcpy(a.key, odd, strlen(odd));
    memset(a.family, 'f', sizeof a.family - 1);
    memset(a.fingerprint, 'p', sizeof a.fingerprint - 1);
    memset(a.variant, 'v', sizeof a.variant - 1);
    memset(a.params, 'm', sizeof a.params - 1);
    memset(a.source, 's', sizeof a.source - 1);
    a.spread = 1.0 / 3.0;
    a.max_err = 5e-324; /* the smallest denormal */
    a.reps = 2147483647;
    a.unix_time = 9007199254740992; /* 2^53 */
    int64_t dims3[3] = {-1, 0, 7};
    tune_record b =
        make_rec("Gemm|[-1,0,7]", "Gemm", "fpB", 3, dims3, "gemm_f32", 1.7976931348623157e308);
    snprintf(b.params, sizeof b.params, "mr=8;nr=12;threads=2");
    b.spread = 0;
    b.max_err = 0;
    b.reps = 0;
    b.unix_time = -86400;
    tune_record c = make_rec("Relu|[]", "Relu", "fpB", 0, NULL, "relu", 123456789.123456789);
    snprintf(c.source, sizeof c.source, "online");
    assert_int_equal(tune_db_put(src, &a), ANVIL_OK);
    assert_int_equal(tune_db_put(src, &b), ANVIL_OK);
    assert_int_equal(tune_db_put(src, &c), ANVIL_OK);
    export_to(src, json);

    tune_db *dst = open_ok(dst_path);
    size_t changed = 99, kept = 99;
    anvil_status s = tune_db_import_json(dst, json, &changed, &kept);
    if (s != ANVIL_OK) fprintf(stderr, "import: %s\n", core_err_message());
    assert_int_equal(s, ANVIL_OK);
    assert_int_equal(changed, 3);
    assert_int_equal(kept, 0);
    assert_int_equal(count_of(dst), 3);
    same_ctx ctx = {dst, 0};
    assert_int_equal(tune_db_foreach(src, same_in_dst, &ctx), ANVIL_OK);
    assert_int_equal(ctx.n, 3);
    assert_int_equal(tune_db_check(dst), ANVIL_OK);

    /* the same file again: equal medians are not faster, so every record is kept */
    assert_int_equal(tune_db_import_json(dst, json, &changed, &kept), ANVIL_OK);
    assert_int_equal(changed, 0);
    assert_int_equal(kept, 3);
    assert_int_equal(count_of(dst), 3);

    /* an export of an empty database imports nothing; NULL counts are allowed */
    tune_db *empty = open_ok(tmp_path("imp_empty.db"));
    export_to(empty, json);
    tune_db_close(empty);
    assert_int_equal(tune_db_import_json(dst, json, NULL, NULL), ANVIL_OK);
    assert_int_equal(count_of(dst), 3);
    tune_db_close(dst);
    tune_db_close(src);
}

static void test_import_keeps_faster(void **state) {
    (void)state;
    char json[160];
    snprintf(json, sizeof json, "%s", tmp_path("imp_faster.json"));
    tune_db *other = open_ok(tmp_path("imp_other.db"));
    tune_db *db = open_ok(tmp_path("imp_mine.db"));
    int64_t dims[1] = {8};
    tune_record a1 = make_rec("k1", "f", "fp", 1, dims, "a", 100.0);
    tune_record a2 = make_rec("k2", "f", "fp", 1, dims, "a", 200.0);
    tune_record b1 = make_rec("k1", "f", "fp", 1, dims, "b", 50.0);
    tune_record b2 = make_rec("k2", "f", "fp", 1, dims, "b", 300.0);
    tune_record b3 = make_rec("k3", "f", "fp", 1, dims, "b", 10.0);
    tune_record b4 = make_rec("k1", "f", "fp2", 1, dims, "b", 999.0); /* another machine */
    assert_int_equal(tune_db_put(db, &a1), ANVIL_OK);
    assert_int_equal(tune_db_put(db, &a2), ANVIL_OK);
    tune_record *theirs[] = {&b1, &b2, &b3, &b4};
    for (size_t i = 0; i < 4; i++) assert_int_equal(tune_db_put(other, theirs[i]), ANVIL_OK);
    export_to(other, json);
    tune_db_close(other);

    size_t changed = 0, kept = 0;
    assert_int_equal(tune_db_import_json(db, json, &changed, &kept), ANVIL_OK);
    assert_int_equal(changed, 3); /* k1 replaced, k3 and k1@fp2 added */
    assert_int_equal(kept, 1);    /* k2: ours is faster */
    assert_int_equal(count_of(db), 4);
    tune_record g;
    bool found = false;
    assert_int_equal(tune_db_get(db, "k1", "fp", &g, &found), ANVIL_OK);
    assert_true(found);
    expect_same_record(&g, &b1);
    assert_int_equal(tune_db_get(db, "k2", "fp", &g, &found), ANVIL_OK);
    assert_true(found);
    expect_same_record(&g, &a2);
    assert_int_equal(tune_db_get(db, "k3", "fp", &g, &found), ANVIL_OK);
    assert_true(found);
    expect_same_record(&g, &b3);
    assert_int_equal(tune_db_get(db, "k1", "fp2", &g, &found), ANVIL_OK);
    assert_true(found);
    expect_same_record(&g, &b4);
    tune_db_close(db);
}

/* A valid record as the export writes it: key "k0" on "fp", faster than the database's. */
static cJSON *good_record_json(void) {
    cJSON *o = cJSON_CreateObject();
    assert_non_null(o);
    cJSON_AddStringToObject(o, "key", "k0");
    cJSON_AddStringToObject(o, "fingerprint", "fp");
    cJSON_AddStringToObject(o, "family", "f");
    cJSON *d = cJSON_AddArrayToObject(o, "dims");
    cJSON_AddItemToArray(d, cJSON_CreateNumber(1));
    cJSON_AddItemToArray(d, cJSON_CreateNumber(64));
    cJSON_AddStringToObject(o, "variant", "fast");
    cJSON_AddStringToObject(o, "params", "");
    cJSON_AddNumberToObject(o, "median_ns", 1.0);
    cJSON_AddNumberToObject(o, "spread", 1.1);
    cJSON_AddNumberToObject(o, "reps", 10);
    cJSON_AddNumberToObject(o, "max_err", 0.0);
    cJSON_AddStringToObject(o, "source", "offline");
    cJSON_AddNumberToObject(o, "unix_time", 1764000000);
    return o;
}

/* {"schema_version": 1, "records": [good, bad]} as text (free); bad NULL: only the good one. */
static char *file_with(cJSON *bad) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "schema_version", TUNE_SCHEMA_VERSION);
    cJSON *recs = cJSON_AddArrayToObject(root, "records");
    cJSON_AddItemToArray(recs, good_record_json());
    if (bad) cJSON_AddItemToArray(recs, bad);
    char *text = cJSON_Print(root);
    assert_non_null(text);
    cJSON_Delete(root);
    return text;
}

/* records[1] is the good record with field replaced by value (NULL: removed). */
static char *bad_field(const char *field, cJSON *value) {
    cJSON *o = good_record_json();
    cJSON_ReplaceItemInObjectCaseSensitive(o, "key", cJSON_CreateString("k1")); /* not k0 */
    if (value) {
        if (cJSON_GetObjectItemCaseSensitive(o, field))
            cJSON_ReplaceItemInObjectCaseSensitive(o, field, value);
        else
            cJSON_AddItemToObject(o, field, value);
    } else {
        cJSON_DeleteItemFromObjectCaseSensitive(o, field);
    }
    return file_with(o);
}

static cJSON *long_string(size_t n) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, 'x', n);
    s[n] = 0;
    cJSON *v = cJSON_CreateString(s);
    free(s);
    return v;
}

static cJSON *number_array(int n, double v) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v));
    return a;
}

/* Importing path into db must fail with want, name the file and each of the texts, and leave
 * db as it was: one record, k0 on fp, of variant "slow". */
static void expect_import_refused(tune_db *db, const char *path, anvil_status want,
                                  const char *what1, const char *what2) {
    size_t changed = 7, kept = 7;
    anvil_status s = tune_db_import_json(db, path, &changed, &kept);
    const char *msg = core_err_message();
    if (s != want || !strstr(msg, path) || (what1 && !strstr(msg, what1)) ||
        (what2 && !strstr(msg, what2)))
        fprintf(stderr, "import of %s: status %d, message: %s\n", path, (int)s, msg);
    assert_int_equal(s, want);
    assert_non_null(strstr(msg, path));
    if (what1) assert_non_null(strstr(msg, what1));
    if (what2) assert_non_null(strstr(msg, what2));
    assert_int_equal(changed, 0);
    assert_int_equal(kept, 0);
    assert_int_equal(count_of(db), 1);
    tune_record g;
    bool found = false;
    assert_int_equal(tune_db_get(db, "k0", "fp", &g, &found), ANVIL_OK);
    assert_true(found);
    assert_string_equal(g.variant, "slow");
    assert_true(g.median_ns == 100.0);
}

static void refuse_text(tune_db *db, const char *path, char *text, const char *what1,
                        const char *what2) {
    write_text(path, text);
    free(text);
    expect_import_refused(db, path, ANVIL_ERR_INVALID_ARGUMENT, what1, what2);
}

static char *dup_text(const char *s) {
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

static void test_import_refuses_malformed(void **state) {
    (void)state;
    char path[160];
    snprintf(path, sizeof path, "%s", tmp_path("bad.json"));
    tune_db *db = open_ok(tmp_path("imp_bad.db"));
    int64_t dims[2] = {1, 64};
    tune_record mine = make_rec("k0", "f", "fp", 2, dims, "slow", 100.0);
    assert_int_equal(tune_db_put(db, &mine), ANVIL_OK);

    /* the good file imports (so each refusal below is the bad part's doing); then put back */
    char *good = file_with(NULL);
    write_text(path, good);
    free(good);
    size_t changed = 0;
    assert_int_equal(tune_db_import_json(db, path, &changed, NULL), ANVIL_OK);
    assert_int_equal(changed, 1);
    assert_int_equal(tune_db_put(db, &mine), ANVIL_OK);

    /* not JSON, or not an export */
    refuse_text(db, path, dup_text(""), "empty", NULL);
    refuse_text(db, path, dup_text("SQLite format 3"), "not JSON", "line 1, column 1");
    refuse_text(db, path, dup_text("{\"schema_version\": 1,\n \"records\": [}"), "not JSON",
                "line 2");
    refuse_text(db, path, dup_text("{\"schema_version\": 1, \"records\": []} {}"), "not JSON",
                NULL);
    refuse_text(db, path, dup_text("{\"schema_version\": NaN, \"records\": []}"), "not JSON", NULL);
    refuse_text(db, path, dup_text("[1, 2]"), "not an object", NULL);
    refuse_text(db, path, dup_text("{\"records\": []}"), "schema_version", "missing");
    refuse_text(db, path, dup_text("{\"schema_version\": \"1\", \"records\": []}"),
                "schema_version", "not a number");
    refuse_text(db, path, dup_text("{\"schema_version\": 2, \"records\": []}"), "newer", NULL);
    refuse_text(db, path, dup_text("{\"schema_version\": 0, \"records\": []}"), "schema version",
                NULL);
    refuse_text(db, path, dup_text("{\"schema_version\": 1}"), "records", "missing");
    refuse_text(db, path, dup_text("{\"schema_version\": 1, \"records\": {}}"), "records",
                "not an array");
    write_text(path, "{\"records\": []}");
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 3, SEEK_SET), 0);
    assert_int_equal(fputc(0, f), 0);
    fclose(f);
    expect_import_refused(db, path, ANVIL_ERR_INVALID_ARGUMENT, "NUL", NULL);

    /* a record that is not an object, lacks a field or has one of the wrong type */
    refuse_text(db, path, file_with(cJSON_CreateNumber(5)), "records[1] is not an object", NULL);
    static const char *const fields[] = {"key",     "fingerprint", "family",  "dims",
                                         "variant", "params",      "source",  "median_ns",
                                         "spread",  "reps",        "max_err", "unix_time"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "'%s' is missing", fields[i]);
        refuse_text(db, path, bad_field(fields[i], NULL), "records[1]", want);
        bool text = strcmp(fields[i], "dims") != 0 && strcmp(fields[i], "median_ns") != 0 &&
                    strcmp(fields[i], "spread") != 0 && strcmp(fields[i], "reps") != 0 &&
                    strcmp(fields[i], "max_err") != 0 && strcmp(fields[i], "unix_time") != 0;
        snprintf(want, sizeof want, "'%s' is not", fields[i]);
        refuse_text(db, path,
                    bad_field(fields[i], text ? cJSON_CreateNumber(1) : cJSON_CreateString("1")),
                    "records[1]", want);
    }
    refuse_text(db, path, bad_field("median_ns", cJSON_CreateNull()), "'median_ns' is not a number",
                NULL);
    refuse_text(db, path, bad_field("dims", cJSON_CreateObject()), "'dims' is not an array", NULL);
    refuse_text(db, path, bad_field("n_dims", cJSON_CreateNumber(3)), "'n_dims' differs", NULL);

    /* texts empty or longer than their bounds (the message names the key once it is read) */
    refuse_text(db, path, bad_field("key", cJSON_CreateString("")), "'key' is empty", NULL);
    refuse_text(db, path, bad_field("variant", cJSON_CreateString("")), "'variant' is empty", NULL);
    refuse_text(db, path, bad_field("key", long_string(TUNE_KEY_MAX)), "'key' has 1024 bytes",
                "1023");
    refuse_text(db, path, bad_field("family", long_string(TUNE_FAMILY_MAX)), "(key 'k1')",
                "'family' has 512 bytes");
    refuse_text(db, path, bad_field("fingerprint", long_string(TUNE_FINGERPRINT_MAX)),
                "'fingerprint' has", NULL);
    refuse_text(db, path, bad_field("variant", long_string(TUNE_VARIANT_MAX)), "'variant' has",
                NULL);
    refuse_text(db, path, bad_field("params", long_string(TUNE_PARAMS_MAX)), "'params' has", NULL);
    refuse_text(db, path, bad_field("source", long_string(TUNE_SOURCE_MAX)), "'source' has 16",
                NULL);

    /* shape numbers: too many, not whole, not exact in a double */
    refuse_text(db, path, bad_field("dims", number_array(TUNE_MAX_DIMS + 1, 2)), "'dims' has 17",
                "more than 16");
    refuse_text(db, path, bad_field("dims", number_array(2, 1.5)), "'dims[0]' is 1.5", NULL);
    refuse_text(db, path, bad_field("dims", number_array(1, 1e300)), "'dims[0]'", "whole number");
    cJSON *mixed = number_array(2, 3);
    cJSON_AddItemToArray(mixed, cJSON_CreateString("4"));
    refuse_text(db, path, bad_field("dims", mixed), "'dims[2]' is not a number", NULL);
    refuse_text(db, path, bad_field("n_dims", cJSON_CreateNumber(TUNE_MAX_DIMS + 1)), "'n_dims'",
                NULL);

    /* medians and the other measurements: negative, infinite, NaN (which JSON cannot spell, so a
     * file with it is not JSON; cJSON reads 1e999 as infinity) */
    refuse_text(db, path, bad_field("median_ns", cJSON_CreateNumber(-1)), "'median_ns' is -1",
                "finite number >= 0");
    refuse_text(db, path,
                dup_text("{\"schema_version\": 1, \"records\": [{\"key\": \"k1\", "
                         "\"fingerprint\": \"fp\", \"family\": \"f\", \"dims\": [], "
                         "\"variant\": \"v\", \"params\": \"\", \"median_ns\": 1e999, "
                         "\"spread\": 1, \"reps\": 1, \"max_err\": 0, \"source\": \"\", "
                         "\"unix_time\": 0}]}"),
                "records[0] (key 'k1')", "'median_ns' is inf");
    refuse_text(db, path, bad_field("spread", cJSON_CreateNumber(-0.5)), "'spread'", NULL);
    refuse_text(db, path, bad_field("max_err", cJSON_CreateNumber(-1e-9)), "'max_err'", NULL);
    refuse_text(db, path, bad_field("reps", cJSON_CreateNumber(-1)), "'reps' is -1", NULL);
    refuse_text(db, path, bad_field("reps", cJSON_CreateNumber(2.5)), "'reps'", NULL);
    refuse_text(db, path, bad_field("reps", cJSON_CreateNumber(3e9)), "'reps'", NULL);
    refuse_text(db, path, bad_field("unix_time", cJSON_CreateNumber(1e17)), "'unix_time'", NULL);

    /* a file that cannot be read, a folder, and one over the size cap (sparse: no disk used) */
    expect_import_refused(db, tmp_path("absent.json"), ANVIL_ERR_IO, "cannot open", NULL);
    expect_import_refused(db, tmpdir, ANVIL_ERR_IO, "folder", NULL);
    const char *huge = tmp_path("huge.json");
    f = fopen(huge, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)TUNE_IMPORT_MAX_BYTES + 1), 0);
    fclose(f);
    expect_import_refused(db, huge, ANVIL_ERR_INVALID_ARGUMENT, "more than the 256 MiB", NULL);
    unlink(huge);

    assert_int_equal(tune_db_check(db), ANVIL_OK);
    tune_db_close(db);
}

static void test_fingerprint_text(void **state) {
    (void)state;
    char fp[TUNE_FINGERPRINT_MAX], fp2[TUNE_FINGERPRINT_MAX];
    assert_int_equal(tune_fingerprint(fp, sizeof fp), ANVIL_OK);
    assert_non_null(strstr(fp, "cpu="));
    assert_non_null(strstr(fp, "|isa="));
    assert_non_null(strstr(fp, "|l1d="));
    assert_non_null(strstr(fp, "|cores="));
    assert_non_null(strstr(fp, "|anvil=0.1.0|"));
    const char *kern = strstr(fp, "|kern=");
    assert_non_null(kern);
    assert_int_equal(strlen(kern + 6), 16);
    assert_int_equal(tune_fingerprint(fp2, sizeof fp2), ANVIL_OK);
    assert_string_equal(fp, fp2);
    char small[16];
    assert_int_equal(tune_fingerprint(small, sizeof small), ANVIL_ERR_LIMIT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_upsert),
        cmocka_unit_test(test_fingerprint_mismatch_and_prune),
        cmocka_unit_test(test_nearest_shape),
        cmocka_unit_test(test_merge_keeps_faster),
        cmocka_unit_test(test_corrupt_file_refused),
        cmocka_unit_test(test_foreign_and_newer_refused),
        cmocka_unit_test(test_kill9_keeps_commits),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_export_json),
        cmocka_unit_test(test_import_round_trip),
        cmocka_unit_test(test_import_keeps_faster),
        cmocka_unit_test(test_import_refuses_malformed),
        cmocka_unit_test(test_fingerprint_text),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_remove);
}
