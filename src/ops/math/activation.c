/* Activations: Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Clip; then PRelu, Elu, Selu,
 * Celu, Softplus, Softsign, Mish, Gelu, Swish, Shrink and ThresholdedRelu. All but PRelu are unary
 * and elementwise, so they reuse the unary driver and dtype lists of eltwise_common.h; each op is
 * one expression. NaN inputs give NaN outputs throughout (numpy's np.maximum/np.clip semantics,
 * which the ONNX reference implementation and ONNX Runtime share): the comparisons below are
 * written so that a NaN fails them and passes through unchanged. */
#include "ops/eltwise_common.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- expressions ---------------------------------------------------------------------------- */

static inline float act_clamp01_f(float v) {
    return v < 0 ? 0.0f : (v > 1 ? 1.0f : v);
}
static inline double act_clamp01_d(double v) {
    return v < 0 ? 0.0 : (v > 1 ? 1.0 : v);
}

#define ACT_CLAMP01(v) _Generic((v), double : act_clamp01_d, default : act_clamp01_f)(v)

#define RELU_E(C, v, p) ((v) < 0 ? (C)0 : (v))
#define LEAKY_E(C, v, p) ((v) < 0 ? (C)((C)(p)->alpha * (v)) : (v))
#define SIGMOID_E(C, v, p) OP_ELT_SIGMOID(v)
#define HARDSIGMOID_E(C, v, p) ACT_CLAMP01((C)(p)->alpha *(v) + (C)(p)->beta)
/* HardSwish is x * HardSigmoid(x) with alpha = 1/6, beta = 0.5 (the ONNX definition). */
#define HARDSWISH_E(C, v, p) ((v)*ACT_CLAMP01((C)(1.0 / 6.0) * (v) + (C)0.5))

ELT_SIGNED_UNARY(relu, RELU_E, RELU_E)
ELT_FLOAT_UNARY(leakyrelu, LEAKY_E)
ELT_FLOAT_UNARY(sigmoid, SIGMOID_E)
ELT_FLOAT_UNARY(hardsigmoid, HARDSIGMOID_E)
ELT_FLOAT_UNARY(hardswish, HARDSWISH_E)

/* Clip: bounds arrive as raw elements of the tensor's dtype; an absent bound is no bound. */
#define ACT_DEF_CLIP(op, EXPR, tag, DT, T, C, LD, ST)                                              \
    static void clip_row_##tag(void *out, const void *in, size_t n, const void *param) {           \
        const op_elt_param *p = param;                                                             \
        T *o = out;                                                                                \
        const T *x = in;                                                                           \
        T lo_raw, hi_raw;                                                                          \
        memcpy(&lo_raw, p->lo, sizeof lo_raw);                                                     \
        memcpy(&hi_raw, p->hi, sizeof hi_raw);                                                     \
        C lo = (C)LD(lo_raw), hi = (C)LD(hi_raw);                                                  \
        bool has_lo = p->has_lo, has_hi = p->has_hi;                                               \
        for (size_t i = 0; i < n; i++) {                                                           \
            C v = (C)LD(x[i]);                                                                     \
            if (has_lo && v < lo) v = lo;                                                          \
            if (has_hi && v > hi) v = hi;                                                          \
            o[i] = ST(v);                                                                          \
        }                                                                                          \
    }

ELT_NUMERIC_TYPES(ACT_DEF_CLIP, clip, _)
ELT_ROW1_TABLE(clip, ELT_NUMERIC_TYPES)

/* ---- LeakyRelu and HardSigmoid attributes ------------------------------------------------- */

/* LeakyRelu (alpha only) and HardSigmoid (alpha and beta) keep their attributes in an
 * op_elt_param, which is what the row functions read. */
