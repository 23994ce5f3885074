/* Ops that produce a tensor from attributes alone: Constant (the whole tensor is an attribute)
 * and ConstantOfShape (one value repeated over a shape given as input). Attribute tensors point
 * into the model file, where protobuf gives no alignment, so their bytes are only ever read with
 * memcpy. */
#include "ops/tensor_common.h"

#include <stdio.h>

/* ---- Constant ---------------------------------------------------------------------------- */

typedef struct constant_params {
    ir_tensor value; /* data borrowed: the model's bytes, an arena list, or `scalar` below */
    union {
        float f;
        int64_t i;
    } scalar; /* storage for value_float / value_int */
} constant_params;

/* The attributes ONNX allows to carry Constant's value; exactly one must be present. */
static const char *const constant_value_attrs[] = {"value", "value_float", "value_floats",
                                                   "value_int", "value_ints"};

static anvil_status constant_tensor(const ir_node *n, const ir_tensor *t, constant_params *p) {
    if (!core_dtype_supported(t->dtype))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attribute 'value' has dtype %s, which anvil cannot hold; only "
                        "fixed-size numeric and bool constants are supported",
                        ir_node_label(n), anvil_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > IR_MAX_RANK)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'value' has rank %d (valid 0..%d)",
                        ir_node_label(n), t->rank, IR_MAX_RANK);
    size_t want;
    if (!core_tensor_bytes(t->dtype, t->dims, t->rank, &want) || want != t->bytes ||
        (want && !t->data))
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: attribute 'value' holds %zu bytes, which does not match its dtype "
                        "%s and dims; the model file is damaged",
                        ir_node_label(n), t->bytes, anvil_dtype_name(t->dtype));
    p->value = *t;
    return ANVIL_OK;
}

/* Constant's value from a value_float/value_int (rank 0) or value_floats/value_ints (rank 1)
 * attribute: `count` elements of dtype dt at data. */
static void constant_values(constant_params *p, anvil_dtype dt, int rank, const void *data,
                            size_t count) {
    ir_tensor *v = &p->value;
    v->dtype = dt;
    v->rank = rank;
    if (rank == 1) v->dims[0] = (int64_t)count;
    v->data = data;
    v->bytes = count * anvil_dtype_size(dt);
}

static anvil_status constant_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, constant_params, p);
    static const char *const refused[] = {"value_string", "value_strings", "sparse_value"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (ir_node_attr(n, refused[i]))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: attribute '%s' is not supported: anvil holds only dense "
                            "numeric and bool constants",
                            ir_node_label(n), refused[i]);
    const char *which = NULL;
    int count = 0;
    for (size_t i = 0; i < sizeof constant_value_attrs / sizeof *constant_value_attrs; i++)
        if (ir_node_attr(n, constant_value_attrs[i])) {
            which = constant_value_attrs[i];
            count++;
        }
    if (count != 1)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "%s: has %d of the attributes value, value_float, value_floats, value_int, "
                        "value_ints; exactly one must be given",
                        ir_node_label(n), count);
    if (!strcmp(which, "value")) {
        const ir_tensor *t;
        CORE_TRY(ir_attr_tensor(n, "value", &t));
        if (!t)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'value' holds no tensor",
                            ir_node_label(n));
        CORE_TRY(constant_tensor(n, t, p));
    } else if (!strcmp(which, "value_float")) {
        CORE_TRY(ir_attr_float(n, which, 0.0f, &p->scalar.f));
        constant_values(p, ANVIL_DTYPE_FLOAT32, 0, &p->scalar.f, 1);
    } else if (!strcmp(which, "value_int")) {
        CORE_TRY(ir_attr_int(n, which, 0, &p->scalar.i));
        constant_values(p, ANVIL_DTYPE_INT64, 0, &p->scalar.i, 1);
    } else if (!strcmp(which, "value_floats")) {
        const float *v;
        size_t cnt;
        CORE_TRY(ir_attr_floats(n, which, &v, &cnt));
        constant_values(p, ANVIL_DTYPE_FLOAT32, 1, v, cnt);
    } else {
        const int64_t *v;
        size_t cnt;
        CORE_TRY(ir_attr_ints(n, which, &v, &cnt));
        constant_values(p, ANVIL_DTYPE_INT64, 1, v, cnt);
    }
    n->params = p;
    return ANVIL_OK;
}

bool op_constant_value(const ir_node *n, ir_tensor *t) {
    const constant_params *p = n->params;
    if (n->op != IR_OP_CONSTANT || !p) return false;
    *t = p->value;
    return true;
}

static anvil_status constant_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                   int n_in, op_tinfo *out, int n_out) {
    (void)g;
    (void)in;
    (void)n_in;
    (void)n_out;
    const constant_params *p = n->params;
    out[0].dtype = p->value.dtype;
    ir_shape_set(&out[0].shape, p->value.rank, p->value.dims);
    return ANVIL_OK;
}

