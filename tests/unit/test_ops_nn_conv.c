/* Conv and ConvTranspose reference kernels: the ONNX operator-doc examples (hand-checked values),
 * randomised 1-D/2-D/3-D configurations (groups incl. depthwise, strides, dilations, explicit
 * pads, every auto_pad, output_padding, output_shape) against naive formulas written here — a
 * convolution that visits every (output, tap) pair with an explicit bounds test, and a transposed
 * convolution that scatters into the uncropped full result and then crops by the pads — FLOAT /
 * DOUBLE / FLOAT16, multi-threaded runs, symbolic shapes, zero-size batches and the errors bad
 * models must produce. */
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

static float rnd_float(void) {
    return (float)rnd(2001) / 1000.0f - 1.0f;
}

static size_t numel(const int64_t *dims, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* Row-major multi-index of lin within dims. */
static void unravel(size_t lin, const int64_t *dims, int rank, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = (int64_t)(lin % (size_t)dims[d]);
        lin /= (size_t)dims[d];
    }
}

static size_t ravel(const int64_t *idx, const int64_t *dims, int rank) {
    size_t lin = 0;
    for (int d = 0; d < rank; d++) lin = lin * (size_t)dims[d] + (size_t)idx[d];
    return lin;
}

/* A convolution problem. auto_pad: 0 NOTSET, 1 SAME_UPPER, 2 SAME_LOWER, 3 VALID. */
typedef struct conv_cfg {
    int nsp;
    int64_t N, C, M, group;
    int64_t in[3], k[3], s[3], d[3], pads[6], out_pad[3], out_shape[3];
    int auto_pad;
    bool bias, kernel_attr, out_pad_attr, out_shape_attr;
} conv_cfg;

static const char *const auto_pad_names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

/* Adds the window attributes of c to t (which has room for 7 attributes). */
static int add_window_attrs(optest *t, const conv_cfg *c, bool transpose) {
    int a = 0;
    optest_attr_int(t, a++, "group", c->group);
    optest_attr_ints(t, a++, "strides", c->s, (size_t)c->nsp);
    optest_attr_ints(t, a++, "dilations", c->d, (size_t)c->nsp);
    optest_attr_string(t, a++, "auto_pad", auto_pad_names[c->auto_pad]);
    if (c->auto_pad == 0) optest_attr_ints(t, a++, "pads", c->pads, 2 * (size_t)c->nsp);
    if (c->kernel_attr) optest_attr_ints(t, a++, "kernel_shape", c->k, (size_t)c->nsp);
    if (transpose && c->out_pad_attr)
        optest_attr_ints(t, a++, "output_padding", c->out_pad, (size_t)c->nsp);
    if (transpose && c->out_shape_attr)
        optest_attr_ints(t, a++, "output_shape", c->out_shape, (size_t)c->nsp);
    return a;
}

/* Output size and begin pad of one dim of a convolution, straight from the ONNX doc formulas. */
static void conv_dim(const conv_cfg *c, int d, int64_t *out, int64_t *pb) {
    int64_t ek = (c->k[d] - 1) * c->d[d] + 1, in = c->in[d], s = c->s[d];
    if (c->auto_pad == 1 || c->auto_pad == 2) {
        *out = (in + s - 1) / s;
        int64_t total = (*out - 1) * s + ek - in;
        if (total < 0) total = 0;
        *pb = c->auto_pad == 1 ? total / 2 : total - total / 2;
    } else if (c->auto_pad == 3) {
        *out = (in - ek) / s + 1;
        *pb = 0;
    } else {
        *out = (in + c->pads[d] + c->pads[c->nsp + d] - ek) / s + 1;
        *pb = c->pads[d];
    }
}

