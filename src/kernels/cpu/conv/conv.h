/* The conv family's internals: 2-D Conv geometry shared by its variants, the layout helpers
 * (im2col, implicit-GEMM panel packing), the ISA entry points of the depthwise and Winograd
 * kernels, and the NHWC kernels (tested on their own against the NCHW reference; anvil's graph is
 * NCHW, so their variant conv_nhwc_im2col_gemm transposes around them, see conv_nhwc.c).
 *
 * Files: conv_variants.c (GEMM variants, conv_f32 and the family list), conv_common.c (geometry
 * from the node), conv_layout.h / .c (plain-data plans, im2col, panel packing, padded rows and the
 * run-time part of the emittable variants, shared with `anvil compile`'s libraries),
 * conv_depthwise.c + conv_dw_*.c (direct depthwise), conv_winograd.c + conv_wino_*.c (Winograd),
 * conv_nhwc.c (NHWC), conv_smallc.c + conv_sc_*.c (direct, few input channels). The run-time
 * halves that `anvil compile` copies: conv_layout.c, conv_nhwc_run.c, conv_direct_run.c
 * (depthwise and channels-last direct), conv_wino_run.c (with the portable transforms). The ISA
 * files share conv_vec_<isa>.h (vector macros) and conv_rows_tmpl.h (the padded-row copy of the
 * direct kernels).
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

/* The GEMM kernel for a conv GEMM C[m, n] = A[m, k] B[k, n] of kn on hw (never NULL). */
const gemm_kernel *conv_gemm_kernel(const kern_node *kn, int64_t m, int64_t n, int64_t k,
                                    const core_hw *hw);
/* The kernel kn's knobs name (kern_knobs.conv_tile, e.g. "8x48_avx512"), for experiments, where
 * hw can run it; else NULL. conv_gemm_kernel returns it first. kn may be NULL. */
const gemm_kernel *conv_gemm_kernel_forced(const kern_node *kn, const core_hw *hw);

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
/* kern_delegate for the conv family: the variant conv_f32's state hands its node to; NULL for
 * every other variant. */
const kern_variant *conv_delegate(const kern_variant *v, const void *state);

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
/* Marks the direct kernels' shared files as needed (conv_direct_run.c, conv_dwx.h and the
 * templates and vector headers the ISA files include); the emitter adds its ISA file. */
anvil_status conv_emit_direct_files(kern_emit *e);
/* Writes `VAR = (conv_dw_cl_geom){...}` for the channel-lanes depthwise path, its index tables
 * (starting at base, as prepare made them) stored in the weights. */
anvil_status conv_emit_cl_geom(kern_emit *e, const char *var, const conv_dw_cl_geom *c,
                               const int32_t *base);
/* Writes `gemm_packed VAR[n]` equal to pk[0..n) (packed A where is_a, else packed B; all of one
 * tile and shape), their data stored in the weights as one blob. */
anvil_status conv_emit_packed(kern_emit *e, const char *var, const gemm_packed *pk, int64_t n,
                              bool is_a);

/* ---- depthwise (conv_depthwise.c; its kernels are declared in conv_layout.h) ---------------- */

/* Whether the depthwise variants take s's planes through the channel-lanes kernel (AVX-512). */
bool conv_dw_channel_lanes(const conv_shape *s);

/* ---- NHWC (conv_nhwc.c) -----------------------------------------------------------------------
 */

/* Packs w (W [m, cg, kh, kw]) for conv_nhwc_run (conv_nhwc_weights, conv_layout.h); kn (NULL:
 * none) may carry a tuner's configuration and knobs. */
anvil_status conv_nhwc_weights_pack(const kern_node *kn, const conv_shape *s, const float *w,
                                    conv_nhwc_weights *out);
void conv_nhwc_weights_free(conv_nhwc_weights *pw);

/* The general depthwise variants (conv_dwx.c, kernels in conv_dwx.h). */
extern const kern_variant conv_v_dwx_avx512, conv_v_dwx_avx2, conv_nhwc_v_dwx_avx512,
    conv_nhwc_v_dwx_avx2;

/* anvil.ConvNhwc's variants (conv_nhwc.c, conv_dw_nhwc.c). */
extern const kern_variant conv_nhwc_v_gemm, conv_nhwc_v_depthwise_avx512,
    conv_nhwc_v_depthwise_avx2, conv_nhwc_v_smallc_avx512, conv_nhwc_v_grouped_avx512,
    conv_nhwc_v_grouped_avx512bf16, conv_nhwc_v_bf16_gemm, conv_nhwc_v_fp16_gemm;

#endif
