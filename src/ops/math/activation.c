/* Activations: Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Clip. All are unary and
 * elementwise, so they reuse the unary driver and dtype lists of eltwise_common.h; each op is one
 * expression. NaN inputs give NaN outputs throughout (numpy's np.maximum/np.clip semantics,
 * which the ONNX reference implementation and ONNX Runtime share): the comparisons below are
 * written so that a NaN fails them and passes through unchanged. */
#include "eltwise_common.h"

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

ELT_FLOAT_TYPES(ELT_DEF_ROW1, relu, RELU_E)
ELT_SINT_TYPES(ELT_DEF_ROW1, relu, RELU_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, leakyrelu, LEAKY_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, sigmoid, SIGMOID_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, hardsigmoid, HARDSIGMOID_E)
ELT_FLOAT_TYPES(ELT_DEF_ROW1, hardswish, HARDSWISH_E)

static const op_elt_row1 relu_rows[ELT_DTYPE_SLOTS] = {ELT_FLOAT_TYPES(ELT_ROW_ENTRY, relu, _)
                                                           ELT_SINT_TYPES(ELT_ROW_ENTRY, relu, _)};
static const op_elt_row1 leakyrelu_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, leakyrelu, _)};
static const op_elt_row1 sigmoid_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, sigmoid, _)};
static const op_elt_row1 hardsigmoid_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, hardsigmoid, _)};
static const op_elt_row1 hardswish_rows[ELT_DTYPE_SLOTS] = {
    ELT_FLOAT_TYPES(ELT_ROW_ENTRY, hardswish, _)};

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
static const op_elt_row1 clip_rows[ELT_DTYPE_SLOTS] = {ELT_NUMERIC_TYPES(ELT_ROW_ENTRY, clip, _)};

/* ---- the ops without attributes ------------------------------------------------------------ */

static const op_elt_row1 *act_rows(ir_op op, uint32_t *mask) {
    switch (op) {
    case IR_OP_RELU:
        *mask = ELT_MASK_FLOAT | ELT_MASK_SINT;
        return relu_rows;
    case IR_OP_LEAKYRELU:
        *mask = ELT_MASK_FLOAT;
        return leakyrelu_rows;
    case IR_OP_SIGMOID:
        *mask = ELT_MASK_FLOAT;
        return sigmoid_rows;
    case IR_OP_HARDSIGMOID:
        *mask = ELT_MASK_FLOAT;
        return hardsigmoid_rows;
    case IR_OP_HARDSWISH:
        *mask = ELT_MASK_FLOAT;
        return hardswish_rows;
    default:
        *mask = 0;
        return NULL;
    }
}

static anvil_status act_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    uint32_t mask;
    act_rows(n->op, &mask);
    return op_elt_unary_infer(n, in, n_in, out, n_out, mask);
}

static anvil_status act_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    uint32_t mask;
    const op_elt_row1 *rows = act_rows(n->op, &mask);
    op_elt_row1 fn = (unsigned)in[0]->dtype < ELT_DTYPE_SLOTS ? rows[in[0]->dtype] : NULL;
    return op_elt_unary_run(n, in[0], out[0], fn, n->params, ctx);
}

/* LeakyRelu and HardSigmoid keep their attributes in an op_elt_param, which is what the row
 * functions read. */
static anvil_status act_check_alpha_beta(ir_graph *g, ir_node *n, float alpha_dflt, float beta_dflt,
                                         bool has_beta) {
    op_elt_param *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    float alpha, beta = beta_dflt;
    CORE_TRY(ir_attr_float(n, "alpha", alpha_dflt, &alpha));
    if (has_beta) CORE_TRY(ir_attr_float(n, "beta", beta_dflt, &beta));
    if (!isfinite(alpha) || !isfinite(beta))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attributes alpha (%g) and beta (%g) must be finite numbers",
                        ir_node_label(n), (double)alpha, (double)beta);
    p->alpha = alpha;
    p->beta = beta;
    n->params = p;
    return ANVIL_OK;
}

static anvil_status act_check_leakyrelu(ir_graph *g, ir_node *n) {
    return act_check_alpha_beta(g, n, 0.01f, 0.0f, false);
}

static anvil_status act_check_hardsigmoid(ir_graph *g, ir_node *n) {
    return act_check_alpha_beta(g, n, 0.2f, 0.5f, true);
}

#define ACT_IMPL(op, checkfn)                                                                      \
    const op_impl op_impl_##op = {.min_inputs = 1,                                                 \
                                  .max_inputs = 1,                                                 \
                                  .min_outputs = 1,                                                \
                                  .max_outputs = 1,                                                \
                                  .flags = OP_INPLACE_0,                                           \
                                  .check = checkfn,                                                \
                                  .infer = act_infer,                                              \
                                  .run = act_run};

ACT_IMPL(relu, op_elt_check_none)
ACT_IMPL(sigmoid, op_elt_check_none)
ACT_IMPL(hardswish, op_elt_check_none)
ACT_IMPL(leakyrelu, act_check_leakyrelu)
ACT_IMPL(hardsigmoid, act_check_hardsigmoid)

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

static bool act_has_input(const ir_node *n, int i) {
    return i < n->n_inputs && n->inputs[i] != IR_NONE;
}

static anvil_status act_check_clip(ir_graph *g, ir_node *n) {
    if (n->opset >= 11) return ANVIL_OK;
    if (act_has_input(n, 1) || act_has_input(n, 2))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: opset %d takes min/max as attributes, but the node has %d inputs; "
                        "import the model with opset >= 11 to pass them as inputs",
                        ir_node_label(n), n->opset, n->n_inputs);
    act_clip_attrs *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
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
        if (!act_has_input(n, i)) continue;
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
    op_elt_row1 fn = (unsigned)dt < ELT_DTYPE_SLOTS ? clip_rows[dt] : NULL;
    return op_elt_unary_run(n, in[0], out[0], fn, &p, ctx);
}

const op_impl op_impl_clip = {.min_inputs = 1,
                              .max_inputs = 3,
                              .min_outputs = 1,
                              .max_outputs = 1,
                              .flags = OP_INPLACE_0,
                              .check = act_check_clip,
                              .infer = act_infer_clip,
                              .run = act_run_clip};
