/* Einsum, Upsample and Col2Im: results against plain loops written here (matrix products,
 * diagonals, traces, broadcast ellipses; nearest and linear upsampling; column folding), and the
 * errors malformed equations, shapes and attributes must produce. */
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

static float A[64], B[64];

static void fill(void) {
    for (int i = 0; i < 64; i++) {
        A[i] = (float)((i * 37) % 11) - 5.0f;
        B[i] = (float)((i * 13) % 7) * 0.5f - 1.0f;
    }
}

static void einsum2(optest *t, const char *eq, int ra, const int64_t *da, int rb,
                    const int64_t *db) {
    optest_begin(t, IR_OP_EINSUM, 2, 1, 1);
    optest_attr_string(t, 0, "equation", eq);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, ra, da, A, false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, rb, db, B, false);
}

static void einsum1(optest *t, const char *eq, int ra, const int64_t *da) {
    optest_begin(t, IR_OP_EINSUM, 1, 1, 1);
    optest_attr_string(t, 0, "equation", eq);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, ra, da, A, false);
}

static void test_einsum_matmul_forms(void **state) {
    (void)state;
    fill();
    /* explicit, implicit and spaced spellings of a [3,4] x [4,5] product */
    static const char *const eqs[] = {"ij,jk->ik", "ij,jk", "ij , jk -> ik"};
    for (int e = 0; e < 3; e++) {
        optest t;
        einsum2(&t, eqs[e], 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 5});
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dims[0], 3);
        assert_int_equal(t.out[0].dims[1], 5);
        const float *y = t.out[0].data;
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                float s = 0;
                for (int j = 0; j < 4; j++) s += A[i * 4 + j] * B[j * 5 + k];
                assert_true(fabsf(y[i * 5 + k] - s) < 1e-4f);
            }
        optest_end(&t);
    }
    /* ellipsis broadcasting: [2,1,2,3] x [3,3,2] -> [2,3,2,2] */
    optest t;
    einsum2(&t, "...ij,...jk->...ik", 4, (int64_t[]){2, 1, 2, 3}, 3, (int64_t[]){3, 3, 2});
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 4);
    assert_int_equal(t.out[0].dims[1], 3);
    const float *y = t.out[0].data;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 2; k++) {
                    float s = 0;
                    for (int j = 0; j < 3; j++)
                        s += A[(a * 2 + i) * 3 + j] * B[(b * 3 + j) * 2 + k];
                    assert_true(fabsf(y[((a * 3 + b) * 2 + i) * 2 + k] - s) < 1e-4f);
                }
    optest_end(&t);
}

static void test_einsum_single_operand(void **state) {
    (void)state;
    fill();
    optest t;
    /* trace */
    einsum1(&t, "ii", 2, (int64_t[]){4, 4});
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 0);
    float tr = 0;
    for (int i = 0; i < 4; i++) tr += A[i * 5];
    assert_true(fabsf(*(float *)t.out[0].data - tr) < 1e-5f);
    optest_end(&t);
    /* batch diagonal */
    einsum1(&t, "...ii->...i", 3, (int64_t[]){2, 3, 3});
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            assert_true(((float *)t.out[0].data)[b * 3 + i] == A[b * 9 + i * 4]);
    optest_end(&t);
    /* implicit transpose: "ba" has output "ab" */
    einsum1(&t, "ba", 2, (int64_t[]){2, 3});
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 3);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            assert_true(((float *)t.out[0].data)[i * 2 + j] == A[j * 3 + i]);
    optest_end(&t);
    /* sum over a zero-size axis gives zeros */
    einsum1(&t, "ij->i", 2, (int64_t[]){3, 0});
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int i = 0; i < 3; i++) assert_true(((float *)t.out[0].data)[i] == 0.0f);
    optest_end(&t);
}

static void test_einsum_int(void **state) {
    (void)state;
    int64_t a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {7, 8, 9};
    optest t;
    optest_begin(&t, IR_OP_EINSUM, 2, 1, 1);
    optest_attr_string(&t, 0, "equation", "ij,j->i");
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int64_t[]){50, 122}), 2 * sizeof(int64_t));
    optest_end(&t);
}

static void test_einsum_errors(void **state) {
    (void)state;
    fill();
    optest t;
    einsum2(&t, "ij,jk->iq", 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 5});
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "appears in no operand");
    optest_end(&t);
    einsum2(&t, "ij,jk->ii", 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 5});
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "twice");
    optest_end(&t);
    einsum2(&t, "ij->i", 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 5});
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "1 operand terms but the node has 2");
    optest_end(&t);
    einsum2(&t, "ij,jk->ik", 2, (int64_t[]){3, 4}, 2, (int64_t[]){3, 5});
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "label 'j'");
    optest_end(&t);
    einsum2(&t, "ijk,jk->ik", 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 5});
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "rank 2 but its equation term has 3");
    optest_end(&t);
    einsum1(&t, "i1->i", 2, (int64_t[]){3, 4});
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "'1'");
    optest_end(&t);
    einsum1(&t, "i..j->i", 2, (int64_t[]){3, 4});
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "'.'");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_EINSUM, 1, 1, 1, 11);
    optest_attr_string(&t, 0, "equation", "ii");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, A, false);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "opset 12");
    optest_end(&t);
}

