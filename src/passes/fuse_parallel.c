/* fuse_parallel: MatMuls that read the same input with constant weights (a transformer's Q, K and
 * V projections) become one MatMul with the weights side by side, followed by a Split along the
 * last axis that hands each former output its columns (Graph Surgeon's QKV fusion, TVM's
 * CombineParallelMatmul).
 *
 * Siblings join when their weights are float32 constants of the model, [K, N_i] with the same K,
 * and their fused epilogues agree (all with a bias or none, the same activation, no residual).
 * The concatenated weights and biases are recipes computed from the model's constants
 * (pass_const), so a session that has packed them drops them again.
 *
 * Whether one wide GEMM beats the separate ones depends on the shapes and the machine (the Split
 * copies the outputs), so each group asks pass_options.decide ("parallel_gemm": "separate" or
 * "fused"): the tuner times both, the database remembers. Without a measurement the rule is
 * "separate": on the Zen 4 this was written on, fused measured no faster (see the closing notes
 * of issue 19). pass_options.parallel_gemm (ANVIL_PARALLEL_GEMM=fused|separate) overrides every
 * group (for experiments and comparisons). Runs after fuse_epilogue, whose biases it carries. */
#include "rewrite.h"

#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAR_MAX 6 /* siblings per group (pass_const.src holds 6 sources) */

static const char *const par_choices[2] = {"separate", "fused"};

/* The recipe: src[0..which) are the parts, param their K (rows); the parts side by side. */
static anvil_status par_fill(const ir_graph *g, const pass_const *pc, float *out) {
    const size_t k = (size_t)pc->param;
    size_t total = 0, n[PAR_MAX] = {0};
    const void *p[PAR_MAX] = {0};
    for (int i = 0; i < pc->which; i++) {
        p[i] = pass_graph_const_f32(g, pc->src[i], &n[i]);
        if (!p[i] || !k || n[i] % k)
            return core_err(ANVIL_ERR_INTERNAL, "parallel GEMM fusion: a constant went missing");
        total += n[i] / k;
    }
    size_t col = 0;
    for (int i = 0; i < pc->which; i++) {
        const size_t w = n[i] / k;
        for (size_t r = 0; r < k; r++)
            for (size_t c = 0; c < w; c++)
                out[r * total + col + c] = pass_const_f32_at(p[i], r * w + c);
        col += w;
    }
    return ANVIL_OK;
}

/* A MatMul that can join a group reading x: its weights [K, N], its bias (or IR_NONE). */
static bool member(const pass_ctx *c, int32_t k, ir_vid x, int64_t *kdim, int64_t *n,
                   ir_vid *bias) {
    const ir_graph *g = c->g;
    const ir_node *m = &g->nodes[k];
    if (c->dead[k] || m->op != IR_OP_MATMUL || m->inputs[0] != x || m->n_outputs != 1) return false;
    const ir_fusion *f = m->fusion;
    if (f && f->residual >= 0) return false;
    if (m->n_inputs != (f && f->bias >= 0 ? 3 : 2)) return false;
    const ir_value *w = &g->values[m->inputs[1]];
    size_t numel;
    if (w->shape.rank != 2 || !pass_graph_const_f32(c->src, m->inputs[1], &numel)) return false;
    *kdim = w->shape.d[0];
    *n = w->shape.d[1];
    *bias = IR_NONE;
    if (f && f->bias >= 0) {
        const ir_value *b = &g->values[m->inputs[f->bias]];
        if (b->shape.rank != 1 || b->shape.d[0] != *n ||
            !pass_graph_const_f32(c->src, m->inputs[f->bias], &numel))
            return false;
        *bias = m->inputs[f->bias];
    }
    const ir_value *y = &g->values[m->outputs[0]];
    return y->dtype == ANVIL_DTYPE_FLOAT32 && y->shape.rank >= 2;
}

static bool same_epilogue(const ir_fusion *a, const ir_fusion *b) {
    if (!a || !b) return !a && !b;
    return (a->bias >= 0) == (b->bias >= 0) && a->act == b->act && a->alpha == b->alpha &&
           a->beta == b->beta && a->lo == b->lo && a->hi == b->hi;
}

