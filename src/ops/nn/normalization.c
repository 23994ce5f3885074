/* Normalizations: LayerNormalization (17), RMSNormalization (23), InstanceNormalization,
 * GroupNormalization (18 and 21), LpNormalization, MeanVarianceNormalization and LRN.
 *
 * The first four share one kernel: the input is a list of "rows" of `blk` contiguous elements;
 * each row is normalized on its own ((x - mean) / sqrt(var + eps), or x / sqrt(mean(x^2) + eps)
 * for RMS) and then scaled and shifted. They differ only in how a row and an element of it pick
 * their scale and bias element, which norm_param_index() spells out per op:
 *   - Layer / RMS: rows are prod(dims[:axis]), a row is dims[axis:]; scale and bias broadcast over
 *     the row's shape (numpy rules, right-aligned), precomputed as an index map per element.
 *   - Instance: rows are (n, c), a row is the spatial block; the scale element is c.
 *   - Group: rows are (n, g), a row is C/G channels of spatial blocks. Opset 18 has one scale per
 *     group; opset 21 changed that to one per channel.
 * Statistics are computed in double whatever stash_type says: at least as precise as asked. */
#include "ops/nn_common.h"
#include "ops/reduce_common.h"

#include <stdlib.h>
#include <string.h>

typedef enum norm_kind { NORM_LAYER, NORM_RMS, NORM_INSTANCE, NORM_GROUP } norm_kind;

typedef struct norm_params {
    norm_kind kind;
    int64_t axis, num_groups, stash;
    float eps;
} norm_params;

static anvil_status norm_check_common(ir_graph *g, ir_node *n, norm_kind kind, int since) {
    static const char *const names[] = {"LayerNormalization", "RMSNormalization",
                                        "InstanceNormalization", "GroupNormalization"};
    CORE_TRY(nn_check_since(n, names[kind], since));
    OP_PARAMS_NEW(g, norm_params, p);
    p->kind = kind;
    CORE_TRY(ir_attr_float(n, "epsilon", 1e-5f, &p->eps));
    CORE_TRY(ir_attr_int(n, "axis", -1, &p->axis));
    CORE_TRY(ir_attr_int(n, "stash_type", 1, &p->stash));
    if (!(p->eps >= 0))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'epsilon' is %g; it must be >= 0",
                        ir_node_label(n), (double)p->eps);
    if (p->stash != ANVIL_DTYPE_FLOAT32 && p->stash != ANVIL_DTYPE_FLOAT64 &&
        p->stash != ANVIL_DTYPE_BFLOAT16 && p->stash != ANVIL_DTYPE_FLOAT16)
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: attribute 'stash_type' is %lld; anvil supports 1 (float), 10 "
                        "(float16), 11 (double) and 16 (bfloat16)",
                        ir_node_label(n), (long long)p->stash);
    if (kind == NORM_GROUP) {
        if (!ir_node_attr(n, "num_groups"))
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'num_groups' is required; add it", ir_node_label(n));
        CORE_TRY(ir_attr_int(n, "num_groups", 1, &p->num_groups));
        if (p->num_groups <= 0)
            return core_err(ANVIL_ERR_INVALID_MODEL,
                            "%s: attribute 'num_groups' is %lld; it must be > 0", ir_node_label(n),
                            (long long)p->num_groups);
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status layernorm_check(ir_graph *g, ir_node *n) {
    return norm_check_common(g, n, NORM_LAYER, 17);
}
static anvil_status rmsnorm_check(ir_graph *g, ir_node *n) {
    return norm_check_common(g, n, NORM_RMS, 23);
}
static anvil_status instnorm_check(ir_graph *g, ir_node *n) {
    return norm_check_common(g, n, NORM_INSTANCE, 1);
}
static anvil_status groupnorm_check(ir_graph *g, ir_node *n) {
    return norm_check_common(g, n, NORM_GROUP, 18);
}

/* Checks that param (input `which`) broadcasts onto the normalized dims x[axis:]. */
static anvil_status norm_check_bcast(const ir_node *n, int which, const ir_shape *x, int axis,
                                     const ir_shape *s) {
    if (x->rank < 0 || s->rank < 0) return ANVIL_OK;
    int k = x->rank - axis;
    for (int i = 0; i < s->rank; i++) {
        int xd = k - s->rank + i; /* position within the normalized dims */
        int64_t sd = s->d[i];
        if (sd < 0 || sd == 1) continue;
        if (xd < 0 || (x->d[axis + xd] >= 0 && x->d[axis + xd] != sd))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (dim %d = %lld) does not broadcast onto the normalized "
                            "dims of input 0 (from axis %d); give it the shape of X[axis:]",
                            ir_node_label(n), which, i, (long long)sd, axis);
    }
    return ANVIL_OK;
}

