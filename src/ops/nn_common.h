/* Private helpers shared by the neural-network op family (src/ops/nn/) and the sequence ops
 * (src/ops/sequence/). Not part of the ops layer contract: outside src/ops only the pooling, conv
 * and deconv kernels (kernels/cpu/eltwise, conv, deconv) include it, for the window and
 * ConvTranspose geometry they must agree on.
 * Everything is static inline so each file takes only what it uses.
 *
 * The centre piece is the sliding-window geometry that convolution and pooling share: the
 * kernel_shape / strides / dilations / pads / auto_pad (/ ceil_mode) attributes are parsed once at
 * check time (nn_window_parse) and turned into concrete per-dim begin pads and output sizes for a
 * given input (nn_window_resolve), at load time with possibly unknown dims and again at run time
 * with the real ones.
 *
 * Pointers passed to these helpers are borrowed for the call unless stated otherwise. */
#ifndef ANVIL_OPS_NN_COMMON_H
#define ANVIL_OPS_NN_COMMON_H

#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Spatial dims a window op handles: everything but batch and channel. */
#define NN_MAX_SPATIAL (IR_MAX_RANK - 2)
/* Largest window attribute value (kernel, stride, dilation, pad) and largest spatial extent
 * accepted. Far beyond any real model; they keep all window arithmetic inside int64. */
#define NN_MAX_ATTR ((int64_t)1 << 40)
#define NN_MAX_EXTENT ((int64_t)1 << 52)

/* ---- small utilities ------------------------------------------------------------------------ */

/* True when output i of n exists and was not omitted. */
static inline bool nn_has_output(const ir_node *n, int i) {
    return i < n->n_outputs && n->outputs[i] != IR_NONE;
}

/* Refuses a model whose opset predates the op `name` (from opset `since`) as UNSUPPORTED. */
static inline anvil_status nn_check_since(const ir_node *n, const char *name, int since) {
    if (n->opset < since)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s exists from opset %d, the model imports opset %d; raise the "
                        "model's opset",
                        ir_node_label(n), name, since, n->opset);
    return ANVIL_OK;
}

/* Refuses a model whose opset predates the op `name` (from opset `since`) as INVALID_MODEL: the
 * wording of the recent ops (RotaryEmbedding, Attention, LinearAttention). */
static inline anvil_status nn_check_arrived(const ir_node *n, const char *name, int since) {
    if (n->opset < since)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: %s does not exist at opset %d (it arrived in opset %d); import opset "
                        ">= %d",
                        ir_node_label(n), name, n->opset, since, since);
    return ANVIL_OK;
}

/* Sets s to `rank` anonymous unknown dims (rank < 0: unknown rank). */
static inline void nn_shape_unknown_dims(ir_shape *s, int rank) {
    if (rank < 0) {
        ir_shape_unknown(s);
        return;
    }
    memset(s, 0, sizeof *s);
    s->rank = rank;
    for (int i = 0; i < rank; i++) {
        s->d[i] = IR_DIM_UNKNOWN;
        s->sym[i] = -1;
    }
}

/* numpy-matmul output shape of a and b, both of known rank >= 1: their batch dims (all but the
 * last two) broadcast, then a's row dim when a has rank >= 2 and b's column dim when b has. */
static inline anvil_status nn_matmul_shape(const ir_node *n, const ir_shape *a, const ir_shape *b,
                                           ir_shape *o) {
    ir_shape ab, bb;
    int ra = a->rank >= 2 ? a->rank - 2 : 0, rb = b->rank >= 2 ? b->rank - 2 : 0;
    nn_shape_unknown_dims(&ab, ra);
    nn_shape_unknown_dims(&bb, rb);
    for (int d = 0; d < ra; d++) {
        ab.d[d] = a->d[d];
        ab.sym[d] = a->sym[d];
    }
    for (int d = 0; d < rb; d++) {
        bb.d[d] = b->d[d];
        bb.sym[d] = b->sym[d];
    }
    CORE_TRY(op_broadcast_shape(n, &ab, &bb, o));
    if (a->rank >= 2) {
        o->d[o->rank] = a->d[a->rank - 2];
        o->sym[o->rank++] = a->sym[a->rank - 2];
    }
    if (b->rank >= 2) {
        o->d[o->rank] = b->d[b->rank - 1];
        o->sym[o->rank++] = b->sym[b->rank - 1];
    }
    return ANVIL_OK;
}

