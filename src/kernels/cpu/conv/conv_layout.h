/* The compute-only half of the conv family: the geometry of a planned conv as plain data, the
 * layout helpers (im2col, implicit-GEMM panel packing, padded rows) and the run-time part of the
 * variants that `anvil compile` can emit, each a function of its prepared plan.
 *
 * Both anvil (through conv.h, whose variants fill these plans in prepare from the ir_node) and the
 * libraries `anvil compile` writes (which bake the same plans into C initializers and copy this
 * header and conv_layout.c verbatim) call these functions, so what the runtime runs and what the
 * emitted code runs cannot drift apart. Hence this header and conv_layout.c see only what the
 * emitter's shim (src/emit/shim) declares: gemm.h, op_ctx / op_parallel_for, ir_act; no
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

/* The most groups whose weights conv_gemm_run packs once per run (pa_ws). */
#define CONV_PREPACK_GROUPS 16

typedef struct conv_gemm_plan {
    conv_shape s;
    conv_gemm_kind kind;
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads; /* the workspace's slices; the run splits its work into this many parts */
    bool batch_parallel;
    int64_t nblk;           /* implicit: output pixels per packed block (multiple of NR) */
    size_t gemm_ws, col_ws; /* per-thread bytes, 64-aligned */
    /* > 0: W changes between runs but serves every image of one, so each run packs it once into
     * this many bytes of the workspace (after the threads' slices), mg rows per group at a
     * 64-aligned stride of pa_ws / group; 0: pa or W read by each image's GEMM */
    size_t pa_ws;
} conv_gemm_plan;

/* Y = conv(X) for p: pa, the weights packed per group (gemm_pack_a of [mg, kdim] with p->k), or
 * NULL to read w [m, cg, kh, kw] in place; ep, the fused activation (its pointers unused: bias
 * and the residual res, NCHW like y, are passed here; each may be NULL). ws: threads *
 * (gemm_ws + col_ws) + pa_ws bytes, 64-byte aligned. */
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

/* ---- pixels-as-rows GEMMs over channels-last images (conv_nhwc_run.c; conv_nhwc.c plans) ----
 * Weights for conv_nhwc_run: W [m, cg, kh, kw] rearranged to B [(ky*kw + kx)*cg + c, m_g] per
 * group and packed once. Owned by the caller; free with conv_nhwc_weights_free (conv.h). */
typedef struct conv_nhwc_weights {
    const gemm_kernel *k;
    gemm_blocking blk;
    int64_t groups;
    gemm_packed *pb; /* one per group */
    bool indirect;   /* A is an implicit GEMM's pointer table (gemm_problem.a_ind), not an im2col */
    float *zeros;    /* owned, indirect only: cg zeros, the segment of every tap in the padding */
} conv_nhwc_weights;

/* Whether A is X itself: a 1x1 stride-1 unpadded conv. */
static inline bool conv_nhwc_direct(const conv_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
           s->oh == s->h && s->ow == s->w;
}
/* Scratch bytes conv_nhwc_run needs (with threads slices). */
size_t conv_nhwc_workspace(const conv_shape *s, const conv_nhwc_weights *pw, int threads);
/* Y [n, oh, ow, m] = conv(X [n, h, w, c]) + bias (NULL: none): each image is a GEMM with
 * A [oh*ow, kh*kw*cg] = X itself for 1x1 stride-1 unpadded convs, else the NHWC im2col, read
 * in place through a table of a pointer per pixel and tap where the channels are many
 * (pw->indirect), copied where they are few. */
void conv_nhwc_run(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                   const float *bias, float *y, void *ws, op_ctx *ctx);
/* The same with the activation act (its pointers unused; NULL: none) in the GEMM epilogue and the
 * residual res (NULL: none), which is NHWC like y when res_nhwc, else NCHW [n, m, oh, ow]. */
void conv_nhwc_run_fused(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                         const float *bias, const gemm_epilogue *act, const float *res,
                         bool res_nhwc, float *y, void *ws, op_ctx *ctx);
