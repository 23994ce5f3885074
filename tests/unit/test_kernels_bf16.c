/* The bf16 variants: the GEMM's (gemm_bf16*, src/kernels/cpu/gemm/gemm_avx512bf16.c) and the
 * convolutions on its tiles (conv_bf16_*, conv_variants.c).
 *
 * On operands that bf16 holds exactly, a bf16 GEMM must equal the fp32 reference up to the order
 * of its fp32 sums, so every bf16 variant is checked at fp32's tolerance on the shapes where the
 * tiling, the pairing along K (odd K, K blocks) and the packing (run-time B, transposed operands)
 * go wrong. On operands it does not hold, the rounding must show: the same check then fails at
 * that tolerance and passes at bf16's, which is what a session asking for bf16 accepts. The
 * rounding is to nearest even. Skipped where the CPU lacks AVX512-BF16. */
#include "kernels/cpu/conv/conv.h"
#include "kernels/cpu/data/layout_blocked.h"
#include "kernels/cpu/eltwise/eltwise.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/peak/peak.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static const kern_knobs bf16_session = {.precision = KERN_PREC_BF16};

static bool have_bf16(void) {
    return kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16, core_hw_get());
}

/* n uniform values in [-1, 1), rounded to bf16 when exact is set. */
static float *operand(size_t n, unsigned seed, bool exact) {
    float *x = optest_random_f32(n, seed, -1.0f, 1.0f);
    for (size_t i = 0; exact && i < n; i++) x[i] = core_bf16_to_f32(core_f32_to_bf16(x[i]));
    return x;
}

/* The bf16 variants of the node's op that apply (the count, after checking each at rtol/atol
 * against the reference: -1 on a mismatch). The fp32 variants are checked too. */
static int check(optest *t, float tol) {
    t->knobs = &bf16_session;
    return optest_check_variants(t, tol, tol);
}

static int bf16_variants(optest *t) {
    size_t count;
    const kern_variant *const *list = kern_variants(optest_node(t)->op, &count);
    int n = 0;
    for (size_t i = 0; i < count; i++)
        if ((list[i]->needs & KERN_ROUNDS_BF16) && optest_variant_applies(t, list[i]->name)) n++;
    return n;
}

static int matmul(int ra, const int64_t *da, int rb, const int64_t *db, bool b_known, bool exact,
                  float tol) {
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float *a = operand(optest_prod(da, ra), 1, exact), *b = operand(optest_prod(db, rb), 2, exact);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, db, b, b_known);
    t.knobs = &bf16_session;
    const int nb = bf16_variants(&t);
    int n = check(&t, tol);
    optest_end(&t);
    free(a);
    free(b);
    /* every bf16 tile (and "gemm_bf16") must have run */
    return n < 0 ? -1 : nb;
}

static void test_edges_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    static const int64_t ms[] = {1, 5, 13, 14, 15, 17};
    static const int64_t ns[] = {1, 15, 16, 17, 33, 47, 65};
    static const int64_t ks[] = {1, 2, 3, 17, 64};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
            const int64_t k = ks[(i + j) % 5];
            const int n = matmul(2, (int64_t[]){ms[i], k}, 2, (int64_t[]){k, ns[j]},
                                 (i + j) % 2 == 0, true, 1e-5f);
            assert_true(n >= 6); /* gemm_bf16 and its five tiles */
        }
}

static void test_blocks_and_batches_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    /* K past KC (odd, so the last block ends in half a pair), and batched MatMuls whose B is
     * packed while the GEMM runs. 4,000 fp32 sums in another order differ by ~1e-5: fp32's own
     * tolerance for long K, still far below what bf16 rounding would show (test below). */
    assert_true(matmul(2, (int64_t[]){37, 4001}, 2, (int64_t[]){4001, 45}, true, true, 1e-4f) > 0);
    assert_true(matmul(2, (int64_t[]){29, 4097}, 2, (int64_t[]){4097, 70}, false, true, 1e-4f) > 0);
    assert_true(matmul(3, (int64_t[]){3, 5, 9}, 2, (int64_t[]){9, 17}, true, true, 1e-4f) > 0);
    assert_true(
        matmul(4, (int64_t[]){2, 3, 5, 8}, 4, (int64_t[]){2, 1, 8, 17}, false, true, 1e-4f) > 0);
}

/* On values bf16 does not hold, the bf16 variants differ from fp32 by bf16's rounding: more
 * than fp32's tolerance, within bf16's (K = 256 products of 2^-9 relative error each). */
static void test_rounding_shows(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const int64_t da[] = {16, 256}, db[] = {256, 64};
    assert_int_equal(matmul(2, da, 2, db, true, false, 1e-5f), -1);
    assert_true(matmul(2, da, 2, db, true, false, 3e-2f) > 0);
}

/* A fused epilogue (bias, residual, activation) is fp32 arithmetic on the fp32 sums, so on
 * bf16-exact operands it matches the reference too, in registers and after the store. */
static void test_fused_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    static const ir_act acts[] = {IR_ACT_NONE, IR_ACT_RELU, IR_ACT_GELU_ERF};
    for (size_t ai = 0; ai < sizeof acts / sizeof *acts; ai++) {
        ir_fusion f = {.bias = 2, .residual = 3, .act = acts[ai]};
        const int64_t da[] = {2, 29, 40}, db[] = {40, 70}, dy[] = {2, 29, 70};
        optest t;
        optest_begin(&t, IR_OP_MATMUL, 4, 1, 0);
        float *a = operand(optest_prod(da, 3), 21, true),
              *b = operand(optest_prod(db, 2), 22, true), *bv = operand(70, 23, false),
              *r = operand(optest_prod(dy, 3), 24, false);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, da, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, db, b, true);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &db[1], bv, true);
        optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 3, dy, r, false);
        optest_node(&t)->fusion = &f;
        t.knobs = &bf16_session;
        assert_true(bf16_variants(&t) >= 6);
        assert_true(check(&t, 1e-5f) > 0);
        optest_end(&t);
        free(a);
        free(b);
        free(bv);
        free(r);
    }
}

