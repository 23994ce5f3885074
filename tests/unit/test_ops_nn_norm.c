/* BatchNormalization (inference) reference kernel: the formula evaluated element by element here
 * for ranks 2 to 5 and FLOAT / DOUBLE / FLOAT16 / BFLOAT16, opset 7 spatial = 0 (per-position
 * parameters), opset 15 parameters in their own float types, multi-threaded runs, and the
 * refusals: training_mode = 1, training-only outputs, bad epsilon, removed attributes, parameter
 * shapes and dtypes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0x14057b7ef767814full;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* Fills n values of dt in [lo, hi) and returns them as doubles (as dt holds them). */
static void *values(anvil_dtype dt, size_t n, double lo, double hi, double *as_double) {
    void *p = malloc((n ? n : 1) * anvil_dtype_size(dt));
    for (size_t i = 0; i < n; i++) {
        core_store_f64(dt, p, i, lo + (hi - lo) * (double)rnd(10000) / 10000.0);
        as_double[i] = core_load_f64(dt, p, i);
    }
    return p;
}

/* One BatchNormalization of X (dims, rank) in dtype xdt with parameters in pdt (scale/B) and mdt
 * (mean/var); spatial = false gives per-position parameters (opset 7). */
static void check_bn(int opset, anvil_dtype xdt, anvil_dtype pdt, anvil_dtype mdt, int rank,
                     const int64_t *dims, bool spatial, float eps, core_pool *pool) {
    size_t nx = 1, per = 1;
    for (int d = 0; d < rank; d++) nx *= (size_t)dims[d];
    for (int d = 2; d < rank; d++) per *= (size_t)dims[d];
    size_t C = (size_t)dims[1], np = spatial ? C : C * per;
    double *x = malloc(nx * sizeof *x), *p[4];
    void *xt = values(xdt, nx, -3, 3, x), *pt[4];
    static const double lo[4] = {-2, -1, -1, 0.1}, hi[4] = {2, 1, 1, 2};
    for (int i = 0; i < 4; i++) {
        p[i] = malloc(np * sizeof *p[i]);
        pt[i] = values(i < 2 ? pdt : mdt, np, lo[i], hi[i], p[i]);
    }
    optest t;
    optest_begin_opset(&t, IR_OP_BATCHNORMALIZATION, 5, 1, spatial ? 1 : 2, opset);
    optest_attr_float(&t, 0, "epsilon", eps);
    if (!spatial) optest_attr_int(&t, 1, "spatial", 0);
    optest_input(&t, 0, xdt, rank, dims, xt, false);
    int64_t pdims[IR_MAX_RANK] = {dims[1]};
    for (int d = 2; d < rank; d++) pdims[d - 1] = dims[d];
    for (int i = 0; i < 4; i++)
        optest_input(&t, i + 1, i < 2 ? pdt : mdt, spatial ? 1 : rank - 1, pdims, pt[i], true);
    anvil_status s = optest_run(&t);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    assert_int_equal(s, ANVIL_OK);
    assert_int_equal(t.out[0].dtype, xdt);
    double tol = xdt == ANVIL_DTYPE_FLOAT64 ? 1e-12 : xdt == ANVIL_DTYPE_FLOAT32 ? 1e-5 : 1e-2;
    for (size_t i = 0; i < nx; i++) {
        size_t c = (i / per) % C, k = spatial ? c : c * per + i % per;
        double want = (x[i] - p[2][k]) / sqrt(p[3][k] + (double)eps) * p[0][k] + p[1][k];
        double got = core_load_f64(xdt, t.out[0].data, i);
        if (!(fabs(got - want) <= tol * (1 + fabs(want))))
            fprintf(stderr, "elem %zu: got %g want %g\n", i, got, want);
        assert_true(fabs(got - want) <= tol * (1 + fabs(want)));
    }
    if (pool) {
        size_t bytes = nx * anvil_dtype_size(xdt);
        void *serial = malloc(bytes ? bytes : 1);
        memcpy(serial, t.out[0].data, bytes);
        memset(t.out[0].data, 0, bytes);
        op_ctx ctx = {.pool = pool};
        const op_tensor *ins[5] = {&t.in[0], &t.in[1], &t.in[2], &t.in[3], &t.in[4]};
        op_tensor *outs[1] = {&t.out[0]};
        assert_int_equal(
            op_get(IR_OP_BATCHNORMALIZATION)->run(optest_node(&t), ins, 5, outs, 1, &ctx),
            ANVIL_OK);
        assert_memory_equal(serial, t.out[0].data, bytes);
        free(serial);
    }
    optest_end(&t);
    free(x);
    free(xt);
    for (int i = 0; i < 4; i++) {
        free(p[i]);
        free(pt[i]);
    }
}

static void test_bn_values(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    const int64_t shapes[4][5] = {{3, 4}, {2, 3, 5}, {2, 3, 4, 5}, {1, 2, 3, 2, 4}};
    static const int opsets[] = {6, 7, 9, 14, 15};
    for (int r = 2; r <= 5; r++)
        for (size_t o = 0; o < sizeof opsets / sizeof opsets[0]; o++) {
            int op = opsets[o];
            check_bn(op, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32, r,
                     shapes[r - 2], true, 1e-5f, r == 4 ? pool : NULL);
            check_bn(op, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT64, r,
                     shapes[r - 2], true, 1e-3f, NULL);
            check_bn(op, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_FLOAT16, r,
                     shapes[r - 2], true, 1e-2f, NULL);
        }
    check_bn(15, ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_BFLOAT16, 4, shapes[2],
             true, 0, NULL);
    /* opset 14: mean/var in their own type; opset 15: scale/B too */
    check_bn(14, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_FLOAT32, 4, shapes[2], true,
             1e-5f, NULL);
    check_bn(15, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64, 4, shapes[2], true,
             1e-5f, NULL);
    /* opset 7 spatial = 0: one parameter per channel and position */
    check_bn(7, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32, 4, shapes[2], false,
             1e-5f, pool);
    check_bn(7, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT32, 2, shapes[0], false,
             1e-5f, NULL);
    core_pool_free(pool);
}

