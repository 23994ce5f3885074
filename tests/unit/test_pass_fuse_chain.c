/* The fuse_chain pass (src/passes/fuse_chain.c) on small graphs built here: HardSwish and GELU
 * spelled out become one anvil.EltwiseChain each; a graph output or a second reader in the middle
 * ends a chain, a non-constant side input, an integer dtype, an operand varying over two blocks
 * of dims and a single node are left alone; an activation a MatMul's epilogue takes stays there;
 * ANVIL_FUSE_CHAIN=off (read by api/env.c) turns the pass off. Every graph runs without the passes,
 * with them, and with them but the chain node on its reference kernel, and the outputs must agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/env.h"
#include "ops/chain_common.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float c0 = 0, c1 = 1, c2 = 2, c3 = 3, c6 = 6, c_half = 0.5f, c_sqrt2 = 1.41421356f;
static const int32_t i3 = 3;
static float per_channel[8] = {0.5f, 1, 1.5f, -2, 0.25f, 3, -1, 0.75f};
static float per_channel_row[80], weights[16 * 8];

static ir_vid value(ir_graph *g, const char *name, anvil_dtype dt, int rank, const int64_t *dims) {
    ir_vid v;
    assert_int_equal(ir_graph_add_value(g, name, &v), ANVIL_OK);
    g->values[v].dtype = dt;
    if (rank >= 0)
        ir_shape_set(&g->values[v].shape, rank, dims);
    else
        ir_shape_unknown(&g->values[v].shape);
    return v;
}

static ir_vid input(ir_graph *g, const char *name, anvil_dtype dt, int rank, const int64_t *dims) {
    ir_vid v = value(g, name, dt, rank, dims);
    assert_int_equal(ir_graph_add_input(g, v), ANVIL_OK);
    return v;
}

/* A constant holding data (static storage, borrowed). */
static ir_vid constant(ir_graph *g, const char *name, anvil_dtype dt, int rank, const int64_t *dims,
                       const void *data) {
    ir_vid v = value(g, name, dt, rank, dims);
    g->values[v].flags |= IR_VALUE_CONST;
    g->values[v].data = data;
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    g->values[v].data_bytes = n * 4;
    return v;
}

static ir_vid scalar(ir_graph *g, const char *name, const float *data) {
    return constant(g, name, ANVIL_DTYPE_FLOAT32, 0, NULL, data);
}

/* Node op(ins) -> a new value named out; its dtype and shape come from inference (finish). */
static ir_vid node(ir_graph *g, ir_op op, const char *out, int n_in, const ir_vid *ins) {
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, op, out, n_in, 1, 0, &k), ANVIL_OK);
    ir_vid y = value(g, out, ANVIL_DTYPE_UNDEFINED, -1, NULL);
    g->nodes[k].outputs[0] = y;
    g->values[y].producer = k;
    for (int i = 0; i < n_in; i++) g->nodes[k].inputs[i] = ins[i];
    return y;
}

static ir_graph *begin(void) {
    ir_graph *g;
    assert_int_equal(ir_graph_create(NULL, &g), ANVIL_OK);
    g->opset = 17;
    return g;
}

static void finish(ir_graph *g) {
    assert_int_equal(op_check_graph(g), ANVIL_OK);
    assert_int_equal(rt_infer_graph_static(g), ANVIL_OK);
    assert_int_equal(ir_graph_verify(g), ANVIL_OK);
}

/* The rewritten graph's nodes as "Op" or "Chain[Add,Clip,...]", joined by spaces. */
static void rewritten(const ir_graph *g, char *out, size_t cap) {
    rt_session_config cfg = {.opt_level = 1};
    assert_int_equal(api_env_session(&cfg), ANVIL_OK); /* ANVIL_FUSE_CHAIN, as the API reads it */
    pass_options o = {.opt_level = 1, .off = cfg.passes_off};
    pass_graph *pg;
    assert_int_equal(pass_pipeline_run(g, &o, &pg), ANVIL_OK);
    size_t len = 0;
    out[0] = 0;
    for (int32_t k = 0; k < pg->g->n_nodes; k++) {
        const ir_node *n = &pg->g->nodes[k];
        len += (size_t)snprintf(out + len, cap - len, "%s", k ? " " : "");
        if (n->op != IR_OP_ELTWISE_CHAIN) {
            len += (size_t)snprintf(out + len, cap - len, "%s", ir_op_name(n->op));
            if (n->fusion) len += (size_t)snprintf(out + len, cap - len, "+act");
            continue;
        }
        const chain_params *p = n->params;
        assert_non_null(p);
        len += (size_t)snprintf(out + len, cap - len, "Chain[");
        for (int s = 0; s < p->n_steps; s++)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", s ? "," : "",
                                    chain_op_names[p->steps[s].op]);
        len += (size_t)snprintf(out + len, cap - len, "]");
    }
    pass_graph_free(pg);
}

