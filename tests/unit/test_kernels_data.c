/* The data family's variants (src/kernels/cpu/data) against the reference kernels: Resize and
 * Upsample in every coordinate and nearest mode, up and down, integer and odd scales, scales and
 * sizes, axes and aspect-ratio policies; Pad; Concat, Split, Slice, Gather, Expand and Tile with
 * odd shapes, broadcasting, negative axes and zero-size tensors, on several dtypes; ScatterND
 * (add and none) with repeated, negative and out-of-range indices. Each check names the family
 * variant that must apply (so one that silently stops applying fails) and runs every applicable
 * variant on 1, 2 and 3 threads. Outputs are compared byte for byte, except fp32 results of
 * arithmetic (linear resize), which get a tolerance. */
#include "kernels/kernels.h"
#include "optest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

/* n elements of dt with distinct-ish deterministic contents (malloc'd; caller frees). */
static void *random_data(anvil_dtype dt, size_t n, unsigned seed) {
    size_t es = anvil_dtype_size(dt);
    if (dt == ANVIL_DTYPE_FLOAT32) return optest_random_f32(n, seed, -4, 4);
    unsigned char *p = malloc(n * es + 1);
    if (!p) abort();
    unsigned s = seed * 2654435761u + 7;
    for (size_t i = 0; i < n * es; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (unsigned char)(s >> 24);
    }
    if (dt == ANVIL_DTYPE_BOOL)
        for (size_t i = 0; i < n; i++) p[i] &= 1;
    return p;
}

/* Whether the variant `name` of the node's op accepts the node (after inference). */
static bool applies(optest *t, const char *name) {
    if (optest_infer(t) != ANVIL_OK) {
        fprintf(stderr, "inference failed: %s\n", anvil_last_error());
        return false;
    }
    op_tinfo in[OPTEST_MAX_IO];
    optest_input_info(t, in);
    kern_node kn = {optest_node(t), in, t->n_in, t->out_info, t->n_out, 3, NULL, NULL, NULL};
    const kern_variant *v = kern_find(optest_node(t)->op, name);
    assert_non_null(v);
    return kern_applies(v, &kn, core_hw_get());
}

/* Runs the reference, then every applicable variant of the op on 1, 2 and 3 threads, comparing
 * every output: fp32 within rtol/atol when tol is set, everything else byte for byte. Asserts
 * that `name` is among the variants that ran (NULL: asserts instead that it declines). */
static void check(optest *t, const char *name, bool tol, float rtol, float atol) {
    bool want = name != NULL;
    if (want) {
        if (!applies(t, name)) fprintf(stderr, "variant %s does not apply\n", name);
        assert_true(applies(t, name));
    }
    if (optest_run(t) != ANVIL_OK) {
        fprintf(stderr, "the reference failed: %s\n", anvil_last_error());
        fail();
    }
    size_t count;
    const kern_variant *const *list = kern_variants(optest_node(t)->op, &count);
    bool ran = false, ran_simd = false;
    /* the AVX-512 sibling "<name>_avx512", where one exists and this machine can run it */
    char simd[80] = "";
    if (want) snprintf(simd, sizeof simd, "%s_avx512", name);
    const kern_variant *vs = want ? kern_find(optest_node(t)->op, simd) : NULL;
    bool want_simd = vs && kern_isa_ok(vs->needs, core_hw_get());
    for (size_t vi = 1; vi < count; vi++) {
        for (int threads = 1; threads <= 3; threads++) {
            op_tensor got[OPTEST_MAX_IO];
            size_t bytes[OPTEST_MAX_IO];
            for (int i = 0; i < t->n_out; i++) {
                got[i] = t->out[i];
                assert_true(core_tensor_bytes(got[i].dtype, got[i].dims, got[i].rank, &bytes[i]));
                got[i].data = malloc(bytes[i] ? bytes[i] : 1);
                memset(got[i].data, 0xff, bytes[i]);
            }
            anvil_status s = optest_run_variant(t, list[vi], threads, got);
            bool skip = s == ANVIL_ERR_UNSUPPORTED;
            if (!skip && s != ANVIL_OK)
                fprintf(stderr, "variant %s (%d threads) failed: %s\n", list[vi]->name, threads,
                        anvil_last_error());
            assert_true(skip || s == ANVIL_OK);
            for (int i = 0; i < t->n_out && !skip; i++) {
                bool same;
                if (tol && got[i].dtype == ANVIL_DTYPE_FLOAT32)
                    same = optest_compare_f32(got[i].data, t->out[i].data, bytes[i] / 4, rtol,
                                              atol) < 0;
                else
                    same = memcmp(got[i].data, t->out[i].data, bytes[i]) == 0;
                if (!same)
                    fprintf(stderr, "variant %s (%d threads): output %d differs\n", list[vi]->name,
                            threads, i);
                assert_true(same);
            }
            for (int i = 0; i < t->n_out; i++) free(got[i].data);
            if (skip) break;
            if (name && strcmp(list[vi]->name, name) == 0) ran = true;
            if (want_simd && list[vi] == vs) ran_simd = true;
        }
    }
    if (want) assert_true(ran);
    if (want_simd && !ran_simd) fprintf(stderr, "variant %s did not run\n", simd);
    assert_true(ran_simd == want_simd);
}

/* ---- Resize ------------------------------------------------------------------------------ */

typedef struct rz_case {
    int opset;
    const char *mode, *coord, *nearest, *policy;
    int exclude, antialias; /* -1: absent */
    const int64_t *axes;
    int n_axes;
} rz_case;

/* Builds Resize(X, roi, scales | sizes) (opset 10: X, scales) and checks it. scales or sizes
 * (count n_v values) gives the target; want: the variant that must apply, or NULL. */
