/* The compute-only half of the conv family: the geometry of a planned conv as plain data, the
 * layout helpers (im2col, implicit-GEMM panel packing, padded rows) and the run-time part of the
 * variants that `anvil compile` can emit, each a function of its prepared plan.
 *
 * Both anvil (through conv.h, whose variants fill these plans in prepare from the ir_node) and the
 * libraries `anvil compile` writes (which bake the same plans into C initializers and copy this
 * header and conv_layout.c verbatim) call these functions, so what the runtime runs and what the
 * emitted code runs cannot drift apart. Hence this header and conv_layout.c see only what the
 * emitter's shim (src/runtime/emit_shim) declares: gemm.h, op_ctx / op_parallel_for, ir_act; no
 * ir_node, op_tensor or kern_node in any function body.
 *
 * Every pointer argument is borrowed for the duration of the call unless said otherwise. */
#ifndef ANVIL_KERNELS_CONV_LAYOUT_H
#define ANVIL_KERNELS_CONV_LAYOUT_H

#include "kernels/cpu/gemm/gemm.h"

#include <stdbool.h>
#include <stdint.h>

/* A 2-D fp32 convolution with every dimension known (NCHW: X [n, c, h, w], W [m, c/group, kh, kw],
 * Y [n, m, oh, ow]). Pads are resolved (auto_pad applied). */
typedef struct conv_shape {
    int64_t n, c, h, w; /* input */
    int64_t m, oh, ow;  /* output channels and spatial size */
    int64_t kh, kw;     /* kernel */
    int64_t sh, sw;     /* strides */
    int64_t dh, dw;     /* dilations */
    int64_t pt, pl;     /* pads at the top / left (bottom / right follow from oh, ow) */
    int64_t group;
    int64_t cg, mg; /* input / output channels per group */
    bool has_bias;
} conv_shape;

/* The depth of one group's GEMM: cg * kh * kw. */
static inline int64_t conv_kdim(const conv_shape *s) {
    return s->cg * s->kh * s->kw;
}

/* im2col of one group of one image for output pixels [p0, p0 + np): col[k][j] (row stride ldc)
 * = x[c][oy*sh - pt + ky*dh][ox*sw - pl + kx*dw] (0 outside), k = (c*kh + ky)*kw + kx, pixel
 * p0 + j = oy*ow + ox; rows [k0, k1) only. x points at the group's first channel. */
void conv_im2col(const conv_shape *s, const float *x, int64_t k0, int64_t k1, int64_t p0,
                 int64_t np, float *col, int64_t ldc);

/* Packs the im2col of output pixels [p0, p0 + np) straight into gemm.h's packed-B layout for
 * kernel k: ceil(np/NR) panels of kdim x NR, k-major, zero columns past np. dst holds
 * ceil(np/NR) * NR * kdim floats. */
void conv_pack_b_panels(const conv_shape *s, const gemm_kernel *k, const float *x, int64_t p0,
                        int64_t np, float *dst);

/* ---- the GEMM variants (conv_1x1_gemm, conv_im2col_gemm, conv_implicit_gemm) ----------------
 * Their plan, as conv_variants.c makes it for a node (the formulations are described there). */
typedef enum conv_gemm_kind { CONV_GEMM_1X1, CONV_GEMM_IM2COL, CONV_GEMM_IMPLICIT } conv_gemm_kind;

typedef struct conv_gemm_plan {
    conv_shape s;
    conv_gemm_kind kind;
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads; /* the workspace's slices; the run splits its work into this many parts */
    bool batch_parallel;
    int64_t nblk;           /* implicit: output pixels per packed block (multiple of NR) */
    size_t gemm_ws, col_ws; /* per-thread bytes, 64-aligned */
} conv_gemm_plan;

/* Y = conv(X) for p: pa, the weights packed per group (gemm_pack_a of [mg, kdim] with p->k), or
 * NULL to read w [m, cg, kh, kw] in place; ep, the fused activation (its pointers unused: bias
 * and the residual res, NCHW like y, are passed here; each may be NULL). ws: threads *
 * (gemm_ws + col_ws) bytes, 64-byte aligned. */
void conv_gemm_run(const conv_gemm_plan *p, const gemm_packed *pa, const gemm_epilogue *ep,
                   const float *x, const float *w, const float *bias, const float *res, float *y,
                   void *ws, op_ctx *ctx);

