/* Ops that change only a tensor's shape, never its bytes (Reshape, Flatten, Squeeze, Unsqueeze),
 * and Shape, which reads only the shape. The first four are OP_ALIAS_0: the runtime reuses input
 * 0's buffer, so nearly all the work here is shape inference; their kernels are plain copies so
 * each op is still correct when run on its own (tests, plan-time folding). */
#include "ops/tensor_common.h"

#include <stdio.h>

/* Formats a list of ints as "[a,b,c]" for messages. */
static const char *ints_str(const int64_t *v, size_t n, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)v[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

/* Product of dims [from, to) of x. A zero dim makes it 0 whatever the others are; a single
 * unknown dim times 1 keeps its symbol (Flatten of [N,1] is [N,1], still N). */
static anvil_status dims_product(const ir_node *n, const ir_shape *x, int from, int to, int64_t *d,
                                 int32_t *sym) {
    int unknown = 0, last_unknown = -1;
    for (int i = from; i < to; i++) {
        if (x->d[i] == 0) {
            *d = 0;
            *sym = -1;
            return ANVIL_OK;
        }
        if (x->d[i] < 0) {
            unknown++;
            last_unknown = i;
        }
    }
    int64_t p = 1;
    for (int i = from; i < to; i++)
        if (x->d[i] > 0 && !core_mul_i64(p, x->d[i], &p))
            return core_err(ANVIL_ERR_LIMIT, "%s: the product of the input dims overflows int64",
                            ir_node_label(n));
    *d = IR_DIM_UNKNOWN;
    *sym = -1;
    if (unknown == 0)
        *d = p;
    else if (unknown == 1 && p == 1)
        *sym = x->sym[last_unknown];
    return ANVIL_OK;
}

/* ---- Reshape ----------------------------------------------------------------------------- */

typedef struct reshape_params {
    bool allowzero;
    bool from_attr;            /* opset < 5: the shape is the `shape` attribute */
    const int64_t *attr_shape; /* its entries (arena-owned; may be NULL when attr_n is 0) */
    size_t attr_n;
} reshape_params;

static anvil_status reshape_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, reshape_params, p);
    if (n->opset < 14 && ir_node_attr(n, "allowzero"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'allowzero' exists from opset 14 but the model imports "
                        "opset %d; remove it or raise the model's opset",
                        ir_node_label(n), n->opset);
    int64_t allowzero;
    CORE_TRY(ir_attr_int(n, "allowzero", 0, &allowzero));
    if (allowzero != 0 && allowzero != 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'allowzero' must be 0 or 1 but is %lld", ir_node_label(n),
                        (long long)allowzero);
    p->allowzero = allowzero == 1;
    if (n->opset < 5) {
        /* Reshape-1 took the new shape as an attribute; the input arrived in opset 5 */
        if (op_has_input(n, 1))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset 5 Reshape takes the shape as attribute 'shape', "
                            "not as input 1 (model opset %d); raise the opset to 5 or later",
                            ir_node_label(n), n->opset);
        CORE_TRY(ir_attr_ints(n, "shape", &p->attr_shape, &p->attr_n));
        p->from_attr = true;
        if (!ir_node_attr(n, "shape"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'shape' is required before opset 5 (model opset %d)",
                            ir_node_label(n), n->opset);
    } else if (!op_has_input(n, 1)) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input 1 (shape) is required from opset 5 (model opset %d)",
                        ir_node_label(n), n->opset);
    }
    n->params = p;
    return ANVIL_OK;
}

/* Output shape of Reshape from the requested list `want` (k entries) and the input shape x,
 * which may have unknown dims or rank. */
