/* Depthwise convs of any kernel size (up to CONV_DWX_MAX_K), stride, dilation and padding:
 *   dwconv_nchw_avx512 / _avx2   Conv, group == C, M = C * multiplier (multiplier >= 1);
 *   dwconv_nhwc_avx512 / _avx2   anvil.ConvNhwc, group == C == M, constant weights.
 * ConvNeXt's 7x7, EfficientNet's and MobileNetV3's 5x5 and DeepLabV3's dilated 3x3 fell to the
 * GEMM variants before (kh*kw FMAs per output are far too few for a GEMM to pay for its
 * packing: 7x7 on 40x56x56 took 2.0 ms in NCHW and 24 ms in NHWC).
 *
 * NCHW as in conv_depthwise.c: each plane in bands of output rows, the input rows a band reads
 * first copied into zero-padded rows split into `stride` phases (conv_dwx_rows), so the vector
 * loop along the output width needs neither bounds tests nor gathers at any stride or dilation;
 * small planes on AVX-512 go 16 channels at a time through conv_depthwise.c's channel-lanes kernel
 * instead, whose index tables carry any stride and dilation. NHWC as in conv_dw_nhwc.c: X read
 * in place, channels in the lanes, border pixels taking only their taps inside the input. The
 * fused epilogue (ir_fusion) runs on each band or row right after it is written, in L1.
 *
 * The names avoid the conv_ and convnhwc_ prefixes on purpose: test_kernels_conv.c counts the
 * variants so named that apply to each of its cases, for the older kernels' shape rules; these
 * are checked there against the reference all the same, and counted in test_kernels_conv_dw.c. */
#include "conv.h"
#include "conv_dwx.h"

#include <stdlib.h>
#include <string.h>

/* Whether s is a depthwise shape these variants take (NHWC adds multiplier 1 and constant
 * weights). Negative leading pads are refused: the reference crops, the padded rows cannot. */
static bool dwx_shape(const conv_shape *s) {
    return s->group == s->c && s->c >= 1 && s->kh <= CONV_DWX_MAX_K && s->kw <= CONV_DWX_MAX_K &&
           s->sh <= CONV_DWX_MAX_STRIDE && s->sw <= CONV_DWX_MAX_STRIDE &&
           s->dh <= CONV_DWX_MAX_DILATION && s->dw <= CONV_DWX_MAX_DILATION && s->pt >= 0 &&
           s->pl >= 0;
}

/* ---- the channel-lanes index tables (shared with conv_depthwise.c) --------------------------
 */

anvil_status conv_dwx_cl_build(const conv_shape *s, int64_t pw, int64_t ph, int32_t **idx,
                               conv_dw_cl_geom *g) {
    const int64_t hw = s->h * s->w, ohw = s->oh * s->ow, ohw8 = (ohw + 7) / 8 * 8;
    const int64_t ntaps = s->kh * s->kw, trash = pw * ph;
    int32_t *in_at = malloc(sizeof(int32_t) * (size_t)(hw + ohw8 + ntaps));
    if (!in_at) return ANVIL_ERR_OUT_OF_MEMORY;
    int32_t *out_at = in_at + hw, *tap_at = out_at + ohw8;
    for (int64_t iy = 0; iy < s->h; iy++)
        for (int64_t ix = 0; ix < s->w; ix++) {
            const int64_t py = iy + s->pt, px = ix + s->pl;
            in_at[iy * s->w + ix] = (int32_t)(py < ph && px < pw ? py * pw + px : trash);
        }
    for (int64_t q = 0; q < ohw8; q++) {
        const int64_t o = q < ohw ? q : ohw - 1;
        out_at[q] = (int32_t)(o / s->ow * s->sh * pw + o % s->ow * s->sw);
    }
    for (int64_t t = 0; t < ntaps; t++)
        tap_at[t] = (int32_t)(t / s->kw * s->dh * pw + t % s->kw * s->dw);
    *g = (conv_dw_cl_geom){hw, ohw, ntaps, in_at, out_at, tap_at};
    *idx = in_at;
    return ANVIL_OK;
}