/* Halfway cases round to the even neighbour: 1 + 2^-8 lies between 1 and 1 + 2^-7 and goes to 1;
 * 1 + 3 * 2^-8 goes to 1 + 2^-6. */
static void test_round_to_even(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    float a[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, b[2] = {1.0f, 0.0f}, c[2] = {0};
    const gemm_kernel *k = gemm_kernel_find_bf16("16x16_avx512bf16");
    assert_non_null(k);
    gemm_blocking blk = gemm_blocking_default(k, 2, 1, 1, core_hw_get());
    void *ws = core_aligned_alloc(64, gemm_thread_workspace(k, &blk));
    gemm_problem p = {.m = 2,
                      .n = 1,
                      .k = 1,
                      .a = a,
                      .rs_a = 1,
                      .cs_a = 1,
                      .b = b,
                      .rs_b = 1,
                      .cs_b = 1,
                      .c = c,
                      .ldc = 1,
                      .ep = gemm_epilogue_none()};
    gemm_run_serial(k, &blk, &p, ws);
    free(ws);
    assert_true(c[0] == 1.0f);
    assert_true(c[1] == 1.0f + 0x1p-6f);
}

/* Not offered to an fp32 session, whatever the CPU. */
static void test_fp32_session_refuses(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float a[6] = {0}, b[6] = {0};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, b, true);
    assert_false(optest_variant_applies(&t, "gemm_bf16"));
    t.knobs = &bf16_session;
    assert_int_equal(optest_variant_applies(&t, "gemm_bf16"), have_bf16());
    optest_end(&t);
}

/* The cascade: under bf16 the bf16 GEMM exactly where this CPU's bf16 rate measured above its
 * fp32 rate; under auto never (the tuner decides); under fp32 never. */
static void test_cascade(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float a[64] = {0}, b[64] = {0};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 16}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){16, 4}, b, true);
    if (optest_infer(&t) != ANVIL_OK) abort();
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    const peak_rates *r = peak_rates_get();
    const bool faster = have_bf16() && r->bf16 > 1.2 * r->f32;
    for (int prec = KERN_PREC_F32; prec <= KERN_PREC_AUTO; prec++) {
        if (prec == KERN_PREC_FP16) continue;
        kern_knobs kb = {.precision = prec};
        kern_node kn = {optest_node(&t), in, 2, t.out_info, 1, 1, NULL, NULL, &kb};
        const kern_variant *v = NULL;
        assert_int_equal(kern_select(&kn, NULL, &v), ANVIL_OK);
        const bool picked = (v->needs & KERN_ROUNDS_BF16) != 0;
        assert_int_equal(picked, prec == KERN_PREC_BF16 && faster);
    }
    optest_end(&t);
}

static void gemm_exact(bool ta, bool tb, bool b_known) {
    optest t;
    const int64_t m = 15, n = 33, k = 19;
    optest_begin(&t, IR_OP_GEMM, 3, 1, 4);
    optest_attr_int(&t, 0, "transA", ta);
    optest_attr_int(&t, 1, "transB", tb);
    optest_attr_float(&t, 2, "alpha", 0.5f);
    optest_attr_float(&t, 3, "beta", 2.0f);
    float *a = operand((size_t)(m * k), 3, true), *b = operand((size_t)(k * n), 4, true),
          *c = operand((size_t)n, 5, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k}, a,
                 false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n}, b,
                 b_known);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n}, c, true);
    t.knobs = &bf16_session;
    assert_true(bf16_variants(&t) >= 6);
    assert_true(check(&t, 1e-5f) > 0);
    optest_end(&t);
    free(a);
    free(b);
    free(c);
}

static void test_gemm_transposed_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) gemm_exact(ta, tb, (ta + tb) % 2 == 0);
}

/* anvil.ConvNhwc (X [n, h, w, c]) through every variant, fp32 and convnhwc_bf16_gemm, on
 * bf16-exact operands: the 1x1 reads X as A, the others an im2col copy. */
static void conv_nhwc_exact(int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride,
                            int64_t pad) {
    optest t;
    optest_begin(&t, IR_OP_CONV_NHWC, 3, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_int(&t, 3, "group", 1);
    const int64_t dx[] = {1, hw, hw, c}, dw[] = {m, c, k, k};
    float *x = operand(optest_prod(dx, 4), 9, true), *w = operand(optest_prod(dw, 4), 10, true),
          *b = operand((size_t)m, 11, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){m}, b, true);
    t.knobs = &bf16_session;
    assert_true(optest_variant_applies(&t, "convnhwc_bf16_gemm"));
    assert_true(check(&t, 1e-4f) > 0);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
}

static void test_conv_nhwc_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    conv_nhwc_exact(24, 40, 9, 1, 1, 0);  /* 1x1: X is A */
    conv_nhwc_exact(17, 33, 11, 3, 1, 1); /* 3x3 padded, odd K */
    conv_nhwc_exact(16, 16, 12, 3, 2, 1); /* strided */
}

/* An odd KC from the knobs ($ANVIL_GEMM_KC) on bf16 tiles with pre-packed weights: every K block
 * but the last must still start on a pair of the packed B (the knob is evened up). */
