/* Cast, Identity and Dropout reference kernels. Cast: all 169 pairs of supported dtypes against
 * conversions written with core's generic element loads/stores (a different code path), the
 * NaN / infinity / out-of-range float -> integer results onnxruntime 1.31 gives on x86-64
 * (recorded from a run of its CPU provider), integer wrap-around, f16/bf16 rounding, threads and
 * refused dtypes. Identity: every dtype, symbolic shapes. Dropout: every opset form of ratio,
 * mask and training_mode. */
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

static const anvil_dtype all_dtypes[] = {
    ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16,
    ANVIL_DTYPE_BOOL,    ANVIL_DTYPE_INT8,    ANVIL_DTYPE_INT16,   ANVIL_DTYPE_INT32,
    ANVIL_DTYPE_INT64,   ANVIL_DTYPE_UINT8,   ANVIL_DTYPE_UINT16,  ANVIL_DTYPE_UINT32,
    ANVIL_DTYPE_UINT64,
};
#define N_DTYPES (sizeof all_dtypes / sizeof *all_dtypes)

static void cast_begin(optest *t, anvil_dtype from, anvil_dtype to, int rank, const int64_t *dims,
                       const void *x) {
    optest_begin(t, IR_OP_CAST, 1, 1, 1);
    optest_attr_int(t, 0, "to", to);
    optest_input(t, 0, from, rank, dims, x, false);
}

/* ---- all pairs ------------------------------------------------------------------------------ */

static bool is_signed_or_float(anvil_dtype dt) {
    return core_dtype_is_float(dt) || dt == ANVIL_DTYPE_INT8 || dt == ANVIL_DTYPE_INT16 ||
           dt == ANVIL_DTYPE_INT32 || dt == ANVIL_DTYPE_INT64;
}

static void test_all_pairs(void **state) {
    (void)state;
    /* values every source can hold exactly; fractions only for float sources, negatives only
     * for signed ones (they wrap when the target is unsigned) */
    static const double common[] = {0, 1, 2, 3, 5, 100, 127};
    static const double fractions[] = {0.5, 2.75, -1.5, -0.25, 99.99};
    static const double negatives[] = {-1, -7, -128};
    for (size_t s = 0; s < N_DTYPES; s++) {
        anvil_dtype from = all_dtypes[s];
        double vals[16];
        size_t n = 0;
        if (from == ANVIL_DTYPE_BOOL) {
            vals[n++] = 0;
            vals[n++] = 1;
            vals[n++] = 1;
        } else {
            for (size_t i = 0; i < sizeof common / sizeof *common; i++) vals[n++] = common[i];
            if (is_signed_or_float(from))
                for (size_t i = 0; i < 3; i++) vals[n++] = negatives[i];
            if (core_dtype_is_float(from))
                for (size_t i = 0; i < 5; i++) vals[n++] = fractions[i];
        }
        unsigned char src[16 * 8];
        for (size_t i = 0; i < n; i++) core_store_f64(from, src, i, vals[i]);
        for (size_t d = 0; d < N_DTYPES; d++) {
            anvil_dtype to = all_dtypes[d];
            unsigned char want[16 * 8];
            for (size_t i = 0; i < n; i++) {
                if (core_dtype_is_float(from))
                    core_store_f64(to, want, i, core_load_f64(from, src, i));
                else
                    core_store_i64(to, want, i, core_load_i64(from, src, i));
            }
            optest t;
            cast_begin(&t, from, to, 1, (int64_t[]){(int64_t)n}, src);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            assert_int_equal(t.out_info[0].dtype, to);
            if (memcmp(t.out[0].data, want, n * anvil_dtype_size(to)) != 0) {
                fprintf(stderr, "Cast %s -> %s differs\n", anvil_dtype_name(from),
                        anvil_dtype_name(to));
                fail();
            }
            optest_end(&t);
        }
    }
}

/* ---- float -> integer edge values, as onnxruntime gives them -------------------------------- */

