/* Logic, comparison, bitwise, selection and CastLike reference kernels: comparisons over several
 * dtypes with broadcasting and NaN (checked against C's own operators here), And/Or/Xor/Not truth
 * tables, the bitwise ops and BitShift (including shifts by the type's width or more), IsNaN/IsInf
 * with their detect flags, Where with three-way broadcasting over several element sizes, CastLike's
 * conversions, and the errors bad models must give. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static void begin2(optest *t, ir_op op, int opset, anvil_dtype dt, int ra, const int64_t *da,
                   const void *a, int rb, const int64_t *db, const void *b) {
    optest_begin_opset(t, op, 2, 1, 0, opset);
    optest_input(t, 0, dt, ra, da, a, false);
    optest_input(t, 1, dt, rb, db, b, false);
}

/* ---- comparisons --------------------------------------------------------------------------- */

static bool cmp_ref(ir_op op, double u, double v) {
    switch (op) {
    case IR_OP_EQUAL:
        return u == v;
    case IR_OP_GREATER:
        return u > v;
    case IR_OP_GREATEROREQUAL:
        return u >= v;
    case IR_OP_LESS:
        return u < v;
    default:
        return u <= v;
    }
}

static void test_comparisons(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_EQUAL, IR_OP_GREATER, IR_OP_GREATEROREQUAL, IR_OP_LESS,
                                IR_OP_LESSOREQUAL};
    /* a: [3,4], b: [4] */
    float af[12] = {1, 2, 3, NAN, -1, 0, -0.0f, 5, INFINITY, 2, 2, 3};
    float bf[4] = {2, 0, 3, NAN};
    int64_t ai[12], bi[4] = {5, -3, 0, INT64_MIN};
    uint16_t ah[12], bh[4];
    uint32_t au[12], bu[4] = {0, 7, UINT32_MAX, 3};
    for (int i = 0; i < 12; i++) {
        ai[i] = (i * 37) % 11 - 5;
        ah[i] = core_f32_to_f16(af[i]);
        au[i] = i == 3 ? UINT32_MAX : (uint32_t)i;
    }
    for (int i = 0; i < 4; i++) bh[i] = core_f32_to_f16(bf[i]);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        for (int d = 0; d < 4; d++) {
            static const anvil_dtype dts[4] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_INT64,
                                               ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_UINT32};
            const void *a = d == 0 ? (void *)af : d == 1 ? (void *)ai : d == 2 ? (void *)ah : au;
            const void *b = d == 0 ? (void *)bf : d == 1 ? (void *)bi : d == 2 ? (void *)bh : bu;
            optest t;
            begin2(&t, ops[k], 17, dts[d], 2, (int64_t[]){3, 4}, a, 1, (int64_t[]){4}, b);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_BOOL);
            const uint8_t *y = t.out[0].data;
            for (int i = 0; i < 12; i++) {
                bool want;
                if (d == 0)
                    want = cmp_ref(ops[k], af[i], bf[i % 4]);
                else if (d == 2)
                    want = cmp_ref(ops[k], af[i], bf[i % 4]); /* exact in f16 */
                else if (d == 1)
                    want = ops[k] == IR_OP_EQUAL            ? ai[i] == bi[i % 4]
                           : ops[k] == IR_OP_GREATER        ? ai[i] > bi[i % 4]
                           : ops[k] == IR_OP_GREATEROREQUAL ? ai[i] >= bi[i % 4]
                           : ops[k] == IR_OP_LESS           ? ai[i] < bi[i % 4]
                                                            : ai[i] <= bi[i % 4];
                else
                    want = ops[k] == IR_OP_EQUAL            ? au[i] == bu[i % 4]
                           : ops[k] == IR_OP_GREATER        ? au[i] > bu[i % 4]
                           : ops[k] == IR_OP_GREATEROREQUAL ? au[i] >= bu[i % 4]
                           : ops[k] == IR_OP_LESS           ? au[i] < bu[i % 4]
                                                            : au[i] <= bu[i % 4];
                if (y[i] != want) {
                    fprintf(stderr, "%s dtype %d at %d: got %d\n", ir_op_name(ops[k]), d, i, y[i]);
                    fail();
                }
            }
            optest_end(&t);
        }
    }
    /* Equal on BOOL */
    uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1};
    optest t;
    begin2(&t, IR_OP_EQUAL, 19, ANVIL_DTYPE_BOOL, 1, (int64_t[]){4}, p, 1, (int64_t[]){4}, q);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 0, 0, 1}), 4);
    optest_end(&t);
    /* Greater on BOOL is not defined */
    begin2(&t, IR_OP_GREATER, 17, ANVIL_DTYPE_BOOL, 1, (int64_t[]){4}, p, 1, (int64_t[]){4}, q);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "BOOL, which Greater does not support");
    optest_end(&t);
    /* GreaterOrEqual needs opset 12 */
    begin2(&t, IR_OP_GREATEROREQUAL, 11, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, bf, 1,
           (int64_t[]){4}, bf);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 12");
    optest_end(&t);
    /* mismatched dtypes, shapes that do not broadcast */
    optest_begin(&t, IR_OP_LESS, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, bf, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);
    begin2(&t, IR_OP_LESS, 17, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, af, 1, (int64_t[]){3},
           bf);
    expect_status(&t, ANVIL_ERR_SHAPE, "test_node");
    optest_end(&t);
}

