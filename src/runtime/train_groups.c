/* Grouped choices of a training graph (BestOf): a convolution layer's three passes, forward
 * (Conv), input gradient (the ConvTranspose of dY with the same weights) and weight gradient
 * (anvil.ConvGradW of the same X and dY), are one decision, measured together as they run in a
 * training step rather than node by node:
 *
 *   "tuned"   each pass its own choice (the database's per-node winner, else the cascade);
 *   "anvil"   anvil's own kernels for all three (vendor winners of the database set aside);
 *   "onednn"  oneDNN's forward, backward-data and backward-weights primitives (dnnl_conv,
 *             dnnl_deconv, dnnl_conv_grad_w), where the build has oneDNN.
 *
 * The passes share what one measurement alone cannot see: the caches they leave each other
 * (dX and dW read the same dY back to back; dW re-reads the forward's X) and, for a vendor, its
 * threads' wake-ups and its layout reorders, paid per pass. The decision rides on the measured
 * rewrites' mechanism (passes.h: pass_decision): rt_decide asks the tuner's forced choice, then
 * the database ("rewrite|train_conv|<key>|t=<threads>"), then the rule ("tuned", which is what
 * a session did before groups existed). The key is the forward Conv's tuning problem, so the
 * layers of one shape share one decision, as a model's repeated blocks share a node's. The
 * tuner (autotune.c) times a group's choices by the member passes' own time inside whole
 * training steps (profiled), not by the step's wall time, whose noise on a shared machine is
 * larger than one layer's difference. */
#include "session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rt_train_conv_rewrite = "train_conv";

static const char *const choice_names[] = {"tuned", "anvil", "onednn"};

/* The oneDNN variant that runs op in the "onednn" choice. */
static const char *onednn_name(ir_op op) {
    return op == IR_OP_CONV            ? "dnnl_conv"
           : op == IR_OP_CONVTRANSPOSE ? "dnnl_deconv"
           : op == IR_OP_CONV_GRAD_W   ? "dnnl_conv_grad_w"
                                       : NULL;
}

static bool is_vendor(const kern_variant *v) {
    for (const kern_variant *const *p = kern_family_vendor; *p; p++)
        if (*p == v) return true;
    return false;
}

/* A node of g as the planner sees it before shapes are inferred: the graph's own dtypes and
 * (static, in a training graph) shapes; constants' data where it is materialized. */
static void tinfo_of(const rt_session *s, ir_vid v, op_tinfo *t) {
    memset(t, 0, sizeof *t);
    if (v == IR_NONE) {
        ir_shape_unknown(&t->shape);
        return;
    }
    t->dtype = s->g->values[v].dtype;
    t->shape = s->g->values[v].shape;
    t->value = s->const_ptr ? s->const_ptr[v] : NULL;
}

/* The forward Conv's tuning problem key, which names the group; false when it has none (a
 * shape not static). */
static bool group_key(const rt_session *s, const ir_node *f, char *key, size_t cap) {
    op_tinfo in[4], out[1];
    if (f->n_inputs > 4 || f->n_outputs != 1) return false;
    for (int i = 0; i < f->n_inputs; i++) tinfo_of(s, f->inputs[i], &in[i]);
    tinfo_of(s, f->outputs[0], &out[0]);
    kern_node kn = {f, in, f->n_inputs, out, 1, s->cfg.threads, NULL, NULL, &s->cfg.knobs};
    tune_problem pr;
    if (tune_problem_of(&kn, &pr) != ANVIL_OK) {
        core_err_clear();
        return false;
    }
    const size_t len = strlen(pr.key);
    if (len + 16 >= cap) return false; /* no room for the suffix: the layer stays ungrouped */
    memcpy(key, pr.key, len + 1);
    return true;
}

void rt_train_groups_free(rt_session *s) {
    free(s->layer_group);
    s->layer_group = NULL;
}

