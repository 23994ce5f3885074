/* RNN, GRU and LSTM reference kernels: forward runs against step loops written here from the ONNX
 * equations (RNN with Tanh, GRU with and without linear_before_reset, LSTM with peepholes), the
 * relations between variants (a bidirectional run's second direction equals a reverse run, layout 1
 * equals layout 0 transposed, steps past sequence_lens give zeros and keep the state), DOUBLE and
 * FLOAT16, and the errors bad models must produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state % 2001) / 1000.0f - 1.0f;
}

static void fill(float *p, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
}

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static void attr_strings(optest *t, int k, const char *name, const char *const *v, size_t n) {
    ir_attr *a = optest_attr(t, k, name, IR_ATTR_STRINGS);
    a->strings = v;
    a->n = n;
}

enum { S = 4, B = 2, I = 3, H = 3 };

static double sigm(double v) {
    return 1.0 / (1.0 + exp(-v));
}

/* sum_k m[row, k] * v[k] */
static double dot(const float *m, int row, int cols, const double *v) {
    double s = 0;
    for (int k = 0; k < cols; k++) s += (double)m[row * cols + k] * v[k];
    return s;
}

/* Forward recurrence of one direction written straight from the ONNX equations; kind 0 RNN, 1 GRU
 * (lbr: linear_before_reset), 2 LSTM (peepholes p may be NULL). y: S x B x H. */
static void ref_forward(int kind, bool lbr, const float *x, const float *w, const float *r,
                        const float *bias, const float *h0, const float *c0, const float *p,
                        double *y, double *yh, double *yc) {
    int G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
    for (int b = 0; b < B; b++) {
        double h[H], c[H], xv[I], nh[H], nc[H];
        for (int k = 0; k < H; k++) {
            h[k] = h0[b * H + k];
            c[k] = c0 ? c0[b * H + k] : 0;
        }
        for (int t = 0; t < S; t++) {
            for (int i = 0; i < I; i++) xv[i] = x[(t * B + b) * I + i];
            for (int k = 0; k < H; k++) {
                double g[4], rr[4];
                for (int q = 0; q < G; q++) {
                    g[q] = dot(w, q * H + k, I, xv) + bias[q * H + k];
                    rr[q] = dot(r, q * H + k, H, h) + bias[G * H + q * H + k];
                }
                if (kind == 0) {
                    nh[k] = tanh(g[0] + rr[0]);
                } else if (kind == 1) {
                    double z = sigm(g[0] + rr[0]), rs = sigm(g[1] + rr[1]), cand;
                    if (lbr) {
                        cand = tanh(g[2] + rs * rr[2]);
                    } else {
                        /* (r . h) R_h^T: needs every reset gate, recomputed here per k */
                        double s = 0;
                        for (int j = 0; j < H; j++) {
                            double rj = sigm(dot(w, H + j, I, xv) + bias[H + j] +
                                             dot(r, H + j, H, h) + bias[G * H + H + j]);
                            s += (double)r[(2 * H + k) * H + j] * rj * h[j];
                        }
                        cand = tanh(g[2] + s + bias[G * H + 2 * H + k]);
                    }
                    nh[k] = (1 - z) * cand + z * h[k];
                } else {
                    double pi = p ? p[k] : 0, po = p ? p[H + k] : 0, pf = p ? p[2 * H + k] : 0;
                    double ig = sigm(g[0] + rr[0] + pi * c[k]);
                    double fg = sigm(g[2] + rr[2] + pf * c[k]);
                    double cc = tanh(g[3] + rr[3]);
                    nc[k] = fg * c[k] + ig * cc;
                    double og = sigm(g[1] + rr[1] + po * nc[k]);
                    nh[k] = og * tanh(nc[k]);
                }
            }
            for (int k = 0; k < H; k++) {
                h[k] = nh[k];
                if (kind == 2) c[k] = nc[k];
                y[(t * B + b) * H + k] = h[k];
            }
        }
        for (int k = 0; k < H; k++) {
            yh[b * H + k] = h[k];
            if (yc) yc[b * H + k] = c[k];
        }
    }
}

static const ir_op kind_ops[3] = {IR_OP_RNN, IR_OP_GRU, IR_OP_LSTM};

