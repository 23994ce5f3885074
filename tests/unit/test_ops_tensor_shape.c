/* Reshape, Flatten, Squeeze, Unsqueeze and Shape: shape inference (static, unknown, symbolic,
 * value-dependent), the copy kernels, opset variants and the errors of bad models. Expected
 * shapes are worked out by hand from the ONNX operator docs. */
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

static anvil_status infer_with(optest *t, const op_tinfo *in, op_tinfo *out) {
    anvil_status s = op_check_graph(t->g);
    if (s != ANVIL_OK) return s;
    for (int i = 0; i < t->n_out; i++) {
        memset(&out[i], 0, sizeof out[i]);
        ir_shape_unknown(&out[i].shape);
    }
    return op_get(optest_node(t)->op)->infer(t->g, optest_node(t), in, t->n_in, out, t->n_out);
}

static void set_shape(op_tinfo *ti, anvil_dtype dt, int rank, const int64_t *d,
                      const int32_t *sym) {
    memset(ti, 0, sizeof *ti);
    ti->dtype = dt;
    ti->shape.rank = rank;
    for (int i = 0; i < rank; i++) {
        ti->shape.d[i] = d[i];
        ti->shape.sym[i] = sym ? sym[i] : -1;
    }
}

static void assert_dims(const op_tinfo *o, int rank, const int64_t *d) {
    assert_int_equal(o->shape.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(o->shape.d[i], d[i]);
}

static float seq[720];

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < 720; i++) seq[i] = (float)i * 0.5f - 3.0f;
    return 0;
}

/* ---- Reshape ------------------------------------------------------------------------------ */

/* Runs Reshape of x (dims xd, rank r) to the shape list `shape` (k entries). */
static anvil_status reshape(optest *t, int opset, int allowzero, anvil_dtype dt, int r,
                            const int64_t *xd, const void *x, const int64_t *shape, size_t k) {
    optest_begin_opset(t, IR_OP_RESHAPE, 2, 1, allowzero >= 0 ? 1 : 0, opset);
    if (allowzero >= 0) optest_attr_int(t, 0, "allowzero", allowzero);
    optest_input(t, 0, dt, r, xd, x, false);
    optest_input(t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){(int64_t)k}, shape, true);
    return optest_run(t);
}

static void test_reshape_shapes(void **state) {
    (void)state;
    optest t;
    /* the ONNX backend test cases on a [2,3,4] input */
    static const struct {
        size_t k;
        int64_t shape[4];
        int rank;
        int64_t want[4];
    } cases[] = {
        {2, {4, 6}, 2, {4, 6}},
        {3, {2, 3, 4}, 3, {2, 3, 4}},
        {3, {2, 0, 4}, 3, {2, 3, 4}},
        {2, {-1, 2}, 2, {12, 2}},
        {2, {0, -1}, 2, {2, 12}},
        {4, {2, 3, 2, 2}, 4, {2, 3, 2, 2}},
        {3, {-1, 4, 3}, 3, {2, 4, 3}},
        {3, {0, 4, 3}, 3, {2, 4, 3}},
        {1, {24}, 1, {24}},
        {4, {2, 0, 1, -1}, 4, {2, 3, 1, 4}},
        {3, {6, -1, 2}, 3, {6, 2, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        assert_int_equal(reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, seq,
                                 cases[c].shape, cases[c].k),
                         ANVIL_OK);
        assert_dims(&t.out_info[0], cases[c].rank, cases[c].want);
        assert_memory_equal(t.out[0].data, seq, 24 * sizeof(float));
        optest_end(&t);
    }
    /* to a scalar and back */
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, seq, (int64_t[]){0}, 0),
        ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(*(float *)t.out[0].data == seq[0]);
    optest_end(&t);
    /* a copied 0 dim cancels: [0,3] -> [0,-1] is [0,3] */
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 3}, NULL, (int64_t[]){0, -1}, 2),
        ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){0, 3});
    optest_end(&t);
}

