/* The rnn family's variants (src/kernels/cpu/rnn) against the reference kernels: LSTM, GRU and
 * RNN in every direction, batch 1 and 3, 1 and 7 steps, hidden sizes 1, 16 and 33 (around the
 * padding of the gate blocks), each optional input and output present or not, layout 1, clip,
 * GRU's linear_before_reset 0 and 1, sequence_lens (constant or not, equal to T or shorter),
 * zero steps, sizes that take anvil's GEMM for the products, and what the variants must
 * decline; and the accuracy of the gates' own tanh and sigmoid, in ulps. Each check asserts how
 * many variants ran, so a variant that silently stops applying fails the test. */
#include "kernels/cpu/rnn/rnn.h"
#include "kernels/kernels.h"
#include "optest.h"
#include "runtime/runtime.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static const char *op_prefix(ir_op op) {
    return op == IR_OP_LSTM ? "lstm_f32" : op == IR_OP_GRU ? "gru_f32" : "rnn_f32";
}

/* How many of op's rnn variants run here: the portable one always, the AVX-512 and AVX2 ones
 * where the CPU (or ANVIL_ISA) has the ISA. */
static int expected(ir_op op) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%s_avx512", op_prefix(op));
    snprintf(b, sizeof b, "%s_avx2", op_prefix(op));
    assert_non_null(kern_find(op, op_prefix(op)));
    assert_non_null(kern_find(op, a));
    assert_non_null(kern_find(op, b));
    return 1 + (optest_have_avx512() ? 1 : 0) + (optest_have_avx2() ? 1 : 0);
}

typedef struct rcase {
    ir_op op;
    int dir; /* 0 forward, 1 reverse, 2 bidirectional */
    int64_t B, T, I, H;
    bool bias, h0, c0, peep;
    int seq; /* 0 absent, 1 all T, 2 shorter ones */
    bool seq_known;
    int n_out; /* 1..3 (LSTM), 1..2 otherwise */
    bool layout;
    float clip;      /* 0: none */
    int lbr;         /* GRU */
    bool w_known;    /* false: W is not constant (the variants decline) */
    const char *act; /* non-NULL: an 'activations' list of this one name (RNN) */
    int input_forget;
} rcase;

/* The node's tensors, owned here (optest borrows them). */
typedef struct rdata {
    float *x, *w, *r, *b, *h0, *c0, *p;
    int32_t lens[64];
} rdata;

static int gates(ir_op op) {
    return op == IR_OP_LSTM ? 4 : op == IR_OP_GRU ? 3 : 1;
}

