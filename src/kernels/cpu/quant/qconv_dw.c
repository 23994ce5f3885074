/* Depthwise QLinearConv (group = input channels = output channels, 2-D, no dilation), variant
 * "qconv_dw_i8": MobileNet's 3x3 and 5x5 convs between the int8 1x1 ones, computed on the 8-bit
 * planes directly. Each output is the exact int32 sum of (x - zx)(w - zw) over its taps plus the
 * bias, requantized as the reference requantizes it (ops/quant/matmul_conv.c), so the bytes are
 * the reference's. The planes are split among the threads; quant_dwconv_avx512 computes one. */
#include "kernels/kernels.h"
#include "ops/nn_common.h"
#include "quant.h"

#include <stdlib.h>
#include <string.h>

enum { DW_X, DW_XS, DW_XZ, DW_W, DW_WS, DW_WZ, DW_YS, DW_YZ, DW_B };

typedef struct dw_state {
    quant_dw g;
    int64_t c;
    int32_t *w;  /* [c][kh * kw] weights less their zero point */
    int32_t *b;  /* [c] bias (0 where absent) */
    float *mult; /* [c] sx * sw[c] / sy, in the reference's float arithmetic */
    int threads;
} dw_state;

/* Input i a constant of dtype dt with 1 or `want` elements. */
static bool const_of(const kern_node *kn, int i, anvil_dtype dt, int64_t want) {
    if (!kern_has_input(kn, i)) return false;
    const op_tinfo *t = &kn->in[i];
    return t->value && t->dtype == dt && ir_shape_is_static(&t->shape) &&
           (quant_numel(t) == 1 || quant_numel(t) == want);
}

static int32_t zp_at(const op_tinfo *t, int64_t i) {
    const int64_t at = quant_numel(t) == 1 ? 0 : i;
    return t->dtype == ANVIL_DTYPE_INT8 ? ((const int8_t *)t->value)[at]
                                        : ((const uint8_t *)t->value)[at];
}

static bool geometry(const kern_node *kn, quant_dw *g, int64_t *c) {
    const qconv_params *p = kn->node->params;
    const op_tinfo *x = &kn->in[DW_X], *w = &kn->in[DW_W], *y = &kn->out[0];
    if (!p || kn->n_in < 8 || !quant_is_8bit(x->dtype) || !quant_is_8bit(w->dtype) ||
        !quant_is_8bit(y->dtype) || !w->value || x->shape.rank != 4 || w->shape.rank != 4 ||
        !ir_shape_is_static(&x->shape) || !ir_shape_is_static(&w->shape) ||
        !ir_shape_is_static(&y->shape))
        return false;
    *c = x->shape.d[1];
    if (p->group != *c || w->shape.d[0] != *c || w->shape.d[1] != 1) return false;
    nn_geom geo;
    if (nn_window_resolve(kn->node, &p->win, 2, x->shape.d + 2, w->shape.d + 2, false, &geo) !=
        ANVIL_OK)
        return false;
    if (geo.dil[0] != 1 || geo.dil[1] != 1 || geo.kernel[0] > 16) return false;
    *g = (quant_dw){.ih = geo.in[0],
                    .iw = geo.in[1],
                    .oh = geo.out[0],
                    .ow = geo.out[1],
                    .kh = geo.kernel[0],
                    .kw = geo.kernel[1],
                    .sh = geo.stride[0],
                    .sw = geo.stride[1],
                    .pt = geo.pad_begin[0],
                    .pl = geo.pad_begin[1]};
    const int64_t ow64 = (g->ow + 63) / 64 * 64;
    const int64_t need = ow64 * g->sw + g->kw + 32, have = g->pl + g->iw + g->kw;
    g->row_len = need > have ? need : have;
    g->x_signed = x->dtype == ANVIL_DTYPE_INT8;
    g->y_signed = y->dtype == ANVIL_DTYPE_INT8;
    return true;
}

static bool supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    quant_dw g;
    int64_t c;
    if (!geometry(kn, &g, &c)) return false;
    const anvil_dtype xt = kn->in[DW_X].dtype, wt = kn->in[DW_W].dtype, yt = kn->out[0].dtype;
    if (!const_of(kn, DW_XS, ANVIL_DTYPE_FLOAT32, 1) || !const_of(kn, DW_XZ, xt, 1) ||
        !const_of(kn, DW_WS, ANVIL_DTYPE_FLOAT32, c) || !const_of(kn, DW_WZ, wt, c) ||
        !const_of(kn, DW_YS, ANVIL_DTYPE_FLOAT32, 1) || !const_of(kn, DW_YZ, yt, 1))
        return false;
    return !kern_has_input(kn, DW_B) ||
           (kn->in[DW_B].value && kn->in[DW_B].dtype == ANVIL_DTYPE_INT32 &&
            quant_numel(&kn->in[DW_B]) == c);
}

