/* pool_act: an activation that only a max pool reads moves past it, into the pool's fused
 * epilogue (SOL's rule: apply the activation where it reads the least data). A ReLU or Clip is
 * non-decreasing, so the largest activated value of a window is the activated largest value:
 * MaxPool(Relu(x)) = Relu(MaxPool(x)), and the activation then runs over the pooled output (a
 * quarter of the data for a 2x2 stride-2 pool, 1/(H*W) for a global one) instead of the input.
 * The padding of a max pool never wins a window (it is -inf, and every window holds some input),
 * so it stays out of it either way.
 *
 * Runs after fuse_epilogue: an activation that a Conv or MatMul already absorbed costs nothing
 * where it is, and only one left standing as its own node is moved. The pool must have a single
 * output (no Indices) and no fusion of its own; the runtime applies the moved activation to the
 * pool's output (kern_fusion_apply) unless the pool's variant does. */
#include "rewrite.h"

#include <math.h>

static bool monotone_act(const pass_ctx *c, const ir_node *n, ir_fusion *f) {
    if (n->op == IR_OP_RELU) {
        f->act = IR_ACT_RELU;
        return true;
    }
    if (n->op != IR_OP_CLIP) return false;
    f->act = IR_ACT_CLIP;
    f->lo = -INFINITY;
    f->hi = INFINITY;
    if (n->opset < 11) {
        return ir_attr_float(n, "min", -INFINITY, &f->lo) == ANVIL_OK &&
               ir_attr_float(n, "max", INFINITY, &f->hi) == ANVIL_OK;
    }
    /* from opset 11 the bounds are optional scalar inputs, which must be constants */
    if (n->n_inputs > 1 && n->inputs[1] != IR_NONE && !pass_const_scalar(c, n->inputs[1], &f->lo))
        return false;
    if (n->n_inputs > 2 && n->inputs[2] != IR_NONE && !pass_const_scalar(c, n->inputs[2], &f->hi))
        return false;
    return true;
}

anvil_status pass_pool_act(pass_ctx *c) {
    ir_graph *g = c->g;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *a = &g->nodes[k];
        if (c->dead[k] || a->fusion || a->n_outputs != 1 || a->n_inputs < 1) continue;
        ir_fusion f = {.bias = -1, .residual = -1};
        if (!monotone_act(c, a, &f) || g->values[a->outputs[0]].dtype != ANVIL_DTYPE_FLOAT32)
            continue;
        const int32_t r = pass_sole_reader(c, a->outputs[0]);
        if (r < 0) continue;
        const ir_node *p = &g->nodes[r];
        if ((p->op != IR_OP_MAXPOOL && p->op != IR_OP_GLOBALMAXPOOL) || p->fusion ||
            p->inputs[0] != a->outputs[0] || (p->n_outputs > 1 && p->outputs[1] != IR_NONE) ||
            g->values[p->outputs[0]].dtype != ANVIL_DTYPE_FLOAT32)
            continue;
        ir_fusion *keep = core_arena_alloc(g->arena, sizeof *keep);
        if (!keep) return ANVIL_ERR_OUT_OF_MEMORY;
        *keep = f;
        const ir_vid x = a->inputs[0];
        pass_node_kill(c, k);
        CORE_TRY(pass_node_set_input(c, r, 0, x));
        g->nodes[r].fusion = keep;
        c->pg->pool_acts++;
    }
    return ANVIL_OK;
}
