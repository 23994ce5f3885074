/* Reductions, ArgMax/ArgMin, LogSoftmax/Hardmax, TopK, CumSum/CumProd: reference kernels
 * against values worked out by hand or by naive loops written here, the opset-dependent forms
 * (axes attribute vs input, 2-D coercion), empty-set identities, integer exactness, and the
 * errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static const float X23[6] = {1, -2, 3, -4, 5, 6}; /* [[1,-2,3],[-4,5,6]] */

/* Runs reduce op over X23 with axes given as attribute (opset 13) or input (opset 18). */
static void run_reduce(ir_op op, int opset, const int64_t *axes, size_t n_axes, bool keep,
                       optest *t) {
    bool as_input = opset >= 18 || (op == IR_OP_REDUCESUM && opset >= 13);
    optest_begin_opset(t, op, as_input && n_axes ? 2 : 1, 1, as_input || !n_axes ? 1 : 2, opset);
    optest_attr_int(t, 0, "keepdims", keep);
    if (!as_input && n_axes) optest_attr_ints(t, 1, "axes", axes, n_axes);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, X23, false);
    if (as_input && n_axes)
        optest_input(t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){(int64_t)n_axes}, axes, true);
}

static void test_reduce_values(void **state) {
    (void)state;
    struct {
        ir_op op;
        float row[2]; /* over axis 1 */
        float all;
    } cases[] = {
        {IR_OP_REDUCESUM, {2, 7}, 9},
        {IR_OP_REDUCEMEAN, {2.0f / 3, 7.0f / 3}, 1.5f},
        {IR_OP_REDUCEMAX, {3, 6}, 6},
        {IR_OP_REDUCEMIN, {-2, -4}, -4},
        {IR_OP_REDUCEPROD, {-6, -120}, 720},
        {IR_OP_REDUCEL1, {6, 15}, 21},
        {IR_OP_REDUCEL2, {sqrtf(14), sqrtf(77)}, sqrtf(91)},
        {IR_OP_REDUCESUMSQUARE, {14, 77}, 91},
        {IR_OP_REDUCELOGSUMEXP,
         {logf(expf(1) + expf(-2) + expf(3)), logf(expf(-4) + expf(5) + expf(6))},
         logf(expf(1) + expf(-2) + expf(3) + expf(-4) + expf(5) + expf(6))},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int opset = 13; opset <= 18; opset += 5) {
            optest t;
            run_reduce(cases[c].op, opset, (int64_t[]){-1}, 1, true, &t);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            assert_int_equal(t.out[0].rank, 2);
            assert_int_equal(t.out[0].dims[0], 2);
            assert_int_equal(t.out[0].dims[1], 1);
            assert_true(optest_compare_f32(t.out[0].data, cases[c].row, 2, 1e-5f, 1e-6f) < 0);
            optest_end(&t);
            /* no axes: every axis, keepdims=0 gives a scalar */
            run_reduce(cases[c].op, opset, NULL, 0, false, &t);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            assert_int_equal(t.out[0].rank, 0);
            assert_true(optest_compare_f32(t.out[0].data, &cases[c].all, 1, 1e-5f, 1e-6f) < 0);
            optest_end(&t);
        }
    }
    /* ReduceLogSum of positive values: log of the sum over axis 0 */
    optest t;
    optest_begin_opset(&t, IR_OP_REDUCELOGSUM, 1, 1, 1, 13);
    optest_attr_ints(&t, 0, "axes", (int64_t[]){0}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4}, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(optest_compare_f32(t.out[0].data, (float[]){logf(4), logf(6)}, 2, 1e-5f, 0) < 0);
    optest_end(&t);
}

