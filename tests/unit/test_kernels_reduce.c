/* The reduce family's variants (src/kernels/cpu/reduce) against the reference kernels: every
 * Reduce* op over every axis combination of a 4-D tensor with odd sizes (axes as attribute and
 * as constant input, keepdims 0/1, negative axes, noop_with_empty_axes, size-1 and zero-size
 * dims), NaN and inf where the reference defines them, GlobalMaxPool, ArgMax/ArgMin (ties, NaN,
 * select_last_index, every axis), Instance/Group/RMS/LpNormalization and TopK (ties, NaN, -0,
 * every axis, k from 0 to the axis length). Each check asserts how many variants ran, so a variant
 * that silently stops applying fails the test. Both ISAs run on an AVX-512 machine. */
#include "kernels/kernels.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* The eltwise family registers its exp-based variants only in builds with SLEEF. */
static bool have_sleef(void) {
    return kern_find(IR_OP_SIGMOID, "sigmoid_avx2") != NULL;
}

/* How many of "<name>_avx512" and "<name>_avx2" should run here. */
static int expected(ir_op op, const char *name) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%s_avx512", name);
    snprintf(b, sizeof b, "%s_avx2", name);
    assert_non_null(kern_find(op, a));
    assert_non_null(kern_find(op, b));
    if (op == IR_OP_REDUCELOGSUMEXP && !have_sleef()) return 0;
    return (optest_have_avx512() ? 1 : 0) + (optest_have_avx2() ? 1 : 0);
}

static void check(optest *t, float rtol, float atol, int want) {
    int n = optest_check_variants(t, rtol, atol);
    if (n != want) fprintf(stderr, "checked %d variants, want %d\n", n, want);
    assert_int_equal(n, want);
}

/* Equal within tolerance, or both NaN, or the same infinity. */
static bool close_f32(float got, float want, float rtol, float atol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabsf(got - want) <= atol + rtol * fabsf(want);
}

/* The comparison for outputs optest_cmp_f32 cannot judge: NaN equal to NaN, and int64 outputs
 * (indices) exactly. */
static long compare_exact(const op_tensor *want, const void *got, float rtol, float atol) {
    size_t n = op_tensor_numel(want);
    for (size_t e = 0; e < n; e++) {
        if (want->dtype == ANVIL_DTYPE_INT64) {
            int64_t g = ((const int64_t *)got)[e], w = ((const int64_t *)want->data)[e];
            if (g != w) {
                fprintf(stderr, "at %zu: got %lld want %lld\n", e, (long long)g, (long long)w);
                return (long)e;
            }
        } else {
            float g = ((const float *)got)[e], w = ((const float *)want->data)[e];
            if (!close_f32(g, w, rtol, atol)) {
                fprintf(stderr, "at %zu: got %g want %g\n", e, (double)g, (double)w);
                return (long)e;
            }
        }
    }
    return -1;
}

static void check_x(optest *t, float rtol, float atol, int want) {
    int n = optest_check_variants_cmp(t, rtol, atol, compare_exact);
    if (n != want) fprintf(stderr, "checked %d variants, want %d\n", n, want);
    assert_int_equal(n, want);
}

/* ---- Reduce* ------------------------------------------------------------------------------ */

typedef struct red_case {
    ir_op op;
    const char *name;
    float lo, hi; /* input range: ReduceProd near 1, ReduceLogSum positive */
} red_case;

static const red_case red_cases[] = {
    {IR_OP_REDUCESUM, "reducesum", -1, 1},
    {IR_OP_REDUCEMEAN, "reducemean", -1, 1},
    {IR_OP_REDUCEMAX, "reducemax", -3, 3},
    {IR_OP_REDUCEMIN, "reducemin", -3, 3},
    {IR_OP_REDUCEPROD, "reduceprod", 0.97f, 1.03f},
    {IR_OP_REDUCESUMSQUARE, "reducesumsquare", -1, 1},
    {IR_OP_REDUCEL1, "reducel1", -1, 1},
    {IR_OP_REDUCEL2, "reducel2", -1, 1},
    {IR_OP_REDUCELOGSUM, "reducelogsum", 0.1f, 1},
    {IR_OP_REDUCELOGSUMEXP, "reducelogsumexp", -5, 5},
};
#define N_RED_CASES (sizeof red_cases / sizeof *red_cases)

