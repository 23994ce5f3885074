/* NHWC convolution kernels: X [n, h, w, c] -> Y [n, oh, ow, m], as one GEMM per image and group
 * with the pixels as rows: Y[pixels, m_g] = A[pixels, kh*kw*cg] x B[kh*kw*cg, m_g], where B is
 * the weights rearranged tap-major and packed once, and A is
 *   - X itself for an unpadded stride-1 1x1 conv (row stride c);
 *   - with 64 channels or more per group, X read in place through a table of a pointer per pixel
 *     and tap (an implicit GEMM, gemm_problem.a_ind), padding taps pointing at zeros;
 *   - otherwise an NHWC im2col (each tap copies cg contiguous channels).
 * The implicit GEMM spares the im2col's copy (oh*ow*kh*kw*cg floats per image, 7 MB at ResNet-50's
 * 64-channel 56x56 3x3) and, on one image over several threads, its fork-join. The variant keeps
 * its name, conv_nhwc_im2col_gemm, so forced names and tuning records stay valid.
 *
 * anvil's graph is NCHW, so the variant conv_nhwc_im2col_gemm transposes X in and Y out around
 * them. That pays only where the pixels-as-rows GEMM is much better shaped than the NCHW one:
 * few output pixels (a poor N for NCHW's Cout x pixels GEMM) and many channels (a cheap transpose
 * per FLOP). Measured on ResNet-50 (1 thread, min of 30, transposes included): 3x3 stride 2,
 * 256 ch 28x28 -> 2.54 ms vs 2.84 (implicit GEMM), 512 ch 14x14 -> 2.77 vs 3.19; but 128 ch
 * 56x56 -> 3.31 vs 2.88, and every 1x1 layer loses to the NCHW GEMM (the transposes cost as much
 * as the GEMM saves). The default cascade (conv_variants.c) takes it only for the first kind;
 * a layout pass that keeps whole chains in NHWC would make the transposes disappear.
 *
 * A fused epilogue (ir_fusion) costs nothing extra here: the activation is elementwise, so it is
 * applied in the GEMM epilogue before the transpose out, and the NCHW residual is read there as
 * the transposed matrix it is in pixel-major terms (rs_r = 1, cs_r = oh*ow). */
#include "conv.h"

#include "kernels/fusion.h"
#include "kernels/cpu/eltwise/eltwise.h"

#include <stdlib.h>
#include <string.h>

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

/* The GEMM kernel for s. The output channels are the GEMM's columns, and 24 of them (MobileNetV2's
 * 1x1 projections at 56x56) fit no AVX-512 tile: 16x16 spends a full tile on the last 8 and 14x32
 * on all 24, both through the edge path. 4x24 (AVX2, 8-float vectors) covers them exactly, and on a
 * CPU that splits 512-bit FMAs in two (Zen 4) its full tiles run at the AVX-512 ones' rate: 96 > 24
 * at 56x56 204 -> 144 us, 144 > 24 291 -> 209 us (1 thread, per node in the model). */
static const gemm_kernel *nhwc_tile(const kern_node *kn, const conv_shape *s, int64_t pix,
                                    int64_t kdim) {
    const core_hw *hw = core_hw_get();
    const gemm_kernel *forced = conv_gemm_kernel_forced(kn, hw);
    if (forced) return forced;
    const gemm_kernel *k24 = gemm_kernel_find("4x24_avx2");
    if (s->mg % 24 == 0 && s->mg <= 48 && k24 && gemm_kernel_usable(k24, hw)) return k24;
    return gemm_kernel_default(pix, s->mg, kdim, hw);
}

