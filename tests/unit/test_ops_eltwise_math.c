/* Unary math (trigonometric, hyperbolic, Erf, Ceil, Floor, Round, Sign, Reciprocal), Mod, Sum and
 * Mean reference kernels: each against the formula evaluated here in double over every float dtype,
 * Round's ties-to-even, Sign and Mod on integers (both fmod modes, the sign rules and INT_MIN %
 * -1), Sum/Mean with three-way broadcasting, and the errors bad models must give: wrong dtypes,
 * opsets before an op existed, zero divisors, shapes that do not broadcast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static uint64_t rng_state = 0x1234abcd5678ef01ull;

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

typedef struct unary_case {
    ir_op op;
    double (*ref)(double);
    double lo, hi; /* input domain */
} unary_case;

static double ref_recip(double x) {
    return 1 / x;
}
static double ref_sign(double x) {
    return x > 0 ? 1 : (x < 0 ? -1 : 0);
}

static const unary_case unary_cases[] = {
    {IR_OP_SIN, sin, -6, 6},
    {IR_OP_COS, cos, -6, 6},
    {IR_OP_TAN, tan, -1.4, 1.4},
    {IR_OP_ASIN, asin, -1, 1},
    {IR_OP_ACOS, acos, -1, 1},
    {IR_OP_ATAN, atan, -9, 9},
    {IR_OP_SINH, sinh, -5, 5},
    {IR_OP_COSH, cosh, -5, 5},
    {IR_OP_TANH, tanh, -5, 5},
    {IR_OP_ASINH, asinh, -9, 9},
    {IR_OP_ACOSH, acosh, 1, 9},
    {IR_OP_ATANH, atanh, -0.99, 0.99},
    {IR_OP_ERF, erf, -3, 3},
    {IR_OP_CEIL, ceil, -9, 9},
    {IR_OP_FLOOR, floor, -9, 9},
    {IR_OP_ROUND, nearbyint, -9, 9},
    {IR_OP_RECIPROCAL, ref_recip, 0.1, 9},
    {IR_OP_SIGN, ref_sign, -3, 3},
};
#define N_UNARY (sizeof unary_cases / sizeof *unary_cases)

static void test_unary_formulas(void **state) {
    (void)state;
    enum { N = 257 };
    float x[N];
    double xd[N];
    uint16_t xh[N], xb[N];
    for (size_t c = 0; c < N_UNARY; c++) {
        const unary_case *u = &unary_cases[c];
        for (int i = 0; i < N; i++) {
            x[i] = (float)rnd(u->lo, u->hi);
            xd[i] = x[i];
            xh[i] = core_f32_to_f16(x[i]);
            xb[i] = core_f32_to_bf16(x[i]);
        }
        optest t;
        optest_begin(&t, u->op, 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, N}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_FLOAT32);
        const float *y = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double want = u->ref(x[i]);
            if (!(fabs(y[i] - want) <= 2e-6 * fabs(want) + 2e-7)) {
                fprintf(stderr, "%s(%.9g): got %.9g want %.9g\n", ir_op_name(u->op), (double)x[i],
                        (double)y[i], want);
                fail();
            }
        }
        optest_end(&t);

        optest_begin(&t, u->op, 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){N}, xd, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const double *yd = t.out[0].data;
        for (int i = 0; i < N; i++)
            assert_true(fabs(yd[i] - u->ref(xd[i])) <= 1e-12 * fabs(u->ref(xd[i])) + 1e-14);
        optest_end(&t);

        for (int kind = 0; kind < 2; kind++) {
            optest_begin(&t, u->op, 1, 1, 0);
            optest_input(&t, 0, kind ? ANVIL_DTYPE_BFLOAT16 : ANVIL_DTYPE_FLOAT16, 1,
                         (int64_t[]){N}, kind ? xb : xh, false);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            const uint16_t *yh = t.out[0].data;
            for (int i = 0; i < N; i++) {
                float in = kind ? core_bf16_to_f32(xb[i]) : core_f16_to_f32(xh[i]);
                float got = kind ? core_bf16_to_f32(yh[i]) : core_f16_to_f32(yh[i]);
                double want = u->ref(in);
                assert_true(fabs(got - want) <=
                            (kind ? 1.0 / 128 : 1.0 / 1024) * fabs(want) + 1e-6);
            }
            optest_end(&t);
        }
    }
}

