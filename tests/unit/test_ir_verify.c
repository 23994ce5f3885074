/* ir_graph_verify and ir_graph_toposort on hand-built graphs: valid graphs pass, each class of
 * structural fault is refused with a message naming the node and value, sorting is stable and
 * fixes order problems, cycles are named, and random DAGs come out in an order that respects
 * every edge (checked independently of the sorter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- graph building helpers ------------------------------------------------------------------ */

static ir_vid val(ir_graph *g, const char *name, anvil_dtype dt, int rank, const int64_t *dims) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = dt;
    if (rank >= 0) ir_shape_set(&g->values[v].shape, rank, dims);
    return v;
}

static ir_vid input(ir_graph *g, const char *name) {
    ir_vid v = val(g, name, ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){2, 3});
    assert_int_equal(ir_graph_add_input(g, v), ANVIL_OK);
    return v;
}

static float const_data[64];

static ir_vid initializer(ir_graph *g, const char *name, int64_t n) {
    ir_vid v = val(g, name, ANVIL_DTYPE_FLOAT32, 1, (int64_t[]){n});
    g->values[v].flags |= IR_VALUE_CONST;
    g->values[v].data = const_data;
    g->values[v].data_bytes = (size_t)n * sizeof(float);
    return v;
}

/* A node reading `ins` and writing `outs` (value ids; IR_NONE allowed); sets producers. */
static int32_t node(ir_graph *g, ir_op op, const char *name, int nin, const ir_vid *ins, int nout,
                    const ir_vid *outs) {
    int32_t idx;
    assert_int_equal(ir_graph_add_node(g, op, name, nin, nout, 0, &idx), ANVIL_OK);
    for (int k = 0; k < nin; k++) g->nodes[idx].inputs[k] = ins[k];
    for (int k = 0; k < nout; k++) {
        g->nodes[idx].outputs[k] = outs[k];
        if (outs[k] != IR_NONE) g->values[outs[k]].producer = idx;
    }
    return idx;
}

/* A node output as shape inference leaves it: typed, shape unknown. */
static ir_vid out_val(ir_graph *g, const char *name) {
    return val(g, name, ANVIL_DTYPE_FLOAT32, -1, NULL);
}

static void expect_error(anvil_status got, anvil_status want, int n_subs, ...) {
    assert_int_equal(got, want);
    const char *msg = core_err_message();
    va_list ap;
    va_start(ap, n_subs);
    for (int i = 0; i < n_subs; i++) {
        const char *sub = va_arg(ap, const char *);
        if (!strstr(msg, sub)) fail_msg("message \"%s\" lacks \"%s\"", msg, sub);
    }
    va_end(ap);
}

static const char *node_name(const ir_graph *g, int32_t i) {
    return g->nodes[i].name;
}

/* Graph x -> Relu(r1) -> a -> Add(add1, a, w) -> b -> Neg(neg1) -> y (output). */
static ir_graph *chain(void) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x"), w = initializer(g, "w", 3);
    ir_vid a = out_val(g, "a"), b = out_val(g, "b"), y = out_val(g, "y");
    node(g, IR_OP_RELU, "r1", 1, &x, 1, &a);
    node(g, IR_OP_ADD, "add1", 2, (ir_vid[]){a, w}, 1, &b);
    node(g, IR_OP_NEG, "neg1", 1, &b, 1, &y);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    return g;
}

/* ---- verify ---------------------------------------------------------------------------------- */

static void test_valid_chain(void **state) {
    (void)state;
    ir_graph *g = chain();
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    assert_int_equal(ir_graph_toposort(g), ANVIL_OK);
    assert_string_equal(node_name(g, 0), "r1");
    assert_string_equal(node_name(g, 1), "add1");
    assert_string_equal(node_name(g, 2), "neg1");
    ir_graph_free(g);
}

static void test_undefined_value(void **state) {
    (void)state;
    ir_graph *g = chain();
    ir_vid ghost = out_val(g, "ghost"), z = out_val(g, "z");
    node(g, IR_OP_MUL, "mul_ghost", 2, (ir_vid[]){g->outputs[0], ghost}, 1, &z);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 3, "ghost", "mul_ghost",
                 "never defined");
    expect_error(ir_graph_toposort(g), ANVIL_ERR_INVALID_MODEL, 3, "ghost", "mul_ghost",
                 "never defined");
    ir_graph_free(g);
}

