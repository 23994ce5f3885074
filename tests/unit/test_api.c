/* The public C API end to end on a small committed model (tests/unit/data/api_small.onnx:
 * z = Relu(x + b), s = Shape(z), x is [N, 4]): load from a path and from memory, model
 * description, named inputs and outputs, errors for misuse, plan statistics and profiling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char model_path[4096];

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)n);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void check_model_info(const anvil_model *m) {
    assert_int_equal(anvil_model_input_count(m), 1);
    assert_int_equal(anvil_model_output_count(m), 2);
    anvil_value_info vi;
    assert_int_equal(anvil_model_input_info(m, 0, &vi), ANVIL_OK);
    assert_string_equal(vi.name, "x");
    assert_int_equal(vi.dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(vi.rank, 2);
    assert_int_equal(vi.dims[0], -1);
    assert_string_equal(vi.dim_names[0], "N");
    assert_int_equal(vi.dims[1], 4);
    assert_int_equal(anvil_model_output_info(m, 1, &vi), ANVIL_OK);
    assert_string_equal(vi.name, "s");
    assert_int_equal(vi.dtype, ANVIL_DTYPE_INT64);
    assert_int_equal(anvil_model_output_info(m, 2, &vi), ANVIL_ERR_INVALID_ARGUMENT);
}

static void run_and_check(anvil_session *s, int64_t batch) {
    int64_t dims[2] = {batch, 4};
    float *x = malloc((size_t)batch * 4 * sizeof(float));
    for (int64_t i = 0; i < batch * 4; i++) x[i] = (float)(i % 5) - 2.0f;
    anvil_tensor *xt;
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, x, &xt), ANVIL_OK);
    const char *in_names[1] = {"x"};
    const anvil_tensor *ins[1] = {xt};
    /* outputs asked by name, in reverse order */
    const char *out_names[2] = {"s", "z"};
    anvil_tensor *outs[2];
    assert_int_equal(anvil_session_run(s, 1, in_names, ins, 2, out_names, outs), ANVIL_OK);
    assert_int_equal(anvil_tensor_dtype(outs[0]), ANVIL_DTYPE_INT64);
    const int64_t *shape = anvil_tensor_data(outs[0]);
    assert_int_equal(shape[0], batch);
    assert_int_equal(shape[1], 4);
    const float b[4] = {1.0f, -1.0f, 0.5f, -0.5f};
    const float *z = anvil_tensor_data(outs[1]);
    assert_int_equal(anvil_tensor_element_count(outs[1]), (size_t)batch * 4);
    for (int64_t i = 0; i < batch * 4; i++) {
        float t = x[i] + b[i % 4];
        assert_true(z[i] == (t > 0 ? t : 0.0f));
    }
    anvil_tensor_free(outs[0]);
    anvil_tensor_free(outs[1]);
    anvil_tensor_free(xt);
    free(x);
}

static void test_load_path_and_run(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(model_path, &m), ANVIL_OK);
    check_model_info(m);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, 2), ANVIL_OK);
    assert_int_equal(anvil_options_set_profiling(o, 1), ANVIL_OK);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, o, &s), ANVIL_OK);
    anvil_options_free(o);
    anvil_session_stats st;
    assert_int_equal(anvil_session_stats_get(s, &st), ANVIL_ERR_INVALID_ARGUMENT);
    run_and_check(s, 3);
    run_and_check(s, 5);
    run_and_check(s, 3);
    assert_int_equal(anvil_session_stats_get(s, &st), ANVIL_OK);
    assert_int_equal(st.plans_made, 2);
    assert_int_equal(st.nodes_folded, 1); /* Shape */
    char path[] = "/tmp/anvil_api_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(anvil_session_write_profile(s, path), ANVIL_OK);
    remove(path);
    anvil_session_free(s);
    anvil_model_free(m);
}

/* anvil_session_compile writes the library's files, and refuses a bad name, a missing folder
 * argument and a folder it cannot create, with the reason (the emitted code itself is built and
 * run by tests/emit/check_emit.py). */
