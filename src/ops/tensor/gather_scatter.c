/* Index-driven data movement: GatherElements, GatherND, ScatterElements, Scatter (its opset 9-10
 * name), ScatterND and OneHot. Data is moved as bytes of any fixed-size dtype; the scatter
 * reductions (add, mul, max, min) compute in the element's own type. Every index is checked
 * before any output byte is written, and a bad one is reported with its value, its position in
 * the indices tensor and the valid range. */
#include "ops/tensor_common.h"

/* ---- scatter reductions -------------------------------------------------------------------- */

typedef enum idx_red { IDX_RED_NONE, IDX_RED_ADD, IDX_RED_MUL, IDX_RED_MAX, IDX_RED_MIN } idx_red;

static const char *const idx_red_names[] = {"none", "add", "mul", "max", "min"};

/* Parses the `reduction` attribute: absent before opset 16; none/add/mul from 16; max/min
 * from 18. */
static anvil_status idx_parse_reduction(const ir_node *n, idx_red *out) {
    *out = IDX_RED_NONE;
    const char *s;
    CORE_TRY(ir_attr_string(n, "reduction", "none", &s));
    CORE_TRY(tensor_attr_since(n, "reduction", 16));
    int top = n->opset >= 18 ? 4 : 2;
    for (int i = 0; i <= top; i++)
        if (strcmp(s, idx_red_names[i]) == 0) {
            *out = (idx_red)i;
            return ANVIL_OK;
        }
    return core_err(ANVIL_ERR_INVALID_MODEL,
                    "%s: attribute 'reduction' is '%s'; at opset %d it must be one of none, add, "
                    "mul%s",
                    ir_node_label(n), s, n->opset, top == 4 ? ", max, min" : "");
}

#define IDX_REDUCE_CASE(DT, T)                                                                     \
    case ANVIL_DTYPE_##DT: {                                                                       \
        T a, b;                                                                                    \
        memcpy(&a, dst, sizeof a);                                                                 \
        memcpy(&b, src, sizeof b);                                                                 \
        switch (red) {                                                                             \
        case IDX_RED_ADD:                                                                          \
            a = (T)(a + b);                                                                        \
            break;                                                                                 \
        case IDX_RED_MUL:                                                                          \
            a = (T)(a * b);                                                                        \
            break;                                                                                 \
        case IDX_RED_MAX:                                                                          \
            a = b > a ? b : a;                                                                     \
            break;                                                                                 \
        default:                                                                                   \
            a = b < a ? b : a;                                                                     \
            break;                                                                                 \
        }                                                                                          \
        memcpy(dst, &a, sizeof a);                                                                 \
        return;                                                                                    \
    }

/* Unsigned arithmetic for the integer add/mul so overflow wraps instead of being undefined. */
static void idx_reduce_elem(anvil_dtype dt, idx_red red, char *dst, const char *src) {
    switch (dt) {
        IDX_REDUCE_CASE(FLOAT32, float)
        IDX_REDUCE_CASE(FLOAT64, double)
        IDX_REDUCE_CASE(UINT8, uint8_t)
        IDX_REDUCE_CASE(UINT16, uint16_t)
        IDX_REDUCE_CASE(UINT32, uint32_t)
        IDX_REDUCE_CASE(UINT64, uint64_t)
    case ANVIL_DTYPE_INT8:
    case ANVIL_DTYPE_INT16:
    case ANVIL_DTYPE_INT32:
    case ANVIL_DTYPE_INT64: {
        size_t es = anvil_dtype_size(dt);
        int64_t a = core_load_i64(dt, dst, 0), b = core_load_i64(dt, src, 0);
        int64_t r = red == IDX_RED_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
                    : red == IDX_RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                    : red == IDX_RED_MAX ? (b > a ? b : a)
                                         : (b < a ? b : a);
        /* keep the low bytes (little-endian), i.e. wrap to the element width */
        memcpy(dst, &r, es);
        return;
    }
    case ANVIL_DTYPE_FLOAT16:
    case ANVIL_DTYPE_BFLOAT16: {
        float a = (float)core_load_f64(dt, dst, 0), b = (float)core_load_f64(dt, src, 0);
        float r = red == IDX_RED_ADD   ? a + b
                  : red == IDX_RED_MUL ? a * b
                  : red == IDX_RED_MAX ? (b > a ? b : a)
                                       : (b < a ? b : a);
        core_store_f64(dt, dst, 0, r);
        return;
    }
    default: /* bool: refused at inference for any reduction */
        return;
    }
}

