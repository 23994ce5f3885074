/* Normalizations (Layer, RMS, Instance, Group 18/21, Lp, MeanVariance, LRN), the pooling extras
 * (GlobalMaxPool, LpPool, MaxUnpool) and the losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss): reference kernels against naive loops and hand-worked values written
 * here, and the errors bad models must produce. */
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

/* Normalizes each group of `blk` consecutive elements: (x - mean) / sqrt(var + eps). */
static void naive_norm(const float *x, size_t groups, size_t blk, double eps, bool rms, double *y) {
    for (size_t g = 0; g < groups; g++) {
        double m = 0, v = 0;
        for (size_t e = 0; e < blk; e++) m += x[g * blk + e];
        m = rms ? 0 : m / (double)blk;
        for (size_t e = 0; e < blk; e++) v += (x[g * blk + e] - m) * (x[g * blk + e] - m);
        v /= (double)blk;
        for (size_t e = 0; e < blk; e++) y[g * blk + e] = (x[g * blk + e] - m) / sqrt(v + eps);
    }
}

static const float X8[8] = {0.5f, -1, 2, 3, -0.25f, 4, 1, -2};

static void test_layer_rms(void **state) {
    (void)state;
    float sc[4] = {1, 2, -1, 0.5f}, bi[4] = {0.1f, 0, -0.2f, 1};
    double ref[8];
    naive_norm(X8, 2, 4, 1e-3, false, ref);
    optest t;
    optest_begin_opset(&t, IR_OP_LAYERNORMALIZATION, 3, 3, 2, 17);
    optest_attr_int(&t, 0, "axis", 1);
    optest_attr_float(&t, 1, "epsilon", 1e-3f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 2, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, sc, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, bi, false); /* broadcasts */
    assert_int_equal(optest_run(&t), ANVIL_OK);
    float want[8];
    for (int i = 0; i < 8; i++) want[i] = (float)(ref[i] * sc[i % 4] + bi[i % 2]);
    assert_true(optest_compare_f32(t.out[0].data, want, 8, 1e-5f, 1e-6f) < 0);
    assert_int_equal(t.out[1].rank, 3);
    assert_int_equal(t.out[1].dims[0], 2);
    assert_int_equal(t.out[1].dims[1], 1);
    float mean0 = (0.5f - 1 + 2 + 3) / 4;
    assert_true(fabsf(((float *)t.out[1].data)[0] - mean0) < 1e-6f);
    optest_end(&t);

    naive_norm(X8, 4, 2, 1e-5, true, ref);
    optest_begin_opset(&t, IR_OP_RMSNORMALIZATION, 2, 1, 0, 23);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, sc, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int i = 0; i < 8; i++) want[i] = (float)(ref[i] * sc[i % 2]);
    assert_true(optest_compare_f32(t.out[0].data, want, 8, 1e-5f, 1e-6f) < 0);
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_RMSNORMALIZATION, 2, 1, 0, 22);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, sc, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 23");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LAYERNORMALIZATION, 2, 1, 0, 17);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, sc, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "broadcast");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LAYERNORMALIZATION, 2, 1, 1, 17);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, sc, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
}

static void test_instance_group(void **state) {
    (void)state;
    /* X: N=1, C=4, spatial 2 */
    float sc[4] = {1, 2, 3, 4}, bi[4] = {0, 1, 0, -1};
    double ref[8];
    float want[8];
    optest t;
    naive_norm(X8, 4, 2, 1e-5, false, ref);
    optest_begin_opset(&t, IR_OP_INSTANCENORMALIZATION, 3, 1, 0, 17);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, sc, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, bi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    for (int i = 0; i < 8; i++) want[i] = (float)(ref[i] * sc[i / 2] + bi[i / 2]);
    assert_true(optest_compare_f32(t.out[0].data, want, 8, 1e-5f, 1e-6f) < 0);
    optest_end(&t);

    /* two groups of two channels; opset 18: scale per group, 21: per channel */
    naive_norm(X8, 2, 4, 1e-5, false, ref);
    for (int opset = 18; opset <= 21; opset += 3) {
        int64_t plen = opset == 18 ? 2 : 4;
        optest_begin_opset(&t, IR_OP_GROUPNORMALIZATION, 3, 1, 1, opset);
        optest_attr_int(&t, 0, "num_groups", 2);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 2}, X8, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, &plen, sc, false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &plen, bi, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        for (int i = 0; i < 8; i++) {
            int k = opset == 18 ? i / 4 : i / 2;
            want[i] = (float)(ref[i] * sc[k] + bi[k]);
        }
        assert_true(optest_compare_f32(t.out[0].data, want, 8, 1e-5f, 1e-6f) < 0);
        optest_end(&t);
    }
    optest_begin_opset(&t, IR_OP_GROUPNORMALIZATION, 3, 1, 1, 21);
    optest_attr_int(&t, 0, "num_groups", 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, sc, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "num_groups");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_GROUPNORMALIZATION, 3, 1, 1, 18);
    optest_attr_int(&t, 0, "num_groups", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 2}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, sc, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "group");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_INSTANCENORMALIZATION, 3, 1, 0, 17);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){8}, X8, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, sc, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank");
    optest_end(&t);
}