static anvil_status reshape_resolve(const ir_graph *g, const ir_node *n, bool allowzero,
                                    const ir_shape *x, const int64_t *want, int k, ir_shape *y) {
    char xs[160], ws[200];
    tensor_shape_unknown_dims(y, k);
    bool copied[IR_MAX_RANK] = {false};
    bool has_zero = false;
    int infer_at = -1;
    for (int j = 0; j < k; j++) {
        int64_t v = want[j];
        if (v == -1) {
            if (infer_at >= 0)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: the new shape %s has -1 at positions %d and %d; at most one "
                                "dim can be inferred",
                                ir_node_label(n), ints_str(want, (size_t)k, ws, sizeof ws),
                                infer_at, j);
            infer_at = j;
        } else if (v < -1) {
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the new shape %s has %lld at position %d; entries must be >= 0, "
                            "or -1 for the one inferred dim",
                            ir_node_label(n), ints_str(want, (size_t)k, ws, sizeof ws),
                            (long long)v, j);
        } else if (v == 0 && !allowzero) {
            /* 0 means "keep input dim j" unless allowzero says it is a real zero */
            copied[j] = true;
            if (x->rank >= 0) {
                if (j >= x->rank)
                    return core_err(ANVIL_ERR_SHAPE,
                                    "%s: the new shape %s has 0 (copy the input dim) at position "
                                    "%d but the input %s has only %d dims",
                                    ir_node_label(n), ints_str(want, (size_t)k, ws, sizeof ws), j,
                                    ir_shape_str(g, x, xs, sizeof xs), x->rank);
                tensor_dim_copy(y, j, x, j);
            }
        } else {
            y->d[j] = v;
            if (v == 0) has_zero = true;
        }
    }
    if (has_zero && infer_at >= 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: with allowzero=1 the new shape %s may not contain both 0 and -1 (the "
                        "-1 dim would be undetermined)",
                        ir_node_label(n), ints_str(want, (size_t)k, ws, sizeof ws));
    if (x->rank < 0) return ANVIL_OK;

    /* Element counts. A copied dim appears on both sides and cancels, so it may be unknown
     * without stopping the check or the -1 inference. */
    int64_t pin = 1, pout = 1;
    bool pin_known = true, pin_zero = false;
    for (int i = 0; i < x->rank; i++) {
        if (i < k && copied[i]) continue;
        if (x->d[i] < 0)
            pin_known = false;
        else if (x->d[i] == 0)
            pin_zero = true;
    }
    for (int i = 0; i < x->rank && pin_known && !pin_zero; i++)
        if (!(i < k && copied[i]) && !core_mul_i64(pin, x->d[i], &pin))
            return core_err(ANVIL_ERR_LIMIT, "%s: the element count of input %s overflows int64",
                            ir_node_label(n), ir_shape_str(g, x, xs, sizeof xs));
    if (pin_zero) {
        pin = 0;
        pin_known = true;
    }
    for (int j = 0; j < k; j++)
        if (!copied[j] && j != infer_at && !core_mul_i64(pout, y->d[j], &pout))
            return core_err(ANVIL_ERR_SHAPE, "%s: the element count of the new shape %s overflows",
                            ir_node_label(n), ints_str(want, (size_t)k, ws, sizeof ws));
    if (!pin_known) return ANVIL_OK;
    if (infer_at >= 0) {
        if (pout == 0 || pin % pout != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: cannot reshape %s to %s: the -1 dim cannot be inferred (%lld "
                            "elements do not divide into parts of %lld); fix the shape input",
                            ir_node_label(n), ir_shape_str(g, x, xs, sizeof xs),
                            ints_str(want, (size_t)k, ws, sizeof ws), (long long)pin,
                            (long long)pout);
        y->d[infer_at] = pin / pout;
        y->sym[infer_at] = -1;
    } else if (pin != pout) {
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: cannot reshape %s to %s: the element counts differ; the new shape "
                        "must hold exactly the input's elements",
                        ir_node_label(n), ir_shape_str(g, x, xs, sizeof xs),
                        ints_str(want, (size_t)k, ws, sizeof ws));
    }
    return ANVIL_OK;
}

static anvil_status reshape_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    const reshape_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    out[0].dtype = in[0].dtype;
    int64_t want[IR_MAX_RANK];
    size_t k;
    if (p->from_attr) {
        CORE_TRY(tensor_check_rank(n, "the output", (int64_t)p->attr_n));
        k = p->attr_n;
        if (k) memcpy(want, p->attr_shape, k * sizeof *want);
    } else {
        bool known;
        CORE_TRY(tensor_infer_shape_list(n, 1, &in[1], want, &k, &out[0].shape, &known));
        if (!known) return ANVIL_OK;
    }
    return reshape_resolve(g, n, p->allowzero, &in[0].shape, want, (int)k, &out[0].shape);
}

static anvil_status alias_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    return tensor_run_copy(n, in[0], out[0]);
}

/* Defines op_impl_<op> for one of the aliasing ops here: input 0 and, with max_in 2, an optional
 * input 1 (the shape or axes list) whose value inference reads; one output aliasing input 0. */
