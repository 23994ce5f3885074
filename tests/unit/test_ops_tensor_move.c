/* Transpose, Concat, Slice and Gather reference kernels: hand-computed cases from the ONNX docs,
 * randomised comparisons against index-by-index references written here (unravel the output
 * index, map it back to the input), every element size, zero-size and scalar shapes, opset
 * variants, multi-threaded runs, and the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static int64_t rnd_range(int64_t lo, int64_t hi) {
    return lo + (int64_t)rnd((uint32_t)(hi - lo + 1));
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static void unravel(size_t lin, const int64_t *dims, int rank, int64_t *idx) {
    for (int i = rank - 1; i >= 0; i--) {
        idx[i] = (int64_t)(lin % (size_t)dims[i]);
        lin /= (size_t)dims[i];
    }
}

static size_t ravel(const int64_t *idx, const int64_t *dims, int rank) {
    size_t lin = 0;
    for (int i = 0; i < rank; i++) lin = lin * (size_t)dims[i] + (size_t)idx[i];
    return lin;
}

/* Every element size anvil moves, with a dtype of that size. */
static const anvil_dtype move_dtypes[] = {
    ANVIL_DTYPE_UINT8,  ANVIL_DTYPE_BOOL,   ANVIL_DTYPE_INT8,     ANVIL_DTYPE_FLOAT16,
    ANVIL_DTYPE_INT16,  ANVIL_DTYPE_UINT16, ANVIL_DTYPE_BFLOAT16, ANVIL_DTYPE_FLOAT32,
    ANVIL_DTYPE_INT32,  ANVIL_DTYPE_UINT32, ANVIL_DTYPE_FLOAT64,  ANVIL_DTYPE_INT64,
    ANVIL_DTYPE_UINT64,
};
#define N_MOVE_DTYPES (sizeof move_dtypes / sizeof *move_dtypes)

/* Distinct bytes per element so a misplaced element is always visible (bool stays 0/1). */
static void *pattern(anvil_dtype dt, size_t n) {
    size_t es = anvil_dtype_size(dt);
    unsigned char *p = malloc(n * es + 1);
    for (size_t i = 0; i < n * es; i++)
        p[i] = dt == ANVIL_DTYPE_BOOL ? (unsigned char)((i * 7 + 3) % 5 == 0)
                                      : (unsigned char)(i * 131 + (i >> 8) * 17 + 1);
    return p;
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* Runs check + infer with hand-made input infos (unknown and symbolic dims). */
static anvil_status infer_with(optest *t, const op_tinfo *in, op_tinfo *out) {
    anvil_status s = op_check_graph(t->g);
    if (s != ANVIL_OK) return s;
    for (int i = 0; i < t->n_out; i++) {
        memset(&out[i], 0, sizeof out[i]);
        ir_shape_unknown(&out[i].shape);
    }
    return op_get(optest_node(t)->op)->infer(t->g, optest_node(t), in, t->n_in, out, t->n_out);
}

static void set_shape(op_tinfo *ti, anvil_dtype dt, int rank, const int64_t *d,
                      const int32_t *sym) {
    memset(ti, 0, sizeof *ti);
    ti->dtype = dt;
    ti->shape.rank = rank;
    for (int i = 0; i < rank; i++) {
        ti->shape.d[i] = d[i];
        ti->shape.sym[i] = sym ? sym[i] : -1;
    }
}

static void assert_dims(const op_tinfo *o, int rank, const int64_t *d) {
    assert_int_equal(o->shape.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(o->shape.d[i], d[i]);
}

/* ---- Transpose ---------------------------------------------------------------------------- */

static void test_transpose_hand(void **state) {
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6};
    optest t;
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){3, 2});
    float want[6] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(t.out[0].data, want, sizeof want);
    optest_end(&t);

    /* perm (1, 2, 0) on (1, 2, 3) gives (2, 3, 1), as in the ONNX doc */
    int32_t y[6] = {0, 1, 2, 3, 4, 5};
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){1, 2, 0}, 3);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){1, 2, 3}, y, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){2, 3, 1});
    assert_memory_equal(t.out[0].data, y, sizeof y);
    optest_end(&t);
}

static void transpose_reference(const unsigned char *x, const int64_t *xd, int r, const int *perm,
                                size_t es, unsigned char *y) {
    int64_t yd[IR_MAX_RANK], yi[IR_MAX_RANK], xi[IR_MAX_RANK];
    for (int i = 0; i < r; i++) yd[i] = xd[perm[i]];
    size_t n = numel(xd, r);
    for (size_t lin = 0; lin < n; lin++) {
        unravel(lin, yd, r, yi);
        for (int i = 0; i < r; i++) xi[perm[i]] = yi[i];
        memcpy(y + lin * es, x + ravel(xi, xd, r) * es, es);
    }
}