static void test_odd_kc_knob(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const kern_knobs odd = {.precision = KERN_PREC_BF16, .gemm_kc = 7};
    const int64_t da[] = {20, 45}, db[] = {45, 40};
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float *a = operand(optest_prod(da, 2), 61, true), *b = operand(optest_prod(db, 2), 62, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, db, b, true);
    t.knobs = &odd;
    assert_true(bf16_variants(&t) >= 6);
    assert_true(optest_check_variants(&t, 1e-5f, 1e-5f) > 0);
    optest_end(&t);
    free(a);
    free(b);
}

/* An implicit GEMM's A (gemm_problem.a_ind) on every bf16 tile, on bf16-exact operands, against
 * the product in double: even segments only (gemm_takes_ind refuses odd ones), K blocks shorter
 * than a segment (KC 4 cuts 6 floats into 4 + 2, not 3 + 3: pieces stay even), B packed by the
 * driver or pre-packed (whose pairs the blocks must start on), serial and threaded. */
static void test_indirect_a(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const core_hw *hw = core_hw_get();
    float *pool = operand(4096, 21, true);
    float *zeros = calloc(64, sizeof(float));
    core_pool *threads = NULL;
    assert_int_equal(core_pool_create(2, &threads), ANVIL_OK);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.pool = threads;
    for (const gemm_kernel *const *kp = gemm_kernels_bf16; *kp; kp++) {
        const gemm_kernel *k = *kp;
        if (!gemm_kernel_usable(k, hw)) continue;
        assert_false(gemm_takes_ind(k, 5));
        const int64_t ms[] = {1, 2 * k->mr + 3}, segs_of[] = {6, 40}, kcs[] = {4, 16, 256};
        const int64_t n = k->nr + 5, segs = 3;
        for (size_t mi = 0; mi < 2; mi++)
            for (size_t si = 0; si < 2; si++)
                for (size_t ki = 0; ki < 3; ki++)
                    for (int mode = 0; mode < 3; mode++) {
                        const int64_t m = ms[mi], seg = segs_of[si], kd = seg * segs;
                        assert_true(gemm_takes_ind(k, seg));
                        const float **tab = malloc(sizeof(float *) * (size_t)(m * segs));
                        for (int64_t q = 0; q < m * segs; q++)
                            tab[q] = q % 7 == 3 ? zeros : pool + (q * 131) % (4096 - seg);
                        float *b = operand((size_t)(kd * n), 22, true);
                        float *c = malloc(sizeof(float) * (size_t)(m * n));
                        float *want = malloc(sizeof(float) * (size_t)(m * n));
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < n; j++) {
                                double acc = 0;
                                for (int64_t p = 0; p < kd; p++)
                                    acc += (double)tab[i * segs + p / seg][p % seg] * b[p * n + j];
                                want[i * n + j] = (float)acc;
                            }
                        gemm_problem pr = {.m = m, .n = n, .k = kd, .a_ind = tab, .a_seg = seg};
                        pr.c = c;
                        pr.ldc = n;
                        pr.ep = gemm_epilogue_none();
                        gemm_packed pb = {0};
                        if (mode == 2) {
                            assert_int_equal(gemm_pack_b(k, kd, n, b, n, 1, &pb), ANVIL_OK);
                            pr.pb = &pb;
                        } else {
                            pr.b = b;
                            pr.rs_b = n;
                            pr.cs_b = 1;
                        }
                        gemm_blocking blk = gemm_blocking_default(k, m, n, kd, hw);
                        blk.kc = kcs[ki];
                        void *ws = core_aligned_alloc(64, 2 * gemm_thread_workspace(k, &blk));
                        if (mode == 1)
                            gemm_run(k, &blk, &pr, ws, &ctx);
                        else
                            gemm_run_serial(k, &blk, &pr, ws);
                        if (optest_compare_f32(c, want, (size_t)(m * n), 1e-5f, 1e-5f) >= 0)
                            fail_msg("%s m %lld seg %lld kc %lld mode %d", k->name, (long long)m,
                                     (long long)seg, (long long)blk.kc, mode);
                        gemm_packed_free(&pb);
                        free(ws);
                        free(c);
                        free(want);
                        free(b);
                        free(tab);
                    }
    }
    core_pool_free(threads);
    free(zeros);
    free(pool);
}

/* bf16 storage (gemm_problem.a16, .c16) on every bf16 tile, the AMX one included where the CPU has
 * it (the plain A and C paths of that tile too): an A stored in bf16 must give the
 * very bits its fp32 original gives (the same pair slots), and a C stored in bf16 the fp32 run's
 * C rounded to nearest even, element for element, with a fused epilogue (bias and an activation
 * in registers, or GELU over the stored tile), edge tiles, one K block or several (a bf16 C's
 * partial sums then live in the thread's rows), serial and on two threads. */