static void build(optest *t, rdata *d, const rcase *c, unsigned seed) {
    const bool lstm = c->op == IR_OP_LSTM;
    const int64_t D = c->dir == 2 ? 2 : 1, G = gates(c->op), B = c->B, T = c->T, I = c->I, H = c->H;
    int n_attrs = 2 + (c->layout ? 1 : 0) + (c->clip > 0 ? 1 : 0) + (c->op == IR_OP_GRU ? 1 : 0) +
                  (c->act ? 1 : 0) + (lstm ? 1 : 0);
    optest_begin_opset(t, c->op, lstm ? 8 : 6, c->n_out, n_attrs, 22);
    int k = 0;
    static const char *const dirs[] = {"forward", "reverse", "bidirectional"};
    optest_attr_int(t, k++, "hidden_size", H);
    optest_attr_string(t, k++, "direction", dirs[c->dir]);
    if (c->layout) optest_attr_int(t, k++, "layout", 1);
    if (c->clip > 0) optest_attr_float(t, k++, "clip", c->clip);
    if (c->op == IR_OP_GRU) optest_attr_int(t, k++, "linear_before_reset", c->lbr);
    if (lstm) optest_attr_int(t, k++, "input_forget", c->input_forget);
    if (c->act) {
        ir_attr *a = optest_attr(t, k++, "activations", IR_ATTR_STRINGS);
        static const char *names[2];
        names[0] = names[1] = c->act;
        a->strings = names;
        a->n = (size_t)D;
    }
    memset(d, 0, sizeof *d);
    d->x = optest_random_f32((size_t)(T * B * I), seed, -1.5f, 1.5f);
    d->w = optest_random_f32((size_t)(D * G * H * I), seed + 1, -0.6f, 0.6f);
    d->r = optest_random_f32((size_t)(D * G * H * H), seed + 2, -0.6f, 0.6f);
    d->b = optest_random_f32((size_t)(D * 2 * G * H), seed + 3, -0.5f, 0.5f);
    d->h0 = optest_random_f32((size_t)(D * B * H), seed + 4, -1, 1);
    d->c0 = optest_random_f32((size_t)(D * B * H), seed + 5, -1, 1);
    d->p = optest_random_f32((size_t)(D * 3 * H), seed + 6, -0.5f, 0.5f);
    int64_t xd[3] = {T, B, I}, sd[3] = {D, B, H};
    if (c->layout) {
        xd[0] = B;
        xd[1] = T;
        sd[0] = B;
        sd[1] = D;
    }
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 3, xd, d->x, false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){D, G * H, I}, d->w, c->w_known);
    optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){D, G * H, H}, d->r, true);
    if (c->bias) optest_input(t, 3, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){D, 2 * G * H}, d->b, true);
    if (c->seq) {
        for (int64_t b = 0; b < B; b++)
            d->lens[b] = c->seq == 1 ? (int32_t)T : (int32_t)((T * (b + 1) + 1) / (B + 1));
        optest_input(t, 4, ANVIL_DTYPE_INT32, 1, (int64_t[]){B}, d->lens, c->seq_known);
    }
    if (c->h0) optest_input(t, 5, ANVIL_DTYPE_FLOAT32, 3, sd, d->h0, false);
    if (lstm && c->c0) optest_input(t, 6, ANVIL_DTYPE_FLOAT32, 3, sd, d->c0, false);
    if (lstm && c->peep)
        optest_input(t, 7, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){D, 3 * H}, d->p, true);
}

static void release_data(rdata *d) {
    free(d->x);
    free(d->w);
    free(d->r);
    free(d->b);
    free(d->h0);
    free(d->c0);
    free(d->p);
}

static void describe(const rcase *c) {
    fprintf(stderr,
            "case: %s dir %d B %lld T %lld I %lld H %lld bias %d h0 %d c0 %d P %d seq %d/%d "
            "outs %d layout %d clip %g lbr %d\n",
            ir_op_name(c->op), c->dir, (long long)c->B, (long long)c->T, (long long)c->I,
            (long long)c->H, c->bias, c->h0, c->c0, c->peep, c->seq, c->seq_known, c->n_out,
            c->layout, (double)c->clip, c->lbr);
}

/* Every variant against the reference; `want` of them must have run. */
static void check_case(const rcase *c, int want, unsigned seed) {
    optest t;
    rdata d;
    build(&t, &d, c, seed);
    int n = optest_check_variants(&t, 2e-4f, 2e-5f);
    if (n != want) {
        describe(c);
        fprintf(stderr, "checked %d variants, want %d\n", n, want);
    }
    assert_int_equal(n, want);
    optest_end(&t);
    release_data(&d);
}

static int max_outs(ir_op op) {
    return op == IR_OP_LSTM ? 3 : 2;
}

/* The grid: each op and direction, B 1/3, T 1/7, H 1/16/33; the optional inputs and outputs
 * cycle through their combinations along the grid, so that every one of them is met with and
 * without the others. */
static void test_grid(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_LSTM, IR_OP_GRU, IR_OP_RNN};
    static const int64_t bs[] = {1, 3}, ts[] = {1, 7}, hs[] = {1, 16, 33};
    unsigned idx = 0;
    for (int o = 0; o < 3; o++)
        for (int dir = 0; dir < 3; dir++)
            for (int bi = 0; bi < 2; bi++)
                for (int ti = 0; ti < 2; ti++)
                    for (int hi = 0; hi < 3; hi++, idx++) {
                        rcase c = {.op = ops[o],
                                   .dir = dir,
                                   .B = bs[bi],
                                   .T = ts[ti],
                                   .I = 5,
                                   .H = hs[hi]};
                        c.bias = idx % 2 == 0;
                        c.h0 = idx / 2 % 2 == 0;
                        c.c0 = idx / 4 % 2 == 0;
                        c.peep = idx / 3 % 2 == 0;
                        c.seq = (int)(idx % 3);
                        c.seq_known = idx / 5 % 2 == 0;
                        c.n_out = 1 + (int)(idx / 7 % (unsigned)max_outs(c.op));
                        c.lbr = (int)(idx / 2 % 2);
                        c.w_known = true;
                        check_case(&c, expected(c.op), idx);
                    }
}

