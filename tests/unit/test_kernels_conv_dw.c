/* The general depthwise conv variants (src/kernels/cpu/conv/conv_dwx.c: dwconv_nchw_* on Conv,
 * dwconv_nhwc_* on anvil.ConvNhwc) against the reference, through optest_check_variants (every
 * applicable variant of the op on 1, 2 and 3 threads): kernels 1..7 and 9 (square and not),
 * strides 1/2/3, dilations 1/2/3/6, asymmetric pads, output widths around the vector widths
 * (8, 16 and the 4-vector blocks), channels around 16, batch 1 and 2, with and without bias,
 * fused activations and residuals, channel multipliers (NCHW), small planes (AVX-512's channel
 * lanes) and wide ones (bands of padded rows). Each case asserts that the general variants the
 * ISA allows applied, so one that silently stops applying fails; and the default cascade's pick
 * for the shapes only they take. */
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

static bool avx2(void) {
    return core_hw_get()->avx2 && core_hw_get()->fma;
}

typedef struct dw_case {
    int64_t n, c, mult, h, w, kh, kw, sh, sw, dh, dw;
    int64_t pads[4]; /* top, left, bottom, right */
    bool bias;
    ir_act act;    /* fused activation (IR_ACT_NONE with residual false: no fusion) */
    bool residual; /* a fused residual Add */
} dw_case;

static int64_t out_dim(int64_t x, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
    return (x + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

/* The data of a case, owned by the caller after build. */
typedef struct dw_data {
    float *x, *xl, *w, *b, *r;
} dw_data;

static void nchw_to_nhwc(const float *x, int64_t n, int64_t c, int64_t hw, float *y) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++) y[(i * hw + p) * c + ch] = x[(i * c + ch) * hw + p];
}

/* Case c as a one-node graph of op (Conv, or anvil.ConvNhwc with X, Y and the residual
 * channels-last), W and B known. */
static void build(optest *t, const dw_case *c, ir_op op, dw_data *d, ir_fusion *f) {
    const bool last = op == IR_OP_CONV_NHWC, fused = c->residual || c->act != IR_ACT_NONE;
    const int64_t m = c->c * c->mult;
    const int64_t oh = out_dim(c->h, c->kh, c->sh, c->dh, c->pads[0], c->pads[2]);
    const int64_t ow = out_dim(c->w, c->kw, c->sw, c->dw, c->pads[1], c->pads[3]);
    optest_begin(t, op, c->residual ? 4 : (c->bias ? 3 : 2), 1, 5);
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){c->kh, c->kw}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){c->sh, c->sw}, 2);
    optest_attr_ints(t, 2, "dilations", (int64_t[]){c->dh, c->dw}, 2);
    optest_attr_int(t, 3, "group", c->c);
    optest_attr_ints(t, 4, "pads", c->pads, 4);
    const size_t xn = (size_t)(c->n * c->c * c->h * c->w), yn = (size_t)(c->n * m * oh * ow);
    memset(d, 0, sizeof *d);
    d->x = optest_random_f32(xn, 1, -1.0f, 1.0f);
    d->w = optest_random_f32((size_t)(m * c->kh * c->kw), 2, -1.0f, 1.0f);
    if (c->bias) d->b = optest_random_f32((size_t)m, 3, -1.0f, 1.0f);
    if (last) {
        d->xl = malloc((xn ? xn : 1) * sizeof(float));
        nchw_to_nhwc(d->x, c->n, c->c, c->h * c->w, d->xl);
        optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, c->h, c->w, c->c}, d->xl,
                     false);
    } else {
        optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, c->c, c->h, c->w}, d->x,
                     false);
    }
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){m, 1, c->kh, c->kw}, d->w, true);
    if (c->bias) optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){m}, d->b, true);
    *f = (ir_fusion){.bias = -1,
                     .residual = -1,
                     .act = c->act,
                     .alpha = 0.1f,
                     .beta = 0.4f,
                     .lo = -0.5f,
                     .hi = 0.75f};
    if (c->residual) {
        /* the same random data reads as NCHW or NHWC: either is the output's shape */
        d->r = optest_random_f32(yn, 4, -1.0f, 1.0f);
        const int64_t rd[4] = {c->n, last ? oh : m, last ? ow : oh, last ? m : ow};
        optest_input(t, 3, ANVIL_DTYPE_FLOAT32, 4, rd, d->r, false);
        f->residual = 3;
    }
    if (fused) optest_node(t)->fusion = f;
}

