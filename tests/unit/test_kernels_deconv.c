/* The deconv family (src/kernels/cpu/deconv) against the reference ConvTranspose: every deconv
 * variant that applies, on 1, 2 and 3 threads, over 1-D, 2-D and 3-D geometries: groups 1/2 and
 * depthwise (with a channel multiplier), strides 1/2/3, kernels 1..4, symmetric and asymmetric
 * pads, output_padding, dilation 2, auto_pad SAME_UPPER/SAME_LOWER/VALID, output_shape (smaller
 * and larger than the full result), bias and no bias, batch 2, odd sizes, sizes that need several
 * chunks, weights known (packed in prepare) and not, and zero-size tensors. The number of variants
 * checked per case is asserted, so a variant that stops applying fails the test; so does a
 * variant that accepts a node it should decline (float64). oneDNN's dnnl_deconv, where built, is
 * checked on every case it takes (tests/unit/test_kernels_vendor.c asserts which it must). */
#include "kernels/kernels.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct deconv_case {
    int nsp;
    int64_t n, c, m, group; /* m: output channels (all groups) */
    int64_t in[3], k[3], s[3], d[3];
    int64_t pads[6]; /* begins, then ends */
    int64_t opad[3];
    int64_t oshape[3];    /* all zero: no output_shape */
    const char *auto_pad; /* NULL: NOTSET */
    bool bias;
    bool w_unknown; /* W is not a constant (packed at run time by the GEMM) */
} deconv_case;

/* Whether deconv_direct_gemm must take the case: stride == kernel, dilation 1 and the output
 * covering every tap from position 0 (no pads, or only output_padding / a larger output_shape). */
static bool disjoint(const deconv_case *c) {
    for (int d = 0; d < c->nsp; d++)
        if (c->s[d] != c->k[d] || c->d[d] != 1 || c->pads[d] || c->pads[c->nsp + d]) return false;
    if (c->auto_pad && strcmp(c->auto_pad, "VALID") && strcmp(c->auto_pad, "NOTSET")) return false;
    for (int d = 0; d < c->nsp; d++)
        if (c->oshape[d] && c->oshape[d] < c->in[d] * c->k[d]) return false;
    return true;
}

/* Builds the node, runs every variant against the reference; returns the number checked.
 * *vendor: whether oneDNN's dnnl_deconv (where the build has it) took the node. */
static int run_case(const deconv_case *c, bool *vendor) {
    const int nsp = c->nsp, rank = nsp + 2;
    int64_t xd[5] = {c->n, c->c}, wd[5] = {c->c, c->m / c->group}, bd[1] = {c->m};
    for (int d = 0; d < nsp; d++) {
        xd[d + 2] = c->in[d];
        wd[d + 2] = c->k[d];
    }
    bool has_oshape = false;
    for (int d = 0; d < nsp; d++) has_oshape |= c->oshape[d] != 0;
    const int n_attrs = 6 + (c->auto_pad ? 1 : 0) + (has_oshape ? 1 : 0);
    optest t;
    optest_begin(&t, IR_OP_CONVTRANSPOSE, c->bias ? 3 : 2, 1, n_attrs);
    int a = 0;
    optest_attr_ints(&t, a++, "kernel_shape", c->k, (size_t)nsp);
    optest_attr_ints(&t, a++, "strides", c->s, (size_t)nsp);
    optest_attr_ints(&t, a++, "dilations", c->d, (size_t)nsp);
    int64_t pads[6];
    for (int d = 0; d < nsp; d++) {
        pads[d] = c->pads[d];
        pads[nsp + d] = c->pads[nsp + d];
    }
    optest_attr_ints(&t, a++, "pads", pads, 2 * (size_t)nsp);
    optest_attr_ints(&t, a++, "output_padding", c->opad, (size_t)nsp);
    if (c->auto_pad) optest_attr_string(&t, a++, "auto_pad", c->auto_pad);
    if (has_oshape) optest_attr_ints(&t, a++, "output_shape", c->oshape, (size_t)nsp);
    optest_attr_int(&t, a++, "group", c->group);
    float *x = optest_random_f32(optest_prod(xd, rank), 1, -1.0f, 1.0f);
    float *w = optest_random_f32(optest_prod(wd, rank), 2, -1.0f, 1.0f);
    float *b = optest_random_f32((size_t)c->m, 3, -1.0f, 1.0f);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, rank, wd, w, !c->w_unknown);
    if (c->bias) optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, bd, b, true);
    *vendor = optest_variant_applies(&t, "dnnl_deconv");
    int got = optest_check_variants(&t, 1e-4f, 1e-4f);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
    return got;
}