static void run_resize(const rz_case *c, anvil_dtype dt, int rank, const int64_t *dims,
                       const float *scales, const int64_t *sizes, int n_v, const char *want) {
    optest t;
    int n_in = c->opset < 11 ? 2 : sizes ? 4 : 3;
    optest_begin_opset(&t, IR_OP_RESIZE, n_in, 1, 8, c->opset);
    int k = 0;
    if (c->mode) optest_attr_string(&t, k++, "mode", c->mode);
    if (c->coord) optest_attr_string(&t, k++, "coordinate_transformation_mode", c->coord);
    if (c->nearest) optest_attr_string(&t, k++, "nearest_mode", c->nearest);
    if (c->policy) optest_attr_string(&t, k++, "keep_aspect_ratio_policy", c->policy);
    if (c->exclude >= 0) optest_attr_int(&t, k++, "exclude_outside", c->exclude);
    if (c->antialias >= 0) optest_attr_int(&t, k++, "antialias", c->antialias);
    if (c->axes) optest_attr_ints(&t, k++, "axes", c->axes, (size_t)c->n_axes);
    optest_node(&t)->n_attrs = k;
    void *x = random_data(dt, optest_prod(dims, rank), (unsigned)(rank * 31 + dims[rank - 1]));
    optest_input(&t, 0, dt, rank, dims, x, false);
    static const float empty_roi[1] = {0};
    if (c->opset >= 11)
        optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){0}, empty_roi, true);
    if (sizes) {
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){0}, empty_roi, true);
        optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){n_v}, sizes, true);
    } else {
        optest_input(&t, c->opset < 11 ? 1 : 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n_v}, scales,
                     true);
    }
    check(&t, want, true, 1e-5f, 1e-5f);
    optest_end(&t);
    free(x);
}

static const char *const coords[] = {"half_pixel",         "half_pixel_symmetric",
                                     "pytorch_half_pixel", "align_corners",
                                     "asymmetric",         "tf_half_pixel_for_nn"};
static const char *const roundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/* 4-D targets: upsampling, downsampling, integer and odd scales, one axis at a time. */
static const float scale_sets[][4] = {{1, 1, 2, 2},     {1, 1, 0.5f, 0.5f}, {1, 1, 1.7f, 0.33f},
                                      {1, 1, 3, 1},     {1, 1, 1, 2.5f},    {1, 1, 0.6f, 2.2f},
                                      {1, 1, 1.01f, 4}, {1, 1, 1.3f, 1}};

static void test_resize_modes(void **state) {
    (void)state;
    const int64_t dims[4] = {2, 3, 5, 7};
    for (size_t ci = 0; ci < sizeof coords / sizeof *coords; ci++) {
        /* tf_half_pixel_for_nn exists in opsets 11-12, half_pixel_symmetric from 19 */
        int opset = ci == 5 ? 11 : 19;
        for (size_t si = 0; si < sizeof scale_sets / sizeof *scale_sets; si++) {
            for (size_t ri = 0; ri < 4; ri++) {
                rz_case c = {opset, "nearest", coords[ci], roundings[ri], NULL, -1, -1, NULL, 0};
                run_resize(&c, ANVIL_DTYPE_FLOAT32, 4, dims, scale_sets[si], NULL, 4,
                           "resize_nearest");
            }
            rz_case l = {opset, "linear", coords[ci], NULL, NULL, -1, -1, NULL, 0};
            run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, dims, scale_sets[si], NULL, 4,
                       "resize_linear_f32");
            rz_case e = {opset, "linear", coords[ci], NULL, NULL, 1, -1, NULL, 0};
            run_resize(&e, ANVIL_DTYPE_FLOAT32, 4, dims, scale_sets[si], NULL, 4,
                       "resize_linear_f32");
        }
        /* sizes instead of scales: the scale is out / in */
        static const int64_t size_sets[][4] = {
            {2, 3, 10, 14}, {2, 3, 3, 4}, {2, 3, 1, 1}, {2, 3, 9, 7}, {2, 3, 5, 20}};
        for (size_t si = 0; si < sizeof size_sets / sizeof *size_sets; si++) {
            rz_case n = {opset, "nearest", coords[ci], "round_prefer_ceil", NULL, -1, -1, NULL, 0};
            run_resize(&n, ANVIL_DTYPE_FLOAT32, 4, dims, NULL, size_sets[si], 4, "resize_nearest");
            rz_case l = {opset, "linear", coords[ci], NULL, NULL, -1, -1, NULL, 0};
            run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, dims, NULL, size_sets[si], 4,
                       "resize_linear_f32");
        }
    }
    /* opset 10: asymmetric with the legacy rounding (floor up, ceil down) */
    for (size_t si = 0; si < sizeof scale_sets / sizeof *scale_sets; si++) {
        rz_case n = {10, "nearest", NULL, NULL, NULL, -1, -1, NULL, 0};
        run_resize(&n, ANVIL_DTYPE_FLOAT32, 4, dims, scale_sets[si], NULL, 4, "resize_nearest");
        rz_case l = {10, "linear", NULL, NULL, NULL, -1, -1, NULL, 0};
        run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, dims, scale_sets[si], NULL, 4, "resize_linear_f32");
    }
}

