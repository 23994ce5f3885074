/* BitCast, TensorScatter, CausalConvWithState and TfIdfVectorizer reference
 * kernels: results against hand-derived values or a naive recomputation written
 * here (explicit concatenation for the causal conv), plus the errors bad models
 * must produce (status, message and node name). */
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

/* ---- BitCast ---- */

static void bitcast_case(anvil_dtype from, int64_t to, int opset, const void *x, anvil_status want,
                         const char *msg, void *y, size_t ybytes) {
    optest t;
    optest_begin_opset(&t, IR_OP_BITCAST, 1, 1, to >= 0 ? 1 : 0, opset);
    if (to >= 0) optest_attr_int(&t, 0, "to", to);
    optest_input(&t, 0, from, 1, (int64_t[]){2}, x, false);
    if (want == ANVIL_OK) {
        assert_int_equal(optest_run(&t), ANVIL_OK);
        memcpy(y, t.out[0].data, ybytes);
    } else {
        expect_status(&t, want, msg);
    }
    optest_end(&t);
}

static void test_bitcast(void **state) {
    (void)state;
    /* IEEE-754: 1.0f is 0x3F800000 and -2.5f is 0xC0200000. */
    float xf[2] = {1.0f, -2.5f};
    int32_t yi[2] = {0, 0};
    bitcast_case(ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_INT32, 26, xf, ANVIL_OK, NULL, yi, sizeof yi);
    assert_int_equal((uint32_t)yi[0], 0x3F800000u);
    assert_int_equal((uint32_t)yi[1], 0xC0200000u);
    int8_t xs[2] = {-1, 5};
    uint8_t yu[2] = {0, 0};
    bitcast_case(ANVIL_DTYPE_INT8, ANVIL_DTYPE_UINT8, 26, xs, ANVIL_OK, NULL, yu, sizeof yu);
    assert_int_equal(yu[0], 255);
    assert_int_equal(yu[1], 5);

    bitcast_case(ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_INT16, 26, xf, ANVIL_ERR_SHAPE, "same bit width",
                 NULL, 0);
    bitcast_case(ANVIL_DTYPE_FLOAT32, -1, 26, xf, ANVIL_ERR_INVALID_MODEL, "'to' is missing", NULL,
                 0);
    bitcast_case(ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_INT32, 25, xf, ANVIL_ERR_UNSUPPORTED, "opset 26",
                 NULL, 0);
    bitcast_case(ANVIL_DTYPE_UINT8, ANVIL_DTYPE_INT4, 26, xs, ANVIL_ERR_UNSUPPORTED, "whole-byte",
                 NULL, 0);
    bitcast_case(ANVIL_DTYPE_UINT8, 99, 26, xs, ANVIL_ERR_UNSUPPORTED, "whole-byte", NULL, 0);
}

/* ---- TensorScatter ---- */

/* cache [2,4,2] (values 100+i), update [2,2,2] (values i), along axis 1. */
static void tscat_setup(optest *t, const char *mode, int64_t axis, const float *cache,
                        const float *upd, const int64_t *idx) {
    optest_begin_opset(t, IR_OP_TENSORSCATTER, idx ? 3 : 2, 1, 2, 24);
    optest_attr_string(t, 0, "mode", mode);
    optest_attr_int(t, 1, "axis", axis);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 4, 2}, cache, false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 2, 2}, upd, false);
    if (idx) optest_input(t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, idx, false);
}

