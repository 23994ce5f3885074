/* The eltwise family's variants (src/kernels/cpu/eltwise) against the reference kernels: unary
 * activations on lengths around the vector widths, Add/Sub/Mul/Div broadcasting patterns,
 * Softmax/LogSoftmax rows, LayerNormalization, BatchNormalization (constant and run-time
 * statistics), Max/AveragePool with pads, strides, ceil_mode and count_include_pad,
 * GlobalAveragePool and Transpose permutations; zero-size tensors throughout. Each check also
 * asserts how many variants ran, so a variant that silently stops applying fails the test. Both
 * ISAs run on an AVX-512 machine (the AVX2 variants apply there too). */
#include "kernels/kernels.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* How many of "<name>_avx512" and "<name>_avx2" should run here. sleef: the variants exist only
 * in builds with SLEEF (then both are registered or neither). */
static int expected(ir_op op, const char *name, bool sleef) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%s_avx512", name);
    snprintf(b, sizeof b, "%s_avx2", name);
    const kern_variant *va = kern_find(op, a), *vb = kern_find(op, b);
    if (!sleef) {
        assert_non_null(va);
        assert_non_null(vb);
    }
    assert_true((va == NULL) == (vb == NULL));
    if (!va) return 0;
    return (optest_have_avx512() ? 1 : 0) + (optest_have_avx2() ? 1 : 0);
}

/* Runs every variant, then checks that at least `want` of them were compared. */
static void check(optest *t, float rtol, float atol, int want) {
    int n = optest_check_variants(t, rtol, atol);
    if (n < want) fprintf(stderr, "checked %d variants, want >= %d\n", n, want);
    assert_true(n >= want);
}

/* Whether the family's AVX-512 (or, without it, AVX2) variant accepts the node. */
static bool family_applies(optest *t, const char *name) {
    char full[64];
    snprintf(full, sizeof full, "%s_%s", name, optest_have_avx512() ? "avx512" : "avx2");
    return optest_variant_applies(t, full);
}

/* ---- unary -------------------------------------------------------------------------------- */

typedef struct unary_case {
    ir_op op;
    const char *name;
    bool sleef;
    float lo, hi;
    int opset;
    float rtol, atol;
} unary_case;

static const int64_t lengths[] = {1, 15, 16, 17, 31, 33, 1000};

static void run_unary(const unary_case *c, int attrs, const char *aname, float aval,
                      const char *bname, float bval, const char *sname, const char *sval) {
    for (size_t li = 0; li <= sizeof lengths / sizeof *lengths; li++) {
        /* the last round: a zero-size 3-D tensor */
        bool zero = li == sizeof lengths / sizeof *lengths;
        int64_t dims[3] = {2, 0, 3};
        int rank = zero ? 3 : 1;
        if (!zero) dims[0] = lengths[li];
        float *x = optest_random_f32(optest_prod(dims, rank), (unsigned)li + 7, c->lo, c->hi);
        optest t;
        optest_begin_opset(&t, c->op, 1, 1, attrs, c->opset);
        int k = 0;
        if (aname) optest_attr_float(&t, k++, aname, aval);
        if (bname) optest_attr_float(&t, k++, bname, bval);
        if (sname) optest_attr_string(&t, k++, sname, sval);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
        check(&t, c->rtol, c->atol, expected(c->op, c->name, c->sleef));
        optest_end(&t);
        free(x);
    }
}