/* Naive convolution in double: every output, every tap, explicit bounds test. */
static void naive_conv(const conv_cfg *c, const float *x, const float *w, const float *b, double *y,
                       int64_t *ydims) {
    int nsp = c->nsp;
    int64_t pb[3], xs[5] = {c->N, c->C}, ws[5] = {c->M, c->C / c->group};
    ydims[0] = c->N;
    ydims[1] = c->M;
    for (int d = 0; d < nsp; d++) {
        conv_dim(c, d, &ydims[d + 2], &pb[d]);
        xs[d + 2] = c->in[d];
        ws[d + 2] = c->k[d];
    }
    size_t ny = numel(ydims, nsp + 2), nk = numel(c->k, nsp);
    int64_t cg = c->C / c->group, mg = c->M / c->group;
    for (size_t i = 0; i < ny; i++) {
        int64_t yi[5];
        unravel(i, ydims, nsp + 2, yi);
        double acc = b ? b[yi[1]] : 0;
        int64_t g = yi[1] / mg;
        for (int64_t ci = 0; ci < cg; ci++)
            for (size_t kk = 0; kk < nk; kk++) {
                int64_t ki[3], xi[5] = {yi[0], g * cg + ci}, wi[5] = {yi[1], ci};
                unravel(kk, c->k, nsp, ki);
                bool inside = true;
                for (int d = 0; d < nsp; d++) {
                    xi[d + 2] = yi[d + 2] * c->s[d] - pb[d] + ki[d] * c->d[d];
                    wi[d + 2] = ki[d];
                    inside = inside && xi[d + 2] >= 0 && xi[d + 2] < c->in[d];
                }
                if (inside)
                    acc += (double)x[ravel(xi, xs, nsp + 2)] * (double)w[ravel(wi, ws, nsp + 2)];
            }
        y[i] = acc;
    }
}

/* Full (uncropped) length of a transposed convolution along d, and its begin pad. */
static void convt_dim(const conv_cfg *c, int d, int64_t *out, int64_t *full, int64_t *pb) {
    int64_t ek = (c->k[d] - 1) * c->d[d] + 1, op = c->out_pad_attr ? c->out_pad[d] : 0;
    *full = c->s[d] * (c->in[d] - 1) + op + ek;
    if (c->out_shape_attr || c->auto_pad == 1 || c->auto_pad == 2) {
        *out = c->out_shape_attr ? c->out_shape[d] : c->in[d] * c->s[d];
        int64_t total = *full - *out;
        /* ONNX: SAME_UPPER puts the odd unit at the end, everything else at the start; an output
         * larger than the full result simply extends at the end */
        *pb = total <= 0 ? 0 : c->auto_pad == 1 ? total / 2 : total - total / 2;
    } else {
        *pb = c->auto_pad == 0 ? c->pads[d] : 0;
        int64_t pe = c->auto_pad == 0 ? c->pads[c->nsp + d] : 0;
        *out = *full - *pb - pe;
    }
}

/* Naive transposed convolution: scatter every input through every tap into the full result,
 * then crop by the begin pad. W is C x M/group x k. */
static void naive_convt(const conv_cfg *c, const float *x, const float *w, const float *b,
                        double *y, int64_t *ydims) {
    int nsp = c->nsp;
    int64_t pb[3], full[5] = {c->N, c->M}, xs[5] = {c->N, c->C}, ws[5] = {c->C, c->M / c->group};
    ydims[0] = c->N;
    ydims[1] = c->M;
    for (int d = 0; d < nsp; d++) {
        convt_dim(c, d, &ydims[d + 2], &full[d + 2], &pb[d]);
        xs[d + 2] = c->in[d];
        ws[d + 2] = c->k[d];
    }
    size_t nfull = numel(full, nsp + 2), nx = numel(xs, nsp + 2), nk = numel(c->k, nsp);
    double *f = calloc(nfull, sizeof *f);
    int64_t cg = c->C / c->group, mg = c->M / c->group;
    for (size_t i = 0; i < nx; i++) {
        int64_t xi[5];
        unravel(i, xs, nsp + 2, xi);
        int64_t g = xi[1] / cg;
        for (int64_t mm = 0; mm < mg; mm++)
            for (size_t kk = 0; kk < nk; kk++) {
                int64_t ki[3], fi[5] = {xi[0], g * mg + mm}, wi[5] = {xi[1], mm};
                unravel(kk, c->k, nsp, ki);
                for (int d = 0; d < nsp; d++) {
                    fi[d + 2] = xi[d + 2] * c->s[d] + ki[d] * c->d[d];
                    wi[d + 2] = ki[d];
                }
                f[ravel(fi, full, nsp + 2)] += (double)x[i] * (double)w[ravel(wi, ws, nsp + 2)];
            }
    }
    size_t ny = numel(ydims, nsp + 2);
    for (size_t i = 0; i < ny; i++) {
        int64_t yi[5];
        unravel(i, ydims, nsp + 2, yi);
        bool inside = true;
        for (int d = 0; d < nsp; d++) {
            yi[d + 2] += pb[d];
            inside = inside && yi[d + 2] >= 0 && yi[d + 2] < full[d + 2];
        }
        y[i] = (b ? b[yi[1]] : 0) + (inside ? f[ravel(yi, full, nsp + 2)] : 0);
    }
    free(f);
}