/* conv_nhwc_run_fused on activations stored in bf16: x16 (NULL: x is read) in place of X, which
 * needs A to be X itself (conv_nhwc_direct) and a tile that takes bf16 (gemm_takes_bf16), and
 * y16 (NULL: y is written) in place of Y, which needs that tile and K in one block
 * (pw->blk.kc >= conv_kdim), so that no partial sums wait between blocks. Both borrowed. */
void conv_nhwc_run16(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                     const uint16_t *x16, const float *bias, const gemm_epilogue *act,
                     const float *res, bool res_nhwc, float *y, uint16_t *y16, void *ws,
                     op_ctx *ctx);

/* The plan of conv_nhwc_im2col_gemm (Conv: NCHW, transposed in and out through the workspace) and
 * convnhwc_gemm (anvil.ConvNhwc: last, no transposes). */
typedef struct conv_nhwc_plan {
    conv_shape s;
    bool last;
    int threads;
    size_t xt_bytes, yt_bytes, run_bytes; /* the workspace: X^T, Y^T, conv_nhwc_run's */
} conv_nhwc_plan;
/* Y = conv(X) for p with the packed weights pw, act and res as in conv_nhwc_run_fused (res NCHW
 * unless p->last) and tr the transposer of the NCHW conv. ws: xt_bytes + yt_bytes + run_bytes. */
void conv_nhwc_plan_run(const conv_nhwc_plan *p, const conv_nhwc_weights *pw,
                        const gemm_epilogue *act, conv_transpose_rows_fn tr, const float *x,
                        const float *bias, const float *res, float *y, void *ws, op_ctx *ctx);

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
    /* By tap: each entry is one tap over the outputs it reads the image for, and the entries'
     * products are summed into Y (entry 0 writes Y with the bias where it covers all of it, the
     * others add through the block; the activation runs last). Else each entry is a region that
     * computes its outputs whole. */
    bool by_tap;
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

/* ---- depthwise (conv_depthwise.c, conv_dw_avx512.c, conv_dw_avx2.c) ------------------------- */

/* Whether s is a depthwise conv the direct kernels take, NCHW and NHWC alike: group == C == M,
 * kernels 3 or 5 along each axis, strides 1 or 2, no dilation. */
static inline bool conv_dw_shape(const conv_shape *s) {
    return s->group == s->c && s->m == s->c && (s->kh == 3 || s->kh == 5) &&
           (s->kw == 3 || s->kw == 5) && (s->sh == 1 || s->sh == 2) && (s->sw == 1 || s->sw == 2) &&
           s->dh == 1 && s->dw == 1;
}
/* The channels-last depthwise kernel (conv_dwn_tmpl.h) takes those and, at stride 1, dilation 2
 * (DeepLabV3's and LR-ASPP's MobileNetV3 backbones): a tap is one load at any offset. */
static inline bool conv_dwn_shape(const conv_shape *s) {
    if (s->dh == 1 && s->dw == 1) return conv_dw_shape(s);
    return s->group == s->c && s->m == s->c && (s->kh == 3 || s->kh == 5) &&
           (s->kw == 3 || s->kw == 5) && s->sh == 1 && s->sw == 1 && s->dh == 2 && s->dw == 2;
}
/* Its compile-time instances, X(KH, KW, SX, DX): those of CONV_DW_INSTANCES with DX = 1, and the
 * dilated ones. */
#define CONV_DWN_INSTANCES(X)                                                                      \
    X(3, 3, 1, 1)                                                                                  \
    X(3, 3, 2, 1)                                                                                  \
    X(5, 5, 1, 1)                                                                                  \
    X(5, 5, 2, 1)                                                                                  \
    X(3, 5, 1, 1)                                                                                  \
    X(3, 5, 2, 1)                                                                                  \
    X(5, 3, 1, 1)                                                                                  \
    X(5, 3, 2, 1)                                                                                  \
    X(3, 3, 1, 2)                                                                                  \
    X(5, 5, 1, 2)
/* Those kernels' compile-time instances, X(KH, KW, SX) (SX the stride along a row): each
 * instance file dispatches on this list. */