/* All inputs and outputs at once, with layout 1 and clip, per op and direction. */
static void test_layout_clip(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_LSTM, IR_OP_GRU, IR_OP_RNN};
    unsigned seed = 100;
    for (int o = 0; o < 3; o++)
        for (int dir = 0; dir < 3; dir++)
            for (int layout = 0; layout < 2; layout++)
                for (int lbr = 0; lbr < 2; lbr++) {
                    rcase c = {.op = ops[o], .dir = dir, .B = 3, .T = 7, .I = 4, .H = 17};
                    c.bias = c.h0 = c.c0 = c.peep = c.w_known = true;
                    c.seq = 2;
                    c.seq_known = false;
                    c.n_out = max_outs(c.op);
                    c.layout = layout;
                    c.clip = 0.7f;
                    c.lbr = lbr;
                    check_case(&c, expected(c.op), seed++);
                }
}

/* Rows and batches past the small kernels' limits: the products run on anvil's GEMM (packed
 * W and R), with several batch slices per direction on 2 and 3 threads. */
static void test_gemm_path(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_LSTM, IR_OP_GRU, IR_OP_RNN};
    unsigned seed = 200;
    for (int o = 0; o < 3; o++)
        for (int dir = 0; dir < 3; dir += 2)
            for (int lbr = 0; lbr < 2; lbr++) {
                rcase c = {.op = ops[o], .dir = dir, .B = 40, .T = 5, .I = 24, .H = 40};
                c.bias = c.h0 = c.c0 = c.peep = c.w_known = true;
                c.seq = lbr ? 2 : 1;
                c.seq_known = true;
                c.n_out = max_outs(c.op);
                c.lbr = lbr;
                check_case(&c, expected(c.op), seed++);
            }
}

/* One direction of a batch of 1 or 2 on 2 and 3 threads, with a step's product above
 * STEP_MIN_WORK (rnn_variants.c): the hidden units split across threads, one fork-join per step
 * (h double-buffered), with hidden sizes that are not whole vectors, shorter sequences (their
 * rows keep their state while others go on), layout 1, clip and peepholes. */
static void test_stepwise(void **state) {
    (void)state;
    const rcase cases[] = {
        {.op = IR_OP_LSTM, .dir = 0, .B = 1, .T = 4, .I = 8, .H = 260, .seq = 1},
        {.op = IR_OP_LSTM,
         .dir = 1,
         .B = 2,
         .T = 5,
         .I = 6,
         .H = 260,
         .seq = 2,
         .layout = true,
         .clip = 0.9f},
        {.op = IR_OP_GRU, .dir = 0, .B = 1, .T = 4, .I = 5, .H = 300, .lbr = 1},
        {.op = IR_OP_GRU, .dir = 1, .B = 2, .T = 3, .I = 5, .H = 300, .lbr = 1, .seq = 2},
        {.op = IR_OP_RNN, .dir = 1, .B = 2, .T = 4, .I = 7, .H = 520, .seq = 2},
    };
    unsigned seed = 250;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rcase c = cases[i];
        c.bias = c.h0 = c.c0 = c.peep = c.w_known = true;
        c.seq_known = false;
        c.n_out = max_outs(c.op);
        check_case(&c, expected(c.op), seed++);
    }
}

