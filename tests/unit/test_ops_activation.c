/* Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish and Clip reference kernels: each against its
 * formula evaluated here in double, large |x| for Sigmoid, NaN propagation (onnxruntime 1.31
 * gives NaN for NaN inputs in all of them), every float dtype and the integer ones ONNX allows,
 * Clip's attribute form (opset < 11) and input form (opset >= 11), in-place and threaded runs,
 * and the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <float.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0x8badf00ddeadbeefull;

static float rnd_float(float lo, float hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)(rng_state % (1u << 20)) / (float)(1u << 20);
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

typedef struct act_case {
    ir_op op;
    float alpha, beta; /* NAN: attribute left out */
} act_case;

/* The formulas, written straight from the ONNX operator docs. */
static double act_ref(const act_case *c, double x) {
    double alpha, beta;
    switch (c->op) {
    case IR_OP_RELU:
        return x > 0 ? x : 0;
    case IR_OP_LEAKYRELU:
        alpha = isnan(c->alpha) ? 0.01f : c->alpha;
        return x >= 0 ? x : alpha * x;
    case IR_OP_SIGMOID:
        return 1 / (1 + exp(-x));
    case IR_OP_HARDSIGMOID:
        alpha = isnan(c->alpha) ? 0.2f : c->alpha;
        beta = isnan(c->beta) ? 0.5f : c->beta;
        return fmax(0, fmin(1, alpha * x + beta));
    case IR_OP_HARDSWISH:
        return x * fmax(0, fmin(1, x / 6 + 0.5));
    default:
        return NAN;
    }
}

static void begin_case(optest *t, const act_case *c, anvil_dtype dt, int rank, const int64_t *dims,
                       const void *x) {
    int na = !isnan(c->alpha) + !isnan(c->beta);
    optest_begin(t, c->op, 1, 1, na);
    int k = 0;
    if (!isnan(c->alpha)) optest_attr_float(t, k++, "alpha", c->alpha);
    if (!isnan(c->beta)) optest_attr_float(t, k++, "beta", c->beta);
    optest_input(t, 0, dt, rank, dims, x, false);
}

static const act_case cases[] = {
    {IR_OP_RELU, NAN, NAN},      {IR_OP_LEAKYRELU, NAN, NAN},   {IR_OP_LEAKYRELU, 0.3f, NAN},
    {IR_OP_SIGMOID, NAN, NAN},   {IR_OP_HARDSIGMOID, NAN, NAN}, {IR_OP_HARDSIGMOID, 0.5f, 0.25f},
    {IR_OP_HARDSWISH, NAN, NAN},
};
#define N_CASES (sizeof cases / sizeof *cases)

static void test_formulas(void **state) {
    (void)state;
    enum { N = 301 };
    float x[N];
    double xd[N];
    uint16_t xh[N], xb[N];
    for (int i = 0; i < N; i++) {
        x[i] = i < 11 ? (float)(i - 5) : rnd_float(-8, 8); /* exact kinks at -3, 0, 3 included */
        xd[i] = x[i];
        xh[i] = core_f32_to_f16(x[i]);
        xb[i] = core_f32_to_bf16(x[i]);
    }
    int64_t dims[2] = {7, 43};
    for (size_t c = 0; c < N_CASES; c++) {
        optest t;
        begin_case(&t, &cases[c], ANVIL_DTYPE_FLOAT32, 2, dims, x);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_FLOAT32);
        assert_int_equal(t.out_info[0].shape.rank, 2);
        const float *y = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double want = act_ref(&cases[c], x[i]);
            if (fabs(y[i] - want) > 3e-7 * fabs(want) + 1e-7) {
                fprintf(stderr, "%s x=%g got %g want %g\n", ir_op_name(cases[c].op), (double)x[i],
                        (double)y[i], want);
                fail();
            }
        }
        optest_end(&t);

        begin_case(&t, &cases[c], ANVIL_DTYPE_FLOAT64, 2, dims, xd);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const double *yd = t.out[0].data;
        for (int i = 0; i < N; i++) {
            double want = act_ref(&cases[c], xd[i]);
            assert_true(fabs(yd[i] - want) <= 1e-7 * fabs(want) + 1e-9);
        }
        optest_end(&t);

        for (int kind = 0; kind < 2; kind++) {
            begin_case(&t, &cases[c], kind ? ANVIL_DTYPE_BFLOAT16 : ANVIL_DTYPE_FLOAT16, 2, dims,
                       kind ? xb : xh);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            const uint16_t *yh = t.out[0].data;
            for (int i = 0; i < N; i++) {
                float in = kind ? core_bf16_to_f32(xb[i]) : core_f16_to_f32(xh[i]);
                float got = kind ? core_bf16_to_f32(yh[i]) : core_f16_to_f32(yh[i]);
                double want = act_ref(&cases[c], in);
                double tol = kind ? 1.0 / 128 : 1.0 / 1024; /* half an ulp and then some */
                assert_true(fabs(got - want) <= tol * fabs(want) + 1e-6);
            }
            optest_end(&t);
        }
    }
}