/* A random valid convolution problem. */
static conv_cfg random_cfg(bool transpose) {
    conv_cfg c;
    memset(&c, 0, sizeof c);
    c.nsp = 1 + (int)rnd(3);
    c.N = 1 + rnd(2);
    c.group = 1 + rnd(3);
    c.C = c.group * (1 + rnd(3));
    c.M = c.group * (1 + rnd(3));
    if (rnd(5) == 0) c.group = c.C = c.M = 2 + rnd(3); /* depthwise */
    c.auto_pad = rnd(3) == 0 ? (int)rnd(4) : 0;
    c.bias = rnd(2);
    c.kernel_attr = rnd(2);
    for (int d = 0; d < c.nsp; d++) {
        c.k[d] = 1 + rnd(3);
        c.s[d] = 1 + rnd(3);
        c.d[d] = 1 + rnd(2);
        c.in[d] = (c.k[d] - 1) * c.d[d] + 1 + rnd(5);
        c.pads[d] = rnd(3);
        c.pads[c.nsp + d] = rnd(3);
        if (transpose) {
            c.in[d] = 1 + rnd(4);
            int64_t lim = c.s[d] > c.d[d] ? c.s[d] : c.d[d];
            c.out_pad[d] = rnd((uint32_t)lim);
        }
    }
    if (transpose) {
        c.out_pad_attr = c.auto_pad == 0 && rnd(2);
        /* explicit pads must leave a positive output */
        for (int d = 0; d < c.nsp; d++) {
            int64_t full = c.s[d] * (c.in[d] - 1) + (c.k[d] - 1) * c.d[d] + 1;
            while (c.pads[d] + c.pads[c.nsp + d] >= full) c.pads[d] = c.pads[c.nsp + d] = 0;
        }
        c.out_shape_attr = c.auto_pad != 3 && rnd(4) == 0;
        for (int d = 0; d < c.nsp; d++)
            c.out_shape[d] = c.s[d] * (c.in[d] - 1) + (c.k[d] - 1) * c.d[d] + 1 + rnd(3) - 1;
        for (int d = 0; d < c.nsp; d++)
            if (c.out_shape[d] < 1) c.out_shape[d] = 1;
    }
    return c;
}

/* Runs c through the kernel in dtype dt (inputs rounded to that type first) and compares with
 * the naive result. Also reruns multi-threaded and requires bit-identical output. */