/* Channels per group from which A is read in place through a pointer table (an implicit GEMM)
 * rather than copied into an im2col: the GEMM's K blocks then stay inside one tap, cg deep, so
 * with few channels the C tile would be reloaded every few k steps. On ResNet-50 (medians of 3
 * alternated runs, ms, table vs copy) the 64-channel 56x56 3x3 measured the same within the
 * noise (1 thread 2.31-2.61 vs 2.41-2.62, 2 threads 1.27-1.28 vs 1.22-1.33), and 512ch 14->7
 * stride 2 gained 1-4% on 1 thread, where the copy had been 1-4% of the time (`perf`); fewer
 * channels were not measured. The knob conv_im2col (ANVIL_CONV_IM2COL=1) copies always (for
 * comparisons). */
#define INDIRECT_MIN_CG 64

/* The format the GEMM's tile multiplies in: fp32, or a tile over pairs of bf16 or fp16 values. */
typedef enum { NHWC_F32, NHWC_BF16, NHWC_FP16 } nhwc_format;

/* The GEMM kernel and blocking for s, and how A is formed (what conv_nhwc_workspace needs
 * before packing); kn (NULL: none) may carry the tuner's tile and KC. NHWC_BF16 / NHWC_FP16:
 * that format's default tile, which packs its A panels itself, so A is X or an im2col copy,
 * never the pointer table. */
static void nhwc_kernel(const conv_shape *s, const kern_node *kn, nhwc_format fmt,
                        conv_nhwc_weights *out) {
    const int64_t kdim = conv_kdim(s), pix = s->oh * s->ow;
    const core_hw *hw = core_hw_get();
    if (fmt != NHWC_F32) {
        out->k = fmt == NHWC_BF16 ? gemm_kernel_default_bf16(pix, s->mg, kdim, hw)
                                  : gemm_kernel_default_fp16(pix, s->mg, kdim, hw);
        if (out->k) out->blk = gemm_blocking_for(kn, out->k, pix, s->mg, kdim, hw, 0, 0, 0);
        out->indirect = false;
        return;
    }
    const gemm_kernel *tile = kn ? conv_config_tile(kn, hw) : NULL;
    out->k = tile ? tile : nhwc_tile(kn, s, pix, kdim);
    out->blk =
        gemm_blocking_for(kn, out->k, pix, s->mg, kdim, hw, kn ? conv_config_kc(kn) : 0, 0, 0);
    out->indirect =
        !conv_nhwc_direct(s) && s->cg >= INDIRECT_MIN_CG && !kern_knobs_of(kn)->conv_im2col;
}

static anvil_status weights_pack(const conv_shape *s, const kern_node *kn, nhwc_format fmt,
                                 const float *w, conv_nhwc_weights *out) {
    memset(out, 0, sizeof *out);
    const int64_t khw = s->kh * s->kw, kdim = conv_kdim(s);
    nhwc_kernel(s, kn, fmt, out);
    out->groups = s->group;
    out->pb = core_calloc((size_t)s->group, sizeof *out->pb);
    float *tmp = malloc(sizeof(float) * (size_t)(kdim * s->mg > 0 ? kdim * s->mg : 1));
    anvil_status st = ANVIL_ERR_OUT_OF_MEMORY;
    if (out->indirect && !(out->zeros = core_calloc((size_t)s->cg, sizeof(float)))) goto fail;
    if (!out->pb || !tmp) goto fail;
    for (int64_t g = 0; g < s->group; g++) {
        for (int64_t o = 0; o < s->mg; o++)
            for (int64_t ci = 0; ci < s->cg; ci++)
                for (int64_t t = 0; t < khw; t++)
                    tmp[(t * s->cg + ci) * s->mg + o] = w[((g * s->mg + o) * s->cg + ci) * khw + t];
        if ((st = gemm_pack_b(out->k, kdim, s->mg, tmp, s->mg, 1, &out->pb[g])) != ANVIL_OK)
            goto fail;
    }
    free(tmp);
    return ANVIL_OK;
fail:
    free(tmp);
    conv_nhwc_weights_free(out);
    return st;
}

anvil_status conv_nhwc_weights_pack(const kern_node *kn, const conv_shape *s, const float *w,
                                    conv_nhwc_weights *out) {
    return weights_pack(s, kn, NHWC_F32, w, out);
}

