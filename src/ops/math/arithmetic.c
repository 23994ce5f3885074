/* Elementwise arithmetic: Add, Sub, Mul, Div, Pow (binary, numpy broadcasting), Max, Min
 * (variadic), Sqrt, Exp, Log, Neg, Abs (unary); plus the broadcasting iterator and unary driver
 * that activation.c shares (declared in eltwise_common.h).
 *
 * One iterator serves every broadcasting op: it folds the operands' shapes into the fewest dims
 * and hands out rows in which each operand is either contiguous or a single broadcast element,
 * so the per-dtype kernels are one tight loop each and the equal-shape and scalar cases need no
 * special code outside the row functions. The kernels themselves are generated from the dtype
 * lists in eltwise_common.h with one expression per op, so adding a dtype touches one line. */
#include "ops/eltwise_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ------------------------------------------------------------------------ */

anvil_status op_elt_check_none(ir_graph *g, ir_node *n) {
    (void)g;
    (void)n;
    return ANVIL_OK;
}

anvil_status op_elt_check_all_inputs(ir_graph *g, ir_node *n) {
    (void)g;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] == IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input %d is omitted, but every input of %s is required",
                            ir_node_label(n), i, ir_op_name(n->op));
    return ANVIL_OK;
}

anvil_status op_elt_same_dtype(const ir_node *n, const op_tinfo *in, int i) {
    if (in[i].dtype == in[0].dtype) return ANVIL_OK;
    return core_err(ANVIL_ERR_SHAPE,
                    "%s: input %d has dtype %s but input 0 has %s; all inputs must have the same "
                    "dtype (insert a Cast)",
                    ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                    anvil_dtype_name(in[0].dtype));
}

anvil_status op_elt_variadic_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, uint32_t mask, bool equal) {
    CORE_TRY(op_elt_require(n, 0, in[0].dtype, mask));
    for (int i = 1; i < n_in; i++) CORE_TRY(op_elt_same_dtype(n, in, i));
    ir_shape s = in[0].shape;
    for (int i = 1; i < n_in; i++) {
        const ir_shape *si = &in[i].shape;
        if (equal && si->rank >= 0 && s.rank >= 0 &&
            (si->rank != s.rank || !op_dims_may_equal(&s, si, s.rank))) {
            char b0[128], b1[128];
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d has shape %s but input 0 has %s; before opset 8 %s does "
                            "not broadcast and all shapes must be equal (use opset >= 8)",
                            ir_node_label(n), i, ir_shape_str(g, si, b1, sizeof b1),
                            ir_shape_str(g, &s, b0, sizeof b0), ir_op_name(n->op));
        }
        CORE_TRY(op_broadcast_shape(n, &s, si, &s));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = s;
    out[0].value = NULL;
    return ANVIL_OK;
}

anvil_status op_elt_require(const ir_node *n, int input, anvil_dtype dt, uint32_t mask) {
    if ((unsigned)dt < 32 && (mask >> dt) & 1u) return ANVIL_OK;
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (unsigned d = 0; d < 32; d++) {
        if (!((mask >> d) & 1u)) continue;
        int w = snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                         anvil_dtype_name((anvil_dtype)d));
        if (w < 0 || (size_t)w >= sizeof list - len) break;
        len += (size_t)w;
    }
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: input %d has dtype %s, which %s does not support (supported: %s); "
                    "cast the input to a supported type",
                    ir_node_label(n), input, anvil_dtype_name(dt), ir_op_name(n->op), list);
}

anvil_status op_elt_unary_infer(const ir_node *n, const op_tinfo *in, int n_in, op_tinfo *out,
                                int n_out, uint32_t mask) {
    if (n_in < 1 || n_out < 1)
        return core_err(ANVIL_ERR_INTERNAL, "%s: inference called with %d inputs, %d outputs",
                        ir_node_label(n), n_in, n_out);
    CORE_TRY(op_elt_require(n, 0, in[0].dtype, mask));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    out[0].value = NULL;
    return ANVIL_OK;
}

/* ---- unary driver -------------------------------------------------------------------------- */

typedef struct elt_unary_job {
    op_elt_row1 fn;
    const char *in;
    char *out;
    size_t es_in, es_out;
    const void *param;
} elt_unary_job;

static void elt_unary_chunk(void *arg, size_t begin, size_t end) {
    const elt_unary_job *j = arg;
    j->fn(j->out + begin * j->es_out, j->in + begin * j->es_in, end - begin, j->param);
}