/* ---- boolean logic ------------------------------------------------------------------------- */

static void test_bool_logic(void **state) {
    (void)state;
    /* a: [2,2] rows {0,1},{1,1}; b: [2,1] {0},{1} */
    uint8_t a[4] = {0, 1, 1, 1}, b[2] = {0, 1};
    static const ir_op ops[] = {IR_OP_AND, IR_OP_OR, IR_OP_XOR};
    for (int k = 0; k < 3; k++) {
        optest t;
        begin2(&t, ops[k], 7, ANVIL_DTYPE_BOOL, 2, (int64_t[]){2, 2}, a, 2, (int64_t[]){2, 1}, b);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const uint8_t *y = t.out[0].data;
        for (int i = 0; i < 4; i++) {
            bool u = a[i], v = b[i / 2];
            bool want = k == 0 ? (u && v) : k == 1 ? (u || v) : (u != v);
            assert_int_equal(y[i], want);
        }
        optest_end(&t);
    }
    optest t;
    optest_begin(&t, IR_OP_NOT, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 2, (int64_t[]){2, 2}, a, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 0, 0, 0}), 4);
    optest_end(&t);

    int32_t i[2] = {1, 0};
    optest_begin(&t, IR_OP_NOT, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, i, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which Not does not support");
    optest_end(&t);
    begin2(&t, IR_OP_AND, 17, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, i, 1, (int64_t[]){2}, i);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "And");
    optest_end(&t);
}

/* ---- bitwise ------------------------------------------------------------------------------- */

static void test_bitwise(void **state) {
    (void)state;
    int8_t a[4] = {-128, -1, 0x55, 3}, b[4] = {0x0f, 0x70, -86, -4};
    static const ir_op ops[] = {IR_OP_BITWISEAND, IR_OP_BITWISEOR, IR_OP_BITWISEXOR};
    for (int k = 0; k < 3; k++) {
        optest t;
        begin2(&t, ops[k], 18, ANVIL_DTYPE_INT8, 1, (int64_t[]){4}, a, 1, (int64_t[]){4}, b);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const int8_t *y = t.out[0].data;
        for (int i = 0; i < 4; i++)
            assert_int_equal(y[i], (int8_t)(k == 0   ? (a[i] & b[i])
                                            : k == 1 ? (a[i] | b[i])
                                                     : (a[i] ^ b[i])));
        optest_end(&t);
    }
    uint64_t u[3] = {0, UINT64_MAX, 0x0123456789abcdefull};
    optest t;
    optest_begin_opset(&t, IR_OP_BITWISENOT, 1, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_UINT64, 1, (int64_t[]){3}, u, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint64_t[]){UINT64_MAX, 0, ~0x0123456789abcdefull}),
                        sizeof u);
    optest_end(&t);
    uint8_t u8[2] = {0, 0xa5};
    optest_begin_opset(&t, IR_OP_BITWISENOT, 1, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 1, (int64_t[]){2}, u8, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){0xff, 0x5a}), 2);
    optest_end(&t);

    float f[2] = {1, 2};
    begin2(&t, IR_OP_BITWISEAND, 18, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, f, 1, (int64_t[]){2},
           f);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "FLOAT");
    optest_end(&t);
    begin2(&t, IR_OP_BITWISEOR, 17, ANVIL_DTYPE_INT8, 1, (int64_t[]){4}, a, 1, (int64_t[]){4}, b);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 18");
    optest_end(&t);
}

static void begin_shift(optest *t, const char *dir, anvil_dtype dt, int n, const void *a,
                        const void *b) {
    optest_begin(t, IR_OP_BITSHIFT, 2, 1, dir ? 1 : 0);
    if (dir) optest_attr_string(t, 0, "direction", dir);
    optest_input(t, 0, dt, 1, (int64_t[]){n}, a, false);
    optest_input(t, 1, dt, 1, (int64_t[]){n}, b, false);
}

