/* The conv family (src/kernels/cpu/conv) against the reference Conv: every conv variant that
 * applies, on 1, 2 and 3 threads, over edge shapes (channels 1/3/13/14/15/32/33 around the
 * register tiles, sizes 1/5/7/8/13 around the Winograd tiles and vectors, kernels 1/3/5, strides
 * 1/2, symmetric, asymmetric and auto pads, dilation 2, groups 2 and depthwise, batch 1/3/0, with
 * and without bias); the count of variants checked per case is asserted so a variant that stops
 * applying fails the test. Fused epilogues (ir_fusion: every activation, with and without a
 * residual) over the same families of shapes, where a variant that claims fuses() but skips part
 * of the fusion, or applies it without claiming it (so the runtime applies it twice), differs
 * from the reference. Also: the default cascade's picks, and the NHWC kernels against the NCHW
 * reference with the data transposed. */
#include "kernels/cpu/conv/conv.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct conv_case {
    int64_t n, c, h, w, m, kh, kw, sh, sw, dh, dw;
    int64_t pads[4]; /* top, left, bottom, right */
    int64_t group;
    bool bias;
    const char *auto_pad; /* NULL: NOTSET with pads */
} conv_case;

static bool avx512(void) {
    const core_hw *hw = core_hw_get();
    return hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512;
}

static bool avx2(void) {
    return core_hw_get()->avx2 && core_hw_get()->fma;
}

/* The conv_* variants that must apply to case c on this machine. */
/* One dim of the regions rule (conv_regions.c): the runs of outputs that see one set of valid
 * taps, the share of (output, tap) pairs that read the input, and whether a run sees none. */
static int dim_runs(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pad, int64_t out,
                    double *density, bool *empty) {
    int runs = 0;
    int64_t valid = 0;
    uint32_t last = 0;
    *empty = false;
    for (int64_t o = 0; o < out; o++) {
        uint32_t m = 0;
        for (int64_t t = 0; t < k; t++) {
            const int64_t pos = o * s - pad + t * d;
            if (pos >= 0 && pos < in) m |= 1u << t, valid++;
        }
        if (o == 0 || m != last) runs++;
        if (!m) *empty = true;
        last = m;
    }
    *density = out && k ? (double)valid / (double)(out * k) : 1.0;
    return runs;
}

/* The pads at the start of a dim, auto_pad included. */
static int64_t pad_begin(const conv_case *c, int64_t in, int64_t k, int64_t s, int64_t d,
                         int64_t pad) {
    if (!c->auto_pad || strncmp(c->auto_pad, "SAME", 4)) return c->auto_pad ? 0 : pad;
    const int64_t out = (in + s - 1) / s, need = (out - 1) * s + (k - 1) * d + 1 - in;
    const int64_t total = need > 0 ? need : 0;
    return strcmp(c->auto_pad, "SAME_LOWER") ? total / 2 : total - total / 2;
}

/* Whether conv_nhwc_regions / convnhwc_regions take the case: one group, 2 to 16 x 16 taps, at
 * most 70% of the (pixel, tap) pairs reading the input, every region seeing a tap, at most 64
 * regions. */
static bool regions_apply(const conv_case *c) {
    if (c->group != 1 || c->kh > 16 || c->kw > 16 || c->kh * c->kw < 2 || c->m == 0) return false;
    const bool same = c->auto_pad && !strncmp(c->auto_pad, "SAME", 4);
    const int64_t pt = pad_begin(c, c->h, c->kh, c->sh, c->dh, c->pads[0]);
    const int64_t pl = pad_begin(c, c->w, c->kw, c->sw, c->dw, c->pads[1]);
    const int64_t ph = c->auto_pad ? 0 : c->pads[2], pw = c->auto_pad ? 0 : c->pads[3];
    const int64_t oh = same ? (c->h + c->sh - 1) / c->sh
                            : (c->h + pt + ph - ((c->kh - 1) * c->dh + 1)) / c->sh + 1;
    const int64_t ow = same ? (c->w + c->sw - 1) / c->sw
                            : (c->w + pl + pw - ((c->kw - 1) * c->dw + 1)) / c->sw + 1;
    if (oh <= 0 || ow <= 0) return false;
    double dy, dx;
    bool ey, ex;
    const int ry = dim_runs(c->h, c->kh, c->sh, c->dh, pt, oh, &dy, &ey);
    const int rx = dim_runs(c->w, c->kw, c->sw, c->dw, pl, ow, &dx, &ex);
    return !ey && !ex && ry * rx <= 64 && dy * dx <= 0.7;
}

static int expected_variants(const conv_case *c) {
    int n = 4; /* conv_f32, conv_im2col_gemm, conv_implicit_gemm, conv_nhwc_im2col_gemm */
    bool no_pad = !c->pads[0] && !c->pads[1] && !c->pads[2] && !c->pads[3];
    bool same = c->auto_pad && strncmp(c->auto_pad, "SAME", 4) == 0;
    if (c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && (no_pad || c->auto_pad)) n++;
    if (c->kh == 3 && c->kw == 3 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 &&
        c->group == 1)
        n += 2;
    if (c->kh == 3 && c->kw == 3 && c->sh == 2 && c->sw == 2 && c->dh == 1 && c->dw == 1 &&
        c->group == 1)
        n++; /* conv_winograd_f2x2_3x3_s2 */
    bool dw_shape = c->group == c->c && c->m == c->c && (c->kh == 3 || c->kh == 5) &&
                    (c->kw == 3 || c->kw == 5) && c->sh <= 2 && c->sw <= 2 && c->dh == 1 &&
                    c->dw == 1;
    (void)same;
    if (dw_shape) n += (int)avx2() + (int)avx512();
    bool sc_shape = c->group == 1 && c->c <= 4 && c->kh <= 11 && c->kw <= 11 && c->sh <= 2 &&
                    c->sw <= 2 && c->dh == 1 && c->dw == 1;
    if (sc_shape) n += (int)avx2() + (int)avx512();
    if (regions_apply(c)) n++;           /* conv_nhwc_regions */
    if (c->group == 1 && c->n >= 2) n++; /* conv_batched_gemm (any map; the cascade: small) */
    return n;
}

/* F(4x4,3x3)'s transform matrices cost about two digits (conv_winograd.c). */
static void tolerance(const char *name, float *rtol, float *atol) {
    if (!strcmp(name, "conv_winograd_f4x4_3x3")) {
        *rtol = 1e-3f;
        *atol = 2e-3f;
    } else if (!strncmp(name, "conv_winograd_f2x2_3x3", 22)) {
        *rtol = 2e-4f;
        *atol = 5e-4f;
    } else {
        *rtol = 1e-4f;
        *atol = 2e-4f;
    }
}

/* Runs every applicable variant of op (t's op) on 1..3 threads against the reference; returns the
 * number of variants named prefix* checked, or -1. */
