/* The math family's variants (src/kernels/cpu/math) against the reference kernels: Pow with
 * constant exponents (each special case, exponents of other dtypes, broadcast) and tensor
 * exponents, Where on every element size and broadcast pattern, the unary math ops, variadic
 * Max/Min/Sum/Mean, PRelu, Cast between every pair of the eight dtypes the family converts,
 * Softmax/LogSoftmax on non-last axes, comparisons and boolean logic. Lengths straddle the vector
 * width (1, 15, 16, 17, 33, 1000, and one past the threading threshold), tensors may be empty, and
 * inputs carry special values (negative bases, +-0, +-inf, NaN, denormals, rounding ties).
 *
 * optest.h's comparer treats NaN as a mismatch and compares fp32 outputs only, so this file has
 * its own: NaN must meet NaN, infinities must match exactly, other outputs (BOOL, integers,
 * FLOAT16, BFLOAT16) must match bit for bit. Each check asserts how many variants ran, so a variant
 * that silently stops applying fails the test. Every op has an "<op>_avx512" and an "<op>_avx2"
 * variant (Cast only the first): on an AVX-512 CPU both run, under ANVIL_ISA=avx2 only the AVX2
 * one, under ANVIL_ISA=scalar none. */
#include "kernels/kernels.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* Whether the build has SLEEF (the family registers its SLEEF-only variants then). */
static bool have_sleef(void) {
    return kern_find(IR_OP_SIN, "sin_avx512") != NULL;
}

/* How many math variants should run a node of op here: one for "<name>_avx512" when the CPU has
 * AVX-512, one for "<name>_avx2" when it has AVX2. Every op with an AVX-512 variant but Cast must
 * have its AVX2 twin. */
static int expected(ir_op op, const char *name) {
    char full[64];
    snprintf(full, sizeof full, "%s_avx512", name);
    const bool v512 = kern_find(op, full) != NULL;
    snprintf(full, sizeof full, "%s_avx2", name);
    const bool v2 = kern_find(op, full) != NULL;
    if (v512 && op != IR_OP_CAST) assert_true(v2);
    return (v512 && optest_have_avx512() ? 1 : 0) + (v2 && optest_have_avx2() ? 1 : 0);
}

static bool same_f32(float g, float w, float rtol, float atol) {
    if (isnan(w)) return isnan(g);
    if (isinf(w)) return g == w;
    return fabsf(g - w) <= atol + rtol * fabsf(w);
}

/* Index of the first element where got differs from want (fp32 within tolerance, NaN meets NaN;
 * other dtypes bit for bit), or -1. */
static long compare_out(const op_tensor *want, const void *got, float rtol, float atol) {
    size_t n = op_tensor_numel(want), es = anvil_dtype_size(want->dtype);
    for (size_t i = 0; i < n; i++) {
        if (want->dtype == ANVIL_DTYPE_FLOAT32) {
            float w = ((const float *)want->data)[i], g = ((const float *)got)[i];
            if (!same_f32(g, w, rtol, atol)) {
                fprintf(stderr, "at %zu: got %.9g want %.9g\n", i, (double)g, (double)w);
                return (long)i;
            }
        } else if (memcmp((const char *)want->data + i * es, (const char *)got + i * es, es)) {
            uint64_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i * es, es);
            memcpy(&w, (const char *)want->data + i * es, es);
            fprintf(stderr, "at %zu: got 0x%llx want 0x%llx\n", i, (unsigned long long)g,
                    (unsigned long long)w);
            return (long)i;
        }
    }
    return -1;
}

/* optest_check_variants_cmp with compare_out: asserts that every applicable variant matches the
 * reference and that at least `want` ran. */
static void check(optest *t, float rtol, float atol, int want) {
    int checked = optest_check_variants_cmp(t, rtol, atol, compare_out);
    assert_true(checked >= 0);
    if (checked < want) fprintf(stderr, "checked %d variants, want >= %d\n", checked, want);
    assert_true(checked >= want);
}