static void test_reshape_allowzero(void **state) {
    (void)state;
    optest t;
    /* allowzero=1: 0 is a real zero; [0,3,4] -> [3,4,0] */
    assert_int_equal(reshape(&t, 14, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){0, 3, 4}, NULL,
                             (int64_t[]){3, 4, 0}, 3),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){3, 4, 0});
    optest_end(&t);
    /* allowzero=0 copies instead: [0,3,4] -> [3,4,0] asks for [3,4,4] (48 != 0 elements) */
    assert_int_equal(reshape(&t, 14, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){0, 3, 4}, NULL,
                             (int64_t[]){3, 4, 0}, 3),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "element counts differ"));
    optest_end(&t);
    /* 0 and -1 together with allowzero=1 is invalid */
    assert_int_equal(
        reshape(&t, 14, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){0, -1}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "both 0 and -1"));
    optest_end(&t);
    /* allowzero does not exist before opset 14 */
    assert_int_equal(
        reshape(&t, 13, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){6}, 1),
        ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "opset 14"));
    optest_end(&t);
    assert_int_equal(
        reshape(&t, 14, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){6}, 1),
        ANVIL_ERR_INVALID_MODEL);
    optest_end(&t);
}

static void test_reshape_dtypes(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {ANVIL_DTYPE_BOOL,     ANVIL_DTYPE_INT8,  ANVIL_DTYPE_FLOAT16,
                                      ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_INT32, ANVIL_DTYPE_FLOAT64,
                                      ANVIL_DTYPE_UINT64};
    unsigned char bytes[48 * 8];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 37 + 11) & 1;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        optest t;
        assert_int_equal(
            reshape(&t, 17, -1, dts[d], 2, (int64_t[]){6, 8}, bytes, (int64_t[]){4, -1, 3}, 3),
            ANVIL_OK);
        assert_int_equal(t.out[0].dtype, dts[d]);
        assert_dims(&t.out_info[0], 3, (int64_t[]){4, 4, 3});
        assert_memory_equal(t.out[0].data, bytes, 48 * anvil_dtype_size(dts[d]));
        optest_end(&t);
    }
}

static void test_reshape_unknown(void **state) {
    (void)state;
    optest t;
    /* shape value unknown, length known: rank only */
    optest_begin(&t, IR_OP_RESHAPE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, NULL, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){-1, -1, -1});
    optest_end(&t);
    /* symbolic batch: [N,3,4] with [0,-1] is [N,12] (the copied N cancels) */
    int64_t sh[2] = {0, -1};
    optest_begin(&t, IR_OP_RESHAPE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3, 4}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, sh, true);
    op_tinfo in[2], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){-1, 3, 4}, (int32_t[]){7, -1, -1});
    set_shape(&in[1], ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, NULL);
    in[1].value = sh;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){-1, 12});
    assert_int_equal(out[0].shape.sym[0], 7);
    /* [N,12] with [-1,3,4]: the -1 hides N, so unknown */
    sh[0] = -1;
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){-1, 12}, (int32_t[]){7, -1});
    int64_t sh3[3] = {-1, 3, 4};
    in[1].value = sh3;
    set_shape(&in[1], ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, NULL);
    in[1].value = sh3;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 3, (int64_t[]){-1, 3, 4});
    /* unknown input rank: explicit dims still known */
    ir_shape_unknown(&in[0].shape);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 3, (int64_t[]){-1, 3, 4});
    optest_end(&t);
}

static void test_reshape_errors(void **state) {
    (void)state;
    optest t;
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){4, 2}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "[2,3] to [4,2]"));
    optest_end(&t);
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){-1, -1}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "at most one"));
    optest_end(&t);
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){-1, 4}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "cannot be inferred"));
    optest_end(&t);
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, (int64_t[]){-2, -3}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), ">= 0"));
    optest_end(&t);
    assert_int_equal(
        reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, seq, (int64_t[]){6, 0}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "only 1 dims"));
    optest_end(&t);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 6};
    assert_int_equal(reshape(&t, 13, -1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, seq, nine, 9),
                     ANVIL_ERR_LIMIT);
    optest_end(&t);
    /* shape must be INT64 */
    int32_t s32[1] = {6};
    optest_begin(&t, IR_OP_RESHAPE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, s32, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "INT64");
    optest_end(&t);
    /* missing shape input from opset 5 */
    optest_begin(&t, IR_OP_RESHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "required from opset 5");
    optest_end(&t);
}