static anvil_tensor *random_input(const ir_value *v, unsigned seed) {
    anvil_tensor *t;
    assert_int_equal(rt_tensor_new(v->dtype, v->shape.rank, v->shape.d, &t), ANVIL_OK);
    size_t n = t->bytes / 4;
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float f = -4.0f + 8.0f * (float)((s >> 8) & 0xffffff) / 16777216.0f;
        if (v->dtype == ANVIL_DTYPE_INT32)
            ((int32_t *)t->data)[i] = (int32_t)f;
        else
            ((float *)t->data)[i] = f;
    }
    return t;
}

/* Runs g at opt level `level` (forcing the chain's reference kernel when asked); outputs owned
 * by the caller. */
static void run(const ir_graph *g, int level, bool reference, const anvil_tensor *const *in,
                anvil_tensor **out) {
    rt_force force = {"anvil.EltwiseChain", "reference"};
    rt_session_config cfg = {.threads = 2, .opt_level = level};
    assert_int_equal(api_env_session(&cfg), ANVIL_OK); /* ANVIL_FUSE_CHAIN, as the API reads it */
    if (reference) {
        cfg.forces = &force;
        cfg.n_forces = 1;
    }
    rt_session *s;
    assert_int_equal(rt_session_create(g, &cfg, &s), ANVIL_OK);
    assert_int_equal(rt_session_run(s, in, NULL, out), ANVIL_OK);
    rt_session_free(s);
}

static void free_tensor(anvil_tensor *t) {
    free(t->data);
    free(t);
}

/* The outputs without the passes, with them, and with the chain on its reference agree. */
static void same_numbers(const ir_graph *g) {
    anvil_tensor *in[4], *want[4], *got[4];
    for (int32_t i = 0; i < g->n_inputs; i++)
        in[i] = random_input(&g->values[g->inputs[i]], (unsigned)i + 5);
    run(g, 0, false, (const anvil_tensor *const *)in, want);
    for (int variant = 0; variant < 2; variant++) {
        run(g, 1, variant == 1, (const anvil_tensor *const *)in, got);
        for (int32_t o = 0; o < g->n_outputs; o++) {
            assert_int_equal(got[o]->bytes, want[o]->bytes);
            if (want[o]->dtype != ANVIL_DTYPE_FLOAT32) {
                assert_memory_equal(got[o]->data, want[o]->data, want[o]->bytes);
            } else {
                const float *a = got[o]->data, *b = want[o]->data;
                for (size_t i = 0; i < want[o]->bytes / 4; i++) {
                    if (fabsf(a[i] - b[i]) <= 1e-5f * fabsf(b[i]) + 1e-6f) continue;
                    fprintf(stderr, "output %d element %zu: %.9g, unfused %.9g\n", o, i,
                            (double)a[i], (double)b[i]);
                    fail();
                }
            }
            free_tensor(got[o]);
        }
    }
    for (int32_t o = 0; o < g->n_outputs; o++) free_tensor(want[o]);
    for (int32_t i = 0; i < g->n_inputs; i++) free_tensor(in[i]);
}

static void expect(ir_graph *g, const char *want) {
    finish(g);
    char got[512];
    rewritten(g, got, sizeof got);
    assert_string_equal(got, want);
    same_numbers(g);
    ir_graph_free(g);
}

static const int64_t image[4] = {1, 8, 10, 10};

/* x + 3 -> Clip(0, 6) -> / 6 -> x * (...) */
static void test_hardswish(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid k3 = scalar(g, "three", &c3), k0 = scalar(g, "zero", &c0), k6 = scalar(g, "six", &c6);
    ir_vid a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){x, k3});
    ir_vid b = node(g, IR_OP_CLIP, "b", 3, (ir_vid[]){a, k0, k6});
    ir_vid d = node(g, IR_OP_DIV, "d", 2, (ir_vid[]){b, k6});
    ir_vid y = node(g, IR_OP_MUL, "y", 2, (ir_vid[]){x, d});
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Chain[Add,Clip,Div,Mul]");
}

