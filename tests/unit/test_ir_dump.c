/* Text and dot dumps of a hand-built graph (shapes, attributes, escaping, subgraphs, dot
 * well-formedness), and ir_node_flops against MAC counts computed here by walking each op's
 * loop nest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float weights[4 * 3 * 3 * 3];
static const int64_t k_values[3] = {1, 2, 3};

static ir_vid val(ir_graph *g, const char *name, anvil_dtype dt, int rank, const int64_t *dims) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = dt;
    if (rank >= 0) ir_shape_set(&g->values[v].shape, rank, dims);
    return v;
}

static int32_t node(ir_graph *g, ir_op op, const char *name, int nin, const ir_vid *ins, int nout,
                    const ir_vid *outs, int nattrs) {
    int32_t idx;
    assert_int_equal(ir_graph_add_node(g, op, name, nin, nout, nattrs, &idx), ANVIL_OK);
    for (int k = 0; k < nin; k++) g->nodes[idx].inputs[k] = ins[k];
    for (int k = 0; k < nout; k++) {
        g->nodes[idx].outputs[k] = outs[k];
        if (outs[k] != IR_NONE) g->values[outs[k]].producer = idx;
    }
    return idx;
}

static ir_attr *attr(ir_graph *g, int32_t n, int k, const char *name, ir_attr_type t) {
    ir_attr *a = &g->nodes[n].attrs[k];
    a->name = core_arena_strdup(g->arena, name);
    a->type = t;
    return a;
}

static void set_ints(ir_graph *g, ir_attr *a, const int64_t *v, size_t n) {
    int64_t *copy = core_arena_array(g->arena, n, sizeof *copy);
    memcpy(copy, v, n * sizeof *copy);
    a->ints = copy;
    a->n = n;
}

/* demo: x[N,3,8,8] -> Conv(conv"1, w) -> c -> Relu -> r (output)
 *       Constant(konst) -> k;  Identity(owner, body: outer r -> Neg -> body_out) -> y (output) */
static ir_graph *demo(void) {
    ir_graph *g, *body;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->name = "demo";
    g->opset = 17;
    int32_t sym;
    assert_int_equal(ir_graph_add_sym(g, "N", &sym), ANVIL_OK);
    ir_vid x = val(g, "x", ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){0, 3, 8, 8});
    g->values[x].shape.d[0] = IR_DIM_UNKNOWN;
    g->values[x].shape.sym[0] = sym;
    assert_int_equal(ir_graph_add_input(g, x), ANVIL_OK);
    ir_vid w = val(g, "w", ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){4, 3, 3, 3});
    g->values[w].flags |= IR_VALUE_CONST;
    g->values[w].data = weights;
    g->values[w].data_bytes = sizeof weights;
    ir_vid c = val(g, "c", ANVIL_DTYPE_FLOAT32, 4, (int64_t[]){0, 4, 8, 8});
    g->values[c].shape.d[0] = IR_DIM_UNKNOWN;
    g->values[c].shape.sym[0] = sym;
    ir_vid r = val(g, "r\nline", ANVIL_DTYPE_FLOAT32, -1, NULL);
    g->values[r].shape = g->values[c].shape;
    ir_vid k = val(g, "k", ANVIL_DTYPE_INT64, 1, (int64_t[]){3});
    ir_vid y = val(g, "y", ANVIL_DTYPE_FLOAT32, -1, NULL);

    int32_t conv = node(g, IR_OP_CONV, "conv\"1", 3, (ir_vid[]){x, w, IR_NONE}, 1, &c, 5);
    set_ints(g, attr(g, conv, 0, "kernel_shape", IR_ATTR_INTS), (int64_t[]){3, 3}, 2);
    set_ints(g, attr(g, conv, 1, "pads", IR_ATTR_INTS), (int64_t[]){1, 1, 1, 1}, 4);
    ir_attr *ap = attr(g, conv, 2, "auto_pad", IR_ATTR_STRING);
    ap->s = "NOT\"SET";
    ap->s_len = strlen(ap->s);
    attr(g, conv, 3, "alpha", IR_ATTR_FLOAT)->f = 0.5f;
    int64_t many[20];
    for (int i = 0; i < 20; i++) many[i] = i * 10;
    set_ints(g, attr(g, conv, 4, "many", IR_ATTR_INTS), many, 20);

    node(g, IR_OP_RELU, "relu", 1, &c, 1, &r, 0);

    int32_t kn = node(g, IR_OP_CONSTANT, "konst", 0, NULL, 1, &k, 1);
    ir_tensor *t = core_arena_alloc(g->arena, sizeof *t);
    t->dtype = ANVIL_DTYPE_INT64;
    t->rank = 1;
    t->dims[0] = 3;
    t->data = k_values;
    t->bytes = sizeof k_values;
    attr(g, kn, 0, "value", IR_ATTR_TENSOR)->t = t;

    int32_t owner = node(g, IR_OP_IDENTITY, "owner", 1, &k, 1, &y, 1);
    assert_int_equal(ir_graph_create(g, &body), ANVIL_OK);
    body->name = "body";
    ir_vid outer = val(body, "r\nline", ANVIL_DTYPE_FLOAT32, -1, NULL);
    body->values[outer].flags |= IR_VALUE_OUTER;
    ir_vid bo = val(body, "body_out", ANVIL_DTYPE_FLOAT32, -1, NULL);
    node(body, IR_OP_NEG, "inner_neg", 1, &outer, 1, &bo, 0);
    assert_int_equal(ir_graph_add_output(body, bo), ANVIL_OK);
    attr(g, owner, 0, "body", IR_ATTR_GRAPH)->g = body;

    assert_int_equal(ir_graph_add_output(g, r), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
    return g;
}