static void test_reduce_noop_empty_and_ints(void **state) {
    (void)state;
    optest t;
    /* noop_with_empty_axes: a copy */
    optest_begin_opset(&t, IR_OP_REDUCEMAX, 1, 1, 1, 18);
    optest_attr_int(&t, 0, "noop_with_empty_axes", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, X23, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 2);
    assert_memory_equal(t.out[0].data, X23, sizeof X23);
    optest_end(&t);

    /* reducing an empty set gives the identity */
    struct {
        ir_op op;
        float want;
    } ids[] = {{IR_OP_REDUCESUM, 0},
               {IR_OP_REDUCEPROD, 1},
               {IR_OP_REDUCEMAX, -INFINITY},
               {IR_OP_REDUCEMIN, INFINITY},
               {IR_OP_REDUCELOGSUM, -INFINITY},
               {IR_OP_REDUCELOGSUMEXP, -INFINITY}};
    for (size_t c = 0; c < sizeof ids / sizeof ids[0]; c++) {
        optest_begin_opset(&t, ids[c].op, 2, 1, 1, 18);
        optest_attr_int(&t, 0, "keepdims", 1);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 0}, NULL, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, (int64_t[]){1}, true);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dims[0], 2);
        assert_int_equal(t.out[0].dims[1], 1);
        const float *y = t.out[0].data;
        assert_true(y[0] == ids[c].want && y[1] == ids[c].want);
        optest_end(&t);
    }

    /* int64 sums beyond 2^53 stay exact; int32 products wrap like int32 */
    int64_t big[2] = {(int64_t)1 << 60, 1};
    optest_begin_opset(&t, IR_OP_REDUCESUM, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "keepdims", 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, big, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(((int64_t *)t.out[0].data)[0] == ((int64_t)1 << 60) + 1);
    optest_end(&t);

    /* ReduceMax of bool exists from opset 20 */
    uint8_t b[4] = {0, 1, 0, 0};
    optest_begin_opset(&t, IR_OP_REDUCEMAX, 1, 1, 1, 20);
    optest_attr_int(&t, 0, "keepdims", 0);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 2, (int64_t[]){2, 2}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(((uint8_t *)t.out[0].data)[0], 1);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_REDUCEMAX, 1, 1, 0, 18);
    optest_input(&t, 0, ANVIL_DTYPE_BOOL, 2, (int64_t[]){2, 2}, b, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "BOOL");
    optest_end(&t);
}

/* Every subset of the axes of a [3,4,5] tensor (contiguous ones take the float32 line kernel,
 * the others the general walk, float64 always the general walk) against a naive loop. */
static void test_reduce_axis_subsets(void **state) {
    (void)state;
    enum { A = 3, B = 4, C = 5 };
    float xf[A * B * C];
    double xd[A * B * C];
    for (int i = 0; i < A * B * C; i++) xd[i] = xf[i] = (float)((i * 37 % 23) - 11) / 4.0f;
    const int64_t dims[3] = {A, B, C};
    ir_op ops[4] = {IR_OP_REDUCESUM, IR_OP_REDUCEMAX, IR_OP_REDUCEL2, IR_OP_REDUCELOGSUMEXP};
    for (int k = 0; k < 4; k++) {
        for (int mask = 1; mask < 8; mask++) {
            int64_t axes[3];
            size_t na = 0;
            for (int d = 0; d < 3; d++)
                if (mask >> d & 1) axes[na++] = d;
            /* naive: for each output position, visit the inputs that agree on kept dims */
            double want[A * B * C];
            for (int o = 0; o < A * B * C; o++) {
                int oi[3] = {o / (B * C), o / C % B, o % C};
                double acc = k == 1 || k == 3 ? -INFINITY : 0, s = 0;
                for (int i = 0; i < A * B * C; i++) {
                    int ii[3] = {i / (B * C), i / C % B, i % C};
                    bool same = true;
                    for (int d = 0; d < 3; d++)
                        if (!(mask >> d & 1) && ii[d] != oi[d]) same = false;
                    if (!same) continue;
                    if (k == 0) acc += xd[i];
                    if (k == 1 && xd[i] > acc) acc = xd[i];
                    if (k == 2) acc += xd[i] * xd[i];
                    if (k == 3) s += exp(xd[i]);
                }
                want[o] = k == 2 ? sqrt(acc) : k == 3 ? log(s) : acc;
            }
            for (int f64 = 0; f64 <= 1; f64++) {
                optest t;
                optest_begin_opset(&t, ops[k], 2, 1, 0, 18);
                optest_input(&t, 0, f64 ? ANVIL_DTYPE_FLOAT64 : ANVIL_DTYPE_FLOAT32, 3, dims,
                             f64 ? (const void *)xd : (const void *)xf, false);
                optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){(int64_t)na}, axes, true);
                assert_int_equal(optest_run(&t), ANVIL_OK);
                size_t ny = 1;
                for (int d = 0; d < 3; d++) ny *= (size_t)t.out[0].dims[d];
                for (size_t o = 0; o < ny; o++) {
                    /* the output position o in keepdims form maps to the first matching input */
                    size_t r = o;
                    int oc[3];
                    for (int d = 2; d >= 0; d--) {
                        oc[d] = (int)(r % (size_t)t.out[0].dims[d]);
                        r /= (size_t)t.out[0].dims[d];
                    }
                    double w = want[(oc[0] * B + oc[1]) * C + oc[2]];
                    double got = f64 ? ((double *)t.out[0].data)[o] : ((float *)t.out[0].data)[o];
                    assert_true(fabs(got - w) <= 1e-5 * (1 + fabs(w)));
                }
                optest_end(&t);
            }
        }
    }
}

