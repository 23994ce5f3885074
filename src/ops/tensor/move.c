/* Ops that move bytes to new places without looking at them: Transpose, Concat, Slice, Gather.
 * Every kernel is dtype-agnostic (it copies elements of anvil_dtype_size bytes), so one kernel
 * serves every dtype anvil can hold. Transpose and Slice are both "dense output read through
 * strides" and share tensor_strided_run; Concat and Gather copy contiguous runs with memcpy. */
#include "ops/tensor_common.h"

/* ---- Transpose --------------------------------------------------------------------------- */

typedef struct transpose_params {
    bool has_perm;       /* false: reverse the dims */
    const int64_t *perm; /* arena-owned; may be NULL when n is 0 */
    size_t n;
} transpose_params;

static anvil_status transpose_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, transpose_params, p);
    CORE_TRY(ir_attr_ints(n, "perm", &p->perm, &p->n));
    p->has_perm = ir_node_attr(n, "perm") != NULL;
    if (p->has_perm) {
        if (p->n > IR_MAX_RANK)
            return core_err(ANVIL_ERR_LIMIT,
                            "%s: 'perm' has %zu entries; anvil handles at most %d dims",
                            ir_node_label(n), p->n, IR_MAX_RANK);
        bool seen[IR_MAX_RANK] = {false};
        for (size_t i = 0; i < p->n; i++) {
            int64_t v = p->perm[i];
            if (v < 0 || v >= (int64_t)p->n || seen[v])
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: 'perm' must be a permutation of 0..%zu, but entry %zu is "
                                "%lld%s",
                                ir_node_label(n), p->n - 1, i, (long long)v,
                                (v >= 0 && v < (int64_t)p->n) ? " (repeated)" : "");
            seen[v] = true;
        }
    }
    n->params = p;
    return ANVIL_OK;
}

/* The permutation for an input of rank r: the attribute, or reversed dims. */
static void transpose_perm(const transpose_params *p, int r, int *perm) {
    for (int i = 0; i < r; i++) perm[i] = p->has_perm ? (int)p->perm[i] : r - 1 - i;
}

static anvil_status transpose_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    const transpose_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    out[0].dtype = in[0].dtype;
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0) {
        if (p->has_perm)
            tensor_shape_unknown_dims(&out[0].shape, (int)p->n);
        else
            ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    if (p->has_perm && (int)p->n != x->rank) {
        char xs[160];
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: 'perm' has %zu entries but input %s has rank %d; give one entry "
                        "per input dim",
                        ir_node_label(n), p->n, ir_shape_str(g, x, xs, sizeof xs), x->rank);
    }
    int perm[IR_MAX_RANK];
    transpose_perm(p, x->rank, perm);
    tensor_shape_unknown_dims(&out[0].shape, x->rank);
    for (int i = 0; i < x->rank; i++) tensor_dim_copy(&out[0].shape, i, x, perm[i]);
    return ANVIL_OK;
}

static anvil_status transpose_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                  op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    int perm[IR_MAX_RANK];
    transpose_perm(n->params, x->rank, perm);
    int64_t xstride[IR_MAX_RANK];
    tensor_strides(x->dims, x->rank, xstride);
    tensor_strided s = {
        .esize = anvil_dtype_size(x->dtype), .rank = x->rank, .src = x->data, .dst = y->data};
    for (int i = 0; i < x->rank; i++) {
        if (y->dims[i] != x->dims[perm[i]])
            return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer dim %d is %lld, expected %lld",
                            ir_node_label(n), i, (long long)y->dims[i],
                            (long long)x->dims[perm[i]]);
        s.dims[i] = y->dims[i];
        s.stride[i] = xstride[perm[i]];
    }
    tensor_strided_run(ctx, &s, op_tensor_numel(y));
    return ANVIL_OK;
}

const op_impl op_impl_transpose = {
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = transpose_check,
    .infer = transpose_infer,
    .run = transpose_run,
};

/* ---- Concat ------------------------------------------------------------------------------ */

typedef struct concat_params {
    int64_t axis;
} concat_params;

