/* The channels-last grouped convs (convnhwc_grouped_avx512 and _avx512bf16,
 * src/kernels/cpu/conv/conv_gcn_avx512*.c) and every other anvil.ConvNhwc variant that takes the
 * node, against the reference through optest_check_variants (1, 2 and 3 threads), in an fp32
 * session and in a bf16 one (X and W held exactly by bf16, so the bf16 kernel must match up to
 * its order of sums; X given in fp32 and stored in bf16): RegNet's groups of 8 on maps 7, 14 and 28
 * wide (interior blocks of every size, border pixels) at strides 1 and 2, groups of 16 and 32
 * output channels, fewer input than output channels per group, a channel count that leaves the last
 * vector half full, 1x3 and 5x5 kernels, asymmetric pads, batch 2, bias, fused activations and a
 * residual. Each case asserts the grouped variant applied where AVX-512 is present, so a rule
 * that silently stops taking it fails; and that it declines what it was not written for. */
#include "kernels/cpu/conv/conv.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static bool avx512(void) {
    const core_hw *hw = core_hw_get();
    return hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512;
}

typedef struct gc_case {
    int64_t n, c, m, group, h, w, kh, kw, sh, sw;
    int64_t pads[4]; /* top, left, bottom, right */
    bool bias;
    ir_act act;
    bool residual;
} gc_case;

static const kern_knobs bf16_session = {.precision = KERN_PREC_BF16};

static bool have_bf16(void) {
    return kern_isa_ok(KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16, core_hw_get());
}

static int64_t out_dim(int64_t x, int64_t k, int64_t s, int64_t pb, int64_t pe) {
    return (x + pb + pe - k) / s + 1;
}

/* x rounded to bf16 in place, so that a bf16 kernel must match fp32's results up to the order of
 * its sums. */
static void exact(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = core_bf16_to_f32(core_f32_to_bf16(x[i]));
}

/* Case c as a one-node anvil.ConvNhwc graph (X, Y and the residual channels-last), W and B
 * known, X and W held exactly by bf16; the buffers go to bufs[0..3] (the caller frees them). */
static void build(optest *t, const gc_case *c, float *bufs[4], ir_fusion *f) {
    const int64_t oh = out_dim(c->h, c->kh, c->sh, c->pads[0], c->pads[2]);
    const int64_t ow = out_dim(c->w, c->kw, c->sw, c->pads[1], c->pads[3]);
    const int64_t cg = c->c / c->group;
    optest_begin(t, IR_OP_CONV_NHWC, c->residual ? 4 : (c->bias ? 3 : 2), 1, 4);
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){c->kh, c->kw}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){c->sh, c->sw}, 2);
    optest_attr_int(t, 2, "group", c->group);
    optest_attr_ints(t, 3, "pads", c->pads, 4);
    bufs[0] = optest_random_f32((size_t)(c->n * c->h * c->w * c->c), 1, -1.0f, 1.0f);
    bufs[1] = optest_random_f32((size_t)(c->m * cg * c->kh * c->kw), 2, -0.5f, 0.5f);
    exact(bufs[0], (size_t)(c->n * c->h * c->w * c->c));
    exact(bufs[1], (size_t)(c->m * cg * c->kh * c->kw));
    bufs[2] = c->bias ? optest_random_f32((size_t)c->m, 3, -1.0f, 1.0f) : NULL;
    bufs[3] =
        c->residual ? optest_random_f32((size_t)(c->n * oh * ow * c->m), 4, -1.0f, 1.0f) : NULL;
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, c->h, c->w, c->c}, bufs[0], false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->m, cg, c->kh, c->kw}, bufs[1], true);
    if (c->bias || c->residual) {
        if (!bufs[2]) bufs[2] = calloc((size_t)c->m, sizeof(float));
        optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){c->m}, bufs[2], true);
    }
    *f = (ir_fusion){.bias = -1, .residual = -1, .act = c->act, .lo = -0.5f, .hi = 0.75f};
    if (c->residual) {
        optest_input(t, 3, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, oh, ow, c->m}, bufs[3], false);
        f->residual = 3;
    }
    if (c->residual || c->act != IR_ACT_NONE) optest_node(t)->fusion = f;
}

/* The bf16 variant on X stored in bf16 (as the plan binds it after a producer that writes
 * bf16), against the reference t already ran. */
