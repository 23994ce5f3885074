/* The tunable variants' parameter spaces (kernels.h's kern_space) on the GEMM, the GEMM-based
 * convolutions and the attention kernels: for each case, every configuration of every space that
 * applies (the cross product of values(), and the all-zero default) is run through rt_variant_exec
 * with kn.config set and compared with the reference variant, on 1 and 2 threads. Rules only count
 * here: a configuration they remove must still compute the right answer. Also: values() never lists
 * 0 or a value twice, the all-zero configuration gives the very bits of no configuration, and every
 * rule removes some configuration somewhere (on this machine's caches or on a small-cache one), so
 * none is vacuous. */
#include "kernels/cpu/gemm/gemm.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define MAX_VALS 64
#define MAX_RULE_NAMES 16

/* Per rule name, the configurations it removed over every case so far. */
static struct {
    const char *name;
    long removed;
} rule_tally[MAX_RULE_NAMES];
static int n_rule_names;
static long n_configs; /* configurations run */

static void tally(const char *name, bool removed) {
    int i = 0;
    while (i < n_rule_names && strcmp(rule_tally[i].name, name)) i++;
    if (i == n_rule_names) {
        assert_true(n_rule_names < MAX_RULE_NAMES);
        rule_tally[n_rule_names++].name = name;
    }
    rule_tally[i].removed += removed;
}

/* A machine with small caches (L1d 8 KiB, L2 128 KiB, L3 256 KiB), so that the rules bound by the
 * caches bite on shapes small enough to run often. */
static core_hw small_hw(void) {
    core_hw hw = *core_hw_get();
    hw.l1d_bytes = (size_t)8 << 10;
    hw.l2_bytes = (size_t)128 << 10;
    hw.l3_bytes = (size_t)256 << 10;
    return hw;
}

static float *run_config(optest *t, const kern_variant *v, kern_node *kn, const kern_config *c,
                         core_pool *pool) {
    kn->config = c;
    rt_variant_exec *e;
    anvil_status s = rt_variant_exec_create(v, kn, pool, &e);
    kn->config = NULL;
    if (s != ANVIL_OK) {
        fprintf(stderr, "%s: %s\n", v->name, anvil_last_error());
        return NULL;
    }
    op_tensor got = t->out[0];
    const size_t n = op_tensor_numel(&got);
    got.data = malloc((n ? n : 1) * sizeof(float));
    memset(got.data, 0xff, n * sizeof(float)); /* NaN: an unwritten output fails */
    const op_tensor *ins[OPTEST_MAX_IO];
    op_tensor *outs[1] = {&got};
    for (int i = 0; i < t->n_in; i++) ins[i] = t->in_set[i] ? &t->in[i] : NULL;
    s = rt_variant_exec_run(e, optest_node(t), ins, t->n_in, outs, 1);
    rt_variant_exec_free(e);
    if (s != ANVIL_OK) {
        fprintf(stderr, "%s: run: %s\n", v->name, anvil_last_error());
        free(got.data);
        return NULL;
    }
    return got.data;
}

static void print_config(const kern_variant *v, const kern_config *c) {
    fprintf(stderr, "  %s", v->name);
    for (int i = 0; i < v->space->n_params; i++) {
        const char *l = v->space->label ? v->space->label(i, c->v[i]) : NULL;
        if (l)
            fprintf(stderr, " %s=%s", v->space->names[i], l);
        else
            fprintf(stderr, " %s=%d", v->space->names[i], (int)c->v[i]);
    }
    fprintf(stderr, "\n");
}

/* F(4x4,3x3)'s transforms cost about two digits (conv_winograd.c). */
static void tolerance(const char *name, float *rtol, float *atol) {
    *rtol = 1e-4f;
    *atol = 2e-4f;
    if (!strcmp(name, "conv_winograd_f4x4_3x3")) {
        *rtol = 1e-3f;
        *atol = 2e-3f;
    } else if (!strncmp(name, "conv_winograd_f2x2_3x3", 22)) {
        *rtol = 2e-4f;
        *atol = 5e-4f;
    }
}

/* Checks every space of t's op on `threads` threads; returns the variants with a space that
 * applied. */