static anvil_status idx_check_reduction_dtype(const ir_node *n, idx_red red, anvil_dtype dt) {
    if (red != IDX_RED_NONE && (dt == ANVIL_DTYPE_BOOL || !core_dtype_supported(dt)))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: reduction '%s' is not defined for dtype %s; use a numeric dtype",
                        ir_node_label(n), idx_red_names[red], anvil_dtype_name(dt));
    return ANVIL_OK;
}

/* Dtype rules of the scatters: data holdable, indices INT64 (or INT32 where allowed), the
 * reduction defined for data's dtype and updates (input 2) of data's dtype. */
static anvil_status idx_scatter_dtypes(const ir_node *n, const op_tinfo *in, idx_red red,
                                       bool allow_int32) {
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "indices", in[1].dtype, allow_int32));
    CORE_TRY(idx_check_reduction_dtype(n, red, in[0].dtype));
    if (in[2].dtype != in[0].dtype)
        return core_err(ANVIL_ERR_SHAPE, "%s: updates are %s but data is %s; they must match",
                        ir_node_label(n), anvil_dtype_name(in[2].dtype),
                        anvil_dtype_name(in[0].dtype));
    return ANVIL_OK;
}

/* A scatter's output starts as a copy of data (nothing to copy when it runs in place). */
static void idx_copy_data(const op_tensor *x, op_tensor *y) {
    size_t cnt = op_tensor_numel(x);
    if (y->data != x->data && cnt) memcpy(y->data, x->data, cnt * anvil_dtype_size(x->dtype));
}

/* Writes src over dst or reduces it into dst. */
static inline void idx_apply(anvil_dtype dt, idx_red red, size_t es, char *dst, const char *src) {
    if (red == IDX_RED_NONE)
        core_elem_copy(dst, src, es);
    else
        idx_reduce_elem(dt, red, dst, src);
}

/* Checks every index of t against [-dim, dim) and reports the first bad one. */
static anvil_status idx_check_all(const ir_node *n, const char *what, const op_tensor *t,
                                  int64_t dim) {
    size_t cnt = op_tensor_numel(t);
    for (size_t i = 0; i < cnt; i++) {
        int64_t v = core_load_i64(t->dtype, t->data, i);
        if (v < -dim || v >= dim)
            return tensor_index_error(n, what, v, t->dims, t->rank, i, -dim, dim - 1);
    }
    return ANVIL_OK;
}

/* ---- op tables ------------------------------------------------------------------------------ */

/* A gather reads data and indices into a new output. */
#define GATHER_IMPL(op, checkfn, inferfn, runfn)                                                   \
    const op_impl op_impl_##op = {.min_inputs = 2,                                                 \
                                  .max_inputs = 2,                                                 \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .check = checkfn,                                                \
                                  .infer = inferfn,                                                \
                                  .run = runfn};
/* A scatter writes updates (input 2) into a copy of data at indices; the copy may be data itself.
 */
#define SCATTER_IMPL(op, checkfn, inferfn, runfn)                                                  \
    const op_impl op_impl_##op = {.min_inputs = 3,                                                 \
                                  .max_inputs = 3,                                                 \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .flags = OP_INPLACE_0,                                           \
                                  .check = checkfn,                                                \
                                  .infer = inferfn,                                                \
                                  .run = runfn};

