/* Channels-last direct convs (anvil.ConvNhwc):
 *   convnhwc_depthwise_avx512 / _avx2   group == C == M, 3x3 and 5x5 kernels, strides 1 and 2
 *                                       without dilation, stride 1 with dilation 2
 *                                       (conv_dwn_shape);
 *   convnhwc_smallc_direct_avx512       one group, at most 4 input channels (a network's stem);
 *   convnhwc_grouped_avx512             groups of 8, 16, 32 ... output channels and at most 64
 *                                       input channels (RegNet, ResNeXt; gc_shape);
 *   convnhwc_grouped_avx512bf16         the same with an even number of input channels per
 *                                       group, X stored (or rounded) in bf16, vdpbf16ps.
 *
 * With the channels in the vector lanes every tap is one load at any stride and any width, so,
 * unlike NCHW (conv_depthwise.c), there is no padded copy, no deinterleaving and no transpose:
 * the kernels (conv_dwn_tmpl.h, conv_scn_avx512.c) read X where it lies. Both share everything
 * here but their shape rule and weight packing: threads take whole output rows, and each row's
 * fused epilogue (activation, residual: NHWC like the output) runs right after it, in L1. */
#include "conv.h"

#include "kernels/fusion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The plan (conv_last_plan) is plain data in conv_layout.h, with the run (conv_last_run in
 * conv_direct_run.c) that the runtime and the libraries `anvil compile` emits share; the state
 * adds the packed weights. */
typedef struct last_state {
    conv_last_plan p;
    float *wp; /* owned: the packed weights (conv_last_geom), 64-byte aligned */
} last_state;
typedef conv_last_plan last_plan;

/* Whether s is depthwise, grouped or has few input channels decides the kernel and the
 * packing. */
static bool depthwise(const conv_shape *s) {
    return s->group == s->c && s->m == s->c && s->group > 1;
}

/* The shapes the two kernels take: the depthwise one conv_dwn_shape (conv_layout.h); this one a
 * single group, at most 4 input channels (conv_smallc.c's rule) and 64 output channels (4 vectors),
 * no dilation, kernels up to 11 and strides up to 4. A 1-channel conv is both; it goes to the
 * depthwise kernel. */
static bool sc_shape(const conv_shape *s) {
    return s->group == 1 && s->c <= 4 && s->m <= 64 && s->dh == 1 && s->dw == 1 && s->kh <= 11 &&
           s->kw <= 11 && s->sh <= 4 && s->sw <= 4;
}

/* The grouped kernel's shapes: groups that fill a vector of 16 output channels exactly (mg 8 or
 * 16, or a multiple of 16), at most 64 input channels per group (a block's weights per tap stay
 * within 16 vectors), not depthwise, no dilation, kernels up to 7 and strides up to 4. With
 * mg = 8 half its FMAs multiply zeros (conv_gcn_avx512.c); smaller groups waste more and are
 * left to the GEMM variants. */
static bool gc_shape(const conv_shape *s) {
    const int64_t mg = s->group > 0 ? s->m / s->group : 0;
    return s->group > 1 && !depthwise(s) && s->cg > 1 && s->cg <= 64 && mg >= 8 &&
           (16 % mg == 0 || mg % 16 == 0) && s->dh == 1 && s->dw == 1 && s->kh <= 7 && s->kw <= 7 &&
           s->sh <= 4 && s->sw <= 4;
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
                          .dw = s->dw,
                          .group = s->group};
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

static bool gc_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    last_plan p;
    return plan_of(kn, gc_shape, &p);
}

/* The bf16 kernel's: input channels in pairs that never straddle two groups. */
static bool gc16_shape(const conv_shape *s) {
    return gc_shape(s) && s->cg % 2 == 0;
}

static bool gc16_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    last_plan p;
    return plan_of(kn, gc16_shape, &p);
}

/* The plan for kn under whichever of the three rules accepts it. */
static bool plan_any(const kern_node *kn, last_plan *p) {
    return plan_of(kn, conv_dwn_shape, p) || plan_of(kn, sc_shape, p) || plan_of(kn, gc_shape, p);
}

/* The bias, zero-padded to vpad, per run. */
static size_t last_workspace(const kern_node *kn) {
    last_plan p;
    return plan_any(kn, &p) ? sizeof(float) * (size_t)p.g.vpad : 0;
}

/* The packed weights' floats: depthwise [kh*kw][vpad], grouped [vpad/16][kh*kw][nin][16], else
 * [kh][kw][c][vpad]. */