/* ---- fused epilogues of the direct variants ------------------------------------------------
 * A fused epilogue that a direct variant (depthwise, few channels, Winograd) applies itself to
 * runs of output it has just written, while they are in L1. Set by conv_row_fusion_init (conv.h)
 * in prepare: off where the node has no fusion or the variant does not apply it (the runtime then
 * does, so run must not). */
typedef struct conv_row_fusion {
    bool on;
    int residual; /* input index of the fused residual, or -1 */
    gemm_epilogue ep;
    gemm_tile_epilogue_fn fn;
} conv_row_fusion;
/* Applies f to the n consecutive outputs at y; res: their n residual values, or NULL. */
void conv_row_fusion_apply(const conv_row_fusion *f, const float *res, float *y, int64_t n);

/* ---- padded rows (the direct kernels) -------------------------------------------------------
 * A depthwise conv with a kh x kw kernel (3 or 5) reads its input through padded rows: the input
 * rows a band of outputs needs, with the zero padding written out, row stride ldp, so that every
 * tap load is unconditional. At stride 1 padded column q is row[q]. At stride 2 a row is split
 * into its even columns followed by its odd ones (q at row[q / 2] when q is even, at
 * row[half + q / 2] when odd), so that the taps of consecutive outputs, columns 2*ox + kx, are
 * consecutive floats again instead of needing a gather. Its geometry: */
typedef struct conv_dw_geom {
    int64_t h, w;   /* input plane */
    int64_t pt;     /* top padding */
    int64_t q0, n;  /* input column 0 lands on padded column q0; n input columns are copied */
    int64_t ldp;    /* padded row stride, a multiple of 16 floats */
    int64_t half;   /* stride 2: where the odd columns start, a multiple of 16; 0 at stride 1 */
    int64_t sy, sx; /* strides */
    int64_t kh, kw; /* kernel: 3 or 5 each */
    int64_t ow;     /* output width */
} conv_dw_geom;
/* The padded rows' geometry of s (kernel, strides and padding; the buffer's row stride and, at
 * stride 2, its halves), for a kernel whose taps reach at most 15 floats past a vector. */
void conv_dw_geom_init(const conv_shape *s, conv_dw_geom *g);
/* Floats a padded row must be readable past the last output's last tap (a vector and a margin). */
#define CONV_DW_PAD_FLOATS 64

/* ---- few input channels (conv_smallc.c, conv_sc_avx512.c, conv_sc_avx2.c) -------------------
 * A network's first conv (3 input channels: RGB) has a GEMM depth of only c*kh*kw = 27..147, so
 * im2col or panel packing moves about as many bytes as the GEMM computes with. It is computed
 * directly instead: vectors of output pixels along a row (the input rows copied into padded,
 * at stride 2 deinterleaved rows as in conv_dw_geom), times blocks of CONV_SC_MB_<isa> output
 * channels whose weights are broadcast. */
typedef struct conv_sc_geom {
    conv_dw_geom g;    /* one channel's padded rows; kh, kw up to CONV_SC_MAX_K */
    int64_t c;         /* input channels */
    int64_t band_rows; /* padded rows per channel in the band buffer */
    int64_t m;         /* output channels */
    int64_t ohw;       /* output pixels per plane: the distance between output channels */
} conv_sc_geom;
#define CONV_SC_MAX_K 11
#define CONV_SC_MB_AVX512 8
#define CONV_SC_MB_AVX2 4
/* Output rows [r0, r0 + nr) of the output channel blocks [b0, b1) of one image: copies the padded
 * rows they read of x's c planes into xb (channel ci's rows at xb + ci * band_rows * ldp, pad
 * columns zeroed by the caller), then y[m][oy][ox] = bias[m] + sum over ci, ky, kx of
 * W[m][ci][ky][kx] * x[ci][oy*sy + ky - pt][ox*sx + kx - pl]. wp: the packed weights, per block
 * of MB output channels [c][kh][kw][MB] (zero past m); bias: m values or NULL; y: the image's
 * output, channel j at y + j * ohw. */