/* ---- GatherElements / ScatterElements / Scatter -------------------------------------------- */

typedef struct elem_params {
    int64_t axis;
    idx_red red;
} elem_params;

/* GatherElements and ScatterElements exist from opset 11; Scatter is ScatterElements' name for
 * opsets 9 and 10. Only ScatterElements has the reduction attribute. */
static anvil_status elem_check(ir_graph *g, ir_node *n) {
    bool scatter = n->op == IR_OP_SCATTER;
    CORE_TRY(tensor_check_opset(n, scatter ? 9 : 11, scatter ? 11 : 0));
    OP_PARAMS_NEW(g, elem_params, p);
    p->red = IDX_RED_NONE;
    CORE_TRY(tensor_attr_axis(n, 0, &p->axis));
    if (n->op == IR_OP_SCATTERELEMENTS) CORE_TRY(idx_parse_reduction(n, &p->red));
    n->params = p;
    return ANVIL_OK;
}

/* data and indices have equal ranks; along every axis but `axis` the indices may not reach past
 * data. */
static anvil_status elem_shapes(const ir_node *n, const ir_shape *x, const ir_shape *ix,
                                int64_t axis_attr, int *axis) {
    *axis = 0;
    if (x->rank == 0)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 (data) is a scalar; rank >= 1 is needed",
                        ir_node_label(n));
    if (x->rank < 0 || ix->rank < 0) return ANVIL_OK;
    if (x->rank != ix->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: data has rank %d but indices have rank %d; they must be equal",
                        ir_node_label(n), x->rank, ix->rank);
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", axis_attr, x->rank, axis));
    for (int i = 0; i < x->rank; i++)
        if (i != *axis && x->d[i] >= 0 && ix->d[i] > x->d[i])
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: indices dim %d is %lld but data dim %d is only %lld",
                            ir_node_label(n), i, (long long)ix->d[i], i, (long long)x->d[i]);
    return ANVIL_OK;
}

static anvil_status gather_elements_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                          int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const elem_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "indices", in[1].dtype, true));
    int axis = 0;
    CORE_TRY(elem_shapes(n, &in[0].shape, &in[1].shape, p->axis, &axis));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[1].shape;
    return ANVIL_OK;
}

/* Offset in data of the element of `idx_tensor` at flat position e, with its axis coordinate
 * replaced by index v. */
static size_t elem_offset(const op_tensor *ix, const int64_t *xs, int axis, size_t e, int64_t v) {
    size_t rem = e, off = 0;
    for (int d = ix->rank - 1; d >= 0; d--) {
        size_t k = rem % (size_t)ix->dims[d];
        rem /= (size_t)ix->dims[d];
        off += (d == axis ? (size_t)v : k) * (size_t)xs[d];
    }
    return off;
}

static anvil_status elem_run_checks(const ir_node *n, const op_tensor *x, const op_tensor *ix,
                                    int *axis) {
    const elem_params *p = n->params;
    ir_shape xs, is;
    ir_shape_set(&xs, x->rank, x->dims);
    ir_shape_set(&is, ix->rank, ix->dims);
    CORE_TRY(elem_shapes(n, &xs, &is, p->axis, axis));
    CORE_TRY(tensor_check_run_indices(n, ix));
    return idx_check_all(n, "the indices", ix, x->dims[*axis]);
}

static anvil_status gather_elements_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                        op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0], *ix = in[1];
    int axis = 0;
    CORE_TRY(elem_run_checks(n, x, ix, &axis));
    int64_t xs[IR_MAX_RANK];
    tensor_strides(x->dims, x->rank, xs);
    size_t es = anvil_dtype_size(x->dtype), cnt = op_tensor_numel(ix);
    int64_t s = x->dims[axis];
    for (size_t e = 0; e < cnt; e++) {
        int64_t v = core_load_i64(ix->dtype, ix->data, e);
        if (v < 0) v += s;
        core_elem_copy((char *)out[0]->data + e * es,
                       (const char *)x->data + elem_offset(ix, xs, axis, e, v) * es, es);
    }
    return ANVIL_OK;
}

