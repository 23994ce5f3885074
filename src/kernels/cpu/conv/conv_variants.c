/* The conv family: Conv (2-D, fp32, NCHW) on anvil's GEMM, and the family's variant list.
 *
 * Three GEMM formulations, per image and group, all with the weights W [mg, cg*kh*kw] as the A
 * operand (packed once in prepare when W is a constant), the bias fused as the epilogue's row
 * bias, and the node's fused residual and activation (ir_fusion) in the same epilogue while each
 * tile is in L1 (the residual is NCHW like the output: one item's GEMM reads it as rows of
 * oh*ow, rs_r = oh*ow, cs_r = 1, from the item's own offset):
 *   conv_1x1_gemm       1x1, stride 1, no padding: X itself is B [cg, h*w], nothing to copy.
 *   conv_im2col_gemm    the whole im2col [cg*kh*kw, oh*ow] built in the workspace, then one GEMM.
 *   conv_implicit_gemm  no im2col buffer: for each block of output pixels the im2col is written
 *                       straight into gemm.h's packed-B panel layout (conv_pack_b_panels) and the
 *                       GEMM runs on it as a pre-packed operand, so the only copy of the input is
 *                       the one the GEMM would have made anyway when packing B.
 * Work split: when there are at least as many (image, group) items as threads, each thread runs
 * whole items serially with its own buffers (no synchronisation); otherwise the threads share
 * each item (im2col rows, then the GEMM's own split; for the implicit GEMM, pixel blocks).
 *
 * The family's other variants live in their own files: conv_depthwise_direct_avx512/_avx2
 * (conv_depthwise.c), conv_winograd_f2x2_3x3/f4x4_3x3/f2x2_3x3_s2 (conv_winograd.c),
 * conv_nhwc_im2col_gemm (conv_nhwc.c) and conv_smallc_direct_avx512/_avx2 (conv_smallc.c).
 *
 * "conv_f32" comes first: it picks one of the others per node from the rule table `cascade`
 * below (data, not code paths; each rule cites the measurement behind it), so the default is
 * deterministic while every variant stays forcible by name. */
#include "conv.h"

#include "kernels/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const kern_variant conv_v_regions, conv_nhwc_v_regions, conv_v_batched;
extern const kern_variant conv_v_regions_bf16, conv_nhwc_v_regions_bf16, conv_v_batched_bf16,
    conv_v_nhwc_bf16, conv_v_nhwc_fp16;
extern const kern_variant conv_v_nhwc, conv_v_depthwise_avx512, conv_v_depthwise_avx2,
    conv_v_winograd_f2, conv_v_winograd_f4, conv_v_winograd_s2, conv_v_smallc_avx512,
    conv_v_smallc_avx2;

/* The plan (conv_gemm_plan) is plain data in conv_layout.h, with the run (conv_gemm_run) that
 * the runtime and the libraries `anvil compile` emits share. */
typedef conv_gemm_plan conv_plan;

typedef struct conv_gemm_state {
    conv_plan p;
    gemm_packed *pa; /* one per group when W is constant, else NULL */
    /* The fusion run applies (NULL where the node has none or the runtime applies it). */
    const ir_fusion *fusion;
} conv_gemm_state;

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

static bool is_1x1(const conv_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
           s->oh == s->h && s->ow == s->w;
}

/* The format a GEMM conv's tile multiplies in: fp32, or a tile over pairs (gemm.h's kpair 2) of
 * bf16 or fp16 values. */
typedef enum { TILE_F32, TILE_BF16, TILE_FP16 } tile_format;

/* fmt TILE_BF16 / TILE_FP16: the plan on that format's default tile. Such a tile packs both of
 * its operands itself, so it runs the 1x1 and im2col kinds (the weights pre-packed as A, the image
 * or its im2col copy packed as B while the GEMM runs) but not the implicit one, whose panels
 * conv_pack_b_panels writes in fp32. */