static void test_special_values(void **state) {
    (void)state;
    float x[6] = {NAN, -1000, 1000, -88.8f, 100, -0.0f};
    for (size_t c = 0; c < N_CASES; c++) {
        optest t;
        begin_case(&t, &cases[c], ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const float *y = t.out[0].data;
        assert_true(isnan(y[0]));
        for (int i = 1; i < 6; i++) assert_false(isnan(y[i]));
        optest_end(&t);
    }
    /* Sigmoid saturates cleanly at both ends and keeps tiny values for very negative x */
    optest t;
    act_case sig = {IR_OP_SIGMOID, NAN, NAN};
    begin_case(&t, &sig, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data;
    assert_true(y[1] == 0.0f && y[2] == 1.0f && y[4] == 1.0f);
    double tiny = exp((double)x[3]) / (1 + exp((double)x[3])); /* a float subnormal */
    assert_true(y[3] > 0 && fabs(y[3] - tiny) <= 1e-6 * tiny);
    optest_end(&t);
    double xd[2] = {-745, 710};
    begin_case(&t, &sig, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){2}, xd);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(((double *)t.out[0].data)[0] >= 0 && ((double *)t.out[0].data)[1] == 1.0);
    optest_end(&t);
}

static void test_relu_integers(void **state) {
    (void)state;
    optest t;
    int32_t i32[4] = {INT32_MIN, -1, 0, 7};
    optest_begin(&t, IR_OP_RELU, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){4}, i32, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){0, 0, 0, 7}), sizeof i32);
    optest_end(&t);
    int8_t i8[3] = {-128, 127, -3};
    optest_begin(&t, IR_OP_RELU, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){3}, i8, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int8_t[]){0, 127, 0}), 3);
    optest_end(&t);

    /* Relu is not defined on unsigned types in ONNX; Sigmoid and friends are float only */
    uint8_t u8[2] = {1, 2};
    optest_begin(&t, IR_OP_RELU, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 1, (int64_t[]){2}, u8, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "UINT8, which Relu does not support");
    optest_end(&t);
    static const ir_op float_only[] = {IR_OP_SIGMOID, IR_OP_HARDSIGMOID, IR_OP_HARDSWISH,
                                       IR_OP_LEAKYRELU};
    for (size_t k = 0; k < 4; k++) {
        optest_begin(&t, float_only[k], 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){4}, i32, false);
        expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
        optest_end(&t);
    }
}

static void test_attribute_errors(void **state) {
    (void)state;
    optest t;
    float x[2] = {1, -1};
    optest_begin(&t, IR_OP_LEAKYRELU, 1, 1, 1);
    optest_attr_int(&t, 0, "alpha", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "alpha");
    optest_end(&t);
    optest_begin(&t, IR_OP_HARDSIGMOID, 1, 1, 1);
    optest_attr_float(&t, 0, "beta", NAN);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "finite");
    optest_end(&t);
    optest_begin(&t, IR_OP_RELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "inputs");
    optest_end(&t);
}

/* ---- Clip ---------------------------------------------------------------------------------- */

static double clip_ref(double x, bool has_lo, double lo, bool has_hi, double hi) {
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
}

