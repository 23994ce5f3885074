/* Private to the reduction-like op families (src/ops/math/reduce.c, topk_cumsum.c, softmax.c;
 * nn/normalization.c, loss.c, pool.c): element ordering by dtype, dtype masks, the (outer, len,
 * inner) view of one axis and the shape a reduction leaves. Header-only: every helper is static
 * inline. */
#ifndef ANVIL_OPS_REDUCE_COMMON_H
#define ANVIL_OPS_REDUCE_COMMON_H

#include "ops/ops.h"

#include <math.h>
#include <stdint.h>

#define RED_BIT(dt) (1u << ANVIL_DTYPE_##dt)
#define RED_MASK_FLOAT (RED_BIT(FLOAT32) | RED_BIT(FLOAT64) | RED_BIT(FLOAT16) | RED_BIT(BFLOAT16))
/* float, int32, int64, uint32, uint64: the type list most reductions and CumSum declare */
#define RED_MASK_ARITH                                                                             \
    (RED_MASK_FLOAT | RED_BIT(INT32) | RED_BIT(INT64) | RED_BIT(UINT32) | RED_BIT(UINT64))
#define RED_MASK_ALLNUM                                                                            \
    (RED_MASK_ARITH | RED_BIT(INT8) | RED_BIT(INT16) | RED_BIT(UINT8) | RED_BIT(UINT16))

static inline bool red_dtype_in(anvil_dtype dt, uint32_t mask) {
    return (unsigned)dt < 32 && ((mask >> dt) & 1u);
}

/* Three-way comparison of elements i and j of a buffer of dtype dt (any numeric dtype or bool).
 * NaN compares greater than every number (so maxima pick NaN, as numpy does) and equal to NaN. */
static inline int red_cmp(anvil_dtype dt, const void *p, size_t i, size_t j) {
    switch (dt) {
    case ANVIL_DTYPE_UINT64: {
        uint64_t a = ((const uint64_t *)p)[i], b = ((const uint64_t *)p)[j];
        return (a > b) - (a < b);
    }
    case ANVIL_DTYPE_FLOAT32:
    case ANVIL_DTYPE_FLOAT64:
    case ANVIL_DTYPE_FLOAT16:
    case ANVIL_DTYPE_BFLOAT16: {
        double a = core_load_f64(dt, p, i), b = core_load_f64(dt, p, j);
        if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
        return (a > b) - (a < b);
    }
    default: {
        int64_t a = core_load_i64(dt, p, i), b = core_load_i64(dt, p, j);
        return (a > b) - (a < b);
    }
    }
}

/* Splits dims around `axis`: outer = prod(dims[:axis]), len = dims[axis], inner = the rest. The
 * sizes fit in size_t: the runtime checked the tensor's element count. */
static inline void red_split(const op_tensor *t, int axis, size_t *outer, size_t *len,
                             size_t *inner) {
    size_t o = 1, in = 1;
    for (int d = 0; d < axis; d++) o *= (size_t)t->dims[d];
    for (int d = axis + 1; d < t->rank; d++) in *= (size_t)t->dims[d];
    *outer = o;
    *len = (size_t)t->dims[axis];
    *inner = in;
}

/* Offset of the first element of line k in the (outer, len, inner) view: lines run outer index
 * k / inner, inner index k % inner, and a line's elements are `inner` apart. */
static inline size_t red_line_base(size_t k, size_t len, size_t inner) {
    return (k / inner) * len * inner + k % inner;
}

/* A kernel over every line of an (outer, len, inner) view, split across threads by
 * red_lines_run: line(j, k, base) handles line k, whose first element is at offset base. */
typedef struct red_line_job red_line_job;
struct red_line_job {
    void (*line)(const red_line_job *j, size_t k, size_t base);
    const void *x;
    void *y;
    size_t len, inner;
    int what; /* the kernel's own selector (a dtype, a reduction kind) */
};

static inline void red_line_chunk(void *arg, size_t begin, size_t end) {
    const red_line_job *j = arg;
    for (size_t k = begin; k < end; k++) j->line(j, k, red_line_base(k, j->len, j->inner));
}

/* Runs j->line over lines [0, lines) in contiguous chunks across ctx's threads (NULL: serial). */
static inline void red_lines_run(op_ctx *ctx, size_t lines, red_line_job *j) {
    op_parallel_for(ctx, lines, red_line_chunk, j);
}

/* The shape x leaves when the dims marked in red[] are reduced: dropped, or kept as 1 with
 * keepdims. The kept dims keep their symbols. */
static inline void red_reduced_shape(const ir_shape *x, const bool *red, bool keepdims,
                                     ir_shape *o) {
    o->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!red[d]) {
            o->d[o->rank] = x->d[d];
            o->sym[o->rank++] = x->sym[d];
        } else if (keepdims) {
            o->d[o->rank] = 1;
            o->sym[o->rank++] = -1;
        }
    }
}

/* UNSUPPORTED when the node sets attribute `name` although its opset predates `since`, the first
 * opset that has the attribute. */
static inline anvil_status red_attr_since(const ir_node *n, const char *name, int since) {
    if (n->opset >= since || !ir_node_attr(n, name)) return ANVIL_OK;
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: attribute '%s' exists from opset %d, the model imports opset %d; raise "
                    "the model's opset or drop the attribute",
                    ir_node_label(n), name, since, n->opset);
}

/* Requires dt in mask for input `input`; UNSUPPORTED naming node, input and dtype otherwise. */
static inline anvil_status red_require(const ir_node *n, int input, anvil_dtype dt, uint32_t mask) {
    if (red_dtype_in(dt, mask)) return ANVIL_OK;
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: input %d has dtype %s, which this op does not accept; convert it (Cast) "
                    "to a dtype the ONNX schema of the op lists",
                    ir_node_label(n), input, anvil_dtype_name(dt));
}

#endif
