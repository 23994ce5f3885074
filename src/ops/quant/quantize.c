/* Quantization ops: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (attribute
 * checking, shape inference, reference kernels). The integer products on quantized operands are in
 * matmul_conv.c.
 *
 * anvil holds the 8- and 16-bit integer quantized types (and INT32 for DequantizeLinear); the
 * float8, 4-bit and 2-bit types of the newer opsets are refused by dtype with UNSUPPORTED.
 *
 * Quantization parameters (scale and zero point) come in three granularities that all reduce to
 * one index computation: view the data as outer x D x inner around the quantization axis; the
 * parameter of element (o, a, i) is at 0 (per tensor), a (per axis) or
 * o * ceil(D / B) * inner + (a / B) * inner + i (blocked with block size B). */
#include "ops/quant/quant_common.h"

/* ---- dtypes ---------------------------------------------------------------------------------- */

static bool q_int_type(anvil_dtype dt) {
    return dt == ANVIL_DTYPE_INT8 || dt == ANVIL_DTYPE_UINT8 || dt == ANVIL_DTYPE_INT16 ||
           dt == ANVIL_DTYPE_UINT16;
}

/* ---- parameter layout ------------------------------------------------------------------------ */

typedef enum { Q_PER_TENSOR, Q_PER_AXIS, Q_BLOCKED } q_mode;

typedef struct q_layout {
    q_mode mode;
    int64_t outer, dim, inner, block, nblk;
} q_layout;

/* Works out the granularity from x's and the scale's shapes (both known) and validates the zero
 * point's shape against the scale's. axis is the raw attribute value; block 0: not blocked. */
static anvil_status q_layout_make(const ir_node *n, const ir_shape *x, const ir_shape *scale,
                                  const ir_shape *zp, int64_t axis, int64_t block, q_layout *out) {
    memset(out, 0, sizeof *out);
    char xs[128], ss[128], zs[128];
    if (zp && zp->rank >= 0 && scale->rank >= 0 && !ir_shape_equal(zp, scale)) {
        bool both_scalar = true;
        for (int d = 0; d < zp->rank; d++) both_scalar &= zp->d[d] == 1;
        for (int d = 0; d < scale->rank; d++) both_scalar &= scale->d[d] == 1;
        if (!both_scalar)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the zero point has shape %s but the scale has shape %s; they "
                            "must be equal",
                            ir_node_label(n), ir_shape_str(NULL, zp, zs, sizeof zs),
                            ir_shape_str(NULL, scale, ss, sizeof ss));
    }
    if (x->rank < 0 || scale->rank < 0) {
        out->mode = Q_PER_TENSOR;
        return ANVIL_OK;
    }
    size_t sn = 1;
    bool s_static = ir_shape_numel(scale, &sn);
    if (block == 0 && (scale->rank == 0 || (s_static && sn == 1 && scale->rank == 1))) {
        out->mode = Q_PER_TENSOR;
        return ANVIL_OK;
    }
    if (n->opset < 13)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the scale has shape %s; at opset %d only a scalar (per-tensor) scale "
                        "is allowed. Import opset >= 13 for per-axis quantization",
                        ir_node_label(n), ir_shape_str(NULL, scale, ss, sizeof ss), n->opset);
    int ax;
    if (x->rank == 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the input is a scalar but the scale has shape %s; a scalar input "
                        "needs a scalar scale",
                        ir_node_label(n), ir_shape_str(NULL, scale, ss, sizeof ss));
    CORE_TRY(op_norm_axis(n, "axis", axis, x->rank, &ax));
    out->outer = 1;
    out->inner = 1;
    for (int d = 0; d < ax; d++) out->outer *= x->d[d] < 0 ? 1 : x->d[d];
    for (int d = ax + 1; d < x->rank; d++) out->inner *= x->d[d] < 0 ? 1 : x->d[d];
    out->dim = x->d[ax];
    if (block == 0) {
        if (scale->rank != 1 || (scale->d[0] >= 0 && x->d[ax] >= 0 && scale->d[0] != x->d[ax]))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the scale has shape %s but the input %s has %lld elements along "
                            "axis %d; a per-axis scale must be 1-D with that length (or set "
                            "block_size for blocked quantization)",
                            ir_node_label(n), ir_shape_str(NULL, scale, ss, sizeof ss),
                            ir_shape_str(NULL, x, xs, sizeof xs), (long long)x->d[ax], ax);
        out->mode = Q_PER_AXIS;
        return ANVIL_OK;
    }
    bool bad = scale->rank != x->rank;
    for (int d = 0; !bad && d < x->rank; d++) {
        int64_t want = x->d[d] < 0 ? -1 : d == ax ? nn_ceil_div(x->d[d], block) : x->d[d];
        bad = want >= 0 && scale->d[d] >= 0 && scale->d[d] != want;
    }
    if (bad)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: blocked quantization with block_size %lld on axis %d of input %s "
                        "needs a scale of the input's shape with that axis divided by the block "
                        "size (rounded up), but the scale has shape %s",
                        ir_node_label(n), (long long)block, ax,
                        ir_shape_str(NULL, x, xs, sizeof xs),
                        ir_shape_str(NULL, scale, ss, sizeof ss));
    out->mode = Q_BLOCKED;
    out->block = block;
    out->nblk = x->d[ax] < 0 ? -1 : nn_ceil_div(x->d[ax], block);
    return ANVIL_OK;
}