static void test_tensorscatter(void **state) {
    (void)state;
    float cache[16], upd[8];
    for (int i = 0; i < 16; i++) cache[i] = 100.0f + (float)i;
    for (int i = 0; i < 8; i++) upd[i] = (float)i;
    optest t;

    /* Circular: batch 0 writes rows 1,2; batch 1 writes rows 3,0 (wrapping). */
    tscat_setup(&t, "circular", -2, cache, upd, (int64_t[]){1, 3});
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float want_c[16] = {100, 101, 0, 1, 2, 3, 106, 107, 6, 7, 110, 111, 112, 113, 4, 5};
    assert_int_equal(optest_compare_f32(t.out[0].data, want_c, 16, 0, 0), -1);
    optest_end(&t);

    /* No write_indices: both batches write rows 0,1. */
    tscat_setup(&t, "linear", 1, cache, upd, NULL);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float want_l[16] = {0, 1, 2, 3, 104, 105, 106, 107, 4, 5, 6, 7, 112, 113, 114, 115};
    assert_int_equal(optest_compare_f32(t.out[0].data, want_l, 16, 0, 0), -1);
    optest_end(&t);

    tscat_setup(&t, "linear", 1, cache, upd, (int64_t[]){1, 3});
    expect_status(&t, ANVIL_ERR_RUNTIME, "outside the cache");
    optest_end(&t);
    tscat_setup(&t, "linear", 1, cache, upd, (int64_t[]){-1, 0});
    expect_status(&t, ANVIL_ERR_RUNTIME, "outside the cache");
    optest_end(&t);
    tscat_setup(&t, "ring", 1, cache, upd, NULL);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'linear' or 'circular'");
    optest_end(&t);
    tscat_setup(&t, "linear", 0, cache, upd, NULL);
    expect_status(&t, ANVIL_ERR_SHAPE, "batch");
    optest_end(&t);
    tscat_setup(&t, "linear", 3, cache, upd, NULL);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
    /* Along axis 2 the update [2,2,2] differs from the cache [2,4,2] off the
     * sequence axis. */
    tscat_setup(&t, "linear", 2, cache, upd, NULL);
    expect_status(&t, ANVIL_ERR_SHAPE, "must match past_cache");
    optest_end(&t);

    /* Update longer than the cache. */
    optest_begin_opset(&t, IR_OP_TENSORSCATTER, 2, 1, 0, 24);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 2, 2}, upd, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 4, 2}, cache, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "holds only 2");
    optest_end(&t);

    /* int32 write_indices; dtype mismatch; old opset. */
    int32_t idx32[2] = {0, 0};
    optest_begin_opset(&t, IR_OP_TENSORSCATTER, 3, 1, 0, 24);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 4, 2}, cache, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 2, 2}, upd, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, idx32, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "INT64");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_TENSORSCATTER, 2, 1, 0, 24);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 4, 2}, cache, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 2, 2}, upd, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "differs from past_cache");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_TENSORSCATTER, 2, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 4, 2}, cache, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 2, 2}, upd, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 24");
    optest_end(&t);
}

/* ---- CausalConvWithState ---- */

enum { CB = 2, CC = 2, CL = 3, CK = 3 };

static void test_causal_conv(void **state) {
    (void)state;
    float x[CB * CC * CL], w[CC * CK], bias[CC] = {0.5f, -1.0f}, past[CB * CC * (CK - 1)];
    for (int i = 0; i < CB * CC * CL; i++) x[i] = 0.25f * (float)(i % 7) - 0.5f;
    for (int i = 0; i < CC * CK; i++) w[i] = 0.1f * (float)(i + 1);
    for (int i = 0; i < CB * CC * (CK - 1); i++) past[i] = -0.3f * (float)i;
    for (int silu = 0; silu < 2; silu++) {
        optest t;
        optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 4, 2, 1, 27);
        optest_attr_string(&t, 0, "activation", silu ? "silu" : "none");
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CL}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 1, CK}, w, false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){CC}, bias, false);
        optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CK - 1}, past, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[1].dims[2], CK - 1);
        float want_y[CB * CC * CL], want_s[CB * CC * (CK - 1)];
        for (int b = 0; b < CB; b++) {
            for (int c = 0; c < CC; c++) {
                /* Build the concatenation explicitly, then slide the kernel over it. */
                float cat[CK - 1 + CL];
                for (int i = 0; i < CK - 1; i++) cat[i] = past[(b * CC + c) * (CK - 1) + i];
                for (int i = 0; i < CL; i++) cat[CK - 1 + i] = x[(b * CC + c) * CL + i];
                for (int l = 0; l < CL; l++) {
                    float acc = bias[c];
                    for (int j = 0; j < CK; j++) acc += w[c * CK + j] * cat[l + j];
                    want_y[(b * CC + c) * CL + l] = silu ? acc / (1.0f + expf(-acc)) : acc;
                }
                for (int i = 0; i < CK - 1; i++) want_s[(b * CC + c) * (CK - 1) + i] = cat[CL + i];
            }
        }
        assert_int_equal(optest_compare_f32(t.out[0].data, want_y, CB * CC * CL, 1e-5f, 1e-6f), -1);
        assert_int_equal(optest_compare_f32(t.out[1].data, want_s, CB * CC * (CK - 1), 0, 0), -1);
        optest_end(&t);
    }

    /* Without past_state the history is zeros: output 0 at l=0 is bias + w[k-1] *
     * x[0]. */
    optest t;
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 2, 1, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CL}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 1, CK}, w, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(fabsf(((float *)t.out[0].data)[0] - w[CK - 1] * x[0]) < 1e-6f);
    optest_end(&t);

    /* Errors. */
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 2, 1, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CL}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 2, 1}, w, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "depthwise");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 2, 1, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){CC, CL}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 1, CK}, w, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 3");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 2, 1, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CL}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 1, 0}, w, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "kernel size is 0");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 4, 2, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CL}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 1, CK}, w, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CK}, past, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "past_state dim 2");
    optest_end(&t);
    int32_t xi[CB * CC * CL] = {0};
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 2, 1, 0, 27);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){CB, CC, CL}, xi, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 3, (int64_t[]){CC, 1, CK}, xi, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CAUSALCONVWITHSTATE, 2, 1, 1, 27);
    optest_attr_string(&t, 0, "activation", "relu");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CB, CC, CL}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){CC, 1, CK}, w, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "'relu'");
    optest_end(&t);
}