/* Floor and ceiling of a / b for b > 0 and any sign of a (C division truncates toward zero). */
static inline int64_t nn_floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static inline int64_t nn_ceil_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* The positions p in [0, n_p) for which q = p * a + off lies in [0, n_q), as [*lo, *hi) (empty
 * when *lo == *hi). a > 0. Used by convolution (p: output, q: input) and its transpose (p: input,
 * q: output) to iterate only over taps that touch real data. */
static inline void nn_valid_range(int64_t n_p, int64_t a, int64_t off, int64_t n_q, int64_t *lo,
                                  int64_t *hi) {
    /* Stride 1 without the divisions: the row kernels call this per row and tap, and on a small
     * map's rows of 2 to 16 floats (a 3x3 conv's input gradient) they cost more than the work. */
    int64_t l = a == 1 ? -off : nn_ceil_div(-off, a),
            h = a == 1 ? n_q - off : nn_ceil_div(n_q - off, a);
    if (l < 0) l = 0;
    if (h > n_p) h = n_p;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Row-major strides of the spatial dims (dims[0..nsp)), in elements. */
static inline void nn_strides(int nsp, const int64_t *dims, int64_t *str) {
    int64_t s = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        str[d] = s;
        s *= dims[d];
    }
}

static inline int64_t nn_prod(int n, const int64_t *dims) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= dims[i];
    return p;
}

/* ---- float staging ---------------------------------------------------------------------------
 * Kernels compute in float for FLOAT/FLOAT16/BFLOAT16 (and small integer types where exact) and in
 * double for DOUBLE. A tensor that is not already float32 is converted into a malloc'd float
 * buffer first, and results are converted back after. */

/* Returns t's elements as float: t->data itself when it is FLOAT, else a converted copy stored
 * in *owned (caller frees; NULL when no copy was made). NULL with a last error on OOM. */
static inline const float *nn_stage_in_f32(const ir_node *n, const op_tensor *t, float **owned) {
    *owned = NULL;
    if (t->dtype == ANVIL_DTYPE_FLOAT32) return (const float *)t->data;
    size_t num = op_tensor_numel(t);
    float *buf = malloc((num ? num : 1) * sizeof *buf);
    if (!buf) {
        core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory to stage %zu elements as float",
                 ir_node_label(n), num);
        return NULL;
    }
    for (size_t i = 0; i < num; i++) {
        switch (t->dtype) {
        case ANVIL_DTYPE_FLOAT16:
            buf[i] = core_f16_to_f32(((const uint16_t *)t->data)[i]);
            break;
        case ANVIL_DTYPE_BFLOAT16:
            buf[i] = core_bf16_to_f32(((const uint16_t *)t->data)[i]);
            break;
        case ANVIL_DTYPE_INT8:
            buf[i] = ((const int8_t *)t->data)[i];
            break;
        case ANVIL_DTYPE_UINT8:
            buf[i] = ((const uint8_t *)t->data)[i];
            break;
        default:
            buf[i] = (float)core_load_f64(t->dtype, t->data, i);
            break;
        }
    }
    *owned = buf;
    return buf;
}

/* Float buffer a kernel writes its result for output t into: t->data when t is FLOAT, else a
 * malloc'd scratch (in *owned) that nn_stage_out_f32_finish converts into t. */
static inline float *nn_stage_out_f32(const ir_node *n, op_tensor *t, float **owned) {
    *owned = NULL;
    if (t->dtype == ANVIL_DTYPE_FLOAT32) return (float *)t->data;
    size_t num = op_tensor_numel(t);
    float *buf = calloc(num ? num : 1, sizeof *buf);
    if (!buf) {
        core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory to stage %zu output elements",
                 ir_node_label(n), num);
        return NULL;
    }
    *owned = buf;
    return buf;
}

/* Converts a staged result into t (a no-op when t was written directly) and frees the scratch.
 * Integer outputs are rounded to nearest and saturated to the type's range. */
static inline void nn_stage_out_f32_finish(op_tensor *t, float *owned) {
    if (!owned) return;
    size_t num = op_tensor_numel(t);
    for (size_t i = 0; i < num; i++) {
        float v = owned[i];
        switch (t->dtype) {
        case ANVIL_DTYPE_FLOAT16:
            ((uint16_t *)t->data)[i] = core_f32_to_f16(v);
            break;
        case ANVIL_DTYPE_BFLOAT16:
            ((uint16_t *)t->data)[i] = core_f32_to_bf16(v);
            break;
        case ANVIL_DTYPE_INT8:
            ((int8_t *)t->data)[i] = (int8_t)(v != v ? 0 : fminf(fmaxf(nearbyintf(v), -128), 127));
            break;
        case ANVIL_DTYPE_UINT8:
            ((uint8_t *)t->data)[i] = (uint8_t)(v != v ? 0 : fminf(fmaxf(nearbyintf(v), 0), 255));
            break;
        default:
            core_store_f64(t->dtype, t->data, i, v);
            break;
        }
    }
    free(owned);
}