void conv_nhwc_weights_free(conv_nhwc_weights *pw) {
    if (!pw) return;
    if (pw->pb)
        for (int64_t g = 0; g < pw->groups; g++) gemm_packed_free(&pw->pb[g]);
    free(pw->pb);
    free(pw->zeros);
    memset(pw, 0, sizeof *pw);
}

/* ---- the variant: NCHW in and out, NHWC inside ------------------------------------------------
 */

/* The plan (conv_nhwc_plan) is plain data in conv_layout.h, with the run (conv_nhwc_plan_run in
 * conv_nhwc_run.c) that the runtime and the libraries `anvil compile` emits share. */
typedef conv_nhwc_plan nhwc_plan;

typedef struct nhwc_state {
    nhwc_plan p;
    nhwc_format fmt; /* the tile's format (convnhwc_bf16_gemm, convnhwc_fp16_gemm: reduced) */
    conv_nhwc_weights w;
    const ir_fusion *fusion; /* what run applies (NULL: none, or the runtime does) */
} nhwc_state;

/* Both variants' plan: Conv (NCHW, transposed in and out through the workspace) or
 * anvil.ConvNhwc (channels-last already, no transposes), told apart by the node's op. */
static bool nhwc_plan_of(const kern_node *kn, nhwc_format fmt, nhwc_plan *p) {
    memset(p, 0, sizeof *p);
    const bool last = kn->node->op == IR_OP_CONV_NHWC;
    if (!(last ? conv_shape_of_nhwc(kn, &p->s) : conv_shape_of(kn, &p->s)) || !kn->in[1].value)
        return false;
    p->last = last;
    const conv_shape *s = &p->s;
    /* bf16 or fp16 only where the GEMM is no sliver: not depthwise or narrow groups, not the
     * pooled maps of squeeze-excitation blocks, some depth to pair (conv_variants.c's bf16 rule) */
    if (fmt != NHWC_F32 && !((s->group == 1 || (s->cg >= 32 && s->mg >= 32)) && s->oh * s->ow > 4 &&
                             s->cg * s->kh * s->kw >= 16))
        return false;
    conv_nhwc_weights sizing;
    memset(&sizing, 0, sizeof sizing);
    nhwc_kernel(s, kn, fmt, &sizing);
    if (!sizing.k) return false;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    if (!last) {
        p->xt_bytes = align64((size_t)(s->n * s->c * s->h * s->w) * sizeof(float));
        p->yt_bytes = align64((size_t)(s->n * s->m * s->oh * s->ow) * sizeof(float));
    }
    p->run_bytes = conv_nhwc_workspace(s, &sizing, p->threads);
    return true;
}

static size_t ws_as(const kern_node *kn, nhwc_format fmt) {
    nhwc_plan p;
    return nhwc_plan_of(kn, fmt, &p) ? p.xt_bytes + p.yt_bytes + p.run_bytes : 0;
}

static bool nhwc_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    nhwc_plan p;
    return nhwc_plan_of(kn, NHWC_F32, &p);
}

static size_t nhwc_ws(const kern_node *kn) {
    return ws_as(kn, NHWC_F32);
}

static bool nhwc_supports_bf16(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    nhwc_plan p;
    return nhwc_plan_of(kn, NHWC_BF16, &p);
}

static size_t nhwc_ws_bf16(const kern_node *kn) {
    return ws_as(kn, NHWC_BF16);
}

static bool nhwc_supports_fp16(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    nhwc_plan p;
    return nhwc_plan_of(kn, NHWC_FP16, &p);
}

static size_t nhwc_ws_fp16(const kern_node *kn) {
    return ws_as(kn, NHWC_FP16);
}

static void nhwc_release(void *state) {
    nhwc_state *st = state;
    if (!st) return;
    conv_nhwc_weights_free(&st->w);
    free(st);
}