/* Whether variant "<name>_avx512" or "<name>_avx2" accepts the node. */
static bool family_applies(optest *t, const char *name) {
    char full[64];
    snprintf(full, sizeof full, "%s_avx512", name);
    if (optest_variant_applies(t, full)) return true;
    snprintf(full, sizeof full, "%s_avx2", name);
    return optest_variant_applies(t, full);
}

static const float specials[] = {0.0f,  -0.0f,    1.0f,      -1.0f,       2.0f,     -2.0f,    0.5f,
                                 -0.5f, INFINITY, -INFINITY, NAN,         1e-40f,   -3.5f,    2.5f,
                                 -2.5f, 1e30f,    -1e30f,    0.49999997f, 65504.0f, 65520.0f, 3e9f,
                                 -3e9f, 1e19f,    -300.5f,   1.00048828f};
#define N_SPECIALS (sizeof specials / sizeof *specials)

/* n floats in [lo, hi) with a special value at every 5th position when `special`. */
static float *data_f32(size_t n, unsigned seed, float lo, float hi, bool special) {
    float *p = optest_random_f32(n, seed, lo, hi);
    if (special)
        for (size_t i = 3; i < n; i += 5) p[i] = specials[(i / 5 + seed) % N_SPECIALS];
    return p;
}

/* Lengths of the 1-D rounds; the last one is past the threading threshold (32K elements). */
static const int64_t lengths[] = {1, 15, 16, 17, 33, 1000, 40000};
#define N_LENGTHS (sizeof lengths / sizeof *lengths)

/* ---- Pow --------------------------------------------------------------------------------------
 */

static void run_pow_const(int rx, const int64_t *dx, anvil_dtype edt, int re, const int64_t *de,
                          double e, bool supported) {
    size_t nx = optest_prod(dx, rx), ne = optest_prod(de, re);
    float *x = data_f32(nx, 21, -3, 3, true);
    void *ev = malloc(ne * 8 + 8);
    for (size_t i = 0; i < ne; i++) core_store_f64(edt, ev, i, e);
    optest t;
    optest_begin(&t, IR_OP_POW, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rx, dx, x, false);
    optest_input(&t, 1, edt, re, de, ev, true);
    if (supported)
        check(&t, 2e-6f, 1e-37f, expected(IR_OP_POW, "pow"));
    else
        assert_false(family_applies(&t, "pow"));
    optest_end(&t);
    free(x);
    free(ev);
}

static void test_pow_const(void **state) {
    (void)state;
    static const double fast[] = {2, 3, 0.5, -1, 1, -0.5, 0, 4, -2, -3, 5, 16, -16};
    static const double general[] = {1.5, -1.7, 0.3f, 17, 2.5, -0.25};
    for (size_t li = 0; li < N_LENGTHS; li++) {
        for (size_t k = 0; k < sizeof fast / sizeof *fast; k++)
            run_pow_const(1, &lengths[li], ANVIL_DTYPE_FLOAT32, 0, NULL, fast[k], true);
        for (size_t k = 0; k < sizeof general / sizeof *general; k++)
            run_pow_const(1, &lengths[li], ANVIL_DTYPE_FLOAT32, 0, NULL, general[k], have_sleef());
    }
    /* an all-equal exponent tensor, broadcast without growing the output */
    run_pow_const(2, (int64_t[]){4, 3}, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, 2, true);
    run_pow_const(2, (int64_t[]){4, 3}, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 3}, 3, true);
    /* exponents of other dtypes: the reference computes in double */
    run_pow_const(1, (int64_t[]){33}, ANVIL_DTYPE_INT64, 0, NULL, 2, true);
    run_pow_const(1, (int64_t[]){33}, ANVIL_DTYPE_INT32, 0, NULL, -3, true);
    run_pow_const(1, (int64_t[]){33}, ANVIL_DTYPE_FLOAT64, 0, NULL, 0.5, true);
    run_pow_const(1, (int64_t[]){33}, ANVIL_DTYPE_FLOAT16, 0, NULL, 3, true);
    /* zero-size */
    run_pow_const(2, (int64_t[]){0, 3}, ANVIL_DTYPE_FLOAT32, 0, NULL, 2, true);
    /* a double exponent fp32 cannot hold stays with the reference */
    run_pow_const(1, (int64_t[]){17}, ANVIL_DTYPE_FLOAT64, 0, NULL, 0.3, false);
}