static void test_resize_shapes(void **state) {
    (void)state;
    rz_case n = {13, "nearest", "asymmetric", "floor", NULL, -1, -1, NULL, 0};
    rz_case l = {13, "linear", "half_pixel", NULL, NULL, -1, -1, NULL, 0};
    rz_case ac = {13, "linear", "align_corners", NULL, NULL, -1, -1, NULL, 0};
    /* big enough for the thread pool; x2 takes the integer-factor nearest path */
    const int64_t big[4] = {1, 16, 48, 40};
    const float x2[4] = {1, 1, 2, 2}, x3[4] = {1, 1, 3, 3}, down[4] = {1, 1, 0.5f, 0.75f};
    run_resize(&n, ANVIL_DTYPE_FLOAT32, 4, big, x2, NULL, 4, "resize_nearest");
    run_resize(&n, ANVIL_DTYPE_FLOAT32, 4, big, x3, NULL, 4, "resize_nearest");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, big, x2, NULL, 4, "resize_linear_f32");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, big, down, NULL, 4, "resize_linear_f32");
    run_resize(&ac, ANVIL_DTYPE_FLOAT32, 4, big, x3, NULL, 4, "resize_linear_f32");
    /* other element sizes: nearest is a copy */
    const anvil_dtype dts[] = {ANVIL_DTYPE_UINT8, ANVIL_DTYPE_INT16, ANVIL_DTYPE_INT64,
                               ANVIL_DTYPE_BOOL, ANVIL_DTYPE_FLOAT16};
    const int64_t small[4] = {2, 3, 5, 6};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        run_resize(&n, dts[i], 4, small, x2, NULL, 4, "resize_nearest");
        run_resize(&n, dts[i], 4, small, down, NULL, 4, "resize_nearest");
    }
    /* linear on integers stays with the reference */
    run_resize(&l, ANVIL_DTYPE_UINT8, 4, small, x2, NULL, 4, NULL);
    /* 3-D (N, C, W) and (C, H, W) and 1-D / 2-D */
    const int64_t d3[3] = {3, 5, 11}, d1[1] = {13}, d2[2] = {6, 9};
    const float s3[3] = {1, 1, 2.5f}, s3b[3] = {1, 0.7f, 1.9f}, s1[1] = {1.6f}, s2[2] = {2, 0.5f};
    run_resize(&n, ANVIL_DTYPE_FLOAT32, 3, d3, s3, NULL, 3, "resize_nearest");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 3, d3, s3, NULL, 3, "resize_linear_f32");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 3, d3, s3b, NULL, 3, "resize_linear_f32");
    run_resize(&n, ANVIL_DTYPE_FLOAT32, 1, d1, s1, NULL, 1, "resize_nearest");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 1, d1, s1, NULL, 1, "resize_linear_f32");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 2, d2, s2, NULL, 2, "resize_linear_f32");
    /* zero-size: an empty batch, and a resize to nothing */
    const int64_t zero[4] = {0, 3, 4, 4};
    run_resize(&n, ANVIL_DTYPE_FLOAT32, 4, zero, x2, NULL, 4, "resize_nearest");
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, zero, x2, NULL, 4, "resize_linear_f32");
    const float tiny[4] = {1, 1, 0.1f, 1};
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, small, tiny, NULL, 4, "resize_linear_f32");
    /* a resized channel axis stays with the reference */
    const float chan[4] = {1, 2, 1, 1}, chan_h[4] = {1, 2, 2, 2};
    run_resize(&n, ANVIL_DTYPE_FLOAT32, 4, small, chan, NULL, 4, NULL);
    run_resize(&l, ANVIL_DTYPE_FLOAT32, 4, small, chan_h, NULL, 4, NULL);
}

static void test_resize_opset18(void **state) {
    (void)state;
    const int64_t dims[4] = {2, 3, 5, 7};
    /* axes: the listed axes take the scales / sizes */
    const int64_t hw[2] = {2, 3}, neg[2] = {-2, -1}, w_only[1] = {-1}, chan[1] = {1};
    const float s2[2] = {1.5f, 0.7f}, s1[1] = {2.2f};
    rz_case a = {18, "linear", "pytorch_half_pixel", NULL, NULL, -1, 0, hw, 2};
    run_resize(&a, ANVIL_DTYPE_FLOAT32, 4, dims, s2, NULL, 2, "resize_linear_f32");
    a.axes = neg;
    run_resize(&a, ANVIL_DTYPE_FLOAT32, 4, dims, s2, NULL, 2, "resize_linear_f32");
    a.axes = w_only;
    a.n_axes = 1;
    run_resize(&a, ANVIL_DTYPE_FLOAT32, 4, dims, s1, NULL, 1, "resize_linear_f32");
    a.axes = chan;
    run_resize(&a, ANVIL_DTYPE_FLOAT32, 4, dims, s1, NULL, 1, NULL);
    /* keep_aspect_ratio_policy with sizes */
    const int64_t sz[2] = {9, 9};
    const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    for (int i = 0; i < 3; i++) {
        rz_case p = {19, "nearest", "half_pixel", "round_prefer_floor", policies[i], -1, -1, hw, 2};
        run_resize(&p, ANVIL_DTYPE_FLOAT32, 4, dims, NULL, sz, 2, "resize_nearest");
        rz_case q = {19, "linear", "half_pixel_symmetric", NULL, policies[i], -1, -1, hw, 2};
        run_resize(&q, ANVIL_DTYPE_FLOAT32, 4, dims, NULL, sz, 2, "resize_linear_f32");
    }
    /* antialias and cubic stay with the reference */
    const float down[4] = {1, 1, 0.5f, 0.6f};
    rz_case aa = {18, "linear", "half_pixel", NULL, NULL, -1, 1, NULL, 0};
    run_resize(&aa, ANVIL_DTYPE_FLOAT32, 4, dims, down, NULL, 4, NULL);
    rz_case cu = {18, "cubic", "half_pixel", NULL, NULL, -1, -1, NULL, 0};
    run_resize(&cu, ANVIL_DTYPE_FLOAT32, 4, dims, down, NULL, 4, NULL);
}

/* Upsample (opset 7: scales attribute; opset 9: scales input). */
static void run_upsample(int opset, const char *mode, int rank, const int64_t *dims,
                         const float *scales, const char *want) {
    optest t;
    optest_begin_opset(&t, IR_OP_UPSAMPLE, opset < 9 ? 1 : 2, 1, opset < 9 ? 2 : 1, opset);
    optest_attr_string(&t, 0, "mode", mode);
    if (opset < 9) optest_attr_floats(&t, 1, "scales", scales, (size_t)rank);
    float *x = optest_random_f32(optest_prod(dims, rank), 3, -2, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, rank, dims, x, false);
    if (opset >= 9) optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){rank}, scales, true);
    check(&t, want, true, 1e-5f, 1e-5f);
    optest_end(&t);
    free(x);
}

