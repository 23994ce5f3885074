/* Miscellaneous recent and odd-one-out ops: BitCast, TensorScatter,
 * CausalConvWithState and TfIdfVectorizer.
 *
 * BitCast (opset 26) copies bytes: both dtypes must have the same element size,
 * so the output has the input's shape and the bytes are already in the
 * little-endian layout ONNX prescribes (anvil runs on little-endian hosts
 * only). Sub-byte and string dtypes have no byte size and are refused.
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
 * present_state is the last k-1 positions of the padded sequence.
 *
 * TfIdfVectorizer (opset 9) counts pool n-grams in each row of an integer
 * input. An n-gram of length L with skip distance d is x[s], x[s+d], ...,
 * x[s+(L-1)d]; distances run from 1 to max_skip_count + 1, except that unigrams
 * are counted once (at distance 1) since their position set does not depend on
 * d. Pool n-grams are matched by brute force against each start position: this
 * is the reference kernel, and pools are small. When the pool lists the same
 * n-gram twice the later entry wins, matching the ONNX reference's trie, whose
 * node id is overwritten. String inputs (pool_strings) are not supported: anvil
 * holds no string tensors. */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

static anvil_status misc_need_opset(const ir_node *n, const char *op, int since) {
    if (n->opset < since)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (%s): the op exists from default-domain opset %d, but the model "
                        "imports opset %d; raise the model's opset import",
                        ir_node_label(n), op, since, n->opset);
    return ANVIL_OK;
}

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

/* ---- BitCast
 * -------------------------------------------------------------------------------
 */

typedef struct bitcast_params {
    anvil_dtype to;
} bitcast_params;

static anvil_status bitcast_check(ir_graph *g, ir_node *n) {
    CORE_TRY(misc_need_opset(n, "BitCast", 26));
    int64_t to = 0;
    CORE_TRY(ir_attr_int(n, "to", -1, &to));
    if (to < 0)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (BitCast): required attribute 'to' is missing; set it to the "
                        "target TensorProto data type",
                        ir_node_label(n));
    if (to > ANVIL_DTYPE_FLOAT8E8M0 || anvil_dtype_size((anvil_dtype)to) == 0)
        return core_err(
            ANVIL_ERR_UNSUPPORTED,
            "node '%s' (BitCast): attribute 'to' = %lld (%s) is not a whole-byte numeric dtype "
            "anvil can hold; use a fixed-size type of 1, 2, 4, 8 or 16 bytes",
            ir_node_label(n), (long long)to, anvil_dtype_name((anvil_dtype)to));
    bitcast_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    p->to = (anvil_dtype)to;
    n->params = p;
    return ANVIL_OK;
}

static anvil_status bitcast_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                  op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const bitcast_params *p = n->params;
    size_t from = anvil_dtype_size(in[0].dtype), to = anvil_dtype_size(p->to);
    if (from == 0)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (BitCast): input dtype %s has no whole-byte element size; only "
                        "fixed-size numeric and bool inputs are supported",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    if (from != to)
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (BitCast): input dtype %s is %zu bytes but 'to' = %s is %zu "
                        "bytes; BitCast needs types of the same bit width",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype), from,
                        anvil_dtype_name(p->to), to);
    out[0].dtype = p->to;
    out[0].shape = in[0].shape;
    return ANVIL_OK;
}

static anvil_status bitcast_run(const ir_node *n, const op_tensor *const *in, int n_in,
                                op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n;
    (void)n_in;
    (void)n_out;
    (void)ctx;
    size_t bytes = op_tensor_numel(in[0]) * anvil_dtype_size(in[0]->dtype);
    if (bytes) memcpy(out[0]->data, in[0]->data, bytes);
    return ANVIL_OK;
}

const op_impl op_impl_bitcast = {.min_inputs = 1,
                                 .max_inputs = 1,
                                 .min_outputs = 1,
                                 .max_outputs = 1,
                                 .check = bitcast_check,
                                 .infer = bitcast_infer,
                                 .run = bitcast_run};

/* ---- TensorScatter
 * ------------------------------------------------------------------------- */

typedef struct tscat_params {
    int64_t axis;
    bool circular;
} tscat_params;

