/* The fp16 GEMM variants (gemm_fp16*, src/kernels/cpu/gemm/gemm_avx512fp16.c) and the convs on
 * their tiles (conv_fp16_*, conv_variants.c).
 *
 * Their sums are fp16 over runs of slots and fp32 between them, so exactness needs operands whose
 * products and partial sums fp16 holds: multiples of 1/2 in [-1, 1] give products in quarters and
 * runs of at most 128 such products per lane stay under 2^11 quarters, so on them every fp16
 * variant equals the fp32 reference up to the order of its fp32 sums. That checks the tiling, the
 * pairing along K (odd K, K blocks), the packing (run-time and transposed operands) and the fused
 * epilogue, and the GEMM convs on fp16 tiles. A K longer than one run shows the widening
 * (test_long_k_widens), random operands the rounding, and the sessions see the variants only where
 * they accept fp16. Skipped where the CPU lacks AVX512-FP16 (or the compiler did, then the tiles
 * have no micro-kernel). */
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/peak/peak.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static const kern_knobs fp16_session = {.precision = KERN_PREC_FP16};

static bool have_fp16(void) {
    const gemm_kernel *k = gemm_kernel_find_fp16("4x64_avx512fp16");
    return k && gemm_kernel_usable(k, core_hw_get());
}

/* n values: multiples of 1/2 in [-1, 1] where halves is set, else uniform in [-1, 1). */
static float *operand(size_t n, unsigned seed, bool halves) {
    float *x = optest_random_f32(n, seed, -1.0f, 1.0f);
    for (size_t i = 0; halves && i < n; i++) x[i] = (float)(int)(x[i] * 2.0f) / 2.0f;
    return x;
}

static int fp16_variants(optest *t) {
    size_t count;
    const kern_variant *const *list = kern_variants(optest_node(t)->op, &count);
    int n = 0;
    for (size_t i = 0; i < count; i++)
        if ((list[i]->needs & KERN_ROUNDS_FP16) && optest_variant_applies(t, list[i]->name)) n++;
    return n;
}

/* Checks every variant an fp16 session has for A x B at tol: the number of fp16 ones that ran,
 * or -1 on a mismatch. */
static int matmul(int ra, const int64_t *da, int rb, const int64_t *db, bool b_known, bool halves,
                  float tol) {
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float *a = operand(optest_prod(da, ra), 1, halves),
          *b = operand(optest_prod(db, rb), 2, halves);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, db, b, b_known);
    t.knobs = &fp16_session;
    const int nf = fp16_variants(&t);
    const int n = optest_check_variants(&t, tol, tol);
    optest_end(&t);
    free(a);
    free(b);
    return n < 0 ? -1 : nf;
}

static void test_edges_exact(void **state) {
    (void)state;
    if (!have_fp16()) skip();
    static const int64_t ms[] = {1, 5, 13, 14, 15, 17};
    static const int64_t ns[] = {1, 15, 16, 17, 33, 47, 65};
    static const int64_t ks[] = {1, 2, 3, 17, 64};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
            const int64_t k = ks[(i + j) % 5];
            const int n = matmul(2, (int64_t[]){ms[i], k}, 2, (int64_t[]){k, ns[j]},
                                 (i + j) % 2 == 0, true, 1e-5f);
            assert_true(n >= 7); /* gemm_fp16 and its six tiles */
        }
}

static void test_blocks_and_batches_exact(void **state) {
    (void)state;
    if (!have_fp16()) skip();
    /* K past a run (256 k) and past KC (odd, so the last block ends in half a pair), and batched
     * MatMuls whose B is packed while the GEMM runs */
    assert_true(matmul(2, (int64_t[]){37, 4001}, 2, (int64_t[]){4001, 45}, true, true, 1e-5f) > 0);
    assert_true(matmul(2, (int64_t[]){29, 1025}, 2, (int64_t[]){1025, 70}, false, true, 1e-5f) > 0);
    assert_true(matmul(3, (int64_t[]){3, 5, 9}, 2, (int64_t[]){9, 17}, true, true, 1e-5f) > 0);
    assert_true(
        matmul(4, (int64_t[]){2, 3, 5, 8}, 4, (int64_t[]){2, 1, 8, 17}, false, true, 1e-5f) > 0);
}

