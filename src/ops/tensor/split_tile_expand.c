/* Split, Tile and Expand: ops that cut a tensor into pieces or replicate it. All are byte movers
 * over any fixed-size dtype; their output shapes come from attributes or from the values of
 * small integer inputs (value_inputs), so the kernels read the sizes back from the output
 * buffers' dims, which the planner set from those same values. */
#include "ops/tensor_common.h"

/* ---- Split --------------------------------------------------------------------------------- */

typedef struct split_params {
    int64_t axis;
    const int64_t *split; /* the `split` attribute (opset < 13), or NULL */
    size_t n_split;
    int64_t num_outputs; /* opset >= 18; 0 when absent */
} split_params;

static anvil_status split_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, split_params, p);
    memset(p, 0, sizeof *p);
    CORE_TRY(ir_attr_int(n, "axis", 0, &p->axis));
    if (p->axis < 0 && n->opset < 11)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'axis' is %lld; negative axes are allowed from opset 11 "
                        "(model opset %d); use a non-negative axis",
                        ir_node_label(n), (long long)p->axis, n->opset);
    if (n->opset < 13) {
        /* Split-2 and Split-11 take the sizes as an attribute and have one input */
        if (n->n_inputs > 1)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset 13 Split has one input (sizes go in attribute "
                            "'split'), but the node has %d inputs (model opset %d)",
                            ir_node_label(n), n->n_inputs, n->opset);
        CORE_TRY(ir_attr_ints(n, "split", &p->split, &p->n_split));
    } else if (ir_node_attr(n, "split")) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'split' was replaced by input 1 at opset 13 (model opset "
                        "%d); pass the sizes as input 1",
                        ir_node_label(n), n->opset);
    }
    CORE_TRY(tensor_attr_since(n, "num_outputs", 18));
    if (n->opset >= 18) {
        CORE_TRY(ir_attr_int(n, "num_outputs", 0, &p->num_outputs));
        bool has_split = op_has_input(n, 1);
        if (ir_node_attr(n, "num_outputs") && has_split)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: give either input 'split' or attribute 'num_outputs', not both",
                            ir_node_label(n));
        if (ir_node_attr(n, "num_outputs") && p->num_outputs != n->n_outputs)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'num_outputs' is %lld but the node has %d outputs; "
                            "they must match",
                            ir_node_label(n), (long long)p->num_outputs, n->n_outputs);
    }
    if (p->split && p->n_split != (size_t)n->n_outputs)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'split' has %zu sizes but the node has %d outputs",
                        ir_node_label(n), p->n_split, n->n_outputs);
    for (size_t i = 0; p->split && i < p->n_split; i++)
        if (p->split[i] < 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'split' entry %zu is %lld; sizes must be >= 0",
                            ir_node_label(n), i, (long long)p->split[i]);
    n->params = p;
    return ANVIL_OK;
}

/* Sizes of the outputs along the axis of length `dim` (-1: unknown); *known stays false while
 * the sizes cannot be determined yet. */
static anvil_status split_sizes(const ir_node *n, const op_tinfo *in, int n_in, int64_t dim,
                                int64_t *sizes, int n_out, bool speculative, bool *known) {
    const split_params *p = n->params;
    *known = false;
    if (p->split) {
        for (int i = 0; i < n_out; i++) sizes[i] = p->split[i];
    } else if (n_in > 1 && op_has_input(n, 1)) {
        CORE_TRY(tensor_check_index_dtype(n, 1, "split", in[1].dtype, false));
        int64_t len;
        CORE_TRY(tensor_list_length(n, 1, "split", &in[1], &len));
        if (len >= 0 && len != n_out)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input 1 (split) has %lld sizes but the node "
                            "has %d outputs",
                            ir_node_label(n), (long long)len, n_out);
        if (!in[1].value) return ANVIL_OK;
        size_t cnt;
        CORE_TRY(op_value_ints(n, 1, &in[1], sizes, (size_t)n_out, &cnt));
        for (int i = 0; i < n_out; i++)
            if (sizes[i] < 0)
                return core_err(ANVIL_ERR_SHAPE, "%s: split size %d is %lld; sizes must be >= 0",
                                ir_node_label(n), i, (long long)sizes[i]);
    } else {
        if (dim < 0) return ANVIL_OK;
        int64_t k = n_out;
        if (p->num_outputs > 0) {
            /* num_outputs: equal chunks of ceil(dim / k); the last one takes what is left */
            int64_t chunk = (dim + k - 1) / k;
            int64_t last = dim - chunk * (k - 1);
            /* A branch of an If is inferred at load whether or not it will be taken (ONNX's
             * AffineGrid expansion splits a shape into 4 or 5 parts in its two branches), so
             * there an impossible split stays unknown; it fails when the branch runs. */
            if (last < 0 && speculative) return ANVIL_OK;
            if (last < 0)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: axis of size %lld cannot be cut into %lld chunks of %lld "
                                "(the last would be empty or negative); use input 'split'",
                                ir_node_label(n), (long long)dim, (long long)k, (long long)chunk);
            for (int i = 0; i < n_out; i++) sizes[i] = i + 1 < n_out ? chunk : last;
        } else {
            if (dim % k)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: axis of size %lld does not split evenly into %lld outputs; "
                                "give the sizes explicitly",
                                ir_node_label(n), (long long)dim, (long long)k);
            for (int i = 0; i < n_out; i++) sizes[i] = dim / k;
        }
    }
    if (dim >= 0) {
        int64_t sum = 0;
        for (int i = 0; i < n_out; i++)
            if (!core_add_i64(sum, sizes[i], &sum)) sum = -1;
        if (sum != dim)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: split sizes add up to %lld but the axis has size %lld; make "
                            "them sum to the axis size",
                            ir_node_label(n), (long long)sum, (long long)dim);
    }
    *known = true;
    return ANVIL_OK;
}

