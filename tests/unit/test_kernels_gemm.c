/* anvil's GEMM variants (src/kernels/cpu/gemm) against the reference MatMul and Gemm, on the
 * shapes where tiling goes wrong: one less than a tile, a tile, one more, primes, K = 1,
 * zero-size, batch broadcasting, transposed operands, broadcast C, pre-packed and run-time B. */
#include "kernels/cpu/gemm/gemm.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* The number of gemm_f32 variants that can run on this machine: the shape-picking one plus
 * every tile whose ISA is present. */
static int expected_variants(void) {
    int n = 0;
    for (const gemm_kernel *const *k = gemm_kernels; *k; k++)
        if (gemm_kernel_usable(*k, core_hw_get())) n++;
    return n + 1;
}

static void check_matmul(int ra, const int64_t *da, int rb, const int64_t *db, bool b_known) {
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float *a = optest_random_f32(optest_prod(da, ra), 1, -1.0f, 1.0f),
          *b = optest_random_f32(optest_prod(db, rb), 2, -1.0f, 1.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, db, b, b_known);
    int n = optest_check_variants(&t, 1e-4f, 1e-4f);
    /* Vendor variants may add to the count; anvil's own must all be there. */
    if (n < expected_variants())
        fprintf(stderr, "checked %d variants, want >= %d\n", n, expected_variants());
    assert_true(n >= expected_variants());
    optest_end(&t);
    free(a);
    free(b);
}

static void test_matmul_edges(void **state) {
    (void)state;
    /* Every (M, N) around the tile sizes in use (MR in 4..16, NR in 8..64) with a few K. */
    static const int64_t ms[] = {1, 3, 5, 13, 14, 15, 17, 29};
    static const int64_t ns[] = {1, 7, 15, 16, 17, 31, 32, 33, 47, 63, 65, 97};
    static const int64_t ks[] = {1, 2, 17, 64};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
            int64_t k = ks[(i + j) % 4];
            check_matmul(2, (int64_t[]){ms[i], k}, 2, (int64_t[]){k, ns[j]}, (i + j) % 2 == 0);
        }
}

static void test_matmul_blocking(void **state) {
    (void)state;
    /* Past KC (384) and NC so the k-blocks accumulate and the column blocks advance. */
    check_matmul(2, (int64_t[]){37, 800}, 2, (int64_t[]){800, 45}, true);
    check_matmul(2, (int64_t[]){29, 391}, 2, (int64_t[]){391, 70}, false);
}

static void test_matmul_batched(void **state) {
    (void)state;
    /* Folded: B one matrix, A's batch dims become rows. */
    check_matmul(3, (int64_t[]){3, 5, 8}, 2, (int64_t[]){8, 17}, true);
    /* Batched with broadcasting on either side, and 1-D operands. */
    check_matmul(4, (int64_t[]){2, 3, 5, 8}, 4, (int64_t[]){2, 1, 8, 17}, false);
    check_matmul(3, (int64_t[]){1, 7, 9}, 3, (int64_t[]){4, 9, 33}, false);
    check_matmul(3, (int64_t[]){5, 7, 9}, 3, (int64_t[]){5, 9, 3}, false);
    check_matmul(1, (int64_t[]){9}, 2, (int64_t[]){9, 33}, true);
    check_matmul(2, (int64_t[]){6, 9}, 1, (int64_t[]){9}, false);
    check_matmul(1, (int64_t[]){9}, 3, (int64_t[]){3, 9, 5}, false);
}

static void test_matmul_zero_size(void **state) {
    (void)state;
    check_matmul(2, (int64_t[]){0, 8}, 2, (int64_t[]){8, 17}, true);
    check_matmul(2, (int64_t[]){5, 8}, 2, (int64_t[]){8, 0}, false);
    /* K = 0: the product is all zeros. */
    check_matmul(2, (int64_t[]){5, 0}, 2, (int64_t[]){0, 17}, true);
}