static void check_cfg(const conv_cfg *c, bool transpose, anvil_dtype dt, core_pool *pool) {
    int rank = c->nsp + 2;
    int64_t xd[5] = {c->N, c->C},
            wd[5] = {transpose ? c->C : c->M, transpose ? c->M / c->group : c->C / c->group};
    for (int d = 0; d < c->nsp; d++) {
        xd[d + 2] = c->in[d];
        wd[d + 2] = c->k[d];
    }
    size_t nx = numel(xd, rank), nw = numel(wd, rank), nb = (size_t)c->M;
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = malloc(nb * sizeof *b);
    size_t es = anvil_dtype_size(dt);
    void *xt = malloc(nx * es), *wt = malloc(nw * es), *bt = malloc(nb * es);
    for (size_t i = 0; i < nx; i++) x[i] = rnd_float();
    for (size_t i = 0; i < nw; i++) w[i] = rnd_float();
    for (size_t i = 0; i < nb; i++) b[i] = rnd_float();
    /* the reference sees exactly the values the kernel sees */
    for (size_t i = 0; i < nx; i++) {
        core_store_f64(dt, xt, i, x[i]);
        x[i] = (float)core_load_f64(dt, xt, i);
    }
    for (size_t i = 0; i < nw; i++) {
        core_store_f64(dt, wt, i, w[i]);
        w[i] = (float)core_load_f64(dt, wt, i);
    }
    for (size_t i = 0; i < nb; i++) {
        core_store_f64(dt, bt, i, b[i]);
        b[i] = (float)core_load_f64(dt, bt, i);
    }
    int64_t yd[5];
    double *want = malloc(4096 * 8 * sizeof *want);
    if (transpose)
        naive_convt(c, x, w, c->bias ? b : NULL, want, yd);
    else
        naive_conv(c, x, w, c->bias ? b : NULL, want, yd);
    size_t ny = numel(yd, rank);
    assert_true(ny <= 4096 * 8);

    optest t;
    optest_begin(&t, transpose ? IR_OP_CONVTRANSPOSE : IR_OP_CONV, c->bias ? 3 : 2, 1, 8);
    int na = add_window_attrs(&t, c, transpose);
    optest_node(&t)->n_attrs = na;
    optest_input(&t, 0, dt, rank, xd, xt, false);
    optest_input(&t, 1, dt, rank, wd, wt, true);
    if (c->bias) optest_input(&t, 2, dt, 1, (int64_t[]){c->M}, bt, true);
    anvil_status s = optest_run(&t);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    assert_int_equal(s, ANVIL_OK);
    assert_int_equal(t.out[0].rank, rank);
    for (int d = 0; d < rank; d++) assert_int_equal(t.out[0].dims[d], yd[d]);
    double tol = dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16 ? 2e-2
                 : dt == ANVIL_DTYPE_FLOAT32                             ? 1e-5
                                                                         : 1e-12;
    for (size_t i = 0; i < ny; i++) {
        double got = core_load_f64(dt, t.out[0].data, i);
        if (fabs(got - want[i]) > tol * (1 + fabs(want[i])))
            fprintf(stderr, "elem %zu: got %.9g want %.9g\n", i, got, want[i]);
        assert_true(fabs(got - want[i]) <= tol * (1 + fabs(want[i])));
    }
    if (pool) {
        size_t bytes = ny * es;
        void *serial = malloc(bytes ? bytes : 1);
        memcpy(serial, t.out[0].data, bytes);
        memset(t.out[0].data, 0, bytes);
        op_ctx ctx = {.pool = pool};
        const op_tensor *ins[3] = {&t.in[0], &t.in[1], c->bias ? &t.in[2] : NULL};
        op_tensor *outs[1] = {&t.out[0]};
        assert_int_equal(
            op_get(optest_node(&t)->op)->run(optest_node(&t), ins, c->bias ? 3 : 2, outs, 1, &ctx),
            ANVIL_OK);
        assert_memory_equal(serial, t.out[0].data, bytes);
        free(serial);
    }
    optest_end(&t);
    free(x);
    free(w);
    free(b);
    free(xt);
    free(wt);
    free(bt);
    free(want);
}

/* ---- Conv ---------------------------------------------------------------------------------- */

/* The Conv examples of the ONNX operator documentation: a 5x5 ramp with a 3x3 kernel of ones. */
static void test_conv_doc_examples(void **state) {
    (void)state;
    float x[25], w[9];
    for (int i = 0; i < 25; i++) x[i] = (float)i;
    for (int i = 0; i < 9; i++) w[i] = 1;
    static const float padded[25] = {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                     117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
    static const float unpadded[9] = {54, 63, 72, 99, 108, 117, 144, 153, 162};
    static const float strided[9] = {12, 27, 24, 63, 108, 81, 72, 117, 84};
    static const float asym[6] = {21, 33, 99, 117, 111, 123}; /* pads 1,0,1,0, stride 2 */
    struct {
        int64_t pads[4], strides[2];
        const float *want;
        int64_t oh, ow;
    } cases[] = {{{1, 1, 1, 1}, {1, 1}, padded, 5, 5},
                 {{0, 0, 0, 0}, {1, 1}, unpadded, 3, 3},
                 {{1, 1, 1, 1}, {2, 2}, strided, 3, 3},
                 {{1, 0, 1, 0}, {2, 2}, asym, 3, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        optest t;
        optest_begin(&t, IR_OP_CONV, 2, 1, 3);
        optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){3, 3}, 2);
        optest_attr_ints(&t, 1, "pads", cases[c].pads, 4);
        optest_attr_ints(&t, 2, "strides", cases[c].strides, 2);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 5, 5}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, w, true);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dims[2], cases[c].oh);
        assert_int_equal(t.out[0].dims[3], cases[c].ow);
        assert_int_equal(optest_compare_f32(t.out[0].data, cases[c].want,
                                            (size_t)(cases[c].oh * cases[c].ow), 0, 0),
                         -1);
        optest_end(&t);
    }
}

