/* Pad: attribute/input checking, shape inference and the reference kernel. The pad semantics
 * (negative pads crop first, then the positive ones extend the kept window) and the geometry
 * helpers live in ops/pad_common.h, shared with the Pad kernel.
 *
 * The kernel is a dtype-agnostic byte mover. Each axis gets a small table mapping an output
 * index to its source index (or -1 for the constant), built once per run; rows are then filled
 * with one memcpy for the copied middle and per-element moves for the padded ends. Work is split
 * by output row (all dims but the last). */
#include "ops/pad_common.h"

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
    int64_t b[IR_MAX_RANK], e[IR_MAX_RANK];
    bool known;
    CORE_TRY(pad_resolve(n, in, n_in, rank, b, e, &known));
    ir_shape *o = &out[0].shape;
    nn_shape_unknown_dims(o, rank);
    if (!known) return ANVIL_OK;
    for (int d = 0; d < rank; d++) {
        if (x->shape.d[d] < 0) {
            if (b[d] == 0 && e[d] == 0) o->sym[d] = x->shape.sym[d];
            continue;
        }
        CORE_TRY(pad_axis_size(n, p->mode, d, x->shape.d[d], b[d], e[d], &o->d[d]));
    }
    return ANVIL_OK;
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
        int64_t od = 0;
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
        pad_window w = pad_window_of(x->dims[d], b[d], e[d]);
        j.odims[d] = y->dims[d];
        j.map[d] = m;
        for (int64_t o = 0; o < y->dims[d]; o++)
            m[o] = pad_source(p->mode, o, w.lead, w.crop, w.kept);
        m += y->dims[d];
        if (d == rank - 1) {
            j.lead_last = w.lead;
            j.kept_last = w.kept;
            j.crop_last = w.crop;
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
