/* Tensor ops that rearrange data without index inputs: DepthToSpace, SpaceToDepth, ReverseSequence
 * and CenterCropPad. They move bytes, so they hold any fixed-size dtype. */
#include "ops/tensor_common.h"

/* ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------- */

typedef struct d2s_params {
    int64_t block;
    bool crd; /* DepthToSpace mode CRD (column, row, depth) instead of DCR */
} d2s_params;

/* Checks both ops; only DepthToSpace has the mode attribute. */
static anvil_status d2s_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, d2s_params, p);
    p->crd = false;
    if (!ir_node_attr(n, "blocksize"))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'blocksize' is required",
                        ir_node_label(n));
    CORE_TRY(ir_attr_int(n, "blocksize", 1, &p->block));
    if (p->block < 1 || p->block > (1 << 20))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'blocksize' is %lld; it must be in 1..%d", ir_node_label(n),
                        (long long)p->block, 1 << 20);
    if (n->op == IR_OP_DEPTHTOSPACE) {
        const char *mode;
        CORE_TRY(ir_attr_string(n, "mode", "DCR", &mode));
        CORE_TRY(tensor_attr_since(n, "mode", 11));
        if (strcmp(mode, "CRD") == 0)
            p->crd = true;
        else if (strcmp(mode, "DCR") != 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'mode' is '%s'; expected 'DCR' or 'CRD'",
                            ir_node_label(n), mode);
    }
    n->params = p;
    return ANVIL_OK;
}

/* Infers either direction: DepthToSpace moves channels into space, SpaceToDepth back. */
static anvil_status d2s_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const d2s_params *p = n->params;
    bool to_space = n->op == IR_OP_DEPTHTOSPACE;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    if (x->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    if (x->rank != 4)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 has rank %d; expected 4 (N,C,H,W)",
                        ir_node_label(n), x->rank);
    int64_t bb = p->block * p->block;
    ir_shape *y = &out[0].shape;
    *y = *x;
    for (int i = 1; i < 4; i++) {
        y->d[i] = IR_DIM_UNKNOWN;
        y->sym[i] = -1;
    }
    if (to_space) {
        if (x->d[1] >= 0) {
            if (x->d[1] % bb)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: channels (%lld) must be a multiple of blocksize^2 (%lld)",
                                ir_node_label(n), (long long)x->d[1], (long long)bb);
            y->d[1] = x->d[1] / bb;
        }
        for (int i = 2; i < 4; i++)
            if (x->d[i] >= 0 && !core_mul_i64(x->d[i], p->block, &y->d[i]))
                return core_err(ANVIL_ERR_LIMIT, "%s: output dim %d overflows", ir_node_label(n),
                                i);
    } else {
        if (x->d[1] >= 0 && !core_mul_i64(x->d[1], bb, &y->d[1]))
            return core_err(ANVIL_ERR_LIMIT, "%s: output channels overflow", ir_node_label(n));
        for (int i = 2; i < 4; i++) {
            if (x->d[i] < 0) continue;
            if (x->d[i] % p->block)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: input dim %d (%lld) must be a multiple of blocksize (%lld)",
                                ir_node_label(n), i, (long long)x->d[i], (long long)p->block);
            y->d[i] = x->d[i] / p->block;
        }
    }
    return ANVIL_OK;
}

/* Both are a 6-D transpose: the output is walked as a 6-D view and each view dim gets the input
 * stride that moves to the matching source element. */
static anvil_status d2s_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const d2s_params *p = n->params;
    const op_tensor *x = in[0];
    int64_t b = p->block, N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t sC = H * W, sN = C * sC;
    tensor_strided s = {
        .esize = anvil_dtype_size(x->dtype), .rank = 6, .src = x->data, .dst = out[0]->data};
    if (n->op == IR_OP_DEPTHTOSPACE) {
        /* output viewed as [N, C/b^2, H, b, W, b]; channel c * b^2 + b1 * b + b2 in CRD mode,
         * (b1 * b + b2) * C' + c in DCR mode */
        int64_t c2 = C / (b * b);
        const int64_t dims[6] = {N, c2, H, b, W, b};
        const int64_t crd[6] = {sN, b * b * sC, W, b * sC, 1, sC};
        const int64_t dcr[6] = {sN, sC, W, b * c2 * sC, 1, c2 * sC};
        memcpy(s.dims, dims, sizeof dims);
        memcpy(s.stride, p->crd ? crd : dcr, sizeof crd);
    } else {
        /* output viewed as [N, b, b, C, H/b, W/b]: channel (b1 * b + b2) * C + c */
        const int64_t dims[6] = {N, b, b, C, H / b, W / b};
        const int64_t st[6] = {sN, W, 1, sC, b * W, b};
        memcpy(s.dims, dims, sizeof dims);
        memcpy(s.stride, st, sizeof st);
    }
    tensor_strided_run(ctx, &s, op_tensor_numel(out[0]));
    return ANVIL_OK;
}