#define ALIAS_IMPL(op, max_in, checkfn, inferfn)                                                   \
    const op_impl op_impl_##op = {.min_inputs = 1,                                                 \
                                  .max_inputs = max_in,                                            \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .flags = OP_ALIAS_0,                                             \
                                  .value_inputs = (max_in) > 1 ? 1u << 1 : 0u,                     \
                                  .check = checkfn,                                                \
                                  .infer = inferfn,                                                \
                                  .run = alias_run};

/* input 1 is required from opset 5; reshape_check enforces it per opset */
ALIAS_IMPL(reshape, 2, reshape_check, reshape_infer)

/* ---- Flatten ----------------------------------------------------------------------------- */

typedef struct flatten_params {
    int64_t axis;
} flatten_params;

static anvil_status flatten_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, flatten_params, p);
    CORE_TRY(tensor_attr_axis(n, 1, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status flatten_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    const flatten_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    out[0].dtype = in[0].dtype;
    tensor_shape_unknown_dims(&out[0].shape, 2);
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0) return ANVIL_OK;
    int r = x->rank;
    if (p->axis < -r || p->axis > r) {
        char xs[160];
        return core_err(
            ANVIL_ERR_SHAPE, "%s: attribute 'axis' is %lld but must lie in [%d, %d] for input %s",
            ir_node_label(n), (long long)p->axis, -r, r, ir_shape_str(g, x, xs, sizeof xs));
    }
    int axis = (int)(p->axis < 0 ? p->axis + r : p->axis);
    ir_shape *y = &out[0].shape;
    CORE_TRY(dims_product(n, x, 0, axis, &y->d[0], &y->sym[0]));
    CORE_TRY(dims_product(n, x, axis, r, &y->d[1], &y->sym[1]));
    return ANVIL_OK;
}

ALIAS_IMPL(flatten, 1, flatten_check, flatten_infer)

/* ---- Squeeze and Unsqueeze --------------------------------------------------------------- */

/* Both take `axes` as an attribute before opset 13 and as input 1 from opset 13. */
typedef struct axes_params {
    bool has_attr;            /* opset < 13 and attribute 'axes' present */
    const int64_t *attr_axes; /* its entries (arena-owned; may be NULL when attr_n is 0) */
    size_t attr_n;
} axes_params;

static anvil_status axes_check(ir_graph *g, ir_node *n, bool required) {
    OP_PARAMS_NEW(g, axes_params, p);
    if (n->opset < 13) {
        if (op_has_input(n, 1))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset 13 the axes are attribute 'axes', not input 1 "
                            "(model opset %d); raise the model's opset to 13 or later",
                            ir_node_label(n), n->opset);
        CORE_TRY(ir_attr_ints(n, "axes", &p->attr_axes, &p->attr_n));
        p->has_attr = ir_node_attr(n, "axes") != NULL;
        if (required && !p->has_attr)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'axes' is required before opset 13 (model opset %d)",
                            ir_node_label(n), n->opset);
        for (size_t i = 0; i < p->attr_n && n->opset < 11; i++)
            if (p->attr_axes[i] < 0)
                return core_err(ANVIL_ERR_INVALID_MODEL,
                                "%s: 'axes' contains %lld; negative axes are allowed from opset "
                                "11 (model opset %d)",
                                ir_node_label(n), (long long)p->attr_axes[i], n->opset);
    } else {
        if (ir_node_attr(n, "axes"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: from opset 13 the axes are input 1, not attribute 'axes' "
                            "(model opset %d); move them to an input",
                            ir_node_label(n), n->opset);
        if (required && !op_has_input(n, 1))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input 1 (axes) is required from opset 13 (model opset %d)",
                            ir_node_label(n), n->opset);
    }
    n->params = p;
    return ANVIL_OK;
}

/* What inference knows of the axes: their values, only their count, or nothing at all. */
typedef enum { AXES_NONE, AXES_KNOWN, AXES_COUNT_ONLY, AXES_UNKNOWN } axes_state;

/* The axes as inference sees them: k values in v (AXES_KNOWN), or only their count k. */
typedef struct axes_info {
    int64_t v[IR_MAX_RANK];
    size_t k;
    axes_state st;
} axes_info;

