/* Ops whose output sizes depend on input contents: NonZero, Compress, Unique and
 * NonMaxSuppression. Their outputs cannot be preallocated, so each has a run_alloc kernel that
 * computes first and then asks the runtime for exactly-sized outputs (op_output_alloc). Shape
 * inference reports the rank and dtype and leaves the data-dependent dims unknown. */
#include "ops/tensor_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Output of rank `rank` whose dims are all unknown except those given (>= 0) in known. */
static void shape_partial(ir_shape *s, int rank, const int64_t *known) {
    s->rank = rank;
    for (int i = 0; i < rank; i++) {
        s->d[i] = known ? known[i] : IR_DIM_UNKNOWN;
        s->sym[i] = -1;
    }
}

static anvil_status need_opset(const ir_node *n, int since) {
    if (n->opset < since)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s exists from opset %d but the model imports opset %d; raise the "
                        "model's opset",
                        ir_node_label(n), ir_op_name(n->op), since, n->opset);
    return ANVIL_OK;
}

static anvil_status need_dtype(const ir_node *n, int input, const char *what, anvil_dtype got,
                               anvil_dtype want) {
    if (got != ANVIL_DTYPE_UNDEFINED && got != want)
        return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) must be %s but is %s", ir_node_label(n),
                        input, what, anvil_dtype_name(want), anvil_dtype_name(got));
    return ANVIL_OK;
}

/* Element i of x as a double, for comparisons that need an order across dtypes. Integers
 * compare exactly through int64 when both sides are integers (see item_cmp). */