static anvil_status act_check_alpha_beta(ir_graph *g, ir_node *n) {
    bool hardsigmoid = n->op == IR_OP_HARDSIGMOID;
    OP_PARAMS_NEW(g, op_elt_param, p);
    float alpha, beta = hardsigmoid ? 0.5f : 0.0f;
    CORE_TRY(ir_attr_float(n, "alpha", hardsigmoid ? 0.2f : 0.01f, &alpha));
    if (hardsigmoid) CORE_TRY(ir_attr_float(n, "beta", 0.5f, &beta));
    if (!isfinite(alpha) || !isfinite(beta))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attributes alpha (%g) and beta (%g) must be finite numbers",
                        ir_node_label(n), (double)alpha, (double)beta);
    p->alpha = alpha;
    p->beta = beta;
    n->params = p;
    return ANVIL_OK;
}

/* ---- Clip ------------------------------------------------------------------------------------
 *
 * Before opset 11 the bounds are float attributes `min` and `max` (defaulting to the lowest and
 * highest finite float, as the spec says) and only float tensors are allowed. From opset 11 they
 * are optional scalar inputs of the tensor's dtype, read at run time; integer tensors arrive in
 * opset 12. The lower bound is applied first, so min > max gives max everywhere (as numpy and
 * ONNX Runtime do). */

typedef struct act_clip_attrs {
    float lo, hi;
} act_clip_attrs;

static anvil_status act_check_clip(ir_graph *g, ir_node *n) {
    if (n->opset >= 11) return ANVIL_OK;
    if (op_has_input(n, 1) || op_has_input(n, 2))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: opset %d takes min/max as attributes, but the node has %d inputs; "
                        "import the model with opset >= 11 to pass them as inputs",
                        ir_node_label(n), n->opset, n->n_inputs);
    OP_PARAMS_NEW(g, act_clip_attrs, p);
    CORE_TRY(ir_attr_float(n, "min", -FLT_MAX, &p->lo));
    CORE_TRY(ir_attr_float(n, "max", FLT_MAX, &p->hi));
    if (isnan(p->lo) || isnan(p->hi))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attributes min and max must not be NaN",
                        ir_node_label(n));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status act_infer_clip(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g;
    CORE_TRY(op_elt_unary_infer(n, in, n_in, out, n_out,
                                n->opset < 11 ? ELT_MASK_FLOAT : ELT_MASK_NUMERIC));
    for (int i = 1; i < n_in && i < 3; i++) {
        if (!op_has_input(n, i)) continue;
        const char *what = i == 1 ? "min" : "max";
        if (in[i].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (%s) has dtype %s but the data is %s; they must match",
                            ir_node_label(n), i, what, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(in[0].dtype));
        size_t cnt;
        if (ir_shape_numel(&in[i].shape, &cnt) && cnt != 1) {
            char buf[128];
            return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) must be a scalar but has shape %s",
                            ir_node_label(n), i, what,
                            ir_shape_str(g, &in[i].shape, buf, sizeof buf));
        }
    }
    return ANVIL_OK;
}

static anvil_status act_run_clip(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    anvil_dtype dt = in[0]->dtype;
    op_elt_param p;
    memset(&p, 0, sizeof p);
    if (n->opset < 11) {
        const act_clip_attrs *a = n->params;
        core_store_f64(dt, p.lo, 0, a->lo);
        core_store_f64(dt, p.hi, 0, a->hi);
        p.has_lo = p.has_hi = true;
    } else {
        for (int i = 1; i < n_in && i < 3; i++) {
            if (!in[i]) continue;
            if (in[i]->dtype != dt || op_tensor_numel(in[i]) != 1)
                return core_err(ANVIL_ERR_RUNTIME,
                                "%s: input %d (%s) must be one %s element but is %s with %zu "
                                "elements",
                                ir_node_label(n), i, i == 1 ? "min" : "max", anvil_dtype_name(dt),
                                anvil_dtype_name(in[i]->dtype), op_tensor_numel(in[i]));
            memcpy(i == 1 ? p.lo : p.hi, in[i]->data, anvil_dtype_size(dt));
            *(i == 1 ? &p.has_lo : &p.has_hi) = true;
        }
    }
    return op_elt_unary_run(n, in[0], out[0], op_elt_row1_for(clip_rows, dt), &p, ctx);
}