static anvil_status scatter_elements_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                           int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const elem_params *p = n->params;
    CORE_TRY(idx_scatter_dtypes(n, in, p->red, true));
    int axis = 0;
    CORE_TRY(elem_shapes(n, &in[0].shape, &in[1].shape, p->axis, &axis));
    const ir_shape *ix = &in[1].shape, *u = &in[2].shape;
    if (ix->rank >= 0 && u->rank >= 0) {
        bool same = ix->rank == u->rank;
        for (int i = 0; same && i < ix->rank; i++)
            same = ix->d[i] < 0 || u->d[i] < 0 || ix->d[i] == u->d[i];
        if (!same)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: updates must have the shape of indices (ranks %d and %d, or a "
                            "dim differs)",
                            ir_node_label(n), u->rank, ix->rank);
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status scatter_elements_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                         op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const elem_params *p = n->params;
    const op_tensor *x = in[0], *ix = in[1], *u = in[2];
    int axis = 0;
    CORE_TRY(elem_run_checks(n, x, ix, &axis));
    if (op_tensor_numel(u) != op_tensor_numel(ix))
        return core_err(ANVIL_ERR_RUNTIME, "%s: updates have %zu elements, indices %zu",
                        ir_node_label(n), op_tensor_numel(u), op_tensor_numel(ix));
    size_t es = anvil_dtype_size(x->dtype), cnt = op_tensor_numel(ix);
    idx_copy_data(x, out[0]);
    char *y = out[0]->data;
    int64_t xs[IR_MAX_RANK];
    tensor_strides(x->dims, x->rank, xs);
    int64_t s = x->dims[axis];
    /* in index order, so with duplicate indices and no reduction the last update wins */
    for (size_t e = 0; e < cnt; e++) {
        int64_t v = core_load_i64(ix->dtype, ix->data, e);
        if (v < 0) v += s;
        idx_apply(x->dtype, p->red, es, y + elem_offset(ix, xs, axis, e, v) * es,
                  (const char *)u->data + e * es);
    }
    return ANVIL_OK;
}

GATHER_IMPL(gatherelements, elem_check, gather_elements_infer, gather_elements_run)
SCATTER_IMPL(scatterelements, elem_check, scatter_elements_infer, scatter_elements_run)
SCATTER_IMPL(scatter, elem_check, scatter_elements_infer, scatter_elements_run)

/* ---- GatherND / ScatterND ------------------------------------------------------------------ */

typedef struct nd_params {
    int64_t batch_dims;
    idx_red red;
} nd_params;

static anvil_status gather_nd_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 11, 0));
    OP_PARAMS_NEW(g, nd_params, p);
    p->red = IDX_RED_NONE;
    CORE_TRY(tensor_attr_since(n, "batch_dims", 12));
    CORE_TRY(ir_attr_int(n, "batch_dims", 0, &p->batch_dims));
    if (p->batch_dims < 0 || p->batch_dims >= IR_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'batch_dims' is %lld; it must be in 0..%d", ir_node_label(n),
                        (long long)p->batch_dims, IR_MAX_RANK - 1);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status scatter_nd_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 11, 0));
    OP_PARAMS_NEW(g, nd_params, p);
    p->batch_dims = 0;
    CORE_TRY(idx_parse_reduction(n, &p->red));
    n->params = p;
    return ANVIL_OK;
}

/* Shape rules shared by GatherND and ScatterND (b = 0): data rank r >= 1, indices rank q >= 1,
 * the last indices dim k in 1..r - b, the leading b dims equal. Sets *k (-1 while unknown). */