static anvil_status tscat_check(ir_graph *g, ir_node *n) {
    CORE_TRY(misc_need_opset(n, "TensorScatter", 24));
    tscat_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    const char *mode = NULL;
    CORE_TRY(ir_attr_string(n, "mode", "linear", &mode));
    if (strcmp(mode, "linear") == 0) {
        p->circular = false;
    } else if (strcmp(mode, "circular") == 0) {
        p->circular = true;
    } else {
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "node '%s' (TensorScatter): attribute 'mode' is '%s'; expected 'linear' or 'circular'",
            ir_node_label(n), mode);
    }
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

/* ---- CausalConvWithState
 * ------------------------------------------------------------------- */

typedef struct ccws_params {
    bool silu;
} ccws_params;

static anvil_status ccws_check(ir_graph *g, ir_node *n) {
    CORE_TRY(misc_need_opset(n, "CausalConvWithState", 27));
    ccws_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    const char *act = NULL;
    CORE_TRY(ir_attr_string(n, "activation", "none", &act));
    if (strcmp(act, "none") == 0) {
        p->silu = false;
    } else if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0) {
        p->silu = true;
    } else {
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (CausalConvWithState): attribute 'activation' is '%s'; expected "
                        "'none', 'silu' or 'swish'",
                        ir_node_label(n), act);
    }
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
            /* padded[t]: the past state for t < k-1, the input after that. */
            for (size_t l = 0; l < len; l++) {
                double acc = bias ? core_load_f64(dt, bias->data, c) : 0.0;
                for (size_t j = 0; j < k; j++) {
                    size_t t = l + j;
                    double v = 0.0;
                    if (t >= hist)
                        v = core_load_f64(dt, x->data, row * len + t - hist);
                    else if (past)
                        v = core_load_f64(dt, past->data, row * hist + t);
                    acc += core_load_f64(dt, w->data, c * k + j) * v;
                }
                float y = ccws_round(dt, acc);
                if (p->silu) y = y / (1.0f + expf(-y));
                core_store_f64(dt, out[0]->data, row * len + l, y);
            }
            if (!present) continue;
            for (size_t i = 0; i < hist; i++) {
                size_t t = len + i;
                double v = 0.0;
                if (t >= hist)
                    v = core_load_f64(dt, x->data, row * len + t - hist);
                else if (past)
                    v = core_load_f64(dt, past->data, row * hist + t);
                core_store_f64(dt, present->data, row * hist + i, v);
            }
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

/* ---- TfIdfVectorizer
 * ----------------------------------------------------------------------- */

enum { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF };

/* One pool n-gram that can match: its items are pool[start .. start+len). */
typedef struct tfidf_gram {
    size_t start, len;
    int64_t out; /* output column */
} tfidf_gram;

typedef struct tfidf_params {
    int mode;
    int64_t max_skip;
    const int64_t *pool;
    tfidf_gram *grams; /* the active n-grams (length within [min, max], not superseded) */
    size_t n_grams;
    int64_t out_size;
    const float *weights; /* NULL when absent; else out_size of them */
} tfidf_params;

static anvil_status tfidf_attr_err(const ir_node *n, const char *what) {
    return core_err(ANVIL_ERR_INVALID_MODEL, "node '%s' (TfIdfVectorizer): %s", ir_node_label(n),
                    what);
}

static bool tfidf_same(const int64_t *pool, const tfidf_gram *a, const tfidf_gram *b) {
    return a->len == b->len && memcmp(pool + a->start, pool + b->start, a->len * sizeof *pool) == 0;
}

