/* Direct depthwise Conv (group == C == M, one filter per channel), 3x3 and 5x5 kernels, strides
 * 1 and 2, no dilation, NCHW: conv_depthwise_direct_avx512 / _avx2.
 *
 * A depthwise conv does kh*kw FMAs per output, far too few for a GEMM to pay for its packing, so
 * it is computed directly from the image. Each thread takes whole channel planes and sweeps each
 * in bands of output rows: the input rows a band needs are first copied into zero-padded rows
 * (conv_dw_geom in conv.h: deinterleaved at stride 2) so the vector loop along the output width
 * has no bounds tests and no gathers, then the ISA kernel (conv_dw_tmpl.h) computes the band. A
 * fused epilogue (ir_fusion: residual and activation) is applied to each band right after the
 * kernel stored it, while the band is still in L1, instead of in a separate pass over the whole
 * output. */
#include "conv_dwx.h"

#include <stdlib.h>
#include <string.h>

typedef struct dw_plan {
    conv_shape s;
    int64_t ph;     /* padded plane rows */
    conv_dw_geom g; /* the padded rows' layout, for the ISA kernel */
    int threads;
    conv_row_fusion fuse; /* set by prepare */
    int64_t band;         /* output rows per band */
    int64_t band_rows;    /* padded input rows a band reads: the workspace slice per thread */
    /* Small planes: 16 channels at a time with the channels in the vector lanes, where the ISA
     * has that kernel (conv_dw_cl_geom in conv.h). cl_pw x ph padded pixels, plus one that
     * takes the input pixels no output reads. The index arrays are built by prepare. */
    bool cl;
    int64_t cl_pw;
    conv_dw_cl_geom clg;
    int32_t *cl_idx; /* owned: in_at, out_at and tap_at in one block */
} dw_plan;

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

/* The channel-lanes path's buffers per thread: the padded pixels (+1) and the output pixels
 * (rounded up to 16), 16 floats each. */
static size_t dw_cl_pad_bytes(const dw_plan *p) {
    return ((size_t)(p->cl_pw * p->ph + 1) * 16 * sizeof(float) + 63) & ~(size_t)63;
}

static size_t dw_cl_slice(const dw_plan *p) {
    const size_t ohw = (size_t)(p->s.oh * p->s.ow + 15) / 16 * 16;
    return p->cl ? dw_cl_pad_bytes(p) + ohw * 16 * sizeof(float) : 0;
}

static size_t dw_slice(const dw_plan *p) {
    return ((size_t)p->band_rows * (size_t)p->g.ldp * sizeof(float) + 63) & ~(size_t)63;
}

static bool dw_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    dw_plan p;
    return dw_plan_of(kn, &p);
}

static size_t dw_workspace(const kern_node *kn) {
    dw_plan p;
    if (!dw_plan_of(kn, &p)) return 0;
    const size_t band = dw_slice(&p), cl = dw_cl_slice(&p);
    return (size_t)p.threads * (band > cl ? band : cl);
}

static anvil_status dw_prepare(const kern_node *kn, void **state) {
    dw_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!dw_plan_of(kn, p)) {
        free(p);
        return conv_prepare_unsupported(kn, "depthwise variant");
    }
    conv_row_fusion_init(kn, &p->fuse);
    if (p->cl && conv_dwx_cl_build(&p->s, p->cl_pw, p->ph, &p->cl_idx, &p->clg) != ANVIL_OK) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    *state = p;
    return ANVIL_OK;
}

static void dw_release(void *state) {
    dw_plan *p = state;
    if (p) free(p->cl_idx);
    free(p);
}

typedef struct dw_job {
    const dw_plan *p;
    conv_dw_band_fn band;
    const float *x, *w, *b;
    float *y;
    char *ws;
    const float *res; /* the fused residual (NCHW, like y), or NULL */
    bool cl;          /* 16-channel groups through the channel-lanes kernel, else planes */
} dw_job;

