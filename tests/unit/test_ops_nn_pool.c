/* MaxPool, AveragePool and GlobalAveragePool reference kernels: the ONNX operator-doc examples
 * (ceil_mode, the last window starting on padding, Indices in both storage orders), randomised
 * 1-D/2-D/3-D windows (strides, dilations, pads, every auto_pad, ceil_mode, count_include_pad)
 * against a naive pooling written here that walks every window tap with explicit bounds tests,
 * the integer MaxPool types, multi-threaded runs, opset-dependent attributes and the errors bad
 * models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static void unravel(size_t lin, const int64_t *dims, int rank, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = (int64_t)(lin % (size_t)dims[d]);
        lin /= (size_t)dims[d];
    }
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static const float ramp16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* ---- doc examples -------------------------------------------------------------------------- */

static void run_2d(ir_op op, int opset, const float *x, int64_t h, int64_t w, int n_out,
                   void (*attrs)(optest *), int n_attrs, optest *t) {
    optest_begin_opset(t, op, 1, n_out, n_attrs, opset);
    attrs(t);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, h, w}, x, false);
    anvil_status s = optest_run(t);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    assert_int_equal(s, ANVIL_OK);
}

static void attrs_k3s2_ceil(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){2, 2}, 2);
    optest_attr_int(t, 2, "ceil_mode", 1);
}

static void attrs_last_window_on_pad(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){3, 3}, 2);
    optest_attr_ints(t, 2, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    optest_attr_int(t, 3, "ceil_mode", 1);
    optest_attr_int(t, 4, "count_include_pad", 1);
}

static void attrs_k2s2_colmajor(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){2, 2}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){2, 2}, 2);
    optest_attr_int(t, 2, "storage_order", 1);
}

static void attrs_k5_pad2(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){5, 5}, 2);
    optest_attr_ints(t, 1, "pads", (int64_t[]){2, 2, 2, 2}, 4);
}

static void attrs_k2_dil2_ceil(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){2, 2}, 2);
    optest_attr_ints(t, 1, "dilations", (int64_t[]){2, 2}, 2);
    optest_attr_int(t, 2, "ceil_mode", 1);
}

static void attrs_k3_same_upper(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){2, 2}, 2);
    optest_attr_string(t, 2, "auto_pad", "SAME_UPPER");
}

