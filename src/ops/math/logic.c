/* Logic, comparison, bitwise and selection ops: IsNaN, IsInf, Not, And, Or, Xor, BitwiseNot,
 * BitwiseAnd, BitwiseOr, BitwiseXor, BitShift, Equal, Greater, GreaterOrEqual, Less, LessOrEqual,
 * Where and CastLike.
 *
 * The binary ones broadcast numpy-style through op_elt_binary_run; comparisons and the IsX tests
 * write BOOL (one byte, 0 or 1) whatever the input dtype, so their row functions are generated with
 * the output type apart from the operands' type. Where has three operands and elements of any size,
 * so it has its own small broadcasting walker. CastLike reuses Cast's kernel. */
#include "ops/eltwise_common.h"

#include <math.h>
#include <string.h>

static const uint32_t logic_mask_bool = 1u << ANVIL_DTYPE_BOOL;
#define LOGIC_MASK_INT (ELT_MASK_SINT | ELT_MASK_UINT)

/* First opset whose schema has the op. */
static int logic_since(ir_op op) {
    switch (op) {
    case IR_OP_ISNAN:
    case IR_OP_WHERE:
        return 9;
    case IR_OP_ISINF:
        return 10;
    case IR_OP_BITSHIFT:
        return 11;
    case IR_OP_GREATEROREQUAL:
    case IR_OP_LESSOREQUAL:
        return 12;
    case IR_OP_CASTLIKE:
        return 15;
    case IR_OP_BITWISEAND:
    case IR_OP_BITWISENOT:
    case IR_OP_BITWISEOR:
    case IR_OP_BITWISEXOR:
        return 18;
    default:
        return 1;
    }
}

static anvil_status logic_check_none(ir_graph *g, ir_node *n) {
    (void)g;
    return op_elt_require_opset(n, logic_since(n->op));
}

/* ---- unary: IsNaN, IsInf (-> BOOL), Not, BitwiseNot ---------------------------------------- */

/* Any nonzero value is true: BOOL 1; zero is BOOL 0. */
#define LOGIC_AS_BOOL(x) ((uint8_t)((x) != 0))

/* Defines `static void <op>_row_<tag>` (an op_elt_row1 writing BOOL) computing EXPR(C, v, p). */
#define LOGIC_DEF_TEST(op, EXPR, tag, DT, T, C, LD, ST)                                            \
    ELT_DEF_ROW1_TO(op##_row_##tag, EXPR, T, C, LD, uint8_t, LOGIC_AS_BOOL)

#define ISNAN_E(C, v, p) isnan(v)
/* IsInf's detect_negative / detect_positive travel in has_lo / has_hi. */
#define ISINF_E(C, v, p) (isinf(v) && ((v) > 0 ? (p)->has_hi : (p)->has_lo))
ELT_FLOAT_TYPES(LOGIC_DEF_TEST, isnan, ISNAN_E)
ELT_FLOAT_TYPES(LOGIC_DEF_TEST, isinf, ISINF_E)
ELT_ROW1_TABLE(isnan, ELT_FLOAT_TYPES)
ELT_ROW1_TABLE(isinf, ELT_FLOAT_TYPES)

#define NOT_E(C, v, p) ((uint8_t)((v) == 0))
#define BITNOT_E(C, v, p) ((C) ~(v))
ELT_DEF_ROW1(not, NOT_E, bool, BOOL, uint8_t, uint8_t, ELT_ID, ELT_ID)
ELT_SINT_TYPES(ELT_DEF_ROW1, bitnot, BITNOT_E)
ELT_UINT_TYPES(ELT_DEF_ROW1, bitnot, BITNOT_E)
#define LOGIC_INT_TYPES(X, op, EXPR) ELT_SINT_TYPES(X, op, EXPR) ELT_UINT_TYPES(X, op, EXPR)
ELT_ROW1_TABLE(bitnot, LOGIC_INT_TYPES)

static anvil_status logic_infer_test(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                     int n_in, op_tinfo *out, int n_out) {
    (void)g;
    CORE_TRY(op_elt_unary_infer(n, in, n_in, out, n_out, ELT_MASK_FLOAT));
    out[0].dtype = ANVIL_DTYPE_BOOL;
    return ANVIL_OK;
}

/* IsNaN and IsInf: the unary driver for tests whose output is BOOL while the input is not. */
static anvil_status logic_run_test(const ir_node *n, const op_tensor *const *in, int n_in,
                                   op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const op_tensor *x = in[0];
    op_tensor *y = out[0];
    op_elt_row1 fn = op_elt_row1_for(n->op == IR_OP_ISINF ? isinf_rows : isnan_rows, x->dtype);
    if (!fn || y->dtype != ANVIL_DTYPE_BOOL || op_tensor_numel(y) != op_tensor_numel(x))
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: no kernel for %s, or the output buffer (%s, %zu elements) does not "
                        "match",
                        ir_node_label(n), anvil_dtype_name(x->dtype), anvil_dtype_name(y->dtype),
                        op_tensor_numel(y));
    op_elt_map(x, y, fn, n->params, ctx);
    return ANVIL_OK;
}