static void test_reshape_opset1(void **state) {
    (void)state;
    optest t;
    optest_begin_opset(&t, IR_OP_RESHAPE, 1, 1, 1, 1);
    optest_attr_ints(&t, 0, "shape", (int64_t[]){3, -1}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){3, 2});
    assert_memory_equal(t.out[0].data, seq, 6 * sizeof(float));
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_RESHAPE, 1, 1, 0, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, seq, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'shape' is required");
    optest_end(&t);
    /* an empty shape attribute (an importer may store no list at all): to a scalar */
    optest_begin_opset(&t, IR_OP_RESHAPE, 1, 1, 1, 1);
    optest_attr_ints(&t, 0, "shape", (int64_t[]){0}, 0);
    optest_node(&t)->attrs[0].ints = NULL;
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, seq, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(*(float *)t.out[0].data == seq[0]);
    optest_end(&t);
}

/* ---- Flatten ------------------------------------------------------------------------------ */

static void test_flatten(void **state) {
    (void)state;
    /* [2,3,4,5] with every axis in [-4, 4] */
    const int64_t xd[4] = {2, 3, 4, 5};
    for (int64_t axis = -4; axis <= 4; axis++) {
        int a = (int)(axis < 0 ? axis + 4 : axis);
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < 4; i++) *(i < a ? &outer : &inner) *= xd[i];
        optest t;
        optest_begin(&t, IR_OP_FLATTEN, 1, 1, 1);
        optest_attr_int(&t, 0, "axis", axis);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, seq, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_dims(&t.out_info[0], 2, (int64_t[]){outer, inner});
        assert_memory_equal(t.out[0].data, seq, 120 * sizeof(float));
        optest_end(&t);
    }
    optest t;
    /* a scalar flattens to [1,1] with axis 0; the default axis 1 is out of range for it */
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 1);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, seq, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){1, 1});
    optest_end(&t);
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 0, NULL, seq, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "[0, 0]");
    optest_end(&t);
    /* default axis 1 on [2,3,4]: [2,12] */
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, seq, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 12});
    optest_end(&t);
    /* symbolic: [N,3,4] axis 1 -> [N,12]; [N,0] axis 0 -> [1,0]; [2,N,3] axis 1 -> [2,?] */
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, NULL, false);
    op_tinfo in[1], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){-1, 3, 4}, (int32_t[]){2, -1, -1});
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){-1, 12});
    assert_int_equal(out[0].shape.sym[0], 2);
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, -1, 3}, (int32_t[]){-1, 2, -1});
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){2, -1});
    assert_int_equal(out[0].shape.sym[1], -1);
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, -1, 0}, NULL);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){2, 0});
    optest_end(&t);
}

static void test_flatten_errors(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 1);
    optest_attr_int(&t, 0, "axis", 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, seq, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "[-3, 3]");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_FLATTEN, 1, 1, 1, 9);
    optest_attr_int(&t, 0, "axis", -1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, seq, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 11");
    optest_end(&t);
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 1);
    optest_attr_float(&t, 0, "axis", 1.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, seq, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'axis'");
    optest_end(&t);
    optest_begin(&t, IR_OP_FLATTEN, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_COMPLEX64, 3, (int64_t[]){2, 3, 4}, seq, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "COMPLEX64");
    optest_end(&t);
}

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------------ */

/* axes: NULL for none; opset >= 13 passes them as a known INT64 input. */
static anvil_status squeeze_op(optest *t, ir_op op, int opset, int r, const int64_t *xd,
                               const int64_t *axes, size_t k) {
    bool as_input = opset >= 13;
    optest_begin_opset(t, op, as_input && axes ? 2 : 1, 1, !as_input && axes ? 1 : 0, opset);
    if (axes && !as_input) optest_attr_ints(t, 0, "axes", axes, k);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, r, xd, seq, false);
    if (axes && as_input)
        optest_input(t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){(int64_t)k}, axes, true);
    return optest_run(t);
}

