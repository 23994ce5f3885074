/* Pad reference kernel: hand-checked cases for every mode (the reflect / edge / wrap expectations,
 * including pads larger than the axis, were produced with numpy.pad), negative pads (crop first,
 * then pad), the axes input with negative axes, constant_value, the attribute forms of opsets 1
 * and 2, randomised shapes and dtypes against a naive mapping written here (mirroring by repeated
 * reflection, wrapping by repeated shifts), symbolic shapes and the errors bad models must
 * produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0x5851f42d4c957f2dull;

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

/* Pads x (FLOAT) with pads given as an input (opset 19) and returns the status; out in t. */
static anvil_status pad_f32(optest *t, const char *mode, const float *x, int rank,
                            const int64_t *dims, const int64_t *pads, const float *value) {
    optest_begin_opset(t, IR_OP_PAD, value ? 3 : 2, 1, 1, 19);
    optest_attr_string(t, 0, "mode", mode);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    optest_input(t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2 * rank}, pads, true);
    if (value) optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 0, NULL, value, false);
    return optest_run(t);
}

static void expect_1d(const char *mode, const int64_t *pads, const float *want, int64_t n) {
    static const float x[3] = {1, 2, 3};
    optest t;
    anvil_status s = pad_f32(&t, mode, x, 1, (int64_t[]){3}, pads, NULL);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    assert_int_equal(s, ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], n);
    assert_int_equal(optest_compare_f32(t.out[0].data, want, (size_t)n, 0, 0), -1);
    optest_end(&t);
}

static void test_pad_modes_1d(void **state) {
    (void)state;
    const int64_t p22[2] = {2, 2}, p50[2] = {5, 0}, p17[2] = {1, 7};
    expect_1d("constant", p22, (float[]){0, 0, 1, 2, 3, 0, 0}, 7);
    expect_1d("reflect", p22, (float[]){3, 2, 1, 2, 3, 2, 1}, 7);
    expect_1d("reflect", p50, (float[]){2, 1, 2, 3, 2, 1, 2, 3}, 8);
    expect_1d("reflect", p17, (float[]){2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2}, 11);
    expect_1d("edge", p22, (float[]){1, 1, 1, 2, 3, 3, 3}, 7);
    expect_1d("edge", p50, (float[]){1, 1, 1, 1, 1, 1, 2, 3}, 8);
    expect_1d("wrap", p22, (float[]){2, 3, 1, 2, 3, 1, 2}, 7);
    expect_1d("wrap", p17, (float[]){3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}, 11);
    /* negative pads crop first; the remaining pads work on the kept window */
    expect_1d("edge", (int64_t[]){-1, 2}, (float[]){2, 3, 3, 3}, 4);
    expect_1d("reflect", (int64_t[]){1, -1}, (float[]){2, 1, 2}, 3);
    expect_1d("constant", (int64_t[]){-3, 0}, NULL, 0);
    expect_1d("constant", (int64_t[]){-3, 2}, (float[]){0, 0}, 2);

    /* a scalar constant_value */
    optest t;
    const float x[3] = {1, 2, 3}, v = 9.5f;
    assert_int_equal(pad_f32(&t, "constant", x, 1, (int64_t[]){3}, (int64_t[]){1, 1}, &v),
                     ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){9.5f, 1, 2, 3, 9.5f}, 5, 0, 0),
                     -1);
    optest_end(&t);
}

