/* Chain fusion: a run of elementwise nodes becomes one anvil.EltwiseChain node
 * (ops/chain_common.h), whose kernel takes each block of elements through every step while it is
 * in registers: one pass over memory instead of one per node. Activations that exporters spell
 * out (HardSwish as Add/Clip/Div/Mul, GELU as Div/Erf/Add/Mul/Mul, SiLU as Sigmoid/Mul,
 * scale-and-shift as Mul/Add) are such runs; PP-OCRv4's detector has hundreds.
 *
 * A chain starts at a node reading x, its main input, and follows single readers: each next
 * node reads the previous one's output, which nothing else reads and which is no graph output.
 * A step's other operand must be x itself (HardSwish's final Mul) or a float32 constant that
 * varies over one contiguous block of x's dims (a scalar, a per-channel [C,1,1], a trailing
 * vector, a full shape: chain_operand_block), so that the result keeps x's shape. Steps: Add,
 * Sub, Mul, Div, Max, Min with such an operand; Clip with constant bounds, Relu, LeakyRelu,
 * Sigmoid, Tanh, Erf, Exp, HardSigmoid, HardSwish, Pow by a constant 2, 3 or 0.5, Sqrt, Neg,
 * Abs; float32 values only. Chains of one node are left alone (the single op's variant is as
 * fast).
 *
 * It runs after fuse_epilogue, so whatever a Conv/MatMul/Gemm epilogue takes (a Relu after a
 * Conv, a bias + GELU after a MatMul) stays there, and before the layout pass, while node order
 * is still topological: a chain's first node then comes before its others, so walking the
 * nodes in order meets every chain at its start. The chain node takes the first node's place
 * and name. ANVIL_FUSE_CHAIN=off turns the pass off (pass_options.off, src/api/env.c). */
#include "rewrite.h"

#include "ops/chain_common.h"
#include "ops/ops.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A chain being collected: its nodes, steps and inputs (inputs[0] is x). */
typedef struct chain {
    int32_t nodes[CHAIN_MAX_STEPS];
    chain_step steps[CHAIN_MAX_STEPS];
    int n;
    ir_vid inputs[CHAIN_MAX_INPUTS];
    int n_inputs;
} chain;

static bool f32(const ir_graph *g, ir_vid v) {
    return v != IR_NONE && g->values[v].dtype == ANVIL_DTYPE_FLOAT32;
}

/* The chain input index of operand o of a binary step, adding o to the chain's inputs; -1 if o
 * is neither x nor a constant of a pattern the chain takes, or there is no room. */
static int operand_of(const pass_ctx *c, chain *ch, ir_vid o) {
    const ir_graph *g = c->g;
    if (o == ch->inputs[0]) return 0;
    size_t numel;
    int first, last;
    if (!pass_const_f32(c, o, &numel) ||
        !chain_operand_block(&g->values[o].shape, &g->values[ch->inputs[0]].shape, &first, &last))
        return -1;
    for (int i = 1; i < ch->n_inputs; i++)
        if (ch->inputs[i] == o) return i;
    if (ch->n_inputs == CHAIN_MAX_INPUTS) return -1;
    ch->inputs[ch->n_inputs] = o;
    return ch->n_inputs++;
}

static bool step_binary(const pass_ctx *c, chain *ch, const ir_node *n, ir_vid v, chain_op op,
                        chain_step *st) {
    if (n->n_inputs != 2 || n->opset < (op == CHAIN_MAX || op == CHAIN_MIN ? 8 : 7)) return false;
    const int at = n->inputs[0] == v ? 0 : n->inputs[1] == v ? 1 : -1;
    if (at < 0) return false;
    const int before = ch->n_inputs;
    st->arg = operand_of(c, ch, n->inputs[1 - at]);
    if (st->arg < 0) {
        ch->n_inputs = before;
        return false;
    }
    st->op = op;
    st->swap = at == 1;
    return true;
}