static void free_data(dw_data *d) {
    free(d->x);
    free(d->xl);
    free(d->w);
    free(d->b);
    free(d->r);
}

/* How many of the variants named prefix* apply to t's node (on 1 thread). */
static int applying(optest *t, const char *prefix) {
    assert_int_equal(optest_infer(t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    kern_node kn = {optest_node(t), in, t->n_in, t->out_info, t->n_out, 1, NULL, NULL, NULL};
    size_t count;
    const kern_variant *const *list = kern_variants(optest_node(t)->op, &count);
    int n = 0;
    for (size_t i = 1; i < count; i++)
        if (!strncmp(list[i]->name, prefix, strlen(prefix)) &&
            kern_applies(list[i], &kn, core_hw_get()))
            n++;
    return n;
}

static void print_case(const dw_case *c, const char *layout) {
    fprintf(stderr,
            "case %s n%lld c%lld x%lld %lldx%lld k%lldx%lld s%lld,%lld d%lld,%lld pads "
            "%lld,%lld,%lld,%lld act %d res %d\n",
            layout, (long long)c->n, (long long)c->c, (long long)c->mult, (long long)c->h,
            (long long)c->w, (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw,
            (long long)c->dh, (long long)c->dw, (long long)c->pads[0], (long long)c->pads[1],
            (long long)c->pads[2], (long long)c->pads[3], (int)c->act, (int)c->residual);
}

/* Case c in op's layout: the general variants of that layout must apply (one per ISA here) and
 * every applicable variant must match the reference. */
static void check_layout(const dw_case *c, ir_op op) {
    const bool last = op == IR_OP_CONV_NHWC;
    optest t;
    dw_data d;
    ir_fusion f;
    build(&t, c, op, &d, &f);
    const int want = (int)avx2() + (int)avx512();
    const int mine = applying(&t, last ? "dwconv_nhwc_" : "dwconv_nchw_");
    const int checked = optest_check_variants(&t, 1e-4f, 5e-4f);
    if (mine != want || checked < want) {
        print_case(c, last ? "nhwc" : "nchw");
        fprintf(stderr, "%d general variants apply, want %d; %d variants checked\n", mine, want,
                checked);
    }
    assert_int_equal(mine, want);
    assert_true(checked >= want);
    optest_end(&t);
    free_data(&d);
}

/* Both layouts (NHWC only without a channel multiplier: that variant declines it). */
static void check_case(const dw_case *c) {
    check_layout(c, IR_OP_CONV);
    if (c->mult == 1) check_layout(c, IR_OP_CONV_NHWC);
}

/* Every kernel size 1..7 and 9 with every stride 1..3 and dilation 1, 2, 3, 6: the input sized
 * for a rotating output width around the vectors and a few output rows, pads rotating through
 * none, asymmetric and full, channels, batch, bias and the fused epilogue rotating too. */
static void test_dw_sweep(void **state) {
    (void)state;
    static const int64_t ks[] = {1, 2, 3, 4, 5, 6, 7, 9};
    static const int64_t dils[] = {1, 2, 3, 6};
    static const int64_t ows[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 47, 49, 65};
    static const int64_t chans[] = {15, 16, 17, 3, 33, 8};
    static const ir_act acts[] = {IR_ACT_NONE,       IR_ACT_RELU,    IR_ACT_CLIP,
                                  IR_ACT_HARD_SWISH, IR_ACT_SIGMOID, IR_ACT_SILU};
    int i = 0;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (int64_t s = 1; s <= 3; s++)
            for (size_t di = 0; di < sizeof dils / sizeof *dils; di++, i++) {
                const int64_t k = ks[ki], dl = dils[di], ext = (k - 1) * dl + 1;
                const int64_t ow = ows[(i + (int)ki) % 12], oh = 1 + i % 5;
                /* pads in [0, ext): none, asymmetric, half the extent on one side */
                const int64_t pl = (i % 3 == 0) ? 0 : (i % 3 == 1 ? ext / 2 : ext - 1);
                const int64_t pr = (i % 4 == 0) ? ext / 3 : (i % 4 == 2 ? 1 % ext : 0);
                const int64_t pt = (i % 2) ? ext / 2 : 0, pb = (i % 5 == 1) ? ext - 1 : 0;
                int64_t w = (ow - 1) * s + ext - pl - pr, h = (oh - 1) * s + ext - pt - pb;
                if (w < 1) w = 1 + i % 3;
                if (h < 1) h = 1 + i % 2;
                const dw_case c = {
                    1 + i % 2, chans[i % 6],     1,          h,           w,         k, k, s, s, dl,
                    dl,        {pt, pl, pb, pr}, i % 3 != 1, acts[i % 6], i % 4 == 3};
                check_case(&c);
            }
}

/* Shapes the sweep does not reach: wide planes over several bands (the 4-vector blocks with a
 * partial last vector), small planes of more than 16 channels at every kernel size (AVX-512's
 * channel lanes, up to 49 taps), non-square kernels, strides and dilations, channel
 * multipliers, a fused residual at a stride, big pads, and a batch of zero. */
static void test_dw_shapes(void **state) {
    (void)state;
    static const dw_case cases[] = {
        /* ConvNeXt's 7x7 (small), several bands of rows */
        {1, 17, 1, 40, 56, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, IR_ACT_NONE, false},
        {2, 16, 1, 23, 71, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, false, IR_ACT_GELU_ERF, true},
        /* stride 1, dilation 1: the windowed NHWC kernel (3, 5, 7), masked channels */
        {1, 17, 1, 9, 45, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, true, IR_ACT_RELU, false},
        {1, 33, 1, 6, 40, 3, 3, 1, 1, 1, 1, {1, 0, 1, 2}, false, IR_ACT_NONE, true},
        /* DeepLabV3's dilated 3x3 */
        {1, 18, 1, 33, 33, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, IR_ACT_RELU, false},
        {1, 15, 1, 33, 33, 3, 3, 1, 1, 4, 4, {4, 4, 4, 4}, true, IR_ACT_NONE, true},
        {1, 16, 1, 20, 21, 3, 3, 1, 1, 6, 6, {6, 6, 6, 6}, false, IR_ACT_NONE, false},
        /* EfficientNet's 5x5 stride 2 (small), 7x7 and 9x9 at 14x14 and 7x7 (channel lanes) */
        {1, 33, 1, 28, 28, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, true, IR_ACT_HARD_SWISH, false},
        {2, 20, 1, 14, 14, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, IR_ACT_NONE, true},
        {1, 17, 1, 7, 7, 9, 9, 1, 1, 1, 1, {4, 4, 4, 4}, false, IR_ACT_CLIP, false},
        {1, 16, 1, 13, 12, 3, 3, 2, 3, 2, 3, {1, 2, 3, 0}, true, IR_ACT_NONE, false},
        /* non-square kernels, strides, dilations; asymmetric pads */
        {1, 15, 1, 19, 37, 1, 7, 1, 2, 1, 1, {0, 3, 0, 2}, true, IR_ACT_NONE, false},
        {2, 17, 1, 29, 18, 7, 1, 3, 1, 2, 1, {5, 0, 1, 0}, false, IR_ACT_RELU, true},
        {1, 16, 1, 30, 50, 5, 3, 2, 3, 3, 2, {4, 1, 0, 3}, true, IR_ACT_NONE, false},
        /* stride 3 wide, stride 4 and 5 */
        {1, 9, 1, 12, 151, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, true},
        {1, 9, 1, 17, 67, 4, 4, 4, 5, 1, 1, {1, 2, 0, 1}, true, IR_ACT_NONE, false},
        /* pads larger than the kernel's reach: whole padded rows and columns */
        {1, 16, 1, 5, 6, 3, 3, 1, 1, 1, 1, {4, 5, 3, 6}, true, IR_ACT_NONE, false},
        {1, 17, 1, 40, 40, 5, 5, 2, 2, 2, 2, {9, 7, 0, 8}, false, IR_ACT_NONE, false},
        /* channel multipliers (NCHW only) */
        {1, 8, 2, 13, 17, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
        {2, 5, 3, 11, 40, 5, 5, 2, 2, 2, 2, {4, 4, 4, 4}, true, IR_ACT_RELU, true},
        {1, 16, 2, 12, 12, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, false, IR_ACT_NONE, false},
        /* zero batch */
        {0, 16, 1, 9, 9, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, IR_ACT_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

/* Weights that are not constant: the NCHW variants read W at run time; the NHWC ones pack it in
 * prepare and decline. Kernels past CONV_DWX_MAX_K and grouped (not depthwise) convs are
 * declined by both. */
static void test_dw_declines(void **state) {
    (void)state;
    const int want = (int)avx2() + (int)avx512();
    dw_case c = {1, 16, 1, 9, 9, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, IR_ACT_NONE, false};
    optest t;
    dw_data d;
    ir_fusion f;
    build(&t, &c, IR_OP_CONV, &d, &f);
    t.in_known[1] = false;
    assert_int_equal(applying(&t, "dwconv_nchw_"), want);
    assert_true(optest_check_variants(&t, 1e-4f, 5e-4f) >= want);
    optest_end(&t);
    free_data(&d);
    build(&t, &c, IR_OP_CONV_NHWC, &d, &f);
    t.in_known[1] = false;
    assert_int_equal(applying(&t, "dwconv_nhwc_"), 0);
    optest_end(&t);
    free_data(&d);
    dw_case big = {1, 4, 1, 20, 20, 17, 17, 1, 1, 1, 1, {8, 8, 8, 8}, false, IR_ACT_NONE, false};
    build(&t, &big, IR_OP_CONV, &d, &f);
    assert_int_equal(applying(&t, "dwconv_"), 0);
    optest_end(&t);
    free_data(&d);
    build(&t, &big, IR_OP_CONV_NHWC, &d, &f);
    assert_int_equal(applying(&t, "dwconv_"), 0);
    optest_end(&t);
    free_data(&d);
}

/* conv_f32's pick for the depthwise shapes only the general variants take. */
static void test_dw_default_pick(void **state) {
    (void)state;
    static const dw_case cases[] = {
        {1, 40, 1, 56, 56, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, IR_ACT_NONE, false},
        {1, 32, 1, 33, 33, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, true, IR_ACT_NONE, false},
        {1, 32, 1, 14, 14, 7, 7, 1, 1, 1, 1, {3, 3, 3, 3}, true, IR_ACT_NONE, false},
        {1, 16, 2, 28, 28, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, true, IR_ACT_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        optest t;
        dw_data d;
        ir_fusion f;
        build(&t, &cases[i], IR_OP_CONV, &d, &f);
        assert_int_equal(optest_infer(&t), ANVIL_OK);
        op_tinfo in[OPTEST_MAX_IO];
        optest_input_info(&t, in);
        kern_node kn = {optest_node(&t), in, t.n_in, t.out_info, 1, 1, NULL, NULL, NULL};
        const kern_variant *v = conv_auto_pick(&kn);
        if (avx2()) {
            assert_non_null(v);
            assert_true(!strncmp(v->name, "dwconv_nchw_", 12));
        }
        optest_end(&t);
        free_data(&d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw_sweep),
        cmocka_unit_test(test_dw_shapes),
        cmocka_unit_test(test_dw_declines),
        cmocka_unit_test(test_dw_default_pick),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