static void test_unary(void **state) {
    (void)state;
    static const unary_case plain[] = {
        {IR_OP_RELU, "relu", false, -2, 2, 17, 0, 0},
        {IR_OP_HARDSWISH, "hardswish", false, -5, 5, 17, 1e-6f, 1e-6f},
        {IR_OP_SIGMOID, "sigmoid", true, -20, 20, 17, 1e-5f, 1e-6f},
        {IR_OP_TANH, "tanh", true, -6, 6, 17, 1e-5f, 1e-6f},
        {IR_OP_ERF, "erf", true, -4, 4, 17, 1e-5f, 1e-6f},
        {IR_OP_EXP, "exp", true, -80, 80, 17, 1e-5f, 1e-6f},
        {IR_OP_SOFTPLUS, "softplus", true, -30, 30, 17, 1e-5f, 1e-6f},
        {IR_OP_GELU, "gelu", true, -6, 6, 20, 1e-5f, 1e-6f},
    };
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        run_unary(&plain[i], 0, NULL, 0, NULL, 0, NULL, NULL);
    unary_case leaky = {IR_OP_LEAKYRELU, "leakyrelu", false, -2, 2, 17, 0, 0};
    run_unary(&leaky, 1, "alpha", 0.1f, NULL, 0, NULL, NULL);
    unary_case hs = {IR_OP_HARDSIGMOID, "hardsigmoid", false, -6, 6, 17, 1e-6f, 1e-6f};
    run_unary(&hs, 2, "alpha", 0.3f, "beta", 0.4f, NULL, NULL);
    unary_case gelu_tanh = {IR_OP_GELU, "gelu", true, -6, 6, 20, 1e-5f, 1e-6f};
    run_unary(&gelu_tanh, 1, NULL, 0, NULL, 0, "approximate", "tanh");
    unary_case clip6 = {IR_OP_CLIP, "clip", false, -3, 3, 6, 0, 0};
    run_unary(&clip6, 2, "min", -0.5f, "max", 1.5f, NULL, NULL);
}

/* Like optest_cmp_f32, but a NaN must meet a NaN and an infinity the same infinity. */
static long cmp_special(const op_tensor *want, const void *got, float rtol, float atol) {
    const float *w = want->data, *g = got;
    for (size_t i = 0; i < op_tensor_numel(want); i++) {
        bool ok = isnan(w[i])   ? isnan(g[i])
                  : isinf(w[i]) ? g[i] == w[i]
                                : fabsf(g[i] - w[i]) <= atol + rtol * fabsf(w[i]);
        if (!ok) {
            fprintf(stderr, "mismatch at %zu: got %g want %g\n", i, (double)g[i], (double)w[i]);
            return (long)i;
        }
    }
    return -1;
}

/* The logistic forms (Sigmoid, GELU's tanh form; SiLU shares their exponential) in their tails:
 * their e^-x is clamped below only and overflows to +inf past x = -89, which must give the
 * limits (0, 1, a signed 0) and keep NaN, never a NaN of inf - inf or a denormal's slow path. */
static void test_logistic_tails(void **state) {
    (void)state;
    static const float tail[] = {-INFINITY, -1e30f, -1000,  -100,     -89.5f, -88.9f, -88.7f,
                                 -88,       -87.4f, -87.3f, -87,      -50,    -17,    -0.0f,
                                 0,         17,     50,     87,       87.4f,  88,     88.8f,
                                 89.5f,     100,    1e30f,  INFINITY, NAN};
    int64_t len = (int64_t)(sizeof tail / sizeof *tail);
    for (int form = 0; form < 2; form++) {
        optest t;
        optest_begin_opset(&t, form ? IR_OP_GELU : IR_OP_SIGMOID, 1, 1, form, form ? 20 : 17);
        if (form) optest_attr_string(&t, 0, "approximate", "tanh");
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, &len, tail, false);
        int n = optest_check_variants_cmp(&t, 1e-5f, 1e-30f, cmp_special);
        assert_true(n >=
                    expected(form ? IR_OP_GELU : IR_OP_SIGMOID, form ? "gelu" : "sigmoid", true));
        optest_end(&t);
    }
}

/* The own vector erf (two polynomial pieces, about 2 ulp) against libm's erff (about 1 ulp) on a
 * dense grid that crosses the pieces' seam at |x| = 1 and the saturation at 3.92. */
static void test_erf_accuracy(void **state) {
    (void)state;
    int64_t len = 200000;
    float *x = optest_random_f32((size_t)len, 5, -5, 5);
    for (int64_t i = 0; i < 1000; i++) x[i] = 0.999f + 2e-6f * (float)i;
    optest t;
    optest_begin(&t, IR_OP_ERF, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, &len, x, false);
    check(&t, 4e-7f, 0, expected(IR_OP_ERF, "erf", true));
    optest_end(&t);
    free(x);
}