static void run_pow_tensor(int rx, const int64_t *dx, int re, const int64_t *de, bool known) {
    size_t nx = optest_prod(dx, rx), ne = optest_prod(de, re);
    float *x = data_f32(nx, 31, 0.1f, 4, true);
    float *e = data_f32(ne, 32, -3, 3, false);
    /* integer exponents (negative bases keep a sign) and specials on some positions */
    for (size_t i = 0; i < ne; i += 3) e[i] = (float)((int)(i % 7) - 3);
    for (size_t i = 1; i < ne; i += 11) e[i] = specials[i % N_SPECIALS];
    optest t;
    optest_begin(&t, IR_OP_POW, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rx, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, re, de, e, known);
    check(&t, 1e-5f, 1e-37f, have_sleef() ? expected(IR_OP_POW, "pow") : 0);
    optest_end(&t);
    free(x);
    free(e);
}

static void test_pow_tensor(void **state) {
    (void)state;
    for (size_t li = 0; li < N_LENGTHS; li++)
        run_pow_tensor(1, &lengths[li], 1, &lengths[li], false);
    run_pow_tensor(2, (int64_t[]){5, 33}, 1, (int64_t[]){33}, false);
    run_pow_tensor(1, (int64_t[]){33}, 2, (int64_t[]){5, 33}, true); /* exponent grows the output */
    run_pow_tensor(3, (int64_t[]){4, 1, 17}, 2, (int64_t[]){3, 1}, false);
    run_pow_tensor(2, (int64_t[]){0, 5}, 1, (int64_t[]){5}, false);
}

/* ---- Where -------------------------------------------------------------------------------------
 */

static void run_where(anvil_dtype dt, int rc, const int64_t *dc, int rx, const int64_t *dx, int ry,
                      const int64_t *dy) {
    size_t nc = optest_prod(dc, rc), nx = optest_prod(dx, rx), ny = optest_prod(dy, ry);
    size_t es = anvil_dtype_size(dt);
    uint8_t *c = malloc(nc + 1);
    unsigned char *x = malloc(nx * es + 1), *y = malloc(ny * es + 1);
    unsigned s = 7;
    for (size_t i = 0; i < nc; i++) {
        s = s * 1103515245u + 12345u;
        c[i] = (s >> 16) % 3 == 0 ? 0 : (uint8_t)((s >> 20) % 3 == 0 ? 2 : 1);
    }
    for (size_t i = 0; i < nx * es; i++) x[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < ny * es; i++) y[i] = (unsigned char)(i * 13 + 5);
    optest t;
    optest_begin(&t, IR_OP_WHERE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, rc, dc, c, false);
    optest_input(&t, 1, dt, rx, dx, x, false);
    optest_input(&t, 2, dt, ry, dy, y, false);
    check(&t, 0, 0, expected(IR_OP_WHERE, "where"));
    optest_end(&t);
    free(c);
    free(x);
    free(y);
}

static void test_where(void **state) {
    (void)state;
    static const anvil_dtype dts[] = {ANVIL_DTYPE_INT32, ANVIL_DTYPE_UINT8, ANVIL_DTYPE_FLOAT16,
                                      ANVIL_DTYPE_INT64};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        anvil_dtype dt = dts[d];
        for (size_t li = 0; li < N_LENGTHS; li++)
            run_where(dt, 1, &lengths[li], 1, &lengths[li], 1, &lengths[li]);
        /* an attention mask: [1, 1, S, S] condition, scalar fill, full scores */
        run_where(dt, 4, (int64_t[]){1, 1, 17, 17}, 0, NULL, 4, (int64_t[]){2, 3, 17, 17});
        run_where(dt, 4, (int64_t[]){1, 1, 17, 17}, 4, (int64_t[]){2, 3, 17, 17}, 0, NULL);
        run_where(dt, 2, (int64_t[]){5, 1}, 2, (int64_t[]){1, 33}, 1, (int64_t[]){33});
        run_where(dt, 0, NULL, 2, (int64_t[]){4, 17}, 2, (int64_t[]){4, 17}); /* scalar cond */
        run_where(dt, 1, (int64_t[]){19}, 0, NULL, 0, NULL);
        run_where(dt, 3, (int64_t[]){2, 1, 3}, 3, (int64_t[]){1, 4, 1}, 2, (int64_t[]){4, 3});
        run_where(dt, 2, (int64_t[]){0, 3}, 1, (int64_t[]){3}, 1, (int64_t[]){3});
    }
    /* fp32, the common case */
    run_where(ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 128, 128}, 3, (int64_t[]){4, 128, 128}, 0,
              NULL);
}