static anvil_status prepare_as(const kern_node *kn, nhwc_format fmt, void **state) {
    nhwc_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    st->fmt = fmt;
    if (!nhwc_plan_of(kn, fmt, &st->p)) {
        free(st);
        return conv_prepare_unsupported(kn, "NHWC GEMM conv variant");
    }
    anvil_status e = weights_pack(&st->p.s, kn, fmt, kn->in[1].value, &st->w);
    if (e != ANVIL_OK) {
        free(st);
        return e;
    }
    kern_node_mark_copied(kn, 1);
    /* where the runtime applies the fusion after run, run must not apply it too */
    st->fusion = conv_fuses(kn) ? kn->node->fusion : NULL;
    *state = st;
    return ANVIL_OK;
}

static anvil_status nhwc_prepare(const kern_node *kn, void **state) {
    return prepare_as(kn, NHWC_F32, state);
}

static anvil_status nhwc_prepare_bf16(const kern_node *kn, void **state) {
    return prepare_as(kn, NHWC_BF16, state);
}

static anvil_status nhwc_prepare_fp16(const kern_node *kn, void **state) {
    return prepare_as(kn, NHWC_FP16, state);
}

/* kern_variant.bf16_io of convnhwc_bf16_gemm: anvil.ConvNhwc on a bf16 tile, which rounds A to
 * bf16 as it packs it and can round C as it stores it (gemm_takes_bf16). X may be stored in
 * bf16 where A is X itself (a 1x1 stride-1 unpadded conv; an im2col or pointer table reads
 * floats), Y where K is one block (the sums are complete in the tile, conv_nhwc_run16) and the
 * fused epilogue is the variant's own. EfficientNet's and MobileNet's expansions are these: their
 * outputs, six times the block's width, are half the bytes for the depthwise conv to read. */
static void nhwc_bf16_io(const kern_node *kn, const void *state, uint32_t *in, uint32_t *out) {
    const nhwc_state *st = state;
    *in = *out = 0;
    if (!st || !st->p.last || st->fmt != NHWC_BF16 || !gemm_takes_bf16(st->w.k)) return;
    const conv_shape *s = &st->p.s;
    if (conv_nhwc_direct(s)) *in = 1u;
    if (st->w.blk.kc >= conv_kdim(s) && (!kn->node->fusion || st->fusion)) *out = 1u;
}

static bool is_bf16(const op_tensor *t) {
    return t->dtype == ANVIL_DTYPE_BFLOAT16;
}

/* Conv: X transposed to NHWC through the workspace, the GEMMs, Y transposed back to NCHW;
 * anvil.ConvNhwc (p.last): the GEMMs alone, on X and Y where they lie, either of which the plan
 * may store in bf16 (nhwc_bf16_io). */