/* deconv_batched_gemm: group 1, two images or more, inputs under 64 positions */
static bool batched(const deconv_case *c) {
    int64_t in = 1;
    for (int d = 0; d < c->nsp; d++) in *= c->in[d];
    return c->group == 1 && c->n >= 2 && in < 64;
}

static void check(const deconv_case *c) {
    bool vendor;
    int got = run_case(c, &vendor);
    int want = (disjoint(c) ? 2 : 1) + (batched(c) ? 1 : 0) + vendor;
    if (got != want)
        fprintf(stderr,
                "case nsp %d c %lld m %lld g %lld in %lld k %lld s %lld: %d variants, "
                "want %d\n",
                c->nsp, (long long)c->c, (long long)c->m, (long long)c->group, (long long)c->in[0],
                (long long)c->k[0], (long long)c->s[0], got, want);
    assert_int_equal(got, want);
}

#define D2(...)                                                                                    \
    { __VA_ARGS__ }

/* 2-D: kernels 1..4, strides 1..3, groups, pads, bias. */
static void test_2d_grid(void **state) {
    (void)state;
    const int64_t groups[][3] = {{6, 4, 1}, {6, 4, 2}, {6, 6, 6}, {3, 6, 3}, {1, 1, 1}};
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
        for (int64_t k = 1; k <= 4; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int pad = 0; pad <= 1; pad++) {
                    if (pad && k == 1) continue;
                    deconv_case c;
                    memset(&c, 0, sizeof c);
                    c.nsp = 2;
                    c.n = 1;
                    c.c = groups[gi][0];
                    c.m = groups[gi][1];
                    c.group = groups[gi][2];
                    c.in[0] = 5;
                    c.in[1] = 7;
                    c.k[0] = c.k[1] = k;
                    c.s[0] = c.s[1] = s;
                    c.d[0] = c.d[1] = 1;
                    for (int i = 0; i < 4; i++) c.pads[i] = pad;
                    c.bias = (k + s) % 2 == 0;
                    check(&c);
                }
}

