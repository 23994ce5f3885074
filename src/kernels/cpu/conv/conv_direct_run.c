/* The run-time half of the conv family's direct kernels (conv_layout.h): the channels-last
 * depthwise and few-channel convs (conv_last_run; conv_dw_nhwc.c plans them), the NCHW depthwise
 * convs (conv_dw_run; conv_depthwise.c) and the general depthwise ones (conv_dwx_run,
 * conv_dwxn_run; conv_dwx.c). Shared by anvil's
 * variants and the libraries `anvil compile` writes, which copy this file verbatim: it sees only
 * what the emitter's shim declares. */
#include "conv_dwx.h"
#include "conv_layout.h"

#include <string.h>

/* ---- channels-last (convnhwc_depthwise_<isa>, convnhwc_smallc_direct_avx512) ---------------- */

typedef struct last_job {
    const conv_last_plan *p;
    conv_last_row_fn row;
    const float *wp, *x, *bias, *res;
    float *y;
    conv_last_row16_fn row16; /* with x16 in place of row and x (conv_last_run16), or NULL */
    const uint16_t *x16;
} last_job;

/* Thread t's share of the output rows of all images. */
static void last_chunk(void *arg, size_t begin, size_t end) {
    const last_job *j = arg;
    const conv_last_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t rows = s->n * s->oh, T = p->threads, rowf = s->ow * s->m;
    for (size_t t = begin; t < end; t++)
        for (int64_t r = rows * (int64_t)t / T; r < rows * ((int64_t)t + 1) / T; r++) {
            const int64_t img = r / s->oh, oy = r % s->oh;
            if (j->x16)
                j->row16(&p->g, j->x16 + img * s->h * s->w * s->c, j->wp, j->bias, j->y + r * rowf,
                         oy);
            else
                j->row(&p->g, j->x + img * s->h * s->w * s->c, j->wp, j->bias, j->y + r * rowf, oy);
            if (p->fuse.on && !p->act_in_regs)
                conv_row_fusion_apply(&p->fuse, j->res ? j->res + r * rowf : NULL, j->y + r * rowf,
                                      rowf);
        }
}

/* The bias is copied into the workspace, zero-padded to vpad, per run: B is an input, constant
 * in every model the pass turns but not promised to be. */
static void last_run(const conv_last_plan *p, last_job *j, const float *bias, void *ws,
                     op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->oh * s->ow * s->m == 0) return;
    float *bp = ws;
    memset(bp, 0, sizeof(float) * (size_t)p->g.vpad);
    if (bias) memcpy(bp, bias, sizeof(float) * (size_t)s->m);
    j->bias = bp;
    op_parallel_for(ctx, (size_t)p->threads, last_chunk, j);
}

void conv_last_run(const conv_last_plan *p, conv_last_row_fn row, const float *wp, const float *x,
                   const float *bias, const float *res, float *y, void *ws, op_ctx *ctx) {
    last_job j = {p, row, wp, x, NULL, res, y, NULL, NULL};
    last_run(p, &j, bias, ws, ctx);
}

void conv_last_run16(const conv_last_plan *p, conv_last_row16_fn row16, const float *wp,
                     const uint16_t *x16, const float *bias, const float *res, float *y, void *ws,
                     op_ctx *ctx) {
    last_job j = {p, NULL, wp, NULL, NULL, res, y, row16, x16};
    last_run(p, &j, bias, ws, ctx);
}

/* ---- NCHW depthwise (conv_depthwise_direct_<isa>) ------------------------------------------- */

/* The channel-lanes path's buffers per thread: the padded pixels (+1) and the output pixels
 * (rounded up to 16), 16 floats each. */
size_t conv_dw_cl_pad_bytes(const conv_dw_plan *p) {
    return ((size_t)(p->cl_pw * p->ph + 1) * 16 * sizeof(float) + 63) & ~(size_t)63;
}

size_t conv_dw_cl_slice(const conv_dw_plan *p) {
    const size_t ohw = (size_t)(p->s.oh * p->s.ow + 15) / 16 * 16;
    return p->cl ? conv_dw_cl_pad_bytes(p) + ohw * 16 * sizeof(float) : 0;
}

size_t conv_dw_slice(const conv_dw_plan *p) {
    return ((size_t)p->band_rows * (size_t)p->g.ldp * sizeof(float) + 63) & ~(size_t)63;
}

typedef struct dw_job {
    const conv_dw_plan *p;
    conv_dw_band_fn band;
    conv_dw_cl_fn cl16;
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
    const conv_dw_plan *p = j->p;
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
    const conv_dw_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t ohw = s->oh * s->ow, off = (img * s->c + c0) * ohw;
    j->cl16(&p->clg, j->x + (img * s->c + c0) * s->h * s->w, j->w + c0 * p->clg.ntaps,
            j->b ? j->b + c0 : NULL, nc, pad, out, j->y + off);
    if (p->fuse.on) dw_epilogue(j, off, nc * ohw);
}

/* Thread t's share of the items (planes, or 16-channel groups of an image), with its
 * workspace slice, whose padding is zeroed once per run. */