static void test_lp_mvn_lrn(void **state) {
    (void)state;
    optest t;
    float x[4] = {3, -4, 0, 0};
    optest_begin_opset(&t, IR_OP_LPNORMALIZATION, 1, 1, 1, 17);
    optest_attr_int(&t, 0, "p", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(
        optest_compare_f32(t.out[0].data, (float[]){3.0f / 7, -4.0f / 7, 0, 0}, 4, 1e-6f, 0) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LPNORMALIZATION, 1, 1, 1, 17);
    optest_attr_int(&t, 0, "p", 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "'p'");
    optest_end(&t);

    /* MVN over axes {0, 2, 3} of [1, 2, 1, 4]: each channel on its own */
    double ref[8];
    naive_norm(X8, 2, 4, 0, false, ref);
    optest_begin_opset(&t, IR_OP_MEANVARIANCENORMALIZATION, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 1, 4}, X8, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    float want[8];
    for (int i = 0; i < 8; i++) want[i] = (float)ref[i];
    assert_true(optest_compare_f32(t.out[0].data, want, 8, 1e-4f, 1e-6f) < 0);
    optest_end(&t);

    /* LRN size 3 over 3 channels of one pixel */
    float c3[3] = {1, 2, 3};
    optest_begin_opset(&t, IR_OP_LRN, 1, 1, 2, 13);
    optest_attr_int(&t, 0, "size", 3);
    optest_attr_float(&t, 1, "alpha", 0.3f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 1, 1}, c3, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    double s[3] = {1 + 4, 1 + 4 + 9, 4 + 9};
    for (int i = 0; i < 3; i++) want[i] = (float)(c3[i] / pow(1 + 0.1 * s[i], 0.75));
    assert_true(optest_compare_f32(t.out[0].data, want, 3, 1e-5f, 0) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LRN, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 1, 1}, c3, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'size'");
    optest_end(&t);
}

static void test_pool_extras(void **state) {
    (void)state;
    optest t;
    optest_begin_opset(&t, IR_OP_GLOBALMAXPOOL, 1, 1, 0, 17);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 2}, X8, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[3], 1);
    assert_true(optest_compare_f32(t.out[0].data, (float[]){3, 4}, 2, 0, 0) < 0);
    optest_end(&t);

    /* LpPool p=2, kernel 2, stride 1, pad 1 at the end over [3, -4, 12] */
    float x[3] = {3, -4, 12};
    optest_begin_opset(&t, IR_OP_LPPOOL, 1, 1, 2, 18);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){2}, 1);
    optest_attr_ints(&t, 1, "pads", (int64_t[]){0, 1}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 3}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], 3);
    assert_true(optest_compare_f32(t.out[0].data, (float[]){5, sqrtf(160), 12}, 3, 1e-6f, 0) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LPPOOL, 1, 1, 1, 11);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){5}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "too small");
    optest_end(&t);

    /* MaxUnpool kernel 2 stride 2: [1,1,2] -> [1,1,4] */
    optest_begin_opset(&t, IR_OP_MAXUNPOOL, 2, 1, 2, 11);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){2}, 1);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){2}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 2}, (float[]){7, 8}, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 3, (int64_t[]){1, 1, 2}, (int64_t[]){1, 2}, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], 4);
    assert_true(optest_compare_f32(t.out[0].data, (float[]){0, 7, 8, 0}, 4, 0, 0) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_MAXUNPOOL, 2, 1, 2, 11);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){2}, 1);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){2}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 2}, (float[]){7, 8}, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 3, (int64_t[]){1, 1, 2}, (int64_t[]){1, 4}, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "index 4");
    optest_end(&t);
}