typedef void (*conv_sc_band_fn)(const conv_sc_geom *g, const float *x, float *xb, const float *wp,
                                const float *bias, float *y, int64_t r0, int64_t nr, int64_t b0,
                                int64_t b1);
void conv_sc_band_avx512(const conv_sc_geom *g, const float *x, float *xb, const float *wp,
                         const float *bias, float *y, int64_t r0, int64_t nr, int64_t b0,
                         int64_t b1);
void conv_sc_band_avx2(const conv_sc_geom *g, const float *x, float *xb, const float *wp,
                       const float *bias, float *y, int64_t r0, int64_t nr, int64_t b0, int64_t b1);

/* The plan of conv_smallc_direct_<isa> (conv_smallc.c makes it). */
typedef struct conv_sc_plan {
    conv_shape s;
    conv_sc_geom g;
    int mb;         /* output channels per block */
    int64_t nblk;   /* blocks of mb output channels */
    int64_t band;   /* output rows per band */
    int64_t rsplit; /* row ranges per image, when the blocks are fewer than the threads */
    int threads;
    conv_row_fusion fuse;
} conv_sc_plan;

/* Bytes of one thread's band buffer (the workspace holds threads of them). */
size_t conv_sc_slice(const conv_sc_plan *p);
/* Y = conv(X) for p with band (the ISA kernel of p->mb), wp the packed weights (nblk x
 * [c][kh][kw][mb], zero past m), bias (m) and res (the fused residual, NCHW like y) each NULL
 * when absent. ws: threads * conv_sc_slice bytes, 64-byte aligned. */
void conv_sc_run(const conv_sc_plan *p, conv_sc_band_fn band, const float *wp, const float *x,
                 const float *bias, const float *res, float *y, void *ws, op_ctx *ctx);

/* ---- transposes (NCHW <-> NHWC around the channels-last variants) --------------------------- */

/* dst[c * lds + r] = src[r * ldx + c] for rows x cols (elt_transpose_f32's contract). */
typedef void (*conv_transpose_rows_fn)(float *dst, const float *src, size_t rows, size_t cols,
                                       size_t ldx, size_t lds);
/* The scalar loop: for the emitted libraries, which do not ship the eltwise family's transposer (a
 * transpose moves floats exactly, so the results are the same bits). */
void conv_transpose_rows_plain(float *dst, const float *src, size_t rows, size_t cols, size_t ldx,
                               size_t lds);
/* Transposes `mats` row-major [rows, cols] matrices at src into [cols, rows] at dst, split over
 * ctx's threads by bands of rows (all matrices together), each band transposed by fn. */
void conv_transpose_run(const float *src, float *dst, int64_t mats, int64_t rows, int64_t cols,
                        conv_transpose_rows_fn fn, op_ctx *ctx);

/* ---- output regions (conv_regions.c: conv_nhwc_regions, convnhwc_regions) -------------------
 * The plan: the output split into regions that each see one set of valid taps, each a GEMM whose
 * B (its taps' rows of the weights) is packed. */
#define CONV_REGIONS_MAX 64

typedef struct conv_region {
    int64_t y0, y1, x0, x1; /* output rectangle */
    uint32_t ym, xm;        /* the valid taps: rows ky with bit ky of ym set by columns kx of xm */
    int n_taps;             /* popcount(ym) * popcount(xm) */
    gemm_blocking blk;
    gemm_packed pb; /* [n_taps * cg, m] */
} conv_region;

typedef struct conv_regions_plan {
    conv_shape s;
    bool last; /* anvil.ConvNhwc: X and Y channels-last already */
    int threads, n;
    conv_region r[CONV_REGIONS_MAX];
    const gemm_kernel *k;
    size_t xt_bytes, yt_bytes, gemm_bytes, table_bytes, block_bytes;
} conv_regions_plan;

/* Y = conv(X) for p, with ep the fused activation (its pointers unused; bias, m values or NULL,
 * is the epilogue's column bias) and tr the transposer of the NCHW conv's transposes. ws:
 * xt_bytes + yt_bytes + gemm_bytes + table_bytes + block_bytes, 64-byte aligned. */
void conv_regions_run(const conv_regions_plan *p, const gemm_epilogue *ep,
                      conv_transpose_rows_fn tr, const float *x, const float *bias, float *y,
                      void *ws, op_ctx *ctx);

#endif