static bool plan_of_as(const kern_node *kn, conv_gemm_kind kind, tile_format fmt, conv_plan *p) {
    memset(p, 0, sizeof *p);
    if (!conv_shape_of(kn, &p->s)) return false;
    const conv_shape *s = &p->s;
    if (kind == CONV_GEMM_1X1 && !is_1x1(s)) return false;
    if (fmt != TILE_F32 && kind == CONV_GEMM_IMPLICIT) return false;
    const core_hw *hw = core_hw_get();
    const int64_t kdim = conv_kdim(s), hw_out = s->oh * s->ow;
    p->kind = kind;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    if (fmt != TILE_F32) {
        p->k = fmt == TILE_BF16 ? gemm_kernel_default_bf16(s->mg, hw_out, kdim, hw)
                                : gemm_kernel_default_fp16(s->mg, hw_out, kdim, hw);
        if (!p->k) return false;
    } else {
        const gemm_kernel *tile = conv_config_tile(kn, hw); /* the tuner's, where it sets one */
        p->k = tile ? tile : conv_gemm_kernel(kn, s->mg, hw_out, kdim, hw);
    }
    p->batch_parallel = p->threads > 1 && s->n * s->group >= p->threads;
    int64_t ncols = hw_out;
    if (kind == CONV_GEMM_IMPLICIT) {
        /* A block of packed panels (kdim x nblk) about half of L2, at least a few panels wide so
         * each A micro-panel serves several tiles; split finer when threads would idle. */
        const int64_t nr = p->k->nr;
        size_t l2 = hw->l2_bytes ? hw->l2_bytes : (size_t)1 << 20;
        int64_t nb = (int64_t)(l2 / 2 / sizeof(float)) / (kdim > 0 ? kdim : 1);
        if (nb < 6 * nr) nb = 6 * nr;
        if (nb > 1024) nb = 1024;
        if (!p->batch_parallel && p->threads > 1) {
            int64_t share = (hw_out + p->threads - 1) / p->threads;
            if (share < nb) nb = share;
        }
        nb = (nb + nr - 1) / nr * nr;
        if (nb < nr) nb = nr;
        p->nblk = nb;
        ncols = nb < hw_out ? nb : hw_out;
        p->col_ws = align64((size_t)p->nblk * (size_t)kdim * sizeof(float));
    } else if (kind == CONV_GEMM_IM2COL) {
        p->col_ws = align64((size_t)kdim * (size_t)hw_out * sizeof(float));
    }
    p->blk = gemm_blocking_for(kn, p->k, s->mg, ncols, kdim, hw, conv_config_kc(kn), 0, 0);
    p->gemm_ws = align64(gemm_thread_workspace(p->k, &p->blk));
    /* A pair tile packs (and rounds) A itself, so weights that are an input (a training graph's)
     * were packed once per image: 16 times per step at batch 16, a sixth of ResNet-18's bf16
     * step. They are packed once per run instead. */
    if (fmt != TILE_F32 && !kn->in[1].value && s->n * s->group > 1 &&
        s->group <= CONV_PREPACK_GROUPS)
        p->pa_ws = align64(gemm_packed_a_bytes(p->k, s->mg, kdim)) * (size_t)s->group;
    return true;
}

static bool plan_of(const kern_node *kn, conv_gemm_kind kind, conv_plan *p) {
    return plan_of_as(kn, kind, TILE_F32, p);
}

/* Workspace: threads GEMM slices (contiguous, as gemm_run expects), then threads column slices
 * (only slice 0 is used when the threads share an item, but the size must not depend on it), then
 * the weights packed once per run (pa_ws). */
static size_t plan_workspace(const conv_plan *p) {
    return (size_t)p->threads * (p->gemm_ws + p->col_ws) + p->pa_ws;
}

/* ---- prepare / release ------------------------------------------------------------------------
 */

static void gemm_state_release(void *state) {
    conv_gemm_state *st = state;
    if (!st) return;
    if (st->pa)
        for (int64_t g = 0; g < st->p.s.group; g++) gemm_packed_free(&st->pa[g]);
    free(st->pa);
    free(st);
}

static anvil_status gemm_state_prepare(const kern_node *kn, conv_gemm_kind kind, tile_format fmt,
                                       void **state) {
    conv_gemm_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!plan_of_as(kn, kind, fmt, &st->p)) {
        free(st);
        return conv_prepare_unsupported(kn, "conv variant");
    }
    const conv_shape *s = &st->p.s;
    const float *w = kn->in[1].value;
    if (w) {
        st->pa = core_calloc((size_t)s->group, sizeof *st->pa);
        if (!st->pa) {
            free(st);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        const int64_t kdim = conv_kdim(s);
        for (int64_t g = 0; g < s->group; g++) {
            anvil_status e =
                gemm_pack_a(st->p.k, s->mg, kdim, w + g * s->mg * kdim, kdim, 1, &st->pa[g]);
            if (e != ANVIL_OK) {
                gemm_state_release(st);
                return e;
            }
        }
        kern_node_mark_copied(kn, 1);
    }
    /* where the runtime applies the fusion after run, run must not apply it too */
    st->fusion = conv_fuses(kn) ? kn->node->fusion : NULL;
    *state = st;
    return ANVIL_OK;
}

/* ---- run ------------------------------------------------------------------------------------ */