static anvil_status split_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    const split_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    const ir_shape *x = &in[0].shape;
    for (int i = 0; i < n_out; i++) {
        out[i].dtype = in[0].dtype;
        ir_shape_unknown(&out[i].shape);
    }
    if (x->rank < 0) return ANVIL_OK;
    if (x->rank == 0)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 is a scalar; Split needs rank >= 1",
                        ir_node_label(n));
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    int64_t sizes[256];
    if (n_out > 256)
        return core_err(ANVIL_ERR_LIMIT, "%s: %d outputs; anvil splits into at most 256",
                        ir_node_label(n), n_out);
    bool known;
    /* in a subgraph, input 0 without a value means load-time inference, not a run */
    bool speculative = g->parent != NULL && in[0].value == NULL;
    CORE_TRY(split_sizes(n, in, n_in, x->d[axis], sizes, n_out, speculative, &known));
    for (int i = 0; i < n_out; i++) {
        out[i].shape = *x;
        if (known) {
            out[i].shape.d[axis] = sizes[i];
            out[i].shape.sym[axis] = -1;
        } else {
            out[i].shape.d[axis] = IR_DIM_UNKNOWN;
            out[i].shape.sym[axis] = -1;
        }
    }
    return ANVIL_OK;
}

static anvil_status split_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    const split_params *p = n->params;
    const op_tensor *x = in[0];
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    size_t es = anvil_dtype_size(x->dtype);
    size_t outer = tensor_dims_prod(x->dims, 0, axis);
    size_t inner = tensor_dims_prod(x->dims, axis + 1, x->rank) * es;
    size_t row = (size_t)x->dims[axis] * inner;
    /* the planner sized every output from the split sizes; their axis dims are the sizes */
    int64_t off = 0;
    for (int k = 0; k < n_out; k++) {
        if (!out[k]) continue;
        if (out[k]->rank != x->rank || off + out[k]->dims[axis] > x->dims[axis])
            return core_err(ANVIL_ERR_INTERNAL, "%s: output %d buffer does not fit the input",
                            ir_node_label(n), k);
        size_t bytes = (size_t)out[k]->dims[axis] * inner;
        if (bytes)
            for (size_t o = 0; o < outer; o++)
                memcpy((char *)out[k]->data + o * bytes,
                       (const char *)x->data + o * row + (size_t)off * inner, bytes);
        off += out[k]->dims[axis];
    }
    return ANVIL_OK;
}

const op_impl op_impl_split = {
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 127,
    .value_inputs = 1u << 1,
    .check = split_check,
    .infer = split_infer,
    .run = split_run,
};

/* ---- Tile ---------------------------------------------------------------------------------- */

static anvil_status tile_check(ir_graph *g, ir_node *n) {
    (void)g;
    return tensor_check_opset(n, 6, 0);
}

static anvil_status tile_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "repeats", in[1].dtype, false));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    int64_t len;
    CORE_TRY(tensor_list_length(n, 1, "repeats", &in[1], &len));
    if (x->rank >= 0 && len >= 0 && len != x->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (repeats) has %lld entries but input 0 has rank %d; give "
                        "one repeat count per dimension",
                        ir_node_label(n), (long long)len, x->rank);
    if (x->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, x->rank);
    if (!in[1].value) return ANVIL_OK;
    int64_t rep[IR_MAX_RANK];
    size_t cnt;
    CORE_TRY(op_value_ints(n, 1, &in[1], rep, IR_MAX_RANK, &cnt));
    for (int i = 0; i < x->rank; i++) {
        if (rep[i] < 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: repeats[%d] is %lld; repeats must be >= 0",
                            ir_node_label(n), i, (long long)rep[i]);
        if (x->d[i] < 0) continue;
        if (!core_mul_i64(x->d[i], rep[i], &y->d[i]))
            return core_err(ANVIL_ERR_LIMIT, "%s: output dim %d overflows", ir_node_label(n), i);
    }
    return ANVIL_OK;
}