static void test_float_to_int_edges(void **state) {
    (void)state;
    const float xf[13] = {NAN,   INFINITY, -INFINITY, 300.7f, -300.7f, 3e9f, -3e9f,
                          1e20f, -1e20f,   2.5f,      -2.5f,  255.9f,  -0.9f};
    double xd[13];
    for (int i = 0; i < 13; i++) xd[i] = xf[i];
    const int8_t w_i8[13] = {0, 0, 0, 44, -44, 0, 0, 0, 0, 2, -2, -1, 0};
    const uint8_t w_u8[13] = {0, 0, 0, 44, 212, 0, 0, 0, 0, 2, 254, 255, 0};
    const int16_t w_i16[13] = {0, 0, 0, 300, -300, 0, 0, 0, 0, 2, -2, 255, 0};
    const uint16_t w_u16[13] = {0, 0, 0, 300, 65236, 0, 0, 0, 0, 2, 65534, 255, 0};
    const int32_t M = INT32_MIN;
    const int32_t w_i32[13] = {M, M, M, 300, -300, M, M, M, M, 2, -2, 255, 0};
    const uint32_t w_u32[13] = {2147483648u,
                                0,
                                2147483648u,
                                300,
                                4294966996u,
                                3000000000u,
                                2147483648u,
                                0,
                                2147483648u,
                                2,
                                4294967294u,
                                255,
                                0};
    const int64_t L = INT64_MIN;
    const int64_t w_i64[13] = {L, L, L, 300, -300, 3000000000, -3000000000, L, L, 2, -2, 255, 0};
    const uint64_t H = 1ull << 63;
    const uint64_t w_u64[13] = {H,
                                0,
                                H,
                                300,
                                18446744073709551316ull,
                                3000000000ull,
                                18446744070709551616ull,
                                0,
                                H,
                                2,
                                18446744073709551614ull,
                                255,
                                0};
    const uint8_t w_bool[13] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    struct {
        anvil_dtype to;
        const void *want;
    } cases[] = {
        {ANVIL_DTYPE_INT8, w_i8},    {ANVIL_DTYPE_UINT8, w_u8},   {ANVIL_DTYPE_INT16, w_i16},
        {ANVIL_DTYPE_UINT16, w_u16}, {ANVIL_DTYPE_INT32, w_i32},  {ANVIL_DTYPE_UINT32, w_u32},
        {ANVIL_DTYPE_INT64, w_i64},  {ANVIL_DTYPE_UINT64, w_u64}, {ANVIL_DTYPE_BOOL, w_bool},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int src = 0; src < 3; src++) {
            uint16_t xh[13];
            for (int i = 0; i < 13; i++) xh[i] = core_f32_to_bf16(xf[i]);
            optest t;
            /* bf16 cannot hold 300.7 or 3e9 exactly; only compare where it rounds to the same
             * integer part */
            anvil_dtype from = src == 0   ? ANVIL_DTYPE_FLOAT32
                               : src == 1 ? ANVIL_DTYPE_FLOAT64
                                          : ANVIL_DTYPE_BFLOAT16;
            cast_begin(&t, from, cases[c].to, 1, (int64_t[]){13},
                       src == 0   ? (const void *)xf
                       : src == 1 ? (const void *)xd
                                  : xh);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            size_t es = anvil_dtype_size(cases[c].to);
            for (int i = 0; i < 13; i++) {
                if (src == 2 && !(i <= 2 || i == 9 || i == 10 || i == 12 || i == 7 || i == 8))
                    continue;
                if (memcmp((char *)t.out[0].data + i * es, (const char *)cases[c].want + i * es,
                           es) != 0) {
                    fprintf(stderr, "%s -> %s at %d (%g)\n", anvil_dtype_name(from),
                            anvil_dtype_name(cases[c].to), i, (double)xf[i]);
                    fail();
                }
            }
            optest_end(&t);
        }
    }

    /* more unsigned boundaries (onnxruntime, float source, 8 at a time: onnxruntime's scalar
     * tail loop gives other UINT32 values for out-of-range inputs than its vector loop; anvil
     * follows the vector loop) */
    const float uf[8] = {2.2e9f, -2.1e9f, 4.2e9f, 4.3e9f, -5e9f, 1.5e19f, 1.9e19f, -9.3e18f};
    const uint32_t w32[8] = {2200000000u, 2194967296u, 4200000000u, 0,
                             2147483648u, 0,           0,           2147483648u};
    const uint64_t w64[8] = {2200000000ull,
                             18446744071609551616ull,
                             4200000000ull,
                             4300000256ull,
                             18446744068709551616ull,
                             15000000520515485696ull,
                             0,
                             H};
    optest t;
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_UINT32, 1, (int64_t[]){8}, uf);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, w32, sizeof w32);
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_UINT64, 1, (int64_t[]){8}, uf);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, w64, sizeof w64);
    optest_end(&t);
}