/* Clip's bounds: attributes before opset 11, optional constant scalar inputs since. */
static bool clip_bounds(const pass_ctx *c, const ir_node *n, float *lo, float *hi) {
    *lo = -INFINITY;
    *hi = INFINITY;
    if (n->opset < 11)
        return ir_attr_float(n, "min", -INFINITY, lo) == ANVIL_OK &&
               ir_attr_float(n, "max", INFINITY, hi) == ANVIL_OK;
    if (n->n_inputs > 1 && n->inputs[1] != IR_NONE && !pass_const_scalar(c, n->inputs[1], lo))
        return false;
    if (n->n_inputs > 2 && n->inputs[2] != IR_NONE && !pass_const_scalar(c, n->inputs[2], hi))
        return false;
    return true;
}

/* Whether node k, reading the chain's running value v through input 0 (or either input of a
 * binary op), can be the chain's next step; fills *st (and may add an input to ch). */
static bool step_of(const pass_ctx *c, chain *ch, int32_t k, ir_vid v, chain_step *st) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (c->dead[k] || n->fusion || n->n_outputs != 1 || !f32(g, n->outputs[0])) return false;
    *st = (chain_step){.arg = -1};
    switch (n->op) {
    case IR_OP_ADD:
        return step_binary(c, ch, n, v, CHAIN_ADD, st);
    case IR_OP_SUB:
        return step_binary(c, ch, n, v, CHAIN_SUB, st);
    case IR_OP_MUL:
        return step_binary(c, ch, n, v, CHAIN_MUL, st);
    case IR_OP_DIV:
        return step_binary(c, ch, n, v, CHAIN_DIV, st);
    case IR_OP_MAX:
        return step_binary(c, ch, n, v, CHAIN_MAX, st);
    case IR_OP_MIN:
        return step_binary(c, ch, n, v, CHAIN_MIN, st);
    default:
        break;
    }
    if (n->n_inputs < 1 || n->inputs[0] != v) return false;
    switch (n->op) {
    case IR_OP_POW: {
        float e;
        if (n->n_inputs != 2 || n->opset < 7 || !pass_const_scalar(c, n->inputs[1], &e))
            return false;
        st->op = e == 2.0f ? CHAIN_POW2 : e == 3.0f ? CHAIN_POW3 : CHAIN_POWHALF;
        return e == 2.0f || e == 3.0f || e == 0.5f;
    }
    case IR_OP_CLIP:
        st->op = CHAIN_CLIP;
        return clip_bounds(c, n, &st->a, &st->b);
    case IR_OP_LEAKYRELU:
        st->op = CHAIN_LEAKYRELU;
        return ir_attr_float(n, "alpha", 0.01f, &st->a) == ANVIL_OK;
    case IR_OP_HARDSIGMOID:
        st->op = CHAIN_HARDSIGMOID;
        return ir_attr_float(n, "alpha", 0.2f, &st->a) == ANVIL_OK &&
               ir_attr_float(n, "beta", 0.5f, &st->b) == ANVIL_OK;
    default:
        break;
    }
    static const struct {
        ir_op op;
        chain_op step;
    } unary[] = {{IR_OP_RELU, CHAIN_RELU}, {IR_OP_SIGMOID, CHAIN_SIGMOID},
                 {IR_OP_TANH, CHAIN_TANH}, {IR_OP_ERF, CHAIN_ERF},
                 {IR_OP_EXP, CHAIN_EXP},   {IR_OP_HARDSWISH, CHAIN_HARDSWISH},
                 {IR_OP_SQRT, CHAIN_SQRT}, {IR_OP_NEG, CHAIN_NEG},
                 {IR_OP_ABS, CHAIN_ABS}};
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++)
        if (n->op == unary[i].op) {
            st->op = unary[i].step;
            return n->n_inputs == 1;
        }
    return false;
}

/* Collects the chain that starts at node k (reading x through its input 0, or either input of
 * a binary op). */
