/* The settings the environment carries (src/api/env.c) reach what they set, through the
 * options: an ANVIL_LAYOUT from the environment or from anvil_options_set_knob turns the conv of
 * tests/unit/data/api_conv.onnx channels-last in the plan anvil_session_explain shows, the option
 * wins over the environment, and values a setting refuses are refused either way; a kernel knob
 * (ANVIL_GEMM_KC) goes from the options into every kern_node a plan hands its variants, and from
 * there into the GEMM's blocking; and the README's table lists every variable the code reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "anvil.h"
#include "api/api.h"
#include "api/env.h"
#include "kernels/cpu/gemm/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char conv_path[4096];
static const char *src_dir;

/* The op the plan runs the model's conv as, after one run with knob name=value set (NULL: none)
 * under the environment as it is. */
static void conv_op(const char *name, const char *value, char *op, size_t cap) {
    anvil_model *m;
    assert_int_equal(anvil_model_load(conv_path, &m), ANVIL_OK);
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_threads(o, 1), ANVIL_OK);
    if (name) assert_int_equal(anvil_options_set_knob(o, name, value), ANVIL_OK);
    anvil_session *s;
    assert_int_equal(anvil_session_create(m, o, &s), ANVIL_OK);
    anvil_tensor *x, *y;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 12, 12}, &x),
                     ANVIL_OK);
    memset(anvil_tensor_data(x), 0, anvil_tensor_bytes(x));
    const anvil_tensor *in[1] = {x};
    const char *in_names[1] = {"x"};
    assert_int_equal(anvil_session_run(s, 1, in_names, in, 1, NULL, &y), ANVIL_OK);
    size_t n;
    const anvil_node_choice *c;
    assert_int_equal(anvil_session_explain(s, &n, &c), ANVIL_OK);
    op[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!c[i].scope && strstr(c[i].op, "Conv")) snprintf(op, cap, "%s", c[i].op);
    anvil_tensor_free(y);
    anvil_tensor_free(x);
    anvil_session_free(s);
    anvil_options_free(o);
    anvil_model_free(m);
}

static void test_layout_env_and_option(void **state) {
    (void)state;
    char op[64];
    unsetenv("ANVIL_LAYOUT");
    conv_op(NULL, NULL, op, sizeof op);
    assert_string_equal(op, "Conv"); /* auto: no depthwise conv, so NCHW */
    conv_op("ANVIL_LAYOUT", "nhwc", op, sizeof op);
    assert_string_equal(op, "anvil.ConvNhwc");

    setenv("ANVIL_LAYOUT", "nhwc", 1);
    conv_op(NULL, NULL, op, sizeof op);
    assert_string_equal(op, "anvil.ConvNhwc");
    conv_op("ANVIL_LAYOUT", "nchw", op, sizeof op); /* the option wins */
    assert_string_equal(op, "Conv");
    unsetenv("ANVIL_LAYOUT");
}

static void test_refused(void **state) {
    (void)state;
    anvil_options *o;
    assert_int_equal(anvil_options_create(&o), ANVIL_OK);
    assert_int_equal(anvil_options_set_knob(o, "ANVIL_LAYOUT", "diagonal"),
                     ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "ANVIL_LAYOUT"));
    /* process-wide settings and unknown names are not a session's */
    assert_int_equal(anvil_options_set_knob(o, "ANVIL_ISA", "avx2"), ANVIL_ERR_INVALID_ARGUMENT);
    assert_int_equal(anvil_options_set_knob(o, "ANVIL_NOPE", "1"), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "ANVIL_GEMM_KC"));
    anvil_options_free(o);

    anvil_model *m;
    assert_int_equal(anvil_model_load(conv_path, &m), ANVIL_OK);
    setenv("ANVIL_LAYOUT", "diagonal", 1);
    anvil_session *s = NULL;
    assert_int_equal(anvil_session_create(m, NULL, &s), ANVIL_ERR_INVALID_ARGUMENT);
    assert_null(s);
    unsetenv("ANVIL_LAYOUT");
    anvil_model_free(m);
}

/* What the plan hands the conv's variant. */
static anvil_status seen_knobs(void *arg, const kern_node *kn) {
    if (kn->node->op == IR_OP_CONV && kn->knobs) *(kern_knobs *)arg = *kn->knobs;
    return ANVIL_OK;
}

static void test_kernel_knob_reaches_the_plan(void **state) {
    (void)state;
    anvil_model *m;
    assert_int_equal(anvil_model_load(conv_path, &m), ANVIL_OK);
    setenv("ANVIL_GEMM_KC", "96", 1);
    setenv("ANVIL_CONV_TILE", "4x8_portable", 1);
    rt_session_config cfg = {.threads = 1};
    assert_int_equal(api_env_session(&cfg), ANVIL_OK);
    assert_int_equal(api_knob_set(&cfg, "ANVIL_GEMM_KC", "112"), ANVIL_OK); /* over the env */
    unsetenv("ANVIL_GEMM_KC");
    unsetenv("ANVIL_CONV_TILE");
    kern_knobs seen = {0};
    cfg.on_node = seen_knobs;
    cfg.on_node_arg = &seen;
    rt_session *s;
    assert_int_equal(rt_session_create(api_model_graph(m), &cfg, &s), ANVIL_OK);
    anvil_tensor *x, *y;
    assert_int_equal(anvil_tensor_create(ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 12, 12}, &x),
                     ANVIL_OK);
    memset(anvil_tensor_data(x), 0, anvil_tensor_bytes(x));
    const anvil_tensor *in[1] = {x};
    assert_int_equal(rt_session_run(s, in, NULL, &y), ANVIL_OK);
    assert_int_equal(seen.gemm_kc, 112);
    assert_string_equal(seen.conv_tile, "4x8_portable");

    /* and a GEMM-based variant's blocking takes it where its configuration leaves KC */
    const kern_node kn = {.knobs = &seen};
    const gemm_kernel *k = gemm_kernel_find("4x8_portable");
    assert_non_null(k);
    assert_int_equal(gemm_blocking_for(&kn, k, 64, 64, 512, core_hw_get(), 0, 0, 0).kc, 112);
    assert_int_equal(gemm_blocking_for(&kn, k, 64, 64, 512, core_hw_get(), 200, 0, 0).kc, 200);
    anvil_tensor_free(y);
    anvil_tensor_free(x);
    rt_session_free(s);
    anvil_model_free(m);
}

static void test_readme_lists_every_variable(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", src_dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    size_t count;
    const api_env_var *v = api_env_vars(&count);
    assert_true(count > 0);
    for (size_t i = 0; i < count; i++) {
        char row[128];
        snprintf(row, sizeof row, "| `%s` |", v[i].name);
        if (!strstr(text, row)) fail_msg("README.md has no row for %s", v[i].name);
    }
}

int main(void) {
    src_dir = getenv("ANVIL_SOURCE_DIR");
    if (!src_dir) src_dir = ".";
    snprintf(conv_path, sizeof conv_path, "%s/tests/unit/data/api_conv.onnx", src_dir);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_env_and_option),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_kernel_knob_reaches_the_plan),
        cmocka_unit_test(test_readme_lists_every_variable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
