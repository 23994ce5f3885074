/* Channels-last direct convs (anvil.ConvNhwc):
 *   convnhwc_depthwise_avx512 / _avx2   group == C == M, 3x3 and 5x5 kernels, strides 1 and 2
 *                                       without dilation, stride 1 with dilation 2
 *                                       (conv_dwn_shape);
 *   convnhwc_smallc_direct_avx512       one group, at most 4 input channels (a network's stem).
 *
 * With the channels in the vector lanes every tap is one load at any stride and any width, so,
 * unlike NCHW (conv_depthwise.c), there is no padded copy, no deinterleaving and no transpose:
 * the kernels (conv_dwn_tmpl.h, conv_scn_avx512.c) read X where it lies. Both share everything
 * here but their shape rule and weight packing: threads take whole output rows, and each row's
 * fused epilogue (activation, residual: NHWC like the output) runs right after it, in L1. */
#include "conv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct last_plan {
    conv_shape s;
    conv_last_geom g;
    int threads;
    conv_row_fusion fuse;
    bool act_in_regs; /* the fusion is the kernel's in-register activation (g.act_*) alone */
    float *wp;        /* owned: the packed weights (conv_last_geom), 64-byte aligned */
} last_plan;

/* Whether s is depthwise (else: few input channels) decides the kernel and the packing. */
static bool depthwise(const conv_shape *s) {
    return s->group == s->c && s->m == s->c && s->group > 1;
}

/* The shapes the two kernels take: the depthwise one conv_dwn_shape (conv.h); this one a single
 * group, at most 4 input channels (conv_smallc.c's rule) and 64 output channels (4 vectors), no
 * dilation, kernels up to 11 and strides up to 4. A 1-channel conv is both; it goes to the
 * depthwise kernel. */
static bool sc_shape(const conv_shape *s) {
    return s->group == 1 && s->c <= 4 && s->m <= 64 && s->dh == 1 && s->dw == 1 && s->kh <= 11 &&
           s->kw <= 11 && s->sh <= 4 && s->sw <= 4;
}

/* p's shape and geometry when kn has constant weights and the shape `rule` accepts. */
static bool plan_of(const kern_node *kn, bool (*rule)(const conv_shape *), last_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of_nhwc(kn, s) || !kn->in[1].value || !rule(s)) return false;
    conv_last_geom *g = &p->g;
    *g = (conv_last_geom){.h = s->h,
                          .w = s->w,
                          .c = s->c,
                          .m = s->m,
                          .vpad = (s->m + 15) / 16 * 16,
                          .oh = s->oh,
                          .ow = s->ow,
                          .kh = s->kh,
                          .kw = s->kw,
                          .sh = s->sh,
                          .sw = s->sw,
                          .pt = s->pt,
                          .pl = s->pl,
                          .dh = s->dh,
                          .dw = s->dw};
    /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw < w */
    g->ox_lo = (s->pl + s->sw - 1) / s->sw;
    if (g->ox_lo > s->ow) g->ox_lo = s->ow;
    const int64_t last = s->w - (s->kw - 1) * s->dw - 1 + s->pl; /* the interior's last ox * sw */
    g->ox_hi = last < 0 ? 0 : last / s->sw + 1;
    if (g->ox_hi > s->ow) g->ox_hi = s->ow;
    if (g->ox_hi < g->ox_lo) g->ox_hi = g->ox_lo;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    return true;
}

static bool dw_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    last_plan p;
    return plan_of(kn, conv_dwn_shape, &p);
}

static bool sc_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    last_plan p;
    return plan_of(kn, sc_shape, &p);
}

/* The bias, zero-padded to vpad, per run. */
static size_t last_workspace(const kern_node *kn) {
    last_plan p;
    return plan_of(kn, conv_dwn_shape, &p) || plan_of(kn, sc_shape, &p)
               ? sizeof(float) * (size_t)p.g.vpad
               : 0;
}

/* Packs W [m][c/group][kh][kw] as the kernel reads it: depthwise [kh*kw][vpad], else
 * [kh][kw][c][vpad]; zeros past m. */
static void pack(const conv_shape *s, const float *w, int64_t vpad, float *wp) {
    const int64_t cg = depthwise(s) ? 1 : s->c;
    for (int64_t o = 0; o < s->m; o++)
        for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t t = 0; t < s->kh * s->kw; t++)
                wp[(t * cg + ci) * vpad + o] = w[(o * cg + ci) * s->kh * s->kw + t];
}

/* Whether kn's fusion is an activation alone that the depthwise kernel can apply in registers
 * before its stores, with g's act_* set for it. Otherwise the row's second pass
 * (conv_row_fusion_apply) applies the fusion: a residual, or an activation such as SiLU. That
 * pass costs about 15% of a 3x3 depthwise conv (32x112x112, 1 thread: 80 -> 97 us for ReLU). */
