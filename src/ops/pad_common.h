/* Pad geometry shared by the reference kernel (src/ops/nn/pad.c) and the Pad kernel
 * (kernels/cpu/data/data_pad.c), so that both resolve the same pads and read the same source
 * index: the node's parsed attributes (pad_params, set on the node by the reference's check), the
 * per-axis begin / end pads from the pads and axes values, each axis's kept window and output
 * size, and the source index of an output index per mode.
 *
 * Negative pads crop. They are applied first: the data that survives the crop is a window of the
 * input, and the positive pads then extend that window, so reflect / edge / wrap read only from
 * the window (this is what ONNX Runtime does; numpy, which the ONNX reference uses, has no
 * negative pads at all). Reflect and wrap follow numpy for pads larger than the axis: the pattern
 * simply repeats.
 *
 * Everything is static inline; pointers passed in are borrowed for the call. */
#ifndef ANVIL_OPS_PAD_COMMON_H
#define ANVIL_OPS_PAD_COMMON_H

#include "ops/nn_common.h"

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* A Pad node's attributes, parsed by the reference's check into n->params (arena-owned). */
typedef struct pad_params {
    pad_mode mode;
    /* opset < 11 only: pads and the constant from attributes */
    const int64_t *pads;
    size_t n_pads;
    float value;
} pad_params;

/* One axis's kept window: the input index it starts at (crop), the output elements before it
 * (lead) and its length (kept; negative when the crop removes more than the axis holds). */
typedef struct pad_window {
    int64_t crop, lead, kept;
} pad_window;

static inline pad_window pad_window_of(int64_t in, int64_t b, int64_t e) {
    pad_window w = {.crop = b < 0 ? -b : 0, .lead = b > 0 ? b : 0};
    w.kept = in - w.crop - (e < 0 ? -e : 0);
    return w;
}

/* Per-axis begin/end pads of a rank-`rank` tensor from the pads list (2 * naxes values) and the
 * optional axes list. Validates counts, axis range and duplicates. */
static inline anvil_status pad_expand(const ir_node *n, int rank, const int64_t *pads,
                                      size_t n_pads, const int64_t *axes, size_t n_axes,
                                      bool has_axes, int64_t *begin, int64_t *end) {
    size_t naxes = has_axes ? n_axes : (size_t)rank;
    if (n_pads != 2 * naxes)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: pads has %zu values; expected %zu (a begin and an end for each of "
                        "%zu %s)",
                        ir_node_label(n), n_pads, 2 * naxes, naxes,
                        has_axes ? "listed axes" : "input dims");
    for (int d = 0; d < rank; d++) begin[d] = end[d] = 0;
    bool seen[IR_MAX_RANK] = {false};
    for (size_t i = 0; i < naxes; i++) {
        int ax = (int)i;
        if (has_axes) {
            CORE_TRY(op_norm_axis(n, "axes value", axes[i], rank, &ax));
            if (seen[ax])
                return core_err(ANVIL_ERR_SHAPE, "%s: axis %d appears twice in axes",
                                ir_node_label(n), ax);
            seen[ax] = true;
        }
        if (pads[i] < -NN_MAX_EXTENT || pads[i] > NN_MAX_EXTENT ||
            pads[naxes + i] < -NN_MAX_EXTENT || pads[naxes + i] > NN_MAX_EXTENT)
            return core_err(ANVIL_ERR_LIMIT,
                            "%s: pad values for axis %d (%lld, %lld) are too "
                            "large",
                            ir_node_label(n), ax, (long long)pads[i], (long long)pads[naxes + i]);
        begin[ax] = pads[i];
        end[ax] = pads[naxes + i];
    }
    return ANVIL_OK;
}

/* Output size of one axis of size `in`; SHAPE error if the crop leaves less than nothing or a
 * non-constant mode is asked to pad an axis with no data to copy from. */
static inline anvil_status pad_axis_size(const ir_node *n, pad_mode mode, int axis, int64_t in,
                                         int64_t b, int64_t e, int64_t *out) {
    int64_t kept = pad_window_of(in, b, e).kept;
    if (kept < 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: axis %d has size %lld but the negative pads (%lld, %lld) remove "
                        "more than that",
                        ir_node_label(n), axis, (long long)in, (long long)b, (long long)e);
    if (kept == 0 && mode != PAD_CONSTANT && (b > 0 || e > 0))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: axis %d keeps no data (size %lld, pads %lld, %lld) so there is "
                        "nothing to reflect, repeat or wrap; use mode 'constant'",
                        ir_node_label(n), axis, (long long)in, (long long)b, (long long)e);
    *out = in + b + e;
    return ANVIL_OK;
}

/* Per-axis begin / end pads of node n for an input of rank `rank`, from the values known at
 * plan time: the attribute (opset < 11) or the values of inputs 1 (pads) and 3 (axes, opset >= 18)
 * of in[0..n_in). *known is false (and the result OK) while a value is not known yet. */
static inline anvil_status pad_resolve(const ir_node *n, const op_tinfo *in, int n_in, int rank,
                                       int64_t *begin, int64_t *end, bool *known) {
    const pad_params *p = n->params;
    bool has_axes = n->opset >= 18 && n_in > 3 && op_has_input(n, 3);
    int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    size_t n_pads = 0, n_axes = 0;
    *known = true;
    if (n->opset < 11) {
        if (p->n_pads > 2 * IR_MAX_RANK)
            return core_err(ANVIL_ERR_SHAPE, "%s: %zu pads for a rank-%d input", ir_node_label(n),
                            p->n_pads, rank);
        if (p->n_pads > 0) memcpy(pads, p->pads, p->n_pads * sizeof *pads);
        n_pads = p->n_pads;
    } else if (in[1].value) {
        CORE_TRY(op_value_ints(n, 1, &in[1], pads, 2 * IR_MAX_RANK, &n_pads));
    } else {
        *known = false;
    }
    if (has_axes) {
        if (in[3].value)
            CORE_TRY(op_value_ints(n, 3, &in[3], axes, IR_MAX_RANK, &n_axes));
        else
            *known = false;
    }
    if (!*known) return ANVIL_OK;
    return pad_expand(n, rank, pads, n_pads, axes, n_axes, has_axes, begin, end);
}

/* Source index along an axis for output index o, or -1 for the constant. The kept window starts
 * at input index `crop` and holds `kept` elements; `lead` output elements precede it. */
static inline int64_t pad_source(pad_mode mode, int64_t o, int64_t lead, int64_t crop,
                                 int64_t kept) {
    int64_t j = o - lead;
    if (j < 0 || j >= kept) {
        switch (mode) {
        case PAD_CONSTANT:
            return -1;
        case PAD_EDGE:
            j = j < 0 ? 0 : kept - 1;
            break;
        case PAD_WRAP:
            j = ((j % kept) + kept) % kept;
            break;
        case PAD_REFLECT:
            if (kept == 1) {
                j = 0;
            } else {
                int64_t period = 2 * (kept - 1);
                j = ((j % period) + period) % period;
                if (j >= kept) j = period - j;
            }
            break;
        }
    }
    return crop + j;
}

#endif