/* Runs a dump into a string (caller frees). */
static char *capture(const ir_graph *g, bool dot) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    if (dot)
        ir_graph_dump_dot(g, f);
    else
        ir_graph_dump_text(g, f);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void expect_has(const char *text, const char *sub) {
    if (!strstr(text, sub)) fail_msg("dump lacks \"%s\":\n%s", sub, text);
}

static void test_text_dump(void **state) {
    (void)state;
    ir_graph *g = demo();
    char *text = capture(g, false);
    expect_has(text, "graph 'demo' (opset 17): 1 inputs, 2 outputs, 4 nodes, 1 initializers "
                     "(432 bytes)\n");
    expect_has(text, "inputs:\n  x: FLOAT[N,3,8,8]\n");
    expect_has(text, "initializers:\n  w: FLOAT[4,3,3,3] (432 bytes)\n");
    expect_has(text, "#0 conv\"1 = Conv(x[N,3,8,8], w[4,3,3,3], _) -> c: FLOAT[N,4,8,8] "
                     "{kernel_shape=[3,3], pads=[1,1,1,1], auto_pad=\"NOT\\\"SET\", alpha=0.5, "
                     "many=[0,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150,...] (20 "
                     "items)}\n");
    /* a newline inside a name is escaped so it cannot start a fake line */
    expect_has(text, "#1 relu = Relu(c[N,4,8,8]) -> r\\x0aline: FLOAT[N,4,8,8]\n");
    expect_has(text, "#2 konst = Constant() -> k: INT64[3] {value=tensor(INT64[3]: 1,2,3)}\n");
    expect_has(text, "#3 owner = Identity(k[3]) -> y: FLOAT[?...] {body=graph 'body'}\n");
    expect_has(text, "    body:\n      graph 'body' (opset 17): 0 inputs, 1 outputs, 1 nodes");
    expect_has(text, "      outer references:\n        r\\x0aline: FLOAT[?...]\n");
    expect_has(text, "        #0 inner_neg = Neg(r\\x0aline[?...]) -> body_out: FLOAT[?...]\n");
    expect_has(text, "outputs:\n  r\\x0aline: FLOAT[N,4,8,8]\n  y: FLOAT[?...]\n");
    free(text);
    ir_graph_free(g);
}

/* Counts braces outside double-quoted strings (honouring backslash escapes) and checks that
 * every string is closed: a cheap stand-in for running Graphviz. */
static void check_dot_syntax(const char *s) {
    int depth = 0, max_depth = 0;
    bool in_str = false;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == '"')
                in_str = false;
            else
                assert_true(*s != '\n');
            continue;
        }
        if (*s == '"')
            in_str = true;
        else if (*s == '{')
            depth++;
        else if (*s == '}')
            depth--;
        assert_true(depth >= 0);
        if (depth > max_depth) max_depth = depth;
    }
    assert_false(in_str);
    assert_int_equal(depth, 0);
    assert_int_equal(max_depth, 2); /* the digraph and one cluster */
}