static anvil_status concat_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, concat_params, p);
    /* Concat-1 defaulted the axis to 1; from opset 4 it is required */
    if (n->opset >= 4 && !ir_node_attr(n, "axis"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'axis' is required from opset 4 (model opset %d)",
                        ir_node_label(n), n->opset);
    CORE_TRY(tensor_attr_axis(n, 1, &p->axis));
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] == IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input %d is empty; every Concat input must be a tensor",
                            ir_node_label(n), i);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status concat_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)n_out;
    const concat_params *p = n->params;
    char as[160], bs[160];
    int ref = -1;
    for (int i = 0; i < n_in; i++) {
        CORE_TRY(tensor_check_dtype(n, i, in[i].dtype));
        if (in[i].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d has dtype %s but input 0 has %s; all inputs must have "
                            "the same dtype",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(in[0].dtype));
        if (in[i].shape.rank < 0) continue;
        if (ref < 0)
            ref = i;
        else if (in[i].shape.rank != in[ref].shape.rank)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d %s has rank %d but input %d %s has rank %d; all inputs "
                            "must have the same rank",
                            ir_node_label(n), i, ir_shape_str(g, &in[i].shape, as, sizeof as),
                            in[i].shape.rank, ref, ir_shape_str(g, &in[ref].shape, bs, sizeof bs),
                            in[ref].shape.rank);
    }
    out[0].dtype = in[0].dtype;
    if (ref < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int r = in[ref].shape.rank, axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, r, &axis));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, r);
    for (int j = 0; j < r; j++) {
        if (j == axis) continue;
        /* the first known size fixes the dim; a symbol survives only if every input agrees */
        int known = -1;
        bool same_sym = true;
        for (int i = 0; i < n_in; i++) {
            const ir_shape *s = &in[i].shape;
            if (s->rank < 0) {
                same_sym = false;
                continue;
            }
            if (s->d[j] >= 0) {
                if (known >= 0 && s->d[j] != in[known].shape.d[j])
                    return core_err(
                        ANVIL_ERR_SHAPE,
                        "%s: input %d %s and input %d %s differ in dim %d (%lld vs %lld); only "
                        "dim %d (the concat axis) may differ",
                        ir_node_label(n), known, ir_shape_str(g, &in[known].shape, as, sizeof as),
                        i, ir_shape_str(g, s, bs, sizeof bs), j, (long long)in[known].shape.d[j],
                        (long long)s->d[j], axis);
                if (known < 0) known = i;
            } else if (s->sym[j] < 0 || s->sym[j] != in[ref].shape.sym[j]) {
                same_sym = false;
            }
        }
        if (known >= 0)
            y->d[j] = in[known].shape.d[j];
        else if (same_sym)
            y->sym[j] = in[ref].shape.sym[j];
    }
    if (n_in == 1) {
        tensor_dim_copy(y, axis, &in[0].shape, axis);
        return ANVIL_OK;
    }
    int64_t sum = 0;
    for (int i = 0; i < n_in; i++) {
        const ir_shape *s = &in[i].shape;
        if (s->rank < 0 || s->d[axis] < 0) return ANVIL_OK; /* the axis dim stays unknown */
        if (!core_add_i64(sum, s->d[axis], &sum))
            return core_err(ANVIL_ERR_LIMIT, "%s: the concatenated dim %d overflows int64",
                            ir_node_label(n), axis);
    }
    y->d[axis] = sum;
    return ANVIL_OK;
}

typedef struct concat_job {
    const op_tensor *const *in;
    int n_in;
    int axis;
    size_t inner_bytes; /* bytes of one index along the axis */
    size_t row_bytes;   /* bytes of one output row (all of the axis) */
    char *dst;
} concat_job;

static void concat_rows(void *arg, size_t begin, size_t end) {
    const concat_job *j = arg;
    for (size_t o = begin; o < end; o++) {
        char *dst = j->dst + o * j->row_bytes;
        for (int i = 0; i < j->n_in; i++) {
            size_t b = (size_t)j->in[i]->dims[j->axis] * j->inner_bytes;
            if (b) memcpy(dst, (const char *)j->in[i]->data + o * b, b);
            dst += b;
        }
    }
}