static void test_storage_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const core_hw *hw = core_hw_get();
    core_pool *threads = NULL;
    assert_int_equal(core_pool_create(2, &threads), ANVIL_OK);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.pool = threads;
    const gemm_kernel *tiles[16];
    int n_tiles = 0;
    for (const gemm_kernel *const *kp = gemm_kernels_bf16; *kp && n_tiles < 15; kp++)
        tiles[n_tiles++] = *kp;
    tiles[n_tiles++] = &gemm_kernel_32x32_amx;
    for (int ti = 0; ti < n_tiles; ti++) {
        const gemm_kernel *k = tiles[ti];
        if (!gemm_kernel_usable(k, hw)) continue;
        assert_true(gemm_takes_bf16(k));
        const int64_t ms[] = {1, k->mr + 3, 3 * k->mr}, ns[] = {k->nr - 1, 2 * k->nr + 5},
                      ks[] = {1, 7, 301}, kcs[] = {0, 16};
        for (size_t mi = 0; mi < 3; mi++)
            for (size_t ni = 0; ni < 2; ni++)
                for (size_t ki = 0; ki < 3; ki++)
                    for (size_t ci = 0; ci < 2; ci++)
                        for (int mode = 0; mode < 4; mode++) {
                            const int64_t m = ms[mi], n = ns[ni], kd = ks[ki];
                            const size_t mk = (size_t)(m * kd), mn = (size_t)(m * n);
                            float *a = operand(mk, 31, false),
                                  *b = operand((size_t)(kd * n), 32, false);
                            float *bias = operand((size_t)n, 33, false);
                            uint16_t *a16 = malloc(mk * sizeof *a16);
                            for (size_t q = 0; q < mk; q++) a16[q] = core_f32_to_bf16(a[q]);
                            float *c = malloc(mn * sizeof *c), *c2 = malloc(mn * sizeof *c2);
                            uint16_t *c16 = malloc(mn * sizeof *c16);
                            gemm_packed pb = {0};
                            assert_int_equal(gemm_pack_b(k, kd, n, b, n, 1, &pb), ANVIL_OK);
                            gemm_problem pr = {.m = m, .n = n, .k = kd, .pb = &pb, .ldc = n};
                            pr.ep = gemm_epilogue_none();
                            pr.ep.col_bias = bias;
                            pr.ep.act = mode & 2 ? IR_ACT_GELU_ERF : IR_ACT_RELU;
                            gemm_blocking blk = gemm_blocking_default(k, m, n, kd, hw);
                            if (kcs[ci]) blk.kc = kcs[ci];
                            void *ws = core_aligned_alloc(
                                64, 2 * gemm_thread_workspace_c16(k, &blk, n, kd));
                            /* the fp32 run, then A in bf16, then C in bf16 */
                            for (int run = 0; run < 3; run++) {
                                gemm_problem q = pr;
                                if (run == 1)
                                    q.a16 = a16;
                                else
                                    q.a = a;
                                q.rs_a = kd;
                                q.cs_a = 1;
                                if (run == 2)
                                    q.c16 = c16;
                                else
                                    q.c = run ? c2 : c;
                                if (mode & 1)
                                    gemm_run(k, &blk, &q, ws, &ctx);
                                else
                                    gemm_run_serial(k, &blk, &q, ws);
                            }
                            for (size_t q = 0; q < mn; q++)
                                if (memcmp(&c[q], &c2[q], sizeof *c) ||
                                    c16[q] != core_f32_to_bf16(c[q]))
                                    fail_msg("%s m %lld n %lld k %lld kc %lld mode %d at %zu: "
                                             "%g, %g (a16), %g (c16)",
                                             k->name, (long long)m, (long long)n, (long long)kd,
                                             (long long)blk.kc, mode, q, c[q], c2[q],
                                             core_bf16_to_f32(c16[q]));
                            gemm_packed_free(&pb);
                            free(ws);
                            free(c);
                            free(c2);
                            free(c16);
                            free(a16);
                            free(a);
                            free(b);
                            free(bias);
                        }
    }
    core_pool_free(threads);
}

/* The eltwise table's binary op with a bf16 output (elt_isa.binary16, which a Mul or Add feeding
 * a bf16 GEMM stores through) rounds as the tiles round (gemm_bf16_store_c16, vcvtneps2bf16):
 * ties to even, NaNs quieted, infinities and the largest finite value, and denormals, which the
 * instruction flushes to a zero of their sign, on every lane of full vectors and of a tail. */