/* ---- sliding-window geometry ----------------------------------------------------------------- */

typedef enum nn_auto_pad {
    NN_PAD_NOTSET = 0,
    NN_PAD_SAME_UPPER,
    NN_PAD_SAME_LOWER,
    NN_PAD_VALID
} nn_auto_pad;

/* Window attributes as written in the model. Lists are arena-owned (or NULL when absent); a
 * list's length fixes the spatial rank, which must then agree with the input's. */
typedef struct nn_window {
    const int64_t *kernel, *strides, *dilations, *pads;
    size_t n_kernel, n_strides, n_dilations, n_pads;
    nn_auto_pad auto_pad;
    bool ceil_mode;
} nn_window;

/* Concrete geometry for one input. Dims are IR_DIM_UNKNOWN where the input's is unknown. */
typedef struct nn_geom {
    int nsp;
    int64_t in[NN_MAX_SPATIAL], out[NN_MAX_SPATIAL];
    int64_t kernel[NN_MAX_SPATIAL], stride[NN_MAX_SPATIAL], dil[NN_MAX_SPATIAL];
    /* Padding at the start / end of each dim. For pooling with ceil_mode the last window may
     * reach beyond pad_end; such taps are neither data nor padding and never count. */
    int64_t pad_begin[NN_MAX_SPATIAL], pad_end[NN_MAX_SPATIAL];
} nn_geom;

static inline anvil_status nn_parse_positive_list(const ir_node *n, const char *name, int64_t min,
                                                  const int64_t **out, size_t *count) {
    CORE_TRY(ir_attr_ints(n, name, out, count));
    for (size_t i = 0; i < *count; i++)
        if ((*out)[i] < min || (*out)[i] > NN_MAX_ATTR)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute '%s'[%zu] is %lld; every value must be in %lld..%lld. "
                            "Fix the model's attribute",
                            ir_node_label(n), name, i, (long long)(*out)[i], (long long)min,
                            (long long)NN_MAX_ATTR);
    return ANVIL_OK;
}

/* Parses and validates the window attributes of node n. kernel_required: kernel_shape must be
 * present (pooling). dilations_ok / ceil_ok: whether the op at n->opset has those attributes. */
static inline anvil_status nn_window_parse(const ir_node *n, bool kernel_required,
                                           bool dilations_ok, bool ceil_ok, nn_window *w) {
    memset(w, 0, sizeof *w);
    CORE_TRY(nn_parse_positive_list(n, "kernel_shape", 1, &w->kernel, &w->n_kernel));
    CORE_TRY(nn_parse_positive_list(n, "strides", 1, &w->strides, &w->n_strides));
    CORE_TRY(nn_parse_positive_list(n, "dilations", 1, &w->dilations, &w->n_dilations));
    CORE_TRY(nn_parse_positive_list(n, "pads", 0, &w->pads, &w->n_pads));
    if (kernel_required && w->n_kernel == 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: the required attribute 'kernel_shape' is missing; add it with one "
                        "value per spatial dim",
                        ir_node_label(n));
    if (!dilations_ok && w->n_dilations > 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'dilations' does not exist at opset %d (it arrived in a "
                        "later opset); import a newer opset or drop the attribute",
                        ir_node_label(n), n->opset);
    if (w->n_pads % 2 != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'pads' has %zu values; it needs 2 per spatial dim "
                        "(all begins, then all ends)",
                        ir_node_label(n), w->n_pads);
    size_t nsp = w->n_kernel      ? w->n_kernel
                 : w->n_strides   ? w->n_strides
                 : w->n_dilations ? w->n_dilations
                                  : w->n_pads / 2;
    if (nsp > NN_MAX_SPATIAL)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %zu spatial dims; anvil supports at most %d",
                        ir_node_label(n), nsp, NN_MAX_SPATIAL);
    struct {
        const char *name;
        size_t got, want;
    } lens[] = {{"kernel_shape", w->n_kernel, nsp},
                {"strides", w->n_strides, nsp},
                {"dilations", w->n_dilations, nsp},
                {"pads", w->n_pads, 2 * nsp}};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        if (lens[i].got != 0 && lens[i].got != lens[i].want)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute '%s' has %zu values but the other window attributes "
                            "describe %zu spatial dims (expected %zu values)",
                            ir_node_label(n), lens[i].name, lens[i].got, nsp, lens[i].want);
    const char *ap;
    CORE_TRY(ir_attr_string(n, "auto_pad", "NOTSET", &ap));
    if (strcmp(ap, "NOTSET") == 0)
        w->auto_pad = NN_PAD_NOTSET;
    else if (strcmp(ap, "SAME_UPPER") == 0)
        w->auto_pad = NN_PAD_SAME_UPPER;
    else if (strcmp(ap, "SAME_LOWER") == 0)
        w->auto_pad = NN_PAD_SAME_LOWER;
    else if (strcmp(ap, "VALID") == 0)
        w->auto_pad = NN_PAD_VALID;
    else
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'auto_pad' is '%s'; expected NOTSET, SAME_UPPER, "
                        "SAME_LOWER or VALID",
                        ir_node_label(n), ap);
    if (ceil_ok) {
        CORE_TRY(ir_attr_flag(n, "ceil_mode", false, &w->ceil_mode));
    } else if (ir_node_attr(n, "ceil_mode")) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'ceil_mode' does not exist at opset %d; import opset >= "
                        "10 or drop the attribute",
                        ir_node_label(n), n->opset);
    }
    return ANVIL_OK;
}

