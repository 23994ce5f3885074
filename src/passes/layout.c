/* The layout pass: chains of convolutions on channels-last tensors.
 *
 * Why: NCHW keeps each channel's plane contiguous. That suits a wide conv's GEMM over the pixels,
 * but a depthwise conv then runs along rows of 7..112 floats (partial vectors, and at stride 2
 * every other column), and a 1x1 conv with few channels streams one input row per channel.
 * Channels-last makes a depthwise tap one vector of channels and a 1x1 conv a GEMM over the
 * pixels that reads X in place, one stream in and one out. The kernels that gain are the ones a
 * chain holding depthwise convs is made of (MobileNet-style blocks; numbers in the commit that
 * made AUTO take them), and so are grouped convs of a few channels per group (RegNet, ResNeXt:
 * few_per_group); ResNet-style chains keep NCHW, where anvil's NCHW kernels are tuned.
 *
 * How: each chosen Conv becomes anvil.ConvNhwc in place (same inputs, attributes and fused
 * epilogue) writing a new channels-last value. A Transpose (perm 0,3,1,2) turns that back into
 * the original value for any reader that is not itself a chosen conv, and a Transpose (0,2,3,1)
 * feeds a chosen conv's input (or fused residual) that no chosen conv produced, one per value.
 * Chosen convs reading each other take the channels-last values directly, so inside a chain no
 * transpose runs: the ones left without readers are removed. Numbers are unchanged (the same
 * arithmetic in a different memory order; the kernels' own tests hold them to the reference).
 *
 * The nodes between chosen convs are carried along where they can run on the channels-last
 * values as they are (carry()): elementwise ops, on operands permuted alike, broadcast alike,
 * and GlobalAveragePool is a ReduceMean over axes 1 and 2 of the channels-last value. That
 * keeps a squeeze-excitation block (pool, two 1x1 convs on a 1x1 map, Mul of the map by the
 * channel weights) from costing two full-size transposes per block (EfficientNet: 32 of them);
 * what remains are copies of C floats for the pooled values and the channel weights.
 *
 * The model's own transposes join in (model_twins, alias_to_nhwc). torch writes a
 * ConvNeXt block as depthwise conv, permute to channels-last, LayerNorm and Linears there,
 * permute back, per-channel scale and residual Add. A model Transpose (0,3,1,2) is a value's
 * way back from channels-last, so its input is that value's twin; a model Transpose (0,2,3,1) of
 * a value with a twin is that twin, and its readers read the twin instead. With the scale (a
 * per-channel constant, given the channels-last shape [C]) and the Add carried, a ConvNeXt block
 * runs no transpose at all (ConvNeXt-tiny: 4 per block before). */
#include "rewrite.h"

#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t perm_to_nhwc[4] = {0, 2, 3, 1}, perm_to_nchw[4] = {0, 3, 1, 2};

static bool named(const char *const *names, int count, const ir_node *n) {
    for (int i = 0; i < count; i++)
        if (!strcmp(names[i], n->name)) return true;
    return false;
}

static bool kept(const pass_ctx *c, const ir_node *n) {
    const pass_options *o = c->opts;
    return o->keep_all_conv || named(o->keep_conv, o->n_keep_conv, n);
}

static bool wanted(const pass_ctx *c, const ir_node *n) {
    return named(c->opts->nhwc_conv, c->opts->n_nhwc_conv, n);
}

static bool f32_rank4(const ir_graph *g, ir_vid v) {
    return v != IR_NONE && g->values[v].dtype == ANVIL_DTYPE_FLOAT32 &&
           g->values[v].shape.rank == 4;
}

static int residual_of(const ir_node *n) {
    return n->fusion && n->fusion->residual >= 0 && n->fusion->residual < n->n_inputs
               ? n->fusion->residual
               : -1;
}

/* A Conv the pass can turn: float32 2-D with constant weights (the channels-last kernels pack
 * them), one output, and a residual (if fused) of the output's rank. */
