/* Cache-update ops of recurrent and streaming models: TensorScatter and CausalConvWithState.
 *
 * TensorScatter (opset 24) is a KV-cache write: the output starts as a copy of
 * past_cache and, for every prefix index before `axis` (whose first component
 * is the batch), `update`'s rows along `axis` land at write_indices[batch] + s.
 * In circular mode the sequence position wraps modulo the cache length; in
 * linear mode a position outside the cache is a runtime error rather than a
 * silent out-of-bounds write. Only the sequence position wraps: the prefix
 * indices are always in range.
 *
 * CausalConvWithState (opset 27) is a depthwise 1-D convolution over
 * [past_state | input] (zeros when past_state is omitted) with valid padding,
 * so output position l sees padded[l .. l+k-1]. The conv result is rounded to
 * the tensor dtype before the optional SiLU, as the reference does, and
 * present_state is the last k-1 positions of the padded sequence. */
#include "ops/tensor_common.h"

#include <math.h>
#include <string.h>

static anvil_status misc_need_rank(const ir_graph *g, const ir_node *n, const char *op,
                                   const char *what, const ir_shape *s, int rank) {
    if (s->rank >= 0 && s->rank != rank) {
        char buf[128];
        return core_err(ANVIL_ERR_SHAPE, "node '%s' (%s): %s must have rank %d, got shape %s",
                        ir_node_label(n), op, what, rank, ir_shape_str(g, s, buf, sizeof buf));
    }
    return ANVIL_OK;
}

/* Known dims a and b (either may be unknown) must agree. */
static anvil_status misc_need_dim(const ir_node *n, const char *op, const char *what, int64_t a,
                                  int64_t b) {
    if (a >= 0 && b >= 0 && a != b)
        return core_err(ANVIL_ERR_SHAPE, "node '%s' (%s): %s: expected %lld, got %lld",
                        ir_node_label(n), op, what, (long long)a, (long long)b);
    return ANVIL_OK;
}

/* ---- TensorScatter --------------------------------------------------------------------------- */

typedef struct tscat_params {
    int64_t axis;
    bool circular;
} tscat_params;

static anvil_status tscat_check(ir_graph *g, ir_node *n) {
    static const char *const modes[] = {"linear", "circular", NULL};
    CORE_TRY(tensor_need_opset(n, 24));
    OP_PARAMS_NEW(g, tscat_params, p);
    int mode = 0;
    CORE_TRY(tensor_attr_choice(n, "mode", "linear", modes, ANVIL_ERR_INVALID_MODEL,
                                "'linear' or 'circular'", &mode));
    p->circular = mode == 1;
    CORE_TRY(ir_attr_int(n, "axis", -2, &p->axis));
    n->params = p;
    return ANVIL_OK;
}

/* The sequence axis in [1, rank): axis 0 is the batch, which write_indices is
 * indexed by. */
static anvil_status tscat_axis(const ir_node *n, const tscat_params *p, int rank, int *axis) {
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, rank, axis));
    if (*axis == 0)
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (TensorScatter): attribute 'axis' = %lld names the batch "
                        "dimension; the sequence axis must be 1 or later",
                        ir_node_label(n), (long long)p->axis);
    return ANVIL_OK;
}