static inline size_t q_param_index(const q_layout *l, size_t i) {
    if (l->mode == Q_PER_TENSOR) return 0;
    size_t inner = (size_t)l->inner, dim = (size_t)l->dim;
    size_t a = (i / inner) % dim;
    if (l->mode == Q_PER_AXIS) return a;
    size_t o = i / (inner * dim), r = i % inner;
    return (o * (size_t)l->nblk + a / (size_t)l->block) * inner + r;
}

static void q_tensor_shape(const op_tensor *t, ir_shape *s) {
    ir_shape_set(s, t->rank, t->dims);
}

/* ---- QuantizeLinear / DequantizeLinear: check ------------------------------------------------ */

typedef struct q_params {
    int64_t axis, block;
    anvil_dtype out_dtype; /* output_dtype attribute; UNDEFINED when absent */
    anvil_dtype precision; /* QuantizeLinear's precision attribute; UNDEFINED when absent */
} q_params;

/* Refuses attribute `name` when the node's opset predates it. */
static anvil_status q_attr_since(const ir_node *n, const char *name, int since) {
    if (n->opset < since && ir_node_attr(n, name))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' does not exist at opset %d (it arrived in opset %d); "
                        "import a newer opset or drop the attribute",
                        ir_node_label(n), name, n->opset, since);
    return ANVIL_OK;
}

static anvil_status q_dtype_attr(const ir_node *n, const char *name, anvil_dtype *out) {
    int64_t v;
    CORE_TRY(ir_attr_int(n, name, 0, &v));
    if (v < 0 || v > ANVIL_DTYPE_FLOAT8E8M0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute '%s' is %lld, which is not an ONNX TensorProto data type",
                        ir_node_label(n), name, (long long)v);
    *out = (anvil_dtype)v;
    return ANVIL_OK;
}

static anvil_status q_check(ir_graph *g, ir_node *n) {
    bool quantize = n->op == IR_OP_QUANTIZELINEAR;
    CORE_TRY(q_since(n, 10));
    OP_PARAMS_NEW(g, q_params, p);
    CORE_TRY(q_attr_since(n, "axis", 13));
    CORE_TRY(q_attr_since(n, "block_size", 21));
    CORE_TRY(q_attr_since(n, "output_dtype", quantize ? 21 : 23));
    if (quantize) {
        CORE_TRY(q_attr_since(n, "saturate", 19));
        CORE_TRY(q_attr_since(n, "precision", 23));
    } else if (ir_node_attr(n, "saturate") || ir_node_attr(n, "precision")) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: DequantizeLinear has no attribute 'saturate' or 'precision'; drop it",
                        ir_node_label(n));
    }
    CORE_TRY(ir_attr_int(n, "axis", 1, &p->axis));
    CORE_TRY(ir_attr_int(n, "block_size", 0, &p->block));
    if (p->block < 0 || p->block > NN_MAX_ATTR)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'block_size' is %lld; it must be >= 0 (0: no blocking)",
                        ir_node_label(n), (long long)p->block);
    bool sat;
    /* saturate only changes float8 results, which anvil refuses by dtype; it is validated here */
    CORE_TRY(ir_attr_flag(n, "saturate", true, &sat));
    CORE_TRY(q_dtype_attr(n, "output_dtype", &p->out_dtype));
    CORE_TRY(q_dtype_attr(n, "precision", &p->precision));
    if (p->out_dtype != ANVIL_DTYPE_UNDEFINED) {
        bool ok = quantize ? q_int_type(p->out_dtype) : q_float_type(p->out_dtype);
        CORE_TRY(q_require(n, "attribute 'output_dtype'", p->out_dtype, ok,
                           quantize ? "INT8, UINT8, INT16 or UINT16"
                                    : "FLOAT, FLOAT16, BFLOAT16 or DOUBLE"));
    }
    if (p->precision != ANVIL_DTYPE_UNDEFINED)
        CORE_TRY(q_require(n, "attribute 'precision'", p->precision, q_float_type(p->precision),
                           "FLOAT, FLOAT16, BFLOAT16 or DOUBLE"));
    n->params = p;
    return ANVIL_OK;
}