/* Checks a per-channel (or per-group) parameter: 1-D of length want (when known). */
static anvil_status norm_check_vec(const ir_node *n, int which, const ir_shape *s, int64_t want,
                                   const char *what) {
    if (s->rank < 0) return ANVIL_OK;
    if (s->rank != 1 || (want >= 0 && s->d[0] >= 0 && s->d[0] != want))
        return core_err(ANVIL_ERR_SHAPE,
                        "%s: input %d must be 1-D with one element per %s (%lld), got rank %d "
                        "(first dim %lld)",
                        ir_node_label(n), which, what, (long long)want, s->rank,
                        (long long)(s->rank > 0 ? s->d[0] : -1));
    return ANVIL_OK;
}

static anvil_status norm_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                               op_tinfo *out, int n_out) {
    (void)g;
    const norm_params *p = n->params;
    const ir_shape *x = &in[0].shape;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    for (int i = 1; i < n_in; i++) {
        if (n->inputs[i] == IR_NONE) continue;
        CORE_TRY(red_require(n, i, in[i].dtype, RED_MASK_FLOAT));
        if (p->kind != NORM_RMS && in[i].dtype != in[0].dtype)
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: input %d is %s but input 0 is %s",
                            ir_node_label(n), i, anvil_dtype_name(in[i].dtype),
                            anvil_dtype_name(in[0].dtype));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = *x;
    for (int i = 1; i < n_out; i++) {
        out[i].dtype = (anvil_dtype)p->stash;
        ir_shape_unknown(&out[i].shape);
    }
    if (x->rank < 0) return ANVIL_OK;
    if (p->kind == NORM_LAYER || p->kind == NORM_RMS) {
        int axis;
        CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
        for (int i = 1; i < n_in; i++)
            if (n->inputs[i] != IR_NONE) CORE_TRY(norm_check_bcast(n, i, x, axis, &in[i].shape));
        for (int i = 1; i < n_out; i++) {
            out[i].shape = *x;
            for (int d = axis; d < x->rank; d++) {
                out[i].shape.d[d] = 1;
                out[i].shape.sym[d] = -1;
            }
        }
        return ANVIL_OK;
    }
    if (x->rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 must have rank >= 2 (N, C, ...), got %d",
                        ir_node_label(n), x->rank);
    int64_t c = x->d[1], want = c;
    if (p->kind == NORM_GROUP) {
        if (c >= 0 && c % p->num_groups != 0)
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: the %lld channels of input 0 do not split into num_groups = %lld "
                            "equal groups",
                            ir_node_label(n), (long long)c, (long long)p->num_groups);
        if (n->opset < 21) want = p->num_groups;
    }
    for (int i = 1; i < n_in; i++)
        CORE_TRY(norm_check_vec(n, i, &in[i].shape, want, want == c ? "channel" : "group"));
    return ANVIL_OK;
}

typedef struct norm_job {
    const norm_params *p;
    const op_tensor *x, *scale, *bias;
    op_tensor *y, *mean, *inv;
    size_t rows, blk;
    size_t channels, groups, spatial; /* Instance / Group */
    const size_t *smap, *bmap;        /* Layer / RMS: param index per row element */
    bool per_channel;                 /* Group at opset >= 21 */
} norm_job;

/* Index of the scale (or bias) element for element e of row r. */
static size_t norm_param_index(const norm_job *j, const size_t *map, size_t r, size_t e) {
    switch (j->p->kind) {
    case NORM_INSTANCE:
        return r % j->channels;
    case NORM_GROUP: {
        size_t grp = r % j->groups;
        if (!j->per_channel) return grp;
        return grp * (j->channels / j->groups) + e / j->spatial;
    }
    default:
        return map[e];
    }
}