static anvil_status tscat_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)n_out;
    const tscat_params *p = n->params;
    if (anvil_dtype_size(in[0].dtype) == 0)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (TensorScatter): past_cache dtype %s has no whole-byte element "
                        "size; only fixed-size numeric and bool caches are supported",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    if (in[1].dtype != in[0].dtype)
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (TensorScatter): update dtype %s differs from past_cache dtype "
                        "%s; cast update to the cache type",
                        ir_node_label(n), anvil_dtype_name(in[1].dtype),
                        anvil_dtype_name(in[0].dtype));
    bool has_idx = n_in > 2 && n->inputs[2] != IR_NONE;
    if (has_idx && in[2].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (TensorScatter): write_indices must be INT64, got %s",
                        ir_node_label(n), anvil_dtype_name(in[2].dtype));
    const ir_shape *c = &in[0].shape, *u = &in[1].shape;
    if (c->rank >= 0) {
        if (c->rank < 2)
            return misc_need_rank(g, n, "TensorScatter", "past_cache (rank >= 2)", c, 2);
        int axis;
        CORE_TRY(tscat_axis(n, p, c->rank, &axis));
        CORE_TRY(
            misc_need_rank(g, n, "TensorScatter", "update (the rank of past_cache)", u, c->rank));
        if (u->rank >= 0) {
            for (int i = 0; i < c->rank; i++) {
                if (i == axis) {
                    if (c->d[i] >= 0 && u->d[i] > c->d[i])
                        return core_err(ANVIL_ERR_SHAPE,
                                        "node '%s' (TensorScatter): update has %lld positions "
                                        "along axis %d but the cache holds only %lld",
                                        ir_node_label(n), (long long)u->d[i], axis,
                                        (long long)c->d[i]);
                    continue;
                }
                CORE_TRY(misc_need_dim(n, "TensorScatter",
                                       "update dim off the sequence axis must match past_cache",
                                       c->d[i], u->d[i]));
            }
        }
        if (has_idx) {
            CORE_TRY(misc_need_rank(g, n, "TensorScatter", "write_indices", &in[2].shape, 1));
            if (in[2].shape.rank == 1)
                CORE_TRY(misc_need_dim(n, "TensorScatter",
                                       "write_indices length must equal the batch size", c->d[0],
                                       in[2].shape.d[0]));
        }
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = *c;
    return ANVIL_OK;
}