void op_elt_map(const op_tensor *in, op_tensor *out, op_elt_row1 fn, const void *param,
                op_ctx *ctx) {
    size_t numel = op_tensor_numel(in);
    if (numel == 0) return;
    elt_unary_job job = {
        fn, in->data, out->data, anvil_dtype_size(in->dtype), anvil_dtype_size(out->dtype), param};
    op_parallel_for(op_elt_par_ctx(ctx, numel), numel, elt_unary_chunk, &job);
}

anvil_status op_elt_unary_run(const ir_node *n, const op_tensor *in, op_tensor *out, op_elt_row1 fn,
                              const void *param, op_ctx *ctx) {
    size_t numel = op_tensor_numel(in), es = anvil_dtype_size(in->dtype);
    if (!fn || es == 0 || in->dtype != out->dtype || numel != op_tensor_numel(out))
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: output buffer (%s, %zu elements) does not match input (%s, %zu "
                        "elements) or no kernel for the dtype",
                        ir_node_label(n), anvil_dtype_name(out->dtype), op_tensor_numel(out),
                        anvil_dtype_name(in->dtype), numel);
    op_elt_map(in, out, fn, param, ctx);
    return ANVIL_OK;
}

/* ---- the broadcasting iterator -------------------------------------------------------------- */

/* The output walked as `rank` dims (after folding), with each operand's element strides;
 * a stride of 0 repeats the operand along that dim. */
typedef struct elt_bcast {
    int rank;
    int64_t dims[IR_MAX_RANK];
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    size_t es_o, es_a, es_b;
} elt_bcast;

anvil_status op_elt_bcast_strides(const ir_node *n, int which, const op_tensor *t,
                                  const op_tensor *out, int64_t *s) {
    int r = out->rank, pad = r - t->rank;
    if (pad < 0)
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: input %d has rank %d, more than the output's rank %d",
                        ir_node_label(n), which, t->rank, r);
    int64_t stride = 1;
    for (int d = r - 1; d >= 0; d--) {
        int64_t td = d >= pad ? t->dims[d - pad] : 1;
        if (td != 1 && td != out->dims[d])
            return core_err(ANVIL_ERR_INTERNAL,
                            "%s: input %d dim %d is %lld, which does not broadcast to the "
                            "output's %lld",
                            ir_node_label(n), which, d - pad, (long long)td,
                            (long long)out->dims[d]);
        s[d] = td == 1 ? 0 : stride;
        stride *= td;
    }
    return ANVIL_OK;
}

static anvil_status elt_bcast_init(const ir_node *n, elt_bcast *bc, const op_tensor *a,
                                   const op_tensor *b, const op_tensor *out) {
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    CORE_TRY(op_elt_bcast_strides(n, 0, a, out, sa));
    CORE_TRY(op_elt_bcast_strides(n, 1, b, out, sb));
    /* Drop size-1 dims, then merge each dim into the previous one whenever both operands
     * continue their previous dim's stride pattern (contiguous runs, or broadcast runs). */
    int k = 0;
    for (int d = 0; d < out->rank; d++) {
        int64_t dim = out->dims[d];
        if (dim == 1) continue;
        if (k > 0 && bc->sa[k - 1] == sa[d] * dim && bc->sb[k - 1] == sb[d] * dim) {
            bc->dims[k - 1] *= dim;
            bc->sa[k - 1] = sa[d];
            bc->sb[k - 1] = sb[d];
            continue;
        }
        bc->dims[k] = dim;
        bc->sa[k] = sa[d];
        bc->sb[k] = sb[d];
        k++;
    }
    if (k == 0) {
        bc->dims[0] = 1;
        bc->sa[0] = bc->sb[0] = 0;
        k = 1;
    }
    bc->rank = k;
    bc->es_o = anvil_dtype_size(out->dtype);
    bc->es_a = anvil_dtype_size(a->dtype);
    bc->es_b = anvil_dtype_size(b->dtype);
    return ANVIL_OK;
}

typedef struct elt_binary_job {
    const elt_bcast *bc;
    op_elt_row2 fn;
    char *out;
    const char *a, *b;
} elt_binary_job;

/* Output elements [begin, end): start from begin's multi-index, call fn for each (partial)
 * innermost row, and carry the index like an odometer. */