/* Every permutation of ranks 1..4 plus random rank 5/6 ones, over every element size. */
static void test_transpose_random(void **state) {
    (void)state;
    int cases = 0;
    for (int r = 1; r <= 6; r++) {
        int trials = r <= 4 ? 24 : 20;
        for (int trial = 0; trial < trials; trial++) {
            int perm[IR_MAX_RANK];
            for (int i = 0; i < r; i++) perm[i] = i;
            for (int i = r - 1; i > 0; i--) { /* Fisher-Yates */
                int j = (int)rnd((uint32_t)i + 1), tmp = perm[i];
                perm[i] = perm[j];
                perm[j] = tmp;
            }
            int64_t xd[IR_MAX_RANK], p64[IR_MAX_RANK];
            for (int i = 0; i < r; i++) {
                xd[i] = rnd_range(1, r <= 3 ? 5 : 3);
                p64[i] = perm[i];
            }
            anvil_dtype dt = move_dtypes[cases++ % N_MOVE_DTYPES];
            size_t es = anvil_dtype_size(dt), n = numel(xd, r);
            unsigned char *x = pattern(dt, n), *want = malloc(n * es + 1);
            transpose_reference(x, xd, r, perm, es, want);
            optest t;
            optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
            optest_attr_ints(&t, 0, "perm", p64, (size_t)r);
            optest_input(&t, 0, dt, r, xd, x, false);
            assert_int_equal(optest_run(&t), ANVIL_OK);
            assert_int_equal(t.out[0].dtype, dt);
            for (int i = 0; i < r; i++) assert_int_equal(t.out[0].dims[i], xd[perm[i]]);
            assert_memory_equal(t.out[0].data, want, n * es);
            optest_end(&t);
            free(x);
            free(want);
        }
    }
}

static void test_transpose_edge_shapes(void **state) {
    (void)state;
    optest t;
    /* zero-size: no data at all */
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){0, 3, 2}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){2, 3, 0});
    optest_end(&t);
    /* scalar */
    double s = 2.5;
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 0, NULL, &s, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out_info[0].shape.rank, 0);
    assert_true(*(double *)t.out[0].data == 2.5);
    optest_end(&t);
    /* size-1 dims everywhere */
    int16_t v[3] = {7, 8, 9};
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){2, 0, 1, 3}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_INT16, 4, (int64_t[]){1, 3, 1, 1}, v, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 4, (int64_t[]){1, 1, 3, 1});
    assert_memory_equal(t.out[0].data, v, sizeof v);
    optest_end(&t);
}

static void test_transpose_symbolic(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){0, 2, 3, 1}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, NULL, false);
    op_tinfo in[1], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){-1, 3, -1, 5}, (int32_t[]){0, -1, 1, -1});
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 4, (int64_t[]){-1, -1, 5, 3});
    assert_int_equal(out[0].shape.sym[0], 0);
    assert_int_equal(out[0].shape.sym[1], 1);
    /* unknown rank with a perm: the rank is the perm's length */
    ir_shape_unknown(&in[0].shape);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 4);
    optest_end(&t);
}

static void test_transpose_errors(void **state) {
    (void)state;
    optest t;
    float x[6] = {0};
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){0, 0}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "permutation");
    optest_end(&t);

    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){0, 2}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "entry 1 is 2");
    optest_end(&t);

    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){1, 0, 2}, 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 2");
    optest_end(&t);

    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_int(&t, 0, "perm", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "perm");
    optest_end(&t);

    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_STRING, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "STRING");
    optest_end(&t);

    /* an empty perm (stored as no list) is a perm of length 0, not the default */
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){0}, 0);
    optest_node(&t)->attrs[0].ints = NULL;
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "'perm' has 0 entries");
    optest_end(&t);
}

/* ---- Concat ------------------------------------------------------------------------------- */

static void test_concat_hand(void **state) {
    (void)state;
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    optest t;
    /* [[1,2],[3,4]] ++ [[5],[6]] on axis 1 */
    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 1}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 3});
    float want[6] = {1, 2, 5, 3, 4, 6};
    assert_memory_equal(t.out[0].data, want, sizeof want);
    optest_end(&t);
    /* the same with axis -2 stacks rows: [[1,2],[3,4]] ++ [[5,6]] */
    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", -2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){3, 2});
    float want2[6] = {1, 2, 3, 4, 5, 6};
    assert_memory_equal(t.out[0].data, want2, sizeof want2);
    optest_end(&t);
    /* opset 1: axis defaults to 1 */
    optest_begin_opset(&t, IR_OP_CONCAT, 2, 1, 0, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 1}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_memory_equal(t.out[0].data, want, sizeof want);
    optest_end(&t);
}

/* Output element -> (input, index in it) by walking the axis offsets; the kernel instead copies
 * contiguous runs per outer row. */
