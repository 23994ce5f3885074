/* TopK, CumSum and CumProd: ops that work along one axis and care about element order.
 *
 * TopK: k is an attribute before opset 10 and a one-element INT64 input from 10; `largest` and
 * `sorted` exist from 11. Each line is sorted by a stable merge sort on indices, so equal values
 * keep their original order and the lower index comes first, as the spec asks. The output is
 * always sorted: an unsorted request allows any order, sorted included. NaN ranks above every
 * number.
 *
 * CumSum (opset 11, 14) and CumProd (26): the axis is a 0-D or one-element 1-D INT32/INT64 input;
 * `exclusive` shifts the scan by one (the first output is the identity), `reverse` scans from the
 * end. Floats accumulate in double, integers in wrapping 64-bit arithmetic. */
#include "ops/reduce_common.h"

#include <stdlib.h>
#include <string.h>

/* ---- TopK ----------------------------------------------------------------------------------- */

typedef struct topk_params {
    int64_t axis, k_attr;
    bool largest, sorted;
} topk_params;

static anvil_status topk_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, topk_params, p);
    CORE_TRY(ir_attr_int(n, "axis", -1, &p->axis));
    CORE_TRY(ir_attr_flag(n, "largest", true, &p->largest));
    CORE_TRY(ir_attr_flag(n, "sorted", true, &p->sorted));
    p->k_attr = -1;
    if (n->opset < 11 && (ir_node_attr(n, "largest") || ir_node_attr(n, "sorted")))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attributes 'largest' and 'sorted' exist from opset 11, the model "
                        "imports opset %d; raise the model's opset or drop them",
                        ir_node_label(n), n->opset);
    if (n->opset < 10) {
        if (!ir_node_attr(n, "k"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset 10 TopK needs the attribute 'k'; add it",
                            ir_node_label(n));
        CORE_TRY(ir_attr_int(n, "k", 0, &p->k_attr));
        if (p->k_attr < 0)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'k' is %lld; it must be >= 0",
                            ir_node_label(n), (long long)p->k_attr);
        if (n->n_inputs > 1 && n->inputs[1] != IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset 10 k is an attribute, but the node has a second "
                            "input; use the attribute 'k'",
                            ir_node_label(n));
    } else if (n->n_inputs < 2 || n->inputs[1] == IR_NONE) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: from opset 10 TopK needs its second input K (one INT64); add it",
                        ir_node_label(n));
    }
    n->params = p;
    return ANVIL_OK;
}

/* Reads k from the K input (value known) or the attribute; *known false if not available. */
static anvil_status topk_k(const ir_node *n, const op_tinfo *kin, int64_t *k, bool *known) {
    const topk_params *p = n->params;
    *known = true;
    if (n->opset < 10) {
        *k = p->k_attr;
        return ANVIL_OK;
    }
    if (kin->dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: input 1 (K) must be INT64 but is %s",
                        ir_node_label(n), anvil_dtype_name(kin->dtype));
    if (kin->shape.rank > 1)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (K) must be 1-D with one element, rank is %d",
                        ir_node_label(n), kin->shape.rank);
    if (!kin->value) {
        *known = false;
        return ANVIL_OK;
    }
    int64_t buf[1];
    size_t count = 0;
    CORE_TRY(op_value_ints(n, 1, kin, buf, 1, &count));
    if (count != 1)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (K) must hold exactly one value, it has %zu",
                        ir_node_label(n), count);
    if (buf[0] < 0)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: K is %lld; it must be >= 0", ir_node_label(n),
                        (long long)buf[0]);
    *k = buf[0];
    return ANVIL_OK;
}

static anvil_status topk_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    const topk_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_ALLNUM));
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    if (n_out > 1) {
        out[1].dtype = ANVIL_DTYPE_INT64;
        ir_shape_unknown(&out[1].shape);
    }
    int64_t k = 0;
    bool known = true;
    CORE_TRY(topk_k(n, n->opset < 10 ? NULL : &in[1], &k, &known));
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0) return ANVIL_OK;
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    if (known && x->d[axis] >= 0 && k > x->d[axis])
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: K is %lld but the axis %d of input 0 has only %lld elements; K must "
                        "be at most the axis length",
                        ir_node_label(n), (long long)k, axis, (long long)x->d[axis]);
    for (int i = 0; i < n_out && i < 2; i++) {
        out[i].shape = *x;
        out[i].shape.d[axis] = known ? k : IR_DIM_UNKNOWN;
        out[i].shape.sym[axis] = -1;
    }
    return ANVIL_OK;
}

typedef struct topk_line {
    anvil_dtype dt;
    const void *x;
    size_t base, stride;
    bool largest;
} topk_line;

/* true when index a must come before index b (a < b in the original order). */
static bool topk_before(const topk_line *l, size_t a, size_t b) {
    int c = red_cmp(l->dt, l->x, l->base + a * l->stride, l->base + b * l->stride);
    return l->largest ? c > 0 : c < 0;
}

/* Stable bottom-up merge sort of idx[0..len) using tmp as scratch. */
static void topk_sort(const topk_line *l, size_t *idx, size_t *tmp, size_t len) {
    for (size_t w = 1; w < len; w *= 2) {
        for (size_t lo = 0; lo < len; lo += 2 * w) {
            size_t mid = lo + w < len ? lo + w : len;
            size_t hi = lo + 2 * w < len ? lo + 2 * w : len;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = topk_before(l, idx[j], idx[i]) ? idx[j++] : idx[i++];
            while (i < mid) tmp[o++] = idx[i++];
            while (j < hi) tmp[o++] = idx[j++];
        }
        memcpy(idx, tmp, len * sizeof *idx);
    }
}

