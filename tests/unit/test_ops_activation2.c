/* Elu, Selu, Celu, Softplus, Softsign, Mish, Gelu (both forms), Swish, Shrink, ThresholdedRelu and
 * PRelu reference kernels: each against its ONNX formula evaluated here in double (written naively,
 * e.g. log(1 + e^x)) over every float dtype, with default and explicit attributes, NaN propagation,
 * extreme inputs that must not overflow, Shrink and PRelu on integers, PRelu's one-directional
 * slope broadcast, and the errors bad models must give. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static uint64_t rng_state = 0xfeedface12345678ull;

static double rnd(double lo, double hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state % (1u << 24)) / (double)(1u << 24);
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* One case: op, opset, up to two float attributes (NAN = left out), Gelu's approximate. */
typedef struct act_case {
    ir_op op;
    int opset;
    const char *a1;
    float v1;
    const char *a2;
    float v2;
    const char *approx;
} act_case;

static double attr_or(const act_case *c, const char *name, double dflt) {
    if (c->a1 && strcmp(c->a1, name) == 0 && !isnan(c->v1)) return c->v1;
    if (c->a2 && strcmp(c->a2, name) == 0 && !isnan(c->v2)) return c->v2;
    return dflt;
}

static double act_ref(const act_case *c, double x) {
    double a;
    switch (c->op) {
    case IR_OP_ELU:
        a = attr_or(c, "alpha", 1.0);
        return x < 0 ? a * (exp(x) - 1) : x;
    case IR_OP_SELU: {
        a = attr_or(c, "alpha", 1.67326319217681884765625f);
        double g = attr_or(c, "gamma", 1.05070102214813232421875f);
        return x > 0 ? g * x : g * (a * exp(x) - a);
    }
    case IR_OP_CELU:
        a = attr_or(c, "alpha", 1.0);
        return fmax(0, x) + fmin(0, a * (exp(x / a) - 1));
    case IR_OP_SOFTPLUS:
        return log(1 + exp(x));
    case IR_OP_SOFTSIGN:
        return x / (1 + fabs(x));
    case IR_OP_MISH:
        return x * tanh(log(1 + exp(x)));
    case IR_OP_GELU:
        if (c->approx && strcmp(c->approx, "tanh") == 0)
            return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * pow(x, 3))));
        return 0.5 * x * (1 + erf(x / sqrt(2)));
    case IR_OP_SWISH:
        a = attr_or(c, "alpha", 1.0);
        return x / (1 + exp(-a * x));
    case IR_OP_SHRINK: {
        double l = attr_or(c, "lambd", 0.5), b = attr_or(c, "bias", 0.0);
        return x < -l ? x + b : (x > l ? x - b : 0);
    }
    case IR_OP_THRESHOLDEDRELU:
        a = attr_or(c, "alpha", 1.0);
        return x > a ? x : 0;
    default:
        return NAN;
    }
}

static void begin_case(optest *t, const act_case *c, anvil_dtype dt, int n, const void *x) {
    int na = (c->a1 && !isnan(c->v1)) + (c->a2 && !isnan(c->v2)) + (c->approx != NULL);
    optest_begin_opset(t, c->op, 1, 1, na, c->opset);
    int k = 0;
    if (c->a1 && !isnan(c->v1)) optest_attr_float(t, k++, c->a1, c->v1);
    if (c->a2 && !isnan(c->v2)) optest_attr_float(t, k++, c->a2, c->v2);
    if (c->approx) optest_attr_string(t, k++, "approximate", c->approx);
    optest_input(t, 0, dt, 1, (int64_t[]){n}, x, false);
}

static const act_case cases[] = {
    {IR_OP_ELU, 7, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_ELU, 22, "alpha", 0.3f, NULL, NAN, NULL},
    {IR_OP_SELU, 7, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_SELU, 22, "alpha", 2.0f, "gamma", 0.5f, NULL},
    {IR_OP_CELU, 12, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_CELU, 12, "alpha", 2.5f, NULL, NAN, NULL},
    {IR_OP_SOFTPLUS, 7, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_SOFTSIGN, 22, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_MISH, 18, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_GELU, 20, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_GELU, 20, NULL, NAN, NULL, NAN, "tanh"},
    {IR_OP_GELU, 27, NULL, NAN, NULL, NAN, "none"},
    {IR_OP_SWISH, 24, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_SWISH, 24, "alpha", 1.702f, NULL, NAN, NULL},
    {IR_OP_SHRINK, 9, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_SHRINK, 17, "lambd", 1.5f, "bias", 0.25f, NULL},
    {IR_OP_THRESHOLDEDRELU, 10, NULL, NAN, NULL, NAN, NULL},
    {IR_OP_THRESHOLDEDRELU, 22, "alpha", -0.5f, NULL, NAN, NULL},
};
#define N_CASES (sizeof cases / sizeof *cases)

