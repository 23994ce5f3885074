/* GatherElements, GatherND, ScatterElements, Scatter, ScatterND and OneHot: results against
 * index-by-index references written here, the ONNX documentation examples, reductions with
 * duplicate indices, negative indices, and the errors bad indices and shapes must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static void expect_err(anvil_status got, anvil_status want, const char *substr) {
    if (got != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %d (want %d), message: %s\n", (int)got, (int)want,
                anvil_last_error());
    assert_int_equal(got, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* ---- GatherElements ------------------------------------------------------------------------ */

static void test_gather_elements_reference(void **state) {
    (void)state;
    /* data 3x4, indices 2x4 along axis 0 and 3x2 along axis 1, with negative indices */
    float data[12];
    for (int i = 0; i < 12; i++) data[i] = (float)(i * 3 + 1);
    for (int axis = 0; axis < 2; axis++) {
        int64_t idims[2] = {axis == 0 ? 2 : 3, axis == 0 ? 4 : 2};
        int64_t idx[8];
        int64_t lim = axis == 0 ? 3 : 4;
        for (int i = 0; i < 8 && i < idims[0] * idims[1]; i++)
            idx[i] = (i * 5 + axis) % (2 * lim) - lim; /* covers -lim..lim-1 */
        optest t;
        optest_begin(&t, IR_OP_GATHERELEMENTS, 2, 1, 1);
        optest_attr_int(&t, 0, "axis", axis);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, data, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, idims, idx, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dims[0], idims[0]);
        assert_int_equal(t.out[0].dims[1], idims[1]);
        const float *y = t.out[0].data;
        for (int64_t i = 0; i < idims[0]; i++)
            for (int64_t j = 0; j < idims[1]; j++) {
                int64_t v = idx[i * idims[1] + j];
                if (v < 0) v += lim;
                float want = axis == 0 ? data[v * 4 + j] : data[i * 4 + v];
                assert_true(y[i * idims[1] + j] == want);
            }
        optest_end(&t);
    }
}