static void elt_binary_chunk(void *arg, size_t begin, size_t end) {
    const elt_binary_job *j = arg;
    const elt_bcast *bc = j->bc;
    int r = bc->rank;
    int64_t idx[IR_MAX_RANK];
    int64_t oa = 0, ob = 0;
    size_t rem = begin;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)bc->dims[d]);
        rem /= (size_t)bc->dims[d];
        oa += idx[d] * bc->sa[d];
        ob += idx[d] * bc->sb[d];
    }
    int64_t inner = bc->dims[r - 1];
    size_t pos = begin;
    while (pos < end) {
        size_t cnt = (size_t)(inner - idx[r - 1]);
        if (cnt > end - pos) cnt = end - pos;
        j->fn(j->out + pos * bc->es_o, j->a + (size_t)oa * bc->es_a, j->b + (size_t)ob * bc->es_b,
              (ptrdiff_t)bc->sa[r - 1], (ptrdiff_t)bc->sb[r - 1], cnt);
        pos += cnt;
        idx[r - 1] += (int64_t)cnt;
        oa += (int64_t)cnt * bc->sa[r - 1];
        ob += (int64_t)cnt * bc->sb[r - 1];
        for (int d = r - 1; d > 0 && idx[d] == bc->dims[d]; d--) {
            oa -= bc->dims[d] * bc->sa[d];
            ob -= bc->dims[d] * bc->sb[d];
            idx[d] = 0;
            idx[d - 1]++;
            oa += bc->sa[d - 1];
            ob += bc->sb[d - 1];
        }
    }
}

anvil_status op_elt_binary_run(const ir_node *n, const op_tensor *a, const op_tensor *b,
                               op_tensor *out, op_elt_row2 fn, op_ctx *ctx) {
    if (!fn) return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel for the dtype", ir_node_label(n));
    elt_bcast bc;
    CORE_TRY(elt_bcast_init(n, &bc, a, b, out));
    size_t numel = op_tensor_numel(out);
    if (numel == 0) return ANVIL_OK;
    elt_binary_job job = {&bc, fn, out->data, a->data, b->data};
    op_parallel_for(op_elt_par_ctx(ctx, numel), numel, elt_binary_chunk, &job);
    return ANVIL_OK;
}

anvil_status op_elt_variadic_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *out, op_elt_row2 fn, op_ctx *ctx) {
    for (int i = 0; i < n_in; i++)
        if (!fn || !in[i] || in[i]->dtype != in[0]->dtype)
            return core_err(ANVIL_ERR_INTERNAL, "%s: input %d missing or of the wrong dtype",
                            ir_node_label(n), i);
    CORE_TRY(op_elt_binary_run(n, in[0], n_in > 1 ? in[1] : in[0], out, fn, ctx));
    for (int i = 2; i < n_in; i++) CORE_TRY(op_elt_binary_run(n, out, in[i], out, fn, ctx));
    return ANVIL_OK;
}

/* ---- binary kernels ------------------------------------------------------------------------- */

/* Defines `static void <op>_row_<tag>` (an op_elt_row2) computing EXPR(C, u, v). The strides
 * are 0 or 1 (see op_elt_binary_run), which gives the four loops their simple shapes. */
#define ELT_DEF_ROW2(op, EXPR, tag, DT, T, C, LD, ST)                                              \
    static void op##_row_##tag(void *out, const void *a, const void *b, ptrdiff_t sa,              \
                               ptrdiff_t sb, size_t n) {                                           \
        T *o = out;                                                                                \
        const T *x = a, *y = b;                                                                    \
        if (sa && sb) {                                                                            \
            for (size_t i = 0; i < n; i++) {                                                       \
                C u = (C)LD(x[i]), v = (C)LD(y[i]);                                                \
                o[i] = ST(EXPR(C, u, v));                                                          \
            }                                                                                      \
        } else if (sa) {                                                                           \
            C v = (C)LD(y[0]);                                                                     \
            for (size_t i = 0; i < n; i++) {                                                       \
                C u = (C)LD(x[i]);                                                                 \
                o[i] = ST(EXPR(C, u, v));                                                          \
            }                                                                                      \
        } else if (sb) {                                                                           \
            C u = (C)LD(x[0]);                                                                     \
            for (size_t i = 0; i < n; i++) {                                                       \
                C v = (C)LD(y[i]);                                                                 \
                o[i] = ST(EXPR(C, u, v));                                                          \
            }                                                                                      \
        } else {                                                                                   \
            C u = (C)LD(x[0]), v = (C)LD(y[0]);                                                    \
            T r = ST(EXPR(C, u, v));                                                               \
            for (size_t i = 0; i < n; i++) o[i] = r;                                               \
        }                                                                                          \
    }