/* No steps: Y is empty and Y_h / Y_c are the initial state. */
static void test_zero_steps(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_LSTM, IR_OP_GRU, IR_OP_RNN};
    for (int o = 0; o < 3; o++)
        for (int h0 = 0; h0 < 2; h0++) {
            rcase c = {.op = ops[o], .dir = 2, .B = 2, .T = 0, .I = 3, .H = 5};
            c.bias = c.w_known = c.c0 = true;
            c.h0 = h0;
            c.n_out = max_outs(c.op);
            check_case(&c, expected(c.op), 300 + (unsigned)o);
        }
}

/* Y absent (IR_NONE) while Y_h and Y_c are wanted: the runtime passes NULL for it. */
static void test_no_y(void **state) {
    (void)state;
    static const ir_op ops[] = {IR_OP_LSTM, IR_OP_GRU, IR_OP_RNN};
    for (int o = 0; o < 3; o++) {
        rcase c = {.op = ops[o], .dir = 2, .B = 3, .T = 6, .I = 4, .H = 20};
        c.bias = c.h0 = c.c0 = c.peep = c.w_known = true;
        c.n_out = max_outs(c.op);
        optest t;
        rdata d;
        build(&t, &d, &c, 400);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        optest_node(&t)->outputs[0] = IR_NONE;
        op_tinfo in[OPTEST_MAX_IO];
        optest_input_info(&t, in);
        kern_node kn = {optest_node(&t), in, t.n_in, t.out_info, t.n_out, 2, NULL, NULL, NULL};
        size_t count;
        const kern_variant *const *list = kern_variants(c.op, &count);
        int ran = 0;
        for (size_t vi = 1; vi < count; vi++) {
            if (!kern_applies(list[vi], &kn, core_hw_get())) continue;
            rt_variant_exec *e;
            assert_int_equal(rt_variant_exec_create(list[vi], &kn, NULL, &e), ANVIL_OK);
            const op_tensor *ins[OPTEST_MAX_IO];
            op_tensor got[3], *outs[3] = {NULL, NULL, NULL};
            for (int i = 0; i < t.n_in; i++) ins[i] = t.in_set[i] ? &t.in[i] : NULL;
            for (int i = 1; i < t.n_out; i++) {
                got[i] = t.out[i];
                size_t n = op_tensor_numel(&t.out[i]);
                got[i].data = malloc(n * sizeof(float));
                memset(got[i].data, 0xff, n * sizeof(float));
                outs[i] = &got[i];
            }
            assert_int_equal(rt_variant_exec_run(e, optest_node(&t), ins, t.n_in, outs, t.n_out),
                             ANVIL_OK);
            rt_variant_exec_free(e);
            for (int i = 1; i < t.n_out; i++) {
                assert_true(optest_compare_f32(got[i].data, t.out[i].data,
                                               op_tensor_numel(&t.out[i]), 2e-4f, 2e-5f) < 0);
                free(got[i].data);
            }
            ran++;
        }
        assert_int_equal(ran, expected(c.op));
        optest_end(&t);
        release_data(&d);
    }
}

/* A sequence length past T: the same error as the reference, from every variant. */
static void test_bad_lens(void **state) {
    (void)state;
    rcase c = {.op = IR_OP_GRU, .dir = 0, .B = 2, .T = 3, .I = 3, .H = 4};
    c.w_known = true;
    c.seq = 1;
    c.n_out = 2;
    optest t;
    rdata d;
    build(&t, &d, &c, 500);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    d.lens[1] = 4;
    size_t count;
    const kern_variant *const *list = kern_variants(c.op, &count);
    int ran = 0;
    for (size_t vi = 1; vi < count; vi++) {
        op_tensor got[2];
        for (int i = 0; i < 2; i++) {
            got[i] = t.out[i];
            got[i].data = calloc(op_tensor_numel(&t.out[i]), sizeof(float));
        }
        anvil_status s = optest_run_variant(&t, list[vi], 1, got);
        if (s != ANVIL_ERR_UNSUPPORTED) {
            assert_int_equal(s, ANVIL_ERR_RUNTIME);
            assert_non_null(strstr(anvil_last_error(), "sequence_lens[1] is 4"));
            ran++;
        }
        for (int i = 0; i < 2; i++) free(got[i].data);
    }
    assert_int_equal(ran, expected(c.op));
    optest_end(&t);
    release_data(&d);
}