static void test_compile(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(model_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_emittable_only(o, 1), ANVIL_OK);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, o, &s), ANVIL_OK);
    anvil_options_free(o);
    int64_t dims[2] = {3, 4};
    float x[12] = {0};
    anvil_tensor *xt;
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, x, &xt), ANVIL_OK);
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {xt};
    char dir[] = "/tmp/anvil_api_compile_XXXXXX";
    assert_non_null(mkdtemp(dir));
    anvil_compile_options co = {"small", 0};
    assert_int_equal(anvil_session_compile(s, 1, names, ins, &co, dir), ANVIL_OK);
    static const char *const files[] = {
        "small.h",        "small.c",   "small.weights", "small_run.c",     "Makefile",
        "CMakeLists.txt", "README.md", "src/krt.c",     "src/core/core.h", "src/anvil_status.h"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        fclose(f);
    }
    co.name = "1st";
    assert_int_equal(anvil_session_compile(s, 1, names, ins, &co, dir), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "not a C identifier"));
    co.name = NULL;
    assert_int_equal(anvil_session_compile(s, 1, names, ins, &co, NULL),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_session_compile(s, 1, names, ins, NULL, "/proc/anvil/nope"),
                     ANVIL_ERR_IO);
    assert_non_null(strstr(anvil_last_error(), "/proc/anvil"));
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    anvil_tensor_free(xt);
    anvil_session_free(s);
    anvil_model_free(m);
}

static void test_load_buffer(void **state) {
    (void)state;
    size_t size;
    void *buf = read_file(model_path, &size);
    anvil_model *m;
    assert_int_equal(anvil_model_load_buffer(buf, size, &m), ANVIL_OK);
    check_model_info(m);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, NULL, &s), ANVIL_OK);
    run_and_check(s, 1);
    anvil_session_free(s);
    anvil_model_free(m);
    /* truncated: a clear error, not a crash */
    assert_int_equal(anvil_model_load_buffer(buf, size / 2, &m), ANVIL_ERR_INVALID_MODEL);
    assert_null(m);
    assert_true(strlen(anvil_last_error()) > 0);
    free(buf);
}

static void test_misuse(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load("/nonexistent/model.onnx", &m), ANVIL_ERR_IO);
    assert_non_null(strstr(anvil_last_error(), "/nonexistent/model.onnx"));
    assert_int_equal(anvil_model_load(NULL, &m), ANVIL_ERR_INVALID_ARGUMENT);

    assert_int_equal(anvil_model_load(model_path, &m), ANVIL_OK);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, NULL, &s), ANVIL_OK);
    int64_t dims[2] = {2, 4};
    anvil_tensor *x, *wrong;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 2, dims, &x), ANVIL_OK);
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_INT32, 2, dims, &wrong), ANVIL_OK);
    anvil_tensor *outs[2];
    const anvil_tensor *ins[2] = {x, x};

    const char *bad_name[1] = {"nope"};
    assert_int_equal(anvil_session_run(s, 1, bad_name, ins, 2, NULL, outs),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "no input named 'nope'; its inputs are 'x'"));
    assert_int_equal(anvil_session_run(s, 0, NULL, NULL, 2, NULL, outs),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "input 'x' is missing"));
    const char *twice[2] = {"x", "x"};
    assert_int_equal(anvil_session_run(s, 2, twice, ins, 2, NULL, outs),
                     ANVIL_ERR_INVALID_ARGUMENT);
    const char *xname[1] = {"x"};
    const anvil_tensor *wrong_in[1] = {wrong};
    assert_int_equal(anvil_session_run(s, 1, xname, wrong_in, 2, NULL, outs),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "must be FLOAT but a INT32 tensor"));
    assert_int_equal(anvil_session_run(s, 1, xname, ins, 1, NULL, outs),
                     ANVIL_ERR_INVALID_ARGUMENT);
    const char *bad_out[1] = {"q"};
    assert_int_equal(anvil_session_run(s, 1, xname, ins, 1, bad_out, outs),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_null(outs[0]);

    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, -1), ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_options_set_opt_level(o, 4), ANVIL_ERR_INVALID_ARGUMENT);
    anvil_options_free(o);
    assert_int_equal(anvil_session_write_profile(s, "/tmp/x.json"), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "profiling is off"));

    int64_t neg[1] = {-3}, huge[2] = {1ll << 20, 1ll << 20}; /* 4 TiB: fits, over the limit */
    anvil_tensor *t;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 1, neg, &t),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 2, huge, &t), ANVIL_ERR_LIMIT);
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_STRING, 1, dims, &t), ANVIL_ERR_UNSUPPORTED);
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 9, dims, &t),
                     ANVIL_ERR_INVALID_ARGUMENT);

    anvil_tensor_free(x);
    anvil_tensor_free(wrong);
    anvil_session_free(s);
    anvil_model_free(m);
}