/* The sums leave fp16 after each run: 8192 products of 1 x 1 give 8192 exactly, where one fp16
 * sum per lane (4096 products each) would stop at 2048, past which fp16 cannot add 1. */
static void test_long_k_widens(void **state) {
    (void)state;
    if (!have_fp16()) skip();
    enum { K = 8192 };
    float *a = malloc(K * sizeof *a), *b = malloc(K * 16 * sizeof *b), c[16] = {0};
    for (int i = 0; i < K; i++) a[i] = 1.0f;
    for (int i = 0; i < K * 16; i++) b[i] = 1.0f;
    for (const gemm_kernel *const *k = gemm_kernels_fp16; *k; k++) {
        gemm_blocking blk = gemm_blocking_default(*k, 1, 16, K, core_hw_get());
        blk.kc = K; /* one block: the runs are the micro-kernel's own */
        void *ws = core_aligned_alloc(64, gemm_thread_workspace(*k, &blk));
        gemm_problem p = {.m = 1,
                          .n = 16,
                          .k = K,
                          .a = a,
                          .rs_a = K,
                          .cs_a = 1,
                          .b = b,
                          .rs_b = 16,
                          .cs_b = 1,
                          .c = c,
                          .ldc = 16,
                          .ep = gemm_epilogue_none()};
        gemm_run_serial(*k, &blk, &p, ws);
        free(ws);
        for (int j = 0; j < 16; j++) assert_true(c[j] == (float)K);
    }
    free(a);
    free(b);
}

/* On values fp16 does not hold, the rounding shows: more than fp32's tolerance. K = 1024 random
 * products make outputs of about 10 (up to 35); each lane's run of 128 fp16 additions of terms
 * near 4 rounds by up to 2^-9 a step, some 0.013 a run, 0.04 over the eight runs of an output:
 * within 5e-2 absolute, about 1e-3 of the output's scale. */
static void test_rounding_shows(void **state) {
    (void)state;
    if (!have_fp16()) skip();
    const int64_t da[] = {16, 1024}, db[] = {1024, 64};
    assert_int_equal(matmul(2, da, 2, db, true, false, 1e-5f), -1);
    assert_true(matmul(2, da, 2, db, true, false, 5e-2f) > 0);
}

/* A fused epilogue is fp32 arithmetic on the fp32 sums: exact too. Gemm's transposed operands
 * (packed from columns) as well. */
static void test_fused_and_transposed_exact(void **state) {
    (void)state;
    if (!have_fp16()) skip();
    ir_fusion f = {.bias = 2, .residual = 3, .act = IR_ACT_RELU};
    const int64_t da[] = {2, 29, 40}, db[] = {40, 70}, dy[] = {2, 29, 70};
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 4, 1, 0);
    float *a = operand(optest_prod(da, 3), 21, true), *b = operand(optest_prod(db, 2), 22, true),
          *bv = operand(70, 23, false), *r = operand(optest_prod(dy, 3), 24, false);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, db, b, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &db[1], bv, true);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 3, dy, r, false);
    optest_node(&t)->fusion = &f;
    t.knobs = &fp16_session;
    assert_true(fp16_variants(&t) >= 7);
    assert_true(optest_check_variants(&t, 1e-5f, 1e-5f) > 0);
    optest_end(&t);
    free(a);
    free(b);
    free(bv);
    free(r);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int64_t m = 15, n = 33, k = 19;
            optest_begin(&t, IR_OP_GEMM, 3, 1, 2);
            optest_attr_int(&t, 0, "transA", ta);
            optest_attr_int(&t, 1, "transB", tb);
            float *ga = operand((size_t)(m * k), 3, true), *gb = operand((size_t)(k * n), 4, true),
                  *gc = operand((size_t)n, 5, true);
            optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k},
                         ga, false);
            optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n},
                         gb, ta == tb);
            optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n}, gc, true);
            t.knobs = &fp16_session;
            assert_true(fp16_variants(&t) >= 7);
            assert_true(optest_check_variants(&t, 1e-5f, 1e-5f) > 0);
            optest_end(&t);
            free(ga);
            free(gb);
            free(gc);
        }
}