static void test_concat_random(void **state) {
    (void)state;
    for (int trial = 0; trial < 120; trial++) {
        int r = (int)rnd_range(1, 4), k = (int)rnd_range(1, 4);
        int axis = (int)rnd_range(0, r - 1);
        int64_t base[IR_MAX_RANK], dims[4][IR_MAX_RANK];
        for (int i = 0; i < r; i++) base[i] = rnd_range(1, 4);
        anvil_dtype dt = move_dtypes[trial % N_MOVE_DTYPES];
        size_t es = anvil_dtype_size(dt);
        unsigned char *data[4];
        int64_t ysum = 0;
        optest t;
        optest_begin(&t, IR_OP_CONCAT, k, 1, 1);
        optest_attr_int(&t, 0, "axis", rnd(2) ? axis : axis - r);
        for (int i = 0; i < k; i++) {
            memcpy(dims[i], base, sizeof base);
            dims[i][axis] = rnd_range(0, 3); /* zero-size inputs included */
            ysum += dims[i][axis];
            data[i] = pattern(dt, numel(dims[i], r) + (size_t)i * 3);
            /* shift the pattern so inputs differ */
            memmove(data[i], data[i] + (size_t)i * 3 * es, numel(dims[i], r) * es);
            optest_input(&t, i, dt, r, dims[i], numel(dims[i], r) ? data[i] : NULL, false);
        }
        assert_int_equal(optest_run(&t), ANVIL_OK);
        int64_t yd[IR_MAX_RANK], yi[IR_MAX_RANK];
        memcpy(yd, base, sizeof base);
        yd[axis] = ysum;
        for (int i = 0; i < r; i++) assert_int_equal(t.out[0].dims[i], yd[i]);
        size_t n = numel(yd, r);
        for (size_t lin = 0; lin < n; lin++) {
            unravel(lin, yd, r, yi);
            int which = 0;
            while (yi[axis] >= dims[which][axis]) yi[axis] -= dims[which++][axis];
            const unsigned char *src = data[which] + ravel(yi, dims[which], r) * es;
            assert_memory_equal((unsigned char *)t.out[0].data + lin * es, src, es);
        }
        optest_end(&t);
        for (int i = 0; i < k; i++) free(data[i]);
    }
}

static void test_concat_infer_unknown(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_CONCAT, 3, 1, 1);
    optest_attr_int(&t, 0, "axis", 1);
    for (int i = 0; i < 3; i++)
        optest_input(&t, i, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 1}, NULL, false);
    op_tinfo in[3], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){-1, 2}, (int32_t[]){4, -1});
    set_shape(&in[1], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){-1, 3}, (int32_t[]){4, -1});
    memset(&in[2], 0, sizeof in[2]);
    in[2].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_unknown(&in[2].shape);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    /* the unknown-rank input hides the concat dim and breaks the symbol's agreement */
    assert_dims(&out[0], 2, (int64_t[]){-1, -1});
    set_shape(&in[2], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){-1, 4}, (int32_t[]){4, -1});
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){-1, 9});
    assert_int_equal(out[0].shape.sym[0], 4);
    /* a known size on one input fixes the dim for all */
    set_shape(&in[2], ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){5, 4}, NULL);
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 2, (int64_t[]){5, 9});
    optest_end(&t);
}

static void test_concat_errors(void **state) {
    (void)state;
    float a[6] = {0};
    optest t;
    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 2, (int64_t[]){1, 3}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "same dtype");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){3}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "same rank");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 2}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "differ in dim 1 (3 vs 2)");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONCAT, 1, 1, 1);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "out of range");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONCAT, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'axis' is required");
    optest_end(&t);

    optest_begin_opset(&t, IR_OP_CONCAT, 1, 1, 1, 10);
    optest_attr_int(&t, 0, "axis", -1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 11");
    optest_end(&t);

    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3}, a, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "input 1 is empty");
    optest_end(&t);

    float s = 1;
    optest_begin(&t, IR_OP_CONCAT, 1, 1, 1);
    optest_attr_int(&t, 0, "axis", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, &s, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 0");
    optest_end(&t);
}

/* ---- Slice -------------------------------------------------------------------------------- */

/* Python's own slice normalisation (CPython's slice.indices), a formulation independent of the
 * ONNX clamping text the kernel follows; the indices taken are start, start+step, ... while on
 * the right side of stop. One corner differs on purpose: ONNX (and ONNX Runtime) clamp a
 * backward start below -len to 0, where Python gives an empty range. */
static int64_t py_slice_indices(int64_t len, int64_t start, int64_t stop, int64_t step,
                                int64_t *out) {
    if (start < 0) {
        start += len;
        if (start < 0) start = step < 0 && len == 0 ? -1 : 0;
    } else if (start >= len) {
        start = step < 0 ? len - 1 : len;
    }
    if (stop < 0) {
        stop += len;
        if (stop < 0) stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
        stop = step < 0 ? len - 1 : len;
    }
    int64_t k = 0;
    if (step > 0)
        for (int64_t i = start; i < stop; i += step) {
            out[k++] = i;
            if (i > INT64_MAX - step) break;
        }
    else
        for (int64_t i = start; i > stop; i += step) {
            out[k++] = i;
            if (i < INT64_MIN - step) break;
        }
    return k;
}