ELT_IMPL(clip, 1, 3, OP_INPLACE_0, act_check_clip, act_infer_clip, act_run_clip)

/* ==== PRelu, Elu, Selu, Celu, Softplus, Softsign, Mish, Gelu, Swish, Shrink, ThresholdedRelu ===
 * PRelu is binary (the slope broadcasts to X); the rest are unary and follow the pattern above:
 * attributes parsed once into an op_elt_param, one
 * expression per op, run by the unary driver of eltwise_common.h. Expressions are written so that
 * NaN inputs give NaN outputs (numpy's behaviour, which the ONNX reference shares), and use
 * expm1/log1p where e^x - 1 or log(1 + y) would lose precision near zero. */

/* ---- scalar helpers, one per float type (picked with _Generic) ----------------------------- */

/* Softplus log(1 + e^x) without overflowing e^x for large x. */
static inline float act2_softplus_f(float x) {
    return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
static inline double act2_softplus_d(double x) {
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
#define ACT2_SOFTPLUS(v) _Generic((v), double : act2_softplus_d, default : act2_softplus_f)(v)

/* Celu max(0, x) + min(0, alpha * (e^(x/alpha) - 1)); NaN stays NaN. */
static inline float act2_celu_f(float x, float a) {
    float neg = a * expm1f(x / a);
    return (x > 0 ? x : 0.0f) + (neg < 0 ? neg : (neg >= 0 ? 0.0f : neg));
}
static inline double act2_celu_d(double x, double a) {
    double neg = a * expm1(x / a);
    return (x > 0 ? x : 0.0) + (neg < 0 ? neg : (neg >= 0 ? 0.0 : neg));
}
#define ACT2_CELU(v, a) _Generic((v), double : act2_celu_d, default : act2_celu_f)((v), (a))

/* Gelu: exact with erf, or the tanh approximation. */
static inline float act2_gelu_f(float x, bool tanh_approx) {
    if (tanh_approx) {
        const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
        return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}
static inline double act2_gelu_d(double x, bool tanh_approx) {
    if (tanh_approx) {
        const double k = 0.7978845608028654; /* sqrt(2 / pi) */
        return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}
#define ACT2_GELU(v, t) _Generic((v), double : act2_gelu_d, default : act2_gelu_f)((v), (t))

/* ---- expressions: p->alpha, p->beta and p->has_lo carry each op's attributes --------------- */

#define ELU_E(C, v, p) ((v) < 0 ? (C)(p)->alpha * ELT_MATH(expm1, (v)) : (v))
/* alpha = Selu's alpha, beta = its gamma */
#define SELU_E(C, v, p)                                                                            \
    ((v) > 0 ? (C)(p)->beta * (v) : (C)(p)->beta * ((C)(p)->alpha * ELT_MATH(expm1, (v))))
#define CELU_E(C, v, p) ACT2_CELU((v), (C)(p)->alpha)
#define SOFTPLUS_E(C, v, p) ACT2_SOFTPLUS(v)
#define SOFTSIGN_E(C, v, p) ((v) / ((C)1 + ELT_MATH(fabs, (v))))
#define MISH_E(C, v, p) ((v)*ELT_MATH(tanh, ACT2_SOFTPLUS(v)))
/* has_lo: approximate = "tanh" */
#define GELU_E(C, v, p) ACT2_GELU((v), (p)->has_lo)
#define SWISH_E(C, v, p) ((v)*OP_ELT_SIGMOID((C)(p)->alpha * (v)))
/* alpha = lambd, beta = bias */
#define SHRINK_E(C, v, p)                                                                          \
    ((v) < -(C)(p)->alpha ? (v) + (C)(p)->beta : ((v) > (C)(p)->alpha ? (v) - (C)(p)->beta : (C)0))
#define THRELU_E(C, v, p) ((v) > (C)(p)->alpha ? (v) : ((v) <= (C)(p)->alpha ? (C)0 : (v)))

ELT_FLOAT_UNARY(elu, ELU_E)
ELT_FLOAT_UNARY(selu, SELU_E)
ELT_FLOAT_UNARY(celu, CELU_E)
ELT_FLOAT_UNARY(softplus, SOFTPLUS_E)
ELT_FLOAT_UNARY(softsign, SOFTSIGN_E)
ELT_FLOAT_UNARY(mish, MISH_E)
ELT_FLOAT_UNARY(gelu, GELU_E)
ELT_FLOAT_UNARY(swish, SWISH_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, shrink, SHRINK_E)
ELT_FLOAT_UNARY(thresholdedrelu, THRELU_E)

/* Shrink on integers computes in double (lambd and bias are floats) and converts back with
 * truncation toward zero, the defined float -> integer conversion of eltwise_common.h. */
#define ACT2_SHRINK_INT(op, EXPR, tag, DT, T, C, LD, ST)                                           \
    static inline T shrink_store_##tag(double v) {                                                 \
        return (T)(ST(v));                                                                         \
    }                                                                                              \
    ELT_DEF_ROW1(op, EXPR, tag, DT, T, double, ELT_ID, shrink_store_##tag)
#define ACT2_INT_TYPES_D(X, op, EXPR)                                                              \
    X(op, EXPR, i8, INT8, int8_t, double, ELT_ID, op_elt_f2i64)                                    \
    X(op, EXPR, i16, INT16, int16_t, double, ELT_ID, op_elt_f2i64)                                 \
    X(op, EXPR, i32, INT32, int32_t, double, ELT_ID, op_elt_f2i64)                                 \
    X(op, EXPR, i64, INT64, int64_t, double, ELT_ID, op_elt_f2i64)                                 \
    X(op, EXPR, u8, UINT8, uint8_t, double, ELT_ID, op_elt_f2u64)                                  \
    X(op, EXPR, u16, UINT16, uint16_t, double, ELT_ID, op_elt_f2u64)                               \
    X(op, EXPR, u32, UINT32, uint32_t, double, ELT_ID, op_elt_f2u64)                               \
    X(op, EXPR, u64, UINT64, uint64_t, double, ELT_ID, op_elt_f2u64)
ACT2_INT_TYPES_D(ACT2_SHRINK_INT, shrink, SHRINK_E)

/* Shrink's schema has no bfloat16; anvil accepts it anyway, computed like float16. */
static const op_elt_row1 shrink_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, shrink, _) ACT2_INT_TYPES_D(ELT_ROW_ENTRY, shrink, _)};

/* ---- the unary ops (all but Clip) ---------------------------------------------------------- */

/* The kernels and dtypes of every unary activation but Clip (which has its own run). */
static op_elt_unary act_unary_of(ir_op op) {
    const uint32_t f = ELT_MASK_FLOAT;
    switch (op) {
    case IR_OP_RELU:
        return (op_elt_unary){relu_rows, f | ELT_MASK_SINT, 0};
    case IR_OP_LEAKYRELU:
        return (op_elt_unary){leakyrelu_rows, f, 0};
    case IR_OP_SIGMOID:
        return (op_elt_unary){sigmoid_rows, f, 0};
    case IR_OP_HARDSIGMOID:
        return (op_elt_unary){hardsigmoid_rows, f, 0};
    case IR_OP_HARDSWISH:
        return (op_elt_unary){hardswish_rows, f, 0};
    case IR_OP_ELU:
        return (op_elt_unary){elu_rows, f, 0};
    case IR_OP_SELU:
        return (op_elt_unary){selu_rows, f, 0};
    case IR_OP_CELU:
        return (op_elt_unary){celu_rows, f, 0};
    case IR_OP_SOFTPLUS:
        return (op_elt_unary){softplus_rows, f, 0};
    case IR_OP_SOFTSIGN:
        return (op_elt_unary){softsign_rows, f, 0};
    case IR_OP_MISH:
        return (op_elt_unary){mish_rows, f, 0};
    case IR_OP_GELU:
        return (op_elt_unary){gelu_rows, f, 0};
    case IR_OP_SWISH:
        return (op_elt_unary){swish_rows, f, 0};
    case IR_OP_SHRINK:
        return (op_elt_unary){shrink_rows, ELT_MASK_NUMERIC, 0};
    case IR_OP_THRESHOLDEDRELU:
        return (op_elt_unary){thresholdedrelu_rows, f, 0};
    default:
        return (op_elt_unary){NULL, 0, 0};
    }
}

ELT_DEF_UNARY_FNS(act_unary, act_unary_of)

/* A float attribute that must be finite. */
static anvil_status act2_float(const ir_node *n, const char *name, float dflt, double *out) {
    float v;
    CORE_TRY(ir_attr_float(n, name, dflt, &v));
    if (!isfinite(v))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' is %g but must be a finite number", ir_node_label(n),
                        name, (double)v);
    *out = v;
    return ANVIL_OK;
}

static anvil_status act2_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, op_elt_param, p);
    switch (n->op) {
    case IR_OP_ELU:
        CORE_TRY(act2_float(n, "alpha", 1.0f, &p->alpha));
        break;
    case IR_OP_SELU:
        CORE_TRY(act2_float(n, "alpha", 1.67326319217681884765625f, &p->alpha));
        CORE_TRY(act2_float(n, "gamma", 1.05070102214813232421875f, &p->beta));
        break;
    case IR_OP_CELU:
        CORE_TRY(op_elt_require_opset(n, 12));
        CORE_TRY(act2_float(n, "alpha", 1.0f, &p->alpha));
        if (p->alpha == 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'alpha' is 0, but Celu divides by it; use a nonzero "
                            "alpha (default 1.0)",
                            ir_node_label(n));
        break;
    case IR_OP_MISH:
        CORE_TRY(op_elt_require_opset(n, 18));
        break;
    case IR_OP_GELU: {
        CORE_TRY(op_elt_require_opset(n, 20));
        const char *approx;
        CORE_TRY(ir_attr_string(n, "approximate", "none", &approx));
        if (strcmp(approx, "tanh") == 0)
            p->has_lo = true;
        else if (strcmp(approx, "none") != 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'approximate' is \"%.64s\" but must be \"none\" or "
                            "\"tanh\"",
                            ir_node_label(n), approx);
        break;
    }
    case IR_OP_SWISH:
        CORE_TRY(op_elt_require_opset(n, 24));
        CORE_TRY(act2_float(n, "alpha", 1.0f, &p->alpha));
        break;
    case IR_OP_SHRINK:
        CORE_TRY(op_elt_require_opset(n, 9));
        CORE_TRY(act2_float(n, "lambd", 0.5f, &p->alpha));
        CORE_TRY(act2_float(n, "bias", 0.0f, &p->beta));
        break;
    case IR_OP_THRESHOLDEDRELU:
        CORE_TRY(op_elt_require_opset(n, 10));
        CORE_TRY(act2_float(n, "alpha", 1.0f, &p->alpha));
        break;
    default:
        break;
    }
    n->params = p;
    return ANVIL_OK;
}