/* The PP-OCR shapes in small: 2x2 stride 2 (the direct variant), k=4 s=2 p=1, into 1 channel. */
static void test_2d_upsampling(void **state) {
    (void)state;
    deconv_case cases[] = {
        {2,
         1,
         16,
         8,
         1,
         D2(12, 10),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         {0},
         NULL,
         true,
         false},
        {2, 2, 8, 1, 1, D2(9, 11), D2(2, 2), D2(2, 2), D2(1, 1), {0}, {0}, {0}, NULL, true, false},
        {2,
         1,
         16,
         8,
         1,
         D2(12, 10),
         D2(4, 4),
         D2(2, 2),
         D2(1, 1),
         {1, 1, 1, 1},
         {0},
         {0},
         NULL,
         true,
         false},
        {2, 1, 8, 8, 1, D2(6, 5), D2(3, 3), D2(3, 3), D2(1, 1), {0}, {0}, {0}, NULL, false, false},
        {2,
         1,
         8,
         8,
         1,
         D2(6, 5),
         D2(2, 3),
         D2(2, 3),
         D2(1, 1),
         {0},
         {1, 2},
         {0},
         NULL,
         true,
         false},
        /* large enough for several chunks of the first dim and for the threads to share them */
        {2,
         1,
         24,
         8,
         1,
         D2(80, 40),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         {0},
         NULL,
         true,
         false},
        {2,
         1,
         32,
         16,
         1,
         D2(40, 36),
         D2(4, 4),
         D2(2, 2),
         D2(1, 1),
         {1, 1, 1, 1},
         {0},
         {0},
         NULL,
         true,
         false},
        {2,
         1,
         12,
         1,
         1,
         D2(64, 48),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         {0},
         NULL,
         true,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
}

/* Asymmetric pads, output_padding, dilation 2, mixed strides, batch 2, W not constant. */
static void test_2d_attributes(void **state) {
    (void)state;
    deconv_case cases[] = {
        {2,
         2,
         4,
         6,
         2,
         D2(5, 6),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {0, 1, 2, 0},
         {1, 1},
         {0},
         NULL,
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(3, 2),
         D2(1, 3),
         D2(2, 1),
         {1, 0, 0, 1},
         {0, 2},
         {0},
         NULL,
         true,
         false},
        {2,
         1,
         3,
         5,
         1,
         D2(4, 7),
         D2(3, 3),
         D2(2, 2),
         D2(2, 2),
         {2, 2, 2, 2},
         {1, 1},
         {0},
         NULL,
         false,
         false},
        {2,
         2,
         6,
         6,
         3,
         D2(5, 5),
         D2(4, 4),
         D2(3, 3),
         D2(1, 1),
         {3, 0, 1, 2},
         {2, 2},
         {0},
         NULL,
         true,
         false},
        {2,
         1,
         8,
         4,
         1,
         D2(6, 7),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {1, 1, 1, 1},
         {0},
         {0},
         NULL,
         true,
         true},
        {2, 2, 8, 4, 1, D2(6, 7), D2(2, 2), D2(2, 2), D2(1, 1), {0}, {0}, {0}, NULL, true, true},
        /* pads bigger than a kernel: only part of the taps land */
        {2,
         1,
         2,
         2,
         1,
         D2(4, 4),
         D2(3, 3),
         D2(3, 3),
         D2(1, 1),
         {4, 4, 4, 3},
         {0},
         {0},
         NULL,
         true,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
}

/* auto_pad and output_shape, resolved as the reference resolves them. */
static void test_2d_auto_pad(void **state) {
    (void)state;
    deconv_case cases[] = {
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         {0},
         "SAME_UPPER",
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         {0},
         "SAME_LOWER",
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {1, 1},
         {0},
         "SAME_LOWER",
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {1, 1, 1, 1},
         {0},
         {0},
         "VALID",
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         D2(9, 12),
         NULL,
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(3, 3),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         D2(13, 15),
         NULL,
         true,
         false},
        /* stride == kernel with a larger output: the margin gets the bias (direct) */
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         D2(12, 13),
         NULL,
         true,
         false},
        {2,
         1,
         4,
         4,
         1,
         D2(5, 6),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {0},
         D2(9, 12),
         NULL,
         true,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
}

/* 1-D and 3-D. */
static void test_1d_3d(void **state) {
    (void)state;
    deconv_case cases[] = {
        {1, 1, 4, 6, 1, {17}, {3}, {2}, {1}, {1, 0}, {1}, {0}, NULL, true, false},
        {1, 2, 4, 4, 2, {9}, {4}, {1}, {2}, {0, 2}, {0}, {0}, NULL, false, false},
        {1, 1, 6, 6, 6, {33}, {2}, {2}, {1}, {0}, {0}, {0}, NULL, true, false},
        {1, 1, 8, 4, 1, {3000}, {4}, {2}, {1}, {1, 1}, {0}, {0}, NULL, true, false},
        {1, 1, 8, 4, 1, {3000}, {2}, {2}, {1}, {0}, {0}, {0}, NULL, true, false},
        {3,
         1,
         4,
         4,
         1,
         {3, 4, 5},
         {2, 2, 2},
         {2, 2, 2},
         {1, 1, 1},
         {0},
         {0},
         {0},
         NULL,
         true,
         false},
        {3,
         2,
         4,
         6,
         2,
         {3, 4, 5},
         {3, 2, 3},
         {2, 1, 2},
         {1, 2, 1},
         {1, 0, 1, 1, 1, 0},
         {1, 0, 0},
         {0},
         NULL,
         true,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
}

/* Zero-size: batch 0, no input channels, an empty input dim whose output is bias only. */
static void test_zero_size(void **state) {
    (void)state;
    deconv_case cases[] = {
        {2, 0, 4, 4, 1, D2(5, 6), D2(3, 3), D2(2, 2), D2(1, 1), {0}, {0}, {0}, NULL, true, false},
        {2, 1, 0, 4, 1, D2(5, 6), D2(3, 3), D2(2, 2), D2(1, 1), {0}, {0}, {0}, NULL, true, false},
        {2, 1, 4, 4, 1, D2(0, 6), D2(3, 3), D2(1, 1), D2(1, 1), {0}, {0}, {0}, NULL, true, false},
        {2,
         1,
         4,
         4,
         1,
         D2(0, 6),
         D2(2, 2),
         D2(2, 2),
         D2(1, 1),
         {0},
         {1, 0},
         {0},
         NULL,
         true,
         false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
}

/* Builds case c's node in t (inputs owned by the caller: x, w, b), as run_case does. */
static void build_case(optest *t, const deconv_case *c, float **x, float **w, float **b) {
    const int nsp = c->nsp, rank = nsp + 2;
    int64_t xd[5] = {c->n, c->c}, wd[5] = {c->c, c->m / c->group}, bd[1] = {c->m};
    for (int d = 0; d < nsp; d++) {
        xd[d + 2] = c->in[d];
        wd[d + 2] = c->k[d];
    }
    optest_begin(t, IR_OP_CONVTRANSPOSE, 3, 1, 4);
    optest_attr_ints(t, 0, "kernel_shape", c->k, (size_t)nsp);
    optest_attr_ints(t, 1, "strides", c->s, (size_t)nsp);
    optest_attr_ints(t, 2, "pads", c->pads, 2 * (size_t)nsp);
    optest_attr_int(t, 3, "group", c->group);
    *x = optest_random_f32(optest_prod(xd, rank), 4, -1.0f, 1.0f);
    *w = optest_random_f32(optest_prod(wd, rank), 5, -1.0f, 1.0f);
    *b = optest_random_f32((size_t)c->m, 6, -1.0f, 1.0f);
    optest_input(t, 0, ANVIL_DTYPE_FLOAT32, rank, xd, *x, false);
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, rank, wd, *w, true);
    optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 1, bd, *b, true);
}

/* The tuner's parameter (the GEMM tile): every value of every deconv variant's space, on 2
 * threads, against the reference. */
static void test_tiles(void **state) {
    (void)state;
    deconv_case cases[] = {
        {2, 1, 9, 6, 1, D2(7, 9), D2(2, 2), D2(2, 2), D2(1, 1), {0}, {0}, {0}, NULL, true, false},
        {2,
         1,
         8,
         33,
         1,
         D2(6, 5),
         D2(4, 4),
         D2(2, 2),
         D2(1, 1),
         {1, 1, 1, 1},
         {0},
         {0},
         NULL,
         true,
         false},
    };
    int configs = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        optest t;
        float *x, *w, *b;
        build_case(&t, &cases[ci], &x, &w, &b);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        op_tinfo in[OPTEST_MAX_IO];
        optest_input_info(&t, in);
        kern_node kn = {optest_node(&t), in, t.n_in, t.out_info, t.n_out, 2, NULL, NULL, NULL};
        size_t count;
        const kern_variant *const *list = kern_variants(IR_OP_CONVTRANSPOSE, &count);
        const size_t n = op_tensor_numel(&t.out[0]);
        float *got = malloc(n * sizeof *got);
        for (size_t vi = 1; vi < count; vi++) {
            const kern_variant *v = list[vi];
            if (!v->space || !kern_applies(v, &kn, core_hw_get())) continue;
            int32_t vals[64];
            int nv = v->space->values(&kn, core_hw_get(), 0, vals, 64);
            assert_true(nv > 0);
            for (int i = 0; i < nv; i++) {
                kern_config cfg = {{vals[i]}};
                kn.config = &cfg;
                rt_variant_exec *e;
                assert_int_equal(rt_variant_exec_create(v, &kn, NULL, &e), ANVIL_OK);
                kn.config = NULL;
                op_tensor out = t.out[0];
                out.data = got;
                memset(got, 0xff, n * sizeof *got);
                const op_tensor *ins[3] = {&t.in[0], &t.in[1], &t.in[2]};
                op_tensor *outs[1] = {&out};
                assert_int_equal(rt_variant_exec_run(e, optest_node(&t), ins, 3, outs, 1),
                                 ANVIL_OK);
                rt_variant_exec_free(e);
                if (optest_compare_f32(got, t.out[0].data, n, 1e-4f, 1e-4f) >= 0)
                    fprintf(stderr, "%s, tile %s\n", v->name, v->space->label(0, vals[i]));
                assert_true(optest_compare_f32(got, t.out[0].data, n, 1e-4f, 1e-4f) < 0);
                configs++;
            }
        }
        free(got);
        optest_end(&t);
        free(x);
        free(w);
        free(b);
    }
    assert_true(configs > 0);
}

/* Nodes the family must leave to the reference: float64. */
static void test_declines(void **state) {
    (void)state;
    double x[2 * 3 * 3], w[2 * 2 * 2 * 2];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (double)i / 7;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = (double)i / 5;
    optest t;
    optest_begin(&t, IR_OP_CONVTRANSPOSE, 2, 1, 1);
    optest_attr_ints(&t, 0, "strides", (int64_t[]){2, 2}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT64, 4, (int64_t[]){1, 2, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT64, 4, (int64_t[]){2, 2, 2, 2}, w, true);
    assert_int_equal(optest_check_variants(&t, 1e-5f, 1e-5f), 0);
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_2d_grid),       cmocka_unit_test(test_2d_upsampling),
        cmocka_unit_test(test_2d_attributes), cmocka_unit_test(test_2d_auto_pad),
        cmocka_unit_test(test_1d_3d),         cmocka_unit_test(test_zero_size),
        cmocka_unit_test(test_declines),      cmocka_unit_test(test_tiles),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