static void test_defined_twice_by_nodes(void **state) {
    (void)state;
    ir_graph *g = chain();
    ir_vid x = g->inputs[0], b = ir_graph_find_value(g, "b");
    int32_t dup = node(g, IR_OP_ABS, "abs_dup", 1, &x, 1, &b);
    (void)dup;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 4, "'b'", "defined twice", "add1",
                 "abs_dup");
    expect_error(ir_graph_toposort(g), ANVIL_ERR_INVALID_MODEL, 3, "'b'", "add1", "abs_dup");
    ir_graph_free(g);
}

static void test_defined_by_input_and_node(void **state) {
    (void)state;
    ir_graph *g = chain();
    ir_vid a = ir_graph_find_value(g, "a");
    /* 'a' is written by r1 and also declared as a graph input */
    g->values[a].dtype = ANVIL_DTYPE_FLOAT32;
    assert_int_equal(ir_graph_add_input(g, a), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 4, "'a'", "defined twice",
                 "graph input", "r1");
    ir_graph_free(g);
}

static void test_input_and_initializer(void **state) {
    (void)state;
    ir_graph *g = chain();
    ir_vid w = ir_graph_find_value(g, "w");
    assert_int_equal(ir_graph_add_input(g, w), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 3, "'w'", "graph input",
                 "initializer");
    ir_graph_free(g);
}

static void test_out_of_order_then_sorted(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x");
    ir_vid a = out_val(g, "a"), b = out_val(g, "b"), c = out_val(g, "c"), d = out_val(g, "d");
    /* C reads b before B makes it; D is independent */
    node(g, IR_OP_NEG, "C", 1, &b, 1, &c);
    node(g, IR_OP_RELU, "A", 1, &x, 1, &a);
    node(g, IR_OP_ABS, "B", 1, &a, 1, &b);
    node(g, IR_OP_EXP, "D", 1, &x, 1, &d);
    assert_int_equal(ir_graph_add_output(g, c), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, d), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 4, "node 'C' (Neg)", "'b'",
                 "node 'B' (Abs)", "ir_graph_toposort");
    assert_int_equal(ir_graph_toposort(g), ANVIL_OK);
    /* Kahn with the earliest ready node first: A (1) and D (3) ready; A; then B (2) < D; then
     * C (0) < D; then D. */
    const char *want[] = {"A", "B", "C", "D"};
    for (int i = 0; i < 4; i++) assert_string_equal(node_name(g, i), want[i]);
    for (int i = 0; i < 4; i++) assert_int_equal(g->values[g->nodes[i].outputs[0]].producer, i);
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    ir_graph_free(g);
}

static void test_stable_when_sorted(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x");
    /* two interleaved independent chains: already topological, must stay exactly as is */
    ir_vid p = x, q = x;
    char name[32];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "p%d", i);
        ir_vid np = out_val(g, name);
        node(g, IR_OP_RELU, name, 1, &p, 1, &np);
        snprintf(name, sizeof name, "q%d", i);
        ir_vid nq = out_val(g, name);
        node(g, IR_OP_NEG, name, 1, &q, 1, &nq);
        p = np;
        q = nq;
    }
    assert_int_equal(ir_graph_add_output(g, p), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, q), ANVIL_OK);
    assert_int_equal(ir_graph_toposort(g), ANVIL_OK);
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "p%d", i);
        assert_string_equal(node_name(g, 2 * i), name);
        snprintf(name, sizeof name, "q%d", i);
        assert_string_equal(node_name(g, 2 * i + 1), name);
    }
    ir_graph_free(g);
}