/* Integer add/sub/mul/neg go through uint64_t: wrap-around like ONNX Runtime, without the
 * undefined behaviour of signed overflow (or of uint16 promoting to int in a multiply). */
#define ADD_F(C, u, v) ((u) + (v))
#define ADD_I(C, u, v) ((C)((uint64_t)(u) + (uint64_t)(v)))
#define SUB_F(C, u, v) ((u) - (v))
#define SUB_I(C, u, v) ((C)((uint64_t)(u) - (uint64_t)(v)))
#define MUL_F(C, u, v) ((u) * (v))
#define MUL_I(C, u, v) ((C)((uint64_t)(u) * (uint64_t)(v)))
/* C's integer division truncates toward zero, as ONNX Runtime does. Zero divisors are refused
 * before the kernel runs; MIN / -1 (which traps on x86) is computed as a wrapping negation. */
#define DIV_F(C, u, v) ((u) / (v))
#define DIV_S(C, u, v) ((v) == -1 ? (C)(0u - (uint64_t)(u)) : (C)((u) / (v)))
#define DIV_U(C, u, v) ((C)((u) / (v)))
/* np.maximum / np.minimum semantics: a NaN in either operand gives NaN. */
#define MAX_F(C, u, v) (((u) != (u) || (u) > (v)) ? (u) : (v))
#define MIN_F(C, u, v) (((u) != (u) || (u) < (v)) ? (u) : (v))
#define MAX_I(C, u, v) ((u) > (v) ? (u) : (v))
#define MIN_I(C, u, v) ((u) < (v) ? (u) : (v))
#define POW_F(C, u, v) ELT_MATH2(pow, (u), (v))

/* A binary op over every numeric dtype (float EF, signed ES, unsigned EU): row functions and
 * <op>_rows. */
#define ELT_DEF_ALL(op, EF, ES, EU)                                                                \
    ELT_FLOAT_TYPES(ELT_DEF_ROW2, op, EF)                                                          \
    ELT_SINT_TYPES(ELT_DEF_ROW2, op, ES)                                                           \
    ELT_UINT_TYPES(ELT_DEF_ROW2, op, EU)                                                           \
    ELT_ROW2_TABLE(op, ELT_NUMERIC_TYPES)

ELT_DEF_ALL(add, ADD_F, ADD_I, ADD_I)
ELT_DEF_ALL(sub, SUB_F, SUB_I, SUB_I)
ELT_DEF_ALL(mul, MUL_F, MUL_I, MUL_I)
ELT_DEF_ALL(div, DIV_F, DIV_S, DIV_U)
ELT_DEF_ALL(max, MAX_F, MAX_I, MAX_I)
ELT_DEF_ALL(min, MIN_F, MIN_I, MIN_I)
ELT_FLOAT_TYPES(ELT_DEF_ROW2, pow, POW_F)
ELT_ROW2_TABLE(pow, ELT_FLOAT_TYPES)

static const op_elt_row2 *elt_binary_rows(ir_op op) {
    switch (op) {
    case IR_OP_ADD:
        return add_rows;
    case IR_OP_SUB:
        return sub_rows;
    case IR_OP_MUL:
        return mul_rows;
    case IR_OP_DIV:
        return div_rows;
    case IR_OP_MAX:
        return max_rows;
    case IR_OP_MIN:
        return min_rows;
    default:
        return NULL;
    }
}

/* ---- opset < 7 broadcasting ----------------------------------------------------------------
 *
 * Before opset 7, Add/Sub/Mul/Div/Pow did not broadcast numpy-style: with broadcast=0 both
 * inputs have the same shape; with broadcast=1, B's dims line up with A's dims starting at
 * `axis` (default: B's dims are A's trailing dims). Padding B with size-1 dims to A's rank turns
 * that into a numpy broadcast, so the same iterator runs it. */
typedef struct elt_legacy {
    int64_t broadcast;
    int64_t axis;
    bool has_axis;
} elt_legacy;

