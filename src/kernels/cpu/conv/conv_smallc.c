/* Direct Conv for few input channels (a network's RGB stem): conv_smallc_direct_avx512 / _avx2.
 *
 * With c = 3 the GEMM formulations have a depth of c*kh*kw = 27 (3x3) or 147 (7x7): the implicit
 * GEMM packs about one float of input per 2*27 FLOPs it then computes, and its tiles reload
 * their accumulators each K block. Here the taps are few enough for SC_MB x 3 vectors of
 * accumulators to stay in registers over all of them (conv_sc_tmpl.h), reading the input from
 * padded rows that are copied once per band of output rows, as the depthwise kernel does
 * (conv_dw_geom: zero padding written out, stride 2 deinterleaved). The weights are packed once
 * in prepare, per block of output channels, so each tap's SC_MB weights share a cache line.
 *
 * Work split: the threads take output channel blocks of an image (rows only when there are too
 * few blocks), so each thread writes whole planes, as the next layer (usually a depthwise conv or
 * a pool, split by channel) will read them from the same core's cache. */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

/* The plan (conv_sc_plan) is plain data in conv_layout.h, with the run (conv_sc_run) that the
 * runtime and the libraries `anvil compile` emits share; the state adds the packed weights. */
typedef struct sc_state {
    conv_sc_plan p;
    float *wp; /* owned: packed weights, nblk x [c][kh][kw][mb] */
} sc_state;

/* At most 4 input channels: beyond that the GEMM's depth is enough for it (ResNet-50's and
 * MobileNetV2's stems have 3). */
static bool sc_plan_of(const kern_node *kn, int mb, conv_sc_plan *p) {
    memset(p, 0, sizeof *p);
    conv_shape *s = &p->s;
    if (!conv_shape_of(kn, s) || !kn->in[1].value) return false;
    if (s->group != 1 || s->c > 4 || s->c < 1 || s->m < 1) return false;
    if (s->kh > CONV_SC_MAX_K || s->kw > CONV_SC_MAX_K || s->dh != 1 || s->dw != 1) return false;
    if ((s->sh != 1 && s->sh != 2) || (s->sw != 1 && s->sw != 2)) return false;
    conv_dw_geom *g = &p->g.g;
    conv_dw_geom_init(s, g);
    p->mb = mb;
    p->nblk = (s->m + mb - 1) / mb;
    p->threads = kn->threads > 0 ? kn->threads : 1;
    /* Output rows per band: the c channels' padded rows a band reads in about 16 KB, so they
     * stay in L1 while every block of output channels reads them. */
    int64_t band = (4096 / (s->c * g->ldp) - s->kh) / s->sh + 1;
    if (band < 1) band = 1;
    if (band > s->oh) band = s->oh > 0 ? s->oh : 1;
    p->band = band;
    p->g.c = s->c;
    p->g.band_rows = (band - 1) * s->sh + s->kh;
    p->g.m = s->m;
    p->g.ohw = s->oh * s->ow;
    const int64_t items = s->n * p->nblk;
    p->rsplit = items >= p->threads || items == 0 ? 1 : (p->threads + items - 1) / items;
    return true;
}

static bool sc_supports_mb(const kern_node *kn, int mb) {
    conv_sc_plan p;
    return sc_plan_of(kn, mb, &p);
}

static bool sc_supports_avx512(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return sc_supports_mb(kn, CONV_SC_MB_AVX512);
}

static bool sc_supports_avx2(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    return sc_supports_mb(kn, CONV_SC_MB_AVX2);
}

static size_t sc_workspace(const kern_node *kn) {
    conv_sc_plan p;
    /* the slice does not depend on mb */
    if (!sc_plan_of(kn, CONV_SC_MB_AVX2, &p)) return 0;
    return (size_t)p.threads * conv_sc_slice(&p);
}