static anvil_status constant_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                 op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)in;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const constant_params *p = n->params;
    op_tensor *y = out[0];
    const ir_tensor *v = &p->value;
    if (y->dtype != v->dtype || op_tensor_numel(y) * anvil_dtype_size(y->dtype) != v->bytes)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer does not match the constant",
                        ir_node_label(n));
    if (v->bytes) memcpy(y->data, v->data, v->bytes);
    return ANVIL_OK;
}

const op_impl op_impl_constant = {
    .min_inputs = 0,
    .max_inputs = 0,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = constant_check,
    .infer = constant_infer,
    .run = constant_run,
};

/* ---- ConstantOfShape --------------------------------------------------------------------- */

typedef struct constantofshape_params {
    anvil_dtype dtype;
    size_t esize;
    unsigned char value[8]; /* one element, copied out of the attribute (aligned, owned) */
} constantofshape_params;

static anvil_status constantofshape_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, constantofshape_params, p);
    const ir_tensor *t;
    CORE_TRY(ir_attr_tensor(n, "value", &t));
    p->dtype = ANVIL_DTYPE_FLOAT32; /* the default: float 0 (value[] is zeroed) */
    p->esize = sizeof(float);
    if (t) {
        if (!core_dtype_supported(t->dtype))
            return core_err(ANVIL_ERR_UNSUPPORTED,
                            "%s: attribute 'value' has dtype %s, which anvil cannot hold",
                            ir_node_label(n), anvil_dtype_name(t->dtype));
        size_t cnt;
        if (!core_numel(t->dims, t->rank, &cnt) || cnt != 1)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'value' must hold exactly one element",
                            ir_node_label(n));
        p->dtype = t->dtype;
        p->esize = anvil_dtype_size(t->dtype);
        if (t->bytes != p->esize || !t->data)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'value' holds %zu bytes but one %s needs %zu",
                            ir_node_label(n), t->bytes, anvil_dtype_name(t->dtype), p->esize);
        memcpy(p->value, t->data, p->esize);
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status constantofshape_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in,
                                          int n_in, op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    const constantofshape_params *p = n->params;
    out[0].dtype = p->dtype;
    int64_t dims[IR_MAX_RANK];
    size_t k;
    bool known;
    CORE_TRY(tensor_infer_shape_list(n, 0, &in[0], dims, &k, &out[0].shape, &known));
    if (!known) return ANVIL_OK;
    ir_shape_set(&out[0].shape, (int)k, dims);
    char ys[200];
    for (size_t i = 0; i < k; i++)
        if (dims[i] < 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the shape input %s has %lld at position %zu; dims must be >= 0",
                            ir_node_label(n), ir_shape_str(g, &out[0].shape, ys, sizeof ys),
                            (long long)dims[i], i);
    size_t bytes;
    if (!core_tensor_bytes(p->dtype, dims, (int)k, &bytes) || bytes > core_max_tensor_bytes())
        return core_err(ANVIL_ERR_LIMIT,
                        "%s: an output of shape %s and dtype %s exceeds the %zu-byte limit per "
                        "tensor; check the shape input or raise ANVIL_MAX_TENSOR_BYTES",
                        ir_node_label(n), ir_shape_str(g, &out[0].shape, ys, sizeof ys),
                        anvil_dtype_name(p->dtype), core_max_tensor_bytes());
    return ANVIL_OK;
}

static anvil_status constantofshape_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                        op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const constantofshape_params *p = n->params;
    op_tensor *y = out[0];
    int64_t dims[IR_MAX_RANK];
    size_t k = 0;
    CORE_TRY(tensor_read_ints(n, 0, in[0], dims, IR_MAX_RANK, &k));
    bool ok = y->dtype == p->dtype && (int)k == y->rank;
    for (size_t i = 0; ok && i < k; i++) ok = dims[i] == y->dims[i];
    if (!ok)
        return core_err(ANVIL_ERR_INTERNAL,
                        "%s: output buffer does not have the shape the input asks for",
                        ir_node_label(n));
    size_t total = op_tensor_numel(y) * p->esize;
    if (total == 0) return ANVIL_OK;
    /* write one element, then keep doubling the filled prefix: memcpy does the bulk work */
    char *dst = y->data;
    memcpy(dst, p->value, p->esize);
    size_t filled = p->esize;
    while (filled < total) {
        size_t c = filled < total - filled ? filled : total - filled;
        memcpy(dst + filled, dst, c);
        filled += c;
    }
    return ANVIL_OK;
}

const op_impl op_impl_constantofshape = {
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 1u << 0,
    .check = constantofshape_check,
    .infer = constantofshape_infer,
    .run = constantofshape_run,
};