/* ---- unary ------------------------------------------------------------------------------------
 */

typedef struct unary_case {
    ir_op op;
    const char *name;
    bool sleef;
    float lo, hi, rtol, atol;
    int opset;
    const char *attr; /* one float attribute, or NULL */
    float aval;
} unary_case;

static void run_unary(const unary_case *c) {
    for (size_t li = 0; li <= N_LENGTHS; li++) {
        bool zero = li == N_LENGTHS; /* the last round: a zero-size 3-D tensor */
        int64_t dims[3] = {2, 0, 3};
        int rank = zero ? 3 : 1;
        if (!zero) dims[0] = lengths[li];
        float *x = data_f32(optest_prod(dims, rank), (unsigned)li + 3, c->lo, c->hi, true);
        optest t;
        optest_begin_opset(&t, c->op, 1, 1, c->attr ? 1 : 0, c->opset);
        if (c->attr) optest_attr_float(&t, 0, c->attr, c->aval);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
        check(&t, c->rtol, c->atol, c->sleef && !have_sleef() ? 0 : expected(c->op, c->name));
        optest_end(&t);
        free(x);
    }
}

static void test_unary(void **state) {
    (void)state;
    static const unary_case cases[] = {
        {IR_OP_SQRT, "sqrt", false, 0, 100, 0, 0, 17, NULL, 0},
        {IR_OP_NEG, "neg", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_ABS, "abs", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_RECIPROCAL, "reciprocal", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_FLOOR, "floor", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_CEIL, "ceil", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_ROUND, "round", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_SIGN, "sign", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_SOFTSIGN, "softsign", false, -5, 5, 0, 0, 17, NULL, 0},
        {IR_OP_THRESHOLDEDRELU, "thresholdedrelu", false, -3, 3, 0, 0, 17, "alpha", 0.5f},
        {IR_OP_THRESHOLDEDRELU, "thresholdedrelu", false, -3, 3, 0, 0, 17, NULL, 0},
        {IR_OP_LOG, "log", true, 0, 100, 1e-6f, 1e-7f, 17, NULL, 0},
        {IR_OP_SIN, "sin", true, -100, 100, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_COS, "cos", true, -100, 100, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_TAN, "tan", true, -3, 3, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ASIN, "asin", true, -1, 1, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ACOS, "acos", true, -1, 1, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ATAN, "atan", true, -10, 10, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_SINH, "sinh", true, -10, 10, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_COSH, "cosh", true, -10, 10, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ASINH, "asinh", true, -10, 10, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ACOSH, "acosh", true, 1, 10, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ATANH, "atanh", true, -1, 1, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_ELU, "elu", true, -5, 5, 1e-5f, 1e-6f, 17, "alpha", 0.7f},
        {IR_OP_SELU, "selu", true, -5, 5, 1e-5f, 1e-6f, 17, NULL, 0},
        {IR_OP_CELU, "celu", true, -5, 5, 1e-5f, 1e-6f, 17, "alpha", 1.5f},
        {IR_OP_MISH, "mish", true, -20, 20, 1e-5f, 1e-6f, 18, NULL, 0},
        {IR_OP_SWISH, "swish", true, -20, 20, 1e-5f, 1e-6f, 24, "alpha", 1.25f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_unary(&cases[i]);
}

/* ---- variadic and PRelu -------------------------------------------------------------------------
 */

static void run_variadic(int n_in, const int *ranks, const int64_t (*dims)[4]) {
    static const ir_op ops[] = {IR_OP_MAX, IR_OP_MIN, IR_OP_SUM, IR_OP_MEAN};
    static const char *const names[] = {"max", "min", "sum", "mean"};
    for (int o = 0; o < 4; o++) {
        float *x[8];
        optest t;
        optest_begin(&t, ops[o], n_in, 1, 0);
        for (int i = 0; i < n_in; i++) {
            x[i] = data_f32(optest_prod(dims[i], ranks[i]), (unsigned)(40 + i), -4, 4, true);
            optest_input(&t, i, ANVIL_DTYPE_FLOAT32, ranks[i], dims[i], x[i], false);
        }
        check(&t, 1e-6f, 0, expected(ops[o], names[o]));
        optest_end(&t);
        for (int i = 0; i < n_in; i++) free(x[i]);
    }
}

static void test_variadic(void **state) {
    (void)state;
    for (size_t li = 0; li < N_LENGTHS; li++) {
        int64_t d[4][4] = {{lengths[li]}, {lengths[li]}, {lengths[li]}, {lengths[li]}};
        for (int n = 1; n <= 4; n++) run_variadic(n, (int[]){1, 1, 1, 1}, d);
    }
    run_variadic(3, (int[]){2, 1, 0}, (const int64_t[][4]){{5, 33}, {33}, {0}});
    run_variadic(3, (int[]){3, 2, 3}, (const int64_t[][4]){{2, 1, 17}, {3, 1}, {1, 3, 17}});
    run_variadic(1, (int[]){2}, (const int64_t[][4]){{4, 9}});
    run_variadic(2, (int[]){2, 2}, (const int64_t[][4]){{0, 9}, {1, 9}});
    /* eight inputs, the most the family folds */
    int r8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t d8[8][4] = {{100}, {100}, {1}, {100}, {100}, {100}, {1}, {100}};
    run_variadic(8, r8, (const int64_t(*)[4])d8);
}

static void run_prelu(int rx, const int64_t *dx, int rs, const int64_t *ds) {
    float *x = data_f32(optest_prod(dx, rx), 51, -3, 3, true);
    float *sl = data_f32(optest_prod(ds, rs), 52, -1, 1, false);
    optest t;
    optest_begin(&t, IR_OP_PRELU, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rx, dx, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rs, ds, sl, true);
    check(&t, 0, 0, expected(IR_OP_PRELU, "prelu"));
    optest_end(&t);
    free(x);
    free(sl);
}

static void test_prelu(void **state) {
    (void)state;
    for (size_t li = 0; li < N_LENGTHS; li++) run_prelu(1, &lengths[li], 1, &lengths[li]);
    run_prelu(4, (int64_t[]){2, 3, 5, 7}, 3, (int64_t[]){3, 1, 1});
    run_prelu(4, (int64_t[]){2, 3, 5, 7}, 0, NULL);
    run_prelu(3, (int64_t[]){2, 5, 33}, 1, (int64_t[]){33});
    run_prelu(2, (int64_t[]){0, 4}, 1, (int64_t[]){4});
}

/* ---- Cast --------------------------------------------------------------------------------------
 */

static const anvil_dtype cast_dts[] = {
    ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_INT32,
    ANVIL_DTYPE_INT64,   ANVIL_DTYPE_INT8,    ANVIL_DTYPE_UINT8,    ANVIL_DTYPE_BOOL};
#define N_CAST_DTS (sizeof cast_dts / sizeof *cast_dts)

/* n elements of dt: floats mix specials (NaN, infinities, out-of-range, ties) with values in
 * [-300, 300]; f16/bf16 and integers are random bit patterns (every NaN and denormal included),
 * with the integer limits and float rounding ties planted; BOOL bytes are 0, 1 or 2. */
static void *cast_data(anvil_dtype dt, size_t n, unsigned seed) {
    size_t es = anvil_dtype_size(dt);
    unsigned char *p = malloc(n * es + 8);
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n * es; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (unsigned char)(s >> 24);
    }
    if (dt == ANVIL_DTYPE_FLOAT32) {
        float *f = optest_random_f32(n, seed, -300, 300);
        for (size_t i = 3; i < n; i += 4) f[i] = specials[(i / 4) % N_SPECIALS];
        memcpy(p, f, n * 4);
        free(f);
    } else if (dt == ANVIL_DTYPE_BOOL) {
        for (size_t i = 0; i < n; i++) p[i] %= 3;
    } else if (dt == ANVIL_DTYPE_INT64) {
        static const int64_t ties[] = {
            16777217, -16777219, INT64_MIN, INT64_MAX, 0, -1, (int64_t)1 << 40 | 1, 2047};
        for (size_t i = 2; i < n; i += 3) ((int64_t *)(void *)p)[i] = ties[(i / 3) % 8];
    } else if (dt == ANVIL_DTYPE_INT32) {
        static const int32_t ties[] = {16777217, -16777219, INT32_MIN, INT32_MAX, 0, -1, 2049, 7};
        for (size_t i = 2; i < n; i += 3) ((int32_t *)(void *)p)[i] = ties[(i / 3) % 8];
    }
    return p;
}

static void run_cast(anvil_dtype from, anvil_dtype to, int rank, const int64_t *dims) {
    void *x = cast_data(from, optest_prod(dims, rank), (unsigned)(from * 31 + to));
    optest t;
    optest_begin(&t, IR_OP_CAST, 1, 1, 1);
    optest_attr_int(&t, 0, "to", to);
    optest_input(&t, 0, from, rank, dims, x, false);
    check(&t, 0, 0, from == to ? 0 : expected(IR_OP_CAST, "cast"));
    if (from == to) assert_false(family_applies(&t, "cast"));
    optest_end(&t);
    free(x);
}

static void test_cast(void **state) {
    (void)state;
    for (size_t a = 0; a < N_CAST_DTS; a++)
        for (size_t b = 0; b < N_CAST_DTS; b++) {
            for (size_t li = 0; li < N_LENGTHS; li++)
                run_cast(cast_dts[a], cast_dts[b], 1, &lengths[li]);
            run_cast(cast_dts[a], cast_dts[b], 2, (int64_t[]){0, 5});
        }
    /* a dtype outside the family's eight stays with the reference */
    int64_t n = 17;
    double *x = calloc(17, sizeof *x);
    optest t;
    optest_begin(&t, IR_OP_CAST, 1, 1, 1);
    optest_attr_int(&t, 0, "to", ANVIL_DTYPE_FLOAT32);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 1, &n, x, false);
    assert_false(family_applies(&t, "cast"));
    optest_end(&t);
    free(x);
}