/* ---- QuantizeLinear / DequantizeLinear: inference -------------------------------------------- */

static anvil_status q_scale_dtype(const ir_node *n, anvil_dtype dt) {
    bool ok = n->opset < 19 ? dt == ANVIL_DTYPE_FLOAT32 : q_float_type(dt);
    return q_require(n, "the scale", dt, ok,
                     n->opset < 19 ? "FLOAT (before opset 19)"
                                   : "FLOAT, FLOAT16, BFLOAT16 or DOUBLE");
}

static anvil_status quantizelinear_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                         int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const q_params *p = n->params;
    bool has_zp = n_in > 2 && op_has_input(n, 2);
    CORE_TRY(q_require(n, "input x", in[0].dtype,
                       q_float_type(in[0].dtype) || in[0].dtype == ANVIL_DTYPE_INT32,
                       "FLOAT, FLOAT16, BFLOAT16, DOUBLE or INT32"));
    CORE_TRY(q_scale_dtype(n, in[1].dtype));
    CORE_TRY(q_check_scale(n, "the scale", &in[1]));
    anvil_dtype odt = ANVIL_DTYPE_UINT8;
    if (has_zp) {
        odt = in[2].dtype;
        if (p->out_dtype != ANVIL_DTYPE_UNDEFINED && p->out_dtype != odt)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'output_dtype' says %s but the zero point is %s; they "
                            "must agree (or drop one of them)",
                            ir_node_label(n), anvil_dtype_name(p->out_dtype),
                            anvil_dtype_name(odt));
    } else if (p->out_dtype != ANVIL_DTYPE_UNDEFINED) {
        odt = p->out_dtype;
    }
    CORE_TRY(q_require(n, "the output (zero point)", odt, q_int_type(odt),
                       "INT8, UINT8, INT16 or UINT16"));
    q_layout l;
    CORE_TRY(q_layout_make(n, &in[0].shape, &in[1].shape, has_zp ? &in[2].shape : NULL, p->axis,
                           p->block, &l));
    out[0].dtype = odt;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status dequantizelinear_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                           int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    const q_params *p = n->params;
    bool has_zp = n_in > 2 && op_has_input(n, 2);
    anvil_dtype xdt = in[0].dtype;
    CORE_TRY(q_require(n, "input x", xdt, q_int_type(xdt) || xdt == ANVIL_DTYPE_INT32,
                       "INT8, UINT8, INT16, UINT16 or INT32"));
    CORE_TRY(q_scale_dtype(n, in[1].dtype));
    CORE_TRY(q_check_scale(n, "the scale", &in[1]));
    if (has_zp && in[2].dtype != xdt)
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: the zero point is %s but x is %s; they must have the same dtype",
                        ir_node_label(n), anvil_dtype_name(in[2].dtype), anvil_dtype_name(xdt));
    q_layout l;
    CORE_TRY(q_layout_make(n, &in[0].shape, &in[1].shape, has_zp ? &in[2].shape : NULL, p->axis,
                           p->block, &l));
    out[0].dtype = p->out_dtype != ANVIL_DTYPE_UNDEFINED ? p->out_dtype : in[1].dtype;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

/* ---- QuantizeLinear / DequantizeLinear: kernels ---------------------------------------------- */

static anvil_status q_run_layout(const ir_node *n, const op_tensor *const *in, int n_in,
                                 q_layout *l) {
    const q_params *p = n->params;
    ir_shape xs, ss, zs;
    q_tensor_shape(in[0], &xs);
    q_tensor_shape(in[1], &ss);
    bool has_zp = q_has(in, n_in, 2);
    if (has_zp) q_tensor_shape(in[2], &zs);
    return q_layout_make(n, &xs, &ss, has_zp ? &zs : NULL, p->axis, p->block, l);
}

/* Divides in the precision the scale's dtype (or the precision attribute) asks for: double for
 * DOUBLE, float otherwise (FLOAT16/BFLOAT16 scales are exact in float). */