static void collect(const pass_ctx *c, int32_t k, chain *ch) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    ch->n = 0;
    ch->n_inputs = 1;
    ch->inputs[0] = IR_NONE;
    for (int i = 0; i < n->n_inputs && i < 2; i++) {
        ir_vid x = n->inputs[i];
        if (!f32(g, x) || g->values[x].shape.rank < 0 || (g->values[x].flags & IR_VALUE_CONST))
            continue;
        ch->inputs[0] = x;
        ch->n_inputs = 1;
        if (step_of(c, ch, k, x, &ch->steps[0])) break;
        ch->inputs[0] = IR_NONE;
    }
    if (ch->inputs[0] == IR_NONE) return;
    ch->nodes[ch->n++] = k;
    while (ch->n < CHAIN_MAX_STEPS) {
        ir_vid v = g->nodes[ch->nodes[ch->n - 1]].outputs[0];
        int32_t r = pass_sole_reader(c, v);
        if (r < 0 || !step_of(c, ch, r, v, &ch->steps[ch->n])) break;
        ch->nodes[ch->n++] = r;
    }
}

/* Removes the chain's nodes and rewrites its first one into the chain node. */
static anvil_status rewrite(pass_ctx *c, const chain *ch) {
    ir_graph *g = c->g;
    const int n = ch->n;
    const int32_t head = ch->nodes[0];
    const ir_vid y = g->nodes[ch->nodes[n - 1]].outputs[0], head_out = g->nodes[head].outputs[0];
    for (int i = 0; i < n; i++) pass_node_kill(c, ch->nodes[i]);
    c->dead[head] = false;
    const char **names = core_arena_array(g->arena, (size_t)n, sizeof *names);
    int64_t *args = core_arena_array(g->arena, (size_t)n, sizeof *args);
    int64_t *swap = core_arena_array(g->arena, (size_t)n, sizeof *swap);
    float *params = core_arena_array(g->arena, 2 * (size_t)n, sizeof *params);
    ir_attr *attrs = core_arena_array(g->arena, 4, sizeof *attrs);
    ir_vid *inputs = core_arena_array(g->arena, (size_t)ch->n_inputs, sizeof *inputs);
    if (!names || !args || !swap || !params || !attrs || !inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int s = 0; s < n; s++) {
        names[s] = chain_op_names[ch->steps[s].op];
        args[s] = ch->steps[s].arg;
        swap[s] = ch->steps[s].swap;
        params[2 * s] = ch->steps[s].a;
        params[2 * s + 1] = ch->steps[s].b;
    }
    attrs[0] = (ir_attr){.name = "ops", .type = IR_ATTR_STRINGS, .n = (size_t)n, .strings = names};
    attrs[1] = (ir_attr){.name = "args", .type = IR_ATTR_INTS, .n = (size_t)n, .ints = args};
    attrs[2] = (ir_attr){.name = "swap", .type = IR_ATTR_INTS, .n = (size_t)n, .ints = swap};
    attrs[3] =
        (ir_attr){.name = "params", .type = IR_ATTR_FLOATS, .n = 2 * (size_t)n, .floats = params};
    ir_node *h = &g->nodes[head];
    h->op = IR_OP_ELTWISE_CHAIN;
    h->attrs = attrs;
    h->n_attrs = 4;
    h->params = NULL;
    for (int i = 0; i < ch->n_inputs; i++) inputs[i] = IR_NONE;
    h->inputs = inputs;
    h->n_inputs = ch->n_inputs;
    for (int i = 0; i < ch->n_inputs; i++) CORE_TRY(pass_node_set_input(c, head, i, ch->inputs[i]));
    h = &g->nodes[head];
    h->outputs[0] = y;
    g->values[head_out].producer = -1;
    g->values[y].producer = head;
    CORE_TRY(op_get(IR_OP_ELTWISE_CHAIN)->check(g, h));
    c->pg->fused_chains++;
    c->pg->chain_nodes += n;
    return ANVIL_OK;
}

anvil_status pass_fuse_chain(pass_ctx *c) {
    chain ch;
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        if (c->dead[k]) continue;
        collect(c, k, &ch);
        if (ch.n >= 2) CORE_TRY(rewrite(c, &ch));
    }
    return ANVIL_OK;
}
