/* The conv family's internals: 2-D Conv geometry shared by its variants, the layout helpers
 * (im2col, implicit-GEMM panel packing), the ISA entry points of the depthwise and Winograd
 * kernels, and the NHWC kernels (tested on their own against the NCHW reference; anvil's graph is
 * NCHW, so their variant conv_nhwc_im2col_gemm transposes around them, see conv_nhwc.c).
 *
 * Files: conv_variants.c (GEMM variants, conv_f32 and the family list), conv_common.c (geometry
 * from the node), conv_layout.h / .c (plain-data plans, im2col, panel packing, padded rows and the
 * run-time part of the emittable variants, shared with `anvil compile`'s libraries),
 * conv_depthwise.c + conv_dw_*.c (direct depthwise), conv_winograd.c + conv_wino_*.c (Winograd),
 * conv_nhwc.c (NHWC), conv_smallc.c + conv_sc_*.c (direct, few input channels). The ISA files share
 * conv_vec_<isa>.h (vector macros) and conv_rows_tmpl.h (the padded-row copy of the direct
 * kernels).
 *
 * Every pointer argument is borrowed for the duration of the call unless said otherwise. */
#ifndef ANVIL_KERNELS_CONV_H
#define ANVIL_KERNELS_CONV_H

#include "conv_layout.h"

#include <stdint.h>

/* Fills s from a kern_node when it is a 2-D Conv with float32 inputs and static shapes; false
 * otherwise (or on malformed attributes, which the reference reports). */
bool conv_shape_of(const kern_node *kn, conv_shape *s);
/* The same for an anvil.ConvNhwc node (X [n, h, w, c], Y [n, oh, ow, m]). */
bool conv_shape_of_nhwc(const kern_node *kn, conv_shape *s);
/* The first conv of an anvil.ConvPair node (X NCHW; Y, the second's output, is checked against
 * it with W1's output channels). */
bool conv_shape_of_pair(const kern_node *kn, conv_shape *s);

/* The GEMM kernel for a conv GEMM C[m, n] = A[m, k] B[k, n] on hw (never NULL). */
const gemm_kernel *conv_gemm_kernel(int64_t m, int64_t n, int64_t k, const core_hw *hw);
/* The kernel ANVIL_CONV_TILE names (e.g. "8x48_avx512"), for experiments, where hw can run it;
 * else NULL. conv_gemm_kernel returns it first. */
const gemm_kernel *conv_gemm_kernel_forced(const core_hw *hw);

/* ---- the tuner's parameters of the GEMM-based variants (conv_space.c) -----------------------
 * Each has a kern_space of "tile" (1 + an index into gemm_kernels, labelled with the tile's name;
 * 0: the variant's own choice) and "kc" (gemm_blocking_config's KC; 0: the default). With no
 * configuration, or an all-zero one, every variant runs exactly as it does untuned. */
enum { CONV_P_TILE, CONV_P_KC };

/* The tile kn's configuration names where hw can run it; NULL: the variant's default. */
const gemm_kernel *conv_config_tile(const kern_node *kn, const core_hw *hw);
/* The configured KC (0: the default). */
static inline int64_t conv_config_kc(const kern_node *kn) {
    return kern_param(kn, CONV_P_KC);
}

/* What a variant's GEMMs are under a configuration: the tile, the blocking, their depth K and,
 * for an indirect A, its segment (gemm_problem.a_seg; 0: none). */
typedef struct conv_gemm_view {
    const gemm_kernel *k;
    gemm_blocking blk;
    int64_t kdim, a_seg;
} conv_gemm_view;
/* A variant's view of kn under c (NULL: the default configuration); false where it does not
 * apply to kn. */
typedef bool (*conv_view_fn)(const kern_node *kn, const kern_config *c, conv_gemm_view *out);

/* kern_space.values, label and the rule "A panel fits L1" over a variant's view. */
int conv_space_values(conv_view_fn view, const kern_node *kn, const core_hw *hw, int i,
                      int32_t *vals, int cap);
const char *conv_space_label(int i, int32_t v);
bool conv_rule_a_panel(conv_view_fn view, const kern_node *kn, const core_hw *hw,
                       const kern_config *c);