static int check_op_variants(optest *t, ir_op op, const char *prefix) {
    if (optest_run(t) != ANVIL_OK) {
        fprintf(stderr, "reference failed: %s\n", anvil_last_error());
        return -1;
    }
    size_t count;
    const kern_variant *const *list = kern_variants(op, &count);
    size_t bytes;
    if (!core_tensor_bytes(t->out[0].dtype, t->out[0].dims, t->out[0].rank, &bytes)) abort();
    int mine = 0;
    for (size_t vi = 1; vi < count; vi++) {
        float rtol, atol;
        tolerance(list[vi]->name, &rtol, &atol);
        for (int threads = 1; threads <= 3; threads++) {
            op_tensor got = t->out[0];
            got.data = malloc(bytes ? bytes : 1);
            memset(got.data, 0xff, bytes); /* NaN: an unwritten output fails */
            anvil_status s = optest_run_variant(t, list[vi], threads, &got);
            long bad = -1;
            if (s == ANVIL_OK)
                bad = optest_compare_f32(got.data, t->out[0].data, op_tensor_numel(&t->out[0]),
                                         rtol, atol);
            free(got.data);
            if (s == ANVIL_ERR_UNSUPPORTED) break;
            if (s != ANVIL_OK || bad >= 0) {
                fprintf(stderr, "variant %s (%d threads) %s\n", list[vi]->name, threads,
                        s != ANVIL_OK ? anvil_last_error() : "differs from the reference");
                return -1;
            }
            if (threads == 1 && !strncmp(list[vi]->name, prefix, strlen(prefix))) mine++;
        }
    }
    return mine;
}

/* Every applicable conv_* variant (and any other registered one, at the default tolerance). */
static int check_all_variants(optest *t) {
    return check_op_variants(t, IR_OP_CONV, "conv_");
}

/* Builds the one-node graph of case c (weights and bias known, as constants) into t; the data
 * arrays are returned for the caller to free after optest_end. */
static void nchw_to_nhwc(const float *x, int64_t n, int64_t c, int64_t hw, float *y) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < hw; p++) y[(i * hw + p) * c + ch] = x[(i * c + ch) * hw + p];
}

/* The same for op: IR_OP_CONV_NHWC takes X as [n, h, w, c] (the NCHW data returned in *x is
 * transposed into *xl, which the caller frees too; NULL for Conv). */
static void build_case_op(optest *t, const conv_case *c, int n_in, ir_op op, float **x, float **xl,
                          float **w, float **b) {
    int nattr = 5 + (c->auto_pad ? 1 : 0);
    optest_begin(t, op, n_in, 1, nattr);
    optest_attr_ints(t, 0, "kernel_shape", (int64_t[]){c->kh, c->kw}, 2);
    optest_attr_ints(t, 1, "strides", (int64_t[]){c->sh, c->sw}, 2);
    optest_attr_ints(t, 2, "dilations", (int64_t[]){c->dh, c->dw}, 2);
    optest_attr_int(t, 3, "group", c->group);
    if (c->auto_pad) {
        optest_attr_ints(t, 4, "pads", (int64_t[]){0, 0, 0, 0}, 4);
        optest_attr_string(t, 5, "auto_pad", c->auto_pad);
    } else {
        optest_attr_ints(t, 4, "pads", c->pads, 4);
    }
    int64_t xd[4] = {c->n, c->c, c->h, c->w}, wd[4] = {c->m, c->c / c->group, c->kh, c->kw};
    *x = optest_random_f32((size_t)(xd[0] * xd[1] * xd[2] * xd[3]), 1, -1.0f, 1.0f);
    *w = optest_random_f32((size_t)(wd[0] * wd[1] * wd[2] * wd[3]), 2, -1.0f, 1.0f);
    *b = c->bias ? optest_random_f32((size_t)c->m, 3, -1.0f, 1.0f) : NULL;
    *xl = NULL;
    if (op == IR_OP_CONV_NHWC) {
        const size_t xn = (size_t)(xd[0] * xd[1] * xd[2] * xd[3]);
        *xl = malloc((xn ? xn : 1) * sizeof(float));
        nchw_to_nhwc(*x, c->n, c->c, c->h * c->w, *xl);
        optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, c->h, c->w, c->c}, *xl, false);
    } else {
        optest_input(t, 0, ANVIL_DTYPE_FLOAT32, 4, xd, *x, false);
    }
    optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 4, wd, *w, true);
    if (c->bias) optest_input(t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){c->m}, *b, true);
}

static void build_case_in(optest *t, const conv_case *c, int n_in, float **x, float **w,
                          float **b) {
    float *xl;
    build_case_op(t, c, n_in, IR_OP_CONV, x, &xl, w, b);
}

static void build_case(optest *t, const conv_case *c, float **x, float **w, float **b) {
    build_case_in(t, c, c->bias ? 3 : 2, x, w, b);
}