static anvil_status nd_shapes(const ir_node *n, const ir_shape *x, const ir_shape *ix, int b,
                              int64_t *k) {
    *k = -1;
    if (x->rank == 0 || ix->rank == 0)
        return core_err(ANVIL_ERR_SHAPE, "%s: data (rank %d) and indices (rank %d) need rank >= 1",
                        ir_node_label(n), x->rank, ix->rank);
    if (x->rank < 0 || ix->rank < 0) return ANVIL_OK;
    if (b >= x->rank || b >= ix->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: batch_dims %d must be below the ranks of data (%d) and indices (%d)",
                        ir_node_label(n), b, x->rank, ix->rank);
    for (int i = 0; i < b; i++)
        if (x->d[i] >= 0 && ix->d[i] >= 0 && x->d[i] != ix->d[i])
            return core_err(ANVIL_ERR_SHAPE, "%s: batch dim %d is %lld in data but %lld in indices",
                            ir_node_label(n), i, (long long)x->d[i], (long long)ix->d[i]);
    *k = ix->d[ix->rank - 1];
    if (*k >= 0 && (*k < 1 || *k > x->rank - b))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the last indices dim is %lld; it must be in 1..%d (data rank %d "
                        "minus batch_dims %d)",
                        ir_node_label(n), (long long)*k, x->rank - b, x->rank, b);
    return ANVIL_OK;
}

static anvil_status gather_nd_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const nd_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    CORE_TRY(tensor_check_index_dtype(n, 1, "indices", in[1].dtype, false));
    const ir_shape *x = &in[0].shape, *ix = &in[1].shape;
    int64_t k = -1;
    CORE_TRY(nd_shapes(n, x, ix, (int)p->batch_dims, &k));
    out[0].dtype = in[0].dtype;
    if (k < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int r = ix->rank - 1 + x->rank - (int)p->batch_dims - (int)k;
    CORE_TRY(tensor_check_rank(n, "the output", r));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, r);
    int o = 0;
    for (int i = 0; i < ix->rank - 1; i++) tensor_dim_copy(y, o++, ix, i);
    for (int i = (int)p->batch_dims + (int)k; i < x->rank; i++) tensor_dim_copy(y, o++, x, i);
    return ANVIL_OK;
}

/* Geometry shared by the ND kernels: for index tuple t (of `tuples`), the slice of `slice`
 * elements it selects starts at element nd_tuple_offset(...) of data. */
typedef struct nd_geom {
    size_t tuples, per_batch, slice, batch_elems;
    int64_t k;
    int b;
} nd_geom;

static anvil_status nd_prepare(const ir_node *n, const op_tensor *x, const op_tensor *ix, int b,
                               nd_geom *g) {
    ir_shape xs, is;
    ir_shape_set(&xs, x->rank, x->dims);
    ir_shape_set(&is, ix->rank, ix->dims);
    CORE_TRY(nd_shapes(n, &xs, &is, b, &g->k));
    if (ix->dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_RUNTIME, "%s: indices must be INT64 but are %s", ir_node_label(n),
                        anvil_dtype_name(ix->dtype));
    g->b = b;
    g->tuples = tensor_dims_prod(ix->dims, 0, ix->rank - 1);
    size_t batches = tensor_dims_prod(ix->dims, 0, b);
    g->per_batch = batches ? g->tuples / batches : 0;
    g->slice = tensor_dims_prod(x->dims, b + (int)g->k, x->rank);
    g->batch_elems = tensor_dims_prod(x->dims, b, x->rank);
    /* every index checked against its own data dim before anything moves */
    size_t cnt = op_tensor_numel(ix);
    for (size_t i = 0; i < cnt; i++) {
        int64_t dim = x->dims[b + (int)(i % (size_t)g->k)];
        int64_t v = core_load_i64(ix->dtype, ix->data, i);
        if (v < -dim || v >= dim)
            return tensor_index_error(n, "the indices", v, ix->dims, ix->rank, i, -dim, dim - 1);
    }
    return ANVIL_OK;
}