/* x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5, and the pass's counters */
static void test_gelu(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 64});
    ir_vid d = node(g, IR_OP_DIV, "d", 2, (ir_vid[]){x, scalar(g, "sqrt2", &c_sqrt2)});
    ir_vid e = node(g, IR_OP_ERF, "e", 1, &d);
    ir_vid a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){scalar(g, "one", &c1), e});
    ir_vid m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){a, x});
    ir_vid y = node(g, IR_OP_MUL, "y", 2, (ir_vid[]){m, scalar(g, "half", &c_half)});
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);
    rt_session_config cfg = {.opt_level = 1};
    assert_int_equal(api_env_session(&cfg), ANVIL_OK); /* ANVIL_FUSE_CHAIN, as the API reads it */
    pass_options o = {.opt_level = 1, .off = cfg.passes_off};
    pass_graph *pg;
    assert_int_equal(pass_pipeline_run(g, &o, &pg), ANVIL_OK);
    assert_int_equal(pg->fused_chains, 1);
    assert_int_equal(pg->chain_nodes, 5);
    assert_int_equal(pg->g->n_nodes, 1);
    /* it took the first node's name and writes the last node's output */
    assert_string_equal(pg->g->nodes[0].name, "d");
    assert_int_equal(pg->g->nodes[0].outputs[0], y);
    pass_graph_free(pg);
    expect(g, "Chain[Div,Erf,Add,Mul,Mul]");
}

/* A Constant node holding a scalar, as torch.onnx.export writes them (value_float). */
static ir_vid constant_node(ir_graph *g, const char *out, float v) {
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_CONSTANT, out, 0, 1, 1, &k), ANVIL_OK);
    g->nodes[k].attrs[0] = (ir_attr){.name = "value_float", .type = IR_ATTR_FLOAT, .f = v};
    ir_vid y = value(g, out, ANVIL_DTYPE_UNDEFINED, -1, NULL);
    g->nodes[k].outputs[0] = y;
    g->values[y].producer = k;
    return y;
}

/* GELU whose constants are Constant nodes (Whisper's, ViT's): the const_nodes pass makes them
 * constants first, so the chain forms, and the Constant nodes are gone. A Constant that is a
 * graph output stays a node. */
static void test_gelu_constant_nodes(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){2, 3, 64});
    ir_vid d = node(g, IR_OP_DIV, "d", 2, (ir_vid[]){x, constant_node(g, "sqrt2", c_sqrt2)});
    ir_vid e = node(g, IR_OP_ERF, "e", 1, &d);
    ir_vid a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){constant_node(g, "one", c1), e});
    ir_vid m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){a, x});
    ir_vid y = node(g, IR_OP_MUL, "y", 2, (ir_vid[]){m, constant_node(g, "half", c_half)});
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, constant_node(g, "out_const", c3)), ANVIL_OK);
    finish(g);
    rt_session_config cfg = {.opt_level = 1};
    assert_int_equal(api_env_session(&cfg), ANVIL_OK); /* ANVIL_FUSE_CHAIN, as the API reads it */
    pass_options o = {.opt_level = 1, .off = cfg.passes_off};
    pass_graph *pg;
    assert_int_equal(pass_pipeline_run(g, &o, &pg), ANVIL_OK);
    assert_int_equal(pg->const_nodes, 3);
    pass_graph_free(pg);
    expect(g, "Chain[Div,Erf,Add,Mul,Mul] Constant");
}

/* Scale-and-shift whose constants come through Identity nodes, as torch.onnx.export writes
 * deduplicated initializers (Whisper's equal biases): const_nodes makes the Identity outputs
 * constants, so the chain forms and the Identity nodes are gone. */
static void test_identity_of_constant(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid h = node(g, IR_OP_IDENTITY, "h", 1, (ir_vid[]){scalar(g, "half", &c_half)});
    ir_vid h2 = node(g, IR_OP_IDENTITY, "h2", 1, &h);
    ir_vid o = node(g, IR_OP_IDENTITY, "o", 1, (ir_vid[]){scalar(g, "one", &c1)});
    ir_vid m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){x, h2});
    ir_vid y = node(g, IR_OP_ADD, "y", 2, (ir_vid[]){m, o});
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Chain[Mul,Add]");
}