/* Runs one forward node and compares Y, Y_h (and Y_c) with ref_forward. */
static void check_forward(int kind, bool lbr, bool peep) {
    int G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
    float x[S * B * I], w[4 * H * I], r[4 * H * H], bias[8 * H], h0[B * H], c0[B * H], p[3 * H];
    fill(x, S * B * I, 1);
    fill(w, (size_t)(G * H * I), 0.6f);
    fill(r, (size_t)(G * H * H), 0.6f);
    fill(bias, (size_t)(2 * G * H), 0.3f);
    fill(h0, B * H, 0.5f);
    fill(c0, B * H, 0.5f);
    fill(p, 3 * H, 0.5f);
    int n_in = kind == 2 ? (peep ? 8 : 7) : 6;
    int n_out = kind == 2 ? 3 : 2;
    optest t;
    optest_begin_opset(&t, kind_ops[kind], n_in, n_out, kind == 1 ? 2 : 1, 14);
    optest_attr_int(&t, 0, "hidden_size", H);
    if (kind == 1) optest_attr_int(&t, 1, "linear_before_reset", lbr);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, B, I}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, G * H, I}, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, G * H, H}, r, true);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 2 * G * H}, bias, true);
    optest_input(&t, 5, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, B, H}, h0, false);
    if (kind == 2) optest_input(&t, 6, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, B, H}, c0, false);
    if (peep) optest_input(&t, 7, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 3 * H}, p, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 4);
    assert_int_equal(t.out[0].dims[0], S);
    assert_int_equal(t.out[0].dims[1], 1);
    double y[S * B * H], yh[B * H], yc[B * H];
    ref_forward(kind, lbr, x, w, r, bias, h0, kind == 2 ? c0 : NULL, peep ? p : NULL, y, yh,
                kind == 2 ? yc : NULL);
    float fy[S * B * H], fh[B * H], fc[B * H];
    for (int i = 0; i < S * B * H; i++) fy[i] = (float)y[i];
    for (int i = 0; i < B * H; i++) {
        fh[i] = (float)yh[i];
        fc[i] = (float)yc[i];
    }
    assert_int_equal(optest_compare_f32(t.out[0].data, fy, S * B * H, 1e-5f, 1e-6f), -1);
    assert_int_equal(optest_compare_f32(t.out[1].data, fh, B * H, 1e-5f, 1e-6f), -1);
    if (kind == 2) assert_int_equal(optest_compare_f32(t.out[2].data, fc, B * H, 1e-5f, 1e-6f), -1);
    optest_end(&t);
}

static void test_forward_against_equations(void **state) {
    (void)state;
    check_forward(0, false, false);
    check_forward(1, false, false);
    check_forward(1, true, false);
    check_forward(2, false, false);
    check_forward(2, false, true);
}

/* Direction 1 of a bidirectional node equals a reverse node with the second half of the weights;
 * layout 1 equals layout 0 with batch and sequence swapped. */
static void test_directions_and_layout(void **state) {
    (void)state;
    const int G = 4;
    float x[S * B * I], w[2 * G * H * I], r[2 * G * H * H], bias[2 * 2 * G * H];
    fill(x, sizeof x / sizeof x[0], 1);
    fill(w, sizeof w / sizeof w[0], 0.6f);
    fill(r, sizeof r / sizeof r[0], 0.6f);
    fill(bias, sizeof bias / sizeof bias[0], 0.3f);
    optest bi, rev, bf;
    optest_begin_opset(&bi, IR_OP_LSTM, 4, 3, 1, 14);
    optest_attr_string(&bi, 0, "direction", "bidirectional");
    optest_input(&bi, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, B, I}, x, false);
    optest_input(&bi, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, G * H, I}, w, true);
    optest_input(&bi, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, G * H, H}, r, true);
    optest_input(&bi, 3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2 * G * H}, bias, true);
    assert_int_equal(optest_run(&bi), ANVIL_OK);
    optest_begin_opset(&rev, IR_OP_LSTM, 4, 3, 1, 14);
    optest_attr_string(&rev, 0, "direction", "reverse");
    optest_input(&rev, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, B, I}, x, false);
    optest_input(&rev, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, G * H, I}, w + G * H * I, true);
    optest_input(&rev, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, G * H, H}, r + G * H * H, true);
    optest_input(&rev, 3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 2 * G * H}, bias + 2 * G * H,
                 true);
    assert_int_equal(optest_run(&rev), ANVIL_OK);
    const float *yb = bi.out[0].data, *yr = rev.out[0].data;
    for (int t = 0; t < S; t++)
        for (int i = 0; i < B * H; i++)
            assert_true(yb[(t * 2 + 1) * B * H + i] == yr[t * B * H + i]);
    const float *hb = bi.out[1].data, *hr = rev.out[1].data, *cb = bi.out[2].data,
                *cr = rev.out[2].data;
    for (int i = 0; i < B * H; i++) {
        assert_true(hb[B * H + i] == hr[i]);
        assert_true(cb[B * H + i] == cr[i]);
    }
    /* layout 1: X is B x S x I, Y is B x S x D x H, Y_h is B x D x H */
    float xt[B * S * I];
    for (int t = 0; t < S; t++)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < I; i++) xt[(b * S + t) * I + i] = x[(t * B + b) * I + i];
    optest_begin_opset(&bf, IR_OP_LSTM, 4, 3, 2, 14);
    optest_attr_string(&bf, 0, "direction", "bidirectional");
    optest_attr_int(&bf, 1, "layout", 1);
    optest_input(&bf, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){B, S, I}, xt, false);
    optest_input(&bf, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, G * H, I}, w, true);
    optest_input(&bf, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, G * H, H}, r, true);
    optest_input(&bf, 3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 2 * G * H}, bias, true);
    assert_int_equal(optest_run(&bf), ANVIL_OK);
    assert_int_equal(bf.out[0].dims[0], B);
    assert_int_equal(bf.out[0].dims[1], S);
    const float *yl = bf.out[0].data, *hl = bf.out[1].data;
    for (int t = 0; t < S; t++)
        for (int d = 0; d < 2; d++)
            for (int b = 0; b < B; b++)
                for (int k = 0; k < H; k++)
                    assert_true(yl[((b * S + t) * 2 + d) * H + k] ==
                                yb[((t * 2 + d) * B + b) * H + k]);
    for (int d = 0; d < 2; d++)
        for (int b = 0; b < B; b++)
            for (int k = 0; k < H; k++)
                assert_true(hl[(b * 2 + d) * H + k] == hb[(d * B + b) * H + k]);
    optest_end(&bi);
    optest_end(&rev);
    optest_end(&bf);
}