static void norm_chunk(void *arg, size_t begin, size_t end) {
    const norm_job *j = arg;
    anvil_dtype dt = j->x->dtype;
    for (size_t r = begin; r < end; r++) {
        size_t base = r * j->blk;
        double sum = 0, sq = 0;
        for (size_t e = 0; e < j->blk; e++) {
            double v = core_load_f64(dt, j->x->data, base + e);
            sum += v;
            sq += v * v;
        }
        double mean = 0, var;
        if (j->p->kind == NORM_RMS) {
            var = sq / (double)j->blk;
        } else {
            mean = sum / (double)j->blk;
            /* second pass for the variance: E[x^2] - E[x]^2 cancels badly */
            var = 0;
            for (size_t e = 0; e < j->blk; e++) {
                double d = core_load_f64(dt, j->x->data, base + e) - mean;
                var += d * d;
            }
            var /= (double)j->blk;
        }
        double inv = 1.0 / sqrt(var + (double)j->p->eps);
        for (size_t e = 0; e < j->blk; e++) {
            double v = (core_load_f64(dt, j->x->data, base + e) - mean) * inv;
            if (j->scale)
                v *= core_load_f64(j->scale->dtype, j->scale->data,
                                   norm_param_index(j, j->smap, r, e));
            if (j->bias)
                v += core_load_f64(j->bias->dtype, j->bias->data,
                                   norm_param_index(j, j->bmap, r, e));
            core_store_f64(dt, j->y->data, base + e, v);
        }
        if (j->mean) core_store_f64(j->mean->dtype, j->mean->data, r, mean);
        if (j->inv) core_store_f64(j->inv->dtype, j->inv->data, r, inv);
    }
}

