/* ir: building graphs, name lookup, duplicate definitions, attribute getters, shapes, op table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

static void test_values_and_lookup(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "v%d", i);
        ir_vid v;
        assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
        assert_int_equal(v, i);
    }
    for (int i = 0; i < 5000; i += 7) {
        snprintf(name, sizeof name, "v%d", i);
        assert_int_equal(ir_graph_find_value(g, name), i);
    }
    assert_int_equal(ir_graph_find_value(g, "absent"), IR_NONE);
    ir_vid dup;
    assert_int_equal(ir_graph_add_value(g, "v42", &dup), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "'v42' is defined more than once"));
    ir_graph_free(g);
}

static void test_subgraph_depth_limit(void **state) {
    (void)state;
    ir_graph *root, *g;
    assert_int_equal(ir_graph_create(NULL, &root), ANVIL_OK);
    g = root;
    for (int d = 1; d <= IR_MAX_GRAPH_DEPTH; d++) {
        ir_graph *c;
        assert_int_equal(ir_graph_create(g, &c), ANVIL_OK);
        g = c;
    }
    ir_graph *too_deep;
    assert_int_equal(ir_graph_create(g, &too_deep), ANVIL_ERR_LIMIT);
    assert_null(too_deep);
    ir_graph_free(root); /* frees every nested graph */
}

static void test_attr_getters(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_CONV, "c1", 2, 1, 2, &k), ANVIL_OK);
    ir_node *n = &g->nodes[k];
    n->attrs[0].name = "group";
    n->attrs[0].type = IR_ATTR_INT;
    n->attrs[0].i = 4;
    n->attrs[1].name = "kernel_shape";
    n->attrs[1].type = IR_ATTR_FLOAT;
    int64_t v;
    assert_int_equal(ir_attr_int(n, "group", 1, &v), ANVIL_OK);
    assert_int_equal(v, 4);
    assert_int_equal(ir_attr_int(n, "absent", 9, &v), ANVIL_OK);
    assert_int_equal(v, 9);
    const int64_t *ks;
    size_t cnt;
    assert_int_equal(ir_attr_ints(n, "kernel_shape", &ks, &cnt), ANVIL_ERR_INVALID_MODEL);
    assert_non_null(strstr(anvil_last_error(), "node 'c1' (Conv)"));
    assert_non_null(strstr(anvil_last_error(), "must be of type INTS but is FLOAT"));
    ir_graph_free(g);
}

static void test_op_table(void **state) {
    (void)state;
    ir_op op;
    assert_true(ir_op_lookup("Conv", &op));
    assert_int_equal(op, IR_OP_CONV);
    assert_string_equal(ir_op_name(IR_OP_GLOBALAVERAGEPOOL), "GlobalAveragePool");
    assert_false(ir_op_lookup("conv", &op));
    assert_false(ir_op_lookup("FusedConv", &op));
    /* every name round-trips (the table must stay sorted for the binary search) */
    for (int i = 0; i < IR_OP_COUNT; i++) {
        assert_true(ir_op_lookup(ir_op_name((ir_op)i), &op));
        assert_int_equal(op, i);
    }
}

static void test_shapes(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    int32_t sym;
    assert_int_equal(ir_graph_add_sym(g, "batch", &sym), ANVIL_OK);
    ir_shape s;
    int64_t d[3] = {1, 3, 224};
    ir_shape_set(&s, 3, d);
    assert_true(ir_shape_is_static(&s));
    size_t n;
    assert_true(ir_shape_numel(&s, &n));
    assert_int_equal(n, 672);
    s.d[0] = IR_DIM_UNKNOWN;
    s.sym[0] = sym;
    char buf[64];
    assert_string_equal(ir_shape_str(g, &s, buf, sizeof buf), "[batch,3,224]");
    assert_false(ir_shape_is_static(&s));
    ir_shape u;
    ir_shape_unknown(&u);
    assert_string_equal(ir_shape_str(g, &u, buf, sizeof buf), "[?...]");
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_lookup),
        cmocka_unit_test(test_subgraph_depth_limit),
        cmocka_unit_test(test_attr_getters),
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