#define CONV_DW_INSTANCES(X)                                                                       \
    X(3, 3, 1) X(3, 3, 2) X(5, 5, 1) X(5, 5, 2) X(3, 5, 1) X(3, 5, 2) X(5, 3, 1) X(5, 3, 2)

/* The padded rows' geometry is conv_dw_geom (above). Output rows [r0, r0 + nr) of one
 * plane: copies the padded input rows they read from plane x (h x w) into xb ((nr - 1) * sy + kh
 * rows of ldp floats, whose pad columns the caller zeroed), then y[oy - r0][ox] = bias + sum
 * w[ky][kx] * xb[(oy - r0) * sy + ky][column ox * sx + kx]. Rows are read a full vector past the
 * last output's last tap (CONV_DW_PAD_FLOATS). */
typedef void (*conv_dw_band_fn)(const conv_dw_geom *g, const float *x, float *xb, const float *w,
                                float bias, float *y, int64_t r0, int64_t nr);
void conv_dw_band_avx512(const conv_dw_geom *g, const float *x, float *xb, const float *w,
                         float bias, float *y, int64_t r0, int64_t nr);
void conv_dw_band_avx2(const conv_dw_geom *g, const float *x, float *xb, const float *w, float bias,
                       float *y, int64_t r0, int64_t nr);
/* Small planes (up to 28x28) instead go 16 channels at a time with the channels in the vector
 * lanes (AVX-512): along a 7-wide row most lanes would idle and every tap load would straddle
 * cache lines. The 16 planes are transposed into a zero-padded pixel-major buffer, each output
 * pixel is then kh*kw aligned FMAs on full vectors, and the result is transposed back. Pixel
 * indices are precomputed, so the kernel needs no shape arithmetic: */
typedef struct conv_dw_cl_geom {
    int64_t hw, ohw;       /* input and output pixels per plane */
    int64_t ntaps;         /* kh * kw, at most 25 */
    const int32_t *in_at;  /* [hw]: the padded pixel each input pixel goes to */
    const int32_t *out_at; /* [ohw rounded up to 8, the last repeated]: each output pixel's
                              first tap, (oy*sh)*pw + ox*sw, in padded pixels */
    const int32_t *tap_at; /* [ntaps]: tap ky*kw + kx's offset from it, ky*pw + kx */
} conv_dw_cl_geom;
/* nc <= 16 channels: planes x (hw floats each, consecutive), weights w (ntaps per channel),
 * bias (nc, or NULL) -> planes y (ohw floats each). pad: the padded buffer, 16 floats per padded
 * pixel, 64-byte aligned, its border zeroed by the caller (only in_at pixels are written); out:
 * 16 floats per output pixel for ohw rounded up to 16, 64-byte aligned. */
void conv_dw_cl16_avx512(const conv_dw_cl_geom *g, const float *x, const float *w,
                         const float *bias, int nc, float *pad, float *out, float *y);
/* Channels-last (anvil.ConvNhwc) direct kernels (conv_dw_nhwc.c), reading X [h, w, c] of one
 * image in place: depthwise (conv_dwn_tmpl.h, m == c), with weights packed tap-major
 * [kh*kw][vpad]; few input channels (conv_scn_avx512.c), weights packed [kh][kw][c][vpad]; and
 * grouped (conv_gcn_avx512.c, group > 1), weights packed per 16 output channels
 * [vpad / 16][kh][kw][conv_gcn_nin][16]. vpad is m rounded up to 16; the bias is [vpad]; both are
 * zero past m. Output columns [ox_lo, ox_hi) have every tap inside the input's columns. */
typedef struct conv_last_geom {
    int64_t h, w, c, m, vpad;
    int64_t oh, ow;
    int64_t kh, kw, sh, sw, pt, pl;
    int64_t dh, dw; /* dilations (1: none); the depthwise kernel only */
    int64_t ox_lo, ox_hi;
    /* The depthwise kernel's fused piecewise-linear activation, applied in registers before
     * each store: y = (act_mul ? y : 1) * min(act_hi, max(act_lo, act_s * y + act_t)); none
     * when act_on is false (ReLU, Clip, HardSigmoid and HardSwish all take this form). */
    bool act_on, act_mul;
    float act_s, act_t, act_lo, act_hi;
    int64_t group; /* the grouped kernel's groups (c and m multiples of it); 0 for the others */
} conv_last_geom;
/* The grouped kernel's block b of 16 output channels: its first input channel (its first
 * group's) in *cb, and in *nin how many (its groups' channels; fewer in a last block of fewer
 * lanes). */