static void test_pad_modes_2d(void **state) {
    (void)state;
    const float x[6] = {1, 2, 3, 4, 5, 6};
    optest t;
    assert_int_equal(pad_f32(&t, "reflect", x, 2, (int64_t[]){2, 3}, (int64_t[]){1, 2, 1, 0}, NULL),
                     ANVIL_OK);
    const float refl[20] = {6, 5, 4, 5, 6, 3, 2, 1, 2, 3, 6, 5, 4, 5, 6, 3, 2, 1, 2, 3};
    assert_int_equal(t.out[0].dims[0], 4);
    assert_int_equal(t.out[0].dims[1], 5);
    assert_int_equal(optest_compare_f32(t.out[0].data, refl, 20, 0, 0), -1);
    optest_end(&t);
    assert_int_equal(pad_f32(&t, "wrap", x, 2, (int64_t[]){2, 3}, (int64_t[]){3, 0, 0, 4}, NULL),
                     ANVIL_OK);
    const float wrap[35] = {4, 5, 6, 4, 5, 6, 4, 1, 2, 3, 1, 2, 3, 1, 4, 5, 6, 4,
                            5, 6, 4, 1, 2, 3, 1, 2, 3, 1, 4, 5, 6, 4, 5, 6, 4};
    assert_int_equal(optest_compare_f32(t.out[0].data, wrap, 35, 0, 0), -1);
    optest_end(&t);

    /* the ONNX doc's edge example */
    const float y[6] = {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f};
    assert_int_equal(pad_f32(&t, "edge", y, 2, (int64_t[]){3, 2}, (int64_t[]){0, 2, 0, 0}, NULL),
                     ANVIL_OK);
    const float edge[12] = {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f};
    assert_int_equal(optest_compare_f32(t.out[0].data, edge, 12, 0, 0), -1);
    optest_end(&t);
}

/* The axes input (opset 18) with a negative axis, and the attribute forms of opsets 1 and 2. */
static void test_pad_axes_and_old_opsets(void **state) {
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6};
    float v = -1;
    optest t;
    optest_begin_opset(&t, IR_OP_PAD, 4, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, (int64_t[]){1, 2}, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, &v, false);
    optest_input(&t, 3, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, (int32_t[]){-1}, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], 6);
    const float want[12] = {-1, 1, 2, 3, -1, -1, -1, 4, 5, 6, -1, -1};
    assert_int_equal(optest_compare_f32(t.out[0].data, want, 12, 0, 0), -1);
    optest_end(&t);

    for (int opset = 1; opset <= 2; opset++) {
        optest_begin_opset(&t, IR_OP_PAD, 1, 1, 3, opset);
        optest_attr_ints(&t, 0, opset == 1 ? "paddings" : "pads", (int64_t[]){0, 1, 0, 0}, 4);
        optest_attr_float(&t, 1, "value", 7.0f);
        optest_attr_string(&t, 2, "mode", "constant");
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const float w2[8] = {7, 1, 2, 3, 7, 4, 5, 6};
        assert_int_equal(optest_compare_f32(t.out[0].data, w2, 8, 0, 0), -1);
        optest_end(&t);
    }

    /* a scalar with no pads is copied */
    optest_begin_opset(&t, IR_OP_PAD, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){0}, NULL, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 0);
    assert_true(((float *)t.out[0].data)[0] == 1.0f);
    optest_end(&t);
}

/* ---- randomised against a naive mapping ------------------------------------------------------ */

static int64_t naive_source(int mode, int64_t j, int64_t kept) {
    if (j >= 0 && j < kept) return j;
    if (mode == 0) return -1;
    if (mode == 2) return j < 0 ? 0 : kept - 1;
    if (mode == 3) {
        while (j < 0) j += kept;
        while (j >= kept) j -= kept;
        return j;
    }
    if (kept == 1) return 0;
    while (j < 0 || j >= kept) j = j < 0 ? -j : 2 * (kept - 1) - j;
    return j;
}