static void test_conv_random(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 150; it++) {
        conv_cfg c = random_cfg(false);
        check_cfg(&c, false, ANVIL_DTYPE_FLOAT32, it % 10 == 0 ? pool : NULL);
    }
    core_pool_free(pool);
}

static void test_conv_dtypes(void **state) {
    (void)state;
    for (int it = 0; it < 20; it++) {
        conv_cfg c = random_cfg(false);
        check_cfg(&c, false, ANVIL_DTYPE_FLOAT64, NULL);
        check_cfg(&c, false, ANVIL_DTYPE_FLOAT16, NULL);
        check_cfg(&c, false, ANVIL_DTYPE_BFLOAT16, NULL);
    }
}

/* A 1x1 convolution is a per-position matrix product; the kernel shape comes from W. */
static void test_conv_pointwise_and_zero_batch(void **state) {
    (void)state;
    float x[2 * 3] = {1, 2, 3, 4, 5, 6}; /* N=1, C=2, L=3 */
    float w[2] = {10, 100};
    float b[1] = {0.5f};
    optest t;
    optest_begin(&t, IR_OP_CONV, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 1}, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){1}, b, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    const float want[3] = {410.5f, 520.5f, 630.5f};
    assert_int_equal(optest_compare_f32(t.out[0].data, want, 3, 0, 0), -1);
    optest_end(&t);

    /* N = 0: an empty output of the right shape, no kernel work */
    optest_begin(&t, IR_OP_CONV, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){0, 2, 3}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){4, 2, 2}, w, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    assert_int_equal(t.out[0].dims[1], 4);
    assert_int_equal(t.out[0].dims[2], 2);
    optest_end(&t);
}

