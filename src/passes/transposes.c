/* transposes: a Transpose of a Transpose (the inner one read by nothing else) becomes one
 * Transpose with the composed permutation, or an Identity (an alias at run time) when the two
 * cancel. Exporters write such pairs around layout changes (torch's multi-head attention turns
 * [seq, batch, ...] around and back); the layout pass's own transposes meet the model's the same
 * way. */
#include "rewrite.h"

#include "ops/ops.h"

static bool perm_of(const ir_node *n, int64_t *perm, size_t *rank) {
    const int64_t *p;
    if (n->op != IR_OP_TRANSPOSE || n->n_inputs != 1 || n->fusion ||
        ir_attr_ints(n, "perm", &p, rank) != ANVIL_OK || !p || *rank > IR_MAX_RANK)
        return false;
    for (size_t a = 0; a < *rank; a++) perm[a] = p[a];
    return true;
}

anvil_status pass_transposes(pass_ctx *c) {
    ir_graph *g = c->g;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (c->dead[k]) continue;
        int64_t outer[IR_MAX_RANK], inner[IR_MAX_RANK];
        size_t ro, ri;
        if (!perm_of(&g->nodes[k], outer, &ro)) continue;
        const int32_t p = g->values[g->nodes[k].inputs[0]].producer;
        if (p < 0 || c->dead[p] || !perm_of(&g->nodes[p], inner, &ri) || ri != ro ||
            pass_sole_reader(c, g->nodes[p].outputs[0]) != k)
            continue;
        /* output dim a of the pair is dim inner[outer[a]] of the inner one's input */
        int64_t *perm = core_arena_array(g->arena, ro, sizeof *perm);
        if (!perm) return ANVIL_ERR_OUT_OF_MEMORY;
        bool identity = true;
        for (size_t a = 0; a < ro; a++) {
            perm[a] = inner[outer[a]];
            identity = identity && perm[a] == (int64_t)a;
        }
        const ir_vid x = g->nodes[p].inputs[0];
        pass_node_kill(c, p);
        ir_node *n = &g->nodes[k];
        if (identity) {
            n->op = IR_OP_IDENTITY;
            n->n_attrs = 0;
            n->attrs = NULL;
        } else {
            ir_attr *a = core_arena_array(g->arena, 1, sizeof *a);
            if (!a) return ANVIL_ERR_OUT_OF_MEMORY;
            *a = (ir_attr){.name = "perm", .type = IR_ATTR_INTS, .n = ro, .ints = perm};
            n->attrs = a;
            n->n_attrs = 1;
        }
        n->params = NULL;
        CORE_TRY(op_get(n->op)->check(g, n));
        CORE_TRY(pass_node_set_input(c, k, 0, x));
        c->pg->transposes_merged++;
    }
    return ANVIL_OK;
}