static void test_upsample(void **state) {
    (void)state;
    const int64_t dims[4] = {2, 3, 5, 7};
    const float x2[4] = {1, 1, 2, 2}, odd[4] = {1, 1, 1.5f, 2.7f}, chan[4] = {1, 2, 2, 2};
    for (int opset = 7; opset <= 9; opset += 2) {
        run_upsample(opset, "nearest", 4, dims, x2, "upsample_nearest");
        run_upsample(opset, "nearest", 4, dims, odd, "upsample_nearest");
        run_upsample(opset, "linear", 4, dims, x2, "upsample_linear_f32");
        run_upsample(opset, "bilinear", 4, dims, odd, "upsample_linear_f32");
        run_upsample(opset, "nearest", 4, dims, chan, NULL);
    }
}

/* ---- Pad --------------------------------------------------------------------------------- */

/* Pad at opset >= 11: (data, pads[, constant_value[, axes]]). value: NULL leaves the constant
 * out; value_known: whether the constant is visible at plan time; axes: NULL leaves it out. */
static void run_pad(int opset, const char *mode, anvil_dtype dt, int rank, const int64_t *dims,
                    const int64_t *pads, int n_pads, const void *value, bool value_known,
                    const int64_t *axes, int n_axes, bool pads_known, const char *want) {
    optest t;
    int n_in = axes ? 4 : value ? 3 : 2;
    optest_begin_opset(&t, IR_OP_PAD, n_in, 1, 1, opset);
    optest_attr_string(&t, 0, "mode", mode);
    void *x = random_data(dt, optest_prod(dims, rank), (unsigned)(rank * 7 + dims[0]));
    optest_input(&t, 0, dt, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){n_pads}, pads, pads_known);
    if (value) optest_input(&t, 2, dt, 0, NULL, value, value_known);
    if (axes) optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){n_axes}, axes, true);
    if (pads_known)
        check(&t, want, false, 0, 0);
    else
        assert_false(applies(&t, "pad_rows"));
    optest_end(&t);
    free(x);
}

static void test_pad(void **state) {
    (void)state;
    const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
    const int64_t d4[4] = {2, 3, 5, 7}, big[4] = {1, 16, 56, 57};
    const int64_t p1[8] = {0, 0, 1, 1, 0, 0, 1, 1}, p2[8] = {1, 0, 2, 3, 0, 2, 4, 0};
    const int64_t crop[8] = {0, -1, 2, -3, 0, 1, -1, 2}, far[8] = {0, 0, 6, 9, 0, 0, 7, 13};
    const float v = 2.5f, zero = 0;
    for (int m = 0; m < 4; m++) {
        const char *want = "pad_rows";
        run_pad(19, modes[m], ANVIL_DTYPE_FLOAT32, 4, d4, p1, 8, NULL, false, NULL, 0, true, want);
        run_pad(19, modes[m], ANVIL_DTYPE_FLOAT32, 4, d4, p2, 8, &v, true, NULL, 0, true, want);
        run_pad(19, modes[m], ANVIL_DTYPE_FLOAT32, 4, d4, crop, 8, &v, false, NULL, 0, true, want);
        run_pad(19, modes[m], ANVIL_DTYPE_FLOAT32, 4, d4, far, 8, &zero, true, NULL, 0, true, want);
        run_pad(19, modes[m], ANVIL_DTYPE_FLOAT32, 4, big, p1, 8, &v, true, NULL, 0, true, want);
    }
    /* axes (opset 18), negative ones too */
    const int64_t ax[2] = {-1, 1}, pa[4] = {2, 1, 0, 3};
    run_pad(18, "constant", ANVIL_DTYPE_FLOAT32, 4, d4, pa, 4, &v, true, ax, 2, true, "pad_rows");
    run_pad(18, "reflect", ANVIL_DTYPE_FLOAT32, 4, d4, pa, 4, NULL, true, ax, 2, true, "pad_rows");
    /* other dtypes, ranks and zero-size tensors */
    const uint8_t u8 = 7;
    const int64_t i64 = -5;
    const uint16_t f16 = 0x3c00;
    run_pad(13, "constant", ANVIL_DTYPE_UINT8, 4, d4, p2, 8, &u8, true, NULL, 0, true, "pad_rows");
    run_pad(13, "constant", ANVIL_DTYPE_INT64, 4, d4, p2, 8, &i64, false, NULL, 0, true,
            "pad_rows");
    run_pad(13, "edge", ANVIL_DTYPE_FLOAT16, 4, d4, p2, 8, &f16, true, NULL, 0, true, "pad_rows");
    const int64_t d1[1] = {9}, q1[2] = {3, 4}, d5[5] = {2, 1, 3, 2, 4};
    const int64_t q5[10] = {1, 0, 1, 0, 2, 0, 1, 0, 1, 1};
    run_pad(13, "reflect", ANVIL_DTYPE_FLOAT32, 1, d1, q1, 2, NULL, false, NULL, 0, true,
            "pad_rows");
    run_pad(13, "constant", ANVIL_DTYPE_INT16, 5, d5, q5, 10, NULL, false, NULL, 0, true,
            "pad_rows");
    const int64_t z[4] = {2, 0, 5, 7}, zw[4] = {2, 3, 5, 0}, all[8] = {0, 0, 0, -5, 0, 0, 0, 0};
    run_pad(13, "constant", ANVIL_DTYPE_FLOAT32, 4, z, p1, 8, &v, true, NULL, 0, true, "pad_rows");
    run_pad(13, "constant", ANVIL_DTYPE_FLOAT32, 4, zw, p1, 8, &v, true, NULL, 0, true, "pad_rows");
    run_pad(13, "constant", ANVIL_DTYPE_FLOAT32, 4, d4, all, 8, &v, true, NULL, 0, true,
            "pad_rows");
    /* pads only known at run time stay with the reference */
    run_pad(13, "constant", ANVIL_DTYPE_FLOAT32, 4, d4, p1, 8, &v, true, NULL, 0, false, NULL);
}