static void test_pool_doc_examples(void **state) {
    (void)state;
    optest t;
    /* maxpool_2d_ceil / averagepool_2d_ceil: 4x4 ramp, 3x3 kernel, stride 2 */
    run_2d(IR_OP_MAXPOOL, 17, ramp16, 4, 4, 1, attrs_k3s2_ceil, 3, &t);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){11, 12, 15, 16}, 4, 0, 0), -1);
    optest_end(&t);
    run_2d(IR_OP_AVERAGEPOOL, 17, ramp16, 4, 4, 1, attrs_k3s2_ceil, 3, &t);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){6, 7.5f, 12, 13.5f}, 4, 0, 0), -1);
    optest_end(&t);
    /* averagepool_2d_ceil_last_window_starts_on_pad: a second window would start in the right
     * padding, so the output is 1x1, and the 9 taps (4 real) all count */
    const float x4[4] = {0.8580f, 0.0786f, 0.2692f, 0.1537f};
    run_2d(IR_OP_AVERAGEPOOL, 19, x4, 2, 2, 1, attrs_last_window_on_pad, 5, &t);
    assert_int_equal(t.out[0].dims[2], 1);
    assert_int_equal(t.out[0].dims[3], 1);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){0.151055556f}, 1, 1e-6f, 0), -1);
    optest_end(&t);
    /* maxpool_with_argmax_2d_precomputed_strides: column-major Indices */
    float x25[25];
    for (int i = 0; i < 25; i++) x25[i] = (float)(i + 1);
    run_2d(IR_OP_MAXPOOL, 17, x25, 5, 5, 2, attrs_k2s2_colmajor, 3, &t);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){7, 9, 17, 19}, 4, 0, 0), -1);
    assert_int_equal(t.out[1].dtype, ANVIL_DTYPE_INT64);
    const int64_t *idx = t.out[1].data;
    assert_int_equal(idx[0], 6);
    assert_int_equal(idx[1], 16);
    assert_int_equal(idx[2], 8);
    assert_int_equal(idx[3], 18);
    optest_end(&t);
    /* maxpool_with_argmax_2d_precomputed_pads: row-major Indices, 5x5 kernel, pads 2 */
    run_2d(IR_OP_MAXPOOL, 17, x25, 5, 5, 2, attrs_k5_pad2, 2, &t);
    const float wantmp[25] = {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                              25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25};
    assert_int_equal(optest_compare_f32(t.out[0].data, wantmp, 25, 0, 0), -1);
    idx = t.out[1].data;
    for (int i = 0; i < 25; i++) assert_int_equal(idx[i], (int64_t)wantmp[i] - 1);
    optest_end(&t);
    /* averagepool_2d_dilations */
    run_2d(IR_OP_AVERAGEPOOL, 19, ramp16, 4, 4, 1, attrs_k2_dil2_ceil, 3, &t);
    assert_int_equal(optest_compare_f32(t.out[0].data, (float[]){6, 7, 10, 11}, 4, 0, 0), -1);
    optest_end(&t);
    /* maxpool_2d_precomputed_same_upper */
    run_2d(IR_OP_MAXPOOL, 17, x25, 5, 5, 1, attrs_k3_same_upper, 3, &t);
    assert_int_equal(
        optest_compare_f32(t.out[0].data, (float[]){7, 9, 10, 17, 19, 20, 22, 24, 25}, 9, 0, 0),
        -1);
    optest_end(&t);
}

/* ---- randomised against a naive pooling ------------------------------------------------------ */

typedef struct pool_cfg {
    int nsp, auto_pad; /* 0 NOTSET, 1 SAME_UPPER, 2 SAME_LOWER, 3 VALID */
    int64_t N, C, in[3], k[3], s[3], d[3], pads[6];
    bool ceil, cip, col_major, dil_attr;
} pool_cfg;

static const char *const auto_pad_names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

/* Output size and begin/end pads of dim d, from the ONNX doc formulas. */
static void pool_dim(const pool_cfg *c, int d, int64_t *out, int64_t *pb, int64_t *pe) {
    int64_t ek = (c->k[d] - 1) * c->d[d] + 1, in = c->in[d], s = c->s[d];
    *pb = *pe = 0;
    if (c->auto_pad == 1 || c->auto_pad == 2) {
        *out = (in - 1) / s + 1;
        int64_t total = (*out - 1) * s + ek - in;
        if (total < 0) total = 0;
        *pb = c->auto_pad == 1 ? total / 2 : total - total / 2;
        *pe = total - *pb;
    } else if (c->auto_pad == 3) {
        *out = (in - ek) / s + 1;
    } else {
        *pb = c->pads[d];
        *pe = c->pads[c->nsp + d];
        int64_t span = in + *pb + *pe - ek;
        *out = c->ceil ? (span + s - 1) / s + 1 : span / s + 1;
        if (c->ceil && (*out - 1) * s >= in + *pb) (*out)--;
    }
}

/* Naive pooling: for every output walk every tap of the window; a tap is data when it lies in
 * the input, counts for count_include_pad when it lies in input + declared pads. */