static anvil_status tfidf_check(ir_graph *g, ir_node *n) {
    CORE_TRY(misc_need_opset(n, "TfIdfVectorizer", 9));
    tfidf_params *p = core_arena_alloc(g->arena, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    const char *mode = NULL;
    CORE_TRY(ir_attr_string(n, "mode", "", &mode));
    if (strcmp(mode, "TF") == 0)
        p->mode = TFIDF_TF;
    else if (strcmp(mode, "IDF") == 0)
        p->mode = TFIDF_IDF;
    else if (strcmp(mode, "TFIDF") == 0)
        p->mode = TFIDF_TFIDF;
    else
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): attribute 'mode' is '%s'; expected 'TF', "
                        "'IDF' or 'TFIDF'",
                        ir_node_label(n), mode);
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, "pool_strings") == 0)
            return core_err(
                ANVIL_ERR_UNSUPPORTED,
                "node '%s' (TfIdfVectorizer): attribute 'pool_strings' is not supported (anvil has "
                "no string tensors); map tokens to integers and use pool_int64s",
                ir_node_label(n));
    int64_t min_len = 0, max_len = 0;
    CORE_TRY(ir_attr_int(n, "min_gram_length", -1, &min_len));
    CORE_TRY(ir_attr_int(n, "max_gram_length", -1, &max_len));
    CORE_TRY(ir_attr_int(n, "max_skip_count", -1, &p->max_skip));
    if (min_len < 1 || max_len < min_len)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): min_gram_length = %lld and max_gram_length = "
                        "%lld must both be set with 1 <= min <= max",
                        ir_node_label(n), (long long)min_len, (long long)max_len);
    if (p->max_skip < 0 || p->max_skip > INT32_MAX)
        return core_err(
            ANVIL_ERR_INVALID_MODEL,
            "node '%s' (TfIdfVectorizer): max_skip_count = %lld must be set and in [0, %d]",
            ir_node_label(n), (long long)p->max_skip, INT32_MAX);
    const int64_t *counts = NULL, *indexes = NULL;
    size_t n_counts = 0, n_indexes = 0, n_pool = 0, n_weights = 0;
    CORE_TRY(ir_attr_ints(n, "pool_int64s", &p->pool, &n_pool));
    CORE_TRY(ir_attr_ints(n, "ngram_counts", &counts, &n_counts));
    CORE_TRY(ir_attr_ints(n, "ngram_indexes", &indexes, &n_indexes));
    CORE_TRY(ir_attr_floats(n, "weights", &p->weights, &n_weights));
    if (!p->pool || n_pool == 0) return tfidf_attr_err(n, "attribute 'pool_int64s' is required");
    if (!counts || n_counts == 0) return tfidf_attr_err(n, "attribute 'ngram_counts' is required");
    if (!indexes || n_indexes == 0)
        return tfidf_attr_err(n, "attribute 'ngram_indexes' is required");
    /* Count the n-grams: counts[i] is where the (i+1)-grams start in the pool. */
    size_t total = 0;
    for (size_t i = 0; i < n_counts; i++) {
        int64_t lo = counts[i], hi = i + 1 < n_counts ? counts[i + 1] : (int64_t)n_pool;
        if (lo < 0 || hi < lo || hi > (int64_t)n_pool)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "node '%s' (TfIdfVectorizer): ngram_counts must be non-decreasing "
                            "offsets into pool_int64s (%zu items); entry %zu is %lld",
                            ir_node_label(n), n_pool, i, (long long)lo);
        if ((uint64_t)(hi - lo) % (i + 1) != 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "node '%s' (TfIdfVectorizer): the %zu-grams span %lld pool items, not "
                            "a multiple of %zu",
                            ir_node_label(n), i + 1, (long long)(hi - lo), i + 1);
        total += (size_t)(hi - lo) / (i + 1);
    }
    if (n_indexes != total)
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): ngram_indexes has %zu entries but the pool "
                        "holds %zu n-grams; give one output column per n-gram",
                        ir_node_label(n), n_indexes, total);
    p->out_size = 0;
    for (size_t i = 0; i < n_indexes; i++) {
        if (indexes[i] < 0 || indexes[i] >= INT32_MAX)
            return core_err(
                ANVIL_ERR_INVALID_MODEL,
                "node '%s' (TfIdfVectorizer): ngram_indexes[%zu] = %lld is outside [0, %d)",
                ir_node_label(n), i, (long long)indexes[i], INT32_MAX);
        if (indexes[i] + 1 > p->out_size) p->out_size = indexes[i] + 1;
    }
    if (n_weights == 0) {
        p->weights = NULL;
    } else if ((int64_t)n_weights < p->out_size) {
        return core_err(ANVIL_ERR_INVALID_MODEL,
                        "node '%s' (TfIdfVectorizer): 'weights' has %zu entries but the output has "
                        "%lld columns; give one weight per column",
                        ir_node_label(n), n_weights, (long long)p->out_size);
    }
    p->grams = core_arena_array(g->arena, total, sizeof *p->grams);
    if (!p->grams) return ANVIL_ERR_OUT_OF_MEMORY;
    p->n_grams = 0;
    size_t id = 0;
    for (size_t i = 0; i < n_counts; i++) {
        size_t glen = i + 1;
        size_t lo = (size_t)counts[i], hi = i + 1 < n_counts ? (size_t)counts[i + 1] : n_pool;
        for (size_t s = lo; s + glen <= hi; s += glen, id++) {
            if ((int64_t)glen < min_len || (int64_t)glen > max_len) continue;
            tfidf_gram gr = {.start = s, .len = glen, .out = indexes[id]};
            size_t k = 0;
            while (k < p->n_grams && !tfidf_same(p->pool, &p->grams[k], &gr)) k++;
            p->grams[k] = gr; /* a later duplicate replaces the earlier entry */
            if (k == p->n_grams) p->n_grams++;
        }
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status tfidf_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                                op_tinfo *out, int n_out) {
    (void)n_in;
    (void)n_out;
    const tfidf_params *p = n->params;
    if (in[0].dtype != ANVIL_DTYPE_INT32 && in[0].dtype != ANVIL_DTYPE_INT64)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "node '%s' (TfIdfVectorizer): input X dtype %s is not supported; expected "
                        "INT32 or INT64 (string inputs are not supported)",
                        ir_node_label(n), anvil_dtype_name(in[0].dtype));
    const ir_shape *x = &in[0].shape;
    if (x->rank == 0 || x->rank > 2) {
        char buf[128];
        return core_err(ANVIL_ERR_SHAPE,
                        "node '%s' (TfIdfVectorizer): input X must be [C] or [N, C], got shape %s",
                        ir_node_label(n), ir_shape_str(g, x, buf, sizeof buf));
    }
    out[0].dtype = ANVIL_DTYPE_FLOAT32;
    out[0].shape = *x;
    if (x->rank > 0) {
        out[0].shape.d[x->rank - 1] = p->out_size;
        out[0].shape.sym[x->rank - 1] = -1;
    }
    return ANVIL_OK;
}

