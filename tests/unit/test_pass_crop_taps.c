/* The crop_taps pass (src/passes/crop_taps.c): a Conv whose dilation puts kernel taps outside
 * the input for every output (DeepLabV3's ASPP) runs with those taps dropped and its pads
 * shrunk, giving the same outputs as opt level 0; a Conv whose taps all read data is left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "passes/passes.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { M = 3, C = 4, H = 10, W = 10 };
static float weights[M * C * 9];

static ir_vid value(ir_graph *g, const char *name, int rank, const int64_t *dims) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = ANVIL_DTYPE_FLOAT32;
    ir_shape_set(&g->values[v].shape, rank, dims);
    return v;
}

static void ints(ir_graph *g, ir_attr *a, const char *name, const int64_t *v, size_t n) {
    int64_t *copy = core_arena_array(g->arena, n, sizeof *copy);
    memcpy(copy, v, n * sizeof *copy);
    a->name = core_arena_strdup(g->arena, name);
    a->type = IR_ATTR_INTS;
    a->ints = copy;
    a->n = n;
}

/* x [1, C, H, W] -> Conv(W [M, C, 3, 3], dilations, pads = dilations) -> y */
static ir_graph *conv_graph(int64_t dh, int64_t dw) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    ir_vid x = value(g, "x", 4, (int64_t[]){1, C, H, W});
    assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
    ir_vid w = value(g, "w", 4, (int64_t[]){M, C, 3, 3});
    g->values[w].flags = IR_VALUE_CONST;
    g->values[w].data = weights;
    g->values[w].data_bytes = sizeof weights;
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_CONV, "conv", 2, 1, 2, &k), ANVIL_OK);
    g->nodes[k].inputs[0] = x;
    g->nodes[k].inputs[1] = w;
    ir_vid y;
    assert_int_equal(ir_graph_add_value(g, "y", &y), ANVIL_OK);
    g->nodes[k].outputs[0] = y;
    g->values[y].producer = k;
    ints(g, &g->nodes[k].attrs[0], "dilations", (int64_t[]){dh, dw}, 2);
    ints(g, &g->nodes[k].attrs[1], "pads", (int64_t[]){dh, dw, dh, dw}, 4);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(op_check_graph(g), ANVIL_OK);
    assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);
    return g;
}

/* Runs g at opt levels 0 and 1; returns how many Convs the passes cropped. */
static int run_both(ir_graph *g, int64_t *kernel_after) {
    pass_options po = {.opt_level = 1};
    pass_graph *pg;
    assert_int_equal(pass_pipeline_run(g, &po, &pg), ANVIL_OK);
    int cropped = pg->cropped_convs;
    for (int32_t k = 0; k < pg->g->n_nodes; k++)
        if (pg->g->nodes[k].op == IR_OP_CONV) {
            const ir_shape *s = &pg->g->values[pg->g->nodes[k].inputs[1]].shape;
            kernel_after[0] = s->d[2];
            kernel_after[1] = s->d[3];
        }
    pass_graph_free(pg);

    anvil_tensor *in;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){1, C, H, W}, &in), ANVIL_OK);
    for (int i = 0; i < C * H * W; i++) ((float *)in->data)[i] = (float)((i * 13) % 23) - 11.0f;
    const anvil_tensor *ins[1] = {in};
    anvil_tensor *out[2];
    for (int level = 0; level <= 1; level++) {
        rt_session_config cfg = {.threads = 1, .opt_level = level, .layout = PASS_LAYOUT_NCHW};
        rt_session *s;
        assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
        assert_int_equal(rt_session_run(s, ins, NULL, &out[level]), ANVIL_OK);
        rt_session_free(s);
    }
    assert_int_equal(out[0]->bytes, out[1]->bytes);
    const float *a = out[0]->data, *b = out[1]->data;
    for (size_t i = 0; i < out[0]->bytes / 4; i++) assert_true(fabsf(a[i] - b[i]) <= 1e-4f);
    anvil_tensor_free(out[0]);
    anvil_tensor_free(out[1]);
    anvil_tensor_free(in);
    return cropped;
}

static void test_crop(void **state) {
    (void)state;
    for (int i = 0; i < M * C * 9; i++) weights[i] = (float)((i * 7) % 11) / 11.0f - 0.4f;
    int64_t kernel[2];
    /* dilation 12 on 10 rows: only the centre row of taps reads data; dilation 2 on 10 columns:
     * every column does */
    ir_graph *g = conv_graph(12, 2);
    assert_int_equal(run_both(g, kernel), 1);
    assert_int_equal(kernel[0], 1);
    assert_int_equal(kernel[1], 3);
    ir_graph_free(g);
    /* both dims: a 1x1 convolution */
    g = conv_graph(36, 12);
    assert_int_equal(run_both(g, kernel), 1);
    assert_int_equal(kernel[0], 1);
    assert_int_equal(kernel[1], 1);
    ir_graph_free(g);
    /* every tap reads data somewhere: left alone */
    g = conv_graph(4, 1);
    assert_int_equal(run_both(g, kernel), 0);
    assert_int_equal(kernel[0], 3);
    assert_int_equal(kernel[1], 3);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_crop)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