/* One Reduce node. naxes < 0: no axes at all; as_input: axes as a constant second input (opset
 * 18), else the attribute (opset 13, ReduceSum 11). noop: noop_with_empty_axes (input form). */
static void run_reduce(const red_case *c, int rank, const int64_t *dims, const float *x,
                       const int64_t *axes, int naxes, int keep, bool as_input, int noop,
                       bool exact, int want) {
    optest t;
    int opset = as_input ? 18 : (c->op == IR_OP_REDUCESUM ? 11 : 13);
    int nattr = 1 + (noop >= 0 ? 1 : 0) + (!as_input && naxes >= 0 ? 1 : 0);
    bool axes_in = as_input && naxes >= 0;
    optest_begin_opset(&t, c->op, axes_in ? 2 : 1, 1, nattr, opset);
    int k = 0;
    optest_attr_int(&t, k++, "keepdims", keep);
    if (noop >= 0) optest_attr_int(&t, k++, "noop_with_empty_axes", noop);
    if (!as_input && naxes >= 0) optest_attr_ints(&t, k++, "axes", axes, (size_t)naxes);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    static const int64_t none[1] = {0};
    if (axes_in)
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){naxes}, naxes ? axes : none, true);
    if (exact)
        check_x(&t, 1e-4f, 1e-5f, want);
    else
        check(&t, 1e-4f, 1e-5f, want);
    optest_end(&t);
}

/* Every subset of the 4 axes (the empty one: every axis), keepdims 0 and 1, both axes forms. */
static void reduce_all_axes(const int64_t *dims, unsigned seed) {
    size_t n = optest_prod(dims, 4);
    for (size_t ci = 0; ci < N_RED_CASES; ci++) {
        const red_case *c = &red_cases[ci];
        float *x = optest_random_f32(n, seed + (unsigned)ci, c->lo, c->hi);
        int want = expected(c->op, c->name);
        for (unsigned mask = 0; mask < 16; mask++) {
            int64_t axes[4];
            int na = 0;
            for (int d = 0; d < 4; d++)
                if (mask & (1u << d)) axes[na++] = (d & 1) ? d - 4 : d; /* some negative */
            for (int keep = 0; keep <= 1; keep++) {
                run_reduce(c, 4, dims, x, axes, na, keep, false, -1, false, want);
                run_reduce(c, 4, dims, x, axes, na, keep, true, -1, false, want);
            }
        }
        free(x);
    }
}

static void test_reduce_axes(void **state) {
    (void)state;
    reduce_all_axes((int64_t[]){3, 5, 7, 17}, 1);
    reduce_all_axes((int64_t[]){2, 3, 1, 5}, 2); /* a size-1 dim between */
}

/* Past the parallel threshold, rows longer than 4 vectors and column blocks past COL_BLOCK. */
static void test_reduce_large(void **state) {
    (void)state;
    const int64_t dims[4] = {2, 37, 33, 301};
    size_t n = optest_prod(dims, 4);
    /* the last two: one or two rows for 2 and 3 threads, split into parts */
    static const int64_t combos[][4] = {{3},    {2, 3}, {1},          {0, 2},
                                        {1, 3}, {0},    {0, 1, 2, 3}, {1, 2, 3}};
    static const int ncombo[] = {1, 2, 1, 2, 2, 1, 4, 3};
    for (size_t ci = 0; ci < N_RED_CASES; ci++) {
        const red_case *c = &red_cases[ci];
        float *x = optest_random_f32(n, 40 + (unsigned)ci, c->lo, c->hi);
        for (size_t k = 0; k < sizeof ncombo / sizeof *ncombo; k++) {
            /* ReduceProd of ~100K values near 1 drifts far from 1: keep it to short lines */
            if (c->op == IR_OP_REDUCEPROD && ncombo[k] > 2) continue;
            run_reduce(c, 4, dims, x, combos[k], ncombo[k], 1, true, -1, false,
                       expected(c->op, c->name));
        }
        free(x);
    }
    /* a squeeze-excitation pool over an NHWC map: one outer index, 100 columns, which 2 and 3
     * threads split into blocks of fewer than COL_BLOCK (whole vectors, then the rest) */
    const int64_t se[4] = {1, 40, 40, 100};
    float *x = optest_random_f32(optest_prod(se, 4), 77, -1.0f, 1.0f);
    run_reduce(&red_cases[0], 4, se, x, (int64_t[]){1, 2}, 2, 1, true, -1, false,
               expected(red_cases[0].op, red_cases[0].name));
    free(x);
}