static inline void conv_gcn_span(const conv_last_geom *g, int64_t b, int64_t *cb, int64_t *nin) {
    const int64_t cg = g->c / g->group, mg = g->m / g->group;
    const int64_t o0 = b * 16, o1 = o0 + 16 < g->m ? o0 + 16 : g->m;
    *cb = o0 / mg * cg;
    *nin = ((o1 - 1) / mg + 1) * cg - *cb;
}
/* The grouped kernel's input channels per block of 16 output channels, the most any block has:
 * a block covers the whole groups its lanes touch. */
static inline int64_t conv_gcn_nin(const conv_last_geom *g) {
    int64_t most = 0;
    for (int64_t b = 0; b * 16 < g->m; b++) {
        int64_t cb, nin;
        conv_gcn_span(g, b, &cb, &nin);
        if (nin > most) most = nin;
    }
    return most;
}
/* Output row oy of one image: y[ox][o] (y: the row, ow*m floats) for every ox and channel o. */
typedef void (*conv_last_row_fn)(const conv_last_geom *g, const float *x, const float *wp,
                                 const float *bp, float *y, int64_t oy);
void conv_dwn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy);
void conv_dwn_row_avx2(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                       float *y, int64_t oy);
void conv_scn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy);
void conv_gcn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy);
/* The same over X stored in bf16 (the depthwise kernel only, conv_dw16_avx512.c): fp32 weights,
 * bias, arithmetic and output. */
typedef void (*conv_last_row16_fn)(const conv_last_geom *g, const uint16_t *x, const float *wp,
                                   const float *bp, float *y, int64_t oy);
void conv_dwn_row16_avx512(const conv_last_geom *g, const uint16_t *x, const float *wp,
                           const float *bp, float *y, int64_t oy);
/* The grouped kernel over X stored in bf16 with vdpbf16ps (conv_gcn_avx512bf16.c): wp holds
 * pairs of bf16 weights, one per 32 bits, [vpad / 16][kh][kw][conv_gcn_nin / 2][16]. */
void conv_gcn_row16_avx512bf16(const conv_last_geom *g, const uint16_t *x, const float *wp,
                               const float *bp, float *y, int64_t oy);

/* The plan of the channels-last direct variants (conv_dw_nhwc.c makes it): threads take whole
 * output rows, and each row's fused epilogue (fuse, NHWC residual) runs right after it unless
 * act_in_regs (the fusion is the kernel's in-register activation, g.act_*, alone). */
typedef struct conv_last_plan {
    conv_shape s;
    conv_last_geom g;
    int threads;
    conv_row_fusion fuse;
    bool act_in_regs;
} conv_last_plan;
/* Y = conv(X) for p with row (the variant's kernel), wp the weights packed as row reads them
 * (conv_last_geom), bias (m) and res (the fused residual, NHWC like y) each NULL when absent. ws:
 * vpad floats, 64-byte aligned (the bias zero-padded). */
void conv_last_run(const conv_last_plan *p, conv_last_row_fn row, const float *wp, const float *x,
                   const float *bias, const float *res, float *y, void *ws, op_ctx *ctx);
/* The same over X stored in bf16 (x16, borrowed), with a row16 kernel. */
void conv_last_run16(const conv_last_plan *p, conv_last_row16_fn row16, const float *wp,
                     const uint16_t *x16, const float *bias, const float *res, float *y, void *ws,
                     op_ctx *ctx);

/* The plan of conv_depthwise_direct_<isa> (conv_depthwise.c makes it): each thread takes whole
 * planes, swept in bands of output rows read from padded rows, or, for small planes (cl), groups
 * of 16 channels through the channel-lanes kernel. */
