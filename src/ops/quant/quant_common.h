/* Private helpers shared by the quantization ops (quantize.c: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear; matmul_conv.c: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv):
 * dtype checks, saturation to an integer type and the opset check. Everything is static inline so
 * each file takes only what it uses. */
#ifndef ANVIL_OPS_QUANT_COMMON_H
#define ANVIL_OPS_QUANT_COMMON_H

#include "ops/nn_common.h"

#include <limits.h>

static inline bool q_float_type(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_BFLOAT16 ||
           dt == ANVIL_DTYPE_FLOAT64;
}

/* The narrow types ONNX defines for quantization that anvil cannot hold. */
static inline bool q_refused_type(anvil_dtype dt) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT8E4M3FN:
    case ANVIL_DTYPE_FLOAT8E4M3FNUZ:
    case ANVIL_DTYPE_FLOAT8E5M2:
    case ANVIL_DTYPE_FLOAT8E5M2FNUZ:
    case ANVIL_DTYPE_UINT4:
    case ANVIL_DTYPE_INT4:
    case ANVIL_DTYPE_FLOAT4E2M1:
    case ANVIL_DTYPE_FLOAT8E8M0:
        return true;
    default:
        return false;
    }
}

static inline void q_range(anvil_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case ANVIL_DTYPE_INT8:
        *lo = INT8_MIN;
        *hi = INT8_MAX;
        break;
    case ANVIL_DTYPE_UINT8:
        *lo = 0;
        *hi = UINT8_MAX;
        break;
    case ANVIL_DTYPE_INT16:
        *lo = INT16_MIN;
        *hi = INT16_MAX;
        break;
    case ANVIL_DTYPE_UINT16:
        *lo = 0;
        *hi = UINT16_MAX;
        break;
    default:
        *lo = INT32_MIN;
        *hi = INT32_MAX;
        break;
    }
}

static inline anvil_status q_require(const ir_node *n, const char *what, anvil_dtype dt, bool ok,
                                     const char *accepted) {
    if (ok) return ANVIL_OK;
    if (q_refused_type(dt))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: %s has dtype %s, which anvil cannot hold (float8, 4-bit and 2-bit "
                        "types are not supported); use %s",
                        ir_node_label(n), what, anvil_dtype_name(dt), accepted);
    return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s has dtype %s; %s takes %s", ir_node_label(n),
                    what, anvil_dtype_name(dt), ir_op_name(n->op), accepted);
}

/* Rounds half to even (the default floating-point environment's rounding) and clamps into the
 * range of dt; NaN becomes 0. */
static inline int64_t q_saturate(double v, anvil_dtype dt) {
    double lo, hi;
    q_range(dt, &lo, &hi);
    if (v != v) return 0;
    v = nearbyint(v);
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return (int64_t)v;
}

/* Refuses a constant scale (t->value known at load) with an element that is zero, negative, NaN
 * or infinite: dividing by it (QuantizeLinear) or multiplying by it makes every output of the
 * tensor meaningless, which a quantizer's failed calibration is the usual cause of. A scale
 * computed while the model runs (DynamicQuantizeLinear's) is not checked. */
static inline anvil_status q_check_scale(const ir_node *n, const char *what, const op_tinfo *t) {
    size_t num;
    if (!t->value || !q_float_type(t->dtype) || t->shape.rank < 0 ||
        !ir_shape_numel(&t->shape, &num))
        return ANVIL_OK;
    for (size_t i = 0; i < num; i++) {
        const double s = core_load_f64(t->dtype, t->value, i);
        if (!(s > 0.0) || s != s || s == INFINITY)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: %s[%zu] is %g; a quantization scale must be a positive finite "
                            "number (re-quantize the model: a zero scale usually comes from a "
                            "calibration that saw a constant tensor)",
                            ir_node_label(n), what, i, s);
    }
    return ANVIL_OK;
}

/* Refuses a node whose opset predates the op (the op does not exist there). */
static inline anvil_status q_since(const ir_node *n, int since) {
    if (n->opset < since)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: %s does not exist at opset %d (it arrived in opset %d); import "
                        "opset >= %d",
                        ir_node_label(n), ir_op_name(n->op), n->opset, since, since);
    return ANVIL_OK;
}

static inline bool q_has(const op_tensor *const *in, int n_in, int i) {
    return i < n_in && in[i] != NULL;
}

#endif