static void test_round_sign_special(void **state) {
    (void)state;
    optest t;
    float x[9] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f, -2.6f, NAN, INFINITY};
    optest_begin(&t, IR_OP_ROUND, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){9}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data;
    const float want[8] = {0, 2, 2, -0.0f, -2, 2, -3, 0};
    for (int i = 0; i < 7; i++) assert_true(y[i] == want[i]);
    assert_true(isnan(y[7]) && isinf(y[8]));
    optest_end(&t);

    float s[4] = {NAN, -0.0f, -3, 5};
    optest_begin(&t, IR_OP_SIGN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, s, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    y = t.out[0].data;
    assert_true(isnan(y[0]) && y[1] == 0 && y[2] == -1 && y[3] == 1);
    optest_end(&t);

    int8_t i8[4] = {-128, -1, 0, 127};
    optest_begin(&t, IR_OP_SIGN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){4}, i8, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int8_t[]){-1, -1, 0, 1}), 4);
    optest_end(&t);

    uint64_t u64[3] = {0, 1, UINT64_MAX};
    optest_begin(&t, IR_OP_SIGN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_UINT64, 1, (int64_t[]){3}, u64, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint64_t[]){0, 1, 1}), sizeof u64);
    optest_end(&t);
}

static void test_unary_errors(void **state) {
    (void)state;
    optest t;
    int32_t i[2] = {1, 2};
    optest_begin(&t, IR_OP_SIN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, i, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which Sin does not support");
    optest_end(&t);

    uint8_t b[2] = {1, 0};
    optest_begin(&t, IR_OP_SIGN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){2}, b, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "BOOL");
    optest_end(&t);

    float x[2] = {2, 3};
    optest_begin_opset(&t, IR_OP_ACOSH, 1, 1, 0, 8);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "from opset 9 on");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ROUND, 1, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 11");
    optest_end(&t);

    /* every opset from the op's first to 27 is accepted */
    for (int v = 7; v <= 27; v++) {
        optest_begin_opset(&t, IR_OP_TANH, 1, 1, 0, v);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        optest_end(&t);
    }

    /* zero-size tensors are fine */
    optest_begin(&t, IR_OP_COS, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 3}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.d[0], 0);
    optest_end(&t);
}

/* ---- Mod ----------------------------------------------------------------------------------- */

static void begin_mod(optest *t, int fmod, anvil_dtype dt, int ra, const int64_t *da, const void *a,
                      int rb, const int64_t *db, const void *b) {
    optest_begin(t, IR_OP_MOD, 2, 1, fmod >= 0 ? 1 : 0);
    if (fmod >= 0) optest_attr_int(t, 0, "fmod", fmod);
    optest_input(t, 0, dt, ra, da, a, false);
    optest_input(t, 1, dt, rb, db, b, false);
}

static void test_mod_integers(void **state) {
    (void)state;
    int64_t a[6] = {7, -7, 7, -7, INT64_MIN, 0};
    int64_t b[6] = {3, 3, -3, -3, -1, -5};
    optest t;
    /* fmod = 0 (default): the sign of the divisor, Python's % */
    begin_mod(&t, -1, ANVIL_DTYPE_INT64, 1, (int64_t[]){6}, a, 1, (int64_t[]){6}, b);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){1, 2, -2, -1, 0, 0}), sizeof a);
    optest_end(&t);
    /* fmod = 1: the sign of the dividend, C's % */
    begin_mod(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){6}, a, 1, (int64_t[]){6}, b);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){1, -1, 1, -1, 0, 0}), sizeof a);
    optest_end(&t);

    /* broadcasting, int8, checked against a loop here */
    int8_t x[12], y[3] = {-4, 5, 7};
    for (int i = 0; i < 12; i++) x[i] = (int8_t)(i * 23 - 128);
    begin_mod(&t, 0, ANVIL_DTYPE_INT8, 2, (int64_t[]){4, 3}, x, 1, (int64_t[]){3}, y);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const int8_t *r = t.out[0].data;
    for (int i = 0; i < 12; i++) {
        int m = x[i] % y[i % 3];
        if (m != 0 && (m < 0) != (y[i % 3] < 0)) m += y[i % 3];
        assert_int_equal(r[i], m);
    }
    optest_end(&t);

    uint16_t ua[3] = {65535, 10, 3}, ub[1] = {7};
    begin_mod(&t, 0, ANVIL_DTYPE_UINT16, 1, (int64_t[]){3}, ua, 1, (int64_t[]){1}, ub);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint16_t[]){65535 % 7, 3, 3}), sizeof ua);
    optest_end(&t);
}

