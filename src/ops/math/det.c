/* Det (opset 11, 22): the determinant of every square matrix held in the last two dims.
 *
 * The input is read through core_load_f64 and each determinant computed in double, so every float
 * dtype shares one kernel. */
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>

static anvil_status det_check(ir_graph *g, ir_node *n) {
    (void)g;
    if (n->opset < 11)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: Det exists from opset 11, the model imports opset %d; raise the "
                        "model's opset",
                        ir_node_label(n), n->opset);
    return ANVIL_OK;
}
static anvil_status det_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    anvil_dtype dt = in[0].dtype;
    bool bf16_ok = n->opset >= 22; /* BFLOAT16 arrived in opset 22 */
    if (dt != ANVIL_DTYPE_FLOAT16 && dt != ANVIL_DTYPE_FLOAT32 && dt != ANVIL_DTYPE_FLOAT64 &&
        !(bf16_ok && dt == ANVIL_DTYPE_BFLOAT16))
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "%s: input 0 must be FLOAT16, FLOAT32 or FLOAT64%s but is %s; cast it first",
            ir_node_label(n), bf16_ok ? " (or BFLOAT16)" : "", anvil_dtype_name(dt));
    out[0].dtype = in[0].dtype;
    ir_shape_unknown(&out[0].shape);
    const ir_shape *x = &in[0].shape;
    if (x->rank < 0) return ANVIL_OK;
    if (x->rank < 2)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input 0 must have rank >= 2 ([..., M, M]), got rank %d",
                        ir_node_label(n), x->rank);
    int64_t a = x->d[x->rank - 2], b = x->d[x->rank - 1];
    if (a >= 0 && b >= 0 && a != b)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the last two dims of input 0 must be equal (square matrices), got "
                        "%lld x %lld",
                        ir_node_label(n), (long long)a, (long long)b);
    out[0].shape = *x;
    out[0].shape.rank = x->rank - 2;
    return ANVIL_OK;
}

/* Determinant of the m x m matrix in a (row-major, overwritten) by Gaussian
 * elimination with partial pivoting: the product of the pivots, negated once
 * per row swap. */
static double det_lu(double *a, size_t m) {
    double det = 1.0;
    for (size_t c = 0; c < m; c++) {
        size_t piv = c;
        for (size_t r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0.0) return 0.0;
        if (piv != c) {
            for (size_t k = 0; k < m; k++) {
                double t = a[c * m + k];
                a[c * m + k] = a[piv * m + k];
                a[piv * m + k] = t;
            }
            det = -det;
        }
        double d = a[c * m + c];
        det *= d;
        for (size_t r = c + 1; r < m; r++) {
            double f = a[r * m + c] / d;
            for (size_t k = c + 1; k < m; k++) a[r * m + k] -= f * a[c * m + k];
        }
    }
    return det;
}

static anvil_status det_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    size_t m = (size_t)x->dims[x->rank - 1], batch = op_tensor_numel(out[0]);
    size_t mm, bytes;
    if (!core_mul_size(m, m, &mm) || !core_mul_size(mm, sizeof(double), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: matrix size overflows", ir_node_label(n));
    if (batch == 0) return ANVIL_OK;
    double *a = core_alloc(bytes ? bytes : 1);
    if (!a) return ANVIL_ERR_OUT_OF_MEMORY;
    for (size_t b = 0; b < batch; b++) {
        for (size_t i = 0; i < mm; i++) a[i] = core_load_f64(x->dtype, x->data, b * mm + i);
        core_store_f64(out[0]->dtype, out[0]->data, b, det_lu(a, m));
    }
    free(a);
    return ANVIL_OK;
}

const op_impl op_impl_det = {.min_inputs = 1,
                             .max_inputs = 1,
                             .min_outputs = 1,
                             .max_outputs = 1,
                             .check = det_check,
                             .infer = det_infer,
                             .run = det_run};