static void check_stored_bf16(optest *t, const gc_case *c) {
    const kern_variant *v = kern_find(IR_OP_CONV_NHWC, "convnhwc_grouped_avx512bf16");
    assert_non_null(v);
    const size_t xn = (size_t)(c->n * c->h * c->w * c->c), yn = op_tensor_numel(&t->out[0]);
    uint16_t *x16 = malloc(xn * sizeof *x16);
    for (size_t i = 0; i < xn; i++) x16[i] = core_f32_to_bf16(((const float *)t->in[0].data)[i]);
    op_tinfo info[OPTEST_MAX_IO];
    optest_input_info(t, info); /* X declared fp32: the plan decides its storage afterwards */
    op_tensor x = t->in[0];
    x.dtype = ANVIL_DTYPE_BFLOAT16;
    x.data = x16;
    const op_tensor *ins[OPTEST_MAX_IO];
    for (int i = 0; i < t->n_in; i++) ins[i] = t->in_set[i] ? &t->in[i] : NULL;
    ins[0] = &x;
    for (int threads = 1; threads <= 3; threads++) {
        kern_node kn = {optest_node(t), info, t->n_in, t->out_info, t->n_out,
                        threads,        NULL, NULL,    t->knobs};
        rt_variant_exec *e;
        assert_int_equal(rt_variant_exec_create(v, &kn, NULL, &e), ANVIL_OK);
        op_tensor got = t->out[0];
        got.data = malloc(yn * sizeof(float));
        op_tensor *outs[1] = {&got};
        assert_int_equal(rt_variant_exec_run(e, optest_node(t), ins, t->n_in, outs, 1), ANVIL_OK);
        rt_variant_exec_free(e);
        assert_true(optest_compare_f32(got.data, t->out[0].data, yn, 1e-4f, 5e-4f) < 0);
        free(got.data);
    }
    free(x16);
}

/* Case c in an fp32 session and then in a bf16 one: the grouped variant of each applies where
 * the CPU has it (the bf16 one with an even number of input channels per group), and every
 * variant matches the reference. */
static void check_case(const gc_case *c, bool grouped_applies) {
    for (int bf16 = 0; bf16 < 2; bf16++) {
        if (bf16 && !have_bf16()) break;
        optest t;
        float *bufs[4];
        ir_fusion f;
        build(&t, c, bufs, &f);
        if (bf16) t.knobs = &bf16_session;
        const char *name = bf16 ? "convnhwc_grouped_avx512bf16" : "convnhwc_grouped_avx512";
        const bool want = grouped_applies && avx512() && (!bf16 || (c->c / c->group) % 2 == 0);
        const bool applies = optest_variant_applies(&t, name);
        const int checked = optest_check_variants(&t, 1e-4f, 5e-4f);
        if (applies != want || checked < 1)
            fprintf(stderr,
                    "case c%lld m%lld g%lld %lldx%lld k%lldx%lld s%lld %s: %d, %d checked\n",
                    (long long)c->c, (long long)c->m, (long long)c->group, (long long)c->h,
                    (long long)c->w, (long long)c->kh, (long long)c->kw, (long long)c->sh, name,
                    (int)applies, checked);
        assert_int_equal(applies, want);
        assert_true(checked >= 1);
        if (bf16 && want) check_stored_bf16(&t, c);
        optest_end(&t);
        for (int i = 0; i < 4; i++) free(bufs[i]);
    }
}

static void test_grouped_shapes(void **state) {
    (void)state;
    static const gc_case cases[] = {
        /* RegNetY-400MF's groups of 8: 7, 14 and 28 wide, stride 1 and 2 */
        {1, 48, 48, 6, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_RELU, false},
        {1, 48, 48, 6, 14, 14, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
        {1, 32, 32, 4, 9, 28, 3, 3, 1, 1, {1, 1, 1, 1}, false, IR_ACT_RELU, false},
        {1, 48, 48, 6, 13, 29, 3, 3, 2, 2, {1, 1, 1, 1}, true, IR_ACT_RELU, false},
        /* a 7-wide map with 40 channels: blocks of channels in pairs, the half-full last alone */
        {1, 40, 40, 5, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_RELU, false},
        /* 40 channels: the last vector of output channels half full */
        {2, 40, 40, 5, 6, 11, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_CLIP, true},
        /* groups of 16 and of 32 output channels; fewer inputs than outputs per group */
        {1, 32, 32, 2, 8, 19, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, true},
        {1, 64, 64, 2, 5, 17, 3, 3, 1, 2, {0, 1, 2, 1}, true, IR_ACT_RELU, false},
        {1, 16, 32, 2, 7, 23, 3, 3, 1, 1, {1, 1, 1, 1}, false, IR_ACT_NONE, false},
        /* 12 input channels per group: the border pixels' sums not a multiple of 8; 6 pairs */
        {1, 24, 32, 2, 6, 10, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
        /* 3 input channels per group: the bf16 kernel's pairs would straddle groups */
        {1, 6, 16, 2, 5, 9, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
        /* other kernels: 1x3, 5x5 with asymmetric pads, 1x1 at stride 2 */
        {1, 24, 24, 3, 4, 30, 1, 3, 1, 1, {0, 1, 0, 1}, true, IR_ACT_NONE, false},
        {2, 32, 32, 4, 12, 15, 5, 5, 1, 1, {2, 0, 1, 2}, true, IR_ACT_RELU, false},
        {1, 32, 32, 4, 9, 9, 1, 1, 2, 2, {0, 0, 0, 0}, false, IR_ACT_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], true);
}

/* Groups of 4 output channels (a vector would be three quarters zeros), 65 input channels per
 * group, and depthwise convs are left to the other variants. */
static void test_grouped_declines(void **state) {
    (void)state;
    static const gc_case cases[] = {
        {1, 16, 16, 4, 6, 6, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
        {1, 130, 16, 2, 5, 5, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
        {1, 16, 16, 16, 6, 6, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grouped_shapes),
        cmocka_unit_test(test_grouped_declines),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