static void test_clip_inputs(void **state) {
    (void)state;
    float lo = -0.25f, hi = 0.75f;
    for (int n_in = 2; n_in <= 3; n_in++) {
        int64_t len = 37;
        float *x = optest_random_f32((size_t)len, 3, -2, 2);
        optest t;
        optest_begin_opset(&t, IR_OP_CLIP, n_in, 1, 0, 13);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 1, &len, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, &lo, false);
        if (n_in == 3) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 0, NULL, &hi, false);
        check(&t, 0, 0, expected(IR_OP_CLIP, "clip", false));
        optest_end(&t);
        free(x);
    }
}

/* ---- binary ------------------------------------------------------------------------------- */

static void run_binary(int ra, const int64_t *da, int rb, const int64_t *db, bool supported) {
    static const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV};
    static const char *const names[] = {"add", "sub", "mul", "div"};
    for (int o = 0; o < 4; o++) {
        float *a = optest_random_f32(optest_prod(da, ra), 11, -2, 2);
        float *b = optest_random_f32(optest_prod(db, rb), 12, 0.5f, 2.0f);
        optest t;
        optest_begin(&t, ops[o], 2, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, db, b, false);
        if (supported)
            check(&t, 1e-6f, 0, expected(ops[o], names[o], false));
        else
            assert_false(family_applies(&t, names[o]));
        optest_end(&t);
        free(a);
        free(b);
    }
}

static void test_binary(void **state) {
    (void)state;
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
        run_binary(1, &lengths[li], 1, &lengths[li], true); /* same shape */
    run_binary(3, (int64_t[]){2, 3, 33}, 3, (int64_t[]){2, 3, 33}, true);
    run_binary(2, (int64_t[]){5, 31}, 0, NULL, true);                      /* scalar */
    run_binary(2, (int64_t[]){5, 31}, 1, (int64_t[]){1}, true);            /* one element */
    run_binary(0, NULL, 2, (int64_t[]){3, 17}, true);                      /* scalar first */
    run_binary(2, (int64_t[]){4, 33}, 1, (int64_t[]){33}, true);           /* bias */
    run_binary(3, (int64_t[]){3, 7, 768}, 1, (int64_t[]){768}, true);      /* bias */
    run_binary(1, (int64_t[]){17}, 2, (int64_t[]){5, 17}, true);           /* bias first */
    run_binary(4, (int64_t[]){2, 3, 5, 7}, 3, (int64_t[]){3, 1, 1}, true); /* per channel */
    run_binary(4, (int64_t[]){1, 16, 9, 9}, 4, (int64_t[]){1, 16, 1, 1}, true);
    run_binary(3, (int64_t[]){3, 1, 1}, 4, (int64_t[]){2, 3, 5, 7}, true);
    run_binary(2, (int64_t[]){0, 5}, 1, (int64_t[]){5}, true); /* zero-size */
    /* an outer-product-like broadcast folds to 5 dims: left to the reference */
    run_binary(5, (int64_t[]){2, 1, 3, 1, 5}, 5, (int64_t[]){1, 4, 1, 6, 1}, false);
}

static void test_binary_outer(void **state) {
    (void)state;
    /* [M,1] x [1,N]: folds to 2 dims with a column operand */
    run_binary(2, (int64_t[]){9, 1}, 2, (int64_t[]){1, 19}, true);
}

/* ---- softmax ------------------------------------------------------------------------------ */