static void naive_pool(const pool_cfg *c, bool max, const double *x, double *y, int64_t *idx,
                       int64_t *ydims) {
    int nsp = c->nsp;
    int64_t pb[3], pe[3], xd[5] = {c->N, c->C};
    ydims[0] = c->N;
    ydims[1] = c->C;
    for (int d = 0; d < nsp; d++) {
        pool_dim(c, d, &ydims[d + 2], &pb[d], &pe[d]);
        xd[d + 2] = c->in[d];
    }
    size_t ny = numel(ydims, nsp + 2), nk = numel(c->k, nsp), plane = numel(c->in, nsp);
    for (size_t i = 0; i < ny; i++) {
        int64_t yi[5];
        unravel(i, ydims, nsp + 2, yi);
        double best = -INFINITY, sum = 0;
        int64_t best_i = -1, real = 0, counted = 0;
        for (size_t kk = 0; kk < nk; kk++) {
            int64_t ki[3];
            unravel(kk, c->k, nsp, ki);
            bool data = true, padded = true;
            int64_t rowmaj = 0, colmaj = 0, colstride = 1;
            for (int d = 0; d < nsp; d++) {
                int64_t p = yi[d + 2] * c->s[d] - pb[d] + ki[d] * c->d[d];
                data = data && p >= 0 && p < c->in[d];
                padded = padded && p >= -pb[d] && p < c->in[d] + pe[d];
                rowmaj = rowmaj * c->in[d] + p;
                colmaj += p * colstride;
                colstride *= c->in[d];
            }
            if (padded) counted++;
            if (!data) continue;
            real++;
            double v = x[(size_t)(yi[0] * c->C + yi[1]) * plane + (size_t)rowmaj];
            sum += v;
            if (v > best) {
                best = v;
                best_i = (yi[0] * c->C + yi[1]) * (int64_t)plane + (c->col_major ? colmaj : rowmaj);
            }
        }
        y[i] = max ? best : sum / (double)(c->cip ? counted : real);
        if (idx) idx[i] = best_i;
    }
    (void)xd;
}

static pool_cfg random_pool(bool max) {
    pool_cfg c;
    memset(&c, 0, sizeof c);
    c.nsp = 1 + (int)rnd(3);
    c.N = 1 + rnd(2);
    c.C = 1 + rnd(3);
    c.auto_pad = rnd(3) == 0 ? (int)rnd(4) : 0;
    c.ceil = c.auto_pad == 0 && rnd(2);
    c.cip = !max && rnd(2);
    c.col_major = max && rnd(2);
    c.dil_attr = rnd(2);
    for (int d = 0; d < c.nsp; d++) {
        c.k[d] = 1 + rnd(3);
        c.s[d] = 1 + rnd(3);
        c.d[d] = c.dil_attr ? 1 + rnd(2) : 1;
        /* SAME with dilation is where ONNX Runtime and the spec disagree; stay on common ground */
        if (c.auto_pad == 1 || c.auto_pad == 2) c.d[d] = 1;
        c.in[d] = (c.k[d] - 1) * c.d[d] + 1 + rnd(5);
        c.pads[d] = rnd((uint32_t)c.k[d]);
        c.pads[c.nsp + d] = rnd((uint32_t)c.k[d]);
    }
    return c;
}