/* Dims declared "?" are each unknown on their own: [2, 3] must be accepted. */
static void test_anonymous_dims(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%.*s/api_anon_dims.onnx",
             (int)(strrchr(model_path, '/') - model_path), model_path);
    anvil_model *m;
    assert_int_equal(anvil_model_load(path, &m), ANVIL_OK);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, NULL, &s), ANVIL_OK);
    int64_t dims[2] = {2, 3};
    anvil_tensor *x;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 2, dims, &x), ANVIL_OK);
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {x};
    anvil_tensor *y;
    assert_int_equal(anvil_session_run(s, 1, names, ins, 1, NULL, &y), ANVIL_OK);
    assert_int_equal(anvil_tensor_dims(y)[1], 3);
    anvil_tensor_free(y);
    anvil_tensor_free(x);
    anvil_session_free(s);
    anvil_model_free(m);
}

static void test_version_and_names(void **state) {
    (void)state;
    assert_string_equal(anvil_version(), "0.1.0");
    assert_string_equal(anvil_status_name(ANVIL_ERR_SHAPE), "ANVIL_ERR_SHAPE");
    assert_int_equal(anvil_dtype_size(ANVIL_DTYPE_BFLOAT16), 2);
    char buf[4096];
    size_t need = anvil_sysinfo(buf, sizeof buf);
    assert_true(need > 0 && need < sizeof buf);
    assert_non_null(strstr(buf, "AVX2 = "));
    char tiny[8];
    anvil_sysinfo(tiny, sizeof tiny);
    assert_true(strlen(tiny) < sizeof tiny);
}

/* The "dot" loss and anvil_train_gradients: with the output's gradient as the labels, the
 * parameters' gradients are the vector-Jacobian product; here b's of z = Relu(x + b) is the
 * labels summed over the rows where x + b > 0. Nothing is updated. */
static void test_vjp_gradients(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(model_path, &m), ANVIL_OK);
    anvil_train_config c;
    anvil_train_config_default(&c);
    c.loss = ANVIL_LOSS_DOT;
    c.output = "z";
    c.threads = 1;
    c.tuning_db = "";
    anvil_train_session *ts;
    assert_int_equal(anvil_train_session_create(m, &c, &ts), ANVIL_OK);
    assert_int_equal(anvil_train_param_count(ts), 0);
    assert_null(anvil_train_grad_data(ts, 0));
    float x[12], g[12];
    for (int i = 0; i < 12; i++) {
        x[i] = (float)(i % 5) - 2.0f;
        g[i] = 0.5f + (float)i;
    }
    const int64_t dims[2] = {3, 4};
    anvil_tensor *xt, *gt;
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, x, &xt), ANVIL_OK);
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, g, &gt), ANVIL_OK);
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {xt};
    float loss;
    assert_int_equal(anvil_train_gradients(ts, 1, names, ins, gt, &loss, NULL), ANVIL_OK);
    assert_int_equal(anvil_train_param_count(ts), 1);
    assert_non_null(anvil_train_param_name(ts, 0));
    assert_null(anvil_train_param_name(ts, 1));
    size_t n = 0;
    float *b = anvil_train_param_data(ts, 0, &n);
    const float *db = anvil_train_grad_data(ts, 0);
    assert_int_equal(n, 4);
    assert_non_null(db);
    double want_loss = 0;
    for (int j = 0; j < 4; j++) {
        float want = 0;
        for (int r = 0; r < 3; r++) {
            const float z = x[r * 4 + j] + b[j];
            if (z > 0) want += g[r * 4 + j];
            want_loss += (z > 0 ? z : 0) * g[r * 4 + j];
        }
        assert_float_equal(db[j], want, 1e-5);
    }
    assert_float_equal(loss, want_loss, 1e-4);
    assert_int_equal(anvil_train_updates(ts), 0);
    /* a written parameter is the next pass's */
    b[0] = 100.0f;
    assert_int_equal(anvil_train_gradients(ts, 1, names, ins, gt, &loss, NULL), ANVIL_OK);
    assert_float_equal(anvil_train_grad_data(ts, 0)[0], g[0] + g[4] + g[8], 1e-4);
    anvil_tensor_free(xt);
    anvil_tensor_free(gt);
    anvil_train_session_free(ts);
    anvil_model_free(m);
}

/* The tuning database through the public API: a new file, one record imported from JSON, read
 * back by foreach and export, pruned as another machine's; and the refusals. */
typedef struct export_text {
    char buf[8192];
    size_t len;
} export_text;

static anvil_status keep_text(const char *text, size_t len, void *arg) {
    export_text *e = arg;
    assert_true(len < sizeof e->buf);
    assert_int_equal(strlen(text), len);
    memcpy(e->buf, text, len + 1);
    e->len = len;
    return ANVIL_OK;
}