typedef struct conv_dw_plan {
    conv_shape s;
    int64_t ph;     /* padded plane rows */
    conv_dw_geom g; /* the padded rows' layout, for the ISA kernel */
    int threads;
    conv_row_fusion fuse; /* set by prepare */
    int64_t band;         /* output rows per band */
    int64_t band_rows;    /* padded input rows a band reads: the workspace slice per thread */
    /* Small planes: 16 channels at a time with the channels in the vector lanes, where the ISA
     * has that kernel (conv_dw_cl_geom above). cl_pw x ph padded pixels, plus one that
     * takes the input pixels no output reads. The index arrays are built by prepare and owned by
     * its state. */
    bool cl;
    int64_t cl_pw;
    conv_dw_cl_geom clg;
} conv_dw_plan;
/* The channel-lanes kernel (conv_dw_cl16_avx512's signature). */
typedef void (*conv_dw_cl_fn)(const conv_dw_cl_geom *g, const float *x, const float *w,
                              const float *bias, int nc, float *pad, float *out, float *y);
/* The workspace per thread: the padded rows of a band; the channel-lanes buffers (padded pixels
 * (+1) and output pixels rounded up to 16, 16 floats each; 0 unless p->cl), of which the padded
 * part is conv_dw_cl_pad_bytes. */
size_t conv_dw_slice(const conv_dw_plan *p);
size_t conv_dw_cl_slice(const conv_dw_plan *p);
size_t conv_dw_cl_pad_bytes(const conv_dw_plan *p);
/* Y = conv(X) for p with band (the ISA's band kernel) and cl16 (the channel-lanes kernel, taken
 * where p->cl; NULL: never), w the weights [c][kh][kw], b (c) and res (the fused residual, NCHW
 * like y) each NULL when absent. ws: threads * the larger slice, 64-byte aligned. */
void conv_dw_run(const conv_dw_plan *p, conv_dw_band_fn band, conv_dw_cl_fn cl16, const float *x,
                 const float *w, const float *b, const float *res, float *y, void *ws, op_ctx *ctx);

/* ---- a batch as one GEMM (conv_batched_gemm; conv_batched.c plans) --------------------------
 * Every image's im2col side by side, [kdim, n*oh*ow], one GEMM into a scratch [m, n*oh*ow], then
 * a scatter to NCHW with the bias. Group 1 only. */
typedef struct conv_batched_plan {
    conv_shape s;
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads;
    size_t gemm_ws, col_bytes, c_bytes; /* the workspace: GEMM slices, the im2col, the scratch */
} conv_batched_plan;
/* Y = conv(X) for p with pa the weights packed (gemm_pack_a of [m, kdim] with p->k), or NULL to
 * read w [m, c, kh, kw] in place; bias (m) or NULL. ws: gemm_ws + col_bytes + c_bytes bytes,
 * 64-byte aligned. */
void conv_batched_run(const conv_batched_plan *p, const gemm_packed *pa, const float *x,
                      const float *w, const float *bias, float *y, void *ws, op_ctx *ctx);

/* ---- Winograd transforms (conv_winograd.c and its ISA files) ------------------------------- */

/* F(2x2,3x3) (m = 2, t = 4), F(4x4,3x3) (m = 4, t = 6), and F(2x2,3x3) at stride 2 (m = 2,
 * t = 5, input tiles 4 apart). */
typedef enum conv_wino_kind {
    CONV_WINO_F2,
    CONV_WINO_F4,
    CONV_WINO_S2,
    CONV_WINO_KINDS
} conv_wino_kind;

/* Input transform of one row of tiles of one channel. The t padded input rows the tile row covers
 * come split into their `step` phases: ph[i * step + f][k] is padded column k * step + f of row i
 * (readable for k <= tiles_x). v[off[pos] + tx] for pos < t*t receives position pos of B^T d B of
 * tile tx. */
typedef void (*conv_wino_in_fn)(const float *const *ph, int64_t tiles_x, float *v,
                                const int64_t *off);
/* The phases of the first n floats (n a multiple of s * 16; s = 2 or 4) of the zero-padded row
 * whose column q is x[q - pl] for 0 <= q - pl < w and 0 elsewhere: ph[f * lp + k] is its column
 * k * s + f. Reads x only within [0, w). */