/* What stays with the reference: W not constant, other activations, input_forget. The
 * default activations named explicitly are accepted. */
static void test_declines(void **state) {
    (void)state;
    rcase c = {.op = IR_OP_LSTM, .dir = 0, .B = 2, .T = 3, .I = 3, .H = 4};
    c.n_out = 3;
    check_case(&c, 0, 600); /* W not constant */
    c.w_known = true;
    c.input_forget = 1;
    check_case(&c, 0, 601);
    c.input_forget = 0;
    check_case(&c, expected(c.op), 602);
    rcase r = {.op = IR_OP_RNN, .dir = 2, .B = 2, .T = 3, .I = 3, .H = 4};
    r.w_known = true;
    r.n_out = 2;
    r.act = "Relu";
    check_case(&r, 0, 603);
    r.act = "Tanh";
    check_case(&r, expected(r.op), 604);
}

/* |got - want| in units of the float spacing at want (denormal tails count from FLT_MIN). */
static double ulps(float got, double want) {
    double w = fabs(want) < 1.17549435e-38 ? 1.17549435e-38 : fabs(want);
    return fabs((double)got - want) / (w * 1.1920929e-7);
}

/* The ISA tables' tanh (RNN's gate, rnn_row with no recurrence) and sigmoid (GRU's z and r,
 * gru_zr_row with h = 1) against double precision over [-20, 20], around 0 and the tanh
 * branch point, and NaN. */
static void test_gate_accuracy(void **state) {
    (void)state;
    enum { N = 4096 };
    static float x[3 * N], zero[3 * N], h[N], ones[N], rh[N];
    for (int i = 0; i < N; i++) {
        x[i] = -20.0f + 40.0f * (float)i / (float)(N - 1);
        if (i % 8 == 1) x[i] = ldexpf(1.0f + (float)i / N, -(i % 40)) * (i % 3 ? 1 : -1);
        if (i % 8 == 3) x[i] = 0.625f + (float)(i % 64 - 32) * 1e-7f;
        ones[i] = 1.0f;
    }
    x[5] = NAN;
    const rnn_isa *isas[2] = {optest_have_avx512() ? &rnn_isa_avx512 : NULL,
                              optest_have_avx2() ? &rnn_isa_avx2 : NULL};
    for (int k = 0; k < 2; k++) {
        if (!isas[k]) continue;
        isas[k]->rnn_row(N, x, zero, h, INFINITY);
        double worst_t = 0, worst_s = 0;
        for (int i = 0; i < N; i++) {
            if (i == 5) {
                assert_true(isnan(h[i]));
                continue;
            }
            double u = ulps(h[i], tanh((double)x[i]));
            worst_t = u > worst_t ? u : worst_t;
        }
        static float xw[2 * N];
        memcpy(xw, x, N * sizeof *x);
        memcpy(xw + N, x, N * sizeof *x);
        isas[k]->gru_zr_row(N, xw, zero, ones, rh, INFINITY);
        for (int i = 0; i < N; i++) {
            if (i == 5) {
                assert_true(isnan(xw[i]) && isnan(rh[i]));
                continue;
            }
            double want = 1.0 / (1.0 + exp(-(double)x[i]));
            double u = ulps(xw[i], want), v = ulps(rh[i], want);
            u = u > v ? u : v;
            worst_s = u > worst_s ? u : worst_s;
        }
        if (worst_t > 4 || worst_s > 4)
            fprintf(stderr, "isa %d: tanh %.2f ulp, sigmoid %.2f ulp\n", k, worst_t, worst_s);
        assert_true(worst_t <= 4);
        assert_true(worst_s <= 4);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid),          cmocka_unit_test(test_layout_clip),
        cmocka_unit_test(test_gemm_path),     cmocka_unit_test(test_stepwise),
        cmocka_unit_test(test_zero_steps),    cmocka_unit_test(test_no_y),
        cmocka_unit_test(test_bad_lens),      cmocka_unit_test(test_declines),
        cmocka_unit_test(test_gate_accuracy),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