/* sequence_lens: a batch entry of length L gives zeros in Y from step L on, and its Y_h is the
 * state after step L - 1 (equal to a run over only its first L steps). */
static void test_sequence_lens(void **state) {
    (void)state;
    float x[S * B * I], w[3 * H * I], r[3 * H * H];
    fill(x, sizeof x / sizeof x[0], 1);
    fill(w, sizeof w / sizeof w[0], 0.6f);
    fill(r, sizeof r / sizeof r[0], 0.6f);
    const int32_t lens[B] = {S, 2};
    optest t, s2;
    optest_begin_opset(&t, IR_OP_GRU, 5, 2, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, B, I}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3 * H, I}, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3 * H, H}, r, true);
    optest_input(&t, 4, ANVIL_DTYPE_INT32, 1, (int64_t[]){B}, lens, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    optest_begin_opset(&s2, IR_OP_GRU, 3, 2, 0, 14);
    optest_input(&s2, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, B, I}, x, false);
    optest_input(&s2, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3 * H, I}, w, true);
    optest_input(&s2, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3 * H, H}, r, true);
    assert_int_equal(optest_run(&s2), ANVIL_OK);
    const float *y = t.out[0].data, *yh = t.out[1].data, *h2 = s2.out[1].data;
    for (int k = 0; k < H; k++) {
        for (int tt = 2; tt < S; tt++) assert_true(y[(tt * B + 1) * H + k] == 0.0f);
        assert_true(yh[H + k] == h2[H + k]);
        assert_true(y[(1 * B + 1) * H + k] == h2[H + k]);
        assert_true(y[(3 * B + 0) * H + k] == yh[k]);
    }
    optest_end(&t);
    optest_end(&s2);
    /* a length beyond the sequence is a runtime error */
    const int32_t bad[B] = {S + 1, 1};
    optest_begin_opset(&t, IR_OP_GRU, 5, 2, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, B, I}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3 * H, I}, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 3 * H, H}, r, true);
    optest_input(&t, 4, ANVIL_DTYPE_INT32, 1, (int64_t[]){B}, bad, false);
    expect_status(&t, ANVIL_ERR_RUNTIME, "sequence_lens[0]");
    optest_end(&t);
}

