/* Pad: attribute/input checking, shape inference and the reference kernel.
 *
 * Negative pads crop. They are applied first: the data that survives the crop is a window of the
 * input, and the positive pads then extend that window, so reflect / edge / wrap read only from
 * the window (this is what ONNX Runtime does; numpy, which the ONNX reference uses, has no
 * negative pads at all). Reflect and wrap follow numpy for pads larger than the axis: the pattern
 * simply repeats.
 *
 * The kernel is a dtype-agnostic byte mover. Each axis gets a small table mapping an output
 * index to its source index (or -1 for the constant), built once per run; rows are then filled
 * with one memcpy for the copied middle and per-element moves for the padded ends. Work is split
 * by output row (all dims but the last). */
#include "ops/nn_common.h"

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

typedef struct pad_params {
    pad_mode mode;
    /* opset < 11 only: pads and the constant from attributes */
    const int64_t *pads;
    size_t n_pads;
    float value;
} pad_params;

static anvil_status pad_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, pad_params, p);
    const char *mode;
    CORE_TRY(ir_attr_string(n, "mode", "constant", &mode));
    if (strcmp(mode, "constant") == 0)
        p->mode = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0)
        p->mode = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0)
        p->mode = PAD_EDGE;
    else if (strcmp(mode, "wrap") == 0 && n->opset >= 19)
        p->mode = PAD_WRAP;
    else
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'mode' is '%s'; expected constant, reflect, edge%s",
                        ir_node_label(n), mode,
                        n->opset >= 19 ? " or wrap" : " (or wrap from opset 19)");
    if (n->opset < 11) {
        const char *attr = n->opset < 2 ? "paddings" : "pads";
        CORE_TRY(ir_attr_ints(n, attr, &p->pads, &p->n_pads));
        CORE_TRY(ir_attr_float(n, "value", 0.0f, &p->value));
        if (!ir_node_attr(n, attr))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: the required attribute '%s' is missing (before opset 11 the pads "
                            "are an attribute)",
                            ir_node_label(n), attr);
        if (n->n_inputs > 1)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s has %d inputs; before opset 11 (the model imports %d) Pad takes "
                            "only data, with pads as an attribute",
                            ir_node_label(n), n->n_inputs, n->opset);
    } else {
        if (!op_has_input(n, 1))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input 'pads' is required from opset 11 (the model imports %d)",
                            ir_node_label(n), n->opset);
        if (n->opset < 18 && n->n_inputs > 3)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s has %d inputs; the 'axes' input needs opset >= 18 (the model "
                            "imports %d)",
                            ir_node_label(n), n->n_inputs, n->opset);
    }
    n->params = p;
    return ANVIL_OK;
}

/* Per-axis begin/end pads of a rank-`rank` tensor from the pads list (2 * naxes values) and the
 * optional axes list. Validates counts, axis range and duplicates. */
