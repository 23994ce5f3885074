/* The backward kernels (kernels/cpu/train) against their reference kernels (ops/train/grad.c):
 * conv_grad_w_gemm over groups, strides, dilations, asymmetric pads, a 1-D conv and a batch big
 * enough to be cut into several im2col chunks; act_grad_f32 for each activation it runs itself,
 * with lengths that leave a vector tail; batchnorm_train_* and batchnorm_grad_* on maps of every
 * area class, max_pool_grad_* bit for bit over strides, dilations, pads, ceil_mode, ties and
 * NaNs, layernorm_grad_* on odd row lengths, inner axes and rows split across threads. The
 * references are checked against finite differences by tests/train/check_grads.py. */
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
    const int vendor = kern_find(IR_OP_CONV_GRAD_W, "dnnl_conv_grad_w") != NULL;
    assert_int_equal(optest_check_variants(&t, 2e-3f, 2e-3f), 1 + vendor);
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

/* ---- batch norm --------------------------------------------------------------------------- */

/* The variants that must have run: the portable one, and the AVX-512 one where the CPU has it. */
static int expected_variants(void) {
    return optest_have_avx512() ? 2 : 1;
}

/* Per-channel floats: scale and variances positive. */
static float *channel_floats(int64_t c, unsigned seed, float lo, float hi) {
    return optest_random_f32((size_t)c, seed, lo, hi);
}

/* X of shape xd in [lo, hi) through BatchNormTrain (epsilon 1e-3, momentum 0.8) with its first
 * train_outs outputs: Y, the running statistics and the saved ones against the reference; then
 * BatchNormGrad (first grad_outs outputs) with the reference's saved statistics. */