static int check_spaces(optest *t, int threads) {
    assert_int_equal(optest_run(t), ANVIL_OK);
    const ir_op op = optest_node(t)->op;
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    kern_node kn = {optest_node(t), in, t->n_in, t->out_info, 1, threads, NULL, NULL, NULL};
    core_pool *pool;
    assert_int_equal(core_pool_create(threads, &pool), ANVIL_OK);
    const size_t numel = op_tensor_numel(&t->out[0]);
    float *ref = run_config(t, kern_reference(op), &kn, NULL, pool);
    assert_non_null(ref);
    assert_true(optest_compare_f32(ref, t->out[0].data, numel, 1e-6f, 1e-6f) < 0);
    const core_hw *hw = core_hw_get();
    const core_hw small = small_hw();
    size_t count;
    const kern_variant *const *list = kern_variants(op, &count);
    int spaces = 0;
    for (size_t vi = 1; vi < count; vi++) {
        const kern_variant *v = list[vi];
        const kern_space *sp = v->space;
        if (!sp || !kern_applies(v, &kn, hw)) continue;
        spaces++;
        assert_true(sp->n_params >= 1 && sp->n_params <= KERN_MAX_PARAMS);
        int32_t vals[KERN_MAX_PARAMS][MAX_VALS];
        int nv[KERN_MAX_PARAMS] = {0};
        for (int i = 0; i < sp->n_params; i++) {
            nv[i] = sp->values(&kn, hw, i, vals[i], MAX_VALS);
            assert_true(nv[i] >= 1);
            for (int a = 0; a < nv[i]; a++) {
                assert_true(vals[i][a] > 0);
                for (int b = 0; b < a; b++) assert_true(vals[i][a] != vals[i][b]);
            }
        }
        float rtol, atol;
        tolerance(v->name, &rtol, &atol);
        float *plain = run_config(t, v, &kn, NULL, pool);
        assert_non_null(plain);
        /* idx[i] == -1: parameter i at 0; the all-zero configuration first, then the product */
        int idx[KERN_MAX_PARAMS];
        for (int i = 0; i < KERN_MAX_PARAMS; i++) idx[i] = -1;
        for (bool first = true;; first = false) {
            kern_config c = {{0}};
            for (int i = 0; i < sp->n_params; i++) c.v[i] = idx[i] < 0 ? 0 : vals[i][idx[i]];
            for (int r = 0; r < sp->n_rules; r++) {
                tally(sp->rules[r].name, !sp->rules[r].ok(&kn, hw, &c));
                tally(sp->rules[r].name, !sp->rules[r].ok(&kn, &small, &c));
            }
            float *got = run_config(t, v, &kn, &c, pool);
            n_configs++;
            long bad = -1;
            if (got) bad = optest_compare_f32(got, ref, numel, rtol, atol);
            if (got && first && memcmp(got, plain, numel * sizeof(float))) {
                fprintf(stderr, "all-zero configuration differs from none:\n");
                bad = 0;
            }
            if (!got || bad >= 0) print_config(v, &c);
            assert_non_null(got);
            assert_true(bad < 0);
            free(got);
            /* the next configuration: from all-zero to every value at index 0, then count */
            int i = 0;
            if (first) {
                for (int p = 0; p < sp->n_params; p++) idx[p] = 0;
                continue;
            }
            while (i < sp->n_params && ++idx[i] == nv[i]) idx[i++] = 0;
            if (i == sp->n_params) break;
        }
        free(plain);
    }
    free(ref);
    core_pool_free(pool);
    return spaces;
}

/* The gemm_f32 variants of this machine: the shape-picking one and a usable tile each. */
static int gemm_spaces(void) {
    int n = 1;
    for (const gemm_kernel *const *k = gemm_kernels; *k; k++)
        n += gemm_kernel_usable(*k, core_hw_get());
    return n;
}

static void check_matmul(int ra, const int64_t *da, int rb, const int64_t *db, bool b_known) {
    float *a = optest_random_f32(optest_prod(da, ra), 1, -1.0f, 1.0f);
    float *b = optest_random_f32(optest_prod(db, rb), 2, -1.0f, 1.0f);
    for (int threads = 1; threads <= 2; threads++) {
        optest t;
        optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, db, b, b_known);
        assert_int_equal(check_spaces(&t, threads), gemm_spaces());
        optest_end(&t);
    }
    free(a);
    free(b);
}

static void test_matmul(void **state) {
    (void)state;
    /* M, N no multiple of any tile; K past the smallest KC values */
    check_matmul(2, (int64_t[]){37, 300}, 2, (int64_t[]){300, 150}, true);
    /* K < 16, B at run time */
    check_matmul(2, (int64_t[]){5, 12}, 2, (int64_t[]){12, 70}, false);
    /* many rows: the threads split them, so MC meets a thread's part; and A blocks that are
     * read once per B block */
    check_matmul(2, (int64_t[]){200, 400}, 2, (int64_t[]){400, 150}, true);
    /* batched: one GEMM per item, split over the items on 2 threads */
    check_matmul(3, (int64_t[]){3, 17, 40}, 3, (int64_t[]){3, 40, 50}, false);
    /* folded batch: A's batch dims become rows */
    check_matmul(3, (int64_t[]){2, 9, 33}, 2, (int64_t[]){33, 20}, true);
}