anvil_status rt_train_groups(rt_session *s) {
    const ir_graph *g = s->g;
    rt_train_groups_free(s);
    bool any = false;
    for (int32_t k = 0; k < g->n_nodes && !any; k++) any = g->nodes[k].op == IR_OP_CONV_GRAD_W;
    if (!any) return ANVIL_OK; /* not a training graph */
    s->layer_group = core_calloc((size_t)g->n_nodes + 1, sizeof *s->layer_group);
    if (!s->layer_group) return ANVIL_ERR_OUT_OF_MEMORY;
    for (int32_t k = 0; k < g->n_nodes; k++) s->layer_group[k] = -1;
    const bool have_onednn = kern_find(IR_OP_CONV_GRAD_W, "dnnl_conv_grad_w") != NULL;
    for (int32_t f = 0; f < g->n_nodes; f++) {
        const ir_node *fw = &g->nodes[f];
        /* a Conv whose weights train: an input of the graph, not a constant */
        if (fw->op != IR_OP_CONV || fw->n_inputs < 2 || fw->inputs[1] == IR_NONE ||
            (g->values[fw->inputs[1]].flags & IR_VALUE_CONST))
            continue;
        int32_t wgrad = -1, dgrad = -1;
        for (int32_t k = 0; k < g->n_nodes && wgrad < 0; k++) {
            const ir_node *n = &g->nodes[k];
            if (n->op == IR_OP_CONV_GRAD_W && n->n_inputs >= 2 && n->inputs[0] == fw->inputs[0])
                wgrad = k;
        }
        if (wgrad < 0) continue;
        const ir_vid dy = g->nodes[wgrad].inputs[1];
        for (int32_t k = 0; k < g->n_nodes && dgrad < 0; k++) {
            const ir_node *n = &g->nodes[k];
            if (n->op == IR_OP_CONVTRANSPOSE && n->n_inputs >= 2 && n->inputs[0] == dy &&
                n->inputs[1] == fw->inputs[1])
                dgrad = k;
        }
        char key[TUNE_KEY_MAX - 64];
        if (!group_key(s, fw, key, sizeof key)) continue;
        if (dgrad < 0) strncat(key, "|no dx", sizeof key - strlen(key) - 1);
        const pass_decision q = {.rewrite = rt_train_conv_rewrite,
                                 .group = key,
                                 .first = fw->name,
                                 .n_nodes = dgrad >= 0 ? 3 : 2,
                                 .n_choices = have_onednn ? 3 : 2,
                                 .choice_names = choice_names,
                                 .rule = 0};
        const int before = s->n_groups;
        (void)rt_decide(s, &q);
        if (s->n_groups == before) return ANVIL_ERR_OUT_OF_MEMORY; /* its record was lost */
        const int idx = s->n_groups - 1;
        s->layer_group[f] = idx;
        s->layer_group[wgrad] = idx;
        if (dgrad >= 0) s->layer_group[dgrad] = idx;
    }
    return ANVIL_OK;
}

int rt_train_group_online(const rt_session *s, const ir_node *n) {
    if (!s->layer_group || s->cfg.online_rounds <= 0) return -1;
    const int32_t k = (int32_t)(n - s->g->nodes);
    if (k < 0 || k >= s->g->n_nodes || s->layer_group[k] < 0) return -1;
    const rt_group *gr = &s->groups[s->layer_group[k]];
    return gr->why == TUNE_WHY_CASCADE && gr->n_choices > 1 ? s->layer_group[k] : -1;
}

bool rt_train_group_select(const rt_session *s, const kern_node *kn, int choice, bool *anvil_only,
                           tune_choice *out) {
    *anvil_only = false;
    if (!s->layer_group) return false;
    const int32_t k = (int32_t)(kn->node - s->g->nodes);
    if (k < 0 || k >= s->g->n_nodes || s->layer_group[k] < 0) return false;
    const rt_group *gr = &s->groups[s->layer_group[k]];
    const int c = choice >= 0 ? choice : gr->chosen;
    if (c == 1) {
        *anvil_only = true;
        return false;
    }
    if (c != 2) return false;
    const char *name = onednn_name(kn->node->op);
    const kern_variant *v = name ? kern_find(kn->node->op, name) : NULL;
    if (!v || !kern_applies(v, kn, core_hw_get())) return false;
    memset(out, 0, sizeof *out);
    out->v = v;
    out->why = choice >= 0 ? TUNE_WHY_ONLINE : gr->why;
    return true;
}

bool rt_variant_is_vendor(const kern_variant *v) {
    return is_vendor(v);
}

const char *rt_session_layer_group_key(const rt_session *s, int32_t k) {
    if (!s->layer_group || k < 0 || k >= s->g->n_nodes || s->layer_group[k] < 0) return NULL;
    return s->groups[s->layer_group[k]].key;
}