static anvil_status tfidf_run(const ir_node *n, const op_tensor *const *in, int n_in,
                              op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const tfidf_params *p = n->params;
    const op_tensor *x = in[0];
    size_t rows = x->rank == 2 ? (size_t)x->dims[0] : 1;
    size_t cols = (size_t)x->dims[x->rank - 1];
    size_t width = (size_t)p->out_size;
    float *y = out[0]->data;
    for (size_t r = 0; r < rows; r++) {
        float *yr = y + r * width;
        for (size_t i = 0; i < width; i++) yr[i] = 0.0f;
        for (size_t gi = 0; gi < p->n_grams; gi++) {
            const tfidf_gram *gr = &p->grams[gi];
            size_t max_d = gr->len == 1 ? 1 : (size_t)p->max_skip + 1;
            for (size_t d = 1; d <= max_d; d++) {
                size_t span = (gr->len - 1) * d; /* cols <= INT64_MAX and d <= 2^31: no wrap */
                if (span >= cols) break;
                for (size_t s = 0; s + span < cols; s++) {
                    size_t j = 0;
                    while (j < gr->len && core_load_i64(x->dtype, x->data, r * cols + s + j * d) ==
                                              p->pool[gr->start + j])
                        j++;
                    if (j == gr->len) yr[gr->out] += 1.0f;
                }
            }
        }
        for (size_t i = 0; i < width; i++) {
            float w = p->weights ? p->weights[i] : 1.0f;
            if (p->mode == TFIDF_IDF)
                yr[i] = yr[i] > 0.0f ? w : 0.0f;
            else if (p->mode == TFIDF_TFIDF)
                yr[i] *= w;
        }
    }
    return ANVIL_OK;
}

const op_impl op_impl_tfidfvectorizer = {.min_inputs = 1,
                                         .max_inputs = 1,
                                         .min_outputs = 1,
                                         .max_outputs = 1,
                                         .check = tfidf_check,
                                         .infer = tfidf_infer,
                                         .run = tfidf_run};