static anvil_status quantizelinear_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                       op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const q_params *p = n->params;
    const op_tensor *x = in[0], *sc = in[1], *zp = q_has(in, n_in, 2) ? in[2] : NULL;
    op_tensor *y = out[0];
    q_layout l;
    CORE_TRY(q_run_layout(n, in, n_in, &l));
    anvil_dtype prec = p->precision != ANVIL_DTYPE_UNDEFINED ? p->precision : sc->dtype;
    bool dbl = prec == ANVIL_DTYPE_FLOAT64;
    size_t num = op_tensor_numel(x);
    for (size_t i = 0; i < num; i++) {
        size_t k = q_param_index(&l, i);
        double s = core_load_f64(sc->dtype, sc->data, k);
        double z = zp ? (double)core_load_i64(zp->dtype, zp->data, k) : 0.0;
        double xv = core_load_f64(x->dtype, x->data, i);
        double q = dbl ? xv / s : (double)((float)xv / (float)s);
        core_store_i64(y->dtype, y->data, i, q_saturate(nearbyint(q) + z, y->dtype));
    }
    return ANVIL_OK;
}

static anvil_status dequantizelinear_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                         op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0], *sc = in[1], *zp = q_has(in, n_in, 2) ? in[2] : NULL;
    op_tensor *y = out[0];
    q_layout l;
    CORE_TRY(q_run_layout(n, in, n_in, &l));
    bool dbl = y->dtype == ANVIL_DTYPE_FLOAT64;
    size_t num = op_tensor_numel(x);
    for (size_t i = 0; i < num; i++) {
        size_t k = q_param_index(&l, i);
        int64_t d =
            core_load_i64(x->dtype, x->data, i) - (zp ? core_load_i64(zp->dtype, zp->data, k) : 0);
        double s = core_load_f64(sc->dtype, sc->data, k);
        double v = dbl ? (double)d * s : (double)((float)d * (float)s);
        core_store_f64(y->dtype, y->data, i, v);
    }
    return ANVIL_OK;
}

/* ---- DynamicQuantizeLinear ------------------------------------------------------------------- */

static anvil_status dynq_check(ir_graph *g, ir_node *n) {
    (void)g;
    CORE_TRY(q_since(n, 11));
    n->params = NULL;
    return ANVIL_OK;
}

static anvil_status dynq_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    CORE_TRY(q_require(n, "input x", in[0].dtype, in[0].dtype == ANVIL_DTYPE_FLOAT32, "FLOAT"));
    out[0].dtype = ANVIL_DTYPE_UINT8;
    out[0].shape = in[0].shape;
    if (n_out > 1) {
        out[1].dtype = ANVIL_DTYPE_FLOAT32;
        ir_shape_set(&out[1].shape, 0, NULL);
    }
    if (n_out > 2) {
        out[2].dtype = ANVIL_DTYPE_UINT8;
        ir_shape_set(&out[2].shape, 0, NULL);
    }
    return ANVIL_OK;
}

/* The range always includes 0 so that 0 is exactly representable; an all-zero input gives
 * scale 0, zero point 0 and zeros (instead of dividing by zero). */
static anvil_status dynq_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)ctx;
    const float *x = in[0]->data;
    size_t num = op_tensor_numel(in[0]);
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = 0; i < num; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    float scale = (hi - lo) / 255.0f;
    uint8_t zp = 0;
    if (scale > 0) zp = (uint8_t)q_saturate(nearbyintf(0.0f - lo / scale), ANVIL_DTYPE_UINT8);
    uint8_t *y = out[0]->data;
    for (size_t i = 0; i < num; i++)
        y[i] = scale > 0
                   ? (uint8_t)q_saturate(nearbyintf(x[i] / scale) + (double)zp, ANVIL_DTYPE_UINT8)
                   : 0;
    if (n_out > 1 && out[1]) *(float *)out[1]->data = scale;
    if (n_out > 2 && out[2]) *(uint8_t *)out[2]->data = zp;
    return ANVIL_OK;
}

/* ---- op table entries ------------------------------------------------------------------------ */

const op_impl op_impl_quantizelinear = {.min_inputs = 2,
                                        .max_inputs = 3,
                                        .min_outputs = 1,
                                        .max_outputs = 1,
                                        .check = q_check,
                                        .infer = quantizelinear_infer,
                                        .run = quantizelinear_run};

const op_impl op_impl_dequantizelinear = {.min_inputs = 2,
                                          .max_inputs = 3,
                                          .min_outputs = 1,
                                          .max_outputs = 1,
                                          .check = q_check,
                                          .infer = dequantizelinear_infer,
                                          .run = dequantizelinear_run};

const op_impl op_impl_dynamicquantizelinear = {.min_inputs = 1,
                                               .max_inputs = 1,
                                               .min_outputs = 3,
                                               .max_outputs = 3,
                                               .check = dynq_check,
                                               .infer = dynq_infer,
                                               .run = dynq_run};
