/* Split, Tile, Expand, Range, Size, Trilu, EyeLike, DepthToSpace, SpaceToDepth, ReverseSequence
 * and CenterCropPad: results against references computed here index by index, opset variants,
 * zero-size shapes, and the errors bad attributes, shapes and values must produce. */
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

static int16_t seq16[64];

static void fill_seq(void) {
    for (int i = 0; i < 64; i++) seq16[i] = (int16_t)(i * 7 - 100);
}

/* ---- Split --------------------------------------------------------------------------------- */

static void test_split_variants(void **state) {
    (void)state;
    fill_seq();
    optest t;
    /* opset 11: split attribute along axis 1 of a 2x5 */
    optest_begin_opset(&t, IR_OP_SPLIT, 1, 2, 2, 11);
    optest_attr_int(&t, 0, "axis", -1);
    optest_attr_ints(&t, 1, "split", (int64_t[]){2, 3}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){2, 5}, seq16, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const int16_t *a = t.out[0].data, *b = t.out[1].data;
    for (int r = 0; r < 2; r++) {
        for (int c = 0; c < 2; c++) assert_int_equal(a[r * 2 + c], seq16[r * 5 + c]);
        for (int c = 0; c < 3; c++) assert_int_equal(b[r * 3 + c], seq16[r * 5 + 2 + c]);
    }
    optest_end(&t);
    /* opset 13: sizes as input 1, including a zero-size part */
    int64_t sizes[3] = {1, 0, 4};
    optest_begin_opset(&t, IR_OP_SPLIT, 2, 3, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){5}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, sizes, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[1].dims[0], 0);
    assert_int_equal(((int16_t *)t.out[2].data)[3], seq16[4]);
    optest_end(&t);
    /* opset 18: num_outputs with an uneven last chunk: 7 -> 3, 3, 1 */
    optest_begin_opset(&t, IR_OP_SPLIT, 1, 3, 1, 18);
    optest_attr_int(&t, 0, "num_outputs", 3);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){7}, seq16, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 3);
    assert_int_equal(t.out[2].dims[0], 1);
    assert_int_equal(((int16_t *)t.out[2].data)[0], seq16[6]);
    optest_end(&t);
}

static void test_split_errors(void **state) {
    (void)state;
    optest t;
    int64_t sizes[2] = {2, 2};
    optest_begin_opset(&t, IR_OP_SPLIT, 2, 2, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){5}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, sizes, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "add up to 4");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SPLIT, 1, 2, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){5}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "does not split evenly");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SPLIT, 1, 2, 1, 13);
    optest_attr_ints(&t, 0, "split", (int64_t[]){2, 3}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){5}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "attribute 'split'");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SPLIT, 1, 2, 1, 18);
    optest_attr_int(&t, 0, "num_outputs", 3);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){5}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "num_outputs");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SPLIT, 1, 2, 1, 13);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){4}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
}

/* ---- Tile / Expand ------------------------------------------------------------------------- */

static void test_tile(void **state) {
    (void)state;
    fill_seq();
    int64_t reps[3] = {2, 1, 3};
    optest t;
    optest_begin(&t, IR_OP_TILE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){2, 3, 2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, reps, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const int16_t *y = t.out[0].data;
    assert_int_equal(t.out[0].dims[0], 4);
    assert_int_equal(t.out[0].dims[2], 6);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 6; k++)
                assert_int_equal(y[(i * 3 + j) * 6 + k], seq16[((i % 2) * 3 + j) * 2 + k % 2]);
    optest_end(&t);
    /* repeats of the wrong length, negative repeats */
    optest_begin(&t, IR_OP_TILE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){2, 3}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, reps, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "repeats");
    optest_end(&t);
    int64_t neg[1] = {-1};
    optest_begin(&t, IR_OP_TILE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, neg, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "repeats[0] is -1");
    optest_end(&t);
    /* zero repeats: empty output */
    int64_t zero[1] = {0};
    optest_begin(&t, IR_OP_TILE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, zero, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
}

static void test_expand(void **state) {
    (void)state;
    fill_seq();
    /* [3,1] expanded by [2,1,4] (bidirectional: the 1 in shape keeps input's 3) */
    int64_t shape[3] = {2, 1, 4};
    optest t;
    optest_begin(&t, IR_OP_EXPAND, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){3, 1}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, shape, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 3);
    assert_int_equal(t.out[0].dims[1], 3);
    const int16_t *y = t.out[0].data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) assert_int_equal(y[(i * 3 + j) * 4 + k], seq16[j]);
    optest_end(&t);
    int64_t bad[1] = {4};
    optest_begin(&t, IR_OP_EXPAND, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){3}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bad, true);
    assert_int_not_equal(optest_infer(&t), ANVIL_OK);
    assert_non_null(strstr(anvil_last_error(), "test_node"));
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_EXPAND, 2, 1, 0, 7);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){3}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bad, true);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "opset 8");
    optest_end(&t);
}

/* ---- Range / Size -------------------------------------------------------------------------- */