static void test_bitshift(void **state) {
    (void)state;
    uint8_t a[5] = {1, 0x81, 0xff, 3, 7}, s[5] = {3, 1, 8, 0, 200};
    optest t;
    begin_shift(&t, "LEFT", ANVIL_DTYPE_UINT8, 5, a, s);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){8, 0x02, 0, 3, 0}), 5);
    optest_end(&t);
    begin_shift(&t, "RIGHT", ANVIL_DTYPE_UINT8, 5, a, s);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){0, 0x40, 0, 3, 0}), 5);
    optest_end(&t);
    uint64_t a64[3] = {1, UINT64_MAX, 5}, s64[3] = {63, 64, 1};
    begin_shift(&t, "LEFT", ANVIL_DTYPE_UINT64, 3, a64, s64);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint64_t[]){1ull << 63, 0, 10}), sizeof a64);
    optest_end(&t);

    begin_shift(&t, NULL, ANVIL_DTYPE_UINT8, 5, a, s);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'direction' is missing");
    optest_end(&t);
    begin_shift(&t, "left", ANVIL_DTYPE_UINT8, 5, a, s);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "\"LEFT\" or \"RIGHT\"");
    optest_end(&t);
    int8_t i8[5] = {0};
    begin_shift(&t, "LEFT", ANVIL_DTYPE_INT8, 5, i8, i8);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT8, which BitShift does not support");
    optest_end(&t);
}

/* ---- IsNaN, IsInf -------------------------------------------------------------------------- */

static void test_isnan_isinf(void **state) {
    (void)state;
    float x[5] = {NAN, INFINITY, -INFINITY, 0, -3e38f};
    optest t;
    optest_begin(&t, IR_OP_ISNAN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_BOOL);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 0, 0, 0, 0}), 5);
    optest_end(&t);

    static const uint8_t want[4][5] = {
        {0, 1, 1, 0, 0}, {0, 1, 0, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, 0, 0, 0}};
    for (int flags = 0; flags < 4; flags++) {
        /* flags 0: defaults; 1: detect_negative=0; 2: detect_positive=0; 3: both 0 */
        int na = (flags & 1) + (flags >> 1);
        optest_begin(&t, IR_OP_ISINF, 1, 1, na);
        int k = 0;
        if (flags & 1) optest_attr_int(&t, k++, "detect_negative", 0);
        if (flags & 2) optest_attr_int(&t, k++, "detect_positive", 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_memory_equal(t.out[0].data, want[flags], 5);
        optest_end(&t);
    }
    uint16_t h[2] = {0x7c00, 0x7e00}; /* f16 +inf, NaN */
    optest_begin(&t, IR_OP_ISINF, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, h, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 0}), 2);
    optest_end(&t);

    optest_begin(&t, IR_OP_ISINF, 1, 1, 1);
    optest_attr_int(&t, 0, "detect_negative", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "detect_negative");
    optest_end(&t);
    int32_t i[2] = {0};
    optest_begin(&t, IR_OP_ISNAN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, i, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which IsNaN does not support");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ISINF, 1, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 10");
    optest_end(&t);
}

/* ---- Where --------------------------------------------------------------------------------- */

static void test_where(void **state) {
    (void)state;
    /* condition [2,1,3], X [4,1], Y [1]: output [2,4,3] */
    uint8_t c[6] = {1, 0, 1, 0, 0, 1};
    int64_t x[4] = {10, 20, 30, 40}, y[1] = {-1};
    optest t;
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 3, (int64_t[]){2, 1, 3}, c, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){4, 1}, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, y, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 3);
    assert_int_equal(t.out_info[0].shape.d[1], 4);
    const int64_t *o = t.out[0].data;
    for (int i = 0; i < 24; i++) {
        int b = i / 12, r = (i / 3) % 4, k = i % 3;
        assert_int_equal(o[i], c[b * 3 + k] ? x[r] : y[0]);
    }
    optest_end(&t);

    /* BOOL and FLOAT16 payloads (element sizes 1 and 2), same shapes */
    uint8_t cb[3] = {0, 1, 0}, xb[3] = {1, 1, 1}, yb[3] = {0, 0, 1};
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, cb, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, xb, false);
    optest_input(&t, 2, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, yb, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){0, 1, 1}), 3);
    optest_end(&t);
    uint16_t xh[3] = {1, 2, 3}, yh[3] = {4, 5, 6};
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, cb, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){3}, xh, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){3}, yh, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint16_t[]){4, 2, 6}), sizeof xh);
    optest_end(&t);

    /* zero-size output */
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 2, (int64_t[]){0, 3}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){3}, xh, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){1}, yh, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.d[0], 0);
    optest_end(&t);

    /* errors */
    float f[3] = {0};
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "must be BOOL");
    optest_end(&t);
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, cb, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){3}, yh, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "they must match");
    optest_end(&t);
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, cb, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, f, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "test_node");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_WHERE, 3, 1, 0, 8);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, cb, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, f, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 9");
    optest_end(&t);
}