static anvil_status tscat_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_out;
    (void)ctx;
    const tscat_params *p = n->params;
    const op_tensor *c = in[0], *u = in[1];
    const op_tensor *wi = n_in > 2 ? in[2] : NULL;
    int axis;
    CORE_TRY(tscat_axis(n, p, c->rank, &axis));
    size_t es = anvil_dtype_size(c->dtype);
    size_t total = op_tensor_numel(c);
    if (total) memcpy(out[0]->data, c->data, total * es);
    if (wi && (wi->rank != 1 || wi->dims[0] != c->dims[0]))
        return core_err(ANVIL_ERR_RUNTIME,
                        "node '%s' (TensorScatter): write_indices must hold one index per batch "
                        "(%lld), got %zu values",
                        ir_node_label(n), (long long)c->dims[0], op_tensor_numel(wi));
    size_t outer = 1, inner = es;
    for (int i = 0; i < axis; i++) outer *= (size_t)c->dims[i];
    for (int i = axis + 1; i < c->rank; i++) inner *= (size_t)c->dims[i];
    int64_t max_len = c->dims[axis], seq = u->dims[axis];
    if (outer == 0 || seq == 0) return ANVIL_OK;
    size_t per_batch = outer / (size_t)c->dims[0];
    const int64_t *idx = wi ? wi->data : NULL;
    char *dst = out[0]->data;
    const char *src = u->data;
    for (size_t o = 0; o < outer; o++) {
        size_t b = o / per_batch;
        int64_t w = idx ? idx[b] : 0;
        for (int64_t s = 0; s < seq; s++) {
            int64_t pos;
            if (!core_add_i64(w, s, &pos))
                return core_err(ANVIL_ERR_RUNTIME,
                                "node '%s' (TensorScatter): write index %lld + %lld overflows",
                                ir_node_label(n), (long long)w, (long long)s);
            if (p->circular) {
                pos %= max_len;
                if (pos < 0) pos += max_len;
            } else if (pos < 0 || pos >= max_len) {
                return core_err(ANVIL_ERR_RUNTIME,
                                "node '%s' (TensorScatter): batch %zu writes sequence position "
                                "%lld, outside the cache [0, %lld) in linear mode; lower "
                                "write_indices or use mode 'circular'",
                                ir_node_label(n), b, (long long)pos, (long long)max_len);
            }
            memcpy(dst + (o * (size_t)max_len + (size_t)pos) * inner,
                   src + (o * (size_t)seq + (size_t)s) * inner, inner);
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_tensorscatter = {.min_inputs = 2,
                                       .max_inputs = 3,
                                       .min_outputs = 1,
                                       .max_outputs = 1,
                                       .check = tscat_check,
                                       .infer = tscat_infer,
                                       .run = tscat_run};

/* ---- CausalConvWithState --------------------------------------------------------------------- */

typedef struct ccws_params {
    bool silu;
} ccws_params;

static anvil_status ccws_check(ir_graph *g, ir_node *n) {
    static const char *const acts[] = {"none", "silu", "swish", NULL}; /* swish is SiLU */
    CORE_TRY(tensor_need_opset(n, 27));
    OP_PARAMS_NEW(g, ccws_params, p);
    int act = 0;
    CORE_TRY(tensor_attr_choice(n, "activation", "none", acts, ANVIL_ERR_UNSUPPORTED,
                                "'none', 'silu' or 'swish'", &act));
    p->silu = act != 0;
    n->params = p;
    return ANVIL_OK;
}

static bool ccws_has(const ir_node *n, int n_in, int i) {
    return n_in > i && n->inputs[i] != IR_NONE;
}

static anvil_status ccws_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    static const char *const names[] = {"input", "weight", "bias", "past_state"};
    anvil_dtype dt = in[0].dtype;
    if (dt != ANVIL_DTYPE_FLOAT32 && dt != ANVIL_DTYPE_FLOAT16 && dt != ANVIL_DTYPE_BFLOAT16)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (CausalConvWithState): input dtype %s is not supported; "
                        "expected FLOAT, FLOAT16 or BFLOAT16",
                        ir_node_label(n), anvil_dtype_name(dt));
    for (int i = 1; i < 4; i++)
        if (ccws_has(n, n_in, i) && in[i].dtype != dt)
            return core_err(ANVIL_ERR_SHAPE,
                            "node '%s' (CausalConvWithState): %s dtype %s differs from input dtype "
                            "%s; all tensors must share one type",
                            ir_node_label(n), names[i], anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(dt));
    const ir_shape *x = &in[0].shape, *w = &in[1].shape;
    CORE_TRY(misc_need_rank(g, n, "CausalConvWithState", "input [batch, channels, length]", x, 3));
    CORE_TRY(misc_need_rank(g, n, "CausalConvWithState", "weight [channels, 1, k]", w, 3));
    int64_t b = x->rank == 3 ? x->d[0] : -1, c = x->rank == 3 ? x->d[1] : -1;
    int64_t len = x->rank == 3 ? x->d[2] : -1, k = -1;
    if (w->rank == 3) {
        CORE_TRY(misc_need_dim(n, "CausalConvWithState", "weight dim 0 (channels)", c, w->d[0]));
        CORE_TRY(misc_need_dim(n, "CausalConvWithState", "weight dim 1 (depthwise)", 1, w->d[1]));
        k = w->d[2];
        if (k == 0)
            return core_err(
                ANVIL_ERR_SHAPE,
                "node '%s' (CausalConvWithState): weight kernel size is 0; expected at least 1",
                ir_node_label(n));
    }
    if (ccws_has(n, n_in, 2)) {
        const ir_shape *bs = &in[2].shape;
        CORE_TRY(misc_need_rank(g, n, "CausalConvWithState", "bias [channels]", bs, 1));
        if (bs->rank == 1)
            CORE_TRY(
                misc_need_dim(n, "CausalConvWithState", "bias length (channels)", c, bs->d[0]));
    }
    int64_t km1 = k >= 1 ? k - 1 : -1;
    if (ccws_has(n, n_in, 3)) {
        const ir_shape *ps = &in[3].shape;
        CORE_TRY(misc_need_rank(g, n, "CausalConvWithState", "past_state [batch, channels, k-1]",
                                ps, 3));
        if (ps->rank == 3) {
            CORE_TRY(
                misc_need_dim(n, "CausalConvWithState", "past_state dim 0 (batch)", b, ps->d[0]));
            CORE_TRY(misc_need_dim(n, "CausalConvWithState", "past_state dim 1 (channels)", c,
                                   ps->d[1]));
            CORE_TRY(
                misc_need_dim(n, "CausalConvWithState", "past_state dim 2 (k-1)", km1, ps->d[2]));
        }
    }
    out[0].dtype = dt;
    out[0].shape = *x;
    if (x->rank < 0) {
        ir_shape_unknown(&out[0].shape);
        out[0].shape.rank = 3;
        for (int i = 0; i < 3; i++) {
            out[0].shape.d[i] = IR_DIM_UNKNOWN;
            out[0].shape.sym[i] = -1;
        }
    }
    (void)len;
    if (n_out > 1) {
        out[1].dtype = dt;
        out[1].shape = out[0].shape;
        out[1].shape.d[2] = km1 >= 0 ? km1 : IR_DIM_UNKNOWN;
        out[1].shape.sym[2] = -1;
    }
    return ANVIL_OK;
}