/* The window's spatial rank as fixed by its attributes, 0 when no attribute fixes it. */
static inline int nn_window_nsp(const nn_window *w) {
    return (int)(w->n_kernel      ? w->n_kernel
                 : w->n_strides   ? w->n_strides
                 : w->n_dilations ? w->n_dilations
                                  : w->n_pads / 2);
}

/* The input's spatial rank must be the one the window attributes describe (when they fix one). */
static inline anvil_status nn_window_check_nsp(const ir_node *n, const nn_window *w, int nsp) {
    int wn = nn_window_nsp(w);
    if (wn != 0 && wn != nsp)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the window attributes describe %d spatial dims but the input has %d "
                        "(input rank %d); they must agree",
                        ir_node_label(n), wn, nsp, nsp + 2);
    return ANVIL_OK;
}

/* Fills g for `nsp` spatial dims of sizes in[] (IR_DIM_UNKNOWN allowed) and kernel sizes
 * kernel[] (known). pool: pooling rules (ceil_mode; the last window must start inside the input
 * or its left padding); otherwise convolution rules. Every output dim must come out >= 1. Errors
 * are SHAPE naming the node and the offending dim. */
static inline anvil_status nn_window_resolve(const ir_node *n, const nn_window *w, int nsp,
                                             const int64_t *in, const int64_t *kernel, bool pool,
                                             nn_geom *g) {
    CORE_TRY(nn_window_check_nsp(n, w, nsp));
    if (nsp < 1 || nsp > NN_MAX_SPATIAL)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input rank %d gives %d spatial dims; expected 1 to %d (input layout "
                        "N x C x D1 x ... x Dn)",
                        ir_node_label(n), nsp + 2, nsp, NN_MAX_SPATIAL);
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int d = 0; d < nsp; d++) {
        g->in[d] = in[d];
        g->kernel[d] = kernel[d];
        g->stride[d] = w->n_strides ? w->strides[d] : 1;
        g->dil[d] = w->n_dilations ? w->dilations[d] : 1;
        if (w->auto_pad == NN_PAD_NOTSET && w->n_pads) {
            g->pad_begin[d] = w->pads[d];
            g->pad_end[d] = w->pads[nsp + d];
        }
        int64_t k = kernel[d], s = g->stride[d], dil = g->dil[d], ek;
        if (k <= 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: kernel size of spatial dim %d is %lld; it must "
                            "be >= 1",
                            ir_node_label(n), d, (long long)k);
        /* the span of the dilated kernel, (k - 1) * dil + 1, without overflow */
        if (!core_mul_i64(k - 1, dil, &ek) || !core_add_i64(ek, 1, &ek))
            return core_err(ANVIL_ERR_SHAPE, "%s: kernel %lld with dilation %lld overflows",
                            ir_node_label(n), (long long)k, (long long)dil);
        int64_t x = in[d];
        if (x > NN_MAX_EXTENT || ek > NN_MAX_EXTENT)
            return core_err(ANVIL_ERR_LIMIT,
                            "%s: spatial dim %d (%lld) or kernel span (%lld) is "
                            "too large",
                            ir_node_label(n), d, (long long)x, (long long)ek);
        if (x < 0) {
            g->out[d] = IR_DIM_UNKNOWN;
            continue;
        }
        int64_t o;
        switch (w->auto_pad) {
        case NN_PAD_SAME_UPPER:
        case NN_PAD_SAME_LOWER: {
            o = nn_ceil_div(x, s);
            int64_t total = (o - 1) * s + ek - x;
            if (total < 0) total = 0;
            int64_t small = total / 2;
            g->pad_begin[d] = w->auto_pad == NN_PAD_SAME_UPPER ? small : total - small;
            g->pad_end[d] = total - g->pad_begin[d];
            break;
        }
        case NN_PAD_VALID:
            o = x >= ek ? (x - ek) / s + 1 : 0;
            break;
        default: {
            int64_t span = x + g->pad_begin[d] + g->pad_end[d] - ek;
            if (span < 0) {
                o = 0;
                break;
            }
            o = (pool && w->ceil_mode) ? nn_ceil_div(span, s) + 1 : span / s + 1;
            /* ONNX: with ceil_mode the last window must start inside the input or the left
             * padding; a window starting in the right padding is dropped */
            if (pool && w->ceil_mode && (o - 1) * s >= x + g->pad_begin[d]) o--;
            break;
        }
        }
        if (o < 1)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: spatial dim %d is too small for the window: input %lld, pads "
                            "%lld+%lld, kernel %lld, dilation %lld, stride %lld give output size "
                            "%lld; use a smaller kernel or more padding",
                            ir_node_label(n), d, (long long)x, (long long)g->pad_begin[d],
                            (long long)g->pad_end[d], (long long)k, (long long)dil, (long long)s,
                            (long long)o);
        g->out[d] = o;
    }
    return ANVIL_OK;
}

