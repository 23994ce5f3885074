/* Direct depthwise Conv (group == C == M, one filter per channel), 3x3 and 5x5 kernels, strides
 * 1 and 2, no dilation, NCHW: conv_depthwise_direct_avx512 / _avx2.
 *
 * A depthwise conv does kh*kw FMAs per output, far too few for a GEMM to pay for its packing, so
 * it is computed directly from the image. Each thread takes whole channel planes and sweeps each
 * in bands of output rows: the input rows a band needs are first copied into zero-padded rows
 * (conv_dw_geom in conv_layout.h: deinterleaved at stride 2) so the vector loop along the output
 * width has no bounds tests and no gathers, then the ISA kernel (conv_dw_tmpl.h) computes the band.
 * A fused epilogue (ir_fusion: residual and activation) is applied to each band right after the
 * kernel stored it, while the band is still in L1, instead of in a separate pass over the whole
 * output. */
#include "conv.h"
#include "conv_dwx.h"

#include <stdlib.h>
#include <string.h>

/* The plan (conv_dw_plan) is plain data in conv_layout.h, with the run (conv_dw_run in
 * conv_direct_run.c) that the runtime and the libraries `anvil compile` emits share; the state
 * adds the channel-lanes index tables that plan's clg points into. */
typedef struct dw_state {
    conv_dw_plan p;
    int32_t *cl_idx; /* owned: in_at, out_at and tap_at in one block */
} dw_state;
typedef conv_dw_plan dw_plan;

/* Planes of at most 28 x 28 outputs: there the 16 lanes along a row were partly idle and
 * most tap loads split across cache lines. MobileNetV2 per node (1 thread, us, rows ->
 * channel lanes; ORT's NCHWc kernels in brackets): 960ch 7x7 69 -> 34 [27], 576ch 14x14
 * stride 2 61 -> 31 [19], 384ch 14x14 51 -> 41 [40], 576ch 14x14 75 -> 63 [58-77], 192ch
 * 28x28 100 -> 76 [63], 144ch 56x56 stride 2 109 -> 104 [56]. At 56x56 the buffers outgrow
 * L2's share and it loses (144ch 213 -> 240 us, 96ch stride 2 243 -> 364 us). */
bool conv_dw_channel_lanes(const conv_shape *s) {
    return s->ow <= 28 && s->oh <= 28;
}

static bool dw_plan_of(const kern_node *kn, dw_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of(kn, s) || !conv_dw_shape(s)) return false;
    p->ph = (s->oh - 1) * s->sh + s->kh;
    conv_dw_geom *g = &p->g;
    conv_dw_geom_init(s, g);
    p->threads = kn->threads > 0 ? kn->threads : 1;
    /* Output rows per band: the padded input rows a band reads, (band-1)*sh + kh of ldp floats,
     * take about 8 KB, so the copy the kernel reads back is still in L1 (whole padded planes of
     * 52 KB at 112x112 were not), and the fused epilogue finds the band's output there too.
     * Even: the kernel's row blocks are 2 rows (conv_dw_tmpl.h). */
    const int64_t band = ((2048 / g->ldp - s->kh) / s->sh + 1) & ~(int64_t)1;
    p->band = band < 2 ? 2 : band;
    p->band_rows = (p->band - 1) * s->sh + s->kh;
    if (p->band_rows > p->ph) p->band_rows = p->ph;
    p->cl = conv_dw_channel_lanes(s);
    p->cl_pw = (s->ow - 1) * s->sw + s->kw;
    return true;
}

static bool dw_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    dw_plan p;
    return dw_plan_of(kn, &p);
}

static size_t dw_workspace(const kern_node *kn) {
    dw_plan p;
    if (!dw_plan_of(kn, &p)) return 0;
    const size_t band = conv_dw_slice(&p), cl = conv_dw_cl_slice(&p);
    return (size_t)p.threads * (band > cl ? band : cl);
}