typedef struct slice_case {
    int opset;
    anvil_dtype tind;
    bool give_axes, give_steps;
    size_t k;
    int64_t starts[4], ends[4], axes[4], steps[4];
} slice_case;

/* Builds and runs one Slice; returns the status. Lists become known inputs (or attributes for
 * opset < 10). */
static anvil_status slice_run_case(optest *t, const slice_case *c, anvil_dtype dt, int r,
                                   const int64_t *xd, const void *x, void *lists_storage) {
    if (c->opset < 10) {
        int n_attr = 2 + (c->give_axes ? 1 : 0);
        optest_begin_opset(t, IR_OP_SLICE, 1, 1, n_attr, c->opset);
        optest_attr_ints(t, 0, "starts", c->starts, c->k);
        optest_attr_ints(t, 1, "ends", c->ends, c->k);
        if (c->give_axes) optest_attr_ints(t, 2, "axes", c->axes, c->k);
        optest_input(t, 0, dt, r, xd, x, false);
        return optest_run(t);
    }
    int n_in = c->give_steps ? 5 : (c->give_axes ? 4 : 3);
    optest_begin_opset(t, IR_OP_SLICE, n_in, 1, 0, c->opset);
    optest_input(t, 0, dt, r, xd, x, false);
    const int64_t *lists[4] = {c->starts, c->ends, c->axes, c->steps};
    for (int i = 1; i < n_in; i++) {
        if (i == 3 && !c->give_axes) continue; /* omitted optional axes before steps */
        void *buf = (char *)lists_storage + (size_t)(i - 1) * 4 * sizeof(int64_t);
        for (size_t j = 0; j < c->k; j++) {
            if (c->tind == ANVIL_DTYPE_INT32) {
                int64_t v = lists[i - 1][j];
                ((int32_t *)buf)[j] =
                    v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : (int32_t)v);
            } else {
                ((int64_t *)buf)[j] = lists[i - 1][j];
            }
        }
        optest_input(t, i, c->tind, 1, (int64_t[]){(int64_t)c->k}, buf, true);
    }
    return optest_run(t);
}

static void test_slice_doc_examples(void **state) {
    (void)state;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t lists[16];
    optest t;
    slice_case c1 = {.opset = 13,
                     .tind = ANVIL_DTYPE_INT64,
                     .give_axes = true,
                     .give_steps = true,
                     .k = 2,
                     .starts = {1, 0},
                     .ends = {2, 3},
                     .axes = {0, 1},
                     .steps = {1, 2}};
    assert_int_equal(slice_run_case(&t, &c1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, x, lists),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){1, 2});
    assert_memory_equal(t.out[0].data, ((float[]){5, 7}), 2 * sizeof(float));
    optest_end(&t);

    slice_case c2 = {
        .opset = 13, .tind = ANVIL_DTYPE_INT32, .k = 2, .starts = {0, 1}, .ends = {-1, 1000}};
    assert_int_equal(slice_run_case(&t, &c2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, x, lists),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){1, 3});
    assert_memory_equal(t.out[0].data, ((float[]){2, 3, 4}), 3 * sizeof(float));
    optest_end(&t);

    /* opset 9 with empty lists (stored as no list at all): the whole input */
    optest_begin_opset(&t, IR_OP_SLICE, 1, 1, 2, 9);
    optest_attr_ints(&t, 0, "starts", (int64_t[]){0}, 0);
    optest_attr_ints(&t, 1, "ends", (int64_t[]){0}, 0);
    optest_node(&t)->attrs[0].ints = NULL;
    optest_node(&t)->attrs[1].ints = NULL;
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){2, 4});
    assert_memory_equal(t.out[0].data, x, sizeof x);
    optest_end(&t);

    /* opset 1 attributes: same as example 2 */
    c2.opset = 1;
    assert_int_equal(slice_run_case(&t, &c2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, x, lists),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((float[]){2, 3, 4}), 3 * sizeof(float));
    optest_end(&t);
}