static void check_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int c_rank,
                       const int64_t *c_dims, float alpha, float beta, bool b_known) {
    optest t;
    optest_begin(&t, IR_OP_GEMM, c_rank >= 0 ? 3 : 2, 1, 4);
    optest_attr_int(&t, 0, "transA", ta);
    optest_attr_int(&t, 1, "transB", tb);
    optest_attr_float(&t, 2, "alpha", alpha);
    optest_attr_float(&t, 3, "beta", beta);
    int64_t da[2] = {ta ? k : m, ta ? m : k}, db[2] = {tb ? n : k, tb ? k : n};
    float *a = optest_random_f32((size_t)(m * k), 3, -1.0f, 1.0f),
          *b = optest_random_f32((size_t)(k * n), 4, -1.0f, 1.0f);
    float *c = c_rank >= 0 ? optest_random_f32(optest_prod(c_dims, c_rank), 5, -1.0f, 1.0f) : NULL;
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, db, b, b_known);
    if (c) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, c_rank, c_dims, c, true);
    int got = optest_check_variants(&t, 1e-4f, 1e-4f);
    assert_true(got >= expected_variants());
    optest_end(&t);
    free(a);
    free(b);
    free(c);
}

static void test_gemm_variants(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(15, 33, 19, ta, tb, 1, (int64_t[]){33}, 1.0f, 1.0f, tb);
            check_gemm(14, 32, 7, ta, tb, 2, (int64_t[]){14, 32}, 0.5f, -2.0f, !tb);
            check_gemm(13, 31, 1, ta, tb, 2, (int64_t[]){13, 1}, 2.0f, 0.25f, true);
            check_gemm(17, 65, 23, ta, tb, 0, NULL, 1.0f, 1.0f, false);
            check_gemm(5, 9, 3, ta, tb, -1, NULL, 1.5f, 1.0f, true);
        }
}

/* A MatMul or Gemm carrying a fused epilogue (ir_fusion, as src/passes leaves it): bias over the
 * last dim and/or a residual of the output's shape appended after the op's own inputs, then an
 * activation. Every variant (fusing in its GEMM epilogue, or leaving it to the runtime) must
 * match the reference followed by the runtime's fallback. */
static void check_fused(ir_op op, int ra, const int64_t *da, const int64_t *db, bool bias,
                        bool residual, ir_act act, bool gemm_c) {
    ir_fusion f = {.bias = -1,
                   .residual = -1,
                   .act = act,
                   .alpha = 0.1f,
                   .beta = 0.4f,
                   .lo = -0.5f,
                   .hi = 0.75f};
    const int own = op == IR_OP_GEMM ? 3 : 2;
    int n_in = own + (bias ? 1 : 0) + (residual ? 1 : 0);
    optest t;
    optest_begin(&t, op, n_in, 1, 0);
    int64_t dy[4];
    for (int i = 0; i < ra - 1; i++) dy[i] = da[i];
    dy[ra - 1] = db[1];
    size_t ny = optest_prod(dy, ra);
    float *a = optest_random_f32(optest_prod(da, ra), 11, -1.0f, 1.0f),
          *b = optest_random_f32(optest_prod(db, 2), 12, -1.0f, 1.0f),
          *bv = optest_random_f32((size_t)db[1], 13, -1.0f, 1.0f),
          *r = optest_random_f32(ny, 14, -1.0f, 1.0f), *c = optest_random_f32(ny, 15, -1.0f, 1.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, db, b, true);
    if (op == IR_OP_GEMM && gemm_c) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, dy, c, false);
    int next = own;
    if (bias) {
        f.bias = next;
        optest_input(&t, next++, ANVIL_DTYPE_FLOAT32, 1, &db[1], bv, true);
    }
    if (residual) {
        f.residual = next;
        optest_input(&t, next++, ANVIL_DTYPE_FLOAT32, ra, dy, r, false);
    }
    optest_node(&t)->fusion = &f;
    int n = optest_check_variants(&t, 1e-4f, 1e-4f);
    assert_true(n >= expected_variants());
    optest_end(&t);
    free(a);
    free(b);
    free(bv);
    free(r);
    free(c);
}