static void test_dot_dump(void **state) {
    (void)state;
    ir_graph *g = demo();
    char *text = capture(g, true);
    check_dot_syntax(text);
    assert_int_equal(strncmp(text, "digraph \"demo\" {\n", 17), 0);
    ir_vid x = ir_graph_find_value(g, "x"), w = ir_graph_find_value(g, "w");
    char buf[128];
    snprintf(buf, sizeof buf, "g0_v%d -> g0_n0 [label=\"[N,3,8,8]\"", (int)x);
    expect_has(text, buf);
    snprintf(buf, sizeof buf, "g0_v%d [shape=note", (int)w);
    expect_has(text, buf);
    expect_has(text, "label=\"conv\\\"1\\nConv\\nkernel_shape=[3,3]\\npads=[1,1,1,1]");
    expect_has(text, "auto_pad=\\\"NOT\\\\\\\"SET\\\"");
    expect_has(text, "label=\"r\\nline\\nFLOAT\"");
    expect_has(text, "subgraph cluster_g1 {");
    expect_has(text, "label=\"owner.body\"");
    expect_has(text, "g1_n0 [shape=box");
    expect_has(text, "(outer scope)");
    expect_has(text, "g0_n3 -> g1_o0 [style=dotted");
    expect_has(text, "g0_n1 -> g0_o0 [label=\"[N,4,8,8]\"]");
    free(text);
    ir_graph_free(g);
}

/* ---- FLOPs ----------------------------------------------------------------------------------- */

/* A one-node graph; shapes of inputs and output given. */
typedef struct one {
    ir_graph *g;
    int32_t n;
} one;

static one one_node(ir_op op, int nin, const int *ranks, const int64_t (*dims)[8], int out_rank,
                    const int64_t *out_dims, int nattrs) {
    one o;
    assert_int_equal(ir_graph_create(NULL, &o.g), ANVIL_OK);
    ir_vid ins[8];
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ins[i] = val(o.g, name, ANVIL_DTYPE_FLOAT32, ranks[i], dims[i]);
    }
    ir_vid y = val(o.g, "y", ANVIL_DTYPE_FLOAT32, out_rank, out_dims);
    o.n = node(o.g, op, "n", nin, ins, 1, &y, nattrs);
    return o;
}

static uint64_t flops(one o, bool *approx) {
    return ir_node_flops_ex(o.g, &o.g->nodes[o.n], approx);
}

static void test_flops_conv(void **state) {
    (void)state;
    /* x[2,8,10,10], w[8,2,3,3], group 4, no padding: y[2,8,8,8] */
    one o =
        one_node(IR_OP_CONV, 2, (int[]){4, 4}, (const int64_t[][8]){{2, 8, 10, 10}, {8, 2, 3, 3}},
                 4, (int64_t[]){2, 8, 8, 8}, 0);
    uint64_t macs = 0;
    int groups = 4, cpg = 8 / groups, mpg = 8 / groups;
    for (int n = 0; n < 2; n++)
        for (int m = 0; m < 8; m++)
            for (int oh = 0; oh < 8; oh++)
                for (int ow = 0; ow < 8; ow++)
                    for (int c = (m / mpg) * cpg; c < (m / mpg + 1) * cpg; c++)
                        for (int kh = 0; kh < 3; kh++)
                            for (int kw = 0; kw < 3; kw++) macs++;
    bool approx = true;
    assert_int_equal(flops(o, &approx), 2 * macs);
    assert_false(approx);
    ir_graph_free(o.g);

    /* ConvTranspose x[1,2,4,4], w[2,3,3,3]: every input element meets 3*3*3 weights */
    o = one_node(IR_OP_CONVTRANSPOSE, 2, (int[]){4, 4},
                 (const int64_t[][8]){{1, 2, 4, 4}, {2, 3, 3, 3}}, 4, (int64_t[]){1, 3, 6, 6}, 0);
    macs = 0;
    for (int i = 0; i < 1 * 2 * 4 * 4; i++)
        for (int oc = 0; oc < 3; oc++)
            for (int kk = 0; kk < 9; kk++) macs++;
    assert_int_equal(flops(o, &approx), 2 * macs);
    ir_graph_free(o.g);
}

