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

/* Problems with fewer multiply-adds than this run on the calling thread: waking the pool costs
 * more than it saves. */
#define DWX_SERIAL_FMAS ((int64_t)1 << 18)

static size_t align64(size_t x) {
    return (x + 63) & ~(size_t)63;
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

typedef struct dwx_plan {
    conv_shape s;
    int64_t mult; /* output channels per input channel */
    conv_dwx_rows g;
    int64_t off[CONV_DWX_MAX_K * CONV_DWX_MAX_K]; /* g.off */
    int threads;
    int64_t band, band_rows; /* output rows per band; padded rows it reads (the slice) */
    conv_row_fusion fuse;    /* set by prepare */
    /* Small planes through the channel-lanes kernel (AVX-512 only, multiplier 1): a padded
     * plane of cl_pw x cl_ph pixels, the tables built by prepare. */
    bool cl;
    int64_t cl_pw, cl_ph;
    conv_dw_cl_geom clg;
    int32_t *cl_idx; /* owned */
} dwx_plan;

/* The plan of kn, with g.off pointing into p itself. */
static bool dwx_plan_of(const kern_node *kn, dwx_plan *p) {
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

static size_t dwx_band_slice(const dwx_plan *p) {
    return align64((size_t)p->band_rows * (size_t)p->g.ldp * sizeof(float));
}

/* The channel-lanes buffers per thread: the padded pixels (+1, the trash pixel) and the output
 * pixels (rounded up to 16), 16 floats each. */
static size_t dwx_cl_pad_bytes(const dwx_plan *p) {
    return align64((size_t)(p->cl_pw * p->cl_ph + 1) * 16 * sizeof(float));
}

static size_t dwx_cl_slice(const dwx_plan *p) {
    const size_t ohw = (size_t)(p->s.oh * p->s.ow + 15) / 16 * 16;
    return dwx_cl_pad_bytes(p) + ohw * 16 * sizeof(float);
}

static bool dwx_supports(const kern_node *kn, const core_hw *hw) {
    (void)hw;
    dwx_plan p;
    return dwx_plan_of(kn, &p);
}

/* Both paths' slices: the AVX2 variant never takes the channel lanes, but sizing for them keeps
 * the workspace independent of which variant asks. */
static size_t dwx_workspace(const kern_node *kn) {
    dwx_plan p;
    if (!dwx_plan_of(kn, &p)) return 0;
    const size_t band = dwx_band_slice(&p), cl = p.cl ? dwx_cl_slice(&p) : 0;
    return (size_t)p.threads * (band > cl ? band : cl);
}

static anvil_status dwx_prepare(const kern_node *kn, void **state) {
    dwx_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!dwx_plan_of(kn, p)) {
        free(p);
        return conv_prepare_unsupported(kn, "depthwise variant");
    }
    conv_row_fusion_init(kn, &p->fuse);
    if (p->cl && conv_dwx_cl_build(&p->s, p->cl_pw, p->cl_ph, &p->cl_idx, &p->clg) != ANVIL_OK) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    *state = p;
    return ANVIL_OK;
}

static void dwx_release(void *state) {
    dwx_plan *p = state;
    if (p) free(p->cl_idx);
    free(p);
}

typedef struct dwx_job {
    const dwx_plan *p;
    conv_dwx_band_fn band;
    const float *x, *w, *b;
    float *y;
    char *ws;
    const float *res; /* the fused residual (NCHW, like y), or NULL */
    bool cl;          /* 16-channel groups through the channel-lanes kernel, else bands */
    int64_t parts;
} dwx_job;

/* The fused epilogue over n consecutive outputs from y + off, while they are in L1. */
static void dwx_epilogue(const dwx_job *j, int64_t off, int64_t n) {
    if (j->p->fuse.on)
        conv_row_fusion_apply(&j->p->fuse, j->res ? j->res + off : NULL, j->y + off, n);
}

/* Item q of the band path: band q % nb of output plane q / nb (image-major), read from the
 * input plane of its channel. */
static void dwx_band_item(const dwx_job *j, int64_t q, float *xb) {
    const dwx_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t nb = (s->oh + p->band - 1) / p->band, plane = q / nb, r0 = q % nb * p->band;
    const int64_t img = plane / s->m, o = plane % s->m,
                  nr = s->oh - r0 < p->band ? s->oh - r0 : p->band;
    const int64_t off = plane * s->oh * s->ow + r0 * s->ow;
    const float *x = j->x + (img * s->c + o / p->mult) * s->h * s->w;
    j->band(&p->g, x, xb, j->w + o * p->g.ntaps, j->b ? j->b[o] : 0.0f, j->y + off, r0, nr);
    dwx_epilogue(j, off, nr * s->ow);
}

/* Item q of the channel-lanes path: channels [c0, c0 + 16) of image q / groups. */
static void dwx_cl_item(const dwx_job *j, int64_t q, float *pad, float *out) {
    const dwx_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t groups = (s->c + 15) / 16, img = q / groups, c0 = q % groups * 16;
    const int nc = (int)(s->c - c0 < 16 ? s->c - c0 : 16);
    const int64_t ohw = s->oh * s->ow, off = (img * s->c + c0) * ohw;
    conv_dw_cl16_avx512(&p->clg, j->x + (img * s->c + c0) * s->h * s->w, j->w + c0 * p->g.ntaps,
                        j->b ? j->b + c0 : NULL, nc, pad, out, j->y + off);
    dwx_epilogue(j, off, nc * ohw);
}

static int64_t dwx_items(const dwx_job *j) {
    const conv_shape *s = &j->p->s;
    return j->cl ? s->n * ((s->c + 15) / 16)
                 : s->n * s->m * ((s->oh + j->p->band - 1) / j->p->band);
}

/* Part t's share of the items, with workspace slice t, whose padding is zeroed once per run
 * (the kernels write only where input lands, the same places for every item). */
static void dwx_chunk(void *arg, size_t begin, size_t end) {
    const dwx_job *j = arg;
    const dwx_plan *p = j->p;
    const int64_t items = dwx_items(j), T = j->parts;
    const size_t stride = j->cl ? dwx_cl_slice(p) : dwx_band_slice(p);
    const size_t zeroed = j->cl ? dwx_cl_pad_bytes(p) : dwx_band_slice(p);
    for (size_t t = begin; t < end; t++) {
        char *slice = j->ws + t * stride;
        memset(slice, 0, zeroed);
        for (int64_t q = items * (int64_t)t / T; q < items * ((int64_t)t + 1) / T; q++) {
            if (j->cl)
                dwx_cl_item(j, q, (float *)slice, (float *)(slice + zeroed));
            else
                dwx_band_item(j, q, (float *)slice);
        }
    }
}

static anvil_status dwx_run(const dwx_plan *p, conv_dwx_band_fn band, bool cl,
                            const op_tensor *const *in, int n_in, op_tensor *const *out, void *ws,
                            op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->m == 0) return ANVIL_OK;
    dwx_job j = {p,
                 band,
                 in[0]->data,
                 in[1]->data,
                 conv_bias(s, in, n_in),
                 out[0]->data,
                 ws,
                 conv_row_fusion_residual(&p->fuse, in, n_in),
                 cl && p->cl,
                 1};
    const int64_t fmas = s->n * s->m * s->oh * s->ow * p->g.ntaps;
    j.parts = fmas < DWX_SERIAL_FMAS ? 1 : p->threads;
    if (j.parts > dwx_items(&j)) j.parts = dwx_items(&j);
    op_parallel_for(j.parts > 1 ? ctx : NULL, (size_t)j.parts, dwx_chunk, &j);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dwx_run_avx512, dwx_run(state, conv_dwx_band_avx512, true, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dwx_run_avx2, dwx_run(state, conv_dwx_band_avx2, false, in, n_in, out, ws, ctx))

const kern_variant conv_v_dwx_avx512 = {"dwconv_nchw_avx512",
                                        IR_OP_CONV,
                                        KERN_NEEDS_AVX512,
                                        dwx_supports,
                                        dwx_workspace,
                                        dwx_prepare,
                                        dwx_release,
                                        dwx_run_avx512,
                                        conv_fuses,
                                        NULL,
                                        NULL};
const kern_variant conv_v_dwx_avx2 = {
    "dwconv_nchw_avx2", IR_OP_CONV,   KERN_NEEDS_AVX2, dwx_supports, dwx_workspace, dwx_prepare,
    dwx_release,        dwx_run_avx2, conv_fuses,      NULL,         NULL};

/* ---- NHWC ---------------------------------------------------------------------------------- */

typedef struct dwxn_plan {
    conv_shape s;
    conv_dwx_last g;
    int threads;
    conv_row_fusion fuse;
    float *wp; /* owned: the packed weights [kh*kw][vpad], 64-byte aligned */
} dwxn_plan;

static bool dwxn_plan_of(const kern_node *kn, dwxn_plan *p) {
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
    dwxn_plan p;
    return dwxn_plan_of(kn, &p);
}

/* The bias, zero-padded to vpad, per run. */
static size_t dwxn_workspace(const kern_node *kn) {
    dwxn_plan p;
    return dwxn_plan_of(kn, &p) ? sizeof(float) * (size_t)p.g.vpad : 0;
}

static anvil_status dwxn_prepare(const kern_node *kn, void **state) {
    dwxn_plan *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    if (!dwxn_plan_of(kn, p)) {
        free(p);
        return conv_prepare_unsupported(kn, "channels-last depthwise variant");
    }
    const conv_shape *s = &p->s;
    const int64_t ntaps = s->kh * s->kw, vpad = p->g.vpad;
    p->wp = core_aligned_alloc(64, sizeof(float) * (size_t)(ntaps * vpad));
    if (!p->wp) {
        free(p);
        return ANVIL_ERR_OUT_OF_MEMORY;
    }
    memset(p->wp, 0, sizeof(float) * (size_t)(ntaps * vpad));
    const float *w = kn->in[1].value;
    for (int64_t o = 0; o < s->c; o++)
        for (int64_t t = 0; t < ntaps; t++) p->wp[t * vpad + o] = w[o * ntaps + t];
    kern_node_mark_copied(kn, 1);
    conv_row_fusion_init(kn, &p->fuse);
    *state = p;
    return ANVIL_OK;
}

static void dwxn_release(void *state) {
    dwxn_plan *p = state;
    if (p) free(p->wp);
    free(p);
}

typedef struct dwxn_job {
    const dwxn_plan *p;
    conv_dwx_row_fn row;
    const float *x, *bias, *res;
    float *y;
    int64_t parts;
} dwxn_job;

/* Part t's share of the output rows of all images, each row's epilogue right after it. */
static void dwxn_chunk(void *arg, size_t begin, size_t end) {
    const dwxn_job *j = arg;
    const dwxn_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t rows = s->n * s->oh, T = j->parts, rowf = s->ow * s->m;
    for (size_t t = begin; t < end; t++)
        for (int64_t r = rows * (int64_t)t / T; r < rows * ((int64_t)t + 1) / T; r++) {
            j->row(&p->g, j->x + r / s->oh * s->h * s->w * s->c, p->wp, j->bias, j->y + r * rowf,
                   r % s->oh);
            if (p->fuse.on)
                conv_row_fusion_apply(&p->fuse, j->res ? j->res + r * rowf : NULL, j->y + r * rowf,
                                      rowf);
        }
}

/* The bias is copied into the workspace per run: B is an input, constant in every model the
 * layout pass turns but not promised to be. */
static anvil_status dwxn_run(const dwxn_plan *p, conv_dwx_row_fn row, const op_tensor *const *in,
                             int n_in, op_tensor *const *out, void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->oh * s->ow * s->m == 0) return ANVIL_OK;
    float *bias = ws;
    memset(bias, 0, sizeof(float) * (size_t)p->g.vpad);
    const float *b = conv_bias(s, in, n_in);
    if (b) memcpy(bias, b, sizeof(float) * (size_t)s->m);
    dwxn_job j = {
        p, row, in[0]->data, bias, conv_row_fusion_residual(&p->fuse, in, n_in), out[0]->data, 1};
    const int64_t fmas = s->n * s->m * s->oh * s->ow * s->kh * s->kw;
    j.parts = fmas < DWX_SERIAL_FMAS ? 1 : p->threads;
    if (j.parts > s->n * s->oh) j.parts = s->n * s->oh;
    op_parallel_for(j.parts > 1 ? ctx : NULL, (size_t)j.parts, dwxn_chunk, &j);
    return ANVIL_OK;
}

CONV_RUN_ENTRY(dwxn_run_avx512, dwxn_run(state, conv_dwx_row_avx512, in, n_in, out, ws, ctx))

CONV_RUN_ENTRY(dwxn_run_avx2, dwxn_run(state, conv_dwx_row_avx2, in, n_in, out, ws, ctx))

const kern_variant convnhwc_v_dwx_avx512 = {"dwconv_nhwc_avx512",
                                            IR_OP_CONV_NHWC,
                                            KERN_NEEDS_AVX512,
                                            dwxn_supports,
                                            dwxn_workspace,
                                            dwxn_prepare,
                                            dwxn_release,
                                            dwxn_run_avx512,
                                            conv_fuses,
                                            NULL,
                                            NULL};
const kern_variant convnhwc_v_dwx_avx2 = {"dwconv_nhwc_avx2",
                                          IR_OP_CONV_NHWC,
                                          KERN_NEEDS_AVX2,
                                          dwxn_supports,
                                          dwxn_workspace,
                                          dwxn_prepare,
                                          dwxn_release,
                                          dwxn_run_avx2,
                                          conv_fuses,
                                          NULL,
                                          NULL};