typedef struct tile_job {
    const op_tensor *x;
    op_tensor *y;
    size_t es;
} tile_job;

/* One output row (all dims but the last fixed) at a time: the matching input row is copied
 * once and then repeated along the last dim. */
static void tile_rows(void *arg, size_t begin, size_t end) {
    const tile_job *j = arg;
    const op_tensor *x = j->x;
    int r = x->rank;
    int64_t xs[IR_MAX_RANK];
    tensor_strides(x->dims, r, xs);
    size_t in_row = (size_t)x->dims[r - 1] * j->es;
    size_t out_row = (size_t)j->y->dims[r - 1] * j->es;
    for (size_t row = begin; row < end; row++) {
        size_t rem = row;
        int64_t off = 0;
        for (int k = r - 2; k >= 0; k--) {
            size_t dk = (size_t)j->y->dims[k];
            off += (int64_t)((rem % dk) % (size_t)x->dims[k]) * xs[k];
            rem /= dk;
        }
        char *dst = (char *)j->y->data + row * out_row;
        const char *src = (const char *)x->data + off * (int64_t)j->es;
        for (size_t b = 0; b < out_row; b += in_row) memcpy(dst + b, src, in_row);
    }
}

static anvil_status tile_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    size_t numel = op_tensor_numel(y);
    if (numel == 0) return ANVIL_OK;
    if (y->rank != x->rank)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output rank does not match", ir_node_label(n));
    tile_job job = {.x = x, .y = y, .es = anvil_dtype_size(x->dtype)};
    if (x->rank == 0) {
        memcpy(y->data, x->data, job.es);
        return ANVIL_OK;
    }
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] == 0 || y->dims[i] % x->dims[i])
            return core_err(ANVIL_ERR_INTERNAL, "%s: output dim %d is not a multiple of the input",
                            ir_node_label(n), i);
    op_parallel_for(ctx, numel / (size_t)y->dims[y->rank - 1], tile_rows, &job);
    return ANVIL_OK;
}

const op_impl op_impl_tile = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = tile_check,
    .infer = tile_infer,
    .run = tile_run,
};

/* ---- Expand -------------------------------------------------------------------------------- */

static anvil_status expand_check(ir_graph *g, ir_node *n) {
    (void)g;
    return tensor_check_opset(n, 8, 0);
}

static anvil_status expand_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "shape", in[1].dtype, false));
    out[0].dtype = in[0].dtype;
    int64_t len;
    CORE_TRY(tensor_list_length(n, 1, "shape", &in[1], &len));
    CORE_TRY(tensor_check_rank(n, "input 1 (shape)", len));
    if (!in[1].value) {
        int r = in[0].shape.rank;
        if (r < 0 || len < 0) {
            ir_shape_unknown(&out[0].shape);
        } else {
            tensor_shape_unknown_dims(&out[0].shape, r > len ? r : (int)len);
        }
        return ANVIL_OK;
    }
    int64_t dims[IR_MAX_RANK];
    size_t cnt;
    CORE_TRY(op_value_ints(n, 1, &in[1], dims, IR_MAX_RANK, &cnt));
    for (size_t i = 0; i < cnt; i++)
        if (dims[i] < 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: shape[%zu] is %lld; dims must be >= 0",
                            ir_node_label(n), i, (long long)dims[i]);
    ir_shape target;
    ir_shape_set(&target, (int)cnt, dims);
    return op_broadcast_shape(n, &in[0].shape, &target, &out[0].shape);
}

static anvil_status expand_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    if (y->rank < x->rank)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output rank below input rank", ir_node_label(n));
    /* a strided view of the input with stride 0 along every broadcast dim */
    tensor_strided s = {
        .esize = anvil_dtype_size(x->dtype), .rank = y->rank, .src = x->data, .dst = y->data};
    int64_t xs[IR_MAX_RANK];
    tensor_strides(x->dims, x->rank, xs);
    int lead = y->rank - x->rank;
    for (int i = 0; i < y->rank; i++) {
        s.dims[i] = y->dims[i];
        int j = i - lead;
        if (j < 0 || x->dims[j] == 1) {
            s.stride[i] = 0;
        } else if (x->dims[j] == y->dims[i]) {
            s.stride[i] = xs[j];
        } else {
            return core_err(ANVIL_ERR_INTERNAL, "%s: output dim %d does not broadcast the input",
                            ir_node_label(n), i);
        }
    }
    tensor_strided_run(ctx, &s, op_tensor_numel(y));
    return ANVIL_OK;
}

const op_impl op_impl_expand = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = expand_check,
    .infer = expand_infer,
    .run = expand_run,
};