static size_t nd_tuple_offset(const nd_geom *g, const op_tensor *x, const op_tensor *ix, size_t t) {
    size_t off = g->per_batch ? (t / g->per_batch) * g->batch_elems : 0;
    size_t stride = g->slice;
    for (int64_t j = g->k - 1; j >= 0; j--) {
        int64_t dim = x->dims[g->b + j];
        int64_t v = core_load_i64(ix->dtype, ix->data, t * (size_t)g->k + (size_t)j);
        if (v < 0) v += dim;
        off += (size_t)v * stride;
        stride *= (size_t)dim;
    }
    return off;
}

static anvil_status gather_nd_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                  op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const nd_params *p = n->params;
    const op_tensor *x = in[0], *ix = in[1];
    nd_geom g = {0};
    CORE_TRY(nd_prepare(n, x, ix, (int)p->batch_dims, &g));
    size_t es = anvil_dtype_size(x->dtype), bytes = g.slice * es;
    if (op_tensor_numel(out[0]) != g.tuples * g.slice)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer size does not match",
                        ir_node_label(n));
    for (size_t t = 0; t < g.tuples && bytes; t++)
        memcpy((char *)out[0]->data + t * bytes,
               (const char *)x->data + nd_tuple_offset(&g, x, ix, t) * es, bytes);
    return ANVIL_OK;
}

static anvil_status scatter_nd_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                     int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const nd_params *p = n->params;
    CORE_TRY(idx_scatter_dtypes(n, in, p->red, false));
    const ir_shape *x = &in[0].shape, *ix = &in[1].shape, *u = &in[2].shape;
    int64_t k = -1;
    CORE_TRY(nd_shapes(n, x, ix, 0, &k));
    if (k >= 0 && u->rank >= 0) {
        /* updates: indices.shape[:-1] + data.shape[k:] */
        int want = ix->rank - 1 + x->rank - (int)k;
        bool ok = u->rank == want;
        for (int i = 0; ok && i < want; i++) {
            int64_t e = i < ix->rank - 1 ? ix->d[i] : x->d[i - (ix->rank - 1) + (int)k];
            ok = e < 0 || u->d[i] < 0 || e == u->d[i];
        }
        if (!ok)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: updates (rank %d) must have shape indices.shape[:-1] + "
                            "data.shape[%lld:] (rank %d)",
                            ir_node_label(n), u->rank, (long long)k, want);
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = *x;
    return ANVIL_OK;
}

static anvil_status scatter_nd_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                   op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const nd_params *p = n->params;
    const op_tensor *x = in[0], *ix = in[1], *u = in[2];
    nd_geom g = {0};
    CORE_TRY(nd_prepare(n, x, ix, 0, &g));
    if (op_tensor_numel(u) != g.tuples * g.slice)
        return core_err(ANVIL_ERR_RUNTIME, "%s: updates have %zu elements; expected %zu",
                        ir_node_label(n), op_tensor_numel(u), g.tuples * g.slice);
    size_t es = anvil_dtype_size(x->dtype);
    idx_copy_data(x, out[0]);
    char *y = out[0]->data;
    for (size_t t = 0; t < g.tuples; t++) {
        char *dst = y + nd_tuple_offset(&g, x, ix, t) * es;
        const char *src = (const char *)u->data + t * g.slice * es;
        if (p->red == IDX_RED_NONE) {
            if (g.slice) memcpy(dst, src, g.slice * es);
            continue;
        }
        for (size_t i = 0; i < g.slice; i++)
            idx_reduce_elem(x->dtype, p->red, dst + i * es, src + i * es);
    }
    return ANVIL_OK;
}

GATHER_IMPL(gathernd, gather_nd_check, gather_nd_infer, gather_nd_run)
SCATTER_IMPL(scatternd, scatter_nd_check, scatter_nd_infer, scatter_nd_run)

