/* Kernel taps that only ever read padding are dropped. DeepLabV3's ASPP runs 3x3 convolutions
 * with dilation 12, 24 and 36 on a 28x28 (or smaller) map, padded by the dilation: at 36 every
 * tap but the centre lands outside the input for every output pixel, so the convolution is a
 * 1x1 one, computed by a GEMM-based kernel as nine times the work (7.7 ms of a 38 ms run, one
 * thread). Per spatial dim the taps some output pixel reads form a range [k0, k1]; the node gets
 * the weights of that range (a recipe over the source's weights) and pads shrunk by the taps
 * left out, which leaves every output exactly as it was. Only where the shrunk pads stay >= 0
 * (ONNX pads are never negative). 2-D float32 Conv with constant weights and static shapes. */
#include "rewrite.h"

#include "ops/nn_common.h"

#include <stdio.h>
#include <string.h>

/* The recipe: src[0] = the source's W [M, C, KH, KW]; which = k0h | k1h << 8 | k0w << 16 |
 * k1w << 24, the taps kept. */
static anvil_status crop_fill(const ir_graph *g, const pass_const *pc, float *out) {
    size_t wn = 0;
    const void *w = pass_graph_const_f32(g, pc->src[0], &wn);
    const ir_shape *s = &g->values[pc->src[0]].shape;
    if (!w || s->rank != 4) return core_err(ANVIL_ERR_INTERNAL, "tap cropping: weights missing");
    const int64_t mc = s->d[0] * s->d[1], kh = s->d[2], kw = s->d[3];
    const int h0 = pc->which & 255, h1 = (pc->which >> 8) & 255;
    const int w0 = (pc->which >> 16) & 255, w1 = (pc->which >> 24) & 255;
    size_t o = 0;
    for (int64_t q = 0; q < mc; q++)
        for (int i = h0; i <= h1; i++)
            for (int j = w0; j <= w1; j++)
                out[o++] = pass_const_f32_at(w, (size_t)((q * kh + i) * kw + j));
    return ANVIL_OK;
}

/* The taps of one dim that some output reads: [*k0, *k1]; false if none does. */
static bool used_taps(const nn_geom *geo, int d, int64_t *k0, int64_t *k1) {
    *k0 = -1;
    for (int64_t k = 0; k < geo->kernel[d]; k++) {
        /* input index o*s - pb + k*dil; is some o in [0, out) mapped into [0, in)? */
        const int64_t lo = geo->pad_begin[d] - k * geo->dil[d], s = geo->stride[d];
        int64_t o = lo <= 0 ? 0 : (lo + s - 1) / s;
        if (o >= geo->out[d] || o * s > lo + geo->in[d] - 1) continue;
        if (*k0 < 0) *k0 = k;
        *k1 = k;
    }
    return *k0 >= 0;
}

static const ir_attr *attr_ints(ir_graph *g, ir_attr *a, const char *name, const int64_t *v,
                                size_t n) {
    int64_t *copy = core_arena_array(g->arena, n, sizeof *copy);
    a->name = core_arena_strdup(g->arena, name);
    if (!copy || !a->name) return NULL;
    memcpy(copy, v, n * sizeof *copy);
    a->type = IR_ATTR_INTS;
    a->ints = copy;
    a->n = n;
    return a;
}

static anvil_status crop_one(pass_ctx *c, int32_t k) {
    ir_graph *g = c->g;
    const ir_node *n = &g->nodes[k];
    const ir_value *x = &g->values[n->inputs[0]], *wv = &g->values[n->inputs[1]];
    size_t wn;
    if (n->inputs[1] >= c->src->n_values || !pass_const_f32(c, n->inputs[1], &wn)) return ANVIL_OK;
    if (x->shape.rank != 4 || wv->shape.rank != 4 || !ir_shape_is_static(&x->shape) ||
        !ir_shape_is_static(&wv->shape))
        return ANVIL_OK;
    const conv_params *p = n->params;
    nn_geom geo;
    if (!p || nn_window_resolve(n, &p->win, 2, &x->shape.d[2], &wv->shape.d[2], false, &geo) !=
                  ANVIL_OK) {
        core_err_clear();
        return ANVIL_OK;
    }
    int64_t k0[2], k1[2], pb[2], pe[2], kk[2];
    bool cropped = false;
    for (int d = 0; d < 2; d++) {
        if (geo.kernel[d] > 255 || !used_taps(&geo, d, &k0[d], &k1[d])) return ANVIL_OK;
        pb[d] = geo.pad_begin[d] - k0[d] * geo.dil[d];
        pe[d] = geo.pad_end[d] - (geo.kernel[d] - 1 - k1[d]) * geo.dil[d];
        kk[d] = k1[d] - k0[d] + 1;
        if (pb[d] < 0 || pe[d] < 0) return ANVIL_OK;
        cropped |= kk[d] < geo.kernel[d];
    }
    if (!cropped) return ANVIL_OK;

    int64_t dims[4] = {wv->shape.d[0], wv->shape.d[1], kk[0], kk[1]};
    pass_const recipe = {.fill = crop_fill,
                         .src = {n->inputs[1], IR_NONE, IR_NONE, IR_NONE, IR_NONE, IR_NONE},
                         .which = (int)(k0[0] | k1[0] << 8 | k0[1] << 16 | k1[1] << 24)};
    char base[400];
    snprintf(base, sizeof base, "%.300s.cropped_W", n->name);
    ir_vid nw;
    CORE_TRY(pass_add_const(c, base, 4, dims, &recipe, &nw));
    CORE_TRY(pass_node_set_input(c, k, 1, nw));

    /* the node's attributes are the source's (shared): a new list, pads and kernel replaced,
     * auto_pad dropped (the pads are explicit now) */
    ir_node *m = &g->nodes[k];
    ir_attr *attrs = core_arena_array(g->arena, (size_t)m->n_attrs + 2, sizeof *attrs);
    if (!attrs) return ANVIL_ERR_OUT_OF_MEMORY;
    int na = 0;
    for (int i = 0; i < m->n_attrs; i++) {
        const char *an = m->attrs[i].name;
        if (strcmp(an, "pads") && strcmp(an, "kernel_shape") && strcmp(an, "auto_pad"))
            attrs[na++] = m->attrs[i];
    }
    const int64_t pads[4] = {pb[0], pb[1], pe[0], pe[1]};
    if (!attr_ints(g, &attrs[na++], "pads", pads, 4) ||
        !attr_ints(g, &attrs[na++], "kernel_shape", kk, 2))
        return ANVIL_ERR_OUT_OF_MEMORY;
    m->attrs = attrs;
    m->n_attrs = na;
    CORE_TRY(op_get(IR_OP_CONV)->check(g, m)); /* its params from the new attributes */
    c->pg->cropped_convs++;
    return ANVIL_OK;
}

anvil_status pass_crop_taps(pass_ctx *c) {
    for (int32_t k = 0; k < c->g->n_nodes; k++) {
        const ir_node *n = &c->g->nodes[k];
        if (c->dead[k] || n->op != IR_OP_CONV || n->n_inputs < 2 || n->inputs[1] == IR_NONE ||
            c->g->values[n->inputs[0]].dtype != ANVIL_DTYPE_FLOAT32)
            continue;
        CORE_TRY(crop_one(c, k));
    }
    return ANVIL_OK;
}