/* ---- CastLike ------------------------------------------------------------------------------ */

static void test_castlike(void **state) {
    (void)state;
    float x[5] = {1.7f, -2.9f, 0, 65504, NAN};
    int32_t like_i[1] = {0};
    optest t;
    optest_begin(&t, IR_OP_CASTLIKE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, like_i, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_INT32);
    assert_int_equal(t.out_info[0].shape.d[0], 5);
    assert_memory_equal(t.out[0].data, ((int32_t[]){1, -2, 0, 65504, INT32_MIN}), 5 * 4);
    optest_end(&t);

    uint16_t like_h[2] = {0};
    optest_begin_opset(&t, IR_OP_CASTLIKE, 2, 1, 0, 25);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, like_h, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const uint16_t *h = t.out[0].data;
    for (int i = 0; i < 4; i++) assert_true(h[i] == core_f32_to_f16(x[i]));
    assert_true(isnan(core_f16_to_f32(h[4])));
    optest_end(&t);

    uint8_t like_b[1] = {0};
    optest_begin(&t, IR_OP_CASTLIKE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, (int64_t[]){1}, like_b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 1, 0, 1, 1}), 5);
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_CASTLIKE, 2, 1, 1, 25);
    optest_attr_string(&t, 0, "round_mode", "sideways");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, (int64_t[]){1}, like_b, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "round_mode");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CASTLIKE, 2, 1, 1, 19);
    optest_attr_int(&t, 0, "saturate", 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, (int64_t[]){1}, like_b, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "saturate");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CASTLIKE, 2, 1, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_BOOL, 1, (int64_t[]){1}, like_b, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 15");
    optest_end(&t);
}

/* ---- threaded runs ------------------------------------------------------------------------- */

/* Large enough to be split across threads: chunks start in the middle of rows, so Where's walker
 * must rebuild its odometer from an arbitrary start. The threaded result must equal the serial one,
 * which the tests above check against C. */
static void test_threads(void **state) {
    (void)state;
    enum { R = 7, C = 14293 };
    uint8_t *c = malloc(R * C);
    double *x = malloc(C * sizeof *x), *y = malloc(R * sizeof *y);
    float *f = malloc((size_t)R * C * sizeof *f);
    for (int i = 0; i < R * C; i++) {
        c[i] = (uint8_t)((i * 2654435761u) >> 31);
        f[i] = i % 5 == 0 ? NAN : (float)i;
    }
    for (int i = 0; i < C; i++) x[i] = i;
    for (int i = 0; i < R; i++) y[i] = -1.0 - i;
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};

    optest t;
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 2, (int64_t[]){R, C}, c, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){C}, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT64, 2, (int64_t[]){R, 1}, y, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const double *serial = t.out[0].data;
    for (int i = 0; i < R * C; i++) assert_true(serial[i] == (c[i] ? x[i % C] : y[i / C]));
    double *par = calloc((size_t)R * C, sizeof *par);
    op_tensor o = t.out[0];
    o.data = par;
    const op_tensor *ins[3] = {&t.in[0], &t.in[1], &t.in[2]};
    op_tensor *outs[1] = {&o};
    assert_int_equal(op_get(IR_OP_WHERE)->run(optest_node(&t), ins, 3, outs, 1, &ctx), ANVIL_OK);
    assert_memory_equal(par, serial, (size_t)R * C * sizeof *par);
    free(par);
    optest_end(&t);

    optest_begin(&t, IR_OP_ISNAN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){R * C}, f, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    uint8_t *pb = calloc((size_t)R * C, 1);
    o = t.out[0];
    o.data = pb;
    ins[0] = &t.in[0];
    assert_int_equal(op_get(IR_OP_ISNAN)->run(optest_node(&t), ins, 1, outs, 1, &ctx), ANVIL_OK);
    for (int i = 0; i < R * C; i++) assert_int_equal(pb[i], i % 5 == 0);
    assert_memory_equal(pb, t.out[0].data, (size_t)R * C);
    free(pb);
    optest_end(&t);

    core_pool_free(pool);
    free(c);
    free(x);
    free(y);
    free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comparisons), cmocka_unit_test(test_bool_logic),
        cmocka_unit_test(test_bitwise),     cmocka_unit_test(test_bitshift),
        cmocka_unit_test(test_isnan_isinf), cmocka_unit_test(test_where),
        cmocka_unit_test(test_castlike),    cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
