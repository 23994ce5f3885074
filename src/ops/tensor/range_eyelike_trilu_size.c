/* Tensor ops that build a tensor from a few scalars or from another tensor's shape, without index
 * inputs: Range, Size, Trilu and EyeLike. Trilu copies bytes and Size reads only the element count,
 * so both hold any fixed-size dtype; Range computes numbers, EyeLike writes zeros and ones. */
#include "ops/tensor_common.h"

#include <math.h>

/* A scalar-like input (rank 0, or one element of rank 1 as some exporters write) of a known shape
 * must hold exactly one element. */
static anvil_status misc_check_scalar(const ir_node *n, int input, const char *what,
                                      const ir_shape *s) {
    if (s->rank < 0) return ANVIL_OK;
    if (s->rank == 0 || (s->rank == 1 && (s->d[0] == 1 || s->d[0] < 0))) return ANVIL_OK;
    return core_err(ANVIL_ERR_SHAPE, "%s: input %d (%s) must be a scalar but has rank %d",
                    ir_node_label(n), input, what, s->rank);
}

/* ---- Range --------------------------------------------------------------------------------- */

typedef struct range_params {
    int64_t stash_type; /* 1: f16/bf16 computed in float32; 0: accumulated in the type itself */
} range_params;

static anvil_status range_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 11, 0));
    OP_PARAMS_NEW(g, range_params, p);
    CORE_TRY(tensor_attr_since(n, "stash_type", 27));
    CORE_TRY(ir_attr_int(n, "stash_type", 1, &p->stash_type));
    if (p->stash_type != 0 && p->stash_type != 1)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attribute 'stash_type' is %lld; anvil supports 0 (the input type) "
                        "and 1 (float32)",
                        ir_node_label(n), (long long)p->stash_type);
    n->params = p;
    return ANVIL_OK;
}

static bool range_dtype_ok(const ir_node *n, anvil_dtype dt) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
    case ANVIL_DTYPE_FLOAT64:
    case ANVIL_DTYPE_INT16:
    case ANVIL_DTYPE_INT32:
    case ANVIL_DTYPE_INT64:
        return true;
    case ANVIL_DTYPE_FLOAT16:
    case ANVIL_DTYPE_BFLOAT16:
        return n->opset >= 27;
    default:
        return false;
    }
}

/* Number of elements max(ceil((limit - start) / delta), 0), exactly for integer types. */
static anvil_status range_count(const ir_node *n, anvil_dtype dt, const void *s, const void *l,
                                const void *d, int64_t *count) {
    if (core_dtype_is_int(dt)) {
        int64_t a = core_load_i64(dt, s, 0), b = core_load_i64(dt, l, 0);
        int64_t c = core_load_i64(dt, d, 0);
        if (c == 0)
            return core_err(ANVIL_ERR_SHAPE, "%s: delta is 0; Range needs a non-zero step",
                            ir_node_label(n));
        /* int16/int32 differences fit int64; for int64 operands overflow is refused */
        int64_t diff;
        if (__builtin_sub_overflow(b, a, &diff))
            return core_err(ANVIL_ERR_LIMIT, "%s: limit - start overflows int64", ir_node_label(n));
        if ((diff > 0) != (c > 0) || diff == 0) {
            *count = 0;
            return ANVIL_OK;
        }
        int64_t q = diff / c, r = diff % c;
        *count = q + (r != 0);
        return ANVIL_OK;
    }
    double a = core_load_f64(dt, s, 0), b = core_load_f64(dt, l, 0), c = core_load_f64(dt, d, 0);
    if (c == 0 || isnan(a) || isnan(b) || isnan(c) || isinf(a) || isinf(b) || isinf(c))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: start %g, limit %g, delta %g do not give a finite element count; "
                        "delta must be non-zero and all three finite",
                        ir_node_label(n), a, b, c);
    /* float32 operands: the difference is formed in float32 first, as ONNX Runtime does, so
     * element counts agree at the rounding boundary */
    double diff = dt == ANVIL_DTYPE_FLOAT32 ? (double)((float)b - (float)a) : b - a;
    double k = ceil(diff / c);
    if (k <= 0) {
        *count = 0;
        return ANVIL_OK;
    }
    if (k > (double)(INT64_MAX / 16))
        return core_err(ANVIL_ERR_LIMIT, "%s: Range would have %g elements", ir_node_label(n), k);
    *count = (int64_t)k;
    return ANVIL_OK;
}