/* A graph output in the middle ends the chain; the nodes after it form their own. */
static void test_graph_output_in_middle(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){x, scalar(g, "two", &c2)});
    ir_vid a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){m, scalar(g, "one", &c1)});
    ir_vid r = node(g, IR_OP_RELU, "r", 1, &a);
    ir_vid y = node(g, IR_OP_SIGMOID, "y", 1, &r);
    assert_int_equal(ir_graph_add_output(g, a), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Chain[Mul,Add] Chain[Relu,Sigmoid]");
    /* the output first: Mul is alone */
    g = begin();
    x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){x, scalar(g, "two", &c2)});
    a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){m, scalar(g, "one", &c1)});
    y = node(g, IR_OP_NEG, "y", 1, &a);
    assert_int_equal(ir_graph_add_output(g, m), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Mul Chain[Add,Neg]");
}

/* A value read twice ends the chain before it. */
static void test_second_reader(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid t = node(g, IR_OP_MUL, "t", 2, (ir_vid[]){x, scalar(g, "two", &c2)});
    ir_vid r = node(g, IR_OP_RELU, "r", 1, &t);
    ir_vid y1 = node(g, IR_OP_NEG, "y1", 1, &r);
    ir_vid y2 = node(g, IR_OP_EXP, "y2", 1, &t);
    assert_int_equal(ir_graph_add_output(g, y1), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, y2), ANVIL_OK);
    expect(g, "Mul Chain[Relu,Neg] Exp");
}

/* A side input that is neither x nor a constant is not fused, nor is anything next to it. */
static void test_non_constant_operand(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid z = input(g, "z", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid r = node(g, IR_OP_RELU, "r", 1, &x);
    ir_vid a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){r, z});
    ir_vid y = node(g, IR_OP_NEG, "y", 1, &a);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Relu Add Neg");
}

/* int32 values are not fused. */
static void test_int_dtype(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_INT32, 2, (int64_t[]){4, 9});
    ir_vid k = constant(g, "three", ANVIL_DTYPE_INT32, 0, NULL, &i3);
    ir_vid a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){x, k});
    ir_vid n = node(g, IR_OP_NEG, "n", 1, &a);
    ir_vid y = node(g, IR_OP_ABS, "y", 1, &n);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Add Neg Abs");
}

/* A per-channel [C,1,1] operand is fused; one varying over C and W but not H is not. */
static void test_operand_patterns(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid pc = constant(g, "pc", ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){8, 1, 1}, per_channel);
    ir_vid m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){x, pc});
    ir_vid a = node(g, IR_OP_SUB, "a", 2, (ir_vid[]){pc, m});
    ir_vid y = node(g, IR_OP_MAX, "y", 2, (ir_vid[]){a, scalar(g, "zero", &c0)});
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Chain[Mul,Sub,Max]");
    g = begin();
    x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid bad = constant(g, "bad", ANVIL_DTYPE_FLOAT32, 3, (int64_t[]){8, 1, 10}, per_channel_row);
    m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){x, bad});
    a = node(g, IR_OP_ADD, "a", 2, (ir_vid[]){m, scalar(g, "one", &c1)});
    y = node(g, IR_OP_RELU, "y", 1, &a);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Mul Chain[Add,Relu]");
}

/* A single node stays itself; an activation a MatMul's epilogue takes stays there, and what
 * follows it is a chain. */
static void test_single_and_epilogue(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid y = node(g, IR_OP_SIGMOID, "y", 1, &x);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Sigmoid");
    for (int i = 0; i < 16 * 8; i++) weights[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (int tail = 0; tail < 2; tail++) {
        g = begin();
        x = input(g, "x", ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 16});
        ir_vid w = constant(g, "w", ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){16, 8}, weights);
        ir_vid mm = node(g, IR_OP_MATMUL, "mm", 2, (ir_vid[]){x, w});
        y = node(g, IR_OP_RELU, "r", 1, &mm);
        if (tail) {
            ir_vid m = node(g, IR_OP_MUL, "m", 2, (ir_vid[]){y, scalar(g, "two", &c2)});
            y = node(g, IR_OP_ADD, "y", 2, (ir_vid[]){m, scalar(g, "one", &c1)});
        }
        assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
        expect(g, tail ? "MatMul+act Chain[Mul,Add]" : "MatMul+act");
    }
}

/* The SiLU decision's answer and what it was asked. */
typedef struct silu_ask {
    int give, asked, n_nodes, rule;
} silu_ask;

static int silu_decide(void *arg, const pass_decision *q) {
    silu_ask *a = arg;
    if (strcmp(q->rewrite, "silu")) return -1;
    a->asked++;
    a->n_nodes = q->n_nodes;
    a->rule = q->rule;
    assert_int_equal(q->n_choices, 2);
    assert_string_equal(q->choice_names[0], "fuse");
    assert_string_equal(q->choice_names[1], "chain");
    return a->give;
}