static void test_cycle_named(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x");
    ir_vid t = out_val(g, "t"), u = out_val(g, "u"), v = out_val(g, "v"), w = out_val(g, "w"),
           y = out_val(g, "y");
    /* tail: T -> U; cycle: U' (cyc_a) -> cyc_b -> cyc_c -> cyc_a; downstream: out_node */
    node(g, IR_OP_RELU, "tail", 1, &x, 1, &t);
    node(g, IR_OP_ADD, "cyc_a", 2, (ir_vid[]){t, w}, 1, &u);
    node(g, IR_OP_NEG, "cyc_b", 1, &u, 1, &v);
    node(g, IR_OP_ABS, "cyc_c", 1, &v, 1, &w);
    node(g, IR_OP_EXP, "after", 1, &w, 1, &y);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 2, "cyc_a", "'w'");
    expect_error(ir_graph_toposort(g), ANVIL_ERR_INVALID_MODEL, 4, "cycle", "cyc_a", "cyc_b",
                 "cyc_c");
    const char *msg = core_err_message();
    /* the nodes off the cycle are not blamed */
    assert_null(strstr(msg, "tail"));
    assert_null(strstr(msg, "'after'"));
    /* a failed sort leaves the graph as it was */
    const char *want[] = {"tail", "cyc_a", "cyc_b", "cyc_c", "after"};
    for (int i = 0; i < 5; i++) assert_string_equal(node_name(g, i), want[i]);
    ir_graph_free(g);
}

static void test_self_loop(void **state) {
    (void)state;
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x");
    ir_vid s = out_val(g, "s");
    node(g, IR_OP_ADD, "selfish", 2, (ir_vid[]){x, s}, 1, &s);
    assert_int_equal(ir_graph_add_output(g, s), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 3, "selfish", "own output", "'s'");
    expect_error(ir_graph_toposort(g), ANVIL_ERR_INVALID_MODEL, 2, "cycle", "selfish");
    ir_graph_free(g);
}

static void test_dtypes(void **state) {
    (void)state;
    ir_graph *g = chain();
    g->values[g->inputs[0]].dtype = ANVIL_DTYPE_UNDEFINED;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 2, "'x'", "UNDEFINED");
    g->values[g->inputs[0]].dtype = ANVIL_DTYPE_STRING;
    expect_error(ir_graph_verify(g), ANVIL_ERR_UNSUPPORTED, 2, "'x'", "STRING");
    g->values[g->inputs[0]].dtype = ANVIL_DTYPE_FLOAT32;
    ir_vid w = ir_graph_find_value(g, "w");
    g->values[w].dtype = ANVIL_DTYPE_COMPLEX64;
    expect_error(ir_graph_verify(g), ANVIL_ERR_UNSUPPORTED, 2, "initializer 'w'", "COMPLEX64");
    g->values[w].dtype = ANVIL_DTYPE_FLOAT32;
    ir_vid b = ir_graph_find_value(g, "b");
    g->values[b].dtype = ANVIL_DTYPE_FLOAT8E4M3FN;
    expect_error(ir_graph_verify(g), ANVIL_ERR_UNSUPPORTED, 2, "'b'", "add1");
    /* verification runs after shape inference, which types every node output */
    g->values[b].dtype = ANVIL_DTYPE_UNDEFINED;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INTERNAL, 3, "'b'", "add1", "no element type");
    g->values[b].dtype = ANVIL_DTYPE_FLOAT32;
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    ir_graph_free(g);
}

static void test_outputs(void **state) {
    (void)state;
    ir_graph *g = chain();
    ir_vid lost = out_val(g, "lost_output");
    assert_int_equal(ir_graph_add_output(g, lost), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 2, "lost_output", "never defined");
    ir_graph_free(g);

    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x"), y = out_val(g, "y");
    node(g, IR_OP_RELU, "r", 1, &x, 1, &y);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 1, "no outputs");
    /* a graph input passed straight through is a valid output */
    assert_int_equal(ir_graph_add_output(g, x), ANVIL_OK);
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    ir_graph_free(g);
}

static void test_node_shape_sanity(void **state) {
    (void)state;
    ir_graph *g = chain();
    int32_t idx;
    assert_int_equal(ir_graph_add_node(g, IR_OP_RELU, "no_out", 1, 1, 0, &idx), ANVIL_OK);
    g->nodes[idx].inputs[0] = g->inputs[0];
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 2, "no_out", "no outputs");
    g->nodes[idx].outputs[0] = g->n_values + 5;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INTERNAL, 1, "value id");
    ir_graph_free(g);

    g = chain();
    ir_vid w = ir_graph_find_value(g, "w");
    g->values[w].data_bytes = 5;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 3, "'w'", "12 bytes", "holds 5");
    g->values[w].data_bytes = 12;
    g->values[w].shape.d[0] = -7;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 2, "'w'", "-7");
    ir_graph_free(g);

    g = chain();
    g->values[ir_graph_find_value(g, "a")].producer = 2;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INTERNAL, 2, "'a'", "producer 2");
    ir_graph_free(g);

    /* a producer recorded on a value that no node writes */
    g = chain();
    ir_vid stray = out_val(g, "stray");
    g->values[stray].producer = 1;
    expect_error(ir_graph_verify(g), ANVIL_ERR_INTERNAL, 2, "'stray'", "producer 1");
    ir_graph_free(g);
}