static void check_case(const conv_case *c) {
    optest t;
    float *x, *w, *b;
    build_case(&t, c, &x, &w, &b);
    int n = check_all_variants(&t);
    int want = expected_variants(c);
    if (n != want)
        fprintf(stderr,
                "case n%lld c%lld %lldx%lld m%lld k%lldx%lld s%lld,%lld d%lld,%lld g%lld "
                "pads %lld,%lld,%lld,%lld %s: checked %d conv variants, want %d\n",
                (long long)c->n, (long long)c->c, (long long)c->h, (long long)c->w, (long long)c->m,
                (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw,
                (long long)c->dh, (long long)c->dw, (long long)c->group, (long long)c->pads[0],
                (long long)c->pads[1], (long long)c->pads[2], (long long)c->pads[3],
                c->auto_pad ? c->auto_pad : "", n, want);
    assert_int_equal(n, want);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
}

#define CASE(N, C, H, W, M, KH, KW, S, D, P, G, B)                                                 \
    { N, C, H, W, M, KH, KW, S, S, D, D, {P, P, P, P}, G, B, NULL }

static void test_conv_1x1(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 13, 7, 8, 15, 1, 1, 1, 1, 0, 1, false),
        CASE(3, 32, 5, 5, 33, 1, 1, 1, 1, 0, 1, true),
        CASE(1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, true),
        CASE(2, 33, 13, 13, 14, 1, 1, 1, 1, 0, 1, true),
        CASE(1, 14, 8, 8, 32, 1, 1, 1, 1, 0, 2, true), /* groups */
        CASE(1, 15, 13, 7, 3, 1, 1, 2, 1, 0, 1, true), /* stride 2: not conv_1x1_gemm */
        CASE(1, 3, 5, 5, 13, 1, 1, 1, 1, 1, 1, false), /* padded: not conv_1x1_gemm */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

static void test_conv_3x3(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 3, 8, 8, 13, 3, 3, 1, 1, 1, 1, true),
        CASE(1, 32, 13, 13, 33, 3, 3, 1, 1, 1, 1, true),
        CASE(1, 33, 7, 5, 32, 3, 3, 1, 1, 1, 1, false),
        CASE(3, 14, 5, 7, 15, 3, 3, 1, 1, 0, 1, true),
        CASE(1, 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, true),
        CASE(1, 15, 13, 8, 14, 3, 3, 2, 1, 1, 1, true), /* stride 2 */
        /* stride-2 Winograd: 64 tiles (Cout as the GEMM rows), odd outputs; no pads; shared
         * mode with 1 image, private with 3 */
        CASE(1, 33, 30, 29, 17, 3, 3, 2, 1, 1, 1, true),
        CASE(1, 14, 12, 12, 15, 3, 3, 2, 1, 0, 1, true),
        CASE(1, 256, 11, 10, 256, 3, 3, 2, 1, 1, 1, true),
        CASE(3, 256, 10, 11, 240, 3, 3, 2, 1, 1, 1, false),
        /* at least 128 output channels: Winograd's tiles are the GEMM rows even in blocks of
         * more than 32 tiles (64 at stride 2; 132 and 36 at stride 1), Cout off the tile widths */
        CASE(1, 130, 30, 29, 129, 3, 3, 2, 1, 1, 1, true),
        CASE(1, 40, 24, 22, 130, 3, 3, 1, 1, 1, 1, false),
        CASE(1, 13, 13, 13, 3, 3, 3, 1, 2, 2, 1, true),  /* dilation 2 */
        CASE(3, 14, 7, 7, 32, 3, 3, 1, 1, 1, 2, true),   /* groups 2 */
        CASE(1, 32, 8, 13, 32, 3, 3, 1, 1, 2, 1, false), /* pad 2 */
        CASE(1, 64, 13, 13, 64, 3, 3, 1, 1, 1, 1, true),
        /* Transformed filters larger than L2: Winograd's shared mode (threads split each block's
         * phases) with 1 image, its private mode with 3 */
        CASE(1, 256, 5, 6, 256, 3, 3, 1, 1, 1, 1, true),
        CASE(3, 256, 6, 5, 240, 3, 3, 1, 1, 1, 1, false),
        /* ... with Cout as the GEMM rows (fewer than 128 output channels, more than 32 tiles),
         * a class split by output channels between threads, strides 1 and 2 */
        CASE(1, 512, 18, 18, 96, 3, 3, 1, 1, 1, 1, true),
        CASE(1, 512, 30, 30, 96, 3, 3, 2, 1, 1, 1, false),
        /* asymmetric pads and auto_pad */
        {1, 13, 7, 8, 14, 3, 3, 1, 1, 1, 1, {0, 1, 2, 1}, 1, true, NULL},
        {1, 15, 5, 13, 33, 3, 3, 1, 1, 1, 1, {2, 0, 0, 1}, 1, false, NULL},
        {1, 13, 7, 8, 14, 3, 3, 1, 1, 1, 1, {0}, 1, true, "SAME_UPPER"},
        {1, 13, 8, 7, 14, 3, 3, 2, 2, 1, 1, {0}, 1, true, "SAME_LOWER"},
        {1, 13, 8, 7, 14, 3, 3, 1, 1, 1, 1, {0}, 1, true, "VALID"},
        {2, 14, 13, 5, 13, 3, 3, 2, 1, 1, 1, {1, 0, 1, 2}, 1, true, NULL},
        /* zero-size batch */
        CASE(0, 13, 7, 7, 14, 3, 3, 1, 1, 1, 1, true),
        CASE(0, 13, 7, 7, 14, 1, 1, 1, 1, 0, 1, true),
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

static void test_conv_5x5_and_more(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 3, 13, 13, 14, 5, 5, 1, 1, 2, 1, true),
        CASE(3, 13, 8, 7, 15, 5, 5, 2, 1, 1, 1, false),
        CASE(1, 14, 7, 8, 14, 5, 5, 1, 2, 2, 2, true),
        CASE(1, 3, 13, 8, 32, 7, 7, 2, 1, 3, 1, true), /* ResNet stem shape, small */
        {1, 1, 13, 13, 3, 5, 3, 2, 1, 1, 1, {2, 1, 0, 1}, 1, true, NULL},
        CASE(1, 33, 1, 1, 14, 5, 5, 1, 1, 2, 1, true),
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

/* Every (channels, size, kernel, stride) combination in a rotating sweep. */
static void test_conv_sweep(void **state) {
    (void)state;
    static const int64_t chans[] = {1, 3, 13, 14, 15, 32, 33};
    static const int64_t sizes[] = {1, 5, 7, 8, 13};
    static const int64_t ks[] = {1, 3, 5};
    for (size_t i = 0; i < 7; i++)
        for (size_t j = 0; j < 5; j++) {
            int64_t k = ks[(i + j) % 3], s = 1 + (int64_t)((i + 2 * j) % 2);
            conv_case c = CASE(1 + (int64_t)(i % 2) * 2, chans[i], sizes[j], sizes[(j + 2) % 5],
                               chans[(i + j + 1) % 7], k, k, s, 1, k / 2, 1, (i + j) % 2 == 0);
            check_case(&c);
        }
}

static void test_conv_depthwise(void **state) {
    (void)state;
    static const int64_t chans[] = {1, 3, 14, 33};
    static const int64_t sizes[] = {1, 5, 7, 8, 13, 40};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 6; j++)
            for (int64_t k = 3; k <= 5; k += 2)
                for (int64_t s = 1; s <= 2; s++) {
                    int64_t c = chans[i];
                    conv_case cs = CASE(1 + (int64_t)(j % 2) * 2, c, sizes[j], sizes[(j + i) % 6],
                                        c, k, k, s, 1, k / 2, c, (i + j) % 2 == 1);
                    check_case(&cs);
                }
    /* asymmetric pads, mixed kernel, no padding, auto_pad */
    static const conv_case more[] = {
        {1, 13, 13, 8, 13, 3, 3, 2, 1, 1, 1, {0, 2, 1, 0}, 13, true, NULL},
        {1, 14, 7, 13, 14, 5, 3, 1, 2, 1, 1, {0, 0, 0, 0}, 14, false, NULL},
        {2, 32, 8, 8, 32, 3, 3, 2, 2, 1, 1, {0}, 32, true, "SAME_UPPER"},
        {1, 15, 13, 5, 15, 5, 5, 1, 1, 1, 1, {0}, 15, true, "SAME_LOWER"},
        {1, 15, 13, 5, 15, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 15, true, NULL}, /* dilation 2 */
        /* dilation 2 on the depthwise kernel: DeepLabV3's 5x5 (narrow rows), wide rows with
         * asymmetric pads, and pads shorter than the dilated span */
        {1, 960, 14, 14, 960, 5, 5, 1, 1, 2, 2, {4, 4, 4, 4}, 960, true, NULL},
        {2, 40, 9, 60, 40, 5, 5, 1, 1, 2, 2, {4, 3, 2, 4}, 40, false, NULL},
        {1, 24, 12, 30, 24, 3, 3, 1, 1, 2, 2, {1, 0, 2, 1}, 24, true, NULL},
        CASE(0, 13, 7, 7, 13, 3, 3, 1, 1, 1, 13, true),
        /* the kernel's block shapes by width (conv_dw_tmpl.h): a 4-vector block with its last
         * vector partial (56 wide), full blocks plus a partial 1-vector tail (70), 2 vectors
         * (28) and 1 (14, 7, 5) at both strides, row strips with every remainder */
        CASE(1, 3, 17, 56, 3, 3, 3, 1, 1, 1, 3, true),
        CASE(1, 3, 9, 112, 3, 3, 3, 2, 1, 1, 3, false),
        CASE(1, 2, 11, 70, 2, 3, 3, 1, 1, 1, 2, true),
        CASE(1, 2, 6, 141, 2, 5, 5, 2, 1, 2, 2, true),
        CASE(1, 2, 30, 28, 2, 3, 3, 1, 1, 1, 2, false),
        CASE(1, 2, 31, 56, 2, 3, 3, 2, 1, 1, 2, true),
        CASE(1, 17, 23, 14, 17, 3, 3, 1, 1, 1, 17, true),
        CASE(1, 17, 29, 15, 17, 3, 3, 2, 1, 1, 17, false),
        CASE(2, 5, 7, 7, 5, 5, 5, 1, 1, 2, 5, true),
        CASE(1, 3, 19, 5, 3, 3, 3, 1, 1, 1, 3, false),
    };
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) check_case(&more[i]);
}