/* Activations with alpha / beta: RNN with Affine(alpha, beta) is a linear recurrence. */
static void test_activation_params(void **state) {
    (void)state;
    const float x[2] = {1.0f, 2.0f}, w[1] = {0.5f}, r[1] = {0.25f};
    const char *const acts[1] = {"Affine"};
    optest t;
    optest_begin_opset(&t, IR_OP_RNN, 3, 2, 3, 14);
    attr_strings(&t, 0, "activations", acts, 1);
    optest_attr_floats(&t, 1, "activation_alpha", (float[]){2.0f}, 1);
    optest_attr_floats(&t, 2, "activation_beta", (float[]){1.0f}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 1, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, w, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 1}, r, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    /* h1 = 2 * (0.5 * 1) + 1 = 2; h2 = 2 * (0.5 * 2 + 0.25 * 2) + 1 = 4 */
    const float *y = t.out[0].data;
    assert_true(y[0] == 2.0f && y[1] == 4.0f);
    optest_end(&t);
    /* DOUBLE and FLOAT16 go through the same path */
    const double xd[2] = {1.0, 2.0}, wd[1] = {0.5}, rd[1] = {0.25};
    optest_begin_opset(&t, IR_OP_RNN, 3, 1, 3, 14);
    attr_strings(&t, 0, "activations", acts, 1);
    optest_attr_floats(&t, 1, "activation_alpha", (float[]){2.0f}, 1);
    optest_attr_floats(&t, 2, "activation_beta", (float[]){1.0f}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 3, (int64_t[]){2, 1, 1}, xd, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 3, (int64_t[]){1, 1, 1}, wd, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT64, 3, (int64_t[]){1, 1, 1}, rd, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(((double *)t.out[0].data)[1] == 4.0);
    optest_end(&t);
    const uint16_t xh[2] = {core_f32_to_f16(1.0f), core_f32_to_f16(2.0f)},
                   wh[1] = {core_f32_to_f16(0.5f)}, rh[1] = {core_f32_to_f16(0.25f)};
    optest_begin_opset(&t, IR_OP_RNN, 3, 1, 3, 14);
    attr_strings(&t, 0, "activations", acts, 1);
    optest_attr_floats(&t, 1, "activation_alpha", (float[]){2.0f}, 1);
    optest_attr_floats(&t, 2, "activation_beta", (float[]){1.0f}, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT16, 3, (int64_t[]){2, 1, 1}, xh, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT16, 3, (int64_t[]){1, 1, 1}, wh, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT16, 3, (int64_t[]){1, 1, 1}, rh, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_true(core_f16_to_f32(((uint16_t *)t.out[0].data)[1]) == 4.0f);
    optest_end(&t);
}

static void setup_rnn(optest *t, ir_op op, int n_attrs, int opset, int64_t wd1) {
    static float buf[256];
    optest_begin_opset(t, op, 3, 2, n_attrs, opset);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, B, I}, buf, false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, wd1, I}, buf, true);
    optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, wd1, H}, buf, true);
}

static void test_errors(void **state) {
    (void)state;
    optest t;
    setup_rnn(&t, IR_OP_RNN, 1, 14, H);
    optest_attr_string(&t, 0, "direction", "sideways");
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "sideways");
    optest_end(&t);
    const char *const two[2] = {"Tanh", "Tanh"};
    setup_rnn(&t, IR_OP_LSTM, 1, 14, 4 * H);
    attr_strings(&t, 0, "activations", two, 2);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "activations");
    optest_end(&t);
    const char *const odd[1] = {"Swish"};
    setup_rnn(&t, IR_OP_RNN, 1, 14, H);
    attr_strings(&t, 0, "activations", odd, 1);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "Swish");
    optest_end(&t);
    setup_rnn(&t, IR_OP_GRU, 1, 13, 3 * H);
    optest_attr_int(&t, 0, "layout", 1);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "layout");
    optest_end(&t);
    setup_rnn(&t, IR_OP_RNN, 1, 14, H);
    optest_attr_float(&t, 0, "clip", -1.0f);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "clip");
    optest_end(&t);
    setup_rnn(&t, IR_OP_RNN, 1, 14, H);
    optest_attr_int(&t, 0, "linear_before_reset", 1);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "linear_before_reset");
    optest_end(&t);
    /* W with the wrong number of gate rows for the hidden size */
    setup_rnn(&t, IR_OP_GRU, 1, 14, 2 * H);
    optest_attr_int(&t, 0, "hidden_size", H);
    expect_status(&t, ANVIL_ERR_SHAPE, "gates x hidden_size");
    optest_end(&t);
    /* integer X */
    static int32_t ibuf[64];
    optest_begin_opset(&t, IR_OP_RNN, 3, 1, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 3, (int64_t[]){S, B, I}, ibuf, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT32, 3, (int64_t[]){1, H, I}, ibuf, true);
    optest_input(&t, 2, ANVIL_DTYPE_INT32, 3, (int64_t[]){1, H, H}, ibuf, true);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
    /* X of rank 2 */
    static float fbuf[64];
    optest_begin_opset(&t, IR_OP_RNN, 3, 1, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){S, I}, fbuf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, H, I}, fbuf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, H, H}, fbuf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 3");
    optest_end(&t);
    /* bidirectional with one direction of weights */
    setup_rnn(&t, IR_OP_RNN, 1, 14, H);
    optest_attr_string(&t, 0, "direction", "bidirectional");
    expect_status(&t, ANVIL_ERR_SHAPE, "directions");
    optest_end(&t);
    /* opset 1 semantics are refused */
    setup_rnn(&t, IR_OP_RNN, 0, 6, H);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "opset 7");
    optest_end(&t);
    /* zero batch runs and gives empty outputs */
    optest_begin_opset(&t, IR_OP_LSTM, 3, 3, 0, 14);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){S, 0, I}, NULL, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4 * H, I}, fbuf, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4 * H, H}, fbuf, true);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[1].dims[1], 0);
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_against_equations),
        cmocka_unit_test(test_directions_and_layout),
        cmocka_unit_test(test_sequence_lens),
        cmocka_unit_test(test_activation_params),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