static anvil_status concat_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const concat_params *p = n->params;
    op_tensor *y = out[0];
    int r = y->rank, axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, r, &axis));
    int64_t sum = 0;
    for (int i = 0; i < n_in; i++) {
        bool ok = in[i]->rank == r && in[i]->dtype == y->dtype;
        for (int j = 0; ok && j < r; j++) ok = j == axis || in[i]->dims[j] == y->dims[j];
        if (!ok)
            return core_err(ANVIL_ERR_INTERNAL,
                            "%s: input %d does not match the output buffer's dtype/shape",
                            ir_node_label(n), i);
        sum += in[i]->dims[axis];
    }
    if (sum != y->dims[axis])
        return core_err(ANVIL_ERR_INTERNAL, "%s: output dim %d is %lld but the inputs sum to %lld",
                        ir_node_label(n), axis, (long long)y->dims[axis], (long long)sum);
    concat_job job = {.in = in, .n_in = n_in, .axis = axis, .dst = y->data};
    job.inner_bytes = tensor_dims_prod(y->dims, axis + 1, r) * anvil_dtype_size(y->dtype);
    job.row_bytes = (size_t)y->dims[axis] * job.inner_bytes;
    if (op_tensor_numel(y) == 0) return ANVIL_OK;
    op_parallel_for(ctx, tensor_dims_prod(y->dims, 0, axis), concat_rows, &job);
    return ANVIL_OK;
}

const op_impl op_impl_concat = {
    .min_inputs = 1,
    .max_inputs = 127,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = concat_check,
    .infer = concat_infer,
    .run = concat_run,
};

/* ---- Slice ------------------------------------------------------------------------------- */

static anvil_status slice_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, slice_params, p);
    bool has_attrs =
        ir_node_attr(n, "starts") || ir_node_attr(n, "ends") || ir_node_attr(n, "axes");
    if (n->opset >= 10) {
        if (has_attrs)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: from opset 10 starts/ends/axes are inputs, not attributes "
                            "(model opset %d); move them to inputs 1..3",
                            ir_node_label(n), n->opset);
        if (!op_has_input(n, 1) || !op_has_input(n, 2))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: inputs 1 (starts) and 2 (ends) are required from opset 10",
                            ir_node_label(n));
        n->params = p;
        return ANVIL_OK;
    }
    if (n->n_inputs > 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: before opset 10 Slice takes one input and starts/ends/axes as "
                        "attributes, but it has %d inputs (model opset %d)",
                        ir_node_label(n), n->n_inputs, n->opset);
    size_t ns, ne, na;
    CORE_TRY(ir_attr_ints(n, "starts", &p->starts, &ns));
    CORE_TRY(ir_attr_ints(n, "ends", &p->ends, &ne));
    CORE_TRY(ir_attr_ints(n, "axes", &p->axes, &na));
    if (!ir_node_attr(n, "starts") || !ir_node_attr(n, "ends"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attributes 'starts' and 'ends' are required before opset 10",
                        ir_node_label(n));
    p->has_axes = ir_node_attr(n, "axes") != NULL;
    if (ns != ne || (p->has_axes && na != ns))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: 'starts' (%zu), 'ends' (%zu)%s must have the same length",
                        ir_node_label(n), ns, ne, p->has_axes ? " and 'axes'" : "");
    if (ns > IR_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: 'starts' has %zu entries; at most %d axes can be sliced",
                        ir_node_label(n), ns, IR_MAX_RANK);
    p->n = ns;
    n->params = p;
    return ANVIL_OK;
}

static const char *const slice_input_names[5] = {"data", "starts", "ends", "axes", "steps"};