static void test_squeeze(void **state) {
    (void)state;
    static const int opsets[] = {1, 11, 13, 21};
    for (size_t o = 0; o < 4; o++) {
        int opset = opsets[o];
        optest t;
        assert_int_equal(
            squeeze_op(&t, IR_OP_SQUEEZE, opset, 4, (int64_t[]){1, 3, 1, 5}, (int64_t[]){0}, 1),
            ANVIL_OK);
        assert_dims(&t.out_info[0], 3, (int64_t[]){3, 1, 5});
        assert_memory_equal(t.out[0].data, seq, 15 * sizeof(float));
        optest_end(&t);
        /* no axes: every size-1 dim goes */
        assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, opset, 4, (int64_t[]){1, 3, 1, 5}, NULL, 0),
                         ANVIL_OK);
        assert_dims(&t.out_info[0], 2, (int64_t[]){3, 5});
        optest_end(&t);
        if (opset >= 11) {
            assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, opset, 4, (int64_t[]){1, 3, 1, 5},
                                        (int64_t[]){-2, 0}, 2),
                             ANVIL_OK);
            assert_dims(&t.out_info[0], 2, (int64_t[]){3, 5});
            optest_end(&t);
        }
        /* all ones to a scalar */
        assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, opset, 2, (int64_t[]){1, 1}, NULL, 0),
                         ANVIL_OK);
        assert_int_equal(t.out_info[0].shape.rank, 0);
        assert_true(*(float *)t.out[0].data == seq[0]);
        optest_end(&t);
    }
    optest t;
    /* empty axes list from opset 13 behaves like no axes */
    assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, 13, 3, (int64_t[]){1, 4, 1}, (int64_t[]){0}, 0),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){4});
    optest_end(&t);
}

static void test_squeeze_unknown(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_SQUEEZE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL, false);
    op_tinfo in[2], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){-1, 1, -1}, (int32_t[]){0, -1, 1});
    set_shape(&in[1], ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL);
    /* axes unknown but one of them: rank 2 */
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){-1, -1});
    /* axes known: symbols survive; an unknown dim may be squeezed (it must be 1 at run time) */
    int64_t ax[1] = {1};
    in[1].value = ax;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){-1, -1});
    assert_int_equal(out[0].shape.sym[0], 0);
    assert_int_equal(out[0].shape.sym[1], 1);
    ax[0] = 0;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){1, -1});
    optest_end(&t);
    /* no axes with unknown dims: the rank cannot be known */
    optest_begin(&t, IR_OP_SQUEEZE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, NULL, false);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, -1);
    optest_end(&t);
}

static void test_squeeze_errors(void **state) {
    (void)state;
    optest t;
    assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, 13, 3, (int64_t[]){1, 3, 1}, (int64_t[]){1}, 1),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "its size is 3, not 1"));
    optest_end(&t);
    assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, 13, 3, (int64_t[]){1, 3, 1}, (int64_t[]){3}, 1),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "out of range"));
    optest_end(&t);
    assert_int_equal(
        squeeze_op(&t, IR_OP_SQUEEZE, 13, 3, (int64_t[]){1, 3, 1}, (int64_t[]){0, -3}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "more than once"));
    optest_end(&t);
    assert_int_equal(squeeze_op(&t, IR_OP_SQUEEZE, 10, 3, (int64_t[]){1, 3, 1}, (int64_t[]){-1}, 1),
                     ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "opset 11"));
    optest_end(&t);
    /* axes as attribute from 13, as input before 13 */
    optest_begin_opset(&t, IR_OP_SQUEEZE, 1, 1, 1, 13);
    optest_attr_ints(&t, 0, "axes", (int64_t[]){0}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, seq, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "input 1, not attribute");
    optest_end(&t);
    int64_t ax[1] = {0};
    optest_begin_opset(&t, IR_OP_SQUEEZE, 2, 1, 0, 12);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, ax, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "before opset 13");
    optest_end(&t);
    /* axes must be INT64 */
    int32_t ax32[1] = {0};
    optest_begin(&t, IR_OP_SQUEEZE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, ax32, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "INT64");
    optest_end(&t);
}