static anvil_status gemm_variant_run(const ir_node *n, void *state, const op_tensor *const *in,
                                     int n_in, op_tensor *const *out, int n_out, void *ws,
                                     op_ctx *ctx) {
    (void)n;
    (void)n_out;
    const conv_gemm_state *st = state;
    const gemm_epilogue ep = kern_fusion_epilogue(st->fusion);
    conv_gemm_run(&st->p, st->pa, &ep, in[0]->data, in[1]->data, conv_bias(&st->p.s, in, n_in),
                  conv_fused_residual(st->fusion, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, the packed weights (every group's, each 64-byte aligned) as one
 * blob, and a conv_gemm_run call: the very code gemm_variant_run runs. */

static const char *const kind_names[] = {"CONV_GEMM_1X1", "CONV_GEMM_IM2COL", "CONV_GEMM_IMPLICIT"};

static anvil_status gemm_emit_write(const kern_node *kn, const void *state, kern_emit *e) {
    const conv_gemm_state *st = state;
    const conv_plan *p = &st->p;
    const conv_shape *s = &p->s;
    CORE_TRY(conv_emit_files_need(e));
    if (s->group > 1024) /* pa[] is on the run function's stack */
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: a conv of %lld groups", ir_node_label(kn->node),
                        (long long)s->group);
    e->code(e, "conv_gemm_plan cp;\nmemset(&cp, 0, sizeof cp);\n");
    conv_emit_shape(e, "cp.s", s);
    conv_emit_tile(e, p->k);
    e->code(e, "cp.kind = %s;\ncp.k = &gemm_kernel_%s;\n", kind_names[p->kind], p->k->name);
    e->code(e, "cp.blk = (gemm_blocking){%lld, %lld, %lld};\n", (long long)p->blk.mc,
            (long long)p->blk.kc, (long long)p->blk.nc);
    e->code(e, "cp.threads = %d;\ncp.batch_parallel = %s;\ncp.nblk = %lld;\n", p->threads,
            p->batch_parallel ? "true" : "false", (long long)p->nblk);
    e->code(e, "cp.gemm_ws = %zu;\ncp.col_ws = %zu;\n", p->gemm_ws, p->col_ws);
    const char *pa = "NULL";
    if (st->pa) {
        /* 32-bit slots per row: a bf16 tile's panels hold pairs along k */
        const int64_t depth = gemm_slots(p->k, conv_kdim(s)), mr = p->k->mr;
        const size_t floats = (size_t)((s->mg + mr - 1) / mr * mr * depth),
                     stride = (floats + 15) / 16 * 16;
        float *all = core_calloc(stride * (size_t)s->group, sizeof(float));
        if (!all) return ANVIL_ERR_OUT_OF_MEMORY;
        for (int64_t g = 0; g < s->group; g++)
            memcpy(all + (size_t)g * stride, st->pa[g].data, floats * sizeof(float));
        char blob[96];
        anvil_status rc =
            e->blob(e, all, stride * (size_t)s->group * sizeof(float), blob, sizeof blob);
        free(all);
        CORE_TRY(rc);
        e->code(e, "gemm_packed pa[%lld];\n", (long long)s->group);
        e->code(e,
                "for (int64_t g = 0; g < %lld; g++)\n"
                "    pa[g] = (gemm_packed){cp.k, %lld, %lld, (float *)(%s) + g * %zu};\n",
                (long long)s->group, (long long)st->pa[0].rows, (long long)st->pa[0].cols, blob,
                stride);
        pa = "pa";
    }
    /* the activation alone: conv_gemm_run adds the bias and the residual per item */
    const gemm_epilogue act = kern_fusion_epilogue(st->fusion);
    kern_emit_epilogue(e, "ep", &act, NULL, NULL, NULL);
    char x[96], w[96], b[96], r[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, st->pa ? -1 : 1, w, sizeof w);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, st->fusion ? st->fusion->residual : -1, r, sizeof r);
    e->code(e,
            "conv_gemm_run(&cp, %s, &ep, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (const float *)(%s), (float *)(%s), %s, %s);\n",
            pa, x, w, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static const kern_emitter gemm_emitter = {gemm_emit_write, NULL};

/* The GEMMs a variant of this file runs for kn under configuration c (its space's view). */
static bool view_of(const kern_node *kn, const kern_config *c, conv_gemm_kind kind,
                    conv_gemm_view *v) {
    kern_node k2 = *kn;
    k2.config = c;
    conv_plan p;
    if (!plan_of(&k2, kind, &p)) return false;
    v->k = p.k;
    v->blk = p.blk;
    v->kdim = conv_kdim(&p.s);
    v->a_seg = 0;
    return true;
}

#define CONV_GEMM_VARIANT(ID, NAME, KIND)                                                          \
    static bool sup_##ID(const kern_node *kn, const core_hw *hw) {                                 \
        (void)hw;                                                                                  \
        conv_plan p;                                                                               \
        return plan_of(kn, KIND, &p);                                                              \
    }                                                                                              \
    static size_t ws_##ID(const kern_node *kn) {                                                   \
        conv_plan p;                                                                               \
        return plan_of(kn, KIND, &p) ? plan_workspace(&p) : 0;                                     \
    }                                                                                              \
    static anvil_status prep_##ID(const kern_node *kn, void **state) {                             \
        return gemm_state_prepare(kn, KIND, TILE_F32, state);                                      \
    }                                                                                              \
    static bool view_##ID(const kern_node *kn, const kern_config *c, conv_gemm_view *v) {          \
        return view_of(kn, c, KIND, v);                                                            \
    }                                                                                              \
    CONV_SPACE(space_##ID, view_##ID);                                                             \
    const kern_variant conv_v_##ID = {NAME,                                                        \
                                      IR_OP_CONV,                                                  \
                                      0,                                                           \
                                      sup_##ID,                                                    \
                                      ws_##ID,                                                     \
                                      prep_##ID,                                                   \
                                      gemm_state_release,                                          \
                                      gemm_variant_run,                                            \
                                      conv_fuses,                                                  \
                                      &space_##ID,                                                 \
                                      &gemm_emitter,                                               \
                                      NULL};

