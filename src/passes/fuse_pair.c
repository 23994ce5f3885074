/* fuse_pair: back-to-back fusion (Bolt). Two nodes where the second alone reads the first become
 * one node that runs them block by block, the intermediate kept in cache (kernels/cpu/pair):
 *   - a 2-D Conv (group 1) followed by a 1x1, stride-1, unpadded Conv (group 1): anvil.ConvPair,
 *     e.g. ResNet's bottleneck 3x3 -> 1x1, RepVGG-style blocks;
 *   - a MatMul with a constant [K, N0] weight followed by a MatMul of its output by a constant
 *     [N0, N1] weight: anvil.GemmPair, e.g. a transformer's FFN or an MLP.
 * The first may carry a fused bias and activation but no residual (its output is not kept); the
 * second keeps its whole fused epilogue (bias, residual, activation). Runs after fuse_epilogue.
 *
 * The gain is memory traffic saved against GEMMs cut into blocks, so it depends on the shapes
 * and the cache sizes: each pair is a measured rewrite ("b2b": "separate" or "fused"), which the
 * tuner times on the whole model; without a measurement, pair_rule's shape rule decides.
 * pass_options.b2b (ANVIL_B2B=fused|separate) overrides every pair (experiments). The fused
 * node takes the second node's name, so the runtime's rebuild without a fusion that did not hold
 * for concrete shapes (pass_options.unfused) still finds it. */
#include "rewrite.h"

#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pair_choices[2] = {"separate", "fused"};

/* v is a float32 constant (of the model or made by a pass) of the given rank. */
static bool const_of_rank(const pass_ctx *c, ir_vid v, int rank) {
    size_t numel;
    return v != IR_NONE && c->g->values[v].shape.rank == rank && pass_const_f32(c, v, &numel);
}

static bool attr_ints_all(const ir_node *n, const char *name, int64_t want) {
    const int64_t *v;
    size_t count;
    if (ir_attr_ints(n, name, &v, &count) != ANVIL_OK) return false;
    for (size_t i = 0; i < count; i++)
        if (v[i] != want) return false;
    return true;
}

/* The second conv of a pair: 1x1, stride 1, no padding, no dilation, group 1, reading y. */
static bool pointwise_conv(const pass_ctx *c, const ir_node *n, ir_vid y, int64_t m1) {
    int64_t group;
    if (n->op != IR_OP_CONV || n->inputs[0] != y || n->n_outputs != 1 ||
        !const_of_rank(c, n->inputs[1], 4) || ir_attr_int(n, "group", 1, &group) != ANVIL_OK ||
        group != 1)
        return false;
    const ir_shape *w = &c->g->values[n->inputs[1]].shape;
    return w->d[1] == m1 && w->d[2] == 1 && w->d[3] == 1 && attr_ints_all(n, "kernel_shape", 1) &&
           attr_ints_all(n, "strides", 1) && attr_ints_all(n, "dilations", 1) &&
           attr_ints_all(n, "pads", 0) && (!n->fusion || n->fusion->bias < 0);
}

/* The first node of a pair and the second: both float32 with constant weights, the first's
 * output read by the second alone. */
static int32_t pair_of(const pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (c->dead[k] || n->n_outputs != 1 || n->outputs[0] == IR_NONE) return -1;
    if (n->fusion && n->fusion->residual >= 0) return -1;
    const ir_vid y = n->outputs[0];
    const ir_value *yv = &g->values[y];
    if (yv->dtype != ANVIL_DTYPE_FLOAT32 || g->values[n->inputs[0]].dtype != ANVIL_DTYPE_FLOAT32)
        return -1;
    const int32_t r = pass_sole_reader(c, y);
    if (r < 0) return -1;
    const ir_node *s = &g->nodes[r];
    if (n->op == IR_OP_CONV) {
        int64_t group;
        if (yv->shape.rank != 4 || !const_of_rank(c, n->inputs[1], 4) || n->n_inputs > 3 ||
            ir_attr_int(n, "group", 1, &group) != ANVIL_OK || group != 1 ||
            !pointwise_conv(c, s, y, g->values[n->inputs[1]].shape.d[0]))
            return -1;
        return r;
    }
    if (n->op == IR_OP_MATMUL) {
        if (yv->shape.rank < 2 || !const_of_rank(c, n->inputs[1], 2) || s->op != IR_OP_MATMUL ||
            s->inputs[0] != y || s->n_outputs != 1 || !const_of_rank(c, s->inputs[1], 2) ||
            g->values[s->outputs[0]].dtype != ANVIL_DTYPE_FLOAT32)
            return -1;
        return r;
    }
    return -1;
}