static void test_gemm_trans_b_bias(void **state) {
    (void)state;
    const int64_t m = 29, n = 90, k = 200;
    float *a = optest_random_f32((size_t)(m * k), 1, -1.0f, 1.0f);
    float *b = optest_random_f32((size_t)(n * k), 2, -1.0f, 1.0f);
    float *c = optest_random_f32((size_t)n, 3, -1.0f, 1.0f);
    for (int threads = 1; threads <= 2; threads++) {
        optest t;
        optest_begin(&t, IR_OP_GEMM, 3, 1, 4);
        optest_attr_int(&t, 0, "transA", 0);
        optest_attr_int(&t, 1, "transB", 1);
        optest_attr_float(&t, 2, "alpha", 0.5f);
        optest_attr_float(&t, 3, "beta", 1.5f);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){m, k}, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){n, k}, b, true);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n}, c, true);
        assert_int_equal(check_spaces(&t, threads), gemm_spaces());
        optest_end(&t);
    }
    free(a);
    free(b);
    free(c);
}

typedef struct conv_case {
    int64_t n, c, h, w, m, k, stride, pad, group;
    int spaces; /* conv variants with a space that must apply */
} conv_case;

static void check_conv(const conv_case *cc) {
    const int64_t xd[4] = {cc->n, cc->c, cc->h, cc->w};
    const int64_t wd[4] = {cc->m, cc->c / cc->group, cc->k, cc->k};
    float *x = optest_random_f32(optest_prod(xd, 4), 1, -1.0f, 1.0f);
    float *w = optest_random_f32(optest_prod(wd, 4), 2, -1.0f, 1.0f);
    float *b = optest_random_f32((size_t)cc->m, 3, -1.0f, 1.0f);
    for (int threads = 1; threads <= 2; threads++) {
        optest t;
        optest_begin(&t, IR_OP_CONV, 3, 1, 5);
        optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){cc->k, cc->k}, 2);
        optest_attr_ints(&t, 1, "strides", (int64_t[]){cc->stride, cc->stride}, 2);
        optest_attr_ints(&t, 2, "dilations", (int64_t[]){1, 1}, 2);
        optest_attr_int(&t, 3, "group", cc->group);
        optest_attr_ints(&t, 4, "pads", (int64_t[]){cc->pad, cc->pad, cc->pad, cc->pad}, 4);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, wd, w, true);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){cc->m}, b, true);
        assert_int_equal(check_spaces(&t, threads), cc->spaces);
        optest_end(&t);
    }
    free(x);
    free(w);
    free(b);
}