static bool act_in_registers(const kern_node *kn, const conv_row_fusion *f, conv_last_geom *g) {
    const ir_fusion *fu = kn->node->fusion;
    if (!f->on || !fu || fu->bias >= 0 || fu->residual >= 0) return false;
    float s = 1.0f, t = 0.0f, lo = 0.0f, hi = INFINITY;
    bool mul = false;
    switch (fu->act) {
    case IR_ACT_RELU:
        break;
    case IR_ACT_CLIP:
        lo = fu->lo;
        hi = fu->hi;
        break;
    case IR_ACT_HARD_SIGMOID:
        s = fu->alpha;
        t = fu->beta;
        hi = 1.0f;
        break;
    case IR_ACT_HARD_SWISH:
        s = (float)(1.0 / 6.0);
        t = 0.5f;
        hi = 1.0f;
        mul = true;
        break;
    default:
        return false;
    }
    g->act_on = true;
    g->act_mul = mul;
    g->act_s = s;
    g->act_t = t;
    g->act_lo = lo;
    g->act_hi = hi;
    return true;
}

static anvil_status last_prepare(const kern_node *kn, void **state) {
    last_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan_of(kn, conv_dwn_shape, p) && !plan_of(kn, sc_shape, p)) {
        free(p);
        return conv_prepare_unsupported(kn, "channels-last direct conv");
    }
    const conv_shape *s = &p->s;
    const size_t n = (size_t)((depthwise(s) ? 1 : s->c) * s->kh * s->kw * p->g.vpad);
    p->wp = core_aligned_alloc(64, sizeof(float) * n);
    if (!p->wp) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(p->wp, 0, sizeof(float) * n);
    pack(s, kn->in[1].value, p->g.vpad, p->wp);
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    if (depthwise(s)) p->act_in_regs = act_in_registers(kn, &p->fuse, &p->g);
    *state = p;
    return ANVIL_OK;
}

static void last_release(void *state) {
    last_plan *p = state;
    if (p) free(p->wp);
    free(p);
}

typedef struct last_job {
    const last_plan *p;
    conv_last_row_fn row;
    const float *x, *bias, *res;
    float *y;
} last_job;

/* Thread t's share of the output rows of all images. */
static void last_chunk(void *arg, size_t begin, size_t end) {
    const last_job *j = arg;
    const last_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t rows = s->n * s->oh, T = p->threads, rowf = s->ow * s->m;
    for (size_t t = begin; t < end; t++)
        for (int64_t r = rows * (int64_t)t / T; r < rows * ((int64_t)t + 1) / T; r++) {
            const int64_t img = r / s->oh, oy = r % s->oh;
            j->row(&p->g, j->x + img * s->h * s->w * s->c, p->wp, j->bias, j->y + r * rowf, oy);
            if (p->fuse.on && !p->act_in_regs)
                conv_row_fusion_apply(&p->fuse, j->res ? j->res + r * rowf : NULL, j->y + r * rowf,
                                      rowf);
        }
}

/* The bias is copied into the workspace, zero-padded to vpad, per run: B is an input, constant
 * in every model the pass turns but not promised to be. */
static anvil_status last_run(const last_plan *p, conv_last_row_fn row, const op_tensor *const *in,
                             int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->oh * s->ow * s->m == 0) return ANVIL_OK;
    float *bias = ws;
    memset(bias, 0, sizeof(float) * (size_t)p->g.vpad);
    const float *b = conv_bias(s, in, n_in);
    if (b) memcpy(bias, b, sizeof(float) * (size_t)s->m);
    last_job j = {p,           row, in[0]->data, bias, conv_row_fusion_residual(&p->fuse, in, n_in),
                  out[0]->data};
    op_parallel_for(ctx, (size_t)p->threads, last_chunk, &j);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dw_run_avx512, last_run(state, conv_dwn_row_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dw_run_avx2, last_run(state, conv_dwn_row_avx2, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(sc_run_avx512, last_run(state, conv_scn_row_avx512, in, n_in, out, ws, ctx))

const kern_variant convnhwc_v_depthwise_avx512 = {"convnhwc_depthwise_avx512",
                                                  IR_OP_CONV_NHWC,
                                                  KERN_NEEDS_AVX512,
                                                  dw_supports,
                                                  last_workspace,
                                                  last_prepare,
                                                  last_release,
                                                  dw_run_avx512,
                                                  conv_fuses,
                                                  NULL,
                                                  NULL};
const kern_variant convnhwc_v_depthwise_avx2 = {"convnhwc_depthwise_avx2",
                                                IR_OP_CONV_NHWC,
                                                KERN_NEEDS_AVX2,
                                                dw_supports,
                                                last_workspace,
                                                last_prepare,
                                                last_release,
                                                dw_run_avx2,
                                                conv_fuses,
                                                NULL,
                                                NULL};
const kern_variant convnhwc_v_smallc_avx512 = {"convnhwc_smallc_direct_avx512",
                                               IR_OP_CONV_NHWC,
                                               KERN_NEEDS_AVX512,
                                               sc_supports,
                                               last_workspace,
                                               last_prepare,
                                               last_release,
                                               sc_run_avx512,
                                               conv_fuses,
                                               NULL,
                                               NULL};
