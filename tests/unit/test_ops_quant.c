/* Quantization ops: QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked, round half to
 * even, saturation, INT16, INT32 input, output_dtype), DynamicQuantizeLinear (the ONNX spec's
 * worked example), MatMulInteger and QLinearMatMul (zero points per row / column, batch broadcast)
 * and ConvInteger / QLinearConv (padding, strides, groups, per-channel weight zero points) against
 * loops written here, plus the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

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

/* ---- QuantizeLinear -------------------------------------------------------------------------- */

static void test_quantize_rounding_and_saturation(void **state) {
    (void)state;
    const float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 300.0f, -300.0f};
    const float scale = 1.0f;
    /* uint8, default zero point 0: halves go to even, negatives clamp at 0, 300 clamps at 255 */
    optest t;
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){8}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &scale, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_UINT8);
    const uint8_t want_u8[8] = {0, 2, 2, 0, 0, 0, 255, 0};
    assert_memory_equal(t.out[0].data, want_u8, 8);
    optest_end(&t);
    /* int8 with zero point 3 */
    const int8_t zp = 3;
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){8}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &scale, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT8, 0, NULL, &zp, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const int8_t want_i8[8] = {3, 5, 5, 3, 1, 1, 127, -128};
    assert_memory_equal(t.out[0].data, want_i8, 8);
    optest_end(&t);
    /* output_dtype INT16 without a zero point (opset 21) */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 1, 21);
    optest_attr_int(&t, 0, "output_dtype", ANVIL_DTYPE_INT16);
    const float big[3] = {40000.0f, -40000.0f, 1234.5f};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, big, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &scale, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_INT16);
    const int16_t want_i16[3] = {32767, -32768, 1234};
    assert_memory_equal(t.out[0].data, want_i16, sizeof want_i16);
    optest_end(&t);
}

/* Per-axis and blocked quantization against a loop over explicit coordinates. */
static void test_quantize_axis_and_blocked(void **state) {
    (void)state;
    enum { A = 2, B = 5, C = 3 };
    float x[A * B * C];
    for (int i = 0; i < A * B * C; i++) x[i] = (float)((int)rnd(2001) - 1000) / 37.0f;
    /* per axis 1 (length B) */
    float s1[B];
    uint8_t z1[B];
    for (int i = 0; i < B; i++) {
        s1[i] = 0.05f * (float)(i + 1);
        z1[i] = (uint8_t)(100 + 10 * i);
    }
    optest t;
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 3, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", -2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){A, B, C}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){B}, s1, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 1, (int64_t[]){B}, z1, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                int i = (a * B + b) * C + c;
                double v = rint((double)(x[i] / s1[b])) + z1[b];
                v = v < 0 ? 0 : v > 255 ? 255 : v;
                assert_int_equal(((uint8_t *)t.out[0].data)[i], (int)v);
            }
    optest_end(&t);
    /* blocked along axis 1 with block 2: scale shape [A, 3, C] */
    enum { NB = 3 };
    float s2[A * NB * C];
    int8_t z2[A * NB * C];
    for (int i = 0; i < A * NB * C; i++) {
        s2[i] = 0.01f * (float)(1 + rnd(20));
        z2[i] = (int8_t)((int)rnd(21) - 10);
    }
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 3, 1, 2, 21);
    optest_attr_int(&t, 0, "axis", 1);
    optest_attr_int(&t, 1, "block_size", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){A, B, C}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){A, NB, C}, s2, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT8, 3, (int64_t[]){A, NB, C}, z2, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                int i = (a * B + b) * C + c, k = (a * NB + b / 2) * C + c;
                double v = rint((double)(x[i] / s2[k])) + z2[k];
                v = v < -128 ? -128 : v > 127 ? 127 : v;
                assert_int_equal(((int8_t *)t.out[0].data)[i], (int)v);
            }
    optest_end(&t);
}