static int elem_cmp(anvil_dtype dt, const void *a, size_t i, const void *b, size_t j) {
    if (core_dtype_is_float(dt)) {
        double x = core_load_f64(dt, a, i), y = core_load_f64(dt, b, j);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (dt == ANVIL_DTYPE_UINT64) {
        uint64_t x = ((const uint64_t *)a)[i], y = ((const uint64_t *)b)[j];
        return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = core_load_i64(dt, a, i), y = core_load_i64(dt, b, j);
    return x < y ? -1 : x > y ? 1 : 0;
}

static bool elem_nonzero(anvil_dtype dt, const void *p, size_t i) {
    if (core_dtype_is_float(dt)) return core_load_f64(dt, p, i) != 0.0;
    return core_load_i64(dt, p, i) != 0;
}

/* ---- items along an optional axis (Compress, Unique) --------------------------------------- */

/* Inferred shape of the items kept: x's shape with the axis dim unknown, or 1-D of unknown length
 * when the op has no axis (it then works on the flattened input). */
static anvil_status axis_kept_shape(const ir_node *n, bool has_axis, int64_t axis_attr,
                                    const ir_shape *x, ir_shape *y) {
    if (!has_axis) {
        shape_partial(y, 1, NULL);
        return ANVIL_OK;
    }
    if (x->rank < 0) return ANVIL_OK;
    int axis;
    CORE_TRY(op_norm_axis(n, "axis", axis_attr, x->rank, &axis));
    *y = *x;
    y->d[axis] = IR_DIM_UNKNOWN;
    y->sym[axis] = -1;
    return ANVIL_OK;
}

/* x as outer x len x inner around the axis (its items are the len slices), or as 1 x numel x 1
 * (its items are the elements) without an axis. */
typedef struct axis_view {
    int axis;
    size_t outer, len, inner;
} axis_view;

static anvil_status axis_view_of(const ir_node *n, bool has_axis, int64_t axis_attr,
                                 const op_tensor *x, axis_view *v) {
    *v = (axis_view){0, 1, op_tensor_numel(x), 1};
    if (!has_axis) return ANVIL_OK;
    CORE_TRY(op_norm_axis(n, "axis", axis_attr, x->rank, &v->axis));
    v->outer = tensor_dims_prod(x->dims, 0, v->axis);
    v->len = (size_t)x->dims[v->axis];
    v->inner = tensor_dims_prod(x->dims, v->axis + 1, x->rank);
    return ANVIL_OK;
}

/* Dims of an output holding `count` of x's items: x's dims with the axis dim replaced, or one dim
 * without an axis. Returns the rank. */
static int axis_view_dims(const axis_view *v, bool has_axis, const op_tensor *x, size_t count,
                          int64_t *dims) {
    if (!has_axis) {
        dims[0] = (int64_t)count;
        return 1;
    }
    memcpy(dims, x->dims, sizeof x->dims);
    dims[v->axis] = (int64_t)count;
    return x->rank;
}

anvil_status op_run_via_alloc(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    op_tensor tmp[128];
    op_tensor *tp[128];
    if (n_out > 128)
        return core_err(ANVIL_ERR_LIMIT, "%s has more than 128 outputs", ir_node_label(n));
    for (int i = 0; i < n_out; i++) {
        memset(&tmp[i], 0, sizeof tmp[i]);
        tp[i] = out[i] ? &tmp[i] : NULL;
    }
    anvil_status st = op_get(n->op)->run_alloc(n, in, n_in, tp, n_out, ctx);
    for (int i = 0; i < n_out && st == ANVIL_OK; i++) {
        if (!out[i]) continue;
        bool same = tmp[i].data && tmp[i].dtype == out[i]->dtype && tmp[i].rank == out[i]->rank;
        for (int d = 0; same && d < tmp[i].rank; d++) same = tmp[i].dims[d] == out[i]->dims[d];
        if (!same) {
            st = core_err(ANVIL_ERR_RUNTIME,
                          "%s: output %d came out with another dtype or shape than the one "
                          "prepared for it; the op's output shape depends on the input values",
                          ir_node_label(n), i);
            break;
        }
        size_t bytes = 0;
        core_tensor_bytes(tmp[i].dtype, tmp[i].dims, tmp[i].rank, &bytes);
        if (bytes) memcpy(out[i]->data, tmp[i].data, bytes);
    }
    for (int i = 0; i < n_out; i++) op_tensor_release(&tmp[i]);
    return st;
}

/* ---- NonZero ------------------------------------------------------------------------------- */

static anvil_status nonzero_check(ir_graph *g, ir_node *n) {
    (void)g;
    return need_opset(n, 9);
}

static anvil_status nonzero_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g, (void)n, (void)n_in, (void)n_out;
    out[0].dtype = ANVIL_DTYPE_INT64;
    if (in[0].shape.rank >= 0) {
        /* a scalar is treated as a 1-element vector, as numpy's nonzero did */
        int64_t d[2] = {in[0].shape.rank ? in[0].shape.rank : 1, IR_DIM_UNKNOWN};
        shape_partial(&out[0].shape, 2, d);
    }
    return ANVIL_OK;
}

static anvil_status nonzero_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in, (void)n_out;
    const op_tensor *x = in[0];
    if (!core_dtype_supported(x->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: input dtype %s", ir_node_label(n),
                        anvil_dtype_name(x->dtype));
    size_t numel = op_tensor_numel(x), count = 0;
    for (size_t i = 0; i < numel; i++) count += elem_nonzero(x->dtype, x->data, i);
    int rank = x->rank ? x->rank : 1;
    int64_t dims[2] = {rank, (int64_t)count};
    CORE_TRY(op_output_alloc(ctx, out[0], ANVIL_DTYPE_INT64, 2, dims));
    int64_t *y = out[0]->data;
    size_t k = 0;
    for (size_t i = 0; i < numel; i++) {
        if (!elem_nonzero(x->dtype, x->data, i)) continue;
        /* unravel i into coordinates, last dim fastest */
        size_t rest = i;
        for (int d = x->rank - 1; d >= 0; d--) {
            size_t dim = (size_t)x->dims[d];
            y[(size_t)d * count + k] = (int64_t)(rest % dim);
            rest /= dim;
        }
        if (x->rank == 0) y[k] = 0;
        k++;
    }
    return ANVIL_OK;
}

TENSOR_DATA_DEPENDENT_IMPL(nonzero, 1, 1, 1, 1, nonzero_check, nonzero_infer, nonzero_run)

/* ---- Compress ------------------------------------------------------------------------------ */

typedef struct compress_params {
    bool has_axis;
    int64_t axis;
} compress_params;

static anvil_status compress_check(ir_graph *g, ir_node *n) {
    CORE_TRY(need_opset(n, 9));
    OP_PARAMS_NEW(g, compress_params, p);
    p->has_axis = ir_node_attr(n, "axis") != NULL;
    CORE_TRY(ir_attr_int(n, "axis", 0, &p->axis));
    if (n->opset < 11 && p->axis < 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: a negative 'axis' (%lld) is allowed from opset 11 but the model "
                        "imports opset %d",
                        ir_node_label(n), (long long)p->axis, n->opset);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status compress_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g, (void)n_in, (void)n_out;
    const compress_params *p = n->params;
    CORE_TRY(need_dtype(n, 1, "condition", in[1].dtype, ANVIL_DTYPE_BOOL));
    if (in[1].shape.rank >= 0 && in[1].shape.rank != 1)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (condition) must be 1-D but has rank %d",
                        ir_node_label(n), in[1].shape.rank);
    out[0].dtype = in[0].dtype;
    return axis_kept_shape(n, p->has_axis, p->axis, &in[0].shape, &out[0].shape);
}