static anvil_status pad_expand(const ir_node *n, int rank, const int64_t *pads, size_t n_pads,
                               const int64_t *axes, size_t n_axes, bool has_axes, int64_t *begin,
                               int64_t *end) {
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
static anvil_status pad_axis_size(const ir_node *n, pad_mode mode, int axis, int64_t in, int64_t b,
                                  int64_t e, int64_t *out) {
    int64_t kept = in - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
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

static anvil_status pad_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const pad_params *p = n->params;
    const op_tinfo *x = &in[0];
    if (!core_dtype_supported(x->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: data has dtype %s, which anvil cannot hold",
                        ir_node_label(n), anvil_dtype_name(x->dtype));
    out[0].dtype = x->dtype;
    bool has_value = n->opset >= 11 && n_in > 2 && op_has_input(n, 2);
    bool has_axes = n->opset >= 18 && n_in > 3 && op_has_input(n, 3);
    if (has_value) {
        size_t num;
        if (in[2].dtype != x->dtype)
            return core_err(
                ANVIL_ERR_SHAPE, "%s: constant_value is %s but data is %s; they must match",
                ir_node_label(n), anvil_dtype_name(in[2].dtype), anvil_dtype_name(x->dtype));
        if (ir_shape_numel(&in[2].shape, &num) && num != 1)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: constant_value has %zu elements; it must be a scalar",
                            ir_node_label(n), num);
    }
    int rank = x->shape.rank;
    if (rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    size_t n_pads = 0, n_axes = 0;
    bool known = true;
    if (n->opset < 11) {
        if (p->n_pads > 2 * IR_MAX_RANK)
            return core_err(ANVIL_ERR_SHAPE, "%s: %zu pads for a rank-%d input", ir_node_label(n),
                            p->n_pads, rank);
        if (p->n_pads > 0) memcpy(pads, p->pads, p->n_pads * sizeof *pads);
        n_pads = p->n_pads;
    } else if (in[1].value) {
        CORE_TRY(op_value_ints(n, 1, &in[1], pads, 2 * IR_MAX_RANK, &n_pads));
    } else {
        known = false;
    }
    if (has_axes) {
        if (in[3].value)
            CORE_TRY(op_value_ints(n, 3, &in[3], axes, IR_MAX_RANK, &n_axes));
        else
            known = false;
    }
    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, rank);
    if (!known) return ANVIL_OK;
    int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
    CORE_TRY(pad_expand(n, rank, pads, n_pads, axes, n_axes, has_axes, b, e));
    for (int d = 0; d < rank; d++) {
        if (x->shape.d[d] < 0) {
            if (b[d] == 0 && e[d] == 0) o->sym[d] = x->shape.sym[d];
            continue;
        }
        CORE_TRY(pad_axis_size(n, p->mode, d, x->shape.d[d], b[d], e[d], &o->d[d]));
    }
    return ANVIL_OK;
}

/* Source index along an axis for output index o, or -1 for the constant. The kept window starts
 * at input index `crop` and holds `kept` elements; `lead` output elements precede it. */
static int64_t pad_source(pad_mode mode, int64_t o, int64_t lead, int64_t crop, int64_t kept) {
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

typedef struct pad_job {
    int rank;
    size_t es;
    int64_t odims[IR_MAX_RANK], istr[IR_MAX_RANK];
    int64_t *map[IR_MAX_RANK];               /* per axis: output index -> input index or -1 */
    int64_t lead_last, kept_last, crop_last; /* the last axis's copied run */
    const char *x;
    char *y;
    unsigned char fill[16];
} pad_job;

static void pad_range(void *arg, size_t begin, size_t end) {
    const pad_job *j = arg;
    const int last = j->rank - 1;
    const int64_t w = j->odims[last];
    const size_t es = j->es;
    for (size_t r = begin; r < end; r++) {
        char *y = j->y + (size_t)r * (size_t)w * es;
        int64_t rest = (int64_t)r, src = 0;
        bool constant_row = false;
        for (int d = last - 1; d >= 0; d--) {
            int64_t o = rest % j->odims[d], s = j->map[d][o];
            rest /= j->odims[d];
            if (s < 0)
                constant_row = true;
            else
                src += s * j->istr[d];
        }
        for (int64_t o = 0; o < w; o++) {
            int64_t s = constant_row ? -1 : j->map[last][o];
            if (!constant_row && o == j->lead_last && j->kept_last > 0) {
                /* the kept run is contiguous in both tensors */
                memcpy(y + (size_t)o * es, j->x + (size_t)(src + j->crop_last) * es,
                       (size_t)j->kept_last * es);
                o += j->kept_last - 1;
                continue;
            }
            memcpy(y + (size_t)o * es,
                   s < 0 ? (const char *)j->fill : j->x + (size_t)(src + s) * es, es);
        }
    }
}

static anvil_status pad_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const pad_params *p = n->params;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    int rank = x->rank;
    int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK], b[IR_MAX_RANK], e[IR_MAX_RANK];
    size_t n_pads = 0, n_axes = 0;
    bool has_axes = n->opset >= 18 && n_in > 3 && in[3];
    /* a count that cannot match is left for pad_expand to report; nothing is read then */
    if (n->opset < 11) {
        n_pads = p->n_pads;
        if (n_pads > 0 && n_pads <= 2 * IR_MAX_RANK) memcpy(pads, p->pads, n_pads * sizeof *pads);
    } else {
        n_pads = op_tensor_numel(in[1]);
        for (size_t i = 0; n_pads <= 2 * IR_MAX_RANK && i < n_pads; i++)
            pads[i] = core_load_i64(in[1]->dtype, in[1]->data, i);
    }
    if (has_axes) {
        n_axes = op_tensor_numel(in[3]);
        if (n_axes > IR_MAX_RANK)
            return core_err(ANVIL_ERR_RUNTIME, "%s: axes has %zu values for a rank-%d input",
                            ir_node_label(n), n_axes, rank);
        for (size_t i = 0; i < n_axes; i++) axes[i] = core_load_i64(in[3]->dtype, in[3]->data, i);
    }
    anvil_status s = pad_expand(n, rank, pads, n_pads, axes, n_axes, has_axes, b, e);
    for (int d = 0; s == ANVIL_OK && d < rank; d++) {
        int64_t od;
        s = pad_axis_size(n, p->mode, d, x->dims[d], b[d], e[d], &od);
        if (s == ANVIL_OK && od != y->dims[d])
            s = core_err(ANVIL_ERR_RUNTIME,
                         "%s: axis %d pads to %lld but the output buffer has %lld; the pads "
                         "changed after planning",
                         ir_node_label(n), d, (long long)od, (long long)y->dims[d]);
    }
    if (s != ANVIL_OK)
        return s == ANVIL_ERR_SHAPE ? core_err_prefix(ANVIL_ERR_RUNTIME, "at run time") : s;

    pad_job j;
    memset(&j, 0, sizeof j);
    j.es = anvil_dtype_size(x->dtype);
    j.x = x->data;
    j.y = y->data;
    if (n->opset >= 11 && n_in > 2 && in[2] && op_tensor_numel(in[2]) >= 1)
        memcpy(j.fill, in[2]->data, j.es);
    else if (n->opset < 11)
        core_store_f64(x->dtype, j.fill, 0, p->value);
    size_t total = op_tensor_numel(y);
    if (total == 0) return ANVIL_OK;
    if (rank == 0) {
        memcpy(j.y, j.x, j.es);
        return ANVIL_OK;
    }
    j.rank = rank;
    nn_strides(rank, x->dims, j.istr);
    size_t map_len = 0;
    for (int d = 0; d < rank; d++) map_len += (size_t)y->dims[d];
    int64_t *maps = malloc(map_len * sizeof *maps);
    if (!maps)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: no memory for index maps", ir_node_label(n));
    int64_t *m = maps;
    for (int d = 0; d < rank; d++) {
        int64_t crop = b[d] < 0 ? -b[d] : 0, lead = b[d] > 0 ? b[d] : 0;
        int64_t kept = x->dims[d] - crop - (e[d] < 0 ? -e[d] : 0);
        j.odims[d] = y->dims[d];
        j.map[d] = m;
        for (int64_t o = 0; o < y->dims[d]; o++) m[o] = pad_source(p->mode, o, lead, crop, kept);
        m += y->dims[d];
        if (d == rank - 1) {
            j.lead_last = lead;
            j.kept_last = kept;
            j.crop_last = crop;
        }
    }
    op_parallel_for(ctx, total / (size_t)y->dims[rank - 1], pad_range, &j);
    free(maps);
    return ANVIL_OK;
}

const op_impl op_impl_pad = {.min_inputs = 1,
                             .max_inputs = 4,
                             .min_outputs = 1,
                             .max_outputs = 1,
                             .value_inputs = (1u << 1) | (1u << 3),
                             .check = pad_check,
                             .infer = pad_infer,
                             .run = pad_run};