static void test_quantize_errors(void **state) {
    (void)state;
    const float x[6] = {0}, s[2] = {1, 1}, s1 = 1.0f;
    const uint8_t zp = 0;
    optest t;
    /* float8 zero point: refused by dtype */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 3, 1, 0, 21);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT8E4M3FN, 0, NULL, &zp, true);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "FLOAT8E4M3FN");
    optest_end(&t);
    /* per-axis scale of the wrong length */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, s, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "per-axis");
    optest_end(&t);
    /* axis out of range */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, s, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
    /* per-axis before opset 13 */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, s, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "opset 10");
    optest_end(&t);
    /* block_size before opset 21, and a negative one */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 1, 19);
    optest_attr_int(&t, 0, "block_size", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "block_size");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 1, 21);
    optest_attr_int(&t, 0, "block_size", -1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "block_size");
    optest_end(&t);
    /* blocked scale with the wrong number of blocks (6 / 4 rounds up to 2, not 3) */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 2, 21);
    optest_attr_int(&t, 0, "block_size", 4);
    optest_attr_int(&t, 1, "axis", 0);
    const float s3[3] = {1, 1, 1};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, s3, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "block_size 4");
    optest_end(&t);
    /* output_dtype disagreeing with the zero point */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 3, 1, 1, 21);
    optest_attr_int(&t, 0, "output_dtype", ANVIL_DTYPE_INT8);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &zp, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "output_dtype");
    optest_end(&t);
    /* the op does not exist before opset 10 */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 9");
    optest_end(&t);
    /* zero-size input runs and gives an empty output */
    optest_begin_opset(&t, IR_OP_QUANTIZELINEAR, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 3}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
}

/* ---- DequantizeLinear ------------------------------------------------------------------------ */

static void test_dequantize(void **state) {
    (void)state;
    const int8_t x[6] = {-128, -1, 0, 1, 100, 127};
    const float s[3] = {0.5f, 0.25f, 2.0f};
    const int8_t z[3] = {1, -2, 3};
    optest t;
    optest_begin_opset(&t, IR_OP_DEQUANTIZELINEAR, 3, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, s, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT8, 1, (int64_t[]){3}, z, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float want[6] = {(-128 - 1) * 0.5f, (-1 + 2) * 0.25f,  (0 - 3) * 2.0f,
                           (1 - 1) * 0.5f,    (100 + 2) * 0.25f, (127 - 3) * 2.0f};
    assert_int_equal(optest_compare_f32(t.out[0].data, want, 6, 0, 0), -1);
    optest_end(&t);
    /* INT32 input without a zero point; DOUBLE output through output_dtype (opset 23) */
    const int32_t xi[3] = {-100000, 5, 123456};
    const float s1 = 0.5f;
    optest_begin_opset(&t, IR_OP_DEQUANTIZELINEAR, 2, 1, 1, 23);
    optest_attr_int(&t, 0, "output_dtype", ANVIL_DTYPE_FLOAT64);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, xi, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_FLOAT64);
    const double *yd = t.out[0].data;
    assert_true(yd[0] == -50000.0 && yd[1] == 2.5 && yd[2] == 61728.0);
    optest_end(&t);
    /* errors: zero point dtype differs from x; float x; output_dtype before opset 23 */
    const uint8_t zu = 0;
    optest_begin_opset(&t, IR_OP_DEQUANTIZELINEAR, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &zu, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEQUANTIZELINEAR, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, &s1, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "input x");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEQUANTIZELINEAR, 2, 1, 1, 21);
    optest_attr_int(&t, 0, "output_dtype", ANVIL_DTYPE_FLOAT32);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){6}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &s1, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "output_dtype");
    optest_end(&t);
}

/* ---- DynamicQuantizeLinear ------------------------------------------------------------------- */