static anvil_status compress_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in, (void)n_out;
    const compress_params *p = n->params;
    const op_tensor *x = in[0], *c = in[1];
    if (c->dtype != ANVIL_DTYPE_BOOL || c->rank != 1)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (condition) must be a 1-D bool tensor",
                        ir_node_label(n));
    size_t es = anvil_dtype_size(x->dtype);
    axis_view v;
    CORE_TRY(axis_view_of(n, p->has_axis, p->axis, x, &v));
    size_t clen = (size_t)c->dims[0];
    if (clen > v.len)
        return core_err(ANVIL_ERR_RUNTIME,
                        "%s: condition has %zu entries but the input has only %zu %s; it may be "
                        "shorter, not longer",
                        ir_node_label(n), clen, v.len,
                        p->has_axis ? "slices on the axis" : "elements");
    const bool *cond = c->data;
    size_t kept = 0;
    for (size_t i = 0; i < clen; i++) kept += cond[i];
    int64_t dims[IR_MAX_RANK];
    int rank = axis_view_dims(&v, p->has_axis, x, kept, dims);
    CORE_TRY(op_output_alloc(ctx, out[0], x->dtype, rank, dims));
    const unsigned char *src = x->data;
    unsigned char *dst = out[0]->data;
    size_t row = v.inner * es;
    for (size_t o = 0; o < v.outer; o++)
        for (size_t i = 0; i < clen; i++) {
            if (!cond[i]) continue;
            memcpy(dst, src + (o * v.len + i) * row, row);
            dst += row;
        }
    return ANVIL_OK;
}

TENSOR_DATA_DEPENDENT_IMPL(compress, 2, 2, 1, 1, compress_check, compress_infer, compress_run)

/* ---- Unique -------------------------------------------------------------------------------- */

typedef struct unique_params {
    bool sorted, has_axis;
    int64_t axis;
} unique_params;