/* Pad before opset 11: pads and value are attributes. */
static void test_pad_attrs(void **state) {
    (void)state;
    const int64_t d3[3] = {3, 4, 6}, pads[6] = {0, 1, 2, 1, 0, 3};
    const char *const modes[] = {"constant", "reflect", "edge"};
    for (int m = 0; m < 3; m++) {
        optest t;
        optest_begin_opset(&t, IR_OP_PAD, 1, 1, 3, 2);
        optest_attr_string(&t, 0, "mode", modes[m]);
        optest_attr_ints(&t, 1, "pads", pads, 6);
        optest_attr_float(&t, 2, "value", -1.5f);
        float *x = optest_random_f32(optest_prod(d3, 3), 5, -1, 1);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, d3, x, false);
        check(&t, "pad_rows", false, 0, 0);
        optest_end(&t);
        free(x);
    }
}

/* ---- Concat and Split -------------------------------------------------------------------- */

static void run_concat(anvil_dtype dt, int n, int rank, const int64_t *dims, const int64_t *sizes,
                       int64_t axis) {
    optest t;
    optest_begin(&t, IR_OP_CONCAT, n, 1, 1);
    optest_attr_int(&t, 0, "axis", axis);
    void *x[8];
    int a = (int)(axis < 0 ? axis + rank : axis);
    for (int i = 0; i < n; i++) {
        int64_t d[IR_MAX_RANK];
        memcpy(d, dims, (size_t)rank * sizeof *d);
        d[a] = sizes[i];
        x[i] = random_data(dt, optest_prod(d, rank), (unsigned)i + 1);
        optest_input(&t, i, dt, rank, d, x[i], false);
    }
    check(&t, "concat_copy", false, 0, 0);
    optest_end(&t);
    for (int i = 0; i < n; i++) free(x[i]);
}

static void test_concat(void **state) {
    (void)state;
    const int64_t d4[4] = {2, 3, 5, 7}, s3[3] = {3, 1, 4}, s0[3] = {0, 2, 0};
    const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_UINT8, ANVIL_DTYPE_INT64,
                               ANVIL_DTYPE_FLOAT16};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++)
        for (int64_t axis = -4; axis < 4; axis++) {
            run_concat(dts[i], 3, 4, d4, s3, axis);
            run_concat(dts[i], 3, 4, d4, s0, axis);
        }
    const int64_t big[4] = {1, 64, 20, 20}, s4[4] = {64, 64, 64, 64}, odd[4] = {17, 1, 40, 3};
    run_concat(ANVIL_DTYPE_FLOAT32, 4, 4, big, s4, 1);
    run_concat(ANVIL_DTYPE_FLOAT32, 4, 4, big, odd, 1);
    run_concat(ANVIL_DTYPE_FLOAT32, 4, 4, big, odd, 0);
    run_concat(ANVIL_DTYPE_INT16, 4, 4, big, odd, -1);
    const int64_t one[1] = {9}, zero[4] = {0, 3, 5, 7};
    run_concat(ANVIL_DTYPE_FLOAT32, 1, 1, one, one, 0);
    run_concat(ANVIL_DTYPE_FLOAT32, 3, 4, zero, s3, 1);
}

/* Split at opset 13 with sizes (input 1), or opset 18 with num_outputs (sizes NULL). */
static void run_split(anvil_dtype dt, int rank, const int64_t *dims, int64_t axis, int n_out,
                      const int64_t *sizes) {
    optest t;
    optest_begin_opset(&t, IR_OP_SPLIT, sizes ? 2 : 1, n_out, sizes ? 1 : 2, sizes ? 13 : 18);
    optest_attr_int(&t, 0, "axis", axis);
    if (!sizes) optest_attr_int(&t, 1, "num_outputs", n_out);
    void *x = random_data(dt, optest_prod(dims, rank), 11);
    optest_input(&t, 0, dt, rank, dims, x, false);
    if (sizes) optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){n_out}, sizes, true);
    check(&t, "split_copy", false, 0, 0);
    optest_end(&t);
    free(x);
}

static void test_split(void **state) {
    (void)state;
    const int64_t d4[4] = {2, 6, 5, 7}, s3[3] = {1, 0, 5}, big[4] = {1, 96, 24, 24};
    const int64_t sb[3] = {32, 31, 33};
    run_split(ANVIL_DTYPE_FLOAT32, 4, d4, 1, 3, s3);
    run_split(ANVIL_DTYPE_UINT8, 4, d4, 1, 3, s3);
    run_split(ANVIL_DTYPE_INT64, 4, d4, -3, 3, s3);
    run_split(ANVIL_DTYPE_FLOAT32, 4, d4, -1, 3, NULL); /* 7 into 3, 3, 1 */
    run_split(ANVIL_DTYPE_FLOAT16, 4, d4, 0, 2, NULL);
    run_split(ANVIL_DTYPE_FLOAT32, 4, d4, 2, 3, NULL);
    run_split(ANVIL_DTYPE_FLOAT32, 4, big, 1, 3, sb);
    run_split(ANVIL_DTYPE_FLOAT32, 4, big, 1, 2, NULL);
    const int64_t zero[4] = {0, 6, 5, 7};
    run_split(ANVIL_DTYPE_FLOAT32, 4, zero, 1, 3, s3);
}

/* ---- Slice ------------------------------------------------------------------------------- */

/* Slice at opset 13 (lists as inputs; axes / steps NULL leave them out). */
static void run_slice(anvil_dtype dt, int rank, const int64_t *dims, int k, const int64_t *starts,
                      const int64_t *ends, const int64_t *axes, const int64_t *steps, bool known) {
    optest t;
    optest_begin(&t, IR_OP_SLICE, steps ? 5 : axes ? 4 : 3, 1, 0);
    void *x = random_data(dt, optest_prod(dims, rank), 13);
    optest_input(&t, 0, dt, rank, dims, x, false);
    const int64_t kd[1] = {k};
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, kd, starts, known);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, kd, ends, true);
    if (axes) optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, kd, axes, true);
    if (steps) optest_input(&t, 4, ANVIL_DTYPE_INT64, 1, kd, steps, true);
    if (known)
        check(&t, "slice_copy", false, 0, 0);
    else
        assert_false(applies(&t, "slice_copy"));
    optest_end(&t);
    free(x);
}