static void test_int_and_half_conversions(void **state) {
    (void)state;
    optest t;
    int64_t i64[4] = {(1ll << 32) + 5, -1, 300, 256};
    cast_begin(&t, ANVIL_DTYPE_INT64, ANVIL_DTYPE_INT32, 1, (int64_t[]){4}, i64);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){5, -1, 300, 256}), 4 * sizeof(int32_t));
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_INT64, ANVIL_DTYPE_UINT8, 1, (int64_t[]){4}, i64);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){5, 255, 44, 0}), 4);
    optest_end(&t);
    /* to bool looks at the whole value, not the low byte */
    cast_begin(&t, ANVIL_DTYPE_INT64, ANVIL_DTYPE_BOOL, 1, (int64_t[]){4}, i64);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 1, 1, 1}), 4);
    optest_end(&t);
    uint64_t u64[2] = {UINT64_MAX, 1ull << 63};
    cast_begin(&t, ANVIL_DTYPE_UINT64, ANVIL_DTYPE_INT8, 1, (int64_t[]){2}, u64);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int8_t[]){-1, 0}), 2);
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_UINT64, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, u64);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(((float *)t.out[0].data)[0] == 18446744073709551616.0f);
    assert_true(((float *)t.out[0].data)[1] == 9223372036854775808.0f);
    optest_end(&t);

    /* f32 -> f16 / bf16 round to nearest even; overflow goes to infinity; NaN stays NaN */
    float f[6] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 65520.0f, -1e10f, NAN, 0x1p-24f};
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){6}, f);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const uint16_t *h = t.out[0].data;
    assert_true(core_f16_to_f32(h[0]) == 1.0f);
    assert_true(core_f16_to_f32(h[1]) == 1.0f + 0x1p-9f);
    assert_true(isinf(core_f16_to_f32(h[2])) && core_f16_to_f32(h[2]) > 0);
    assert_true(isinf(core_f16_to_f32(h[3])) && core_f16_to_f32(h[3]) < 0);
    assert_true(isnan(core_f16_to_f32(h[4])));
    assert_true(core_f16_to_f32(h[5]) == 0x1p-24f); /* smallest f16 subnormal */
    optest_end(&t);
    float g[2] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f};
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_BFLOAT16, 1, (int64_t[]){2}, g);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    h = t.out[0].data;
    assert_true(core_bf16_to_f32(h[0]) == 1.0f && core_bf16_to_f32(h[1]) == 1.0f + 0x1p-6f);
    optest_end(&t);
    /* f64 -> f16 goes through float like onnxruntime (1 + 2^-11 + 2^-40 becomes 1.0 there) */
    double dd[2] = {1.0 + 0x1p-11 + 0x1p-40, 65519.99};
    cast_begin(&t, ANVIL_DTYPE_FLOAT64, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, dd);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    h = t.out[0].data;
    assert_true(core_f16_to_f32(h[0]) == 1.0f && core_f16_to_f32(h[1]) == 65504.0f);
    optest_end(&t);
    /* f16 <-> bf16 */
    uint16_t hh[2] = {core_f32_to_f16(0.1f), core_f32_to_f16(-3.0f)};
    cast_begin(&t, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16, 1, (int64_t[]){2}, hh);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    h = t.out[0].data;
    assert_int_equal(h[0], core_f32_to_bf16(core_f16_to_f32(hh[0])));
    assert_true(core_bf16_to_f32(h[1]) == -3.0f);
    optest_end(&t);

    /* same dtype copies; shapes (zero-size, scalar, symbolic kept) */
    int32_t same[3] = {1, -2, 3};
    cast_begin(&t, ANVIL_DTYPE_INT32, ANVIL_DTYPE_INT32, 1, (int64_t[]){3}, same);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, same, sizeof same);
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_INT32, ANVIL_DTYPE_FLOAT64, 2, (int64_t[]){0, 3}, same);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.d[0], 0);
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_INT32, ANVIL_DTYPE_FLOAT64, 0, NULL, same);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(((double *)t.out[0].data)[0] == 1.0);
    optest_end(&t);
}