/* The rows a MatMul's input [..., K] makes (every dim but the last), -1 when one is unknown. */
static int64_t gemm_rows(const ir_shape *x) {
    int64_t rows = 1;
    for (int i = 0; i + 1 < x->rank; i++) rows = rows >= 0 && x->d[i] >= 0 ? rows * x->d[i] : -1;
    return rows;
}

/* The group key: the pair's shapes (-1 where symbolic) and activations, no names. */
static void pair_key(const pass_ctx *c, int32_t k, int32_t r, char *key, size_t cap) {
    const ir_graph *g = c->g;
    const ir_node *a = &g->nodes[k], *b = &g->nodes[r];
    const ir_shape *x = &g->values[a->inputs[0]].shape, *w1 = &g->values[a->inputs[1]].shape,
                   *w2 = &g->values[b->inputs[1]].shape;
    const char *act1 = a->fusion ? ir_act_name(a->fusion->act) : "none";
    const char *act2 = b->fusion ? ir_act_name(b->fusion->act) : "none";
    if (a->op == IR_OP_CONV) {
        const ir_shape *y = &g->values[a->outputs[0]].shape;
        snprintf(key, cap, "conv;x=%lldx%lldx%lldx%lld;k=%lldx%lld;y=%lldx%lld;m=%lld,%lld;%s,%s%s",
                 (long long)x->d[0], (long long)x->d[1], (long long)x->d[2], (long long)x->d[3],
                 (long long)w1->d[2], (long long)w1->d[3], (long long)y->d[2], (long long)y->d[3],
                 (long long)w1->d[0], (long long)w2->d[0], act1, act2,
                 b->fusion && b->fusion->residual >= 0 ? ";res" : "");
        return;
    }
    const int64_t rows = gemm_rows(x);
    snprintf(key, cap, "gemm;m=%lld;k=%lld;n=%lld,%lld;%s%s,%s%s%s", (long long)rows,
             (long long)w1->d[0], (long long)w1->d[1], (long long)w2->d[1], act1,
             a->fusion && a->fusion->bias >= 0 ? "+b" : "", act2,
             b->fusion && b->fusion->bias >= 0 ? "+b" : "",
             b->fusion && b->fusion->residual >= 0 ? ";res" : "");
}

/* The first's activation as the pair's attributes (ops/nn_common.h): act, alpha, beta, lo, hi. */
static void act_attrs(const ir_fusion *f, ir_attr *at) {
    const char *name = ir_act_name(f ? f->act : IR_ACT_NONE);
    at[0] = (ir_attr){.name = "act", .type = IR_ATTR_STRING, .s = name, .s_len = strlen(name)};
    at[1] = (ir_attr){.name = "alpha", .type = IR_ATTR_FLOAT, .f = f ? f->alpha : 0.0f};
    at[2] = (ir_attr){.name = "beta", .type = IR_ATTR_FLOAT, .f = f ? f->beta : 0.0f};
    at[3] = (ir_attr){.name = "lo", .type = IR_ATTR_FLOAT, .f = f ? f->lo : 0.0f};
    at[4] = (ir_attr){.name = "hi", .type = IR_ATTR_FLOAT, .f = f ? f->hi : 0.0f};
}