static void test_dynamic_quantize(void **state) {
    (void)state;
    /* the worked example of the ONNX operator documentation */
    const float x[6] = {0.0f, 2.0f, -3.0f, -2.5f, 1.34f, 0.5f};
    optest t;
    optest_begin_opset(&t, IR_OP_DYNAMICQUANTIZELINEAR, 1, 3, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){6}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const uint8_t want[6] = {153, 255, 0, 26, 221, 179};
    assert_memory_equal(t.out[0].data, want, 6);
    assert_true(fabsf(*(float *)t.out[1].data - 5.0f / 255.0f) < 1e-7f);
    assert_int_equal(*(uint8_t *)t.out[2].data, 153);
    optest_end(&t);
    /* all zeros: scale 0, zero point 0, zeros out (no division by zero) */
    const float zeros[3] = {0};
    optest_begin_opset(&t, IR_OP_DYNAMICQUANTIZELINEAR, 1, 3, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, zeros, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(*(float *)t.out[1].data == 0.0f);
    assert_int_equal(((uint8_t *)t.out[0].data)[1], 0);
    optest_end(&t);
    const double xd[1] = {1};
    optest_begin_opset(&t, IR_OP_DYNAMICQUANTIZELINEAR, 1, 3, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){1}, xd, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "DOUBLE");
    optest_end(&t);
}

/* ---- MatMulInteger / QLinearMatMul ----------------------------------------------------------- */

static void test_matmul_integer(void **state) {
    (void)state;
    enum { BA = 2, M = 3, K = 5, N = 4 };
    uint8_t a[BA * M * K], az[M] = {3, 100, 250};
    int8_t b[K * N], bz[N] = {1, -2, 3, 0};
    for (int i = 0; i < BA * M * K; i++) a[i] = (uint8_t)rnd(256);
    for (int i = 0; i < K * N; i++) b[i] = (int8_t)((int)rnd(256) - 128);
    optest t;
    optest_begin_opset(&t, IR_OP_MATMULINTEGER, 4, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 3, (int64_t[]){BA, M, K}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT8, 2, (int64_t[]){K, N}, b, false);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 1, (int64_t[]){M}, az, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT8, 1, (int64_t[]){N}, bz, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dtype, ANVIL_DTYPE_INT32);
    assert_int_equal(t.out[0].rank, 3);
    const int32_t *y = t.out[0].data;
    for (int bt = 0; bt < BA; bt++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                int64_t s = 0;
                for (int k = 0; k < K; k++)
                    s += (int64_t)(a[(bt * M + i) * K + k] - az[i]) * (b[k * N + j] - bz[j]);
                assert_int_equal(y[(bt * M + i) * N + j], s);
            }
    optest_end(&t);
    /* QLinearMatMul: y = round(acc * sa * sb / sy) + zy, saturated to uint8 */
    const float sa = 0.02f, sb = 0.01f, sy = 0.05f;
    const uint8_t zy = 128, aza = 100;
    const int8_t bzs = 0;
    optest_begin_opset(&t, IR_OP_QLINEARMATMUL, 8, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 2, (int64_t[]){M, K}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &sa, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &aza, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT8, 2, (int64_t[]){K, N}, b, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 0, NULL, &sb, true);
    optest_input(&t, 5, ANVIL_DTYPE_INT8, 0, NULL, &bzs, true);
    optest_input(&t, 6, ANVIL_DTYPE_FLOAT32, 0, NULL, &sy, true);
    optest_input(&t, 7, ANVIL_DTYPE_UINT8, 0, NULL, &zy, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const uint8_t *q = t.out[0].data;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += (int64_t)(a[i * K + k] - aza) * b[k * N + j];
            double v = rint((double)s * (double)sa * (double)sb / (double)sy) + zy;
            v = v < 0 ? 0 : v > 255 ? 255 : v;
            assert_true(abs((int)q[i * N + j] - (int)v) <= 0);
        }
    optest_end(&t);
}

