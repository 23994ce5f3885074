/* The backward kernels (kernels/cpu/train) against their reference kernels (ops/train/grad.c):
 * conv_grad_w_gemm over groups, strides, dilations, asymmetric pads, a 1-D conv and a batch big
 * enough to be cut into several im2col chunks; act_grad_f32 for each activation it runs itself,
 * with lengths that leave a vector tail. The references are checked against finite differences
 * by tests/train/check_grads.py. */
#include "optest.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void conv_case(int rank, const int64_t *xd, const int64_t *dyd, const int64_t *kernel,
                      const int64_t *strides, const int64_t *dil, const int64_t *pads,
                      int64_t group) {
    const int nsp = rank - 2;
    float *x = optest_random_f32(optest_prod(xd, rank), 1, -1, 1);
    float *dy = optest_random_f32(optest_prod(dyd, rank), 2, -1, 1);
    optest t;
    optest_begin(&t, IR_OP_CONV_GRAD_W, 2, 1, 5);
    optest_attr_ints(&t, 0, "kernel_shape", kernel, nsp);
    optest_attr_ints(&t, 1, "strides", strides, nsp);
    optest_attr_ints(&t, 2, "dilations", dil, nsp);
    optest_attr_ints(&t, 3, "pads", pads, 2 * nsp);
    optest_attr_int(&t, 4, "group", group);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank, dyd, dy, false);
    /* sums of up to 40960 products in float against the reference's double */
    assert_int_equal(optest_check_variants(&t, 2e-3f, 2e-3f), 1);
    optest_end(&t);
    free(x);
    free(dy);
}

static void test_conv_grad_w(void **state) {
    (void)state;
    /* 3x3 pad 1 stride 1, two groups */
    conv_case(4, (int64_t[]){3, 4, 9, 9}, (int64_t[]){3, 6, 9, 9}, (int64_t[]){3, 3},
              (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, 2);
    /* stride 2, dilation 2, asymmetric pads, a 2x3 kernel */
    conv_case(4, (int64_t[]){2, 3, 11, 10}, (int64_t[]){2, 5, 5, 5}, (int64_t[]){2, 3},
              (int64_t[]){2, 2}, (int64_t[]){2, 2}, (int64_t[]){1, 2, 0, 1}, 1);
    /* 1-D */
    conv_case(3, (int64_t[]){2, 4, 17}, (int64_t[]){2, 3, 8}, (int64_t[]){3}, (int64_t[]){2},
              (int64_t[]){1}, (int64_t[]){1, 0}, 1);
    /* 64 channels of 32x32 with a 3x3 kernel: 2.4 MB of patches per image, so 40 images are
     * cut into chunks that add up */
    conv_case(4, (int64_t[]){40, 64, 32, 32}, (int64_t[]){40, 8, 32, 32}, (int64_t[]){3, 3},
              (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, 1);
}

static void test_act_grad(void **state) {
    (void)state;
    static const char *const acts[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "HardSwish"};
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
        for (int64_t n = 1; n <= 70001; n += 35000) {
            float *dy = optest_random_f32((size_t)n, 3, -1, 1);
            float *x = optest_random_f32((size_t)n, 4, -4, 4);
            optest t;
            optest_begin(&t, IR_OP_ACT_GRAD, 2, 1, 2);
            optest_attr_string(&t, 0, "act", acts[a]);
            optest_attr_float(&t, 1, "alpha", 0.1f);
            optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, &n, dy, false);
            optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, &n, x, false);
            assert_int_equal(optest_check_variants(&t, 1e-5f, 1e-6f), 1);
            optest_end(&t);
            free(dy);
            free(x);
        }
    }
}

/* anvil.DropoutTrain keeps about 1 - ratio of the values, scaled by 1 / (1 - ratio), and its
 * output is X times its mask. */
static void test_dropout_train(void **state) {
    (void)state;
    const int64_t n = 100000, seed = 12345;
    float *x = optest_random_f32((size_t)n, 5, 0.5f, 1.5f);
    optest t;
    optest_begin(&t, IR_OP_DROPOUT_TRAIN, 2, 2, 2);
    optest_attr_float(&t, 0, "ratio", 0.3f);
    optest_attr_int(&t, 1, "salt", 7);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, &n, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &seed, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float *y = t.out[0].data, *mask = t.out[1].data;
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(mask[i] == 0.0f || fabsf(mask[i] - 1.0f / 0.7f) < 1e-6f);
        assert_true(y[i] == x[i] * mask[i]);
        dropped += mask[i] == 0.0f;
    }
    assert_true(dropped > n * 29 / 100 && dropped < n * 31 / 100);
    optest_end(&t);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_grad_w),
        cmocka_unit_test(test_act_grad),
        cmocka_unit_test(test_dropout_train),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