static anvil_status sc_prepare(const kern_node *kn, int mb, void **state) {
    sc_state *st = core_calloc(1, sizeof *st);
    if (!st) return ANVIL_ERR_OUT_OF_MEMORY;
    conv_sc_plan *p = &st->p;
    if (!sc_plan_of(kn, mb, p)) {
        free(st);
        return conv_prepare_unsupported(kn, "few-channel conv variant");
    }
    const conv_shape *s = &p->s;
    const int64_t taps = s->c * s->kh * s->kw;
    st->wp = core_calloc((size_t)(p->nblk * taps * mb), sizeof(float));
    if (!st->wp) {
        free(st);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    const float *w = kn->in[1].value;
    for (int64_t m = 0; m < s->m; m++)
        for (int64_t t = 0; t < taps; t++)
            st->wp[((m / mb) * taps + t) * mb + m % mb] = w[m * taps + t];
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    *state = st;
    return ANVIL_OK;
}

static anvil_status sc_prepare_avx512(const kern_node *kn, void **state) {
    return sc_prepare(kn, CONV_SC_MB_AVX512, state);
}

static anvil_status sc_prepare_avx2(const kern_node *kn, void **state) {
    return sc_prepare(kn, CONV_SC_MB_AVX2, state);
}

static void sc_release(void *state) {
    sc_state *st = state;
    if (st) free(st->wp);
    free(st);
}

static anvil_status sc_run(const sc_state *st, conv_sc_band_fn band, const op_tensor *const *in,
                           int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    conv_sc_run(&st->p, band, st->wp, in[0]->data, conv_bias(&st->p.s, in, n_in),
                conv_row_fusion_residual(&st->p.fuse, in, n_in), out[0]->data, ws, ctx);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(sc_run_avx512, sc_run(state, conv_sc_band_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(sc_run_avx2, sc_run(state, conv_sc_band_avx2, in, n_in, out, ws, ctx))

/* ---- emitting (anvil compile) ---------------------------------------------------------------
 * The plan as an initializer, the packed weights as a blob, and a conv_sc_run call with the
 * variant's ISA kernel: the very code sc_run runs. */

static anvil_status sc_emit(const kern_node *kn, const sc_state *st, const char *band,
                            const char *file, kern_emit *e) {
    const conv_sc_plan *p = &st->p;
    const conv_shape *s = &p->s;
    CORE_TRY(conv_emit_files_need(e));
    static const char *const isa_files[] = {
        "kernels/cpu/conv/conv_vec_avx512.h", "kernels/cpu/conv/conv_vec_avx2.h",
        "kernels/cpu/conv/conv_rows_tmpl.h", "kernels/cpu/conv/conv_sc_tmpl.h"};
    for (size_t i = 0; i < sizeof isa_files / sizeof isa_files[0]; i++)
        CORE_TRY(e->need(e, isa_files[i]));
    CORE_TRY(e->need(e, file));
    char wp[96], x[96], b[96], r[96];
    const size_t floats = (size_t)(p->nblk * s->c * s->kh * s->kw * p->mb);
    CORE_TRY(e->blob(e, st->wp, floats * sizeof(float), wp, sizeof wp));
    CORE_TRY(conv_emit_row_fusion(e, "fuse", &p->fuse));
    const conv_dw_geom *g = &p->g.g;
    e->code(e, "conv_sc_plan sp;\nmemset(&sp, 0, sizeof sp);\n");
    conv_emit_shape(e, "sp.s", s);
    e->code(e,
            "sp.g.g = (conv_dw_geom){%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
            "%lld, %lld};\n",
            (long long)g->h, (long long)g->w, (long long)g->pt, (long long)g->q0, (long long)g->n,
            (long long)g->ldp, (long long)g->half, (long long)g->sy, (long long)g->sx,
            (long long)g->kh, (long long)g->kw, (long long)g->ow);
    e->code(e, "sp.g.c = %lld;\nsp.g.band_rows = %lld;\nsp.g.m = %lld;\nsp.g.ohw = %lld;\n",
            (long long)p->g.c, (long long)p->g.band_rows, (long long)p->g.m, (long long)p->g.ohw);
    e->code(e, "sp.mb = %d;\nsp.nblk = %lld;\nsp.band = %lld;\nsp.rsplit = %lld;\n", p->mb,
            (long long)p->nblk, (long long)p->band, (long long)p->rsplit);
    e->code(e, "sp.threads = %d;\nsp.fuse = fuse;\n", p->threads);
    conv_emit_in(e, 0, x, sizeof x);
    conv_emit_in(e, s->has_bias ? 2 : -1, b, sizeof b);
    conv_emit_in(e, p->fuse.residual, r, sizeof r);
    (void)kn;
    e->code(e,
            "conv_sc_run(&sp, %s, (const float *)(%s), (const float *)(%s), (const float *)(%s), "
            "(const float *)(%s), (float *)(%s), %s, %s);\n",
            band, wp, x, b, r, e->out(e, 0), e->ws, e->ctx);
    return ANVIL_OK;
}

static anvil_status sc_emit_avx512(const kern_node *kn, const void *state, kern_emit *e) {
    return sc_emit(kn, state, "conv_sc_band_avx512", "kernels/cpu/conv/conv_sc_avx512.c", e);
}

static anvil_status sc_emit_avx2(const kern_node *kn, const void *state, kern_emit *e) {
    return sc_emit(kn, state, "conv_sc_band_avx2", "kernels/cpu/conv/conv_sc_avx2.c", e);
}

static const kern_emitter sc_emitter_avx512 = {sc_emit_avx512, NULL},
                          sc_emitter_avx2 = {sc_emit_avx2, NULL};

const kern_variant conv_v_smallc_avx512 = {
    "conv_smallc_direct_avx512", IR_OP_CONV, KERN_NEEDS_AVX512, sc_supports_avx512, sc_workspace,
    sc_prepare_avx512,           sc_release, sc_run_avx512,     conv_fuses,         NULL,
    &sc_emitter_avx512,          NULL};
const kern_variant conv_v_smallc_avx2 = {
    "conv_smallc_direct_avx2", IR_OP_CONV, KERN_NEEDS_AVX2, sc_supports_avx2, sc_workspace,
    sc_prepare_avx2,           sc_release, sc_run_avx2,     conv_fuses,       NULL,
    &sc_emitter_avx2,          NULL};