/* 1-D times 1-D gives a scalar; a per-column parameter of a 1-D B must be a single value. */
static void test_qlinear_matmul_vectors(void **state) {
    (void)state;
    const uint8_t a[3] = {10, 20, 30}, za = 10, zy = 3;
    const int8_t b[3] = {1, -2, 4}, zb = 0, zb2[3] = {0, 0, 0};
    const float sa = 0.5f, sb = 0.25f, sy = 0.125f;
    optest t;
    optest_begin_opset(&t, IR_OP_QLINEARMATMUL, 8, 1, 0, 21);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 1, (int64_t[]){3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &sa, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &za, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT8, 1, (int64_t[]){3}, b, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 0, NULL, &sb, true);
    optest_input(&t, 5, ANVIL_DTYPE_INT8, 0, NULL, &zb, true);
    optest_input(&t, 6, ANVIL_DTYPE_FLOAT32, 0, NULL, &sy, true);
    optest_input(&t, 7, ANVIL_DTYPE_UINT8, 0, NULL, &zy, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 0);
    /* acc = 0*1 + 10*-2 + 20*4 = 60; 60 * 0.5 * 0.25 / 0.125 = 60; + 3 */
    assert_int_equal(*(uint8_t *)t.out[0].data, 63);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_QLINEARMATMUL, 8, 1, 0, 21);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 1, (int64_t[]){3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &sa, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &za, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT8, 1, (int64_t[]){3}, b, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 0, NULL, &sb, true);
    optest_input(&t, 5, ANVIL_DTYPE_INT8, 1, (int64_t[]){3}, zb2, true);
    optest_input(&t, 6, ANVIL_DTYPE_FLOAT32, 0, NULL, &sy, true);
    optest_input(&t, 7, ANVIL_DTYPE_UINT8, 0, NULL, &zy, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "B's zero point");
    optest_end(&t);
}

static void test_matmul_integer_errors(void **state) {
    (void)state;
    const uint8_t a[6] = {0};
    const float f[6] = {0};
    optest t;
    optest_begin_opset(&t, IR_OP_MATMULINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, f, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 2, (int64_t[]){3, 2}, a, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "input A");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_MATMULINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 3}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "must be equal");
    optest_end(&t);
    const uint8_t zp[4] = {0};
    optest_begin_opset(&t, IR_OP_MATMULINTEGER, 3, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 2, (int64_t[]){3, 2}, a, false);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 1, (int64_t[]){4}, zp, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "zero point");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_MATMULINTEGER, 2, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 2, (int64_t[]){3, 2}, a, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 9");
    optest_end(&t);
    /* zero-size K: all sums are 0 */
    optest_begin_opset(&t, IR_OP_MATMULINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 0}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 2, (int64_t[]){0, 2}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int i = 0; i < 4; i++) assert_int_equal(((int32_t *)t.out[0].data)[i], 0);
    optest_end(&t);
}

/* ---- ConvInteger / QLinearConv --------------------------------------------------------------- */

static void test_conv_integer(void **state) {
    (void)state;
    enum { C = 4, G = 2, M = 4, HI = 6, WI = 5, KH = 3, KW = 2, CG = C / G };
    const int64_t SH = 2, SW = 1, PT = 1, PL = 0, PB = 1, PR = 1;
    const int64_t OH = (HI + PT + PB - KH) / SH + 1, OW = (WI + PL + PR - KW) / SW + 1;
    uint8_t x[C * HI * WI], w[M * CG * KH * KW], xz = 7, wz[M] = {1, 50, 100, 200};
    for (size_t i = 0; i < sizeof x; i++) x[i] = (uint8_t)rnd(256);
    for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)rnd(256);
    optest t;
    optest_begin_opset(&t, IR_OP_CONVINTEGER, 4, 1, 3, 10);
    optest_attr_int(&t, 0, "group", G);
    optest_attr_ints(&t, 1, "pads", (int64_t[]){PT, PL, PB, PR}, 4);
    optest_attr_ints(&t, 2, "strides", (int64_t[]){SH, SW}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 4, (int64_t[]){1, C, HI, WI}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 4, (int64_t[]){M, CG, KH, KW}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &xz, true);
    optest_input(&t, 3, ANVIL_DTYPE_UINT8, 1, (int64_t[]){M}, wz, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], OH);
    assert_int_equal(t.out[0].dims[3], OW);
    const int32_t *y = t.out[0].data;
    for (int m = 0; m < M; m++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t s = 0;
                for (int c = 0; c < CG; c++)
                    for (int kh = 0; kh < KH; kh++)
                        for (int kw = 0; kw < KW; kw++) {
                            int64_t ih = oh * SH - PT + kh, iw = ow * SW - PL + kw;
                            if (ih < 0 || ih >= HI || iw < 0 || iw >= WI) continue;
                            int xc = (m / (M / G)) * CG + c;
                            s += (int64_t)(x[(xc * HI + ih) * WI + iw] - xz) *
                                 (w[((m * CG + c) * KH + kh) * KW + kw] - wz[m]);
                        }
                assert_int_equal(y[(m * OH + oh) * OW + ow], s);
            }
    optest_end(&t);
}