/* Every unary activation but Clip runs on the lookup act_unary_of. */
#define ACT_IMPL(op, checkfn) ELT_UNARY_IMPL(op, checkfn, act_unary_infer, act_unary_run)

ACT_IMPL(relu, op_elt_check_none)
ACT_IMPL(sigmoid, op_elt_check_none)
ACT_IMPL(hardswish, op_elt_check_none)
ACT_IMPL(leakyrelu, act_check_alpha_beta)
ACT_IMPL(hardsigmoid, act_check_alpha_beta)
ACT_IMPL(elu, act2_check)
ACT_IMPL(selu, act2_check)
ACT_IMPL(celu, act2_check)
ACT_IMPL(softplus, act2_check)
ACT_IMPL(softsign, act2_check)
ACT_IMPL(mish, act2_check)
ACT_IMPL(gelu, act2_check)
ACT_IMPL(swish, act2_check)
ACT_IMPL(shrink, act2_check)
ACT_IMPL(thresholdedrelu, act2_check)

/* ---- PRelu ---------------------------------------------------------------------------------
 *
 * y = x < 0 ? slope * x : x, where slope broadcasts to X's shape in one direction (opset 7 on): the
 * output always has X's shape. Integer products wrap (computed in uint64_t) instead of overflowing;
 * on unsigned types nothing is negative, so PRelu is the identity there. */