static anvil_status range_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    static const char *const names[3] = {"start", "limit", "delta"};
    anvil_dtype dt = in[0].dtype;
    for (int i = 0; i < 3; i++) {
        if (in[i].dtype != dt)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (%s) is %s but start is %s; all three "
                            "must have the same dtype",
                            ir_node_label(n), i, names[i], anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(dt));
        CORE_TRY(misc_check_scalar(n, i, names[i], &in[i].shape));
    }
    if (!range_dtype_ok(n, dt))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: dtype %s is not supported by Range at opset %d (float, double, "
                        "int16, int32, int64; float16 and bfloat16 from opset 27)",
                        ir_node_label(n), anvil_dtype_name(dt), n->opset);
    out[0].dtype = dt;
    tensor_shape_unknown_dims(&out[0].shape, 1);
    if (!in[0].value || !in[1].value || !in[2].value) return ANVIL_OK;
    CORE_TRY(range_count(n, dt, in[0].value, in[1].value, in[2].value, &out[0].shape.d[0]));
    return ANVIL_OK;
}

static anvil_status range_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const range_params *p = n->params;
    anvil_dtype dt = in[0]->dtype;
    op_tensor *y = out[0];
    int64_t cnt;
    CORE_TRY(range_count(n, dt, in[0]->data, in[1]->data, in[2]->data, &cnt));
    if (y->rank != 1 || y->dims[0] != cnt)
        return core_err(ANVIL_ERR_INTERNAL, "%s: output buffer has the wrong length",
                        ir_node_label(n));
    if (core_dtype_is_int(dt)) {
        int64_t a = core_load_i64(dt, in[0]->data, 0), c = core_load_i64(dt, in[2]->data, 0);
        /* every value lies between start and limit; unsigned arithmetic keeps the intermediate
         * product defined even where i * delta alone would leave the int64 range */
        for (int64_t i = 0; i < cnt; i++)
            core_store_i64(dt, y->data, (size_t)i,
                           (int64_t)((uint64_t)a + (uint64_t)i * (uint64_t)c));
    } else if (dt == ANVIL_DTYPE_FLOAT64) {
        double a = core_load_f64(dt, in[0]->data, 0), c = core_load_f64(dt, in[2]->data, 0);
        for (int64_t i = 0; i < cnt; i++) ((double *)y->data)[i] = a + (double)i * c;
    } else if (dt == ANVIL_DTYPE_FLOAT32 || p->stash_type == 1) {
        float a = (float)core_load_f64(dt, in[0]->data, 0);
        float c = (float)core_load_f64(dt, in[2]->data, 0);
        for (int64_t i = 0; i < cnt; i++) core_store_f64(dt, y->data, (size_t)i, a + (float)i * c);
    } else {
        /* stash_type 0: successive additions rounded to the 16-bit type after each step */
        double c = core_load_f64(dt, in[2]->data, 0);
        double v = core_load_f64(dt, in[0]->data, 0);
        for (int64_t i = 0; i < cnt; i++) {
            core_store_f64(dt, y->data, (size_t)i, v);
            v = core_load_f64(dt, y->data, (size_t)i) + c;
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_range = {
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .value_inputs = 7u,
    .check = range_check,
    .infer = range_infer,
    .run = range_run,
};

/* ---- Size ---------------------------------------------------------------------------------- */

static anvil_status size_check(ir_graph *g, ir_node *n) {
    (void)g;
    (void)n;
    return ANVIL_OK;
}

static anvil_status size_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    out[0].dtype = ANVIL_DTYPE_INT64;
    ir_shape_set(&out[0].shape, 0, NULL);
    return ANVIL_OK;
}

static anvil_status size_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    int64_t v = (int64_t)op_tensor_numel(in[0]);
    memcpy(out[0]->data, &v, sizeof v);
    return ANVIL_OK;
}

const op_impl op_impl_size = {
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = size_check,
    .infer = size_infer,
    .run = size_run,
};

/* ---- Trilu --------------------------------------------------------------------------------- */

typedef struct trilu_params {
    bool upper;
} trilu_params;