/* Defines `static const kern_space NAME` over the view function VIEW. */
#define CONV_SPACE(NAME, VIEW)                                                                     \
    static int NAME##_values(const kern_node *kn, const core_hw *hw, int i, int32_t *vals,         \
                             int cap) {                                                            \
        return conv_space_values(VIEW, kn, hw, i, vals, cap);                                      \
    }                                                                                              \
    static bool NAME##_a_panel(const kern_node *kn, const core_hw *hw, const kern_config *c) {     \
        return conv_rule_a_panel(VIEW, kn, hw, c);                                                 \
    }                                                                                              \
    static const kern_rule NAME##_rules[] = {{"A panel fits L1", NAME##_a_panel}};                 \
    static const kern_space NAME = {                                                               \
        2, {"tile", "kc"}, NAME##_values, conv_space_label, NAME##_rules, 1}

/* The bias input B of a run (m floats), or NULL when the conv has none. */
static inline const float *conv_bias(const conv_shape *s, const op_tensor *const *in, int n_in) {
    return s->has_bias && n_in > 2 && in[2] ? in[2]->data : NULL;
}

/* The error of a variant's prepare for a node its supports() refuses; `what` names the variant
 * ("Winograd variant"). */
anvil_status conv_prepare_unsupported(const kern_node *kn, const char *what);

/* Defines a kern_variant run NAME that returns CALL, an expression over NAME's parameters (state,
 * in, n_in, out, ws, ctx): the entry points of variants that differ only in their ISA kernel. */
#define CONV_RUN_ENTRY(NAME, CALL)                                                                 \
    static anvil_status NAME(const ir_node *n, void *state, const op_tensor *const *in, int n_in,  \
                             op_tensor *const *out, int n_out, void *ws, op_ctx *ctx) {            \
        (void)n;                                                                                   \
        (void)n_out;                                                                               \
        return CALL;                                                                               \
    }

/* The variant conv_f32 (the default for Conv) delegates to for kn: the first rule of its cascade
 * that holds and whose variant applies; NULL when no conv variant can run kn. Static data. */
const kern_variant *conv_auto_pick(const kern_node *kn);

/* ---- fused epilogues (ir_fusion on a Conv: act(conv + bias + residual)) ----------------------
 * For a Conv the passes never set fusion->bias (the conv's own bias is input 2) and the residual
 * is an NCHW tensor of exactly the output's shape. */

/* Whether a conv variant can apply kn's whole fusion itself (the `fuses` callback of the conv
 * variants that do): true without a fusion, false for anything the GEMM epilogue cannot express
 * or a column bias (never produced for a Conv, so not worth a path). */
bool conv_fuses(const kern_node *kn);

/* The fusion's residual tensor (NCHW, the output's shape), or NULL when there is none. */
const float *conv_fused_residual(const ir_fusion *f, const op_tensor *const *in, int n_in);

/* Sets f (conv_layout.h) for kn in a direct variant's prepare. */
void conv_row_fusion_init(const kern_node *kn, conv_row_fusion *f);
/* The residual tensor of a run (NCHW, the output's shape), or NULL. */
const float *conv_row_fusion_residual(const conv_row_fusion *f, const op_tensor *const *in,
                                      int n_in);

/* ---- emitting (anvil compile; conv_common.c) --------------------------------------------------
 * The emitters write a variant's prepared plan (conv_layout.h) as C initializers and a call of its
 * run function in conv_layout.c, which the emitted library copies with the GEMM's files. */

/* Marks conv_layout.h / .c and the GEMM's files as needed, conv_layout.h included by the code. */
anvil_status conv_emit_files_need(kern_emit *e);
/* Declares tile k (gemm_kernel_<name>) for the code that names it. */
void conv_emit_tile(kern_emit *e, const gemm_kernel *k);
/* Writes `VAR = (conv_shape){...};` (VAR declared by the caller). */
void conv_emit_shape(kern_emit *e, const char *var, const conv_shape *s);
/* Writes `conv_row_fusion VAR` equal to f (its function named by the GEMM tile it belongs to);
 * UNSUPPORTED when f's function is none of the tiles' epilogues. */
anvil_status conv_emit_row_fusion(kern_emit *e, const char *var, const conv_row_fusion *f);
/* Copies into buf (cap bytes) the C expression of input i, or "NULL" for i < 0 (no such input:
 * no bias, no fused residual). Returns buf. */
const char *conv_emit_in(kern_emit *e, int i, char *buf, size_t cap);

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

/* The padded rows' geometry is conv_dw_geom (conv_layout.h). Output rows [r0, r0 + nr) of one
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
/* Whether the depthwise variants take s's planes through the channel-lanes kernel (AVX-512). */
bool conv_dw_channel_lanes(const conv_shape *s);
/* nc <= 16 channels: planes x (hw floats each, consecutive), weights w (ntaps per channel),
 * bias (nc, or NULL) -> planes y (ohw floats each). pad: the padded buffer, 16 floats per padded
 * pixel, 64-byte aligned, its border zeroed by the caller (only in_at pixels are written); out:
 * 16 floats per output pixel for ohw rounded up to 16, 64-byte aligned. */
void conv_dw_cl16_avx512(const conv_dw_cl_geom *g, const float *x, const float *w,
                         const float *bias, int nc, float *pad, float *out, float *y);
/* Channels-last (anvil.ConvNhwc) direct kernels (conv_dw_nhwc.c), reading X [h, w, c] of one
 * image in place: depthwise (conv_dwn_tmpl.h, m == c), with weights packed tap-major
 * [kh*kw][vpad]; and few input channels (conv_scn_avx512.c), weights packed [kh][kw][c][vpad].
 * vpad is m rounded up to 16; the bias is [vpad]; both are zero past m. Output columns
 * [ox_lo, ox_hi) have every tap inside the input's columns. */
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
} conv_last_geom;
/* Output row oy of one image: y[ox][o] (y: the row, ow*m floats) for every ox and channel o. */
typedef void (*conv_last_row_fn)(const conv_last_geom *g, const float *x, const float *wp,
                                 const float *bp, float *y, int64_t oy);