static void test_formulas(void **state) {
    (void)state;
    enum { N = 301 };
    float x[N];
    double xd[N];
    uint16_t xh[N], xb[N];
    for (int i = 0; i < N; i++) {
        x[i] = i < 9 ? (float)(i - 4) * 0.5f : (float)rnd(-6, 6); /* kinks at -0.5, 0, 0.5, 1 */
        xd[i] = x[i];
        xh[i] = core_f32_to_f16(x[i]);
        xb[i] = core_f32_to_bf16(x[i]);
    }
    for (size_t c = 0; c < N_CASES; c++) {
        const act_case *ac = &cases[c];
        optest t;
        begin_case(&t, ac, ANVIL_DTYPE_FLOAT32, N, x);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_FLOAT32);
        const float *y = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double want = act_ref(ac, x[i]);
            if (!(fabs(y[i] - want) <= 2e-6 * fabs(want) + 2e-7)) {
                fprintf(stderr, "%s case %zu x=%.9g: got %.9g want %.9g\n", ir_op_name(ac->op), c,
                        (double)x[i], (double)y[i], want);
                fail();
            }
        }
        optest_end(&t);

        begin_case(&t, ac, ANVIL_DTYPE_FLOAT64, N, xd);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const double *yd = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double want = act_ref(ac, xd[i]);
            assert_true(fabs(yd[i] - want) <= 1e-7 * fabs(want) + 1e-9);
        }
        optest_end(&t);

        for (int kind = 0; kind < 2; kind++) {
            begin_case(&t, ac, kind ? ANVIL_DTYPE_BFLOAT16 : ANVIL_DTYPE_FLOAT16, N,
                       kind ? xb : xh);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            const uint16_t *yh = t.out[0].data;
            for (int i = 0; i < N; i++) {
                float in = kind ? core_bf16_to_f32(xb[i]) : core_f16_to_f32(xh[i]);
                float got = kind ? core_bf16_to_f32(yh[i]) : core_f16_to_f32(yh[i]);
                double want = act_ref(ac, in);
                assert_true(fabs(got - want) <=
                            (kind ? 1.0 / 128 : 1.0 / 1024) * fabs(want) + 1e-4);
            }
            optest_end(&t);
        }
    }
}

static void test_special_values(void **state) {
    (void)state;
    float x[4] = {NAN, 100, -100, 1e30f};
    for (size_t c = 0; c < N_CASES; c++) {
        optest t;
        begin_case(&t, &cases[c], ANVIL_DTYPE_FLOAT32, 4, x);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const float *y = t.out[0].data;
        /* Shrink compares NaN against +-lambd, fails both, and gives 0 (as the ONNX reference and
         * ONNX Runtime do) */
        if (cases[c].op == IR_OP_SHRINK)
            assert_true(y[0] == 0);
        else if (!isnan(y[0])) {
            fprintf(stderr, "case %zu (%s): NaN gave %g\n", c, ir_op_name(cases[c].op),
                    (double)y[0]);
            fail();
        }
        for (int i = 1; i < 4; i++) assert_false(isnan(y[i]));
        optest_end(&t);
    }
    /* Softplus: large x gives x, very negative x a tiny positive number, no overflow */
    optest t;
    begin_case(&t, &cases[6], ANVIL_DTYPE_FLOAT32, 4, x);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data;
    assert_true(y[1] == 100.0f && y[2] > 0 && y[2] < 1e-40f && y[3] == 1e30f);
    optest_end(&t);
}