/* The few-input-channels kernel (conv_sc_tmpl.h): output widths around its 3-vector blocks and
 * single-vector tail on both ISAs (8 and 16 floats: 23/24/25, 47/48/49, 112, 113), channel
 * blocks with tails (m 1, 5, 13, 33, 64 against blocks of 4 and 8), 1..4 input channels, kernels
 * 3..11 and non-square, both strides with odd and even pads, several bands of rows, batch 2, and
 * few blocks for many threads (the row split). */
static void test_conv_smallc(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 3, 30, 224, 32, 3, 3, 2, 1, 1, 1, true), /* MobileNetV2's stem, 112 wide */
        CASE(1, 3, 19, 229, 64, 7, 7, 2, 1, 3, 1, true), /* ResNet-50's stem, 115 wide */
        CASE(2, 3, 9, 48, 13, 3, 3, 1, 1, 1, 1, false),
        CASE(1, 1, 12, 47, 5, 5, 5, 1, 1, 2, 1, true),
        CASE(1, 4, 7, 49, 33, 3, 3, 1, 1, 0, 1, true),
        CASE(1, 2, 11, 113, 1, 11, 11, 1, 1, 5, 1, false),
        CASE(1, 3, 17, 50, 8, 3, 3, 2, 1, 0, 1, true), /* 24 wide */
        CASE(1, 3, 17, 46, 9, 3, 3, 2, 1, 1, 1, true), /* 23 wide */
        CASE(1, 3, 8, 25, 4, 3, 3, 1, 1, 1, 1, false), /* 25 wide */
        CASE(1, 2, 40, 20, 3, 3, 3, 1, 1, 1, 1, true), /* many bands, one block */
        {1, 3, 15, 37, 12, 7, 3, 2, 1, 1, 1, {3, 0, 2, 1}, 1, true, NULL},
        {1, 3, 15, 37, 12, 3, 5, 1, 2, 1, 1, {0, 2, 1, 2}, 1, false, NULL},
        {2, 3, 16, 33, 6, 3, 3, 2, 2, 1, 1, {0}, 1, true, "SAME_UPPER"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

/* ---- fused epilogues ---------------------------------------------------------------------- */

/* Case c (explicit pads) with a fused activation and, if `residual`, a residual Add (input 3, the
 * output's shape; input 2 stays IR_NONE without a bias, as the passes leave it). Every conv
 * variant must still apply and match the reference followed by the runtime's fallback. */
static void check_fused_case(const conv_case *c, ir_act act, bool residual) {
    ir_fusion f = {.bias = -1,
                   .residual = -1,
                   .act = act,
                   .alpha = 0.1f,
                   .beta = 0.4f,
                   .lo = -0.5f,
                   .hi = 0.75f};
    optest t;
    float *x, *w, *b, *r = NULL;
    build_case_in(&t, c, residual ? 4 : (c->bias ? 3 : 2), &x, &w, &b);
    if (residual) {
        const int64_t oh = (c->h + c->pads[0] + c->pads[2] - ((c->kh - 1) * c->dh + 1)) / c->sh + 1;
        const int64_t ow = (c->w + c->pads[1] + c->pads[3] - ((c->kw - 1) * c->dw + 1)) / c->sw + 1;
        int64_t yd[4] = {c->n, c->m, oh, ow};
        r = optest_random_f32((size_t)(c->n * c->m * oh * ow), 4, -1.0f, 1.0f);
        optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 4, yd, r, false);
        f.residual = 3;
    }
    optest_node(&t)->fusion = &f;
    int n = check_all_variants(&t);
    int want = expected_variants(c);
    if (n != want)
        fprintf(stderr, "fused case c%lld m%lld k%lld s%lld g%lld act %d residual %d: %d of %d\n",
                (long long)c->c, (long long)c->m, (long long)c->kh, (long long)c->sh,
                (long long)c->group, (int)act, (int)residual, n, want);
    assert_int_equal(n, want);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
    free(r);
}

static void test_conv_fused(void **state) {
    (void)state;
    static const ir_act acts[] = {IR_ACT_NONE,       IR_ACT_RELU,      IR_ACT_CLIP,
                                  IR_ACT_LEAKY_RELU, IR_ACT_SIGMOID,   IR_ACT_TANH,
                                  IR_ACT_GELU_ERF,   IR_ACT_GELU_TANH, IR_ACT_HARD_SIGMOID,
                                  IR_ACT_HARD_SWISH, IR_ACT_SILU};
    static const conv_case cases[] = {
        CASE(1, 13, 7, 8, 15, 1, 1, 1, 1, 0, 1, true),    /* 1x1: conv_1x1_gemm */
        CASE(3, 14, 5, 7, 34, 1, 1, 1, 1, 0, 2, false),   /* 1x1, groups, batch 3 */
        CASE(1, 32, 13, 13, 33, 3, 3, 1, 1, 1, 1, true),  /* 3x3: Winograd, both tile sizes */
        CASE(3, 14, 7, 5, 15, 3, 3, 1, 1, 1, 1, false),   /* 3x3, batch 3 (batch-parallel) */
        CASE(1, 15, 13, 8, 14, 3, 3, 2, 1, 1, 1, true),   /* strided */
        CASE(1, 33, 30, 29, 17, 3, 3, 2, 1, 1, 1, true),  /* strided, 64 Winograd tiles */
        CASE(1, 15, 13, 7, 3, 1, 1, 2, 1, 0, 1, true),    /* strided 1x1 */
        CASE(3, 14, 7, 7, 32, 3, 3, 1, 1, 1, 2, true),    /* groups 2 */
        CASE(1, 33, 50, 40, 33, 3, 3, 1, 1, 1, 33, true), /* depthwise, 3 bands of rows */
        CASE(3, 14, 8, 7, 14, 5, 5, 2, 1, 2, 14, false),  /* depthwise 5x5 stride 2 */
        CASE(2, 37, 9, 9, 37, 3, 3, 1, 1, 1, 37, true),   /* depthwise, channel groups of 16 */
        CASE(1, 256, 5, 6, 256, 3, 3, 1, 1, 1, 1, true),  /* Winograd's shared mode */
        CASE(1, 3, 11, 70, 13, 3, 3, 2, 1, 1, 1, true),   /* few input channels, 3 bands */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
            /* every activation with and without a residual on the small cases; the big one
             * (slow to check) once per residual setting with a non-trivial activation */
            if (cases[i].c >= 256 && a != 1 && a != 4) continue;
            check_fused_case(&cases[i], acts[a], (a + i) % 2 == 0);
            if (cases[i].c < 256) check_fused_case(&cases[i], acts[a], (a + i) % 2 == 1);
        }
}