/* The value v rounded to dt, as the reference casts the conv result before the
 * activation. */
static float ccws_round(anvil_dtype dt, double v) {
    if (dt == ANVIL_DTYPE_FLOAT16) return core_f16_to_f32(core_f32_to_f16((float)v));
    if (dt == ANVIL_DTYPE_BFLOAT16) return core_bf16_to_f32(core_f32_to_bf16((float)v));
    return (float)v;
}

/* padded[t] of one (batch, channel) row: the past state for t < k-1 (zeros without one), the
 * input after that. */
static double ccws_padded(anvil_dtype dt, const op_tensor *x, const op_tensor *past, size_t row,
                          size_t len, size_t hist, size_t t) {
    if (t >= hist) return core_load_f64(dt, x->data, row * len + t - hist);
    return past ? core_load_f64(dt, past->data, row * hist + t) : 0.0;
}

static anvil_status ccws_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)ctx;
    const ccws_params *p = n->params;
    const op_tensor *x = in[0], *w = in[1];
    const op_tensor *bias = n_in > 2 ? in[2] : NULL, *past = n_in > 3 ? in[3] : NULL;
    op_tensor *present = n_out > 1 ? out[1] : NULL;
    anvil_dtype dt = x->dtype;
    size_t bn = (size_t)x->dims[0], cn = (size_t)x->dims[1], len = (size_t)x->dims[2];
    size_t k = (size_t)w->dims[2], hist = k - 1;
    for (size_t b = 0; b < bn; b++) {
        for (size_t c = 0; c < cn; c++) {
            size_t row = b * cn + c;
            for (size_t l = 0; l < len; l++) {
                double acc = bias ? core_load_f64(dt, bias->data, c) : 0.0;
                for (size_t j = 0; j < k; j++)
                    acc += core_load_f64(dt, w->data, c * k + j) *
                           ccws_padded(dt, x, past, row, len, hist, l + j);
                float y = ccws_round(dt, acc);
                if (p->silu) y = y / (1.0f + expf(-y));
                core_store_f64(dt, out[0]->data, row * len + l, y);
            }
            if (!present) continue;
            for (size_t i = 0; i < hist; i++)
                core_store_f64(dt, present->data, row * hist + i,
                               ccws_padded(dt, x, past, row, len, hist, len + i));
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_causalconvwithstate = {.min_inputs = 2,
                                             .max_inputs = 4,
                                             .min_outputs = 1,
                                             .max_outputs = 2,
                                             .check = ccws_check,
                                             .infer = ccws_infer,
                                             .run = ccws_run};