static void test_range(void **state) {
    (void)state;
    optest t;
    int32_t s = 10, l = 3, d = -3; /* 10, 7, 4 */
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 0, NULL, &s, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &l, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &d, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 3);
    assert_memory_equal(t.out[0].data, ((int32_t[]){10, 7, 4}), 3 * sizeof(int32_t));
    optest_end(&t);
    float fs = 0.5f, fl = 2.0f, fd = 0.4f; /* ceil(1.5 / 0.4) = 4 */
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 21);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, &fs, true);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &fl, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 0, NULL, &fd, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 4);
    const float *y = t.out[0].data;
    for (int i = 0; i < 4; i++) assert_true(fabsf(y[i] - (0.5f + 0.4f * (float)i)) < 1e-6f);
    optest_end(&t);
    /* empty when the step points away from the limit */
    d = 3;
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 0, NULL, &s, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &l, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &d, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
    d = 0;
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 0, NULL, &s, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &l, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &d, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "delta is 0");
    optest_end(&t);
    /* mixed dtypes, non-scalar, float16 before opset 27, opset 10 */
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 0, NULL, &s, true);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &fl, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &d, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);
    int32_t two[2] = {1, 2};
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, two, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &l, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &d, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "scalar");
    optest_end(&t);
    uint16_t h[3] = {0x3c00, 0x4400, 0x3c00}; /* 1, 4, 1 in float16 */
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 21);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT16, 0, NULL, &h[0], true);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 0, NULL, &h[1], true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 0, NULL, &h[2], true);
    expect_err(optest_infer(&t), ANVIL_ERR_UNSUPPORTED, "opset 27");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT16, 0, NULL, &h[0], true);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 0, NULL, &h[1], true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 0, NULL, &h[2], true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint16_t[]){0x3c00, 0x4000, 0x4200}), 6);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_RANGE, 3, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 0, NULL, &s, true);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, &l, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &d, true);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "opset 11");
    optest_end(&t);
}

static void test_size(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_SIZE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){2, 3, 5}, seq16, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_INT64);
    assert_int_equal(t.out[0].rank, 0);
    assert_int_equal(*(int64_t *)t.out[0].data, 30);
    optest_end(&t);
}

/* ---- Trilu / EyeLike ----------------------------------------------------------------------- */

static void test_trilu(void **state) {
    (void)state;
    fill_seq();
    for (int upper = 0; upper < 2; upper++)
        for (int64_t k = -4; k <= 4; k++) {
            optest t;
            optest_begin(&t, IR_OP_TRILU, 2, 1, 1);
            optest_attr_int(&t, 0, "upper", upper);
            optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){2, 3, 4}, seq16, false);
            optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &k, false);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            const int16_t *y = t.out[0].data;
            for (int m = 0; m < 2; m++)
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++) {
                        int e = (m * 3 + i) * 4 + j;
                        bool keep = upper ? j - i >= k : j - i <= k;
                        assert_int_equal(y[e], keep ? seq16[e] : 0);
                    }
            optest_end(&t);
        }
    optest t;
    optest_begin(&t, IR_OP_TRILU, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 1, (int64_t[]){4}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "rank >= 2");
    optest_end(&t);
    optest_begin(&t, IR_OP_TRILU, 1, 1, 1);
    optest_attr_int(&t, 0, "upper", 2);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){2, 2}, seq16, false);
    assert_int_not_equal(optest_infer(&t), ANVIL_OK);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_TRILU, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){2, 2}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "opset 14");
    optest_end(&t);
}

static void test_eyelike(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_EYELIKE, 1, 1, 2);
    optest_attr_int(&t, 0, "k", -1);
    optest_attr_int(&t, 1, "dtype", ANVIL_DTYPE_FLOAT64);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){3, 4}, seq16, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT64);
    const double *y = t.out[0].data;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) assert_true(y[i * 4 + j] == (j - i == -1 ? 1.0 : 0.0));
    optest_end(&t);
    optest_begin(&t, IR_OP_EYELIKE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){1, 3, 4}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "rank 2");
    optest_end(&t);
    optest_begin(&t, IR_OP_EYELIKE, 1, 1, 1);
    optest_attr_int(&t, 0, "dtype", ANVIL_DTYPE_STRING);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){3, 4}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_UNSUPPORTED, "dtype");
    optest_end(&t);
}

/* ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------- */