static void test_pad_random(void **state) {
    (void)state;
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    static const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_INT64, ANVIL_DTYPE_BOOL,
                                      ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_UINT8, ANVIL_DTYPE_FLOAT64};
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 300; it++) {
        int mode = (int)rnd(4), rank = 1 + (int)rnd(4);
        anvil_dtype dt = dts[it % 6];
        size_t es = anvil_dtype_size(dt);
        int64_t dims[4], pads[8], kept[4], crop[4], lead[4], odims[4];
        size_t nx = 1, ny = 1;
        for (int d = 0; d < rank; d++) {
            dims[d] = 1 + rnd(4);
            nx *= (size_t)dims[d];
        }
        for (int d = 0; d < rank; d++) {
            int64_t b = (int64_t)rnd(5) - 1, e = (int64_t)rnd(5) - 1;
            if ((b < 0 ? -b : 0) + (e < 0 ? -e : 0) >= dims[d]) b = e = 0; /* keep some data */
            pads[d] = b;
            pads[rank + d] = e;
            crop[d] = b < 0 ? -b : 0;
            lead[d] = b > 0 ? b : 0;
            kept[d] = dims[d] - crop[d] - (e < 0 ? -e : 0);
            odims[d] = dims[d] + b + e;
            ny *= (size_t)odims[d];
        }
        unsigned char *x = malloc(nx * es), *want = malloc(ny * es), fill[8];
        for (size_t i = 0; i < nx * es; i++) x[i] = (unsigned char)rnd(256);
        if (dt == ANVIL_DTYPE_BOOL)
            for (size_t i = 0; i < nx; i++) x[i] &= 1;
        if (dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_FLOAT64 || dt == ANVIL_DTYPE_FLOAT32)
            for (size_t i = 0; i < nx; i++) core_store_f64(dt, x, i, (double)rnd(100));
        core_store_f64(dt, fill, 0, dt == ANVIL_DTYPE_BOOL ? 1 : 42);
        for (size_t o = 0; o < ny; o++) {
            size_t rest = o, src = 0;
            bool constant = false;
            int64_t oi[4];
            for (int d = rank - 1; d >= 0; d--) {
                oi[d] = (int64_t)(rest % (size_t)odims[d]);
                rest /= (size_t)odims[d];
            }
            for (int d = 0; d < rank; d++) {
                int64_t s = naive_source(mode, oi[d] - lead[d], kept[d]);
                if (s < 0) constant = true;
                src = src * (size_t)dims[d] + (size_t)(s < 0 ? 0 : s + crop[d]);
            }
            memcpy(want + o * es, constant ? fill : x + src * es, es);
        }
        optest t;
        optest_begin_opset(&t, IR_OP_PAD, 3, 1, 1, 19);
        optest_attr_string(&t, 0, "mode", modes[mode]);
        optest_input(&t, 0, dt, rank, dims, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2 * rank}, pads, true);
        optest_input(&t, 2, dt, 0, NULL, fill, false);
        anvil_status s = optest_run(&t);
        if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
        assert_int_equal(s, ANVIL_OK);
        for (int d = 0; d < rank; d++) assert_int_equal(t.out[0].dims[d], odims[d]);
        if (ny) assert_memory_equal(t.out[0].data, want, ny * es);
        if (it % 10 == 0 && ny) {
            memset(t.out[0].data, 0, ny * es);
            op_ctx ctx = {.pool = pool};
            const op_tensor *ins[3] = {&t.in[0], &t.in[1], &t.in[2]};
            op_tensor *outs[1] = {&t.out[0]};
            assert_int_equal(op_get(IR_OP_PAD)->run(optest_node(&t), ins, 3, outs, 1, &ctx),
                             ANVIL_OK);
            assert_memory_equal(t.out[0].data, want, ny * es);
        }
        optest_end(&t);
        free(x);
        free(want);
    }
    core_pool_free(pool);
}

/* ---- inference and errors ---------------------------------------------------------------------
 */

