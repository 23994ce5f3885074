/* Building IR graphs by hand in unit tests: what the tests that make nodes without the ONNX
 * importer share. Include after cmocka.h and the IR headers; everything is static. */
#ifndef ANVIL_TEST_GRAPH_H
#define ANVIL_TEST_GRAPH_H

#include <string.h>

/* Makes *a the INTS attribute `name` = v[0..n), its name and values copied into g's arena. */
static void test_attr_ints(ir_graph *g, ir_attr *a, const char *name, const int64_t *v, size_t n) {
    a->name = core_arena_strdup(g->arena, name);
    a->type = IR_ATTR_INTS;
    int64_t *copy = core_arena_array(g->arena, n, sizeof *copy);
    assert_non_null(copy);
    memcpy(copy, v, n * sizeof *v);
    a->ints = copy;
    a->n = n;
}

#endif