/* noop_with_empty_axes: the op applied to each element; reducing only size-1 axes likewise;
 * zero-size inputs (a reduced empty axis gives the identity, an empty kept one nothing). */
static void test_reduce_edges(void **state) {
    (void)state;
    const int64_t dims[3] = {3, 1, 19};
    float *x = optest_random_f32(optest_prod(dims, 3), 9, 0.2f, 2);
    for (size_t ci = 0; ci < N_RED_CASES; ci++) {
        const red_case *c = &red_cases[ci];
        int want = expected(c->op, c->name);
        run_reduce(c, 3, dims, x, NULL, 0, 1, true, 1, false, want);  /* empty axes, noop */
        run_reduce(c, 3, dims, x, NULL, -1, 0, true, 1, false, want); /* no input, noop */
        run_reduce(c, 3, dims, x, NULL, 0, 0, true, 0, false, want);  /* empty: all axes */
        run_reduce(c, 3, dims, x, (int64_t[]){1}, 1, 0, true, -1, false, want);
        run_reduce(c, 3, dims, x, (int64_t[]){-2}, 1, 1, false, -1, false, want);
        static const float none[1] = {0};
        run_reduce(c, 3, (int64_t[]){2, 0, 3}, none, (int64_t[]){1}, 1, 0, true, -1, true, want);
        run_reduce(c, 3, (int64_t[]){2, 0, 3}, none, (int64_t[]){0}, 1, 1, true, -1, true, want);
        run_reduce(c, 3, (int64_t[]){2, 0, 3}, none, NULL, 0, 0, true, -1, true, want);
        /* 1-D, and a scalar-sized row */
        run_reduce(c, 1, (int64_t[]){5}, x, (int64_t[]){0}, 1, 0, true, -1, false, want);
        run_reduce(c, 1, (int64_t[]){1}, x, (int64_t[]){0}, 1, 1, true, -1, false, want);
    }
    free(x);
}

/* NaN and infinities: Max/Min propagate NaN, sums give inf or NaN, LogSumExp's running maximum
 * makes one +inf +inf and two NaN; rows and columns of every length class. */
static void test_reduce_nan_inf(void **state) {
    (void)state;
    const int64_t dims[3] = {4, 37, 21};
    size_t n = optest_prod(dims, 3);
    float *x = optest_random_f32(n, 11, -2, 2);
    /* row 0 (axis 2): a NaN; row 1: +inf; row 2: two +inf; row 3: all -inf, row 4: -inf and
     * NaN; and a column with a NaN */
    x[5] = NAN;
    x[21 + 20] = INFINITY;
    x[42 + 3] = INFINITY;
    x[42 + 17] = INFINITY;
    for (int i = 0; i < 21; i++) x[63 + i] = -INFINITY;
    x[84] = -INFINITY;
    x[90] = NAN;
    x[21 * 10 + 7] = NAN;
    x[21 * 40 + 8] = -INFINITY;
    static const ir_op ops[] = {IR_OP_REDUCEMAX, IR_OP_REDUCEMIN, IR_OP_REDUCESUM,
                                IR_OP_REDUCELOGSUMEXP, IR_OP_REDUCEL1};
    for (size_t ci = 0; ci < N_RED_CASES; ci++) {
        const red_case *c = &red_cases[ci];
        bool pick = false;
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) pick |= ops[k] == c->op;
        if (!pick) continue;
        int want = expected(c->op, c->name);
        for (int a = 0; a < 3; a++)
            run_reduce(c, 3, dims, x, (int64_t[]){a}, 1, 0, true, -1, true, want);
        run_reduce(c, 3, dims, x, (int64_t[]){0, 2}, 2, 0, true, -1, true, want);
    }
    free(x);
}