/* The fused epilogue over n consecutive outputs from y + off, while they are in L1. */
static void dw_epilogue(const dw_job *j, int64_t off, int64_t n) {
    conv_row_fusion_apply(&j->p->fuse, j->res ? j->res + off : NULL, j->y + off, n);
}

/* Plane q (image-major: image q / c, channel q % c), band by band, each band's input copied into
 * xb and, when fused, its output given the epilogue while it is in L1. */
static void dw_plane(const dw_job *j, int64_t q, float *xb) {
    const dw_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t c = q % s->c, plane = q * s->oh * s->ow;
    const float *x = j->x + q * s->h * s->w;
    for (int64_t r0 = 0; r0 < s->oh; r0 += p->band) {
        const int64_t nr = s->oh - r0 < p->band ? s->oh - r0 : p->band, off = plane + r0 * s->ow;
        j->band(&p->g, x, xb, j->w + c * s->kh * s->kw, j->b ? j->b[c] : 0.0f, j->y + off, r0, nr);
        if (p->fuse.on) dw_epilogue(j, off, nr * s->ow);
    }
}

/* Channels [c0, c0 + nc) of image img through the channel-lanes kernel, then the fused
 * epilogue over their planes (consecutive in NCHW). */
static void dw_group(const dw_job *j, int64_t img, int64_t c0, int nc, float *pad, float *out) {
    const dw_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t ohw = s->oh * s->ow, off = (img * s->c + c0) * ohw;
    conv_dw_cl16_avx512(&p->clg, j->x + (img * s->c + c0) * s->h * s->w, j->w + c0 * p->clg.ntaps,
                        j->b ? j->b + c0 : NULL, nc, pad, out, j->y + off);
    if (p->fuse.on) dw_epilogue(j, off, nc * ohw);
}

/* Thread t's share of the items (planes, or 16-channel groups of an image), with its
 * workspace slice, whose padding is zeroed once per run. */
static void dw_chunk(void *arg, size_t begin, size_t end) {
    const dw_job *j = arg;
    const dw_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t groups = (s->c + 15) / 16, T = p->threads;
    const int64_t items = s->n * (j->cl ? groups : s->c);
    const size_t stride = j->cl ? dw_cl_slice(p) : dw_slice(p);
    const size_t zeroed =
        j->cl ? dw_cl_pad_bytes(p) : sizeof(float) * (size_t)(p->band_rows * p->g.ldp);
    for (size_t t = begin; t < end; t++) {
        char *slice = j->ws + t * stride;
        memset(slice, 0, zeroed);
        for (int64_t q = items * (int64_t)t / T; q < items * ((int64_t)t + 1) / T; q++) {
            if (!j->cl) {
                dw_plane(j, q, (float *)slice);
                continue;
            }
            const int64_t c0 = q % groups * 16;
            dw_group(j, q / groups, c0, (int)(s->c - c0 < 16 ? s->c - c0 : 16), (float *)slice,
                     (float *)(slice + zeroed));
        }
    }
}

static anvil_status dw_run(const dw_plan *p, conv_dw_band_fn band, bool cl,
                           const op_tensor *const *in, int n_in, op_tensor *const *out, void *ws,
                           op_ctx *ctx) {
    const float *b = conv_bias(&p->s, in, n_in);
    const float *res = conv_row_fusion_residual(&p->fuse, in, n_in);
    dw_job j = {p, band, in[0]->data, in[1]->data, b, out[0]->data, ws, res, cl && p->cl};
    if (p->s.n * p->s.c == 0) return ANVIL_OK;
    op_parallel_for(ctx, (size_t)p->threads, dw_chunk, &j);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dw_run_avx512, dw_run(state, conv_dw_band_avx512, true, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dw_run_avx2, dw_run(state, conv_dw_band_avx2, false, in, n_in, out, ws, ctx))

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
                                            NULL};