static anvil_status dw_prepare(const kern_node *kn, void **state) {
    dw_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    dw_plan *p = &st->p;
    if (!dw_plan_of(kn, p)) {
        free(st);
        return conv_prepare_unsupported(kn, "depthwise variant");
    }
    conv_row_fusion_init(kn, &p->fuse);
    if (p->cl && conv_dwx_cl_build(&p->s, p->cl_pw, p->ph, &st->cl_idx, &p->clg) != ANVIL_OK) {
        free(st);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    *state = st;
    return ANVIL_OK;
}

static void dw_release(void *state) {
    dw_state *st = state;
    if (st) free(st->cl_idx);
    free(st);
}

static anvil_status dw_run(const dw_state *st, conv_dw_band_fn band, conv_dw_cl_fn cl16,
                           const op_tensor *const *in, int n_in, op_tensor *const *out, void *ws,
                           op_ctx *ctx) {
    const dw_plan *p = &st->p;
    conv_dw_run(p, band, cl16, in[0]->data, in[1]->data, conv_bias(&p->s, in, n_in),
                conv_row_fusion_residual(&p->fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dw_run_avx512,
               dw_run(state, conv_dw_band_avx512, conv_dw_cl16_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dw_run_avx2, dw_run(state, conv_dw_band_avx2, NULL, in, n_in, out, ws, ctx))

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, the channel-lanes index tables as a blob, and a conv_dw_run call
 * with the variant's ISA kernels: the very code dw_run runs. */

static anvil_status dw_emit(const void *state, bool avx512, kern_emit *e) {
    const dw_state *st = state;
    const dw_plan *p = &st->p;
    const conv_shape *s = &p->s;
    const conv_dw_geom *g = &p->g;
    CORE_TRY(conv_emit_files_need(e));
    CORE_TRY(conv_emit_direct_files(e));
    CORE_TRY(e->need(e, avx512 ? "kernels/cpu/conv/conv_dw_avx512.c"
                               : "kernels/cpu/conv/conv_dw_avx2.c"));
    CORE_TRY(conv_emit_row_fusion(e, "fuse", &p->fuse));
    e->code(e, "conv_dw_plan dp;\nmemset(&dp, 0, sizeof dp);\n");
    conv_emit_shape(e, "dp.s", s);
    e->code(e,
            "dp.g = (conv_dw_geom){%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
            "%lld, %lld};\n",
            (long long)g->h, (long long)g->w, (long long)g->pt, (long long)g->q0, (long long)g->n,
            (long long)g->ldp, (long long)g->half, (long long)g->sy, (long long)g->sx,
            (long long)g->kh, (long long)g->kw, (long long)g->ow);
    e->code(e,
            "dp.ph = %lld;\ndp.threads = %d;\ndp.fuse = fuse;\ndp.band = %lld;\ndp.band_rows = "
            "%lld;\ndp.cl = %s;\ndp.cl_pw = %lld;\n",
            (long long)p->ph, p->threads, (long long)p->band, (long long)p->band_rows,
            p->cl ? "true" : "false", (long long)p->cl_pw);
    if (p->cl && avx512) CORE_TRY(conv_emit_cl_geom(e, "dp.clg", &p->clg, st->cl_idx));
    char x[96], w[96], b[96], r[96];
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, 1, w, sizeof w);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, p->fuse.residual, r, sizeof r);
    e->code(e,
            "conv_dw_run(&dp, %s, %s, (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (const float *)(%s), (float *)(%s), %s, %s);\n",
            avx512 ? "conv_dw_band_avx512" : "conv_dw_band_avx2",
            avx512 ? "conv_dw_cl16_avx512" : "NULL", x, w, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static anvil_status dw_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return dw_emit(state, true, e);
}

static anvil_status dw_emit_avx2(const kern_node *kn, const void *state, kern_emit *e) {
    (void)kn;
    return dw_emit(state, false, e);
}

static const kern_emitter dw_emitter_avx512 = {dw_emit_avx512, NULL},
                          dw_emitter_avx2 = {dw_emit_avx2, NULL};

const kern_variant conv_v_depthwise_avx512 = {"conv_depthwise_direct_avx512",
                                              IR_OP_CONV,
                                              KERN_NEEDS_AVX512,
                                              dw_supports,
                                              dw_workspace,
                                              dw_prepare,
                                              dw_release,
                                              dw_run_avx512,
                                              conv_fuses,
                                              NULL,
                                              &dw_emitter_avx512,
                                              NULL};
const kern_variant conv_v_depthwise_avx2 = {"conv_depthwise_direct_avx2",
                                            IR_OP_CONV,
                                            KERN_NEEDS_AVX2,
                                            dw_supports,
                                            dw_workspace,
                                            dw_prepare,
                                            dw_release,
                                            dw_run_avx2,
                                            conv_fuses,
                                            NULL,
                                            &dw_emitter_avx2,
                                            NULL};
