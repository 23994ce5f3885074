/* Activations stored in bf16 between the nodes of a bf16 region.
 *
 * A bf16 variant rounds its operands to bf16 as it reads them (a GEMM while it packs A). When the
 * node that makes such an operand stores it in fp32, every reader converts it again and the
 * bytes between them are twice what the reader uses. Here, once the variants are chosen, a value
 * goes to bf16 storage where its producer can write it rounded and every reader would round it
 * the same way (kern_variant.bf16_io): the conversion happens once, at the producer, and the
 * plan computes what the fp32-stored plan computes, up to the order of fp32 sums (except where
 * a bf16 session lets a reader that computes in fp32 take the rounded value: a channels-last
 * depthwise conv). A value
 * stays fp32 as soon as one reader needs floats: a graph output, a fused residual, a step run by
 * the interpreter or a subgraph, a step whose variant the online tuner is still choosing. Those
 * are the region's borders; inside one, nothing converts twice. */
#include "runtime/session_impl.h"

#include <stdlib.h>

/* Per value, what the steps say about storing it in bf16. A reshape-like step that aliases its
 * input (rt_plan_memory gives its output the input's bytes) joins the two into one storage, whose
 * every reader must then take bf16: `root` is that union-find, and made/fp32/reads count for the
 * root. */
typedef struct store_work {
    int32_t *root;
    bool *made; /* its producer can write it in bf16 */
    bool *fp32; /* some reader needs it in fp32 */
    int32_t *reads;
} store_work;

static int32_t find(int32_t *root, int32_t v) {
    while (root[v] != v) {
        root[v] = root[root[v]];
        v = root[v];
    }
    return v;
}

static void mark_fp32(void *arg, ir_vid v) {
    store_work *w = arg;
    w->fp32[find(w->root, v)] = true;
}

static size_t info_bytes(const op_tinfo *t) {
    size_t b = 0;
    core_tensor_bytes(t->dtype, t->shape.d, t->shape.rank, &b);
    return b;
}

/* Whether rt_plan_memory will make step stp an alias of its input 0 (its rule, on the same
 * values: an OP_ALIAS_0 op with no other output and no other input but constants, of the same
 * bytes; the bytes stay equal when both are stored in bf16). */
static bool aliases(const rt_plan *p, const ir_node *n, const rt_step *stp) {
    if (stp->dynamic || !(op_get(n->op)->flags & OP_ALIAS_0) || n->n_inputs < 1 ||
        n->n_outputs < 1 || n->inputs[0] == IR_NONE || n->outputs[0] == IR_NONE)
        return false;
    for (int k = 1; k < n->n_outputs; k++)
        if (n->outputs[k] != IR_NONE) return false;
    for (int k = 1; k < n->n_inputs; k++)
        if (n->inputs[k] != IR_NONE && !p->shapes.info[n->inputs[k]].value) return false;
    const op_tinfo *x = &p->shapes.info[n->inputs[0]], *y = &p->shapes.info[n->outputs[0]];
    return x->dtype == y->dtype && info_bytes(x) == info_bytes(y);
}

/* Whether step stp's variant is settled and declares bf16 ports (a step still tuned online runs
 * other variants too, which may not read bf16). */
static bool settled(const rt_step *stp) {
    return !stp->dynamic && !stp->online && !stp->ogroup && stp->variant && stp->variant->bf16_io;
}

/* kn for step stp as the plan made it, over the caller's tinfo arrays. */
static kern_node step_node(const rt_session *s, const rt_plan *p, const rt_step *stp, op_tinfo *in,
                           op_tinfo *out) {
    const ir_node *n = &s->g->nodes[stp->node];
    rt_node_infos(&p->shapes, n->inputs, n->n_inputs, in);
    rt_node_infos(&p->shapes, n->outputs, n->n_outputs, out);
    kern_node kn = {.node = n,
                    .in = in,
                    .n_in = n->n_inputs,
                    .out = out,
                    .n_out = n->n_outputs,
                    .threads = stp->threads > 0 ? stp->threads : s->cfg.threads,
                    .config = &stp->config,
                    .knobs = &s->cfg.knobs};
    return kn;
}

