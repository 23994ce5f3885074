/* Conv -> BatchNormalization (inference, constant statistics) becomes one Conv:
 *   BN(y) = s*(y - mean) + beta with s = gamma / sqrt(var + eps), per output channel, so
 *   W'[m] = s[m]*W[m] and B'[m] = s[m]*(B[m] - mean[m]) + beta[m].
 * The folded weights are computed in double and stored as new constants; the originals are
 * dropped by the pipeline when nothing else reads them. Saves the BN pass over every activation
 * (ResNet-50: 53 of them). */
#include "pass_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

static anvil_status fold_one(pass_ctx *c, int32_t ck, int32_t bk) {
    ir_graph *g = c->g;
    const ir_node *conv = &g->nodes[ck], *bn = &g->nodes[bk];
    size_t wn, m = 0, bn_n[4], bias_n = 0;
    const void *w = pass_const_f32(c, conv->inputs[1], &wn);
    if (!w || g->values[conv->inputs[1]].shape.rank < 3) return ANVIL_OK;
    m = (size_t)g->values[conv->inputs[1]].shape.d[0];
    const void *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = pass_const_f32(c, bn->inputs[i + 1], &bn_n[i]);
        if (!p[i] || bn_n[i] != m) return ANVIL_OK;
    }
    const void *bias = NULL;
    ir_vid bias_v = conv->n_inputs > 2 ? conv->inputs[2] : IR_NONE;
    if (bias_v != IR_NONE && (!(bias = pass_const_f32(c, bias_v, &bias_n)) || bias_n != m))
        return ANVIL_OK;
    float eps = 1e-5f;
    if (ir_attr_float(bn, "epsilon", 1e-5f, &eps) != ANVIL_OK) return ANVIL_OK;
    if (m == 0 || wn % m) return ANVIL_OK;

    float *w2 = malloc(wn * sizeof *w2), *b2 = malloc(m * sizeof *b2);
    if (!w2 || !b2) {
        free(w2);
        free(b2);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    const size_t per = wn / m;
    for (size_t o = 0; o < m; o++) {
        double gamma = pass_const_f32_at(p[0], o), beta = pass_const_f32_at(p[1], o);
        double mean = pass_const_f32_at(p[2], o), var = pass_const_f32_at(p[3], o);
        double s = gamma / sqrt(var + (double)eps);
        for (size_t i = 0; i < per; i++)
            w2[o * per + i] = (float)(s * pass_const_f32_at(w, o * per + i));
        double b0 = bias ? pass_const_f32_at(bias, o) : 0.0;
        b2[o] = (float)(s * (b0 - mean) + beta);
    }
    char base[400];
    ir_vid wv, bv;
    /* a copy: adding values may move g->values */
    const ir_shape wshape = g->values[conv->inputs[1]].shape;
    int64_t bdim = (int64_t)m;
    snprintf(base, sizeof base, "%.300s.bn_folded_W", conv->name);
    anvil_status st = pass_add_const(c, base, wshape.rank, wshape.d, w2, &wv);
    if (st != ANVIL_OK) {
        free(b2);
        return st;
    }
    snprintf(base, sizeof base, "%.300s.bn_folded_B", g->nodes[ck].name);
    CORE_TRY(pass_add_const(c, base, 1, &bdim, b2, &bv));

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