static void test_fused_epilogue(void **state) {
    (void)state;
    const ir_act acts[] = {IR_ACT_NONE,       IR_ACT_RELU,      IR_ACT_CLIP,
                           IR_ACT_LEAKY_RELU, IR_ACT_SIGMOID,   IR_ACT_TANH,
                           IR_ACT_GELU_ERF,   IR_ACT_GELU_TANH, IR_ACT_HARD_SIGMOID,
                           IR_ACT_HARD_SWISH, IR_ACT_SILU};
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) {
        /* folded batch (3-D A), edges around the tiles */
        check_fused(IR_OP_MATMUL, 3, (int64_t[]){2, 15, 19}, (int64_t[]){19, 33}, true, i % 2,
                    acts[i], false);
        check_fused(IR_OP_MATMUL, 2, (int64_t[]){17, 8}, (int64_t[]){8, 65}, i % 3 == 0, true,
                    acts[i], false);
        /* whole tiles for every tile shape, so the epilogue runs in the micro-kernel's
         * registers (bias, residual, Relu/Clip) as well as after the store (the others) */
        check_fused(IR_OP_MATMUL, 2, (int64_t[]){336, 40}, (int64_t[]){40, 192}, true, true,
                    acts[i], false);
    }
    /* Gemm: residual without C (fused in the epilogue) and next to C (applied after) */
    check_fused(IR_OP_GEMM, 2, (int64_t[]){13, 9}, (int64_t[]){9, 31}, false, true, IR_ACT_RELU,
                false);
    check_fused(IR_OP_GEMM, 2, (int64_t[]){13, 9}, (int64_t[]){9, 31}, false, true, IR_ACT_SIGMOID,
                true);
    check_fused(IR_OP_GEMM, 2, (int64_t[]){14, 9}, (int64_t[]){9, 32}, false, false, IR_ACT_TANH,
                true);
}

/* The epilogue on its own: every activation against a scalar recomputation. */
static void test_epilogue_activations(void **state) {
    (void)state;
    const ir_act acts[] = {IR_ACT_NONE,       IR_ACT_RELU,      IR_ACT_CLIP,
                           IR_ACT_LEAKY_RELU, IR_ACT_SIGMOID,   IR_ACT_TANH,
                           IR_ACT_GELU_ERF,   IR_ACT_GELU_TANH, IR_ACT_HARD_SIGMOID,
                           IR_ACT_HARD_SWISH, IR_ACT_SILU};
    float rb[3] = {0.5f, -1.0f, 2.0f}, cb[4] = {1.0f, 0.0f, -0.5f, 0.25f};
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
        float c[12], want[12];
        for (int i = 0; i < 12; i++) c[i] = (float)(i - 6) * 0.37f;
        gemm_epilogue ep = gemm_epilogue_none();
        ep.scale = 2.0f;
        ep.row_bias = rb;
        ep.col_bias = cb;
        ep.act = acts[a];
        ep.alpha = 0.2f;
        ep.beta_act = 0.5f;
        ep.lo = -1.0f;
        ep.hi = 1.5f;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                float x = 2.0f * c[i * 4 + j] + rb[i] + cb[j];
                float y;
                switch (acts[a]) {
                case IR_ACT_RELU:
                    y = x > 0 ? x : 0;
                    break;
                case IR_ACT_CLIP:
                    y = x < -1 ? -1 : (x > 1.5f ? 1.5f : x);
                    break;
                case IR_ACT_LEAKY_RELU:
                    y = x < 0 ? 0.2f * x : x;
                    break;
                case IR_ACT_SIGMOID:
                    y = 1 / (1 + expf(-x));
                    break;
                case IR_ACT_TANH:
                    y = tanhf(x);
                    break;
                case IR_ACT_GELU_ERF:
                    y = 0.5f * x * (1 + erff(x / sqrtf(2)));
                    break;
                case IR_ACT_GELU_TANH:
                    y = 0.5f * x *
                        (1 + tanhf(sqrtf(2 / 3.14159265f) * (x + 0.044715f * x * x * x)));
                    break;
                case IR_ACT_HARD_SIGMOID:
                    y = fmaxf(0, fminf(1, 0.2f * x + 0.5f));
                    break;
                case IR_ACT_HARD_SWISH:
                    y = x * fmaxf(0, fminf(1, x / 6 + 0.5f));
                    break;
                case IR_ACT_SILU:
                    y = x / (1 + expf(-x));
                    break;
                default:
                    y = x;
                }
                want[i * 4 + j] = y;
            }
        gemm_epilogue_apply(&ep, c, 4, 0, 0, 3, 4);
        assert_int_equal(optest_compare_f32(c, want, 12, 1e-5f, 1e-6f), -1);
    }
}