static void check_pool(const pool_cfg *c, bool max, anvil_dtype dt, core_pool *pool) {
    int rank = c->nsp + 2;
    int64_t xd[5] = {c->N, c->C};
    for (int d = 0; d < c->nsp; d++) xd[d + 2] = c->in[d];
    size_t nx = numel(xd, rank), es = anvil_dtype_size(dt);
    double *x = calloc(nx ? nx : 1, sizeof *x), *want = malloc(8192 * sizeof *want);
    int64_t *widx = malloc(8192 * sizeof *widx), yd[5];
    void *xt = malloc(nx * es);
    for (size_t i = 0; i < nx; i++) {
        double v = dt == ANVIL_DTYPE_UINT8  ? rnd(256)
                   : dt == ANVIL_DTYPE_INT8 ? (double)rnd(256) - 128
                                            : (double)rnd(2001) / 1000.0 - 1.0;
        core_store_f64(dt, xt, i, v);
        x[i] = core_load_f64(dt, xt, i);
    }
    naive_pool(c, max, x, want, widx, yd);
    size_t ny = numel(yd, rank);
    assert_true(ny <= 8192);
    bool with_idx = max && (dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT64);
    optest t;
    optest_begin_opset(&t, max ? IR_OP_MAXPOOL : IR_OP_AVERAGEPOOL, 1, with_idx ? 2 : 1, 7, 19);
    int a = 0;
    optest_attr_ints(&t, a++, "kernel_shape", c->k, (size_t)c->nsp);
    optest_attr_ints(&t, a++, "strides", c->s, (size_t)c->nsp);
    optest_attr_string(&t, a++, "auto_pad", auto_pad_names[c->auto_pad]);
    if (c->dil_attr) optest_attr_ints(&t, a++, "dilations", c->d, (size_t)c->nsp);
    if (c->auto_pad == 0) {
        optest_attr_ints(&t, a++, "pads", c->pads, 2 * (size_t)c->nsp);
        optest_attr_int(&t, a++, "ceil_mode", c->ceil);
    }
    if (max)
        optest_attr_int(&t, a++, "storage_order", c->col_major);
    else
        optest_attr_int(&t, a++, "count_include_pad", c->cip);
    optest_node(&t)->n_attrs = a;
    optest_input(&t, 0, dt, rank, xd, xt, false);
    anvil_status s = optest_run(&t);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    assert_int_equal(s, ANVIL_OK);
    for (int d = 0; d < rank; d++) assert_int_equal(t.out[0].dims[d], yd[d]);
    double tol = dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16 ? 1e-2
                 : dt == ANVIL_DTYPE_FLOAT32                             ? 1e-6
                 : dt == ANVIL_DTYPE_FLOAT64                             ? 1e-12
                                                                         : 0;
    for (size_t i = 0; i < ny; i++) {
        double got = core_load_f64(dt, t.out[0].data, i);
        /* equal (incl. -inf for a window of padding only) or both NaN, else within tolerance */
        bool ok = got == want[i] || (isnan(got) && isnan(want[i])) ||
                  fabs(got - want[i]) <= tol * (1 + fabs(want[i]));
        if (!ok) fprintf(stderr, "elem %zu: got %.9g want %.9g\n", i, got, want[i]);
        assert_true(ok);
        if (with_idx) assert_int_equal(((int64_t *)t.out[1].data)[i], widx[i]);
    }
    if (pool) {
        size_t bytes = ny * es;
        void *serial = malloc(bytes);
        memcpy(serial, t.out[0].data, bytes);
        memset(t.out[0].data, 0, bytes);
        op_ctx ctx = {.pool = pool};
        const op_tensor *ins[1] = {&t.in[0]};
        op_tensor *outs[2] = {&t.out[0], with_idx ? &t.out[1] : NULL};
        assert_int_equal(
            op_get(optest_node(&t)->op)->run(optest_node(&t), ins, 1, outs, with_idx ? 2 : 1, &ctx),
            ANVIL_OK);
        assert_memory_equal(serial, t.out[0].data, bytes);
        free(serial);
    }
    optest_end(&t);
    free(x);
    free(want);
    free(widx);
    free(xt);
}

static void test_maxpool_random(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 200; it++) {
        pool_cfg c = random_pool(true);
        static const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64,
                                          ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16,
                                          ANVIL_DTYPE_INT8,    ANVIL_DTYPE_UINT8};
        check_pool(&c, true, it < 100 ? ANVIL_DTYPE_FLOAT32 : dts[it % 6],
                   it % 10 == 0 ? pool : NULL);
    }
    core_pool_free(pool);
}

static void test_averagepool_random(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 200; it++) {
        pool_cfg c = random_pool(false);
        static const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_FLOAT64,
                                          ANVIL_DTYPE_FLOAT16, ANVIL_DTYPE_BFLOAT16};
        check_pool(&c, false, it < 100 ? ANVIL_DTYPE_FLOAT32 : dts[it % 4],
                   it % 10 == 0 ? pool : NULL);
    }
    core_pool_free(pool);
}