static void test_slice_negative_steps(void **state) {
    (void)state;
    int32_t x[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int64_t lists[16];
    optest t;
    /* reverse the whole axis with INT64_MIN as end */
    slice_case c = {.opset = 13,
                    .tind = ANVIL_DTYPE_INT64,
                    .give_axes = true,
                    .give_steps = true,
                    .k = 1,
                    .starts = {-1},
                    .ends = {INT64_MIN},
                    .axes = {0},
                    .steps = {-1}};
    assert_int_equal(slice_run_case(&t, &c, ANVIL_DTYPE_INT32, 1, (int64_t[]){10}, x, lists),
                     ANVIL_OK);
    int32_t rev[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    assert_memory_equal(t.out[0].data, rev, sizeof rev);
    optest_end(&t);
    /* start past the end clamps to d-1; end 0 is exclusive */
    slice_case c2 = c;
    c2.starts[0] = 20;
    c2.ends[0] = 0;
    c2.steps[0] = -3;
    assert_int_equal(slice_run_case(&t, &c2, ANVIL_DTYPE_INT32, 1, (int64_t[]){10}, x, lists),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){3});
    assert_memory_equal(t.out[0].data, ((int32_t[]){9, 6, 3}), 3 * sizeof(int32_t));
    optest_end(&t);
    /* INT64_MAX start and INT64_MIN step: one element, the last */
    slice_case c3 = c;
    c3.starts[0] = INT64_MAX;
    c3.steps[0] = INT64_MIN;
    assert_int_equal(slice_run_case(&t, &c3, ANVIL_DTYPE_INT32, 1, (int64_t[]){10}, x, lists),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){1});
    assert_int_equal(((int32_t *)t.out[0].data)[0], 9);
    optest_end(&t);
    /* start before end with a negative step: empty */
    slice_case c4 = c;
    c4.starts[0] = 2;
    c4.ends[0] = 5;
    assert_int_equal(slice_run_case(&t, &c4, ANVIL_DTYPE_INT32, 1, (int64_t[]){10}, x, lists),
                     ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){0});
    optest_end(&t);
}

static void test_slice_random(void **state) {
    (void)state;
    int64_t lists[16];
    for (int trial = 0; trial < 400; trial++) {
        int r = (int)rnd_range(1, 4);
        int64_t xd[IR_MAX_RANK];
        for (int i = 0; i < r; i++) xd[i] = rnd_range(0, 6);
        slice_case c;
        memset(&c, 0, sizeof c);
        c.opset = trial % 7 == 0 ? 9 : (trial % 2 ? 13 : 10);
        c.tind = trial % 3 == 0 ? ANVIL_DTYPE_INT32 : ANVIL_DTYPE_INT64;
        c.give_axes = rnd(2) != 0;
        c.give_steps = c.opset >= 10 && rnd(2) != 0;
        c.k = c.give_axes ? (size_t)rnd_range(0, r) : (size_t)rnd_range(0, r);
        int order[IR_MAX_RANK];
        for (int i = 0; i < r; i++) order[i] = i;
        for (int i = r - 1; i > 0; i--) {
            int j = (int)rnd((uint32_t)i + 1), tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        for (size_t j = 0; j < c.k; j++) {
            int a = c.give_axes ? order[j] : (int)j;
            int64_t d = xd[a];
            c.axes[j] = rnd(2) && c.opset >= 11 ? a - r : a;
            static const int64_t extremes[] = {INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN};
            c.starts[j] = rnd(6) ? rnd_range(-2 * d - 2, 2 * d + 2) : extremes[rnd(4)];
            c.ends[j] = rnd(6) ? rnd_range(-2 * d - 2, 2 * d + 2) : extremes[rnd(4)];
            c.steps[j] = c.give_steps ? (rnd(10) ? rnd_range(1, 3) * (rnd(2) ? 1 : -1)
                                                 : (rnd(2) ? INT64_MAX : INT64_MIN))
                                      : 1;
            if (c.tind == ANVIL_DTYPE_INT32) { /* the values the kernel will actually see */
                int64_t *vals[3] = {&c.starts[j], &c.ends[j], &c.steps[j]};
                for (int m = 0; m < 3; m++)
                    *vals[m] = *vals[m] > INT32_MAX ? INT32_MAX
                                                    : (*vals[m] < INT32_MIN ? INT32_MIN : *vals[m]);
            }
        }
        anvil_dtype dt = move_dtypes[trial % N_MOVE_DTYPES];
        size_t es = anvil_dtype_size(dt), n = numel(xd, r);
        unsigned char *x = pattern(dt, n);
        /* reference: per-dim index lists, then the cartesian product */
        int64_t take[IR_MAX_RANK][16], cnt[IR_MAX_RANK];
        for (int i = 0; i < r; i++) {
            cnt[i] = xd[i];
            for (int64_t m = 0; m < xd[i]; m++) take[i][m] = m;
        }
        for (size_t j = 0; j < c.k; j++) {
            int a = (int)(c.give_axes ? (c.axes[j] < 0 ? c.axes[j] + r : c.axes[j]) : (int64_t)j);
            cnt[a] = py_slice_indices(xd[a], c.starts[j], c.ends[j], c.steps[j], take[a]);
        }
        optest t;
        anvil_status s = slice_run_case(&t, &c, dt, r, xd, n ? x : NULL, lists);
        if (s != ANVIL_OK) fprintf(stderr, "slice trial %d: %s\n", trial, anvil_last_error());
        assert_int_equal(s, ANVIL_OK);
        for (int i = 0; i < r; i++) assert_int_equal(t.out[0].dims[i], cnt[i]);
        size_t yn = numel(cnt, r);
        int64_t yi[IR_MAX_RANK], xi[IR_MAX_RANK];
        for (size_t lin = 0; lin < yn; lin++) {
            unravel(lin, cnt, r, yi);
            for (int i = 0; i < r; i++) xi[i] = take[i][yi[i]];
            assert_memory_equal((unsigned char *)t.out[0].data + lin * es,
                                x + ravel(xi, xd, r) * es, es);
        }
        optest_end(&t);
        free(x);
    }
}

static void test_slice_infer_unknown(void **state) {
    (void)state;
    optest t;
    /* starts/ends computed at run time, axes omitted, length 1: only dim 0 can change */
    optest_begin(&t, IR_OP_SLICE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){4, 5, 6}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){-1, 5, 6});
    optest_end(&t);
    /* axes given but unknown: every dim may change */
    optest_begin(&t, IR_OP_SLICE, 4, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){4, 5, 6}, NULL, false);
    for (int i = 1; i < 4; i++)
        optest_input(&t, i, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL, false);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){-1, -1, -1});
    optest_end(&t);
    /* known lists over a symbolic input: untouched dims keep their symbol */
    int64_t st[1] = {1}, en[1] = {3}, ax[1] = {1};
    optest_begin(&t, IR_OP_SLICE, 4, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, st, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, en, true);
    optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, ax, true);
    op_tinfo in[4], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){-1, 8, -1}, (int32_t[]){2, -1, -1});
    for (int i = 1; i < 4; i++) {
        set_shape(&in[i], ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL);
        in[i].value = i == 1 ? st : (i == 2 ? en : ax);
    }
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 3, (int64_t[]){-1, 2, -1});
    assert_int_equal(out[0].shape.sym[0], 2);
    /* sliced axis of unknown size: unknown */
    ax[0] = 2;
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 3, (int64_t[]){-1, 8, -1});
    optest_end(&t);
}

