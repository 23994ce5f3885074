/* Constant and ConstantOfShape: every way ONNX can state the value, unaligned attribute data,
 * every element size, zero-size and scalar outputs, unknown shape inputs, and the errors of bad
 * models (ambiguous or unsupported attributes, negative and oversized shapes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static void assert_dims(const op_tinfo *o, int rank, const int64_t *d) {
    assert_int_equal(o->shape.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(o->shape.d[i], d[i]);
}

/* ---- Constant ----------------------------------------------------------------------------- */

static void test_constant_tensor_unaligned(void **state) {
    (void)state;
    /* the model file gives no alignment: put the floats one byte off */
    float vals[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -7.0f};
    unsigned char raw[sizeof vals + 1];
    memcpy(raw + 1, vals, sizeof vals);
    optest t;
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_tensor(&t, 0, "value", ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, raw + 1);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT32);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 3});
    assert_memory_equal(t.out[0].data, vals, sizeof vals);
    optest_end(&t);
}

static void test_constant_dtypes(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {ANVIL_DTYPE_BOOL,    ANVIL_DTYPE_INT8,     ANVIL_DTYPE_UINT8,
                                      ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_INT16,
                                      ANVIL_DTYPE_INT32,   ANVIL_DTYPE_UINT32,   ANVIL_DTYPE_INT64,
                                      ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_UINT64};
    unsigned char raw[5 * 8];
    for (size_t i = 0; i < sizeof raw; i++) raw[i] = (unsigned char)((i * 53 + 1) % 2);
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        optest t;
        optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
        optest_attr_tensor(&t, 0, "value", dts[d], 1, (int64_t[]){5}, raw);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dtype, dts[d]);
        assert_dims(&t.out_info[0], 1, (int64_t[]){5});
        assert_memory_equal(t.out[0].data, raw, 5 * anvil_dtype_size(dts[d]));
        optest_end(&t);
    }
    /* scalar and zero-size tensors */
    double s = -0.125;
    optest t;
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_tensor(&t, 0, "value", ANVIL_DTYPE_FLOAT64, 0, NULL, &s);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(*(double *)t.out[0].data == -0.125);
    optest_end(&t);
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_tensor(&t, 0, "value", ANVIL_DTYPE_INT32, 2, (int64_t[]){0, 3}, NULL);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){0, 3});
    optest_end(&t);
}

static void test_constant_value_attrs(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_float(&t, 0, "value_float", 2.75f);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT32);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(*(float *)t.out[0].data == 2.75f);
    optest_end(&t);

    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_int(&t, 0, "value_int", -9000000000LL);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_INT64);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_int_equal(*(int64_t *)t.out[0].data, -9000000000LL);
    optest_end(&t);

    float fl[3] = {1, -2, 3.5f};
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_floats(&t, 0, "value_floats", fl, 3);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT32);
    assert_dims(&t.out_info[0], 1, (int64_t[]){3});
    assert_memory_equal(t.out[0].data, fl, sizeof fl);
    optest_end(&t);

    int64_t iv[4] = {4, 0, -1, INT64_MAX};
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_ints(&t, 0, "value_ints", iv, 4);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_INT64);
    assert_dims(&t.out_info[0], 1, (int64_t[]){4});
    assert_memory_equal(t.out[0].data, iv, sizeof iv);
    optest_end(&t);

    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_ints(&t, 0, "value_ints", iv, 0);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){0});
    optest_end(&t);
}

static void test_constant_errors(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 0);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "exactly one");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 2);
    optest_attr_float(&t, 0, "value_float", 1.0f);
    optest_attr_int(&t, 1, "value_int", 1);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "has 2 of");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_string(&t, 0, "value_string", "hello");
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "value_string");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr(&t, 0, "sparse_value", IR_ATTR_UNDEFINED);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "sparse_value");
    optest_end(&t);

    /* a string tensor */
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    ir_attr *a = optest_attr(&t, 0, "value", IR_ATTR_TENSOR);
    a->t = core_arena_alloc(t.g->arena, sizeof *a->t);
    a->t->dtype = ANVIL_DTYPE_STRING;
    a->t->rank = 1;
    a->t->dims[0] = 2;
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "STRING");
    optest_end(&t);

    /* bytes that do not match dtype and dims */
    float v[4] = {0};
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_tensor(&t, 0, "value", ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, v);
    optest_node(&t)->attrs[0].t->bytes = 12;
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "12 bytes");
    optest_end(&t);

    /* value given with the wrong attribute type */
    optest_begin(&t, IR_OP_CONSTANT, 0, 1, 1);
    optest_attr_int(&t, 0, "value", 3);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "TENSOR");
    optest_end(&t);

    /* Constant takes no inputs */
    optest_begin(&t, IR_OP_CONSTANT, 1, 1, 1);
    optest_attr_int(&t, 0, "value_int", 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, v, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "inputs");
    optest_end(&t);
}

/* ---- ConstantOfShape ---------------------------------------------------------------------- */