static void test_reduce_errors(void **state) {
    (void)state;
    optest t;
    run_reduce(IR_OP_REDUCEMEAN, 18, (int64_t[]){1, -1}, 2, true, &t);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "twice");
    optest_end(&t);
    run_reduce(IR_OP_REDUCEMEAN, 13, (int64_t[]){2}, 1, true, &t);
    expect_status(&t, ANVIL_ERR_SHAPE, "axes");
    optest_end(&t);
    /* an axes attribute where the axes are an input */
    optest_begin_opset(&t, IR_OP_REDUCEL1, 1, 1, 1, 18);
    optest_attr_ints(&t, 0, "axes", (int64_t[]){0}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, X23, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "second input");
    optest_end(&t);
    /* keepdims must be 0 or 1 */
    run_reduce(IR_OP_REDUCESUM, 13, NULL, 0, true, &t);
    optest_node(&t)->attrs[0].i = 2;
    assert_int_not_equal(optest_run(&t), ANVIL_OK);
    optest_end(&t);
    /* wrong dtype */
    optest_begin_opset(&t, IR_OP_REDUCESUM, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT8, 1, (int64_t[]){2}, (int8_t[]){1, 2}, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT8");
    optest_end(&t);
}

static void test_argmax(void **state) {
    (void)state;
    float x[6] = {1, 5, 5, 7, 0, 7}; /* [[1,5,5],[7,0,7]] */
    for (int last = 0; last <= 1; last++) {
        optest t;
        optest_begin_opset(&t, IR_OP_ARGMAX, 1, 1, 3, 13);
        optest_attr_int(&t, 0, "axis", 1);
        optest_attr_int(&t, 1, "keepdims", 0);
        optest_attr_int(&t, 2, "select_last_index", last);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].rank, 1);
        const int64_t *y = t.out[0].data;
        assert_int_equal(y[0], last ? 2 : 1);
        assert_int_equal(y[1], last ? 2 : 0);
        optest_end(&t);
    }
    optest t;
    optest_begin_opset(&t, IR_OP_ARGMIN, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_UINT64, 2, (int64_t[]){2, 2},
                 (uint64_t[]){UINT64_MAX, 3, 2, UINT64_MAX}, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 1);
    assert_int_equal(((int64_t *)t.out[0].data)[0], 1);
    assert_int_equal(((int64_t *)t.out[0].data)[1], 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ARGMAX, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ARGMAX, 1, 1, 1, 11);
    optest_attr_int(&t, 0, "select_last_index", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 12");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ARGMAX, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 0}, NULL, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "size 0");
    optest_end(&t);
}

static void test_logsoftmax_hardmax(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 3};
    /* opset 13: over the last dim of [2,2]; opset 11 with axis 0: over everything */
    optest t;
    optest_begin_opset(&t, IR_OP_LOGSOFTMAX, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    float l0 = logf(expf(1) + expf(2)), l1 = logf(2 * expf(3));
    float want13[4] = {1 - l0, 2 - l0, 3 - l1, 3 - l1};
    assert_true(optest_compare_f32(t.out[0].data, want13, 4, 1e-5f, 1e-6f) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LOGSOFTMAX, 1, 1, 1, 11);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    float la = logf(expf(1) + expf(2) + 2 * expf(3));
    float want11[4] = {1 - la, 2 - la, 3 - la, 3 - la};
    assert_true(optest_compare_f32(t.out[0].data, want11, 4, 1e-5f, 1e-6f) < 0);
    optest_end(&t);
    /* Hardmax: the first maximum wins */
    optest_begin_opset(&t, IR_OP_HARDMAX, 1, 1, 1, 11);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(optest_compare_f32(t.out[0].data, (float[]){0, 0, 1, 0}, 4, 0, 0) < 0);
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_HARDMAX, 1, 1, 1, 13);
    optest_attr_int(&t, 0, "axis", -3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_LOGSOFTMAX, 1, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 1, (int64_t[]){2}, (int32_t[]){1, 2}, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
}

static void test_topk(void **state) {
    (void)state;
    float x[6] = {3, 1, 3, 2, 2, 9}; /* [[3,1,3],[2,2,9]] */
    for (int largest = 0; largest <= 1; largest++) {
        optest t;
        optest_begin_opset(&t, IR_OP_TOPK, 2, 2, 1, 11);
        optest_attr_int(&t, 0, "largest", largest);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, (int64_t[]){2}, true);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dims[1], 2);
        const float *v = t.out[0].data;
        const int64_t *ix = t.out[1].data;
        if (largest) { /* ties: lower index first */
            assert_true(v[0] == 3 && v[1] == 3 && v[2] == 9 && v[3] == 2);
            assert_true(ix[0] == 0 && ix[1] == 2 && ix[2] == 2 && ix[3] == 0);
        } else {
            assert_true(v[0] == 1 && v[1] == 3 && v[2] == 2 && v[3] == 2);
            assert_true(ix[0] == 1 && ix[1] == 0 && ix[2] == 0 && ix[3] == 1);
        }
        optest_end(&t);
    }
    /* opset 9: k attribute, along axis 0 */
    optest t;
    optest_begin_opset(&t, IR_OP_TOPK, 1, 2, 2, 9);
    optest_attr_int(&t, 0, "k", 1);
    optest_attr_int(&t, 1, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(optest_compare_f32(t.out[0].data, (float[]){3, 2, 9}, 3, 0, 0) < 0);
    optest_end(&t);
    /* K beyond the axis */
    optest_begin_opset(&t, IR_OP_TOPK, 2, 2, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, (int64_t[]){4}, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "at most");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_TOPK, 2, 2, 0, 11);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, (int64_t[]){-1}, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, ">= 0");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_TOPK, 2, 2, 1, 10);
    optest_attr_int(&t, 0, "largest", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, (int64_t[]){1}, true);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 11");
    optest_end(&t);
}

