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

ELT_FLOAT_UNARY(sin, SIN_E)
ELT_FLOAT_UNARY(cos, COS_E)
ELT_FLOAT_UNARY(tan, TAN_E)
ELT_FLOAT_UNARY(asin, ASIN_E)
ELT_FLOAT_UNARY(acos, ACOS_E)
ELT_FLOAT_UNARY(atan, ATAN_E)
ELT_FLOAT_UNARY(sinh, SINH_E)
ELT_FLOAT_UNARY(cosh, COSH_E)
ELT_FLOAT_UNARY(tanh, TANH_E)
ELT_FLOAT_UNARY(asinh, ASINH_E)
ELT_FLOAT_UNARY(acosh, ACOSH_E)
ELT_FLOAT_UNARY(atanh, ATANH_E)
ELT_FLOAT_UNARY(erf, ERF_E)
ELT_FLOAT_UNARY(ceil, CEIL_E)
ELT_FLOAT_UNARY(floor, FLOOR_E)
ELT_FLOAT_UNARY(round, ROUND_E)
ELT_FLOAT_UNARY(reciprocal, RECIP_E)
ELT_NUMERIC_UNARY(sign, SIGN_F, SIGN_S, SIGN_U)

static op_elt_unary math_unary_of(ir_op op) {
    const uint32_t f = ELT_MASK_FLOAT;
    switch (op) {
    case IR_OP_SIN:
        return (op_elt_unary){sin_rows, f, 7};
    case IR_OP_COS:
        return (op_elt_unary){cos_rows, f, 7};
    case IR_OP_TAN:
        return (op_elt_unary){tan_rows, f, 7};
    case IR_OP_ASIN:
        return (op_elt_unary){asin_rows, f, 7};
    case IR_OP_ACOS:
        return (op_elt_unary){acos_rows, f, 7};
    case IR_OP_ATAN:
        return (op_elt_unary){atan_rows, f, 7};
    case IR_OP_SINH:
        return (op_elt_unary){sinh_rows, f, 9};
    case IR_OP_COSH:
        return (op_elt_unary){cosh_rows, f, 9};
    case IR_OP_TANH:
        return (op_elt_unary){tanh_rows, f, 1};
    case IR_OP_ASINH:
        return (op_elt_unary){asinh_rows, f, 9};
    case IR_OP_ACOSH:
        return (op_elt_unary){acosh_rows, f, 9};
    case IR_OP_ATANH:
        return (op_elt_unary){atanh_rows, f, 9};
    case IR_OP_ERF:
        return (op_elt_unary){erf_rows, f, 9};
    case IR_OP_CEIL:
        return (op_elt_unary){ceil_rows, f, 1};
    case IR_OP_FLOOR:
        return (op_elt_unary){floor_rows, f, 1};
    case IR_OP_ROUND:
        return (op_elt_unary){round_rows, f, 11};
    case IR_OP_RECIPROCAL:
        return (op_elt_unary){reciprocal_rows, f, 1};
    case IR_OP_SIGN:
        return (op_elt_unary){sign_rows, ELT_MASK_NUMERIC, 9};
    default:
        return (op_elt_unary){NULL, 0, 0};
    }
}

static anvil_status math_check_unary(ir_graph *g, ir_node *n) {
    (void)g;
    op_elt_unary u = math_unary_of(n->op);
    if (!u.rows) return core_err(ANVIL_ERR_INTERNAL, "%s: not a unary math op", ir_node_label(n));
    return op_elt_require_opset(n, u.since);
}

ELT_DEF_UNARY_FNS(math_unary, math_unary_of)

#define MATH_UNARY_IMPL(op) ELT_UNARY_IMPL(op, math_check_unary, math_unary_infer, math_unary_run)

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
ELT_FLOAT_TYPES(ELT_DEF_ROW2_SAME, mod, MOD_FMOD_F)
ELT_SINT_TYPES(ELT_DEF_ROW2_I64, modt, MOD_TRUNC_S)
ELT_SINT_TYPES(ELT_DEF_ROW2_I64, modf, MOD_FLOOR_S)
ELT_UINT_TYPES(ELT_DEF_ROW2_U64, mod, MOD_U)

/* fmod = 1 (unsigned and float kernels serve both modes: the two agree there) */
static const op_elt_row2 mod_trunc_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, mod, _) ELT_SINT_TYPES(ELT_ROW_ENTRY, modt, _)
        ELT_UINT_TYPES(ELT_ROW_ENTRY, mod, _)};
/* fmod = 0 */
static const op_elt_row2 mod_floor_rows[ELT_DTYPE_SLOTS] = {
    ELT_SINT_TYPES(ELT_ROW_ENTRY, modf, _) ELT_UINT_TYPES(ELT_ROW_ENTRY, mod, _)};

static anvil_status math_check_mod(ir_graph *g, ir_node *n) {
    CORE_TRY(op_elt_require_opset(n, 10));
    OP_PARAMS_NEW(g, math_mod_params, p);
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
    op_elt_row2 fn = op_elt_row2_for(p->fmod ? mod_trunc_rows : mod_floor_rows, dt);
    if (b->dtype != dt) fn = NULL;
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

ELT_BINARY_IMPL(mod, OP_INPLACE_0, math_check_mod, math_infer_mod, math_run_mod)

/* ---- Sum, Mean -----------------------------------------------------------------------------
 *
 * Variadic over float tensors. Opset 6 and 7 (schema version 6) require all inputs to have the same
 * shape; from opset 8 they broadcast numpy-style. The inputs are added pairwise into the output
 * (out = x0 + x1, then out += xk), which is the order ONNX Runtime adds them in; Mean then divides
 * by the input count. */

#define SUM_ADD(C, u, v) ((u) + (v))
ELT_FLOAT_TYPES(ELT_DEF_ROW2_SAME, sum, SUM_ADD)
ELT_ROW2_TABLE(sum, ELT_FLOAT_TYPES)

/* p->alpha is the input count. */
#define MEAN_DIV(C, v, p) ((v) / (C)(p)->alpha)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, meandiv, MEAN_DIV)
ELT_ROW1_TABLE(meandiv, ELT_FLOAT_TYPES)

static anvil_status math_infer_sum(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)n_out;
    return op_elt_variadic_infer(g, n, in, n_in, out, ELT_MASK_FLOAT, n->opset < 8);
}

static anvil_status math_run_sum(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    anvil_dtype dt = in[0]->dtype;
    op_tensor *y = out[0];
    size_t cnt = op_tensor_numel(y);
    if (n_in > 1) {
        CORE_TRY(op_elt_variadic_run(n, in, n_in, y, op_elt_row2_for(sum_rows, dt), ctx));
    } else if (cnt > 0) {
        /* one input: a copy (the fold would add it to itself) */
        if (!op_elt_row2_for(sum_rows, dt) || y->dtype != dt || op_tensor_numel(in[0]) != cnt)
            return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer does not match the input",
                            ir_node_label(n));
        if (y->data != in[0]->data) memcpy(y->data, in[0]->data, cnt * anvil_dtype_size(dt));
    }
    if (n->op != IR_OP_MEAN || n_in == 1) return ANVIL_OK;
    op_elt_param p;
    memset(&p, 0, sizeof p);
    p.alpha = n_in;
    return op_elt_unary_run(n, y, y, meandiv_rows[dt], &p, ctx);
}

ELT_VARIADIC_IMPL(sum, op_elt_check_all_inputs, math_infer_sum, math_run_sum)
ELT_VARIADIC_IMPL(mean, op_elt_check_all_inputs, math_infer_sum, math_run_sum)
