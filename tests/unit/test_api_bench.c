/* anvil_bench_model on the small committed model of test_api.c (tests/unit/data/api_small.onnx:
 * z = Relu(x + b), s = Shape(z), x is [N, 4]): the report's numbers, its text and JSON, the
 * session options it honours, and the arguments it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char model_path[4096];

typedef struct fixture {
    anvil_model *m;
    float x[8];
    anvil_tensor *xt;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || anvil_model_load(model_path, &f->m) != ANVIL_OK) return -1;
    for (int i = 0; i < 8; i++) f->x[i] = (float)i - 3.5f;
    const int64_t dims[2] = {2, 4};
    if (anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, dims, f->x, &f->xt) != ANVIL_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    anvil_tensor_free(f->xt);
    anvil_model_free(f->m);
    free(f);
    return 0;
}

static void test_report(void **state) {
    fixture *f = *state;
    anvil_options *opts;
    assert_int_equal(anvil_options_create(&opts), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(opts, 1), ANVIL_OK);
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {f->xt};
    const char *sources[1] = {"file"};
    anvil_bench_options o = {.session = opts,
                             .warmup = 2,
                             .iters = 7,
                             .explain = 1,
                             .model_label = "small.onnx",
                             .load_ms = 1.5,
                             .input_sources = sources};
    anvil_bench_report *r = NULL;
    assert_int_equal(anvil_bench_model(f->m, &o, 1, names, ins, &r), ANVIL_OK);
    anvil_options_free(opts);
    assert_non_null(r);

    anvil_bench_stats st;
    assert_int_equal(anvil_bench_report_stats(r, &st), ANVIL_OK);
    assert_int_equal(st.iters, 7);
    assert_int_equal(st.warmup, 2);
    assert_int_equal(st.threads, 1);
    assert_true(st.load_ms == 1.5);
    assert_true(st.first_run_ms > 0);
    assert_true(st.median_ms > 0);
    assert_true(st.min_ms <= st.median_ms && st.median_ms <= st.p90_ms && st.p90_ms <= st.p99_ms &&
                st.p99_ms <= st.max_ms);
    assert_true(st.min_ms <= st.mean_ms && st.mean_ms <= st.max_ms);
    assert_true(st.per_second > 0);
    assert_true(st.activation_bytes > 0 && st.arena_bytes > 0);
    assert_int_equal(st.online_locked_after, -1);

    const char *text = anvil_bench_report_text(r);
    assert_non_null(strstr(text, "model: small.onnx\nthreads: 1\n"));
    assert_non_null(strstr(text, "  x                        FLOAT    [2,4] (file)\n"));
    assert_non_null(strstr(text, "load: 1.500 ms\n"));
    assert_non_null(strstr(text, "latency over 7 runs (after 2 warmup)"));
    assert_non_null(strstr(text, "\nnodes: "));
    assert_int_equal(text[strlen(text) - 1], '\n');

    const char *json = anvil_bench_report_json(r);
    assert_int_equal(json[strlen(json) - 1], '\n');
    cJSON *j = cJSON_Parse(json);
    assert_non_null(j);
    static const char *const keys[] = {
        "model",      "anvil_version", "threads",          "iterations",  "warmup",
        "load_ms",    "first_run_ms",  "latency_ms",       "arena_bytes", "activation_bytes",
        "plans_made", "nodes_run",     "throughput_per_s", "opt_level",   "reference_share",
        "inputs",     "nodes"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        assert_non_null(cJSON_GetObjectItem(j, keys[k]));
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "small.onnx");
    assert_int_equal(cJSON_GetObjectItem(j, "iterations")->valueint, 7);
    assert_null(cJSON_GetObjectItem(j, "online_locked_after_run"));
    const cJSON *lat = cJSON_GetObjectItem(j, "latency_ms");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lat, "samples")), 7);
    assert_true(cJSON_GetObjectItem(lat, "median")->valuedouble == st.median_ms);
    const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "inputs"), 0);
    assert_string_equal(cJSON_GetObjectItem(in, "name")->valuestring, "x");
    assert_string_equal(cJSON_GetObjectItem(in, "source")->valuestring, "file");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(in, "shape")), 2);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(j, "nodes")) > 0);
    cJSON_Delete(j);
    anvil_bench_report_free(r);
}

/* NULL options: the defaults (50 timed runs after 5, every core, inputs "given", no list of
 * nodes); warmup 0 is no warmup. */
static void test_defaults(void **state) {
    fixture *f = *state;
    const char *names[1] = {"x"};
    const anvil_tensor *ins[1] = {f->xt};
    anvil_bench_report *r = NULL;
    assert_int_equal(anvil_bench_model(f->m, NULL, 1, names, ins, &r), ANVIL_OK);
    anvil_bench_stats st;
    assert_int_equal(anvil_bench_report_stats(r, &st), ANVIL_OK);
    assert_int_equal(st.iters, 50);
    assert_int_equal(st.warmup, 5);
    assert_true(st.threads >= 1);
    assert_non_null(strstr(anvil_bench_report_text(r), "model: \n"));
    assert_non_null(strstr(anvil_bench_report_text(r), "(given)\n"));
    assert_null(strstr(anvil_bench_report_text(r), "\nnodes: "));
    anvil_bench_report_free(r);

    anvil_bench_options o = {.warmup = 0, .iters = 3};
    assert_int_equal(anvil_bench_model(f->m, &o, 1, names, ins, &r), ANVIL_OK);
    assert_int_equal(anvil_bench_report_stats(r, &st), ANVIL_OK);
    assert_int_equal(st.iters, 3);
    assert_int_equal(st.warmup, 0);
    anvil_bench_report_free(r);
    anvil_bench_report_free(NULL);
}

/* Each call fails with INVALID_ARGUMENT, leaves no report and says what is wrong. */
static void test_misuse(void **state) {
    fixture *f = *state;
    const char *names[2] = {"x", "x"};
    const char *wrong[1] = {"y"};
    const anvil_tensor *ins[2] = {f->xt, f->xt};
    static const struct {
        bool no_model;
        size_t n;
        bool wrong_name, no_tensors;
        const char *says;
    } cases[] = {
        {true, 1, false, false, "model is NULL"},
        {false, 0, false, false, "1 inputs, 0 given"},
        {false, 2, false, false, "1 inputs, 2 given"},
        {false, 1, true, false, "no input 'y'"},
        {false, 1, false, true, "names or inputs is NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        anvil_bench_report *r = (anvil_bench_report *)&r;
        anvil_status s = anvil_bench_model(cases[i].no_model ? NULL : f->m, NULL, cases[i].n,
                                           cases[i].wrong_name ? wrong : names,
                                           cases[i].no_tensors ? NULL : ins, &r);
        assert_int_equal(s, ANVIL_ERR_INVALID_ARGUMENT);
        assert_null(r);
        if (!strstr(anvil_last_error(), cases[i].says))
            fail_msg("message '%s' does not say '%s'", anvil_last_error(), cases[i].says);
    }
    assert_int_equal(anvil_bench_model(f->m, NULL, 1, names, ins, NULL),
                     ANVIL_ERR_INVALID_ARGUMENT);
    anvil_bench_stats st;
    assert_int_equal(anvil_bench_report_stats(NULL, &st), ANVIL_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const char *src = getenv("ANVIL_SOURCE_DIR");
    snprintf(model_path, sizeof model_path, "%s/tests/unit/data/api_small.onnx", src ? src : ".");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