CONV_GEMM_VARIANT(1x1, "conv_1x1_gemm", CONV_GEMM_1X1)
CONV_GEMM_VARIANT(im2col, "conv_im2col_gemm", CONV_GEMM_IM2COL)
CONV_GEMM_VARIANT(implicit, "conv_implicit_gemm", CONV_GEMM_IMPLICIT)

/* The same GEMMs on a bf16 tile: fp32 tensors, weights rounded to bf16 once when packed, the image
 * (or its im2col copy) as each B block is packed, fp32 sums and epilogue. Offered only to sessions
 * that accept bf16 (KERN_ROUNDS_BF16); their tile is the bf16 default (no tuner space yet). They
 * are emitted as the fp32 ones are (the same conv_gemm_run on their own tile). The fp16 ones the
 * same on an fp16 tile, for sessions that accept fp16. */
#define CONV_PAIRS_VARIANT(ID, NAME, KIND, FMT, NEEDS, EMIT)                                       \
    static bool sup_##ID(const kern_node *kn, const core_hw *hw) {                                 \
        (void)hw;                                                                                  \
        conv_plan p;                                                                               \
        return plan_of_as(kn, KIND, FMT, &p);                                                      \
    }                                                                                              \
    static size_t ws_##ID(const kern_node *kn) {                                                   \
        conv_plan p;                                                                               \
        return plan_of_as(kn, KIND, FMT, &p) ? plan_workspace(&p) : 0;                             \
    }                                                                                              \
    static anvil_status prep_##ID(const kern_node *kn, void **state) {                             \
        return gemm_state_prepare(kn, KIND, FMT, state);                                           \
    }                                                                                              \
    const kern_variant conv_v_##ID = {NAME,                                                        \
                                      IR_OP_CONV,                                                  \
                                      NEEDS,                                                       \
                                      sup_##ID,                                                    \
                                      ws_##ID,                                                     \
                                      prep_##ID,                                                   \
                                      gemm_state_release,                                          \
                                      gemm_variant_run,                                            \
                                      conv_fuses,                                                  \
                                      NULL,                                                        \
                                      EMIT,                                                        \
                                      NULL};

#define CONV_BF16_NEEDS (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_BF16 | KERN_ROUNDS_BF16)
#define CONV_FP16_NEEDS (KERN_NEEDS_AVX512 | KERN_NEEDS_AVX512_FP16 | KERN_ROUNDS_FP16)
CONV_PAIRS_VARIANT(bf16_1x1, "conv_bf16_1x1", CONV_GEMM_1X1, TILE_BF16, CONV_BF16_NEEDS,
                   &gemm_emitter)
CONV_PAIRS_VARIANT(bf16_im2col, "conv_bf16_im2col", CONV_GEMM_IM2COL, TILE_BF16, CONV_BF16_NEEDS,
                   &gemm_emitter)
CONV_PAIRS_VARIANT(fp16_1x1, "conv_fp16_1x1", CONV_GEMM_1X1, TILE_FP16, CONV_FP16_NEEDS,
                   &gemm_emitter)
CONV_PAIRS_VARIANT(fp16_im2col, "conv_fp16_im2col", CONV_GEMM_IM2COL, TILE_FP16, CONV_FP16_NEEDS,
                   &gemm_emitter)

/* ---- conv_f32: the default cascade ------------------------------------------------------------
 */

static bool rule_depthwise(const conv_shape *s) {
    return s->group == s->c && s->m == s->c;
}

