/* Nodes that compute nothing: a Cast to the dtype its input already has (exporters write them
 * around norms and masks: T5 casts every LayerNorm's input to float32, which it is; GPT-2 its
 * attention scores). Each becomes an Identity, which the plan runs as an alias of its input: no
 * kernel, no copy. (Dropout already is one: OP_ALIAS_0.) Runs first, so that what follows (a
 * chain, an epilogue) sees one node fewer in between. */
#include "rewrite.h"

/* Whether node n passes its input 0 through unchanged as its only output. */
static bool passes_through(const pass_ctx *c, const ir_node *n) {
    if (n->n_inputs < 1 || n->inputs[0] == IR_NONE || n->n_outputs < 1) return false;
    for (int i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] != IR_NONE) return false;
    anvil_dtype in = c->g->values[n->inputs[0]].dtype;
    if (n->op == IR_OP_CAST) {
        int64_t to;
        if (ir_attr_int(n, "to", -1, &to) != ANVIL_OK) {
            core_err_clear();
            return false;
        }
        return in != ANVIL_DTYPE_UNDEFINED && to == (int64_t)in && n->n_inputs == 1;
    }
    return false;
}

anvil_status pass_drop_noops(pass_ctx *c) {
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        ir_node *n = &c->g->nodes[k];
        if (c->dead[k] || n->fusion || !passes_through(c, n)) continue;
        n->op = IR_OP_IDENTITY;
        n->n_inputs = 1;
        n->n_outputs = 1;
        c->pg->noops++;
    }
    return ANVIL_OK;
}
