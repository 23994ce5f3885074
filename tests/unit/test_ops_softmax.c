/* Softmax reference kernel: both meanings (opset < 13: over the flattened trailing block from
 * `axis`; opset >= 13: over the single dim `axis`) against a naive reference written here,
 * default axes per opset, every axis of a 4-D tensor, numerical stability for large inputs,
 * f64/f16/bf16, zero-size dims, threads, and the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0x0123456789abcdefull;

static float rnd_float(float lo, float hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)(rng_state % (1u << 20)) / (float)(1u << 20);
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* Reference: for every output element, sum exp over the elements that share its group. Two
 * elements share a group when they agree on every dim that is not reduced. The reduced dims are
 * [axis, rank) before opset 13 and {axis} from 13 on. Quadratic, and independent of the kernel's
 * outer/len/inner decomposition. */
static void softmax_ref(const double *x, const int64_t *dims, int rank, int axis, bool legacy,
                        double *y) {
    size_t n = numel(dims, rank);
    int64_t ii[IR_MAX_RANK], jj[IR_MAX_RANK];
    for (size_t i = 0; i < n; i++) {
        size_t r = i;
        for (int d = rank - 1; d >= 0; d--) {
            ii[d] = (int64_t)(r % (size_t)dims[d]);
            r /= (size_t)dims[d];
        }
        double m = -INFINITY;
        for (size_t j = 0; j < n; j++) {
            size_t q = j;
            for (int d = rank - 1; d >= 0; d--) {
                jj[d] = (int64_t)(q % (size_t)dims[d]);
                q /= (size_t)dims[d];
            }
            bool same = true;
            for (int d = 0; d < rank; d++) {
                bool reduced = legacy ? d >= axis : d == axis;
                if (!reduced && ii[d] != jj[d]) same = false;
            }
            if (same && x[j] > m) m = x[j];
        }
        double sum = 0;
        for (size_t j = 0; j < n; j++) {
            size_t q = j;
            for (int d = rank - 1; d >= 0; d--) {
                jj[d] = (int64_t)(q % (size_t)dims[d]);
                q /= (size_t)dims[d];
            }
            bool same = true;
            for (int d = 0; d < rank; d++) {
                bool reduced = legacy ? d >= axis : d == axis;
                if (!reduced && ii[d] != jj[d]) same = false;
            }
            if (same) sum += exp(x[j] - m);
        }
        y[i] = exp(x[i] - m) / sum;
    }
}

/* Runs Softmax on f32 data at `opset` with axis (or the default when has_axis is false) and
 * compares with the reference. */
static void check_f32(int opset, bool has_axis, int64_t axis, int rank, const int64_t *dims,
                      int ref_axis) {
    size_t n = numel(dims, rank);
    float *x = malloc((n ? n : 1) * sizeof *x);
    double *xd = malloc((n ? n : 1) * sizeof *xd), *want = malloc((n ? n : 1) * sizeof *want);
    for (size_t i = 0; i < n; i++) {
        x[i] = rnd_float(-6, 6);
        xd[i] = x[i];
    }
    softmax_ref(xd, dims, rank, ref_axis, opset < 13, want);
    optest t;
    optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, has_axis, opset);
    if (has_axis) optest_attr_int(&t, 0, "axis", axis);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, rank);
    const float *y = t.out[0].data;
    for (size_t i = 0; i < n; i++) {
        if (fabs(y[i] - want[i]) > 1e-6 * want[i] + 1e-7) {
            fprintf(stderr, "opset %d axis %lld at %zu: got %g want %g\n", opset, (long long)axis,
                    i, (double)y[i], want[i]);
            fail();
        }
    }
    optest_end(&t);
    free(x);
    free(xd);
    free(want);
}

static void test_axes(void **state) {
    (void)state;
    int64_t dims[4] = {2, 3, 4, 5};
    for (int opset = 11; opset <= 13; opset += 2)
        for (int64_t axis = -4; axis < 4; axis++)
            check_f32(opset, true, axis, 4, dims, (int)(axis < 0 ? axis + 4 : axis));
    /* defaults: 1 before opset 13, -1 from 13 on */
    check_f32(1, false, 0, 4, dims, 1);
    check_f32(11, false, 0, 4, dims, 1);
    check_f32(13, false, 0, 4, dims, 3);
    /* 1-D, size-1 dims, a long row */
    check_f32(13, false, 0, 1, (int64_t[]){7}, 0);
    check_f32(13, true, 1, 3, (int64_t[]){1, 1, 1}, 1);
    check_f32(11, true, 0, 2, (int64_t[]){1, 1000}, 0);
}

/* The two meanings differ: softmax over [3,4] (legacy, axis 1) vs over [3] alone. */
static void test_opset_semantics_differ(void **state) {
    (void)state;
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i / 4;
    float legacy[24], modern[24];
    for (int k = 0; k < 2; k++) {
        optest t;
        optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 1, k ? 13 : 12);
        optest_attr_int(&t, 0, "axis", 1);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 4}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        memcpy(k ? modern : legacy, t.out[0].data, sizeof legacy);
        optest_end(&t);
    }
    double s_legacy = 0, s_modern = 0;
    for (int i = 0; i < 12; i++) s_legacy += legacy[i];
    for (int c = 0; c < 3; c++) s_modern += modern[c * 4];
    assert_true(fabs(s_legacy - 1) < 1e-6);
    assert_true(fabs(s_modern - 1) < 1e-6);
    assert_true(fabs(legacy[0] - modern[0]) > 1e-3);
}