/* ---- Upsample ------------------------------------------------------------------------------ */

static void test_upsample(void **state) {
    (void)state;
    float x[4] = {1, 3, 5, 7};
    optest t;
    /* opset 7: nearest, scales attribute, [1,1,2,2] -> [1,1,4,6] */
    optest_begin_opset(&t, IR_OP_UPSAMPLE, 1, 1, 2, 7);
    optest_attr_string(&t, 0, "mode", "nearest");
    optest_attr_floats(&t, 1, "scales", (float[]){1, 1, 2, 3}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], 4);
    assert_int_equal(t.out[0].dims[3], 6);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++)
            assert_true(((float *)t.out[0].data)[i * 6 + j] == x[(i / 2) * 2 + j / 3]);
    optest_end(&t);
    /* opset 9: linear, scales input; the far edge clamps */
    float sc[1] = {2};
    optest_begin_opset(&t, IR_OP_UPSAMPLE, 2, 1, 1, 9);
    optest_attr_string(&t, 0, "mode", "linear");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, sc, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){1, 2, 3, 4, 5, 6, 7, 7}), 8 * sizeof(float));
    optest_end(&t);
    /* errors: deprecated at 10, wrong scale count, unknown mode */
    optest_begin_opset(&t, IR_OP_UPSAMPLE, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, sc, true);
    expect_err(optest_infer(&t), ANVIL_ERR_UNSUPPORTED, "opset 10");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_UPSAMPLE, 2, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, sc, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "1 scales for an input of rank 2");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_UPSAMPLE, 2, 1, 1, 9);
    optest_attr_string(&t, 0, "mode", "cubic");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, sc, true);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "'cubic'");
    optest_end(&t);
}

/* ---- Col2Im -------------------------------------------------------------------------------- */

static void test_col2im(void **state) {
    (void)state;
    fill();
    /* image 4x5, block 2x3, stride 2x1, pads (1,0,1,1): positions along H: (4+2-2)/2+1 = 3,
     * along W: (5+1-3)/1+1 = 4 -> L = 12; C = 2, so input [1, 2*6, 12] */
    int64_t img[2] = {4, 5}, blk[2] = {2, 3};
    float col[144];
    for (int i = 0; i < 144; i++) col[i] = (float)((i * 7) % 13) - 6.0f;
    optest t;
    optest_begin_opset(&t, IR_OP_COL2IM, 3, 1, 2, 18);
    optest_attr_ints(&t, 0, "strides", (int64_t[]){2, 1}, 2);
    optest_attr_ints(&t, 1, "pads", (int64_t[]){1, 0, 1, 1}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 12, 12}, col, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, img, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, blk, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 4);
    assert_int_equal(t.out[0].dims[1], 2);
    float want[40] = {0};
    for (int c = 0; c < 2; c++)
        for (int bh = 0; bh < 2; bh++)
            for (int bw = 0; bw < 3; bw++)
                for (int ph = 0; ph < 3; ph++)
                    for (int pw = 0; pw < 4; pw++) {
                        int h = ph * 2 - 1 + bh, w = pw - 0 + bw;
                        if (h < 0 || h >= 4 || w < 0 || w >= 5) continue;
                        want[(c * 4 + h) * 5 + w] +=
                            col[((c * 6) + bh * 3 + bw) * 12 + ph * 4 + pw];
                    }
    assert_null(optest_compare_f32(t.out[0].data, want, 40, 0, 1e-5f) >= 0 ? "mismatch" : NULL);
    optest_end(&t);
    /* L that does not match the geometry */
    optest_begin_opset(&t, IR_OP_COL2IM, 3, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 12, 12}, col, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, img, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, blk, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "block positions");
    optest_end(&t);
    /* block larger than the image */
    int64_t big[2] = {5, 3};
    optest_begin_opset(&t, IR_OP_COL2IM, 3, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 15, 12}, col, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, img, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, big, true);
    expect_err(optest_infer(&t), ANVIL_ERR_SHAPE, "larger than the padded image");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_COL2IM, 3, 1, 1, 18);
    optest_attr_ints(&t, 0, "strides", (int64_t[]){0, 1}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 12, 12}, col, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, img, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, blk, true);
    expect_err(optest_infer(&t), ANVIL_ERR_INVALID_MODEL, "strides[0] is 0");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_matmul_forms),
        cmocka_unit_test(test_einsum_single_operand),
        cmocka_unit_test(test_einsum_int),
        cmocka_unit_test(test_einsum_errors),
        cmocka_unit_test(test_upsample),
        cmocka_unit_test(test_col2im),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
