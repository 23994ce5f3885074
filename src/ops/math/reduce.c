/* Reductions (ReduceL1 ... ReduceSumSquare) and ArgMax / ArgMin.
 *
 * The reduced axes come from the `axes` attribute up to opset 17 (ReduceSum: up to 12) and from
 * the optional second input afterwards. An empty axes list reduces every axis, unless
 * noop_with_empty_axes is set, in which case the op copies its input. Reducing an empty set gives
 * the operation's identity (0 for sums, 1 for products, -inf / the dtype's minimum for ReduceMax,
 * +inf / the maximum for ReduceMin, log(0) = -inf for the logarithmic ones).
 *
 * The reference kernel walks the input once in memory order and adds every element into the
 * accumulator of its output position: no transposes, and any set of axes works the same way.
 * Floats accumulate in double; integer sums, products, extrema and squares accumulate in 64-bit
 * integers (wrapping as the storage type would), so integer results are exact. */
#include "ops/reduce_common.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* The reduction kinds are the ops' own ids: a node's kind is its op. */
typedef enum red_kind {
    RED_L1 = IR_OP_REDUCEL1,
    RED_L2 = IR_OP_REDUCEL2,
    RED_LOGSUM = IR_OP_REDUCELOGSUM,
    RED_LOGSUMEXP = IR_OP_REDUCELOGSUMEXP,
    RED_MAX = IR_OP_REDUCEMAX,
    RED_MEAN = IR_OP_REDUCEMEAN,
    RED_MIN = IR_OP_REDUCEMIN,
    RED_PROD = IR_OP_REDUCEPROD,
    RED_SUM = IR_OP_REDUCESUM,
    RED_SUMSQUARE = IR_OP_REDUCESUMSQUARE
} red_kind;

typedef struct red_params {
    red_kind kind;
    bool keepdims, noop_empty;
    bool axes_from_input;
    size_t n_axes; /* from the attribute */
    const int64_t *axes;
} red_params;

static anvil_status red_check(ir_graph *g, ir_node *n) {
    int input_since = n->op == IR_OP_REDUCESUM ? 13 : 18; /* the opset that moved axes to input 1 */
    OP_PARAMS_NEW(g, red_params, p);
    p->kind = (red_kind)n->op;
    p->axes_from_input = n->opset >= input_since;
    CORE_TRY(ir_attr_flag(n, "keepdims", true, &p->keepdims));
    CORE_TRY(ir_attr_flag(n, "noop_with_empty_axes", false, &p->noop_empty));
    CORE_TRY(ir_attr_ints(n, "axes", &p->axes, &p->n_axes));
    if (p->axes_from_input) {
        if (ir_node_attr(n, "axes"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: from opset %d the axes are the second input, but the node has an "
                            "'axes' attribute (opset %d); move the axes into an input",
                            ir_node_label(n), input_since, n->opset);
    } else {
        if (n->n_inputs > 1 && n->inputs[1] != IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: before opset %d the axes are an attribute, but the node has a "
                            "second input (opset %d); use the 'axes' attribute",
                            ir_node_label(n), input_since, n->opset);
        CORE_TRY(red_attr_since(n, "noop_with_empty_axes", input_since));
    }
    n->params = p;
    return ANVIL_OK;
}

static uint32_t red_mask(const ir_node *n, red_kind kind) {
    if (kind == RED_MAX || kind == RED_MIN)
        return RED_MASK_ARITH | RED_BIT(INT8) | RED_BIT(UINT8) |
               (n->opset >= 20 ? RED_BIT(BOOL) : 0u);
    return RED_MASK_ARITH;
}

/* Fills red[] (rank entries) with the reduced axes. *noop: the op is an identity copy. *known:
 * false when the axes input's value is not available yet. */
static anvil_status red_axes(const ir_node *n, int rank, const op_tinfo *axes_in, bool *red,
                             bool *noop, bool *known) {
    const red_params *p = n->params;
    int64_t buf[IR_MAX_RANK];
    const int64_t *axes = p->axes;
    size_t count = p->n_axes;
    *noop = false;
    *known = true;
    if (p->axes_from_input) {
        count = 0;
        if (axes_in) {
            if (!axes_in->value) {
                *known = false;
                return ANVIL_OK;
            }
            if (axes_in->shape.rank != 1)
                return core_err(ANVIL_ERR_SHAPE, "%s: input 1 (axes) must be 1-D but has rank %d",
                                ir_node_label(n), axes_in->shape.rank);
            CORE_TRY(op_value_ints(n, 1, axes_in, buf, IR_MAX_RANK, &count));
            axes = buf;
        }
    }
    for (int d = 0; d < rank; d++) red[d] = count == 0;
    if (count == 0) {
        *noop = p->noop_empty;
        if (*noop)
            for (int d = 0; d < rank; d++) red[d] = false;
        return ANVIL_OK;
    }
    for (size_t k = 0; k < count; k++) {
        int a;
        CORE_TRY(op_norm_axis(n, "axes", axes[k], rank, &a));
        if (red[a])
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: axis %lld appears twice in axes; list each axis once",
                            ir_node_label(n), (long long)axes[k]);
        red[a] = true;
    }
    return ANVIL_OK;
}