/* The op table of DepthToSpace and SpaceToDepth, whose d2s functions tell them apart by n->op. */
#define D2S_IMPL(op)                                                                               \
    const op_impl op_impl_##op = {.min_inputs = 1,                                                 \
                                  .max_inputs = 1,                                                 \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .check = d2s_check,                                              \
                                  .infer = d2s_infer,                                              \
                                  .run = d2s_run};

D2S_IMPL(depthtospace)
D2S_IMPL(spacetodepth)

/* ---- ReverseSequence ----------------------------------------------------------------------- */

typedef struct revseq_params {
    int64_t batch_axis, time_axis;
} revseq_params;

static anvil_status revseq_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 10, 0));
    OP_PARAMS_NEW(g, revseq_params, p);
    CORE_TRY(ir_attr_int(n, "batch_axis", 1, &p->batch_axis));
    CORE_TRY(ir_attr_int(n, "time_axis", 0, &p->time_axis));
    if ((p->batch_axis != 0 && p->batch_axis != 1) || (p->time_axis != 0 && p->time_axis != 1) ||
        p->batch_axis == p->time_axis)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: batch_axis %lld and time_axis %lld must be 0 and 1 in some order",
                        ir_node_label(n), (long long)p->batch_axis, (long long)p->time_axis);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status revseq_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const revseq_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "sequence_lens", in[1].dtype, false));
    const ir_shape *x = &in[0].shape;
    if (x->rank >= 0 && x->rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 has rank %d; ReverseSequence needs >= 2",
                        ir_node_label(n), x->rank);
    int64_t len;
    CORE_TRY(tensor_list_length(n, 1, "sequence_lens", &in[1], &len));
    if (x->rank >= 2 && len >= 0 && x->d[p->batch_axis] >= 0 && len != x->d[p->batch_axis])
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (sequence_lens) has %lld entries but the batch axis has %lld",
                        ir_node_label(n), (long long)len, (long long)x->d[p->batch_axis]);
    out[0].dtype = in[0].dtype;
    out[0].shape = *x;
    return ANVIL_OK;
}

static anvil_status revseq_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const revseq_params *p = n->params;
    const op_tensor *x = in[0], *lens = in[1];
    int64_t B = x->dims[p->batch_axis], T = x->dims[p->time_axis];
    if ((int64_t)op_tensor_numel(lens) != B)
        return core_err(ANVIL_ERR_RUNTIME, "%s: sequence_lens has %zu entries, batch is %lld",
                        ir_node_label(n), op_tensor_numel(lens), (long long)B);
    for (int64_t b = 0; b < B; b++) {
        int64_t l = core_load_i64(lens->dtype, lens->data, (size_t)b);
        if (l < 0 || l > T)
            return tensor_index_error(n, "sequence_lens", l, lens->dims, lens->rank, (size_t)b, 0,
                                      T);
    }
    size_t es = anvil_dtype_size(x->dtype);
    size_t inner = tensor_dims_prod(x->dims, 2, x->rank) * es;
    int64_t xs[IR_MAX_RANK];
    tensor_strides(x->dims, x->rank, xs);
    int64_t sb = xs[p->batch_axis], st = xs[p->time_axis];
    for (int64_t b = 0; b < B; b++) {
        int64_t l = core_load_i64(lens->dtype, lens->data, (size_t)b);
        for (int64_t t = 0; t < T; t++) {
            int64_t from = t < l ? l - 1 - t : t;
            size_t dst = (size_t)(b * sb + t * st) * es, src = (size_t)(b * sb + from * st) * es;
            if (inner) memcpy((char *)out[0]->data + dst, (const char *)x->data + src, inner);
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_reversesequence = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = revseq_check,
    .infer = revseq_infer,
    .run = revseq_run,
};

/* ---- CenterCropPad ------------------------------------------------------------------------- */

typedef struct ccp_params {
    const int64_t *axes; /* NULL: all axes */
    size_t n_axes;
} ccp_params;

static anvil_status ccp_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 18, 0));
    OP_PARAMS_NEW(g, ccp_params, p);
    CORE_TRY(ir_attr_ints(n, "axes", &p->axes, &p->n_axes));
    if (p->n_axes > IR_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'axes' has %zu entries",
                        ir_node_label(n), p->n_axes);
    n->params = p;
    return ANVIL_OK;
}

