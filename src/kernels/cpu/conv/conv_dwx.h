/* Depthwise convs of any kernel size, stride, dilation and padding (conv_dwx.c, the kernels in
 * conv_dwx_tmpl.h instantiated by conv_dwx_avx512.c and conv_dwx_avx2.c): the geometry the
 * variants compute once in prepare and the ISA kernels' entry points. The 3x3 / 5x5, stride 1-2,
 * undilated kernels of conv_depthwise.c and conv_dw_nhwc.c unroll their taps at compile time;
 * these take the taps from a table instead, so one instance per ISA serves every shape.
 *
 * Copied into the libraries `anvil compile` writes with the kernels (conv_layout.h's rule: no IR
 * types); the variants are declared in conv.h.
 *
 * Every pointer argument is borrowed for the duration of the call. */
#ifndef ANVIL_CONV_DWX_H
#define ANVIL_CONV_DWX_H

#include "conv_layout.h"

/* The largest kernel side, stride and dilation the variants take (far beyond real models; they
 * bound the tap table and the padded rows). */
#define CONV_DWX_MAX_K 16
#define CONV_DWX_MAX_STRIDE 16
#define CONV_DWX_MAX_DILATION 256

/* NCHW: a plane is computed in bands of output rows from padded rows, as in conv_dw_geom
 * (conv_layout.h), generalised to any stride s along a row: a padded row is split into its s
 * phases, padded column q at row[(q % s) * lp + q / s], so the taps of consecutive outputs, columns
 * ox * s + kx * dw, are consecutive floats of one phase. Rows and columns in the padding are
 * zeros; phases are readable a vector past the last output's last tap. */
typedef struct conv_dwx_rows {
    int64_t h, w;       /* input plane */
    int64_t pt;         /* top padding */
    int64_t q0, n;      /* input column 0 lands on padded column q0; n input columns are copied */
    int64_t sy, sx;     /* strides; sx phases per padded row */
    int64_t lp;         /* floats per phase, a multiple of 16 */
    int64_t ldp;        /* padded row stride: sx * lp */
    int64_t ext;        /* padded rows one output row reads: (kh - 1) * dh + 1 */
    int64_t ow;         /* output width */
    int64_t ntaps;      /* kh * kw */
    const int64_t *off; /* [ntaps]: tap ky*kw + kx's offset from its output's first padded float,
                           ky*dh*ldp + (kx*dw % sx)*lp + kx*dw / sx */
} conv_dwx_rows;

/* Output rows [r0, r0 + nr) of one plane: copies the (nr - 1) * sy + ext padded rows they read
 * from plane x (h x w) into xb (rows of ldp floats, whose pad columns the caller zeroed), then
 * y[oy - r0][ox] = bias + sum over taps t of w[t] * xb[(oy - r0) * sy * ldp + ox + off[t]]. */
typedef void (*conv_dwx_band_fn)(const conv_dwx_rows *g, const float *x, float *xb, const float *w,
                                 float bias, float *y, int64_t r0, int64_t nr);
void conv_dwx_band_avx512(const conv_dwx_rows *g, const float *x, float *xb, const float *w,
                          float bias, float *y, int64_t r0, int64_t nr);
void conv_dwx_band_avx2(const conv_dwx_rows *g, const float *x, float *xb, const float *w,
                        float bias, float *y, int64_t r0, int64_t nr);

/* NHWC: X [h, w, c] of one image read in place, weights packed tap-major [kh*kw][vpad] (vpad:
 * c rounded up to 16, zeros past c), bias [vpad]. Output columns [ox_lo, ox_hi) have every tap
 * inside the input's columns; the others take only their taps inside. */
typedef struct conv_dwx_last {
    int64_t h, w, c, vpad;
    int64_t ow;
    int64_t kh, kw, sh, sw, dh, dw, pt, pl;
    int64_t ox_lo, ox_hi;
} conv_dwx_last;

/* Output row oy of one image: y[ox][o] (y: the row, ow * c floats) for every ox and channel. */
typedef void (*conv_dwx_row_fn)(const conv_dwx_last *g, const float *x, const float *wp,
                                const float *bp, float *y, int64_t oy);