static void test_shrink_integers(void **state) {
    (void)state;
    int32_t x[6] = {-5, -2, -1, 0, 2, 7};
    act_case c = {IR_OP_SHRINK, 17, "lambd", 1.5f, "bias", 1.0f, NULL};
    optest t;
    begin_case(&t, &c, ANVIL_DTYPE_INT32, 6, x);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){-4, -1, 0, 0, 1, 6}), sizeof x);
    optest_end(&t);
    uint8_t u[4] = {0, 1, 2, 255};
    begin_case(&t, &c, ANVIL_DTYPE_UINT8, 4, u);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){0, 0, 1, 254}), 4);
    optest_end(&t);
}

static void test_attribute_errors(void **state) {
    (void)state;
    float x[2] = {1, -1};
    optest t;
    act_case bad_approx = {IR_OP_GELU, 20, NULL, NAN, NULL, NAN, "fast"};
    begin_case(&t, &bad_approx, ANVIL_DTYPE_FLOAT32, 2, x);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "\"none\" or \"tanh\"");
    optest_end(&t);
    act_case old_gelu = {IR_OP_GELU, 19, NULL, NAN, NULL, NAN, NULL};
    begin_case(&t, &old_gelu, ANVIL_DTYPE_FLOAT32, 2, x);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "from opset 20 on");
    optest_end(&t);
    act_case old_swish = {IR_OP_SWISH, 23, NULL, NAN, NULL, NAN, NULL};
    begin_case(&t, &old_swish, ANVIL_DTYPE_FLOAT32, 2, x);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 24");
    optest_end(&t);
    act_case celu0 = {IR_OP_CELU, 12, "alpha", 0.0f, NULL, NAN, NULL};
    begin_case(&t, &celu0, ANVIL_DTYPE_FLOAT32, 2, x);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'alpha' is 0");
    optest_end(&t);
    act_case elu_inf = {IR_OP_ELU, 17, "alpha", INFINITY, NULL, NAN, NULL};
    begin_case(&t, &elu_inf, ANVIL_DTYPE_FLOAT32, 2, x);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "finite");
    optest_end(&t);

    optest_begin(&t, IR_OP_ELU, 1, 1, 1);
    optest_attr_int(&t, 0, "alpha", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "alpha");
    optest_end(&t);

    int32_t i[2] = {1, 2};
    act_case elu = {IR_OP_ELU, 17, NULL, NAN, NULL, NAN, NULL};
    begin_case(&t, &elu, ANVIL_DTYPE_INT32, 2, i);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which Elu does not support");
    optest_end(&t);
    uint8_t b[2] = {1, 0};
    act_case shrink = {IR_OP_SHRINK, 17, NULL, NAN, NULL, NAN, NULL};
    begin_case(&t, &shrink, ANVIL_DTYPE_BOOL, 2, b);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "BOOL");
    optest_end(&t);

    /* zero-size input */
    optest_begin(&t, IR_OP_SOFTPLUS, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 0}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    optest_end(&t);
}

/* ---- PRelu --------------------------------------------------------------------------------- */

static void test_prelu(void **state) {
    (void)state;
    /* X [2,3,2,2], slope [3,1,1] (per channel) */
    float x[24], s[3] = {0.1f, -2.0f, 0.0f};
    for (int i = 0; i < 24; i++) x[i] = (float)rnd(-3, 3);
    x[5] = NAN;
    optest t;
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 3, 2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){3, 1, 1}, s, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 4);
    const float *y = t.out[0].data;
    for (int i = 0; i < 24; i++) {
        if (i == 5) {
            assert_true(isnan(y[i]));
            continue;
        }
        float want = x[i] < 0 ? s[(i / 4) % 3] * x[i] : x[i];
        assert_true(y[i] == want);
    }
    optest_end(&t);

    /* integer PRelu; a scalar slope */
    int64_t xi[4] = {-3, 4, INT64_MIN, 0}, si[1] = {2};
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, xi, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, si, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){-6, 4, 0, 0}), sizeof xi);
    optest_end(&t);

    /* the slope may not grow X */
    float s2[6] = {0};
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, s2, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "one direction");
    optest_end(&t);
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, s2, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "test_node");
    optest_end(&t);
    int8_t i8[2] = {0};
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){2}, i8, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT8, 1, (int64_t[]){2}, i8, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT8, which PRelu does not support");
    optest_end(&t);
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, si, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formulas),        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_shrink_integers), cmocka_unit_test(test_attribute_errors),
        cmocka_unit_test(test_prelu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