static void dw_chunk(void *arg, size_t begin, size_t end) {
    const dw_job *j = arg;
    const conv_dw_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t groups = (s->c + 15) / 16, T = p->threads;
    const int64_t items = s->n * (j->cl ? groups : s->c);
    const size_t stride = j->cl ? conv_dw_cl_slice(p) : conv_dw_slice(p);
    const size_t zeroed =
        j->cl ? conv_dw_cl_pad_bytes(p) : sizeof(float) * (size_t)(p->band_rows * p->g.ldp);
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

void conv_dw_run(const conv_dw_plan *p, conv_dw_band_fn band, conv_dw_cl_fn cl16, const float *x,
                 const float *w, const float *b, const float *res, float *y, void *ws,
                 op_ctx *ctx) {
    dw_job j = {p, band, cl16, x, w, b, y, ws, res, cl16 && p->cl};
    if (p->s.n * p->s.c == 0) return;
    op_parallel_for(ctx, (size_t)p->threads, dw_chunk, &j);
}

/* ---- general depthwise, NCHW (dwconv_nchw_<isa>) -------------------------------------------- */

static size_t dwx_align64(size_t x) {
    return (x + 63) & ~(size_t)63;
}

size_t conv_dwx_band_slice(const conv_dwx_plan *p) {
    return dwx_align64((size_t)p->band_rows * (size_t)p->g.ldp * sizeof(float));
}

size_t conv_dwx_cl_pad_bytes(const conv_dwx_plan *p) {
    return dwx_align64((size_t)(p->cl_pw * p->cl_ph + 1) * 16 * sizeof(float));
}

size_t conv_dwx_cl_slice(const conv_dwx_plan *p) {
    const size_t ohw = (size_t)(p->s.oh * p->s.ow + 15) / 16 * 16;
    return conv_dwx_cl_pad_bytes(p) + ohw * 16 * sizeof(float);
}

typedef struct dwx_job {
    const conv_dwx_plan *p;
    conv_dwx_band_fn band;
    conv_dw_cl_fn cl16;
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
    const conv_dwx_plan *p = j->p;
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
    const conv_dwx_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t groups = (s->c + 15) / 16, img = q / groups, c0 = q % groups * 16;
    const int nc = (int)(s->c - c0 < 16 ? s->c - c0 : 16);
    const int64_t ohw = s->oh * s->ow, off = (img * s->c + c0) * ohw;
    j->cl16(&p->clg, j->x + (img * s->c + c0) * s->h * s->w, j->w + c0 * p->g.ntaps,
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
    const conv_dwx_plan *p = j->p;
    const int64_t items = dwx_items(j), T = j->parts;
    const size_t stride = j->cl ? conv_dwx_cl_slice(p) : conv_dwx_band_slice(p);
    const size_t zeroed = j->cl ? conv_dwx_cl_pad_bytes(p) : conv_dwx_band_slice(p);
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

void conv_dwx_run(const conv_dwx_plan *p, conv_dwx_band_fn band, conv_dw_cl_fn cl16, const float *x,
                  const float *w, const float *b, const float *res, float *y, void *ws,
                  op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->m == 0) return;
    dwx_job j = {p, band, cl16, x, w, b, y, ws, res, cl16 && p->cl, 1};
    const int64_t fmas = s->n * s->m * s->oh * s->ow * p->g.ntaps;
    j.parts = fmas < CONV_DWX_SERIAL_FMAS ? 1 : p->threads;
    if (j.parts > dwx_items(&j)) j.parts = dwx_items(&j);
    op_parallel_for(j.parts > 1 ? ctx : NULL, (size_t)j.parts, dwx_chunk, &j);
}

/* ---- general depthwise, NHWC (dwconv_nhwc_<isa>) -------------------------------------------- */

typedef struct dwxn_job {
    const conv_dwxn_plan *p;
    conv_dwx_row_fn row;
    const float *wp, *x, *bias, *res;
    float *y;
    int64_t parts;
} dwxn_job;

/* Part t's share of the output rows of all images, each row's epilogue right after it. */
static void dwxn_chunk(void *arg, size_t begin, size_t end) {
    const dwxn_job *j = arg;
    const conv_dwxn_plan *p = j->p;
    const conv_shape *s = &p->s;
    const int64_t rows = s->n * s->oh, T = j->parts, rowf = s->ow * s->m;
    for (size_t t = begin; t < end; t++)
        for (int64_t r = rows * (int64_t)t / T; r < rows * ((int64_t)t + 1) / T; r++) {
            j->row(&p->g, j->x + r / s->oh * s->h * s->w * s->c, j->wp, j->bias, j->y + r * rowf,
                   r % s->oh);
            if (p->fuse.on)
                conv_row_fusion_apply(&p->fuse, j->res ? j->res + r * rowf : NULL, j->y + r * rowf,
                                      rowf);
        }
}

/* The bias is copied into the workspace per run: B is an input, constant in every model the
 * layout pass turns but not promised to be. */
void conv_dwxn_run(const conv_dwxn_plan *p, conv_dwx_row_fn row, const float *wp, const float *x,
                   const float *bias, const float *res, float *y, void *ws, op_ctx *ctx) {
    const conv_shape *s = &p->s;
    if (s->n * s->oh * s->ow * s->m == 0) return;
    float *bp = ws;
    memset(bp, 0, sizeof(float) * (size_t)p->g.vpad);
    if (bias) memcpy(bp, bias, sizeof(float) * (size_t)s->m);
    dwxn_job j = {p, row, wp, x, bp, res, y, 1};
    const int64_t fmas = s->n * s->m * s->oh * s->ow * s->kh * s->kw;
    j.parts = fmas < CONV_DWX_SERIAL_FMAS ? 1 : p->threads;
    if (j.parts > s->n * s->oh) j.parts = s->n * s->oh;
    op_parallel_for(j.parts > 1 ? ctx : NULL, (size_t)j.parts, dwxn_chunk, &j);
}