void conv_dwx_row_avx512(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy);
void conv_dwx_row_avx2(const conv_dwx_last *g, const float *x, const float *wp, const float *bp,
                       float *y, int64_t oy);

/* The largest kh * kw that conv_dw_cl16_avx512 (conv_layout.h) takes in this build: the NCHW
 * variant sends small planes of any stride and dilation through it (its index arrays carry both).
 */
#define CONV_DWX_CL_MAX_TAPS 121

/* The channel-lanes kernel's index tables for s (any stride and dilation) over a padded plane of
 * pw x ph pixels (+1: the pixel that takes the input pixels no output reads): one malloc'd block,
 * returned in *idx for the caller to free, that g's arrays point into. */
anvil_status conv_dwx_cl_build(const conv_shape *s, int64_t pw, int64_t ph, int32_t **idx,
                               conv_dw_cl_geom *g);

/* ---- the variants' plans and runs (conv_direct_run.c; conv_dwx.c plans) ---------------------
 * Shared by anvil's variants and the libraries `anvil compile` writes, so both run one code. */

/* Problems with fewer multiply-adds than this run on the calling thread: waking the pool costs
 * more than it saves. */
#define CONV_DWX_SERIAL_FMAS ((int64_t)1 << 18)

/* The plan of dwconv_nchw_<isa>: each plane in bands of output rows read from padded rows, or,
 * for small planes, 16 channels at a time through the channel-lanes kernel. */
typedef struct conv_dwx_plan {
    conv_shape s;
    int64_t mult; /* output channels per input channel */
    conv_dwx_rows g;
    int64_t off[CONV_DWX_MAX_K * CONV_DWX_MAX_K]; /* g.off points here (or at a copy of it) */
    int threads;
    int64_t band, band_rows; /* output rows per band; padded rows it reads (the slice) */
    conv_row_fusion fuse;
    /* Small planes through the channel-lanes kernel (AVX-512 only, multiplier 1): a padded
     * plane of cl_pw x cl_ph pixels; clg's tables are owned by whoever made the plan. */
    bool cl;
    int64_t cl_pw, cl_ph;
    conv_dw_cl_geom clg;
} conv_dwx_plan;
/* The workspace per thread of the band path and of the channel-lanes path (the padded pixels
 * (+1, the trash pixel) and the output pixels rounded up to 16, 16 floats each), and the
 * channel-lanes slice's padded part, which each run zeroes. */
size_t conv_dwx_band_slice(const conv_dwx_plan *p);
size_t conv_dwx_cl_slice(const conv_dwx_plan *p);
size_t conv_dwx_cl_pad_bytes(const conv_dwx_plan *p);
/* Y = conv(X) for p with band (the ISA's band kernel) and cl16 (the channel-lanes kernel, taken
 * where p->cl; NULL: never), w the weights [m][kh][kw], b (m) and res (the fused residual, NCHW
 * like y) each NULL when absent. ws: threads * the larger slice, 64-byte aligned. */
void conv_dwx_run(const conv_dwx_plan *p, conv_dwx_band_fn band, conv_dw_cl_fn cl16, const float *x,
                  const float *w, const float *b, const float *res, float *y, void *ws,
                  op_ctx *ctx);

/* The plan of dwconv_nhwc_<isa>: threads take whole output rows, each row's fused epilogue
 * right after it. */
typedef struct conv_dwxn_plan {
    conv_shape s;
    conv_dwx_last g;
    int threads;
    conv_row_fusion fuse;
} conv_dwxn_plan;
/* Y = conv(X) for p with row (the ISA's kernel), wp the weights packed [kh*kw][vpad], bias (m)
 * and res (the fused residual, NHWC like y) each NULL when absent. ws: vpad floats, 64-byte
 * aligned (the bias zero-padded). */
void conv_dwxn_run(const conv_dwxn_plan *p, conv_dwx_row_fn row, const float *wp, const float *x,
                   const float *bias, const float *res, float *y, void *ws, op_ctx *ctx);

#endif