static anvil_status logic_check_isinf(ir_graph *g, ir_node *n) {
    CORE_TRY(op_elt_require_opset(n, 10));
    OP_PARAMS_NEW(g, op_elt_param, p);
    CORE_TRY(ir_attr_flag(n, "detect_negative", true, &p->has_lo));
    CORE_TRY(ir_attr_flag(n, "detect_positive", true, &p->has_hi));
    n->params = p;
    return ANVIL_OK;
}

ELT_IMPL(isnan, 1, 1, 0, logic_check_none, logic_infer_test, logic_run_test)
ELT_IMPL(isinf, 1, 1, 0, logic_check_isinf, logic_infer_test, logic_run_test)

static anvil_status logic_infer_not(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                    int n_in, op_tinfo *out, int n_out) {
    (void)g;
    return op_elt_unary_infer(n, in, n_in, out, n_out,
                              n->op == IR_OP_NOT ? logic_mask_bool : LOGIC_MASK_INT);
}

static anvil_status logic_run_not(const ir_node *n, const op_tensor *const *in, int n_in,
                                  op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    anvil_dtype dt = in[0]->dtype;
    op_elt_row1 fn = NULL;
    if (n->op == IR_OP_NOT && dt == ANVIL_DTYPE_BOOL) fn = not_row_bool;
    if (n->op == IR_OP_BITWISENOT) fn = op_elt_row1_for(bitnot_rows, dt);
    return op_elt_unary_run(n, in[0], out[0], fn, NULL, ctx);
}

ELT_UNARY_IMPL(not, logic_check_none, logic_infer_not, logic_run_not)
ELT_UNARY_IMPL(bitwisenot, logic_check_none, logic_infer_not, logic_run_not)

/* ---- binary: And, Or, Xor, Bitwise{And,Or,Xor}, BitShift, comparisons ---------------------- */

#define AND_E(C, u, v) ((u) & (v))
#define OR_E(C, u, v) ((u) | (v))
#define XOR_E(C, u, v) ((u) ^ (v))
/* Shifts are done in 64 bits and truncated to the type on store, so a shift by the type's width or
 * more gives 0 (numpy's result) instead of C's undefined behaviour. */
#define SHL_E(C, u, v) ((v) < 64 ? (u) << (v) : (uint64_t)0)
#define SHR_E(C, u, v) ((v) < 64 ? (u) >> (v) : (uint64_t)0)
#define EQ_E(C, u, v) ((u) == (v))
#define GT_E(C, u, v) ((u) > (v))
#define GE_E(C, u, v) ((u) >= (v))
#define LT_E(C, u, v) ((u) < (v))
#define LE_E(C, u, v) ((u) <= (v))

/* Bools load as 0/1 so that any nonzero byte counts as true. */
ELT_DEF_ROW2_TO(and_row_bool, AND_E, uint8_t, uint8_t, LOGIC_AS_BOOL, uint8_t, ELT_ID)
ELT_DEF_ROW2_TO(or_row_bool, OR_E, uint8_t, uint8_t, LOGIC_AS_BOOL, uint8_t, ELT_ID)
ELT_DEF_ROW2_TO(xor_row_bool, XOR_E, uint8_t, uint8_t, LOGIC_AS_BOOL, uint8_t, ELT_ID)

