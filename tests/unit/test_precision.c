/* Precision as a session option (issue 34): anvil_options_set_precision and _set_tolerance accept
 * what they document and refuse the rest with messages that say what to do; the precision
 * reaches kern_knobs.precision in every node a plan hands its variants, from the options, the
 * environment (ANVIL_PRECISION) and the knob, in that order of strength; a bf16 session on a CPU
 * (or ISA cap) without AVX512_BF16 warns; a bf16 session of a MatMul (tests/unit/data/
 * api_matmul.onnx) matches fp32 within 2e-2, and its explain says which arithmetic ran;
 * anvil_bench_model's check reports the errors against fp32; the training API takes the
 * precision too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"
#include "api/api.h"
#include "api/env.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char matmul_path[4096];

enum { ROWS = 8, K = 256, COLS = 64 };

/* ---- the options ---------------------------------------------------------------------------- */

static void test_set_precision(void **state) {
    (void)state;
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, "fp32"), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, "bf16"), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, "auto"), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, "int8"), ANVIL_OK);

    assert_int_equal(anvil_options_set_precision(o, NULL), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "fp32, bf16, fp16, auto or int8"));
    assert_int_equal(anvil_options_set_precision(o, "fp8"), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "'fp8' is not a precision"));
    assert_int_equal(anvil_options_set_precision(o, "BF16"), ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_options_set_precision(o, "fp16"), ANVIL_OK);
    rt_session_config cfg;
    assert_int_equal(api_session_config(o, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_FP16);
    assert_int_equal(anvil_options_set_precision(NULL, "bf16"), ANVIL_ERR_INVALID_ARGUMENT);

    assert_int_equal(anvil_options_set_tolerance(o, 1e-3), ANVIL_OK);
    assert_int_equal(anvil_options_set_tolerance(o, 0.5), ANVIL_OK);
    const double bad[] = {0.0, -1e-2, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(anvil_options_set_tolerance(o, bad[i]), ANVIL_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(anvil_last_error(), "positive finite number"));
    }
    assert_int_equal(anvil_options_set_tolerance(NULL, 1e-2), ANVIL_ERR_INVALID_ARGUMENT);
    anvil_options_free(o);
}

/* The session configuration the options make: the defaults, the environment, the knob, then the
 * named setter. */
static void test_config_precedence(void **state) {
    (void)state;
    unsetenv("ANVIL_PRECISION");
    rt_session_config cfg;
    assert_int_equal(api_session_config(NULL, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_F32);
    assert_true(cfg.tolerance == 1e-2);

    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(api_session_config(o, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_F32);
    assert_true(cfg.tolerance == 1e-2);

    setenv("ANVIL_PRECISION", "bf16", 1);
    assert_int_equal(api_session_config(o, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_BF16);
    assert_int_equal(anvil_options_set_knob(o, "ANVIL_PRECISION", "auto"), ANVIL_OK);
    assert_int_equal(api_session_config(o, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_AUTO);
    assert_int_equal(anvil_options_set_precision(o, "fp32"), ANVIL_OK); /* wins over both */
    assert_int_equal(anvil_options_set_tolerance(o, 0.05), ANVIL_OK);
    assert_int_equal(api_session_config(o, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_F32);
    assert_true(cfg.tolerance == 0.05);

    /* the copy bench and tune make keeps them all */
    anvil_options *c;
    assert_int_equal(api_options_copy(o, &c), ANVIL_OK);
    anvil_options_free(o);
    assert_int_equal(api_session_config(c, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_F32);
    assert_true(cfg.tolerance == 0.05);
    anvil_options_free(c);

    /* the environment's values are checked as the option's are */
    setenv("ANVIL_PRECISION", "half", 1);
    assert_int_equal(api_session_config(NULL, &cfg), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "ANVIL_PRECISION"));
    setenv("ANVIL_PRECISION", "fp16", 1);
    assert_int_equal(api_session_config(NULL, &cfg), ANVIL_OK);
    assert_int_equal(cfg.knobs.precision, KERN_PREC_FP16);
    unsetenv("ANVIL_PRECISION");
    assert_string_equal(api_precision_name(KERN_PREC_BF16), "bf16");
}

/* What the plan hands the MatMul's variants. */
static anvil_status seen_knobs(void *arg, const kern_node *kn) {
    if (kn->node->op == IR_OP_MATMUL && kn->knobs) *(int *)arg = kn->knobs->precision;
    return ANVIL_OK;
}

static void test_precision_reaches_the_plan(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(matmul_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, 1), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, "bf16"), ANVIL_OK);
    rt_session_config cfg;
    assert_int_equal(api_session_config(o, &cfg), ANVIL_OK);
    int seen = -1;
    cfg.on_node = seen_knobs;
    cfg.on_node_arg = &seen;
    rt_session *s;
    assert_int_equal(rt_session_create(api_model_graph(m), &cfg, &s), ANVIL_OK);
    anvil_tensor *x, *y;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){ROWS, K}, &x),
                     ANVIL_OK);
    const anvil_tensor *in[1] = {x};
    assert_int_equal(rt_session_run(s, in, NULL, &y), ANVIL_OK);
    assert_int_equal(seen, KERN_PREC_BF16);
    anvil_tensor_free(y);
    anvil_tensor_free(x);
    rt_session_free(s);
    anvil_options_free(o);
    anvil_model_free(m);
}