static anvil_status elt_check_binary(ir_graph *g, ir_node *n) {
    if (n->opset >= 7) return ANVIL_OK;
    OP_PARAMS_NEW(g, elt_legacy, p);
    CORE_TRY(ir_attr_int(n, "broadcast", 0, &p->broadcast));
    if (p->broadcast != 0 && p->broadcast != 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'broadcast' must be 0 or 1 but is %lld (opset %d)",
                        ir_node_label(n), (long long)p->broadcast, n->opset);
    p->has_axis = ir_node_attr(n, "axis") != NULL;
    CORE_TRY(ir_attr_int(n, "axis", 0, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

/* B's shape as the numpy-broadcast operand it becomes under the legacy rules. */
static anvil_status elt_legacy_shape(const ir_node *n, const elt_legacy *p, const ir_shape *a,
                                     const ir_shape *b, ir_shape *out) {
    char sa[128], sb[128];
    *out = *b;
    if (a->rank < 0 || b->rank < 0) return ANVIL_OK;
    if (!p->broadcast) {
        if (a->rank != b->rank || !op_dims_may_equal(a, b, a->rank))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input shapes %s and %s differ, and with opset %d and "
                            "broadcast=0 they must be equal; set broadcast=1 or use opset >= 7",
                            ir_node_label(n), ir_shape_str(NULL, a, sa, sizeof sa),
                            ir_shape_str(NULL, b, sb, sizeof sb), n->opset);
        return ANVIL_OK;
    }
    if (b->rank > a->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: with broadcast=1 (opset %d) input 1 %s may not have more dims than "
                        "input 0 %s",
                        ir_node_label(n), n->opset, ir_shape_str(NULL, b, sb, sizeof sb),
                        ir_shape_str(NULL, a, sa, sizeof sa));
    int64_t axis = p->has_axis ? p->axis : a->rank - b->rank;
    if (axis < 0 || axis > a->rank - b->rank)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: attribute 'axis' is %lld, but input 1 %s must start at an axis in "
                        "0..%d of input 0 %s",
                        ir_node_label(n), (long long)p->axis, ir_shape_str(NULL, b, sb, sizeof sb),
                        a->rank - b->rank, ir_shape_str(NULL, a, sa, sizeof sa));
    ir_shape o;
    memset(&o, 0, sizeof o);
    o.rank = a->rank;
    for (int d = 0; d < a->rank; d++) {
        int bd = d - (int)axis;
        o.d[d] = (bd >= 0 && bd < b->rank) ? b->d[bd] : 1;
        o.sym[d] = (bd >= 0 && bd < b->rank) ? b->sym[bd] : -1;
    }
    *out = o;
    return ANVIL_OK;
}

/* The run-time counterpart: a view of b with the padded dims. */
static anvil_status elt_legacy_tensor(const ir_node *n, const op_tensor *a, op_tensor *b) {
    if (!n->params) return ANVIL_OK;
    ir_shape sa, sb, so;
    ir_shape_set(&sa, a->rank, a->dims);
    ir_shape_set(&sb, b->rank, b->dims);
    CORE_TRY(elt_legacy_shape(n, n->params, &sa, &sb, &so));
    b->rank = so.rank;
    for (int d = 0; d < so.rank; d++) b->dims[d] = so.d[d];
    return ANVIL_OK;
}

/* ---- Add, Sub, Mul, Div -------------------------------------------------------------------- */

/* Output 0 of Add, Sub, Mul, Div and Pow: input 0's dtype and the broadcast of the two shapes
 * (under the legacy rules before opset 7). */
static anvil_status elt_infer_broadcast(const ir_node *n, const op_tinfo *in, op_tinfo *out) {
    ir_shape b = in[1].shape;
    if (n->params) CORE_TRY(elt_legacy_shape(n, n->params, &in[0].shape, &in[1].shape, &b));
    out[0].dtype = in[0].dtype;
    out[0].value = NULL;
    return op_broadcast_shape(n, &in[0].shape, &b, &out[0].shape);
}

static anvil_status elt_infer_binary(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                     int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(op_elt_require(n, 0, in[0].dtype, ELT_MASK_NUMERIC));
    for (int i = 1; i < n_in; i++) CORE_TRY(op_elt_same_dtype(n, in, i));
    return elt_infer_broadcast(n, in, out);
}

/* Integer division by zero has no defined result (and traps on x86), so the divisor is scanned
 * before any work; every element of it takes part unless the output is empty. */
static anvil_status elt_check_divisor(const ir_node *n, const op_tensor *b, const op_tensor *out) {
    if (op_tensor_numel(out) == 0) return ANVIL_OK;
    size_t es = anvil_dtype_size(b->dtype), cnt = op_tensor_numel(b);
    const unsigned char *p = b->data;
    for (size_t i = 0; i < cnt; i++) {
        bool zero = true;
        for (size_t k = 0; k < es && zero; k++) zero = p[i * es + k] == 0;
        if (zero)
            return core_err(ANVIL_ERR_RUNTIME,
                            "%s: integer division by zero: input 1 (the divisor, %s) is 0 at flat "
                            "index %zu of %zu; integer Div needs nonzero divisors (divide in "
                            "floating point or guard the divisor)",
                            ir_node_label(n), anvil_dtype_name(b->dtype), i, cnt);
    }
    return ANVIL_OK;
}

static anvil_status elt_run_binary(const ir_node *n, const op_tensor *const *in, int n_in,
                                   op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    op_elt_row2 fn = op_elt_row2_for(elt_binary_rows(n->op), in[0]->dtype);
    if (!fn || in[1]->dtype != in[0]->dtype)
        return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel for dtypes %s and %s", ir_node_label(n),
                        anvil_dtype_name(in[0]->dtype), anvil_dtype_name(in[1]->dtype));
    op_tensor b = *in[1];
    CORE_TRY(elt_legacy_tensor(n, in[0], &b));
    if (n->op == IR_OP_DIV && core_dtype_is_int(b.dtype))
        CORE_TRY(elt_check_divisor(n, &b, out[0]));
    return op_elt_binary_run(n, in[0], &b, out[0], fn, ctx);
}