#define LOGIC_DEF_CMP(op, EXPR, tag, DT, T, C, LD, ST)                                             \
    ELT_DEF_ROW2_TO(op##_row_##tag, EXPR, T, C, LD, uint8_t, (uint8_t))

LOGIC_INT_TYPES(ELT_DEF_ROW2_SAME, bitand, AND_E)
LOGIC_INT_TYPES(ELT_DEF_ROW2_SAME, bitor, OR_E)
LOGIC_INT_TYPES(ELT_DEF_ROW2_SAME, bitxor, XOR_E)
ELT_UINT_TYPES(ELT_DEF_ROW2_U64, shl, SHL_E)
ELT_UINT_TYPES(ELT_DEF_ROW2_U64, shr, SHR_E)

/* Comparisons over every numeric type, plus BOOL for Equal. */
ELT_NUMERIC_TYPES(LOGIC_DEF_CMP, eq, EQ_E)
ELT_NUMERIC_TYPES(LOGIC_DEF_CMP, gt, GT_E)
ELT_NUMERIC_TYPES(LOGIC_DEF_CMP, ge, GE_E)
ELT_NUMERIC_TYPES(LOGIC_DEF_CMP, lt, LT_E)
ELT_NUMERIC_TYPES(LOGIC_DEF_CMP, le, LE_E)
ELT_DEF_ROW2_TO(eq_row_bool, EQ_E, uint8_t, uint8_t, LOGIC_AS_BOOL, uint8_t, (uint8_t))

static const op_elt_row2 and_rows[ELT_DTYPE_SLOTS] = {[ANVIL_DTYPE_BOOL] = and_row_bool};
static const op_elt_row2 or_rows[ELT_DTYPE_SLOTS] = {[ANVIL_DTYPE_BOOL] = or_row_bool};
static const op_elt_row2 xor_rows[ELT_DTYPE_SLOTS] = {[ANVIL_DTYPE_BOOL] = xor_row_bool};
ELT_ROW2_TABLE(bitand, LOGIC_INT_TYPES)
ELT_ROW2_TABLE(bitor, LOGIC_INT_TYPES)
ELT_ROW2_TABLE(bitxor, LOGIC_INT_TYPES)
ELT_ROW2_TABLE(shl, ELT_UINT_TYPES)
ELT_ROW2_TABLE(shr, ELT_UINT_TYPES)
static const op_elt_row2 eq_rows[ELT_DTYPE_SLOTS] = {
    ELT_NUMERIC_TYPES(ELT_ROW_ENTRY, eq, _)[ANVIL_DTYPE_BOOL] = eq_row_bool};
ELT_ROW2_TABLE(gt, ELT_NUMERIC_TYPES)
ELT_ROW2_TABLE(ge, ELT_NUMERIC_TYPES)
ELT_ROW2_TABLE(lt, ELT_NUMERIC_TYPES)
ELT_ROW2_TABLE(le, ELT_NUMERIC_TYPES)

/* One binary op: its kernels, the input dtypes it takes, and whether it writes BOOL. */
typedef struct logic_binary {
    const op_elt_row2 *rows;
    uint32_t mask;
    bool to_bool;
} logic_binary;

static logic_binary logic_binary_of(const ir_node *n) {
    switch (n->op) {
    case IR_OP_AND:
        return (logic_binary){and_rows, logic_mask_bool, true};
    case IR_OP_OR:
        return (logic_binary){or_rows, logic_mask_bool, true};
    case IR_OP_XOR:
        return (logic_binary){xor_rows, logic_mask_bool, true};
    case IR_OP_BITWISEAND:
        return (logic_binary){bitand_rows, LOGIC_MASK_INT, false};
    case IR_OP_BITWISEOR:
        return (logic_binary){bitor_rows, LOGIC_MASK_INT, false};
    case IR_OP_BITWISEXOR:
        return (logic_binary){bitxor_rows, LOGIC_MASK_INT, false};
    case IR_OP_BITSHIFT: {
        const bool *left = n->params;
        return (logic_binary){left && *left ? shl_rows : shr_rows, ELT_MASK_UINT, false};
    }
    case IR_OP_EQUAL:
        return (logic_binary){eq_rows, ELT_MASK_NUMERIC | logic_mask_bool, true};
    case IR_OP_GREATER:
        return (logic_binary){gt_rows, ELT_MASK_NUMERIC, true};
    case IR_OP_GREATEROREQUAL:
        return (logic_binary){ge_rows, ELT_MASK_NUMERIC, true};
    case IR_OP_LESS:
        return (logic_binary){lt_rows, ELT_MASK_NUMERIC, true};
    case IR_OP_LESSOREQUAL:
        return (logic_binary){le_rows, ELT_MASK_NUMERIC, true};
    default:
        return (logic_binary){NULL, 0, false};
    }
}

/* BitShift's direction is required: "LEFT" or "RIGHT". params: a bool, true for LEFT. */
static anvil_status logic_check_bitshift(ir_graph *g, ir_node *n) {
    CORE_TRY(op_elt_require_opset(n, 11));
    const char *dir;
    if (!ir_node_attr(n, "direction"))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: required attribute 'direction' is missing; set it to \"LEFT\" or "
                        "\"RIGHT\"",
                        ir_node_label(n));
    CORE_TRY(ir_attr_string(n, "direction", "", &dir));
    OP_PARAMS_NEW(g, bool, left);
    if (strcmp(dir, "LEFT") == 0)
        *left = true;
    else if (strcmp(dir, "RIGHT") == 0)
        *left = false;
    else
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'direction' is \"%.64s\" but must be "
                        "\"LEFT\" or \"RIGHT\"",
                        ir_node_label(n), dir);
    n->params = left;
    return ANVIL_OK;
}