/* A single row (a classifier head, an RNN step, a loop body's GEMV) takes the one-row tile
 * where AVX-512 is there: any taller tile spends its other rows' FMAs on padding. Two rows
 * already go to a taller tile (the one-row tile would stream B twice). The results are checked
 * against the reference with every variant by test_matmul_edges (M = 1 included). */
static void test_default_single_row(void **state) {
    (void)state;
    const core_hw *hw = core_hw_get();
    const gemm_kernel *one = gemm_kernel_find("1x64_avx512");
    assert_non_null(one);
    if (!gemm_kernel_usable(one, hw)) skip();
    assert_ptr_equal(gemm_kernel_default(1, 1024, 1024, hw), one);
    assert_ptr_equal(gemm_kernel_default(1, 1000, 576, hw), one);
    assert_true(gemm_kernel_default(2, 1024, 1024, hw) != one);
    assert_true(gemm_kernel_default(64, 1024, 1024, hw) != one);
    check_matmul(2, (int64_t[]){1, 300}, 2, (int64_t[]){300, 1000}, true);
    /* A batch of single rows times one matrix is one GEMM of all the rows (torch's attention
     * input projection, [197, 1, 384] x [384, 1152]): not the one-row tile. */
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    static float a[197 * 384], b[384 * 1152];
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){197, 1, 384}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){384, 1152}, b, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    kern_node kn = {optest_node(&t), in, 2, t.out_info, 1, 1, NULL, NULL, NULL};
    assert_ptr_equal(gemm_node_default_kernel(&kn), gemm_kernel_default(197, 1152, 384, hw));
    assert_true(gemm_node_default_kernel(&kn) != one);
    optest_end(&t);
}

/* The columns t spends on n, in full-tile columns: an edge narrower than its column kernel's
 * threshold (gemm_cols_kernel_below; none for a tile without one) at that kernel's cost, a third
 * more than its share of a tile's multiplies. */
static double tile_columns_cost(const gemm_kernel *t, int64_t n) {
    const int64_t edge = n % t->nr;
    if (edge == 0 || edge >= gemm_cols_kernel_below(t))
        return (double)((n + t->nr - 1) / t->nr * t->nr);
    return (double)(n - edge) +
           (double)edge * (double)gemm_kernel_vl(t) / (double)t->mr * 4.0 / 3.0;
}

/* The reduced-precision tiles' speeds are measured on this machine, once per process: each
 * usable tile has a speed in (0, 1], the fastest exactly 1, and the default for a shape is the
 * tile with the least padded work (an edge at its column kernel's cost) over those speeds (what
 * the tile order of one CPU got wrong on another: 4x64 led on Zen 4, 8x48 leads by 5-9% on Zen
 * 5). Skipped where no such tile runs. */