typedef void (*conv_wino_split_fn)(const float *x, int64_t w, int64_t pl, int64_t n, int s,
                                   float *ph, int64_t lp);
/* Output transform of one row of tiles of one output channel: mo[off[pos] + tx] are the t*t
 * GEMM results of tile tx; rows[r] (r < m) receive A^T M A + bias for tiles_x * m columns. */
typedef void (*conv_wino_out_fn)(const float *mo, const int64_t *off, int64_t tiles_x, float bias,
                                 float *const *rows);
/* Output transform of one tile for nch (<= 16) consecutive output channels: mo[off[pos] + o] is
 * position pos of channel o; bias: nch values or NULL; out[(r * m + c) * 16 + o] receives output
 * (r, c) of channel o. */
typedef void (*conv_wino_outc_fn)(const float *mo, const int64_t *off, int64_t nch,
                                  const float *bias, float *out);

/* Indexed by conv_wino_kind. */
typedef struct conv_wino_fns {
    conv_wino_in_fn in[CONV_WINO_KINDS];
    conv_wino_out_fn out[CONV_WINO_KINDS];
    conv_wino_outc_fn outc[CONV_WINO_KINDS];
    conv_wino_split_fn split;
} conv_wino_fns;

extern const conv_wino_fns conv_wino_fns_base, conv_wino_fns_avx2, conv_wino_fns_avx512;

/* ---- Winograd (conv_wino_run.c; conv_winograd.c plans and transforms the weights) -----------
 * The plan of conv_winograd_<kind> (the algorithm is described in conv_winograd.c). */
#define CONV_WINO_MAX_T 6
#define CONV_WINO_MAX_POS (CONV_WINO_MAX_T * CONV_WINO_MAX_T)
/* Output channels per output transform call in tile_rows mode. */
#define CONV_WINO_OUT_CH 16
typedef struct conv_wino_plan {
    conv_shape s;
    conv_wino_kind kind;
    int m, t, step;                     /* outputs per tile side, tile side, input step per tile */
    int ncls, qmax;                     /* filter classes (GEMMs per block), largest class */
    int pos_cls[CONV_WINO_MAX_POS];     /* class of each position of the t x t tile */
    int pos_dup[CONV_WINO_MAX_POS];     /* which of its class's q positions it is */
    int cls_q[CONV_WINO_MAX_POS];       /* positions per class */
    int64_t tiles_x, tiles_y, rows_blk; /* tile rows per block */
    int64_t wp;                         /* padded input row width */
    int64_t wpa, lp; /* the row rounded up to whole split vectors; each of its phases */
    const gemm_kernel *k;
    gemm_blocking blk;
    int threads;
    bool shared; /* threads split each block's phases instead of taking whole blocks */
    /* The GEMMs run with the block's tiles as rows, M[cls] (q*tiles x Cout) = V[cls]^T U[cls]^T,
     * U packed as the B operand; otherwise Cout is the rows and the tiles the columns. */
    bool tile_rows;
    size_t v_off, mo_off, row_off, out_off, gemm_off, slice; /* per-thread layout, bytes */
} conv_wino_plan;
/* Where each class of a block with ntile tiles starts in V (ch = Cin) or M (ch = Cout): base[cls]
 * (ncls values); returns the floats all of them take. */
int64_t conv_wino_class_bases(const conv_wino_plan *p, int64_t ntile, int64_t ch, int64_t *base);
/* Y = conv(X) for p with u the ncls transformed filters U[cls] (packed A [Cout, Cin], or packed B
 * [Cin, Cout] where p->tile_rows), fns the transforms, fuse the fused epilogue (its residual res,
 * NCHW like y, or NULL) and b the bias (Cout, or NULL). ws: threads * slice bytes, 64-aligned. */
void conv_wino_run(const conv_wino_plan *p, const gemm_packed *u, const conv_wino_fns *fns,
                   const conv_row_fusion *fuse, const float *x, const float *b, const float *res,
                   float *y, void *ws, op_ctx *ctx);

#endif