static size_t last_wp_floats(const last_plan *p) {
    const conv_shape *s = &p->s;
    const int64_t per_tap = depthwise(s) ? 1 : s->group > 1 ? conv_gcn_nin(&p->g) : s->c;
    return (size_t)(per_tap * s->kh * s->kw * p->g.vpad);
}

/* Packs W [m][c/group][kh][kw] as the kernel reads it (last_wp_floats' layouts) into wp, zeroed
 * by the caller: past m, and in a grouped block the lanes of the groups an input channel is not
 * in, stay zero. A grouped block's input j is channel cb + j, cb its first group's first. */
static void pack(const last_plan *p, const float *w, float *wp) {
    const conv_shape *s = &p->s;
    const int64_t khw = s->kh * s->kw, vpad = p->g.vpad;
    if (s->group > 1 && !depthwise(s)) {
        const int64_t nin = conv_gcn_nin(&p->g), mg = s->m / s->group;
        for (int64_t o = 0; o < s->m; o++) {
            const int64_t b = o / 16, cb = b * 16 / mg * s->cg;
            for (int64_t ci = 0; ci < s->cg; ci++) {
                const int64_t j = o / mg * s->cg + ci - cb;
                for (int64_t t = 0; t < khw; t++)
                    wp[((b * khw + t) * nin + j) * 16 + o % 16] = w[(o * s->cg + ci) * khw + t];
            }
        }
        return;
    }
    const int64_t cg = depthwise(s) ? 1 : s->c;
    for (int64_t o = 0; o < s->m; o++)
        for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t t = 0; t < khw; t++)
                wp[(t * cg + ci) * vpad + o] = w[(o * cg + ci) * khw + t];
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
    last_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    last_plan *p = &st->p;
    if (!plan_any(kn, p)) {
        free(st);
        return conv_prepare_unsupported(kn, "channels-last direct conv");
    }
    const conv_shape *s = &p->s;
    const size_t n = last_wp_floats(p);
    st->wp = core_aligned_alloc(64, sizeof(float) * n);
    if (!st->wp) {
        free(st);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(st->wp, 0, sizeof(float) * n);
    pack(p, kn->in[1].value, st->wp);
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    if (depthwise(s)) p->act_in_regs = act_in_registers(kn, &p->fuse, &p->g);
    *state = st;
    return ANVIL_OK;
}

/* convnhwc_grouped_avx512bf16: the packed weights of last_prepare as pairs of bf16 (wp holds
 * half as many 32-bit pairs as it held floats). */
static anvil_status gc16_prepare(const kern_node *kn, void **state) {
    last_plan p;
    if (!plan_of(kn, gc16_shape, &p)) return conv_prepare_unsupported(kn, "grouped bf16 conv");
    CORE_TRY(last_prepare(kn, state));
    last_state *st = *state;
    const size_t pairs = last_wp_floats(&st->p) / 2;
    uint16_t *w16 = (uint16_t *)st->wp;
    /* in place, front to back: pair i's two floats are read before pair i (which is no later in
     * memory than float 2i) is written */
    for (size_t i = 0; i < pairs; i++) {
        const size_t lane = i % 16, row = i / 16; /* row: (block, tap, pair) */
        const float lo = st->wp[(2 * row) * 16 + lane], hi = st->wp[(2 * row + 1) * 16 + lane];
        w16[2 * i] = core_f32_to_bf16(lo);
        w16[2 * i + 1] = core_f32_to_bf16(hi);
    }
    return ANVIL_OK;
}

/* The workspace: the bias (vpad floats, conv_last_run's), then at this byte offset X rounded to
 * bf16 when it comes in fp32. */
static size_t gc16_x16_at(const last_plan *p) {
    return (sizeof(float) * (size_t)p->g.vpad + 63) & ~(size_t)63;
}

static size_t gc16_workspace(const kern_node *kn) {
    last_plan p;
    if (!plan_of(kn, gc16_shape, &p)) return 0;
    return gc16_x16_at(&p) + sizeof(uint16_t) * (size_t)(p.s.n * p.s.h * p.s.w * p.s.c);
}

static void gc16_bf16_io(const kern_node *kn, const void *state, uint32_t *in, uint32_t *out) {
    (void)kn;
    *in = state ? 1u : 0u;
    *out = 0;
}