static anvil_status logic_infer_binary(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                       int n_in, op_tinfo *out, int n_out) {
    (void)g;
    logic_binary b = logic_binary_of(n);
    return op_elt_binary_infer(n, in, n_in, out, n_out, b.mask,
                               b.to_bool ? ANVIL_DTYPE_BOOL : ANVIL_DTYPE_UNDEFINED);
}

static anvil_status logic_run_binary(const ir_node *n, const op_tensor *const *in, int n_in,
                                     op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    logic_binary b = logic_binary_of(n);
    anvil_dtype dt = in[0]->dtype;
    op_elt_row2 fn = op_elt_row2_for(b.rows, dt);
    if (!fn || in[1]->dtype != dt || out[0]->dtype != (b.to_bool ? ANVIL_DTYPE_BOOL : dt))
        return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel for dtypes %s, %s -> %s",
                        ir_node_label(n), anvil_dtype_name(dt), anvil_dtype_name(in[1]->dtype),
                        anvil_dtype_name(out[0]->dtype));
    return op_elt_binary_run(n, in[0], in[1], out[0], fn, ctx);
}

/* Ops writing their operands' dtype may write over input 0; the comparisons change the element size
 * (except on BOOL/INT8/UINT8 inputs), so they never do. */
#define LOGIC_BINARY_IMPL(op, checkfn, fl)                                                         \
    ELT_BINARY_IMPL(op, fl, checkfn, logic_infer_binary, logic_run_binary)

LOGIC_BINARY_IMPL(and, logic_check_none, OP_INPLACE_0)
LOGIC_BINARY_IMPL(or, logic_check_none, OP_INPLACE_0)
LOGIC_BINARY_IMPL(xor, logic_check_none, OP_INPLACE_0)
LOGIC_BINARY_IMPL(bitwiseand, logic_check_none, OP_INPLACE_0)
LOGIC_BINARY_IMPL(bitwiseor, logic_check_none, OP_INPLACE_0)
LOGIC_BINARY_IMPL(bitwisexor, logic_check_none, OP_INPLACE_0)
LOGIC_BINARY_IMPL(bitshift, logic_check_bitshift, OP_INPLACE_0)
LOGIC_BINARY_IMPL(equal, logic_check_none, 0)
LOGIC_BINARY_IMPL(greater, logic_check_none, 0)
LOGIC_BINARY_IMPL(greaterorequal, logic_check_none, 0)
LOGIC_BINARY_IMPL(less, logic_check_none, 0)
LOGIC_BINARY_IMPL(lessorequal, logic_check_none, 0)

/* ---- Where ---------------------------------------------------------------------------------
 *
 * out = condition ? X : Y with all three broadcast together. The walker keeps one element offset
 * per operand (stride 0 along broadcast dims) and advances them like an odometer; the element copy
 * is specialised on the element size so the compiler turns it into one move. */

typedef struct logic_where_job {
    int rank;
    int64_t dims[IR_MAX_RANK];
    int64_t st[3][IR_MAX_RANK]; /* element strides of condition, X, Y */
    const uint8_t *c;
    const char *x, *y;
    char *out;
    size_t es;
} logic_where_job;

static void logic_where_chunk(void *arg, size_t begin, size_t end) {
    const logic_where_job *j = arg;
    int r = j->rank;
    int64_t idx[IR_MAX_RANK] = {0};
    int64_t off[3] = {0, 0, 0};
    size_t rem = begin;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)j->dims[d]);
        rem /= (size_t)j->dims[d];
        for (int k = 0; k < 3; k++) off[k] += idx[d] * j->st[k][d];
    }
    for (size_t pos = begin; pos < end; pos++) {
        const char *src =
            j->c[off[0]] ? j->x + (size_t)off[1] * j->es : j->y + (size_t)off[2] * j->es;
        core_elem_copy(j->out + pos * j->es, src, j->es);
        for (int d = r - 1; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < 3; k++) off[k] += j->st[k][d];
            if (idx[d] < j->dims[d]) break;
            for (int k = 0; k < 3; k++) off[k] -= j->dims[d] * j->st[k][d];
            idx[d] = 0;
        }
    }
}

