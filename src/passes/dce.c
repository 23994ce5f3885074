/* dce: dead-code elimination. A node none of whose outputs is read (by a live node, as a graph
 * output, or by a subgraph by name) goes, and with it the reads that kept its inputs alive, so a
 * chain that only fed it goes too. What the other passes leave behind (Transposes, Reshapes and
 * Splits no node reads after a fusion absorbed them) and dead branches of the model itself end
 * here. Runs last; the walk goes from
 * the last node to the first, again until a walk removes nothing (a pass appends the nodes it
 * makes, so the order is not yet topological). */
#include "rewrite.h"

anvil_status pass_dce(pass_ctx *c) {
    ir_graph *g = c->g;
    /* nodes the passes added sit at the end, out of order: walk until nothing changes */
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t k = g->n_nodes - 1; k >= 0; k--) {
            if (c->dead[k]) continue;
            const ir_node *n = &g->nodes[k];
            bool read = n->n_outputs == 0;
            for (int i = 0; i < n->n_outputs && !read; i++)
                read = n->outputs[i] != IR_NONE &&
                       (c->uses[n->outputs[i]] > 0 || pass_pinned(c, n->outputs[i]));
            if (read) continue;
            pass_node_kill(c, k);
            c->pg->dce_removed++;
            changed = true;
        }
    }
    return ANVIL_OK;
}