static anvil_status axes_get(const ir_node *n, const op_tinfo *in, axes_info *a) {
    const axes_params *p = n->params;
    a->k = 0;
    if (n->opset < 13) {
        if (!p->has_attr) {
            a->st = AXES_NONE;
            return ANVIL_OK;
        }
        if (p->attr_n > IR_MAX_RANK)
            return core_err(ANVIL_ERR_SHAPE, "%s: 'axes' lists %zu axes; at most %d are possible",
                            ir_node_label(n), p->attr_n, IR_MAX_RANK);
        if (p->attr_n) memcpy(a->v, p->attr_axes, p->attr_n * sizeof *a->v);
        a->k = p->attr_n;
        a->st = AXES_KNOWN;
        return ANVIL_OK;
    }
    if (!op_has_input(n, 1)) {
        a->st = AXES_NONE;
        return ANVIL_OK;
    }
    CORE_TRY(tensor_check_index_dtype(n, 1, "axes", in[1].dtype, false));
    int64_t len = 1;
    /* The schema says 1-D, but ONNX Runtime and the reference implementation also take a scalar
     * as one axis, and exporters (the ONNX function bodies among them: AffineGrid) emit that. */
    if (in[1].shape.rank != 0) CORE_TRY(tensor_list_length(n, 1, "axes", &in[1], &len));
    if (len > IR_MAX_RANK)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (axes) lists %lld axes; at most %d are "
                        "possible",
                        ir_node_label(n), (long long)len, IR_MAX_RANK);
    if (in[1].value && len >= 0) {
        CORE_TRY(op_value_ints(n, 1, &in[1], a->v, IR_MAX_RANK, &a->k));
        a->st = AXES_KNOWN;
    } else {
        a->k = len >= 0 ? (size_t)len : 0;
        a->st = len >= 0 ? AXES_COUNT_ONLY : AXES_UNKNOWN;
    }
    return ANVIL_OK;
}

/* Start of Squeeze/Unsqueeze inference: the output takes the data's dtype and the axes are read
 * into a. *known is false, with the output shape left unknown, when the input's rank or the
 * axes are unknown. */
static anvil_status axes_infer_start(const ir_node *n, const op_tinfo *in, op_tinfo *out,
                                     axes_info *a, bool *known) {
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    out[0].dtype = in[0].dtype;
    CORE_TRY(axes_get(n, in, a));
    *known = in[0].shape.rank >= 0 && a->st != AXES_UNKNOWN;
    if (!*known) ir_shape_unknown(&out[0].shape);
    return ANVIL_OK;
}

/* Normalises axes against `rank` and refuses repeats; mark[a] is set for each axis a. */
static anvil_status axes_mark(const ir_node *n, const int64_t *axes, size_t k, int rank,
                              bool *mark) {
    for (int i = 0; i < rank; i++) mark[i] = false;
    for (size_t i = 0; i < k; i++) {
        int a;
        CORE_TRY(op_norm_axis(n, "axes entry", axes[i], rank, &a));
        if (mark[a])
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: axis %d appears more than once in axes; list each axis once",
                            ir_node_label(n), a);
        mark[a] = true;
    }
    return ANVIL_OK;
}

static anvil_status squeeze_check(ir_graph *g, ir_node *n) {
    return axes_check(g, n, false);
}

static anvil_status squeeze_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    axes_info a;
    bool known;
    CORE_TRY(axes_infer_start(n, in, out, &a, &known));
    if (!known) return ANVIL_OK;
    /* an empty axes list means the same as no list: drop every size-1 dim */
    if ((a.st == AXES_KNOWN || a.st == AXES_COUNT_ONLY) && a.k == 0) a.st = AXES_NONE;
    char xs[160];
    const ir_shape *x = &in[0].shape;
    ir_shape *y = &out[0].shape;
    if (a.st == AXES_COUNT_ONLY) {
        if ((int64_t)a.k > x->rank)
            return core_err(ANVIL_ERR_SHAPE, "%s: cannot squeeze %zu axes from input %s",
                            ir_node_label(n), a.k, ir_shape_str(g, x, xs, sizeof xs));
        tensor_shape_unknown_dims(y, x->rank - (int)a.k);
        return ANVIL_OK;
    }
    bool drop[IR_MAX_RANK] = {false};
    if (a.st == AXES_NONE) {
        for (int i = 0; i < x->rank; i++) {
            if (x->d[i] < 0) {
                /* an unknown dim may or may not be 1: the output rank is unknown */
                ir_shape_unknown(y);
                return ANVIL_OK;
            }
            drop[i] = x->d[i] == 1;
        }
    } else {
        CORE_TRY(axes_mark(n, a.v, a.k, x->rank, drop));
        for (int i = 0; i < x->rank; i++)
            if (drop[i] && x->d[i] >= 0 && x->d[i] != 1)
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: cannot squeeze axis %d of input %s: its size is %lld, not 1",
                                ir_node_label(n), i, ir_shape_str(g, x, xs, sizeof xs),
                                (long long)x->d[i]);
    }
    int r = 0;
    tensor_shape_unknown_dims(y, 0);
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) tensor_dim_copy(y, r++, x, i);
    y->rank = r;
    return ANVIL_OK;
}