static anvil_status slice_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    out[0].dtype = in[0].dtype;
    const ir_shape *x = &in[0].shape;
    slice_lists l;
    memset(&l, 0, sizeof l);
    bool known = true;
    int64_t len_known = -1; /* the lists' common length, when any of them shows it */
    if (n->opset < 10) {
        slice_lists_from_attrs(n->params, &l);
        len_known = (int64_t)l.k;
    } else {
        for (int i = 1; i < n_in && i <= 4; i++) {
            if (!op_has_input(n, i)) continue;
            CORE_TRY(tensor_check_index_dtype(n, i, slice_input_names[i], in[i].dtype, true));
            if (in[i].dtype != in[1].dtype)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: input %d (%s) is %s but starts is %s; starts, ends, axes "
                                "and steps must share one dtype",
                                ir_node_label(n), i, slice_input_names[i],
                                anvil_dtype_name(in[i].dtype), anvil_dtype_name(in[1].dtype));
            int64_t len;
            CORE_TRY(tensor_list_length(n, i, slice_input_names[i], &in[i], &len));
            if (len >= 0 && len_known >= 0 && len != len_known)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: input %d (%s) has %lld entries but the other lists have "
                                "%lld; starts, ends, axes and steps must have the same length",
                                ir_node_label(n), i, slice_input_names[i], (long long)len,
                                (long long)len_known);
            if (len >= 0) len_known = len;
            if (!in[i].value || len < 0) known = false;
        }
        if (known) CORE_TRY(slice_lists_from_values(n, in, &l));
    }
    if (x->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    ir_shape *y = &out[0].shape;
    *y = *x;
    if (!known) {
        /* Without the values a dim keeps its size only if no list can name it: with axes
         * omitted and the lists' length known, that is every dim past that length. */
        bool axes_default = n->opset >= 10 && !op_has_input(n, 3);
        int cut = axes_default && len_known >= 0 && len_known <= x->rank ? (int)len_known : x->rank;
        for (int i = 0; i < cut; i++) {
            y->d[i] = IR_DIM_UNKNOWN;
            y->sym[i] = -1;
        }
        return ANVIL_OK;
    }
    slice_plan pl;
    CORE_TRY(slice_resolve(n, x->d, x->rank, &l, &pl));
    for (int i = 0; i < x->rank; i++) {
        if (!pl.sliced[i]) continue;
        y->d[i] = pl.count[i];
        y->sym[i] = -1;
    }
    return ANVIL_OK;
}

static anvil_status slice_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    slice_lists l;
    memset(&l, 0, sizeof l);
    if (n->opset < 10) {
        slice_lists_from_attrs(n->params, &l);
    } else {
        size_t k2 = 0;
        CORE_TRY(tensor_read_ints(n, 1, in[1], l.starts, IR_MAX_RANK, &l.k));
        CORE_TRY(tensor_read_ints(n, 2, in[2], l.ends, IR_MAX_RANK, &k2));
        bool bad = k2 != l.k;
        l.has_axes = n_in > 3 && in[3];
        if (l.has_axes) {
            CORE_TRY(tensor_read_ints(n, 3, in[3], l.axes, IR_MAX_RANK, &k2));
            bad = bad || k2 != l.k;
        }
        l.has_steps = n_in > 4 && in[4];
        if (l.has_steps) {
            CORE_TRY(tensor_read_ints(n, 4, in[4], l.steps, IR_MAX_RANK, &k2));
            bad = bad || k2 != l.k;
        }
        if (bad)
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: starts, ends, axes and steps must have the same length",
                            ir_node_label(n));
    }
    slice_plan pl;
    CORE_TRY(slice_resolve(n, x->dims, x->rank, &l, &pl));
    if (y->rank != x->rank || y->dtype != x->dtype)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer rank/dtype mismatch",
                        ir_node_label(n));
    int64_t xstride[IR_MAX_RANK];
    tensor_strides(x->dims, x->rank, xstride);
    tensor_strided s = {.esize = anvil_dtype_size(x->dtype), .rank = x->rank, .dst = y->data};
    int64_t off = 0;
    for (int i = 0; i < x->rank; i++) {
        if (y->dims[i] != pl.count[i])
            return core_err(ANVIL_ERR_INTERNAL,
                            "%s: output buffer dim %d is %lld, slice gives %lld", ir_node_label(n),
                            i, (long long)y->dims[i], (long long)pl.count[i]);
        s.dims[i] = pl.count[i];
        /* a dim read once never advances; skipping its stride avoids step * stride overflow */
        s.stride[i] = pl.count[i] > 1 ? pl.step[i] * xstride[i] : 0;
        off += pl.start[i] * xstride[i];
    }
    size_t numel = op_tensor_numel(y);
    if (numel == 0) return ANVIL_OK;
    s.src = (const char *)x->data + off * (int64_t)s.esize;
    tensor_strided_run(ctx, &s, numel);
    return ANVIL_OK;
}

