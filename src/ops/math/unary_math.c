/* Elementwise math: the trigonometric and hyperbolic functions (Sin, Cos, Tan, Asin, Acos, Atan,
 * Sinh, Cosh, Tanh, Asinh, Acosh, Atanh), Erf, Ceil, Floor, Round, Sign, Reciprocal (unary); Mod
 * (binary, numpy broadcasting); Sum and Mean (variadic, numpy broadcasting from opset 8).
 *
 * Everything runs on the drivers of eltwise_common.h: a unary op is one expression per dtype, a
 * binary op one row function per dtype. f16 and bf16 compute in float, as ONNX Runtime does. The
 * libm functions are used as they are; faster vectorised variants belong in kernels/. */
#include "ops/eltwise_common.h"

#include <math.h>
#include <string.h>

/* ---- unary ops ----------------------------------------------------------------------------- */

#define SIN_E(C, v, p) ELT_MATH(sin, (v))
#define COS_E(C, v, p) ELT_MATH(cos, (v))
#define TAN_E(C, v, p) ELT_MATH(tan, (v))
#define ASIN_E(C, v, p) ELT_MATH(asin, (v))
#define ACOS_E(C, v, p) ELT_MATH(acos, (v))
#define ATAN_E(C, v, p) ELT_MATH(atan, (v))
#define SINH_E(C, v, p) ELT_MATH(sinh, (v))
#define COSH_E(C, v, p) ELT_MATH(cosh, (v))
#define TANH_E(C, v, p) ELT_MATH(tanh, (v))
#define ASINH_E(C, v, p) ELT_MATH(asinh, (v))
#define ACOSH_E(C, v, p) ELT_MATH(acosh, (v))
#define ATANH_E(C, v, p) ELT_MATH(atanh, (v))
#define ERF_E(C, v, p) ELT_MATH(erf, (v))
#define CEIL_E(C, v, p) ELT_MATH(ceil, (v))
#define FLOOR_E(C, v, p) ELT_MATH(floor, (v))
/* Round is half-to-even; nearbyint rounds in the current mode, which anvil never changes from the
 * default round-to-nearest-even (and, unlike rint, it raises no inexact flag). */
#define ROUND_E(C, v, p) ELT_MATH(nearbyint, (v))
#define RECIP_E(C, v, p) ((C)1 / (v))
/* NaN fails both comparisons and passes through; zero keeps its sign. */
#define SIGN_F(C, v, p) ((v) > 0 ? (C)1 : ((v) < 0 ? (C)-1 : (v)))
#define SIGN_S(C, v, p) ((C)((v) > 0 ? 1 : ((v) < 0 ? -1 : 0)))
#define SIGN_U(C, v, p) ((C)((v) != 0))

ELT_FLOAT_TYPES(ELT_DEF_ROW1, sin, SIN_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, cos, COS_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, tan, TAN_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, asin, ASIN_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, acos, ACOS_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, atan, ATAN_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, sinh, SINH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, cosh, COSH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, tanh, TANH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, asinh, ASINH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, acosh, ACOSH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, atanh, ATANH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, erf, ERF_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, ceil, CEIL_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, floor, FLOOR_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, round, ROUND_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, reciprocal, RECIP_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, sign, SIGN_F)
ELT_SINT_TYPES(ELT_DEF_ROW1, sign, SIGN_S)
ELT_UINT_TYPES(ELT_DEF_ROW1, sign, SIGN_U)

#define MATH_FLOAT_TABLE(op)                                                                       \
    static const op_elt_row1 op##_rows[ELT_DTYPE_SLOTS] = {ELT_FLOAT_TYPES(ELT_ROW_ENTRY, op, _)};
MATH_FLOAT_TABLE(sin)
MATH_FLOAT_TABLE(cos)
MATH_FLOAT_TABLE(tan)
MATH_FLOAT_TABLE(asin)
MATH_FLOAT_TABLE(acos)
MATH_FLOAT_TABLE(atan)
MATH_FLOAT_TABLE(sinh)
MATH_FLOAT_TABLE(cosh)
MATH_FLOAT_TABLE(tanh)
MATH_FLOAT_TABLE(asinh)
MATH_FLOAT_TABLE(acosh)
MATH_FLOAT_TABLE(atanh)
MATH_FLOAT_TABLE(erf)
MATH_FLOAT_TABLE(ceil)
MATH_FLOAT_TABLE(floor)
MATH_FLOAT_TABLE(round)
MATH_FLOAT_TABLE(reciprocal)
static const op_elt_row1 sign_rows[ELT_DTYPE_SLOTS] = {ELT_NUMERIC_TYPES(ELT_ROW_ENTRY, sign, _)};

/* One unary op: its kernels, the dtypes it accepts and the first opset that has it. */
typedef struct math_unary {
    const op_elt_row1 *rows;
    uint32_t mask;
    int since;
} math_unary;