/* ---- GlobalAveragePool ---------------------------------------------------------------------- */

static void test_globalaveragepool(void **state) {
    (void)state;
    /* rank 3, 4 and 5, and a DOUBLE input */
    float x[2 * 3 * 4];
    for (int i = 0; i < 24; i++) x[i] = (float)(i * i % 7) - 2.5f;
    const int64_t shapes[3][5] = {{2, 3, 4}, {2, 3, 2, 2}, {2, 3, 1, 2, 2}};
    for (int r = 3; r <= 5; r++) {
        optest t;
        optest_begin(&t, IR_OP_GLOBALAVERAGEPOOL, 1, 1, 0);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, r, shapes[r - 3], x, false);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].rank, r);
        for (int d = 2; d < r; d++) assert_int_equal(t.out[0].dims[d], 1);
        for (int p = 0; p < 6; p++) {
            double s = 0;
            for (int i = 0; i < 4; i++) s += x[p * 4 + i];
            assert_true(fabs(((float *)t.out[0].data)[p] - s / 4) < 1e-6);
        }
        optest_end(&t);
    }
    double xd[6] = {1, 2, 3, 4, 5, 7};
    optest t;
    optest_begin(&t, IR_OP_GLOBALAVERAGEPOOL, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 3, (int64_t[]){1, 2, 3}, xd, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(((double *)t.out[0].data)[0] == 2.0);
    assert_true(fabs(((double *)t.out[0].data)[1] - 16.0 / 3) < 1e-15);
    optest_end(&t);
    /* errors: rank 2, integer input */
    optest_begin(&t, IR_OP_GLOBALAVERAGEPOOL, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 2");
    optest_end(&t);
    optest_begin(&t, IR_OP_GLOBALAVERAGEPOOL, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){2, 3, 1}, x, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
}

/* ---- inference and errors ----------------------------------------------------------------------
 */

static void test_pool_infer_symbolic(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_MAXPOOL, 1, 2, 2);
    optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){2, 2}, 2);
    optest_attr_ints(&t, 1, "strides", (int64_t[]){2, 2}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, NULL, false);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in[1], out[2];
    memset(in, 0, sizeof in);
    in[0].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&in[0].shape, 4, (int64_t[]){IR_DIM_UNKNOWN, 8, 7, IR_DIM_UNKNOWN});
    in[0].shape.sym[0] = 3;
    assert_int_equal(op_get(IR_OP_MAXPOOL)->infer(t.g, optest_node(&t), in, 1, out, 2), ANVIL_OK);
    assert_int_equal(out[0].shape.sym[0], 3);
    assert_int_equal(out[0].shape.d[1], 8);
    assert_int_equal(out[0].shape.d[2], 3);
    assert_int_equal(out[0].shape.d[3], IR_DIM_UNKNOWN);
    assert_int_equal(out[1].dtype, ANVIL_DTYPE_INT64);
    assert_int_equal(out[1].shape.d[2], 3);
    /* unknown rank: the kernel fixes it */
    ir_shape_unknown(&in[0].shape);
    assert_int_equal(op_get(IR_OP_MAXPOOL)->infer(t.g, optest_node(&t), in, 1, out, 2), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 4);
    optest_end(&t);
}

static void pool_error(ir_op op, int opset, int n_out, void (*attrs)(optest *), int n_attrs,
                       anvil_dtype dt, int rank, const int64_t *dims, anvil_status want,
                       const char *msg) {
    static float buf[4096];
    optest t;
    optest_begin_opset(&t, op, 1, n_out, n_attrs, opset);
    if (attrs) attrs(&t);
    optest_input(&t, 0, dt, rank, dims, buf, false);
    expect_status(&t, want, msg);
    optest_end(&t);
}