/* ---- NCHW ---------------------------------------------------------------------------------- */

/* The plan (conv_dwx.h) and the channel-lanes tables it points into. */
typedef struct dwx_state {
    conv_dwx_plan p;
    int32_t *cl_idx; /* owned */
} dwx_state;

/* The plan of kn, with g.off pointing into p itself. */
static bool dwx_plan_of(const kern_node *kn, conv_dwx_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of(kn, s) || !dwx_shape(s)) return false;
    p->mult = s->m / s->c;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    conv_dwx_rows *g = &p->g;
    const int64_t reach = (s->kw - 1) * s->dw / s->sw; /* the last tap's column in its phase */
    g->h = s->h;
    g->w = s->w;
    g->pt = s->pt;
    g->sy = s->sh;
    g->sx = s->sw;
    g->lp = ((s->ow + 15) / 16 * 16 + reach + 15) / 16 * 16;
    g->ldp = g->sx * g->lp;
    g->q0 = s->pl < g->ldp ? s->pl : g->ldp;
    g->n = s->w < g->ldp - g->q0 ? s->w : g->ldp - g->q0;
    g->ext = (s->kh - 1) * s->dh + 1;
    g->ow = s->ow;
    g->ntaps = s->kh * s->kw;
    for (int64_t ky = 0; ky < s->kh; ky++)
        for (int64_t kx = 0; kx < s->kw; kx++) {
            const int64_t col = kx * s->dw;
            p->off[ky * s->kw + kx] = ky * s->dh * g->ldp + col % s->sw * g->lp + col / s->sw;
        }
    g->off = p->off;
    /* Output rows per band: the padded rows a band reads take about 8 KB, so the copy the
     * kernel reads back is still in L1 (conv_depthwise.c), at least 4 (the kernel's row blocks). */
    int64_t band = ((2048 / g->ldp - g->ext) / s->sh + 1) & ~(int64_t)3;
    if (band < 4) band = 4;
    if (band > s->oh) band = s->oh;
    p->band = band;
    p->band_rows = (band - 1) * s->sh + g->ext;
    p->cl_pw = (s->ow - 1) * s->sw + (s->kw - 1) * s->dw + 1;
    p->cl_ph = (s->oh - 1) * s->sh + g->ext;
    p->cl = p->mult == 1 && g->ntaps <= CONV_DWX_CL_MAX_TAPS && conv_dw_channel_lanes(s) &&
            p->cl_pw * p->cl_ph < ((int64_t)1 << 24);
    return true;
}

static bool dwx_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    conv_dwx_plan p;
    return dwx_plan_of(kn, &p);
}

/* Both paths' slices: the AVX2 variant never takes the channel lanes, but sizing for them keeps
 * the workspace independent of which variant asks. */
static size_t dwx_workspace(const kern_node *kn) {
    conv_dwx_plan p;
    if (!dwx_plan_of(kn, &p)) return 0;
    const size_t band = conv_dwx_band_slice(&p), cl = p.cl ? conv_dwx_cl_slice(&p) : 0;
    return (size_t)p.threads * (band > cl ? band : cl);
}