static void test_binary16_rounds_as_tiles(void **state) {
    (void)state;
    if (!have_bf16() || !elt_isa_avx512.binary16) skip();
    static const uint32_t special[] = {
        0x00000001u, 0x00008000u, 0x00018000u, 0x007fffffu, 0x80000001u, 0x807fffffu,
        0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
        0x7fc00001u, 0x7f800001u, 0xffa00000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
        0xbf808000u, 0x00000000u, 0x80000000u, 0x33800000u, 0x477fe000u};
    const size_t n_special = sizeof special / sizeof special[0], n = 16 * 6 + 5;
    float *x = operand(n, 51, false);
    memcpy(x, special, sizeof special);
    for (size_t i = n_special; i < 2 * n_special; i++) x[i] *= 1e-38f; /* more denormals */
    const float one = 1.0f;
    uint16_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    elt_isa_avx512.binary16(ELT_MUL, got, x, &one, 1, 0, n);
    gemm_bf16_store_c16(x, (int64_t)n, want, (int64_t)n, 1, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("value %zu (bits %08x): 0x%04x, the tiles 0x%04x", i,
                     (unsigned)((const uint32_t *)x)[i], got[i], want[i]);
    free(got);
    free(want);
    free(x);
}

/* A stored in bf16 read in place (gemm_kernel.ukernel_rows_narrow: even depth and row stride) on
 * every bf16 tile that has the kernel: the results are the fp32 A's up to the order of the fp32
 * sums (an edge of few columns is summed as a whole tile in place, by columns when packed), with
 * a partial last row panel (packed), edge columns, one K block or several, serial and on two
 * threads. A row stride that is odd, or a depth that is, falls back to packing: those give the
 * fp32 A's bits exactly. */
static void test_a16_in_place(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const core_hw *hw = core_hw_get();
    core_pool *threads = NULL;
    assert_int_equal(core_pool_create(2, &threads), ANVIL_OK);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.pool = threads;
    int in_place = 0;
    for (const gemm_kernel *const *kp = gemm_kernels_bf16; *kp; kp++) {
        const gemm_kernel *k = *kp;
        if (!gemm_kernel_usable(k, hw) || !k->ukernel_rows_narrow) continue;
        in_place++;
        const int64_t ms[] = {k->mr, 3 * k->mr + 5}, ns[] = {k->nr - 1, 2 * k->nr + 5},
                      ks[] = {2, 40, 144}, kcs[] = {0, 16};
        for (size_t mi = 0; mi < 2; mi++)
            for (size_t ni = 0; ni < 2; ni++)
                for (size_t ki = 0; ki < 3; ki++)
                    for (size_t ci = 0; ci < 2; ci++)
                        for (int pad = 0; pad < 2; pad++) {
                            /* pad: rows one value longer than K, an odd stride */
                            const int64_t m = ms[mi], n = ns[ni], kd = ks[ki], rs = kd + pad;
                            const size_t mk = (size_t)(m * rs), mn = (size_t)(m * n);
                            float *a = operand(mk, 41, false),
                                  *b = operand((size_t)(kd * n), 42, false);
                            uint16_t *a16 = malloc(mk * sizeof *a16);
                            for (size_t q = 0; q < mk; q++) a16[q] = core_f32_to_bf16(a[q]);
                            float *c = malloc(mn * sizeof *c), *c2 = malloc(mn * sizeof *c2);
                            gemm_packed pb = {0};
                            assert_int_equal(gemm_pack_b(k, kd, n, b, n, 1, &pb), ANVIL_OK);
                            gemm_blocking blk = gemm_blocking_default(k, m, n, kd, hw);
                            if (kcs[ci]) blk.kc = kcs[ci];
                            void *ws = core_aligned_alloc(64, 2 * gemm_thread_workspace(k, &blk));
                            for (int run = 0; run < 2; run++) {
                                gemm_problem q = {.m = m,
                                                  .n = n,
                                                  .k = kd,
                                                  .pb = &pb,
                                                  .ldc = n,
                                                  .rs_a = rs,
                                                  .cs_a = 1};
                                q.ep = gemm_epilogue_none();
                                if (run)
                                    q.a16 = a16;
                                else
                                    q.a = a;
                                q.c = run ? c2 : c;
                                if (ci)
                                    gemm_run(k, &blk, &q, ws, &ctx);
                                else
                                    gemm_run_serial(k, &blk, &q, ws);
                            }
                            const bool exact = pad != 0;
                            if (exact ? memcmp(c, c2, mn * sizeof *c) != 0
                                      : optest_compare_f32(c2, c, mn, 1e-5f, 1e-5f) >= 0)
                                fail_msg("%s m %lld n %lld k %lld rs %lld kc %lld", k->name,
                                         (long long)m, (long long)n, (long long)kd, (long long)rs,
                                         (long long)blk.kc);
                            gemm_packed_free(&pb);
                            free(ws);
                            free(c);
                            free(c2);
                            free(a16);
                            free(a);
                            free(b);
                        }
    }
    assert_true(in_place > 0);
    core_pool_free(threads);
}

/* anvil.ConvGradW (X, dY -> dW) through conv_grad_w_bf16 and the fp32 variants, on bf16-exact
 * operands, at fp32's tolerance for sums of thousands of products: dY's rows read in place
 * (16x16 maps: 256-float segments), gathered where the segments are odd (17x17), two groups, and
 * a ResNet stem's 7x7 stride 2 (the patches' im2col with taps off the image on every side). */
static void grad_w_exact(int64_t n, int64_t c, int64_t m, int64_t hw, int64_t group, int64_t k,
                         int64_t stride) {
    const int64_t pad = k / 2, ohw = (hw + 2 * pad - k) / stride + 1;
    const int64_t xd[] = {n, c, hw, hw}, dyd[] = {n, m, ohw, ohw};
    float *x = operand(optest_prod(xd, 4), 31, true), *dy = operand(optest_prod(dyd, 4), 32, true);
    optest t;
    optest_begin(&t, IR_OP_CONV_GRAD_W, 2, 1, 5);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "dilations", (int64_t[]){1, 1}, 2);
    optest_attr_ints(&t, 3, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_int(&t, 4, "group", group);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dyd, dy, false);
    t.knobs = &bf16_session;
    assert_true(optest_variant_applies(&t, "conv_grad_w_bf16"));
    assert_true(check(&t, 2e-3f) > 0);
    optest_end(&t);
    free(x);
    free(dy);
}

static void test_grad_w_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    grad_w_exact(2, 4, 6, 16, 2, 3, 1);
    grad_w_exact(2, 3, 5, 17, 1, 3, 1);
    grad_w_exact(3, 3, 8, 21, 1, 7, 2);
}

/* A 2-D ConvTranspose (the backward-data of a conv in training: W an input, or a constant)
 * through every variant on bf16-exact operands; `name` must be among them. */
static void deconv_exact(const char *name, int64_t n, int64_t c, int64_t m, int64_t hw, int64_t k,
                         int64_t stride, int64_t pad, bool w_const) {
    const int64_t xd[] = {n, c, hw, hw}, wd[] = {c, m, k, k};
    optest t;
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_int(&t, 3, "group", 1);
    float *x = operand(optest_prod(xd, 4), 41, true), *w = operand(optest_prod(wd, 4), 42, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, wd, w, w_const);
    t.knobs = &bf16_session;
    if (!optest_variant_applies(&t, name)) fail_msg("%s does not apply", name);
    assert_true(check(&t, 1e-4f) > 0);
    optest_end(&t);
    free(x);
    free(w);
}