static anvil_status logic_infer_where(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                      int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    if (in[0].dtype != ANVIL_DTYPE_BOOL)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 (condition) has dtype %s but must be BOOL (compare, or "
                        "Cast to BOOL)",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    if (!core_dtype_supported(in[1].dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: input 1 (X) has dtype %s, which anvil cannot hold (supported: "
                        "BOOL, "
                        "INT8..INT64, UINT8..UINT64, FLOAT16, BFLOAT16, FLOAT, DOUBLE)",
                        ir_node_label(n), anvil_dtype_name(in[1].dtype));
    if (in[2].dtype != in[1].dtype)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 2 (Y) has dtype %s but input 1 (X) has %s; they must match "
                        "(insert a Cast)",
                        ir_node_label(n), anvil_dtype_name(in[2].dtype),
                        anvil_dtype_name(in[1].dtype));
    ir_shape s;
    CORE_TRY(op_broadcast_shape(n, &in[0].shape, &in[1].shape, &s));
    CORE_TRY(op_broadcast_shape(n, &s, &in[2].shape, &out[0].shape));
    out[0].dtype = in[1].dtype;
    out[0].value = NULL;
    return ANVIL_OK;
}

static anvil_status logic_run_where(const ir_node *n, const op_tensor *const *in, int n_in,
                                    op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    op_tensor *y = out[0];
    if (in[0]->dtype != ANVIL_DTYPE_BOOL || in[1]->dtype != y->dtype || in[2]->dtype != y->dtype)
        return core_err(ANVIL_ERR_INTERNAL, "%s: operand dtypes do not match the output's",
                        ir_node_label(n));
    logic_where_job job;
    memset(&job, 0, sizeof job);
    for (int k = 0; k < 3; k++) CORE_TRY(op_elt_bcast_strides(n, k, in[k], y, job.st[k]));
    size_t cnt = op_tensor_numel(y);
    if (cnt == 0) return ANVIL_OK;
    job.rank = y->rank;
    for (int d = 0; d < y->rank; d++) job.dims[d] = y->dims[d];
    job.c = in[0]->data;
    job.x = in[1]->data;
    job.y = in[2]->data;
    job.out = y->data;
    job.es = anvil_dtype_size(y->dtype);
    op_parallel_for(op_elt_par_ctx(ctx, cnt), cnt, logic_where_chunk, &job);
    return ANVIL_OK;
}

ELT_IMPL(where, 3, 3, 0, logic_check_none, logic_infer_where, logic_run_where)

/* ---- CastLike ------------------------------------------------------------------------------
 *
 * Cast to the dtype of input 1 (whose contents are not read). The conversion is Cast's own: Cast's
 * kernel takes source and target dtypes from the tensors it is handed, so it is called directly.
 * saturate (opset 19) and round_mode (opset 25) only concern float8/float4 targets, which anvil
 * does not hold; they are validated and otherwise have no effect. */

static anvil_status logic_check_castlike(ir_graph *g, ir_node *n) {
    (void)g;
    CORE_TRY(op_elt_require_opset(n, 15));
    bool saturate;
    CORE_TRY(ir_attr_flag(n, "saturate", true, &saturate));
    const char *mode;
    CORE_TRY(ir_attr_string(n, "round_mode", "up", &mode));
    if (strcmp(mode, "up") != 0 && strcmp(mode, "down") != 0 && strcmp(mode, "nearest") != 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'round_mode' is \"%.64s\" but must be "
                        "\"up\", \"down\" or "
                        "\"nearest\"",
                        ir_node_label(n), mode);
    return ANVIL_OK;
}

static anvil_status logic_infer_castlike(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                         int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    for (int i = 0; i < 2; i++)
        if (!core_dtype_supported(in[i].dtype))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: input %d has dtype %s, which anvil's CastLike does not support "
                            "(supported: BOOL, INT8..INT64, UINT8..UINT64, FLOAT16, BFLOAT16, "
                            "FLOAT, DOUBLE)",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype));
    out[0].dtype = in[1].dtype;
    out[0].shape = in[0].shape;
    out[0].value = NULL;
    return ANVIL_OK;
}

static anvil_status logic_run_castlike(const ir_node *n, const op_tensor *const *in, int n_in,
                                       op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    if (!op_has_input(n, 1) || !in[1] || out[0]->dtype != in[1]->dtype)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output dtype does not match input 1",
                        ir_node_label(n));
    return op_get(IR_OP_CAST)->run(n, in, 1, out, n_out, ctx);
}

ELT_BINARY_IMPL(castlike, 0, logic_check_castlike, logic_infer_castlike, logic_run_castlike)