static void test_depth_space(void **state) {
    (void)state;
    fill_seq();
    /* x: [1, 8, 2, 3], blocksize 2 -> [1, 2, 4, 6] */
    for (int crd = 0; crd < 2; crd++) {
        optest t;
        optest_begin(&t, IR_OP_DEPTHTOSPACE, 1, 1, 2);
        optest_attr_int(&t, 0, "blocksize", 2);
        optest_attr_string(&t, 1, "mode", crd ? "CRD" : "DCR");
        optest_input(&t, 0, ANVIL_DTYPE_INT16, 4, (int64_t[]){1, 8, 2, 3}, seq16, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const int16_t *y = t.out[0].data;
        for (int c = 0; c < 2; c++)
            for (int h = 0; h < 4; h++)
                for (int w = 0; w < 6; w++) {
                    int b1 = h % 2, b2 = w % 2;
                    int ch = crd ? c * 4 + b1 * 2 + b2 : (b1 * 2 + b2) * 2 + c;
                    assert_int_equal(y[(c * 4 + h) * 6 + w], seq16[(ch * 2 + h / 2) * 3 + w / 2]);
                }
        /* SpaceToDepth of the DCR result gives the input back */
        if (!crd) {
            optest u;
            optest_begin(&u, IR_OP_SPACETODEPTH, 1, 1, 1);
            optest_attr_int(&u, 0, "blocksize", 2);
            optest_input(&u, 0, ANVIL_DTYPE_INT16, 4, (int64_t[]){1, 2, 4, 6}, y, false);
            assert_int_equal(optest_run(&u), ANVIL_OK);
            assert_memory_equal(u.out[0].data, seq16, 48 * sizeof(int16_t));
            optest_end(&u);
        }
        optest_end(&t);
    }
    optest t;
    optest_begin(&t, IR_OP_DEPTHTOSPACE, 1, 1, 1);
    optest_attr_int(&t, 0, "blocksize", 3);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 4, (int64_t[]){1, 8, 2, 3}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "multiple of blocksize^2");
    optest_end(&t);
    optest_begin(&t, IR_OP_SPACETODEPTH, 1, 1, 1);
    optest_attr_int(&t, 0, "blocksize", 2);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 4, (int64_t[]){1, 1, 3, 4}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "multiple of blocksize");
    optest_end(&t);
    optest_begin(&t, IR_OP_SPACETODEPTH, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 4, (int64_t[]){1, 1, 4, 4}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "blocksize");
    optest_end(&t);
    optest_begin(&t, IR_OP_DEPTHTOSPACE, 1, 1, 1);
    optest_attr_int(&t, 0, "blocksize", 2);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){8, 2, 3}, seq16, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "rank 3");
    optest_end(&t);
}

/* ---- ReverseSequence / CenterCropPad ------------------------------------------------------- */

static void test_reverse_sequence(void **state) {
    (void)state;
    fill_seq();
    /* time-major [T=4, B=3, 2] */
    int64_t lens[3] = {4, 0, 2};
    optest t;
    optest_begin(&t, IR_OP_REVERSESEQUENCE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){4, 3, 2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, lens, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const int16_t *y = t.out[0].data;
    for (int ti = 0; ti < 4; ti++)
        for (int b = 0; b < 3; b++)
            for (int k = 0; k < 2; k++) {
                int src = ti < lens[b] ? (int)lens[b] - 1 - ti : ti;
                assert_int_equal(y[(ti * 3 + b) * 2 + k], seq16[(src * 3 + b) * 2 + k]);
            }
    optest_end(&t);
    lens[1] = 5;
    optest_begin(&t, IR_OP_REVERSESEQUENCE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){4, 3, 2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, lens, false);
    expect_err(optest_run(&t), ANVIL_ERR_RUNTIME, "index 5 at position [1]");
    optest_end(&t);
    optest_begin(&t, IR_OP_REVERSESEQUENCE, 2, 1, 2);
    optest_attr_int(&t, 0, "batch_axis", 0);
    optest_attr_int(&t, 1, "time_axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){4, 3, 2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, lens, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "batch_axis");
    optest_end(&t);
    optest_begin(&t, IR_OP_REVERSESEQUENCE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){4, 3, 2}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, lens, false);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "sequence_lens");
    optest_end(&t);
}

static void test_center_crop_pad(void **state) {
    (void)state;
    fill_seq();
    /* [5, 4] -> [2, 7]: crop rows (start 1), pad columns (1 before, 2 after) */
    int64_t shape[2] = {2, 7};
    optest t;
    optest_begin_opset(&t, IR_OP_CENTERCROPPAD, 2, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){5, 4}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, shape, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const int16_t *y = t.out[0].data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 7; j++) {
            int sj = j - 1;
            assert_int_equal(y[i * 7 + j], sj >= 0 && sj < 4 ? seq16[(i + 1) * 4 + sj] : 0);
        }
    optest_end(&t);
    /* axes attribute with a negative axis, and a repeated one */
    int64_t one[1] = {2};
    optest_begin_opset(&t, IR_OP_CENTERCROPPAD, 2, 1, 1, 18);
    optest_attr_ints(&t, 0, "axes", (int64_t[]){-2}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){5, 4}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, one, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 2);
    assert_int_equal(t.out[0].dims[1], 4);
    assert_int_equal(((int16_t *)t.out[0].data)[0], seq16[4]);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CENTERCROPPAD, 2, 1, 1, 18);
    optest_attr_ints(&t, 0, "axes", (int64_t[]){0, -2}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){5, 4}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, shape, true);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "repeats axis 0");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CENTERCROPPAD, 2, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 2, (int64_t[]){5, 4}, seq16, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, one, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "1 entries but 2 axes");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_variants),
        cmocka_unit_test(test_split_errors),
        cmocka_unit_test(test_tile),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_trilu),
        cmocka_unit_test(test_eyelike),
        cmocka_unit_test(test_depth_space),
        cmocka_unit_test(test_reverse_sequence),
        cmocka_unit_test(test_center_crop_pad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