static void test_losses(void **state) {
    (void)state;
    /* N=3, C=2 log-probabilities; targets 1, 0, and 5 (ignored) */
    float lp[6] = {-0.1f, -2.3f, -0.7f, -0.7f, -1.0f, -0.5f};
    int64_t tg[3] = {1, 0, 5};
    float w[2] = {2, 0.5f};
    optest t;
    optest_begin_opset(&t, IR_OP_NEGATIVELOGLIKELIHOODLOSS, 3, 1, 1, 13);
    optest_attr_int(&t, 0, "ignore_index", 5);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, lp, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, tg, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){2}, w, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 0);
    float want = (2.3f * 0.5f + 0.7f * 2) / (0.5f + 2);
    assert_true(optest_compare_f32(t.out[0].data, &want, 1, 1e-6f, 0) < 0);
    optest_end(&t);
    /* without ignore_index, target 5 is out of range */
    optest_begin_opset(&t, IR_OP_NEGATIVELOGLIKELIHOODLOSS, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, lp, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, tg, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "target 5");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_NEGATIVELOGLIKELIHOODLOSS, 2, 1, 1, 13);
    optest_attr_string(&t, 0, "reduction", "average");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, lp, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, tg, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "reduction");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_NEGATIVELOGLIKELIHOODLOSS, 2, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, lp, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, tg, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "target");
    optest_end(&t);

    /* SCE, reduction none, with the log-prob output */
    float sc[4] = {1, 2, 0, 0};
    optest_begin_opset(&t, IR_OP_SOFTMAXCROSSENTROPYLOSS, 2, 2, 1, 13);
    optest_attr_string(&t, 0, "reduction", "none");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, sc, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, (int32_t[]){0, 1}, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    float l0 = logf(expf(1) + expf(2));
    float lps[4] = {1 - l0, 2 - l0, -logf(2), -logf(2)};
    assert_true(optest_compare_f32(t.out[1].data, lps, 4, 1e-6f, 1e-7f) < 0);
    float loss[2] = {-lps[0], -lps[3]};
    assert_true(optest_compare_f32(t.out[0].data, loss, 2, 1e-6f, 1e-7f) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SOFTMAXCROSSENTROPYLOSS, 2, 1, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, sc, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, (int32_t[]){0, 1}, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 12");
    optest_end(&t);
}

/* The kernel split across a 4-thread pool gives the same bytes as the serial run. */
static void check_threads(optest *t) {
    assert_int_equal(optest_run(t), ANVIL_OK);
    size_t bytes = 1;
    for (int d = 0; d < t->out[0].rank; d++) bytes *= (size_t)t->out[0].dims[d];
    bytes *= anvil_dtype_size(t->out[0].dtype);
    void *serial = malloc(bytes);
    memcpy(serial, t->out[0].data, bytes);
    memset(t->out[0].data, 0, bytes);
    core_pool *pool;
    assert_int_equal(core_pool_create(4, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    const op_tensor *ins[OPTEST_MAX_IO];
    op_tensor *outs[OPTEST_MAX_IO];
    for (int i = 0; i < t->n_in; i++) ins[i] = t->in_set[i] ? &t->in[i] : NULL;
    for (int i = 0; i < t->n_out; i++) outs[i] = &t->out[i];
    assert_int_equal(
        op_get(optest_node(t)->op)->run(optest_node(t), ins, t->n_in, outs, t->n_out, &ctx),
        ANVIL_OK);
    assert_memory_equal(t->out[0].data, serial, bytes);
    core_pool_free(pool);
    free(serial);
}

static void test_norm_threads(void **state) {
    (void)state;
    int64_t dims[3] = {16, 37, 61};
    size_t n = 16 * 37 * 61;
    float *x = malloc(n * sizeof *x), sc[61], bi[61];
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i * 7919 % 1000) - 500) / 100.0f;
    for (int i = 0; i < 61; i++) sc[i] = 1.0f + (float)i / 61, bi[i] = (float)i / 10;
    optest t;
    optest_begin_opset(&t, IR_OP_LAYERNORMALIZATION, 3, 1, 0, 17);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){61}, sc, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){61}, bi, false);
    check_threads(&t);
    optest_end(&t);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_threads),   cmocka_unit_test(test_layer_rms),
        cmocka_unit_test(test_instance_group), cmocka_unit_test(test_lp_mvn_lrn),
        cmocka_unit_test(test_pool_extras),    cmocka_unit_test(test_losses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