static void run_softmax(ir_op op, int opset, int rank, const int64_t *dims, int64_t axis,
                        bool has_axis, bool supported) {
    const char *name = op == IR_OP_SOFTMAX ? "softmax" : "logsoftmax";
    float *x = optest_random_f32(optest_prod(dims, rank), 21, -10, 10);
    optest t;
    optest_begin_opset(&t, op, 1, 1, has_axis ? 1 : 0, opset);
    if (has_axis) optest_attr_int(&t, 0, "axis", axis);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    if (supported)
        check(&t, 1e-5f, op == IR_OP_SOFTMAX ? 1e-7f : 1e-5f, expected(op, name, true));
    else if (expected(op, name, true) > 0)
        assert_false(family_applies(&t, name));
    optest_end(&t);
    free(x);
}

static void test_softmax(void **state) {
    (void)state;
    static const int64_t rows[] = {1, 7, 16, 128, 1000};
    for (int o = 0; o < 2; o++) {
        ir_op op = o ? IR_OP_LOGSOFTMAX : IR_OP_SOFTMAX;
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
            run_softmax(op, 13, 2, (int64_t[]){3, rows[i]}, 0, false, true);
        run_softmax(op, 13, 4, (int64_t[]){2, 3, 5, 33}, 3, true, true);
        run_softmax(op, 11, 3, (int64_t[]){2, 3, 17}, 1, true, true); /* 2-D coercion */
        run_softmax(op, 13, 2, (int64_t[]){0, 7}, 0, false, true);    /* zero rows */
        run_softmax(op, 13, 2, (int64_t[]){4, 7}, 0, true, false);    /* strided lines */
    }
}

/* ---- layernorm ---------------------------------------------------------------------------- */

static void run_layernorm(int rank, const int64_t *dims, int64_t axis, bool bias, bool known) {
    int r0 = (int)(axis < 0 ? axis + rank : axis);
    size_t len = optest_prod(dims + r0, rank - r0);
    float *x = optest_random_f32(optest_prod(dims, rank), 31, -3, 5);
    float *sc = optest_random_f32(len, 32, 0.5f, 1.5f), *bi = optest_random_f32(len, 33, -1, 1);
    optest t;
    optest_begin_opset(&t, IR_OP_LAYERNORMALIZATION, bias ? 3 : 2, 1, 2, 17);
    optest_attr_int(&t, 0, "axis", axis);
    optest_attr_float(&t, 1, "epsilon", 1e-5f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank - r0, dims + r0, sc, known);
    if (bias) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, rank - r0, dims + r0, bi, known);
    check(&t, 1e-4f, 1e-5f, expected(IR_OP_LAYERNORMALIZATION, "layernorm", false));
    optest_end(&t);
    free(x);
    free(sc);
    free(bi);
}

static void test_layernorm(void **state) {
    (void)state;
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
        run_layernorm(2, (int64_t[]){3, lengths[li]}, -1, li % 2 == 0, li % 3 == 0);
    run_layernorm(3, (int64_t[]){2, 7, 768}, -1, true, true);
    run_layernorm(3, (int64_t[]){2, 5, 9}, 1, true, false); /* normalize over two dims */
    run_layernorm(2, (int64_t[]){0, 16}, -1, true, false);
}

/* ---- batchnorm ---------------------------------------------------------------------------- */