static void test_cast_errors(void **state) {
    (void)state;
    float x[2] = {1, 2};
    optest t;
    optest_begin(&t, IR_OP_CAST, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'to'");
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, (anvil_dtype)99, 1, (int64_t[]){2}, x);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "not an ONNX dtype");
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_STRING, 1, (int64_t[]){2}, x);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "STRING");
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT8E4M3FN, 1, (int64_t[]){2}, x);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "FLOAT8E4M3FN");
    optest_end(&t);
    cast_begin(&t, ANVIL_DTYPE_COMPLEX64, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, x);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "input dtype COMPLEX64");
    optest_end(&t);
    optest_begin(&t, IR_OP_CAST, 1, 1, 1);
    optest_attr_float(&t, 0, "to", 1.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "to");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 2, 19);
    optest_attr_int(&t, 0, "to", ANVIL_DTYPE_INT32);
    optest_attr_string(&t, 1, "saturate", "yes");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "saturate");
    optest_end(&t);
    /* opset 1 names the target type */
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 1, 1);
    optest_attr_string(&t, 0, "to", "INT64");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_INT64);
    assert_memory_equal(t.out[0].data, ((int64_t[]){1, 2}), 2 * sizeof(int64_t));
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 1, 1);
    optest_attr_string(&t, 0, "to", "REAL");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "REAL");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 1, 9);
    optest_attr_string(&t, 0, "to", "INT64");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "to");
    optest_end(&t);
    /* saturate=0 is accepted and means nothing for non-float8 targets */
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 2, 19);
    optest_attr_int(&t, 0, "to", ANVIL_DTYPE_INT32);
    optest_attr_int(&t, 1, "saturate", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){1, 2}), 2 * sizeof(int32_t));
    optest_end(&t);
    /* opset 24 adds round_mode (float8e8m0 targets only): a valid value changes nothing here,
     * a misspelt one is refused */
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 2, 24);
    optest_attr_int(&t, 0, "to", ANVIL_DTYPE_INT32);
    optest_attr_string(&t, 1, "round_mode", "nearest");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((int32_t[]){1, 2}), 2 * sizeof(int32_t));
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAST, 1, 1, 2, 25);
    optest_attr_int(&t, 0, "to", ANVIL_DTYPE_INT32);
    optest_attr_string(&t, 1, "round_mode", "sideways");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "round_mode");
    optest_end(&t);
}

static void test_cast_threads(void **state) {
    (void)state;
    enum { N = 70001 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = (float)(i - N / 2) * 0.37f;
    uint16_t *serial = malloc(N * sizeof *serial);
    core_pool *pool;
    assert_int_equal(core_pool_create(4, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    optest t;
    cast_begin(&t, ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){N}, x);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    memcpy(serial, t.out[0].data, N * sizeof *serial);
    for (int i = 0; i < N; i += 101) assert_int_equal(serial[i], core_f32_to_f16(x[i]));
    memset(t.out[0].data, 0, N * sizeof(uint16_t));
    const op_tensor *ins[1] = {&t.in[0]};
    op_tensor *outs[1] = {&t.out[0]};
    assert_int_equal(op_get(IR_OP_CAST)->run(optest_node(&t), ins, 1, outs, 1, &ctx), ANVIL_OK);
    assert_memory_equal(t.out[0].data, serial, N * sizeof(uint16_t));
    optest_end(&t);
    core_pool_free(pool);
    free(x);
    free(serial);
}

/* ---- Identity ------------------------------------------------------------------------------- */

static void test_identity(void **state) {
    (void)state;
    assert_true(op_get(IR_OP_IDENTITY)->flags & OP_ALIAS_0);
    unsigned char bytes[6 * 8];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 37 + 1);
    for (size_t d = 0; d < N_DTYPES; d++) {
        anvil_dtype dt = all_dtypes[d];
        if (dt == ANVIL_DTYPE_BOOL)
            for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i & 1);
        optest t;
        optest_begin(&t, IR_OP_IDENTITY, 1, 1, 0);
        optest_input(&t, 0, dt, 2, (int64_t[]){2, 3}, bytes, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out_info[0].dtype, dt);
        assert_int_equal(t.out_info[0].shape.d[1], 3);
        assert_memory_equal(t.out[0].data, bytes, 6 * anvil_dtype_size(dt));
        optest_end(&t);
    }
    /* symbolic dims pass through */
    optest t;
    optest_begin(&t, IR_OP_IDENTITY, 1, 1, 0);
    int32_t sym;
    assert_int_equal(ir_graph_add_sym(t.g, "batch", &sym), ANVIL_OK);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, bytes, false);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in, out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    in.dtype = ANVIL_DTYPE_FLOAT32;
    in.shape.rank = 2;
    in.shape.d[0] = -1;
    in.shape.sym[0] = sym;
    in.shape.d[1] = 7;
    in.shape.sym[1] = -1;
    assert_int_equal(op_get(IR_OP_IDENTITY)->infer(t.g, optest_node(&t), &in, 1, &out, 1),
                     ANVIL_OK);
    assert_int_equal(out.shape.sym[0], sym);
    assert_int_equal(out.shape.d[1], 7);
    optest_end(&t);

    optest_begin(&t, IR_OP_IDENTITY, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_STRING, 1, (int64_t[]){2}, bytes, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "STRING");
    optest_end(&t);
}