static void bn_case(int rank, const int64_t *xd, float lo, float hi, float rtol, float atol,
                    int train_outs, int grad_outs) {
    const size_t n = optest_prod(xd, rank);
    const int64_t c = xd[1];
    float *x = optest_random_f32(n, 11, lo, hi), *dy = optest_random_f32(n, 12, -1, 1);
    float *scale = channel_floats(c, 13, 0.5f, 1.5f), *bias = channel_floats(c, 14, -1, 1);
    float *rm = channel_floats(c, 15, -1, 1), *rv = channel_floats(c, 16, 0.5f, 2);
    float *mean = malloc(sizeof(float) * (size_t)c), *inv = malloc(sizeof(float) * (size_t)c);
    optest t;
    optest_begin(&t, IR_OP_BATCHNORM_TRAIN, 5, 5, 1);
    optest_attr_float(&t, 0, "epsilon", 1e-3f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, &c, scale, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &c, bias, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 1, &c, rm, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 1, &c, rv, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    memcpy(mean, t.out[3].data, sizeof(float) * (size_t)c);
    memcpy(inv, t.out[4].data, sizeof(float) * (size_t)c);
    optest_end(&t);

    optest_begin(&t, IR_OP_BATCHNORM_TRAIN, 5, train_outs, 2);
    optest_attr_float(&t, 0, "epsilon", 1e-3f);
    optest_attr_float(&t, 1, "momentum", 0.8f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, &c, scale, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &c, bias, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 1, &c, rm, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 1, &c, rv, false);
    if (optest_check_variants(&t, rtol, atol) != expected_variants()) {
        fprintf(stderr, "BatchNormTrain on %lld x %lld x ... (rank %d)\n", (long long)xd[0],
                (long long)c, rank);
        fail();
    }
    optest_end(&t);

    optest_begin(&t, IR_OP_BATCHNORM_GRAD, 5, grad_outs, 1);
    optest_attr_float(&t, 0, "epsilon", 1e-3f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, dy, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &c, scale, false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 1, &c, mean, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 1, &c, inv, false);
    if (optest_check_variants(&t, rtol, atol) != expected_variants()) {
        fprintf(stderr, "BatchNormGrad on %lld x %lld x ... (rank %d)\n", (long long)xd[0],
                (long long)c, rank);
        fail();
    }
    optest_end(&t);
    free(x);
    free(dy);
    free(scale);
    free(bias);
    free(rm);
    free(rv);
    free(mean);
    free(inv);
}

/* Maps of every kind the variants treat apart: areas that divide 16 (channels grouped 16 / area
 * to a vector, a last group cut short), 16 itself, areas with a vector tail, channel counts that
 * leave the last thread fewer channels, an area past the 64 vectors a float lane sums before
 * double takes over, and a mean far from 0 (the variance from deviations, not from x^2). */
static void test_batchnorm(void **state) {
    (void)state;
    bn_case(4, (int64_t[]){16, 37, 2, 2}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(4, (int64_t[]){3, 21, 2, 4}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(2, (int64_t[]){7, 35}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(3, (int64_t[]){5, 6, 2}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(4, (int64_t[]){4, 9, 4, 4}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(4, (int64_t[]){2, 3, 5, 7}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    /* optional outputs left out: Y alone, dX alone */
    bn_case(4, (int64_t[]){2, 3, 5, 7}, -1, 1, 1e-5f, 1e-5f, 1, 1);
    bn_case(4, (int64_t[]){2, 5, 3, 3}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(3, (int64_t[]){3, 4, 33}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(4, (int64_t[]){16, 8, 16, 16}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    /* more images than a float lane takes before its sums go to double */
    bn_case(4, (int64_t[]){70, 3, 4, 4}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(4, (int64_t[]){40, 3, 8, 8}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    bn_case(4, (int64_t[]){2, 3, 47, 45}, -1, 1, 1e-5f, 1e-5f, 5, 3);
    /* Y = X * a + c cancels to |Y| ~ 1 from |X * a| ~ 140, where one rounding is 1.5e-5: the
     * variants' a differs from the reference's by an ulp on some channels */
    bn_case(4, (int64_t[]){8, 5, 8, 8}, 40, 41, 1e-5f, 1e-4f, 5, 3);
}

/* ---- max pool ----------------------------------------------------------------------------- */

/* MaxPoolGrad of a pool over X (shape xd, values from x) with dY random; every variant's dX must
 * equal the reference's bit for bit (the same input wins each window, the same sums in the
 * same order). */
static void pool_case(int rank, const int64_t *xd, const float *x, const int64_t *kernel,
                      const int64_t *strides, const int64_t *dil, const int64_t *pads, bool ceil) {
    const int nsp = rank - 2;
    int64_t yd[4] = {xd[0], xd[1], 1, 1};
    for (int d = 0; d < nsp; d++) {
        const int64_t ek = (kernel[d] - 1) * dil[d] + 1;
        const int64_t span = xd[2 + d] + pads[d] + pads[nsp + d] - ek;
        int64_t o = ceil ? (span + strides[d] - 1) / strides[d] + 1 : span / strides[d] + 1;
        if (ceil && (o - 1) * strides[d] >= xd[2 + d] + pads[d]) o--;
        yd[2 + d] = o;
    }
    float *dy = optest_random_f32(optest_prod(yd, rank), 21, -1, 1);
    optest t;
    optest_begin(&t, IR_OP_MAXPOOL_GRAD, 2, 1, 5);
    optest_attr_ints(&t, 0, "kernel_shape", kernel, (size_t)nsp);
    optest_attr_ints(&t, 1, "strides", strides, (size_t)nsp);
    optest_attr_ints(&t, 2, "dilations", dil, (size_t)nsp);
    optest_attr_ints(&t, 3, "pads", pads, 2 * (size_t)nsp);
    optest_attr_int(&t, 4, "ceil_mode", ceil);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, yd, dy, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    if (optest_check_variants(&t, 0.0f, 0.0f) != expected_variants()) {
        fprintf(stderr, "MaxPoolGrad on %lld x %lld x %lld x %lld\n", (long long)xd[0],
                (long long)xd[1], (long long)xd[2], (long long)(rank > 3 ? xd[3] : 1));
        fail();
    }
    optest_end(&t);
    free(dy);
}

/* X with few distinct values, so that windows hold ties: the first largest must win */
static float *tied(size_t n, unsigned seed) {
    float *x = optest_random_f32(n, seed, 0, 3);
    for (size_t i = 0; i < n; i++) x[i] = floorf(x[i]);
    return x;
}

static void test_max_pool_grad(void **state) {
    (void)state;
    static const int64_t one[2] = {1, 1}, two[2] = {2, 2}, k3[2] = {3, 3};
    /* ResNet's stem pool (3x3, stride 2, pad 1) on odd maps, 2 and 9 planes (groups of four
     * planes and the rest), ties and distinct values; rows of 35 outputs (a vector and a tail) */
    const int64_t a[4] = {1, 2, 17, 19}, b[4] = {3, 3, 70, 70}, p1[4] = {1, 1, 1, 1};
    float *xa = tied(optest_prod(a, 4), 31), *xb = optest_random_f32(optest_prod(b, 4), 32, -1, 1);
    pool_case(4, a, xa, k3, two, one, p1, false);
    pool_case(4, b, xb, k3, two, one, p1, false);
    float *xbt = tied(optest_prod(b, 4), 33);
    pool_case(4, b, xbt, k3, two, one, p1, false);
    /* ceil_mode on an odd map, no pads */
    const int64_t c[4] = {2, 3, 8, 9}, p0[4] = {0, 0, 0, 0};
    float *xc = tied(optest_prod(c, 4), 34);
    pool_case(4, c, xc, k3, two, one, p0, true);
    /* stride 1 with dilation 2, a 2x3 kernel, asymmetric pads */
    const int64_t d[4] = {2, 5, 11, 13}, k23[2] = {2, 3}, pd[4] = {1, 0, 2, 1};
    float *xd = tied(optest_prod(d, 4), 35);
    pool_case(4, d, xd, k23, one, two, pd, false);
    /* stride 3 (gathered), pads as large as the kernel: windows of padding only */
    const int64_t e[4] = {1, 6, 10, 23}, s3[2] = {3, 3}, pe[4] = {2, 2, 2, 2};
    float *xe = tied(optest_prod(e, 4), 36);
    pool_case(4, e, xe, two, s3, one, pe, false);
    /* 1-D */
    const int64_t f[3] = {2, 3, 37}, k1[1] = {3}, s1[1] = {2}, d1[1] = {1}, pf[2] = {1, 1};
    float *xf = tied(optest_prod(f, 3), 37);
    pool_case(3, f, xf, k1, s1, d1, pf, false);
    /* NaN and -inf among the inputs: a NaN that comes first in its window wins it, a later one
     * never does; a window of -inf goes to its first input */
    float *xg = optest_random_f32(optest_prod(b, 4), 38, -1, 1);
    for (size_t i = 0; i < optest_prod(b, 4); i += 7) xg[i] = i % 3 ? NAN : -INFINITY;
    pool_case(4, b, xg, k3, two, one, p1, false);
    free(xa);
    free(xb);
    free(xbt);
    free(xc);
    free(xd);
    free(xe);
    free(xf);
    free(xg);
}

/* ---- layer norm ---------------------------------------------------------------------------- */

/* LayerNormGrad over the dims of xd from axis on (epsilon 1e-5), X in [lo, hi) (each row's
 * first value `spike` instead where that is not 0), its first outs outputs (dX, dscale, dbias)
 * against the reference. */
static void ln_case_spiked(int rank, const int64_t *xd, int64_t axis, float lo, float hi,
                           float spike, int outs) {
    const size_t n = optest_prod(xd, rank);
    const int a = (int)(axis < 0 ? axis + rank : axis);
    float *x = optest_random_f32(n, 41, lo, hi), *dy = optest_random_f32(n, 42, -1, 1);
    const size_t d = optest_prod(xd + a, rank - a);
    for (size_t i = 0; spike != 0.0f && i < n; i += d) x[i] = spike;
    float *scale = optest_random_f32(optest_prod(xd + a, rank - a), 43, 0.5f, 1.5f);
    optest t;
    optest_begin(&t, IR_OP_LAYERNORM_GRAD, 3, outs, 2);
    optest_attr_int(&t, 0, "axis", axis);
    optest_attr_float(&t, 1, "epsilon", 1e-5f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, dy, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, rank - a, xd + a, scale, false);
    if (optest_check_variants(&t, 1e-5f, 1e-5f) != expected_variants()) {
        fprintf(stderr, "LayerNormGrad on %zu values, axis %lld\n", n, (long long)axis);
        fail();
    }
    optest_end(&t);
    free(x);
    free(dy);
    free(scale);
}

static void ln_case(int rank, const int64_t *xd, int64_t axis, float lo, float hi, int outs) {
    ln_case_spiked(rank, xd, axis, lo, hi, 0.0f, outs);
}

/* Rows of BERT's length (512) and odd lengths (vector tails, rows under one vector, a single
 * value), one row and many, the normalized dims more than one (axis inside), enough values for
 * the rows to be split across threads, a mean far from 0, a first value far from the others,
 * and optional outputs left out. Rows stay few enough (<= 601) that the reference's float
 * column sums keep within the tolerance of exact ones (over BERT's 1024 rows of 512 they are
 * 6x the tolerance off: there a variant can only match the reference's own summation order). */
static void test_layernorm_grad(void **state) {
    (void)state;
    ln_case(3, (int64_t[]){4, 16, 512}, -1, -2, 2, 3);
    ln_case(2, (int64_t[]){7, 33}, 1, -1, 1, 3);
    ln_case(3, (int64_t[]){3, 5, 7}, 1, -1, 1, 3);
    ln_case(4, (int64_t[]){2, 3, 4, 5}, 2, -1, 1, 3);
    ln_case(4, (int64_t[]){2, 3, 4, 5}, -3, -1, 1, 3);
    ln_case(2, (int64_t[]){1, 1000}, -1, -1, 1, 3);
    ln_case(2, (int64_t[]){3, 200}, 0, -1, 1, 3);
    ln_case(2, (int64_t[]){5, 3}, -1, -1, 1, 3);
    ln_case(2, (int64_t[]){6, 1}, -1, -1, 1, 3);
    ln_case(2, (int64_t[]){601, 40}, -1, -1, 1, 3);
    ln_case(2, (int64_t[]){130, 257}, -1, -1, 1, 3);
    /* the mean 40x the spread: xhat needs the mean's low part */
    ln_case(2, (int64_t[]){16, 100}, -1, 40, 41, 3);
    /* each row's first value (the variants' shift) far from the rest */
    ln_case_spiked(2, (int64_t[]){16, 100}, -1, -1, 1, 1000.0f, 3);
    ln_case_spiked(2, (int64_t[]){16, 100}, -1, 40, 41, -3.0f, 3);
    /* dX alone; dX and dscale */
    ln_case(3, (int64_t[]){4, 16, 512}, -1, -1, 1, 1);
    ln_case(2, (int64_t[]){7, 33}, -1, -1, 1, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_grad_w),   cmocka_unit_test(test_act_grad),
        cmocka_unit_test(test_dropout_train), cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_max_pool_grad), cmocka_unit_test(test_layernorm_grad),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