static void test_flops_gemm_matmul(void **state) {
    (void)state;
    /* Gemm with transA: A[5,7] is K x M; B[5,6]; Y[7,6] */
    one o = one_node(IR_OP_GEMM, 2, (int[]){2, 2}, (const int64_t[][8]){{5, 7}, {5, 6}}, 2,
                     (int64_t[]){7, 6}, 1);
    attr(o.g, o.n, 0, "transA", IR_ATTR_INT)->i = 1;
    uint64_t macs = 0;
    for (int m = 0; m < 7; m++)
        for (int n = 0; n < 6; n++)
            for (int k = 0; k < 5; k++) macs++;
    bool approx;
    assert_int_equal(flops(o, &approx), 2 * macs);
    assert_false(approx);
    ir_graph_free(o.g);

    /* batched MatMul [2,5,4] x [4,7] -> [2,5,7] */
    o = one_node(IR_OP_MATMUL, 2, (int[]){3, 2}, (const int64_t[][8]){{2, 5, 4}, {4, 7}}, 3,
                 (int64_t[]){2, 5, 7}, 0);
    assert_int_equal(flops(o, &approx), 2ull * 2 * 5 * 7 * 4);
    ir_graph_free(o.g);

    /* saturates instead of wrapping */
    o = one_node(IR_OP_MATMUL, 2, (int[]){2, 2},
                 (const int64_t[][8]){{1ll << 40, 1ll << 30}, {1ll << 30, 1ll << 30}}, 2,
                 (int64_t[]){1ll << 40, 1ll << 30}, 0);
    assert_true(flops(o, &approx) == UINT64_MAX);
    ir_graph_free(o.g);
}

static void test_flops_pool_and_misc(void **state) {
    (void)state;
    bool approx;
    one o = one_node(IR_OP_MAXPOOL, 1, (int[]){4}, (const int64_t[][8]){{1, 4, 8, 8}}, 4,
                     (int64_t[]){1, 4, 4, 4}, 1);
    set_ints(o.g, attr(o.g, o.n, 0, "kernel_shape", IR_ATTR_INTS), (int64_t[]){2, 2}, 2);
    assert_int_equal(flops(o, &approx), 64 * 4);
    ir_graph_free(o.g);

    o = one_node(IR_OP_GLOBALAVERAGEPOOL, 1, (int[]){4}, (const int64_t[][8]){{1, 4, 8, 8}}, 4,
                 (int64_t[]){1, 4, 1, 1}, 0);
    assert_int_equal(flops(o, &approx), 256);
    ir_graph_free(o.g);

    o = one_node(IR_OP_RESHAPE, 2, (int[]){2, 1}, (const int64_t[][8]){{6, 4}, {2}}, 2,
                 (int64_t[]){4, 6}, 0);
    assert_int_equal(flops(o, &approx), 0);
    ir_graph_free(o.g);

    o = one_node(IR_OP_SOFTMAX, 1, (int[]){2}, (const int64_t[][8]){{3, 10}}, 2, (int64_t[]){3, 10},
                 0);
    assert_int_equal(flops(o, &approx), 5 * 30);
    ir_graph_free(o.g);

    o = one_node(IR_OP_MAX, 3, (int[]){1, 1, 1}, (const int64_t[][8]){{7}, {7}, {7}}, 1,
                 (int64_t[]){7}, 0);
    assert_int_equal(flops(o, &approx), 2 * 7);
    ir_graph_free(o.g);

    /* symbolic batch: counted as 1 and flagged */
    o = one_node(IR_OP_RELU, 1, (int[]){2}, (const int64_t[][8]){{1, 4}}, 2, (int64_t[]){1, 4}, 0);
    o.g->values[o.g->nodes[o.n].outputs[0]].shape.d[0] = IR_DIM_UNKNOWN;
    o.g->values[o.g->nodes[o.n].outputs[0]].shape.sym[0] = -1;
    approx = false;
    assert_int_equal(flops(o, &approx), 4);
    assert_true(approx);
    assert_int_equal(ir_node_flops(o.g, &o.g->nodes[o.n]), 4);
    ir_graph_free(o.g);

    /* unknown output rank: nothing to count, flagged */
    o = one_node(IR_OP_ADD, 2, (int[]){1, 1}, (const int64_t[][8]){{3}, {3}}, -1, NULL, 0);
    approx = false;
    assert_int_equal(flops(o, &approx), 0);
    assert_true(approx);
    ir_graph_free(o.g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_dump),           cmocka_unit_test(test_dot_dump),
        cmocka_unit_test(test_flops_conv),          cmocka_unit_test(test_flops_gemm_matmul),
        cmocka_unit_test(test_flops_pool_and_misc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