/* Resolves the axes the shape input applies to (all when the attribute is absent); refuses
 * duplicates. */
static anvil_status ccp_axes(const ir_node *n, int rank, int *axes, int *count) {
    const ccp_params *p = n->params;
    bool seen[IR_MAX_RANK] = {false};
    if (!p->axes) {
        for (int i = 0; i < rank; i++) axes[i] = i;
        *count = rank;
        return ANVIL_OK;
    }
    for (size_t i = 0; i < p->n_axes; i++) {
        CORE_TRY(op_norm_axis(n, "attribute 'axes'", p->axes[i], rank, &axes[i]));
        if (seen[axes[i]])
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'axes' repeats axis %d",
                            ir_node_label(n), axes[i]);
        seen[axes[i]] = true;
    }
    *count = (int)p->n_axes;
    return ANVIL_OK;
}

static anvil_status ccp_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "shape", in[1].dtype, true));
    const ir_shape *x = &in[0].shape;
    out[0].dtype = in[0].dtype;
    if (x->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int axes[IR_MAX_RANK] = {0}, na = 0;
    CORE_TRY(ccp_axes(n, x->rank, axes, &na));
    int64_t len;
    CORE_TRY(tensor_list_length(n, 1, "shape", &in[1], &len));
    if (len >= 0 && len != na)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (shape) has %lld entries but %d axes are cropped/padded",
                        ir_node_label(n), (long long)len, na);
    ir_shape *y = &out[0].shape;
    *y = *x;
    int64_t sz[IR_MAX_RANK] = {0};
    size_t cnt = 0;
    if (in[1].value) CORE_TRY(op_value_ints(n, 1, &in[1], sz, IR_MAX_RANK, &cnt));
    for (int i = 0; i < na; i++) {
        y->sym[axes[i]] = -1;
        y->d[axes[i]] = IR_DIM_UNKNOWN;
        if (!in[1].value) continue;
        if (sz[i] < 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: shape[%d] is %lld; sizes must be >= 0",
                            ir_node_label(n), i, (long long)sz[i]);
        y->d[axes[i]] = sz[i];
    }
    return ANVIL_OK;
}

static anvil_status ccp_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    if (y->rank != x->rank)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output rank does not match", ir_node_label(n));
    size_t es = anvil_dtype_size(x->dtype);
    size_t total = op_tensor_numel(y);
    if (total) memset(y->data, 0, total * es);
    /* per axis: the overlapping extent, where it starts in the input (crop: the larger half of
     * the excess goes after) and in the output (pad: likewise) */
    int64_t ext[IR_MAX_RANK], x0[IR_MAX_RANK], y0[IR_MAX_RANK];
    int r = x->rank;
    size_t cnt = 1;
    for (int i = 0; i < r; i++) {
        int64_t a = x->dims[i], b = y->dims[i];
        ext[i] = a < b ? a : b;
        x0[i] = a > b ? (a - b) / 2 : 0;
        y0[i] = b > a ? (b - a) / 2 : 0;
        cnt *= (size_t)ext[i];
    }
    int64_t xs[IR_MAX_RANK], ys[IR_MAX_RANK];
    tensor_strides(x->dims, r, xs);
    tensor_strides(y->dims, r, ys);
    for (size_t e = 0; e < cnt; e++) {
        size_t rem = e;
        int64_t xo = 0, yo = 0;
        for (int i = r - 1; i >= 0; i--) {
            int64_t k = (int64_t)(rem % (size_t)ext[i]);
            rem /= (size_t)ext[i];
            xo += (k + x0[i]) * xs[i];
            yo += (k + y0[i]) * ys[i];
        }
        core_elem_copy((char *)y->data + (size_t)yo * es, (const char *)x->data + (size_t)xo * es,
                       es);
    }
    return ANVIL_OK;
}

const op_impl op_impl_centercroppad = {
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = ccp_check,
    .infer = ccp_infer,
    .run = ccp_run,
};