static void test_slice_errors(void **state) {
    (void)state;
    float x[12] = {0};
    int64_t lists[16];
    optest t;
    slice_case c = {.opset = 13,
                    .tind = ANVIL_DTYPE_INT64,
                    .give_axes = true,
                    .give_steps = true,
                    .k = 1,
                    .starts = {0},
                    .ends = {2},
                    .axes = {0},
                    .steps = {0}};
    assert_int_equal(slice_run_case(&t, &c, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, lists),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "nonzero"));
    optest_end(&t);

    slice_case c2 = {.opset = 13,
                     .tind = ANVIL_DTYPE_INT64,
                     .give_axes = true,
                     .k = 2,
                     .starts = {0, 0},
                     .ends = {1, 1},
                     .axes = {1, -1}};
    assert_int_equal(slice_run_case(&t, &c2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, lists),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "axis 1 is sliced twice"));
    optest_end(&t);

    slice_case c3 = c2;
    c3.axes[1] = 2;
    assert_int_equal(slice_run_case(&t, &c3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, lists),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "out of range"));
    optest_end(&t);

    /* three starts for a rank-2 input with axes omitted */
    slice_case c4 = {.opset = 13, .tind = ANVIL_DTYPE_INT64, .k = 3};
    assert_int_equal(slice_run_case(&t, &c4, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, lists),
                     ANVIL_ERR_SHAPE);
    assert_non_null(strstr(anvil_last_error(), "rank 2"));
    optest_end(&t);

    /* list length mismatch */
    int64_t st[2] = {0, 0}, en[1] = {1};
    optest_begin(&t, IR_OP_SLICE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, st, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, en, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "same length");
    optest_end(&t);

    /* float starts; mixed index dtypes */
    optest_begin(&t, IR_OP_SLICE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, x, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, x, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "INT64 or INT32");
    optest_end(&t);
    int32_t en32[1] = {1};
    optest_begin(&t, IR_OP_SLICE, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, st, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, en32, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "share one dtype");
    optest_end(&t);

    /* opset variants: inputs before 10, attributes from 10, ends missing */
    optest_begin_opset(&t, IR_OP_SLICE, 3, 1, 0, 9);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, st, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, en, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "before opset 10");
    optest_end(&t);
    optest_begin(&t, IR_OP_SLICE, 3, 1, 1);
    optest_attr_ints(&t, 0, "starts", st, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, st, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, en, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "inputs, not attributes");
    optest_end(&t);
    optest_begin(&t, IR_OP_SLICE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, st, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "required");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_SLICE, 1, 1, 2, 9);
    optest_attr_ints(&t, 0, "starts", st, 2);
    optest_attr_ints(&t, 1, "ends", en, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 4}, x, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "same length");
    optest_end(&t);
}

/* ---- Gather ------------------------------------------------------------------------------- */