/* Builds the index map of a Layer/RMS parameter over the normalized dims x[axis:]. */
static anvil_status norm_build_map(const ir_node *n, int which, const op_tensor *x, int axis,
                                   const op_tensor *s, size_t blk, size_t **out) {
    *out = NULL;
    if (!s) return ANVIL_OK;
    int k = x->rank - axis;
    size_t stride[IR_MAX_RANK]; /* stride in s of each normalized dim (0: broadcast) */
    size_t st = 1;
    for (int d = k - 1; d >= 0; d--) stride[d] = 0;
    for (int i = s->rank - 1; i >= 0; i--) {
        int d = k - s->rank + i;
        int64_t sd = s->dims[i];
        if (sd != 1 && (d < 0 || sd != x->dims[axis + d]))
            return core_err(ANVIL_ERR_SHAPE,
                            "%s: input %d (dim %d = %lld) does not broadcast onto the normalized "
                            "dims of input 0",
                            ir_node_label(n), which, i, (long long)sd);
        if (d >= 0) stride[d] = sd == 1 ? 0 : st;
        st *= (size_t)sd;
    }
    size_t bytes;
    if (!core_mul_size(blk ? blk : 1, sizeof(size_t), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: index map size overflows", ir_node_label(n));
    size_t *map = core_alloc(bytes);
    if (!map) return ANVIL_ERR_OUT_OF_MEMORY;
    for (size_t e = 0; e < blk; e++) {
        size_t rem = e, idx = 0;
        for (int d = k - 1; d >= 0; d--) {
            size_t dim = (size_t)x->dims[axis + d];
            idx += (rem % dim) * stride[d];
            rem /= dim;
        }
        map[e] = idx;
    }
    *out = map;
    return ANVIL_OK;
}

static anvil_status norm_run(const ir_node *n, const op_tensor *const *in, int n_in,
                             op_tensor *const *out, int n_out, op_ctx *ctx) {
    const norm_params *p = n->params;
    const op_tensor *x = in[0];
    norm_job j = {0};
    j.p = p;
    j.x = x;
    j.scale = n_in > 1 ? in[1] : NULL;
    j.bias = n_in > 2 ? in[2] : NULL;
    j.y = out[0];
    j.mean = n_out > 1 ? out[1] : NULL;
    j.inv = n_out > 2 ? out[2] : NULL;
    size_t *smap = NULL, *bmap = NULL;
    if (p->kind == NORM_LAYER || p->kind == NORM_RMS) {
        int axis;
        CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
        size_t outer, len, inner;
        red_split(x, axis, &outer, &len, &inner);
        j.rows = outer;
        j.blk = len * inner;
        if (p->kind == NORM_RMS) j.inv = NULL, j.mean = NULL;
        anvil_status s = norm_build_map(n, 1, x, axis, j.scale, j.blk, &smap);
        if (s == ANVIL_OK) s = norm_build_map(n, 2, x, axis, j.bias, j.blk, &bmap);
        if (s != ANVIL_OK) {
            free(smap);
            return s;
        }
        j.smap = smap;
        j.bmap = bmap;
    } else {
        if (op_tensor_numel(x) == 0) return ANVIL_OK;
        size_t outer, len, inner;
        red_split(x, 1, &outer, &len, &inner);
        j.channels = len;
        j.spatial = inner;
        j.groups = p->kind == NORM_GROUP ? (size_t)p->num_groups : len;
        if (j.groups == 0 || len % j.groups != 0)
            return core_err(ANVIL_ERR_RUNTIME, "%s: %zu channels do not split into %zu groups",
                            ir_node_label(n), len, j.groups);
        j.per_channel = p->kind == NORM_INSTANCE || n->opset >= 21;
        j.rows = outer * j.groups;
        j.blk = (len / j.groups) * inner;
        size_t want = p->kind == NORM_GROUP && !j.per_channel ? j.groups : len;
        for (int i = 1; i < n_in && i < 3; i++)
            if (in[i] && op_tensor_numel(in[i]) != want)
                return core_err(ANVIL_ERR_SHAPE, "%s: input %d has %zu elements, expected %zu",
                                ir_node_label(n), i, op_tensor_numel(in[i]), want);
    }
    /* an empty row still gets its statistics (NaN, as the mean of nothing) */
    if (j.rows > 0)
        op_parallel_for(j.rows * j.blk >= ((size_t)1 << 15) ? ctx : NULL, j.rows, norm_chunk, &j);
    free(smap);
    free(bmap);
    return ANVIL_OK;
}

const op_impl op_impl_layernormalization = {.min_inputs = 2,
                                            .max_inputs = 3,
                                            .min_outputs = 1,
                                            .max_outputs = 3,
                                            .check = layernorm_check,
                                            .infer = norm_infer,
                                            .run = norm_run};

const op_impl op_impl_rmsnormalization = {.min_inputs = 2,
                                          .max_inputs = 2,
                                          .min_outputs = 1,
                                          .max_outputs = 1,
                                          .check = rmsnorm_check,
                                          .infer = norm_infer,
                                          .run = norm_run};

const op_impl op_impl_instancenormalization = {.min_inputs = 3,
                                               .max_inputs = 3,
                                               .min_outputs = 1,
                                               .max_outputs = 1,
                                               .check = instnorm_check,
                                               .infer = norm_infer,
                                               .run = norm_run};

const op_impl op_impl_groupnormalization = {.min_inputs = 3,
                                            .max_inputs = 3,
                                            .min_outputs = 1,
                                            .max_outputs = 1,
                                            .check = groupnorm_check,
                                            .infer = norm_infer,
                                            .run = norm_run};

/* ---- LpNormalization ------------------------------------------------------------------------ */

typedef struct lpn_params {
    int64_t axis, p;
} lpn_params;

static anvil_status lpn_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, lpn_params, p);
    CORE_TRY(ir_attr_int(n, "axis", -1, &p->axis));
    CORE_TRY(ir_attr_int(n, "p", 2, &p->p));
    if (p->p != 1 && p->p != 2)
        return core_err(ANVIL_ERR_UNSUPPORTED, "%s: attribute 'p' is %lld; only 1 and 2 exist",
                        ir_node_label(n), (long long)p->p);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status lpn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    const lpn_params *p = n->params;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    out[0] = (op_tinfo){in[0].dtype, in[0].shape, NULL};
    if (in[0].shape.rank >= 0) {
        int axis;
        CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, in[0].shape.rank, &axis));
    }
    return ANVIL_OK;
}

