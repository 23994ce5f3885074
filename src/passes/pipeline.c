/* The pass pipeline: which passes run at which level, in what order, on a session's copy of the
 * graph. Each pass edits the copy through rewrite.h; after the last one the pipeline compacts the
 * graph and re-sorts it (a fused residual may be produced after the node that now reads it). */
#include "rewrite.h"

#include <stdlib.h>
#include <string.h>

const char *const pass_names[PASS_COUNT] = {
    [PASS_CONST_NODES] = "const_nodes",
    [PASS_FOLD_QDQ] = "fold_qdq",
    [PASS_FOLD_CONSTS] = "fold_consts",
    [PASS_DROP_NOOPS] = "drop_noops",
    [PASS_CSE] = "cse",
    [PASS_FOLD_CONV_BN] = "fold_conv_bn",
    [PASS_CROP_TAPS] = "crop_taps",
    [PASS_FUSE_NORM] = "fuse_norm",
    [PASS_FUSE_ATTENTION] = "fuse_attention",
    [PASS_FUSE_EPILOGUE] = "fuse_epilogue",
    [PASS_FUSE_PARALLEL] = "fuse_parallel",
    [PASS_FUSE_PAIR] = "fuse_pair",
    [PASS_POOL_ACT] = "pool_act",
    [PASS_ATTENTION_VIEWS] = "attention_views",
    [PASS_FUSE_CHAIN] = "fuse_chain",
    [PASS_LAYOUT] = "layout",
    [PASS_TRANSPOSES] = "transposes",
    [PASS_DCE] = "dce",
};

static anvil_status (*const pipeline[PASS_COUNT])(pass_ctx *c) = {
    [PASS_CONST_NODES] = pass_const_nodes,
    [PASS_FOLD_QDQ] = pass_fold_qdq,
    [PASS_FOLD_CONSTS] = pass_fold_consts,
    [PASS_DROP_NOOPS] = pass_drop_noops,
    [PASS_CSE] = pass_cse,
    [PASS_FOLD_CONV_BN] = pass_fold_conv_bn,
    [PASS_CROP_TAPS] = pass_crop_taps,
    [PASS_FUSE_NORM] = pass_fuse_norm,
    [PASS_FUSE_ATTENTION] = pass_fuse_attention,
    [PASS_FUSE_EPILOGUE] = pass_fuse_epilogue,
    [PASS_FUSE_PARALLEL] = pass_fuse_parallel,
    [PASS_FUSE_PAIR] = pass_fuse_pair,
    [PASS_POOL_ACT] = pass_pool_act,
    [PASS_ATTENTION_VIEWS] = pass_attention_views,
    [PASS_FUSE_CHAIN] = pass_fuse_chain,
    [PASS_LAYOUT] = pass_layout,
    [PASS_TRANSPOSES] = pass_transposes,
    [PASS_DCE] = pass_dce,
};

anvil_status pass_spec_parse(const char *spec, uint32_t *off) {
    *off = 0;
    if (!spec) return ANVIL_OK;
    const uint32_t all = (1u << PASS_COUNT) - 1;
    const char *p = spec;
    while (*p) {
        const size_t item = strcspn(p, ",");
        size_t len = item;
        const char *name = p;
        int sign = 1;
        if (len && (*name == '-' || *name == '+')) {
            sign = *name == '-' ? -1 : 1;
            name++;
            len--;
        }
        int id = -1;
        for (int i = 0; i < PASS_COUNT && id < 0; i++)
            if (strlen(pass_names[i]) == len && !strncmp(pass_names[i], name, len)) id = i;
        if (len == 3 && !strncmp(name, "all", 3) && sign > 0) {
            *off = 0;
        } else if (len == 4 && !strncmp(name, "none", 4) && sign > 0) {
            *off = all;
        } else if (id >= 0) {
            *off = sign > 0 ? *off & ~(1u << id) : *off | (1u << id);
        } else {
            char names[512] = "";
            for (int i = 0; i < PASS_COUNT; i++) {
                strncat(names, pass_names[i], sizeof names - strlen(names) - 1);
                strncat(names, i + 1 < PASS_COUNT ? ", " : "", sizeof names - strlen(names) - 1);
            }
            return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                            "pass list '%s': '%.*s' is not a pass; the passes are %s (prefix - "
                            "to turn one off, + to turn it on; all, none)",
                            spec, (int)len, name, names);
        }
        p += item + (p[item] == ',');
    }
    return ANVIL_OK;
}

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
    for (int i = 0; i < PASS_COUNT; i++) {
        if (opts->off & (1u << i)) continue;
        pass_index(&c);
        if ((st = pipeline[i](&c)) != ANVIL_OK) goto done;
    }
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