/* ---- Conv / ConvTranspose (conv.c; the deconv kernels read the same params and geometry) ---- */

/* A Conv or ConvTranspose node's attributes, parsed by the reference's check into n->params. */
typedef struct conv_params {
    nn_window win;
    int64_t group;
    /* ConvTranspose only; arena-owned lists or NULL */
    const int64_t *output_padding, *output_shape;
    size_t n_output_padding, n_output_shape;
} conv_params;

/* A ConvInteger or QLinearConv node's attributes, parsed by the reference's check into n->params
 * (ops/quant/matmul_conv.c; the int8 conv kernels read them too). */
typedef struct qconv_params {
    nn_window win;
    int64_t group;
} qconv_params;

/* anvil.ConvPair and anvil.GemmPair (conv.c, gemm_matmul.c): two nodes run back to back as one
 * (passes/fuse_pair.c), the first's output never written to memory whole. Inputs: 0 X, 1 W1,
 * 2 B1 (optional), 3 W2, 4 B2 (optional), then the second's fused residual (the node's
 * ir_fusion, which also carries the second's activation). The first's activation is in the
 * attributes "act" (ir_act_name; default "none"), "alpha", "beta", "lo" and "hi".
 *   ConvPair: Y = conv1x1(act1(conv(X, W1) + B1), W2) + B2, NCHW; the first conv's attributes
 *             are the node's; the second is 1x1, stride 1, unpadded, group 1 (W2 [M2, M1, 1, 1]).
 *   GemmPair: Y = act1(X W1 + B1) W2 + B2, X [..., K], W1 [K, N0], W2 [N0, N1], biases along the
 *             last dim. */
typedef struct pair_params {
    conv_params conv;  /* ConvPair: the first conv's (first member: conv.c reads it as such) */
    conv_params conv2; /* ConvPair: the second's, every attribute at its default */
    ir_fusion first;   /* bias: 2 or -1; act and its parameters from the attributes */
} pair_params;
/* Fills first from n's "act", "alpha", "beta", "lo", "hi" and whether input 2 is given;
 * INVALID_MODEL naming the node for an unknown activation. */
anvil_status pair_first_parse(const ir_node *n, ir_fusion *first);
/* t[i] = act(t[i]) over n floats, the first's activation (ir_act_eval). */
void pair_first_act(const ir_fusion *first, float *t, size_t n);

/* Geometry of a transposed convolution: the output size comes from output_shape, from SAME
 * padding (in * stride) or from the pads; the pads, when derived, follow the ONNX formula with
 * the odd unit at the end for SAME_UPPER and at the start otherwise. A negative total padding
 * (output_shape larger than the full result) extends the output at the end with bias only. */