/* A conv whose weights are not constant: Winograd and NHWC decline (they transform W in
 * prepare), the NCHW GEMM variants read W directly. */
static void test_conv_runtime_weights(void **state) {
    (void)state;
    conv_case c = CASE(1, 13, 8, 8, 14, 3, 3, 1, 1, 1, 1, true);
    optest t;
    float *x, *w, *b;
    build_case(&t, &c, &x, &w, &b);
    t.in_known[1] = false;
    int n = check_all_variants(&t);
    assert_int_equal(n, 3); /* neither Winograd nor NHWC (they pack W in prepare) */
    optest_end(&t);
    free(x);
    free(w);
    free(b);
}

/* The default cascade's pick, through conv_f32. */
static const char *default_pick(const conv_case *c, int threads) {
    optest t;
    float *x, *w, *b;
    build_case(&t, c, &x, &w, &b);
    assert_int_equal(optest_infer(&t), ANVIL_OK);
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(&t, in);
    kern_node kn = {optest_node(&t), in, t.n_in, t.out_info, 1, threads, NULL, NULL, NULL};
    const kern_variant *v = conv_auto_pick(&kn);
    const kern_variant *sel = NULL;
    assert_int_equal(kern_select(&kn, NULL, &sel), ANVIL_OK);
    assert_string_equal(sel->name, "conv_f32");
    optest_end(&t);
    free(x);
    free(w);
    free(b);
    return v ? v->name : "(none)";
}