static void test_deconv_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    for (int w_const = 0; w_const < 2; w_const++) {
        deconv_exact("deconv_batched_bf16", 3, 24, 16, 4, 3, 1, 1, w_const); /* a small map */
        /* two images: W as an input is packed once for both (deconv_plan.pa_ws) */
        deconv_exact("deconv_direct_bf16", 2, 16, 8, 6, 2, 2, 0, w_const); /* stride == k */
        deconv_exact("deconv_gemm_bf16", 2, 17, 12, 9, 3, 2, 1, w_const);  /* odd K */
    }
}

/* A conv of n images through every variant, fp32 and bf16 (and conv_f32, which hands it to a
 * bf16 one in a bf16 session), on bf16-exact operands; W a constant or an input (a training
 * graph's, which the bf16 GEMM variants pack once per run for all the images: pa_ws). */
static void conv_exact_as(int64_t n, int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride,
                          int64_t pad, int64_t group, bool w_const) {
    optest t;
    optest_begin(&t, IR_OP_CONV, 3, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){stride, stride}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){pad, pad, pad, pad}, 4);
    optest_attr_int(&t, 3, "group", group);
    const int64_t dx[] = {n, c, hw, hw}, dw[] = {m, c / group, k, k};
    float *x = operand(optest_prod(dx, 4), 6, true), *w = operand(optest_prod(dw, 4), 7, true),
          *b = operand((size_t)m, 8, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, w_const);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){m}, b, true);
    t.knobs = &bf16_session;
    assert_true(bf16_variants(&t) >= 1);
    if (!w_const) assert_true(optest_variant_applies(&t, "conv_bf16_im2col"));
    assert_true(check(&t, 1e-4f) > 0);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
}

static void conv_exact(int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride, int64_t pad,
                       int64_t group) {
    conv_exact_as(1, c, m, hw, k, stride, pad, group, true);
}

/* Whether variant `name` applies to a conv of c channels on a 3x3 map, 3x3 kernel, pad 1 (7 of
 * every 9 taps per dim read the image: the regions' shape), NCHW or NHWC, in a bf16 session. */
static bool regions_apply(const char *name, bool nhwc, int64_t c) {
    optest t;
    optest_begin(&t, nhwc ? IR_OP_CONV_NHWC : IR_OP_CONV, 3, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_attr_int(&t, 3, "group", 1);
    const int64_t dx_nchw[] = {1, c, 3, 3}, dx_nhwc[] = {1, 3, 3, c}, dw[] = {24, c, 3, 3};
    float *x = operand((size_t)(9 * c), 6, true), *w = operand(optest_prod(dw, 4), 7, true),
          *b = operand(24, 8, true);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, nhwc ? dx_nhwc : dx_nchw, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){24}, b, true);
    t.knobs = &bf16_session;
    const bool applies = optest_variant_applies(&t, name);
    /* every variant, the regions' among them where they apply, on bf16-exact operands */
    assert_true(check(&t, 1e-4f) > 0);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
    return applies;
}

/* The regions (GEMMs over the outputs that see the same taps, an indirect A) on bf16 tiles: even
 * channel counts only, as their indirect A needs (gemm_takes_ind). */
static void test_regions(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    assert_true(regions_apply("conv_nhwc_regions_bf16", false, 16));
    assert_true(regions_apply("convnhwc_regions_bf16", true, 16));
    assert_false(regions_apply("conv_nhwc_regions_bf16", false, 15));
    assert_false(regions_apply("convnhwc_regions_bf16", true, 15));
    assert_true(regions_apply("conv_nhwc_regions", false, 15));
}

/* A batch of small maps as one GEMM (conv_batched_bf16: ResNet-18's last stages in training),
 * W an input (training) or a constant, on bf16-exact operands. */
static void test_batched_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    for (int w_const = 0; w_const < 2; w_const++) {
        optest t;
        optest_begin(&t, IR_OP_CONV, 2, 1, 4);
        optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
        optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
        optest_attr_ints(&t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
        optest_attr_int(&t, 3, "group", 1);
        const int64_t dx[] = {4, 16, 6, 6}, dw[] = {24, 16, 3, 3};
        float *x = operand(optest_prod(dx, 4), 51, true),
              *w = operand(optest_prod(dw, 4), 52, true);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, w_const);
        t.knobs = &bf16_session;
        assert_true(optest_variant_applies(&t, "conv_batched_bf16"));
        assert_true(check(&t, 1e-4f) > 0);
        optest_end(&t);
        free(x);
        free(w);
    }
}

/* conv_nhwc_bf16_gemm (an NCHW conv transposed to pixels x channels around a bf16 GEMM: a
 * tuner's candidate for small maps, where the channels x pixels GEMM pads its few columns) on
 * bf16-exact operands, a 1x1 and a padded 3x3. */
static void test_nhwc_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    for (int64_t k = 1; k <= 3; k += 2) {
        optest t;
        optest_begin(&t, IR_OP_CONV, 3, 1, 4);
        optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){k, k}, 2);
        optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
        optest_attr_ints(&t, 2, "pads", (int64_t[]){k / 2, k / 2, k / 2, k / 2}, 4);
        optest_attr_int(&t, 3, "group", 1);
        const int64_t dx[] = {1, 32, 7, 7}, dw[] = {48, 32, k, k};
        float *x = operand(optest_prod(dx, 4), 71, true),
              *w = operand(optest_prod(dw, 4), 72, true), *b = operand(48, 73, true);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, true);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){48}, b, true);
        t.knobs = &bf16_session;
        assert_true(optest_variant_applies(&t, "conv_nhwc_bf16_gemm"));
        assert_true(check(&t, 1e-4f) > 0);
        optest_end(&t);
        free(x);
        free(w);
        free(b);
    }
}

