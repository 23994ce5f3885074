/* anvil.QLinearAdd: the residual Add of a QDQ model on its 8-bit tensors, which fold_qdq makes of
 *   DequantizeLinear(a) + DequantizeLinear(b) -> QuantizeLinear
 * (inputs a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, as com.
 * microsoft's QLinearAdd orders them; a and b of one shape; every parameter one float32 scale or
 * one 8-bit zero point of its tensor's dtype). It computes exactly what the three nodes did, in
 * the same float operations: y = saturate(round((a - za) * sa + (b - zb) * sb) / sy) + zy), each
 * product and the sum rounded to float, the division a float division, rounding half to even.
 * One pass over 3 bytes per element where the unfused nodes moved 23 (two widenings to fp32, the
 * fp32 Add, the quantization). */
#include "ops/quant/quant_common.h"

static bool qa_8bit(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_INT8 || dt == ANVIL_DTYPE_UINT8;
}

static anvil_status qadd_check(ir_graph *g, ir_node *n) {
    (void)g;
    n->params = NULL;
    return ANVIL_OK;
}

static anvil_status qadd_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    static const char *const names[8] = {"a",       "a_scale",      "a_zero_point", "b",
                                         "b_scale", "b_zero_point", "y_scale",      "y_zero_point"};
    for (int i = 0; i < 8; i++) {
        const bool scale = i == 1 || i == 4 || i == 6;
        const anvil_dtype want = scale    ? ANVIL_DTYPE_FLOAT32
                                 : i == 2 ? in[0].dtype
                                 : i == 5 ? in[3].dtype
                                          : in[i].dtype;
        CORE_TRY(q_require(n, names[i], in[i].dtype,
                           scale ? in[i].dtype == ANVIL_DTYPE_FLOAT32
                                 : qa_8bit(in[i].dtype) && in[i].dtype == want,
                           scale ? "FLOAT" : "INT8 or UINT8 (a zero point: its tensor's dtype)"));
        size_t num;
        if ((scale || i == 2 || i == 5 || i == 7) && in[i].shape.rank >= 0 &&
            ir_shape_numel(&in[i].shape, &num) && num != 1)
            return core_err(ANVIL_ERR_UNSUPPORTED, "%s: %s must be a single value",
                            ir_node_label(n), names[i]);
        if (scale) CORE_TRY(q_check_scale(n, names[i], &in[i]));
    }
    if (!ir_shape_equal(&in[0].shape, &in[3].shape))
        return core_err(ANVIL_ERR_SHAPE, "%s: a and b must have one shape", ir_node_label(n));
    out[0].dtype = in[7].dtype;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status qadd_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const float sa = (float)core_load_f64(in[1]->dtype, in[1]->data, 0);
    const float sb = (float)core_load_f64(in[4]->dtype, in[4]->data, 0);
    const float sy = (float)core_load_f64(in[6]->dtype, in[6]->data, 0);
    const int64_t za = core_load_i64(in[2]->dtype, in[2]->data, 0);
    const int64_t zb = core_load_i64(in[5]->dtype, in[5]->data, 0);
    const double zy = (double)core_load_i64(in[7]->dtype, in[7]->data, 0);
    const size_t num = op_tensor_numel(out[0]);
    for (size_t i = 0; i < num; i++) {
        const float da = (float)(core_load_i64(in[0]->dtype, in[0]->data, i) - za) * sa;
        const float db = (float)(core_load_i64(in[3]->dtype, in[3]->data, i) - zb) * sb;
        const float q = (da + db) / sy;
        core_store_i64(out[0]->dtype, out[0]->data, i,
                       q_saturate(nearbyint(q) + zy, out[0]->dtype));
    }
    return ANVIL_OK;
}

const op_impl op_impl_qlinear_add = {.min_inputs = 8,
                                     .max_inputs = 8,
                                     .min_outputs = 1,
                                     .max_outputs = 1,
                                     .check = qadd_check,
                                     .infer = qadd_infer,
                                     .run = qadd_run};