static void run_batchnorm(int rank, const int64_t *dims, bool known) {
    int64_t c = dims[1];
    float *x = optest_random_f32(optest_prod(dims, rank), 41, -3, 3);
    float *p[4];
    for (int i = 0; i < 4; i++) p[i] = optest_random_f32((size_t)c, 42 + (unsigned)i, 0.2f, 1.5f);
    optest t;
    optest_begin(&t, IR_OP_BATCHNORMALIZATION, 5, 1, 1);
    optest_attr_float(&t, 0, "epsilon", 1e-3f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    for (int i = 0; i < 4; i++) optest_input(&t, i + 1, ANVIL_DTYPE_FLOAT32, 1, &c, p[i], known);
    check(&t, 1e-5f, 1e-6f, expected(IR_OP_BATCHNORMALIZATION, "batchnorm", false));
    optest_end(&t);
    free(x);
    for (int i = 0; i < 4; i++) free(p[i]);
}

static void test_batchnorm(void **state) {
    (void)state;
    run_batchnorm(4, (int64_t[]){2, 3, 5, 7}, true);
    run_batchnorm(4, (int64_t[]){1, 17, 16, 16}, false);
    run_batchnorm(2, (int64_t[]){4, 33}, true);
    run_batchnorm(3, (int64_t[]){2, 5, 1000}, false);
    run_batchnorm(4, (int64_t[]){0, 3, 5, 5}, true);
}

/* ---- pooling ------------------------------------------------------------------------------ */

typedef struct pool_case {
    int64_t h, w, k, s, pad, pad_end;
    bool ceil;
    const char *auto_pad;
} pool_case;

static void run_pool(ir_op op, const pool_case *c, int64_t cip, bool supported) {
    int64_t dims[4] = {2, 3, c->h, c->w};
    const char *name = op == IR_OP_MAXPOOL ? "maxpool" : "averagepool";
    float *x = optest_random_f32(optest_prod(dims, 4), 51, -4, 4);
    optest t;
    int nat = 4 + (op == IR_OP_AVERAGEPOOL);
    optest_begin_opset(&t, op, 1, 1, nat, 17);
    int k = 0;
    optest_attr_ints(&t, k++, "kernel_shape", (int64_t[]){c->k, c->k}, 2);
    optest_attr_ints(&t, k++, "strides", (int64_t[]){c->s, c->s}, 2);
    if (c->auto_pad)
        optest_attr_string(&t, k++, "auto_pad", c->auto_pad);
    else
        optest_attr_ints(&t, k++, "pads", (int64_t[]){c->pad, c->pad, c->pad_end, c->pad_end}, 4);
    optest_attr_int(&t, k++, "ceil_mode", c->ceil ? 1 : 0);
    if (op == IR_OP_AVERAGEPOOL) optest_attr_int(&t, k++, "count_include_pad", cip);
    assert_int_equal(k, nat);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dims, x, false);
    if (supported)
        check(&t, 1e-5f, 1e-6f, expected(op, name, false));
    else
        assert_false(family_applies(&t, name));
    optest_end(&t);
    free(x);
}

static void test_pool(void **state) {
    (void)state;
    static const pool_case cases[] = {
        {7, 9, 3, 1, 1, 1, false, NULL},           {112, 112, 3, 2, 1, 1, false, NULL},
        {8, 8, 2, 2, 0, 0, false, NULL},           {8, 8, 3, 2, 0, 0, true, NULL},
        {9, 37, 3, 2, 1, 0, true, NULL},           {20, 37, 3, 2, 1, 1, false, NULL},
        {5, 5, 5, 1, 2, 2, false, NULL},           {13, 17, 3, 3, 1, 2, true, NULL},
        {10, 11, 3, 2, 0, 0, false, "SAME_UPPER"}, {10, 11, 4, 1, 0, 0, false, "SAME_LOWER"},
        {6, 6, 1, 1, 0, 0, false, NULL},           {1, 1, 1, 1, 0, 0, false, NULL},
        {109, 109, 3, 2, 0, 0, true, NULL}, /* SqueezeNet's: stride 2 from plain loads, ceil */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_pool(IR_OP_MAXPOOL, &cases[i], 0, true);
        run_pool(IR_OP_AVERAGEPOOL, &cases[i], 0, true);
        run_pool(IR_OP_AVERAGEPOOL, &cases[i], 1, true);
    }
    /* a pad as large as the kernel could leave a window without data: reference */
    pool_case big_pad = {6, 6, 2, 1, 2, 2, false, NULL};
    run_pool(IR_OP_MAXPOOL, &big_pad, 0, false);
}