static void test_qlinear_conv(void **state) {
    (void)state;
    /* 1x1 kernel over 2 channels: y = round((x0 - zx) * w0 * sx * sw / sy + bias...) + zy */
    const uint8_t x[2 * 3] = {10, 20, 30, 40, 50, 255};
    const int8_t w[2] = {2, -1};
    const int32_t bias[1] = {100};
    const float sx = 0.5f, sw = 0.25f, sy = 0.125f;
    const uint8_t zx = 10, zy = 5;
    const int8_t zw = 0;
    optest t;
    optest_begin_opset(&t, IR_OP_QLINEARCONV, 9, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &sx, true);
    optest_input(&t, 2, ANVIL_DTYPE_UINT8, 0, NULL, &zx, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT8, 3, (int64_t[]){1, 2, 1}, w, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 0, NULL, &sw, true);
    optest_input(&t, 5, ANVIL_DTYPE_INT8, 0, NULL, &zw, true);
    optest_input(&t, 6, ANVIL_DTYPE_FLOAT32, 0, NULL, &sy, true);
    optest_input(&t, 7, ANVIL_DTYPE_UINT8, 0, NULL, &zy, true);
    optest_input(&t, 8, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, bias, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const uint8_t *y = t.out[0].data;
    for (int i = 0; i < 3; i++) {
        int acc = (x[i] - zx) * 2 + (x[3 + i] - zx) * -1 + 100;
        double v = rint(acc * 0.5 * 0.25 / 0.125) + 5;
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        assert_int_equal(y[i], (int)v);
    }
    optest_end(&t);
}

static void test_conv_integer_errors(void **state) {
    (void)state;
    const uint8_t x[16] = {0};
    optest t;
    /* rank 2 input */
    optest_begin_opset(&t, IR_OP_CONVINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 2, (int64_t[]){2, 2}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank >= 3");
    optest_end(&t);
    /* channel mismatch */
    optest_begin_opset(&t, IR_OP_CONVINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 2, 1}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "channels");
    optest_end(&t);
    /* kernel larger than the input */
    optest_begin_opset(&t, IR_OP_CONVINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 1, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 1, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "too small");
    optest_end(&t);
    /* int16 input */
    optest_begin_opset(&t, IR_OP_CONVINTEGER, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 3, (int64_t[]){1, 1, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 1, 1}, x, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT16");
    optest_end(&t);
    /* group 0 */
    optest_begin_opset(&t, IR_OP_CONVINTEGER, 2, 1, 1, 10);
    optest_attr_int(&t, 0, "group", 0);
    optest_input(&t, 0, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 1, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_UINT8, 3, (int64_t[]){1, 1, 1}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "group");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_rounding_and_saturation),
        cmocka_unit_test(test_quantize_axis_and_blocked),
        cmocka_unit_test(test_quantize_errors),
        cmocka_unit_test(test_dequantize),
        cmocka_unit_test(test_dynamic_quantize),
        cmocka_unit_test(test_matmul_integer),
        cmocka_unit_test(test_qlinear_matmul_vectors),
        cmocka_unit_test(test_matmul_integer_errors),
        cmocka_unit_test(test_conv_integer),
        cmocka_unit_test(test_qlinear_conv),
        cmocka_unit_test(test_conv_integer_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