static anvil_status unique_check(ir_graph *g, ir_node *n) {
    CORE_TRY(need_opset(n, 11));
    OP_PARAMS_NEW(g, unique_params, p);
    CORE_TRY(ir_attr_flag(n, "sorted", true, &p->sorted));
    p->has_axis = ir_node_attr(n, "axis") != NULL;
    CORE_TRY(ir_attr_int(n, "axis", 0, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status unique_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                 op_tinfo *out, int n_out) {
    (void)g, (void)n_in;
    const unique_params *p = n->params;
    out[0].dtype = in[0].dtype;
    CORE_TRY(axis_kept_shape(n, p->has_axis, p->axis, &in[0].shape, &out[0].shape));
    for (int i = 1; i < n_out; i++) {
        out[i].dtype = ANVIL_DTYPE_INT64;
        shape_partial(&out[i].shape, 1, NULL);
    }
    if (n_out > 2 && in[0].shape.rank >= 0) {
        /* inverse_indices has one entry per input element (or slice on the axis) */
        if (!p->has_axis) {
            size_t numel;
            if (ir_shape_numel(&in[0].shape, &numel)) out[2].shape.d[0] = (int64_t)numel;
        } else {
            int axis;
            CORE_TRY(op_norm_axis(n, "axis", p->axis, in[0].shape.rank, &axis));
            out[2].shape.d[0] = in[0].shape.d[axis];
            out[2].shape.sym[0] = in[0].shape.sym[axis];
        }
    }
    return ANVIL_OK;
}

/* Items are the elements (no axis) or the slices along the axis; a slice is compared in
 * row-major order of the remaining dims. */
typedef struct unique_items {
    const op_tensor *x;
    size_t outer, len, inner;
} unique_items;

static int item_cmp(const unique_items *u, size_t a, size_t b) {
    for (size_t o = 0; o < u->outer; o++)
        for (size_t j = 0; j < u->inner; j++) {
            size_t ia = (o * u->len + a) * u->inner + j, ib = (o * u->len + b) * u->inner + j;
            int c = elem_cmp(u->x->dtype, u->x->data, ia, u->x->data, ib);
            if (c) return c;
        }
    return 0;
}

/* Stable merge sort of idx[0..n) by item value, ties keep index order (so the first of equal
 * items is the first occurrence). tmp has room for n. */
static void item_sort(const unique_items *u, int64_t *idx, int64_t *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    item_sort(u, idx, tmp, h);
    item_sort(u, idx + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = item_cmp(u, (size_t)idx[j], (size_t)idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static anvil_status unique_run(const ir_node *n, const op_tensor *const *in, int n_in,
                               op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    const unique_params *p = n->params;
    const op_tensor *x = in[0];
    axis_view v;
    CORE_TRY(axis_view_of(n, p->has_axis, p->axis, x, &v));
    unique_items u = {x, v.outer, v.len, v.inner};
    size_t len = u.len;
    int64_t *idx = core_calloc(len + 1, sizeof *idx), *tmp = core_calloc(len + 1, sizeof *tmp);
    int64_t *group = core_calloc(len + 1, sizeof *group); /* per item: its unique's rank */
    int64_t *first = core_calloc(len + 1, sizeof *first); /* per unique (sorted order) */
    int64_t *count = core_calloc(len + 1, sizeof *count);
    int64_t *pos = core_calloc(len + 1, sizeof *pos); /* sorted unique rank -> output position */
    anvil_status st = ANVIL_OK;
    if (!idx || !tmp || !group || !first || !count || !pos) {
        st = ANVIL_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (size_t i = 0; i < len; i++) idx[i] = (int64_t)i;
    item_sort(&u, idx, tmp, len);
    size_t nu = 0;
    for (size_t i = 0; i < len; i++) {
        if (i == 0 || item_cmp(&u, (size_t)idx[i - 1], (size_t)idx[i]) != 0) {
            first[nu] = idx[i];
            nu++;
        }
        group[idx[i]] = (int64_t)nu - 1;
        count[nu - 1]++;
    }
    if (p->sorted) {
        for (size_t k = 0; k < nu; k++) pos[k] = (int64_t)k;
    } else {
        /* order of first occurrence: sort the uniques' first indices (packed with their rank) */
        for (size_t k = 0; k < nu; k++) tmp[k] = first[k] * (int64_t)(len + 1) + (int64_t)k;
        qsort(tmp, nu, sizeof *tmp, cmp_i64);
        for (size_t k = 0; k < nu; k++) pos[tmp[k] % (int64_t)(len + 1)] = (int64_t)k;
    }
    int64_t dims[IR_MAX_RANK];
    int rank = axis_view_dims(&v, p->has_axis, x, nu, dims);
    if ((st = op_output_alloc(ctx, out[0], x->dtype, rank, dims)) != ANVIL_OK) goto done;
    size_t es = anvil_dtype_size(x->dtype), row = u.inner * es;
    for (size_t k = 0; k < nu; k++)
        for (size_t o = 0; o < u.outer; o++)
            memcpy((unsigned char *)out[0]->data + (o * nu + (size_t)pos[k]) * row,
                   (const unsigned char *)x->data + (o * len + (size_t)first[k]) * row, row);
    int64_t nu64 = (int64_t)nu, len64 = (int64_t)len;
    if (n_out > 1 && out[1]) {
        if ((st = op_output_alloc(ctx, out[1], ANVIL_DTYPE_INT64, 1, &nu64)) != ANVIL_OK) goto done;
        for (size_t k = 0; k < nu; k++) ((int64_t *)out[1]->data)[pos[k]] = first[k];
    }
    if (n_out > 2 && out[2]) {
        if ((st = op_output_alloc(ctx, out[2], ANVIL_DTYPE_INT64, 1, &len64)) != ANVIL_OK)
            goto done;
        for (size_t i = 0; i < len; i++) ((int64_t *)out[2]->data)[i] = pos[group[i]];
    }
    if (n_out > 3 && out[3]) {
        if ((st = op_output_alloc(ctx, out[3], ANVIL_DTYPE_INT64, 1, &nu64)) != ANVIL_OK) goto done;
        for (size_t k = 0; k < nu; k++) ((int64_t *)out[3]->data)[pos[k]] = count[k];
    }
done:
    free(idx);
    free(tmp);
    free(group);
    free(first);
    free(count);
    free(pos);
    return st;
}

TENSOR_DATA_DEPENDENT_IMPL(unique, 1, 1, 1, 4, unique_check, unique_infer, unique_run)

/* ---- NonMaxSuppression --------------------------------------------------------------------- */

typedef struct nms_params {
    bool center_point_box;
} nms_params;

static anvil_status nms_check(ir_graph *g, ir_node *n) {
    CORE_TRY(need_opset(n, 10));
    OP_PARAMS_NEW(g, nms_params, p);
    CORE_TRY(ir_attr_flag(n, "center_point_box", false, &p->center_point_box));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status nms_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g, (void)n_out;
    const ir_shape *b = &in[0].shape, *s = &in[1].shape;
    CORE_TRY(need_dtype(n, 0, "boxes", in[0].dtype, ANVIL_DTYPE_FLOAT32));
    CORE_TRY(need_dtype(n, 1, "scores", in[1].dtype, ANVIL_DTYPE_FLOAT32));
    if (b->rank >= 0 && (b->rank != 3 || (b->d[2] >= 0 && b->d[2] != 4)))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 (boxes) must be [batch, boxes, 4] but has rank %d",
                        ir_node_label(n), b->rank);
    if (s->rank >= 0 && s->rank != 3)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (scores) must be [batch, classes, boxes] but has rank %d",
                        ir_node_label(n), s->rank);
    if (b->rank == 3 && s->rank == 3 &&
        ((b->d[0] >= 0 && s->d[0] >= 0 && b->d[0] != s->d[0]) ||
         (b->d[1] >= 0 && s->d[2] >= 0 && b->d[1] != s->d[2])))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: boxes [%lld,%lld,4] and scores [%lld,%lld,%lld] disagree on the batch "
                        "or box count",
                        ir_node_label(n), (long long)b->d[0], (long long)b->d[1],
                        (long long)s->d[0], (long long)s->d[1], (long long)s->d[2]);
    if (n_in > 2)
        CORE_TRY(need_dtype(n, 2, "max_output_boxes_per_class", in[2].dtype, ANVIL_DTYPE_INT64));
    if (n_in > 3) CORE_TRY(need_dtype(n, 3, "iou_threshold", in[3].dtype, ANVIL_DTYPE_FLOAT32));
    if (n_in > 4) CORE_TRY(need_dtype(n, 4, "score_threshold", in[4].dtype, ANVIL_DTYPE_FLOAT32));
    out[0].dtype = ANVIL_DTYPE_INT64;
    int64_t d[2] = {IR_DIM_UNKNOWN, 3};
    shape_partial(&out[0].shape, 2, d);
    return ANVIL_OK;
}

/* Box as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2. */
static void nms_box(const float *b, bool center, float out[4]) {
    if (center) {
        out[0] = b[1] - b[3] / 2;
        out[1] = b[0] - b[2] / 2;
        out[2] = b[1] + b[3] / 2;
        out[3] = b[0] + b[2] / 2;
        return;
    }
    out[0] = fminf(b[0], b[2]);
    out[1] = fminf(b[1], b[3]);
    out[2] = fmaxf(b[0], b[2]);
    out[3] = fmaxf(b[1], b[3]);
}

static float nms_iou(const float a[4], const float b[4]) {
    float ih = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
    float iw = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return 0;
    float inter = ih * iw;
    float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0;
}

typedef struct nms_cand {
    float score;
    int64_t box;
} nms_cand;

static int nms_cand_cmp(const void *a, const void *b) {
    const nms_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->box < y->box ? -1 : x->box > y->box;
}

static anvil_status nms_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const nms_params *p = n->params;
    const op_tensor *bt = in[0], *st_ = in[1];
    if (bt->rank != 3 || bt->dims[2] != 4 || st_->rank != 3 || bt->dims[0] != st_->dims[0] ||
        bt->dims[1] != st_->dims[2])
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]",
                        ir_node_label(n));
    int64_t max_out = 0;
    float iou_th = 0, score_th = 0;
    bool has_score_th = false;
    if (n_in > 2 && in[2] && op_tensor_numel(in[2]) > 0)
        max_out = ((const int64_t *)in[2]->data)[0];
    if (n_in > 3 && in[3] && op_tensor_numel(in[3]) > 0) iou_th = ((const float *)in[3]->data)[0];
    if (n_in > 4 && in[4] && op_tensor_numel(in[4]) > 0) {
        score_th = ((const float *)in[4]->data)[0];
        has_score_th = true;
    }
    if (max_out < 0) max_out = 0;
    if (iou_th < 0 || iou_th > 1)
        return core_err(ANVIL_ERR_RUNTIME, "%s: iou_threshold must be in [0, 1] but is %g",
                        ir_node_label(n), (double)iou_th);
    size_t batch = (size_t)bt->dims[0], nb = (size_t)bt->dims[1], nc = (size_t)st_->dims[1];
    const float *boxes = bt->data, *scores = st_->data;
    nms_cand *cand = core_calloc(nb + 1, sizeof *cand);
    int64_t *sel = core_calloc(nb + 1, sizeof *sel);
    /* triples (batch, class, box), grown as needed */
    size_t cap = 64, cnt = 0;
    int64_t *res = core_calloc(cap * 3, sizeof *res);
    anvil_status st = ANVIL_OK;
    if (!cand || !sel || !res) {
        st = ANVIL_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (size_t b = 0; b < batch && max_out > 0; b++)
        for (size_t c = 0; c < nc; c++) {
            size_t m = 0;
            for (size_t i = 0; i < nb; i++) {
                float sc = scores[(b * nc + c) * nb + i];
                if (has_score_th && !(sc > score_th)) continue;
                cand[m++] = (nms_cand){sc, (int64_t)i};
            }
            qsort(cand, m, sizeof *cand, nms_cand_cmp);
            size_t ns = 0;
            for (size_t i = 0; i < m && (int64_t)ns < max_out; i++) {
                float bi[4];
                nms_box(boxes + (b * nb + (size_t)cand[i].box) * 4, p->center_point_box, bi);
                bool keep = true;
                for (size_t j = 0; j < ns && keep; j++) {
                    float bj[4];
                    nms_box(boxes + (b * nb + (size_t)sel[j]) * 4, p->center_point_box, bj);
                    keep = !(nms_iou(bi, bj) > iou_th);
                }
                if (!keep) continue;
                sel[ns++] = cand[i].box;
                if (cnt == cap) {
                    int64_t *r = realloc(res, cap * 2 * 3 * sizeof *res);
                    if (!r) {
                        st = core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: out of memory",
                                      ir_node_label(n));
                        goto done;
                    }
                    res = r;
                    cap *= 2;
                }
                res[cnt * 3] = (int64_t)b;
                res[cnt * 3 + 1] = (int64_t)c;
                res[cnt * 3 + 2] = cand[i].box;
                cnt++;
            }
        }
    int64_t dims[2] = {(int64_t)cnt, 3};
    if ((st = op_output_alloc(ctx, out[0], ANVIL_DTYPE_INT64, 2, dims)) == ANVIL_OK && cnt)
        memcpy(out[0]->data, res, cnt * 3 * sizeof *res);
done:
    free(cand);
    free(sel);
    free(res);
    return st;
}

TENSOR_DATA_DEPENDENT_IMPL(nonmaxsuppression, 2, 5, 1, 1, nms_check, nms_infer, nms_run)
