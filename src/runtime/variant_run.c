/* Running one node through one variant outside a session: what the variant tests and the kernel
 * benchmarks need to compare implementations on equal terms (same prepare, workspace and thread
 * pool as a plan would give them). */
#include "runtime.h"

#include <stdlib.h>

struct rt_variant_exec {
    const kern_variant *v;
    void *state;
    void *ws;
    core_pool *pool;
    bool own_pool;
    op_ctx ctx;
    bool fusion_after; /* the node's fused epilogue is applied here, after the variant ran */
};

anvil_status rt_variant_exec_create(const kern_variant *v, const kern_node *kn, core_pool *pool,
                                    rt_variant_exec **out) {
    *out = NULL;
    if (!kern_applies(v, kn, core_hw_get()))
        return core_err(ANVIL_ERR_INVALID_ARGUMENT, "%s: variant '%s' does not apply",
                        ir_node_label(kn->node), v->name);
    rt_variant_exec *e = core_calloc(1, sizeof *e);
    if (!e) return ANVIL_ERR_OUT_OF_MEMORY;
    e->v = v;
    e->fusion_after = kern_fusion_pending(v, kn);
    anvil_status st = ANVIL_OK;
    e->pool = pool;
    if (!pool) {
        e->own_pool = true;
        if ((st = core_pool_create(kn->threads > 0 ? kn->threads : 1, &e->pool)) != ANVIL_OK)
            goto fail;
    }
    e->ctx.pool = e->pool;
    if (v->prepare && (st = v->prepare(kn, &e->state)) != ANVIL_OK) goto fail;
    size_t ws = v->workspace_size ? v->workspace_size(kn) : 0;
    if (ws && !(e->ws = core_aligned_alloc(64, ws))) {
        st = ANVIL_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    *out = e;
    return ANVIL_OK;
fail:
    rt_variant_exec_free(e);
    return st;
}

anvil_status rt_variant_exec_run(rt_variant_exec *e, const ir_node *n, const op_tensor *const *in,
                                 int n_in, op_tensor *const *out, int n_out) {
    anvil_status st = e->v->run(n, e->state, in, n_in, out, n_out, e->ws, &e->ctx);
    if (st == ANVIL_OK && e->fusion_after) st = kern_fusion_apply(n, in, n_in, out[0], &e->ctx);
    return st;
}

void rt_variant_exec_free(rt_variant_exec *e) {
    if (!e) return;
    if (e->state && e->v->release) e->v->release(e->state);
    free(e->ws);
    if (e->own_pool) core_pool_free(e->pool);
    free(e);
}