static anvil_status trilu_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 14, 0));
    OP_PARAMS_NEW(g, trilu_params, p);
    CORE_TRY(ir_attr_flag(n, "upper", true, &p->upper));
    n->params = p;
    return ANVIL_OK;
}

static anvil_status trilu_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)g;
    (void)n_out;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    if (in[0].shape.rank >= 0 && in[0].shape.rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 has rank %d; Trilu needs rank >= 2",
                        ir_node_label(n), in[0].shape.rank);
    if (n_in > 1 && op_has_input(n, 1)) {
        CORE_TRY(tensor_check_index_dtype(n, 1, "k", in[1].dtype, false));
        CORE_TRY(misc_check_scalar(n, 1, "k", &in[1].shape));
    }
    out[0] = in[0];
    out[0].value = NULL;
    return ANVIL_OK;
}

static anvil_status trilu_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const trilu_params *p = n->params;
    const op_tensor *x = in[0];
    int64_t k = 0;
    if (n_in > 1 && in[1]) {
        if (op_tensor_numel(in[1]) != 1)
            return core_err(ANVIL_ERR_RUNTIME, "%s: input 1 (k) must hold one value",
                            ir_node_label(n));
        k = core_load_i64(in[1]->dtype, in[1]->data, 0);
    }
    size_t es = anvil_dtype_size(x->dtype);
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    size_t mats = tensor_dims_prod(x->dims, 0, x->rank - 2);
    const char *src = x->data;
    char *dst = out[0]->data;
    for (size_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            size_t base = ((size_t)m * (size_t)rows + (size_t)i) * (size_t)cols * es;
            for (int64_t j = 0; j < cols; j++) {
                /* j - i is small (both index the same matrix), so the compare cannot overflow */
                bool keep = p->upper ? j - i >= k : j - i <= k;
                size_t off = base + (size_t)j * es;
                if (keep)
                    core_elem_copy(dst + off, src + off, es);
                else
                    memset(dst + off, 0, es);
            }
        }
    return ANVIL_OK;
}

const op_impl op_impl_trilu = {
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .flags = OP_INPLACE_0,
    .check = trilu_check,
    .infer = trilu_infer,
    .run = trilu_run,
};

/* ---- EyeLike ------------------------------------------------------------------------------- */

typedef struct eyelike_params {
    int64_t dtype; /* -1: same as the input */
    int64_t k;
} eyelike_params;

static anvil_status eyelike_check(ir_graph *g, ir_node *n) {
    CORE_TRY(tensor_check_opset(n, 9, 0));
    OP_PARAMS_NEW(g, eyelike_params, p);
    CORE_TRY(ir_attr_int(n, "dtype", -1, &p->dtype));
    CORE_TRY(ir_attr_int(n, "k", 0, &p->k));
    if (p->dtype != -1 &&
        (p->dtype <= 0 || p->dtype > 64 || !core_dtype_supported((anvil_dtype)p->dtype)))
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attribute 'dtype' is %lld, not a fixed-size numeric or bool dtype "
                        "anvil supports",
                        ir_node_label(n), (long long)p->dtype);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status eyelike_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const eyelike_params *p = n->params;
    CORE_TRY(tensor_check_dtype(n, 0, in[0].dtype));
    if (in[0].shape.rank >= 0 && in[0].shape.rank != 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 has rank %d; EyeLike needs rank 2",
                        ir_node_label(n), in[0].shape.rank);
    out[0].dtype = p->dtype < 0 ? in[0].dtype : (anvil_dtype)p->dtype;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status eyelike_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)in;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const eyelike_params *p = n->params;
    op_tensor *y = out[0];
    size_t es = anvil_dtype_size(y->dtype);
    size_t cnt = op_tensor_numel(y);
    if (cnt == 0) return ANVIL_OK;
    memset(y->data, 0, cnt * es);
    int64_t rows = y->dims[0], cols = y->dims[1];
    for (int64_t i = 0; i < rows; i++) {
        int64_t j;
        if (!core_add_i64(i, p->k, &j) || j < 0 || j >= cols) continue;
        core_store_f64(y->dtype, y->data, (size_t)(i * cols + j), 1.0);
    }
    return ANVIL_OK;
}

const op_impl op_impl_eyelike = {
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .check = eyelike_check,
    .infer = eyelike_infer,
    .run = eyelike_run,
};