static void test_gather_doc_examples(void **state) {
    (void)state;
    float d1[6] = {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f};
    int64_t i1[4] = {0, 1, 1, 2};
    optest t;
    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, d1, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, i1, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){2, 2, 2});
    float w1[8] = {1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f};
    assert_memory_equal(t.out[0].data, w1, sizeof w1);
    optest_end(&t);

    float d2[9] = {1.0f, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f};
    int32_t i2[2] = {0, -1}; /* -1 is the last column, like 2 */
    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, d2, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 2, (int64_t[]){1, 2}, i2, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 3, (int64_t[]){3, 1, 2});
    float w2[6] = {1.0f, 1.9f, 2.3f, 3.9f, 4.5f, 5.9f};
    assert_memory_equal(t.out[0].data, w2, sizeof w2);
    optest_end(&t);

    /* scalar index: rank r - 1 */
    int64_t i3 = 2;
    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", -2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 3}, d2, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 0, NULL, &i3, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 1, (int64_t[]){3});
    assert_memory_equal(t.out[0].data, d2 + 6, 3 * sizeof(float));
    optest_end(&t);
}

static void test_gather_random(void **state) {
    (void)state;
    for (int trial = 0; trial < 200; trial++) {
        int r = (int)rnd_range(1, 4), q = (int)rnd_range(0, 3);
        int axis = (int)rnd_range(0, r - 1);
        int64_t xd[IR_MAX_RANK], id[IR_MAX_RANK];
        for (int i = 0; i < r; i++) xd[i] = rnd_range(1, 4);
        for (int i = 0; i < q; i++) id[i] = rnd_range(0, 3);
        anvil_dtype dt = move_dtypes[trial % N_MOVE_DTYPES];
        anvil_dtype it = trial % 2 ? ANVIL_DTYPE_INT32 : ANVIL_DTYPE_INT64;
        size_t es = anvil_dtype_size(dt), n = numel(xd, r), qn = numel(id, q);
        unsigned char *x = pattern(dt, n);
        int64_t *iv = malloc((qn + 1) * sizeof *iv);
        int32_t *iv32 = malloc((qn + 1) * sizeof *iv32);
        for (size_t j = 0; j < qn; j++) {
            iv[j] = rnd_range(-xd[axis], xd[axis] - 1);
            iv32[j] = (int32_t)iv[j];
        }
        optest t;
        optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
        optest_attr_int(&t, 0, "axis", rnd(2) ? axis : axis - r);
        optest_input(&t, 0, dt, r, xd, x, false);
        optest_input(&t, 1, it, q, id, it == ANVIL_DTYPE_INT32 ? (void *)iv32 : (void *)iv, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        /* reference: output index = (data prefix, index position, data suffix) */
        int yr = r + q - 1;
        int64_t yd[IR_MAX_RANK], yi[IR_MAX_RANK], xi[IR_MAX_RANK], ii[IR_MAX_RANK];
        for (int i = 0; i < axis; i++) yd[i] = xd[i];
        for (int i = 0; i < q; i++) yd[axis + i] = id[i];
        for (int i = axis + 1; i < r; i++) yd[q + i - 1] = xd[i];
        assert_int_equal(t.out[0].rank, yr);
        for (int i = 0; i < yr; i++) assert_int_equal(t.out[0].dims[i], yd[i]);
        size_t yn = numel(yd, yr);
        for (size_t lin = 0; lin < yn; lin++) {
            unravel(lin, yd, yr, yi);
            for (int i = 0; i < axis; i++) xi[i] = yi[i];
            for (int i = 0; i < q; i++) ii[i] = yi[axis + i];
            int64_t k = iv[ravel(ii, id, q)];
            xi[axis] = k < 0 ? k + xd[axis] : k;
            for (int i = axis + 1; i < r; i++) xi[i] = yi[q + i - 1];
            assert_memory_equal((unsigned char *)t.out[0].data + lin * es,
                                x + ravel(xi, xd, r) * es, es);
        }
        optest_end(&t);
        free(x);
        free(iv);
        free(iv32);
    }
}

static void test_gather_edge_shapes(void **state) {
    (void)state;
    float d[6] = {1, 2, 3, 4, 5, 6};
    optest t;
    /* no indices: a zero-size output */
    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){0}, NULL, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_dims(&t.out_info[0], 2, (int64_t[]){0, 2});
    optest_end(&t);
    /* symbolic dims pass through */
    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 1}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, NULL, false);
    op_tinfo in[2], out[1];
    set_shape(&in[0], ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){-1, 10, 4}, (int32_t[]){3, -1, -1});
    set_shape(&in[1], ANVIL_DTYPE_INT64, 2, (int64_t[]){-1, 7}, (int32_t[]){5, -1});
    assert_int_equal(infer_with(&t, in, out), ANVIL_OK);
    assert_dims(&out[0], 4, (int64_t[]){-1, -1, 7, 4});
    assert_int_equal(out[0].shape.sym[0], 3);
    assert_int_equal(out[0].shape.sym[1], 5);
    optest_end(&t);
}