static anvil_status rewrite(pass_ctx *c, int32_t k, int32_t r) {
    ir_graph *g = c->g;
    const ir_node a = g->nodes[k], b = g->nodes[r];
    const bool conv = a.op == IR_OP_CONV;
    const ir_fusion *fa = a.fusion, *fb = b.fusion;
    ir_vid b1 = IR_NONE, b2 = IR_NONE, res = IR_NONE;
    if (conv) {
        b1 = a.n_inputs > 2 ? a.inputs[2] : IR_NONE;
        b2 = b.n_inputs > 2 ? b.inputs[2] : IR_NONE;
    } else {
        b1 = fa && fa->bias >= 0 ? a.inputs[fa->bias] : IR_NONE;
        b2 = fb && fb->bias >= 0 ? b.inputs[fb->bias] : IR_NONE;
    }
    if (fb && fb->residual >= 0) res = b.inputs[fb->residual];
    const int n_attrs = (conv ? a.n_attrs : 0) + 5;
    ir_attr *attrs = core_arena_array(g->arena, (size_t)n_attrs, sizeof *attrs);
    ir_vid *inputs = core_arena_array(g->arena, 6, sizeof *inputs);
    if (!attrs || !inputs) return ANVIL_ERR_OUT_OF_MEMORY;
    if (conv) memcpy(attrs, a.attrs, (size_t)a.n_attrs * sizeof *attrs);
    act_attrs(fa, attrs + n_attrs - 5);
    pass_node_kill(c, k);
    pass_node_kill(c, r);
    c->dead[r] = false;
    ir_node *h = &g->nodes[r];
    h->op = conv ? IR_OP_CONV_PAIR : IR_OP_GEMM_PAIR;
    h->attrs = attrs;
    h->n_attrs = n_attrs;
    h->params = NULL;
    h->fusion = NULL;
    for (int i = 0; i < 6; i++) inputs[i] = IR_NONE;
    h->inputs = inputs;
    h->n_inputs = 5;
    const ir_vid ins[5] = {a.inputs[0], a.inputs[1], b1, b.inputs[1], b2};
    for (int i = 0; i < 5; i++)
        if (ins[i] != IR_NONE) CORE_TRY(pass_node_set_input(c, r, i, ins[i]));
    g->values[a.outputs[0]].producer = -1;
    if (fb && (fb->residual >= 0 || fb->act != IR_ACT_NONE)) {
        ir_fusion *f = core_arena_alloc(g->arena, sizeof *f);
        if (!f) return ANVIL_ERR_OUT_OF_MEMORY;
        *f = *fb;
        f->bias = -1;
        f->residual = -1;
        if (res != IR_NONE) CORE_TRY(pass_node_add_input(c, r, res, &f->residual));
        g->nodes[r].fusion = f;
    }
    CORE_TRY(op_get(g->nodes[r].op)->check(g, &g->nodes[r]));
    c->pg->fused_pairs++;
    return ANVIL_OK;
}

/* The choice without a measurement, from bench/b2b.py on a Zen 4 (issue 19's closing note):
 * a GEMM pair whose intermediate is narrow (N0 <= 256) over many rows gained 1.07-1.34x at 2
 * threads and broke even at 1, and a wide one (BERT's FFN, N0 = 3072) lost 10%; a conv pair
 * lost 25-55% wherever the separate 3x3 stride-1 conv runs Winograd, which the pair's implicit
 * GEMM does not, and gained 1.14-1.29x on a stride-2 3x3. Pairs of 1x1 convs (squeeze-and-
 * excitation's, on one pixel) and small maps (under 256 output pixels, or not known) have
 * nothing to keep in cache and stay apart. */
static int pair_rule(const pass_ctx *c, int32_t k) {
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    if (n->op == IR_OP_CONV) {
        const ir_shape *w = &g->values[n->inputs[1]].shape, *y = &g->values[n->outputs[0]].shape;
        const bool winograd = w->d[2] == 3 && w->d[3] == 3 && attr_ints_all(n, "strides", 1) &&
                              attr_ints_all(n, "dilations", 1);
        const bool pointwise = w->d[2] == 1 && w->d[3] == 1;
        return !winograd && !pointwise && y->d[2] * y->d[3] >= 256 ? 1 : 0;
    }
    const ir_shape *x = &g->values[n->inputs[0]].shape;
    const int64_t rows = gemm_rows(x);
    return g->values[n->inputs[1]].shape.d[1] <= 256 && rows >= 2048 ? 1 : 0;
}

anvil_status pass_fuse_pair(pass_ctx *c) {
    ir_graph *g = c->g;
    const int32_t n_nodes = g->n_nodes;
    for (int32_t k = 0; k < n_nodes; k++) {
        const int32_t r = pair_of(c, k);
        if (r < 0) continue;
        char key[256];
        pair_key(c, k, r, key, sizeof key);
        const pass_decision q = {.rewrite = "b2b",
                                 .group = key,
                                 .first = g->nodes[k].name,
                                 .n_nodes = 2,
                                 .n_choices = 2,
                                 .choice_names = pair_choices,
                                 .rule = pair_rule(c, k)};
        int ch = c->opts->decide ? c->opts->decide(c->opts->decide_arg, &q) : q.rule;
        if (ch != 0 && ch != 1) ch = q.rule;
        if (c->opts->b2b == PASS_FORCE_FUSED) ch = 1;
        if (c->opts->b2b == PASS_FORCE_SEPARATE) ch = 0;
        if (ch == 1) CORE_TRY(rewrite(c, k, r));
    }
    return ANVIL_OK;
}
