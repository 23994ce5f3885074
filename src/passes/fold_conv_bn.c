/* Conv -> BatchNormalization (inference, constant statistics) becomes one Conv:
 *   BN(y) = s*(y - mean) + beta with s = gamma / sqrt(var + eps), per output channel, so
 *   W'[m] = s[m]*W[m] and B'[m] = s[m]*(B[m] - mean[m]) + beta[m].
 * The folded weights are computed in double and stored as new constants (recipes the session can
 * drop and recompute, see pass_const); the originals are dropped by the pipeline when nothing
 * else reads them. Saves the BN pass over every activation (ResNet-50: 53 of them). */
#include "rewrite.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Whether BN node k runs in inference mode with one output. */
static bool bn_inference(const ir_node *bn) {
    for (int i = 1; i < bn->n_outputs; i++)
        if (bn->outputs[i] != IR_NONE) return false;
    int64_t training = 0, spatial = 1, is_test = 1;
    if (ir_attr_int(bn, "training_mode", 0, &training) != ANVIL_OK || training) return false;
    if (ir_attr_int(bn, "spatial", 1, &spatial) != ANVIL_OK || !spatial) return false;
    if (ir_attr_int(bn, "is_test", 1, &is_test) != ANVIL_OK || !is_test) return false;
    return bn->n_inputs == 5;
}

/* The recipe: src = {W, B or IR_NONE, gamma, beta, mean, var}, param = eps, which 0: W', 1: B'. */
static anvil_status bn_fill(const ir_graph *g, const pass_const *pc, float *out) {
    size_t wn = 0, n = 0;
    const void *w = pass_graph_const_f32(g, pc->src[0], &wn), *b = NULL, *p[4];
    const size_t m = w ? (size_t)g->values[pc->src[0]].shape.d[0] : 0;
    if (pc->src[1] != IR_NONE) b = pass_graph_const_f32(g, pc->src[1], &n);
    for (int i = 0; i < 4; i++) p[i] = pass_graph_const_f32(g, pc->src[i + 2], &n);
    if (!w || !m || !p[0] || !p[1] || !p[2] || !p[3] || (pc->src[1] != IR_NONE && !b))
        return core_err(ANVIL_ERR_INTERNAL, "BatchNorm folding: a constant went missing");
    const size_t per = wn / m;
    for (size_t o = 0; o < m; o++) {
        double gamma = pass_const_f32_at(p[0], o), beta = pass_const_f32_at(p[1], o);
        double mean = pass_const_f32_at(p[2], o), var = pass_const_f32_at(p[3], o);
        double s = gamma / sqrt(var + (double)pc->param);
        if (pc->which == 0) {
            for (size_t i = 0; i < per; i++)
                out[o * per + i] = (float)(s * pass_const_f32_at(w, o * per + i));
        } else {
            double b0 = b ? pass_const_f32_at(b, o) : 0.0;
            out[o] = (float)(s * (b0 - mean) + beta);
        }
    }
    return ANVIL_OK;
}

static anvil_status fold_one(pass_ctx *c, int32_t ck, int32_t bk) {
    ir_graph *g = c->g;
    const ir_node *conv = &g->nodes[ck], *bn = &g->nodes[bk];
    size_t wn = 0, n = 0;
    if (!pass_const_f32(c, conv->inputs[1], &wn) || g->values[conv->inputs[1]].shape.rank < 3)
        return ANVIL_OK;
    const ir_shape wshape = g->values[conv->inputs[1]].shape; /* a copy: adding values moves them */
    const size_t m = (size_t)wshape.d[0];
    if (m == 0 || wn % m) return ANVIL_OK;
    for (int i = 1; i < 5; i++)
        if (!pass_const_f32(c, bn->inputs[i], &n) || n != m) return ANVIL_OK;
    ir_vid bias_v = conv->n_inputs > 2 ? conv->inputs[2] : IR_NONE;
    if (bias_v != IR_NONE && (!pass_const_f32(c, bias_v, &n) || n != m)) return ANVIL_OK;
    /* the recipe reads the source graph: weights a fold made (a second BN) are not there */
    if (conv->inputs[1] >= c->src->n_values || bias_v >= c->src->n_values) return ANVIL_OK;
    float eps = 1e-5f;
    if (ir_attr_float(bn, "epsilon", 1e-5f, &eps) != ANVIL_OK) return ANVIL_OK;

    pass_const recipe = {.fill = bn_fill,
                         .src = {conv->inputs[1], bias_v, bn->inputs[1], bn->inputs[2],
                                 bn->inputs[3], bn->inputs[4]},
                         .param = eps};
    char base[400];
    ir_vid wv, bv;
    int64_t bdim = (int64_t)m;
    snprintf(base, sizeof base, "%.300s.bn_folded_W", conv->name);
    CORE_TRY(pass_add_const(c, base, wshape.rank, wshape.d, &recipe, &wv));
    recipe.which = 1;
    snprintf(base, sizeof base, "%.300s.bn_folded_B", g->nodes[ck].name);
    CORE_TRY(pass_add_const(c, base, 1, &bdim, &recipe, &bv));
    CORE_TRY(pass_node_set_input(c, ck, 1, wv));
    CORE_TRY(pass_node_set_input(c, ck, 2, bv));
    pass_node_absorb(c, ck, bk);
    c->pg->folded_bn++;
    return ANVIL_OK;
}

anvil_status pass_fold_conv_bn(pass_ctx *c) {
    ir_graph *g = c->g;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ir_node *n = &g->nodes[k];
        if (c->dead[k] || n->op != IR_OP_CONV || n->fusion || n->n_outputs != 1) continue;
        if (g->values[n->outputs[0]].dtype != ANVIL_DTYPE_FLOAT32) continue;
        int32_t r = pass_sole_reader(c, n->outputs[0]);
        if (r < 0 || g->nodes[r].op != IR_OP_BATCHNORMALIZATION) continue;
        if (g->nodes[r].inputs[0] != n->outputs[0] || !bn_inference(&g->nodes[r])) continue;
        CORE_TRY(fold_one(c, k, r));
    }
    return ANVIL_OK;
}
