/* Resize reference kernel: the ONNX backend-test examples (expected values produced by the ONNX
 * reference implementation: nearest modes, linear, cubic with exclude_outside, antialias,
 * half_pixel_symmetric, tf_crop_and_resize with extrapolation, keep_aspect_ratio_policy),
 * randomised problems against a naive resize written here (non-separable: every output element
 * sums the product of per-axis weights over the Cartesian product of taps, with the reference's
 * own tap convention), opset 10 legacy rounding, integer rounding and saturation, byte-moving
 * nearest on INT64/BOOL, multi-threaded runs, symbolic shapes and the errors bad models must
 * produce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"
#include "runtime/runtime.h"

static uint64_t rng_state = 0x2f9c5a7e31b4d86bull;

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

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

/* Attributes of one Resize node; NULL / 0 fields are left out of the node. */
typedef struct rs_attrs {
    const char *mode, *coord, *nearest, *policy;
    float cubic_a, extrap;
    bool has_cubic_a, has_extrap;
    int exclude, antialias; /* -1: absent */
    const int64_t *axes;
    int n_axes;
} rs_attrs;

static int set_attrs(optest *t, const rs_attrs *a) {
    int k = 0;
    if (a->mode) optest_attr_string(t, k++, "mode", a->mode);
    if (a->coord) optest_attr_string(t, k++, "coordinate_transformation_mode", a->coord);
    if (a->nearest) optest_attr_string(t, k++, "nearest_mode", a->nearest);
    if (a->policy) optest_attr_string(t, k++, "keep_aspect_ratio_policy", a->policy);
    if (a->has_cubic_a) optest_attr_float(t, k++, "cubic_coeff_a", a->cubic_a);
    if (a->has_extrap) optest_attr_float(t, k++, "extrapolation_value", a->extrap);
    if (a->exclude >= 0) optest_attr_int(t, k++, "exclude_outside", a->exclude);
    if (a->antialias >= 0) optest_attr_int(t, k++, "antialias", a->antialias);
    if (a->axes) optest_attr_ints(t, k++, "axes", a->axes, (size_t)a->n_axes);
    return k;
}

/* Builds and runs a Resize: opset >= 11 takes (X, roi, scales, sizes), opset 10 (X, scales).
 * Counts of -1 leave an input out; 0 gives an empty tensor. */
static anvil_status resize_run(optest *t, int opset, const rs_attrs *a, anvil_dtype dt, int rank,
                               const int64_t *dims, const void *x, const float *roi, int n_roi,
                               const float *scales, int n_scales, const int64_t *sizes,
                               int n_sizes) {
    int n_in = opset < 11 ? 2 : n_sizes >= 0 ? 4 : 3;
    optest_begin_opset(t, IR_OP_RESIZE, n_in, 1, 9, opset);
    optest_node(t)->n_attrs = set_attrs(t, a);
    optest_input(t, 0, dt, rank, dims, x, false);
    int si = opset < 11 ? 1 : 2;
    if (opset >= 11 && n_roi >= 0)
        optest_input(t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n_roi}, roi, true);
    if (n_scales >= 0)
        optest_input(t, si, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n_scales}, scales, true);
    if (opset >= 11 && n_sizes >= 0)
        optest_input(t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){n_sizes}, sizes, true);
    anvil_status s = optest_run(t);
    if (s != ANVIL_OK) fprintf(stderr, "%s\n", anvil_last_error());
    return s;
}

static const float ramp16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const int64_t d4x4[4] = {1, 1, 4, 4}, d2x2[4] = {1, 1, 2, 2}, d2x4[4] = {1, 1, 2, 4};

static void expect_out(optest *t, int64_t h, int64_t w, const float *want, float rtol) {
    assert_int_equal(t->out[0].dims[2], h);
    assert_int_equal(t->out[0].dims[3], w);
    assert_int_equal(optest_compare_f32(t->out[0].data, want, (size_t)(h * w), rtol, 1e-6f), -1);
    optest_end(t);
}

/* ---- backend-test examples ---------------------------------------------------------------------
 */