/* Other dtypes stay with the reference. */
static void test_reduce_declines(void **state) {
    (void)state;
    int32_t xi[6] = {1, 2, 3, 4, 5, 6};
    optest t;
    optest_begin_opset(&t, IR_OP_REDUCESUM, 1, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, xi, false);
    check_x(&t, 0, 0, 0);
    optest_end(&t);
}

/* ---- GlobalMaxPool -------------------------------------------------------------------------- */

static void test_globalmaxpool(void **state) {
    (void)state;
    static const int64_t shapes[][4] = {{2, 3, 5, 7}, {1, 17, 33, 1}, {1, 8, 64, 64}, {2, 0, 3, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t n = optest_prod(shapes[s], 4);
        float *x = optest_random_f32(n, 3 + (unsigned)s, -5, 5);
        if (n > 40) x[37] = NAN;
        optest t;
        optest_begin(&t, IR_OP_GLOBALMAXPOOL, 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, shapes[s], x, false);
        check_x(&t, 0, 0, expected(IR_OP_GLOBALMAXPOOL, "globalmaxpool"));
        optest_end(&t);
        free(x);
    }
    float x3[6] = {1, 2, 3, 4, 5, 6};
    optest t;
    optest_begin(&t, IR_OP_GLOBALMAXPOOL, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, x3, false);
    check_x(&t, 0, 0, expected(IR_OP_GLOBALMAXPOOL, "globalmaxpool"));
    optest_end(&t);
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------ */

/* Values on a coarse grid (many ties), with NaN, -0 and +0 sprinkled in. */
static float *tie_data(size_t n, unsigned seed, bool nan) {
    float *x = optest_random_f32(n, seed, 0, 6);
    for (size_t i = 0; i < n; i++) x[i] = floorf(x[i]) - 3.0f;
    for (size_t i = 0; i < n; i += 7) x[i] = (i & 8) ? -0.0f : 0.0f;
    if (nan)
        for (size_t i = 3; i < n; i += 29) x[i] = NAN;
    return x;
}

static void test_argmax(void **state) {
    (void)state;
    static const int64_t shapes[][4] = {{3, 5, 7, 19}, {2, 41, 3, 37}};
    static const ir_op ops[] = {IR_OP_ARGMAX, IR_OP_ARGMIN};
    for (size_t s = 0; s < 2; s++) {
        size_t n = optest_prod(shapes[s], 4);
        for (int nan = 0; nan <= 1; nan++) {
            float *x = tie_data(n, 5 + (unsigned)s, nan);
            for (size_t o = 0; o < 2; o++)
                for (int axis = -1; axis < 4; axis++)
                    for (int keep = 0; keep <= 1; keep++)
                        for (int last = 0; last <= 1; last++) {
                            optest t;
                            optest_begin_opset(&t, ops[o], 1, 1, 3, 13);
                            optest_attr_int(&t, 0, "axis", axis);
                            optest_attr_int(&t, 1, "keepdims", keep);
                            optest_attr_int(&t, 2, "select_last_index", last);
                            optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, shapes[s], x, false);
                            check_x(&t, 0, 0, expected(ops[o], o ? "argmin" : "argmax"));
                            optest_end(&t);
                        }
            free(x);
        }
    }
    /* a line of NaN only, a line of -inf, length 1 */
    float x[12] = {NAN, NAN, NAN, NAN, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 1, 2, NAN, 2};
    for (size_t o = 0; o < 2; o++)
        for (int last = 0; last <= 1; last++)
            for (int axis = 0; axis < 2; axis++) {
                optest t;
                optest_begin_opset(&t, ops[o], 1, 1, 2, 13);
                optest_attr_int(&t, 0, "axis", axis);
                optest_attr_int(&t, 1, "select_last_index", last);
                optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
                check_x(&t, 0, 0, expected(ops[o], o ? "argmin" : "argmax"));
                optest_end(&t);
                optest_begin_opset(&t, ops[o], 1, 1, 2, 13);
                optest_attr_int(&t, 0, "axis", axis);
                optest_attr_int(&t, 1, "select_last_index", last);
                optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){12, 1}, x, false);
                check_x(&t, 0, 0, expected(ops[o], o ? "argmin" : "argmax"));
                optest_end(&t);
            }
}

