/* The drop_noops pass (src/passes/noop.c): a Cast to its input's own dtype runs as an alias of
 * its input (no kernel, no copy) at opt level 1, a Cast that converts still runs, and the
 * outputs are the same at opt level 0 and 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

static ir_vid value(ir_graph *g, const char *name, anvil_dtype dt) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = dt;
    return v;
}

/* op(in) -> out named `out`, with one int attribute when attr is non-NULL */
static ir_vid node(ir_graph *g, ir_op op, const char *out, ir_vid in, const char *attr, int64_t val,
                   int n_out) {
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, op, out, 1, n_out, attr ? 1 : 0, &k), ANVIL_OK);
    g->nodes[k].inputs[0] = in;
    ir_vid y = value(g, out, ANVIL_DTYPE_UNDEFINED);
    g->nodes[k].outputs[0] = y;
    g->values[y].producer = k;
    if (n_out > 1) {
        char mask[64];
        snprintf(mask, sizeof mask, "%s_mask", out);
        ir_vid m = value(g, mask, ANVIL_DTYPE_UNDEFINED);
        g->nodes[k].outputs[1] = m;
        g->values[m].producer = k;
        assert_int_equal(ir_graph_add_output(g, m), ANVIL_OK);
    }
    if (attr) {
        ir_attr *a = &g->nodes[k].attrs[0];
        a->name = core_arena_strdup(g->arena, attr);
        a->type = IR_ATTR_INT;
        a->i = val;
    }
    return y;
}

typedef struct seen {
    char variant[8][64];
    int n;
} seen;

static void note(void *arg, const rt_step_info *info) {
    seen *s = arg;
    if (s->n < 8) snprintf(s->variant[s->n++], sizeof s->variant[0], "%s", info->variant);
}

/* x -> Cast(FLOAT) -> Dropout -> Relu -> Cast(FLOAT16) -> Dropout(mask out) -> y */
static void test_noops_alias(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    int64_t dims[2] = {4, 100};
    ir_vid x = value(g, "x", ANVIL_DTYPE_FLOAT32);
    ir_shape_set(&g->values[x].shape, 2, dims);
    assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
    ir_vid a = node(g, IR_OP_CAST, "same", x, "to", ANVIL_DTYPE_FLOAT32, 1);
    ir_vid b = node(g, IR_OP_DROPOUT, "drop", a, NULL, 0, 1);
    ir_vid c = node(g, IR_OP_RELU, "relu", b, NULL, 0, 1);
    ir_vid d = node(g, IR_OP_CAST, "half", c, "to", ANVIL_DTYPE_FLOAT16, 1);
    ir_vid y = node(g, IR_OP_DROPOUT, "drop_mask", d, NULL, 0, 2);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(op_check_graph(g), ANVIL_OK);
    assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);

    anvil_tensor *in;
    assert_int_equal(rt_tensor_new(ANVIL_DTYPE_FLOAT32, 2, dims, &in), ANVIL_OK);
    for (int i = 0; i < 400; i++) ((float *)in->data)[i] = (float)(i % 17) - 8.5f;
    const anvil_tensor *ins[1] = {in};
    anvil_tensor *out[2][2];
    for (int level = 0; level <= 1; level++) {
        rt_session_config cfg = {.threads = 1, .opt_level = level};
        rt_session *s;
        assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
        assert_int_equal(rt_session_run(s, ins, NULL, out[level]), ANVIL_OK);
        seen sn = {0};
        assert_int_equal(rt_session_explain(s, note, &sn), ANVIL_OK);
        assert_int_equal(sn.n, 5);
        /* the same-dtype Cast: an alias at level 1 only */
        assert_int_equal(!strcmp(sn.variant[0], "alias"), level == 1);
        assert_string_not_equal(sn.variant[3], "alias"); /* a converting Cast */
        rt_session_free(s);
    }
    for (int j = 0; j < 2; j++) {
        assert_int_equal(out[0][j]->bytes, out[1][j]->bytes);
        assert_memory_equal(out[0][j]->data, out[1][j]->data, out[0][j]->bytes);
        for (int level = 0; level <= 1; level++) anvil_tensor_free(out[level][j]);
    }
    anvil_tensor_free(in);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_noops_alias)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