static void test_global_avgpool(void **state) {
    (void)state;
    static const int64_t shapes[][4] = {{2, 3, 7, 7}, {1, 5, 1, 1}, {1, 1280, 7, 7}, {0, 3, 4, 4}};
    for (size_t i = 0; i < 4; i++) {
        float *x = optest_random_f32(optest_prod(shapes[i], 4), 61, -2, 2);
        optest t;
        optest_begin(&t, IR_OP_GLOBALAVERAGEPOOL, 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, shapes[i], x, false);
        check(&t, 1e-5f, 1e-6f, expected(IR_OP_GLOBALAVERAGEPOOL, "globalaveragepool", false));
        optest_end(&t);
        free(x);
    }
    float *x = optest_random_f32(2 * 17 * 33, 62, -2, 2);
    optest t;
    optest_begin(&t, IR_OP_GLOBALAVERAGEPOOL, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 17, 33}, x, false);
    check(&t, 1e-5f, 1e-6f, expected(IR_OP_GLOBALAVERAGEPOOL, "globalaveragepool", false));
    optest_end(&t);
    free(x);
}

/* ---- transpose ---------------------------------------------------------------------------- */

static void run_transpose(int rank, const int64_t *dims, const int64_t *perm, bool supported) {
    float *x = optest_random_f32(optest_prod(dims, rank), 71, -1, 1);
    optest t;
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, perm ? 1 : 0);
    if (perm) optest_attr_ints(&t, 0, "perm", perm, (size_t)rank);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    if (supported)
        check(&t, 0, 0, expected(IR_OP_TRANSPOSE, "transpose", false));
    else
        assert_false(family_applies(&t, "transpose"));
    optest_end(&t);
    free(x);
}

static void test_transpose(void **state) {
    (void)state;
    static const int64_t sizes[] = {1, 7, 8, 9, 16, 17, 33, 64, 65, 130};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j += 3)
            run_transpose(2, (int64_t[]){sizes[i], sizes[j]}, (int64_t[]){1, 0}, true);
    run_transpose(2, (int64_t[]){17, 33}, NULL, true); /* default perm: reversed */
    run_transpose(3, (int64_t[]){3, 17, 9}, (int64_t[]){0, 2, 1}, true);
    run_transpose(4, (int64_t[]){2, 5, 3, 7}, (int64_t[]){0, 2, 1, 3}, true); /* attention */
    run_transpose(4, (int64_t[]){2, 12, 4, 64}, (int64_t[]){0, 2, 1, 3}, true);
    run_transpose(4, (int64_t[]){2, 4, 12, 64}, (int64_t[]){0, 2, 1, 3}, true);
    run_transpose(4, (int64_t[]){2, 3, 4, 5}, (int64_t[]){0, 2, 3, 1}, true); /* NCHW->NHWC */
    run_transpose(4, (int64_t[]){2, 4, 5, 3}, (int64_t[]){0, 3, 1, 2}, true); /* NHWC->NCHW */
    /* blocks of 64 rows by 1024 columns, with partial blocks both ways (70 = 64 + 6 rows) */
    run_transpose(3, (int64_t[]){2, 70, 1100}, (int64_t[]){0, 2, 1}, true);
    /* an RGB image channels-last: 3 rows, columns split into tasks of 4096 (+ a remainder) */
    run_transpose(4, (int64_t[]){2, 3, 70, 130}, (int64_t[]){0, 2, 3, 1}, true);
    run_transpose(3, (int64_t[]){4, 5, 6}, (int64_t[]){1, 0, 2}, true);
    run_transpose(3, (int64_t[]){4, 1, 6}, (int64_t[]){1, 0, 2}, true);       /* a copy */
    run_transpose(4, (int64_t[]){2, 3, 4, 5}, (int64_t[]){0, 1, 3, 2}, true); /* last two */
    run_transpose(2, (int64_t[]){0, 5}, (int64_t[]){1, 0}, true);
    run_transpose(3, (int64_t[]){2, 3, 4}, (int64_t[]){2, 1, 0}, false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),          cmocka_unit_test(test_logistic_tails),
        cmocka_unit_test(test_erf_accuracy),   cmocka_unit_test(test_clip_inputs),
        cmocka_unit_test(test_binary),         cmocka_unit_test(test_binary_outer),
        cmocka_unit_test(test_softmax),        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_batchnorm),      cmocka_unit_test(test_pool),
        cmocka_unit_test(test_global_avgpool), cmocka_unit_test(test_transpose),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