static void test_conv_infer_symbolic(void **state) {
    (void)state;
    optest t;
    optest_begin(&t, IR_OP_CONV, 2, 1, 2);
    optest_attr_ints(&t, 0, "strides", (int64_t[]){2, 2}, 2);
    optest_attr_string(&t, 1, "auto_pad", "SAME_UPPER");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 9, 8}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){16, 3, 3, 3}, NULL, false);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in[2], out[1];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    in[0].dtype = in[1].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&in[0].shape, 4, (int64_t[]){IR_DIM_UNKNOWN, 3, 9, IR_DIM_UNKNOWN});
    in[0].shape.sym[0] = 0;
    ir_shape_set(&in[1].shape, 4, (int64_t[]){16, 3, 3, 3});
    const op_impl *impl = op_get(IR_OP_CONV);
    assert_int_equal(impl->infer(t.g, optest_node(&t), in, 2, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 4);
    assert_int_equal(out[0].shape.d[0], IR_DIM_UNKNOWN);
    assert_int_equal(out[0].shape.sym[0], 0); /* the batch symbol passes through */
    assert_int_equal(out[0].shape.d[1], 16);
    assert_int_equal(out[0].shape.d[2], 5); /* ceil(9 / 2) */
    assert_int_equal(out[0].shape.d[3], IR_DIM_UNKNOWN);
    /* unknown rank of X: W still fixes the output rank */
    ir_shape_unknown(&in[0].shape);
    assert_int_equal(impl->infer(t.g, optest_node(&t), in, 2, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 4);
    assert_int_equal(out[0].shape.d[1], 16);
    optest_end(&t);
}

static void conv_error_case(int n_attrs, void (*setup)(optest *), const int64_t *xd, int xr,
                            const int64_t *wd, int wr, anvil_dtype dt, anvil_status want,
                            const char *msg) {
    static float buf[4096];
    optest t;
    optest_begin(&t, IR_OP_CONV, 2, 1, n_attrs);
    if (setup) setup(&t);
    optest_input(&t, 0, dt, xr, xd, buf, false);
    optest_input(&t, 1, dt, wr, wd, buf, true);
    expect_status(&t, want, msg);
    optest_end(&t);
}

static void set_group2(optest *t) {
    optest_attr_int(t, 0, "group", 2);
}
static void set_group0(optest *t) {
    optest_attr_int(t, 0, "group", 0);
}
static void set_stride0(optest *t) {
    optest_attr_ints(t, 0, "strides", (int64_t[]){1, 0}, 2);
}
static void set_neg_pad(optest *t) {
    optest_attr_ints(t, 0, "pads", (int64_t[]){0, -1, 0, 0}, 4);
}
static void set_bad_autopad(optest *t) {
    optest_attr_string(t, 0, "auto_pad", "SAME");
}
static void set_kernel_mismatch(optest *t) {
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){3, 2}, 2);
}
static void set_three_strides(optest *t) {
    optest_attr_ints(t, 0, "strides", (int64_t[]){1, 1, 1}, 3);
}
static void set_odd_pads(optest *t) {
    optest_attr_ints(t, 0, "pads", (int64_t[]){1, 1, 1}, 3);
}
static void set_dilation_float(optest *t) {
    optest_attr_float(t, 0, "dilations", 2.0f);
}

static void test_conv_errors(void **state) {
    (void)state;
    const int64_t x4[4] = {1, 4, 5, 5}, w4[4] = {6, 4, 3, 3};
    /* C must equal W.shape[1] * group */
    conv_error_case(1, set_group2, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE,
                    "C must equal W.shape[1] * group");
    /* M not divisible by group */
    conv_error_case(1, set_group2, x4, 4, (int64_t[]){5, 2, 3, 3}, 4, ANVIL_DTYPE_FLOAT32,
                    ANVIL_ERR_SHAPE, "not a multiple of group");
    conv_error_case(1, set_group0, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_INVALID_MODEL,
                    "'group' is 0");
    conv_error_case(1, set_stride0, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_INVALID_MODEL,
                    "'strides'[1] is 0");
    conv_error_case(1, set_neg_pad, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_INVALID_MODEL,
                    "'pads'[1] is -1");
    conv_error_case(1, set_bad_autopad, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_INVALID_MODEL,
                    "'auto_pad' is 'SAME'");
    conv_error_case(1, set_kernel_mismatch, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE,
                    "kernel_shape[1] is 2 but W's dim 3 is 3");
    conv_error_case(1, set_three_strides, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE,
                    "describe 3 spatial dims but the input has 2");
    conv_error_case(1, set_odd_pads, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_INVALID_MODEL,
                    "'pads' has 3 values");
    conv_error_case(1, set_dilation_float, x4, 4, w4, 4, ANVIL_DTYPE_FLOAT32,
                    ANVIL_ERR_INVALID_MODEL, "dilations");
    /* the kernel does not fit: output would be 0 */
    conv_error_case(0, NULL, (int64_t[]){1, 4, 2, 5}, 4, w4, 4, ANVIL_DTYPE_FLOAT32,
                    ANVIL_ERR_SHAPE, "spatial dim 0 is too small");
    conv_error_case(0, NULL, x4, 4, w4, 4, ANVIL_DTYPE_INT32, ANVIL_ERR_UNSUPPORTED, "dtype INT32");
    conv_error_case(0, NULL, (int64_t[]){1, 4}, 2, (int64_t[]){6, 4}, 2, ANVIL_DTYPE_FLOAT32,
                    ANVIL_ERR_SHAPE, "rank 2");
    conv_error_case(0, NULL, x4, 4, (int64_t[]){6, 4, 3}, 3, ANVIL_DTYPE_FLOAT32, ANVIL_ERR_SHAPE,
                    "X has rank 4 but W has rank 3");

    /* W and X of different dtypes; B of the wrong length */
    static float buf[512];
    optest t;
    optest_begin(&t, IR_OP_CONV, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, x4, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 4, w4, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "all inputs must share one dtype");
    optest_end(&t);
    optest_begin(&t, IR_OP_CONV, 3, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, x4, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, w4, buf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){5}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "B must be 1-D with 6 values");
    optest_end(&t);
    /* arity */
    optest_begin(&t, IR_OP_CONV, 1, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, x4, buf, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "inputs");
    optest_end(&t);
}