const op_impl op_impl_slice = {
    .min_inputs = 1, /* 3 from opset 10; check() enforces it per opset */
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4),
    .check = slice_check,
    .infer = slice_infer,
    .run = slice_run,
};

/* ---- Gather ------------------------------------------------------------------------------ */

typedef struct gather_params {
    int64_t axis;
} gather_params;

static anvil_status gather_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, gather_params, p);
    CORE_TRY(ir_attr_int(n, "axis", 0, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status gather_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const gather_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "indices", in[1].dtype, true));
    out[0].dtype = in[0].dtype;
    const ir_shape *x = &in[0].shape, *ix = &in[1].shape;
    if (x->rank == 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 (data) is a scalar; Gather needs data of rank >= 1",
                        ir_node_label(n));
    if (x->rank < 0 || ix->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    int r = x->rank + ix->rank - 1;
    CORE_TRY(tensor_check_rank(n, "the output", r));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, r);
    int o = 0;
    for (int i = 0; i < axis; i++) tensor_dim_copy(y, o++, x, i);
    for (int i = 0; i < ix->rank; i++) tensor_dim_copy(y, o++, ix, i);
    for (int i = axis + 1; i < x->rank; i++) tensor_dim_copy(y, o++, x, i);
    return ANVIL_OK;
}

typedef struct gather_job {
    const char *src;
    char *dst;
    const op_tensor *indices;
    size_t q;           /* number of indices */
    int64_t axis_dim;   /* size of the gathered axis */
    size_t inner_bytes; /* bytes of one slice after the axis */
} gather_job;

static void gather_rows(void *arg, size_t begin, size_t end) {
    const gather_job *j = arg;
    for (size_t row = begin; row < end; row++) {
        size_t o = row / j->q, t = row % j->q;
        int64_t idx = core_load_i64(j->indices->dtype, j->indices->data, t);
        if (idx < 0) idx += j->axis_dim;
        const char *src = j->src + ((int64_t)o * j->axis_dim + idx) * (int64_t)j->inner_bytes;
        memcpy(j->dst + row * j->inner_bytes, src, j->inner_bytes);
    }
}

static anvil_status gather_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const gather_params *p = n->params;
    const op_tensor *x = in[0], *ix = in[1];
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    CORE_TRY(tensor_check_run_indices(n, ix));
    int64_t s = x->dims[axis];
    size_t q = op_tensor_numel(ix);
    /* every index is checked before any byte moves, so a bad one leaves no partial output */
    for (size_t t = 0; t < q; t++) {
        int64_t v = core_load_i64(ix->dtype, ix->data, t);
        if (v < -s || v >= s) return tensor_gather_index_error(n, ix, t, v, axis, s);
    }
    op_tensor *y = out[0];
    gather_job job = {.src = x->data, .dst = y->data, .indices = ix, .q = q, .axis_dim = s};
    job.inner_bytes = tensor_dims_prod(x->dims, axis + 1, x->rank) * anvil_dtype_size(x->dtype);
    size_t rows = tensor_dims_prod(x->dims, 0, axis) * q;
    if (rows == 0 || job.inner_bytes == 0) return ANVIL_OK;
    if (op_tensor_numel(y) * anvil_dtype_size(y->dtype) != rows * job.inner_bytes)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer size does not match",
                        ir_node_label(n));
    op_parallel_for(ctx, rows, gather_rows, &job);
    return ANVIL_OK;
}

const op_impl op_impl_gather = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = gather_check,
    .infer = gather_infer,
    .run = gather_run,
};