/* ---- Softmax / LogSoftmax on a non-last axis ---------------------------------------------------
 */

static void run_softmax(ir_op op, int opset, int rank, const int64_t *dims, int64_t axis,
                        bool supported) {
    const char *name = op == IR_OP_SOFTMAX ? "softmax_axis" : "logsoftmax_axis";
    float *x = optest_random_f32(optest_prod(dims, rank), 61, -8, 8);
    optest t;
    optest_begin_opset(&t, op, 1, 1, 1, opset);
    optest_attr_int(&t, 0, "axis", axis);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    if (supported)
        check(&t, 1e-5f, 1e-7f, expected(op, name));
    else
        assert_false(family_applies(&t, name));
    optest_end(&t);
    free(x);
}

static void test_softmax_axis(void **state) {
    (void)state;
    if (!have_sleef()) return;
    for (int k = 0; k < 2; k++) {
        ir_op op = k ? IR_OP_LOGSOFTMAX : IR_OP_SOFTMAX;
        run_softmax(op, 13, 3, (int64_t[]){2, 5, 7}, 0, true);
        run_softmax(op, 13, 3, (int64_t[]){2, 5, 7}, 1, true);
        run_softmax(op, 13, 3, (int64_t[]){2, 5, 7}, -2, true);
        run_softmax(op, 13, 3, (int64_t[]){3, 4, 1}, 1, true);       /* lines contiguous */
        run_softmax(op, 13, 3, (int64_t[]){2, 3, 150}, 1, true);     /* several column blocks */
        run_softmax(op, 13, 4, (int64_t[]){2, 12, 40, 40}, 1, true); /* threaded */
        run_softmax(op, 13, 2, (int64_t[]){1, 17}, 0, true);
        run_softmax(op, 13, 3, (int64_t[]){2, 0, 7}, 0, true);
        run_softmax(op, 13, 3, (int64_t[]){2, 5, 7}, 2, false); /* last axis: eltwise's */
        run_softmax(op, 11, 3, (int64_t[]){2, 5, 7}, 1, false); /* 2-D coercion: eltwise's */
    }
}