static void test_conv_default_cascade(void **state) {
    (void)state;
    conv_case dw = CASE(1, 32, 56, 56, 32, 3, 3, 1, 1, 1, 32, true);
    conv_case dw_small = CASE(1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 32, true);
    conv_case pw = CASE(1, 64, 56, 56, 256, 1, 1, 1, 1, 0, 1, true);
    conv_case wino = CASE(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, true);
    conv_case small = CASE(1, 3, 56, 56, 8, 3, 3, 1, 1, 1, 1, true);
    conv_case stem = CASE(1, 3, 64, 64, 64, 7, 7, 2, 1, 3, 1, true);
    conv_case narrow = CASE(1, 3, 56, 12, 8, 3, 3, 1, 1, 1, 1, true); /* rows under a vector */
    conv_case pw_s2 = CASE(1, 64, 28, 28, 128, 1, 1, 2, 1, 0, 1, true);
    conv_case deep_s2 = CASE(1, 256, 28, 28, 256, 3, 3, 2, 1, 1, 1, true);
    conv_case deep_s2_7x7 = CASE(1, 512, 14, 14, 512, 3, 3, 2, 1, 1, 1, true); /* 16 tiles */
    conv_case deep_7x7 = CASE(1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, true);      /* 16 F(2x2) tiles */
    conv_case deep_5x5 = CASE(1, 512, 5, 5, 512, 3, 3, 1, 1, 1, 1, true);      /* 9 */
    conv_case se_up = CASE(1, 48, 1, 1, 1152, 1, 1, 1, 1, 0, 1, true);   /* an SE block's 2nd */
    conv_case se_down = CASE(1, 1152, 1, 1, 48, 1, 1, 1, 1, 0, 1, true); /* ... and 1st conv */
    conv_case se_down_wide = CASE(1, 960, 1, 1, 240, 1, 1, 1, 1, 0, 1, true); /* MobileNetV3's */
    conv_case grouped = CASE(1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 8, true);      /* RegNet's groups */
    /* wide planes: the AVX2 row kernel wherever it runs; small ones: AVX-512's channel lanes */
    if (avx2()) assert_string_equal(default_pick(&dw, 1), "conv_depthwise_direct_avx2");
    if (avx512())
        assert_string_equal(default_pick(&dw_small, 1), "conv_depthwise_direct_avx512");
    else if (avx2())
        assert_string_equal(default_pick(&dw_small, 1), "conv_depthwise_direct_avx2");
    assert_string_equal(default_pick(&pw, 1), "conv_1x1_gemm");
    assert_string_equal(default_pick(&se_up, 1), "conv_nhwc_im2col_gemm");
    assert_string_equal(default_pick(&se_down, 1), "conv_1x1_gemm");
    assert_string_equal(default_pick(&se_down_wide, 1), "conv_nhwc_im2col_gemm");
    /* narrow groups: oneDNN where it is there, else anvil's implicit GEMM */
    const char *g = default_pick(&grouped, 2);
    assert_true(!strcmp(g, "dnnl_conv_split") || !strcmp(g, "conv_implicit_gemm"));
    assert_int_equal(!strcmp(g, "dnnl_conv_split"),
                     kern_find(IR_OP_CONV, "dnnl_conv_split") != NULL);
    assert_true(!strncmp(default_pick(&wino, 1), "conv_winograd_", 14));
    /* few input channels: the direct kernel of the widest ISA; the implicit GEMM without one */
    const char *sc = avx512() ? "conv_smallc_direct_avx512"
                     : avx2() ? "conv_smallc_direct_avx2"
                              : "conv_implicit_gemm";
    assert_string_equal(default_pick(&small, 1), sc);
    assert_string_equal(default_pick(&stem, 2), sc);
    assert_string_equal(default_pick(&narrow, 1), "conv_implicit_gemm");
    assert_string_equal(default_pick(&pw_s2, 1), "conv_im2col_gemm");
    assert_string_equal(default_pick(&deep_s2, 1), "conv_winograd_f2x2_3x3_s2");
    assert_string_equal(default_pick(&deep_s2_7x7, 1), "conv_nhwc_im2col_gemm");
    assert_string_equal(default_pick(&deep_5x5, 1), "conv_nhwc_im2col_gemm");
    assert_string_equal(default_pick(&deep_7x7, 1), "conv_winograd_f2x2_3x3");
    /* Every variant can be forced by name. */
    static const char *names[] = {"conv_f32",
                                  "conv_1x1_gemm",
                                  "conv_im2col_gemm",
                                  "conv_implicit_gemm",
                                  "conv_winograd_f2x2_3x3",
                                  "conv_winograd_f4x4_3x3",
                                  "conv_winograd_f2x2_3x3_s2",
                                  "conv_depthwise_direct_avx512",
                                  "conv_depthwise_direct_avx2",
                                  "conv_smallc_direct_avx512",
                                  "conv_smallc_direct_avx2"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        assert_non_null(kern_find(IR_OP_CONV, names[i]));
}

/* ---- NHWC kernels ------------------------------------------------------------------------ */

/* Case c through conv_nhwc_run on threads threads, its A formed by im2col (indirect false) or
 * through the implicit GEMM's pointer table, which must then be what the kernel picks unless
 * the channels are few (the knob conv_im2col, ANVIL_CONV_IM2COL=1, forces the copy). */
static void check_nhwc(const conv_case *c, int threads, bool indirect) {
    optest t;
    float *x, *w, *b;
    build_case(&t, c, &x, &w, &b);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    op_tinfo in[3];
    memset(in, 0, sizeof in);
    for (int i = 0; i < t.n_in; i++) {
        in[i].dtype = ANVIL_DTYPE_FLOAT32;
        ir_shape_set(&in[i].shape, t.in[i].rank, t.in[i].dims);
    }
    const kern_knobs knobs = {.conv_im2col = !indirect};
    kern_node kn = {optest_node(&t), in, t.n_in, t.out_info, 1, threads, NULL, NULL, &knobs};
    conv_shape s;
    assert_true(conv_shape_of(&kn, &s));
    conv_nhwc_weights pw;
    assert_int_equal(conv_nhwc_weights_pack(&kn, &s, w, &pw), ANVIL_OK);
    const bool one_by_one = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 &&
                            s.pl == 0 && s.oh == s.h && s.ow == s.w;
    assert_int_equal(pw.indirect, indirect && !one_by_one && s.cg >= 64);
    size_t xn = (size_t)(s.n * s.c * s.h * s.w), yn = (size_t)(s.n * s.m * s.oh * s.ow);
    float *xt = malloc((xn ? xn : 1) * sizeof(float)), *yt = malloc((yn ? yn : 1) * sizeof(float));
    float *want = malloc((yn ? yn : 1) * sizeof(float));
    nchw_to_nhwc(x, s.n, s.c, s.h * s.w, xt);
    nchw_to_nhwc(t.out[0].data, s.n, s.m, s.oh * s.ow, want);
    void *ws = core_aligned_alloc(64, conv_nhwc_workspace(&s, &pw, threads) + 64);
    core_pool *pool = NULL;
    assert_int_equal(core_pool_create(threads, &pool), ANVIL_OK);
    op_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.pool = pool;
    conv_nhwc_run(&s, &pw, xt, b, yt, ws, &ctx);
    assert_true(optest_compare_f32(yt, want, yn, 1e-4f, 2e-4f) < 0);
    core_pool_free(pool);
    free(ws);
    conv_nhwc_weights_free(&pw);
    free(xt);
    free(yt);
    free(want);
    optest_end(&t);
    free(x);
    free(w);
    free(b);
}

static void test_conv_nhwc(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 13, 7, 8, 15, 1, 1, 1, 1, 0, 1, true),
        CASE(3, 32, 5, 5, 33, 1, 1, 1, 1, 0, 1, false),
        CASE(1, 14, 8, 8, 32, 1, 1, 1, 1, 0, 2, true),
        CASE(1, 15, 13, 7, 3, 1, 1, 2, 1, 0, 1, true),
        CASE(1, 3, 8, 8, 13, 3, 3, 1, 1, 1, 1, true),
        CASE(3, 14, 7, 7, 32, 3, 3, 1, 1, 1, 2, true),
        CASE(1, 13, 13, 13, 3, 3, 3, 1, 2, 2, 1, false),
        CASE(1, 33, 13, 8, 14, 5, 5, 2, 1, 2, 1, true),
        {1, 13, 7, 8, 14, 3, 3, 1, 1, 1, 1, {0, 1, 2, 1}, 1, true, NULL},
        CASE(0, 13, 7, 7, 14, 3, 3, 1, 1, 1, 1, true),
        /* 64 channels and more per group (the implicit GEMM): every tap of a border pixel in the
         * padding, stride 2, dilation, groups, batches split by image, K blocks cut inside a tap
         * (cg 600 > KC), an edge row panel (oh*ow not a multiple of MR) */
        CASE(1, 64, 7, 7, 33, 3, 3, 2, 1, 1, 1, true),
        CASE(2, 64, 9, 8, 17, 3, 3, 1, 2, 2, 1, false),
        CASE(1, 128, 6, 5, 32, 3, 3, 1, 1, 1, 2, true),
        CASE(3, 65, 5, 7, 48, 5, 5, 1, 1, 2, 1, true),
        CASE(1, 600, 4, 4, 20, 3, 3, 1, 1, 1, 1, true),
        {1, 64, 7, 8, 14, 3, 3, 2, 1, 1, 1, {0, 1, 2, 1}, 1, true, NULL},
        {1, 64, 3, 3, 16, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 1, false, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int threads = 1; threads <= 3; threads += 2)
            for (int ind = 0; ind < 2; ind++) check_nhwc(&cases[i], threads, ind);
}

/* ---- anvil.ConvNhwc ------------------------------------------------------------------------
 * Case c as a channels-last node, with a fused activation and (if residual) a channels-last
 * residual: its reference must equal Conv's reference on the NCHW data, transposed, and every
 * convnhwc_* variant that must apply (the GEMM one always; the depthwise ones on depthwise 3/5
 * kernels, strides 1 and 2 without dilation or stride 1 with dilation 2, where the ISA is there;
 * the grouped one on groups of a few channels) must match its reference. */