static anvil_status fuse_group(pass_ctx *c, const int32_t *ks, int n, int64_t kdim,
                               const int64_t *widths, const ir_vid *biases) {
    ir_graph *g = c->g;
    const int32_t head = ks[0];
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += widths[i];
    char name[512];
    snprintf(name, sizeof name, "%s/parallel", g->nodes[head].name);
    /* the weights and biases side by side */
    pass_const rw = {.fill = par_fill, .param = (float)kdim, .which = n};
    for (int i = 0; i < n; i++) rw.src[i] = g->nodes[ks[i]].inputs[1];
    ir_vid w, b = IR_NONE, y, sizes;
    CORE_TRY(pass_add_const(c, name, 2, (int64_t[]){kdim, total}, &rw, &w));
    if (biases[0] != IR_NONE) {
        pass_const rb = {.fill = par_fill, .param = 1.0f, .which = n};
        for (int i = 0; i < n; i++) rb.src[i] = biases[i];
        CORE_TRY(pass_add_const(c, name, 1, (int64_t[]){total}, &rb, &b));
    }
    ir_shape ys = g->values[g->nodes[head].outputs[0]].shape;
    ys.d[ys.rank - 1] = total;
    ys.sym[ys.rank - 1] = -1;
    CORE_TRY(pass_add_value(c, name, ANVIL_DTYPE_FLOAT32, &ys, &y));
    CORE_TRY(pass_add_int64_const(c, name, widths, n, &sizes));
    /* the head MatMul becomes the wide one; the others go */
    ir_vid outs[PAR_MAX];
    for (int i = 0; i < n; i++) outs[i] = g->nodes[ks[i]].outputs[0];
    for (int i = 1; i < n; i++) pass_node_kill(c, ks[i]);
    CORE_TRY(pass_node_set_input(c, head, 1, w));
    if (b != IR_NONE) CORE_TRY(pass_node_set_input(c, head, g->nodes[head].fusion->bias, b));
    g->nodes[head].outputs[0] = y;
    g->values[y].producer = head;
    /* the Split: sizes as an input from opset 13, an attribute before */
    const bool as_input = g->opset >= 13;
    int32_t sp;
    CORE_TRY(pass_add_node(c, IR_OP_SPLIT, name, as_input ? 2 : 1, n, as_input ? 1 : 2, &sp));
    ir_node *s = &g->nodes[sp];
    s->attrs[0] = (ir_attr){.name = "axis", .type = IR_ATTR_INT, .i = -1};
    if (!as_input) {
        int64_t *v = core_arena_array(g->arena, (size_t)n, sizeof *v);
        if (!v) return ANVIL_ERR_OUT_OF_MEMORY;
        memcpy(v, widths, (size_t)n * sizeof *v);
        s->attrs[1] = (ir_attr){.name = "split", .type = IR_ATTR_INTS, .n = (size_t)n, .ints = v};
    }
    for (int i = 0; i < n; i++) {
        s->outputs[i] = outs[i];
        g->values[outs[i]].producer = sp;
    }
    CORE_TRY(op_get(IR_OP_SPLIT)->check(g, s));
    CORE_TRY(pass_node_set_input(c, sp, 0, y));
    if (as_input) CORE_TRY(pass_node_set_input(c, sp, 1, sizes));
    c->pg->fused_parallel++;
    return ANVIL_OK;
}

anvil_status pass_fuse_parallel(pass_ctx *c) {
    ir_graph *g = c->g;
    const int32_t n_nodes = g->n_nodes;
    for (int32_t k = 0; k < n_nodes; k++) {
        int64_t kdim, n0;
        ir_vid b0;
        const ir_vid x = g->nodes[k].n_inputs > 0 ? g->nodes[k].inputs[0] : IR_NONE;
        if (x == IR_NONE || !member(c, k, x, &kdim, &n0, &b0)) continue;
        int32_t ks[PAR_MAX] = {k};
        int64_t widths[PAR_MAX] = {n0};
        ir_vid biases[PAR_MAX] = {b0};
        int n = 1;
        for (int32_t j = k + 1; j < n_nodes && n < PAR_MAX; j++) {
            int64_t kj, nj;
            ir_vid bj;
            if (!member(c, j, x, &kj, &nj, &bj) || kj != kdim ||
                !same_epilogue(g->nodes[k].fusion, g->nodes[j].fusion) ||
                g->values[g->nodes[j].outputs[0]].shape.rank !=
                    g->values[g->nodes[k].outputs[0]].shape.rank)
                continue;
            ks[n] = j;
            widths[n] = nj;
            biases[n++] = bj;
        }
        if (n < 2) continue;
        char key[256];
        int at = snprintf(key, sizeof key, "K=%lld;N=", (long long)kdim);
        for (int i = 0; i < n && at < (int)sizeof key; i++)
            at += snprintf(key + at, sizeof key - (size_t)at, "%s%lld", i ? "," : "",
                           (long long)widths[i]);
        if (at < (int)sizeof key)
            snprintf(key + at, sizeof key - (size_t)at, ";%s%s", b0 != IR_NONE ? "bias" : "nobias",
                     g->nodes[k].fusion ? ir_act_name(g->nodes[k].fusion->act) : "");
        const pass_decision q = {.rewrite = "parallel_gemm",
                                 .group = key,
                                 .first = g->nodes[k].name,
                                 .n_nodes = n,
                                 .n_choices = 2,
                                 .choice_names = par_choices,
                                 .rule = 0};
        int ch = c->opts->decide ? c->opts->decide(c->opts->decide_arg, &q) : q.rule;
        if (ch != 0 && ch != 1) ch = q.rule;
        if (c->opts->parallel_gemm == PASS_FORCE_FUSED) ch = 1;
        if (c->opts->parallel_gemm == PASS_FORCE_SEPARATE) ch = 0;
        if (ch == 1) CORE_TRY(fuse_group(c, ks, n, kdim, widths, biases));
    }
    return ANVIL_OK;
}