static anvil_status nhwc_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    (void)n_out;
    const nhwc_state *st = state;
    const gemm_epilogue act = kern_fusion_epilogue(st->fusion);
    if (is_bf16(in[0]) || is_bf16(out[0])) {
        /* only the placement binds bf16 tensors, and only where nhwc_bf16_io said so */
        const kern_node kn = {.node = n};
        uint32_t bin, bout;
        nhwc_bf16_io(&kn, st, &bin, &bout);
        if ((is_bf16(in[0]) && !(bin & 1u)) || (is_bf16(out[0]) && !(bout & 1u)))
            return core_err(ANVIL_ERR_INTERNAL, "node '%s': a bf16 tensor where %s takes fp32",
                            n->name ? n->name : "?", st->w.k->name);
        conv_nhwc_run16(&st->p.s, &st->w, is_bf16(in[0]) ? NULL : in[0]->data,
                        is_bf16(in[0]) ? in[0]->data : NULL, conv_bias(&st->p.s, in, n_in),
                        st->fusion ? &act : NULL, conv_fused_residual(st->fusion, in, n_in), true,
                        is_bf16(out[0]) ? NULL : out[0]->data,
                        is_bf16(out[0]) ? out[0]->data : NULL, ws, ctx);
        return ANVIL_OK;
    }
    conv_nhwc_plan_run(&st->p, &st->w, st->fusion ? &act : NULL, elt_transpose_f32, in[0]->data,
                       conv_bias(&st->p.s, in, n_in), conv_fused_residual(st->fusion, in, n_in),
                       out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan and the packed weights (every group's B, and the zeros of the padding taps) as
 * initializers and blobs, and a conv_nhwc_plan_run call: the very code nhwc_run runs, but for the
 * transposes (a plain loop instead of the eltwise family's, which the emitted library does not
 * ship: the same floats moved). */

static anvil_status nhwc_emit(const kern_node *kn, const void *state, kern_emit *e) {
    const nhwc_state *st = state;
    const nhwc_plan *p = &st->p;
    const conv_shape *s = &p->s;
    const conv_nhwc_weights *w = &st->w;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(e->need(e, "kernels/cpu/conv/conv_nhwc_run.c"));
    if (s->group > 1024) /* pb[] is on the run function's stack */
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: a conv of %lld groups", ir_node_label(kn->node),
                        (long long)s->group);
    e->code(e, "conv_nhwc_plan np;\nmemset(&np, 0, sizeof np);\n");
    conv_emit_shape(e, "np.s", s);
    e->code(e, "np.last = %s;\nnp.threads = %d;\n", p->last ? "true" : "false", p->threads);
    e->code(e, "np.xt_bytes = %zu;\nnp.yt_bytes = %zu;\nnp.run_bytes = %zu;\n", p->xt_bytes,
            p->yt_bytes, p->run_bytes);
    conv_emit_tile(e, w->k);
    CORE_TRY(conv_emit_packed(e, "pb", w->pb, w->groups, false));
    char zeros[96] = "NULL";
    if (w->zeros) {
        CORE_TRY(e->blob(e, w->zeros, (size_t)s->cg * sizeof(float), zeros, sizeof zeros));
    }
    e->code(e,
            "const conv_nhwc_weights nw = {&gemm_kernel_%s, {%lld, %lld, %lld}, %lld, pb, %s, "
            "(float *)(%s)};\n",
            w->k->name, (long long)w->blk.mc, (long long)w->blk.kc, (long long)w->blk.nc,
            (long long)w->groups, w->indirect ? "true" : "false", zeros);
    const gemm_epilogue act = kern_fusion_epilogue(st->fusion);
    if (st->fusion) kern_emit_epilogue(e, "ep", &act, NULL, NULL, NULL);
    char x[96], b[96], r[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, st->fusion ? st->fusion->residual : -1, r, sizeof r);
    e->code(e,
            "conv_nhwc_plan_run(&np, &nw, %s, conv_transpose_rows_plain, (const float *)(%s), "
            "(const float *)(%s), (const float *)(%s), (float *)(%s), %s, %s);\n",
            st->fusion ? "&ep" : "NULL", x, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter nhwc_emitter = {nhwc_emit, NULL};

/* The GEMMs the variant runs for kn under configuration c (its space's view). */
static bool nhwc_view(const kern_node *kn, const kern_config *c, conv_gemm_view *v) {
    kern_node k2 = *kn;
    k2.config = c;
    nhwc_plan p;
    if (!nhwc_plan_of(&k2, false, &p)) return false;
    conv_nhwc_weights w;
    memset(&w, 0, sizeof w);
    nhwc_kernel(&p.s, &k2, false, &w);
    v->k = w.k;
    v->blk = w.blk;
    v->kdim = conv_kdim(&p.s);
    v->a_seg = w.indirect ? p.s.cg : 0;
    return true;
}

CONV_SPACE(nhwc_space, nhwc_view);

const kern_variant conv_v_nhwc = {"conv_nhwc_im2col_gemm",
                                  IR_OP_CONV,
                                  0,
                                  nhwc_supports,
                                  nhwc_ws,
                                  nhwc_prepare,
                                  nhwc_release,
                                  nhwc_run,
                                  conv_fuses,
                                  &nhwc_space,
                                  &nhwc_emitter,
                                  NULL};

/* The same (NCHW in and out, NHWC inside) on a bf16 tile, for sessions that accept bf16: a
 * tuner's candidate, in no cascade rule. Against conv_bf16_1x1 (1 thread, Zen 4, per node) it won
 * on 7x7 maps, whose 49 columns that GEMM pads to 64 (440 channels 0.12 -> 0.10 ms), tied at
 * 14x14 and lost from 28x28 and on 8x8; at 2 threads it lost at 7x7 too (0.080 -> 0.089). */
const kern_variant conv_v_nhwc_bf16 = {"conv_nhwc_bf16_gemm",
                                       IR_OP_CONV,
                                       KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                           KERN_ROUNDS_BF16,
                                       nhwc_supports_bf16,
                                       nhwc_ws_bf16,
                                       nhwc_prepare_bf16,
                                       nhwc_release,
                                       nhwc_run,
                                       conv_fuses,
                                       NULL,
                                       &nhwc_emitter,
                                       NULL};

/* anvil.ConvNhwc through the same GEMMs, no transposes. */
const kern_variant conv_nhwc_v_gemm = {
    "convnhwc_gemm", IR_OP_CONV_NHWC, 0,          nhwc_supports, nhwc_ws,       nhwc_prepare,
    nhwc_release,    nhwc_run,        conv_fuses, NULL,          &nhwc_emitter, NULL};

/* anvil.ConvNhwc's GEMMs on a bf16 tile: the weights rounded to bf16 once when packed, X (or its
 * im2col copy) as each A block is packed, fp32 sums and epilogue. Offered only to sessions that
 * accept bf16 (KERN_ROUNDS_BF16), after the regions (convs mostly reading padding, whose skipped
 * taps beat any multiply rate) and ahead of the fp32 GEMM: EfficientNet-B0's pointwise convs, 70%
 * of its time in fp32, are these. */
const kern_variant conv_nhwc_v_bf16_gemm = {"convnhwc_bf16_gemm",
                                            IR_OP_CONV_NHWC,
                                            KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 |
                                                KERN_ROUNDS_BF16,
                                            nhwc_supports_bf16,
                                            nhwc_ws_bf16,
                                            nhwc_prepare_bf16,
                                            nhwc_release,
                                            nhwc_run,
                                            conv_fuses,
                                            NULL,
                                            &nhwc_emitter,
                                            nhwc_bf16_io};

/* The same on an fp16 tile, for sessions that accept fp16 (KERN_ROUNDS_FP16), beside the bf16
 * one in the ConvNhwc cascade (conv_nhwc_fp16_gemm: a tuner's candidate). EfficientNet-B0 in fp16
 * (a Xeon whose bf16 dot product is slow): before these, none of its flops ran in fp16. */
const kern_variant conv_v_nhwc_fp16 = {"conv_nhwc_fp16_gemm",
                                       IR_OP_CONV,
                                       KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_FP16 |
                                           KERN_ROUNDS_FP16,
                                       nhwc_supports_fp16,
                                       nhwc_ws_fp16,
                                       nhwc_prepare_fp16,
                                       nhwc_release,
                                       nhwc_run,
                                       conv_fuses,
                                       NULL,
                                       &nhwc_emitter,
                                       NULL};
const kern_variant conv_nhwc_v_fp16_gemm = {"convnhwc_fp16_gemm",
                                            IR_OP_CONV_NHWC,
                                            KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_FP16 |
                                                KERN_ROUNDS_FP16,
                                            nhwc_supports_fp16,
                                            nhwc_ws_fp16,
                                            nhwc_prepare_fp16,
                                            nhwc_release,
                                            nhwc_run,
                                            conv_fuses,
                                            NULL,
                                            &nhwc_emitter,
                                            NULL};