static void test_resize_examples_nearest(void **state) {
    (void)state;
    optest t;
    const rs_attrs nearest = {.mode = "nearest", .exclude = -1, .antialias = -1};
    const float x4[4] = {1, 2, 3, 4};
    assert_int_equal(resize_run(&t, 19, &nearest, ANVIL_DTYPE_FLOAT32, 4, d2x2, x4, NULL, -1,
                                (float[]){1, 1, 2, 3}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 4, 6,
               (float[]){1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4},
               0);
    assert_int_equal(resize_run(&t, 19, &nearest, ANVIL_DTYPE_FLOAT32, 4, d2x4, ramp16, NULL, -1,
                                (float[]){1, 1, 0.6f, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 1, 2, (float[]){1, 3}, 0);

    const float ceil_hp[64] = {1,  2,  2,  3,  3,  4,  4,  4,  5,  6,  6,  7,  7,  8,  8,  8,
                               5,  6,  6,  7,  7,  8,  8,  8,  9,  10, 10, 11, 11, 12, 12, 12,
                               9,  10, 10, 11, 11, 12, 12, 12, 13, 14, 14, 15, 15, 16, 16, 16,
                               13, 14, 14, 15, 15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16};
    const float floor_ac[64] = {1, 1, 1, 2,  2,  3,  3,  4,  1,  1,  1,  2,  2,  3,  3,  4,
                                1, 1, 1, 2,  2,  3,  3,  4,  5,  5,  5,  6,  6,  7,  7,  8,
                                5, 5, 5, 6,  6,  7,  7,  8,  9,  9,  9,  10, 10, 11, 11, 12,
                                9, 9, 9, 10, 10, 11, 11, 12, 13, 13, 13, 14, 14, 15, 15, 16};
    const rs_attrs ceil_a = {.mode = "nearest",
                             .coord = "half_pixel",
                             .nearest = "ceil",
                             .exclude = -1,
                             .antialias = -1};
    const rs_attrs floor_a = {.mode = "nearest",
                              .coord = "align_corners",
                              .nearest = "floor",
                              .exclude = -1,
                              .antialias = -1};
    const rs_attrs rpc_a = {.mode = "nearest",
                            .coord = "asymmetric",
                            .nearest = "round_prefer_ceil",
                            .exclude = -1,
                            .antialias = -1};
    const int64_t s88[4] = {1, 1, 8, 8};
    assert_int_equal(resize_run(&t, 19, &ceil_a, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                NULL, -1, s88, 4),
                     ANVIL_OK);
    expect_out(&t, 8, 8, ceil_hp, 0);
    assert_int_equal(resize_run(&t, 19, &floor_a, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                NULL, -1, s88, 4),
                     ANVIL_OK);
    expect_out(&t, 8, 8, floor_ac, 0);
    /* round_prefer_ceil with asymmetric coordinates happens to equal ceil with half_pixel */
    assert_int_equal(resize_run(&t, 19, &rpc_a, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                NULL, -1, s88, 4),
                     ANVIL_OK);
    expect_out(&t, 8, 8, ceil_hp, 0);

    /* keep_aspect_ratio_policy with axes */
    const int64_t axes23[2] = {2, 3};
    const rs_attrs not_larger = {.mode = "nearest",
                                 .policy = "not_larger",
                                 .exclude = -1,
                                 .antialias = -1,
                                 .axes = axes23,
                                 .n_axes = 2};
    const rs_attrs not_smaller = {.mode = "nearest",
                                  .policy = "not_smaller",
                                  .exclude = -1,
                                  .antialias = -1,
                                  .axes = axes23,
                                  .n_axes = 2};
    assert_int_equal(resize_run(&t, 18, &not_larger, ANVIL_DTYPE_FLOAT32, 4, d2x2, x4, NULL, -1,
                                NULL, -1, (int64_t[]){7, 8}, 2),
                     ANVIL_OK);
    float nl[49];
    for (int i = 0; i < 49; i++) nl[i] = (float)(1 + (i % 7 >= 4) + 2 * (i / 7 >= 4));
    expect_out(&t, 7, 7, nl, 0);
    assert_int_equal(resize_run(&t, 18, &not_smaller, ANVIL_DTYPE_FLOAT32, 4, d2x4, ramp16, NULL,
                                -1, NULL, -1, (int64_t[]){1, 3}, 2),
                     ANVIL_OK);
    expect_out(&t, 2, 3, (float[]){1, 2, 4, 5, 6, 8}, 0);
}

static void test_resize_examples_linear_cubic(void **state) {
    (void)state;
    optest t;
    const float x4[4] = {1, 2, 3, 4};
    const rs_attrs lin = {.mode = "linear", .exclude = -1, .antialias = -1};
    const rs_attrs lin_ac = {
        .mode = "linear", .coord = "align_corners", .exclude = -1, .antialias = -1};
    assert_int_equal(resize_run(&t, 19, &lin, ANVIL_DTYPE_FLOAT32, 4, d2x2, x4, NULL, -1,
                                (float[]){1, 1, 2, 2}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 4, 4,
               (float[]){1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3,
                         3.25f, 3.75f, 4},
               1e-6f);
    assert_int_equal(resize_run(&t, 19, &lin_ac, ANVIL_DTYPE_FLOAT32, 4, d2x2, x4, NULL, -1,
                                (float[]){1, 1, 2, 2}, 4, NULL, -1),
                     ANVIL_OK);
    const float t3 = 1.0f / 3, t6 = 2.0f / 3;
    expect_out(&t, 4, 4,
               (float[]){1, 1 + t3, 1 + t6, 2, 1 + t6, 2, 2 + t3, 2 + t6, 2 + t3, 2 + t6, 3, 3 + t3,
                         3, 3 + t3, 3 + t6, 4},
               1e-6f);
    assert_int_equal(resize_run(&t, 19, &lin, ANVIL_DTYPE_FLOAT32, 4, d2x4, ramp16, NULL, -1,
                                (float[]){1, 1, 0.6f, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 1, 2, (float[]){2.6666665f, 4.3333331f}, 1e-6f);
    /* align_corners uses the real-valued output width (2.4) as the ONNX reference does */
    assert_int_equal(resize_run(&t, 19, &lin_ac, ANVIL_DTYPE_FLOAT32, 4, d2x4, ramp16, NULL, -1,
                                (float[]){1, 1, 0.6f, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 1, 2, (float[]){1, 3.142857f}, 1e-6f);

    const rs_attrs cubic = {.mode = "cubic", .exclude = -1, .antialias = -1};
    const float cub[64] = {
        0.4726562f, 0.7695312f, 1.246094f, 1.875f,    2.28125f,  2.910156f, 3.386719f, 3.683594f,
        1.660156f,  1.957031f,  2.433594f, 3.0625f,   3.46875f,  4.097656f, 4.574219f, 4.871094f,
        3.566406f,  3.863281f,  4.339844f, 4.96875f,  5.375f,    6.003906f, 6.480469f, 6.777344f,
        6.082031f,  6.378906f,  6.855469f, 7.484375f, 7.890625f, 8.519531f, 8.996094f, 9.292969f,
        7.707031f,  8.003906f,  8.480469f, 9.109375f, 9.515625f, 10.14453f, 10.62109f, 10.91797f,
        10.22266f,  10.51953f,  10.99609f, 11.625f,   12.03125f, 12.66016f, 13.13672f, 13.43359f,
        12.12891f,  12.42578f,  12.90234f, 13.53125f, 13.9375f,  14.56641f, 15.04297f, 15.33984f,
        13.31641f,  13.61328f,  14.08984f, 14.71875f, 15.125f,   15.75391f, 16.23047f, 16.52734f};
    assert_int_equal(resize_run(&t, 19, &cubic, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                (float[]){1, 1, 2, 2}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 8, 8, cub, 1e-5f);
    const rs_attrs cubic_ex = {
        .mode = "cubic", .has_cubic_a = true, .cubic_a = -0.5f, .exclude = 1, .antialias = -1};
    const float cex[64] = {
        0.5588235f, 0.8149421f, 1.356982f, 1.897059f, 2.397059f, 2.937135f, 3.479176f, 3.735294f,
        1.583298f,  1.839416f,  2.381457f, 2.921533f, 3.421533f, 3.961609f, 4.50365f,  4.759768f,
        3.751459f,  4.007578f,  4.549618f, 5.089694f, 5.589694f, 6.129771f, 6.671812f, 6.92793f,
        5.911765f,  6.167883f,  6.709924f, 7.25f,     7.75f,     8.290076f, 8.832117f, 9.088235f,
        7.911765f,  8.167883f,  8.709924f, 9.25f,     9.75f,     10.29008f, 10.83212f, 11.08823f,
        10.07207f,  10.32819f,  10.87023f, 11.41031f, 11.91031f, 12.45038f, 12.99242f, 13.24854f,
        12.24023f,  12.49635f,  13.03839f, 13.57847f, 14.07847f, 14.61854f, 15.16058f, 15.4167f,
        13.26471f,  13.52082f,  14.06287f, 14.60294f, 15.10294f, 15.64302f, 16.18506f, 16.44118f};
    assert_int_equal(resize_run(&t, 19, &cubic_ex, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                (float[]){1, 1, 2, 2}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 8, 8, cex, 1e-5f);

    /* antialias stretches the filter when downsampling */
    const rs_attrs lin_aa = {.mode = "linear", .exclude = -1, .antialias = 1};
    const rs_attrs cub_aa = {.mode = "cubic", .exclude = -1, .antialias = 1};
    assert_int_equal(resize_run(&t, 18, &lin_aa, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                (float[]){1, 1, 0.6f, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 2, 2, (float[]){2.875f, 4.5f, 9.375f, 11}, 1e-5f);
    assert_int_equal(resize_run(&t, 18, &cub_aa, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16, NULL, -1,
                                (float[]){1, 1, 0.6f, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 2, 2, (float[]){2.518072f, 4.285886f, 9.589329f, 11.35714f}, 1e-5f);

    const rs_attrs sym = {
        .mode = "linear", .coord = "half_pixel_symmetric", .exclude = -1, .antialias = -1};
    assert_int_equal(resize_run(&t, 19, &sym, ANVIL_DTYPE_FLOAT32, 4, d2x2, x4, NULL, -1,
                                (float[]){1, 1, 2.3f, 2.94f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 4, 5, (float[]){1,         1.159864f, 1.5f,      1.840136f, 2,
                                   1.565217f, 1.725081f, 2.065217f, 2.405354f, 2.565217f,
                                   2.434783f, 2.594646f, 2.934783f, 3.274919f, 3.434783f,
                                   3,         3.159864f, 3.5f,      3.840136f, 4},
               1e-5f);
    assert_int_equal(resize_run(&t, 19, &sym, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 1, 4},
                                ramp16, NULL, -1, (float[]){1, 1, 1, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 1, 2, (float[]){1.6666667f, 3.3333333f}, 1e-6f);

    /* tf_crop_and_resize, inside the input and extrapolated */
    const rs_attrs crop = {
        .mode = "linear", .coord = "tf_crop_and_resize", .exclude = -1, .antialias = -1};
    const rs_attrs crop10 = {.mode = "linear",
                             .coord = "tf_crop_and_resize",
                             .exclude = -1,
                             .antialias = -1,
                             .has_extrap = true,
                             .extrap = 10};
    assert_int_equal(resize_run(&t, 13, &crop, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16,
                                (float[]){0, 0, 0.4f, 0.6f, 1, 1, 0.6f, 0.8f}, 8, NULL, -1,
                                (int64_t[]){1, 1, 3, 3}, 4),
                     ANVIL_OK);
    expect_out(&t, 3, 3, (float[]){7.6f, 7.9f, 8.2f, 8.8f, 9.1f, 9.4f, 10, 10.3f, 10.6f}, 1e-5f);
    assert_int_equal(resize_run(&t, 13, &crop10, ANVIL_DTYPE_FLOAT32, 4, d4x4, ramp16,
                                (float[]){0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}, 8, NULL, -1,
                                (int64_t[]){1, 1, 3, 3}, 4),
                     ANVIL_OK);
    expect_out(&t, 3, 3, (float[]){7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10}, 1e-5f);
}

/* Opset 10: asymmetric coordinates; nearest floors when upsampling, ceils when downsampling. */
static void test_resize_opset10(void **state) {
    (void)state;
    optest t;
    const rs_attrs nearest = {.mode = "nearest", .exclude = -1, .antialias = -1};
    const rs_attrs lin = {.mode = "linear", .exclude = -1, .antialias = -1};
    assert_int_equal(resize_run(&t, 10, &nearest, ANVIL_DTYPE_FLOAT32, 4, d2x4, ramp16, NULL, -1,
                                (float[]){1, 1, 0.6f, 0.6f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 1, 2, (float[]){1, 3}, 0);
    assert_int_equal(resize_run(&t, 10, &nearest, ANVIL_DTYPE_FLOAT32, 4, d2x2, ramp16, NULL, -1,
                                (float[]){1, 1, 1.5f, 1.5f}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 3, 3, (float[]){1, 1, 2, 1, 1, 2, 3, 3, 4}, 0);
    assert_int_equal(resize_run(&t, 10, &lin, ANVIL_DTYPE_FLOAT32, 4, d2x2, ramp16, NULL, -1,
                                (float[]){1, 1, 2, 2}, 4, NULL, -1),
                     ANVIL_OK);
    expect_out(&t, 4, 4, (float[]){1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4},
               1e-6f);
}

/* ---- randomised against a naive, non-separable resize -------------------------------------------
 */

typedef struct naive_axis {
    int64_t in, out;
    double scale, width, roi0, roi1;
    bool resized;
} naive_axis;

/* Spec coordinate transforms (the "width" is the real-valued output length). */
static double naive_coord(const char *coord, const naive_axis *a, int64_t y) {
    double s = a->scale, in = (double)a->in, yy = (double)y;
    if (!strcmp(coord, "align_corners")) return a->width == 1 ? 0 : yy * (in - 1) / (a->width - 1);
    if (!strcmp(coord, "asymmetric")) return yy / s;
    if (!strcmp(coord, "pytorch_half_pixel")) return a->out > 1 ? (yy + 0.5) / s - 0.5 : 0;
    if (!strcmp(coord, "tf_crop_and_resize"))
        return a->width == 1
                   ? (a->roi1 - a->roi0) * (in - 1) / 2 + a->roi0 * (in - 1)
                   : yy * (a->roi1 - a->roi0) * (in - 1) / (a->width - 1) + a->roi0 * (in - 1);
    if (!strcmp(coord, "half_pixel_symmetric"))
        return in / 2 * (1 - (double)a->out / a->width) + (yy + 0.5) / s - 0.5;
    return (yy + 0.5) / s - 0.5;
}

static double cubic_w(double A, double x) {
    x = fabs(x);
    if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
    if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
    return 0;
}

/* Taps of one output coordinate, in the ONNX reference's convention: ratio in (0, 1] (an exact
 * integer coordinate takes ratio 1 from the pixel on its left). */
static int naive_taps(const char *mode, bool aa, bool exclude, double A, const naive_axis *a,
                      double x, int64_t *idx, double *w) {
    double fl = floor(x), ratio = x - fl;
    int64_t base = (int64_t)fl;
    if (ratio == 0) {
        ratio = 1;
        base -= 1;
    }
    double s = aa && a->scale < 1 ? a->scale : 1;
    int n = 0;
    if (!strcmp(mode, "linear")) {
        int64_t start = (int64_t)floor(-1 / s) + 1;
        for (int64_t k = start; k < 2 - start; k++, n++) {
            w[n] = fmax(0, 1 - fabs(((double)k - ratio) * s));
            idx[n] = base + k;
        }
    } else {
        int64_t start = (int64_t)floor(-2 / s) + 1;
        for (int64_t k = start; k < 2 - start; k++, n++) {
            w[n] = cubic_w(A, ((double)k - ratio) * s);
            idx[n] = base + k;
        }
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (exclude && (idx[i] < 0 || idx[i] >= a->in)) w[i] = 0;
        sum += w[i];
    }
    if (aa || exclude)
        for (int i = 0; i < n; i++) w[i] /= sum;
    for (int i = 0; i < n; i++) idx[i] = idx[i] < 0 ? 0 : idx[i] >= a->in ? a->in - 1 : idx[i];
    return n;
}

static int64_t naive_nearest(const char *nm, double x, const naive_axis *a) {
    double r;
    if (!strcmp(nm, "floor"))
        r = floor(x);
    else if (!strcmp(nm, "ceil"))
        r = ceil(x);
    else if (!strcmp(nm, "round_prefer_ceil"))
        r = x - floor(x) >= 0.5 ? ceil(x) : floor(x);
    else
        r = x - floor(x) > 0.5 ? ceil(x) : floor(x);
    return r < 0 ? 0 : r > (double)(a->in - 1) ? a->in - 1 : (int64_t)r;
}

static void test_resize_random(void **state) {
    (void)state;
    static const char *const coords[] = {"half_pixel",         "pytorch_half_pixel",
                                         "align_corners",      "asymmetric",
                                         "tf_crop_and_resize", "half_pixel_symmetric"};
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    static const float scale_set[] = {0.5f, 0.6f, 0.75f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f};
    core_pool *pool;
    assert_int_equal(core_pool_create(3, &pool), ANVIL_OK);
    for (int it = 0; it < 250; it++) {
        int rank = 3 + (int)rnd(2);
        const char *mode = modes[rnd(3)], *coord = coords[rnd(6)], *nm = nearests[rnd(4)];
        bool use_sizes = rnd(2), exclude = mode[0] != 'n' && rnd(3) == 0;
        bool aa = mode[0] != 'n' && rnd(3) == 0;
        float A = rnd(2) ? -0.75f : -0.5f, extrap = rnd(2) ? 0.0f : 7.5f;
        anvil_dtype dt = it % 5 == 4 ? ANVIL_DTYPE_FLOAT64 : ANVIL_DTYPE_FLOAT32;
        int64_t dims[4], odims[4];
        naive_axis ax[4];
        float scales[4], roi[8];
        int64_t sizes[4];
        for (int d = 0; d < rank; d++) {
            dims[d] = d < rank - 2 ? 1 + rnd(2) : 1 + rnd(6);
            naive_axis *a = &ax[d];
            a->in = dims[d];
            a->roi0 = d < rank - 2 ? 0 : (double)(roi[d] = (float)rnd(60) / 100 - 0.2f);
            a->roi1 = d < rank - 2 ? 1 : (double)(roi[rank + d] = (float)rnd(70) / 100 + 0.5f);
            if (d < rank - 2) {
                roi[d] = 0;
                roi[rank + d] = 1;
            }
            if (use_sizes) {
                sizes[d] = d < rank - 2 ? dims[d] : 1 + rnd(9);
                a->out = sizes[d];
                a->scale = (double)a->out / (double)a->in;
                a->width = (double)a->out;
            } else {
                scales[d] = d < rank - 2 ? 1.0f : scale_set[rnd(8)];
                a->scale = scales[d];
                a->out = (int64_t)floor((double)scales[d] * (double)a->in);
                a->width = a->scale * (double)a->in;
            }
            a->resized = a->out != a->in || a->scale != 1 ||
                         (!strcmp(coord, "tf_crop_and_resize") && (a->roi0 != 0 || a->roi1 != 1));
            odims[d] = a->out;
        }
        size_t nx = numel(dims, rank), ny = numel(odims, rank);
        if (ny == 0) continue;
        double *x = malloc(nx * sizeof *x), *want = malloc(ny * sizeof *want);
        void *xt = malloc(nx * anvil_dtype_size(dt));
        for (size_t i = 0; i < nx; i++) {
            x[i] = (double)rnd(2001) / 1000 - 1;
            core_store_f64(dt, xt, i, x[i]);
            x[i] = core_load_f64(dt, xt, i);
        }
        for (size_t o = 0; o < ny; o++) {
            int64_t oi[4], idx[4][64], cnt[4];
            double w[4][64];
            bool outside = false;
            size_t rest = o;
            for (int d = rank - 1; d >= 0; d--) {
                oi[d] = (int64_t)(rest % (size_t)odims[d]);
                rest /= (size_t)odims[d];
            }
            for (int d = 0; d < rank; d++) {
                if (!ax[d].resized) {
                    cnt[d] = 1;
                    idx[d][0] = oi[d];
                    w[d][0] = 1;
                    continue;
                }
                double c = naive_coord(coord, &ax[d], oi[d]);
                if (!strcmp(coord, "tf_crop_and_resize") && (c < 0 || c > (double)(ax[d].in - 1)))
                    outside = true;
                if (mode[0] == 'n') {
                    cnt[d] = 1;
                    idx[d][0] = naive_nearest(nm, c, &ax[d]);
                    w[d][0] = 1;
                } else {
                    cnt[d] = naive_taps(mode, aa, exclude, A, &ax[d], c, idx[d], w[d]);
                }
            }
            double acc = 0;
            int64_t pick[4] = {0};
            for (;;) {
                double ww = 1;
                size_t src = 0;
                for (int d = 0; d < rank; d++) {
                    ww *= w[d][pick[d]];
                    src = src * (size_t)dims[d] + (size_t)idx[d][pick[d]];
                }
                acc += ww * x[src];
                int d = rank - 1;
                while (d >= 0 && ++pick[d] == cnt[d]) pick[d--] = 0;
                if (d < 0) break;
            }
            want[o] = outside ? extrap : acc;
        }
        rs_attrs at = {.mode = mode,
                       .coord = coord,
                       .nearest = mode[0] == 'n' ? nm : NULL,
                       .has_cubic_a = true,
                       .cubic_a = A,
                       .has_extrap = true,
                       .extrap = extrap,
                       .exclude = exclude,
                       .antialias = aa};
        optest t;
        anvil_status s = resize_run(&t, 19, &at, dt, rank, dims, xt, roi, 2 * rank, scales,
                                    use_sizes ? -1 : rank, sizes, use_sizes ? rank : -1);
        assert_int_equal(s, ANVIL_OK);
        for (int d = 0; d < rank; d++) assert_int_equal(t.out[0].dims[d], odims[d]);
        for (size_t i = 0; i < ny; i++) {
            double got = core_load_f64(dt, t.out[0].data, i);
            if (!(fabs(got - want[i]) <= 1e-5 * (1 + fabs(want[i]))))
                fprintf(stderr, "it %d %s %s %s elem %zu: got %.9g want %.9g\n", it, mode, coord,
                        nm, i, got, want[i]);
            assert_true(fabs(got - want[i]) <= 1e-5 * (1 + fabs(want[i])));
        }
        if (it % 10 == 0) {
            size_t bytes = ny * anvil_dtype_size(dt);
            void *serial = malloc(bytes);
            memcpy(serial, t.out[0].data, bytes);
            memset(t.out[0].data, 0, bytes);
            op_ctx ctx = {.pool = pool};
            const op_tensor *ins[4] = {&t.in[0], &t.in[1], use_sizes ? NULL : &t.in[2],
                                       use_sizes ? &t.in[3] : NULL};
            op_tensor *outs[1] = {&t.out[0]};
            assert_int_equal(op_get(IR_OP_RESIZE)->run(optest_node(&t), ins, t.n_in, outs, 1, &ctx),
                             ANVIL_OK);
            assert_memory_equal(serial, t.out[0].data, bytes);
            free(serial);
        }
        optest_end(&t);
        free(x);
        free(want);
        free(xt);
    }
    core_pool_free(pool);
}

/* ---- dtypes ---------------------------------------------------------------------------------- */

static void test_resize_dtypes(void **state) {
    (void)state;
    optest t, f;
    /* cubic overshoot on a step: UINT8 rounds half to even and saturates to 0..255 */
    const uint8_t u8[8] = {0, 0, 255, 255, 0, 0, 255, 255};
    const float f8[8] = {0, 0, 255, 255, 0, 0, 255, 255};
    const int64_t d[3] = {1, 2, 4};
    const rs_attrs cubic = {.mode = "cubic", .exclude = -1, .antialias = -1};
    const float sc[3] = {1, 1, 2.5f};
    assert_int_equal(
        resize_run(&t, 19, &cubic, ANVIL_DTYPE_UINT8, 3, d, u8, NULL, -1, sc, 3, NULL, -1),
        ANVIL_OK);
    assert_int_equal(
        resize_run(&f, 19, &cubic, ANVIL_DTYPE_FLOAT32, 3, d, f8, NULL, -1, sc, 3, NULL, -1),
        ANVIL_OK);
    bool saturated = false;
    for (int i = 0; i < 20; i++) {
        float v = ((float *)f.out[0].data)[i];
        float want = fminf(fmaxf(nearbyintf(v), 0), 255);
        saturated = saturated || v < 0 || v > 255;
        assert_int_equal(((uint8_t *)t.out[0].data)[i], (uint8_t)want);
    }
    assert_true(saturated); /* the case does exercise the clamp */
    optest_end(&t);
    optest_end(&f);

    /* nearest moves bytes: INT64 beyond 2^53 and BOOL come through exactly */
    const int64_t big[4] = {(int64_t)1 << 60, -3, ((int64_t)1 << 53) + 1, 7};
    const rs_attrs nearest = {.mode = "nearest", .exclude = -1, .antialias = -1};
    assert_int_equal(resize_run(&t, 19, &nearest, ANVIL_DTYPE_INT64, 4, d2x2, big, NULL, -1,
                                (float[]){1, 1, 2, 2}, 4, NULL, -1),
                     ANVIL_OK);
    const int64_t *y = t.out[0].data;
    assert_true(y[0] == big[0] && y[1] == big[0] && y[2] == big[1] && y[3] == big[1]);
    assert_true(y[8] == big[2] && y[15] == big[3]);
    optest_end(&t);
    const uint8_t b[2] = {1, 0};
    assert_int_equal(resize_run(&t, 19, &nearest, ANVIL_DTYPE_BOOL, 1, (int64_t[]){2}, b, NULL, -1,
                                (float[]){2}, 1, NULL, -1),
                     ANVIL_OK);
    assert_memory_equal(t.out[0].data, ((uint8_t[]){1, 1, 0, 0}), 4);
    optest_end(&t);
    /* FLOAT16 linear */
    uint16_t h[2] = {core_f32_to_f16(1), core_f32_to_f16(2)};
    const rs_attrs lin = {.mode = "linear", .exclude = -1, .antialias = -1};
    assert_int_equal(resize_run(&t, 19, &lin, ANVIL_DTYPE_FLOAT16, 1, (int64_t[]){2}, h, NULL, -1,
                                (float[]){2}, 1, NULL, -1),
                     ANVIL_OK);
    const uint16_t *hy = t.out[0].data;
    assert_true(core_f16_to_f32(hy[0]) == 1.0f && core_f16_to_f32(hy[1]) == 1.25f &&
                core_f16_to_f32(hy[2]) == 1.75f && core_f16_to_f32(hy[3]) == 2.0f);
    optest_end(&t);
}

/* ---- inference and errors ----------------------------------------------------------------------
 */

static void test_resize_infer(void **state) {
    (void)state;
    optest t;
    const rs_attrs lin = {.mode = "linear", .exclude = -1, .antialias = -1};
    int64_t sizes[4] = {1, 3, 10, 12};
    optest_begin_opset(&t, IR_OP_RESIZE, 4, 1, 1, 13);
    set_attrs(&t, &lin);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 5, 6}, NULL, false);
    optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, sizes, true);
    assert_int_equal(op_check_graph(t.g), ANVIL_OK);
    op_tinfo in[4], out[1];
    memset(in, 0, sizeof in);
    in[0].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&in[0].shape, 4, (int64_t[]){IR_DIM_UNKNOWN, 3, IR_DIM_UNKNOWN, 6});
    in[0].shape.sym[0] = 4;
    ir_shape_unknown(&in[1].shape);
    ir_shape_unknown(&in[2].shape);
    in[3].dtype = ANVIL_DTYPE_INT64;
    ir_shape_set(&in[3].shape, 1, (int64_t[]){4});
    /* sizes unknown: only the rank */
    assert_int_equal(op_get(IR_OP_RESIZE)->infer(t.g, optest_node(&t), in, 4, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.rank, 4);
    assert_int_equal(out[0].shape.d[2], IR_DIM_UNKNOWN);
    /* sizes known: every dim known even where X's is not */
    in[3].value = sizes;
    assert_int_equal(op_get(IR_OP_RESIZE)->infer(t.g, optest_node(&t), in, 4, out, 1), ANVIL_OK);
    assert_int_equal(out[0].shape.d[0], 1);
    assert_int_equal(out[0].shape.d[2], 10);
    assert_int_equal(out[0].shape.d[3], 12);
    optest_end(&t);
}

static void test_resize_errors(void **state) {
    (void)state;
    static float buf[64];
    const int64_t d4[4] = {1, 1, 2, 2};
    const float s4[4] = {1, 1, 2, 2}, s0[4] = {1, 1, 0, 2};
    const int64_t z4[4] = {1, 1, 4, 4};
    struct {
        int opset;
        rs_attrs a;
        anvil_dtype dt;
        int n_roi, n_scales, n_sizes;
        const float *scales;
        anvil_status want;
        const char *msg;
    } bad[] = {
        {19,
         {.mode = "bicubic", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "'mode' is 'bicubic'"},
        {10,
         {.mode = "cubic", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "mode 'cubic' is not valid at opset 10"},
        {18,
         {.coord = "half_pixel_symmetric", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "not valid at opset 18"},
        {13,
         {.coord = "tf_half_pixel_for_nn", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "not valid at opset 13"},
        {19,
         {.nearest = "round", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "expected one of: round_prefer_floor"},
        {19,
         {.policy = "fit", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "'keep_aspect_ratio_policy' is 'fit'"},
        {19,
         {.exclude = 2, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "'exclude_outside' is 2"},
        {19,
         {.exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         -1,
         -1,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "neither scales nor sizes"},
        {19,
         {.exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         4,
         s4,
         ANVIL_ERR_INVALID_MODEL,
         "both scales and sizes"},
        {19,
         {.exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         3,
         -1,
         s4,
         ANVIL_ERR_SHAPE,
         "scales has 3 values; expected 4"},
        {19,
         {.exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         4,
         -1,
         s0,
         ANVIL_ERR_SHAPE,
         "scales[2] is 0"},
        {19,
         {.mode = "linear", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_BOOL,
         -1,
         4,
         -1,
         s4,
         ANVIL_ERR_UNSUPPORTED,
         "use mode 'nearest' for BOOL"},
        {19,
         {.coord = "tf_crop_and_resize", .exclude = -1, .antialias = -1},
         ANVIL_DTYPE_FLOAT32,
         2,
         4,
         -1,
         s4,
         ANVIL_ERR_SHAPE,
         "needs roi with 8 values"},
        {19,
         {.exclude = -1, .antialias = -1, .axes = (const int64_t[]){2, -2}, .n_axes = 2},
         ANVIL_DTYPE_FLOAT32,
         -1,
         2,
         -1,
         s4,
         ANVIL_ERR_SHAPE,
         "appears twice in 'axes'"},
        {19,
         {.exclude = -1, .antialias = -1, .axes = (const int64_t[]){4}, .n_axes = 1},
         ANVIL_DTYPE_FLOAT32,
         -1,
         1,
         -1,
         s4,
         ANVIL_ERR_SHAPE,
         "out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        optest t;
        int n_in = bad[i].opset < 11 ? 2 : bad[i].n_sizes >= 0 ? 4 : 3;
        optest_begin_opset(&t, IR_OP_RESIZE, n_in, 1, 9, bad[i].opset);
        optest_node(&t)->n_attrs = set_attrs(&t, &bad[i].a);
        optest_input(&t, 0, bad[i].dt, 4, d4, buf, false);
        if (bad[i].n_roi >= 0)
            optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){bad[i].n_roi}, buf, true);
        if (bad[i].n_scales >= 0)
            optest_input(&t, bad[i].opset < 11 ? 1 : 2, ANVIL_DTYPE_FLOAT32, 1,
                         (int64_t[]){bad[i].n_scales}, bad[i].scales, true);
        if (bad[i].n_sizes >= 0)
            optest_input(&t, 3, ANVIL_DTYPE_INT64, 1, (int64_t[]){bad[i].n_sizes}, z4, true);
        expect_status(&t, bad[i].want, bad[i].msg);
        optest_end(&t);
    }
    /* sizes of the wrong dtype; opset 10 with a third input */
    optest t;
    optest_begin_opset(&t, IR_OP_RESIZE, 4, 1, 0, 13);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, d4, buf, false);
    optest_input(&t, 3, ANVIL_DTYPE_INT32, 1, (int64_t[]){4}, buf, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "sizes has dtype INT32; it must be INT64");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_RESIZE, 3, 1, 0, 10);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, d4, buf, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, s4, true);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){4}, s4, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "exactly X and scales");
    optest_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_examples_nearest),
        cmocka_unit_test(test_resize_examples_linear_cubic),
        cmocka_unit_test(test_resize_opset10),
        cmocka_unit_test(test_resize_random),
        cmocka_unit_test(test_resize_dtypes),
        cmocka_unit_test(test_resize_infer),
        cmocka_unit_test(test_resize_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