/* ---- ConvTranspose -------------------------------------------------------------------------- */

/* The ConvTranspose examples of the ONNX operator documentation (x: 3x3 ramp, W: ones). */
static void test_convtranspose_doc_examples(void **state) {
    (void)state;
    float x[9], w[18];
    for (int i = 0; i < 9; i++) x[i] = (float)i;
    for (int i = 0; i < 18; i++) w[i] = 1;
    static const float basic[25] = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                    27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
    static const float shaped[80] = {
        0, 0, 1, 1, 3,  2, 2,  0, 0, 0, 1, 1, 3,  2, 2,  0, 0, 0, 1, 1, 3, 2, 2, 0,  3, 3,  7,
        4, 9, 5, 5, 0,  3, 3,  7, 4, 9, 5, 5, 0,  3, 3,  7, 4, 9, 5, 5, 0, 6, 6, 13, 7, 15, 8,
        8, 0, 6, 6, 13, 7, 15, 8, 8, 0, 6, 6, 13, 7, 15, 8, 8, 0, 0, 0, 0, 0, 0, 0,  0, 0};
    static const float padded[21] = {1, 1, 3, 1, 1,  3, 7,  4,  9, 7, 4,
                                     9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
    static const float same[36] = {0, 0, 1, 1, 3, 2, 0, 0, 1,  1,  3,  2,  3, 3, 8,  5, 12, 7,
                                   3, 3, 7, 4, 9, 5, 9, 9, 20, 11, 24, 13, 6, 6, 13, 7, 15, 8};
    struct {
        const char *what;
        int n_attrs;
        const float *want;
        int64_t oh, ow;
    } cases[] = {{"basic", 0, basic, 5, 5},
                 {"output_shape", 2, shaped, 10, 8},
                 {"output_padding", 2, shaped, 10, 8},
                 {"kernel_shape", 4, shaped, 10, 8},
                 {"pads", 2, padded, 7, 3},
                 {"same", 2, same, 6, 6}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        optest t;
        optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, cases[c].n_attrs);
        if (c == 1 || c == 3) {
            optest_attr_ints(&t, 0, "strides", (int64_t[]){3, 2}, 2);
            optest_attr_ints(&t, 1, "output_shape", (int64_t[]){10, 8}, 2);
        }
        if (c == 2) {
            optest_attr_ints(&t, 0, "strides", (int64_t[]){3, 2}, 2);
            optest_attr_ints(&t, 1, "output_padding", (int64_t[]){1, 1}, 2);
        }
        if (c == 3) {
            optest_attr_ints(&t, 2, "kernel_shape", (int64_t[]){3, 3}, 2);
            optest_attr_ints(&t, 3, "output_padding", (int64_t[]){1, 1}, 2);
        }
        if (c == 4) {
            optest_attr_ints(&t, 0, "strides", (int64_t[]){3, 2}, 2);
            optest_attr_ints(&t, 1, "pads", (int64_t[]){1, 2, 1, 2}, 4);
        }
        if (c == 5) {
            optest_attr_ints(&t, 0, "strides", (int64_t[]){2, 2}, 2);
            optest_attr_string(&t, 1, "auto_pad", "SAME_UPPER");
        }
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 3, 3}, w, true);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].dims[1], 2);
        assert_int_equal(t.out[0].dims[2], cases[c].oh);
        assert_int_equal(t.out[0].dims[3], cases[c].ow);
        size_t plane = (size_t)(cases[c].oh * cases[c].ow);
        for (int m = 0; m < 2; m++) /* both output channels see the same ones kernel */
            assert_int_equal(
                optest_compare_f32((float *)t.out[0].data + m * plane, cases[c].want, plane, 0, 0),
                -1);
        optest_end(&t);
    }

    /* dilations (doc example) */
    float xd[9] = {3, 8, 1, 9, 5, 7, 3, 2, 6}, wd[4] = {7, 2, 1, 9};
    static const float dil[25] = {21, 56, 13, 16, 2,  63, 35, 67, 10, 14, 24, 22, 76,
                                  76, 21, 9,  5,  88, 45, 63, 3,  2,  33, 18, 54};
    optest t;
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 1);
    optest_attr_ints(&t, 0, "dilations", (int64_t[]){2, 2}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, xd, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, wd, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, dil, 25, 0, 0), -1);
    optest_end(&t);
}