static void test_gather_elements_errors(void **state) {
    (void)state;
    float data[6] = {0};
    int64_t idx[4] = {0, 1, 3, 0};
    optest t;
    optest_begin(&t, IR_OP_GATHERELEMENTS, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, idx, false);
    expect_err(optest_run(&t), ANVIL_ERR_RUNTIME, "index 3 at position [1,0]");
    assert_non_null(strstr(anvil_last_error(), "valid: -3..2"));
    optest_end(&t);

    /* rank mismatch */
    optest_begin(&t, IR_OP_GATHERELEMENTS, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, idx, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "rank");
    optest_end(&t);

    /* axis out of range */
    optest_begin(&t, IR_OP_GATHERELEMENTS, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, idx, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);

    /* float indices */
    optest_begin(&t, IR_OP_GATHERELEMENTS, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, data, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "indices");
    optest_end(&t);

    /* zero-size indices: empty output, no error */
    optest_begin(&t, IR_OP_GATHERELEMENTS, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 2, (int64_t[]){0, 3}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
}

/* ---- ScatterElements / Scatter ------------------------------------------------------------- */

static void test_scatter_elements_reductions(void **state) {
    (void)state;
    static const char *const reds[] = {"none", "add", "mul", "max", "min"};
    int64_t data[6] = {1, 2, 3, 4, 5, 6}; /* 2x3 */
    int64_t idx[4] = {1, 1, -3, 2};       /* 2x2 along axis 1: duplicates at row 0 */
    int64_t upd[4] = {10, 7, -4, 9};
    for (int r = 0; r < 5; r++) {
        int64_t want[6];
        memcpy(want, data, sizeof want);
        for (int e = 0; e < 4; e++) {
            int64_t row = e / 2, col = idx[e] < 0 ? idx[e] + 3 : idx[e];
            int64_t *w = &want[row * 3 + col], u = upd[e];
            *w = r == 0   ? u
                 : r == 1 ? *w + u
                 : r == 2 ? *w * u
                 : r == 3 ? (u > *w ? u : *w)
                          : (u < *w ? u : *w);
        }
        optest t;
        optest_begin_opset(&t, IR_OP_SCATTERELEMENTS, 3, 1, 2, 18);
        optest_attr_int(&t, 0, "axis", 1);
        optest_attr_string(&t, 1, "reduction", reds[r]);
        optest_input(&t, 0, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 3}, data, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, idx, false);
        optest_input(&t, 2, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, upd, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_memory_equal(t.out[0].data, want, sizeof want);
        optest_end(&t);
    }
}

static void test_scatter_opsets(void **state) {
    (void)state;
    float data[3] = {0};
    int64_t idx[1] = {0};
    optest t;
    /* max/min arrive at opset 18 */
    optest_begin_opset(&t, IR_OP_SCATTERELEMENTS, 3, 1, 1, 16);
    optest_attr_string(&t, 0, "reduction", "max");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, idx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, data, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "reduction");
    optest_end(&t);
    /* reduction before opset 16 */
    optest_begin_opset(&t, IR_OP_SCATTERELEMENTS, 3, 1, 1, 13);
    optest_attr_string(&t, 0, "reduction", "add");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, idx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, data, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "opset 16");
    optest_end(&t);
    /* Scatter exists at opsets 9 and 10 only */
    optest_begin_opset(&t, IR_OP_SCATTER, 3, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, idx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, data, false);
    expect_err(optest_infer(&t), ANVIL_ERR_UNSUPPORTED, "opset 11");
    optest_end(&t);
    /* Scatter-9 works like ScatterElements */
    float d2[3] = {1, 2, 3}, u2[1] = {9};
    int64_t i2[1] = {2};
    optest_begin_opset(&t, IR_OP_SCATTER, 3, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, d2, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, i2, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, u2, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){1, 2, 9}), 3 * sizeof(float));
    optest_end(&t);
    /* an out-of-range index at run time */
    i2[0] = -4;
    optest_begin_opset(&t, IR_OP_SCATTERELEMENTS, 3, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, d2, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, i2, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, u2, false);
    expect_err(optest_run(&t), ANVIL_ERR_RUNTIME, "index -4 at position [0]");
    optest_end(&t);
    /* updates shape differs from indices */
    optest_begin_opset(&t, IR_OP_SCATTERELEMENTS, 3, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, d2, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, i2, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, d2, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "updates");
    optest_end(&t);
    /* add on bool is refused */
    bool bd[3] = {0};
    optest_begin_opset(&t, IR_OP_SCATTERELEMENTS, 3, 1, 1, 18);
    optest_attr_string(&t, 0, "reduction", "add");
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 1, (int64_t[]){3}, bd, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, i2, false);
    optest_input(&t, 2, ANVIL_DTYPE_BOOL, 1, (int64_t[]){1}, bd, false);
    expect_err(optest_infer(&t), ANVIL_ERR_UNSUPPORTED, "BOOL");
    optest_end(&t);
}

/* ---- GatherND / ScatterND ------------------------------------------------------------------ */

static void test_gather_nd(void **state) {
    (void)state;
    /* data [2,2,2] = 0..7 */
    int32_t data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    optest t;
    /* batch_dims 0, k 2: indices [[0,1],[1,0]] -> rows [2,3], [4,5] */
    int64_t i1[4] = {0, 1, 1, 0};
    optest_begin_opset(&t, IR_OP_GATHERND, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 2, 2}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, i1, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 2);
    assert_memory_equal(t.out[0].data, ((int32_t[]){2, 3, 4, 5}), 4 * sizeof(int32_t));
    optest_end(&t);
    /* batch_dims 1, k 1: indices [[1],[0]] -> data[0][1], data[1][0] */
    int64_t i2[2] = {1, -2};
    optest_begin_opset(&t, IR_OP_GATHERND, 2, 1, 1, 13);
    optest_attr_int(&t, 0, "batch_dims", 1);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 2, 2}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 1}, i2, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){2, 3, 4, 5}), 4 * sizeof(int32_t));
    optest_end(&t);
    /* k larger than the data rank */
    int64_t i3[4] = {0, 0, 0, 0};
    optest_begin_opset(&t, IR_OP_GATHERND, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 2, 2}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){1, 4}, i3, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "last indices dim is 4");
    optest_end(&t);
    /* out of range index, reported with its position */
    int64_t i4[4] = {0, 1, 0, 2};
    optest_begin_opset(&t, IR_OP_GATHERND, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 2, 2}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, i4, false);
    expect_err(optest_run(&t), ANVIL_ERR_RUNTIME, "index 2 at position [1,1]");
    optest_end(&t);
    /* batch_dims before opset 12 */
    optest_begin_opset(&t, IR_OP_GATHERND, 2, 1, 1, 11);
    optest_attr_int(&t, 0, "batch_dims", 1);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 2, 2}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 1}, i2, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "batch_dims");
    optest_end(&t);
}