/* ---- TfIdfVectorizer ---- */

/* Pool: bigrams [94,17] -> column 1 and [17,36] -> column 0 (the spec's
 * example). */
static void tfidf_setup(optest *t, const char *mode, int64_t skip, const float *weights,
                        anvil_dtype dt, int rank, const int64_t *dims, const void *x,
                        const int64_t *indexes, size_t n_indexes) {
    optest_begin_opset(t, IR_OP_TFIDFVECTORIZER, 1, 1, weights ? 8 : 7, 9);
    optest_attr_string(t, 0, "mode", mode);
    optest_attr_int(t, 1, "min_gram_length", 2);
    optest_attr_int(t, 2, "max_gram_length", 2);
    optest_attr_int(t, 3, "max_skip_count", skip);
    optest_attr_ints(t, 4, "pool_int64s", (int64_t[]){94, 17, 17, 36}, 4);
    optest_attr_ints(t, 5, "ngram_counts", (int64_t[]){0, 0}, 2);
    optest_attr_ints(t, 6, "ngram_indexes", indexes, n_indexes);
    if (weights) optest_attr_floats(t, 7, "weights", weights, 2);
    optest_input(t, 0, dt, rank, dims, x, false);
}

static void test_tfidf(void **state) {
    (void)state;
    const int64_t idx[2] = {1, 0};
    /* Row 0: [94,17] twice and [17,36] once, all adjacent. Row 1: [17,36]
     * adjacent, [94,17] only with one skipped token between. */
    const int32_t x[2][7] = {{94, 17, 36, 12, 28, 94, 17}, {94, 0, 17, 36, 5, 5, 5}};
    const int64_t dims[2] = {2, 7};
    optest t;

    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_INT32, 2, dims, x, idx, 2);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){1, 2, 1, 0}, 4, 0, 0), -1);
    optest_end(&t);

    tfidf_setup(&t, "TF", 1, NULL, ANVIL_DTYPE_INT32, 2, dims, x, idx, 2);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){1, 2, 1, 1}, 4, 0, 0), -1);
    optest_end(&t);

    const float wts[2] = {0.5f, 3.0f};
    tfidf_setup(&t, "TFIDF", 1, wts, ANVIL_DTYPE_INT32, 2, dims, x, idx, 2);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){0.5f, 6, 0.5f, 3}, 4, 0, 0), -1);
    optest_end(&t);

    tfidf_setup(&t, "IDF", 0, wts, ANVIL_DTYPE_INT32, 2, dims, x, idx, 2);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){0.5f, 3, 0.5f, 0}, 4, 0, 0), -1);
    optest_end(&t);

    /* 1-D int64 input gives a 1-D output. */
    const int64_t x64[4] = {17, 36, 94, 17};
    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, x64, idx, 2);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 1);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){1, 1}, 2, 0, 0), -1);
    optest_end(&t);

    /* Errors. */
    const float xf[4] = {0};
    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, xf, idx, 2);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32 or INT64");
    optest_end(&t);
    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_INT64, 3, (int64_t[]){1, 1, 4}, x64, idx, 2);
    expect_status(&t, ANVIL_ERR_SHAPE, "[N, C]");
    optest_end(&t);
    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, x64, idx, 1);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "ngram_indexes has 1 entries");
    optest_end(&t);
    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, x64, (int64_t[]){0, -1},
                2);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "ngram_indexes[1]");
    optest_end(&t);
    tfidf_setup(&t, "BM25", 0, NULL, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, x64, idx, 2);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'mode'");
    optest_end(&t);
    tfidf_setup(&t, "TF", -1, NULL, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, x64, idx, 2);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "max_skip_count");
    optest_end(&t);
    tfidf_setup(&t, "TF", 0, NULL, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, x64, idx, 2);
    optest_attr(&t, 1, "pool_strings", IR_ATTR_STRINGS);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "pool_strings");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitcast),
        cmocka_unit_test(test_tensorscatter),
        cmocka_unit_test(test_causal_conv),
        cmocka_unit_test(test_tfidf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