/* ---- normalizations ------------------------------------------------------------------------- */

static void run_groupnorm(ir_op op, int opset, int rank, const int64_t *dims, int64_t groups,
                          unsigned seed) {
    size_t n = optest_prod(dims, rank);
    int64_t np = op == IR_OP_INSTANCENORMALIZATION || opset >= 21 ? dims[1] : groups;
    float *x = optest_random_f32(n, seed, -3, 5);
    float *sc = optest_random_f32((size_t)np, seed + 1, 0.5f, 2);
    float *b = optest_random_f32((size_t)np, seed + 2, -1, 1);
    /* a constant plane: zero variance */
    if (n >= 8 && dims[rank - 1] >= 4)
        for (int i = 0; i < 4; i++) x[i] = 0.5f;
    optest t;
    bool grp = op == IR_OP_GROUPNORMALIZATION;
    optest_begin_opset(&t, op, 3, 1, grp ? 2 : 1, opset);
    optest_attr_float(&t, 0, "epsilon", 1e-4f);
    if (grp) optest_attr_int(&t, 1, "num_groups", groups);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, &np, sc, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, &np, b, false);
    check(&t, 1e-4f, 1e-4f, expected(op, grp ? "groupnorm" : "instancenorm"));
    optest_end(&t);
    free(x);
    free(sc);
    free(b);
}

static void test_instance_group_norm(void **state) {
    (void)state;
    run_groupnorm(IR_OP_INSTANCENORMALIZATION, 17, 4, (int64_t[]){2, 3, 5, 7}, 0, 1);
    run_groupnorm(IR_OP_INSTANCENORMALIZATION, 17, 3, (int64_t[]){2, 5, 33}, 0, 2);
    run_groupnorm(IR_OP_INSTANCENORMALIZATION, 17, 4, (int64_t[]){1, 16, 40, 41}, 0, 3);
    run_groupnorm(IR_OP_INSTANCENORMALIZATION, 17, 2, (int64_t[]){3, 4}, 0, 4);
    run_groupnorm(IR_OP_INSTANCENORMALIZATION, 17, 4, (int64_t[]){0, 3, 5, 7}, 0, 5);
    for (int opset = 18; opset <= 21; opset += 3) {
        run_groupnorm(IR_OP_GROUPNORMALIZATION, opset, 4, (int64_t[]){2, 6, 5, 7}, 3, 6);
        run_groupnorm(IR_OP_GROUPNORMALIZATION, opset, 4, (int64_t[]){2, 6, 5, 7}, 1, 7);
        run_groupnorm(IR_OP_GROUPNORMALIZATION, opset, 4, (int64_t[]){1, 32, 19, 23}, 8, 8);
        run_groupnorm(IR_OP_GROUPNORMALIZATION, opset, 3, (int64_t[]){3, 4, 17}, 4, 9);
        run_groupnorm(IR_OP_GROUPNORMALIZATION, opset, 4, (int64_t[]){1, 6, 0, 7}, 3, 10);
    }
}

static void run_rms(int rank, const int64_t *dims, int64_t axis, unsigned seed) {
    size_t n = optest_prod(dims, rank);
    int a = (int)(axis < 0 ? axis + rank : axis);
    size_t blk = optest_prod(dims + a, rank - a);
    float *x = optest_random_f32(n, seed, -2, 2);
    float *sc = optest_random_f32(blk, seed + 1, 0.5f, 2);
    optest t;
    optest_begin_opset(&t, IR_OP_RMSNORMALIZATION, 2, 1, 2, 23);
    optest_attr_int(&t, 0, "axis", axis);
    optest_attr_float(&t, 1, "epsilon", 1e-5f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank - a, dims + a, sc, true);
    check(&t, 1e-4f, 1e-5f, expected(IR_OP_RMSNORMALIZATION, "rmsnorm"));
    optest_end(&t);
    free(x);
    free(sc);
}