static void test_unsqueeze(void **state) {
    (void)state;
    static const int opsets[] = {1, 11, 13};
    for (size_t o = 0; o < 3; o++) {
        int opset = opsets[o];
        optest t;
        /* the doc example: [3,4,5] with axes [0,4] -> [1,3,4,5,1] */
        assert_int_equal(
            squeeze_op(&t, IR_OP_UNSQUEEZE, opset, 3, (int64_t[]){3, 4, 5}, (int64_t[]){0, 4}, 2),
            ANVIL_OK);
        assert_dims(&t.out_info[0], 5, (int64_t[]){1, 3, 4, 5, 1});
        assert_memory_equal(t.out[0].data, seq, 60 * sizeof(float));
        optest_end(&t);
        /* unsorted axes */
        assert_int_equal(
            squeeze_op(&t, IR_OP_UNSQUEEZE, opset, 2, (int64_t[]){3, 4}, (int64_t[]){3, 1}, 2),
            ANVIL_OK);
        assert_dims(&t.out_info[0], 4, (int64_t[]){3, 1, 4, 1});
        optest_end(&t);
        if (opset >= 11) {
            /* negative axes count in the output rank: -1 is the new last dim */
            assert_int_equal(squeeze_op(&t, IR_OP_UNSQUEEZE, opset, 2, (int64_t[]){3, 4},
                                        (int64_t[]){-1, -4}, 2),
                             ANVIL_OK);
            assert_dims(&t.out_info[0], 4, (int64_t[]){1, 3, 4, 1});
            optest_end(&t);
        }
        /* scalar -> [1] */
        assert_int_equal(squeeze_op(&t, IR_OP_UNSQUEEZE, opset, 0, NULL, (int64_t[]){0}, 1),
                         ANVIL_OK);
        assert_dims(&t.out_info[0], 1, (int64_t[]){1});
        optest_end(&t);
    }
    /* symbols pass through; axes known only by count give the rank */
    optest t;
    optest_begin(&t, IR_OP_UNSQUEEZE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL, false);
    op_tinfo in[2], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){-1, 8}, (int32_t[]){3, -1});
    set_shape(&in[1], ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, NULL);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 4, (int64_t[]){-1, -1, -1, -1});
    int64_t ax[2] = {1, 3};
    in[1].value = ax;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 4, (int64_t[]){-1, 1, 8, 1});
    assert_int_equal(out[0].shape.sym[0], 3);
    optest_end(&t);
    /* a scalar axes input is one axis (ONNX Runtime and the reference implementation take it;
     * the AffineGrid function body emits it), for Unsqueeze and Squeeze alike */
    int64_t ax_scalar[1] = {-1};
    optest_begin(&t, IR_OP_UNSQUEEZE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, ax_scalar, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){3, 4, 1});
    assert_memory_equal(t.out[0].data, seq, 12 * sizeof(float));
    optest_end(&t);
    ax_scalar[0] = 0;
    optest_begin(&t, IR_OP_SQUEEZE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, ax_scalar, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){4});
    assert_memory_equal(t.out[0].data, seq, 4 * sizeof(float));
    optest_end(&t);
}

static void test_unsqueeze_errors(void **state) {
    (void)state;
    optest t;
    assert_int_equal(
        squeeze_op(&t, IR_OP_UNSQUEEZE, 13, 2, (int64_t[]){3, 4}, (int64_t[]){1, -3}, 2),
        ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "more than once"));
    optest_end(&t);
    assert_int_equal(squeeze_op(&t, IR_OP_UNSQUEEZE, 13, 2, (int64_t[]){3, 4}, (int64_t[]){3}, 1),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "out of range"));
    optest_end(&t);
    assert_int_equal(squeeze_op(&t, IR_OP_UNSQUEEZE, 13, 2, (int64_t[]){3, 4}, NULL, 0),
                     ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "required from opset 13"));
    optest_end(&t);
    assert_int_equal(squeeze_op(&t, IR_OP_UNSQUEEZE, 11, 2, (int64_t[]){3, 4}, NULL, 0),
                     ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "'axes' is required"));
    optest_end(&t);
    assert_int_equal(squeeze_op(&t, IR_OP_UNSQUEEZE, 13, 6, (int64_t[]){1, 1, 1, 1, 1, 2},
                                (int64_t[]){0, 1, 2}, 3),
                     ANVIL_ERR_LIMIT);
    optest_end(&t);
    /* axes of rank 2 are refused (rank 0 is one axis, rank 1 the list) */
    int64_t ax2[2] = {0, 1};
    optest_begin(&t, IR_OP_UNSQUEEZE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, seq, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){1, 2}, ax2, true);
    assert_int_equal(optest_run(&t), ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "input 1 (axes) must be 1-D but has rank 2"));
    optest_end(&t);
}