static anvil_status gc16_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_out;
    const last_state *st = state;
    const conv_shape *s = &st->p.s;
    if (out[0]->dtype == ANVIL_DTYPE_BFLOAT16)
        return core_err(ANVIL_ERR_INTERNAL, "node '%s': a bf16 output where %s writes fp32",
                        n->name ? n->name : "?", "convnhwc_grouped_avx512bf16");
    const uint16_t *x16 = in[0]->data;
    if (in[0]->dtype != ANVIL_DTYPE_BFLOAT16) {
        /* the bf16 tiles' rounding, the n*h*w*c values as one row */
        uint16_t *r = (uint16_t *)((char *)ws + gc16_x16_at(&st->p));
        const int64_t xn = s->n * s->h * s->w * s->c;
        gemm_bf16_store_c16(in[0]->data, xn, r, xn, 1, xn);
        x16 = r;
    }
    conv_last_run16(&st->p, conv_gcn_row16_avx512bf16, st->wp, x16, conv_bias(s, in, n_in),
                    conv_row_fusion_residual(&st->p.fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

static void last_release(void *state) {
    last_state *st = state;
    if (st) free(st->wp);
    free(st);
}

static anvil_status last_run(const last_state *st, conv_last_row_fn row, const op_tensor *const *in,
                             int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    conv_last_run(&st->p, row, st->wp, in[0]->data, conv_bias(&st->p.s, in, n_in),
                  conv_row_fusion_residual(&st->p.fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* kern_variant.bf16_io of convnhwc_depthwise_avx512: X stored in bf16 ("bf16 in memory, fp32
 * arithmetic": a depthwise conv has no dot product for the bf16 unit to speed up, but reads as
 * many bytes as it computes FMAs), only in sessions that accept bf16 (KERN_PREC_BF16), since the
 * fp32 kernel would otherwise read X unrounded; its output stays fp32. */
static void dw_bf16_io(const kern_node *kn, const void *state, uint32_t *in, uint32_t *out) {
    const last_state *st = state;
    *out = 0;
    *in = st && depthwise(&st->p.s) && kern_knobs_of(kn)->precision == KERN_PREC_BF16 ? 1u : 0u;
}

static anvil_status dw_run_avx512(const ir_node *n, void *state, const op_tensor *const *in,
                                  int n_in, op_tensor *const *out, int n_out, void *ws,
                                  op_ctx *ctx) {
    (void)n_out;
    const last_state *st = state;
    if (out[0]->dtype == ANVIL_DTYPE_BFLOAT16)
        return core_err(ANVIL_ERR_INTERNAL, "node '%s': a bf16 output where %s writes fp32",
                        n->name ? n->name : "?", "convnhwc_depthwise_avx512");
    if (in[0]->dtype != ANVIL_DTYPE_BFLOAT16)
        return last_run(st, conv_dwn_row_avx512, in, n_in, out, ws, ctx);
    conv_last_run16(&st->p, conv_dwn_row16_avx512, st->wp, in[0]->data,
                    conv_bias(&st->p.s, in, n_in), conv_row_fusion_residual(&st->p.fuse, in, n_in),
                    out[0]->data, ws, ctx);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dw_run_avx2, last_run(state, conv_dwn_row_avx2, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(sc_run_avx512, last_run(state, conv_scn_row_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(gc_run_avx512, last_run(state, conv_gcn_row_avx512, in, n_in, out, ws, ctx))

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, the packed weights as a blob, and a conv_last_run call with the
 * variant's ISA kernel: the very code last_run runs. */

static anvil_status last_emit(const void *state, const char *row, const char *file, kern_emit *e) {
    const last_state *st = state;
    const last_plan *p = &st->p;
    const conv_shape *s = &p->s;
    const conv_last_geom *g = &p->g;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(conv_emit_direct_files(e));
    CORE_TRY(e->need(e, file));
    char wp[96], x[96], b[96], r[96], f[6][32];
    CORE_TRY(e->blob(e, st->wp, last_wp_floats(p) * sizeof(float), wp, sizeof wp));
    CORE_TRY(conv_emit_row_fusion(e, "fuse", &p->fuse));
    e->code(e, "conv_last_plan lp;\nmemset(&lp, 0, sizeof lp);\n");
    conv_emit_shape(e, "lp.s", s);
    e->code(
        e,
        "lp.g = (conv_last_geom){%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
        "%lld, %lld, %lld, %lld, %lld, %lld, %lld, %s, %s, %s, %s, %s, %s, %lld};\n",
        (long long)g->h, (long long)g->w, (long long)g->c, (long long)g->m, (long long)g->vpad,
        (long long)g->oh, (long long)g->ow, (long long)g->kh, (long long)g->kw, (long long)g->sh,
        (long long)g->sw, (long long)g->pt, (long long)g->pl, (long long)g->dh, (long long)g->dw,
        (long long)g->ox_lo, (long long)g->ox_hi, g->act_on ? "true" : "false",
        g->act_mul ? "true" : "false", kern_emit_float(g->act_s, f[0], sizeof f[0]),
        kern_emit_float(g->act_t, f[1], sizeof f[1]), kern_emit_float(g->act_lo, f[2], sizeof f[2]),
        kern_emit_float(g->act_hi, f[3], sizeof f[3]), (long long)g->group);
    e->code(e, "lp.threads = %d;\nlp.fuse = fuse;\nlp.act_in_regs = %s;\n", p->threads,
            p->act_in_regs ? "true" : "false");
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, p->fuse.residual, r, sizeof r);
    e->code(e,
            "conv_last_run(&lp, %s, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (const float *)(%s), (float *)(%s), %s, %s);\n",
            row, wp, x, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static anvil_status dw_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return last_emit(state, "conv_dwn_row_avx512", "kernels/cpu/conv/conv_dw_avx512.c", e);
}

static anvil_status dw_emit_avx2(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return last_emit(state, "conv_dwn_row_avx2", "kernels/cpu/conv/conv_dw_avx2.c", e);
}

static anvil_status sc_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return last_emit(state, "conv_scn_row_avx512", "kernels/cpu/conv/conv_scn_avx512.c", e);
}

static anvil_status gc_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return last_emit(state, "conv_gcn_row_avx512", "kernels/cpu/conv/conv_gcn_avx512.c", e);
}

static const kern_emitter dw_emitter_avx512 = {dw_emit_avx512, NULL},
                          dw_emitter_avx2 = {dw_emit_avx2, NULL},
                          sc_emitter_avx512 = {sc_emit_avx512, NULL},
                          gc_emitter_avx512 = {gc_emit_avx512, NULL};

const kern_variant conv_nhwc_v_depthwise_avx512 = {"convnhwc_depthwise_avx512",
                                                   IR_OP_CONV_NHWC,
                                                   KERN_NEEDS_AVX512,
                                                   dw_supports,
                                                   last_workspace,
                                                   last_prepare,
                                                   last_release,
                                                   dw_run_avx512,
                                                   conv_fuses,
                                                   NULL,
                                                   &dw_emitter_avx512,
                                                   dw_bf16_io};
const kern_variant conv_nhwc_v_depthwise_avx2 = {"convnhwc_depthwise_avx2",
                                                 IR_OP_CONV_NHWC,
                                                 KERN_NEEDS_AVX2,
                                                 dw_supports,
                                                 last_workspace,
                                                 last_prepare,
                                                 last_release,
                                                 dw_run_avx2,
                                                 conv_fuses,
                                                 NULL,
                                                 &dw_emitter_avx2,
                                                 NULL};
const kern_variant conv_nhwc_v_smallc_avx512 = {"convnhwc_smallc_direct_avx512",
                                                IR_OP_CONV_NHWC,
                                                KERN_NEEDS_AVX512,
                                                sc_supports,
                                                last_workspace,
                                                last_prepare,
                                                last_release,
                                                sc_run_avx512,
                                                conv_fuses,
                                                NULL,
                                                &sc_emitter_avx512,
                                                NULL};
const kern_variant conv_nhwc_v_grouped_avx512 = {"convnhwc_grouped_avx512",
                                                 IR_OP_CONV_NHWC,
                                                 KERN_NEEDS_AVX512,
                                                 gc_supports,
                                                 last_workspace,
                                                 last_prepare,
                                                 last_release,
                                                 gc_run_avx512,
                                                 conv_fuses,
                                                 NULL,
                                                 &gc_emitter_avx512,
                                                 NULL};
const kern_variant conv_nhwc_v_grouped_avx512bf16 = {"convnhwc_grouped_avx512bf16",
                                                     IR_OP_CONV_NHWC,
                                                     KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                                         KERN_ROUNDS_BF16,
                                                     gc16_supports,
                                                     gc16_workspace,
                                                     gc16_prepare,
                                                     last_release,
                                                     gc16_run,
                                                     conv_fuses,
                                                     NULL,
                                                     NULL,
                                                     gc16_bf16_io};