static void test_slice(void **state) {
    (void)state;
    const int64_t shuffle[4] = {1, 116, 28, 28}, d4[4] = {2, 5, 6, 7};
    /* half of the channels, either half */
    run_slice(ANVIL_DTYPE_FLOAT32, 4, shuffle, 1, (int64_t[]){0}, (int64_t[]){58}, (int64_t[]){1},
              NULL, true);
    run_slice(ANVIL_DTYPE_FLOAT32, 4, shuffle, 1, (int64_t[]){58}, (int64_t[]){INT64_MAX},
              (int64_t[]){-3}, NULL, true);
    const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_UINT8, ANVIL_DTYPE_INT64};
    for (size_t i = 0; i < 3; i++) {
        anvil_dtype dt = dts[i];
        /* every axis at once, odd bounds, steps forward and back */
        run_slice(dt, 4, d4, 4, (int64_t[]){0, 1, -5, 2}, (int64_t[]){2, 4, 5, 7}, NULL, NULL,
                  true);
        run_slice(dt, 4, d4, 2, (int64_t[]){-1, 1}, (int64_t[]){INT64_MIN, 7}, (int64_t[]){-1, 2},
                  (int64_t[]){-1, 2}, true);
        run_slice(dt, 4, d4, 3, (int64_t[]){4, 0, 6}, (int64_t[]){0, 6, -8}, (int64_t[]){1, 2, 3},
                  (int64_t[]){-2, 3, -3}, true);
        run_slice(dt, 4, d4, 1, (int64_t[]){1}, (int64_t[]){2}, (int64_t[]){-1}, NULL, true);
        run_slice(dt, 4, d4, 1, (int64_t[]){3}, (int64_t[]){3}, (int64_t[]){0}, NULL, true);
    }
    const int64_t big[3] = {3, 200, 300};
    run_slice(ANVIL_DTYPE_FLOAT32, 3, big, 2, (int64_t[]){1, 7}, (int64_t[]){190, 298},
              (int64_t[]){1, 2}, (int64_t[]){1, 3}, true);
    run_slice(ANVIL_DTYPE_FLOAT32, 3, big, 1, (int64_t[]){5}, (int64_t[]){150}, (int64_t[]){1},
              NULL, true);
    const int64_t zero[3] = {0, 4, 5};
    run_slice(ANVIL_DTYPE_FLOAT32, 3, zero, 1, (int64_t[]){1}, (int64_t[]){3}, (int64_t[]){1}, NULL,
              true);
    /* starts only known at run time stay with the reference */
    run_slice(ANVIL_DTYPE_FLOAT32, 4, d4, 1, (int64_t[]){1}, (int64_t[]){3}, (int64_t[]){1}, NULL,
              false);
    /* opset 9: attributes */
    optest t;
    optest_begin_opset(&t, IR_OP_SLICE, 1, 1, 3, 9);
    optest_attr_ints(&t, 0, "starts", (int64_t[]){1, -3}, 2);
    optest_attr_ints(&t, 1, "ends", (int64_t[]){100, -1}, 2);
    optest_attr_ints(&t, 2, "axes", (int64_t[]){3, 1}, 2);
    float *x = optest_random_f32(optest_prod(d4, 4), 9, -1, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, d4, x, false);
    check(&t, "slice_copy", false, 0, 0);
    optest_end(&t);
    free(x);
}

/* ---- Gather ------------------------------------------------------------------------------ */

static void run_gather(anvil_dtype dt, int rank, const int64_t *dims, int64_t axis, anvil_dtype idt,
                       int irank, const int64_t *idims, const int64_t *idx, bool known) {
    optest t;
    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", axis);
    void *x = random_data(dt, optest_prod(dims, rank), 17);
    size_t q = optest_prod(idims, irank);
    int32_t idx32[64];
    for (size_t i = 0; i < q && i < 64; i++) idx32[i] = (int32_t)idx[i];
    optest_input(&t, 0, dt, rank, dims, x, false);
    optest_input(&t, 1, idt, irank, idims, idt == ANVIL_DTYPE_INT32 ? (void *)idx32 : idx, known);
    check(&t, "gather_copy", false, 0, 0);
    optest_end(&t);
    free(x);
}

static void test_gather(void **state) {
    (void)state;
    const int64_t d4[4] = {2, 5, 6, 7}, i2[2] = {2, 3}, i1[1] = {4};
    const int64_t idx[6] = {0, -1, 3, 2, -5, 4};
    const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_UINT8, ANVIL_DTYPE_INT64,
                               ANVIL_DTYPE_FLOAT16};
    for (size_t i = 0; i < 4; i++)
        for (int64_t axis = -4; axis < 4; axis++) {
            int a = (int)(axis < 0 ? axis + 4 : axis);
            int64_t lim = d4[a], fit[6];
            for (int k = 0; k < 6; k++) fit[k] = idx[k] % lim;
            run_gather(dts[i], 4, d4, axis, ANVIL_DTYPE_INT64, 2, i2, fit, (i + a) % 2 == 0);
            run_gather(dts[i], 4, d4, axis, ANVIL_DTYPE_INT32, 1, i1, fit, true);
            run_gather(dts[i], 4, d4, axis, ANVIL_DTYPE_INT64, 0, NULL, fit + 1, false);
        }
    /* embedding-like: many rows from a big table */
    const int64_t table[2] = {500, 96}, many[1] = {48};
    int64_t rows[48];
    for (int k = 0; k < 48; k++) rows[k] = (k * 37) % 500 - (k % 3 == 0 ? 500 : 0);
    run_gather(ANVIL_DTYPE_FLOAT32, 2, table, 0, ANVIL_DTYPE_INT64, 1, many, rows, false);
    const int64_t none[1] = {0};
    run_gather(ANVIL_DTYPE_FLOAT32, 4, d4, 1, ANVIL_DTYPE_INT64, 1, none, idx, true);
}