static void check_last_case(const conv_case *c, ir_act act, bool residual) {
    ir_fusion f = {.bias = -1, .residual = -1, .act = act, .alpha = 0.1f, .lo = -0.5f, .hi = 0.75f};
    const int n_in = residual ? 4 : (c->bias ? 3 : 2);
    optest nchw, last;
    float *x, *xl, *w, *b, *x2, *xl2, *w2, *b2, *r = NULL, *rl = NULL;
    build_case_op(&nchw, c, n_in, IR_OP_CONV, &x, &xl, &w, &b);
    build_case_op(&last, c, n_in, IR_OP_CONV_NHWC, &x2, &xl2, &w2, &b2);
    const bool same = c->auto_pad && !strncmp(c->auto_pad, "SAME", 4);
    const int64_t oh =
        same ? (c->h + c->sh - 1) / c->sh
             : (c->h + c->pads[0] + c->pads[2] - ((c->kh - 1) * c->dh + 1)) / c->sh + 1;
    const int64_t ow =
        same ? (c->w + c->sw - 1) / c->sw
             : (c->w + c->pads[1] + c->pads[3] - ((c->kw - 1) * c->dw + 1)) / c->sw + 1;
    const size_t yn = (size_t)(c->n * c->m * oh * ow);
    if (residual) {
        r = optest_random_f32(yn, 4, -1.0f, 1.0f);
        rl = malloc((yn ? yn : 1) * sizeof(float));
        nchw_to_nhwc(r, c->n, c->m, oh * ow, rl);
        optest_input(&nchw, 3, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, c->m, oh, ow}, r, false);
        optest_input(&last, 3, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){c->n, oh, ow, c->m}, rl, false);
        f.residual = 3;
    }
    optest_node(&nchw)->fusion = &f;
    optest_node(&last)->fusion = &f;
    assert_int_equal(optest_run(&nchw), ANVIL_OK);
    assert_int_equal(optest_run(&last), ANVIL_OK);
    float *want = malloc((yn ? yn : 1) * sizeof(float));
    nchw_to_nhwc(nchw.out[0].data, c->n, c->m, oh * ow, want);
    assert_true(optest_compare_f32(last.out[0].data, want, yn, 1e-5f, 1e-5f) < 0);
    const bool dw_k = c->group == c->c && c->m == c->c && (c->kh == 3 || c->kh == 5) &&
                      (c->kw == 3 || c->kw == 5);
    const bool dw = dw_k && ((c->sh <= 2 && c->sw <= 2 && c->dh == 1 && c->dw == 1) ||
                             (c->sh == 1 && c->sw == 1 && c->dh == 2 && c->dw == 2));
    const int n = check_op_variants(&last, IR_OP_CONV_NHWC, "convnhwc_");
    const bool sc = c->group == 1 && c->c <= 4 && c->m <= 64 && c->dh == 1 && c->dw == 1 &&
                    c->kh <= 11 && c->kw <= 11 && c->sh <= 4 && c->sw <= 4;
    /* the grouped kernel (conv_dw_nhwc.c's gc_shape), fp32 only in this fp32 session */
    const int64_t cg = c->c / c->group, mg = c->m / c->group;
    const bool gc = c->group > 1 && !dw_k && !(c->group == c->c && c->m == c->c) && cg > 1 &&
                    cg <= 64 && mg >= 8 && (16 % mg == 0 || mg % 16 == 0) && c->dh == 1 &&
                    c->dw == 1 && c->kh <= 7 && c->kw <= 7 && c->sh <= 4 && c->sw <= 4;
    const int expect = 1 + (dw ? (int)avx2() + (int)avx512() : 0) + (sc ? (int)avx512() : 0) +
                       (gc ? (int)avx512() : 0) + (int)regions_apply(c);
    if (n != expect)
        fprintf(stderr, "ConvNhwc case c%lld %lldx%lld m%lld k%lld s%lld g%lld: %d of %d\n",
                (long long)c->c, (long long)c->h, (long long)c->w, (long long)c->m,
                (long long)c->kh, (long long)c->sh, (long long)c->group, n, expect);
    assert_int_equal(n, expect);
    optest_end(&nchw);
    optest_end(&last);
    free(want);
    free(x);
    free(w);
    free(b);
    free(x2);
    free(xl2);
    free(w2);
    free(b2);
    free(r);
    free(rl);
}

/* Edge shapes for the channels-last kernels: channels around the vectors (1, 3, 8, 15, 16, 17,
 * 33, 40) for the masked channel tail, widths with no interior column (1, 2), narrower than a
 * pixel block (5, 7) and with blocks plus a remainder (13, 16, 19, 40), channel vectors in groups
 * of 4, 2 and 1 (72, 96), both strides, 3x3, 5x5 and
 * mixed kernels, asymmetric and auto pads, batch 0 and 3; MobileNetV2's shapes; the GEMM
 * variant on 1x1, strided 1x1, 3x3, groups 2, dilation 2; and the few-input-channels kernel on
 * 1..4 channels, 1..4 output vectors (the last masked), strides 1..3, 3x3 to 7x7 kernels. */
static void test_conv_nhwc_op(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 1, 7, 7, 1, 3, 3, 1, 1, 1, 1, true),
        CASE(1, 3, 1, 1, 3, 3, 3, 1, 1, 1, 3, true),
        CASE(1, 8, 2, 5, 8, 5, 5, 1, 1, 2, 8, false),
        CASE(3, 15, 13, 13, 15, 3, 3, 2, 1, 1, 15, true),
        CASE(1, 16, 19, 19, 16, 3, 3, 1, 1, 1, 16, true),
        CASE(1, 17, 40, 40, 17, 3, 3, 2, 1, 1, 17, false),
        CASE(2, 33, 7, 7, 33, 5, 5, 1, 1, 2, 33, true),
        CASE(1, 40, 13, 5, 40, 5, 5, 2, 1, 2, 40, true),
        CASE(0, 16, 7, 7, 16, 3, 3, 1, 1, 1, 16, true),
        CASE(1, 144, 56, 56, 144, 3, 3, 2, 1, 1, 144, true), /* MobileNetV2's 56 -> 28 */
        CASE(1, 960, 7, 7, 960, 3, 3, 1, 1, 1, 960, true),
        CASE(1, 96, 9, 16, 96, 3, 3, 1, 1, 1, 96, true), /* 8 + 4 pixel blocks, 4 + 2 vectors */
        CASE(1, 72, 7, 7, 72, 5, 5, 1, 1, 2, 72, false), /* 4 + 1 vectors, no 4-block */
        {1, 20, 11, 9, 20, 3, 5, 1, 2, 1, 1, {0, 2, 1, 1}, 20, true, NULL},
        {1, 18, 10, 11, 18, 5, 3, 2, 1, 1, 1, {2, 0, 2, 1}, 18, false, NULL},
        {2, 16, 8, 9, 16, 3, 3, 2, 2, 1, 1, {0}, 16, true, "SAME_UPPER"},
        {1, 15, 13, 5, 15, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 15, true, NULL}, /* dilation 2 */
        /* dilation 2 on the depthwise kernel: DeepLabV3's 5x5 (narrow rows), wide rows with
         * asymmetric pads, and pads shorter than the dilated span */
        {1, 960, 14, 14, 960, 5, 5, 1, 1, 2, 2, {4, 4, 4, 4}, 960, true, NULL},
        {2, 40, 9, 60, 40, 5, 5, 1, 1, 2, 2, {4, 3, 2, 4}, 40, false, NULL},
        {1, 24, 12, 30, 24, 3, 3, 1, 1, 2, 2, {1, 0, 2, 1}, 24, true, NULL},
        CASE(1, 13, 7, 8, 15, 1, 1, 1, 1, 0, 1, true),
        CASE(3, 32, 5, 5, 24, 1, 1, 1, 1, 0, 1, false),
        CASE(1, 15, 13, 7, 3, 1, 1, 2, 1, 0, 1, true),
        CASE(1, 3, 17, 16, 32, 3, 3, 2, 1, 1, 1, true), /* a network's first conv */
        CASE(1, 3, 23, 21, 64, 7, 7, 2, 1, 3, 1, true), /* ResNet-50's stem: 4 vectors */
        CASE(2, 4, 9, 19, 13, 3, 3, 1, 1, 1, 1, false), /* masked channels, 8-pixel blocks */
        CASE(1, 2, 5, 3, 40, 5, 5, 3, 1, 2, 1, true),   /* stride 3, no interior column */
        {1, 1, 12, 30, 33, 5, 3, 2, 1, 1, 1, {2, 1, 0, 2}, 1, true, NULL},
        CASE(3, 14, 7, 7, 32, 3, 3, 1, 1, 1, 2, true),
    };
    /* the depthwise kernel applies the piecewise-linear ones in registers when no residual is
     * fused, the others (and any with a residual) in a second pass over the row */
    static const ir_act acts[] = {IR_ACT_NONE,         IR_ACT_CLIP,       IR_ACT_RELU,
                                  IR_ACT_HARD_SWISH,   IR_ACT_SILU,       IR_ACT_LEAKY_RELU,
                                  IR_ACT_HARD_SIGMOID, IR_ACT_HARD_SWISH, IR_ACT_RELU};
    const size_t n_acts = sizeof acts / sizeof *acts;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t k = 0; k < 3; k++)
            check_last_case(&cases[i], acts[(i + k) % n_acts], (i + k) % 2);
}

