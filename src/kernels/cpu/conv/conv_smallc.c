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

typedef struct sc_plan {
    conv_shape s;
    conv_sc_geom g;
    int mb;         /* output channels per block */
    int64_t nblk;   /* blocks of mb output channels */
    int64_t band;   /* output rows per band */
    int64_t rsplit; /* row ranges per image, when the blocks are fewer than the threads */
    int threads;
    float *wp;            /* owned: packed weights, nblk x [c][kh][kw][mb] */
    conv_row_fusion fuse; /* set by prepare */
} sc_plan;

/* At most 4 input channels: beyond that the GEMM's depth is enough for it (ResNet-50's and
 * MobileNetV2's stems have 3). */
static bool sc_plan_of(const kern_node *kn, int mb, sc_plan *p) {
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

static size_t sc_slice(const sc_plan *p) {
    return ((size_t)(p->s.c * p->g.band_rows * p->g.g.ldp) * sizeof(float) + 63) & ~(size_t)63;
}

static bool sc_supports_mb(const kern_node *kn, int mb) {
    sc_plan p;
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
    sc_plan p;
    /* the slice does not depend on mb */
    if (!sc_plan_of(kn, CONV_SC_MB_AVX2, &p)) return 0;
    return (size_t)p.threads * sc_slice(&p);
}

static anvil_status sc_prepare(const kern_node *kn, int mb, void **state) {
    sc_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!sc_plan_of(kn, mb, p)) {
        free(p);
        return conv_prepare_unsupported(kn, "few-channel conv variant");
    }
    const conv_shape *s = &p->s;
    const int64_t taps = s->c * s->kh * s->kw;
    p->wp = core_calloc((size_t)(p->nblk * taps * mb), sizeof(float));
    if (!p->wp) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    const float *w = kn->in[1].value;
    for (int64_t m = 0; m < s->m; m++)
        for (int64_t t = 0; t < taps; t++)
            p->wp[((m / mb) * taps + t) * mb + m % mb] = w[m * taps + t];
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    *state = p;
    return ANVIL_OK;
}

static anvil_status sc_prepare_avx512(const kern_node *kn, void **state) {
    return sc_prepare(kn, CONV_SC_MB_AVX512, state);
}

static anvil_status sc_prepare_avx2(const kern_node *kn, void **state) {
    return sc_prepare(kn, CONV_SC_MB_AVX2, state);
}

static void sc_release(void *state) {
    sc_plan *p = state;
    if (p) free(p->wp);
    free(p);
}

typedef struct sc_job {
    const sc_plan *p;
    conv_sc_band_fn band;
    const float *x, *b, *res;
    float *y;
    char *ws;
} sc_job;

/* The fused epilogue over output channels [m0, m1) of image img, rows [r0, r0 + nr): each
 * channel's rows are consecutive, and were just written. */
static void sc_epilogue(const sc_job *j, int64_t img, int64_t m0, int64_t m1, int64_t r0,
                        int64_t nr) {
    const sc_plan *p = j->p;
    for (int64_t m = m0; m < m1; m++) {
        const int64_t off = (img * p->s.m + m) * p->g.ohw + r0 * p->s.ow;
        conv_row_fusion_apply(&p->fuse, j->res ? j->res + off : NULL, j->y + off, nr * p->s.ow);
    }
}

/* Blocks [b0, b1) of image img over the row range rs, band by band. */
static void sc_range(const sc_job *j, int64_t img, int64_t rs, int64_t b0, int64_t b1, float *xb) {
    const sc_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t y0 = s->oh * rs / p->rsplit, y1 = s->oh * (rs + 1) / p->rsplit;
    const float *x = j->x + img * s->c * s->h * s->w;
    float *y = j->y + img * s->m * p->g.ohw;
    const int64_t m0 = b0 * p->mb, m1 = b1 * p->mb < s->m ? b1 * p->mb : s->m;
    for (int64_t r0 = y0; r0 < y1; r0 += p->band) {
        const int64_t nr = y1 - r0 < p->band ? y1 - r0 : p->band;
        j->band(&p->g, x, xb, p->wp, j->b, y, r0, nr, b0, b1);
        if (p->fuse.on) sc_epilogue(j, img, m0, m1, r0, nr);
    }
}

/* Thread t's share of the items (image, row range, block), taken in runs of consecutive blocks
 * of one image and row range so the input band is copied once per run. */
static void sc_chunk(void *arg, size_t begin, size_t end) {
    const sc_job *j = arg;
    const sc_plan *p = j->p;
    const int64_t T = p->threads, items = p->s.n * p->rsplit * p->nblk;
    for (size_t t = begin; t < end; t++) {
        float *xb = (float *)(j->ws + t * sc_slice(p));
        memset(xb, 0, sc_slice(p));
        int64_t q = items * (int64_t)t / T;
        const int64_t q1 = items * ((int64_t)t + 1) / T;
        while (q < q1) {
            const int64_t run = q / p->nblk, b0 = q % p->nblk;
            const int64_t b1 = q1 - run * p->nblk < p->nblk ? q1 - run * p->nblk : p->nblk;
            sc_range(j, run / p->rsplit, run % p->rsplit, b0, b1, xb);
            q = run * p->nblk + b1;
        }
    }
}

static anvil_status sc_run(const sc_plan *p, conv_sc_band_fn band, const op_tensor *const *in,
                           int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    const float *b = conv_bias(&p->s, in, n_in);
    const float *res = conv_row_fusion_residual(&p->fuse, in, n_in);
    sc_job j = {p, band, in[0]->data, b, res, out[0]->data, ws};
    if (p->s.n * p->g.ohw == 0) return ANVIL_OK;
    op_parallel_for(ctx, (size_t)p->threads, sc_chunk, &j);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(sc_run_avx512, sc_run(state, conv_sc_band_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(sc_run_avx2, sc_run(state, conv_sc_band_avx2, in, n_in, out, ws, ctx))

const kern_variant conv_v_smallc_avx512 = {
    "conv_smallc_direct_avx512", IR_OP_CONV, KERN_NEEDS_AVX512, sc_supports_avx512, sc_workspace,
    sc_prepare_avx512,           sc_release, sc_run_avx512,     conv_fuses,         NULL};
const kern_variant conv_v_smallc_avx2 = {
    "conv_smallc_direct_avx2", IR_OP_CONV, KERN_NEEDS_AVX2, sc_supports_avx2, sc_workspace,
    sc_prepare_avx2,           sc_release, sc_run_avx2,     conv_fuses,       NULL};