static void test_convtranspose_random(void **state) {
    (void)state;
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 150; it++) {
        conv_cfg c = random_cfg(true);
        check_cfg(&c, true, ANVIL_DTYPE_FLOAT32, it % 10 == 0 ? pool : NULL);
        if (it % 8 == 0) check_cfg(&c, true, ANVIL_DTYPE_FLOAT64, NULL);
        if (it % 8 == 1) check_cfg(&c, true, ANVIL_DTYPE_FLOAT16, NULL);
    }
    core_pool_free(pool);
}

static void test_convtranspose_errors(void **state) {
    (void)state;
    static float buf[512];
    optest t;
    /* X channels must equal W.shape[0] */
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 4, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 2, 3, 3}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "W.shape[0] is 2");
    optest_end(&t);
    /* channels not divisible by group */
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 1);
    optest_attr_int(&t, 0, "group", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 4, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){3, 2, 3, 3}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "not a multiple of group 2");
    optest_end(&t);
    /* output_padding must stay below stride or dilation */
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 2);
    optest_attr_ints(&t, 0, "strides", (int64_t[]){2, 2}, 2);
    optest_attr_ints(&t, 1, "output_padding", (int64_t[]){2, 0}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 4, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 2, 3, 3}, buf, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "output_padding[0] is 2");
    optest_end(&t);
    /* output_shape of the wrong length */
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 1);
    optest_attr_ints(&t, 0, "output_shape", (int64_t[]){8, 8, 8}, 3);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 4, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 2, 3, 3}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "'output_shape' has 3 values");
    optest_end(&t);
    /* pads that eat the whole output */
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 1);
    optest_attr_ints(&t, 0, "pads", (int64_t[]){3, 0, 3, 0}, 4);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 4, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 2, 3, 3}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "it must be >= 1");
    optest_end(&t);
    /* output_shape alone fixes the spatial dims even when X's are unknown */
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 2);
    optest_attr_ints(&t, 0, "output_shape", (int64_t[]){9, 7}, 2);
    optest_attr_int(&t, 1, "group", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 4, 4}, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 3, 3, 3}, buf, true);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in[2], out[1];
    memset(in, 0, sizeof in);
    in[0].dtype = in[1].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&in[0].shape, 4, (int64_t[]){1, 2, IR_DIM_UNKNOWN, IR_DIM_UNKNOWN});
    ir_shape_set(&in[1].shape, 4, (int64_t[]){2, 3, 3, 3});
    assert_int_equal(op_get(IR_OP_CONVTRANSPOSE)->infer(t.g, optest_node(&t), in, 2, out, 1),
                     ANVIL_OK);
    assert_int_equal(out[0].shape.d[1], 6); /* W.shape[1] * group */
    assert_int_equal(out[0].shape.d[2], 9);
    assert_int_equal(out[0].shape.d[3], 7);
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_doc_examples),
        cmocka_unit_test(test_conv_random),
        cmocka_unit_test(test_conv_dtypes),
        cmocka_unit_test(test_conv_pointwise_and_zero_batch),
        cmocka_unit_test(test_conv_infer_symbolic),
        cmocka_unit_test(test_conv_errors),
        cmocka_unit_test(test_convtranspose_doc_examples),
        cmocka_unit_test(test_convtranspose_random),
        cmocka_unit_test(test_convtranspose_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
