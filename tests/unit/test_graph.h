/* Building IR graphs by hand in unit tests: what the tests that make nodes without the ONNX
 * importer share. Include after cmocka.h and the IR headers; everything is static inline (not
 * every includer uses every helper). */
#ifndef ANVIL_TEST_GRAPH_H
#define ANVIL_TEST_GRAPH_H

#include <string.h>

/* Makes *a the INTS attribute `name` = v[0..n), its name and values copied into g's arena. */
static inline void test_attr_ints(ir_graph *g, ir_attr *a, const char *name, const int64_t *v,
                                  size_t n) {
    a->name = core_arena_strdup(g->arena, name);
    a->type = IR_ATTR_INTS;
    int64_t *copy = core_arena_array(g->arena, n, sizeof *copy);
    assert_non_null(copy);
    memcpy(copy, v, n * sizeof *v);
    a->ints = copy;
    a->n = n;
}

/* A new value of g named `name`. */
static inline ir_vid test_add_value(ir_graph *g, const char *name) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    return v;
}

/* Node op(ins[0..n_in)) -> one new output value named out_name, with n_attrs attribute slots;
 * returns the output. */
static inline ir_vid test_add_node(ir_graph *g, ir_op op, const char *out_name, int n_in,
                                   const ir_vid *ins, int n_attrs) {
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, op, out_name, n_in, 1, n_attrs, &k), ANVIL_OK);
    ir_vid y = test_add_value(g, out_name);
    ir_node *n = &g->nodes[k];
    for (int i = 0; i < n_in; i++) n->inputs[i] = ins[i];
    n->outputs[0] = y;
    g->values[y].producer = k;
    return y;
}

#endif