static void test_gather_errors(void **state) {
    (void)state;
    float d[6] = {1, 2, 3, 4, 5, 6};
    int64_t bad[4] = {0, 1, 3, 0};
    optest t;
    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){2, 2}, bad, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "index 3 at position [1,0]");
    assert_non_null(strstr(anvil_last_error(), "valid: -3..2"));
    optest_end(&t);

    int32_t neg[1] = {-4};
    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 1, (int64_t[]){1}, neg, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "index -4 at position [0]");
    optest_end(&t);

    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, d, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "indices");
    optest_end(&t);

    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 0, NULL, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bad, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank >= 1");
    optest_end(&t);

    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){3, 2}, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bad, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "out of range");
    optest_end(&t);

    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 5, (int64_t[]){1, 1, 1, 1, 6}, d, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 5, (int64_t[]){1, 1, 1, 1, 1}, bad, false);
    expect_status(&t, ANVIL_ERR_LIMIT, "rank 9");
    optest_end(&t);

    /* data axis of size 0: every index is out of range */
    optest_begin(&t, IR_OP_GATHER, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 2}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bad, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "size 0");
    optest_end(&t);
}

/* ---- multi-threaded runs ------------------------------------------------------------------ */

/* The kernels split rows across threads; with a real pool the bytes must match the serial run. */
static void test_threaded(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(4, &pool), ANVIL_OK);
    op_ctx ctx = {.pool = pool};
    int64_t xd[3] = {37, 19, 23};
    size_t n = numel(xd, 3);
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)i;

    optest t;
    optest_begin(&t, IR_OP_TRANSPOSE, 1, 1, 1);
    optest_attr_ints(&t, 0, "perm", (int64_t[]){2, 0, 1}, 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, xd, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    float *serial = malloc(n * sizeof *serial);
    memcpy(serial, t.out[0].data, n * sizeof *serial);
    memset(t.out[0].data, 0, n * sizeof(float));
    const op_tensor *ins[1] = {&t.in[0]};
    op_tensor *outs[1] = {&t.out[0]};
    assert_int_equal(op_get(IR_OP_TRANSPOSE)->run(optest_node(&t), ins, 1, outs, 1, &ctx),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, serial, n * sizeof *serial);
    optest_end(&t);

    int64_t idx[5] = {3, -1, 0, 18, 7};
    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){5}, idx, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    size_t gn = 37 * 5 * 23;
    memcpy(serial, t.out[0].data, gn * sizeof(float));
    memset(t.out[0].data, 0, gn * sizeof(float));
    const op_tensor *gins[2] = {&t.in[0], &t.in[1]};
    assert_int_equal(op_get(IR_OP_GATHER)->run(optest_node(&t), gins, 2, outs, 1, &ctx), ANVIL_OK);
    assert_memory_equal(t.out[0].data, serial, gn * sizeof(float));
    optest_end(&t);

    optest_begin(&t, IR_OP_CONCAT, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, xd, x, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    memcpy(serial, t.out[0].data, n * sizeof(float)); /* first half is enough to compare */
    float *full = malloc(2 * n * sizeof(float));
    memcpy(full, t.out[0].data, 2 * n * sizeof(float));
    memset(t.out[0].data, 0, 2 * n * sizeof(float));
    assert_int_equal(op_get(IR_OP_CONCAT)->run(optest_node(&t), gins, 2, outs, 1, &ctx), ANVIL_OK);
    assert_memory_equal(t.out[0].data, full, 2 * n * sizeof(float));
    optest_end(&t);
    free(full);

    free(serial);
    free(x);
    core_pool_free(pool);
}

/* The registry must dispatch to this family's implementations. Naming them here also makes the
 * linker take their objects out of the static library (the registry only refers to them weakly). */
extern const op_impl op_impl_transpose;
extern const op_impl op_impl_concat;
extern const op_impl op_impl_slice;
extern const op_impl op_impl_gather;

static void test_dispatch(void **state) {
    (void)state;
    assert_ptr_equal(op_get(IR_OP_TRANSPOSE), &op_impl_transpose);
    assert_ptr_equal(op_get(IR_OP_CONCAT), &op_impl_concat);
    assert_ptr_equal(op_get(IR_OP_SLICE), &op_impl_slice);
    assert_ptr_equal(op_get(IR_OP_GATHER), &op_impl_gather);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_transpose_hand),
        cmocka_unit_test(test_transpose_random),
        cmocka_unit_test(test_transpose_edge_shapes),
        cmocka_unit_test(test_transpose_symbolic),
        cmocka_unit_test(test_transpose_errors),
        cmocka_unit_test(test_concat_hand),
        cmocka_unit_test(test_concat_random),
        cmocka_unit_test(test_concat_infer_unknown),
        cmocka_unit_test(test_concat_errors),
        cmocka_unit_test(test_slice_doc_examples),
        cmocka_unit_test(test_slice_negative_steps),
        cmocka_unit_test(test_slice_random),
        cmocka_unit_test(test_slice_infer_unknown),
        cmocka_unit_test(test_slice_errors),
        cmocka_unit_test(test_gather_doc_examples),
        cmocka_unit_test(test_gather_random),
        cmocka_unit_test(test_gather_edge_shapes),
        cmocka_unit_test(test_gather_errors),
        cmocka_unit_test(test_threaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