ALIAS_IMPL(squeeze, 2, squeeze_check, squeeze_infer)

static anvil_status unsqueeze_check(ir_graph *g, ir_node *n) {
    return axes_check(g, n, true);
}

static anvil_status unsqueeze_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    axes_info a;
    bool known;
    CORE_TRY(axes_infer_start(n, in, out, &a, &known));
    if (!known) return ANVIL_OK;
    const ir_shape *x = &in[0].shape;
    ir_shape *y = &out[0].shape;
    int64_t r = (int64_t)x->rank + (int64_t)a.k;
    CORE_TRY(tensor_check_rank(n, "the output", r));
    if (a.st == AXES_COUNT_ONLY) {
        tensor_shape_unknown_dims(y, (int)r);
        return ANVIL_OK;
    }
    bool add[IR_MAX_RANK];
    CORE_TRY(axes_mark(n, a.v, a.k, (int)r, add));
    tensor_shape_unknown_dims(y, (int)r);
    for (int i = 0, src = 0; i < (int)r; i++) {
        if (add[i])
            y->d[i] = 1;
        else
            tensor_dim_copy(y, i, x, src++);
    }
    return ANVIL_OK;
}

/* input 1 is required from opset 13; unsqueeze_check enforces it per opset */
ALIAS_IMPL(unsqueeze, 2, unsqueeze_check, unsqueeze_infer)

/* ---- Shape ------------------------------------------------------------------------------- */

typedef struct shape_params {
    int64_t start, end; /* as given; end = INT64_MAX when absent */
} shape_params;

static anvil_status shape_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, shape_params, p);
    if (n->opset < 15 && (ir_node_attr(n, "start") || ir_node_attr(n, "end")))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attributes 'start' and 'end' exist from opset 15 but the model "
                        "imports opset %d; remove them or raise the model's opset",
                        ir_node_label(n), n->opset);
    CORE_TRY(ir_attr_int(n, "start", 0, &p->start));
    CORE_TRY(ir_attr_int(n, "end", INT64_MAX, &p->end));
    n->params = p;
    return ANVIL_OK;
}

/* Clamps start/end as the spec says: negative counts from the back, then into [0, rank]. */
static void shape_range(const shape_params *p, int rank, int *begin, int *end) {
    int64_t b = p->start, e = p->end;
    if (b < 0) b += rank;
    if (e < 0) e += rank;
    b = b < 0 ? 0 : (b > rank ? rank : b);
    e = e < 0 ? 0 : (e > rank ? rank : e);
    *begin = (int)b;
    *end = (int)(e > b ? e : b);
}

static anvil_status shape_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    /* Shape never reads the input's data, so the input's dtype does not matter. */
    out[0].dtype = ANVIL_DTYPE_INT64;
    tensor_shape_unknown_dims(&out[0].shape, 1);
    if (in[0].shape.rank >= 0) {
        int b, e;
        shape_range(n->params, in[0].shape.rank, &b, &e);
        out[0].shape.d[0] = e - b;
    }
    return ANVIL_OK;
}

static anvil_status shape_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    int b, e;
    shape_range(n->params, in[0]->rank, &b, &e);
    op_tensor *y = out[0];
    if (y->dtype != ANVIL_DTYPE_INT64 || y->rank != 1 || y->dims[0] != e - b)
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: output buffer is not an INT64 vector of %d elements", ir_node_label(n),
                        e - b);
    int64_t *dst = y->data;
    for (int i = b; i < e; i++) dst[i - b] = in[0]->dims[i];
    return ANVIL_OK;
}

const op_impl op_impl_shape = {
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = shape_check,
    .infer = shape_infer,
    .run = shape_run,
};
