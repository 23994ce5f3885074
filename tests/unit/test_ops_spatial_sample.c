/* GridSample, AffineGrid, RoiAlign and DeformConv reference kernels against
 * values worked out by hand or by an independent naive computation here (plain
 * convolution for DeformConv with zero offsets), plus the errors bad models
 * must produce. Also Split's load-time leniency inside a subgraph (an untaken
 * If branch of ONNX's AffineGrid expansion). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optest.h"

static void expect_status(optest *t, anvil_status want, const char *substr) {
    anvil_status s = optest_run(t);
    if (s != want || !strstr(anvil_last_error(), substr))
        fprintf(stderr, "status %s, message: %s\n", anvil_status_name(s), anvil_last_error());
    assert_int_equal(s, want);
    assert_non_null(strstr(anvil_last_error(), substr));
    assert_non_null(strstr(anvil_last_error(), "test_node"));
}

static const float img4[4] = {1, 2, 3, 4}; /* 1x1x2x2 */

/* One GridSample over img4 at one grid point (gx, gy). */
static float grid_one(int opset, const char *mode, const char *pad, int align, float gx, float gy) {
    optest t;
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 3, opset);
    optest_attr_string(&t, 0, "mode", mode);
    optest_attr_string(&t, 1, "padding_mode", pad);
    optest_attr_int(&t, 2, "align_corners", align);
    float grid[2] = {gx, gy};
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, img4, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 1, 2}, grid, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].rank, 4);
    assert_int_equal(t.out[0].dims[2], 1);
    float v = ((float *)t.out[0].data)[0];
    optest_end(&t);
    return v;
}

static void test_gridsample_values(void **state) {
    (void)state;
    /* the centre of a 2x2 image averages all four pixels */
    assert_float_equal(grid_one(20, "linear", "zeros", 0, 0, 0), 2.5f, 1e-6f);
    assert_float_equal(grid_one(16, "bilinear", "zeros", 1, 0, 0), 2.5f, 1e-6f);
    /* align_corners=0: (-1, -1) is the outer corner of pixel (0, 0), a quarter
     * inside */
    assert_float_equal(grid_one(20, "linear", "zeros", 0, -1, -1), 0.25f, 1e-6f);
    assert_float_equal(grid_one(20, "linear", "border", 0, -1, -1), 1.0f, 1e-6f);
    assert_float_equal(grid_one(20, "linear", "reflection", 0, -1, -1), 1.0f, 1e-6f);
    /* align_corners=1: (1, -1) is exactly pixel (row 0, col 1) */
    assert_float_equal(grid_one(20, "linear", "zeros", 1, 1, -1), 2.0f, 1e-6f);
    assert_float_equal(grid_one(20, "nearest", "zeros", 1, 0.9f, 0.9f), 4.0f, 1e-6f);
    /* x is the last axis: (x=1, y=1) far right bottom; beyond it border clamps */
    assert_float_equal(grid_one(20, "nearest", "border", 1, 3, 3), 4.0f, 1e-6f);
    assert_float_equal(grid_one(20, "nearest", "zeros", 1, 3, 3), 0.0f, 1e-6f);
    /* cubic weights at an exact pixel are (0, 1, 0, 0) */
    assert_float_equal(grid_one(20, "cubic", "zeros", 1, -1, 1), 3.0f, 1e-6f);
    assert_float_equal(grid_one(16, "bicubic", "border", 1, 1, 1), 4.0f, 1e-6f);
}

/* Volumetric linear sampling at every voxel centre reproduces the input. */
static void test_gridsample_3d_identity(void **state) {
    (void)state;
    float x[2 * 3 * 4];
    for (int i = 0; i < 24; i++) x[i] = (float)(i * i % 7) - 2.5f;
    float grid[24 * 3];
    for (int d = 0; d < 2; d++)
        for (int h = 0; h < 3; h++)
            for (int w = 0; w < 4; w++) {
                float *g = grid + ((d * 3 + h) * 4 + w) * 3;
                g[0] = (2.0f * (float)w + 1) / 4 - 1;
                g[1] = (2.0f * (float)h + 1) / 3 - 1;
                g[2] = (2.0f * (float)d + 1) / 2 - 1;
            }
    optest t;
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 0, 22);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 5, (int64_t[]){1, 1, 2, 3, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 5, (int64_t[]){1, 2, 3, 4, 3}, grid, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(optest_compare_f32(t.out[0].data, x, 24, 1e-5f, 1e-5f), -1);
    optest_end(&t);
}