static void test_conv(void **state) {
    (void)state;
    static const conv_case cases[] = {
        /* 3x3 stride 2 with pads: im2col, implicit, NHWC (copied im2col), Winograd s2 */
        {1, 24, 15, 15, 20, 3, 2, 1, 1, 4},
        /* 3x3, 64 channels (K = 576 past KC; NHWC reads A through its pointer table, in 64-deep
         * segments): im2col, implicit, NHWC, Winograd F(2x2) and F(4x4) */
        {1, 64, 10, 10, 40, 3, 1, 1, 1, 5},
        /* 1x1: conv_1x1_gemm too */
        {2, 150, 7, 7, 33, 1, 1, 0, 1, 4},
        /* grouped 3x3: im2col, implicit, NHWC */
        {1, 32, 9, 9, 24, 3, 1, 1, 2, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_conv(&cases[i]);
}

/* After the cases above (cmocka runs the tests in order): no rule is vacuous. */
static void test_rules_bite(void **state) {
    (void)state;
    fprintf(stderr, "%ld configurations run\n", n_configs);
    assert_true(n_rule_names >= 4);
    for (int i = 0; i < n_rule_names; i++) {
        fprintf(stderr, "rule \"%s\": %ld configurations removed\n", rule_tally[i].name,
                rule_tally[i].removed);
        assert_true(rule_tally[i].removed > 0);
    }
}

/* Values no values() lists: MC and NC off the tile's multiples, KC 1 or past K, negative ones
 * and tiles out of range all run (rounded, clipped or ignored), never crash or differ. */
static void check_odd_configs(optest *t, const char *name, const kern_config *cs, int n) {
    assert_int_equal(optest_run(t), ANVIL_OK);
    const kern_variant *v = kern_find(optest_node(t)->op, name);
    assert_non_null(v);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    kern_node kn = {optest_node(t), in, t->n_in, t->out_info, 1, 2, NULL, NULL, NULL};
    if (!kern_applies(v, &kn, core_hw_get())) return;
    float rtol, atol;
    tolerance(name, &rtol, &atol);
    for (int i = 0; i < n; i++) {
        float *got = run_config(t, v, &kn, &cs[i], NULL);
        assert_non_null(got);
        const long bad =
            optest_compare_f32(got, t->out[0].data, op_tensor_numel(&t->out[0]), rtol, atol);
        if (bad >= 0) print_config(v, &cs[i]);
        assert_true(bad < 0);
        free(got);
    }
}

static void test_odd_values(void **state) {
    (void)state;
    static const kern_config cs[] = {
        {{1, 5, 3, 0}}, {{-7, 100000, 1, 0}}, {{100000, -1, 100000, 0}}, {{999, 17, 0, 0}}};
    float *a = optest_random_f32(37 * 300, 1, -1.0f, 1.0f);
    float *b = optest_random_f32(300 * 150, 2, -1.0f, 1.0f);
    optest t;
    optest_begin(&t, IR_OP_MATMUL, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){37, 300}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){300, 150}, b, true);
    check_odd_configs(&t, "gemm_f32", cs, 4);
    check_odd_configs(&t, "gemm_f32_4x8_portable", cs, 4);
    optest_end(&t);
    const int64_t xd[4] = {1, 64, 8, 8}, wd[4] = {24, 64, 3, 3};
    float *x = optest_random_f32(optest_prod(xd, 4), 1, -1.0f, 1.0f);
    float *w = optest_random_f32(optest_prod(wd, 4), 2, -1.0f, 1.0f);
    static const char *const convs[] = {"conv_im2col_gemm", "conv_implicit_gemm",
                                        "conv_nhwc_im2col_gemm", "conv_winograd_f2x2_3x3",
                                        "conv_winograd_f4x4_3x3"};
    for (size_t i = 0; i < sizeof convs / sizeof *convs; i++) {
        optest_begin(&t, IR_OP_CONV, 2, 1, 2);
        optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
        optest_attr_ints(&t, 1, "pads", (int64_t[]){1, 1, 1, 1}, 4);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, wd, w, true);
        /* tile out of range or negative; KC 1, 7 (inside a 64-deep segment) or past K */
        static const kern_config ccs[] = {{{999, 1, 0, 0}}, {{-3, 7, 0, 0}}, {{1, 100000, 0, 0}}};
        check_odd_configs(&t, convs[i], ccs, 3);
        optest_end(&t);
    }
    free(a);
    free(b);
    free(x);
    free(w);
}

static void test_labels(void **state) {
    (void)state;
    const kern_variant *v = kern_find(IR_OP_CONV, "conv_implicit_gemm");
    assert_non_null(v);
    assert_non_null(v->space);
    int32_t vals[MAX_VALS];
    const int64_t xd[4] = {1, 8, 6, 6}, wd[4] = {8, 8, 3, 3};
    float *x = optest_random_f32(optest_prod(xd, 4), 1, -1.0f, 1.0f);
    float *w = optest_random_f32(optest_prod(wd, 4), 2, -1.0f, 1.0f);
    optest t;
    optest_begin(&t, IR_OP_CONV, 2, 1, 1);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, wd, w, true);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    kern_node kn = {optest_node(&t), in, t.n_in, t.out_info, 1, 1, NULL, NULL, NULL};
    const int n = v->space->values(&kn, core_hw_get(), 0, vals, MAX_VALS);
    for (int i = 0; i < n; i++) {
        const gemm_kernel *k = gemm_kernels[vals[i] - 1];
        assert_true(gemm_kernel_usable(k, core_hw_get()));
        assert_string_equal(v->space->label(0, vals[i]), k->name);
    }
    optest_end(&t);
    free(x);
    free(w);
}

/* anvil.Sdpa's key block (kb) at 60, 120 and 240 keys, over 250 keys (blocks cut mid-way) with
 * a per-key mask, heads inside the sequence (BERT's layout); 37 queries, so that the tail choice
 * (narrow blocks, or one wide block partly empty) has both values to run. */