/* An index out of range: the variant fails exactly like the reference, message included. */
static void test_gather_bounds(void **state) {
    (void)state;
    const int64_t d2[2] = {4, 3}, i2[2] = {2, 2}, bad[4] = {0, 1, -5, 2};
    optest t;
    optest_begin(&t, IR_OP_GATHER, 2, 1, 1);
    optest_attr_int(&t, 0, "axis", -2);
    float *x = optest_random_f32(12, 1, -1, 1);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, d2, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, i2, bad, false);
    assert_int_equal(optest_run(&t), ANVIL_ERR_RUNTIME);
    char want[512];
    snprintf(want, sizeof want, "%s", anvil_last_error());
    assert_true(applies(&t, "gather_copy"));
    op_tensor got = t.out[0];
    got.data = malloc(6 * sizeof(float));
    assert_int_equal(optest_run_variant(&t, kern_find(IR_OP_GATHER, "gather_copy"), 2, &got),
                     ANVIL_ERR_RUNTIME);
    assert_string_equal(anvil_last_error(), want);
    free(got.data);
    optest_end(&t);
    free(x);
}

/* ---- Expand and Tile --------------------------------------------------------------------- */

static void run_expand(anvil_dtype dt, int rank, const int64_t *dims, int srank,
                       const int64_t *shape) {
    optest t;
    optest_begin(&t, IR_OP_EXPAND, 2, 1, 0);
    void *x = random_data(dt, optest_prod(dims, rank), 19);
    optest_input(&t, 0, dt, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){srank}, shape, true);
    check(&t, "expand_copy", false, 0, 0);
    optest_end(&t);
    free(x);
}

static void test_expand(void **state) {
    (void)state;
    const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_BOOL, ANVIL_DTYPE_INT64};
    for (size_t i = 0; i < 3; i++) {
        run_expand(dts[i], 2, (int64_t[]){3, 1}, 3, (int64_t[]){2, 3, 4});
        run_expand(dts[i], 1, (int64_t[]){1}, 1, (int64_t[]){5});
        run_expand(dts[i], 3, (int64_t[]){2, 1, 4}, 3, (int64_t[]){2, 3, 4});
        run_expand(dts[i], 3, (int64_t[]){1, 3, 1}, 4, (int64_t[]){2, 1, 3, 5});
        run_expand(dts[i], 2, (int64_t[]){3, 4}, 2, (int64_t[]){1, 1}); /* a copy */
        run_expand(dts[i], 2, (int64_t[]){3, 1}, 2, (int64_t[]){3, 0});
    }
    run_expand(ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 64, 1, 1}, 4, (int64_t[]){2, 64, 30, 31});
    run_expand(ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 70000}, 2, (int64_t[]){3, 70000});
    run_expand(ANVIL_DTYPE_FLOAT32, 0, NULL, 2, (int64_t[]){3, 7});
}

static void run_tile(anvil_dtype dt, int rank, const int64_t *dims, const int64_t *reps) {
    optest t;
    optest_begin(&t, IR_OP_TILE, 2, 1, 0);
    void *x = random_data(dt, optest_prod(dims, rank), 23);
    optest_input(&t, 0, dt, rank, dims, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){rank}, reps, true);
    check(&t, "tile_copy", false, 0, 0);
    optest_end(&t);
    free(x);
}

static void test_tile(void **state) {
    (void)state;
    const anvil_dtype dts[] = {ANVIL_DTYPE_FLOAT32, ANVIL_DTYPE_UINT8, ANVIL_DTYPE_INT64};
    for (size_t i = 0; i < 3; i++) {
        run_tile(dts[i], 3, (int64_t[]){2, 3, 4}, (int64_t[]){2, 1, 3});
        run_tile(dts[i], 3, (int64_t[]){2, 1, 5}, (int64_t[]){1, 4, 1});
        run_tile(dts[i], 1, (int64_t[]){7}, (int64_t[]){5});
        run_tile(dts[i], 2, (int64_t[]){3, 4}, (int64_t[]){1, 1});
        run_tile(dts[i], 2, (int64_t[]){3, 4}, (int64_t[]){0, 2});
        run_tile(dts[i], 2, (int64_t[]){0, 4}, (int64_t[]){3, 2});
    }
    run_tile(ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 32, 20, 20}, (int64_t[]){2, 1, 2, 3});
    run_tile(ANVIL_DTYPE_FLOAT32, 0, NULL, NULL);
}

/* ---- ScatterND --------------------------------------------------------------------------- */

/* ScatterND(data, indices, updates) of dtype dt with reduction red (NULL: the attribute absent),
 * data of shape dims (zeros when zero, else random; known: a constant the variant sees at
 * prepare), q index tuples of k values each (idx), updates of shape [q] + dims[k:]. The output
 * must be the reference's byte for byte: repeated indices add in the reference's order. */
static void run_scatternd(anvil_dtype dt, const char *red, int rank, const int64_t *dims, bool zero,
                          bool known, int64_t q, int64_t k, const int64_t *idx) {
    optest t;
    optest_begin(&t, IR_OP_SCATTERND, 3, 1, red ? 1 : 0);
    if (red) optest_attr_string(&t, 0, "reduction", red);
    const size_t n = optest_prod(dims, rank);
    void *x = random_data(dt, n, 29);
    if (zero) memset(x, 0, n * anvil_dtype_size(dt));
    int64_t ud[IR_MAX_RANK] = {q};
    for (int i = (int)k; i < rank; i++) ud[1 + i - k] = dims[i];
    const int urank = 1 + rank - (int)k;
    void *u = random_data(dt, optest_prod(ud, urank), 31);
    optest_input(&t, 0, dt, rank, dims, x, known);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){q, k}, idx, false);
    optest_input(&t, 2, dt, urank, ud, u, false);
    check(&t, "scatternd_add", false, 0, 0);
    optest_end(&t);
    free(x);
    free(u);
}