/* ---- the warning ---------------------------------------------------------------------------- */

/* What creating a session of api_matmul.onnx at precision p writes on stderr (up to cap bytes). */
static void session_stderr(const char *p, char *text, size_t cap) {
    anvil_model *m;
    assert_int_equal(anvil_model_load(matmul_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, p), ANVIL_OK);
    char path[] = "/tmp/anvil_precision_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    dup2(fd, STDERR_FILENO);
    anvil_session *s = NULL;
    anvil_status st = anvil_session_create(m, o, &s);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    assert_int_equal(st, ANVIL_OK);
    ssize_t n = pread(fd, text, cap - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    anvil_session_free(s);
    anvil_options_free(o);
    anvil_model_free(m);
}

static void test_warns_without_bf16_isa(void **state) {
    (void)state;
    char text[4096];
    assert_int_equal(anvil_set_isa_cap("avx2"), ANVIL_OK);
    session_stderr("bf16", text, sizeof text);
    assert_non_null(strstr(text, "precision bf16"));
    assert_non_null(strstr(text, "neither AVX512_BF16 nor AMX-BF16"));
    assert_non_null(strstr(text, "runs fp32 kernels instead"));
    session_stderr("auto", text, sizeof text);
    assert_non_null(strstr(text, "precision auto"));
    session_stderr("fp32", text, sizeof text);
    assert_null(strstr(text, "AVX512_BF16"));
    assert_int_equal(anvil_set_isa_cap(NULL), ANVIL_OK);
    if (core_hw_get()->avx512_bf16) {
        session_stderr("bf16", text, sizeof text);
        assert_null(strstr(text, "AVX512_BF16"));
    }
}

/* ---- a bf16 session against fp32 ------------------------------------------------------------ */

typedef struct run_result {
    float y[ROWS * COLS];
    char compute[16]; /* the MatMul's, from explain */
    char variant[64];
} run_result;

static void fill_x(float *x) {
    uint32_t r = 12345;
    for (int i = 0; i < ROWS * K; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

static void run_matmul(const char *precision, run_result *out) {
    anvil_model *m;
    assert_int_equal(anvil_model_load(matmul_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, 1), ANVIL_OK);
    assert_int_equal(anvil_options_set_tuning_db(o, ""), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, precision), ANVIL_OK);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, o, &s), ANVIL_OK);
    static float x[ROWS * K];
    fill_x(x);
    anvil_tensor *xt, *y;
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){ROWS, K}, x, &xt),
                     ANVIL_OK);
    const anvil_tensor *in[1] = {xt};
    const char *names[1] = {"x"};
    assert_int_equal(anvil_session_run(s, 1, names, in, 1, NULL, &y), ANVIL_OK);
    memcpy(out->y, anvil_tensor_data(y), sizeof out->y);
    size_t n;
    const anvil_node_choice *c;
    assert_int_equal(anvil_session_explain(s, &n, &c), ANVIL_OK);
    out->compute[0] = out->variant[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        assert_non_null(c[i].compute);
        assert_true(!strcmp(c[i].compute, "fp32") || !strcmp(c[i].compute, "bf16"));
        if (!strcmp(c[i].node, "matmul")) {
            snprintf(out->compute, sizeof out->compute, "%s", c[i].compute);
            snprintf(out->variant, sizeof out->variant, "%s", c[i].variant);
        }
    }
    assert_true(out->compute[0]);
    anvil_tensor_free(y);
    anvil_tensor_free(xt);
    anvil_session_free(s);
    anvil_options_free(o);
    anvil_model_free(m);
}