#define ELT_ARITH_IMPL(op)                                                                         \
    ELT_BINARY_IMPL(op, OP_INPLACE_0, elt_check_binary, elt_infer_binary, elt_run_binary)
ELT_ARITH_IMPL(add)
ELT_ARITH_IMPL(sub)
ELT_ARITH_IMPL(mul)
ELT_ARITH_IMPL(div)

/* ---- Max, Min (variadic) ------------------------------------------------------------------- */

static anvil_status elt_infer_variadic(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                       int n_in, op_tinfo *out, int n_out) {
    (void)n_out;
    return op_elt_variadic_infer(g, n, in, n_in, out, ELT_MASK_NUMERIC, false);
}

/* Folds the inputs pairwise into the output (op_elt_variadic_run). The output already has the
 * broadcast of all shapes, so it can be an operand of every later step. A single input is
 * f(x0, x0) = x0, which also copies it. Max and min are associative and commutative (NaN
 * included), so the order does not change the result. */
static anvil_status elt_run_variadic(const ir_node *n, const op_tensor *const *in, int n_in,
                                     op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    op_elt_row2 fn = op_elt_row2_for(elt_binary_rows(n->op), in[0]->dtype);
    return op_elt_variadic_run(n, in, n_in, out[0], fn, ctx);
}

ELT_VARIADIC_IMPL(max, op_elt_check_all_inputs, elt_infer_variadic, elt_run_variadic)
ELT_VARIADIC_IMPL(min, op_elt_check_all_inputs, elt_infer_variadic, elt_run_variadic)

/* ---- Pow ----------------------------------------------------------------------------------
 *
 * The exponent may have another dtype than the base; the output has the base's. A float base
 * with an exponent of its own dtype uses pow/powf directly. Every other pairing converts the
 * exponent once to double (float base or float exponent) or to int64 (both integer), so only
 * those two exponent types need kernels. */

#define POW_BASE_MASK (ELT_MASK_FLOAT | (1u << ANVIL_DTYPE_INT32) | (1u << ANVIL_DTYPE_INT64))

#define ELT_FROMD_F32(d) ((float)(d))
#define ELT_FROMD_F64(d) (d)
#define ELT_FROMD_F16(d) core_f32_to_f16((float)(d))
#define ELT_FROMD_BF16(d) core_f32_to_bf16((float)(d))

/* Base of type T, exponent double: pow in double, stored through FROMD. */
#define ELT_DEF_POWD(tag, T, LD, FROMD)                                                            \
    static void powd_row_##tag(void *out, const void *a, const void *b, ptrdiff_t sa,              \
                               ptrdiff_t sb, size_t n) {                                           \
        T *o = out;                                                                                \
        const T *x = a;                                                                            \
        const double *e = b;                                                                       \
        for (size_t i = 0; i < n; i++)                                                             \
            o[i] = FROMD(pow((double)LD(x[(ptrdiff_t)i * sa]), e[(ptrdiff_t)i * sb]));             \
    }