static void test_gridsample_errors(void **state) {
    (void)state;
    float x[4] = {0}, g[8] = {0};
    int32_t xi[4] = {0};
    optest t;
    /* opset 20 renamed bilinear to linear */
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 1, 20);
    optest_attr_string(&t, 0, "mode", "bilinear");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, g, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'mode'");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 1, 20);
    optest_attr_string(&t, 0, "padding_mode", "wrap");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, g, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "padding_mode");
    optest_end(&t);
    /* grid's last dim must be the spatial rank */
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 3}, g, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "last dim");
    optest_end(&t);
    /* opset 16 is 4-D only */
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 0, 16);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 1}, g, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 4");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_INT32, 4, (int64_t[]){1, 1, 2, 2}, xi, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, g, false);
    expect_status(&t, ANVIL_ERR_UNSUPPORTED, "INT32");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 1, 2, 1}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, g, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "batch");
    optest_end(&t);
    /* a zero-size output grid gives an empty result */
    optest_begin_opset(&t, IR_OP_GRIDSAMPLE, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 0, 2, 2}, g, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], 0);
    optest_end(&t);
}

static void test_affinegrid(void **state) {
    (void)state;
    /* x' = 2x + 0.5, y' = y - x over a 2 x 3 grid */
    float theta[6] = {2, 0, 0.5f, -1, 1, 0};
    int64_t size[4] = {1, 1, 2, 3};
    for (int align = 0; align < 2; align++) {
        optest t;
        optest_begin_opset(&t, IR_OP_AFFINEGRID, 2, 1, 1, 20);
        optest_attr_int(&t, 0, "align_corners", align);
        optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, theta, false);
        optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){4}, size, true);
        assert_int_equal(optest_run(&t), ANVIL_OK);
        assert_int_equal(t.out[0].rank, 4);
        assert_int_equal(t.out[0].dims[1], 2);
        assert_int_equal(t.out[0].dims[2], 3);
        assert_int_equal(t.out[0].dims[3], 2);
        float xs[3], ys[2], want[12];
        for (int w = 0; w < 3; w++)
            xs[w] = align ? -1.0f + (float)w : (2.0f * (float)w + 1) / 3 - 1;
        for (int h = 0; h < 2; h++)
            ys[h] = align ? -1.0f + 2.0f * (float)h : (2.0f * (float)h + 1) / 2 - 1;
        for (int h = 0; h < 2; h++)
            for (int w = 0; w < 3; w++) {
                want[(h * 3 + w) * 2] = 2 * xs[w] + 0.5f;
                want[(h * 3 + w) * 2 + 1] = ys[h] - xs[w];
            }
        assert_int_equal(optest_compare_f32(t.out[0].data, want, 12, 1e-6f, 1e-6f), -1);
        optest_end(&t);
    }
}

static void test_affinegrid_errors(void **state) {
    (void)state;
    float theta[12] = {0};
    int64_t size3[3] = {1, 1, 2}, size5[5] = {1, 1, 2, 2, 2};
    optest t;
    optest_begin_opset(&t, IR_OP_AFFINEGRID, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, theta, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, size3, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 2");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_AFFINEGRID, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, theta, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){3}, size3, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "3 entries");
    optest_end(&t);
    /* a 2-D theta with a 3-D size */
    optest_begin_opset(&t, IR_OP_AFFINEGRID, 2, 1, 0, 20);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, theta, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){5}, size5, true);
    expect_status(&t, ANVIL_ERR_SHAPE, "expected theta (N, 3, 4)");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_AFFINEGRID, 2, 1, 0, 19);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 2, 3}, theta, false);
    optest_input(&t, 1, ANVIL_DTYPE_INT64, 1, (int64_t[]){5}, size5, true);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 20");
    optest_end(&t);
}

/* X[h][w] = w on a 4x4 image; one roi [0, 0, 3, 3], one output bin, one sample.
 */
static float roi_one(int opset, const char *mode, const char *ctm, int64_t batch_index,
                     anvil_status want) {
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 4);
    float rois[4] = {0, 0, 3, 3};
    int64_t bi[1] = {batch_index};
    optest t;
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 3, opset);
    optest_attr_string(&t, 0, "mode", mode);
    optest_attr_int(&t, 1, "sampling_ratio", 1);
    if (ctm)
        optest_attr_string(&t, 2, "coordinate_transformation_mode", ctm);
    else
        optest_node(&t)->n_attrs = 2;
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bi, false);
    float v = -1000;
    if (want == ANVIL_OK) {
        assert_int_equal(optest_run(&t), ANVIL_OK);
        v = ((float *)t.out[0].data)[0];
    } else {
        expect_status(&t, want, "batch_indices");
    }
    optest_end(&t);
    return v;
}