static void test_scatter_nd(void **state) {
    (void)state;
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t idx[3] = {4, 3, 4}; /* duplicate 4 */
    float upd[3] = {10, 20, 30};
    optest t;
    optest_begin_opset(&t, IR_OP_SCATTERND, 3, 1, 1, 18);
    optest_attr_string(&t, 0, "reduction", "add");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){8}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){3, 1}, idx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, upd, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){1, 2, 3, 24, 45, 6, 7, 8}), 8 * sizeof(float));
    optest_end(&t);
    /* slices: data 2x3, index [1] replaces row 1 */
    int64_t ridx[1] = {-1};
    float rupd[3] = {9, 8, 7};
    optest_begin_opset(&t, IR_OP_SCATTERND, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){1, 1}, ridx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, rupd, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){1, 2, 3, 9, 8, 7}), 6 * sizeof(float));
    optest_end(&t);
    /* wrong updates shape */
    optest_begin_opset(&t, IR_OP_SCATTERND, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){1, 1}, ridx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, rupd, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "updates");
    optest_end(&t);
    /* index out of range */
    ridx[0] = 2;
    optest_begin_opset(&t, IR_OP_SCATTERND, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, data, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){1, 1}, ridx, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, rupd, false);
    expect_err(optest_run(&t), ANVIL_ERR_RUNTIME, "valid: -2..1");
    optest_end(&t);
}

/* ---- OneHot -------------------------------------------------------------------------------- */

static void test_onehot(void **state) {
    (void)state;
    float idx[4] = {0, -1, 7, 2.7f}; /* 7 is out of range: all off; 2.7 truncates to 2 */
    int64_t depth = 3;
    int32_t values[2] = {-5, 9};
    for (int axis = -2; axis <= 1; axis++) {
        optest t;
        optest_begin(&t, IR_OP_ONEHOT, 3, 1, 1);
        optest_attr_int(&t, 0, "axis", axis);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, idx, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &depth, true);
        optest_input(&t, 2, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, values, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        bool depth_first = axis == 0 || axis == -2;
        assert_int_equal(t.out[0].dims[0], depth_first ? 3 : 4);
        const int32_t *y = t.out[0].data;
        static const int hot[4] = {0, 2, -1, 2};
        for (int i = 0; i < 4; i++)
            for (int d = 0; d < 3; d++) {
                int32_t got = depth_first ? y[d * 4 + i] : y[i * 3 + d];
                assert_int_equal(got, hot[i] == d ? 9 : -5);
            }
        optest_end(&t);
    }
    /* bad values shape and bad depth */
    optest t;
    optest_begin(&t, IR_OP_ONEHOT, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, idx, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &depth, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, values, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "values");
    optest_end(&t);
    int64_t zero = 0;
    optest_begin(&t, IR_OP_ONEHOT, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, idx, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &zero, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, values, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "depth is 0");
    optest_end(&t);
    optest_begin(&t, IR_OP_ONEHOT, 3, 1, 1);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, idx, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &depth, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, values, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_elements_reference),
        cmocka_unit_test(test_gather_elements_errors),
        cmocka_unit_test(test_scatter_elements_reductions),
        cmocka_unit_test(test_scatter_opsets),
        cmocka_unit_test(test_gather_nd),
        cmocka_unit_test(test_scatter_nd),
        cmocka_unit_test(test_onehot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