#define PRELU_F(C, u, v) ((u) < 0 ? (v) * (u) : (u))
#define PRELU_S(C, u, v) ((u) < 0 ? (C)((uint64_t)(v) * (uint64_t)(u)) : (u))
#define PRELU_U(C, u, v) ((void)(v), (u))
ELT_FLOAT_TYPES(ELT_DEF_ROW2_SAME, prelu, PRELU_F)
ELT_INT(ELT_DEF_ROW2_SAME, prelu, PRELU_S, i32, INT32, int32_t)
ELT_INT(ELT_DEF_ROW2_SAME, prelu, PRELU_S, i64, INT64, int64_t)
ELT_INT(ELT_DEF_ROW2_SAME, prelu, PRELU_U, u32, UINT32, uint32_t)
ELT_INT(ELT_DEF_ROW2_SAME, prelu, PRELU_U, u64, UINT64, uint64_t)
static const op_elt_row2 prelu_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, prelu, _)[ANVIL_DTYPE_INT32] = prelu_row_i32,
    [ANVIL_DTYPE_INT64] = prelu_row_i64, [ANVIL_DTYPE_UINT32] = prelu_row_u32,
    [ANVIL_DTYPE_UINT64] = prelu_row_u64};
#define ACT2_MASK_PRELU                                                                            \
    (ELT_MASK_FLOAT | (1u << ANVIL_DTYPE_INT32) | (1u << ANVIL_DTYPE_INT64) |                      \
     (1u << ANVIL_DTYPE_UINT32) | (1u << ANVIL_DTYPE_UINT64))