static void test_pad_infer(void **state) {
    (void)state;
    float x[4] = {0};
    int64_t pads[4] = {0, 1, 0, 2};
    optest t;
    optest_begin_opset(&t, IR_OP_PAD, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, pads, false);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in[2], out[1];
    memset(in, 0, sizeof in);
    in[0].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&in[0].shape, 2, (int64_t[]){IR_DIM_UNKNOWN, 5});
    in[0].shape.sym[0] = 1;
    in[1].dtype = ANVIL_DTYPE_INT64;
    ir_shape_set(&in[1].shape, 1, (int64_t[]){4});
    /* pads unknown: the rank is all that can be known */
    assert_int_equal(op_get(IR_OP_PAD)->infer(t.g, optest_node(&t), in, 2, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 2);
    assert_int_equal(out[0].shape.d[1], IR_DIM_UNKNOWN);
    /* pads known: an unpadded symbolic dim keeps its symbol */
    in[1].value = pads;
    assert_int_equal(op_get(IR_OP_PAD)->infer(t.g, optest_node(&t), in, 2, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.sym[0], 1);
    assert_int_equal(out[0].shape.d[1], 8);
    optest_end(&t);

    /* the pads changing between planning and running is caught, not overrun */
    int64_t p2[2] = {1, 1};
    optest_begin_opset(&t, IR_OP_PAD, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, p2, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    p2[1] = 5;
    const op_tensor *ins[2] = {&t.in[0], &t.in[1]};
    op_tensor *outs[1] = {&t.out[0]};
    assert_int_equal(op_get(IR_OP_PAD)->run(optest_node(&t), ins, 2, outs, 1, NULL),
                     ANVIL_ERR_RUNTIME);
    assert_non_null(strstr(anvil_last_error(), "changed after planning"));
    optest_end(&t);
}

static void test_pad_errors(void **state) {
    (void)state;
    float x[16] = {0};
    optest t;
    struct {
        int opset;
        const char *mode;
        int64_t pads[4];
        int n_pads;
        anvil_status want;
        const char *msg;
    } bad[] = {
        {18, "wrap", {1, 1, 1, 1}, 4, ANVIL_ERR_INVALID_MODEL, "(or wrap from opset 19)"},
        {19, "mirror", {1, 1, 1, 1}, 4, ANVIL_ERR_INVALID_MODEL, "'mode' is 'mirror'"},
        {19, "constant", {1, 1, 1, 0}, 3, ANVIL_ERR_SHAPE, "pads has 3 values; expected 4"},
        {19, "constant", {-2, 0, -3, 0}, 4, ANVIL_ERR_SHAPE, "remove more than that"},
        {19, "reflect", {0, -3, 0, 1}, 4, ANVIL_ERR_SHAPE, "nothing to reflect"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        optest_begin_opset(&t, IR_OP_PAD, 2, 1, 1, bad[i].opset);
        optest_attr_string(&t, 0, "mode", bad[i].mode);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 3}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){bad[i].n_pads}, bad[i].pads, true);
        expect_status(&t, bad[i].want, bad[i].msg);
        optest_end(&t);
    }
    /* axes: duplicate, out of range, and at an opset without them */
    const int64_t dup[2] = {1, -1}, far[1] = {2}, p4[4] = {1, 1, 1, 1}, p2[2] = {1, 1};
    for (int k = 0; k < 3; k++) {
        optest_begin_opset(&t, IR_OP_PAD, 4, 1, 0, k == 2 ? 13 : 18);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 3}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){k == 0 ? 4 : 2}, k == 0 ? p4 : p2,
                     true);
        optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){k == 0 ? 2 : 1}, k == 0 ? dup : far,
                     true);
        expect_status(&t, k == 2 ? ANVIL_ERR_INVALID_MODEL : ANVIL_ERR_SHAPE,
                      k == 0   ? "appears twice"
                      : k == 1 ? "out of range"
                               : "needs opset >= 18");
        optest_end(&t);
    }
    /* constant_value of another dtype / not a scalar */
    double dv[2] = {1, 2};
    for (int k = 0; k < 2; k++) {
        optest_begin_opset(&t, IR_OP_PAD, 3, 1, 0, 13);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, p2, true);
        optest_input(&t, 2, k == 0 ? ANVIL_DTYPE_FLOAT64 : ANVIL_DTYPE_FLOAT32, 1,
                     (int64_t[]){k == 0 ? 1 : 2}, dv, false);
        expect_status(&t, ANVIL_ERR_SHAPE,
                      k == 0 ? "constant_value is DOUBLE" : "must be a scalar");
        optest_end(&t);
    }
    /* the input form needs its pads; the attribute form its attribute */
    optest_begin_opset(&t, IR_OP_PAD, 1, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "input 'pads' is required from opset 11");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_PAD, 1, 1, 0, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'pads' is missing");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_PAD, 2, 1, 1, 2);
    optest_attr_ints(&t, 0, "pads", p2, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, p2, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "before opset 11");
    optest_end(&t);
    /* pads of the wrong dtype */
    optest_begin_opset(&t, IR_OP_PAD, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "must be INT64");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_modes_1d),
        cmocka_unit_test(test_pad_modes_2d),
        cmocka_unit_test(test_pad_axes_and_old_opsets),
        cmocka_unit_test(test_pad_random),
        cmocka_unit_test(test_pad_infer),
        cmocka_unit_test(test_pad_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
