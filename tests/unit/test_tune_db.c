/* The tuning database (src/tune): round trips and upserts, fingerprints and pruning, the
 * nearest-shape fallback, merging, refusal of corrupt, foreign and newer files (left byte for byte
 * as they were), durability of committed puts when the writer is killed with SIGKILL, the JSON
 * export, and the fingerprint text. */
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
        cmocka_unit_test(test_fingerprint_text),
    };
    return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_remove);
}