static void test_mod_float_and_errors(void **state) {
    (void)state;
    float a[5] = {5.5f, -5.5f, 5.5f, 1, INFINITY}, b[5] = {2, 2, -2, 0, 3};
    optest t;
    begin_mod(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, a, 1, (int64_t[]){5}, b);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data;
    assert_true(y[0] == 1.5f && y[1] == -1.5f && y[2] == 1.5f && isnan(y[3]) && isnan(y[4]));
    optest_end(&t);

    begin_mod(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, a, 1, (int64_t[]){5}, b);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "set fmod=1");
    optest_end(&t);
    begin_mod(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, a, 1, (int64_t[]){5}, b);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "fmod");
    optest_end(&t);

    int32_t ia[3] = {1, 2, 3}, ib[3] = {1, 0, 2};
    begin_mod(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, ia, 1, (int64_t[]){3}, ib);
    expect_status(&t, ANVIL_ERR_RUNTIME, "modulo by zero");
    optest_end(&t);
    begin_mod(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, ia, 1, (int64_t[]){3}, ib);
    expect_status(&t, ANVIL_ERR_SHAPE, "test_node");
    optest_end(&t);

    int64_t lb[3] = {1, 2, 3};
    optest_begin(&t, IR_OP_MOD, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, ia, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, lb, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_MOD, 2, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, ia, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, lb, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 10");
    optest_end(&t);
}

/* ---- Sum, Mean ----------------------------------------------------------------------------- */

static void test_sum_mean(void **state) {
    (void)state;
    /* shapes [2,3,4], [3,1], [4]: the output is [2,3,4] */
    float a[24], b[3], c[4];
    for (int i = 0; i < 24; i++) a[i] = (float)rnd(-5, 5);
    for (int i = 0; i < 3; i++) b[i] = (float)rnd(-5, 5);
    for (int i = 0; i < 4; i++) c[i] = (float)rnd(-5, 5);
    for (int mean = 0; mean < 2; mean++) {
        optest t;
        optest_begin(&t, mean ? IR_OP_MEAN : IR_OP_SUM, 3, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 1}, b, false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, c, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out_info[0].shape.rank, 3);
        const float *y = t.out[0].data;
        for (int i = 0; i < 24; i++) {
            double want = (double)a[i] + b[(i / 4) % 3] + c[i % 4];
            if (mean) want /= 3;
            assert_true(fabs(y[i] - want) <= 1e-5);
        }
        optest_end(&t);

        /* one input: a copy */
        double d[3] = {1.5, -2, 7};
        optest_begin(&t, mean ? IR_OP_MEAN : IR_OP_SUM, 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){3}, d, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_memory_equal(t.out[0].data, d, sizeof d);
        optest_end(&t);
    }

    /* f16 mean of two */
    uint16_t h0[2] = {core_f32_to_f16(1.0f), core_f32_to_f16(-3.0f)};
    uint16_t h1[2] = {core_f32_to_f16(2.0f), core_f32_to_f16(0.5f)};
    optest t;
    optest_begin(&t, IR_OP_MEAN, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, h0, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, h1, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const uint16_t *yh = t.out[0].data;
    assert_true(core_f16_to_f32(yh[0]) == 1.5f && core_f16_to_f32(yh[1]) == -1.25f);
    optest_end(&t);
}

static void test_sum_errors(void **state) {
    (void)state;
    float a[6] = {0}, b[3] = {0};
    optest t;
    /* before opset 8 shapes must be equal */
    optest_begin_opset(&t, IR_OP_SUM, 2, 1, 0, 7);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "before opset 8");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SUM, 2, 1, 0, 8);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    optest_end(&t);

    optest_begin(&t, IR_OP_MEAN, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, b, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "test_node");
    optest_end(&t);

    double d[3] = {0};
    optest_begin(&t, IR_OP_SUM, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){3}, d, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);

    int32_t i[3] = {0};
    optest_begin(&t, IR_OP_SUM, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, i, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which Sum does not support");
    optest_end(&t);

    /* an omitted input */
    optest_begin(&t, IR_OP_SUM, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, b, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "input 1 is omitted");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_formulas),       cmocka_unit_test(test_round_sign_special),
        cmocka_unit_test(test_unary_errors),         cmocka_unit_test(test_mod_integers),
        cmocka_unit_test(test_mod_float_and_errors), cmocka_unit_test(test_sum_mean),
        cmocka_unit_test(test_sum_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