/* What every step says about the values it makes and reads. */
static anvil_status survey(const rt_session *s, const rt_plan *p, store_work *w) {
    const ir_graph *g = s->g;
    op_tinfo in[128], out[128];
    for (int32_t v = 0; v < g->n_values; v++) w->root[v] = v;
    for (int32_t i = 0; i < p->n_steps; i++) {
        const ir_node *n = &g->nodes[p->steps[i].node];
        if (aliases(p, n, &p->steps[i]))
            w->root[find(w->root, n->outputs[0])] = find(w->root, n->inputs[0]);
    }
    for (int32_t i = 0; i < p->n_steps; i++) {
        const rt_step *stp = &p->steps[i];
        const ir_node *n = &g->nodes[stp->node];
        /* an alias neither reads nor writes: its input's readers and its output's are one set */
        if (aliases(p, n, stp)) continue;
        uint32_t bin = 0, bout = 0;
        if (settled(stp) && n->n_inputs <= 128 && n->n_outputs <= 128) {
            const kern_node kn = step_node(s, p, stp, in, out);
            stp->variant->bf16_io(&kn, stp->state, &bin, &bout);
            /* the runtime's own epilogue (kern_fusion_apply) reads and writes fp32 */
            if (stp->fusion_after) bin = bout = 0;
        }
        for (int k = 0; k < n->n_inputs; k++) {
            const ir_vid v = n->inputs[k];
            if (v == IR_NONE) continue;
            const int32_t r = find(w->root, v);
            w->reads[r]++;
            if (k >= 32 || !(bin >> k & 1u)) w->fp32[r] = true;
        }
        for (int k = 0; k < n->n_outputs && k < 32; k++)
            if (n->outputs[k] != IR_NONE && (bout >> k & 1u))
                w->made[find(w->root, n->outputs[k])] = true;
        /* bodies read outer values by name, as floats */
        CORE_TRY(rt_node_outer_reads(g, n, mark_fp32, w));
    }
    for (int32_t i = 0; i < g->n_outputs; i++) mark_fp32(w, g->outputs[i]);
    /* a storage holds constants, inputs or other dtypes: fp32 (its producer is not a step) */
    for (int32_t v = 0; v < g->n_values; v++)
        if (p->shapes.info[v].dtype != ANVIL_DTYPE_FLOAT32 || p->shapes.info[v].value ||
            p->loc[v].kind != LOC_NONE)
            mark_fp32(w, v);
    return ANVIL_OK;
}

/* The workspace of a step whose tensors changed dtype, asked again with kn showing them. */
static void rework(const rt_session *s, rt_plan *p, rt_step *stp) {
    if (!stp->variant->workspace_size) return;
    op_tinfo in[128], out[128];
    kern_node kn = step_node(s, p, stp, in, out);
    for (int k = 0; k < kn.n_in; k++) in[k].dtype = stp->in[k].dtype;
    for (int k = 0; k < kn.n_out; k++) out[k].dtype = stp->out[k].dtype;
    stp->workspace = stp->variant->workspace_size(&kn);
    if (stp->workspace > p->workspace_bytes) p->workspace_bytes = stp->workspace;
}

anvil_status rt_plan_store(const rt_session *s, rt_plan *p) {
    const ir_graph *g = s->g;
    if (s->cfg.fp32_storage || s->cfg.emittable_only) return ANVIL_OK;
    const size_t nv = (size_t)g->n_values + 1;
    store_work w = {core_calloc(nv, sizeof(int32_t)), core_calloc(nv, sizeof(bool)),
                    core_calloc(nv, sizeof(bool)), core_calloc(nv, sizeof(int32_t))};
    bool *bf16 = core_calloc(nv, sizeof(bool));
    anvil_status st =
        w.root && w.made && w.fp32 && w.reads && bf16 ? ANVIL_OK : ANVIL_ERR_OUT_OF_MEMORY;
    if (st == ANVIL_OK) st = survey(s, p, &w);
    bool any = false;
    for (int32_t v = 0; st == ANVIL_OK && v < g->n_values; v++) {
        const int32_t r = find(w.root, v);
        bf16[v] = w.made[r] && !w.fp32[r] && w.reads[r] > 0;
        any |= bf16[v];
    }
    if (st == ANVIL_OK && any) {
        p->bf16 = bf16;
        bf16 = NULL;
        for (int32_t i = 0; i < p->n_steps; i++) {
            rt_step *stp = &p->steps[i];
            if (stp->dynamic) continue;
            const ir_node *n = &g->nodes[stp->node];
            bool touched = false;
            for (int k = 0; k < n->n_inputs; k++)
                if (n->inputs[k] != IR_NONE && p->bf16[n->inputs[k]]) {
                    stp->in[k].dtype = ANVIL_DTYPE_BFLOAT16;
                    touched = true;
                }
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] != IR_NONE && p->bf16[n->outputs[k]]) {
                    stp->out[k].dtype = ANVIL_DTYPE_BFLOAT16;
                    touched = true;
                }
            if (touched) rework(s, p, stp);
        }
    }
    free(bf16);
    free(w.root);
    free(w.made);
    free(w.fp32);
    free(w.reads);
    return st;
}