static anvil_status act2_infer_prelu(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                     int n_in, op_tinfo *out, int n_out) {
    ir_shape b;
    CORE_TRY(op_elt_binary_infer(n, in, n_in, out, n_out, ACT2_MASK_PRELU, ANVIL_DTYPE_UNDEFINED));
    b = out[0].shape;
    const ir_shape *x = &in[0].shape, *s = &in[1].shape;
    if (x->rank >= 0 && b.rank >= 0 && (b.rank != x->rank || !op_dims_may_equal(x, &b, x->rank))) {
        char bx[128], bs[128];
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 1 (slope) has shape %s, which does not broadcast to X's "
                        "shape "
                        "%s (PRelu broadcasts the slope to X in one direction only)",
                        ir_node_label(n), ir_shape_str(g, s, bs, sizeof bs),
                        ir_shape_str(g, x, bx, sizeof bx));
    }
    out[0].shape = *x;
    return ANVIL_OK;
}

static anvil_status act2_run_prelu(const ir_node *n, const op_tensor *const *in, int n_in,
                                   op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    anvil_dtype dt = in[0]->dtype;
    op_elt_row2 fn = in[1]->dtype == dt ? op_elt_row2_for(prelu_rows, dt) : NULL;
    return op_elt_binary_run(n, in[0], in[1], out[0], fn, ctx);
}

ELT_BINARY_IMPL(prelu, OP_INPLACE_0, op_elt_check_none, act2_infer_prelu, act2_run_prelu)
