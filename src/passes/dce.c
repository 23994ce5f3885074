/* dce: dead-code elimination. A node none of whose outputs is read (by a live node, as a graph
 * output, or by a subgraph by name) goes, and with it the reads that kept its inputs alive, so a
 * chain that only fed it goes too: the walk runs from the last node to the first. What the other
 * passes leave behind (Transposes no node reads after a fusion absorbed them, shape arithmetic of
 * a folded constant) and dead branches of the model itself end here. Runs last. */
#include "rewrite.h"

anvil_status pass_dce(pass_ctx *c) {
    ir_graph *g = c->g;
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
    }
    return ANVIL_OK;
}