static void test_roialign(void **state) {
    (void)state;
    /* output_half_pixel (opset 10's only mode): the sample sits at x = 1.5 */
    assert_float_equal(roi_one(10, "avg", NULL, 0, ANVIL_OK), 1.5f, 1e-6f);
    assert_float_equal(roi_one(16, "avg", "output_half_pixel", 0, ANVIL_OK), 1.5f, 1e-6f);
    /* half_pixel shifts the roi by half a pixel: x = 1.0 */
    assert_float_equal(roi_one(16, "avg", NULL, 0, ANVIL_OK), 1.0f, 1e-6f);
    /* max mode keeps the largest weighted tap: 0.25 * 2 at x = 1.5, y = 1.5 */
    assert_float_equal(roi_one(16, "max", "output_half_pixel", 0, ANVIL_OK), 0.5f, 1e-6f);
    roi_one(16, "avg", NULL, 1, ANVIL_ERR_RUNTIME);
    roi_one(16, "avg", NULL, -1, ANVIL_ERR_RUNTIME);
}

static void test_roialign_errors(void **state) {
    (void)state;
    float x[16] = {0}, rois[8] = {0};
    int64_t bi[2] = {0, 0};
    optest t;
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 1, 16);
    optest_attr_string(&t, 0, "mode", "sum");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bi, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "'mode'");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 1, 10);
    optest_attr_string(&t, 0, "coordinate_transformation_mode", "half_pixel");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bi, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "opset 16");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 1, 16);
    optest_attr_int(&t, 0, "output_height", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bi, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "output_height");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 0, 16);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){2}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rois");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 0, 16);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "batch_indices");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 0, 16);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){1, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){1}, bi, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 3");
    optest_end(&t);
    /* no rois: an empty result */
    optest_begin_opset(&t, IR_OP_ROIALIGN, 3, 1, 0, 16);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){0, 4}, rois, false);
    optest_input(&t, 2, ANVIL_DTYPE_INT64, 1, (int64_t[]){0}, bi, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[0], 0);
    optest_end(&t);
}

/* DeformConv with zero offsets and no mask is a grouped convolution: compare
 * with a naive one. */
static void test_deformconv_zero_offset_is_conv(void **state) {
    (void)state;
    enum { N = 1, C = 4, H = 5, W = 6, OC = 2, G = 2, KH = 2, KW = 3, PAD = 1, OH = 6, OW = 3 };
    float x[N * C * H * W], w[OC * (C / G) * KH * KW], b[OC] = {0.5f, -1};
    for (int i = 0; i < N * C * H * W; i++) x[i] = (float)((i * 7) % 11) - 5;
    for (int i = 0; i < OC * (C / G) * KH * KW; i++) w[i] = (float)((i * 5) % 7) - 3;
    static float off[N * 2 * 2 * KH * KW * OH * OW];
    optest t;
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 4, 1, 4, 19);
    optest_attr_int(&t, 0, "group", G);
    optest_attr_int(&t, 1, "offset_group", 2);
    optest_attr_ints(&t, 2, "pads", (int64_t[]){PAD, PAD, PAD, PAD}, 4);
    optest_attr_ints(&t, 3, "strides", (int64_t[]){1, 2}, 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){N, C, H, W}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){OC, C / G, KH, KW}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){N, 2 * 2 * KH * KW, OH, OW}, off,
                 false);
    optest_input(&t, 3, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){OC}, b, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    assert_int_equal(t.out[0].dims[2], OH);
    assert_int_equal(t.out[0].dims[3], OW);
    float want[OC * OH * OW];
    for (int oc = 0; oc < OC; oc++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                double acc = b[oc];
                for (int ci = 0; ci < C / G; ci++)
                    for (int kh = 0; kh < KH; kh++)
                        for (int kw = 0; kw < KW; kw++) {
                            int ih = oh - PAD + kh, iw = ow * 2 - PAD + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            int c = (oc / (OC / G)) * (C / G) + ci;
                            acc += (double)x[(c * H + ih) * W + iw] *
                                   w[((oc * (C / G) + ci) * KH + kh) * KW + kw];
                        }
                want[(oc * OH + oh) * OW + ow] = (float)acc;
            }
    assert_int_equal(optest_compare_f32(t.out[0].data, want, OC * OH * OW, 1e-5f, 1e-5f), -1);
    optest_end(&t);
}

