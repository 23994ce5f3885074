/* fold_consts: a node whose inputs are all constants, or a Shape of a value whose shape is known
 * at load, is computed once here by its reference kernel and its output becomes a constant.
 * torch.onnx.export writes the scale of scaled_dot_product_attention as Shape -> Slice -> Cast ->
 * Sqrt -> Div -> Sqrt of the query (ViT); folded, it is the scalar constant the attention pass
 * takes into its scale, and no longer six tiny nodes per layer.
 *
 * Only small results are kept (FOLD_MAX_OUT bytes: shapes, scalars, index tables), so folding
 * never makes a second copy of the model's weights; inputs above FOLD_MAX_IN bytes are not read
 * at all. Ops whose outputs depend on input contents in size, ops with subgraphs and non-tensor
 * values are left alone. A kernel that fails leaves the node in place for the runtime, which
 * then reports the failure with its usual message. Runs after const_nodes, in topological order,
 * so a chain of such nodes folds in one walk. */
#include "rewrite.h"

#include "ops/ops.h"

#include <stdint.h>
#include <string.h>

#define FOLD_MAX_OUT 4096
#define FOLD_MAX_IN 65536

static bool plain_dtype(anvil_dtype t) {
    switch (t) {
    case ANVIL_DTYPE_FLOAT32:
    case ANVIL_DTYPE_FLOAT64:
    case ANVIL_DTYPE_INT64:
    case ANVIL_DTYPE_INT32:
    case ANVIL_DTYPE_INT8:
    case ANVIL_DTYPE_UINT8:
    case ANVIL_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

static bool has_subgraph(const ir_node *n) {
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == IR_ATTR_GRAPH || n->attrs[a].type == IR_ATTR_GRAPHS) return true;
    return false;
}

/* Folds node k if it qualifies; false leaves it. */
static bool fold_node(pass_ctx *c, int32_t k) {
    ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    const op_impl *impl = op_get(n->op);
    if (n->n_outputs != 1 || n->n_inputs < 1 || n->n_inputs > 16 || n->fusion ||
        (impl->flags & (OP_DATA_DEPENDENT | OP_ALIAS_0)) || has_subgraph(n) ||
        n->op == IR_OP_CONSTANT)
        return false;
    const ir_vid y = n->outputs[0];
    if (y == IR_NONE || c->uses[y] == 0 || pass_pinned(c, y)) return false;
    op_tinfo in[16];
    op_tensor tin[16];
    const op_tensor *ins[16];
    for (int i = 0; i < n->n_inputs; i++) {
        ins[i] = NULL;
        memset(&in[i], 0, sizeof in[i]);
        ir_shape_unknown(&in[i].shape);
        const ir_vid x = n->inputs[i];
        if (x == IR_NONE) continue;
        const ir_value *v = &g->values[x];
        const bool data = (v->flags & IR_VALUE_CONST) && v->data;
        const bool shape_only = n->op == IR_OP_SHAPE && i == 0 && ir_shape_is_static(&v->shape);
        if ((!data && !shape_only) || !plain_dtype(v->dtype) || !ir_shape_is_static(&v->shape) ||
            v->data_bytes > FOLD_MAX_IN)
            return false;
        in[i].dtype = v->dtype;
        in[i].shape = v->shape;
        tin[i] = (op_tensor){.dtype = v->dtype, .rank = v->shape.rank};
        for (int d = 0; d < v->shape.rank; d++) tin[i].dims[d] = v->shape.d[d];
        if (data) {
            /* constants may be unaligned (mapped from the file): kernels read an aligned copy
             * then, and the constant itself otherwise (inputs are read-only to them) */
            const size_t align = anvil_dtype_size(v->dtype);
            void *at = (void *)v->data;
            if (align > 1 && (uintptr_t)at % align) {
                if (!(at = core_arena_alloc(g->arena, v->data_bytes ? v->data_bytes : 1)))
                    return false;
                memcpy(at, v->data, v->data_bytes);
            }
            in[i].value = at;
            tin[i].data = at;
        }
        ins[i] = &tin[i];
    }
    op_tinfo out;
    memset(&out, 0, sizeof out);
    ir_shape_unknown(&out.shape);
    if (impl->infer(g, n, in, n->n_inputs, &out, 1) != ANVIL_OK ||
        !ir_shape_is_static(&out.shape) || !plain_dtype(out.dtype))
        return false;
    size_t bytes;
    if (!core_tensor_bytes(out.dtype, out.shape.d, out.shape.rank, &bytes) || bytes > FOLD_MAX_OUT)
        return false;
    op_tensor tout = {.dtype = out.dtype, .rank = out.shape.rank};
    for (int d = 0; d < out.shape.rank; d++) tout.dims[d] = out.shape.d[d];
    if (!(tout.data = core_arena_alloc(g->arena, bytes ? bytes : 1))) return false;
    op_tensor *outs[1] = {&tout};
    if (impl->run(n, ins, n->n_inputs, outs, 1, NULL) != ANVIL_OK) return false;
    ir_value *val = &g->values[y];
    if (val->dtype != out.dtype) return false;
    val->shape = out.shape;
    val->flags |= IR_VALUE_CONST;
    val->data = tout.data;
    val->data_bytes = bytes;
    pass_node_kill(c, k);
    return true;
}

anvil_status pass_fold_consts(pass_ctx *c) {
    for (int32_t k = 0; k < c->g->n_nodes; k++)
        if (!c->dead[k] && fold_node(c, k)) c->pg->folded_consts++;
    return ANVIL_OK;
}