/* ---- OneHot -------------------------------------------------------------------------------- */

typedef struct onehot_params {
    int64_t axis;
} onehot_params;

static anvil_status onehot_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 9, 0));
    OP_PARAMS_NEW(g, onehot_params, p);
    CORE_TRY(ir_attr_int(n, "axis", -1, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

/* depth is a numeric scalar (or one-element 1-D tensor); fractional values truncate. */
static anvil_status onehot_depth(const ir_node *n, anvil_dtype dt, const void *v, int64_t *out) {
    double d = core_load_f64(dt, v, 0);
    if (!(d >= 1 && d < 9.0e15))
        return core_err(ANVIL_ERR_SHAPE, "%s: depth is %g; it must be >= 1", ir_node_label(n), d);
    *out = (int64_t)d;
    return ANVIL_OK;
}

static anvil_status onehot_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const onehot_params *p = n->params;
    for (int i = 0; i < 3; i++) {
        CORE_TRY(tensor_check_dtype(n, i, in[i].dtype));
        if (i < 2 && (in[i].dtype == ANVIL_DTYPE_BOOL))
            return core_err(ANVIL_ERR_SHAPE, "%s: input %d must be numeric, not BOOL",
                            ir_node_label(n), i);
    }
    const ir_shape *ds = &in[1].shape, *vs = &in[2].shape;
    if (ds->rank > 1 || (ds->rank == 1 && ds->d[0] >= 0 && ds->d[0] != 1))
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (depth) must hold exactly one value",
                        ir_node_label(n));
    if (vs->rank >= 0 && (vs->rank != 1 || (vs->d[0] >= 0 && vs->d[0] != 2)))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 2 (values) must be 1-D with 2 elements [off, on]",
                        ir_node_label(n));
    out[0].dtype = in[2].dtype;
    const ir_shape *ix = &in[0].shape;
    if (ix->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        return ANVIL_OK;
    }
    int r = ix->rank + 1;
    CORE_TRY(tensor_check_rank(n, "the output", r));
    int axis = 0;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, r, &axis));
    ir_shape *y = &out[0].shape;
    tensor_shape_unknown_dims(y, r);
    int o = 0;
    for (int i = 0; i < r; i++) {
        if (i == axis) {
            if (in[1].value) CORE_TRY(onehot_depth(n, in[1].dtype, in[1].value, &y->d[i]));
            continue;
        }
        tensor_dim_copy(y, i, ix, o++);
    }
    return ANVIL_OK;
}

static anvil_status onehot_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const onehot_params *p = n->params;
    const op_tensor *ix = in[0], *vals = in[2];
    op_tensor *y = out[0];
    int axis = 0;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, y->rank, &axis));
    int64_t depth = 0;
    CORE_TRY(onehot_depth(n, in[1]->dtype, in[1]->data, &depth));
    if (y->dims[axis] != depth || op_tensor_numel(vals) != 2)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer does not match depth",
                        ir_node_label(n));
    size_t es = anvil_dtype_size(y->dtype);
    size_t outer = tensor_dims_prod(y->dims, 0, axis);
    size_t inner = tensor_dims_prod(y->dims, axis + 1, y->rank);
    const char *off = vals->data, *on = (const char *)vals->data + es;
    char *dst = y->data;
    for (size_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (size_t i = 0; i < inner; i++) {
                /* indices outside [-depth, depth) give an all-off column, as ONNX specifies */
                double v = core_load_f64(ix->dtype, ix->data, o * inner + i);
                int64_t k = (v > -9.0e15 && v < 9.0e15) ? (int64_t)v : INT64_MIN;
                if (k < 0 && k >= -depth) k += depth;
                core_elem_copy(dst, k == d ? on : off, es);
                dst += es;
            }
    return ANVIL_OK;
}

const op_impl op_impl_onehot = {
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 1,
    .check = onehot_check,
    .infer = onehot_infer,
    .run = onehot_run,
};