static void test_clip_inputs(void **state) {
    (void)state;
    enum { N = 64 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = rnd_float(-5, 5);
    x[0] = NAN;
    x[1] = INFINITY;
    float lo = -1.5f, hi = 2.0f;
    for (int mask = 0; mask < 4; mask++) {
        bool has_lo = mask & 1, has_hi = mask & 2;
        optest t;
        optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 13);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){8, 8}, x, false);
        if (has_lo) optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &lo, true);
        if (has_hi) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 0, NULL, &hi, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const float *y = t.out[0].data;
        assert_true(isnan(y[0]));
        for (int i = 1; i < N; i++)
            assert_true(y[i] == (float)clip_ref(x[i], has_lo, lo, has_hi, hi));
        optest_end(&t);
    }

    /* min > max gives max everywhere (numpy and onnxruntime agree) */
    float lo2 = 2, hi2 = 1, y3[3] = {-5, 0.5f, 5};
    optest t;
    optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 12);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, y3, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, &lo2, false); /* [1] accepted */
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 0, NULL, &hi2, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){1, 1, 1}), 3 * sizeof(float));
    optest_end(&t);

    /* integer types */
    int32_t i32[5] = {INT32_MIN, -7, 0, 7, INT32_MAX}, ilo = -3, ihi = 5;
    optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){5}, i32, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &ilo, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &ihi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){-3, -3, 0, 5, 5}), sizeof i32);
    optest_end(&t);
    uint64_t u64[3] = {0, 1ull << 63, UINT64_MAX}, uhi = (1ull << 63) + 1;
    optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_UINT64, 1, (int64_t[]){3}, u64, false);
    optest_input(&t, 2, ANVIL_DTYPE_UINT64, 0, NULL, &uhi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint64_t[]){0, 1ull << 63, uhi}), sizeof u64);
    optest_end(&t);
    uint16_t h[3] = {core_f32_to_f16(-4), core_f32_to_f16(0.5f), core_f32_to_f16(9)};
    uint16_t hlo = core_f32_to_f16(-1), hhi = core_f32_to_f16(1);
    optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){3}, h, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 0, NULL, &hlo, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 0, NULL, &hhi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint16_t[]){hlo, h[1], hhi}), sizeof h);
    optest_end(&t);

    /* errors: bound dtype, bound shape (at inference and, when unknown then, at run time) */
    double dlo = 0;
    optest_begin_opset(&t, IR_OP_CLIP, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, y3, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 0, NULL, &dlo, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "input 1 (min) has dtype DOUBLE");
    optest_end(&t);
    float two[2] = {0, 1};
    optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, y3, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, two, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "must be a scalar");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CLIP, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, y3, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tensor bad = {.dtype = ANVIL_DTYPE_FLOAT32, .rank = 1, .dims = {2}, .data = two};
    op_tensor out = t.in[0];
    float buf[3];
    out.data = buf;
    const op_tensor *ins[3] = {&t.in[0], &bad, NULL};
    op_tensor *outs[1] = {&out};
    assert_int_equal(op_get(IR_OP_CLIP)->run(optest_node(&t), ins, 3, outs, 1, NULL),
                     ANVIL_ERR_RUNTIME);
    assert_non_null(strstr(anvil_last_error(), "2 elements"));
    optest_end(&t);
}

static void test_clip_attributes(void **state) {
    (void)state;
    float x[5] = {-1e30f, -2, 0.25f, 3, INFINITY};
    optest t;
    optest_begin_opset(&t, IR_OP_CLIP, 1, 1, 2, 6);
    optest_attr_float(&t, 0, "min", -1);
    optest_attr_float(&t, 1, "max", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){-1, -1, 0.25f, 1, 1}), sizeof x);
    optest_end(&t);

    /* defaults are the lowest and highest finite float, so only infinities move */
    float xi[3] = {-INFINITY, 5, INFINITY};
    optest_begin_opset(&t, IR_OP_CLIP, 1, 1, 0, 6);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, xi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){-FLT_MAX, 5, FLT_MAX}), sizeof xi);
    optest_end(&t);

    double xd[3] = {-7, 0.5, 7};
    optest_begin_opset(&t, IR_OP_CLIP, 1, 1, 1, 10);
    optest_attr_float(&t, 0, "max", 0.25f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){3}, xd, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((double[]){-7, 0.25, 0.25}), sizeof xd);
    optest_end(&t);

    /* before opset 11: no bound inputs, float tensors only, float attributes */
    float lo = 0;
    optest_begin_opset(&t, IR_OP_CLIP, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &lo, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset >= 11");
    optest_end(&t);
    int32_t i32[2] = {1, 2};
    optest_begin_opset(&t, IR_OP_CLIP, 1, 1, 0, 6);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, i32, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CLIP, 1, 1, 1, 6);
    optest_attr_string(&t, 0, "min", "low");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "min");
    optest_end(&t);
}

/* ---- in place and threads ------------------------------------------------------------------- */

static void test_inplace_and_threads(void **state) {
    (void)state;
    enum { N = 100003 };
    float *x = malloc(N * sizeof *x), *buf = malloc(N * sizeof *buf);
    for (int i = 0; i < N; i++) x[i] = rnd_float(-6, 6);
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    for (size_t c = 0; c < N_CASES; c++) {
        optest t;
        begin_case(&t, &cases[c], ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){N}, x);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_true(op_get(cases[c].op)->flags & OP_INPLACE_0);
        /* threaded, writing over a copy of the input */
        memcpy(buf, x, N * sizeof *x);
        op_tensor io = t.in[0];
        io.data = buf;
        const op_tensor *ins[1] = {&io};
        op_tensor *outs[1] = {&io};
        assert_int_equal(op_get(cases[c].op)->run(optest_node(&t), ins, 1, outs, 1, &ctx),
                         ANVIL_OK);
        assert_memory_equal(buf, t.out[0].data, N * sizeof(float));
        optest_end(&t);
    }
    core_pool_free(pool);
    free(x);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_relu_integers),
        cmocka_unit_test(test_attribute_errors),
        cmocka_unit_test(test_clip_inputs),
        cmocka_unit_test(test_clip_attributes),
        cmocka_unit_test(test_inplace_and_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