/* q row indices into rows, with repeats and negative spellings */
static int64_t *rows_of(int64_t q, int64_t rows, unsigned seed) {
    int64_t *r = malloc(sizeof *r * (size_t)(q ? q : 1));
    unsigned s = seed * 2654435761u + 3;
    for (int64_t i = 0; i < q; i++) {
        s = s * 1664525u + 1013904223u;
        int64_t v = (int64_t)(s >> 8) % rows;
        r[i] = (s >> 4) % 3 == 0 ? v - rows : v;
    }
    return r;
}

static void test_scatternd(void **state) {
    (void)state;
    const anvil_dtype f32 = ANVIL_DTYPE_FLOAT32;
    /* the Gather gradient: rows of a zero table (constant, or computed), repeats summed */
    int64_t *r1 = rows_of(21, 50, 1);
    run_scatternd(f32, "add", 2, (int64_t[]){50, 40}, true, true, 21, 1, r1);
    run_scatternd(f32, "add", 2, (int64_t[]){50, 40}, true, false, 21, 1, r1);
    run_scatternd(f32, "add", 2, (int64_t[]){50, 40}, false, true, 21, 1, r1);
    /* odd row lengths, few rows hit many times (a token-type table) */
    int64_t *r2 = rows_of(300, 2, 2);
    run_scatternd(f32, "add", 2, (int64_t[]){2, 33}, false, false, 300, 1, r2);
    run_scatternd(f32, "add", 2, (int64_t[]){2, 1}, false, false, 300, 1, r2);
    run_scatternd(f32, "add", 2, (int64_t[]){2, 517}, true, true, 300, 1, r2);
    /* enough work for the columns to be split across threads; a table past the parallel copy */
    int64_t *r3 = rows_of(200, 2100, 3);
    run_scatternd(f32, "add", 2, (int64_t[]){2100, 512}, true, true, 200, 1, r3);
    run_scatternd(f32, "add", 2, (int64_t[]){2100, 512}, false, false, 200, 1, r3);
    run_scatternd(f32, "none", 2, (int64_t[]){2100, 512}, false, false, 200, 1, r3);
    /* tuples of 2 and 3 indices: slices of a 3-D tensor, and single elements */
    const int64_t i2[20] = {0, 1, 3, -1, -4, 4, 2, 2, 0, 1, 3, 0, -1, -5, 1, 1, 0, 1, 2, 3};
    run_scatternd(f32, "add", 3, (int64_t[]){4, 5, 6}, false, false, 10, 2, i2);
    run_scatternd(f32, "add", 2, (int64_t[]){4, 5}, false, false, 10, 2, i2);
    const int64_t i3[9] = {1, 2, 3, -1, 0, 0, 1, 2, 3};
    run_scatternd(f32, "add", 3, (int64_t[]){2, 3, 4}, false, false, 3, 3, i3);
    /* reduction none (absent or named) on several dtypes: a repeated index keeps the last */
    run_scatternd(f32, NULL, 3, (int64_t[]){4, 5, 6}, false, false, 10, 2, i2);
    run_scatternd(ANVIL_DTYPE_INT64, "none", 2, (int64_t[]){50, 40}, false, false, 21, 1, r1);
    run_scatternd(ANVIL_DTYPE_UINT8, "none", 2, (int64_t[]){2, 33}, false, true, 300, 1, r2);
    /* no tuples */
    run_scatternd(f32, "add", 2, (int64_t[]){50, 40}, false, false, 0, 1, r1);
    free(r1);
    free(r2);
    free(r3);
}

/* An index out of range (past the end, and below -dim): the variant fails exactly like the
 * reference, message included, and writes nothing. */
static void test_scatternd_bounds(void **state) {
    (void)state;
    const int64_t dims[2] = {6, 20}, bad[2][4] = {{0, 5, 6, 1}, {0, -7, 1, 2}};
    for (int b = 0; b < 2; b++) {
        optest t;
        optest_begin(&t, IR_OP_SCATTERND, 3, 1, 1);
        optest_attr_string(&t, 0, "reduction", "add");
        float *x = optest_random_f32(120, 1, -1, 1), *u = optest_random_f32(80, 2, -1, 1);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, dims, x, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 2, (int64_t[]){4, 1}, bad[b], false);
        optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 20}, u, false);
        assert_int_equal(optest_run(&t), ANVIL_ERR_RUNTIME);
        char want[512];
        snprintf(want, sizeof want, "%s", anvil_last_error());
        assert_true(applies(&t, "scatternd_add"));
        op_tensor got = t.out[0];
        got.data = malloc(120 * sizeof(float));
        memset(got.data, 0xff, 120 * sizeof(float));
        for (int threads = 1; threads <= 3; threads++) {
            const kern_variant *v = kern_find(IR_OP_SCATTERND, "scatternd_add");
            assert_int_equal(optest_run_variant(&t, v, threads, &got), ANVIL_ERR_RUNTIME);
            assert_string_equal(anvil_last_error(), want);
        }
        const unsigned char *p = got.data;
        for (size_t i = 0; i < 120 * sizeof(float); i++) assert_int_equal(p[i], 0xff);
        free(got.data);
        optest_end(&t);
        free(x);
        free(u);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_modes),
        cmocka_unit_test(test_resize_shapes),
        cmocka_unit_test(test_resize_opset18),
        cmocka_unit_test(test_upsample),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_pad_attrs),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_bounds),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_tile),
        cmocka_unit_test(test_scatternd),
        cmocka_unit_test(test_scatternd_bounds),
    };
    return cmocka_run_group_tests(tests, optest_env, NULL);
}