/* ---- Dropout -------------------------------------------------------------------------------- */

static void test_dropout(void **state) {
    (void)state;
    assert_true(op_get(IR_OP_DROPOUT)->flags & OP_ALIAS_0);
    float x[6] = {1, -2, 3, -4, 5, -6};
    int64_t dims[2] = {2, 3};
    optest t;

    /* opset 7: ratio attribute, mask of the data type, all ones */
    optest_begin_opset(&t, IR_OP_DROPOUT, 1, 2, 1, 7);
    optest_attr_float(&t, 0, "ratio", 0.3f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, x, sizeof x);
    assert_int_equal(t.out_info[1].dtype, ANVIL_DTYPE_FLOAT32);
    assert_memory_equal(t.out[1].data, ((float[]){1, 1, 1, 1, 1, 1}), sizeof x);
    optest_end(&t);

    /* opset 10: bool mask */
    optest_begin_opset(&t, IR_OP_DROPOUT, 1, 2, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[1].dtype, ANVIL_DTYPE_BOOL);
    assert_memory_equal(t.out[1].data, ((uint8_t[]){1, 1, 1, 1, 1, 1}), 6);
    optest_end(&t);

    /* opset 13: ratio and training_mode inputs */
    float ratio = 0.2f;
    uint8_t off = 0, on = 1;
    optest_begin_opset(&t, IR_OP_DROPOUT, 3, 2, 1, 13);
    optest_attr_int(&t, 0, "seed", 42);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &ratio, true);
    optest_input(&t, 2, ANVIL_DTYPE_BOOL, 0, NULL, &off, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, x, sizeof x);
    assert_memory_equal(t.out[1].data, ((uint8_t[]){1, 1, 1, 1, 1, 1}), 6);
    optest_end(&t);

    /* f64 data, one output */
    double xd[3] = {0.5, -1, 2};
    optest_begin_opset(&t, IR_OP_DROPOUT, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 1, (int64_t[]){3}, xd, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, xd, sizeof xd);
    optest_end(&t);

    /* training mode: refused at load when known, at run time otherwise */
    optest_begin_opset(&t, IR_OP_DROPOUT, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_BOOL, 0, NULL, &on, true);
    assert_int_equal(optest_infer(&t), ANVIL_ERR_UNSUPPORTED);
    assert_non_null(strstr(anvil_last_error(), "training mode"));
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DROPOUT, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_BOOL, 0, NULL, &on, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "training mode");
    optest_end(&t);

    /* bad ratios, inputs, dtypes */
    optest_begin_opset(&t, IR_OP_DROPOUT, 1, 1, 1, 7);
    optest_attr_float(&t, 0, "ratio", 1.5f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "[0, 1)");
    optest_end(&t);
    float one = 1.0f;
    optest_begin_opset(&t, IR_OP_DROPOUT, 2, 1, 0, 12);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &one, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "ratio");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DROPOUT, 2, 1, 0, 12);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &one, false); /* only seen at run time */
    expect_status(&t, ANVIL_ERR_RUNTIME, "ratio");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DROPOUT, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &ratio, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset >= 12");
    optest_end(&t);
    int32_t tm = 0;
    optest_begin_opset(&t, IR_OP_DROPOUT, 3, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 0, NULL, &tm, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "must be BOOL");
    optest_end(&t);
    int32_t xi[6] = {0};
    optest_begin_opset(&t, IR_OP_DROPOUT, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, dims, xi, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DROPOUT, 1, 3, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "outputs");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_pairs),
        cmocka_unit_test(test_float_to_int_edges),
        cmocka_unit_test(test_int_and_half_conversions),
        cmocka_unit_test(test_cast_errors),
        cmocka_unit_test(test_cast_threads),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