/* ---- comparisons and logic ----------------------------------------------------------------------
 */

static void run_compare(int ra, const int64_t *da, int rb, const int64_t *db) {
    static const ir_op ops[] = {IR_OP_EQUAL, IR_OP_LESS, IR_OP_LESSOREQUAL, IR_OP_GREATER,
                                IR_OP_GREATEROREQUAL};
    static const char *const names[] = {"equal", "less", "lessorequal", "greater",
                                        "greaterorequal"};
    for (int o = 0; o < 5; o++) {
        size_t na = optest_prod(da, ra), nb = optest_prod(db, rb);
        float *a = data_f32(na, 71, -2, 2, true), *b = data_f32(nb, 72, -2, 2, true);
        /* equal pairs, so that Equal and the non-strict comparisons see some */
        for (size_t i = 0; i < na && i < nb; i += 4) b[i] = a[i];
        for (size_t i = 0; i < na; i++) a[i] = roundf(a[i] * 2) / 2;
        optest t;
        optest_begin(&t, ops[o], 2, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, ra, da, a, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rb, db, b, false);
        check(&t, 0, 0, expected(ops[o], names[o]));
        optest_end(&t);
        free(a);
        free(b);
    }
}

static void run_logic(int ra, const int64_t *da, int rb, const int64_t *db) {
    static const ir_op ops[] = {IR_OP_AND, IR_OP_OR, IR_OP_XOR, IR_OP_NOT};
    static const char *const names[] = {"and", "or", "xor", "not"};
    for (int o = 0; o < 4; o++) {
        int n_in = ops[o] == IR_OP_NOT ? 1 : 2;
        if (n_in == 1 && (ra != rb || optest_prod(da, ra) != optest_prod(db, rb))) continue;
        uint8_t *a = cast_data(ANVIL_DTYPE_BOOL, optest_prod(da, ra), 81);
        uint8_t *b = cast_data(ANVIL_DTYPE_BOOL, optest_prod(db, rb), 82);
        optest t;
        optest_begin(&t, ops[o], n_in, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_BOOL, ra, da, a, false);
        if (n_in == 2) optest_input(&t, 1, ANVIL_DTYPE_BOOL, rb, db, b, false);
        check(&t, 0, 0, expected(ops[o], names[o]));
        optest_end(&t);
        free(a);
        free(b);
    }
}

