/* The pass pipeline: which passes run at which level, in what order, on a session's copy of the
 * graph. Each pass edits the copy through rewrite.h; after the last one the pipeline compacts the
 * graph and re-sorts it (a fused residual may be produced after the node that now reads it). */
#include "rewrite.h"

#include <stdlib.h>

anvil_status pass_pipeline_run(const ir_graph *src, const pass_options *opts, pass_graph **out) {
    *out = NULL;
    pass_graph *pg = core_calloc(1, sizeof *pg);
    if (!pg) return ANVIL_ERR_OUT_OF_MEMORY;
    pg->src = src;
    anvil_status st = ir_graph_clone(src, &pg->g);
    if (st != ANVIL_OK) {
        free(pg);
        return st;
    }
    if (opts->opt_level < 1) {
        *out = pg;
        return ANVIL_OK;
    }
    pass_ctx c = {pg, pg->g, src, NULL, NULL, NULL, opts};
    c.uses = core_calloc((size_t)pg->g->n_values + 1, sizeof *c.uses);
    c.reader = core_calloc((size_t)pg->g->n_values + 1, sizeof *c.reader);
    c.dead = core_calloc((size_t)pg->g->n_nodes + 1, sizeof *c.dead);
    if (!c.uses || !c.reader || !c.dead) {
        st = ANVIL_ERR_OUT_OF_MEMORY;
        goto done;
    }
    pass_index(&c);
    if ((st = pass_const_nodes(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_fold_consts(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_drop_noops(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_fold_conv_bn(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_crop_taps(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_fuse_attention(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_fuse_epilogue(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_fuse_chain(&c)) != ANVIL_OK) goto done;
    pass_index(&c);
    if ((st = pass_layout(&c)) != ANVIL_OK) goto done;
    pass_compact(&c, opts);
    st = ir_graph_toposort(pg->g);
done:
    free(c.uses);
    free(c.reader);
    free(c.dead);
    if (st != ANVIL_OK) {
        pass_graph_free(pg);
        return st;
    }
    *out = pg;
    return ANVIL_OK;
}

void pass_graph_free(pass_graph *pg) {
    if (!pg) return;
    ir_graph_free(pg->g);
    for (size_t i = 0; i < pg->n_consts; i++) free(pg->consts[i].data);
    free(pg->consts);
    free(pg);
}