static bool candidate(const pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (c->dead[k] || n->op != IR_OP_CONV || n->n_inputs < 2 || n->n_outputs != 1) return false;
    const ir_vid w = n->inputs[1];
    if (!f32_rank4(g, n->inputs[0]) || !f32_rank4(g, n->outputs[0]) || !f32_rank4(g, w) ||
        !(g->values[w].flags & IR_VALUE_CONST))
        return false;
    const int r = residual_of(n);
    if (r >= 0 && !f32_rank4(g, n->inputs[r])) return false;
    return !kept(c, n);
}

static bool depthwise(const ir_graph *g, const ir_node *n) {
    int64_t group = 1;
    if (ir_attr_int(n, "group", 1, &group) != ANVIL_OK || group < 2) return false;
    const ir_shape *w = &g->values[n->inputs[1]].shape;
    return w->d[0] == group && w->d[1] == 1;
}

/* A grouped conv of a few channels per group, the shapes the channels-last grouped kernels take
 * (conv_dw_nhwc.c's gc_shape: 8, 16 or a multiple of 16 outputs and at most 64 inputs per group),
 * where they can run (AVX-512; under the ANVIL_ISA cap too). NCHW runs them through oneDNN one
 * group at a time: RegNetY-400MF (groups of 8) on a Zen 5 core, 1 thread, bf16 3.8 -> 3.06 ms
 * channels-last (its grouped convs 1333 -> 892 us, 1x1 convs as GEMMs on bf16 activations), fp32
 * level (5.5-6.5 ms either way). Without those kernels the channels-last GEMM per group loses:
 * capped to AVX2, fp32 9.4 -> 10.8 ms. */
static bool few_per_group(const ir_graph *g, const ir_node *n) {
    const core_hw *hw = core_hw_get();
    if (!(hw->avx512f && hw->avx512bw && hw->avx512vl && hw->avx512dq && hw->os_avx512))
        return false;
    int64_t group = 1;
    if (ir_attr_int(n, "group", 1, &group) != ANVIL_OK || group < 2 || depthwise(g, n))
        return false;
    const ir_shape *w = &g->values[n->inputs[1]].shape;
    const int64_t mg = w->d[0] / group, cg = w->d[1];
    return w->d[0] % group == 0 && cg <= 64 && mg >= 8 && (16 % mg == 0 || mg % 16 == 0);
}

static int32_t find(int32_t *parent, int32_t k) {
    while (parent[k] != k) k = parent[k] = parent[parent[k]];
    return k;
}

/* A rank-4 float value of a 1x1 map: its channels-last twin holds the same C floats per image,
 * so a transpose to or from it is a copy of a few floats. */
static bool one_by_one(const ir_graph *g, ir_vid v) {
    return f32_rank4(g, v) && g->values[v].shape.d[2] == 1 && g->values[v].shape.d[3] == 1;
}

/* One element, any rank: it broadcasts the same way in either layout. */
static bool scalar(const ir_graph *g, ir_vid v) {
    size_t n;
    return ir_shape_numel(&g->values[v].shape, &n) && n == 1;
}

/* Elementwise ops that compute the same numbers on any permutation of their operands' axes,
 * applied to all of them alike. */
static bool elementwise(ir_op op) {
    switch (op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
    case IR_OP_RELU:
    case IR_OP_SIGMOID:
    case IR_OP_HARDSIGMOID:
    case IR_OP_HARDSWISH:
    case IR_OP_LEAKYRELU:
    case IR_OP_CLIP:
    case IR_OP_TANH:
        return true;
    default:
        return false;
    }
}

/* Joins conv k's chain with the candidate convs whose output reaches v through at most depth
 * elementwise ops (along their full-size operands: the nodes carry() turns), so that the convs
 * on either side of a squeeze-excitation gate are one chain and one decision. */
static void link_through(const ir_graph *g, const bool *chosen, int32_t nn, int32_t *parent,
                         int32_t k, ir_vid v, int depth) {
    const int32_t p = g->values[v].producer;
    if (p < 0 || p >= nn) return;
    if (chosen[p]) {
        parent[find(parent, k)] = find(parent, p);
        return;
    }
    const ir_node *pn = &g->nodes[p];
    if (depth == 0 || !elementwise(pn->op) || pn->fusion) return;
    for (int i = 0; i < pn->n_inputs; i++)
        if (pn->inputs[i] != IR_NONE && f32_rank4(g, pn->inputs[i]) &&
            !one_by_one(g, pn->inputs[i]))
            link_through(g, chosen, nn, parent, k, pn->inputs[i], depth - 1);
}