static void test_conv_exact(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    conv_exact(16, 24, 9, 1, 1, 0, 1);  /* 1x1: the image read as B */
    conv_exact(17, 33, 11, 3, 1, 1, 1); /* 3x3 padded, odd K = 153 */
    conv_exact(8, 16, 12, 3, 2, 1, 1);  /* strided */
    conv_exact(64, 64, 6, 3, 1, 1, 2);  /* two groups of 32 */
    conv_exact(12, 20, 10, 1, 2, 0, 1); /* strided 1x1: im2col */
    conv_exact(64, 64, 14, 3, 1, 1, 8); /* RegNet's groups of 8: oneDNN's bf16 kernel */
    conv_exact(60, 60, 9, 3, 2, 1, 6);  /* groups of 10: partial channel blocks, strided */
    conv_exact(64, 64, 7, 3, 1, 1, 4);  /* groups of 16 */
    /* weights that are an input, three images */
    conv_exact_as(3, 17, 33, 8, 3, 1, 1, 1, false);
    conv_exact_as(3, 32, 48, 6, 3, 2, 1, 2, false);
}

/* Narrow groups (RegNet's 8 channels per group) in the cascade: oneDNN's bf16 kernel exactly
 * where a bf16 session would pick a bf16 GEMM (the bf16 rate measured above fp32's), its fp32 one
 * otherwise; neither where anvil was built without oneDNN. */
static void test_grouped_cascade(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_CONV, 3, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_attr_int(&t, 3, "group", 8);
    const int64_t dx[] = {1, 64, 14, 14}, dw[] = {64, 8, 3, 3};
    float *x = operand(optest_prod(dx, 4), 6, false), *w = operand(optest_prod(dw, 4), 7, false),
          *b = operand(64, 8, false);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){64}, b, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    const peak_rates *r = peak_rates_get();
    /* kern_cascade_may_pick's test for oneDNN's bf16 kernel (KERN_BF16_BEST_ISA): the faster of
     * AMX and vdpbf16ps against the FMA */
    const double best = r->isa[PEAK_AMX_BF16] > r->isa[PEAK_AVX512_BF16] ? r->isa[PEAK_AMX_BF16]
                                                                         : r->isa[PEAK_AVX512_BF16];
    const bool faster = have_bf16() && best > 1.2 * r->f32;
    const bool dnnl = kern_find(IR_OP_CONV, "dnnl_conv_split") != NULL;
    for (int prec = KERN_PREC_F32; prec <= KERN_PREC_BF16; prec++) {
        kern_knobs kb = {.precision = prec};
        kern_node kn = {optest_node(&t), in, 3, t.out_info, 1, 1, NULL, NULL, &kb};
        const kern_variant *v = conv_auto_pick(&kn);
        assert_non_null(v);
        const char *want = !dnnl                              ? "conv_implicit_gemm"
                           : prec == KERN_PREC_BF16 && faster ? "dnnl_conv_split_bf16"
                                                              : "dnnl_conv_split";
        assert_string_equal(v->name, want);
    }
    optest_end(&t);
    /* weights that are an input (a training graph's): oneDNN has no bf16 form for them, so the
     * fp32 one runs, in a bf16 session too */
    optest_begin(&t, IR_OP_CONV, 3, 1, 4);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_attr_int(&t, 3, "group", 8);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dw, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){64}, b, true);
    t.knobs = &bf16_session;
    assert_false(optest_variant_applies(&t, "dnnl_conv_split_bf16"));
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    optest_input_info(&t, in);
    const kern_knobs kb = {.precision = KERN_PREC_BF16};
    const kern_node kn = {optest_node(&t), in, 3, t.out_info, 1, 1, NULL, NULL, &kb};
    const kern_variant *v = conv_auto_pick(&kn);
    assert_non_null(v);
    assert_string_equal(v->name, dnnl ? "dnnl_conv_split" : "conv_implicit_gemm");
    optest_end(&t);
    /* A dense conv in a bf16 session: oneDNN's bf16 kernel exactly where anvil's own bf16 tiles
     * lose to fp32 (vdpbf16ps measured below 1.2x the FMA) and AMX wins (a Sapphire Rapids
     * core), else not. */
    const int64_t dwd[] = {64, 64, 3, 3};
    float *wd = operand(optest_prod(dwd, 4), 9, false);
    optest_begin(&t, IR_OP_CONV, 3, 1, 3);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dwd, wd, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){64}, b, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    optest_input_info(&t, in);
    const kern_node knd = {optest_node(&t), in, 3, t.out_info, 1, 1, NULL, NULL, &kb};
    const bool own_pays = r->isa[PEAK_AVX512_BF16] > 1.2 * r->f32;
    const bool amx_pays = r->isa[PEAK_AMX_BF16] > 1.2 * r->f32;
    v = conv_auto_pick(&knd);
    assert_non_null(v);
    if (dnnl && have_bf16() && !own_pays && amx_pays)
        assert_string_equal(v->name, "dnnl_conv_split_bf16");
    else
        assert_string_not_equal(v->name, "dnnl_conv_split_bf16");
    optest_end(&t);
    /* Few pixels and many channels (DeepLabV3's 256-channel 14x14 3x3): the pixels-as-rows GEMM
     * on bf16 tiles where those beat fp32 here, ahead of fp32 Winograd; never in fp32 */
    const int64_t dxw[] = {1, 128, 14, 14}, dww[] = {128, 128, 3, 3};
    float *xw = operand(optest_prod(dxw, 4), 10, false),
          *ww = operand(optest_prod(dww, 4), 11, false);
    optest_begin(&t, IR_OP_CONV, 2, 1, 3);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){1, 1}, 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dxw, xw, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dww, ww, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    optest_input_info(&t, in);
    for (int prec = KERN_PREC_F32; prec <= KERN_PREC_BF16; prec++) {
        kern_knobs kw = {.precision = prec};
        kern_node knw = {optest_node(&t), in, 2, t.out_info, 1, 1, NULL, NULL, &kw};
        v = conv_auto_pick(&knw);
        assert_non_null(v);
        if (prec == KERN_PREC_BF16 && have_bf16() && own_pays)
            assert_string_equal(v->name, "conv_nhwc_bf16_gemm");
        else
            assert_string_not_equal(v->name, "conv_nhwc_bf16_gemm");
    }
    optest_end(&t);
    free(xw);
    free(ww);
    free(wd);
    free(x);
    free(w);
    free(b);
}