static void test_input_listed_twice(void **state) {
    (void)state;
    ir_graph *g = chain();
    assert_int_equal(ir_graph_add_input(g, g->inputs[0]), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 2, "'x'", "more than once");
    ir_graph_free(g);
}

/* ---- subgraphs ------------------------------------------------------------------------------- */

/* Parent: x -> Relu(pre) -> a; Identity(owner) with a GRAPH attribute "body" -> y.
 * Body: outer reference `outer_name` -> Neg(inner) -> body_out. */
static ir_graph *with_body(const char *outer_name, ir_graph **body_out_graph) {
    ir_graph *g, *body;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x"), a = out_val(g, "a"), y = out_val(g, "y");
    node(g, IR_OP_RELU, "pre", 1, &x, 1, &a);
    int32_t owner;
    assert_int_equal(ir_graph_add_node(g, IR_OP_IDENTITY, "owner", 1, 1, 1, &owner), ANVIL_OK);
    g->nodes[owner].inputs[0] = x;
    g->nodes[owner].outputs[0] = y;
    g->values[y].producer = owner;
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);

    assert_int_equal(ir_graph_create(g, &body), ANVIL_OK);
    body->name = "body";
    ir_vid o = val(body, outer_name, ANVIL_DTYPE_FLOAT32, -1, NULL);
    body->values[o].flags |= IR_VALUE_OUTER;
    ir_vid bo = out_val(body, "body_out");
    node(body, IR_OP_NEG, "inner", 1, &o, 1, &bo);
    assert_int_equal(ir_graph_add_output(body, bo), ANVIL_OK);
    ir_attr *attr = &g->nodes[owner].attrs[0];
    attr->name = "body";
    attr->type = IR_ATTR_GRAPH;
    attr->g = body;
    *body_out_graph = body;
    return g;
}

static void test_subgraph_outer_ok(void **state) {
    (void)state;
    ir_graph *body;
    ir_graph *g = with_body("a", &body);
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    ir_graph_free(g);
}

static void test_subgraph_outer_unknown(void **state) {
    (void)state;
    ir_graph *body;
    ir_graph *g = with_body("nowhere", &body);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 4, "nowhere", "graph 'body'", "owner",
                 "no enclosing graph");
    ir_graph_free(g);
}

static void test_subgraph_inner_fault(void **state) {
    (void)state;
    ir_graph *body;
    ir_graph *g = with_body("a", &body);
    ir_vid ghost = out_val(body, "inner_ghost"), z = out_val(body, "z");
    node(body, IR_OP_ADD, "inner_add", 2, (ir_vid[]){body->outputs[0], ghost}, 1, &z);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 3, "inner_ghost", "inner_add",
                 "owner");
    ir_graph_free(g);
}

static void test_subgraph_outer_order(void **state) {
    (void)state;
    ir_graph *body;
    ir_graph *g = with_body("late", &body);
    /* 'late' is produced by a node placed after the owner */
    ir_vid x = g->inputs[0], late = out_val(g, "late"), y2 = out_val(g, "y2");
    node(g, IR_OP_ABS, "late_maker", 1, &x, 1, &late);
    node(g, IR_OP_NEG, "user", 1, &late, 1, &y2);
    assert_int_equal(ir_graph_add_output(g, y2), ANVIL_OK);
    expect_error(ir_graph_verify(g), ANVIL_ERR_INVALID_MODEL, 3, "'late'", "before it is defined",
                 "owner");
    /* the sorter sees the body's use of 'late' and moves the owner after its producer */
    assert_int_equal(ir_graph_toposort(g), ANVIL_OK);
    const char *want[] = {"pre", "late_maker", "owner", "user"};
    for (int i = 0; i < 4; i++) assert_string_equal(node_name(g, i), want[i]);
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    ir_graph_free(g);
}