static math_unary math_unary_of(ir_op op) {
    const uint32_t f = ELT_MASK_FLOAT;
    switch (op) {
    case IR_OP_SIN:
        return (math_unary){sin_rows, f, 7};
    case IR_OP_COS:
        return (math_unary){cos_rows, f, 7};
    case IR_OP_TAN:
        return (math_unary){tan_rows, f, 7};
    case IR_OP_ASIN:
        return (math_unary){asin_rows, f, 7};
    case IR_OP_ACOS:
        return (math_unary){acos_rows, f, 7};
    case IR_OP_ATAN:
        return (math_unary){atan_rows, f, 7};
    case IR_OP_SINH:
        return (math_unary){sinh_rows, f, 9};
    case IR_OP_COSH:
        return (math_unary){cosh_rows, f, 9};
    case IR_OP_TANH:
        return (math_unary){tanh_rows, f, 1};
    case IR_OP_ASINH:
        return (math_unary){asinh_rows, f, 9};
    case IR_OP_ACOSH:
        return (math_unary){acosh_rows, f, 9};
    case IR_OP_ATANH:
        return (math_unary){atanh_rows, f, 9};
    case IR_OP_ERF:
        return (math_unary){erf_rows, f, 9};
    case IR_OP_CEIL:
        return (math_unary){ceil_rows, f, 1};
    case IR_OP_FLOOR:
        return (math_unary){floor_rows, f, 1};
    case IR_OP_ROUND:
        return (math_unary){round_rows, f, 11};
    case IR_OP_RECIPROCAL:
        return (math_unary){reciprocal_rows, f, 1};
    case IR_OP_SIGN:
        return (math_unary){sign_rows, ELT_MASK_NUMERIC, 9};
    default:
        return (math_unary){NULL, 0, 0};
    }
}

static anvil_status math_check_unary(ir_graph *g, ir_node *n) {
    (void)g;
    math_unary u = math_unary_of(n->op);
    if (!u.rows) return core_err(ANVIL_ERR_INTERNAL, "%s: not a unary math op", ir_node_label(n));
    return op_elt_require_opset(n, u.since);
}

static anvil_status math_infer_unary(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                     int n_in, op_tinfo *out, int n_out) {
    (void)g;
    return op_elt_unary_infer(n, in, n_in, out, n_out, math_unary_of(n->op).mask);
}

static anvil_status math_run_unary(const ir_node *n, const op_tensor *const *in, int n_in,
                                   op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    math_unary u = math_unary_of(n->op);
    op_elt_row1 fn =
        u.rows && (unsigned)in[0]->dtype < ELT_DTYPE_SLOTS ? u.rows[in[0]->dtype] : NULL;
    return op_elt_unary_run(n, in[0], out[0], fn, NULL, ctx);
}

#define MATH_UNARY_IMPL(op)                                                                        \
    const op_impl op_impl_##op = {.min_inputs = 1,                                                 \
                                  .max_inputs = 1,                                                 \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .flags = OP_INPLACE_0,                                           \
                                  .check = math_check_unary,                                       \
                                  .infer = math_infer_unary,                                       \
                                  .run = math_run_unary};

MATH_UNARY_IMPL(sin)
MATH_UNARY_IMPL(cos)
MATH_UNARY_IMPL(tan)
MATH_UNARY_IMPL(asin)
MATH_UNARY_IMPL(acos)
MATH_UNARY_IMPL(atan)
MATH_UNARY_IMPL(sinh)
MATH_UNARY_IMPL(cosh)
MATH_UNARY_IMPL(tanh)
MATH_UNARY_IMPL(asinh)
MATH_UNARY_IMPL(acosh)
MATH_UNARY_IMPL(atanh)
MATH_UNARY_IMPL(erf)
MATH_UNARY_IMPL(ceil)
MATH_UNARY_IMPL(floor)
MATH_UNARY_IMPL(round)
MATH_UNARY_IMPL(reciprocal)
MATH_UNARY_IMPL(sign)

/* ---- Mod -----------------------------------------------------------------------------------
 *
 * fmod = 1 is C's fmod: the remainder takes the dividend's sign (truncated division). fmod = 0 is
 * Python's %: the remainder takes the divisor's sign (floored division); the spec allows it for
 * integers only. Integer zero divisors have no result (and trap on x86), so the divisor is scanned
 * before any work; x % -1 (which traps for the type's minimum) is 0 in both modes. */

typedef struct math_mod_params {
    bool fmod;
} math_mod_params;

static inline int64_t math_mod_trunc_s(int64_t u, int64_t v) {
    return v == -1 ? 0 : u % v;
}
static inline int64_t math_mod_floor_s(int64_t u, int64_t v) {
    int64_t r = math_mod_trunc_s(u, v);
    return (r != 0 && ((r < 0) != (v < 0))) ? r + v : r;
}