/* The layouts oneDNN's bf16 grouped convolution reads and writes (data_nchw_to_bf16_blocked,
 * data_blocked_to_nchw_f32: dnnl_conv_split_bf16's activation reorders): a slice of channels of
 * an NCHW batch into channel blocks of 8 and 16 and back, on channel counts that leave partial
 * blocks and pixel counts that leave partial tiles. Every element against its index formula;
 * what must not be written keeps its sentinel. */
static void test_blocked_layouts(void **state) {
    (void)state;
    if (!have_bf16()) skip();
    const int64_t n = 2, full_c = 29, hw_list[] = {37, 16, 5};
    for (int bi = 0; bi < 2; bi++)
        for (int hi = 0; hi < 3; hi++)
            for (int64_t c = 3; c <= 21; c += 9) {
                const int blk = bi ? 16 : 8;
                const int64_t hw = hw_list[hi], cb = (c + blk - 1) / blk;
                const size_t xn = (size_t)(full_c * hw), xc = (size_t)hw;
                const size_t yn = (size_t)(cb * hw * blk) + 8, ycb = (size_t)(hw * blk);
                float *x = operand((size_t)n * xn, 81, false);
                uint16_t *y = malloc((size_t)n * yn * sizeof *y);
                for (size_t i = 0; i < (size_t)n * yn; i++) y[i] = 0xbeef;
                data_nchw_to_bf16_blocked(x, n, c, hw, xn, xc, y, blk, yn, ycb);
                for (int64_t b = 0; b < n; b++)
                    for (int64_t ch = 0; ch < cb * blk; ch++)
                        for (int64_t p = 0; p < hw; p++) {
                            uint16_t got = y[(size_t)b * yn + (size_t)(ch / blk) * ycb +
                                             (size_t)(p * blk + ch % blk)];
                            uint16_t want =
                                ch < c ? core_f32_to_bf16(
                                             x[(size_t)b * xn + (size_t)ch * xc + (size_t)p])
                                : ch < (c + 7) / 8 * 8 ? 0
                                                       : 0xbeef;
                            assert_int_equal(got, want);
                        }
                for (int64_t b = 0; b < n; b++)
                    assert_int_equal(y[(size_t)b * yn + yn - 1], 0xbeef);
                /* back: fp32 blocked into the channel slice of an NCHW batch */
                float *t = operand((size_t)n * yn, 82, false);
                float *z = malloc((size_t)n * xn * sizeof *z);
                for (size_t i = 0; i < (size_t)n * xn; i++) z[i] = -7.0f;
                data_blocked_to_nchw_f32(t, n, c, hw, blk, yn, ycb, z, xn, xc);
                for (int64_t b = 0; b < n; b++)
                    for (int64_t ch = 0; ch < full_c; ch++)
                        for (int64_t p = 0; p < hw; p++) {
                            float got = z[(size_t)b * xn + (size_t)ch * xc + (size_t)p];
                            float want = ch < c ? t[(size_t)b * yn + (size_t)(ch / blk) * ycb +
                                                    (size_t)(p * blk + ch % blk)]
                                                : -7.0f;
                            assert_true(got == want);
                        }
                free(x);
                free(y);
                free(t);
                free(z);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_layouts),
        cmocka_unit_test(test_edges_exact),
        cmocka_unit_test(test_blocks_and_batches_exact),
        cmocka_unit_test(test_rounding_shows),
        cmocka_unit_test(test_round_to_even),
        cmocka_unit_test(test_fp32_session_refuses),
        cmocka_unit_test(test_gemm_transposed_exact),
        cmocka_unit_test(test_conv_exact),
        cmocka_unit_test(test_grouped_cascade),
        cmocka_unit_test(test_indirect_a),
        cmocka_unit_test(test_storage_exact),
        cmocka_unit_test(test_a16_in_place),
        cmocka_unit_test(test_binary16_rounds_as_tiles),
        cmocka_unit_test(test_odd_kc_knob),
        cmocka_unit_test(test_regions),
        cmocka_unit_test(test_grad_w_exact),
        cmocka_unit_test(test_deconv_exact),
        cmocka_unit_test(test_batched_exact),
        cmocka_unit_test(test_nhwc_exact),
        cmocka_unit_test(test_cascade),
        cmocka_unit_test(test_fused_exact),
        cmocka_unit_test(test_conv_nhwc_exact),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