/* MatMul -> Sigmoid -> Mul(mm, sigmoid), as torch exports nn.SiLU: fused into the MatMul as
 * IR_ACT_SILU by the rule (same numbers as unfused), or left to fuse_chain when the measured
 * decision says "chain"; one decision for the graph, asked once. */
static void test_silu(void **state) {
    (void)state;
    for (int i = 0; i < 16 * 8; i++) weights[i] = (float)(i % 7) * 0.1f - 0.3f;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){4, 16});
    ir_vid w = constant(g, "w", ANVIL_DTYPE_FLOAT32, 2, (int64_t[]){16, 8}, weights);
    ir_vid mm = node(g, IR_OP_MATMUL, "mm", 2, (ir_vid[]){x, w});
    ir_vid s = node(g, IR_OP_SIGMOID, "s", 1, &mm);
    ir_vid y = node(g, IR_OP_MUL, "y", 2, (ir_vid[]){mm, s});
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    finish(g);
    for (int give = 0; give < 2; give++) {
        silu_ask a = {.give = give};
        pass_options o = {.opt_level = 1, .decide = silu_decide, .decide_arg = &a};
        pass_graph *pg;
        assert_int_equal(pass_pipeline_run(g, &o, &pg), ANVIL_OK);
        assert_int_equal(a.asked, 1);
        assert_int_equal(a.n_nodes, 2);
        assert_int_equal(a.rule, 0);
        assert_int_equal(pg->g->n_nodes, give ? 2 : 1);
        const ir_node *n0 = &pg->g->nodes[0];
        assert_int_equal(n0->op, IR_OP_MATMUL);
        if (give) {
            assert_null(n0->fusion);
            assert_int_equal(pg->g->nodes[1].op, IR_OP_ELTWISE_CHAIN);
        } else {
            assert_non_null(n0->fusion);
            assert_int_equal(n0->fusion->act, IR_ACT_SILU);
        }
        pass_graph_free(pg);
    }
    expect(g, "MatMul+act");
}

/* A node without a float32 input (a Cast from int32) starts no chain, even after a node that
 * did look like one's start. */
static void test_head_without_float_input(void **state) {
    (void)state;
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid i = input(g, "i", ANVIL_DTYPE_INT32, 4, image);
    ir_vid r = node(g, IR_OP_RELU, "r", 1, &x);
    int32_t k;
    assert_int_equal(ir_graph_add_node(g, IR_OP_CAST, "f", 1, 1, 1, &k), ANVIL_OK);
    ir_vid f = value(g, "f", ANVIL_DTYPE_UNDEFINED, -1, NULL);
    g->nodes[k].inputs[0] = i;
    g->nodes[k].outputs[0] = f;
    g->values[f].producer = k;
    g->nodes[k].attrs[0] = (ir_attr){.name = "to", .type = IR_ATTR_INT, .i = 1};
    ir_vid y = node(g, IR_OP_NEG, "y", 1, &f);
    assert_int_equal(ir_graph_add_output(g, r), ANVIL_OK);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Relu Cast Neg");
}

static void test_env_off(void **state) {
    (void)state;
    setenv("ANVIL_FUSE_CHAIN", "off", 1);
    ir_graph *g = begin();
    ir_vid x = input(g, "x", ANVIL_DTYPE_FLOAT32, 4, image);
    ir_vid r = node(g, IR_OP_RELU, "r", 1, &x);
    ir_vid y = node(g, IR_OP_NEG, "y", 1, &r);
    assert_int_equal(ir_graph_add_output(g, y), ANVIL_OK);
    expect(g, "Relu Neg");
    unsetenv("ANVIL_FUSE_CHAIN");
}

int main(void) {
    for (int i = 0; i < 80; i++) per_channel_row[i] = (float)(i % 9) * 0.25f - 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hardswish),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_gelu_constant_nodes),
        cmocka_unit_test(test_silu),
        cmocka_unit_test(test_identity_of_constant),
        cmocka_unit_test(test_graph_output_in_middle),
        cmocka_unit_test(test_second_reader),
        cmocka_unit_test(test_non_constant_operand),
        cmocka_unit_test(test_int_dtype),
        cmocka_unit_test(test_operand_patterns),
        cmocka_unit_test(test_single_and_epilogue),
        cmocka_unit_test(test_head_without_float_input),
        cmocka_unit_test(test_env_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