static inline anvil_status convt_resolve(const ir_node *n, const conv_params *p, int nsp,
                                         const int64_t *in, const int64_t *kernel, nn_geom *g) {
    const nn_window *w = &p->win;
    CORE_TRY(nn_window_check_nsp(n, w, nsp));
    if (nsp < 1 || nsp > NN_MAX_SPATIAL)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input rank %d gives %d spatial dims; expected 1 to %d",
                        ir_node_label(n), nsp + 2, nsp, NN_MAX_SPATIAL);
    if (p->n_output_padding && p->n_output_padding != (size_t)nsp)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: attribute 'output_padding' has %zu values but the input has %d "
                        "spatial dims",
                        ir_node_label(n), p->n_output_padding, nsp);
    const int64_t *oshape = NULL;
    if (p->n_output_shape == (size_t)nsp)
        oshape = p->output_shape;
    else if (p->n_output_shape == (size_t)nsp + 2)
        oshape = p->output_shape + 2;
    else if (p->n_output_shape != 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: attribute 'output_shape' has %zu values; expected %d (the spatial "
                        "dims) or %d (the full output shape)",
                        ir_node_label(n), p->n_output_shape, nsp, nsp + 2);
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int d = 0; d < nsp; d++) {
        int64_t k = kernel[d], s = w->n_strides ? w->strides[d] : 1;
        int64_t dil = w->n_dilations ? w->dilations[d] : 1;
        int64_t op = p->n_output_padding ? p->output_padding[d] : 0, ek;
        g->in[d] = in[d];
        g->kernel[d] = k;
        g->stride[d] = s;
        g->dil[d] = dil;
        if (k <= 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: kernel size of spatial dim %d is %lld; it must be >= 1",
                            ir_node_label(n), d, (long long)k);
        if (!core_mul_i64(k - 1, dil, &ek) || !core_add_i64(ek, 1, &ek) || ek > NN_MAX_EXTENT ||
            in[d] > NN_MAX_EXTENT)
            return core_err(ANVIL_ERR_LIMIT,
                            "%s: spatial dim %d (%lld) or kernel span (kernel %lld, dilation "
                            "%lld) is too large",
                            ir_node_label(n), d, (long long)in[d], (long long)k, (long long)dil);
        if (in[d] < 0) {
            g->out[d] = oshape ? oshape[d] : IR_DIM_UNKNOWN;
            continue;
        }
        /* the full (unpadded) result spans s * (in - 1) + output_padding + ek positions */
        int64_t full = s * (in[d] - 1) + op + ek, out;
        bool derive =
            oshape || w->auto_pad == NN_PAD_SAME_UPPER || w->auto_pad == NN_PAD_SAME_LOWER;
        if (derive) {
            out = oshape ? oshape[d] : in[d] * s;
            int64_t total = full - out;
            if (total < 0) {
                g->pad_begin[d] = 0;
            } else {
                int64_t small = total / 2;
                g->pad_begin[d] = w->auto_pad == NN_PAD_SAME_UPPER ? small : total - small;
            }
            g->pad_end[d] = total - g->pad_begin[d];
        } else {
            if (w->auto_pad == NN_PAD_NOTSET && w->n_pads) {
                g->pad_begin[d] = w->pads[d];
                g->pad_end[d] = w->pads[nsp + d];
            }
            out = full - g->pad_begin[d] - g->pad_end[d];
        }
        if (out < 1)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: spatial dim %d: input %lld, stride %lld, kernel %lld, dilation "
                            "%lld, output_padding %lld and pads %lld+%lld give output size %lld; "
                            "it must be >= 1 (reduce the pads)",
                            ir_node_label(n), d, (long long)in[d], (long long)s, (long long)k,
                            (long long)dil, (long long)op, (long long)g->pad_begin[d],
                            (long long)g->pad_end[d], (long long)out);
        g->out[d] = out;
    }
    return ANVIL_OK;
}

/* ---- shared by the sampling ops (sampling.c, deform_conv.c) --------------------------------- */

/* The sampling ops compute in double for every float dtype and refuse the other dtypes. */
static inline anvil_status nn_check_float(const ir_node *n, int input, const char *what,
                                          anvil_dtype dt) {
    if (core_dtype_is_float(dt)) return ANVIL_OK;
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: input %d (%s) is %s; anvil implements this op for float16, bfloat16, "
                    "float32 and float64",
                    ir_node_label(n), input, what, anvil_dtype_name(dt));
}

#endif