/* Depthwise planes too wide for the channel-lanes kernel run the row kernel, and there the AVX2
 * instance beats the AVX-512 one on Zen 4, which splits each 512-bit op in two and where every
 * unaligned 64-byte tap load straddles two cache lines: MobileNetV2, 1 thread, medians of 3
 * runs, us, AVX-512 -> AVX2: 32ch 112x112 200 -> 192, 96ch 112->56 stride 2 258 -> 219, 144ch
 * 56x56 228 -> 206 (whole model 8.08 -> 7.79 ms). */
static bool rule_depthwise_rows(const conv_shape *s) {
    return rule_depthwise(s) && !conv_dw_channel_lanes(s);
}

/* The general depthwise kernels (conv_dwx.c) for the shapes the ones above decline: AVX2 on rows
 * of 56 and more, AVX-512 below (its channel lanes up to 28, then rows whose vectors AVX-512 fills
 * as well as AVX2). 1 thread, us, AVX-512 / AVX2: 7x7 40ch 56x56 240/229, 5x5 96ch 112x112
 * 1870/1510, dilation-2 3x3 64ch 65x65 154/160, dilation-4 3x3 256ch 33x33 176/228, 7x7 96ch
 * 28x28 105/171. */
static bool rule_dwx_wide(const conv_shape *s) {
    return rule_depthwise(s) && s->ow >= 56;
}

/* Depthwise with a channel multiplier (M = C * k, k > 1): only the general kernel takes it. */
static bool rule_depthwise_mult(const conv_shape *s) {
    return s->group == s->c && s->c > 1 && s->m > s->c;
}

static bool rule_1x1(const conv_shape *s) {
    return is_1x1(s);
}

/* A 1x1 conv on a map of a few pixels (a squeeze-excitation block's convs, on the pooled 1x1
 * map): as channels x pixels its GEMM has one or two columns, and the 16- and 32-column tiles
 * compute mostly padding; as pixels x channels (conv_nhwc.c, whose transposes are a few floats
 * here) the one-row tile streams the weights once. Per node, 1 thread: EfficientNet-B0's
 * widening 48 -> 1152 78 -> 24 us; DeepLabV3's narrowing 960 -> 240 96 -> 56 us (its four such
 * convs 0.34 -> 0.21 ms, 2 threads 0.20 -> 0.16). Narrowing to few channels stays below: those
 * rows are too few to split across threads (EfficientNet-B0's 1152 -> 48 and the like, 2
 * threads, 0.14 -> 0.18 ms all together). */
static bool rule_tiny_map(const conv_shape *s) {
    return is_1x1(s) && s->oh * s->ow <= 4 && (s->mg > s->cg || s->mg >= 64);
}

/* Winograd pays off once the channel GEMMs are big enough to hide the transforms. F(4x4) does
 * 2.25x fewer multiplies per output than F(2x2) (36/16 vs 16/4) but has 2.25x more transform
 * data per tile and 36 transformed filters reused only over one image's tiles. Measured with
 * `anvil_kbench conv --kernel 3 --threads 1` (median ms, F(2x2) / F(4x4) / dnnl_conv):
 * ResNet-50 64ch 56x56 1.63/1.46/2.31, 128ch 28x28 1.55/1.04/2.06, 256ch 14x14 1.27/1.48/2.03,
 * 512ch 7x7 1.93/2.14/2.08; VGG-16 64ch 224x224 25.0/23.6/38.2, 64>128ch 112x112 12.7/9.8/18.5,
 * 512ch 28x28 17.4/11.7/31.8, 512ch 14x14 4.70/4.69/8.24. */
static bool rule_winograd_f4(const conv_shape *s) {
    int64_t ch = s->cg < s->mg ? s->cg : s->mg, side = s->oh < s->ow ? s->oh : s->ow;
    return ch >= 64 && side >= 20;
}

/* At least 16 tiles. At 16 (ResNet-50's 512-channel 7x7 layers) each transformed filter is
 * reused over only 16 tiles, which the GEMMs then take as their rows (conv_winograd.c): 1.93 ms
 * against conv_nhwc_im2col_gemm's 2.31 (dnnl_conv 2.08); with fewer the 16/9 times larger
 * filters than a direct conv's are streamed for too little work. */
static bool rule_winograd_f2(const conv_shape *s) {
    return s->cg >= 32 && s->mg >= 32 && ((s->oh + 1) / 2) * ((s->ow + 1) / 2) >= 16;
}