static anvil_status red_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const red_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, red_mask(n, p->kind)));
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0) return ANVIL_OK;
    const op_tinfo *axes_in = (n_in > 1 && n->inputs[1] != IR_NONE) ? &in[1] : NULL;
    if (axes_in && axes_in->dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: input 1 (axes) must be INT64 but is %s",
                        ir_node_label(n), anvil_dtype_name(axes_in->dtype));
    bool red[IR_MAX_RANK], noop, known;
    CORE_TRY(red_axes(n, x->rank, axes_in, red, &noop, &known));
    ir_shape *o = &out[0].shape;
    if (!known) {
        if (p->keepdims) {
            o->rank = x->rank;
            for (int d = 0; d < x->rank; d++) {
                o->d[d] = x->d[d] == 1 ? 1 : IR_DIM_UNKNOWN;
                o->sym[d] = -1;
            }
        }
        return ANVIL_OK;
    }
    red_reduced_shape(x, red, p->keepdims, o);
    return ANVIL_OK;
}

/* Integer accumulation is exact for these kinds; the rest go through double. */
static bool red_int_exact(red_kind k) {
    return k == RED_L1 || k == RED_MAX || k == RED_MIN || k == RED_PROD || k == RED_SUM ||
           k == RED_SUMSQUARE || k == RED_MEAN;
}