static anvil_status lpn_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const lpn_params *p = n->params;
    const op_tensor *x = in[0];
    anvil_dtype dt = x->dtype;
    int axis;
    CORE_TRY(op_norm_axis(n, "attribute 'axis'", p->axis, x->rank, &axis));
    size_t outer, len, inner;
    red_split(x, axis, &outer, &len, &inner);
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            size_t base = a * len * inner + b;
            double s = 0;
            for (size_t t = 0; t < len; t++) {
                double v = core_load_f64(dt, x->data, base + t * inner);
                s += p->p == 1 ? fabs(v) : v * v;
            }
            double norm = p->p == 1 ? s : sqrt(s);
            /* a zero line stays zero instead of becoming 0/0 = NaN */
            for (size_t t = 0; t < len; t++) {
                double v = core_load_f64(dt, x->data, base + t * inner);
                core_store_f64(dt, out[0]->data, base + t * inner, norm == 0 ? 0.0 : v / norm);
            }
        }
    return ANVIL_OK;
}

const op_impl op_impl_lpnormalization = {.min_inputs = 1,
                                         .max_inputs = 1,
                                         .min_outputs = 1,
                                         .max_outputs = 1,
                                         .check = lpn_check,
                                         .infer = lpn_infer,
                                         .run = lpn_run};

/* ---- MeanVarianceNormalization ----------------------------------------------------------------
 *
 * y = (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes` (default [0, 2, 3]), as the op's
 * ONNX function body defines it. Statistics accumulate per output position of the reduction,
 * walking the input once in memory order (as src/ops/math/reduce.c does). */

typedef struct mvn_params {
    const int64_t *axes;
    size_t n_axes;
} mvn_params;

static const int64_t mvn_default_axes[] = {0, 2, 3};

static anvil_status mvn_check(ir_graph *g, ir_node *n) {
    CORE_TRY(nn_check_since(n, "MeanVarianceNormalization", 9));
    OP_PARAMS_NEW(g, mvn_params, p);
    CORE_TRY(ir_attr_ints(n, "axes", &p->axes, &p->n_axes));
    if (!p->axes) {
        p->axes = mvn_default_axes;
        p->n_axes = 3;
    }
    n->params = p;
    return ANVIL_OK;
}

static anvil_status mvn_axes(const ir_node *n, int rank, bool *red) {
    const mvn_params *p = n->params;
    for (int d = 0; d < rank; d++) red[d] = false;
    for (size_t k = 0; k < p->n_axes; k++) {
        int a;
        CORE_TRY(op_norm_axis(n, "attribute 'axes'", p->axes[k], rank, &a));
        if (red[a])
            return core_err(ANVIL_ERR_INVALID_MODEL, "%s: axis %lld appears twice in 'axes'",
                            ir_node_label(n), (long long)p->axes[k]);
        red[a] = true;
    }
    return ANVIL_OK;
}

static anvil_status mvn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    out[0] = (op_tinfo){in[0].dtype, in[0].shape, NULL};
    if (in[0].shape.rank >= 0) {
        bool red[IR_MAX_RANK];
        CORE_TRY(mvn_axes(n, in[0].shape.rank, red));
    }
    return ANVIL_OK;
}

static anvil_status mvn_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const op_tensor *x = in[0];
    anvil_dtype dt = x->dtype;
    bool red[IR_MAX_RANK];
    CORE_TRY(mvn_axes(n, x->rank, red));
    size_t nx = op_tensor_numel(x);
    if (nx == 0) return ANVIL_OK;
    size_t ostride[IR_MAX_RANK], count = 1, ns = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostride[d] = red[d] ? 0 : ns;
        if (red[d])
            count *= (size_t)x->dims[d];
        else
            ns *= (size_t)x->dims[d];
    }
    size_t bytes;
    if (!core_mul_size(ns, 2 * sizeof(double), &bytes))
        return core_err(ANVIL_ERR_LIMIT, "%s: statistics size overflows", ir_node_label(n));
    double *sum = core_calloc(ns * 2, sizeof(double));
    if (!sum) return ANVIL_ERR_OUT_OF_MEMORY;
    double *sq = sum + ns;
    for (int pass = 0; pass < 2; pass++) {
        size_t idx[IR_MAX_RANK] = {0}, o = 0;
        for (size_t i = 0; i < nx; i++) {
            double v = core_load_f64(dt, x->data, i);
            if (pass == 0) {
                sum[o] += v;
                sq[o] += v * v;
            } else {
                double mean = sum[o] / (double)count;
                double var = sq[o] / (double)count - mean * mean;
                double sd = sqrt(var > 0 ? var : 0);
                core_store_f64(dt, out[0]->data, i, (v - mean) / (sd + 1e-9));
            }
            for (int d = x->rank - 1; d >= 0; d--) {
                o += ostride[d];
                if (++idx[d] < (size_t)x->dims[d]) break;
                o -= ostride[d] * idx[d];
                idx[d] = 0;
            }
        }
    }
    free(sum);
    return ANVIL_OK;
}