/* ---- Shape -------------------------------------------------------------------------------- */

static void test_shape(void **state) {
    (void)state;
    static const struct {
        int has_start, has_end;
        int64_t start, end;
        int n;
        int64_t want[3];
    } cases[] = {
        {0, 0, 0, 0, 3, {2, 3, 4}}, {1, 0, -1, 0, 1, {4}},        {0, 1, 0, -1, 2, {2, 3}},
        {1, 1, 1, 2, 1, {3}},       {1, 0, -10, 0, 3, {2, 3, 4}}, {0, 1, 0, 10, 3, {2, 3, 4}},
        {1, 1, 2, 1, 0, {0}},       {1, 1, 3, 3, 0, {0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        optest t;
        optest_begin_opset(&t, IR_OP_SHAPE, 1, 1, cases[c].has_start + cases[c].has_end, 15);
        int k = 0;
        if (cases[c].has_start) optest_attr_int(&t, k++, "start", cases[c].start);
        if (cases[c].has_end) optest_attr_int(&t, k++, "end", cases[c].end);
        /* Shape must never read the data: give it none */
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, NULL, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_INT64);
        assert_dims(&t.out_info[0], 1, (int64_t[]){cases[c].n});
        if (cases[c].n) assert_memory_equal(t.out[0].data, cases[c].want, (size_t)cases[c].n * 8);
        optest_end(&t);
    }
    optest t;
    /* scalar input: empty shape; unknown rank: unknown length */
    optest_begin(&t, IR_OP_SHAPE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_STRING, 0, NULL, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){0});
    op_tinfo in[1], out[1];
    memset(in, 0, sizeof in);
    in[0].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_unknown(&in[0].shape);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 1, (int64_t[]){-1});
    optest_end(&t);
    /* start/end before opset 15 */
    optest_begin_opset(&t, IR_OP_SHAPE, 1, 1, 1, 14);
    optest_attr_int(&t, 0, "start", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, NULL, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 15");
    optest_end(&t);
}

/* The registry must dispatch to this family's implementations. Naming them here also makes the
 * linker take their objects out of the static library (the registry only refers to them weakly). */
extern const op_impl op_impl_reshape;
extern const op_impl op_impl_flatten;
extern const op_impl op_impl_squeeze;
extern const op_impl op_impl_unsqueeze;
extern const op_impl op_impl_shape;

static void test_dispatch(void **state) {
    (void)state;
    assert_ptr_equal(op_get(IR_OP_RESHAPE), &op_impl_reshape);
    assert_ptr_equal(op_get(IR_OP_FLATTEN), &op_impl_flatten);
    assert_ptr_equal(op_get(IR_OP_SQUEEZE), &op_impl_squeeze);
    assert_ptr_equal(op_get(IR_OP_UNSQUEEZE), &op_impl_unsqueeze);
    assert_ptr_equal(op_get(IR_OP_SHAPE), &op_impl_shape);
    assert_true(op_impl_reshape.flags & OP_ALIAS_0);
    assert_true(op_impl_flatten.flags & OP_ALIAS_0);
    assert_true(op_impl_squeeze.flags & OP_ALIAS_0);
    assert_true(op_impl_unsqueeze.flags & OP_ALIAS_0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_reshape_shapes),
        cmocka_unit_test(test_reshape_allowzero),
        cmocka_unit_test(test_reshape_dtypes),
        cmocka_unit_test(test_reshape_unknown),
        cmocka_unit_test(test_reshape_errors),
        cmocka_unit_test(test_reshape_opset1),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_flatten_errors),
        cmocka_unit_test(test_squeeze),
        cmocka_unit_test(test_squeeze_unknown),
        cmocka_unit_test(test_squeeze_errors),
        cmocka_unit_test(test_unsqueeze),
        cmocka_unit_test(test_unsqueeze_errors),
        cmocka_unit_test(test_shape),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
