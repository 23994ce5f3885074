/* Constant nodes become constants. torch.onnx.export writes most scalars (GELU's sqrt 2 and 1/2,
 * attention scales, LayerNorm's epsilon) as Constant nodes rather than initializers; to every
 * other pass such a value is just a node output, so a chain or an epilogue that needs a constant
 * operand stops at it (Whisper's and ViT's GELUs stayed five passes over memory). Here the node's
 * output takes the node's value as constant data (borrowed from the attribute, which the model
 * owns, or from the node's parsed params, which the graph's arena owns) and the node goes. A
 * Constant that is a graph output or that a subgraph reads by name is left alone: the runtime
 * produces those as values, and nested sessions see the outer graph's nodes. Runs first.
 *
 * An Identity of a constant is one too: torch.onnx.export deduplicates equal initializers into
 * Identity nodes (Whisper's zero-initialized fc1 biases: layers 1-3 read Identity(layer 0's)),
 * which kept their bias Adds and GELUs out of the MatMul epilogues. Nodes are in topological
 * order, so a chain of them resolves in one walk. */
#include "rewrite.h"

#include "ops/ops.h"

anvil_status pass_const_nodes(pass_ctx *c) {
    ir_graph *g = c->g;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (c->dead[k] || n->n_outputs != 1 || n->fusion) continue;
        const ir_vid y = n->outputs[0];
        ir_tensor t;
        if (y == IR_NONE || c->uses[y] == 0 || pass_pinned(c, y)) continue;
        if (n->op == IR_OP_IDENTITY && n->n_inputs == 1 && n->inputs[0] != IR_NONE &&
            (g->values[n->inputs[0]].flags & IR_VALUE_CONST) && g->values[n->inputs[0]].data) {
            const ir_value *src = &g->values[n->inputs[0]];
            t.dtype = src->dtype;
            t.rank = src->shape.rank;
            for (int d = 0; d < t.rank; d++) t.dims[d] = src->shape.d[d];
            t.data = src->data;
            t.bytes = src->data_bytes;
        } else if (n->op != IR_OP_CONSTANT || !op_constant_value(n, &t)) {
            continue;
        }
        ir_value *val = &g->values[y];
        if (val->dtype != t.dtype || t.rank < 0) continue;
        ir_shape_set(&val->shape, t.rank, t.dims);
        val->flags |= IR_VALUE_CONST;
        val->data = t.data;
        val->data_bytes = t.bytes;
        pass_node_kill(c, k);
        c->pg->const_nodes++;
    }
    return ANVIL_OK;
}