/* Stride 2 with enough tiles to hide its transforms and the 16/9 times larger filters. Measured
 * (1 thread, median ms, Winograd / conv_im2col_gemm / conv_nhwc_im2col_gemm / dnnl_conv):
 * ResNet-50 128ch 56->28 2.30/2.46/2.77/2.38, 256ch 28->14 1.92/2.36/2.45/2.23; with 16 tiles,
 * 512ch 14->7, the tiles' padding (8x8 outputs for 7x7) eats the gain: 2.90/2.68/2.55/2.40. */
static bool rule_winograd_s2(const conv_shape *s) {
    return s->cg >= 64 && s->mg >= 64 && ((s->oh + 1) / 2) * ((s->ow + 1) / 2) >= 36;
}

/* Few output pixels and many channels: the pixels-as-rows GEMM of conv_nhwc.c, transposes
 * included (measurements there). */
static bool rule_nhwc(const conv_shape *s) {
    return s->kh * s->kw > 1 && s->oh * s->ow <= 256 && s->cg >= 128 && s->mg >= 128;
}

/* The same shapes in a session that accepts bf16 (fp16): the pixels-as-rows GEMM on bf16 tiles,
 * ahead of fp32 Winograd. DeepLabV3's 256-channel 14x14 3x3 (Zen 5, 1 thread, per node in the
 * model): 681 us against Winograd's 882 and the NCHW bf16 im2col's 894. */
static bool rule_nhwc_bf16(const conv_shape *s) {
    return rule_nhwc(s) && s->group == 1;
}

/* A strided or padded 1x1 conv: its im2col is a plain subsampling copy that the GEMM then packs
 * from contiguous rows, measured slightly ahead of packing the panels straight from the image
 * (ResNet-50's 1x1 stride-2 layers: 2.11/2.30/2.71 ms vs 2.25/2.38/2.73 ms). */
static bool rule_pointwise(const conv_shape *s) {
    return s->kh == 1 && s->kw == 1;
}

/* A stem: RGB in, a kernel of 3x3 or more, rows at least a vector wide. Measured (1 thread,
 * medians): ResNet-50's 7x7 stride-2 3 -> 64 at 224x224, AVX-512 2.27 ms against the implicit
 * GEMM's 2.67 (dnnl_conv 2.77), AVX2 2.61; 2 threads 1.24 vs 1.53. MobileNetV2's 3x3 stride-2
 * 3 -> 32 in the model, per node: 333 vs 380 us. */
static bool rule_smallc(const conv_shape *s) {
    return s->group == 1 && s->c <= 4 && s->kh * s->kw >= 9 && s->ow >= 16;
}

/* A session that accepts bf16 runs a dense conv's GEMM on bf16 tiles (conv_bf16_1x1,
 * conv_bf16_im2col), twice the multiply rate of fp32 (one that accepts fp16 on fp16 tiles, the
 * same way), where the GEMM is not a sliver: grouped
 * convs with narrow groups and the pooled maps of squeeze-excitation blocks keep their own rules.
 * The padded and the 3x3 ones only after the rules that skip work rather than speed it up: the
 * regions (a conv mostly reading padding) and Winograd (2.25x fewer multiplies). DeepLabV3's ASPP,
 * 1 thread: its rate-12 conv 2.25 ms in regions against 5.3 in bf16 im2col, its 256-channel 14x14
 * 3x3 1.61 ms in Winograd against 1.95. */
static bool rule_bf16_dense(const conv_shape *s) {
    return (s->group == 1 || (s->cg >= 32 && s->mg >= 32)) && s->oh * s->ow > 4 &&
           s->cg * s->kh * s->kw >= 16;
}

/* A dense conv where anvil's bf16 tiles lose to fp32 on this CPU (kern_bf16_beats_fp32 of their
 * ISA: the measured vdpbf16ps rate against the FMA's) goes to oneDNN's bf16 kernel, which
 * kern_cascade_may_pick then offers only where the CPU has AMX to run it on (KERN_BF16_BEST_ISA;
 * anvil's convs have no AMX tile yet). A Sapphire Rapids core, 1 thread, bf16 session: ResNet-50
 * 69 -> 42 ms (medians of 3 alternating runs; the fp32 convs it ran before); MobileNetV2 6.0-6.2
 * either way (its 1x1s run channels-last). */
static bool rule_bf16_vendor(const conv_shape *s) {
    return rule_bf16_dense(s) && !kern_bf16_beats_fp32(conv_v_bf16_im2col.needs);
}

/* Everything else: the implicit GEMM, measured ahead of im2col + GEMM on the ResNet-50 stem
 * (3.5 vs 4.4 ms) and level on its 3x3 stride-2 layers, without an im2col buffer of
 * kh*kw times the input. */
static bool rule_any(const conv_shape *s) {
    (void)s;
    return true;
}