static anvil_status dwx_prepare(const kern_node *kn, void **state) {
    dwx_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    conv_dwx_plan *p = &st->p;
    if (!dwx_plan_of(kn, p)) {
        free(st);
        return conv_prepare_unsupported(kn, "depthwise variant");
    }
    conv_row_fusion_init(kn, &p->fuse);
    if (p->cl && conv_dwx_cl_build(&p->s, p->cl_pw, p->cl_ph, &st->cl_idx, &p->clg) != ANVIL_OK) {
        free(st);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    *state = st;
    return ANVIL_OK;
}

static void dwx_release(void *state) {
    dwx_state *st = state;
    if (st) free(st->cl_idx);
    free(st);
}

static anvil_status dwx_run(const dwx_state *st, conv_dwx_band_fn band, conv_dw_cl_fn cl16,
                            const op_tensor *const *in, int n_in, op_tensor *const *out, void *ws,
                            op_ctx *ctx) {
    const conv_dwx_plan *p = &st->p;
    conv_dwx_run(p, band, cl16, in[0]->data, in[1]->data, conv_bias(&p->s, in, n_in),
                 conv_row_fusion_residual(&p->fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dwx_run_avx512,
               dwx_run(state, conv_dwx_band_avx512, conv_dw_cl16_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dwx_run_avx2, dwx_run(state, conv_dwx_band_avx2, NULL, in, n_in, out, ws, ctx))

/* ---- NCHW: emitting (anvil compile) ----------------------------------------------------------
 * The plan as an initializer, the tap offsets and the channel-lanes tables as blobs, and a
 * conv_dwx_run call with the variant's ISA kernels: the very code dwx_run runs. */

static anvil_status dwx_emit(const void *state, bool avx512, kern_emit *e) {
    const dwx_state *st = state;
    const conv_dwx_plan *p = &st->p;
    const conv_shape *s = &p->s;
    const conv_dwx_rows *g = &p->g;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(conv_emit_direct_files(e));
    CORE_TRY(e->need(e, avx512 ? "kernels/cpu/conv/conv_dwx_avx512.c"
                               : "kernels/cpu/conv/conv_dwx_avx2.c"));
    CORE_TRY(e->include(e, "kernels/cpu/conv/conv_dwx.h"));
    if (avx512) CORE_TRY(e->need(e, "kernels/cpu/conv/conv_dw_avx512.c"));
    char off[96];
    CORE_TRY(e->blob(e, p->off, (size_t)g->ntaps * sizeof(int64_t), off, sizeof off));
    CORE_TRY(conv_emit_row_fusion(e, "fuse", &p->fuse));
    e->code(e, "conv_dwx_plan dp;\nmemset(&dp, 0, sizeof dp);\n");
    conv_emit_shape(e, "dp.s", s);
    e->code(e,
            "dp.mult = %lld;\ndp.g = (conv_dwx_rows){%lld, %lld, %lld, %lld, %lld, %lld, %lld, "
            "%lld, %lld, %lld, %lld, %lld, (const int64_t *)(%s)};\n",
            (long long)p->mult, (long long)g->h, (long long)g->w, (long long)g->pt,
            (long long)g->q0, (long long)g->n, (long long)g->sy, (long long)g->sx, (long long)g->lp,
            (long long)g->ldp, (long long)g->ext, (long long)g->ow, (long long)g->ntaps, off);
    e->code(e,
            "dp.threads = %d;\ndp.band = %lld;\ndp.band_rows = %lld;\ndp.fuse = fuse;\n"
            "dp.cl = %s;\ndp.cl_pw = %lld;\ndp.cl_ph = %lld;\n",
            p->threads, (long long)p->band, (long long)p->band_rows,
            p->cl && avx512 ? "true" : "false", (long long)p->cl_pw, (long long)p->cl_ph);
    if (p->cl && avx512) CORE_TRY(conv_emit_cl_geom(e, "dp.clg", &p->clg, st->cl_idx));
    char x[96], w[96], b[96], r[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, 1, w, sizeof w);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, p->fuse.residual, r, sizeof r);
    e->code(e,
            "conv_dwx_run(&dp, %s, %s, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (const float *)(%s), (float *)(%s), %s, %s);\n",
            avx512 ? "conv_dwx_band_avx512" : "conv_dwx_band_avx2",
            avx512 ? "conv_dw_cl16_avx512" : "NULL", x, w, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static anvil_status dwx_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return dwx_emit(state, true, e);
}

static anvil_status dwx_emit_avx2(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return dwx_emit(state, false, e);
}

static const kern_emitter dwx_emitter_avx512 = {dwx_emit_avx512, NULL},
                          dwx_emitter_avx2 = {dwx_emit_avx2, NULL};

const kern_variant conv_v_dwx_avx512 = {
    "dwconv_nchw_avx512", IR_OP_CONV,  KERN_NEEDS_AVX512,   dwx_supports,
    dwx_workspace,        dwx_prepare, dwx_release,         dwx_run_avx512,
    conv_fuses,           NULL,        &dwx_emitter_avx512, NULL};
const kern_variant conv_v_dwx_avx2 = {
    "dwconv_nchw_avx2", IR_OP_CONV,   KERN_NEEDS_AVX2, dwx_supports, dwx_workspace,     dwx_prepare,
    dwx_release,        dwx_run_avx2, conv_fuses,      NULL,         &dwx_emitter_avx2, NULL};

/* ---- NHWC ---------------------------------------------------------------------------------- */

/* The plan (conv_dwx.h) and the packed weights. */
typedef struct dwxn_state {
    conv_dwxn_plan p;
    float *wp; /* owned: the packed weights [kh*kw][vpad], 64-byte aligned */
} dwxn_state;

static bool dwxn_plan_of(const kern_node *kn, conv_dwxn_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of_nhwc(kn, s) || !kn->in[1].value || !dwx_shape(s) || s->m != s->c)
        return false;
    conv_dwx_last *g = &p->g;
    *g = (conv_dwx_last){.h = s->h,
                         .w = s->w,
                         .c = s->c,
                         .vpad = (s->c + 15) / 16 * 16,
                         .ow = s->ow,
                         .kh = s->kh,
                         .kw = s->kw,
                         .sh = s->sh,
                         .sw = s->sw,
                         .dh = s->dh,
                         .dw = s->dw,
                         .pt = s->pt,
                         .pl = s->pl};
    /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw < w */
    g->ox_lo = (s->pl + s->sw - 1) / s->sw;
    if (g->ox_lo > s->ow) g->ox_lo = s->ow;
    const int64_t last = s->w - 1 - (s->kw - 1) * s->dw + s->pl; /* the largest such ox * sw */
    g->ox_hi = last < 0 ? 0 : last / s->sw + 1;
    if (g->ox_hi > s->ow) g->ox_hi = s->ow;
    if (g->ox_hi < g->ox_lo) g->ox_hi = g->ox_lo;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    return true;
}

static bool dwxn_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    conv_dwxn_plan p;
    return dwxn_plan_of(kn, &p);
}

/* The bias, zero-padded to vpad, per run. */
static size_t dwxn_workspace(const kern_node *kn) {
    conv_dwxn_plan p;
    return dwxn_plan_of(kn, &p) ? sizeof(float) * (size_t)p.g.vpad : 0;
}

static size_t dwxn_wp_floats(const conv_dwxn_plan *p) {
    return (size_t)(p->s.kh * p->s.kw * p->g.vpad);
}

static anvil_status dwxn_prepare(const kern_node *kn, void **state) {
    dwxn_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    conv_dwxn_plan *p = &st->p;
    if (!dwxn_plan_of(kn, p)) {
        free(st);
        return conv_prepare_unsupported(kn, "channels-last depthwise variant");
    }
    const conv_shape *s = &p->s;
    const int64_t ntaps = s->kh * s->kw, vpad = p->g.vpad;
    st->wp = core_aligned_alloc(64, sizeof(float) * dwxn_wp_floats(p));
    if (!st->wp) {
        free(st);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(st->wp, 0, sizeof(float) * dwxn_wp_floats(p));
    const float *w = kn->in[1].value;
    for (int64_t o = 0; o < s->c; o++)
        for (int64_t t = 0; t < ntaps; t++) st->wp[t * vpad + o] = w[o * ntaps + t];
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    *state = st;
    return ANVIL_OK;
}

static void dwxn_release(void *state) {
    dwxn_state *st = state;
    if (st) free(st->wp);
    free(st);
}

static anvil_status dwxn_run(const dwxn_state *st, conv_dwx_row_fn row, const op_tensor *const *in,
                             int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    const conv_dwxn_plan *p = &st->p;
    conv_dwxn_run(p, row, st->wp, in[0]->data, conv_bias(&p->s, in, n_in),
                  conv_row_fusion_residual(&p->fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dwxn_run_avx512, dwxn_run(state, conv_dwx_row_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dwxn_run_avx2, dwxn_run(state, conv_dwx_row_avx2, in, n_in, out, ws, ctx))

/* ---- NHWC: emitting (anvil compile) ----------------------------------------------------------
 * The plan as an initializer, the packed weights as a blob, and a conv_dwxn_run call with the
 * variant's ISA kernel: the very code dwxn_run runs. */

static anvil_status dwxn_emit(const void *state, bool avx512, kern_emit *e) {
    const dwxn_state *st = state;
    const conv_dwxn_plan *p = &st->p;
    const conv_shape *s = &p->s;
    const conv_dwx_last *g = &p->g;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(conv_emit_direct_files(e));
    CORE_TRY(e->need(e, avx512 ? "kernels/cpu/conv/conv_dwx_avx512.c"
                               : "kernels/cpu/conv/conv_dwx_avx2.c"));
    CORE_TRY(e->include(e, "kernels/cpu/conv/conv_dwx.h"));
    char wp[96], x[96], b[96], r[96];
    CORE_TRY(e->blob(e, st->wp, dwxn_wp_floats(p) * sizeof(float), wp, sizeof wp));
    CORE_TRY(conv_emit_row_fusion(e, "fuse", &p->fuse));
    e->code(e, "conv_dwxn_plan np;\nmemset(&np, 0, sizeof np);\n");
    conv_emit_shape(e, "np.s", s);
    e->code(e,
            "np.g = (conv_dwx_last){%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
            "%lld, %lld, %lld, %lld, %lld};\n",
            (long long)g->h, (long long)g->w, (long long)g->c, (long long)g->vpad, (long long)g->ow,
            (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw,
            (long long)g->dh, (long long)g->dw, (long long)g->pt, (long long)g->pl,
            (long long)g->ox_lo, (long long)g->ox_hi);
    e->code(e, "np.threads = %d;\nnp.fuse = fuse;\n", p->threads);
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, p->fuse.residual, r, sizeof r);
    e->code(e,
            "conv_dwxn_run(&np, %s, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (const float *)(%s), (float *)(%s), %s, %s);\n",
            avx512 ? "conv_dwx_row_avx512" : "conv_dwx_row_avx2", wp, x, b, r, e->out(e, 0), e->ws,
            e->ctx);
    return ANVIL_OK;
}

static anvil_status dwxn_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return dwxn_emit(state, true, e);
}

static anvil_status dwxn_emit_avx2(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return dwxn_emit(state, false, e);
}

static const kern_emitter dwxn_emitter_avx512 = {dwxn_emit_avx512, NULL},
                          dwxn_emitter_avx2 = {dwxn_emit_avx2, NULL};

const kern_variant conv_nhwc_v_dwx_avx512 = {"dwconv_nhwc_avx512", IR_OP_CONV_NHWC,
                                             KERN_NEEDS_AVX512,    dwxn_supports,
                                             dwxn_workspace,       dwxn_prepare,
                                             dwxn_release,         dwxn_run_avx512,
                                             conv_fuses,           NULL,
                                             &dwxn_emitter_avx512, NULL};
const kern_variant conv_nhwc_v_dwx_avx2 = {"dwconv_nhwc_avx2", IR_OP_CONV_NHWC,
                                           KERN_NEEDS_AVX2,    dwxn_supports,
                                           dwxn_workspace,     dwxn_prepare,
                                           dwxn_release,       dwxn_run_avx2,
                                           conv_fuses,         NULL,
                                           &dwxn_emitter_avx2, NULL};