static void test_compare_logic(void **state) {
    (void)state;
    for (size_t li = 0; li < N_LENGTHS; li++) {
        run_compare(1, &lengths[li], 1, &lengths[li]);
        run_logic(1, &lengths[li], 1, &lengths[li]);
    }
    run_compare(2, (int64_t[]){5, 33}, 0, NULL);
    run_compare(1, (int64_t[]){33}, 2, (int64_t[]){5, 33});
    run_compare(3, (int64_t[]){2, 1, 17}, 2, (int64_t[]){3, 1});
    run_compare(2, (int64_t[]){0, 3}, 1, (int64_t[]){3});
    run_logic(2, (int64_t[]){5, 33}, 0, NULL);
    run_logic(3, (int64_t[]){2, 1, 17}, 2, (int64_t[]){3, 1});
    run_logic(2, (int64_t[]){0, 3}, 2, (int64_t[]){0, 3});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pow_const),     cmocka_unit_test(test_pow_tensor),
        cmocka_unit_test(test_where),         cmocka_unit_test(test_unary),
        cmocka_unit_test(test_variadic),      cmocka_unit_test(test_prelu),
        cmocka_unit_test(test_cast),          cmocka_unit_test(test_softmax_axis),
        cmocka_unit_test(test_compare_logic),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