static void test_bf16_matches_fp32(void **state) {
    (void)state;
    unsetenv("ANVIL_PRECISION");
    static run_result r32, r16;
    run_matmul("fp32", &r32);
    run_matmul("bf16", &r16);
    assert_string_equal(r32.compute, "fp32");
    double max_d = 0, max_y = 0;
    for (int i = 0; i < ROWS * COLS; i++) {
        max_d = fmax(max_d, fabs((double)r16.y[i] - r32.y[i]));
        max_y = fmax(max_y, fabs((double)r32.y[i]));
    }
    assert_true(max_y > 0);
    printf("bf16 session: MatMul ran %s (%s), max relative error %.3e\n", r16.variant, r16.compute,
           max_d / max_y);
    assert_true(max_d / max_y <= 2e-2);
    /* the cascade takes bf16 where this CPU's bf16 dot product measured faster than its FMA */
    if (kern_find(IR_OP_MATMUL, "gemm_bf16") && core_hw_get()->avx512_bf16 &&
        kern_bf16_beats_fp32(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16)) {
        assert_string_equal(r16.compute, "bf16");
        assert_true(max_d > 0); /* it did round */
    } else {
        printf("skipped the bf16 kernel check: %s\n",
               !kern_find(IR_OP_MATMUL, "gemm_bf16") ? "no variant gemm_bf16 is built"
               : core_hw_get()->avx512_bf16
                   ? "this CPU's bf16 dot product measured no faster than its fp32 FMA"
                   : "this CPU has no AVX512_BF16");
        assert_string_equal(r16.compute, "fp32");
    }
}

/* ---- anvil_bench_model's check -------------------------------------------------------------- */

static anvil_bench_report *bench(const char *precision, int check) {
    anvil_model *m;
    assert_int_equal(anvil_model_load(matmul_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, 1), ANVIL_OK);
    assert_int_equal(anvil_options_set_tuning_db(o, ""), ANVIL_OK);
    assert_int_equal(anvil_options_set_precision(o, precision), ANVIL_OK);
    static float x[ROWS * K];
    fill_x(x);
    anvil_tensor *xt;
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){ROWS, K}, x, &xt),
                     ANVIL_OK);
    const anvil_tensor *in[1] = {xt};
    const char *names[1] = {"x"};
    anvil_bench_options bo = {.session = o, .warmup = 0, .iters = 2, .check = check};
    anvil_bench_report *r = NULL;
    assert_int_equal(anvil_bench_model(m, &bo, 1, names, in, &r), ANVIL_OK);
    anvil_tensor_free(xt);
    anvil_options_free(o);
    anvil_model_free(m);
    return r;
}

static void test_bench_check(void **state) {
    (void)state;
    unsetenv("ANVIL_PRECISION");
    anvil_bench_report *r = bench("fp32", 0);
    assert_int_equal(anvil_bench_report_check_count(r), 0);
    anvil_bench_check c;
    assert_int_equal(anvil_bench_report_check(r, 0, &c), ANVIL_ERR_INVALID_ARGUMENT);
    assert_null(strstr(anvil_bench_report_json(r), "\"check\""));
    assert_null(strstr(anvil_bench_report_text(r), "accuracy"));
    assert_non_null(strstr(anvil_bench_report_text(r), "\nprecision: fp32\n"));
    anvil_bench_report_free(r);

    /* fp32 against fp32: the same kernels on the same inputs */
    r = bench("fp32", 1);
    assert_int_equal(anvil_bench_report_check_count(r), 1);
    assert_int_equal(anvil_bench_report_check(r, 0, &c), ANVIL_OK);
    assert_string_equal(c.output, "y");
    assert_true(c.max_rel_err == 0 && c.mean_rel_err == 0);
    assert_true(c.top1_agreement == 1.0);
    assert_int_equal(c.rows, ROWS);
    anvil_bench_report_free(r);

    r = bench("bf16", 1);
    assert_int_equal(anvil_bench_report_check(r, 0, &c), ANVIL_OK);
    assert_true(c.max_rel_err >= 0 && c.max_rel_err <= 2e-2);
    assert_true(c.mean_rel_err >= 0 && c.mean_rel_err <= 2e-2);
    assert_true(c.top1_agreement >= 0.5 && c.top1_agreement <= 1.0);
    const char *text = anvil_bench_report_text(r);
    assert_non_null(strstr(text, "\nprecision: bf16\n"));
    assert_non_null(strstr(text, "accuracy of precision bf16 against fp32"));
    assert_non_null(strstr(text, "of 8 rows"));
    cJSON *j = cJSON_Parse(anvil_bench_report_json(r));
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "precision")->valuestring, "bf16");
    cJSON *chk = cJSON_GetObjectItem(j, "check");
    assert_non_null(chk);
    assert_string_equal(cJSON_GetObjectItem(chk, "reference")->valuestring, "fp32");
    cJSON *o0 = cJSON_GetArrayItem(cJSON_GetObjectItem(chk, "outputs"), 0);
    assert_non_null(o0);
    assert_string_equal(cJSON_GetObjectItem(o0, "name")->valuestring, "y");
    /* the JSON's numbers are the report's, to cJSON's printing */
    assert_true(fabs(cJSON_GetObjectItem(o0, "max_rel_err")->valuedouble - c.max_rel_err) <=
                1e-12 * c.max_rel_err);
    assert_true(fabs(cJSON_GetObjectItem(o0, "mean_rel_err")->valuedouble - c.mean_rel_err) <=
                1e-12 * c.mean_rel_err);
    assert_true(cJSON_GetObjectItem(o0, "top1_agreement")->valuedouble == c.top1_agreement);
    assert_int_equal(cJSON_GetObjectItem(o0, "rows")->valueint, ROWS);
    cJSON_Delete(j);
    anvil_bench_report_free(r);
}