static anvil_status topk_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)ctx;
    const topk_params *p = n->params;
    const op_tensor *x = in[0];
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    size_t outer, len, inner;
    red_split(x, axis, &outer, &len, &inner);
    size_t k = (size_t)out[0]->dims[axis];
    if (k > len)
        return core_err(ANVIL_ERR_RUNTIME, "%s: K is %zu but the axis has %zu elements",
                        ir_node_label(n), k, len);
    if (k == 0 || outer == 0 || inner == 0) return ANVIL_OK;
    size_t bytes;
    if (!core_mul_size(len, 2 * sizeof(size_t), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: scratch size overflows", ir_node_label(n));
    size_t *idx = core_alloc(bytes);
    if (!idx) return ANVIL_ERR_OUT_OF_MEMORY;
    size_t es = anvil_dtype_size(x->dtype);
    int64_t *oi = n_out > 1 && out[1] ? out[1]->data : NULL;
    for (size_t line = 0; line < outer * inner; line++) {
        topk_line l = {x->dtype, x->data, red_line_base(line, len, inner), inner, p->largest};
        for (size_t j = 0; j < len; j++) idx[j] = j;
        topk_sort(&l, idx, idx + len, len);
        for (size_t j = 0; j < k; j++) {
            size_t dst = red_line_base(line, k, inner) + j * inner;
            memcpy((char *)out[0]->data + dst * es,
                   (const char *)x->data + (l.base + idx[j] * inner) * es, es);
            if (oi) oi[dst] = (int64_t)idx[j];
        }
    }
    free(idx);
    return ANVIL_OK;
}

const op_impl op_impl_topk = {.min_inputs = 1,
                              .max_inputs = 2,
                              .min_outputs = 2,
                              .max_outputs = 2,
                              .value_inputs = 1u << 1,
                              .check = topk_check,
                              .infer = topk_infer,
                              .run = topk_run};

/* ---- CumSum / CumProd ------------------------------------------------------------------------ */

typedef struct scan_params {
    bool exclusive, reverse, prod;
} scan_params;

static anvil_status scan_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, scan_params, p);
    p->prod = n->op == IR_OP_CUMPROD;
    int since = p->prod ? 26 : 11;
    if (n->opset < since)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s exists from opset %d, the model imports opset %d; raise the "
                        "model's opset",
                        ir_node_label(n), ir_op_name(n->op), since, n->opset);
    CORE_TRY(ir_attr_flag(n, "exclusive", false, &p->exclusive));
    CORE_TRY(ir_attr_flag(n, "reverse", false, &p->reverse));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status scan_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const scan_params *p = n->params;
    uint32_t mask = RED_MASK_ARITH;
    if (!p->prod && n->opset < 14) mask &= ~(RED_BIT(FLOAT16) | RED_BIT(BFLOAT16));
    CORE_TRY(red_require(n, 0, in[0].dtype, mask));
    if (in[1].dtype != ANVIL_DTYPE_INT64 && in[1].dtype != ANVIL_DTYPE_INT32)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input 1 (axis) must be INT32 or INT64, got %s", ir_node_label(n),
                        anvil_dtype_name(in[1].dtype));
    if (in[1].shape.rank > 1 ||
        (in[1].shape.rank == 1 && in[1].shape.d[0] >= 0 && in[1].shape.d[0] != 1))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (axis) must be a scalar or one-element 1-D tensor",
                        ir_node_label(n));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status scan_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const scan_params *p = n->params;
    const op_tensor *x = in[0];
    if (op_tensor_numel(in[1]) != 1)
        return core_err(ANVIL_ERR_RUNTIME, "%s: input 1 (axis) must hold one value, it has %zu",
                        ir_node_label(n), op_tensor_numel(in[1]));
    int64_t a64 = core_load_i64(in[1]->dtype, in[1]->data, 0);
    int axis;
    CORE_TRY(op_norm_axis(n, "input 1 (axis)", a64, x->rank, &axis));
    size_t outer, len, inner;
    red_split(x, axis, &outer, &len, &inner);
    anvil_dtype dt = x->dtype;
    bool flt = core_dtype_is_float(dt);
    void *y = out[0]->data;
    for (size_t line = 0; line < outer * inner; line++) {
        size_t base = red_line_base(line, len, inner);
        double fa = p->prod ? 1.0 : 0.0;
        uint64_t ia = p->prod ? 1u : 0u;
        for (size_t t = 0; t < len; t++) {
            size_t j = p->reverse ? len - 1 - t : t;
            size_t at = base + j * inner;
            if (p->exclusive) {
                if (flt)
                    core_store_f64(dt, y, at, fa);
                else
                    core_store_i64(dt, y, at, (int64_t)ia);
            }
            if (flt) {
                double v = core_load_f64(dt, x->data, at);
                fa = p->prod ? fa * v : fa + v;
            } else {
                uint64_t v = (uint64_t)core_load_i64(dt, x->data, at);
                ia = p->prod ? ia * v : ia + v;
            }
            if (!p->exclusive) {
                if (flt)
                    core_store_f64(dt, y, at, fa);
                else
                    core_store_i64(dt, y, at, (int64_t)ia);
            }
        }
    }
    return ANVIL_OK;
}

/* `const op_impl op_impl_<lname>` for CumSum and CumProd, which scan_check tells apart by the op.
 */
#define SCAN_DEFINE(lname)                                                                         \
    const op_impl op_impl_##lname = {.min_inputs = 2,                                              \
                                     .max_inputs = 2,                                              \
                                     .min_outputs = 1,                                             \
                                     .max_outputs = 1,                                             \
                                     .check = scan_check,                                          \
                                     .infer = scan_infer,                                          \
                                     .run = scan_run};

SCAN_DEFINE(cumsum)
SCAN_DEFINE(cumprod)