/* ---- randomized: the sorted order must respect every edge ----------------------------------- */

static uint32_t rng(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void test_random_dags(void **state) {
    (void)state;
    uint32_t seed = 12345;
    for (int trial = 0; trial < 40; trial++) {
        int n = 1 + (int)(rng(&seed) % 60);
        ir_graph *g;
        assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
        ir_vid x = input(g, "x");
        /* node k reads x and up to 3 outputs of nodes j < k in a topological numbering */
        ir_vid *outs = malloc(sizeof(ir_vid) * (size_t)n);
        int(*reads)[3] = malloc(sizeof *reads * (size_t)n);
        int *perm = malloc(sizeof(int) * (size_t)n);
        for (int k = 0; k < n; k++) {
            char name[32];
            snprintf(name, sizeof name, "v%d", k);
            outs[k] = out_val(g, name);
            for (int r = 0; r < 3; r++)
                reads[k][r] = k > 0 && rng(&seed) % 2 ? (int)(rng(&seed) % (uint32_t)k) : -1;
            perm[k] = k;
        }
        for (int k = n - 1; k > 0; k--) {
            int j = (int)(rng(&seed) % (uint32_t)(k + 1));
            int t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        /* insert nodes in shuffled order */
        for (int i = 0; i < n; i++) {
            int k = perm[i];
            ir_vid ins[4] = {x, IR_NONE, IR_NONE, IR_NONE};
            for (int r = 0; r < 3; r++)
                if (reads[k][r] >= 0) ins[r + 1] = outs[reads[k][r]];
            char name[32];
            snprintf(name, sizeof name, "n%d", k);
            node(g, IR_OP_MAX, name, 4, ins, 1, &outs[k]);
        }
        assert_int_equal(ir_graph_add_output(g, outs[n - 1]), ANVIL_OK);
        assert_int_equal(ir_graph_toposort(g), ANVIL_OK);
        /* independent check: position of each logical node, every read points backwards */
        int *pos = malloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++) pos[atoi(g->nodes[i].name + 1)] = i;
        for (int k = 0; k < n; k++)
            for (int r = 0; r < 3; r++)
                if (reads[k][r] >= 0) assert_true(pos[reads[k][r]] < pos[k]);
        assert_int_equal(ir_graph_verify(g), ANVIL_OK);
        free(pos);
        free(outs);
        free(reads);
        free(perm);
        ir_graph_free(g);
    }
}

static void test_long_reversed_chain(void **state) {
    (void)state;
    enum { N = 20000 };
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    ir_vid x = input(g, "x");
    ir_vid *v = malloc(sizeof(ir_vid) * N);
    char name[32];
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof name, "v%d", k);
        v[k] = out_val(g, name);
    }
    /* inserted last-first: every node is out of order */
    for (int k = N - 1; k >= 0; k--) {
        snprintf(name, sizeof name, "n%d", k);
        node(g, IR_OP_RELU, name, 1, k ? &v[k - 1] : &x, 1, &v[k]);
    }
    assert_int_equal(ir_graph_add_output(g, v[N - 1]), ANVIL_OK);
    assert_int_equal(ir_graph_toposort(g), ANVIL_OK);
    for (int k = 0; k < N; k += 997) {
        snprintf(name, sizeof name, "n%d", k);
        assert_string_equal(node_name(g, k), name);
    }
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    free(v);
    ir_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_chain),
        cmocka_unit_test(test_undefined_value),
        cmocka_unit_test(test_defined_twice_by_nodes),
        cmocka_unit_test(test_defined_by_input_and_node),
        cmocka_unit_test(test_input_and_initializer),
        cmocka_unit_test(test_out_of_order_then_sorted),
        cmocka_unit_test(test_stable_when_sorted),
        cmocka_unit_test(test_cycle_named),
        cmocka_unit_test(test_self_loop),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_node_shape_sanity),
        cmocka_unit_test(test_input_listed_twice),
        cmocka_unit_test(test_subgraph_outer_ok),
        cmocka_unit_test(test_subgraph_outer_unknown),
        cmocka_unit_test(test_subgraph_inner_fault),
        cmocka_unit_test(test_subgraph_outer_order),
        cmocka_unit_test(test_random_dags),
        cmocka_unit_test(test_long_reversed_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