static void check_measured_default(const gemm_kernel *const *list,
                                   const gemm_kernel *(*pick)(int64_t, int64_t, int64_t,
                                                              const core_hw *)) {
    const core_hw *hw = core_hw_get();
    int usable = 0;
    for (int i = 0; i < GEMM_RATED_MAX && list[i]; i++) usable += gemm_kernel_usable(list[i], hw);
    if (!usable) {
        assert_null(pick(128, 768, 768, hw));
        return;
    }
    const float *speed = gemm_tile_speeds(list, hw);
    assert_non_null(speed);
    assert_ptr_equal(gemm_tile_speeds(list, hw), speed);
    float top = 0;
    for (int i = 0; i < GEMM_RATED_MAX && list[i]; i++) {
        if (!gemm_kernel_usable(list[i], hw)) continue;
        assert_true(speed[i] > 0.0f && speed[i] <= 1.0f);
        if (speed[i] > top) top = speed[i];
    }
    assert_true(top == 1.0f);
    static const int64_t shapes[][2] = {{1, 768},   {128, 768},  {128, 3072}, {197, 1152},
                                        {336, 384}, {50, 50257}, {7, 20}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1];
        const gemm_kernel *got = pick(m, n, 768, hw);
        assert_non_null(got);
        assert_true(gemm_kernel_usable(got, hw));
        double got_cost = -1;
        for (int i = 0; i < GEMM_RATED_MAX && list[i]; i++)
            if (list[i] == got)
                got_cost = (double)((m + got->mr - 1) / got->mr * got->mr) *
                           tile_columns_cost(got, n) / speed[i];
        assert_true(got_cost > 0);
        for (int i = 0; i < GEMM_RATED_MAX && list[i]; i++) {
            const gemm_kernel *t = list[i];
            if (!gemm_kernel_usable(t, hw)) continue;
            const double cost =
                (double)((m + t->mr - 1) / t->mr * t->mr) * tile_columns_cost(t, n) / speed[i];
            if (cost < got_cost)
                fail_msg("%lldx%lld: %s beats the default %s", (long long)m, (long long)n, t->name,
                         got->name);
        }
    }
}

static void test_default_measured(void **state) {
    (void)state;
    check_measured_default(gemm_kernels_bf16, gemm_kernel_default_bf16);
    check_measured_default(gemm_kernels_fp16, gemm_kernel_default_fp16);
}

/* A forced tile that the CPU lacks is refused by name; an unknown name lists what applies. */
static void test_forced_names(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    float a[6] = {0}, b[6] = {0};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, b, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    kern_node kn = {optest_node(&t), in, 2, t.out_info, 1, 1, NULL, NULL, NULL};
    const kern_variant *v = NULL;
    assert_int_equal(kern_select(&kn, "gemm_f32_4x8_portable", &v), ANVIL_OK);
    assert_string_equal(v->name, "gemm_f32_4x8_portable");
    assert_int_equal(kern_select(&kn, "no_such_variant", &v), ANVIL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(anvil_last_error(), "gemm_f32_4x8_portable"));
    assert_int_equal(kern_select(&kn, NULL, &v), ANVIL_OK);
    assert_string_equal(v->name, "gemm_f32");
    optest_end(&t);
}

/* An implicit GEMM's A (gemm_problem.a_ind: rows of segments anywhere, some all zeros) through
 * every kernel this CPU runs, against the product computed in double: edge row panels, K blocks
 * shorter than a segment (KC 16 cuts a 40-float segment into 14 + 13 + 13), a segment per K
 * block, a bias epilogue, and the threaded driver. */