/* A batch of small maps (conv_batched.c): one GEMM over every image's pixels instead of a
 * GEMM of a few columns per image. After the regions rule, which keeps the padding-heavy small
 * maps of inference (constant weights); in a training graph the weights are inputs, regions
 * does not apply, and this takes them: a ResNet-18 step at 64x64, batch 16, 1 thread, forward
 * convs 138 -> 63 ms (Zen 4, `anvil train --profile`). */
static bool rule_batched(const conv_shape *s) {
    return s->group == 1 && s->n >= 2 && s->oh * s->ow < 64;
}

/* Grouped, not depthwise, with narrow groups (RegNet's 8 channels per group, ResNeXt's 4 to 32):
 * per group a GEMM of a few rows, where anvil's kernels run at a fraction of their speed and
 * oneDNN's blocked kernel does not. RegNetY-400MF, 1 thread, per node, implicit GEMM / im2col /
 * dnnl_conv: 232 ch 14x14 661/404/228 us, 440 ch 7x7 410/384/108 us. */
static bool rule_grouped(const conv_shape *s) {
    return s->group > 1 && s->cg > 1 && s->cg <= 32 && s->mg <= 32;
}

#ifdef ANVIL_HAVE_DNNL
extern const kern_variant vendor_dnnl_conv_split, vendor_dnnl_conv_split_bf16;
#endif

typedef struct conv_rule {
    const kern_variant *v;
    bool (*when)(const conv_shape *s);
} conv_rule;

/* First rule whose condition holds and whose variant applies wins. */
static const conv_rule cascade[] = {
    {&conv_v_depthwise_avx2, rule_depthwise_rows},
    {&conv_v_depthwise_avx512, rule_depthwise},
    {&conv_v_depthwise_avx2, rule_depthwise},
    {&conv_v_dwx_avx2, rule_dwx_wide},
    {&conv_v_dwx_avx512, rule_depthwise},
    {&conv_v_dwx_avx2, rule_depthwise},
    {&conv_v_dwx_avx512, rule_depthwise_mult},
    {&conv_v_dwx_avx2, rule_depthwise_mult},
    {&conv_v_smallc_avx512, rule_smallc},
    {&conv_v_smallc_avx2, rule_smallc},
#ifdef ANVIL_HAVE_DNNL
    {&vendor_dnnl_conv_split_bf16, rule_bf16_vendor},
#endif
    {&conv_v_bf16_1x1, rule_bf16_dense},
    {&conv_v_fp16_1x1, rule_bf16_dense},
    {&conv_v_regions_bf16, rule_any},
    {&conv_v_regions, rule_any},
    {&conv_v_batched_bf16, rule_batched},
    {&conv_v_batched, rule_batched},
#ifdef ANVIL_HAVE_DNNL
    /* Split by groups across anvil's threads, one single-thread primitive each: a oneDNN call
     * on 2 OpenMP threads wakes a sleeping worker (anvil keeps them passive, see
     * dnnl_variants.c), which costs more than the second thread gains on convs this small.
     * RegNetY-400MF at 2 threads, medians of 6 alternating runs: 7.3 ms with these convs on one
     * thread, 6.0 split (OpenMP's 2 threads, earlier: 9.3-12.9 ms). A session that accepts
     * bf16 takes oneDNN's bf16 kernel (Zen 4, 1 thread, per node, fp32 / bf16 us: 48 ch 56x56
     * 278/197, 104 ch 28x28 159/116, 208 ch 14x14 91/69, 440 ch 7x7 62/52). */
    {&vendor_dnnl_conv_split_bf16, rule_grouped},
    {&vendor_dnnl_conv_split, rule_grouped},
#endif
    {&conv_v_nhwc, rule_tiny_map},
    {&conv_v_1x1, rule_1x1},
    {&conv_v_nhwc_bf16, rule_nhwc_bf16},
    {&conv_v_nhwc_fp16, rule_nhwc_bf16},
    {&conv_v_winograd_f4, rule_winograd_f4},
    {&conv_v_winograd_f2, rule_winograd_f2},
    {&conv_v_winograd_s2, rule_winograd_s2},
    {&conv_v_bf16_im2col, rule_bf16_dense},
    {&conv_v_fp16_im2col, rule_bf16_dense},
    {&conv_v_nhwc, rule_nhwc},
    {&conv_v_im2col, rule_pointwise},
    {&conv_v_implicit, rule_any},
};

static const conv_rule *pick_rule(const kern_node *kn) {
    conv_shape s;
    if (!conv_shape_of(kn, &s)) return NULL;
    const core_hw *hw = core_hw_get();
    for (size_t i = 0; i < sizeof cascade / sizeof cascade[0]; i++)
        if (cascade[i].when(&s) && kern_cascade_may_pick(cascade[i].v, kn) &&
            kern_applies(cascade[i].v, kn, hw))
            return &cascade[i];
    return NULL;
}