static void test_stability_and_dtypes(void **state) {
    (void)state;
    /* huge inputs: naive exp would overflow to inf/inf */
    float big[4] = {1000, 1001, 1002, -1000};
    optest t;
    optest_begin(&t, IR_OP_SOFTMAX, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, big, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data;
    double e0 = exp(-2), e1 = exp(-1), s = e0 + e1 + 1;
    assert_true(fabs(y[0] - e0 / s) < 1e-7 && fabs(y[1] - e1 / s) < 1e-7);
    assert_true(fabs(y[2] - 1 / s) < 1e-7 && y[3] == 0);
    optest_end(&t);

    /* f64 */
    int64_t dims[3] = {3, 2, 5};
    double xd[30], want[30];
    for (int i = 0; i < 30; i++) xd[i] = rnd_float(-30, 30);
    softmax_ref(xd, dims, 3, 1, false, want);
    optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", -2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 3, dims, xd, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].dtype, ANVIL_DTYPE_FLOAT64);
    for (int i = 0; i < 30; i++)
        assert_true(fabs(((double *)t.out[0].data)[i] - want[i]) <= 1e-14 + 1e-12 * want[i]);
    optest_end(&t);

    /* f16 and bf16, computed in float and rounded once */
    for (int kind = 0; kind < 2; kind++) {
        uint16_t h[30];
        double hd[30];
        for (int i = 0; i < 30; i++) {
            float v = rnd_float(-4, 4);
            h[i] = kind ? core_f32_to_bf16(v) : core_f32_to_f16(v);
            hd[i] = kind ? core_bf16_to_f32(h[i]) : core_f16_to_f32(h[i]);
        }
        softmax_ref(hd, dims, 3, 2, false, want);
        optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 0, 13);
        optest_input(&t, 0, kind ? ANVIL_DTYPE_BFLOAT16 : ANVIL_DTYPE_FLOAT16, 3, dims, h, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        const uint16_t *yh = t.out[0].data;
        for (int i = 0; i < 30; i++) {
            double got = kind ? core_bf16_to_f32(yh[i]) : core_f16_to_f32(yh[i]);
            assert_true(fabs(got - want[i]) <= (kind ? 1.0 / 256 : 1.0 / 2048) * want[i] + 1e-7);
        }
        optest_end(&t);
    }
}

static void test_zero_size(void **state) {
    (void)state;
    float x[1] = {0};
    for (int opset = 11; opset <= 13; opset += 2) {
        optest t;
        optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 1, opset);
        optest_attr_int(&t, 0, "axis", 1);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 0, 3}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out_info[0].shape.d[1], 0);
        optest_end(&t);
        optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 0, opset);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 4}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        optest_end(&t);
    }
}

static void test_errors(void **state) {
    (void)state;
    float x[6] = {0};
    optest t;
    optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis' 2 is out of range for rank 2");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 1, 11);
    optest_attr_int(&t, 0, "axis", -3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "out of range");
    optest_end(&t);
    /* a scalar has no axis to reduce */
    optest_begin_opset(&t, IR_OP_SOFTMAX, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 0");
    optest_end(&t);
    int32_t i[6] = {0};
    optest_begin(&t, IR_OP_SOFTMAX, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, i, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32, which Softmax does not support");
    optest_end(&t);
    optest_begin(&t, IR_OP_SOFTMAX, 1, 1, 1);
    optest_attr_float(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "axis");
    optest_end(&t);
}

static void test_threads(void **state) {
    (void)state;
    int64_t dims[3] = {16, 37, 61};
    size_t n = numel(dims, 3);
    float *x = malloc(n * sizeof *x), *serial = malloc(n * sizeof *serial);
    for (size_t i = 0; i < n; i++) x[i] = rnd_float(-10, 10);
    core_pool *pool;
    assert_int_equal(core_pool_create(4, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    for (int64_t axis = 0; axis < 3; axis++) {
        optest t;
        optest_begin(&t, IR_OP_SOFTMAX, 1, 1, 1);
        optest_attr_int(&t, 0, "axis", axis);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, dims, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        memcpy(serial, t.out[0].data, n * sizeof *serial);
        memset(t.out[0].data, 0, n * sizeof(float));
        const op_tensor *ins[1] = {&t.in[0]};
        op_tensor *outs[1] = {&t.out[0]};
        assert_int_equal(op_get(IR_OP_SOFTMAX)->run(optest_node(&t), ins, 1, outs, 1, &ctx),
                         ANVIL_OK);
        assert_memory_equal(t.out[0].data, serial, n * sizeof(float));
        optest_end(&t);
    }
    core_pool_free(pool);
    free(x);
    free(serial);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axes),
        cmocka_unit_test(test_opset_semantics_differ),
        cmocka_unit_test(test_stability_and_dtypes),
        cmocka_unit_test(test_zero_size),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