/* A knob set on the options survives the copy bench makes (it used to be freed twice). */
static void test_bench_copies_knobs(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(matmul_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, 1), ANVIL_OK);
    assert_int_equal(anvil_options_set_knob(o, "ANVIL_PRECISION", "bf16"), ANVIL_OK);
    static float x[ROWS * K];
    anvil_tensor *xt;
    assert_int_equal(anvil_tensor_wrap(ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){ROWS, K}, x, &xt),
                     ANVIL_OK);
    const anvil_tensor *in[1] = {xt};
    const char *names[1] = {"x"};
    anvil_bench_options bo = {.session = o, .warmup = 0, .iters = 1};
    anvil_bench_report *r = NULL;
    assert_int_equal(anvil_bench_model(m, &bo, 1, names, in, &r), ANVIL_OK);
    assert_non_null(strstr(anvil_bench_report_text(r), "\nprecision: bf16\n"));
    anvil_bench_report_free(r);
    assert_int_equal(anvil_bench_model(m, &bo, 1, names, in, &r), ANVIL_OK);
    anvil_bench_report_free(r);
    anvil_tensor_free(xt);
    anvil_options_free(o);
    anvil_model_free(m);
}

/* ---- training ------------------------------------------------------------------------------- */

static void test_train_config(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(matmul_path, &m), ANVIL_OK);
    anvil_train_config c;
    anvil_train_config_default(&c);
    assert_null(c.precision);
    c.loss = ANVIL_LOSS_MSE;
    c.threads = 1;
    c.tuning_db = "";
    anvil_train_session *ts = NULL;
    c.precision = "fp16";
    assert_int_equal(anvil_train_session_create(m, &c, &ts), ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(anvil_last_error(), "loss scaling"));
    assert_null(ts);
    c.precision = "double";
    assert_int_equal(anvil_train_session_create(m, &c, &ts), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "anvil_train_config.precision"));
    c.precision = "bf16";
    c.tolerance = NAN;
    assert_int_equal(anvil_train_session_create(m, &c, &ts), ANVIL_ERR_INVALID_ARGUMENT);
    c.tolerance = 0.02;
    assert_int_equal(anvil_train_session_create(m, &c, &ts), ANVIL_OK);
    anvil_train_session_free(ts);
    anvil_model_free(m);
}

int main(void) {
    const char *src = getenv("ANVIL_SOURCE_DIR");
    snprintf(matmul_path, sizeof matmul_path, "%s/tests/unit/data/api_matmul.onnx",
             src ? src : ".");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_precision),
        cmocka_unit_test(test_config_precedence),
        cmocka_unit_test(test_precision_reaches_the_plan),
        cmocka_unit_test(test_warns_without_bf16_isa),
        cmocka_unit_test(test_bf16_matches_fp32),
        cmocka_unit_test(test_bench_check),
        cmocka_unit_test(test_bench_copies_knobs),
        cmocka_unit_test(test_train_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