/* 1-D convs ([N, C, W]) run on the 2-D variants as H = 1: every variant that takes one matches
 * the reference, anvil's own take them (at least the implicit GEMM), and the cascade picks one of
 * anvil's (before, a 1-D conv fell to oneDNN): an audio front end's long strided window (Silero
 * VAD's STFT: kernel 128, stride 64), a padded, dilated and strided one, a depthwise one, and a
 * 1x1. */
static void test_conv_1d(void **state) {
    (void)state;
    static const struct {
        int64_t n, c, w, m, k, s, d, pb, pe, group;
    } cases[] = {
        {1, 1, 640, 24, 128, 64, 1, 0, 0, 1},
        {2, 5, 37, 6, 7, 2, 2, 3, 1, 1},
        {1, 16, 50, 16, 3, 1, 1, 1, 1, 16},
        {3, 12, 19, 20, 1, 1, 1, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        optest t;
        optest_begin(&t, IR_OP_CONV, 3, 1, 5);
        optest_attr_ints(&t, 0, "kernel_shape", (int64_t[]){cases[i].k}, 1);
        optest_attr_ints(&t, 1, "strides", (int64_t[]){cases[i].s}, 1);
        optest_attr_ints(&t, 2, "dilations", (int64_t[]){cases[i].d}, 1);
        optest_attr_int(&t, 3, "group", cases[i].group);
        optest_attr_ints(&t, 4, "pads", (int64_t[]){cases[i].pb, cases[i].pe}, 2);
        const int64_t xd[3] = {cases[i].n, cases[i].c, cases[i].w};
        const int64_t wd[3] = {cases[i].m, cases[i].c / cases[i].group, cases[i].k};
        float *x = optest_random_f32((size_t)(xd[0] * xd[1] * xd[2]), 1, -1.0f, 1.0f);
        float *w = optest_random_f32((size_t)(wd[0] * wd[1] * wd[2]), 2, -1.0f, 1.0f);
        float *b = optest_random_f32((size_t)cases[i].m, 3, -1.0f, 1.0f);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, xd, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, wd, w, true);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){cases[i].m}, b, true);
        assert_int_equal(optest_infer(&t), ANVIL_OK);
        assert_true(check_all_variants(&t) >= 1);
        op_tinfo in[OPTEST_MAX_IO];
        optest_input_info(&t, in);
        kern_node kn = {optest_node(&t), in, 3, t.out_info, 1, 2, NULL, NULL, NULL};
        const kern_variant *v = conv_auto_pick(&kn);
        assert_non_null(v);
        assert_true(strncmp(v->name, "dnnl", 4) != 0); /* anvil's own, not the vendor's */
        optest_end(&t);
        free(x);
        free(w);
        free(b);
    }
}

/* Convs whose taps mostly read padding (conv_regions.c): DeepLabV3's ASPP (rate 12 on a 14x14
 * map, and 6 on 9x10), a strided one with asymmetric pads, a 5x5 on a small map with batch 2,
 * all planned by tap (their regions would read their taps' weights 2.8 to 16 times over), and a
 * 3x1 dilated along y only, planned by region (5 taps' weights for 3); each checked with every
 * variant, fused activations (a residual is left to the runtime) and as anvil.ConvNhwc. Each must
 * be one the regions variants take, and the cascade's pick. */
static void test_conv_regions(void **state) {
    (void)state;
    static const conv_case cases[] = {
        CASE(1, 24, 14, 14, 17, 3, 3, 1, 12, 12, 1, true),
        CASE(1, 9, 9, 10, 8, 3, 3, 1, 6, 6, 1, false),
        {1, 5, 7, 6, 9, 3, 3, 2, 2, 3, 3, {4, 3, 2, 5}, 1, true, NULL},
        CASE(2, 6, 4, 5, 7, 5, 5, 1, 1, 3, 1, true),
        {1, 8, 14, 14, 10, 3, 1, 1, 1, 12, 1, {12, 0, 12, 0}, 1, true, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_true(regions_apply(&cases[i]));
        check_case(&cases[i]);
        check_fused_case(&cases[i], IR_ACT_RELU, false);
        check_fused_case(&cases[i], IR_ACT_HARD_SWISH, true);
        check_last_case(&cases[i], IR_ACT_CLIP, false);
        check_last_case(&cases[i], IR_ACT_NONE, true);
        assert_string_equal(default_pick(&cases[i], 1), "conv_nhwc_regions");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_1x1),          cmocka_unit_test(test_conv_3x3),
        cmocka_unit_test(test_conv_5x5_and_more), cmocka_unit_test(test_conv_sweep),
        cmocka_unit_test(test_conv_depthwise),    cmocka_unit_test(test_conv_runtime_weights),
        cmocka_unit_test(test_conv_fused),        cmocka_unit_test(test_conv_default_cascade),
        cmocka_unit_test(test_conv_nhwc),         cmocka_unit_test(test_conv_smallc),
        cmocka_unit_test(test_conv_nhwc_op),      cmocka_unit_test(test_conv_regions),
        cmocka_unit_test(test_conv_1d),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
