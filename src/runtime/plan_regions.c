/* The bf16 regions of a plan, for `anvil dump --precision` and --explain.
 *
 * A region is a connected part of the plan whose steps compute in bf16 (their variant rounds its
 * operands, KERN_ROUNDS_BF16; or in fp16, KERN_ROUNDS_FP16, which the same regions hold), joined
 * through the values one writes and another reads. Steps that run nothing (reshapes made aliases of
 * their input) belong to the region on either side, so a Reshape between two MatMuls does not split
 * them. Everything else is fp32: the steps that make the borders. What the counts say about
 * conversions follows from the kernels: a bf16 step rounds a value it reads from outside its region
 * once, as it reads it (entering), a value it hands to an fp32 step or the caller stays fp32
 * (leaving), and a value passed inside the region is stored in bf16 where plan_store.c could do it
 * (the rest are rounded by their reader, as the border ones). Only the main graph's steps: the
 * bodies of If/Loop/Scan are planned by sessions of their own. */
#include "runtime/session_impl.h"

#include <stdlib.h>
#include <string.h>

uint32_t rt_step_rounds(const rt_step *stp) {
    if (stp->dynamic || stp->alias) return 0;
    const kern_variant *d = kern_delegate(stp->variant, stp->state);
    return (stp->variant->needs | (d ? d->needs : 0)) & KERN_ROUNDS_REDUCED;
}

static int32_t find(int32_t *root, int32_t i) {
    while (root[i] != i) {
        root[i] = root[root[i]];
        i = root[i];
    }
    return i;
}

/* (value, region) pairs of the values that enter a region, sorted to count each pair once */
typedef struct entry {
    int32_t v, r;
} entry;

static int by_entry(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

void rt_regions_free(rt_regions *r) {
    if (!r) return;
    free(r->step_region);
    free(r->regions);
    memset(r, 0, sizeof *r);
}

anvil_status rt_session_regions(const rt_session *s, rt_regions *out) {
    memset(out, 0, sizeof *out);
    const rt_plan *p = s->last;
    if (!p)
        return core_err(ANVIL_ERR_INVALID_ARGUMENT,
                        "the session has not run yet: there is no plan to show the regions of");
    const ir_graph *g = s->g;
    int32_t n = p->n_steps, nv = g->n_values;
    size_t n_reads = 0;
    for (int32_t i = 0; i < n; i++) n_reads += (size_t)g->nodes[p->steps[i].node].n_inputs;
    int32_t *root = malloc(((size_t)n + 1) * sizeof *root);
    int32_t *made_by = malloc(((size_t)nv + 1) * sizeof *made_by);
    bool *bf = calloc((size_t)n + 1, sizeof *bf);
    bool *inner = calloc((size_t)nv + 1, sizeof *inner);
    bool *leaves = calloc((size_t)nv + 1, sizeof *leaves);
    entry *enter = malloc((n_reads + 1) * sizeof *enter);
    out->step_region = calloc((size_t)n + 1, sizeof *out->step_region);
    anvil_status st = ANVIL_OK;
    if (!root || !made_by || !bf || !inner || !leaves || !enter || !out->step_region) {
        st = core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory listing the bf16 regions");
        goto done;
    }
    out->n_steps = n;
    for (ir_vid v = 0; v < nv; v++) made_by[v] = -1;
    for (int32_t i = 0; i < n; i++) {
        root[i] = i;
        bf[i] = rt_step_rounds(&p->steps[i]) != 0;
        const ir_node *nd = &g->nodes[p->steps[i].node];
        for (int k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] != IR_NONE) made_by[nd->outputs[k]] = i;
    }
    /* join a reader with the step that made its input where each of the two computes in bf16
     * or only aliases */
    for (int32_t j = 0; j < n; j++) {
        const rt_step *sj = &p->steps[j];
        if (!bf[j] && !sj->alias) continue;
        const ir_node *nd = &g->nodes[sj->node];
        for (int k = 0; k < nd->n_inputs; k++) {
            ir_vid v = nd->inputs[k];
            int32_t i = v == IR_NONE ? -1 : made_by[v];
            if (i < 0 || (!bf[i] && !p->steps[i].alias)) continue;
            root[find(root, j)] = find(root, i);
        }
    }
    /* number the components that hold a bf16 step, in the order of their first step */
    int32_t *id = malloc(((size_t)n + 1) * sizeof *id);
    if (!id) {
        st = core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory listing the bf16 regions");
        goto done;
    }
    for (int32_t i = 0; i < n; i++) id[i] = 0;
    for (int32_t i = 0; i < n; i++)
        if (bf[i]) id[find(root, i)] = 1;
    int32_t n_regions = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t r = find(root, i);
        if (id[r] == 1 && !out->step_region[r]) out->step_region[r] = ++n_regions;
    }
    for (int32_t i = 0; i < n; i++) out->step_region[i] = out->step_region[find(root, i)];
    free(id);
    out->regions = calloc((size_t)n_regions + 1, sizeof *out->regions);
    if (!out->regions) {
        st = core_err(ANVIL_ERR_OUT_OF_MEMORY, "out of memory listing the bf16 regions");
        goto done;
    }
    out->n_regions = n_regions;
    size_t n_enter = 0;
    for (int32_t j = 0; j < n; j++) {
        int32_t rj = out->step_region[j];
        const ir_node *nd = &g->nodes[p->steps[j].node];
        if (rj) {
            rt_region *r = &out->regions[rj - 1];
            r->steps++;
            if (bf[j]) r->bf16_steps++;
            r->flops += ir_node_flops(g, nd);
        }
        for (int k = 0; k < nd->n_inputs; k++) {
            ir_vid v = nd->inputs[k];
            if (v == IR_NONE || p->loc[v].kind == LOC_CONST || p->shapes.info[v].value) continue;
            int32_t ri = made_by[v] >= 0 ? out->step_region[made_by[v]] : 0;
            if (rj && ri == rj) inner[v] = true;
            if (rj && ri != rj) enter[n_enter++] = (entry){v, rj};
            if (ri && ri != rj) leaves[v] = true;
        }
    }
    for (int32_t k = 0; k < g->n_outputs; k++) {
        ir_vid v = g->outputs[k];
        if (v != IR_NONE && made_by[v] >= 0 && out->step_region[made_by[v]]) leaves[v] = true;
    }
    qsort(enter, n_enter, sizeof *enter, by_entry);
    for (size_t e = 0; e < n_enter; e++)
        if (!e || by_entry(&enter[e - 1], &enter[e])) out->regions[enter[e].r - 1].enter++;
    for (ir_vid v = 0; v < nv; v++) {
        int32_t ri = made_by[v] >= 0 ? out->step_region[made_by[v]] : 0;
        if (!ri) continue;
        rt_region *r = &out->regions[ri - 1];
        if (leaves[v]) r->leave++;
        if (inner[v]) {
            r->inner++;
            if (p->bf16 && p->bf16[v]) r->inner_bf16++;
        }
    }
done:
    free(root);
    free(made_by);
    free(bf);
    free(inner);
    free(leaves);
    free(enter);
    if (st != ANVIL_OK) rt_regions_free(out);
    return st;
}