void conv_dwn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy);
void conv_dwn_row_avx2(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                       float *y, int64_t oy);
void conv_scn_row_avx512(const conv_last_geom *g, const float *x, const float *wp, const float *bp,
                         float *y, int64_t oy);

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

/* ---- NHWC (conv_nhwc.c) -----------------------------------------------------------------------
 */

/* Weights for conv_nhwc_run: W [m, cg, kh, kw] rearranged to B [(ky*kw + kx)*cg + c, m_g] per
 * group and packed once. Owned by the caller; free with conv_nhwc_weights_free. */
typedef struct conv_nhwc_weights {
    const gemm_kernel *k;
    gemm_blocking blk;
    int64_t groups;
    gemm_packed *pb; /* one per group */
    bool indirect;   /* A is an implicit GEMM's pointer table (gemm_problem.a_ind), not an im2col */
    float *zeros;    /* owned, indirect only: cg zeros, the segment of every tap in the padding */
} conv_nhwc_weights;

/* Transposes `mats` row-major [rows, cols] float matrices at src into [cols, rows] at dst, split
 * over ctx's threads (NCHW <-> NHWC around the channels-last variants). */
void conv_transpose_f32(const float *src, float *dst, int64_t mats, int64_t rows, int64_t cols,
                        op_ctx *ctx);

anvil_status conv_nhwc_weights_pack(const conv_shape *s, const float *w, conv_nhwc_weights *out);
void conv_nhwc_weights_free(conv_nhwc_weights *pw);
/* Scratch bytes conv_nhwc_run needs (with threads slices). */
size_t conv_nhwc_workspace(const conv_shape *s, const conv_nhwc_weights *pw, int threads);
/* Y [n, oh, ow, m] = conv(X [n, h, w, c]) + bias (NULL: none): each image is a GEMM with
 * A [oh*ow, kh*kw*cg] = X itself for 1x1 stride-1 unpadded convs, else the NHWC im2col, read
 * in place through a table of a pointer per pixel and tap where the channels are many
 * (pw->indirect), copied where they are few. */
void conv_nhwc_run(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                   const float *bias, float *y, void *ws, op_ctx *ctx);
/* The same with f's activation (f may be NULL) and its residual res (NULL: none), which is
 * NHWC like y when res_nhwc, else NCHW [n, m, oh, ow]; f->bias is not used. */
void conv_nhwc_run_fused(const conv_shape *s, const conv_nhwc_weights *pw, const float *x,
                         const float *bias, const ir_fusion *f, const float *res, bool res_nhwc,
                         float *y, void *ws, op_ctx *ctx);

/* anvil.ConvNhwc's variants (conv_nhwc.c, conv_dw_nhwc.c). */
extern const kern_variant convnhwc_v_gemm, convnhwc_v_depthwise_avx512, convnhwc_v_depthwise_avx2,
    convnhwc_v_smallc_avx512;

#endif