static void release(void *state) {
    dw_state *s = state;
    if (!s) return;
    free(s->w);
    free(s->b);
    free(s->mult);
    free(s);
}

static float f32_at(const op_tinfo *t, int64_t i) {
    float v;
    memcpy(&v, (const char *)t->value + (quant_numel(t) == 1 ? 0 : i) * sizeof v, sizeof v);
    return v;
}

static anvil_status prepare(const kern_node *kn, void **state) {
    dw_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!geometry(kn, &s->g, &s->c)) {
        free(s);
        return core_err(ANVIL_ERR_INTERNAL, "%s: qconv_dw_i8 prepared on a node it does not take",
                        ir_node_label(kn->node));
    }
    const int64_t taps = s->g.kh * s->g.kw;
    s->w = malloc(sizeof(int32_t) * (size_t)(s->c * taps));
    s->b = calloc((size_t)s->c, sizeof(int32_t));
    s->mult = malloc(sizeof(float) * (size_t)s->c);
    if (!s->w || !s->b || !s->mult) {
        release(s);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    const op_tinfo *w = &kn->in[DW_W];
    const float sx = f32_at(&kn->in[DW_XS], 0), sy = f32_at(&kn->in[DW_YS], 0);
    for (int64_t c = 0; c < s->c; c++) {
        const int32_t zw = zp_at(&kn->in[DW_WZ], c);
        for (int64_t t = 0; t < taps; t++) {
            const int64_t at = c * taps + t;
            s->w[at] = (w->dtype == ANVIL_DTYPE_INT8 ? ((const int8_t *)w->value)[at]
                                                     : ((const uint8_t *)w->value)[at]) -
                       zw;
        }
        if (kern_has_input(kn, DW_B)) memcpy(&s->b[c], (const char *)kn->in[DW_B].value + 4 * c, 4);
        s->mult[c] = sx * f32_at(&kn->in[DW_WS], c) / sy;
    }
    s->g.zx = zp_at(&kn->in[DW_XZ], 0);
    s->g.zy = zp_at(&kn->in[DW_YZ], 0);
    s->threads = kn->threads > 0 ? kn->threads : 1;
    *state = s;
    return ANVIL_OK;
}

static size_t slot_bytes(const quant_dw *g) {
    return (size_t)((g->kh * (g->row_len + 64) + 63) / 64 * 64);
}

static size_t workspace(const kern_node *kn) {
    quant_dw g;
    int64_t c;
    if (!geometry(kn, &g, &c)) return 0;
    return (size_t)(kn->threads > 0 ? kn->threads : 1) * slot_bytes(&g);
}

typedef struct dw_job {
    const dw_state *s;
    const uint8_t *x;
    uint8_t *y, *ws;
    int64_t planes;
    int slots;
} dw_job;

static void dw_range(void *arg, size_t begin, size_t end) {
    const dw_job *j = arg;
    const quant_dw *g = &j->s->g;
    const int64_t taps = g->kh * g->kw;
    for (size_t t = begin; t < end; t++)
        for (int64_t p = (int64_t)t; p < j->planes; p += j->slots) {
            const int64_t c = p % j->s->c;
            quant_dwconv_avx512(j->x + p * g->ih * g->iw, g, j->s->w + c * taps, j->s->b[c],
                                j->s->mult[c], j->ws + t * slot_bytes(g), j->y + p * g->oh * g->ow);
        }
}

static anvil_status run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                        op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    const dw_state *s = state;
    dw_job j = {.s = s,
                .x = in[DW_X]->data,
                .y = out[0]->data,
                .ws = ws,
                .planes = in[DW_X]->dims[0] * s->c};
    int t = op_ctx_threads(ctx);
    if (t > s->threads) t = s->threads;
    j.slots = j.planes < t ? (int)j.planes : t;
    if (j.slots > 0) op_parallel_for(ctx, (size_t)j.slots, dw_range, &j);
    return ANVIL_OK;
}

const kern_variant quant_variant_dwconv = {.name = "qconv_dw_i8",
                                           .op = IR_OP_QLINEARCONV,
                                           .needs = KERN_NEEDS_AVX512,
                                           .supports = supports,
                                           .workspace_size = workspace,
                                           .prepare = prepare,
                                           .release = release,
                                           .run = run};