static void a_k2(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){2, 2}, 2);
}
static void a_k2_dil(optest *t) {
    a_k2(t);
    optest_attr_ints(t, 1, "dilations", (int64_t[]){2, 2}, 2);
}
static void a_k2_ceil2(optest *t) {
    a_k2(t);
    optest_attr_int(t, 1, "ceil_mode", 2);
}
static void a_k2_ceil(optest *t) {
    a_k2(t);
    optest_attr_int(t, 1, "ceil_mode", 1);
}
static void a_k2_so2(optest *t) {
    a_k2(t);
    optest_attr_int(t, 1, "storage_order", 2);
}
static void a_k2_cip3(optest *t) {
    a_k2(t);
    optest_attr_int(t, 1, "count_include_pad", 3);
}
static void a_k0(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){2, 0}, 2);
}
static void a_k9(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){9, 2}, 2);
}
static void a_strides_only(optest *t) {
    optest_attr_ints(t, 0, "strides", (int64_t[]){2, 2}, 2);
}

static void test_pool_errors(void **state) {
    (void)state;
    const int64_t x4[4] = {1, 2, 5, 5};
    pool_error(IR_OP_MAXPOOL, 17, 1, a_strides_only, 1, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'kernel_shape' is missing");
    pool_error(IR_OP_MAXPOOL, 17, 1, a_k0, 1, ANVIL_DTYPE_FLOAT32, 4, x4, ANVIL_ERR_INVALID_MODEL,
               "'kernel_shape'[1] is 0");
    pool_error(IR_OP_MAXPOOL, 17, 1, a_k9, 1, ANVIL_DTYPE_FLOAT32, 4, x4, ANVIL_ERR_SHAPE,
               "spatial dim 0 is too small");
    pool_error(IR_OP_MAXPOOL, 17, 1, a_k2, 1, ANVIL_DTYPE_FLOAT32, 5, (int64_t[]){1, 2, 5, 5, 5},
               ANVIL_ERR_SHAPE, "X must have rank 4");
    pool_error(IR_OP_MAXPOOL, 17, 1, a_k2, 1, ANVIL_DTYPE_INT32, 4, x4, ANVIL_ERR_UNSUPPORTED,
               "INT32");
    pool_error(IR_OP_AVERAGEPOOL, 17, 1, a_k2, 1, ANVIL_DTYPE_UINT8, 4, x4, ANVIL_ERR_UNSUPPORTED,
               "UINT8");
    pool_error(IR_OP_MAXPOOL, 17, 1, a_k2_ceil2, 2, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'ceil_mode' is 2");
    pool_error(IR_OP_MAXPOOL, 17, 1, a_k2_so2, 2, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'storage_order' is 2");
    pool_error(IR_OP_AVERAGEPOOL, 17, 1, a_k2_cip3, 2, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'count_include_pad' is 3");
    /* opset-dependent attributes and outputs */
    pool_error(IR_OP_AVERAGEPOOL, 18, 1, a_k2_dil, 2, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'dilations' does not exist at opset 18");
    pool_error(IR_OP_MAXPOOL, 9, 1, a_k2_dil, 2, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'dilations' does not exist at opset 9");
    pool_error(IR_OP_MAXPOOL, 9, 1, a_k2_ceil, 2, ANVIL_DTYPE_FLOAT32, 4, x4,
               ANVIL_ERR_INVALID_MODEL, "'ceil_mode' does not exist at opset 9");
    pool_error(IR_OP_MAXPOOL, 7, 2, a_k2, 1, ANVIL_DTYPE_FLOAT32, 4, x4, ANVIL_ERR_INVALID_MODEL,
               "Indices output exists from opset 8");
    pool_error(IR_OP_MAXPOOL, 17, 3, a_k2, 1, ANVIL_DTYPE_FLOAT32, 4, x4, ANVIL_ERR_INVALID_MODEL,
               "outputs");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_doc_examples),   cmocka_unit_test(test_maxpool_random),
        cmocka_unit_test(test_averagepool_random),  cmocka_unit_test(test_globalaveragepool),
        cmocka_unit_test(test_pool_infer_symbolic), cmocka_unit_test(test_pool_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