ELT_DEF_POWD(f32, float, ELT_ID, ELT_FROMD_F32)
ELT_DEF_POWD(f64, double, ELT_ID, ELT_FROMD_F64)
ELT_DEF_POWD(f16, uint16_t, core_f16_to_f32, ELT_FROMD_F16)
ELT_DEF_POWD(bf16, uint16_t, core_bf16_to_f32, ELT_FROMD_BF16)
ELT_DEF_POWD(i32, int32_t, ELT_ID, op_elt_f2i32)
ELT_DEF_POWD(i64, int64_t, ELT_ID, op_elt_f2i64)

/* Exact integer power within [lo, hi]. Results outside the range, and 0 to a negative power,
 * give lo (the type's minimum): what ONNX Runtime's pow-through-double yields on x86. A negative
 * power of any other base truncates toward zero: 1 and -1 keep their magnitude, the rest give 0. */
static int64_t elt_ipow(int64_t base, int64_t e, int64_t lo, int64_t hi) {
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return base == 0 ? lo : 0;
    }
    int64_t r = 1;
    while (e) {
        if (e & 1) {
            if (!core_mul_i64(r, base, &r) || r < lo || r > hi) return lo;
        }
        e >>= 1;
        /* the square is only needed when a higher bit follows, and then the result would
         * contain it, so its overflow is the result's overflow */
        if (e && (!core_mul_i64(base, base, &base) || base > hi)) return lo;
    }
    return r;
}

static void powi_row_i32(void *out, const void *a, const void *b, ptrdiff_t sa, ptrdiff_t sb,
                         size_t n) {
    int32_t *o = out;
    const int32_t *x = a;
    const int64_t *e = b;
    for (size_t i = 0; i < n; i++)
        o[i] = (int32_t)elt_ipow(x[(ptrdiff_t)i * sa], e[(ptrdiff_t)i * sb], INT32_MIN, INT32_MAX);
}

static void powi_row_i64(void *out, const void *a, const void *b, ptrdiff_t sa, ptrdiff_t sb,
                         size_t n) {
    int64_t *o = out;
    const int64_t *x = a;
    const int64_t *e = b;
    for (size_t i = 0; i < n; i++)
        o[i] = elt_ipow(x[(ptrdiff_t)i * sa], e[(ptrdiff_t)i * sb], INT64_MIN, INT64_MAX);
}

static const op_elt_row2 powd_rows[ELT_DTYPE_SLOTS] = {
    [ANVIL_DTYPE_FLOAT32] = powd_row_f32, [ANVIL_DTYPE_FLOAT64] = powd_row_f64,
    [ANVIL_DTYPE_FLOAT16] = powd_row_f16, [ANVIL_DTYPE_BFLOAT16] = powd_row_bf16,
    [ANVIL_DTYPE_INT32] = powd_row_i32,   [ANVIL_DTYPE_INT64] = powd_row_i64};
static const op_elt_row2 powi_rows[ELT_DTYPE_SLOTS] = {
    [ANVIL_DTYPE_INT32] = powi_row_i32, [ANVIL_DTYPE_INT64] = powi_row_i64};

static anvil_status elt_infer_pow(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(op_elt_require(n, 0, in[0].dtype, POW_BASE_MASK));
    CORE_TRY(op_elt_require(n, 1, in[1].dtype, ELT_MASK_NUMERIC));
    return elt_infer_broadcast(n, in, out);
}