static anvil_status count_record(const anvil_tuning_record *r, void *arg) {
    assert_string_equal(r->key, "Relu|f32[4]|t1");
    assert_string_equal(r->fingerprint, "other-machine");
    assert_string_equal(r->variant, "relu_f32");
    assert_float_equal(r->median_ns, 1500.0, 1e-9);
    ++*(int *)arg;
    return ANVIL_OK;
}

static void test_tuning_db(void **state) {
    (void)state;
    char dir[] = "/tmp/anvil_api_db_XXXXXX", path[4200], json[4200];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tuning.db", dir);
    snprintf(json, sizeof json, "%s/records.json", dir);
    char fp[ANVIL_TUNING_FINGERPRINT_MAX];
    assert_int_equal(anvil_tuning_fingerprint(fp, sizeof fp), ANVIL_OK);
    assert_true(fp[0] != '\0');
    assert_int_equal(anvil_tuning_fingerprint(fp, 4), ANVIL_ERR_LIMIT);
    assert_true(anvil_tuning_db_schema_version() >= 1);

    anvil_tuning_db *db = NULL;
    assert_int_equal(anvil_tuning_db_open(path, &db), ANVIL_OK);
    assert_string_equal(anvil_tuning_db_path(db), path);
    size_t n = 99, changed = 99, kept = 99;
    assert_int_equal(anvil_tuning_db_count(db, &n), ANVIL_OK);
    assert_int_equal(n, 0);
    FILE *f = fopen(json, "w");
    assert_non_null(f);
    fprintf(f, "{\"schema_version\": 1, \"records\": [{\"key\": \"Relu|f32[4]|t1\", "
               "\"fingerprint\": \"other-machine\", \"family\": \"Relu|f32\", \"dims\": [4], "
               "\"variant\": \"relu_f32\", \"params\": \"\", \"median_ns\": 1500, "
               "\"spread\": 1.1, \"reps\": 5, \"max_err\": 0, \"source\": \"offline\", "
               "\"unix_time\": 1700000000}]}\n");
    fclose(f);
    assert_int_equal(anvil_tuning_db_import_json(db, json, &changed, &kept), ANVIL_OK);
    assert_int_equal(changed, 1);
    assert_int_equal(kept, 0);
    assert_int_equal(anvil_tuning_db_check(db), ANVIL_OK);
    int seen = 0;
    assert_int_equal(anvil_tuning_db_foreach(db, count_record, &seen), ANVIL_OK);
    assert_int_equal(seen, 1);
    export_text *e = calloc(1, sizeof *e);
    assert_non_null(e);
    assert_int_equal(anvil_tuning_db_export_json(db, keep_text, e), ANVIL_OK);
    assert_non_null(strstr(e->buf, "\"relu_f32\""));
    assert_true(e->len > 0 && e->buf[e->len - 1] == '\n');
    free(e);
    assert_int_equal(anvil_tuning_db_merge(db, path, &changed), ANVIL_OK);
    assert_int_equal(changed, 0);
    assert_int_equal(anvil_tuning_db_prune(db, fp, &n), ANVIL_OK);
    assert_int_equal(n, 1);
    assert_int_equal(anvil_tuning_db_count(db, &n), ANVIL_OK);
    assert_int_equal(n, 0);

    assert_int_equal(anvil_tuning_db_foreach(db, NULL, NULL), ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_tuning_db_export_json(db, NULL, NULL), ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_tuning_db_count(NULL, &n), ANVIL_ERR_INVALID_ARGUMENT);
    anvil_tuning_db_close(db);
    anvil_tuning_db_close(NULL);
    /* a file that is not a tuning database is refused, and left alone */
    db = (anvil_tuning_db *)&n;
    assert_int_not_equal(anvil_tuning_db_open(json, &db), ANVIL_OK);
    assert_null(db);
    assert_true(strlen(anvil_last_error()) > 0);
    assert_int_equal(anvil_tuning_db_open(NULL, &db), ANVIL_ERR_INVALID_ARGUMENT);
    remove(json);
    remove(path);
    char side[4300];
    snprintf(side, sizeof side, "%s-wal", path);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", path);
    remove(side);
    rmdir(dir);
}

int main(void) {
    const char *src = getenv("ANVIL_SOURCE_DIR");
    snprintf(model_path, sizeof model_path, "%s/tests/unit/data/api_small.onnx", src ? src : ".");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_path_and_run), cmocka_unit_test(test_load_buffer),
        cmocka_unit_test(test_compile),           cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_anonymous_dims),    cmocka_unit_test(test_version_and_names),
        cmocka_unit_test(test_vjp_gradients),     cmocka_unit_test(test_tuning_db),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