/* Wrapping 64-bit arithmetic: integer overflow behaves like the storage type, without UB. */
static int64_t red_wadd(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static int64_t red_wmul(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

static void red_int_identity(red_kind k, anvil_dtype dt, int64_t *v) {
    switch (k) {
    case RED_PROD:
        *v = 1;
        break;
    case RED_MAX:
        switch (dt) {
        case ANVIL_DTYPE_INT8:
            *v = INT8_MIN;
            break;
        case ANVIL_DTYPE_INT32:
            *v = INT32_MIN;
            break;
        case ANVIL_DTYPE_INT64:
            *v = INT64_MIN;
            break;
        default: /* unsigned and bool */
            *v = 0;
        }
        break;
    case RED_MIN:
        switch (dt) {
        case ANVIL_DTYPE_INT8:
            *v = INT8_MAX;
            break;
        case ANVIL_DTYPE_UINT8:
            *v = UINT8_MAX;
            break;
        case ANVIL_DTYPE_INT32:
            *v = INT32_MAX;
            break;
        case ANVIL_DTYPE_UINT32:
            *v = UINT32_MAX;
            break;
        case ANVIL_DTYPE_INT64:
            *v = INT64_MAX;
            break;
        case ANVIL_DTYPE_UINT64:
            *v = -1; /* all ones: UINT64_MAX */
            break;
        default: /* bool */
            *v = 1;
        }
        break;
    default:
        *v = 0;
    }
}

static void red_int_step(red_kind k, bool is_u64, int64_t *acc, int64_t x) {
    switch (k) {
    case RED_L1:
        *acc = red_wadd(*acc, (is_u64 || x >= 0) ? x : red_wmul(x, -1));
        break;
    case RED_SUMSQUARE:
        *acc = red_wadd(*acc, red_wmul(x, x));
        break;
    case RED_PROD:
        *acc = red_wmul(*acc, x);
        break;
    case RED_MAX:
        if (is_u64 ? (uint64_t)x > (uint64_t)*acc : x > *acc) *acc = x;
        break;
    case RED_MIN:
        if (is_u64 ? (uint64_t)x < (uint64_t)*acc : x < *acc) *acc = x;
        break;
    default: /* SUM, MEAN */
        *acc = red_wadd(*acc, x);
    }
}

static double red_f_identity(red_kind k) {
    switch (k) {
    case RED_PROD:
        return 1.0;
    case RED_MAX:
    case RED_LOGSUMEXP:
        return -INFINITY;
    case RED_MIN:
        return INFINITY;
    default:
        return 0.0;
    }
}

/* LogSumExp keeps the running maximum apart so exp never overflows: acc holds
 * sum(exp(x - m)) and the maximum m sits in aux. */
static void red_f_step(red_kind k, double *acc, double *aux, double x) {
    switch (k) {
    case RED_L1:
        *acc += fabs(x);
        break;
    case RED_L2:
    case RED_SUMSQUARE:
        *acc += x * x;
        break;
    case RED_PROD:
        *acc *= x;
        break;
    case RED_MAX:
        if (isnan(x) || x > *acc) *acc = isnan(*acc) ? *acc : x;
        break;
    case RED_MIN:
        if (isnan(x) || x < *acc) *acc = isnan(*acc) ? *acc : x;
        break;
    case RED_LOGSUMEXP:
        if (x > *aux) {
            *acc = *acc * exp(*aux - x) + 1.0;
            *aux = x;
        } else if (x == -INFINITY) {
            /* exp(-inf - m) is 0; skip it so that an all -inf line does not give NaN */
        } else {
            *acc += exp(x - *aux);
        }
        break;
    default: /* SUM, MEAN, LOGSUM */
        *acc += x;
    }
}

static double red_f_final(red_kind k, double acc, double aux, size_t count) {
    switch (k) {
    case RED_L2:
        return sqrt(acc);
    case RED_LOGSUM:
        return log(acc);
    case RED_LOGSUMEXP:
        return aux == -INFINITY ? -INFINITY : aux + log(acc);
    case RED_MEAN:
        return acc / (double)count;
    default:
        return acc;
    }
}

/* float32 with one contiguous run of reduced axes (the common case: the last axis, or the
 * spatial block) is a set of lines of `len` elements `inner` apart, like Softmax: no multi-index
 * walk, no per-element dtype dispatch, and the lines split across threads. */
/* One line of the job (j->what: the red_kind) into output element k. */
static void red_f32_line(const red_line_job *j, size_t k, size_t base) {
    red_kind kind = (red_kind)j->what;
    const float *x = (const float *)j->x + base;
    double acc = red_f_identity(kind == RED_LOGSUMEXP ? RED_SUM : kind);
    double aux = -INFINITY;
    for (size_t t = 0; t < j->len; t++) red_f_step(kind, &acc, &aux, x[t * j->inner]);
    ((float *)j->y)[k] = (float)red_f_final(kind, acc, aux, j->len);
}

/* true (and the line geometry) when the reduced axes are one non-empty contiguous run */
static bool red_contiguous(const op_tensor *x, const bool *red, size_t *outer, size_t *len,
                           size_t *inner) {
    int first = -1, last = -1;
    for (int d = 0; d < x->rank; d++)
        if (red[d]) {
            if (first < 0)
                first = d;
            else if (last != d - 1)
                return false;
            last = d;
        }
    if (first < 0) return false;
    size_t o = 1, l = 1, in = 1;
    for (int d = 0; d < x->rank; d++) {
        size_t v = (size_t)x->dims[d];
        if (d < first)
            o *= v;
        else if (d <= last)
            l *= v;
        else
            in *= v;
    }
    *outer = o;
    *len = l;
    *inner = in;
    return true;
}

static anvil_status red_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    const red_params *p = n->params;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    op_tinfo axes_info = {0};
    const op_tinfo *axes_in = NULL;
    if (p->axes_from_input && n_in > 1 && in[1]) {
        axes_info.dtype = in[1]->dtype;
        ir_shape_set(&axes_info.shape, in[1]->rank, in[1]->dims);
        axes_info.value = in[1]->data;
        axes_in = &axes_info;
    }
    bool red[IR_MAX_RANK], noop, known;
    CORE_TRY(red_axes(n, x->rank, axes_in, red, &noop, &known));
    size_t nx = op_tensor_numel(x), ny = op_tensor_numel(y);
    if (ny == 0) return ANVIL_OK;
    size_t outer, len, inner;
    if (x->dtype == ANVIL_DTYPE_FLOAT32 && red_contiguous(x, red, &outer, &len, &inner)) {
        red_line_job job = {red_f32_line, x->data, y->data, len, inner, (int)p->kind};
        red_lines_run(nx >= ((size_t)1 << 15) ? ctx : NULL, outer * inner, &job);
        return ANVIL_OK;
    }
    /* Output stride of each input dim (0 for a reduced dim) and how many inputs meet per output. */
    size_t ostride[IR_MAX_RANK], count = 1, s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostride[d] = red[d] ? 0 : s;
        if (red[d])
            count *= (size_t)x->dims[d];
        else
            s *= (size_t)x->dims[d];
    }
    anvil_dtype dt = x->dtype;
    bool use_int = !core_dtype_is_float(dt) && red_int_exact(p->kind);
    bool is_u64 = dt == ANVIL_DTYPE_UINT64;
    size_t bytes;
    if (!core_mul_size(ny, 2 * sizeof(double), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: accumulator size overflows", ir_node_label(n));
    void *mem = core_alloc(bytes);
    if (!mem) return ANVIL_ERR_OUT_OF_MEMORY;
    double *acc = mem, *aux = acc + ny;
    int64_t *iacc = mem;
    for (size_t o = 0; o < ny; o++) {
        if (use_int)
            red_int_identity(p->kind, dt, &iacc[o]);
        else {
            acc[o] = red_f_identity(p->kind == RED_LOGSUMEXP ? RED_SUM : p->kind);
            aux[o] = -INFINITY;
        }
    }
    size_t idx[IR_MAX_RANK] = {0};
    size_t o = 0;
    for (size_t i = 0; i < nx; i++) {
        if (use_int)
            red_int_step(p->kind, is_u64, &iacc[o], core_load_i64(dt, x->data, i));
        else
            red_f_step(p->kind, &acc[o], &aux[o], core_load_f64(dt, x->data, i));
        /* advance the multi-index and the output offset with it */
        for (int d = x->rank - 1; d >= 0; d--) {
            o += ostride[d];
            if (++idx[d] < (size_t)x->dims[d]) break;
            o -= ostride[d] * idx[d];
            idx[d] = 0;
        }
    }
    for (size_t k = 0; k < ny; k++) {
        if (use_int) {
            int64_t v = iacc[k];
            if (p->kind == RED_MEAN) {
                v = count ? (is_u64 ? (int64_t)((uint64_t)v / count) : v / (int64_t)count) : 0;
            }
            core_store_i64(dt, y->data, k, v);
        } else {
            double v = red_f_final(p->kind, acc[k], aux[k], count);
            if (!core_dtype_is_float(dt) && !isnan(v)) v = trunc(v);
            core_store_f64(dt, y->data, k, v);
        }
    }
    free(mem);
    return ANVIL_OK;
}

#define RED_DEFINE(lname)                                                                          \
    const op_impl op_impl_##lname = {.min_inputs = 1,                                              \
                                     .max_inputs = 2,                                              \
                                     .min_outputs = 1,                                             \
                                     .max_outputs = 1,                                             \
                                     .value_inputs = 1u << 1,                                      \
                                     .check = red_check,                                           \
                                     .infer = red_infer,                                           \
                                     .run = red_run};

RED_DEFINE(reducel1)
RED_DEFINE(reducel2)
RED_DEFINE(reducelogsum)
RED_DEFINE(reducelogsumexp)
RED_DEFINE(reducemax)
RED_DEFINE(reducemean)
RED_DEFINE(reducemin)
RED_DEFINE(reduceprod)
RED_DEFINE(reducesum)
RED_DEFINE(reducesumsquare)

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------ */

typedef struct arg_params {
    int64_t axis;
    bool keepdims, last, is_max;
} arg_params;

static anvil_status arg_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, arg_params, p);
    p->is_max = n->op == IR_OP_ARGMAX;
    CORE_TRY(ir_attr_int(n, "axis", 0, &p->axis));
    CORE_TRY(ir_attr_flag(n, "keepdims", true, &p->keepdims));
    CORE_TRY(ir_attr_flag(n, "select_last_index", false, &p->last));
    CORE_TRY(red_attr_since(n, "select_last_index", 12));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status arg_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const arg_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_ALLNUM));
    out[0].dtype = ANVIL_DTYPE_INT64;
    ir_shape_unknown(&out[0].shape);
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0) return ANVIL_OK;
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    if (x->d[axis] == 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the reduced axis %d of input 0 has size 0; an index of the extreme "
                        "of an empty set does not exist",
                        ir_node_label(n), axis);
    bool red[IR_MAX_RANK];
    for (int d = 0; d < x->rank; d++) red[d] = d == axis;
    red_reduced_shape(x, red, p->keepdims, &out[0].shape);
    return ANVIL_OK;
}

static anvil_status arg_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const arg_params *p = n->params;
    const op_tensor *x = in[0];
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    size_t outer, len, inner;
    red_split(x, axis, &outer, &len, &inner);
    int64_t *y = out[0]->data;
    for (size_t k = 0; k < outer * inner; k++) {
        size_t base = red_line_base(k, len, inner), best = 0;
        for (size_t j = 1; j < len; j++) {
            int c = red_cmp(x->dtype, x->data, base + j * inner, base + best * inner);
            if (!p->is_max) c = -c;
            if (c > 0 || (c == 0 && p->last)) best = j;
        }
        y[k] = (int64_t)best;
    }
    return ANVIL_OK;
}

/* `const op_impl op_impl_<lname>` for ArgMax and ArgMin, which arg_check tells apart by the op. */
#define ARG_DEFINE(lname)                                                                          \
    const op_impl op_impl_##lname = {.min_inputs = 1,                                              \
                                     .max_inputs = 1,                                              \
                                     .min_outputs = 1,                                             \
                                     .max_outputs = 1,                                             \
                                     .check = arg_check,                                           \
                                     .infer = arg_infer,                                           \
                                     .run = arg_run};

ARG_DEFINE(argmax)
ARG_DEFINE(argmin)