/* The batchnorm_example of the ONNX operator tests, computed by hand. */
static void test_bn_example(void **state) {
    (void)state;
    float x[6] = {-1, 0, 1, 2, 3, 4}; /* 1 x 2 x 1 x 3 */
    float scale[2] = {1.0f, 1.5f}, bias[2] = {0, 1}, mean[2] = {0, 3}, var[2] = {1, 1.5f};
    optest t;
    optest_begin(&t, IR_OP_BATCHNORMALIZATION, 5, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 1, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, scale, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, bias, true);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, mean, true);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, var, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    /* channel 0: x / sqrt(1 + 1e-5); channel 1: (x - 3) / sqrt(1.5 + 1e-5) * 1.5 + 1 */
    const float want[6] = {-0.999995f, 0, 0.999995f, -0.22474074f, 1, 2.2247407f};
    assert_int_equal(optest_compare_f32(t.out[0].data, want, 6, 1e-6f, 1e-6f), -1);
    optest_end(&t);
}

static void bn_error(int opset, int n_out, void (*attrs)(optest *), int n_attrs, anvil_dtype xdt,
                     anvil_dtype pdt, int prank, const int64_t *pdims, anvil_status want,
                     const char *msg) {
    static double buf[256];
    optest t;
    optest_begin_opset(&t, IR_OP_BATCHNORMALIZATION, 5, n_out, n_attrs, opset);
    if (attrs) attrs(&t);
    optest_input(&t, 0, xdt, 4, (int64_t[]){2, 3, 2, 2}, buf, false);
    for (int i = 1; i < 5; i++) optest_input(&t, i, pdt, prank, pdims, buf, true);
    expect_status(&t, want, msg);
    optest_end(&t);
}

static void b_training(optest *t) {
    optest_attr_int(t, 0, "training_mode", 1);
}
static void b_training2(optest *t) {
    optest_attr_int(t, 0, "training_mode", 2);
}
static void b_neg_eps(optest *t) {
    optest_attr_float(t, 0, "epsilon", -1.0f);
}
static void b_spatial(optest *t) {
    optest_attr_int(t, 0, "spatial", 0);
}
static void b_spatial3(optest *t) {
    optest_attr_int(t, 0, "spatial", 3);
}

static void test_bn_errors(void **state) {
    (void)state;
    const int64_t c3[1] = {3}, c4[1] = {4};
    const anvil_dtype F = ANVIL_DTYPE_FLOAT32;
    bn_error(15, 1, b_training, 1, F, F, 1, c3, ANVIL_ERR_UNSUPPORTED, "training_mode=1");
    bn_error(15, 1, b_training2, 1, F, F, 1, c3, ANVIL_ERR_INVALID_MODEL, "'training_mode' is 2");
    bn_error(15, 3, NULL, 0, F, F, 1, c3, ANVIL_ERR_UNSUPPORTED, "exists only in training mode");
    bn_error(9, 5, NULL, 0, F, F, 1, c3, ANVIL_ERR_UNSUPPORTED, "exists only in training mode");
    bn_error(15, 1, b_neg_eps, 1, F, F, 1, c3, ANVIL_ERR_INVALID_MODEL, "'epsilon' is -1");
    bn_error(9, 1, b_spatial, 1, F, F, 1, c3, ANVIL_ERR_INVALID_MODEL,
             "'spatial' was removed in opset 9");
    bn_error(7, 1, b_spatial3, 1, F, F, 1, c3, ANVIL_ERR_INVALID_MODEL, "'spatial' is 3");
    bn_error(15, 1, NULL, 0, F, F, 1, c4, ANVIL_ERR_SHAPE, "one value per channel");
    bn_error(7, 1, b_spatial, 1, F, F, 1, c3, ANVIL_ERR_SHAPE, "spatial=0");
    bn_error(15, 1, NULL, 0, ANVIL_DTYPE_INT32, ANVIL_DTYPE_INT32, 1, c3, ANVIL_ERR_UNSUPPORTED,
             "INT32");
    bn_error(9, 1, NULL, 0, F, ANVIL_DTYPE_FLOAT64, 1, c3, ANVIL_ERR_SHAPE,
             "must be a float type equal to 'X'");

    /* with the training outputs present but omitted (empty names) the node is fine */
    static float buf[64];
    optest t;
    optest_begin(&t, IR_OP_BATCHNORMALIZATION, 5, 3, 0);
    optest_node(&t)->outputs[1] = IR_NONE;
    optest_node(&t)->outputs[2] = IR_NONE;
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, buf, false);
    for (int i = 1; i < 5; i++) optest_input(&t, i, ANVIL_DTYPE_FLOAT32, 1, c3, buf, true);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    optest_end(&t);

    /* X of rank 1 has no channel dim */
    optest_begin(&t, IR_OP_BATCHNORMALIZATION, 5, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, c3, buf, false);
    for (int i = 1; i < 5; i++) optest_input(&t, i, ANVIL_DTYPE_FLOAT32, 1, c3, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "X has rank 1");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bn_values),
        cmocka_unit_test(test_bn_example),
        cmocka_unit_test(test_bn_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