static void test_rmsnorm(void **state) {
    (void)state;
    run_rms(3, (int64_t[]){2, 7, 33}, -1, 1);
    run_rms(3, (int64_t[]){2, 7, 33}, 1, 2);
    run_rms(3, (int64_t[]){1, 128, 768}, -1, 3);
    run_rms(2, (int64_t[]){5, 3}, -1, 4);
    run_rms(2, (int64_t[]){0, 3}, -1, 5);
}

static void test_lpnorm(void **state) {
    (void)state;
    const int64_t dims[4] = {3, 5, 7, 19};
    size_t n = optest_prod(dims, 4);
    float *x = optest_random_f32(n, 21, -2, 2);
    for (int i = 0; i < 19; i++) x[i] = 0; /* a zero line along the last axis */
    for (int p = 1; p <= 2; p++)
        for (int axis = -1; axis < 4; axis++) {
            optest t;
            optest_begin_opset(&t, IR_OP_LPNORMALIZATION, 1, 1, 2, 17);
            optest_attr_int(&t, 0, "axis", axis);
            optest_attr_int(&t, 1, "p", p);
            optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, dims, x, false);
            check(&t, 1e-4f, 1e-6f, expected(IR_OP_LPNORMALIZATION, "lpnorm"));
            optest_end(&t);
        }
    free(x);
    float *big = optest_random_f32(64 * 600, 22, -1, 1);
    for (int axis = 0; axis < 2; axis++) {
        optest t;
        optest_begin_opset(&t, IR_OP_LPNORMALIZATION, 1, 1, 1, 17);
        optest_attr_int(&t, 0, "axis", axis);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){64, 600}, big, false);
        check(&t, 1e-4f, 1e-6f, expected(IR_OP_LPNORMALIZATION, "lpnorm"));
        optest_end(&t);
    }
    free(big);
}

/* ---- TopK ----------------------------------------------------------------------------------- */

static void run_topk(int rank, const int64_t *dims, const float *x, int64_t axis, int64_t k,
                     int largest, int sorted) {
    optest t;
    optest_begin_opset(&t, IR_OP_TOPK, 2, 2, 3, 11);
    optest_attr_int(&t, 0, "axis", axis);
    optest_attr_int(&t, 1, "largest", largest);
    optest_attr_int(&t, 2, "sorted", sorted);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, &k, true);
    check_x(&t, 0, 0, 1);
    optest_end(&t);
}

static void test_topk(void **state) {
    (void)state;
    assert_non_null(kern_find(IR_OP_TOPK, "topk_heap"));
    const int64_t dims[3] = {3, 37, 21};
    size_t n = optest_prod(dims, 3);
    for (int nan = 0; nan <= 1; nan++) {
        float *x = tie_data(n, 17, nan);
        x[4] = INFINITY;
        x[50] = -INFINITY;
        for (int axis = -1; axis < 3; axis++) {
            int64_t len = dims[axis < 0 ? 2 : axis];
            static const int64_t ks[] = {0, 1, 5, -1};
            for (size_t ki = 0; ki < 4; ki++)
                for (int largest = 0; largest <= 1; largest++)
                    run_topk(3, dims, x, axis, ks[ki] < 0 || ks[ki] > len ? len : ks[ki], largest,
                             1);
        }
        free(x);
    }
    /* distinct values, the YOLO shape */
    float *y = optest_random_f32(8400, 3, -10, 10);
    run_topk(2, (int64_t[]){1, 8400}, y, -1, 100, 1, 1);
    run_topk(2, (int64_t[]){1, 8400}, y, -1, 100, 0, 0);
    run_topk(2, (int64_t[]){1, 8400}, y, -1, 8400, 1, 1);
    run_topk(2, (int64_t[]){8, 1050}, y, 1, 17, 1, 1); /* past the parallel threshold */
    free(y);
    float z[1] = {0};
    run_topk(2, (int64_t[]){0, 5}, z, 1, 2, 1, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_axes),
        cmocka_unit_test(test_reduce_large),
        cmocka_unit_test(test_reduce_edges),
        cmocka_unit_test(test_reduce_nan_inf),
        cmocka_unit_test(test_reduce_declines),
        cmocka_unit_test(test_globalmaxpool),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_instance_group_norm),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_lpnorm),
        cmocka_unit_test(test_topk),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