/* Converts the exponent to `to` (FLOAT64 or INT64) into a malloc'd buffer (*owned). */
static anvil_status elt_pow_exponent(const ir_node *n, const op_tensor *y, anvil_dtype to,
                                     op_tensor *e, void **owned) {
    *e = *y;
    *owned = NULL;
    if (y->dtype == to) return ANVIL_OK;
    size_t cnt = op_tensor_numel(y), bytes;
    if (!core_mul_size(cnt ? cnt : 1, 8, &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: exponent too large", ir_node_label(n));
    void *buf = core_alloc(bytes);
    if (!buf) return ANVIL_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < cnt; i++) {
        if (to == ANVIL_DTYPE_FLOAT64) {
            ((double *)buf)[i] = core_load_f64(y->dtype, y->data, i);
        } else if (y->dtype == ANVIL_DTYPE_UINT64) {
            /* beyond INT64_MAX every base but 0, 1 and -1 overflows anyway; keep the parity
             * that -1 needs */
            uint64_t u = ((const uint64_t *)y->data)[i];
            ((int64_t *)buf)[i] =
                u > (uint64_t)INT64_MAX ? INT64_MAX - 1 + (int64_t)(u & 1) : (int64_t)u;
        } else {
            ((int64_t *)buf)[i] = core_load_i64(y->dtype, y->data, i);
        }
    }
    e->dtype = to;
    e->data = buf;
    *owned = buf;
    return ANVIL_OK;
}

static anvil_status elt_run_pow(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    if (op_tensor_numel(out[0]) == 0) return ANVIL_OK;
    op_tensor y = *in[1];
    CORE_TRY(elt_legacy_tensor(n, x, &y));
    bool xf = core_dtype_is_float(x->dtype), yf = core_dtype_is_float(y.dtype);
    if (xf && x->dtype == y.dtype)
        return op_elt_binary_run(n, x, &y, out[0], op_elt_row2_for(pow_rows, x->dtype), ctx);
    anvil_dtype to = (xf || yf) ? ANVIL_DTYPE_FLOAT64 : ANVIL_DTYPE_INT64;
    if (!core_dtype_supported(y.dtype))
        return core_err(ANVIL_ERR_INTERNAL, "%s: exponent dtype %s", ir_node_label(n),
                        anvil_dtype_name(y.dtype));
    op_tensor e;
    void *owned;
    CORE_TRY(elt_pow_exponent(n, &y, to, &e, &owned));
    op_elt_row2 fn = op_elt_row2_for(to == ANVIL_DTYPE_FLOAT64 ? powd_rows : powi_rows, x->dtype);
    anvil_status s = op_elt_binary_run(n, x, &e, out[0], fn, ctx);
    free(owned);
    return s;
}

ELT_BINARY_IMPL(pow, OP_INPLACE_0, elt_check_binary, elt_infer_pow, elt_run_pow)

/* ---- Sqrt, Exp, Log, Neg, Abs -------------------------------------------------------------- */

#define SQRT_F(C, v, p) ELT_MATH(sqrt, (v))
#define EXP_F(C, v, p) ELT_MATH(exp, (v))
#define LOG_F(C, v, p) ELT_MATH(log, (v))
#define NEG_F(C, v, p) (-(v))
#define NEG_S(C, v, p) ((C)(0u - (uint64_t)(v)))
#define ABS_F(C, v, p) ELT_MATH(fabs, (v))
#define ABS_S(C, v, p) ((v) < 0 ? (C)(0u - (uint64_t)(v)) : (v))
#define ABS_U(C, v, p) (v)

ELT_FLOAT_UNARY(sqrt, SQRT_F)
ELT_FLOAT_UNARY(exp, EXP_F)
ELT_FLOAT_UNARY(log, LOG_F)
ELT_SIGNED_UNARY(neg, NEG_F, NEG_S)
ELT_NUMERIC_UNARY(abs, ABS_F, ABS_S, ABS_U)

static op_elt_unary elt_unary_of(ir_op op) {
    switch (op) {
    case IR_OP_SQRT:
        return (op_elt_unary){sqrt_rows, ELT_MASK_FLOAT, 0};
    case IR_OP_EXP:
        return (op_elt_unary){exp_rows, ELT_MASK_FLOAT, 0};
    case IR_OP_LOG:
        return (op_elt_unary){log_rows, ELT_MASK_FLOAT, 0};
    case IR_OP_NEG:
        return (op_elt_unary){neg_rows, ELT_MASK_FLOAT | ELT_MASK_SINT, 0};
    case IR_OP_ABS:
        return (op_elt_unary){abs_rows, ELT_MASK_NUMERIC, 0};
    default:
        return (op_elt_unary){NULL, 0, 0};
    }
}

ELT_DEF_UNARY_FNS(elt_unary, elt_unary_of)

#define ELT_MATH_IMPL(op) ELT_UNARY_IMPL(op, op_elt_check_none, elt_unary_infer, elt_unary_run)
ELT_MATH_IMPL(sqrt)
ELT_MATH_IMPL(exp)
ELT_MATH_IMPL(log)
ELT_MATH_IMPL(neg)
ELT_MATH_IMPL(abs)