#define MOD_FMOD_F(C, u, v) ELT_MATH2(fmod, (u), (v))
#define MOD_TRUNC_S(C, u, v) math_mod_trunc_s((u), (v))
#define MOD_FLOOR_S(C, u, v) math_mod_floor_s((u), (v))
#define MOD_U(C, u, v) ((u) % (v))

/* Floats compute in float/double; signed integers in int64_t; unsigned in uint64_t. */
#define MOD_DEF_F(op, EXPR, tag, DT, T, C, LD, ST)                                                 \
    ELT_DEF_ROW2_TO(mod_row_##tag, EXPR, T, C, LD, T, ST)
#define MOD_DEF_S(op, EXPR, tag, DT, T, C, LD, ST)                                                 \
    ELT_DEF_ROW2_TO(op##_row_##tag, EXPR, T, int64_t, ELT_ID, T, (T))
#define MOD_DEF_U(op, EXPR, tag, DT, T, C, LD, ST)                                                 \
    ELT_DEF_ROW2_TO(mod_row_##tag, EXPR, T, uint64_t, ELT_ID, T, (T))

ELT_FLOAT_TYPES(MOD_DEF_F, mod, MOD_FMOD_F)
ELT_SINT_TYPES(MOD_DEF_S, modt, MOD_TRUNC_S)
ELT_SINT_TYPES(MOD_DEF_S, modf, MOD_FLOOR_S)
ELT_UINT_TYPES(MOD_DEF_U, mod, MOD_U)

#define MOD_ENTRY(op, EXPR, tag, DT, T, C, LD, ST) [ANVIL_DTYPE_##DT] = op##_row_##tag,
/* fmod = 1 (unsigned and float kernels serve both modes: the two agree there) */
static const op_elt_row2 mod_trunc_rows[ELT_DTYPE_SLOTS] = {ELT_FLOAT_TYPES(
    MOD_ENTRY, mod, _) ELT_SINT_TYPES(MOD_ENTRY, modt, _) ELT_UINT_TYPES(MOD_ENTRY, mod, _)};
/* fmod = 0 */
static const op_elt_row2 mod_floor_rows[ELT_DTYPE_SLOTS] = {ELT_SINT_TYPES(MOD_ENTRY, modf, _)
                                                                ELT_UINT_TYPES(MOD_ENTRY, mod, _)};

static anvil_status math_check_mod(ir_graph *g, ir_node *n) {
    CORE_TRY(op_elt_require_opset(n, 10));
    math_mod_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    CORE_TRY(ir_attr_flag(n, "fmod", false, &p->fmod));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status math_infer_mod(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g;
    const math_mod_params *p = n->params;
    if (!p->fmod && core_dtype_is_float(in[0].dtype))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input 0 is %s, but Mod with fmod=0 (Python's %%) is defined for "
                        "integers only; set fmod=1 for floating-point inputs",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    return op_elt_binary_infer(n, in, n_in, out, n_out, ELT_MASK_NUMERIC, ANVIL_DTYPE_UNDEFINED);
}

static anvil_status math_run_mod(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    const math_mod_params *p = n->params;
    const op_tensor *a = in[0], *b = in[1];
    anvil_dtype dt = a->dtype;
    const op_elt_row2 *rows = p->fmod ? mod_trunc_rows : mod_floor_rows;
    op_elt_row2 fn = (unsigned)dt < ELT_DTYPE_SLOTS && b->dtype == dt ? rows[dt] : NULL;
    if (!fn)
        return core_err(ANVIL_ERR_INTERNAL, "%s: no kernel for dtypes %s and %s", ir_node_label(n),
                        anvil_dtype_name(dt), anvil_dtype_name(b->dtype));
    if (core_dtype_is_int(dt) && op_tensor_numel(out[0]) > 0) {
        size_t cnt = op_tensor_numel(b);
        for (size_t i = 0; i < cnt; i++)
            if (core_load_i64(dt, b->data, i) == 0)
                return core_err(ANVIL_ERR_RUNTIME,
                                "%s: integer modulo by zero: input 1 (the divisor, %s) is 0 at "
                                "flat index %zu of %zu; integer Mod needs nonzero divisors "
                                "(guard the divisor, or compute in floating point with fmod=1)",
                                ir_node_label(n), anvil_dtype_name(dt), i, cnt);
    }
    return op_elt_binary_run(n, a, b, out[0], fn, ctx);
}

const op_impl op_impl_mod = {.min_inputs = 2,
                             .max_inputs = 2,
                             .min_outputs = 1,
                             .max_outputs = 1,
                             .flags = OP_INPLACE_0,
                             .check = math_check_mod,
                             .infer = math_infer_mod,
                             .run = math_run_mod};

/* ---- Sum, Mean -----------------------------------------------------------------------------
 *
 * Variadic over float tensors. Opset 6 and 7 (schema version 6) require all inputs to have the same
 * shape; from opset 8 they broadcast numpy-style. The inputs are added pairwise into the output
 * (out = x0 + x1, then out += xk), which is the order ONNX Runtime adds them in; Mean then divides
 * by the input count. */

#define SUM_ADD(C, u, v) ((u) + (v))
#define SUM_DEF(op, EXPR, tag, DT, T, C, LD, ST)                                                   \
    ELT_DEF_ROW2_TO(sum_row_##tag, EXPR, T, C, LD, T, ST)
ELT_FLOAT_TYPES(SUM_DEF, sum, SUM_ADD)
static const op_elt_row2 sum_rows[ELT_DTYPE_SLOTS] = {ELT_FLOAT_TYPES(MOD_ENTRY, sum, _)};

/* p->alpha is the input count. */
#define MEAN_DIV(C, v, p) ((v) / (C)(p)->alpha)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, meandiv, MEAN_DIV)
static const op_elt_row1 meandiv_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, meandiv, _)};

static anvil_status math_check_sum(ir_graph *g, ir_node *n) {
    (void)g;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] == IR_NONE)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: input %d is omitted, but every input of %s is required",
                            ir_node_label(n), i, ir_op_name(n->op));
    return ANVIL_OK;
}

static anvil_status math_infer_sum(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)n_out;
    CORE_TRY(op_elt_require(n, 0, in[0].dtype, ELT_MASK_FLOAT));
    ir_shape s = in[0].shape;
    for (int i = 1; i < n_in; i++) {
        if (in[i].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d has dtype %s but input 0 has %s; all inputs must have "
                            "the same dtype (insert a Cast)",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(in[0].dtype));
        if (n->opset < 8 && in[i].shape.rank >= 0 && s.rank >= 0) {
            bool same = in[i].shape.rank == s.rank;
            for (int d = 0; same && d < s.rank; d++)
                if (s.d[d] >= 0 && in[i].shape.d[d] >= 0 && s.d[d] != in[i].shape.d[d])
                    same = false;
            if (!same) {
                char b0[128], b1[128];
                return core_err(ANVIL_ERR_SHAPE,
                                "%s: input %d has shape %s but input 0 has %s; before opset 8 "
                                "%s does not broadcast and all shapes must be equal (use "
                                "opset >= 8)",
                                ir_node_label(n), i, ir_shape_str(g, &in[i].shape, b1, sizeof b1),
                                ir_shape_str(g, &s, b0, sizeof b0), ir_op_name(n->op));
            }
        }
        CORE_TRY(op_broadcast_shape(n, &s, &in[i].shape, &s));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = s;
    out[0].value = NULL;
    return ANVIL_OK;
}

static anvil_status math_run_sum(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    anvil_dtype dt = in[0]->dtype;
    op_elt_row2 fn = (unsigned)dt < ELT_DTYPE_SLOTS ? sum_rows[dt] : NULL;
    for (int i = 0; i < n_in; i++)
        if (!fn || !in[i] || in[i]->dtype != dt)
            return core_err(ANVIL_ERR_INTERNAL, "%s: input %d missing or of the wrong dtype",
                            ir_node_label(n), i);
    op_tensor *y = out[0];
    size_t cnt = op_tensor_numel(y);
    if (cnt == 0) return ANVIL_OK;
    if (n_in == 1) {
        if (y->dtype != dt || op_tensor_numel(in[0]) != cnt)
            return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer does not match the input",
                            ir_node_label(n));
        if (y->data != in[0]->data) memcpy(y->data, in[0]->data, cnt * anvil_dtype_size(dt));
    } else {
        CORE_TRY(op_elt_binary_run(n, in[0], in[1], y, fn, ctx));
        for (int i = 2; i < n_in; i++) CORE_TRY(op_elt_binary_run(n, y, in[i], y, fn, ctx));
    }
    if (n->op != IR_OP_MEAN || n_in == 1) return ANVIL_OK;
    op_elt_param p;
    memset(&p, 0, sizeof p);
    p.alpha = n_in;
    return op_elt_unary_run(n, y, y, meandiv_rows[dt], &p, ctx);
}

#define MATH_SUM_IMPL(op)                                                                          \
    const op_impl op_impl_##op = {.min_inputs = 1,                                                 \
                                  .max_inputs = 127,                                               \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .flags = OP_INPLACE_0,                                           \
                                  .check = math_check_sum,                                         \
                                  .infer = math_infer_sum,                                         \
                                  .run = math_run_sum};

MATH_SUM_IMPL(sum)
MATH_SUM_IMPL(mean)