const op_impl op_impl_meanvariancenormalization = {.min_inputs = 1,
                                                   .max_inputs = 1,
                                                   .min_outputs = 1,
                                                   .max_outputs = 1,
                                                   .check = mvn_check,
                                                   .infer = mvn_infer,
                                                   .run = mvn_run};

/* ---- LRN ------------------------------------------------------------------------------------
 *
 * y[c] = x[c] / (bias + alpha / size * sum of x[c']^2 over c' in
 *        [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]) ^ beta, over the channel axis 1. */

typedef struct lrn_params {
    float alpha, beta, bias;
    int64_t size;
} lrn_params;

static anvil_status lrn_check(ir_graph *g, ir_node *n) {
    OP_PARAMS_NEW(g, lrn_params, p);
    CORE_TRY(ir_attr_float(n, "alpha", 1e-4f, &p->alpha));
    CORE_TRY(ir_attr_float(n, "beta", 0.75f, &p->beta));
    CORE_TRY(ir_attr_float(n, "bias", 1.0f, &p->bias));
    if (!ir_node_attr(n, "size"))
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'size' is required; add it",
                        ir_node_label(n));
    CORE_TRY(ir_attr_int(n, "size", 1, &p->size));
    if (p->size <= 0)
        return core_err(ANVIL_ERR_INVALID_MODEL, "%s: attribute 'size' is %lld; it must be > 0",
                        ir_node_label(n), (long long)p->size);
    n->params = p;
    return ANVIL_OK;
}

static anvil_status lrn_infer(const ir_graph *g, const ir_node *n, const op_tinfo *in, int n_in,
                              op_tinfo *out, int n_out) {
    (void)g;
    (void)n_in;
    (void)n_out;
    CORE_TRY(red_require(n, 0, in[0].dtype, RED_MASK_FLOAT));
    if (in[0].shape.rank >= 0 && in[0].shape.rank < 2)
        return core_err(ANVIL_ERR_SHAPE, "%s: input 0 must have rank >= 2 (N, C, ...), got %d",
                        ir_node_label(n), in[0].shape.rank);
    out[0] = (op_tinfo){in[0].dtype, in[0].shape, NULL};
    return ANVIL_OK;
}

static anvil_status lrn_run(const ir_node *n, const op_tensor *const *in, int n_in,
                            op_tensor *const *out, int n_out, op_ctx *ctx) {
    (void)n_in;
    (void)n_out;
    (void)ctx;
    const lrn_params *p = n->params;
    const op_tensor *x = in[0];
    anvil_dtype dt = x->dtype;
    size_t outer, c, inner;
    red_split(x, 1, &outer, &c, &inner);
    int64_t lo_off = (p->size - 1) / 2, hi_off = p->size - 1 - lo_off;
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++)
            for (size_t ch = 0; ch < c; ch++) {
                int64_t lo = (int64_t)ch - lo_off, hi = (int64_t)ch + hi_off;
                if (lo < 0) lo = 0;
                if (hi > (int64_t)c - 1) hi = (int64_t)c - 1;
                double s = 0;
                for (int64_t k = lo; k <= hi; k++) {
                    double v = core_load_f64(dt, x->data, (a * c + (size_t)k) * inner + b);
                    s += v * v;
                }
                size_t at = (a * c + ch) * inner + b;
                double den =
                    pow((double)p->bias + (double)p->alpha / (double)p->size * s, (double)p->beta);
                core_store_f64(dt, out[0]->data, at, core_load_f64(dt, x->data, at) / den);
            }
    return ANVIL_OK;
}

const op_impl op_impl_lrn = {.min_inputs = 1,
                             .max_inputs = 1,
                             .min_outputs = 1,
                             .max_outputs = 1,
                             .check = lrn_check,
                             .infer = lrn_infer,
                             .run = lrn_run};