static void permute_shape(const ir_shape *in, const int64_t perm[4], ir_shape *out) {
    *out = *in;
    for (int i = 0; i < 4; i++) {
        out->d[i] = in->d[perm[i]];
        out->sym[i] = in->sym[perm[i]];
    }
}

/* A new value "<v's name>/nhwc": v's dtype, its shape channels-last. */
static anvil_status add_twin(pass_ctx *c, ir_vid v, ir_vid *out) {
    const ir_value *val = &c->g->values[v];
    ir_shape s;
    permute_shape(&val->shape, perm_to_nhwc, &s);
    char name[512];
    snprintf(name, sizeof name, "%s/nhwc", val->name);
    return pass_add_value(c, name, val->dtype, &s, out);
}

/* A Transpose node named `name` from `from` to `to` (both existing values); *node set. */
static anvil_status add_transpose(pass_ctx *c, const char *name, ir_vid from, ir_vid to,
                                  const int64_t perm[4], int32_t *node) {
    ir_graph *g = c->g;
    int64_t *p = core_arena_array(g->arena, 4, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    memcpy(p, perm, 4 * sizeof *p);
    CORE_TRY(pass_add_node(c, IR_OP_TRANSPOSE, name, 1, 1, 1, node));
    ir_node *t = &g->nodes[*node];
    t->attrs[0] = (ir_attr){.name = "perm", .type = IR_ATTR_INTS, .n = 4, .ints = p};
    t->outputs[0] = to;
    g->values[to].producer = *node;
    CORE_TRY(op_get(IR_OP_TRANSPOSE)->check(g, t));
    return pass_node_set_input(c, *node, 0, from);
}

/* Asks opts->decide about the chain rooted at root: its key hashes, conv by conv in graph order,
 * what decides the cost of either layout (weight shape, strides, pads, dilations, group, the
 * fused epilogue, the input's shape) and not the names, so equal chains share a decision. */
static int decide_chain(pass_ctx *c, int32_t *parent, const bool *chosen, int32_t root, int rule) {
    const ir_graph *g = c->g;
    uint64_t h = PASS_HASH_SEED;
    int n = 0;
    const char *first = NULL;
    static const char *const attrs[] = {"strides", "pads", "dilations", "group"};
    for (int32_t k = 0; k < g->n_nodes; k++) {
        if (!chosen[k] || find(parent, k) != root) continue;
        const ir_node *nd = &g->nodes[k];
        if (!first) first = nd->name;
        n++;
        const ir_shape *w = &g->values[nd->inputs[1]].shape, *x = &g->values[nd->inputs[0]].shape;
        h = pass_hash(h, w->d, sizeof(int64_t) * (size_t)w->rank);
        h = pass_hash(h, x->d, sizeof(int64_t) * (size_t)x->rank);
        for (size_t a = 0; a < sizeof attrs / sizeof *attrs; a++) {
            const ir_attr *at = ir_node_attr(nd, attrs[a]);
            if (!at) continue;
            if (at->type == IR_ATTR_INT) h = pass_hash(h, &at->i, sizeof at->i);
            if (at->type == IR_ATTR_INTS) h = pass_hash(h, at->ints, sizeof(int64_t) * at->n);
        }
        int fused[3] = {nd->fusion ? (int)nd->fusion->act : -1,
                        nd->fusion ? nd->fusion->bias >= 0 : 0, residual_of(nd) >= 0};
        h = pass_hash(h, fused, sizeof fused);
    }
    char key[64];
    snprintf(key, sizeof key, "convs=%d;h=%016llx", n, (unsigned long long)h);
    static const char *const names[] = {"nchw", "nhwc"};
    pass_decision q = {.rewrite = "layout",
                       .group = key,
                       .first = first,
                       .n_nodes = n,
                       .n_choices = 2,
                       .choice_names = names,
                       .rule = rule};
    int ch = c->opts->decide(c->opts->decide_arg, &q);
    return ch == 0 || ch == 1 ? ch : rule;
}

/* Which candidates to turn (chosen[k]), by the mode. */
static anvil_status choose(pass_ctx *c, bool *chosen) {
    const ir_graph *g = c->g;
    const int32_t nn = g->n_nodes;
    const int mode = c->opts->layout;
    for (int32_t k = 0; k < nn; k++) chosen[k] = candidate(c, k);
    if (mode == PASS_LAYOUT_NHWC) return ANVIL_OK;
    if (mode == PASS_LAYOUT_NCHW) {
        for (int32_t k = 0; k < nn; k++) chosen[k] = chosen[k] && wanted(c, &g->nodes[k]);
        return ANVIL_OK;
    }
    /* AUTO: the chains (convs linked through an input or a residual, directly or through
     * elementwise ops); by rule those that hold a depthwise conv or a grouped one of few channels
     * per group, or what opts->decide says for the chain. */
    int32_t *parent = malloc(sizeof *parent * (size_t)(nn + 1));
    bool *nhwc_rule = calloc((size_t)nn + 1, sizeof *nhwc_rule);
    int *choice = malloc(sizeof *choice * (size_t)(nn + 1));
    if (!parent || !nhwc_rule || !choice) {
        free(parent);
        free(nhwc_rule);
        free(choice);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    for (int32_t k = 0; k < nn; k++) parent[k] = k;
    for (int32_t k = 0; k < nn; k++) {
        if (!chosen[k]) continue;
        const ir_node *n = &g->nodes[k];
        const int ins[2] = {0, residual_of(n)};
        for (int i = 0; i < 2; i++)
            if (ins[i] >= 0) link_through(g, chosen, nn, parent, k, n->inputs[ins[i]], 4);
    }
    for (int32_t k = 0; k < nn; k++)
        if (chosen[k] && (depthwise(g, &g->nodes[k]) || few_per_group(g, &g->nodes[k])))
            nhwc_rule[find(parent, k)] = true;
    for (int32_t k = 0; k < nn; k++) choice[k] = -1;
    for (int32_t k = 0; k < nn; k++) {
        if (!chosen[k] || choice[find(parent, k)] >= 0) continue;
        int32_t root = find(parent, k);
        choice[root] = nhwc_rule[root] ? 1 : 0;
        if (c->opts->decide) choice[root] = decide_chain(c, parent, chosen, root, choice[root]);
    }
    for (int32_t k = 0; k < nn; k++)
        if (chosen[k]) chosen[k] = choice[find(parent, k)] == 1 || wanted(c, &g->nodes[k]);
    free(parent);
    free(nhwc_rule);
    free(choice);
    return ANVIL_OK;
}

/* A per-channel constant of the model for an output of c channels: [C, 1, 1] or [1, C, 1, 1], as
 * a channels-last broadcast needs it [C] (the same floats: channel_const makes that value). */
static bool channel_const(const pass_ctx *c, ir_vid v, int64_t channels) {
    const ir_value *val = &c->g->values[v];
    if (!(val->flags & IR_VALUE_CONST) || val->dtype != ANVIL_DTYPE_FLOAT32 ||
        pass_graph_owns(c->pg, v))
        return false;
    const ir_shape *s = &val->shape;
    const int64_t *d = s->d + (s->rank == 4 ? 1 : 0);
    return (s->rank == 3 || (s->rank == 4 && s->d[0] == 1)) && d[0] == channels && d[1] == 1 &&
           d[2] == 1;
}

/* Whether node k can run channels-last: elementwise or GlobalAveragePool, float rank-4 output,
 * no fused epilogue, at least one input with a twin, and every other input a 1x1 map, a scalar
 * or a per-channel constant. */
static bool carriable(const pass_ctx *c, const ir_vid *nhwc, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (c->dead[k] || n->fusion || n->n_outputs != 1 || !f32_rank4(g, n->outputs[0])) return false;
    if (!elementwise(n->op) && !(n->op == IR_OP_GLOBALAVERAGEPOOL && n->n_inputs == 1))
        return false;
    bool twin = false;
    for (int i = 0; i < n->n_inputs; i++) {
        const ir_vid v = n->inputs[i];
        if (v == IR_NONE) continue;
        if (nhwc[v] != IR_NONE)
            twin = true;
        else if (!one_by_one(g, v) && !scalar(g, v) &&
                 !channel_const(c, v, g->values[n->outputs[0]].shape.d[1]))
            return false;
    }
    return twin && (n->op != IR_OP_GLOBALAVERAGEPOOL || nhwc[n->inputs[0]] != IR_NONE);
}

/* Whether turning k moves no transpose onto a larger value: its output goes on to a chosen conv
 * or another carriable op, or every reader of each of its full-size inputs can read the twin
 * (then that input's transpose back goes away). */
static bool carry_pays(const pass_ctx *c, const bool *chosen, const ir_vid *nhwc, int32_t k,
                       int32_t nn) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    bool inputs_free = true;
    for (int32_t r = 0; r < g->n_nodes; r++) {
        if (c->dead[r] || r == k) continue;
        const ir_node *rn = &g->nodes[r];
        const bool twin_reader = (r < nn && chosen[r]) || elementwise(rn->op);
        for (int i = 0; i < rn->n_inputs; i++) {
            const ir_vid v = rn->inputs[i];
            if (v == n->outputs[0] && twin_reader) return true;
            for (int j = 0; j < n->n_inputs; j++)
                if (v != IR_NONE && v == n->inputs[j] && nhwc[v] != IR_NONE && !one_by_one(g, v) &&
                    !twin_reader && rn->op != IR_OP_GLOBALAVERAGEPOOL)
                    inputs_free = false;
        }
    }
    return inputs_free;
}

static anvil_status copy_fill(const ir_graph *src, const pass_const *pc, float *out) {
    size_t n;
    const void *d = pass_graph_const_f32(src, pc->src[0], &n);
    if (!d || n != pc->numel)
        return core_err(ANVIL_ERR_INTERNAL, "layout: a per-channel constant changed its size");
    memcpy(out, d, n * sizeof(float));
    return ANVIL_OK;
}

/* The twin of v, made by a Transpose from v if it has none yet (v a 1x1 map), or for a
 * per-channel constant the same floats as a [C] constant. */
static anvil_status twin_of(pass_ctx *c, ir_vid *nhwc, ir_vid v) {
    if (nhwc[v] != IR_NONE) return ANVIL_OK;
    if (!f32_rank4(c->g, v)) {
        size_t numel;
        const int64_t dims[1] = {ir_shape_numel(&c->g->values[v].shape, &numel) ? (int64_t)numel
                                                                                : 0};
        pass_const recipe = {.fill = copy_fill, .src = {v}};
        char base[512];
        snprintf(base, sizeof base, "%s/nhwc", c->g->values[v].name);
        return pass_add_const(c, base, 1, dims, &recipe, &nhwc[v]);
    }
    char name[512];
    snprintf(name, sizeof name, "%s/to_nhwc", c->g->values[v].name);
    int32_t t;
    CORE_TRY(add_twin(c, v, &nhwc[v]));
    CORE_TRY(add_transpose(c, name, v, nhwc[v], perm_to_nhwc, &t));
    c->pg->layout_transposes++;
    return ANVIL_OK;
}

/* Node k of carriable() on the twins: its inputs the twins, its output a new twin, and a
 * Transpose back to the old output (back[k], removed later if nothing reads it). A
 * GlobalAveragePool is replaced by a ReduceMean over axes 1 and 2 (the axes attribute, as opset
 * 17 has it). */
static anvil_status carry_node(pass_ctx *c, ir_vid *nhwc, int32_t k, int32_t *back) {
    ir_graph *g = c->g;
    const ir_vid y = g->nodes[k].outputs[0];
    CORE_TRY(add_twin(c, y, &nhwc[y]));
    int32_t run = k;
    if (g->nodes[k].op == IR_OP_GLOBALAVERAGEPOOL) {
        char name[512];
        snprintf(name, sizeof name, "%s/nhwc", g->nodes[k].name);
        CORE_TRY(pass_add_node(c, IR_OP_REDUCEMEAN, name, 1, 1, 2, &run));
        int64_t *axes = core_arena_array(g->arena, 2, sizeof *axes);
        if (!axes) return ANVIL_ERR_OUT_OF_MEMORY;
        axes[0] = 1;
        axes[1] = 2;
        ir_node *r = &g->nodes[run];
        r->opset = 17;
        r->attrs[0] = (ir_attr){.name = "axes", .type = IR_ATTR_INTS, .n = 2, .ints = axes};
        r->attrs[1] = (ir_attr){.name = "keepdims", .type = IR_ATTR_INT, .i = 1};
        CORE_TRY(pass_node_set_input(c, run, 0, g->nodes[k].inputs[0]));
        pass_node_kill(c, k);
    }
    ir_node *n = &g->nodes[run];
    for (int i = 0; i < n->n_inputs; i++) {
        const ir_vid v = n->inputs[i];
        if (v == IR_NONE || (nhwc[v] == IR_NONE && scalar(g, v))) continue;
        CORE_TRY(twin_of(c, nhwc, v));
        CORE_TRY(pass_node_set_input(c, run, i, nhwc[v]));
    }
    n = &g->nodes[run];
    n->outputs[0] = nhwc[y];
    g->values[nhwc[y]].producer = run;
    CORE_TRY(op_get(n->op)->check(g, n));
    char name[512];
    snprintf(name, sizeof name, "%s/to_nchw", g->nodes[k].name);
    CORE_TRY(add_transpose(c, name, nhwc[y], y, perm_to_nchw, &back[k]));
    c->pg->nhwc_carried++;
    return ANVIL_OK;
}

/* Whether live node k is a Transpose of a rank-4 float value by perm. */
static bool transpose_by(const pass_ctx *c, int32_t k, const int64_t perm[4]) {
    const ir_node *n = &c->g->nodes[k];
    const ir_attr *p = ir_node_attr(n, "perm");
    return !c->dead[k] && n->op == IR_OP_TRANSPOSE && n->n_inputs == 1 && n->n_outputs == 1 &&
           f32_rank4(c->g, n->inputs[0]) && f32_rank4(c->g, n->outputs[0]) && p &&
           p->type == IR_ATTR_INTS && p->n == 4 && !memcmp(p->ints, perm, 4 * sizeof *perm);
}

/* A model Transpose (0,3,1,2) of a rank-4 float value: its input is its output's twin. Marked in
 * model_back, to be removed if nothing reads its output in the end. */
static void model_twins(pass_ctx *c, ir_vid *nhwc, bool *model_back, int32_t nn) {
    const ir_graph *g = c->g;
    for (int32_t k = 0; k < nn; k++) {
        const ir_node *n = &g->nodes[k];
        if (!transpose_by(c, k, perm_to_nchw) || nhwc[n->outputs[0]] != IR_NONE) continue;
        nhwc[n->outputs[0]] = n->inputs[0];
        model_back[k] = true;
    }
}

/* A model Transpose (0,2,3,1) of a value with a twin computes the twin: its readers read the
 * twin, and it goes. nhwc covers the nv values the graph had when the pass began. */
static anvil_status alias_to_nhwc(pass_ctx *c, const ir_vid *nhwc, int32_t nn, ir_vid nv) {
    ir_graph *g = c->g;
    for (int32_t k = 0; k < nn; k++) {
        const ir_node *n = &g->nodes[k];
        if (!transpose_by(c, k, perm_to_nhwc) || n->inputs[0] >= nv ||
            nhwc[n->inputs[0]] == IR_NONE || pass_pinned(c, n->outputs[0]))
            continue;
        const ir_vid z = n->outputs[0], twin = nhwc[n->inputs[0]];
        for (int32_t r = 0; r < g->n_nodes; r++) {
            if (c->dead[r] || r == k) continue;
            for (int i = 0; i < g->nodes[r].n_inputs; i++)
                if (g->nodes[r].inputs[i] == z) CORE_TRY(pass_node_set_input(c, r, i, twin));
        }
        pass_node_kill(c, k);
    }
    return ANVIL_OK;
}

/* Carries every node it can, in graph order (so a carried node's readers see its twin). */
static anvil_status carry(pass_ctx *c, const bool *chosen, ir_vid *nhwc, int32_t *back,
                          int32_t nn) {
    for (int32_t k = 0; k < nn; k++)
        if (!chosen[k] && carriable(c, nhwc, k) && carry_pays(c, chosen, nhwc, k, nn))
            CORE_TRY(carry_node(c, nhwc, k, back));
    return ANVIL_OK;
}

anvil_status pass_layout(pass_ctx *c) {
    const int32_t nn = c->g->n_nodes, nv = c->g->n_values;
    bool *chosen = calloc((size_t)nn + 1, sizeof *chosen);
    ir_vid *nhwc = malloc(sizeof *nhwc * (size_t)(nv + 1));  /* channels-last twin of a value */
    int32_t *back = malloc(sizeof *back * (size_t)(nn + 1)); /* a conv's Transpose back */
    bool *model_back = calloc((size_t)nn + 1, sizeof *model_back); /* see model_twins */
    anvil_status st = ANVIL_ERR_OUT_OF_MEMORY;
    if (!chosen || !nhwc || !back || !model_back) goto done;
    for (ir_vid v = 0; v < nv; v++) nhwc[v] = IR_NONE;
    if ((st = choose(c, chosen)) != ANVIL_OK) goto done;
    char name[512];
    /* outputs first, so a conv can find the twin of any chosen conv's output, in any order */
    for (int32_t k = 0; k < nn; k++) {
        back[k] = -1;
        if (!chosen[k]) continue;
        const ir_vid y = c->g->nodes[k].outputs[0];
        if ((st = add_twin(c, y, &nhwc[y])) != ANVIL_OK) goto done;
        ir_node *n = &c->g->nodes[k];
        n->op = IR_OP_CONV_NHWC;
        n->outputs[0] = nhwc[y];
        c->g->values[nhwc[y]].producer = k;
        snprintf(name, sizeof name, "%s/to_nchw", n->name);
        if ((st = add_transpose(c, name, nhwc[y], y, perm_to_nchw, &back[k])) != ANVIL_OK)
            goto done;
        c->pg->nhwc_convs++;
    }
    model_twins(c, nhwc, model_back, nn);
    if ((st = carry(c, chosen, nhwc, back, nn)) != ANVIL_OK) goto done;
    if ((st = alias_to_nhwc(c, nhwc, nn, nv)) != ANVIL_OK) goto done;
    for (int32_t k = 0; k < nn; k++) {
        if (!chosen[k]) continue;
        const int ins[2] = {0, residual_of(&c->g->nodes[k])};
        for (int i = 0; i < 2; i++) {
            if (ins[i] < 0) continue;
            const ir_vid v = c->g->nodes[k].inputs[ins[i]];
            if (nhwc[v] == IR_NONE) {
                snprintf(name, sizeof name, "%s/to_nhwc", c->g->values[v].name);
                int32_t t;
                if ((st = add_twin(c, v, &nhwc[v])) != ANVIL_OK ||
                    (st = add_transpose(c, name, v, nhwc[v], perm_to_nhwc, &t)) != ANVIL_OK)
                    goto done;
                c->pg->layout_transposes++;
            }
            if ((st = pass_node_set_input(c, k, ins[i], nhwc[v])) != ANVIL_OK) goto done;
        }
    }
    for (int32_t k = 0; k < nn; k++) {
        if (model_back[k] && !c->dead[k] && c->uses[c->g->nodes[k].outputs[0]] == 0)
            pass_node_kill(c, k);
        if (back[k] < 0) continue;
        if (c->uses[c->g->nodes[back[k]].outputs[0]] == 0)
            pass_node_kill(c, back[k]);
        else
            c->pg->layout_transposes++;
    }
    st = ANVIL_OK;
done:
    free(chosen);
    free(nhwc);
    free(back);
    free(model_back);
    return st;
}