static void test_cumsum_cumprod(void **state) {
    (void)state;
    int32_t x[6] = {1, 2, 3, 4, 5, 6}; /* [[1,2,3],[4,5,6]] */
    struct {
        ir_op op;
        int opset, excl, rev;
        int32_t want[6];
    } cases[] = {
        {IR_OP_CUMSUM, 14, 0, 0, {1, 3, 6, 4, 9, 15}},
        {IR_OP_CUMSUM, 11, 1, 0, {0, 1, 3, 0, 4, 9}},
        {IR_OP_CUMSUM, 14, 0, 1, {6, 5, 3, 15, 11, 6}},
        {IR_OP_CUMSUM, 14, 1, 1, {5, 3, 0, 11, 6, 0}},
        {IR_OP_CUMPROD, 26, 0, 0, {1, 2, 6, 4, 20, 120}},
        {IR_OP_CUMPROD, 26, 1, 1, {6, 3, 1, 30, 6, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        optest t;
        optest_begin_opset(&t, cases[c].op, 2, 1, 2, cases[c].opset);
        optest_attr_int(&t, 0, "exclusive", cases[c].excl);
        optest_attr_int(&t, 1, "reverse", cases[c].rev);
        optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT32, 0, NULL, (int32_t[]){-1}, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_memory_equal(t.out[0].data, cases[c].want, sizeof cases[c].want);
        optest_end(&t);
    }
    optest t;
    optest_begin_opset(&t, IR_OP_CUMSUM, 2, 1, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, (int64_t[]){2}, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "axis");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CUMSUM, 2, 1, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 0, NULL, (float[]){0}, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "INT32 or INT64");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CUMPROD, 2, 1, 0, 25);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, (int64_t[]){0}, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 26");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_CUMSUM, 2, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 2, (int64_t[]){2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, (int64_t[]){0}, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 11");
    optest_end(&t);
}

/* The kernel split across a 4-thread pool gives the same bytes as the serial run. */
static void check_threads(optest *t) {
    assert_int_equal(optest_run(t), ANVIL_OK);
    size_t bytes = 1;
    for (int d = 0; d < t->out[0].rank; d++) bytes *= (size_t)t->out[0].dims[d];
    bytes *= anvil_dtype_size(t->out[0].dtype);
    void *serial = malloc(bytes);
    memcpy(serial, t->out[0].data, bytes);
    memset(t->out[0].data, 0, bytes);
    core_pool *pool;
    assert_int_equal(core_pool_create(4, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    const op_tensor *ins[OPTEST_MAX_IO];
    op_tensor *outs[OPTEST_MAX_IO];
    for (int i = 0; i < t->n_in; i++) ins[i] = t->in_set[i] ? &t->in[i] : NULL;
    for (int i = 0; i < t->n_out; i++) outs[i] = &t->out[i];
    assert_int_equal(
        op_get(optest_node(t)->op)->run(optest_node(t), ins, t->n_in, outs, t->n_out, &ctx),
        ANVIL_OK);
    assert_memory_equal(t->out[0].data, serial, bytes);
    core_pool_free(pool);
    free(serial);
}

static void test_reduce_threads(void **state) {
    (void)state;
    int64_t dims[3] = {16, 37, 61};
    size_t n = 16 * 37 * 61;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i * 7919 % 1000) - 500) / 100.0f;
    for (int64_t axis = 0; axis < 3; axis++) {
        optest t;
        optest_begin_opset(&t, IR_OP_REDUCEMEAN, 1, 1, 1, 13);
        optest_attr_ints(&t, 0, "axes", &axis, 1);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, dims, x, false);
        check_threads(&t);
        optest_end(&t);
    }
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_threads),
        cmocka_unit_test(test_reduce_values),
        cmocka_unit_test(test_reduce_noop_empty_and_ints),
        cmocka_unit_test(test_reduce_errors),
        cmocka_unit_test(test_reduce_axis_subsets),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_logsoftmax_hardmax),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_cumsum_cumprod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
