/* Private helpers shared by the signal ops (dft_stft.c: DFT, STFT; window_mel.c: the Hann,
 * Hamming and Blackman windows, MelWeightMatrix): float dtype checks and the scalar integer inputs
 * (lengths, sizes, axes) that shape inference and the kernels read. Everything is static inline so
 * each file takes only what it uses. */
#ifndef ANVIL_OPS_SIGNAL_COMMON_H
#define ANVIL_OPS_SIGNAL_COMMON_H

#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIG_PI 3.14159265358979323846

/* UNSUPPORTED unless the node's opset has the op; `what` names the op with its verb ("DFT exists",
 * "the window functions exist"). */
static inline anvil_status sig_need_opset(const ir_node *n, const char *what, int since) {
    if (n->opset >= since) return ANVIL_OK;
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: %s from opset %d, the model imports opset %d; raise the model's opset",
                    ir_node_label(n), what, since, n->opset);
}
static inline bool sig_is_float(anvil_dtype dt, bool bf16_ok) {
    return dt == ANVIL_DTYPE_FLOAT16 || dt == ANVIL_DTYPE_FLOAT32 || dt == ANVIL_DTYPE_FLOAT64 ||
           (bf16_ok && dt == ANVIL_DTYPE_BFLOAT16);
}

static inline anvil_status sig_require_float(const ir_node *n, int input, anvil_dtype dt,
                                             bool bf16_ok) {
    if (sig_is_float(dt, bf16_ok)) return ANVIL_OK;
    return core_err(ANVIL_ERR_INVALID_MODEL,
                    "%s: input %d must be FLOAT16, FLOAT32 or FLOAT64%s but is "
                    "%s; cast it first",
                    ir_node_label(n), input, bf16_ok ? " (or BFLOAT16)" : "", anvil_dtype_name(dt));
}

/* Reads the single integer of a scalar (or one-element) INT32/INT64 input that
 * shape inference needs. *known is false when the value is not available yet.
 */
static inline anvil_status sig_scalar_int(const ir_node *n, int input, const char *what,
                                          const op_tinfo *t, int64_t *v, bool *known) {
    *known = false;
    if (t->dtype != ANVIL_DTYPE_INT32 && t->dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: input %d (%s) must be INT32 or INT64 but is %s", ir_node_label(n),
                        input, what, anvil_dtype_name(t->dtype));
    if (t->shape.rank > 1)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input %d (%s) must be a scalar or a one-element 1-D "
                        "tensor, rank is %d",
                        ir_node_label(n), input, what, t->shape.rank);
    if (!t->value) return ANVIL_OK;
    size_t count = 0;
    CORE_TRY(op_value_ints(n, input, t, v, 1, &count));
    if (count != 1)
        return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) must hold one value, it has %zu",
                        ir_node_label(n), input, what, count);
    *known = true;
    return ANVIL_OK;
}

/* The scalar of a runtime tensor as int64 (dtype and size were validated by
 * infer). */
static inline anvil_status sig_tensor_int(const ir_node *n, int input, const char *what,
                                          const op_tensor *t, int64_t *v) {
    if (!t || op_tensor_numel(t) != 1 || !core_dtype_is_int(t->dtype))
        return core_err(ANVIL_ERR_RUNTIME, "%s: input %d (%s) must be one integer",
                        ir_node_label(n), input, what);
    *v = core_load_i64(t->dtype, t->data, 0);
    return ANVIL_OK;
}

#endif