static void test_cos_default(void **state) {
    (void)state;
    int64_t shape[2] = {2, 3};
    optest t;
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, shape, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT32);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 3});
    float zero[6] = {0};
    /* optest zero-fills outputs: poison first so the kernel must write the zeros */
    memset(t.out[0].data, 0xff, sizeof zero);
    const op_tensor *ins[1] = {&t.in[0]};
    op_tensor *outs[1] = {&t.out[0]};
    assert_int_equal(op_get(IR_OP_CONSTANTOFSHAPE)->run(optest_node(&t), ins, 1, outs, 1, NULL),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, zero, sizeof zero);
    optest_end(&t);
}

static void test_cos_values(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {
        ANVIL_DTYPE_BOOL,     ANVIL_DTYPE_INT8,    ANVIL_DTYPE_FLOAT16,
        ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_INT32,   ANVIL_DTYPE_FLOAT32,
        ANVIL_DTYPE_INT64,    ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_UINT64};
    int64_t shape[3] = {4, 5, 7};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        size_t es = anvil_dtype_size(dts[d]);
        unsigned char raw[9];
        for (size_t i = 0; i < es; i++) raw[1 + i] = (unsigned char)(0x11 * (i + 1));
        if (dts[d] == ANVIL_DTYPE_BOOL) raw[1] = 1;
        optest t;
        optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 1);
        /* rank-1 [1] value, one byte off alignment, as exporters write it */
        optest_attr_tensor(&t, 0, "value", dts[d], 1, (int64_t[]){1}, raw + 1);
        optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, shape, true);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dtype, dts[d]);
        assert_dims(&t.out_info[0], 3, shape);
        for (size_t i = 0; i < 140; i++)
            assert_memory_equal((unsigned char *)t.out[0].data + i * es, raw + 1, es);
        optest_end(&t);
    }
}

static void test_cos_edge_shapes(void **state) {
    (void)state;
    int32_t seven = 7;
    optest t;
    /* empty shape: a scalar */
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 1);
    optest_attr_tensor(&t, 0, "value", ANVIL_DTYPE_INT32, 0, NULL, &seven);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){0}, &seven, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_int_equal(*(int32_t *)t.out[0].data, 7);
    optest_end(&t);
    /* a zero dim: empty output */
    int64_t zs[2] = {3, 0};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, zs, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){3, 0});
    optest_end(&t);
    /* shape computed at run time: rank from its length */
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, NULL, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 4, (int64_t[]){-1, -1, -1, -1});
    op_tinfo in[1], out[1];
    memset(in, 0, sizeof in);
    in[0].dtype = ANVIL_DTYPE_INT64;
    in[0].shape.rank = 1;
    in[0].shape.d[0] = -1;
    in[0].shape.sym[0] = -1;
    memset(out, 0, sizeof out);
    assert_int_equal(op_get(IR_OP_CONSTANTOFSHAPE)->infer(t.g, optest_node(&t), in, 1, out, 1),
                     ANVIL_OK);
    assert_int_equal(out[0].shape.rank, -1);
    optest_end(&t);
}

static void test_cos_errors(void **state) {
    (void)state;
    optest t;
    int64_t neg[2] = {2, -1};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, neg, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "-1 at position 1");
    optest_end(&t);

    int64_t huge[3] = {1 << 20, 1 << 20, 1 << 10};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, huge, true);
    expect_status(&t, ANVIL_ERR_LIMIT, "[1048576,1048576,1024]");
    optest_end(&t);

    int64_t overflow[2] = {INT64_MAX, 4};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, overflow, true);
    expect_status(&t, ANVIL_ERR_LIMIT, "limit");
    optest_end(&t);

    int32_t s32[2] = {2, 3};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, s32, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "INT64");
    optest_end(&t);

    int64_t s2d[4] = {1, 2, 3, 4};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, s2d, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "1-D");
    optest_end(&t);

    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){9}, nine, true);
    expect_status(&t, ANVIL_ERR_LIMIT, "rank 9");
    optest_end(&t);

    float two[2] = {1, 2};
    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 1);
    optest_attr_tensor(&t, 0, "value", ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, two);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, s2d, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "exactly one element");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONSTANTOFSHAPE, 1, 1, 1);
    ir_attr *a = optest_attr(&t, 0, "value", IR_ATTR_TENSOR);
    a->t = core_arena_alloc(t.g->arena, sizeof *a->t);
    a->t->dtype = ANVIL_DTYPE_COMPLEX128;
    a->t->rank = 1;
    a->t->dims[0] = 1;
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, s2d, true);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "COMPLEX128");
    optest_end(&t);
}

/* The registry must dispatch to this family's implementations. Naming them here also makes the
 * linker take their objects out of the static library (the registry only refers to them weakly). */
extern const op_impl op_impl_constant;
extern const op_impl op_impl_constantofshape;

static void test_dispatch(void **state) {
    (void)state;
    assert_ptr_equal(op_get(IR_OP_CONSTANT), &op_impl_constant);
    assert_ptr_equal(op_get(IR_OP_CONSTANTOFSHAPE), &op_impl_constantofshape);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),        cmocka_unit_test(test_constant_tensor_unaligned),
        cmocka_unit_test(test_constant_dtypes), cmocka_unit_test(test_constant_value_attrs),
        cmocka_unit_test(test_constant_errors), cmocka_unit_test(test_cos_default),
        cmocka_unit_test(test_cos_values),      cmocka_unit_test(test_cos_edge_shapes),
        cmocka_unit_test(test_cos_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