static void test_indirect_a(void **state) {
    (void)state;
    const core_hw *hw = core_hw_get();
    float *pool = optest_random_f32(4096, 11, -1.0f, 1.0f);
    float *zeros = calloc(64, sizeof(float));
    core_pool *threads = NULL;
    assert_int_equal(core_pool_create(3, &threads), ANVIL_OK);
    for (const gemm_kernel *const *kp = gemm_kernels; *kp; kp++) {
        const gemm_kernel *k = *kp;
        if (!gemm_kernel_usable(k, hw)) continue;
        const int64_t ms[] = {1, k->mr - 1, k->mr, 2 * k->mr + 3}, ns[] = {3, k->nr + 5};
        const int64_t segs_of[] = {5, 40}, kcs[] = {16, 256};
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t ni = 0; ni < 2; ni++)
                for (size_t si = 0; si < 2; si++)
                    for (size_t ki = 0; ki < 2; ki++)
                        for (int par = 0; par < 2; par++) {
                            const int64_t m = ms[mi], n = ns[ni], seg = segs_of[si], segs = 3;
                            if (m <= 0) continue;
                            const int64_t kd = seg * segs;
                            const float **tab = malloc(sizeof(float *) * (size_t)(m * segs));
                            for (int64_t q = 0; q < m * segs; q++)
                                tab[q] = q % 7 == 3 ? zeros : pool + (q * 131) % (4096 - seg);
                            float *b = optest_random_f32((size_t)(kd * n), 12, -1.0f, 1.0f);
                            float *bias = optest_random_f32((size_t)n, 13, -1.0f, 1.0f);
                            float *c = malloc(sizeof(float) * (size_t)(m * n));
                            float *want = malloc(sizeof(float) * (size_t)(m * n));
                            for (int64_t i = 0; i < m; i++)
                                for (int64_t j = 0; j < n; j++) {
                                    double acc = bias[j];
                                    for (int64_t p = 0; p < kd; p++)
                                        acc +=
                                            (double)tab[i * segs + p / seg][p % seg] * b[p * n + j];
                                    want[i * n + j] = (float)acc;
                                }
                            gemm_problem pr = {0};
                            pr.m = m;
                            pr.n = n;
                            pr.k = kd;
                            pr.a_ind = tab;
                            pr.a_seg = seg;
                            pr.b = b;
                            pr.rs_b = n;
                            pr.cs_b = 1;
                            pr.c = c;
                            pr.ldc = n;
                            pr.ep = gemm_epilogue_none();
                            pr.ep.col_bias = bias;
                            gemm_blocking blk = gemm_blocking_default(k, m, n, kd, hw);
                            blk.kc = kcs[ki];
                            void *ws = core_aligned_alloc(64, 3 * gemm_thread_workspace(k, &blk));
                            op_ctx ctx;
                            memset(&ctx, 0, sizeof ctx);
                            ctx.pool = threads;
                            if (par)
                                gemm_run(k, &blk, &pr, ws, &ctx);
                            else
                                gemm_run_serial(k, &blk, &pr, ws);
                            if (optest_compare_f32(c, want, (size_t)(m * n), 1e-5f, 1e-5f) >= 0)
                                fail_msg("%s m %lld n %lld seg %lld kc %lld %s", k->name,
                                         (long long)m, (long long)n, (long long)seg,
                                         (long long)blk.kc, par ? "threaded" : "serial");
                            free(ws);
                            free(c);
                            free(want);
                            free(bias);
                            free(b);
                            free(tab);
                        }
    }
    core_pool_free(threads);
    free(zeros);
    free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_edges),     cmocka_unit_test(test_matmul_blocking),
        cmocka_unit_test(test_matmul_batched),   cmocka_unit_test(test_matmul_zero_size),
        cmocka_unit_test(test_gemm_variants),    cmocka_unit_test(test_epilogue_activations),
        cmocka_unit_test(test_forced_names),     cmocka_unit_test(test_fused_epilogue),
        cmocka_unit_test(test_indirect_a),       cmocka_unit_test(test_default_single_row),
        cmocka_unit_test(test_default_measured),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