static void test_sdpa(void **state) {
    (void)state;
    const int64_t dq[4] = {1, 37, 2, 16}, dk[4] = {1, 250, 2, 16}, dm[4] = {1, 1, 1, 250};
    const int64_t bshd[4] = {0, 2, 1, 3};
    float *q = optest_random_f32(optest_prod(dq, 4), 3, -2, 2);
    float *k = optest_random_f32(optest_prod(dk, 4), 4, -2, 2);
    float *v = optest_random_f32(optest_prod(dk, 4), 5, -1, 1);
    float *m = optest_random_f32(250, 6, -3, 0);
    const int want = (optest_have_avx512() ? 1 : 0) + (optest_have_avx2() ? 1 : 0);
    for (int threads = 1; threads <= 2; threads++) {
        optest t;
        optest_begin(&t, IR_OP_SDPA, 4, 1, 5);
        optest_attr_ints(&t, 0, "perm_q", bshd, 4);
        optest_attr_ints(&t, 1, "perm_k", bshd, 4);
        optest_attr_ints(&t, 2, "perm_v", bshd, 4);
        optest_attr_ints(&t, 3, "perm_o", bshd, 4);
        optest_attr_float(&t, 4, "scale", 0.25f);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dq, q, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, dk, k, false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, dk, v, false);
        optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 4, dm, m, false);
        assert_int_equal(check_spaces(&t, threads), want);
        optest_end(&t);
    }
    free(q);
    free(k);
    free(v);
    free(m);
}

/* anvil.GemmPair's rows and anvil.ConvPair's pixels per block: blocks cut mid-way (150 rows,
 * 169 pixels), both biases, an activation between and the second's fused residual and Relu; a
 * 160-wide intermediate, so that 128 rows of it break the L2 rule on a small-cache machine. */
static void test_pairs(void **state) {
    (void)state;
    static const ir_fusion second = {.bias = -1, .residual = 5, .act = IR_ACT_RELU};
    const int64_t dx[3] = {3, 50, 24}, dw1[2] = {24, 160}, dw2[2] = {160, 24};
    const int64_t cx[4] = {2, 6, 13, 13}, cw1[4] = {10, 6, 3, 3}, cw2[4] = {6, 10, 1, 1};
    const int64_t pads[4] = {1, 1, 1, 1}, k3[2] = {3, 3};
    float *x = optest_random_f32(3 * 50 * 24, 11, -1, 1),
          *r = optest_random_f32(3 * 50 * 24, 12, -1, 1);
    float *w1 = optest_random_f32(24 * 160, 13, -0.5f, 0.5f),
          *w2 = optest_random_f32(160 * 24, 14, -0.5f, 0.5f);
    float *b1 = optest_random_f32(160, 15, -0.5f, 0.5f),
          *b2 = optest_random_f32(160, 16, -0.5f, 0.5f);
    for (int threads = 1; threads <= 2; threads++) {
        for (int conv = 0; conv <= 1; conv++) {
            optest t;
            optest_begin(&t, conv ? IR_OP_CONV_PAIR : IR_OP_GEMM_PAIR, 6, 1, conv ? 5 : 3);
            optest_attr_string(&t, 0, "act", conv ? "Clip" : "Gelu");
            optest_attr_float(&t, 1, "lo", -0.2f);
            optest_attr_float(&t, 2, "hi", 0.7f);
            if (conv) {
                optest_attr_ints(&t, 3, "pads", pads, 4);
                optest_attr_ints(&t, 4, "kernel_shape", k3, 2);
            }
            optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, conv ? 4 : 3, conv ? cx : dx, x, false);
            optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, conv ? 4 : 2, conv ? cw1 : dw1, w1, true);
            optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, conv ? &cw1[0] : &dw1[1], b1, true);
            optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, conv ? 4 : 2, conv ? cw2 : dw2, w2, true);
            optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 1, conv ? &cw2[0] : &dw2[1], b2, true);
            optest_input(&t, 5, ANVIL_DTYPE_FLOAT32, conv ? 4 : 3,
                         conv ? (int64_t[]){2, 6, 13, 13} : dx, r, false);
            optest_node(&t)->fusion = &second;
            assert_int_equal(check_spaces(&t, threads), 1);
            optest_end(&t);
        }
    }
    free(x);
    free(r);
    free(w1);
    free(w2);
    free(b1);
    free(b2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdpa),   cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_matmul), cmocka_unit_test(test_gemm_trans_b_bias),
        cmocka_unit_test(test_conv),   cmocka_unit_test(test_rules_bite),
        cmocka_unit_test(test_labels), cmocka_unit_test(test_odd_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