const kern_variant *conv_auto_pick(const kern_node *kn) {
    const conv_rule *r = pick_rule(kn);
    return r ? r->v : NULL;
}

typedef struct auto_state {
    const kern_variant *v;
    void *inner;
} auto_state;

static bool auto_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return conv_auto_pick(kn) != NULL;
}

static size_t auto_workspace(const kern_node *kn) {
    const kern_variant *v = conv_auto_pick(kn);
    return v && v->workspace_size ? v->workspace_size(kn) : 0;
}

static anvil_status auto_prepare(const kern_node *kn, void **state) {
    auto_state *a = core_calloc(1, sizeof *a);
    if (!a) return ANVIL_ERR_OUT_OF_MEMORY;
    a->v = conv_auto_pick(kn);
    anvil_status st = ANVIL_OK;
    if (!a->v)
        st = core_err(ANVIL_ERR_INTERNAL, "%s: conv_f32 found no conv variant for this node",
                      ir_node_label(kn->node));
    else if (a->v->prepare)
        st = a->v->prepare(kn, &a->inner);
    if (st != ANVIL_OK) {
        free(a);
        return st;
    }
    *state = a;
    return ANVIL_OK;
}

static void auto_release(void *state) {
    auto_state *a = state;
    if (!a) return;
    if (a->inner && a->v->release) a->v->release(a->inner);
    free(a);
}

static anvil_status auto_run(const ir_node *n, void *state, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {
    const auto_state *a = state;
    return a->v->run(n, a->inner, in, n_in, out, n_out, ws, ctx);
}

/* conv_f32 fuses exactly when the variant it delegates to does (that variant's run sees the same
 * node and prepared its own state from the same kn). */
static bool auto_fuses(const kern_node *kn) {
    const kern_variant *v = conv_auto_pick(kn);
    return v && v->fuses && v->fuses(kn);
}

/* conv_f32 emits what its delegate emits, from the delegate's own state. */
static anvil_status auto_emit(const kern_node *kn, const void *state, kern_emit *e) {
    const auto_state *a = state;
    if (!a->v->emit)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: conv_f32 runs it with %s, which cannot be emitted",
                        ir_node_label(kn->node), a->v->name);
    return a->v->emit->write(kn, a->inner, e);
}

/* conv_f32 can be emitted where the variant it would hand the node to can. */
static bool auto_can_emit(const kern_node *kn) {
    const kern_variant *v = conv_auto_pick(kn);
    return v && kern_emittable(v, kn);
}

static const kern_emitter auto_emitter = {auto_emit, auto_can_emit};

static const kern_variant conv_v_auto = {
    "conv_f32",   IR_OP_CONV, 0,          auto_supports, auto_workspace, auto_prepare,
    auto_release, auto_run,   auto_fuses, NULL,          &auto_emitter,  NULL};

const kern_variant *conv_delegate(const kern_variant *v, const void *state) {
    return v == &conv_v_auto && state ? ((const auto_state *)state)->v : NULL;
}

const kern_variant *const kern_family_conv[] = {
    &conv_v_auto,
    &conv_v_depthwise_avx512,
    &conv_v_depthwise_avx2,
    &conv_v_dwx_avx512,
    &conv_v_dwx_avx2,
    &conv_v_1x1,
    &conv_v_winograd_f4,
    &conv_v_winograd_f2,
    &conv_v_winograd_s2,
    &conv_v_nhwc,
    &conv_v_regions,
    &conv_v_regions_bf16,
    &conv_v_implicit,
    &conv_v_im2col,
    &conv_v_batched,
    &conv_v_batched_bf16,
    &conv_v_nhwc_bf16,
    &conv_v_nhwc_fp16,
    &conv_v_bf16_1x1,
    &conv_v_bf16_im2col,
    &conv_v_fp16_1x1,
    &conv_v_fp16_im2col,
    &conv_v_smallc_avx512,
    &conv_v_smallc_avx2,
    &conv_nhwc_v_depthwise_avx512,
    &conv_nhwc_v_depthwise_avx2,
    &conv_nhwc_v_dwx_avx512,
    &conv_nhwc_v_dwx_avx2,
    &conv_nhwc_v_smallc_avx512,
    &conv_nhwc_v_grouped_avx512bf16,
    &conv_nhwc_v_grouped_avx512,
    &conv_nhwc_v_regions_bf16,
    &conv_nhwc_v_regions,
    &conv_nhwc_v_bf16_gemm,
    &conv_nhwc_v_fp16_gemm,
    &conv_nhwc_v_gemm,
    NULL,
};