/* A 1x1 kernel with offset (0, +0.5) and mask 2 reads halfway to the right
 * neighbour, doubled. */
static void test_deformconv_offset_mask(void **state) {
    (void)state;
    float x[6] = {1, 2, 4, 8, 16, 32}; /* 1x1x2x3 */
    float w[1] = {1};
    float off[2 * 6], mask[6];
    for (int i = 0; i < 6; i++) {
        off[i] = 0;
        off[6 + i] = 0.5f;
        mask[i] = 2;
    }
    optest t;
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 5, 1, 0, 22);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 1, 1}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 2, 2, 3}, off, false);
    optest_input(&t, 4, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 3}, mask, false);
    assert_int_equal(optest_run(&t), ANVIL_OK);
    /* the last column's right neighbour lies outside and reads 0 */
    float want[6] = {3, 6, 4, 24, 48, 32};
    assert_int_equal(optest_compare_f32(t.out[0].data, want, 6, 1e-6f, 1e-6f), -1);
    optest_end(&t);
}

static void test_deformconv_errors(void **state) {
    (void)state;
    float x[64] = {0}, w[64] = {0}, off[256] = {0};
    optest t;
    /* offset must have offset_group * kH * kW * 2 channels */
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 3, 1, 0, 19);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 6, 2, 2}, off, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "offset has 6 channels");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 3, 1, 0, 19);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 3, 3}, off, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "spatial dim 0");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 3, 1, 1, 19);
    optest_attr_int(&t, 0, "group", 2);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 3, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){2, 1, 2, 2}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 2, 2}, off, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "channels");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 3, 1, 1, 19);
    optest_attr_int(&t, 0, "offset_group", 0);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 2, 2}, off, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "offset_group");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 3, 1, 1, 19);
    optest_attr_string(&t, 0, "auto_pad", "SAME_UPPER");
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 2, 2}, off, false);
    expect_status(&t, ANVIL_ERR_INVALID_MODEL, "auto_pad");
    optest_end(&t);
    optest_begin_opset(&t, IR_OP_DEFORMCONV, 3, 1, 0, 19);
    optest_input(&t, 0, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 1, 3, 3}, x, false);
    optest_input(&t, 1, ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){1, 1, 2}, w, false);
    optest_input(&t, 2, ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, 8, 2, 2}, off, false);
    expect_status(&t, ANVIL_ERR_SHAPE, "rank 3");
    optest_end(&t);
}

/* Split with num_outputs=4 over 5 elements is impossible; inside a subgraph at
 * load (no value) it stays unknown, since an If branch is inferred whether or
 * not it is taken. */
static void test_split_in_untaken_branch(void **state) {
    (void)state;
    int64_t size[5] = {1, 1, 2, 3, 4};
    for (int mode = 0; mode < 3; mode++) {
        optest t;
        optest_begin_opset(&t, IR_OP_SPLIT, 1, 4, 1, 18);
        optest_attr_int(&t, 0, "num_outputs", 4);
        /* mode 0: top-level graph; 1: subgraph at load; 2: subgraph with the value
         * known */
        optest_input(&t, 0, ANVIL_DTYPE_INT64, 1, (int64_t[]){5}, size, mode == 2);
        ir_graph *outer = NULL;
        if (mode > 0) {
            assert_int_equal(ir_graph_create(NULL, &outer), ANVIL_OK);
            t.g->parent = outer;
        }
        anvil_status s = optest_infer(&t);
        if (mode == 1) {
            assert_int_equal(s, ANVIL_OK);
            assert_int_equal(t.out_info[0].shape.rank, 1);
            assert_true(t.out_info[0].shape.d[0] < 0);
        } else {
            assert_int_equal(s, ANVIL_ERR_SHAPE);
            assert_non_null(strstr(anvil_last_error(), "chunks"));
        }
        t.g->parent = NULL;
        optest_end(&t);
        ir_graph_free(outer);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gridsample_values),
        cmocka_unit_test(test_gridsample_3d_identity),
        cmocka_unit_test(test_gridsample_errors),
        cmocka_unit_test(test_affinegrid),
        cmocka_unit_test(test_affinegrid_errors),
        cmocka_unit_test(test_roialign),
        cmocka_unit_test(test_roialign_errors),
        cmocka_unit_test(test_deformconv_zero_offset_is_conv),
        cmocka_unit_test(test_deformconv_offset_mask),
        cmocka_unit_test(test_deformconv_errors),
        cmocka_unit_test(test_split_in_untaken_branch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