/* The GEMM convs on fp16 tiles (conv_fp16_1x1, conv_fp16_im2col, conv_nhwc_fp16_gemm) on
 * half-representable
 * operands: exact up to the order of the fp32 sums, with the bias fused. */
static void conv_exact(int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride, int64_t pad,
                       const char *variant) {
    optest t;
    optest_begin(&t, IR_OP_CONV, 3, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_int(&t, 3, "group", 1);
    const int64_t dx[] = {2, c, hw, hw}, dw[] = {m, c, k, k};
    float *x = operand(optest_prod(dx, 4), 31, true), *w = operand(optest_prod(dw, 4), 32, true),
          *bias = operand((size_t)m, 33, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){m}, bias, true);
    t.knobs = &fp16_session;
    assert_true(optest_variant_applies(&t, variant));
    /* 1e-4: the fp32 variants checked beside them include Winograd, whose transforms round */
    assert_true(optest_check_variants(&t, 1e-4f, 1e-4f) > 0);
    optest_end(&t);
    free(x);
    free(w);
    free(bias);
}

static void test_conv_exact(void **state) {
    (void)state;
    if (!have_fp16()) skip();
    conv_exact(16, 24, 9, 1, 1, 0, "conv_fp16_1x1");     /* the image read as B */
    conv_exact(17, 33, 11, 3, 1, 1, "conv_fp16_im2col"); /* 3x3 padded, odd K = 153 */
    conv_exact(8, 16, 12, 3, 2, 1, "conv_fp16_im2col");  /* strided */
    conv_exact(12, 20, 10, 1, 2, 0, "conv_fp16_im2col"); /* strided 1x1 */
    /* channels-last inside (conv_nhwc.c), the tile's A the pixels: a 1x1, a padded 3x3 */
    conv_exact(32, 48, 7, 1, 1, 0, "conv_nhwc_fp16_gemm");
    conv_exact(32, 48, 7, 3, 1, 1, "conv_nhwc_fp16_gemm");
}

/* Each reduced format only where the session accepts it: fp16 under fp16 and auto, bf16 under
 * bf16 and auto, never under fp32; and the cascade picks fp16 under fp16 exactly where this CPU's
 * fp16 FMA measured above 1.2x its fp32 one. */
static void test_sessions_and_cascade(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float a[64] = {0}, b[64] = {0};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 16}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){16, 4}, b, true);
    const bool bf16_isa = kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16, core_hw_get());
    for (int prec = KERN_PREC_F32; prec <= KERN_PREC_AUTO; prec++) {
        const kern_knobs kb = {.precision = prec};
        t.knobs = &kb;
        const bool fp16_ok = prec == KERN_PREC_FP16 || prec == KERN_PREC_AUTO;
        const bool bf16_ok = prec == KERN_PREC_BF16 || prec == KERN_PREC_AUTO;
        assert_int_equal(optest_variant_applies(&t, "gemm_fp16"), fp16_ok && have_fp16());
        assert_int_equal(optest_variant_applies(&t, "gemm_bf16"), bf16_ok && bf16_isa);
    }
    if (optest_infer(&t) != ANVIL_OK) abort();
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    const peak_rates *r = peak_rates_get();
    const bool faster = have_fp16() && r->isa[PEAK_AVX512_FP16] > 1.2 * r->f32;
    for (int prec = KERN_PREC_F32; prec <= KERN_PREC_AUTO; prec++) {
        kern_knobs kb = {.precision = prec};
        kern_node kn = {optest_node(&t), in, 2, t.out_info, 1, 1, NULL, NULL, &kb};
        const kern_variant *v = NULL;
        assert_int_equal(kern_select(&kn, NULL, &v), ANVIL_OK);
        if (prec != KERN_PREC_BF16)
            assert_int_equal((v->needs & KERN_ROUNDS_FP16) != 0, prec == KERN_PREC_FP16 && faster);
        assert_false(prec == KERN_PREC_FP16 && (v->needs & KERN_ROUNDS_BF16));
    }
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges_exact),
        cmocka_unit_test(test_blocks_and_batches_exact),
        cmocka_unit_test(test_long_k_widens),
        cmocka_unit_test(test_rounding_shows),
        cmocka_unit_test(test_fused_and_transposed_exact),
        cmocka_unit_test(test_conv_exact),
        cmocka_unit_test(test_sessions_and_cascade),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
